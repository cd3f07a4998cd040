"""OPTIMIZE ZORDER BY: pruning, row preservation, partitions, Delta's commitInfo, typed refusals
that write nothing, concurrency, row ids, and deltalake interop both ways."""

from __future__ import annotations

import math
import os

import numpy as np
import orjson
import pyarrow as pa
import pytest

import deltatx
from deltatx import errors
from deltatx.expr import files_matching, parse_predicate

SCHEMA = pa.schema([("x", pa.int64()), ("y", pa.int64()), ("part", pa.string()), ("flag", pa.bool_())])


def random_rows(seed: int, n: int, part: str = "a") -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"x": rng.integers(0, 1_000_000, n), "y": rng.integers(0, 1_000_000, n),
                     "part": [part] * n, "flag": rng.integers(0, 2, n).astype(bool)}, schema=SCHEMA)


def sorted_rows(t: pa.Table) -> list[tuple]:
    return sorted(zip(*(t.column(c).to_pylist() for c in ("x", "y", "part", "flag"))))


def files_read(table: deltatx.Table, where: str) -> int:
    files = table.files()
    return sum(files_matching(parse_predicate(where), files, table.schema, table.partition_columns).to_pylist())


def commit_actions(uri: str, version: int) -> list[dict]:
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        return [orjson.loads(line) for line in fh.read().splitlines() if line.strip()]


def state(uri: str) -> tuple[int, set[str]]:
    found = {os.path.join(d, f) for d, _, fs in os.walk(uri) for f in fs if f.endswith(".parquet")}
    return deltatx.Table(uri).version, found


@pytest.fixture(scope="module")
def zordered(tmp_path_factory):
    """400k random rows in 4 appends, Z-ordered by (x, y) into ~256 KB files."""
    uri = str(tmp_path_factory.mktemp("zorder") / "t")
    t = deltatx.create_table(uri, SCHEMA, properties={"delta.targetFileSize": str(256 * 1024)})
    for seed in range(4):
        t.append(random_rows(seed, 100_000))
    sample = t.to_arrow().take(pa.array(range(0, 400_000, 40_009)))
    probes = list(zip(sample.column("x").to_pylist(), sample.column("y").to_pylist()))
    before = {p: files_read(t, f"x = {p[0]} AND y = {p[1]}") for p in probes}
    result = t.optimize(zorder_by=["x", "y"])
    return uri, probes, before, result


def test_zorder_prunes_point_predicates(zordered):
    uri, probes, before, result = zordered
    t = deltatx.Table(uri)
    n = t.files().num_rows
    assert n >= 8 and set(before.values()) == {4}  # before: every random file may hold any point
    for x, y in probes:
        assert files_read(t, f"x = {x} AND y = {y}") <= 2
        assert files_read(t, f"y = {y}") <= 2 * math.sqrt(n)
        assert t.to_arrow(where=f"x = {x} AND y = {y}").num_rows >= 1


def test_zorder_keeps_every_row_and_records_zorder_by(zordered):
    uri, _, _, result = zordered
    t = deltatx.Table(uri)
    expected = pa.concat_tables([random_rows(seed, 100_000) for seed in range(4)])
    assert sorted_rows(t.to_arrow()) == sorted_rows(expected)
    actions = commit_actions(uri, result.version)
    params = actions[0]["commitInfo"]["operationParameters"]
    assert actions[0]["commitInfo"]["operation"] == "OPTIMIZE"
    assert params["zOrderBy"] == '["x","y"]' and params["clusterBy"] == "[]" and params["predicate"] == "[]"
    assert all(a[k]["dataChange"] is False for a in actions for k in ("add", "remove") if k in a)
    files = t.files()
    assert files["clusteringProvider"].null_count == files.num_rows  # Z-order is not liquid clustering
    assert {dict(tg)["ZCUBE_ZORDER_CURVE"] for tg in files["tags"].to_pylist()} == {"zorder"}
    assert result.metrics["numRemovedFiles"] == 4 and result.metrics["numAddedFiles"] == files.num_rows


