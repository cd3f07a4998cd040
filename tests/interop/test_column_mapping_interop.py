"""Column-mapped tables (name and id modes) between deltatx and deltalake (delta-rs), and DuckDB.

Both directions: deltalake reads what deltatx writes (after renames, drops, adds, DML and
deletion vectors) with the same rows as an independent model, and deltatx reads, appends to,
deletes from and renames columns of tables deltalake created. deltalake is read through its
DataFusion ``QueryBuilder``: its pyarrow-dataset path (``to_pyarrow_table``) returns nulls for
column-mapped tables. polars refuses the ``columnMapping`` reader feature, and DuckDB's delta
extension returns NULL partition values for column-mapped tables, so DuckDB is checked on an
unpartitioned table only.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from interop_helpers import read_duckdb

import deltatx

SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("part", pa.string()),
    ("value", pa.float64()),
    ("s", pa.struct([("x", pa.int64()), ("y", pa.string())])),
])
MODES = ["name", "id"]


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({
        "id": ids,
        "part": [f"p{i % 3}" for i in ids],
        "value": [None if i % 7 == 3 else i * 0.5 for i in ids],
        "s": [None if i % 5 == 4 else {"x": i, "y": f"y{i}"} for i in ids],
    }, schema=SCHEMA)


def read_deltalake(uri: str) -> pa.Table:
    from deltalake import DeltaTable, QueryBuilder

    return pa.table(QueryBuilder().register("t", DeltaTable(uri)).execute("SELECT * FROM t").read_all())


def _sorted(table: pa.Table, key: str = "id") -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: r[key])


def _plain(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table``'s columns in ``schema``'s order and types (readers differ in string/list spellings)."""
    return table.select(schema.names).cast(schema)


def assert_both_read(uri: str, expected: pa.Table, key: str = "id") -> None:
    want = _sorted(expected, key)
    plain = pa.schema([pa.field(f.name, f.type) for f in expected.schema])
    assert _sorted(_plain(deltatx.Table(uri).to_arrow(), plain), key) == want, "deltatx"
    assert _sorted(_plain(read_deltalake(uri), plain), key) == want, "deltalake"


# --------------------------------------------------------------------------------------------
# deltalake reads what deltatx writes
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
@pytest.mark.parametrize("mode", MODES)
def test_deltalake_reads_our_column_changes_and_dml(table_uri, mode, partitioned):
    table = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"] if partitioned else None,
                                 properties={"delta.columnMapping.mode": mode})
    table.append(_rows(0, 30))
    table.append(_rows(30, 30))
    model = pa.concat_tables([_rows(0, 30), _rows(30, 30)])
    assert_both_read(table_uri, model)

    table.rename_column("value", "amount")
    table.rename_column("s.x", "sx")
    model = model.rename_columns(["id", "part", "amount", "s"])
    renamed = pa.struct([("sx", pa.int64()), ("y", pa.string())])
    model = model.set_column(3, "s", pa.chunked_array([c.view(renamed) for c in model.column("s").chunks]))
    assert_both_read(table_uri, model)

    table.drop_column("amount")
    table.add_columns(pa.field("amount", pa.float64()))  # a new column: old values must not return
    model = model.drop_columns(["amount"]).append_column("amount", pa.nulls(model.num_rows, pa.float64()))
    assert_both_read(table_uri, model)

    more = pa.table({"id": [100, 101], "part": ["p0", "p1"], "s": [{"sx": 1, "y": "n"}, None],
                     "amount": [1.5, None]}, schema=model.schema)
    table.append(more)
    model = pa.concat_tables([model, more])
    table.delete("id % 4 = 0 OR s.sx = 33")
    model = model.filter(pc.invert(pc.fill_null(pc.or_kleene(pc.equal(pc.remainder(model["id"], 4), 0),
                                                       pc.equal(pc.struct_field(model["s"], "sx"), 33)), False)))
    table.update("id = 5", {"amount": "55.5"})
    model = model.set_column(model.schema.get_field_index("amount"), "amount",
                             pc.if_else(pc.equal(model["id"], 5), 55.5, model["amount"]))
    assert_both_read(table_uri, model)

    table.optimize()
    table.checkpoint()
    assert_both_read(table_uri, model)


