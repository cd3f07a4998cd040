"""OPTIMIZE (bin-packing) and auto-compaction's partition test, on real local tables."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pytest

import deltatx
from deltatx import errors
from deltatx.tables.ops.optimize import partitions_needing_compaction, plan_bins

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("name", pa.string())])


def rows(ids: list[int], part: int) -> pa.Table:
    return pa.table({"id": ids, "part": [part] * len(ids), "name": [f"n{i}" for i in ids]}, schema=SCHEMA)


def sorted_rows(t: pa.Table) -> list[dict]:
    return sorted(t.to_pylist(), key=lambda r: r["id"])


def commit_actions(uri: str, version: int) -> list[dict]:
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        return [orjson.loads(line) for line in fh.read().splitlines() if line.strip()]


def files_per_partition(t: deltatx.Table) -> dict[str, int]:
    out: dict[str, int] = {}
    for pv in t.files()["partitionValues"].to_pylist():
        key = dict(pv).get("part")
        out[key] = out.get(key, 0) + 1
    return out


@pytest.fixture
def fragmented(table_uri):
    """part 1: 5 small files, part 2: 3 small files, part 3: 1 file."""
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    n = 0
    for part, count in ((1, 5), (2, 3), (3, 1)):
        for _ in range(count):
            t.append(rows(list(range(n, n + 4)), part))
            n += 4
    assert files_per_partition(t) == {"1": 5, "2": 3, "3": 1}
    return t


def test_optimize_compacts_each_partition_and_keeps_data(fragmented, table_uri):
    t = fragmented
    before = sorted_rows(t.to_arrow())
    old_paths = set(t.files()["path"].to_pylist())
    result = t.optimize()
    assert result.operation == "OPTIMIZE"
    assert files_per_partition(t) == {"1": 1, "2": 1, "3": 1}
    assert sorted_rows(t.to_arrow()) == before
    assert sorted_rows(deltatx.Table(table_uri).to_arrow()) == before
    m = result.metrics
    assert m["numRemovedFiles"] == 8 and m["numAddedFiles"] == 2
    assert m["partitionsOptimized"] == 2 and m["totalFilesSkipped"] == 1
    assert m["numRemovedBytes"] > 0 and m["numAddedBytes"] > 0

    actions = commit_actions(table_uri, result.version)
    info = actions[0]["commitInfo"]
    assert info["operation"] == "OPTIMIZE"
    assert info["isolationLevel"] == "SnapshotIsolation"
    assert info["operationMetrics"]["numRemovedFiles"] == "8"
    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    assert len(adds) == 2 and len(removes) == 8
    assert not any(a["dataChange"] for a in adds)
    assert not any(r["dataChange"] for r in removes)
    assert {r["path"] for r in removes} <= old_paths
    assert all(orjson.loads(a["stats"])["numRecords"] in (12, 20) for a in adds)
    # the part-3 file was left alone
    assert len(old_paths & set(t.files()["path"].to_pylist())) == 1


def test_optimize_twice_is_a_no_op(fragmented):
    t = fragmented
    t.optimize()
    version = t.version
    result = t.optimize()
    assert result.version == version
    assert result.metrics["numRemovedFiles"] == 0


def test_optimize_where_only_touches_selected_partitions(fragmented):
    t = fragmented
    t.optimize(where="part = 2")
    assert files_per_partition(t) == {"1": 5, "2": 1, "3": 1}
    with pytest.raises(errors.PredicateError, match="partition columns"):
        t.optimize(where="id > 3")


def test_target_size_bounds_the_bins(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    for i in range(6):
        t.append(rows(list(range(i * 100, i * 100 + 100)), 0))
    sizes = t.files()["size"].to_pylist()
    target = 2 * max(sizes) + 1  # about two files per bin
    before = sorted_rows(t.to_arrow())
    result = t.optimize(target_size=target)
    # bins are cut where the running size crosses a multiple of the target: 2-3 files each,
    # and a last bin of one file would be left as it is
    assert result.metrics["numRemovedFiles"] >= 5
    assert result.metrics["numAddedFiles"] == 2
    assert t.files().num_rows <= 3
    assert sorted_rows(t.to_arrow()) == before
    # files at or above the target size are never rewritten
    assert t.optimize(target_size=1).metrics["numRemovedFiles"] == 0


def test_plan_bins_is_per_partition():
    files = pa.table({
        "size": pa.array([10, 10, 10, 10, 50], pa.int64()),
        "partitionValues": pa.array(
            [[("p", "a")], [("p", "b")], [("p", "a")], [("p", "b")], [("p", "a")]],
            pa.map_(pa.string(), pa.string()),
        ),
        "path": ["a1", "b1", "a2", "b2", "big"],
    })
    planned = plan_bins(files, ["p"], target_size=25)
    bins = {}
    for path, b in zip(planned["path"].to_pylist(), planned["bin"].to_pylist()):
        bins.setdefault(b, set()).add(path)
    assert sorted(map(sorted, bins.values())) == [["a1", "a2"], ["b1", "b2"]]


def test_concurrent_append_does_not_conflict_with_optimize(fragmented, table_uri):
    t = fragmented
    tx = t.transaction()
    tx.optimize()
    other = deltatx.Table(table_uri)
    other.append(rows([1000], 1))
    result = tx.commit()
    assert result.conflicts_resolved == 1
    fresh = deltatx.Table(table_uri)
    assert 1000 in fresh.to_arrow()["id"].to_pylist()
    assert fresh.to_arrow().num_rows == 37


def test_concurrent_delete_of_a_compacted_file_conflicts(fragmented, table_uri):
    t = fragmented
    tx = t.transaction()
    tx.optimize(where="part = 1")
    deltatx.Table(table_uri).delete("id = 0")
    with pytest.raises(errors.ConcurrentDeleteReadException):
        tx.commit()


def test_concurrent_delete_elsewhere_does_not_conflict(fragmented, table_uri):
    t = fragmented
    tx = t.transaction()
    tx.optimize(where="part = 1")
    deltatx.Table(table_uri).delete("part = 3")
    tx.commit()
    assert files_per_partition(deltatx.Table(table_uri)) == {"1": 1, "2": 3}


def test_optimize_without_where_only_depends_on_the_files_it_compacts(fragmented, table_uri):
    t = fragmented
    tx = t.transaction()
    tx.optimize()
    deltatx.Table(table_uri).delete("part = 3")  # removes the one file OPTIMIZE leaves alone
    tx.commit()
    assert files_per_partition(deltatx.Table(table_uri)) == {"1": 1, "2": 1}


def test_partitions_needing_compaction(fragmented, table_uri):
    snap = fragmented.snapshot
    assert partitions_needing_compaction(snap, 10) is None
    assert partitions_needing_compaction(snap, 4) == "part = 1"
    pred = partitions_needing_compaction(snap, 2)
    assert set(pred.split(" OR ")) == {"part = 1", "part = 2"}
    # the predicate is valid SQL for this table and selects exactly those partitions
    selected = fragmented.to_arrow(where=pred)
    assert set(selected["part"].to_pylist()) == {1, 2}


def test_partitions_needing_compaction_types_and_unpartitioned(tmp_path):
    schema = pa.schema([("id", pa.int64()), ("d", pa.date32()), ("s", pa.string())])
    t = deltatx.create_table(str(tmp_path / "typed"), schema, partition_by=["d", "s"])
    import datetime as dt

    for _ in range(3):
        t.append(pa.table({"id": [1], "d": [dt.date(2024, 1, 2)], "s": ["it's"]}, schema=schema))
        t.append(pa.table({"id": [2], "d": [None], "s": ["x"]}, schema=schema))
    pred = partitions_needing_compaction(t.snapshot, 2)
    assert pred is not None
    assert t.to_arrow(where=pred).num_rows == 6
    t.optimize(where=pred)
    assert t.files().num_rows == 2

    flat = deltatx.create_table(str(tmp_path / "flat"), SCHEMA)
    for i in range(3):
        flat.append(rows([i], 0))
    assert partitions_needing_compaction(flat.snapshot, 2) == "true"
    assert partitions_needing_compaction(flat.snapshot, 3) is None
    flat.optimize(where="true")
    assert flat.files().num_rows == 1


def test_auto_compaction_after_commit(table_uri):
    t = deltatx.create_table(
        table_uri, SCHEMA, partition_by=["part"],
        properties={"delta.autoOptimize.autoCompact": "true", "deltatx.autoCompact.minNumFiles": "3"},
    )
    for i in range(4):
        t.append(rows([i], 1))
    assert files_per_partition(t) == {"1": 1}
    ops = [h["operation"] for h in t.history()]
    assert "OPTIMIZE" in ops
    assert sorted(t.to_arrow()["id"].to_pylist()) == [0, 1, 2, 3]
    auto = next(h for h in t.history() if h["operation"] == "OPTIMIZE")["operationParameters"]
    assert auto["auto"] == "true" and auto["zOrderBy"] == "[]"  # Delta's parameters of an auto compaction
    t.append(rows([9], 2))
    t.append(rows([10], 2))
    manual = t.optimize(where="part = 2")
    params = t.history(1)[0]["operationParameters"]
    assert manual.operation == "OPTIMIZE" and params["auto"] == "false" and params["zOrderBy"] == "[]"
