"""Checkpoints: write + read round trip, other engines reading ours, multi-part, V2, fallbacks."""

from __future__ import annotations

import dataclasses
import io
import os
import time
import uuid

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from duckdb_delta import read_duckdb
from txnlog_logs import LogWriter, add_row, assert_same_snapshot, dv, paths, remove_row

from deltatx.errors import CorruptCheckpointError, InvalidPropertyError, TimeTravelError
from deltatx.txnlog.actions import DomainMetadata, Protocol, Txn
from deltatx.txnlog.tombstones import Tombstones
from deltatx.txnlog.checkpoint import (
    ADD_STRUCT,
    CHECKPOINT_SCHEMA,
    LAST_CHECKPOINT,
    REMOVE_STRUCT,
    build_checkpoint_table,
    checkpoint_interval,
    checkpoint_name,
    complete_checkpoints,
    read_checkpoint,
    read_last_checkpoint_hint,
    write_checkpoint,
)
from deltatx.txnlog.snapshot import load_snapshot
from deltatx.txnlog.store import LogStore

DAY_MS = 86_400_000


def build_rich_table(log: LogWriter) -> None:
    """Versions 0..4: partitions, a DV, txns, domains, a fresh tombstone and an old one."""
    log.create(protocol=Protocol(1, 7, None, ("appendOnly", "invariants", "domainMetadata")))
    log.commit(adds=[add_row("part=a/1.parquet"), add_row("part=b/2.parquet", "b", tags={"k": "v"}),
                     add_row("part=a/old.parquet"), add_row("part=__null/3.parquet", None)],
               txns=[Txn("stream", 1, 1000)])
    log.commit(removes=[remove_row("part=a/1.parquet")], adds=[add_row("part=a/1.parquet", dv=dv("dvA"))],
               domains=[DomainMetadata("app.cfg", '{"x":1}'), DomainMetadata("gone", "y")])
    log.commit(removes=[remove_row("part=a/old.parquet", deleted_at=int(time.time() * 1000) - 30 * DAY_MS)],
               domains=[DomainMetadata("gone", "", removed=True)], txns=[Txn("stream", 2, 2000)])
    log.commit(adds=[add_row("part=b/4.parquet", "b", stats='{"numRecords":3,"minValues":{"id":1}}')])


def drop_commits_before(store: LogStore, version: int) -> None:
    for v in range(version):
        store.delete_log_file(f"{v:020d}.json")


def put_parquet(store: LogStore, name: str, table: pa.Table) -> None:
    """Write a parquet file under _delta_log (sub-folders such as _sidecars/ included)."""
    sink = io.BytesIO()
    pq.write_table(table, sink)
    path = f"{store.log_root}/{name}"
    store.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    store.fs.pipe_file(path, sink.getvalue())


# --------------------------------------------------------------------------------------------
# Round trip
# --------------------------------------------------------------------------------------------


def test_round_trip_gives_the_same_snapshot(log: LogWriter) -> None:
    build_rich_table(log)
    replayed = load_snapshot(log.store)
    write_checkpoint(log.store, replayed)
    drop_commits_before(log.store, 4)  # only the checkpoint can rebuild the table now
    from_checkpoint = load_snapshot(log.store)
    # the 30-day-old tombstone is expired (default retention one week) and left out of the checkpoint
    assert paths(replayed.tombstones) == ["part=a/1.parquet", "part=a/old.parquet"]
    assert paths(from_checkpoint.tombstones) == ["part=a/1.parquet"]
    expected = replayed.tombstones.filter(pa.compute.equal(replayed.tombstones["path"], "part=a/1.parquet"))
    assert from_checkpoint.tombstones.drop_columns(["stats", "tags"]).to_pylist() == expected.drop_columns(
        ["stats", "tags"]).to_pylist()
    assert_same_snapshot(
        from_checkpoint,
        dataclasses.replace(replayed, tombstone_state=Tombstones.of(from_checkpoint.tombstones)),
    )
    assert from_checkpoint.domains == {"app.cfg": DomainMetadata("app.cfg", '{"x":1}')}
    assert from_checkpoint.app_txns == {"stream": Txn("stream", 2, 2000)}


