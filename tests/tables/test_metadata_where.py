"""``where=`` on Spark's metadata columns (``_metadata.row_id`` and the rest) in reads.

The model: read every row with the metadata columns as ``columns=`` returns them, filter with
pyarrow, keep the asked columns. A read with the same predicate in ``where=`` must give exactly
those rows, on tables where the naive shortcuts would be wrong: rows whose row ids are
materialized (UPDATE, OPTIMIZE), rows a deletion vector hides, partitioned and column-mapped
tables, files of several row groups.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import deltatx
from deltatx.errors import PredicateError, SchemaMismatchError
from deltatx.io import reader as reader_module
from deltatx.io import row_metadata

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("v", pa.int64())])
DV = {"delta.enableDeletionVectors": "true"}
RT = {"delta.enableRowTracking": "true"}
META = ["_metadata.row_id", "_metadata.row_commit_version", "_metadata.row_index", "_metadata.file_path"]
ROW_ID, VERSION, INDEX, PATH = (pc.field(n) for n in META)
ID, V, PART = pc.field("id"), pc.field("v"), pc.field("part")


def _rows(n0: int, n: int) -> pa.Table:
    ids = list(range(n0, n0 + n))
    return pa.table({"id": ids, "part": [f"p{i % 2}" for i in ids], "v": [0] * n}, schema=SCHEMA)


def build(uri: str, kind: str) -> tuple[deltatx.Table, int]:
    """A row-tracking table of 30 rows in several files, shaped by ``kind``; and the version of
    its UPDATE (the commit version of the rows it changed)."""
    props = {**RT, **({} if kind == "copy_on_write" else DV)}
    if kind.startswith("column_mapping"):
        props["delta.columnMapping.mode"] = kind.rsplit("_", 1)[1]
    table = deltatx.create_table(uri, SCHEMA, partition_by=["part"] if kind == "partitioned" else None,
                                 properties=props)
    for k in range(3):
        table.append(_rows(10 * k, 10))
    table.delete(where="id IN (1, 12)")
    updated = table.update(where="id IN (3, 15, 22)", set={"v": "v + 1"}).version
    if kind == "optimized":  # new files, new baseRowIds: every row id is now a materialized value
        table.optimize()
        table.delete(where="id = 27")
    return deltatx.Table(uri), updated


def model(table: deltatx.Table, keep: pc.Expression, columns: list[str] | None) -> list[dict]:
    everything = table.to_arrow(columns=SCHEMA.names + META)
    chosen = everything.filter(keep).select(columns if columns is not None else SCHEMA.names)
    return sorted(chosen.to_pylist(), key=lambda r: tuple(str(x) for x in r.values()))


def read(table: deltatx.Table, where: str, columns: list[str] | None) -> list[dict]:
    got = table.to_arrow(where=where, columns=columns)
    return sorted(got.to_pylist(), key=lambda r: tuple(str(x) for x in r.values()))


def cases(updated: int, a_path: str) -> list[tuple[str, pc.Expression]]:
    return [
        ("_metadata.row_id = 5", ROW_ID == 5),
        ("id > 3 AND _metadata.row_id < 10", (ID > 3) & (ROW_ID < 10)),
        ("_metadata.row_id < 4 OR v = 1", (ROW_ID < 4) | (V == 1)),
        ("NOT (_metadata.row_id >= 20)", ~(ROW_ID >= 20)),
        ("_METADATA.Row_Id BETWEEN 7 AND 9", (ROW_ID >= 7) & (ROW_ID <= 9)),
        ("_metadata.row_id IN (0, 13, 22, 29)", ROW_ID.isin([0, 13, 22, 29])),
        ("_metadata.row_id + 1 = 6", ROW_ID + 1 == 6),
        ("_metadata.row_id = id", ROW_ID == ID),
        (f"_metadata.row_commit_version = {updated}", VERSION == updated),
        (f"_metadata.row_commit_version < {updated} AND part = 'p1'", (VERSION < updated) & (PART == "p1")),
        ("_metadata.row_index IN (0, 2)", INDEX.isin([0, 2])),
        ("_metadata.row_index = 0 AND _metadata.row_id > 15", (INDEX == 0) & (ROW_ID > 15)),
        (f"_metadata.file_path = '{a_path}'", PATH == a_path),
        (f"_metadata.file_path = '{a_path}' AND id < 15", (PATH == a_path) & (ID < 15)),
        (f"_metadata.file_path != '{a_path}' OR id = 4", (PATH != a_path) | (ID == 4)),
        ("_metadata.row_id IS NULL", ROW_ID.is_null()),
        ("`_metadata.row_id` > 25", ROW_ID > 25),  # the name columns= uses, quoted
    ]


@pytest.mark.parametrize("kind", ["dv", "copy_on_write", "partitioned", "optimized", "column_mapping_name",
                                  "column_mapping_id"])
def test_where_on_metadata_columns_matches_the_model(table_uri, kind):
    table, updated = build(table_uri, kind)
    a_path = table.files()["path"][0].as_py()
    for where, keep in cases(updated, a_path):
        for columns in (None, ["id", "v"], ["id", "_metadata.row_id"], ["_metadata.row_commit_version"]):
            assert read(table, where, columns) == model(table, keep, columns), (kind, where, columns)


def test_metadata_columns_filter_without_being_returned(table_uri):
    table, _ = build(table_uri, "dv")
    out = table.to_arrow(where="id > 3 AND _metadata.row_id < 10")
    assert out.schema.names == SCHEMA.names
    assert sorted(out.column("id").to_pylist()) == [4, 5, 6, 7, 8, 9]
    asked = table.to_arrow(where="_metadata.row_commit_version > 1", columns=["_metadata.row_id"])
    assert asked.schema.names == ["_metadata.row_id"]
    assert table.to_pandas(where="_metadata.row_id = 5").to_dict("records") == [{"id": 5, "part": "p1", "v": 0}]


def test_row_ids_of_rewritten_rows_are_found_by_their_preserved_id(table_uri):
    """After OPTIMIZE no row id is ``baseRowId + row_index`` any more: a filter on the id reads
    the materialized values, and no file is skipped for its baseRowId range."""
    table, _ = build(table_uri, "optimized")
    ids = {r["id"]: r["_metadata.row_id"] for r in table.to_arrow(columns=["id", "_metadata.row_id"]).to_pylist()}
    for key in (0, 3, 15, 22, 29):
        got = table.to_arrow(where=f"_metadata.row_id = {ids[key]}", columns=["id"]).to_pylist()
        assert got == [{"id": key}]
    assert table.to_arrow(where="_metadata.row_id = 27").num_rows == 0  # deleted after the OPTIMIZE


def test_several_row_groups(table_uri):
    """A file of three row groups: the metadata columns count positions over the whole file."""
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]), properties={**RT, **DV})
    n = 300_000  # the writer's row groups hold 128k rows
    table.append(pa.table({"id": np.arange(n, dtype=np.int64)}))
    path = table.files()["path"][0].as_py()
    assert pq.ParquetFile(os.path.join(table_uri, path)).metadata.num_row_groups == 3
    table.delete(where="id = 200001")
    table = deltatx.Table(table_uri)
    assert table.to_arrow(where="_metadata.row_id IN (200000, 200001)").to_pylist() == [{"id": 200000}]
    got = table.to_arrow(where="_metadata.row_id >= 131070 AND _metadata.row_id < 131075 AND id > 131071",
                         columns=["id", "_metadata.row_index"]).to_pylist()
    assert got == [{"id": i, "_metadata.row_index": i} for i in (131072, 131073, 131074)]
    assert table.to_arrow(where="id = 250000 AND _metadata.row_index = 250000").num_rows == 1


def test_file_path_prunes_files_exactly_and_row_ids_prune_none(table_uri, monkeypatch):
    table, _ = build(table_uri, "dv")
    paths = table.files()["path"].to_pylist()
    seen: list[int] = []
    real = reader_module.read_files

    def counting(store, files, *args, **kwargs):
        seen.append(files.num_rows)
        return real(store, files, *args, **kwargs)

    monkeypatch.setattr(reader_module, "read_files", counting)
    table.to_arrow(where=f"_metadata.file_path = '{paths[1]}' AND id >= 0")
    table.to_arrow(where="_metadata.row_id = 5")
    table.to_arrow(where=f"_metadata.file_path = '{paths[1]}' OR id = 0")
    assert seen == [1, len(paths), len(paths)]


def test_a_transaction_read_filters_on_metadata_columns(table_uri):
    table, updated = build(table_uri, "dv")
    tx = table.transaction()
    try:
        got = tx.read(where=f"_metadata.row_commit_version = {updated} AND id > 3", columns=["id", "_metadata.row_id"])
        assert sorted(got.to_pylist(), key=lambda r: r["id"]) == model(
            table, (VERSION == updated) & (ID > 3), ["id", "_metadata.row_id"])
        assert tx.read(where="_metadata.row_id = 5").to_pylist() == [{"id": 5, "part": "p1", "v": 0}]
    finally:
        tx.abort()


def test_row_tracking_columns_need_row_tracking_in_where_too(table_uri):
    table = deltatx.create_table(table_uri, SCHEMA, properties=DV)
    table.append(_rows(0, 10))
    table.delete(where="id = 2")
    for name in ("_metadata.row_id", "_metadata.row_commit_version"):
        with pytest.raises(SchemaMismatchError) as by_columns:
            table.to_arrow(columns=["id", name])
        with pytest.raises(SchemaMismatchError) as by_where:
            table.to_arrow(where=f"id > 1 AND {name} = 3")
        assert str(by_where.value) == str(by_columns.value)
        tx = table.transaction()
        with pytest.raises(SchemaMismatchError):
            tx.read(where=f"{name} = 3")
        tx.abort()
    # the file's own columns need no row tracking
    assert table.to_arrow(where="_metadata.row_index IN (1, 2, 3)", columns=["id"]).to_pylist() == [{"id": 1}, {"id": 3}]
    path = table.files()["path"][0].as_py()
    assert table.to_arrow(where=f"_metadata.file_path = '{path}'").num_rows == 9


def test_unknown_metadata_column_is_a_predicate_error(table_uri):
    table, _ = build(table_uri, "dv")
    with pytest.raises(PredicateError, match="unknown metadata column '_metadata.file_size'"):
        table.to_arrow(where="_metadata.file_size > 0")


def test_dml_conditions_refuse_metadata_columns_clearly(table_uri):
    """DELETE/UPDATE conditions name table columns only (see the module docstring of
    io/row_metadata.py): refused with a message saying so, nothing committed."""
    table, _ = build(table_uri, "dv")
    version = table.version
    with pytest.raises(PredicateError, match="metadata column"):
        table.delete(where="_metadata.row_id = 5")
    with pytest.raises(PredicateError, match="metadata column"):
        table.update(where="id = 4 AND _metadata.row_id = 4", set={"v": "7"})
    assert deltatx.Table(table_uri).version == version


def test_a_predicate_without_metadata_columns_binds_as_before(table_uri, monkeypatch):
    """The metadata handling is only reached by a WHERE whose text names ``_metadata``."""
    table, _ = build(table_uri, "dv")

    def refuse(*args, **kwargs):
        raise AssertionError("a plain predicate went through the metadata path")

    monkeypatch.setattr(row_metadata, "metadata_filter", refuse)
    assert sorted(table.to_arrow(where="id > 3 AND v = 1", columns=["id"]).column("id").to_pylist()) == [15, 22]
    tx = table.transaction()
    assert tx.read(where="id = 4").num_rows == 1
    tx.abort()


def test_a_table_column_named_metadata_wins(table_uri):
    """As in Spark, a table's own ``_metadata`` column hides the metadata columns in WHERE."""
    schema = pa.schema([("id", pa.int64()), ("_metadata", pa.struct([("row_id", pa.int64())]))])
    table = deltatx.create_table(table_uri, schema, properties=RT)
    table.append(pa.table({"id": [1, 2, 3], "_metadata": [{"row_id": 10}, {"row_id": 20}, {"row_id": 30}]},
                          schema=schema))
    assert table.to_arrow(where="_metadata.row_id = 20", columns=["id"]).to_pylist() == [{"id": 2}]
