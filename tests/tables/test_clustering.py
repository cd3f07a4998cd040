"""Liquid clustering: CLUSTER BY (create / alter / none), the clustering OPTIMIZE, its pruning,
its incremental rule, typed refusals that write nothing, concurrency and deltalake interop."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import orjson
import pyarrow as pa
import pytest

import deltatx
from deltatx import errors
from deltatx.expr import files_matching, parse_predicate
from deltatx.tables.ops.clustering import OVERLAP_BUDGET, plan_clustering

SCHEMA = pa.schema([("x", pa.int64()), ("y", pa.int64()), ("name", pa.string())])


def rows(x, y) -> pa.Table:
    x, y = np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64)
    return pa.table({"x": x, "y": y, "name": [f"n{v}" for v in x.tolist()]}, schema=SCHEMA)


def random_rows(seed: int, n: int, low: int = 0, high: int = 1_000_000) -> pa.Table:
    rng = np.random.default_rng(seed)
    return rows(rng.integers(low, high, n), rng.integers(0, 1_000_000, n))


def commit_actions(uri: str, version: int) -> list[dict]:
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        return [orjson.loads(line) for line in fh.read().splitlines() if line.strip()]


def sorted_rows(t: pa.Table) -> list[tuple]:
    return sorted(zip(t.column("x").to_pylist(), t.column("y").to_pylist(), t.column("name").to_pylist()))


def files_read(table: deltatx.Table, where: str) -> int:
    """How many files the pruning API keeps for ``where`` (the files a read would open)."""
    files = table.files()
    mask = files_matching(parse_predicate(where), files, table.schema, table.partition_columns)
    return sum(mask.to_pylist())


def data_files(uri: str) -> set[str]:
    return {n for n in os.listdir(uri) if n.endswith(".parquet")}


def snapshot_state(uri: str) -> tuple[int, set[str]]:
    return deltatx.Table(uri).version, data_files(uri)


# --------------------------------------------------------------------------------------------
# CLUSTER BY: the feature, the domain, the history
# --------------------------------------------------------------------------------------------


def test_create_table_cluster_by_writes_the_feature_and_the_domain(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x", "y"], properties={"delta.appendOnly": "false"})
    assert t.clustering_columns == ["x", "y"]
    assert {"clustering", "domainMetadata"} <= set(t.protocol.writer_features)
    assert t.protocol.min_reader_version == 1 and t.protocol.min_writer_version == 7
    actions = commit_actions(table_uri, 0)
    [domain] = [a["domainMetadata"] for a in actions if "domainMetadata" in a]
    assert domain["domain"] == "delta.clustering" and domain["removed"] is False
    assert json.loads(domain["configuration"]) == {"clusteringColumns": [["x"], ["y"]]}
    [meta] = [a["metaData"] for a in actions if "metaData" in a]
    assert meta["configuration"] == {"delta.appendOnly": "false"}  # the feature request is not stored
    assert actions[0]["commitInfo"]["operationParameters"]["clusterBy"] == '["x","y"]'
    assert deltatx.Table(table_uri).clustering_columns == ["x", "y"]
    unclustered = deltatx.create_table(table_uri + "_plain", SCHEMA)
    assert unclustered.clustering_columns is None and "clusterBy" not in \
        commit_actions(table_uri + "_plain", 0)[0]["commitInfo"]["operationParameters"]


def test_cluster_by_later_upgrades_the_protocol_and_records_cluster_by(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(random_rows(0, 100))
    before = sorted_rows(t.to_arrow())
    assert t.protocol.min_writer_version == 2
    result = t.cluster_by(["y"])
    assert result.operation == "CLUSTER BY"
    assert t.clustering_columns == ["y"] and "clustering" in t.protocol.writer_features
    info = commit_actions(table_uri, result.version)[0]["commitInfo"]
    assert info["operationParameters"] == {"oldClusteringColumns": "[]", "newClusteringColumns": '["y"]'}
    changed = t.cluster_by(["x", "y"])
    params = commit_actions(table_uri, changed.version)[0]["commitInfo"]["operationParameters"]
    assert params == {"oldClusteringColumns": '["y"]', "newClusteringColumns": '["x","y"]'}
    assert not any("protocol" in a for a in commit_actions(table_uri, changed.version))  # upgraded once
    assert sorted_rows(deltatx.Table(table_uri).to_arrow()) == before


def test_cluster_by_none_keeps_the_domain_with_no_columns_and_optimize_compacts(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x"])
    for seed in range(3):
        t.append(random_rows(seed, 50))
    t.cluster_by(None)
    assert t.clustering_columns == []
    assert json.loads(t.snapshot.domains["delta.clustering"].configuration) == {"clusteringColumns": []}
    result = t.optimize()
    assert result.metrics["numRemovedFiles"] == 3 and t.files().num_rows == 1
    assert t.files()["clusteringProvider"].to_pylist() == [None]  # plain compaction, not clustering


def test_cluster_by_none_on_an_unclustered_table_commits_nothing(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    result = t.cluster_by(None)
    assert result.version == 0 and deltatx.Table(table_uri).version == 0
    assert t.clustering_columns is None


def test_nested_column_can_be_a_clustering_column(table_uri):
    schema = pa.schema([("id", pa.int64()), ("s", pa.struct([("a", pa.int64()), ("b", pa.string())]))])
    t = deltatx.create_table(table_uri, schema, cluster_by=["s.a"], properties={"delta.targetFileSize": "2000"})
    rng = np.random.default_rng(4)
    for _ in range(3):
        a = rng.integers(0, 1000, 300)
        t.append(pa.table({"id": a, "s": [{"a": int(v), "b": str(v)} for v in a]}, schema=schema))
    assert json.loads(t.snapshot.domains["delta.clustering"].configuration) == {"clusteringColumns": [["s", "a"]]}
    before = sorted(t.to_arrow().column("id").to_pylist())
    t.optimize()
    assert sorted(t.to_arrow().column("id").to_pylist()) == before
    assert set(t.files()["clusteringProvider"].to_pylist()) == {"liquid"}
    assert files_read(t, "s.a = 500") <= 2 < t.files().num_rows


# --------------------------------------------------------------------------------------------
# Typed refusals: nothing is written
# --------------------------------------------------------------------------------------------


BAD_CLUSTER_BY = [
    (["missing"], "not in the table schema"),
    (["x", "x"], "named twice"),
    (["x", "y", "name", "x2", "y2"], "at most 4"),
    (["flag"], "no min/max statistics"),
    (["late"], "gets no statistics"),
    ("", "list of column names"),
    ([3], "list of column names"),
]
WIDE = pa.schema([("x", pa.int64()), ("y", pa.int64()), ("name", pa.string()), ("x2", pa.int64()),
                  ("y2", pa.int64()), ("flag", pa.bool_()), ("late", pa.int64())])
FEW_STATS = {"delta.dataSkippingNumIndexedCols": "6"}  # "late" is the 7th column: no stats


@pytest.mark.parametrize("columns,message", BAD_CLUSTER_BY)
def test_create_table_refuses_bad_clustering_columns_and_creates_nothing(table_uri, columns, message):
    with pytest.raises(errors.ClusteringError, match=message):
        deltatx.create_table(table_uri, WIDE, cluster_by=columns, properties=FEW_STATS)
    assert not os.path.exists(os.path.join(table_uri, "_delta_log")) or not os.listdir(
        os.path.join(table_uri, "_delta_log"))


@pytest.mark.parametrize("columns,message", BAD_CLUSTER_BY)
def test_cluster_by_refuses_bad_columns_and_writes_nothing(table_uri, columns, message):
    t = deltatx.create_table(table_uri, WIDE, properties=FEW_STATS)
    t.append(pa.table({n: [1] if n != "name" and n != "flag" else (["a"] if n == "name" else [True])
                       for n in WIDE.names}, schema=WIDE))
    state = snapshot_state(table_uri)
    with pytest.raises(errors.ClusteringError, match=message):
        t.cluster_by(columns)
    assert snapshot_state(table_uri) == state
    assert deltatx.Table(table_uri).clustering_columns is None


def test_partitioned_tables_cannot_be_clustered(table_uri):
    with pytest.raises(errors.ClusteringError, match="partitioned"):
        deltatx.create_table(table_uri, SCHEMA, partition_by=["name"], cluster_by=["x"])
    assert not os.path.exists(os.path.join(table_uri, "_delta_log"))
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["name"])
    t.append(rows([1, 2], [3, 4]))
    state = snapshot_state(table_uri)
    with pytest.raises(errors.ClusteringError, match="partitioned"):
        t.cluster_by(["x"])
    assert snapshot_state(table_uri) == state


def test_optimize_where_and_zorder_are_refused_on_a_clustered_table(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x"])
    t.append(random_rows(0, 50))
    t.append(random_rows(1, 50))
    state = snapshot_state(table_uri)
    with pytest.raises(errors.ClusteringError, match="takes no where"):
        t.optimize(where="x > 3")
    with pytest.raises(errors.ZOrderError, match="clustered table"):
        t.optimize(zorder_by=["y"])
    assert snapshot_state(table_uri) == state


def test_full_is_refused_on_an_unclustered_table_and_with_zorder(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(random_rows(0, 10))
    t.append(random_rows(1, 10))
    state = snapshot_state(table_uri)
    with pytest.raises(errors.ClusteringError, match="not clustered"):
        t.optimize(full=True)
    with pytest.raises(errors.ZOrderError, match="zorder_by"):
        t.optimize(zorder_by=["x"], full=True)
    assert snapshot_state(table_uri) == state


def test_properties_that_drop_statistics_of_a_clustering_column_are_refused(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["y"])
    state = snapshot_state(table_uri)
    with pytest.raises(errors.ClusteringError, match="gets no statistics"):
        t.set_properties({"delta.dataSkippingNumIndexedCols": "1"})
    assert snapshot_state(table_uri) == state
    t.set_properties({"delta.dataSkippingNumIndexedCols": "2"})  # y is the 2nd column: still fine
    assert t.properties["delta.dataSkippingNumIndexedCols"] == "2"


# --------------------------------------------------------------------------------------------
# OPTIMIZE: pruning and row preservation
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def million(tmp_path_factory):
    """1M random rows on (x, y) in 4 appends, before and after clustering (target 512 KB)."""
    uri = str(tmp_path_factory.mktemp("million") / "t")
    t = deltatx.create_table(uri, SCHEMA, cluster_by=["x", "y"], properties={"delta.targetFileSize": str(512 * 1024)})
    for seed in range(4):
        t.append(random_rows(seed, 250_000))
    probes = [(int(v), int(w)) for v, w in zip(t.to_arrow().column("x").to_numpy()[::99_991],
                                              t.to_arrow().column("y").to_numpy()[::99_991])]
    before = {p: (files_read(t, f"x = {p[0]}"), files_read(t, f"x = {p[0]} AND y = {p[1]}")) for p in probes}
    count_before = t.files().num_rows
    result = t.optimize()
    return uri, probes, before, count_before, result


def test_clustering_a_million_rows_prunes_point_predicates(million):
    uri, probes, before, count_before, result = million
    t = deltatx.Table(uri)
    n = t.files().num_rows
    assert n >= 16 and result.metrics["numAddedFiles"] == n
    assert all(b == (count_before, count_before) for b in before.values())  # random files: nothing pruned
    for x, y in probes:
        # on both clustering columns a point is one cell of the curve: at most 2 of N files
        assert files_read(t, f"x = {x} AND y = {y}") <= 2
        # on one of two columns a point is a line through the 2-D layout: about sqrt(N) files
        assert files_read(t, f"x = {x}") <= 2 * math.sqrt(n)
        got = t.to_arrow(where=f"x = {x} AND y = {y}")
        assert got.num_rows >= 1 and set(got.column("x").to_pylist()) == {x}


def test_clustering_keeps_every_row_and_tags_files(million):
    uri, *_ = million
    t = deltatx.Table(uri)
    expected = pa.concat_tables([random_rows(seed, 250_000) for seed in range(4)])
    got = t.to_arrow()
    assert got.num_rows == 1_000_000
    assert sorted_rows(got) == sorted_rows(expected)
    files = t.files()
    assert set(files["clusteringProvider"].to_pylist()) == {"liquid"}
    tags = [dict(tg) for tg in files["tags"].to_pylist()]
    assert {tg["ZCUBE_ZORDER_BY"] for tg in tags} == {'["x","y"]'}
    assert {tg["ZCUBE_ZORDER_CURVE"] for tg in tags} == {"hilbert"} and len({tg["ZCUBE_ID"] for tg in tags}) == 1
    # Files are cut by rows, estimated from the input's Parquet bytes per row: all but the short
    # pieces at the ends of the curve's ranges hold the same rows; clustered output compresses
    # better than the random input (sorted neighbours are delta-encoded), so sizes land a bit
    # under the target, never above it.
    records = np.sort([orjson.loads(s)["numRecords"] for s in files["stats"].to_pylist()])
    assert (records[2:] > 0.95 * records[-1]).all()
    sizes = files["size"].to_numpy()
    assert 0.5 * 512 * 1024 < np.median(sizes) <= 1.1 * 512 * 1024


def test_clustering_commit_is_data_change_free_and_recorded_like_delta(million):
    uri, _, _, _, result = million
    actions = commit_actions(uri, result.version)
    info = actions[0]["commitInfo"]
    assert info["operation"] == "OPTIMIZE" and info["isolationLevel"] == "SnapshotIsolation"
    params = info["operationParameters"]
    assert params["clusterBy"] == '["x","y"]' and params["zOrderBy"] == "[]" and params["isFull"] == "false"
    assert all(a[k]["dataChange"] is False for a in actions for k in ("add", "remove") if k in a)


def test_single_column_clustering_reads_at_most_two_of_n_files(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x"], properties={"delta.targetFileSize": "65536"})
    for seed in range(3):
        t.append(random_rows(seed, 40_000))
    t.optimize()
    n = t.files().num_rows
    assert n >= 8
    for x in t.to_arrow().column("x").to_pylist()[::9_973]:
        assert files_read(t, f"x = {x}") <= 2


def test_second_optimize_is_a_no_op(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x", "y"], properties={"delta.targetFileSize": "65536"})
    for seed in range(3):
        t.append(random_rows(seed, 20_000))
    first = t.optimize()
    assert first.metrics["numRemovedFiles"] == 3
    second = t.optimize()
    assert second.version == first.version and second.metrics["numRemovedFiles"] == 0


def test_clustered_files_survive_a_checkpoint(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x"])
    t.append(random_rows(0, 100))
    t.optimize()
    t.checkpoint()
    reopened = deltatx.Table(table_uri)
    assert reopened.files()["clusteringProvider"].to_pylist() == ["liquid"]
    assert reopened.clustering_columns == ["x"]


# --------------------------------------------------------------------------------------------
# Incremental clustering
# --------------------------------------------------------------------------------------------


def test_appended_rows_outside_the_clustered_range_leave_clustered_files_alone(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x", "y"], properties={"delta.targetFileSize": "65536"})
    for seed in range(3):
        t.append(random_rows(seed, 20_000, 0, 1_000_000))
    t.optimize()
    clustered = set(t.files()["path"].to_pylist())
    tail = min(zip(t.files()["size"].to_pylist(), t.files()["path"].to_pylist()))[1]
    t.append(random_rows(9, 20_000, 5_000_000, 6_000_000))  # a new range of x: overlaps nothing
    result = t.optimize()
    after = set(t.files()["path"].to_pylist())
    assert clustered - {tail} <= after  # the earlier run's files stay (its small tail may join)
    assert result.metrics["numRemovedFiles"] <= 2
    assert set(t.files()["clusteringProvider"].to_pylist()) == {"liquid"}
    assert t.to_arrow().num_rows == 80_000
    assert files_read(t, "x >= 5000000") < t.files().num_rows / 2


def test_changing_the_clustering_columns_reclusters_every_file(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x"], properties={"delta.targetFileSize": "65536"})
    for seed in range(3):
        t.append(random_rows(seed, 20_000))
    t.optimize()
    old = set(t.files()["path"].to_pylist())
    t.cluster_by(["y"])
    t.optimize()
    assert not old & set(t.files()["path"].to_pylist())
    for y in t.to_arrow().column("y").to_pylist()[::7_919]:
        assert files_read(t, f"y = {y}") <= 2


def test_full_reclusters_every_file(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x"], properties={"delta.targetFileSize": "65536"})
    t.append(random_rows(0, 40_000))
    t.optimize()
    old = set(t.files()["path"].to_pylist())
    assert t.optimize().metrics["numRemovedFiles"] == 0
    result = t.optimize(full=True)
    assert result.metrics["numRemovedFiles"] == len(old) and not old & set(t.files()["path"].to_pylist())
    assert commit_actions(table_uri, result.version)[0]["commitInfo"]["operationParameters"]["isFull"] == "true"


def _file(path: str, size: int, lo: int, hi: int, provider: str | None = None, run: str | None = None,
          columns: str | None = '["x"]') -> dict:
    tags = None
    if provider == "liquid" or run:
        tags = [("ZCUBE_ID", run or "r")] + ([("ZCUBE_ZORDER_BY", columns)] if columns else [])
    return {"path": path, "partitionValues": [], "size": size, "modificationTime": 0, "dataChange": True,
            "stats": json.dumps({"numRecords": 10, "minValues": {"x": lo}, "maxValues": {"x": hi},
                                 "nullCount": {"x": 0}}),
            "tags": tags, "deletionVector": None, "baseRowId": None, "defaultRowCommitVersion": None,
            "clusteringProvider": provider}


def _plan(files: list[dict], **kw) -> list[str]:
    from deltatx.txnlog.actions import FILE_SCHEMA

    table = pa.Table.from_pylist(files, schema=FILE_SCHEMA)
    planned = plan_clustering(table, SCHEMA, [("x",)], '["x"]', 100, **kw)
    return sorted(planned["path"].to_pylist())


def test_plan_clustering_rules():
    big = [_file(f"c{i}", 100, i * 10, i * 10 + 9, "liquid", "r1") for i in range(10)]  # 10 large clustered
    # nothing new: nothing to do; a lone small file of one run neither
    assert _plan(big) == []
    assert _plan(big + [_file("tail", 10, 100, 105, "liquid", "r1")]) == []
    # new rows inside [20, 35]: c2 and c3 overlap and fit the budget (200 <= 4 * 60)
    assert _plan(big + [_file("n1", 60, 20, 35)]) == ["c2", "c3", "n1"]
    # new rows over everything: 1000 bytes overlapped > 4 * 60 → new rows clustered alone
    assert _plan(big + [_file("n1", 60, 0, 99)]) == ["n1"]
    assert 1000 > OVERLAP_BUDGET * 60
    # small clustered files of two runs are merged with what they overlap
    assert _plan(big + [_file("t1", 30, 0, 5, "liquid", "r2"), _file("t2", 30, 1, 8, "liquid", "r3")]) == \
        ["c0", "t1", "t2"]
    # another implementation's files are never touched; files clustered by other columns are new
    assert _plan(big + [_file("f", 5, 0, 99, "other"), _file("n1", 60, 95, 99)]) == ["c9", "n1"]
    assert _plan(big[:2] + [_file("o", 100, 50, 60, "liquid", "r0", '["y"]')]) == ["o"]
    # a file with a DV to purge counts as new; full takes every file but foreign ones
    assert _plan(big, purge=np.array([False] * 9 + [True])) == ["c9"]
    assert _plan(big + [_file("f", 5, 0, 99, "other")], full=True) == sorted(f"c{i}" for i in range(10))


# --------------------------------------------------------------------------------------------
# Concurrency
# --------------------------------------------------------------------------------------------


def test_clustering_optimize_and_a_concurrent_append_both_commit(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x", "y"])
    for seed in range(3):
        t.append(random_rows(seed, 1000))
    tx = deltatx.Table(table_uri).transaction()
    tx.optimize()
    deltatx.Table(table_uri).append(random_rows(7, 500))  # lands first
    result = tx.commit()
    assert result.conflicts_resolved == 1
    final = deltatx.Table(table_uri)
    assert final.to_arrow().num_rows == 3500
    assert sorted(final.files()["clusteringProvider"].to_pylist(), key=lambda p: p or "") == [None, "liquid"]


def test_concurrent_cluster_by_changes_conflict_like_delta(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x"])
    tx = deltatx.Table(table_uri).transaction()
    tx.cluster_by(["y"])
    deltatx.Table(table_uri).cluster_by(["name"])
    version = deltatx.Table(table_uri).version
    with pytest.raises(errors.ConcurrentTransactionException, match="delta.clustering"):
        tx.commit()
    assert deltatx.Table(table_uri).version == version
    assert deltatx.Table(table_uri).clustering_columns == ["name"]
    assert t.refresh().clustering_columns == ["name"]


def test_concurrent_first_cluster_by_upgrades_conflict_on_the_protocol(table_uri):
    deltatx.create_table(table_uri, SCHEMA)
    tx = deltatx.Table(table_uri).transaction()
    tx.cluster_by(["y"])
    deltatx.Table(table_uri).cluster_by(["x"])
    with pytest.raises(errors.ProtocolChangedException):
        tx.commit()
    assert deltatx.Table(table_uri).clustering_columns == ["x"]


def test_cluster_by_during_a_clustering_optimize_both_commit_and_the_next_run_reclusters(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x"], properties={"delta.targetFileSize": "65536"})
    for seed in range(3):
        t.append(random_rows(seed, 10_000))
    tx = deltatx.Table(table_uri).transaction()
    tx.optimize()
    deltatx.Table(table_uri).cluster_by(["y"])
    tx.commit()  # no conflict: the optimize only moved rows
    laid_out = set(deltatx.Table(table_uri).files()["path"].to_pylist())
    assert {dict(tg)["ZCUBE_ZORDER_BY"] for tg in deltatx.Table(table_uri).files()["tags"].to_pylist()} == {'["x"]'}
    result = deltatx.Table(table_uri).optimize()  # clustered by x, not y: every file is redone
    assert result.metrics["numRemovedFiles"] == len(laid_out)
    assert deltatx.Table(table_uri).to_arrow().num_rows == 30_000


def test_cluster_by_and_a_concurrent_append_both_commit(table_uri):
    deltatx.create_table(table_uri, SCHEMA)
    tx = deltatx.Table(table_uri).transaction()
    tx.cluster_by(["x"])
    deltatx.Table(table_uri).append(random_rows(0, 10))
    tx.commit()
    final = deltatx.Table(table_uri)
    assert final.clustering_columns == ["x"] and final.to_arrow().num_rows == 10
    append = deltatx.Table(table_uri).transaction()
    append.append(random_rows(1, 10))
    deltatx.Table(table_uri).cluster_by(["y"])  # the append loses the race and adopts the change
    append.commit()
    assert deltatx.Table(table_uri).to_arrow().num_rows == 20


# --------------------------------------------------------------------------------------------
# Deletion vectors and row tracking
# --------------------------------------------------------------------------------------------


DV_RT = {"delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true"}
ROWS = ["x", "y", "name", "_metadata.row_id"]


def row_ids(table: deltatx.Table) -> dict[tuple, int]:
    return {(r["x"], r["y"], r["name"]): r["_metadata.row_id"] for r in table.to_arrow(columns=ROWS).to_pylist()}


def test_clustering_keeps_row_ids_and_purges_deletion_vectors(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x", "y"], properties=DV_RT)
    for seed in range(3):
        t.append(random_rows(seed, 200))
    t.delete("x % 3 = 0")
    assert t.files()["deletionVector"].null_count < t.files().num_rows
    before = row_ids(t)
    result = t.optimize()
    assert result.metrics["numDeletionVectorsRemoved"] >= 1
    files = deltatx.Table(table_uri).files()
    assert files["deletionVector"].null_count == files.num_rows
    assert row_ids(deltatx.Table(table_uri)) == before


def test_dml_concurrent_with_clustering_is_carried_into_the_new_files(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x"], properties=DV_RT)
    t.append(rows(range(100), range(100)))
    t.append(rows(range(100, 200), range(100)))
    tx = deltatx.Table(table_uri).transaction()
    tx.optimize()
    deltatx.Table(table_uri).delete("x = 5 OR x = 150")  # deletes rows the OPTIMIZE is moving
    assert tx.commit().conflicts_resolved == 1
    got = sorted(deltatx.Table(table_uri).to_arrow().column("x").to_pylist())
    assert got == [v for v in range(200) if v not in (5, 150)]


def test_cluster_by_a_column_existing_files_have_no_statistics_for_is_refused(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, properties={"delta.dataSkippingNumIndexedCols": "1"})
    t.append(random_rows(0, 20))  # stats for x only
    t.set_properties({"delta.dataSkippingNumIndexedCols": "3"})
    state = snapshot_state(table_uri)
    with pytest.raises(errors.ClusteringError, match="no statistics in 1 existing file"):
        t.cluster_by(["y"])
    assert snapshot_state(table_uri) == state
    t.cluster_by(["x"])  # x has statistics everywhere
    assert t.clustering_columns == ["x"]


def test_auto_compaction_of_a_clustered_table_clusters_it(table_uri):
    import warnings

    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x"], properties={
        "delta.autoOptimize.autoCompact": "true", "deltatx.autoCompact.minNumFiles": "2"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failing post-commit hook only warns: make that fail here
        for seed in range(3):
            t.append(random_rows(seed, 100))
    last = t.history(limit=1)[0]
    assert last["operation"] == "OPTIMIZE" and last["operationParameters"]["clusterBy"] == '["x"]'
    assert set(t.files()["clusteringProvider"].to_pylist()) == {"liquid"}
    assert t.to_arrow().num_rows == 300


def test_a_clustering_column_cannot_be_dropped(table_uri):
    """delta-spark refuses it (DELTA_UNSUPPORTED_DROP_CLUSTERING_COLUMN): the clustering domain
    would name a column the schema no longer has, and OPTIMIZE / CLUSTER BY would fail after."""
    schema = pa.schema([("x", pa.int64()), ("st", pa.struct([("a", pa.int64()), ("b", pa.int64())])),
                        ("name", pa.string())])
    t = deltatx.create_table(table_uri, schema, cluster_by=["x", "st.a"],
                             properties={"delta.columnMapping.mode": "name"})
    for column in ("x", "st", "st.a"):
        with pytest.raises(errors.SchemaMismatchError, match="clustered by"):
            t.drop_column(column)
    assert deltatx.Table(table_uri).version == 0
    t.drop_column("st.b")
    t.cluster_by(["st.a"])
    t.drop_column("x")
    assert deltatx.Table(table_uri).clustering_columns == ["st.a"]


def test_the_clustering_feature_is_no_property(table_uri):
    """PROTOCOL.md: a clustered table tracks its columns in the delta.clustering domain and is
    never partitioned; the feature set as a property would give neither (delta-spark refuses it)."""
    with pytest.raises(errors.ClusteringError, match="cluster_by"):
        deltatx.create_table(table_uri, SCHEMA, properties={"delta.feature.clustering": "supported"})
    assert not os.path.exists(os.path.join(table_uri, "_delta_log"))
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["name"])
    with pytest.raises(errors.ClusteringError, match="cluster_by"):
        t.set_properties({"delta.feature.clustering": "supported"})
    assert deltatx.Table(table_uri).version == 0


def test_replacing_a_clustered_table_clusters_by_nothing_and_never_partitions(table_uri):
    from deltatx.tables.ops.replace_table import stage_replace_table

    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x"])
    t.append(rows([1, 2], [3, 4]))
    with t.transaction() as tx, pytest.raises(errors.ClusteringError, match="partition"):
        stage_replace_table(tx, SCHEMA, partition_by=["name"])
    assert deltatx.Table(table_uri).version == 1
    with t.transaction() as tx:
        stage_replace_table(tx, pa.schema([("id", pa.int64())]))
    replaced = deltatx.Table(table_uri)
    assert replaced.clustering_columns == [] and replaced.to_arrow().num_rows == 0
    replaced.append(pa.table({"id": [1, 2]}))
    replaced.optimize()
    replaced.cluster_by(["id"])
    assert deltatx.Table(table_uri).clustering_columns == ["id"]