def test_checkpoint_then_tail(log: LogWriter) -> None:
    build_rich_table(log)
    write_checkpoint(log.store, load_snapshot(log.store))
    log.commit(removes=[remove_row("part=b/2.parquet", "b")], adds=[add_row("part=c/5.parquet", "c")])
    log.commit(removes=[remove_row("part=a/1.parquet", dv=dv("dvA"))], adds=[add_row("part=a/1.parquet", dv=dv("dvB"))])
    tail_replay = load_snapshot(log.store)
    assert tail_replay.version == 6
    assert paths(tail_replay.files) == ["part=__null/3.parquet", "part=a/1.parquet", "part=b/4.parquet",
                                        "part=c/5.parquet"]
    assert tail_replay.files.column("deletionVector").to_pylist()[
        tail_replay.files.column("path").to_pylist().index("part=a/1.parquet")]["pathOrInlineDv"] == "dvB"
    log.store.delete_log_file(checkpoint_name(4))
    full = load_snapshot(log.store)  # full replay agrees, except for the tombstone the checkpoint expired
    assert paths(full.tombstones) == sorted(paths(tail_replay.tombstones) + ["part=a/old.parquet"])
    assert_same_snapshot(tail_replay, dataclasses.replace(full, tombstone_state=Tombstones.of(tail_replay.tombstones)))


def test_checkpoint_layout_and_last_checkpoint(log: LogWriter) -> None:
    build_rich_table(log)
    snap = load_snapshot(log.store)
    write_checkpoint(log.store, snap)
    data = log.store.read_log_file(checkpoint_name(4))
    table = pq.read_table(io.BytesIO(data))
    assert table.schema.equals(CHECKPOINT_SCHEMA)
    valid = {name: table.column(name).is_valid().to_pylist() for name in table.column_names}
    assert all(sum(flags) == 1 for flags in zip(*valid.values()))  # exactly one action per row
    assert sum(valid["add"]) == 4 and sum(valid["protocol"]) == 1 and sum(valid["metaData"]) == 1
    assert sum(valid["txn"]) == 1 and sum(valid["domainMetadata"]) == 1 and sum(valid["remove"]) == 1
    assert "stats" not in REMOVE_STRUCT.names and "tags" not in REMOVE_STRUCT.names
    stats = [a["stats"] for a in table.column("add").to_pylist() if a]
    assert '{"numRecords":3,"minValues":{"id":1}}' in stats  # stats stay a JSON string
    hint = orjson.loads(log.store.read_log_file(LAST_CHECKPOINT))
    assert hint == {"version": 4, "size": table.num_rows, "sizeInBytes": len(data), "numOfAddFiles": 4}
    assert read_last_checkpoint_hint(log.store) == 4


def test_v2_checkpoint_policy_adds_checkpoint_metadata(log: LogWriter) -> None:
    log.create({"delta.checkpointPolicy": "v2"},
               protocol=Protocol(3, 7, ("v2Checkpoint",), ("appendOnly", "invariants", "v2Checkpoint")))
    log.commit(adds=[add_row("a.parquet")])
    snap = load_snapshot(log.store)
    table = build_checkpoint_table(snap)
    meta = [m for m in table.column("checkpointMetadata").to_pylist() if m]
    assert meta == [{"version": 1, "tags": []}]
    write_checkpoint(log.store, snap)
    drop_commits_before(log.store, 1)
    assert_same_snapshot(load_snapshot(log.store), snap)


def test_checkpoint_interval_property() -> None:
    assert checkpoint_interval({}) == 10
    assert checkpoint_interval({"delta.checkpointInterval": "100"}) == 100
    for bad in ("0", "-3", "ten"):
        with pytest.raises(InvalidPropertyError, match="checkpointInterval"):
            checkpoint_interval({"delta.checkpointInterval": bad})


