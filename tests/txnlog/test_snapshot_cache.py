"""The process-wide snapshot cache: a fresh ``Table(uri)`` catches up instead of replaying, and
is still exactly what an uncached open returns — under commits from another process, after log
cleanup and newer checkpoints, for time travel, for a table created again at the same path, on
local disk, memory:// and S3 — and raises the same typed errors.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import threading
from pathlib import Path

import orjson
import pyarrow as pa
import pytest
from threads import run_threads
from deltalake import DeltaTable, write_deltalake

import deltatx
from deltatx.errors import CorruptLogError, TableNotFoundError, UnsupportedFeatureError
from deltatx.txnlog.snapshot import load_snapshot
from deltatx.txnlog.snapshot_cache import SNAPSHOTS, SnapshotCache, cache_key
from deltatx.txnlog.store import LocalLogStore, commit_name, open_store

SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.float64())])
CHILD_TIMEOUT_S = 120


def row(i: int) -> pa.Table:
    return pa.table({"id": pa.array([i], pa.int64()), "value": pa.array([float(i)])}, schema=SCHEMA)


def ids(table: deltatx.Table) -> list[int]:
    return sorted(table.to_arrow().column("id").to_pylist())


def deltalake_ids(uri: str, storage_options: dict | None = None) -> list[int]:
    return sorted(DeltaTable(uri, storage_options=storage_options).to_pyarrow_table().column("id").to_pylist())


def same_state(a, b) -> None:
    """Two snapshots of one version hold the same state (file order aside)."""
    assert a.version == b.version
    assert a.protocol == b.protocol and a.metadata == b.metadata
    assert sorted(a.files.column("path").to_pylist()) == sorted(b.files.column("path").to_pylist())
    assert a.app_txns == b.app_txns and a.domains == b.domains


def _log(uri: str) -> Path:
    return Path(uri) / "_delta_log"


def _data_files(uri: str) -> set[str]:
    root = Path(uri)
    return {str(p.relative_to(root)) for p in root.rglob("*.parquet") if "_delta_log" not in p.parts}


# --------------------------------------------------------------------------------------------
# Another process commits
# --------------------------------------------------------------------------------------------


def _ping_pong_child(uri: str, barrier, rounds: int) -> None:
    """Commit one row per round with a fresh handle, between two waits on the parent."""
    for r in range(rounds):
        barrier.wait(CHILD_TIMEOUT_S)  # the parent's commit of this round is done
        deltatx.Table(uri).append(row(1000 + r))
        barrier.wait(CHILD_TIMEOUT_S)  # ours is done


def _racing_child(uri: str, barrier, n: int, base: int) -> None:
    barrier.wait(CHILD_TIMEOUT_S)
    for i in range(n):
        deltatx.Table(uri).append(row(base + i))


def _spawn(target, *args):
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    proc = ctx.Process(target=target, args=(args[0], barrier, *args[1:]), daemon=True)
    proc.start()
    return proc, barrier


def test_fresh_open_sees_every_commit_of_another_process(table_uri, monkeypatch):
    deltatx.create_table(table_uri, SCHEMA)
    deltatx.Table(table_uri).append(row(0))  # cached at version 1
    rounds = 5
    child, barrier = _spawn(_ping_pong_child, table_uri, rounds)
    listings = []
    real_list_log = LocalLogStore.list_log

    def counted(self, start=0, extra=False):
        if not extra:  # the listing metadata cleanup makes after a checkpoint is not the cache's
            listings.append(start)
        return real_list_log(self, start, extra=extra)

    monkeypatch.setattr(LocalLogStore, "list_log", counted)
    hits = SNAPSHOTS.stats["hits"]
    try:
        expected = [0]
        for r in range(rounds):
            mine = deltatx.Table(table_uri).append(row(r + 1))
            expected.append(r + 1)
            assert mine.version == 2 * r + 2
            barrier.wait(CHILD_TIMEOUT_S)
            barrier.wait(CHILD_TIMEOUT_S)  # the child committed version 2r+3 meanwhile
            expected.append(1000 + r)
            fresh = deltatx.Table(table_uri)
            assert fresh.version == 2 * r + 3  # the cached version was only a starting point
            assert ids(fresh) == sorted(expected)
    finally:
        child.join(CHILD_TIMEOUT_S)
    assert child.exitcode == 0
    assert SNAPSHOTS.stats["hits"] - hits == 2 * rounds  # every open was a catch-up ...
    assert listings == []  # ... by name: the log was never listed
    uncached = load_snapshot(open_store(table_uri))
    same_state(deltatx.Table(table_uri).snapshot, uncached)
    assert deltalake_ids(table_uri) == sorted(expected)  # another engine reads the same rows


def test_racing_fresh_handles_in_two_processes_lose_nothing(table_uri):
    deltatx.create_table(table_uri, SCHEMA)
    deltatx.Table(table_uri)
    n = 25
    child, barrier = _spawn(_racing_child, table_uri, n, 10_000)
    barrier.wait(CHILD_TIMEOUT_S)
    try:
        for i in range(n):
            deltatx.Table(table_uri).append(row(i))
    finally:
        child.join(CHILD_TIMEOUT_S)
    assert child.exitcode == 0
    table = deltatx.Table(table_uri)
    expected = sorted(list(range(n)) + [10_000 + i for i in range(n)])
    assert table.version == 2 * n
    assert ids(table) == expected
    same_state(table.snapshot, load_snapshot(open_store(table_uri)))
    assert deltalake_ids(table_uri) == expected


def test_commits_by_deltalake_are_caught_up(table_uri):
    deltatx.create_table(table_uri, SCHEMA)
    deltatx.Table(table_uri).append(row(1))
    write_deltalake(table_uri, row(2), mode="append")
    write_deltalake(table_uri, row(3), mode="append")
    table = deltatx.Table(table_uri)
    assert table.version == 3 and ids(table) == [1, 2, 3]
    table.append(row(4))
    assert deltalake_ids(table_uri) == [1, 2, 3, 4]


def test_threads_share_the_cache(any_uri):
    deltatx.create_table(any_uri, SCHEMA)
    threads, n = 4, 8
    start = threading.Barrier(threads)

    def work(t: int) -> None:
        start.wait()
        for i in range(n):
            deltatx.Table(any_uri).append(row(t * 100 + i))

    assert run_threads(work, threads) == []
    table = deltatx.Table(any_uri)
    assert table.version == threads * n
    assert ids(table) == sorted(t * 100 + i for t in range(threads) for i in range(n))


# --------------------------------------------------------------------------------------------
# Time travel, cleanup, newer checkpoints, a table created again
# --------------------------------------------------------------------------------------------


def test_time_travel_never_serves_the_cached_version(table_uri):
    deltatx.create_table(table_uri, SCHEMA)
    for i in range(5):
        deltatx.Table(table_uri).append(row(i))
    store = open_store(table_uri)
    assert SNAPSHOTS.cached_version(store) == 5
    old = deltatx.Table(table_uri, version=2)
    assert old.version == 2 and ids(old) == [0, 1]
    at_ts = deltatx.Table(table_uri, timestamp=old.history()[-3]["timestamp"])  # version 2's commit
    assert at_ts.version == 2
    assert SNAPSHOTS.cached_version(store) == 5  # pinned opens neither read nor replace it
    assert deltatx.Table(table_uri).version == 5


def _private_cache_at(uri: str, version: int) -> tuple[SnapshotCache, LocalLogStore]:
    """A cache of its own holding ``version``: later commits through deltatx.Table do not reach it,
    as when another process commits."""
    cache = SnapshotCache()
    store = open_store(uri)
    assert cache.latest(store).version == version
    return cache, store


def test_a_newer_checkpoint_with_all_commits_is_caught_up(table_uri):
    deltatx.create_table(table_uri, SCHEMA, properties={"delta.checkpointInterval": "3"})
    cache, store = _private_cache_at(table_uri, 0)
    for i in range(7):
        deltatx.Table(table_uri).append(row(i))
    assert (_log(table_uri) / "00000000000000000006.checkpoint.parquet").exists()
    same_state(cache.latest(store), load_snapshot(store))
    assert cache.stats == {"hits": 1, "loads": 1, "fallbacks": 0}


def test_log_cleanup_of_the_cached_version_falls_back_to_load(table_uri):
    deltatx.create_table(table_uri, SCHEMA, properties={"delta.checkpointInterval": "3"})
    deltatx.Table(table_uri).append(row(0))
    cache, store = _private_cache_at(table_uri, 1)
    for i in range(1, 7):
        deltatx.Table(table_uri).append(row(i))
    for v in range(0, 6):  # what log cleanup after the checkpoint at 6 removes
        (_log(table_uri) / commit_name(v)).unlink()
    snapshot = cache.latest(store)
    assert snapshot.version == 7 and cache.stats["fallbacks"] == 1
    same_state(snapshot, load_snapshot(store))


def test_commits_after_the_cached_version_cleaned_up_out_of_order_fall_back(table_uri):
    """Commit v survives but v+1.. are gone: catching up stops below _last_checkpoint."""
    deltatx.create_table(table_uri, SCHEMA, properties={"delta.checkpointInterval": "3"})
    deltatx.Table(table_uri).append(row(0))
    cache, store = _private_cache_at(table_uri, 1)
    for i in range(1, 7):
        deltatx.Table(table_uri).append(row(i))
    for v in range(2, 6):
        (_log(table_uri) / commit_name(v)).unlink()
    snapshot = cache.latest(store)
    assert snapshot.version == 7 and cache.stats["fallbacks"] == 1
    assert sorted(pa.concat_tables([load_snapshot(store).files]).column("path").to_pylist()) == \
        sorted(snapshot.files.column("path").to_pylist())


@pytest.mark.parametrize("new_commits", [1, 6])
def test_a_table_created_again_at_the_same_path_is_loaded(any_uri, new_commits):
    """Fewer commits than cached (commit v is missing) or more (commit v is another file)."""
    deltatx.create_table(any_uri, SCHEMA)
    for i in range(3):
        deltatx.Table(any_uri).append(row(i))
    cache, store = _private_cache_at(any_uri, 3)
    store.fs.rm(store.root, recursive=True)
    deltatx.create_table(any_uri, SCHEMA)
    for i in range(new_commits):
        deltatx.Table(any_uri).append(row(100 + i))
    snapshot = cache.latest(store)
    assert snapshot.version == new_commits and cache.stats["fallbacks"] == 1
    same_state(snapshot, load_snapshot(store))
    assert ids(deltatx.Table(any_uri)) == [100 + i for i in range(new_commits)]


# --------------------------------------------------------------------------------------------
# The same typed errors as an uncached open; nothing written
# --------------------------------------------------------------------------------------------


def _uncached_error(uri: str) -> type[BaseException]:
    with pytest.raises(Exception) as info:
        load_snapshot(open_store(uri))
    return type(info.value)


def test_a_deleted_table_raises_table_not_found(table_uri):
    deltatx.create_table(table_uri, SCHEMA)
    deltatx.Table(table_uri).append(row(1))
    shutil.rmtree(table_uri)
    with pytest.raises(TableNotFoundError):
        deltatx.Table(table_uri)
    assert not os.path.exists(table_uri)  # opening wrote nothing


def test_a_corrupt_next_commit_raises_corrupt_log(table_uri):
    deltatx.create_table(table_uri, SCHEMA)
    deltatx.Table(table_uri).append(row(1))
    data_before = _data_files(table_uri)
    (_log(table_uri) / commit_name(2)).write_bytes(b'{"add": {"path": \n not json')
    log_before = sorted(p.name for p in _log(table_uri).iterdir())
    assert _uncached_error(table_uri) is CorruptLogError
    with pytest.raises(CorruptLogError):
        deltatx.Table(table_uri)
    assert sorted(p.name for p in _log(table_uri).iterdir()) == log_before
    assert _data_files(table_uri) == data_before


def test_an_unsupported_reader_feature_in_a_new_commit_is_refused(table_uri):
    deltatx.create_table(table_uri, SCHEMA)
    deltatx.Table(table_uri).append(row(1))
    protocol = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                             "readerFeatures": ["featureFromTheFuture"], "writerFeatures": ["featureFromTheFuture"]}}
    (_log(table_uri) / commit_name(2)).write_bytes(orjson.dumps(protocol) + b"\n")
    assert _uncached_error(table_uri) is UnsupportedFeatureError
    with pytest.raises(UnsupportedFeatureError):
        deltatx.Table(table_uri)
    with pytest.raises(UnsupportedFeatureError):
        deltatx.Table(table_uri)  # the cache did not move past it either
    assert SNAPSHOTS.cached_version(open_store(table_uri)) in (None, 1)


# --------------------------------------------------------------------------------------------
# Shared snapshots are never mutated; bounds
# --------------------------------------------------------------------------------------------


def test_a_shared_snapshot_is_not_mutated_by_later_operations(table_uri):
    deltatx.create_table(table_uri, SCHEMA, properties={"delta.checkpointInterval": "2"})
    deltatx.Table(table_uri).append(row(1), app_id="job", app_version=1)
    shared = deltatx.Table(table_uri).snapshot
    files = shared.files.to_pylist()
    tombstones = shared.tombstones.to_pylist()
    txns, domains = dict(shared.app_txns), dict(shared.domains)
    configuration = dict(shared.metadata.configuration)
    version, protocol, schema = shared.version, shared.protocol, shared.schema

    deltatx.Table(table_uri).append(row(2), app_id="job", app_version=2)
    deltatx.Table(table_uri).delete("id = 1")
    deltatx.Table(table_uri).set_properties({"delta.appendOnly": "false"})
    deltatx.Table(table_uri).overwrite(row(3))

    assert deltatx.Table(table_uri).version == version + 4
    assert (shared.version, shared.protocol) == (version, protocol)
    assert shared.files.to_pylist() == files and shared.tombstones.to_pylist() == tombstones
    assert shared.app_txns == txns and shared.domains == domains
    assert shared.metadata.configuration == configuration and shared.schema.equals(schema)


def test_lru_bound_on_tables_and_bytes(tmp_path):
    uris = [str(tmp_path / f"t{i}") for i in range(3)]
    for uri in uris:
        deltatx.create_table(uri, SCHEMA).append(row(1))
    cache = SnapshotCache(max_tables=2)
    stores = [open_store(u) for u in uris]
    for store in stores:
        cache.latest(store)
    assert len(cache) == 2
    assert [cache.cached_version(s) for s in stores] == [None, 1, 1]  # least recently used went
    tiny = SnapshotCache(max_bytes=1)
    assert tiny.latest(stores[0]).version == 1
    assert len(tiny) == 0  # a snapshot bigger than the budget is served, not kept


def test_held_bytes_stay_close_to_the_file_state_and_are_measured_again_after_a_big_change(tmp_path):
    """Sizes between measurements are scaled by rows (measuring walks every buffer); the
    cache's byte count stays within a few % of the real one, and a big append re-measures."""
    from deltatx.txnlog import snapshot_cache as sc

    uri = str(tmp_path / "t")
    table = deltatx.create_table(uri, SCHEMA)
    table.append(pa.concat_tables([row(i) for i in range(64)]).combine_chunks())
    for i in range(40):
        table.append(row(1000 + i))
    store = open_store(uri)
    cache = SnapshotCache()
    measured: list[tuple[int, int]] = []
    for i in range(5):  # 5 appends to 42 files: within an eighth of the measured file count
        deltatx.Table(uri).append(row(2000 + i))
        cache.latest(store)
        measured.append(cache._entries[cache_key(store)].measured)
    assert len(set(measured)) == 1  # one measurement, scaled since
    held = cache._entries[cache_key(store)]
    real = sc._nbytes(held.snapshot)
    assert cache._bytes == held.nbytes and abs(held.nbytes - real) <= real * sc._REMEASURE_DRIFT
    for i in range(10):  # 10 more files: past the drift, measured again
        deltatx.Table(uri).append(row(3000 + i))
    cache.latest(store)
    again = cache._entries[cache_key(store)]
    assert again.measured != measured[0] and again.measured == (again.snapshot.files.num_rows
                                                                + again.snapshot.tombstone_state.rows_bound(),
                                                                sc._nbytes(again.snapshot))
    assert again.nbytes == again.measured[1] == cache._bytes