def test_zorder_where_rewrites_only_the_selected_partition(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"], properties={"delta.targetFileSize": "40000"})
    for seed in range(3):
        t.append(random_rows(seed, 5000, "a"))
        t.append(random_rows(seed + 10, 5000, "b"))
    before = sorted_rows(t.to_arrow())
    files = t.files()
    in_b = pa.compute.equal(pa.compute.map_lookup(files["partitionValues"], "part", "first"), "b")
    b_files = set(files.filter(in_b)["path"].to_pylist())
    result = t.optimize(where="part = 'a'", zorder_by=["y"])
    files = t.files()
    parts = pa.compute.map_lookup(files["partitionValues"], "part", "first").to_pylist()
    paths = files["path"].to_pylist()
    assert {p for p, part in zip(paths, parts) if part == "b"} == b_files
    assert result.metrics["numRemovedFiles"] == 3 and parts.count("a") >= 2
    assert sorted_rows(t.to_arrow()) == before
    y = t.to_arrow(where="part = 'a'").column("y").to_pylist()[1234]
    assert files_read(t, f"part = 'a' AND y = {y}") <= 2
    info = commit_actions(table_uri, result.version)[0]["commitInfo"]["operationParameters"]
    assert orjson.loads(info["predicate"]) == [str(parse_predicate("part = 'a'"))]


def test_zorder_on_one_partition_per_bin(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    t.append(random_rows(0, 100, "a"))
    t.append(random_rows(1, 100, "b"))
    result = t.optimize(zorder_by=["x"])  # Delta rewrites even single files: the layout changes
    assert result.metrics["numRemovedFiles"] == 2 and result.metrics["partitionsOptimized"] == 2
    assert t.to_arrow().num_rows == 200


BAD_ZORDER = [
    (["part"], "partition column"),
    (["missing"], "not in the table schema"),
    (["flag"], "no min/max statistics"),
    (["x", "x"], "named twice"),
    ([], "at least one column"),
    ([1], "list of column names"),
]


@pytest.mark.parametrize("columns,message", BAD_ZORDER)
def test_bad_zorder_columns_are_refused_and_nothing_is_written(table_uri, columns, message):
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    t.append(random_rows(0, 50))
    t.append(random_rows(1, 50))
    before = state(table_uri)
    with pytest.raises(errors.ZOrderError, match=message):
        t.optimize(zorder_by=columns)
    assert state(table_uri) == before


def test_zorder_where_on_a_data_column_is_refused(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    t.append(random_rows(0, 50))
    before = state(table_uri)
    with pytest.raises(errors.PredicateError):
        t.optimize(where="x > 3", zorder_by=["y"])
    assert state(table_uri) == before


def test_zorder_is_refused_on_a_clustered_table(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x"])
    t.append(random_rows(0, 50))
    before = state(table_uri)
    with pytest.raises(errors.ZOrderError, match="clustered table"):
        t.optimize(zorder_by=["y"])
    assert state(table_uri) == before


def test_zorder_and_a_concurrent_append_both_commit(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    for seed in range(3):
        t.append(random_rows(seed, 1000))
    tx = deltatx.Table(table_uri).transaction()
    tx.optimize(zorder_by=["x", "y"])
    deltatx.Table(table_uri).append(random_rows(9, 100))
    assert tx.commit().conflicts_resolved == 1
    assert deltatx.Table(table_uri).to_arrow().num_rows == 3100


def test_zorder_keeps_row_ids_on_a_deletion_vector_table(table_uri):
    cols = ["x", "y", "_metadata.row_id"]
    t = deltatx.create_table(table_uri, SCHEMA, properties={"delta.enableDeletionVectors": "true",
                                                           "delta.enableRowTracking": "true"})
    for seed in range(3):
        t.append(random_rows(seed, 300))
    t.delete("x % 4 = 0")
    def row_ids(table: deltatx.Table) -> dict[tuple, int]:
        return {(r["x"], r["y"]): r["_metadata.row_id"] for r in table.to_arrow(columns=cols).to_pylist()}

    before = row_ids(t)
    t.optimize(zorder_by=["x", "y"])
    files = deltatx.Table(table_uri).files()
    assert files["deletionVector"].null_count == files.num_rows
    assert row_ids(deltatx.Table(table_uri)) == before