def test_bad_retention_property_is_reported(log: LogWriter) -> None:
    log.create({"delta.deletedFileRetentionDuration": "interval 1 month"})
    log.commit(removes=[remove_row("a.parquet")])
    with pytest.raises(InvalidPropertyError, match="deletedFileRetentionDuration"):
        write_checkpoint(log.store, load_snapshot(log.store))


# --------------------------------------------------------------------------------------------
# Other engines read our checkpoints
# --------------------------------------------------------------------------------------------


def _write_data_table(root: str) -> LogWriter:
    """A local table whose data files exist (so other engines can scan it)."""
    from deltatx.txnlog.store import open_store

    store = open_store(root, {"fsync": False})
    log = LogWriter(store)
    log.create(table_id=str(uuid.uuid4()), schema=pa.schema([("id", pa.int64()), ("part", pa.string())]))
    for i, part in enumerate(["a", "b", "a"]):
        rel = f"part={part}/f{i}.parquet"
        os.makedirs(os.path.join(root, f"part={part}"), exist_ok=True)
        pq.write_table(pa.table({"id": pa.array([i, i + 10], pa.int64())}), os.path.join(root, rel))
        log.commit(adds=[add_row(rel, part, size=os.path.getsize(os.path.join(root, rel)))])
    log.commit(removes=[remove_row("part=b/f1.parquet", "b")])
    write_checkpoint(store, load_snapshot(store))
    drop_commits_before(store, log.version)  # readers must use the checkpoint
    return log


def test_deltalake_reads_our_checkpoint(tmp_path) -> None:
    import deltalake

    root = str(tmp_path / "t")
    log = _write_data_table(root)
    dt = deltalake.DeltaTable(root)
    assert dt.version() == log.version
    actions = pa.table(dt.get_add_actions(flatten=True))
    assert sorted(actions.column("path").to_pylist()) == ["part=a/f0.parquet", "part=a/f2.parquet"]
    assert dt.metadata().partition_columns == ["part"]


def test_duckdb_reads_our_checkpoint(tmp_path) -> None:
    root = str(tmp_path / "t")
    _write_data_table(root)
    rows = read_duckdb(root, "SELECT id, part FROM delta_scan(?) ORDER BY id").to_pylist()
    assert [(r["id"], r["part"]) for r in rows] == [(0, "a"), (2, "a"), (10, "a"), (12, "a")]


# --------------------------------------------------------------------------------------------
# Reading checkpoints we did not write
# --------------------------------------------------------------------------------------------


def test_multi_part_checkpoint(log: LogWriter) -> None:
    build_rich_table(log)
    snap = load_snapshot(log.store)
    table = build_checkpoint_table(snap)
    half = table.num_rows // 2
    put_parquet(log.store, f"{4:020d}.checkpoint.{1:010d}.{2:010d}.parquet", table.slice(0, half))
    put_parquet(log.store, f"{4:020d}.checkpoint.{2:010d}.{2:010d}.parquet", table.slice(half))
    drop_commits_before(log.store, 4)
    restored = load_snapshot(log.store)
    assert_same_snapshot(restored, dataclasses.replace(snap, tombstone_state=Tombstones.of(restored.tombstones)))
    assert paths(restored.tombstones) == ["part=a/1.parquet"]


def test_incomplete_multi_part_set_is_ignored(log: LogWriter) -> None:
    build_rich_table(log)
    snap_at_2 = load_snapshot(log.store, version=2)
    write_checkpoint(log.store, snap_at_2)
    table = build_checkpoint_table(load_snapshot(log.store))
    # only part 1 of 3 made it (a crashed writer): it must not be used
    put_parquet(log.store, f"{4:020d}.checkpoint.{1:010d}.{3:010d}.parquet", table.slice(0, 2))
    assert complete_checkpoints(log.store.list_log()).keys() == {2}
    drop_commits_before(log.store, 2)
    snap = load_snapshot(log.store)
    assert snap.version == 4 and snap.files.num_rows == 4


