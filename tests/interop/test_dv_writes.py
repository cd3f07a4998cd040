"""Deletion-vector tables deltatx writes, read by deltalake, polars and DuckDB (delta-kernel).

Each case runs a sequence of merge-on-read operations on a table and then compares what every
reader returns with an independent model (pyarrow compute on a plain table) — not with deltatx's
own read. deltalake is read through its DataFusion ``QueryBuilder`` (its pyarrow dataset path does
not apply deletion vectors and refuses such tables).
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from interop_helpers import read_duckdb

import deltatx

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("value", pa.float64()), ("name", pa.string())])
DV = {"delta.enableDeletionVectors": "true"}
RT = {"delta.enableRowTracking": "true"}


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "part": [i % 3 for i in ids], "value": [i * 0.5 for i in ids],
                     "name": [f"n{i}" for i in ids]}, schema=SCHEMA)


class Model:
    """What the table must hold, computed without deltatx."""

    def __init__(self) -> None:
        self.rows = SCHEMA.empty_table()

    def append(self, t: pa.Table) -> None:
        self.rows = pa.concat_tables([self.rows, t])

    def delete(self, mask) -> None:
        self.rows = self.rows.filter(pc.invert(mask(self.rows)))

    def update(self, mask, column: str, fn) -> None:
        m = mask(self.rows)
        col = self.rows.column(column)
        self.rows = self.rows.set_column(self.rows.schema.get_field_index(column), column,
                                         pc.if_else(m, fn(col), col))

    def sorted(self) -> list[dict]:
        return sorted(self.rows.to_pylist(), key=lambda r: r["id"])


def _sorted(t: pa.Table) -> list[dict]:
    t = t.select(SCHEMA.names).cast(SCHEMA)
    return sorted(t.to_pylist(), key=lambda r: r["id"])


def read_deltalake(uri: str) -> pa.Table:
    from deltalake import DeltaTable, QueryBuilder

    return pa.table(QueryBuilder().register("t", DeltaTable(uri)).execute("SELECT * FROM t").read_all())


def read_polars(uri: str) -> pa.Table:
    import polars as pl

    return pl.read_delta(uri).to_arrow()


def assert_every_reader_agrees(uri: str, model: Model) -> None:
    expected = model.sorted()
    assert _sorted(deltatx.Table(uri).to_arrow()) == expected
    assert _sorted(read_deltalake(uri)) == expected, "deltalake"
    assert _sorted(read_polars(uri)) == expected, "polars"
    assert _sorted(read_duckdb(uri)) == expected, "duckdb"


def _dv_count(uri: str) -> int:
    return int(pc.sum(pc.is_valid(deltatx.Table(uri).files()["deletionVector"])).as_py() or 0)


@pytest.mark.parametrize("row_tracking", [False, True], ids=["dv", "dv+row-tracking"])
@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_every_reader_sees_merge_on_read_dml(table_uri, partitioned, row_tracking):
    props = {**DV, **(RT if row_tracking else {})}
    table = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"] if partitioned else None, properties=props)
    model = Model()
    for start in (0, 300):
        table.append(_rows(start, 300))
        model.append(_rows(start, 300))

    deltatx.Table(table_uri).delete("id % 7 = 0")  # several DVs in one commit, files of 100-300 rows
    model.delete(lambda t: pc.equal(pc.remainder(t["id"], 7), 0))
    assert _dv_count(table_uri) >= 2
    assert_every_reader_agrees(table_uri, model)

    deltatx.Table(table_uri).delete("id = 1 OR id = 302")  # a second DV on files that have one: union
    model.delete(lambda t: pc.is_in(t["id"], value_set=pa.array([1, 302], pa.int64())))
    deltatx.Table(table_uri).update("id >= 10 AND id < 20", set={"value": "value + 1000"})
    model.update(lambda t: pc.and_(pc.greater_equal(t["id"], 10), pc.less(t["id"], 20)), "value",
                 lambda c: pc.add(c, 1000.0))
    source = pa.table({"id": [3, 4, 5000], "part": [0, 1, 2], "value": [-1.0, 40.0, 1.0], "name": ["m", "m", "m"]},
                      schema=SCHEMA)
    (deltatx.Table(table_uri).merge(source, on="t.id = s.id").when_matched_delete("s.value < 0")
        .when_matched_update({"value": "s.value"}).when_not_matched_insert_all().execute())
    model.delete(lambda t: pc.equal(t["id"], 3))
    model.update(lambda t: pc.equal(t["id"], 4), "value", lambda c: pc.add(pc.multiply(c, 0.0), 40.0))
    model.append(source.slice(2, 1))
    assert_every_reader_agrees(table_uri, model)

    deltatx.Table(table_uri).checkpoint()  # the checkpoint's add structs carry the DVs
    assert_every_reader_agrees(table_uri, model)

    deltatx.Table(table_uri).optimize()
    assert_every_reader_agrees(table_uri, model)
    deltatx.Table(table_uri).delete("id = 50")
    model.delete(lambda t: pc.equal(t["id"], 50))
    deltatx.Table(table_uri).reorg(purge=True)
    assert _dv_count(table_uri) == 0
    assert_every_reader_agrees(table_uri, model)


def test_every_reader_sees_dvs_after_vacuum(table_uri, monkeypatch):
    from deltatx.tables.ops import vacuum as vacuum_module

    table = deltatx.create_table(table_uri, SCHEMA, properties=DV)
    table.append(_rows(0, 6000))  # 600 scattered rows per delete: DV files, not inline
    model = Model()
    model.append(_rows(0, 6000))
    for k in range(3):  # three DV files, each superseded by the next union
        deltatx.Table(table_uri).delete(f"id % 10 = {k}")
        model.delete(lambda t, k=k: pc.equal(pc.remainder(t["id"], 10), k))
    dv_files = [n for n in os.listdir(table_uri) if n.startswith("deletion_vector_")]
    assert len(dv_files) == 3
    monkeypatch.setattr(vacuum_module, "now_ms", lambda: 4_000_000_000_000)
    deltatx.Table(table_uri).set_properties({"delta.deletedFileRetentionDuration": "interval 0 hours"})
    deleted = deltatx.Table(table_uri).vacuum(retention_hours=0, enforce_retention_duration=False)
    left = [n for n in os.listdir(table_uri) if n.startswith("deletion_vector_")]
    assert len(left) == 1 and all(n in deleted for n in dv_files if n not in left)
    assert_every_reader_agrees(table_uri, model)


def test_the_log_is_what_other_writers_write(table_uri):
    import json

    table = deltatx.create_table(table_uri, SCHEMA, properties={**DV, **RT})
    table.append(_rows(0, 100))
    result = deltatx.Table(table_uri).delete("id = 5")
    with open(os.path.join(table_uri, "_delta_log", f"{result.version:020d}.json")) as fh:
        lines = [json.loads(line) for line in fh if line.strip()]
    commit_info = lines[0]["commitInfo"]
    assert commit_info["operation"] == "DELETE" and commit_info["operationMetrics"]["numDeletionVectorsAdded"] == "1"
    remove = next(line["remove"] for line in lines if "remove" in line)
    add = next(line["add"] for line in lines if "add" in line)
    assert remove["path"] == add["path"] and "deletionVector" not in remove
    assert add["deletionVector"]["storageType"] == "i" and add["deletionVector"]["cardinality"] == 1
    assert add["baseRowId"] == remove["baseRowId"] == 0
    assert json.loads(add["stats"])["tightBounds"] is False
    protocol = deltatx.Table(table_uri).protocol
    assert "deletionVectors" in protocol.reader_features and "deletionVectors" in protocol.writer_features
    assert {"rowTracking", "domainMetadata"} <= set(protocol.writer_features)


AWKWARD_PARTS = ["plain", "x y", "a=b", "c/d", "50%", "q?#", "é"]


def _awkward_partition_table(uri: str) -> tuple[pa.Table, list[int]]:
    """A DV table partitioned by values that need escaping in paths, with one row of each
    partition deleted through a DV; returns (all rows appended, the ids left)."""
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    rows = pa.table({"id": list(range(2 * len(AWKWARD_PARTS))), "p": AWKWARD_PARTS * 2}, schema=schema)
    table = deltatx.create_table(uri, schema, partition_by=["p"], properties=DV)
    table.append(rows)
    deleted = list(range(len(AWKWARD_PARTS)))  # the first row of every partition
    deltatx.Table(uri).delete(f"id IN ({', '.join(map(str, deleted))})")
    assert _dv_count(uri) == len(AWKWARD_PARTS), "each partition's file kept a DV, none was removed"
    return rows, sorted(set(rows["id"].to_pylist()) - set(deleted))


def test_dvs_in_partitions_that_need_escaping_are_applied_by_deltalake_and_duckdb(table_uri):
    _, left = _awkward_partition_table(table_uri)
    assert sorted(deltatx.Table(table_uri).to_arrow()["id"].to_pylist()) == left
    assert sorted(read_deltalake(table_uri)["id"].to_pylist()) == left, "deltalake"
    assert sorted(read_duckdb(table_uri)["id"].to_pylist()) == left, "duckdb"


@pytest.mark.xfail(strict=False, reason=(
    "polars 2.1 (peer bug): it matches deltalake's deletion_vectors() file URIs, which are "
    "percent-encoded as add paths are (PROTOCOL.md), against decoded paths, so a DV of a file whose "
    "partition value needs escaping is never applied; tables deltalake writes read the same way"))
def test_polars_applies_dvs_in_partitions_that_need_escaping(table_uri):
    _, left = _awkward_partition_table(table_uri)
    assert sorted(read_polars(table_uri)["id"].to_pylist()) == left, "polars"
