"""Log replay into a Snapshot: reconciliation rules, time travel, apply and refresh."""

from __future__ import annotations

import os
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from txnlog_logs import LogWriter, add_row, assert_same_snapshot, dv, file_set, paths, remove_row, table_metadata

from deltatx.errors import CorruptLogError, TableNotFoundError, TimeTravelError
from deltatx.txnlog.actions import (
    FILE_SCHEMA,
    REMOVE_SCHEMA,
    CommitActions,
    DomainMetadata,
    Protocol,
    Txn,
    file_actions_table,
    parse_commit,
)
from deltatx.txnlog.history import commit_timestamps
from deltatx.txnlog.snapshot import load_snapshot


# --------------------------------------------------------------------------------------------
# Reconciliation
# --------------------------------------------------------------------------------------------


def test_add_remove_and_re_add(log: LogWriter) -> None:
    log.create()
    log.commit(adds=[add_row("a.parquet"), add_row("b.parquet")])
    log.commit(removes=[remove_row("a.parquet")], adds=[add_row("c.parquet")])
    snap = load_snapshot(log.store)
    assert snap.version == 2
    assert paths(snap.files) == ["b.parquet", "c.parquet"]
    assert paths(snap.tombstones) == ["a.parquet"]

    log.commit(adds=[add_row("a.parquet", size=555)])  # the same path comes back: tombstone goes
    snap = load_snapshot(log.store)
    assert paths(snap.files) == ["a.parquet", "b.parquet", "c.parquet"]
    assert snap.tombstones.num_rows == 0
    sizes = dict(zip(snap.files.column("path").to_pylist(), snap.files.column("size").to_pylist()))
    assert sizes["a.parquet"] == 555
    assert snap.files.schema.equals(FILE_SCHEMA)
    assert snap.tombstones.schema.equals(REMOVE_SCHEMA)


def test_files_are_keyed_by_path_and_deletion_vector(log: LogWriter) -> None:
    log.create()
    log.commit(adds=[add_row("f.parquet"), add_row("g.parquet")])
    # a DV delete: remove the plain file, add the same path with a deletion vector
    log.commit(removes=[remove_row("f.parquet")], adds=[add_row("f.parquet", dv=dv("dv1"))])
    snap = load_snapshot(log.store)
    assert file_set(snap.files) == {("f.parquet", "dv1"), ("g.parquet", None)}
    assert file_set(snap.tombstones) == {("f.parquet", None)}

    # a second DV delete on the same file: (f, dv1) retires, (f, dv2) is live
    log.commit(removes=[remove_row("f.parquet", dv=dv("dv1"))], adds=[add_row("f.parquet", dv=dv("dv2"))])
    snap = load_snapshot(log.store)
    assert file_set(snap.files) == {("f.parquet", "dv2"), ("g.parquet", None)}
    assert file_set(snap.tombstones) == {("f.parquet", None), ("f.parquet", "dv1")}
    live = {(p, d) for p, d in file_set(snap.files)}
    assert not live & file_set(snap.tombstones)  # live adds and tombstones are disjoint


def test_dv_offset_is_part_of_the_key(log: LogWriter) -> None:
    log.create()
    log.commit(adds=[add_row("f.parquet", dv=dv("shared", offset=1))])
    log.commit(removes=[remove_row("f.parquet", dv=dv("shared", offset=9))])  # another DV: no effect on the live one
    snap = load_snapshot(log.store)
    assert file_set(snap.files) == {("f.parquet", "shared")}
    assert snap.files.column("deletionVector").to_pylist()[0]["offset"] == 1