def test_a_log_left_with_only_part_of_a_checkpoint_is_corrupt_not_absent(log: LogWriter) -> None:
    """Commits cleaned up, one part of the only checkpoint lost: the table is broken (Delta:
    DELTA_MISSING_PART_FILES), and saying "no table" would invite a create over it."""
    build_rich_table(log)
    table = build_checkpoint_table(load_snapshot(log.store))
    put_parquet(log.store, f"{4:020d}.checkpoint.{1:010d}.{3:010d}.parquet", table.slice(0, 2))
    put_parquet(log.store, f"{4:020d}.checkpoint.{3:010d}.{3:010d}.parquet", table.slice(4))
    drop_commits_before(log.store, 5)
    with pytest.raises(CorruptCheckpointError, match=r"checkpoint\.0000000001\.0000000003.*not all there"):
        load_snapshot(log.store)


def test_commits_left_after_an_incomplete_checkpoint_name_the_checkpoint(log: LogWriter) -> None:
    """A commit survives beside the broken checkpoint: the error names the missing part, not a
    missing checkpoint the user can see in the folder."""
    build_rich_table(log)
    table = build_checkpoint_table(load_snapshot(log.store, version=3))
    put_parquet(log.store, f"{3:020d}.checkpoint.{1:010d}.{2:010d}.parquet", table.slice(0, 2))
    drop_commits_before(log.store, 4)
    with pytest.raises(CorruptCheckpointError, match=r"multi-part checkpoint is incomplete.*0000000001\.0000000002"):
        load_snapshot(log.store)


def _v2_parts(snap) -> tuple[list[bytes], pa.Table]:
    """The non-file actions as JSON lines, and a sidecar table holding adds and removes."""
    lines = [
        orjson.dumps({"checkpointMetadata": {"version": snap.version, "tags": {}}}),
        orjson.dumps({"protocol": snap.protocol.to_json()}),
        orjson.dumps({"metaData": snap.metadata.to_json()}),
    ]
    lines += [orjson.dumps({"txn": t.to_json()}) for t in snap.app_txns.values()]
    lines += [orjson.dumps({"domainMetadata": d.to_json()}) for d in snap.domains.values()]
    full = build_checkpoint_table(snap)
    sidecar = full.select(["add", "remove"]).filter(
        pa.compute.or_(full.column("add").is_valid(), full.column("remove").is_valid()))
    return lines, sidecar


def test_v2_json_checkpoint_with_sidecars(log: LogWriter) -> None:
    build_rich_table(log)
    snap = load_snapshot(log.store)
    lines, sidecar = _v2_parts(snap)
    half = sidecar.num_rows // 2
    names = [f"{uuid.uuid4()}.parquet" for _ in range(2)]
    put_parquet(log.store, f"_sidecars/{names[0]}", sidecar.slice(0, half))
    put_parquet(log.store, f"_sidecars/{names[1]}", sidecar.slice(half))
    lines += [orjson.dumps({"sidecar": {"path": n, "sizeInBytes": 1, "modificationTime": 1}}) for n in names]
    log.store.write_log_file(f"{4:020d}.checkpoint.{uuid.uuid4()}.json", b"\n".join(lines) + b"\n")
    drop_commits_before(log.store, 5)
    restored = load_snapshot(log.store)
    assert_same_snapshot(restored, dataclasses.replace(snap, tombstone_state=Tombstones.of(restored.tombstones)))


