"""Column defaults (allowColumnDefaults): CURRENT_DEFAULT fills the columns a write leaves out,
explicit NULLs stay NULL, and a default that cannot be a constant of the column's type is refused."""

from __future__ import annotations

import datetime as dt
import os

import orjson
import pyarrow as pa
import pytest
from tablefiles import data_files

import deltatx
from deltatx.errors import SchemaMismatchError
from deltatx.txnlog.actions import Metadata, Protocol, encode_commit
from deltatx.txnlog.store import open_store


def _default(name: str, t: pa.DataType, sql: str) -> pa.Field:
    return pa.field(name, t, metadata={"CURRENT_DEFAULT": sql})


SCHEMA = pa.schema([
    ("id", pa.int64()),
    _default("qty", pa.int32(), "40 + 2"),
    _default("status", pa.string(), "'new'"),
    _default("price", pa.decimal128(10, 2), "CAST('9.99' AS DECIMAL(10,2))"),
    _default("at", pa.timestamp("us", tz="UTC"), "current_timestamp()"),
    _default("note", pa.string(), "NULL"),
])


def _schema_json(uri: str) -> dict:
    with open(os.path.join(uri, "_delta_log", f"{0:020d}.json"), "rb") as fh:
        for line in fh.read().splitlines():
            action = orjson.loads(line)
            if "metaData" in action:
                return orjson.loads(action["metaData"]["schemaString"])
    raise AssertionError("no metaData")


def test_defaults_are_recorded_and_the_protocol_lists_the_feature(table_uri):
    table = deltatx.create_table(table_uri, SCHEMA)
    assert table.protocol.min_writer_version == 7 and table.protocol.min_reader_version == 1
    assert "allowColumnDefaults" in table.protocol.writer_features
    recorded = {f["name"]: f["metadata"].get("CURRENT_DEFAULT") for f in _schema_json(table_uri)["fields"]}
    # the SQL text is stored as a string, also when it looks like JSON ("40 + 2", "NULL")
    assert recorded == {"id": None, "qty": "40 + 2", "status": "'new'", "price": "CAST('9.99' AS DECIMAL(10,2))",
                        "at": "current_timestamp()", "note": "NULL"}


def test_omitted_columns_get_their_default_explicit_nulls_stay(table_uri):
    table = deltatx.create_table(table_uri, SCHEMA)
    before = dt.datetime.now(dt.timezone.utc)
    table.append(pa.table({"id": [1, 2]}))
    table.append(pa.table({"id": [3], "qty": pa.array([None], pa.int32()), "status": ["paid"]}))
    rows = {r["id"]: r for r in deltatx.Table(table_uri).to_arrow().to_pylist()}
    assert [rows[i]["qty"] for i in (1, 2, 3)] == [42, 42, None]
    assert [rows[i]["status"] for i in (1, 2, 3)] == ["new", "new", "paid"]
    assert {str(rows[i]["price"]) for i in (1, 2, 3)} == {"9.99"}
    assert {rows[i]["note"] for i in (1, 2, 3)} == {None}
    assert rows[1]["at"] == rows[2]["at"] >= before  # one clock reading per write
    assert rows[3]["at"] >= rows[1]["at"]


def test_overwrite_and_merge_insert_fill_defaults(table_uri):
    table = deltatx.create_table(table_uri, SCHEMA)
    table.overwrite(pa.table({"id": [1], "status": ["old"]}))
    table.merge(pa.table({"id": [1, 5], "qty": pa.array([7, 8], pa.int32())}), on="t.id = s.id") \
        .when_matched_update(set={"qty": "s.qty"}) \
        .when_not_matched_insert(values={"id": "s.id"}) \
        .execute()
    rows = {r["id"]: r for r in deltatx.Table(table_uri).to_arrow().to_pylist()}
    assert (rows[1]["qty"], rows[1]["status"]) == (7, "old")  # updated row keeps its own values
    assert (rows[5]["qty"], rows[5]["status"]) == (42, "new")  # inserted row gets the defaults


@pytest.mark.parametrize(("field", "match"), [
    (_default("n", pa.int32(), "id + 1"), "a default must be a constant"),
    (_default("n", pa.int32(), "'abc'"), "does not fit"),
    (_default("n", pa.int32(), "1 +"), "not an expression"),
    (_default("n", pa.int32(), "   "), "is empty"),
    (_default("n", pa.int8(), "1000"), "does not fit"),
])
def test_bad_defaults_are_refused_when_the_table_is_created(table_uri, field, match):
    with pytest.raises(SchemaMismatchError, match=match):
        deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), field]))
    assert not os.path.exists(table_uri)


def test_a_table_from_another_engine_with_defaults_is_written_with_them(table_uri):
    """As Spark leaves one: writer feature listed, CURRENT_DEFAULT in the schema's field metadata."""
    schema = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "flag", "type": "boolean", "nullable": False, "metadata": {"CURRENT_DEFAULT": "true"}},
    ]}
    open_store(table_uri).put_commit(0, encode_commit(
        {"timestamp": 1, "operation": "CREATE TABLE"},
        protocol=Protocol(1, 7, None, ("allowColumnDefaults",)),
        metadata=Metadata(id="t", schema_string=orjson.dumps(schema).decode())))
    table = deltatx.Table(table_uri)
    table.append(pa.table({"id": [1]}))  # NOT NULL column left out: its default makes it valid
    assert deltatx.Table(table_uri).to_arrow().to_pylist() == [{"id": 1, "flag": True}]
    before = data_files(table_uri)
    with pytest.raises(SchemaMismatchError, match="NOT NULL"):
        table.append(pa.table({"id": [2], "flag": pa.array([None], pa.bool_())}))  # explicit NULL: refused
    assert deltatx.Table(table_uri).version == 1 and data_files(table_uri) == before


