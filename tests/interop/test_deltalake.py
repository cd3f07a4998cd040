"""deltatx ↔ deltalake (delta-rs), both directions, on local disk.

* Tables written by deltatx (partitioned and not; appends, replaceWhere, delete, update, a
  checkpoint every 3 commits) read identically with deltalake, at the latest version and at every
  past version, and from a checkpoint alone once the commits before it are gone.
* Tables written by deltalake (partitioned, checkpointed, deleted from, updated, compacted) read
  identically with deltatx at every version; deltatx appends to them and deltalake reads the result.
* The two clients append alternately to one table and both always see every row; their histories
  agree.
* MERGE / OPTIMIZE / RESTORE / VACUUM by either client are read by the other; idempotent-write ids
  (txn actions) and schema evolution carry across; each client's conflict checker reads the other's
  commits (deltatx's DELETE against delta-rs appends and deletes, and the reverse).

deltalake is read through ``pyarrow.table(dt.scan())`` only (see interop_helpers).
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

import deltatx
from deltatx import errors
from interop_helpers import (
    SCHEMA,
    Model,
    assert_has_checkpoint,
    copy_with_checkpoint_only,
    drop_commits_up_to,
    assert_same_rows,
    build_deltatx_table,
    read_deltalake,
    rows,
)


@pytest.fixture(scope="module", params=[True, False], ids=["partitioned", "unpartitioned"])
def deltatx_written(request, tmp_path_factory) -> tuple[str, Model, bool]:
    uri = str(tmp_path_factory.mktemp("dtx") / "table")
    return uri, build_deltatx_table(uri, partitioned=request.param), request.param


# ------------------------------------------------------------------------------ deltatx → deltalake
def test_deltalake_reads_latest(deltatx_written):
    uri, model, partitioned = deltatx_written
    ours = deltatx.Table(uri)
    dt = DeltaTable(uri)
    assert dt.version() == ours.version == len(model.versions) - 1
    assert dt.metadata().partition_columns == (["part"] if partitioned else [])
    assert dt.metadata().id == ours.metadata.id
    assert dt.metadata().configuration.get("delta.checkpointInterval") == "3"
    assert len(dt.file_uris()) == ours.files().num_rows
    assert sorted(os.path.relpath(u, uri) for u in dt.file_uris()) == sorted(ours.files()["path"].to_pylist())
    assert_same_rows(pa.table(dt.scan()), model.current, "deltalake latest")
    assert_same_rows(ours.to_arrow(), model.current, "deltatx latest")


def test_deltalake_time_travel_every_version(deltatx_written):
    uri, model, _ = deltatx_written
    assert assert_has_checkpoint(uri) >= 3
    for version, expected in enumerate(model.versions):
        assert_same_rows(read_deltalake(uri, version=version), expected, f"deltalake v{version}")


def test_deltalake_stats_match_ours(deltatx_written):
    """delta-rs parses our per-file stats into the same record counts and bounds."""
    uri, _, _ = deltatx_written
    ours = deltatx.Table(uri).files()
    adds = pa.table(DeltaTable(uri).get_add_actions(flatten=True))
    theirs = {p: (n, lo, hi) for p, n, lo, hi in zip(
        adds["path"].to_pylist(), adds["num_records"].to_pylist(),
        adds["min.id"].to_pylist(), adds["max.id"].to_pylist())}
    assert len(theirs) == ours.num_rows
    for path in ours["path"].to_pylist():
        n, lo, hi = theirs[path]
        ids = pq.read_table(os.path.join(uri, path), columns=["id"])["id"]
        assert (n, lo, hi) == (len(ids), pc.min(ids).as_py(), pc.max(ids).as_py()), path


def test_deltalake_reads_from_checkpoint_alone(deltatx_written, tmp_path):
    """Drop every commit up to the newest checkpoint: the checkpoint must carry the whole state."""
    uri, model, _ = deltatx_written
    copy = copy_with_checkpoint_only(uri, str(tmp_path / "copy"))
    checkpoint = assert_has_checkpoint(copy)
    assert_same_rows(read_deltalake(copy), model.current, "deltalake from checkpoint")
    assert_same_rows(deltatx.Table(copy).to_arrow(), model.current, "deltatx from checkpoint")
    if checkpoint < len(model.versions) - 1:
        assert_same_rows(read_deltalake(copy, version=checkpoint), model.versions[checkpoint],
                         "deltalake at the checkpoint version")


def test_histories_agree_on_deltatx_table(deltatx_written):
    uri, _, _ = deltatx_written
    theirs = DeltaTable(uri).history()
    ours = deltatx.Table(uri).history()
    assert [h["version"] for h in theirs] == [h["version"] for h in ours]
    assert [h["operation"] for h in theirs] == [h["operation"] for h in ours]
    ops = {h["operation"] for h in ours}
    assert {"CREATE TABLE", "WRITE", "DELETE", "UPDATE"} <= ops


# ------------------------------------------------------------------------------ deltalake → deltatx
def _deltalake_scenario(uri: str, partitioned: bool) -> Model:
    """Write with deltalake: appends, checkpoint, delete, update, replaceWhere, compaction."""
    model = Model()
    part_by = ["part"] if partitioned else None
    first = rows(0, 40)
    write_deltalake(uri, first, partition_by=part_by)
    model.record(first, 0)
    for start in (40, 80):
        batch = rows(start, 40)
        write_deltalake(uri, batch, mode="append")
        model.append(batch, DeltaTable(uri).version())
    dt = DeltaTable(uri)
    dt.create_checkpoint()
    dt.delete("id >= 20 AND id < 50")
    model.delete(lambda tb: pc.and_(pc.greater_equal(tb["id"], 20), pc.less(tb["id"], 50)), dt.version())
    dt.update(updates={"value": "value + 100"}, predicate="part = 0")
    model.update(lambda tb: pc.equal(tb["part"], 0), "value", lambda tb: pc.add(tb["value"], 100.0),
                 dt.version())
    fresh = rows(500, 10, part=2, tag="dl")
    write_deltalake(uri, fresh, mode="overwrite", predicate="part = 2")
    model.replace_where(lambda tb: pc.equal(tb["part"], 2), fresh, DeltaTable(uri).version())
    dt = DeltaTable(uri)
    before = dt.version()
    dt.optimize.compact()  # makes no commit when there is nothing to bin-pack
    if dt.version() != before:
        model.record(model.current, dt.version())
    dt.create_checkpoint()
    return model


@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_deltatx_reads_deltalake_table_and_appends(tmp_path, partitioned):
    uri = str(tmp_path / "dl")
    model = _deltalake_scenario(uri, partitioned)
    ours = deltatx.Table(uri)
    assert ours.version == DeltaTable(uri).version() == len(model.versions) - 1
    assert ours.partition_columns == (["part"] if partitioned else [])
    assert ours.schema.names == SCHEMA.names
    for version, expected in enumerate(model.versions):
        assert_same_rows(deltatx.Table(uri, version=version).to_arrow(), expected, f"deltatx v{version}")
    assert_same_rows(ours.to_arrow(where="part = 0"),
                     model.current.filter(pc.equal(model.current["part"], 0)), "deltatx pruned read")

    batch = rows(3000, 15, tag="dtx")
    res = ours.append(batch)
    model.append(batch, res.version)
    assert DeltaTable(uri).version() == res.version
    assert_same_rows(read_deltalake(uri), model.current, "deltalake after deltatx append")

    res = ours.delete(where="id >= 3005")
    model.delete(lambda tb: pc.greater_equal(tb["id"], 3005), res.version)
    res = ours.update(where="part = 1", set={"name": "'upd'"})
    model.update(lambda tb: pc.equal(tb["part"], 1), "name", lambda tb: pa.array(["upd"] * tb.num_rows),
                 res.version)
    assert_same_rows(read_deltalake(uri), model.current, "deltalake after deltatx delete+update")
    assert_same_rows(read_deltalake(uri, version=res.version - 2), model.versions[res.version - 2],
                     "deltalake time travel over mixed writers")


def test_deltatx_reads_deltalake_checkpoint_alone(tmp_path):
    uri = str(tmp_path / "dl")
    model = _deltalake_scenario(uri, partitioned=True)
    checkpoint = assert_has_checkpoint(uri)
    assert checkpoint == len(model.versions) - 1
    drop_commits_up_to(uri, checkpoint - 1)
    t = deltatx.Table(uri)
    assert t.version == checkpoint
    assert_same_rows(t.to_arrow(), model.current, "deltatx from a deltalake checkpoint")
    batch = rows(7000, 5)
    model.append(batch, t.append(batch).version)
    assert_same_rows(read_deltalake(uri), model.current, "deltalake after append on checkpoint-only log")


def test_histories_agree_on_deltalake_table(tmp_path):
    uri = str(tmp_path / "dl")
    _deltalake_scenario(uri, partitioned=False)
    theirs = DeltaTable(uri).history()
    ours = deltatx.Table(uri).history()
    assert [h["version"] for h in ours] == [h["version"] for h in theirs]
    assert [h["operation"] for h in ours] == [h["operation"] for h in theirs]
    assert {"WRITE", "DELETE", "UPDATE"} <= {h["operation"] for h in ours}
    assert [h["version"] for h in deltatx.Table(uri).history(limit=2)] == [theirs[0]["version"], theirs[1]["version"]]


# ------------------------------------------------------------------------------ both, alternately
@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_alternating_appends(tmp_path, partitioned):
    """deltalake and deltatx take turns appending; each round, both see every row so far."""
    uri = str(tmp_path / "shared")
    t = deltatx.create_table(uri, SCHEMA, partition_by=["part"] if partitioned else None)
    reader = deltatx.Table(uri)  # a long-lived reader that catches up incrementally
    model = Model()
    model.record(SCHEMA.empty_table(), 0)
    for round_no in range(6):
        ours = rows(round_no * 100, 7, tag="dtx")
        # `t` is stale after deltalake's commit: its append must land on top, not overwrite it.
        # A one-shot write starts at the latest version, so it sees deltalake's commit first.
        res = t.append(ours)
        model.append(ours, res.version)
        assert res.attempts == 1 and res.read_version == res.version - 1
        theirs = rows(round_no * 100 + 50, 5, tag="dl")
        write_deltalake(uri, theirs, mode="append")
        model.append(theirs, DeltaTable(uri).version())

        assert_same_rows(read_deltalake(uri), model.current, f"deltalake round {round_no}")
        assert_same_rows(deltatx.Table(uri).to_arrow(), model.current, f"deltatx (fresh) round {round_no}")
        assert_same_rows(reader.refresh().to_arrow(), model.current, f"deltatx (refreshed) round {round_no}")
    assert reader.version == DeltaTable(uri).version() == 12
    versions = [h["version"] for h in t.history()]
    assert versions == [h["version"] for h in DeltaTable(uri).history()] == list(range(12, -1, -1))
    for version in (3, 8):
        assert_same_rows(read_deltalake(uri, version=version), model.versions[version], f"deltalake v{version}")
        assert_same_rows(deltatx.Table(uri, version=version).to_arrow(), model.versions[version],
                         f"deltatx v{version}")


# ------------------------------------------------------------------------------ other operations
def test_merge_optimize_restore_vacuum_across_clients(tmp_path):
    """deltatx MERGE / OPTIMIZE / RESTORE / VACUUM read by deltalake; deltalake MERGE and VACUUM
    on the deltatx table read by deltatx."""
    uri = str(tmp_path / "ops")
    t = deltatx.create_table(uri, SCHEMA, partition_by=["part"])
    model = Model()
    model.record(SCHEMA.empty_table(), 0)
    for start in (0, 20, 40):
        batch = rows(start, 20)
        model.append(batch, t.append(batch).version)

    def upsert(source: pa.Table, version: int) -> None:
        cur = model.current
        kept = cur.filter(pc.invert(pc.is_in(cur["id"], value_set=source["id"])))
        model.record(pa.concat_tables([kept, source]), version)

    # ids 30..49 match (updated), 60..64 are new (inserted)
    source = pa.concat_tables([rows(30, 20, tag="m"), rows(60, 5, tag="m")])
    res = t.merge(source, on="t.id = s.id").when_matched_update_all().when_not_matched_insert_all().execute()
    assert res.operation == "MERGE"
    upsert(source, res.version)
    assert_same_rows(read_deltalake(uri), model.current, "deltalake after deltatx MERGE")

    res = t.optimize()
    assert res.operation == "OPTIMIZE"
    model.record(model.current, res.version)
    assert len(DeltaTable(uri).file_uris()) == t.files().num_rows == 3
    assert_same_rows(read_deltalake(uri), model.current, "deltalake after deltatx OPTIMIZE")

    res = t.restore(version=2)
    model.record(model.versions[2], res.version)
    assert_same_rows(read_deltalake(uri), model.current, "deltalake after deltatx RESTORE")

    dt = DeltaTable(uri)
    source = rows(5, 10, tag="dlm")
    dt.merge(source, predicate="t.id = s.id", source_alias="s", target_alias="t") \
        .when_matched_update_all().when_not_matched_insert_all().execute()
    upsert(source, DeltaTable(uri).version())
    assert_same_rows(t.refresh().to_arrow(), model.current, "deltatx after deltalake MERGE")
    assert_same_rows(read_deltalake(uri, version=res.version), model.versions[res.version],
                     "deltalake at deltatx's RESTORE version")

    removed = t.vacuum(retention_hours=0, enforce_retention_duration=False)
    assert removed, "files removed by MERGE/OPTIMIZE/RESTORE are unreferenced now"
    assert_same_rows(read_deltalake(uri), model.current, "deltalake after deltatx VACUUM")
    DeltaTable(uri).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert_same_rows(deltatx.Table(uri).to_arrow(), model.current, "deltatx after deltalake VACUUM")


def test_app_transactions_shared_with_deltalake(tmp_path):
    """Idempotent-write ids (txn actions) written by one client are honoured by the other."""
    uri = str(tmp_path / "idem")
    write_deltalake(uri, rows(0, 3), commit_properties=CommitProperties(app_transactions=[Transaction("job", 5)]))
    t = deltatx.Table(uri)
    assert t.append(rows(3, 3), app_id="job", app_version=5).skipped
    assert t.append(rows(3, 3), app_id="job", app_version=4).skipped
    res = t.append(rows(3, 3), app_id="job", app_version=6)
    assert not res.skipped and res.version == 1
    assert DeltaTable(uri).transaction_version("job") == 6
    assert_same_rows(read_deltalake(uri), rows(0, 6), "deltalake after idempotent appends")


@pytest.mark.parametrize("writer", ["deltatx", "deltalake"])
def test_schema_evolution_across_clients(tmp_path, writer):
    """A column added by one client (merge schema) is read as null for old rows by the other,
    which then keeps appending with the wider schema."""
    uri = str(tmp_path / "evo")
    narrow = pa.schema([("id", pa.int64()), ("p", pa.string())])
    wide = narrow.append(pa.field("extra", pa.float64()))
    first = pa.table({"id": [1, 2], "p": ["a", "b"]}, schema=narrow)
    second = pa.table({"id": [3], "p": ["a"], "extra": [1.5]}, schema=wide)
    third = pa.table({"id": [4], "p": ["c"], "extra": [2.5]}, schema=wide)
    if writer == "deltatx":
        t = deltatx.create_table(uri, narrow, partition_by=["p"])
        t.append(first)
        t.append(second, schema_mode="merge")
        write_deltalake(uri, third, mode="append")
    else:
        write_deltalake(uri, first, partition_by=["p"])
        write_deltalake(uri, second, mode="append", schema_mode="merge")
        deltatx.Table(uri).append(third)
    expected = pa.table({"id": [1, 2, 3, 4], "p": ["a", "b", "a", "c"], "extra": [None, None, 1.5, 2.5]},
                        schema=wide)
    assert_same_rows(deltatx.Table(uri).to_arrow(), expected, "deltatx")
    assert_same_rows(read_deltalake(uri), expected, "deltalake")
    narrow_version = 1 if writer == "deltatx" else 0
    assert_same_rows(deltatx.Table(uri, version=narrow_version).to_arrow(), first, "deltatx before evolution")


# ------------------------------------------------------------------------------ conflicts across clients
@pytest.mark.parametrize("winner, outcome", [
    ("deltalake append to part 1", None),
    # delta-rs writes no commitInfo.isBlindAppend, so its append must count as a possible read-write
    ("deltalake append to part 0", errors.ConcurrentAppendException),
    # delta-rs's DELETE rewrites the file: its add into part 0 is what Delta's check order finds first
    ("deltalake delete in part 0", errors.ConcurrentAppendException),
])
def test_deltatx_delete_loses_to_deltalake_commit(tmp_path, winner, outcome):
    """A deltatx DELETE of part 0 staged at v1, deltalake commits v2 first (WriteSerializable)."""
    uri = str(tmp_path / "c")
    t = deltatx.create_table(uri, SCHEMA, partition_by=["part"])
    t.append(rows(0, 9))
    tx = t.transaction()
    tx.delete(where="part = 0")
    if winner == "deltalake append to part 1":
        write_deltalake(uri, rows(100, 3, part=1), mode="append")
    elif winner == "deltalake append to part 0":
        write_deltalake(uri, rows(100, 3, part=0), mode="append")
    else:
        DeltaTable(uri).delete("part = 0 AND id = 3")
    if outcome is None:
        res = tx.commit()
        assert (res.version, res.attempts, res.conflicts_resolved) == (3, 2, 1)
        expected = pa.concat_tables([rows(0, 9), rows(100, 3, part=1)])
        expected = expected.filter(pc.not_equal(expected["part"], 0))
    else:
        with pytest.raises(outcome):
            tx.commit()
        assert DeltaTable(uri).version() == 2
        expected = read_deltalake(uri, version=2)
    assert_same_rows(read_deltalake(uri), expected, f"deltalake after {winner}")
    assert_same_rows(deltatx.Table(uri).to_arrow(), expected, f"deltatx after {winner}")


def test_deltalake_conflict_checker_reads_our_commits(tmp_path):
    """A stale deltalake DELETE commits over our blind append to another partition, and fails
    with CommitFailedError over our DELETE of the files it read."""
    from deltalake.exceptions import CommitFailedError

    uri = str(tmp_path / "c")
    t = deltatx.create_table(uri, SCHEMA, partition_by=["part"])
    t.append(rows(0, 9))  # v1
    stale = DeltaTable(uri)
    t.append(rows(100, 3, part=1))  # v2, isBlindAppend=true
    stale.delete("part = 0 AND id = 3")  # v3
    assert stale.version() == 3
    expected = pa.concat_tables([rows(0, 9), rows(100, 3, part=1)])
    expected = expected.filter(pc.not_equal(expected["id"], 3))
    assert_same_rows(deltatx.Table(uri).to_arrow(), expected, "deltatx after deltalake's rebased DELETE")

    stale = DeltaTable(uri)
    t.refresh().delete(where="part = 0")  # v4 removes the file `stale` is about to rewrite
    with pytest.raises(CommitFailedError, match="deleted data"):
        stale.delete("part = 0 AND id = 6")
    assert DeltaTable(uri).version() == 4
    assert_same_rows(read_deltalake(uri), expected.filter(pc.not_equal(expected["part"], 0)), "deltalake")


def test_filters_on_string_columns_read_files_deltalake_rewrote(tmp_path):
    """deltalake's DELETE rewrites a file and stores its string column as Arrow ``string_view``.
    Arrow's scan binds a pushed filter to that file's own type and has no kernel comparing it with
    the table's string: deltatx's filtered reads (``s = 'b'``, ``s > 'a'``, IN) failed there."""
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}), mode="append")
    DeltaTable(uri).delete("id = 1")
    views = [f for f in os.listdir(uri) if f.endswith(".parquet")
             and pa.types.is_string_view(pq.read_schema(os.path.join(uri, f)).field("s").type)]
    if not views:  # a deltalake that writes plain strings: store the rewritten file as one ourselves
        [name] = [a["path"] for a in DeltaTable(uri).get_add_actions(flatten=True).to_pylist()]
        data = pq.read_table(os.path.join(uri, name))
        pq.write_table(data.cast(pa.schema([("id", data.schema.field("id").type), ("s", pa.string_view())])),
                       os.path.join(uri, name))
        assert pa.types.is_string_view(pq.read_schema(os.path.join(uri, name)).field("s").type)
    t = deltatx.Table(uri)
    assert t.to_arrow(where="s = 'b'").to_pylist() == [{"id": 2, "s": "b"}]
    assert sorted(t.to_arrow(where="s > 'a'")["id"].to_pylist()) == [2, 3]
    assert sorted(t.to_arrow(where="s IN ('b', 'c')")["id"].to_pylist()) == [2, 3]
    from deltatx.io.reader import iter_batches  # the streamed read (Spark's reader) too

    streamed = iter_batches(t.store, t.files(), t.schema, [], filter=pc.field("s") == "c")
    assert pa.Table.from_batches(list(streamed)).to_pylist() == [{"id": 3, "s": "c"}]
    assert t.delete(where="s = 'b'").metrics["numDeletedRows"] == 1
    assert t.to_arrow().to_pylist() == [{"id": 3, "s": "c"}]