def test_v2_parquet_checkpoint_with_inline_and_sidecar(log: LogWriter) -> None:
    build_rich_table(log)
    snap = load_snapshot(log.store)
    full = build_checkpoint_table(snap)
    sidecar_name = f"{uuid.uuid4()}.parquet"
    is_file = pa.compute.or_(full.column("add").is_valid(), full.column("remove").is_valid())
    put_parquet(log.store, f"_sidecars/{sidecar_name}", full.select(["add", "remove"]).filter(is_file))
    top = full.filter(pa.compute.invert(is_file)).select(["txn", "metaData", "protocol", "domainMetadata"])
    n = top.num_rows
    sidecar_struct = pa.struct([("path", pa.string()), ("sizeInBytes", pa.int64()), ("modificationTime", pa.int64())])
    meta_struct = pa.struct([("version", pa.int64())])
    top = pa.concat_tables([
        top.append_column("sidecar", pa.nulls(n, sidecar_struct)).append_column("checkpointMetadata",
                                                                                pa.nulls(n, meta_struct)),
        pa.table({"txn": pa.nulls(2, top.schema.field("txn").type),
                  "metaData": pa.nulls(2, top.schema.field("metaData").type),
                  "protocol": pa.nulls(2, top.schema.field("protocol").type),
                  "domainMetadata": pa.nulls(2, top.schema.field("domainMetadata").type),
                  "sidecar": pa.array([{"path": sidecar_name, "sizeInBytes": 1, "modificationTime": 1}, None],
                                      sidecar_struct),
                  "checkpointMetadata": pa.array([None, {"version": 4}], meta_struct)}),
    ])
    put_parquet(log.store, f"{4:020d}.checkpoint.{uuid.uuid4()}.parquet", top)
    drop_commits_before(log.store, 5)
    restored = load_snapshot(log.store)
    assert_same_snapshot(restored, dataclasses.replace(snap, tombstone_state=Tombstones.of(restored.tombstones)))


def test_foreign_checkpoint_layout_is_conformed(log: LogWriter) -> None:
    """Another engine's field order, extra fields (stats_parsed) and missing optional fields."""
    log.create()
    snap = load_snapshot(log.store)
    add_type = pa.struct([
        ("path", pa.string()),
        ("size", pa.int64()),
        ("partitionValues", pa.map_(pa.string(), pa.string())),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
        ("stats", pa.string()),
        ("stats_parsed", pa.struct([("numRecords", pa.int64())])),
        ("deletionVector", pa.struct([("pathOrInlineDv", pa.string()), ("storageType", pa.string()),
                                      ("cardinality", pa.int64()), ("sizeInBytes", pa.int32())])),
    ])
    adds = pa.array([
        {"path": "x.parquet", "size": 5, "partitionValues": [("part", "a")], "modificationTime": 1,
         "dataChange": True, "stats": '{"numRecords":1}', "stats_parsed": {"numRecords": 1}, "deletionVector": None},
        {"path": "y.parquet", "size": 6, "partitionValues": [("part", "b")], "modificationTime": 2,
         "dataChange": False, "stats": None, "stats_parsed": None,
         "deletionVector": {"pathOrInlineDv": "abc", "storageType": "i", "cardinality": 1, "sizeInBytes": 3}},
    ], add_type)
    ours = build_checkpoint_table(snap)  # protocol + metaData rows
    foreign = pa.table({
        "protocol": pa.concat_arrays([ours.column("protocol").combine_chunks(), pa.nulls(2, ours.schema.field("protocol").type)]),
        "metaData": pa.concat_arrays([ours.column("metaData").combine_chunks(), pa.nulls(2, ours.schema.field("metaData").type)]),
        "add": pa.concat_arrays([pa.nulls(2, add_type), adds]),
    })
    put_parquet(log.store, checkpoint_name(0), foreign)
    state = read_checkpoint(log.store, [f for f in log.store.list_log() if f.kind == "checkpoint"])
    assert state.files.schema.equals(pa.schema(list(ADD_STRUCT)))
    rows = state.files.to_pylist()
    assert [r["path"] for r in rows] == ["x.parquet", "y.parquet"]
    assert rows[1]["deletionVector"] == {"storageType": "i", "pathOrInlineDv": "abc", "offset": None,
                                         "sizeInBytes": 3, "cardinality": 1}
    assert rows[0]["clusteringProvider"] is None and rows[1]["dataChange"] is False


# --------------------------------------------------------------------------------------------
# _last_checkpoint is a hint; corrupt checkpoints fall back
# --------------------------------------------------------------------------------------------