def test_replacing_a_table_checks_the_new_defaults(table_uri):
    from deltatx.tables.ops.replace_table import stage_replace_table

    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1]}))
    bad = pa.schema([("id", pa.int64()), _default("n", pa.int32(), "id * 2")])
    with table.transaction() as tx, pytest.raises(SchemaMismatchError, match="a default must be a constant"):
        stage_replace_table(tx, bad)
    assert deltatx.Table(table_uri).version == 1
    with table.transaction() as tx:
        stage_replace_table(tx, pa.schema([("id", pa.int64()), _default("n", pa.int32(), "7")]))
    table = deltatx.Table(table_uri)
    table.append(pa.table({"id": [2]}))
    assert table.to_arrow().to_pylist() == [{"id": 2, "n": 7}]
    assert "allowColumnDefaults" in table.protocol.writer_features


def test_the_default_keyword_in_update_and_merge(tmp_path):
    """Spark's SET col = DEFAULT: the column's default, NULL for a column without one."""
    uri = str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("d", pa.string()), pa.field("n", pa.int64())])
    t = deltatx.create_table(uri, schema)
    t.set_column_default("d", "'dflt'")
    t.append(pa.table({"id": [1], "d": ["x"], "n": [5]}))
    t.update("id = 1", {"d": "DEFAULT", "n": " default "})
    assert t.to_arrow().to_pylist() == [{"id": 1, "d": "dflt", "n": None}]
    source = pa.table({"id": [1, 2], "d": ["y", "z"]})
    (t.merge(source, on="t.id = s.id").when_matched_update(set={"d": "s.d"})
      .when_not_matched_insert(values={"id": "s.id", "d": "DEFAULT"}).execute())
    assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "d": "y", "n": None}, {"id": 2, "d": "dflt", "n": None}]
    t.merge(source, on="t.id = s.id").when_matched_update(set={"t.d": "DEFAULT"}).execute()
    assert {r["d"] for r in t.to_arrow().to_pylist()} == {"dflt"}


def test_defaults_never_sit_on_generated_identity_or_nested_columns(tmp_path):
    """Spark refuses a DEFAULT on a generated or identity column (their values come from their
    definition) and on nested fields (no write fills one); deltatx did take them and ignore them."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("g", pa.int64(), metadata={"CURRENT_DEFAULT": "1"})])
    with pytest.raises(SchemaMismatchError, match="generated"):
        deltatx.create_table(str(tmp_path / "g"), schema, generated_columns={"g": "id * 2"})
    identity = pa.schema([pa.field("id", pa.int64(), metadata={"CURRENT_DEFAULT": "5"}), pa.field("v", pa.int64())])
    with pytest.raises(SchemaMismatchError, match="identity"):
        deltatx.create_table(str(tmp_path / "i"), identity, identity_columns={"id": {}})
    nested = pa.schema([pa.field("s", pa.struct([pa.field("x", pa.int32(), metadata={"CURRENT_DEFAULT": "1"})]))])
    with pytest.raises(SchemaMismatchError, match="top-level"):
        deltatx.create_table(str(tmp_path / "n"), nested)
    assert not any((tmp_path / n / "_delta_log").exists() for n in ("g", "i", "n"))
    t = deltatx.create_table(str(tmp_path / "later"), pa.schema([("id", pa.int64()), ("g", pa.int64())]),
                             generated_columns={"g": "id * 2"})
    with pytest.raises(SchemaMismatchError, match="generated"):
        t.set_column_default("g", "1")
    assert t.version == 0


def test_schema_evolution_adds_columns_without_their_defaults(tmp_path):
    """PROTOCOL.md "Default Columns": a command that adds a column must not give it a default
    (add_columns refuses one); schema evolution takes the column from the data, not its default."""
    source_schema = pa.schema([pa.field("id", pa.int64()), pa.field("q", pa.int64(), metadata={"CURRENT_DEFAULT": "3"})])
    source = pa.table({"id": [1], "q": [1]}, schema=source_schema)
    appended = deltatx.create_table(str(tmp_path / "a"), pa.schema([("id", pa.int64())]))
    appended.append(source, schema_mode="merge")
    merged = deltatx.create_table(str(tmp_path / "m"), pa.schema([("id", pa.int64())]))
    merged.merge(source, on="t.id = s.id").with_schema_evolution().when_not_matched_insert_all().execute()
    for t in (appended, merged):
        t = deltatx.Table(t.uri)
        assert not t.schema.field("q").metadata and "allowColumnDefaults" not in (t.protocol.writer_features or [])
        t.append(pa.table({"id": [2]}))
        assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"]) == [{"id": 1, "q": 1}, {"id": 2, "q": None}]