def test_cache_keys_tell_tables_and_filesystems_apart(tmp_path):
    a, b = open_store(str(tmp_path / "a")), open_store(str(tmp_path / "b"))
    assert cache_key(a) == cache_key(open_store(str(tmp_path / "a"))) != cache_key(b)
    assert cache_key(open_store("memory://k/a")) != cache_key(open_store(str(Path("/k/a"))))
    s3_one = open_store("s3://bucket/t", {"endpoint_url": "http://127.0.0.1:1", "key": "x", "secret": "y"})
    s3_two = open_store("s3://bucket/t", {"endpoint_url": "http://127.0.0.1:2", "key": "x", "secret": "y"})
    assert cache_key(s3_one) != cache_key(s3_two)
    assert cache_key(open_store(f"file://{tmp_path}/a")) == cache_key(a)


# --------------------------------------------------------------------------------------------
# S3
# --------------------------------------------------------------------------------------------


@pytest.mark.s3
def test_s3_fresh_opens_catch_up_with_another_writer(s3_bucket):
    prefix, options = s3_bucket
    uri = f"{prefix}/cached"
    deltatx.create_table(uri, SCHEMA, storage_options=options)
    deltatx.Table(uri, storage_options=options).append(row(1))
    dl_options = {"AWS_ENDPOINT_URL": options["endpoint_url"], "AWS_ACCESS_KEY_ID": options["key"],
                  "AWS_SECRET_ACCESS_KEY": options["secret"], "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    write_deltalake(uri, row(2), mode="append", storage_options=dl_options)  # not through our cache
    hits = SNAPSHOTS.stats["hits"]
    table = deltatx.Table(uri, storage_options=options)
    assert SNAPSHOTS.stats["hits"] == hits + 1
    assert table.version == 2 and ids(table) == [1, 2]
    deltatx.Table(uri, storage_options=options).append(row(3))
    assert deltatx.Table(uri, storage_options=options, version=1).version == 1
    assert deltalake_ids(uri, dl_options) == [1, 2, 3]


def _drop_s3_table(uri: str, options: dict) -> None:
    from deltatx.txnlog.store import open_store

    store = open_store(uri, options)
    store.fs.rm(store.root, recursive=True)


@pytest.mark.s3
@pytest.mark.parametrize("last_seen", ["own commit", "another writer's commit"])
def test_s3_a_table_deleted_and_created_again_is_not_served_from_the_cache(s3_bucket, last_seen):
    """The cached version's commit must be the same file at the next open: a table re-created
    at the path has a same-named commit with other content. On S3 the identity comes from this
    process's PUT (its ETag) or one HEAD after catching up; it was not taken at all, and the old
    state was served — rows came back and an overwrite left the new table's files live."""
    prefix, options = s3_bucket
    uri = f"{prefix}/again"
    t = deltatx.create_table(uri, SCHEMA, storage_options=options)
    t.append(pa.concat_tables([row(1), row(2), row(3)]))
    dl_options = {"AWS_ENDPOINT_URL": options["endpoint_url"], "AWS_ACCESS_KEY_ID": options["key"],
                  "AWS_SECRET_ACCESS_KEY": options["secret"], "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    if last_seen == "another writer's commit":
        write_deltalake(uri, row(4), mode="append", storage_options=dl_options)
        assert ids(deltatx.Table(uri, storage_options=options)) == [1, 2, 3, 4]  # cached at that commit
    _drop_s3_table(uri, options)
    for value in (10, 20, 30, 40):
        write_deltalake(uri, row(value), mode="append", storage_options=dl_options)
    table = deltatx.Table(uri, storage_options=options)
    assert ids(table) == [10, 20, 30, 40]
    table.delete("id = 20")
    table.overwrite(row(99))
    assert deltalake_ids(uri, dl_options) == [99]


@pytest.mark.s3
def test_s3_files_added_after_a_listing_are_found(s3_bucket):
    """VACUUM (even a dry run) lists the table; s3fs kept that listing and answered later opens
    from it, so files another writer added afterwards read as missing in this process."""
    prefix, options = s3_bucket
    uri = f"{prefix}/listed"
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    t = deltatx.create_table(uri, schema, partition_by=["p"], storage_options=options)
    t.append(pa.table({"id": [1], "p": ["a"]}, schema=schema))
    assert t.vacuum(dry_run=True) == []
    dl_options = {"AWS_ENDPOINT_URL": options["endpoint_url"], "AWS_ACCESS_KEY_ID": options["key"],
                  "AWS_SECRET_ACCESS_KEY": options["secret"], "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    write_deltalake(uri, pa.table({"id": [2], "p": ["a"]}, schema=schema), mode="append",
                    partition_by=["p"], storage_options=dl_options)
    fresh = deltatx.Table(uri, storage_options=options)
    assert sorted(fresh.to_arrow()["id"].to_pylist()) == [1, 2]
    fresh.delete("id = 2")
    assert sorted(deltatx.Table(uri, storage_options=options).to_arrow()["id"].to_pylist()) == [1]