@pytest.fixture
def two_checkpoints(log: LogWriter):
    """Checkpoints at 2 and 4, commits 0..5; returns (log, expected latest snapshot)."""
    build_rich_table(log)
    write_checkpoint(log.store, load_snapshot(log.store, version=2))
    write_checkpoint(log.store, load_snapshot(log.store, version=4))
    log.commit(adds=[add_row("part=z/9.parquet", "z")])
    return log, load_snapshot(log.store)


def _same_files(a, b) -> None:
    assert a.version == b.version and paths(a.files) == paths(b.files) and a.app_txns == b.app_txns


def test_stale_last_checkpoint(two_checkpoints) -> None:
    log, expected = two_checkpoints
    log.store.write_log_file(LAST_CHECKPOINT, orjson.dumps({"version": 2, "size": 1}))
    _same_files(load_snapshot(log.store), expected)


@pytest.mark.parametrize("content", [None, b"{not json", b'{"version": "four"}', b'{"version": 9999}', b"[]"])
def test_missing_or_corrupt_last_checkpoint(two_checkpoints, content) -> None:
    log, expected = two_checkpoints
    if content is None:
        log.store.delete_log_file(LAST_CHECKPOINT)
    else:
        log.store.write_log_file(LAST_CHECKPOINT, content)
    _same_files(load_snapshot(log.store), expected)


def test_last_checkpoint_points_at_missing_checkpoint(two_checkpoints) -> None:
    log, expected = two_checkpoints
    log.store.delete_log_file(checkpoint_name(4))
    drop_commits_before(log.store, 2)  # only the checkpoint at 2 can help now
    _same_files(load_snapshot(log.store), expected)


@pytest.mark.parametrize("garbage", [b"", b"PAR1 this is not parquet", None])
def test_last_checkpoint_points_at_corrupt_checkpoint(two_checkpoints, garbage) -> None:
    log, expected = two_checkpoints
    if garbage is None:  # a valid parquet file that lacks the protocol and metaData rows
        sink = io.BytesIO()
        pq.write_table(pa.table({"add": pa.nulls(1, ADD_STRUCT)}), sink)
        garbage = sink.getvalue()
    log.store.write_log_file(checkpoint_name(4), garbage)
    drop_commits_before(log.store, 2)
    _same_files(load_snapshot(log.store), expected)
    log.store.write_log_file(checkpoint_name(2), b"broken too")
    with pytest.raises(CorruptCheckpointError, match=checkpoint_name(4)):
        load_snapshot(log.store)  # nothing left to fall back to


def test_corrupt_checkpoint_falls_back_to_full_replay(two_checkpoints) -> None:
    log, expected = two_checkpoints
    log.store.write_log_file(checkpoint_name(4), b"garbage")
    log.store.write_log_file(checkpoint_name(2), b"garbage")
    _same_files(load_snapshot(log.store), expected)  # commit 0 is still there


def test_corrupt_checkpoint_without_fallback(log: LogWriter) -> None:
    build_rich_table(log)
    write_checkpoint(log.store, load_snapshot(log.store))
    log.store.write_log_file(checkpoint_name(4), b"PAR1 truncated")
    drop_commits_before(log.store, 4)
    with pytest.raises(CorruptCheckpointError, match=checkpoint_name(4)):
        load_snapshot(log.store)


def test_missing_sidecar_is_a_corrupt_checkpoint(log: LogWriter) -> None:
    build_rich_table(log)
    snap = load_snapshot(log.store)
    lines, _ = _v2_parts(snap)
    lines.append(orjson.dumps({"sidecar": {"path": "nope.parquet", "sizeInBytes": 1, "modificationTime": 1}}))
    name = f"{4:020d}.checkpoint.{uuid.uuid4()}.json"
    log.store.write_log_file(name, b"\n".join(lines))
    drop_commits_before(log.store, 4)
    with pytest.raises(CorruptCheckpointError, match="nope.parquet"):
        load_snapshot(log.store)


def test_time_travel_before_the_oldest_checkpoint(two_checkpoints) -> None:
    log, _ = two_checkpoints
    drop_commits_before(log.store, 3)
    assert load_snapshot(log.store, version=2).files.num_rows == 4  # rebuilt from the checkpoint at 2
    with pytest.raises(TimeTravelError, match="earliest version that can be rebuilt is 2"):
        load_snapshot(log.store, version=1)