def test_a_hot_files_long_dv_history_keeps_exact_keys(log: LogWriter) -> None:
    """One file's DV changed 40 times: 40 tombstones share its path (replay narrows them by DV
    location before building keys). Re-removing an old (path, DV) replaces its tombstone;
    re-adding one revives it; locations that contain '@' or differ only by offset stay apart."""
    log.create()
    log.commit(adds=[add_row("hot.parquet"), add_row("cold.parquet")])
    previous: dict | None = None
    history = [dv(f"dv@{i}", offset=None if i % 3 else i) for i in range(40)]
    for current in history:
        log.commit(removes=[remove_row("hot.parquet", dv=previous)], adds=[add_row("hot.parquet", dv=current)])
        previous = current
    snap = load_snapshot(log.store)
    assert file_set(snap.files) == {("hot.parquet", "dv@39"), ("cold.parquet", None)}
    assert snap.tombstones.num_rows == 40  # the plain file and dv@0 … dv@38
    # the same location at another offset is another DV: no tombstone goes
    log.commit(removes=[remove_row("hot.parquet", dv=dv("dv@3", offset=4))])
    assert load_snapshot(log.store).tombstones.num_rows == 41
    # the exact (path, dv@3 at offset 3) again: its tombstone is replaced, not doubled
    log.commit(removes=[remove_row("hot.parquet", dv=dv("dv@3", offset=3))])
    snap = load_snapshot(log.store)
    assert snap.tombstones.num_rows == 41
    # re-adding (path, dv@5) and the plain file makes them live and drops their tombstones
    log.commit(adds=[add_row("hot.parquet", dv=dv("dv@5", offset=None)), add_row("hot.parquet")])
    snap = load_snapshot(log.store)
    assert file_set(snap.files) == {("hot.parquet", "dv@39"), ("hot.parquet", "dv@5"), ("hot.parquet", None),
                                    ("cold.parquet", None)}
    assert snap.tombstones.num_rows == 39
    assert not file_set(snap.files) & {(p, d) for p, d in file_set(snap.tombstones) if (p, d) != ("hot.parquet", "dv@3")}
    # replaying the same log commit by commit (apply) gives the same snapshot
    step = load_snapshot(log.store, version=1)
    for version in range(2, snap.version + 1):
        step = step.apply(parse_commit(log.store.read_commit(version), version))
    assert_same_snapshot(step, snap)


def test_newest_reference_wins_inside_one_commit(log: LogWriter) -> None:
    log.create()
    log.commit(adds=[add_row("x.parquet"), add_row("y.parquet")])
    # line order is the tie-breaker: remove-then-add keeps x, add-then-remove drops y
    log.raw(
        b'{"commitInfo":{"operation":"WRITE"}}\n'
        b'{"remove":{"path":"x.parquet","dataChange":true,"deletionTimestamp":5}}\n'
        b'{"add":{"path":"x.parquet","partitionValues":{"part":"a"},"size":7,"modificationTime":1,"dataChange":true}}\n'
        b'{"add":{"path":"y.parquet","partitionValues":{"part":"a"},"size":8,"modificationTime":1,"dataChange":true}}\n'
        b'{"remove":{"path":"y.parquet","dataChange":true,"deletionTimestamp":5}}\n'
    )
    snap = load_snapshot(log.store)
    assert paths(snap.files) == ["x.parquet"]
    assert snap.files.column("size").to_pylist() == [7]
    assert paths(snap.tombstones) == ["y.parquet"]


def test_txn_latest_per_app_id(log: LogWriter) -> None:
    log.create()
    log.commit(txns=[Txn("stream-a", 1, 10), Txn("stream-b", 5, 10)])
    log.commit(txns=[Txn("stream-a", 2, 20)])
    snap = load_snapshot(log.store)
    assert snap.app_txns == {"stream-a": Txn("stream-a", 2, 20), "stream-b": Txn("stream-b", 5, 10)}


def test_domains_latest_wins_and_removed_suppresses(log: LogWriter) -> None:
    log.create(protocol=Protocol(1, 7, None, ("domainMetadata",)))
    log.commit(domains=[DomainMetadata("app.one", '{"v":1}'), DomainMetadata("app.two", '{"v":1}')])
    log.commit(domains=[DomainMetadata("app.one", '{"v":2}'), DomainMetadata("app.two", "", removed=True)])
    snap = load_snapshot(log.store)
    assert snap.domains == {"app.one": DomainMetadata("app.one", '{"v":2}')}
    log.commit(domains=[DomainMetadata("app.two", '{"v":3}')])  # a removed domain can come back
    assert set(load_snapshot(log.store).domains) == {"app.one", "app.two"}


def test_latest_metadata_and_protocol_win(log: LogWriter) -> None:
    log.create({"delta.appendOnly": "false"})
    log.commit(adds=[add_row("a.parquet")])
    new_schema = pa.schema([("id", pa.int64()), ("part", pa.string()), ("extra", pa.float64())])
    log.commit(metadata=table_metadata({"delta.appendOnly": "true"}, schema=new_schema))
    log.commit(protocol=Protocol(1, 7, None, ("appendOnly", "invariants", "domainMetadata")))
    snap = load_snapshot(log.store)
    assert snap.properties == {"delta.appendOnly": "true"}
    assert snap.schema.names == ["id", "part", "extra"]
    assert snap.protocol.writer_features == ("appendOnly", "invariants", "domainMetadata")
    assert snap.partition_columns == ["part"]
    assert snap.partition_schema() == pa.schema([("part", pa.string())])
    before = load_snapshot(log.store, version=1)
    assert before.schema.names == ["id", "part"] and before.protocol == Protocol(1, 2)


