"""deltatx ↔ deltalake (delta-rs), both directions, on local disk.

* Tables written by deltatx (partitioned and not; appends, replaceWhere, delete, update, a
  checkpoint every 3 commits) read identically with deltalake, at the latest version and at every
  past version, and from a checkpoint alone once the commits before it are gone.
* Tables written by deltalake (partitioned, checkpointed, deleted from, updated, compacted) read
  identically with deltatx at every version; deltatx appends to them and deltalake reads the result.
* The two clients append alternately to one table and both always see every row; their histories
  agree.

deltalake is read through ``pyarrow.table(dt.scan())`` only (see interop_helpers).
"""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

import deltatx
from interop_helpers import (
    SCHEMA,
    Model,
    assert_has_checkpoint,
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
    copy = str(tmp_path / "copy")
    shutil.copytree(uri, copy)
    checkpoint = assert_has_checkpoint(copy)
    log = os.path.join(copy, "_delta_log")
    for name in os.listdir(log):
        if name.endswith(".json") and int(name.split(".")[0]) <= checkpoint:
            os.remove(os.path.join(log, name))
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
    log = os.path.join(uri, "_delta_log")
    for name in os.listdir(log):
        if name.endswith(".json") and int(name.split(".")[0]) < checkpoint:
            os.remove(os.path.join(log, name))
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
    model = Model()
    model.record(SCHEMA.empty_table(), 0)
    for round_no in range(6):
        ours = rows(round_no * 100, 7, tag="dtx")
        # `t` is stale after deltalake's commit: its append must land on top, not overwrite it.
        res = t.append(ours)
        model.append(ours, res.version)
        theirs = rows(round_no * 100 + 50, 5, tag="dl")
        write_deltalake(uri, theirs, mode="append")
        model.append(theirs, DeltaTable(uri).version())

        assert_same_rows(read_deltalake(uri), model.current, f"deltalake round {round_no}")
        assert_same_rows(deltatx.Table(uri).to_arrow(), model.current, f"deltatx (fresh) round {round_no}")
        assert_same_rows(t.refresh().to_arrow(), model.current, f"deltatx (refreshed) round {round_no}")
    assert t.version == DeltaTable(uri).version() == 12
    versions = [h["version"] for h in t.history()]
    assert versions == [h["version"] for h in DeltaTable(uri).history()] == list(range(12, -1, -1))
    for version in (3, 8):
        assert_same_rows(read_deltalake(uri, version=version), model.versions[version], f"deltalake v{version}")
        assert_same_rows(deltatx.Table(uri, version=version).to_arrow(), model.versions[version],
                         f"deltatx v{version}")