def _v2_json_inline(snap, *, extra_adds: int = 0, bad_size: object = None) -> bytes:
    """A V2 JSON checkpoint of ``snap`` with its file actions inline (plus ``extra_adds`` fillers)."""
    from deltatx.txnlog.actions import file_rows

    lines, _ = _v2_parts(snap)
    adds = file_rows(snap.files)
    adds += [add_row(f"part=a/filler-{i}.parquet") for i in range(extra_adds)]
    if bad_size is not None:
        adds[0] = {**adds[0], "size": bad_size}
    lines += [orjson.dumps({"add": a}) for a in adds]
    return b"\n".join(lines) + b"\n"


@pytest.mark.parametrize("extra_adds", [0, 80])  # dict parser and columnar parser
def test_v2_json_checkpoint_with_inline_adds(log: LogWriter, extra_adds: int) -> None:
    build_rich_table(log)
    snap = load_snapshot(log.store)
    log.store.write_log_file(f"{4:020d}.checkpoint.{uuid.uuid4()}.json", _v2_json_inline(snap, extra_adds=extra_adds))
    drop_commits_before(log.store, 5)
    restored = load_snapshot(log.store)
    assert restored.files.num_rows == snap.files.num_rows + extra_adds
    assert set(paths(snap.files)) <= set(paths(restored.files))


@pytest.mark.parametrize("extra_adds", [0, 80])
@pytest.mark.parametrize("bad_size", [1.5, "100"])
def test_v2_json_checkpoint_with_a_bad_add_falls_back(log: LogWriter, extra_adds: int, bad_size) -> None:
    """A wrong-typed field is caught (a float size is not truncated) and the checkpoint is skipped."""
    build_rich_table(log)
    snap = load_snapshot(log.store)
    name = f"{4:020d}.checkpoint.{uuid.uuid4()}.json"
    log.store.write_log_file(name, _v2_json_inline(snap, extra_adds=extra_adds, bad_size=bad_size))
    assert_same_snapshot(load_snapshot(log.store), snap)  # log replay from commit 0 instead
    with pytest.raises(CorruptCheckpointError, match="size"):
        read_checkpoint(log.store, [f for f in log.store.list_log() if f.name == name])
    drop_commits_before(log.store, 5)  # nothing left to fall back to
    with pytest.raises(CorruptCheckpointError, match=name):
        load_snapshot(log.store)


def test_v2_json_checkpoint_with_a_bad_checkpoint_metadata_is_corrupt(log: LogWriter) -> None:
    build_rich_table(log)
    snap = load_snapshot(log.store)
    lines, _ = _v2_parts(snap)
    lines[0] = orjson.dumps({"checkpointMetadata": {"version": "4"}})
    log.store.write_log_file(f"{4:020d}.checkpoint.{uuid.uuid4()}.json", b"\n".join(lines))
    drop_commits_before(log.store, 5)
    with pytest.raises(CorruptCheckpointError, match="checkpointMetadata"):
        load_snapshot(log.store)


def test_sidecar_paths_in_every_uri_form(tmp_path) -> None:
    """PROTOCOL.md: a sidecar path is a URI-encoded path, bare names relative to _sidecars/;
    Hadoop writes absolute ones as file:/abs/path (one slash)."""
    from deltatx.txnlog.checkpoint import sidecar_path
    from deltatx.txnlog.store import open_store

    store = open_store(str(tmp_path / "t"))
    here = f"{store.log_root}/_sidecars/a%20b.parquet"
    assert sidecar_path(store, "a%20b.parquet") == f"{store.log_root}/_sidecars/a b.parquet"
    assert sidecar_path(store, f"file:{here}") == here.replace("%20", " ")
    assert sidecar_path(store, f"file://{here}") == here.replace("%20", " ")
    assert sidecar_path(store, here) == here.replace("%20", " ")