def test_table_not_found(store) -> None:
    with pytest.raises(TableNotFoundError):
        load_snapshot(store)


# --------------------------------------------------------------------------------------------
# Time travel
# --------------------------------------------------------------------------------------------


def test_time_travel_by_version(log: LogWriter) -> None:
    log.create()
    for i in range(4):
        log.commit(adds=[add_row(f"f{i}.parquet")])
    assert [load_snapshot(log.store, version=v).files.num_rows for v in range(5)] == [0, 1, 2, 3, 4]
    with pytest.raises(TimeTravelError, match="latest version is 4"):
        load_snapshot(log.store, version=5)
    with pytest.raises(TimeTravelError):
        load_snapshot(log.store, version=-1)
    with pytest.raises(TimeTravelError):
        load_snapshot(log.store, version=1, timestamp_ms=5)


def _set_mtime(log: LogWriter, version: int, ms: int) -> None:
    path = log.log_path(f"{version:020d}.json")
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


def test_time_travel_by_timestamp_uses_monotonic_file_times(local_log: LogWriter) -> None:
    local_log.create()
    for i in range(3):
        local_log.commit(adds=[add_row(f"f{i}.parquet")])
    # version 2's mtime is *earlier* than version 1's (clock skew): it counts as 1s+1ms
    for version, ms in [(0, 1_000_000), (1, 2_000_000), (2, 1_500_000), (3, 3_000_000)]:
        _set_mtime(local_log, version, ms)
    store = local_log.store
    assert commit_timestamps(store) == [(0, 1_000_000), (1, 2_000_000), (2, 2_000_001), (3, 3_000_000)]
    assert load_snapshot(store, timestamp_ms=1_999_999).version == 0
    assert load_snapshot(store, timestamp_ms=2_000_000).version == 1
    assert load_snapshot(store, timestamp_ms=2_000_001).version == 2
    assert load_snapshot(store, timestamp_ms=2_500_000).version == 2
    latest = load_snapshot(store, timestamp_ms=3_000_000)
    assert latest.version == 3 and latest.timestamp_ms == 3_000_000
    with pytest.raises(TimeTravelError, match="after the latest version"):  # as Delta: not known yet
        load_snapshot(store, timestamp_ms=9_000_000)
    assert load_snapshot(store, version=2).timestamp_ms == 2_000_001
    with pytest.raises(TimeTravelError, match="before the earliest"):
        load_snapshot(store, timestamp_ms=999_999)


def test_time_travel_by_in_commit_timestamp(local_log: LogWriter) -> None:
    config = {"delta.enableInCommitTimestamps": "true"}
    local_log.commit(protocol=Protocol(1, 7, None, ("inCommitTimestamp",)), metadata=table_metadata(config),
                     info={"inCommitTimestamp": 100, "operation": "CREATE TABLE"})
    local_log.commit(adds=[add_row("a.parquet")], info={"inCommitTimestamp": 200, "operation": "WRITE"})
    local_log.commit(adds=[add_row("b.parquet")], info={"inCommitTimestamp": 300, "operation": "WRITE"})
    for version in range(3):  # file times say the opposite order: they must be ignored
        _set_mtime(local_log, version, 10_000_000 - version)
    store = local_log.store
    assert commit_timestamps(store) == [(0, 100), (1, 200), (2, 300)]
    assert load_snapshot(store, timestamp_ms=250).version == 1
    assert load_snapshot(store, timestamp_ms=300).timestamp_ms == 300
    assert load_snapshot(store).timestamp_ms == 300
    with pytest.raises(TimeTravelError):
        load_snapshot(store, timestamp_ms=99)


# --------------------------------------------------------------------------------------------
# apply / refresh
# --------------------------------------------------------------------------------------------


def test_apply_parsed_commit_equals_reload(log: LogWriter) -> None:
    log.create()
    log.commit(adds=[add_row("a.parquet"), add_row("b.parquet")], txns=[Txn("app", 1)])
    snap = load_snapshot(log.store)
    v = log.commit(removes=[remove_row("a.parquet")], adds=[add_row("c.parquet", dv=dv("d"))], txns=[Txn("app", 2)])
    applied = snap.apply(parse_commit(log.store.read_commit(v), v))
    assert_same_snapshot(applied, load_snapshot(log.store))
    assert snap.version == 1 and paths(snap.files) == ["a.parquet", "b.parquet"]  # the old value is untouched