@pytest.mark.parametrize("mode", MODES)
def test_deltalake_reads_our_deletion_vectors_on_a_mapped_table(table_uri, mode):
    table = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"],
                                 properties={"delta.columnMapping.mode": mode, "delta.enableDeletionVectors": "true"})
    table.append(_rows(0, 60))
    table.rename_column("id", "key")
    result = table.delete("key % 4 = 0")
    assert result.metrics["numDeletionVectorsAdded"] >= 1
    expected = _rows(0, 60).rename_columns(["key", "part", "value", "s"])
    expected = expected.filter(pc.not_equal(pc.remainder(expected["key"], 4), 0))
    assert_both_read(table_uri, expected, key="key")


@pytest.mark.parametrize("mode", MODES)
def test_deltalake_appends_to_our_renamed_table(table_uri, mode):
    from deltalake import write_deltalake

    table = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"],
                                 properties={"delta.columnMapping.mode": mode})
    table.append(_rows(0, 10))
    table.rename_column("value", "amount")
    theirs = _rows(10, 5).rename_columns(["id", "part", "amount", "s"])
    write_deltalake(table_uri, theirs, mode="append")
    expected = pa.concat_tables([_rows(0, 10).rename_columns(["id", "part", "amount", "s"]), theirs])
    assert_both_read(table_uri, expected)
    assert deltatx.Table(table_uri).to_arrow("amount > 6 AND part = 'p1'")["id"].to_pylist() == [13]


# --------------------------------------------------------------------------------------------
# deltatx reads and writes what deltalake creates
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_we_read_append_delete_and_rename_on_deltalake_tables(table_uri, mode):
    from deltalake import write_deltalake

    write_deltalake(table_uri, _rows(0, 40), partition_by=["part"],
                    configuration={"delta.columnMapping.mode": mode})
    table = deltatx.Table(table_uri)
    assert (table.protocol.min_reader_version, table.protocol.min_writer_version) == (2, 5)
    assert _sorted(table.to_arrow()) == _sorted(read_deltalake(table_uri).select(SCHEMA.names).cast(SCHEMA))
    assert_both_read(table_uri, _rows(0, 40))
    assert sorted(table.to_arrow("s.x > 30 AND part = 'p2'")["id"].to_pylist()) == [32, 35, 38]

    table.append(_rows(40, 20))
    table.delete("id < 10 OR s.y = 'y45'")
    model = pa.concat_tables([_rows(0, 40), _rows(40, 20)])
    model = model.filter(pc.invert(pc.fill_null(pc.or_kleene(pc.less(model["id"], 10),
                                                       pc.equal(pc.struct_field(model["s"], "y"), "y45")), False)))
    assert_both_read(table_uri, model)
    assert (table.protocol.min_reader_version, table.protocol.min_writer_version) == (2, 5)  # nothing to upgrade

    table.rename_column("value", "amount")
    table.add_columns(pa.field("note", pa.string()))
    table.update("id = 12", {"note": "'hi'"})
    model = model.rename_columns(["id", "part", "amount", "s"])
    model = model.append_column("note", pa.array([("hi" if i == 12 else None) for i in model["id"].to_pylist()],
                                                 pa.string()))
    assert_both_read(table_uri, model)
    write_deltalake(table_uri, model.slice(0, 2).set_column(0, "id", pa.array([900, 901], pa.int64())),
                    mode="append")
    assert sorted(deltatx.Table(table_uri).to_arrow("id >= 900")["id"].to_pylist()) == [900, 901]


def test_duckdb_reads_our_mapped_tables(tmp_path):
    for mode in MODES:
        uri = str(tmp_path / mode)
        table = deltatx.create_table(uri, SCHEMA, properties={"delta.columnMapping.mode": mode})
        table.append(_rows(0, 20))
        table.rename_column("value", "amount")
        table.delete("id > 15")
        expected = _rows(0, 16).rename_columns(["id", "part", "amount", "s"])
        plain = pa.schema([pa.field(f.name, f.type) for f in expected.schema])
        assert _sorted(_plain(read_duckdb(uri), plain)) == _sorted(expected), mode