def test_apply_columnar_commit_as_a_writer_builds_it(log: LogWriter) -> None:
    log.create()
    log.commit(adds=[add_row("a.parquet"), add_row("b.parquet")])
    snap = load_snapshot(log.store)
    removes = file_actions_table([remove_row("a.parquet")], REMOVE_SCHEMA)
    adds = pa.table({"path": ["a2.parquet"], "partitionValues": pa.array([[("part", "a")]], FILE_SCHEMA.field(1).type),
                     "size": pa.array([9], pa.int64()), "modificationTime": pa.array([1], pa.int64()),
                     "dataChange": [True]})  # a subset of the columns: the snapshot fills the rest
    own = CommitActions(version=2, commit_info={"operation": "WRITE", "timestamp": snap.timestamp_ms - 50})
    own._adds, own._removes = adds, removes
    nxt = snap.apply(own)
    assert nxt.version == 2
    assert paths(nxt.files) == ["a2.parquet", "b.parquet"]
    assert paths(nxt.tombstones) == ["a.parquet"]
    assert nxt.files.schema.equals(FILE_SCHEMA)
    assert nxt.timestamp_ms == snap.timestamp_ms + 1  # commit timestamps never go backwards


def test_apply_out_of_order_is_refused(log: LogWriter) -> None:
    log.create()
    snap = load_snapshot(log.store)
    with pytest.raises(CorruptLogError, match="expected 1"):
        snap.apply(CommitActions(version=5))


def test_refresh_reads_only_new_commits(local_log: LogWriter) -> None:
    local_log.create()
    for i in range(5):
        local_log.commit(adds=[add_row(f"f{i}.parquet")])
    store = local_log.store
    snap = load_snapshot(store)
    store.reads.clear()
    assert snap.refresh(store) is snap  # nothing new: same object, nothing read
    assert store.reads == []

    local_log.commit(removes=[remove_row("f0.parquet")])
    local_log.commit(adds=[add_row("g.parquet")], txns=[Txn("app", 3)])
    fresh = snap.refresh(store)
    assert [n for n in store.reads if n != "_last_checkpoint"] == [f"{6:020d}.json", f"{7:020d}.json"]
    assert_same_snapshot(fresh, load_snapshot(store))
    assert fresh.version == 7 and fresh.app_txns["app"].version == 3


def test_refresh_on_memory_store(log: LogWriter) -> None:
    log.create()
    snap = load_snapshot(log.store)
    log.commit(adds=[add_row("a.parquet")])
    log.commit(protocol=Protocol(1, 7, None, ("appendOnly", "invariants", "domainMetadata")),
               domains=[DomainMetadata("d", "x")])
    fresh = snap.refresh(log.store)
    assert_same_snapshot(fresh, load_snapshot(log.store))


# --------------------------------------------------------------------------------------------
# Property: replay, checkpoint + tail and apply all agree with a plain model of the rules
# --------------------------------------------------------------------------------------------

_KEYS = [(f"p{i}.parquet", d) for i in range(4) for d in (None, "dv1", "dv2")]
_commit_strategy = st.lists(
    st.tuples(st.sampled_from(range(len(_KEYS))), st.booleans()), min_size=1, max_size=6,
    unique_by=lambda action: action[0],  # a commit never names one logical file twice
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(commits=st.lists(_commit_strategy, min_size=1, max_size=8), checkpoint_at=st.integers(0, 8))
def test_replay_matches_the_reconciliation_model(commits, checkpoint_at) -> None:
    from deltatx.txnlog.checkpoint import write_checkpoint
    from deltatx.txnlog.store import open_store

    log = LogWriter(open_store(f"memory://txnlog-prop/{uuid.uuid4().hex}"))
    log.create()
    model: dict[tuple[str, str | None], str] = {}
    snap = load_snapshot(log.store)
    for actions in commits:
        adds, removes = [], []
        for index, is_add in actions:
            path, dv_id = _KEYS[index]
            descriptor = dv(dv_id) if dv_id else None
            (adds if is_add else removes).append(
                add_row(path, dv=descriptor) if is_add else remove_row(path, dv=descriptor))
            model[(path, dv_id)] = "add" if is_add else "remove"
        version = log.commit(adds=adds, removes=removes)
        snap = snap.apply(parse_commit(log.store.read_commit(version), version))
        if version == checkpoint_at:
            write_checkpoint(log.store, load_snapshot(log.store))
    live = {k for k, kind in model.items() if kind == "add"}
    dead = {k for k, kind in model.items() if kind == "remove"}
    for candidate in (load_snapshot(log.store), snap):
        assert file_set(candidate.files) == live and candidate.files.num_rows == len(live)
        assert file_set(candidate.tombstones) == dead and candidate.tombstones.num_rows == len(dead)
