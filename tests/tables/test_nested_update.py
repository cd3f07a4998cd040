"""UPDATE of fields inside struct columns (``SET st.a = …``), as delta-spark's UPDATE allows."""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import PredicateError, SchemaMismatchError

INNER = pa.struct([("c", pa.string()), ("d", pa.int32())])
SCHEMA = pa.schema([("id", pa.int64()), ("st", pa.struct([("a", pa.int64()), ("b", INNER)]))])


@pytest.fixture(params=[False, True], ids=["copy_on_write", "deletion_vectors"])
def table(table_uri, request):
    t = deltatx.create_table(table_uri, SCHEMA, properties={
        "delta.enableDeletionVectors": str(request.param).lower()})
    t.append(pa.table({"id": [1, 2, 3], "st": [{"a": 1, "b": {"c": "x", "d": 1}}, None, {"a": 3, "b": None}]},
                      schema=SCHEMA))
    return t


def by_id(t: deltatx.Table) -> dict[int, dict]:
    return {r["id"]: r["st"] for r in deltatx.Table(t.uri).to_arrow().to_pylist()}


def test_fields_are_set_and_the_others_kept(table):
    table.update(where="id <> 3", set={"st.a": "st.a * 10 + id", "st.b.c": "'z'"})
    got = by_id(table)
    assert got[1] == {"a": 11, "b": {"c": "z", "d": 1}}
    # a NULL struct becomes one whose other fields are NULL (Delta rebuilds it field by field)
    assert got[2] == {"a": None, "b": {"c": "z", "d": None}}
    assert got[3] == {"a": 3, "b": None}, "rows the predicate does not match keep their struct"


def test_names_resolve_case_insensitively_and_values_are_cast(table):
    table.update(where="id = 1", set={"ST.B.D": "7"})
    assert by_id(table)[1]["b"]["d"] == 7
    assert deltatx.Table(table.uri).schema.field("st").type == SCHEMA.field("st").type


@pytest.mark.parametrize("assignments, message", [
    ({"st.q": "1"}, "no field 'q'"),
    ({"st": "st", "st.a": "1"}, "whole column"),
    ({"st.b": "NULL", "st.b.c": "'q'"}, "overlap"),
    ({"id.x": "1"}, "unknown column"),
])
def test_bad_field_assignments_are_refused_and_write_nothing(table, assignments, message):
    version = deltatx.Table(table.uri).version
    with pytest.raises(PredicateError, match=message):
        table.update(where="id = 1", set=assignments)
    assert deltatx.Table(table.uri).version == version


def test_a_not_null_field_cannot_be_set_to_null(table_uri):
    schema = pa.schema([("id", pa.int64()), ("st", pa.struct([pa.field("a", pa.int64(), nullable=False)]))])
    t = deltatx.create_table(table_uri, schema)
    t.append(pa.table({"id": [1], "st": [{"a": 1}]}, schema=schema))
    with pytest.raises(SchemaMismatchError, match="NOT NULL field 'a'"):
        t.update(set={"st.a": "NULL"})
    assert deltatx.Table(table_uri).version == 1


def test_merge_update_sets_struct_fields(table):
    source = pa.table({"id": [1, 2, 9], "a": [100, 200, 900]})
    (table.merge(source, on="t.id = s.id")
     .when_matched_update({"t.st.a": "s.a", "st.b.c": "'m'"})
     .when_not_matched_insert({"id": "s.id"})
     .execute())
    got = by_id(table)
    assert got[1] == {"a": 100, "b": {"c": "m", "d": 1}}
    assert got[2] == {"a": 200, "b": {"c": "m", "d": None}}
    assert got[3] == {"a": 3, "b": None} and got[9] is None


def test_merge_insert_cannot_name_a_struct_field(table):
    with pytest.raises(PredicateError, match="unknown column 'st.a'"):
        (table.merge(pa.table({"id": [9], "a": [1]}), on="t.id = s.id")
         .when_not_matched_insert({"id": "s.id", "st.a": "s.a"}).execute())
    assert deltatx.Table(table.uri).version == 1


def test_rows_the_update_does_not_match_are_not_checked_or_rebuilt(table_uri):
    """A NULL struct in a row the predicate leaves alone is no NULL in its NOT NULL field."""
    inner = pa.struct([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.int64())])
    schema = pa.schema([("id", pa.int64()), ("st", inner)])
    t = deltatx.create_table(table_uri, schema)
    t.append(pa.table({"id": [1, 2], "st": pa.array([None, {"a": 1, "b": 2}], inner)}, schema=schema))
    t.update(where="id = 2", set={"st.b": "5"})
    assert deltatx.Table(table_uri).to_arrow().to_pylist() == [{"id": 1, "st": None}, {"id": 2, "st": {"a": 1, "b": 5}}]


def test_backticks_quote_field_and_column_names_holding_a_dot(table_uri):
    """``SET s.`x.y` = …`` sets field ``x.y`` of ``s`` (column mapping allows dots in names), and
    `` `a.b` `` names a top-level column ``a.b``, as in Spark SQL and as predicates read them."""
    schema = pa.schema([("id", pa.int64()), ("a.b", pa.int64()),
                        ("s", pa.struct([("a", pa.int32()), ("x.y", pa.int32())]))])
    t = deltatx.create_table(table_uri, schema, properties={"delta.columnMapping.mode": "name"})
    t.append(pa.table({"id": [1], "a.b": [5], "s": [{"a": 1, "x.y": 2}]}, schema=schema))
    t.update(where="s.`x.y` = 2", set={"s.`x.y`": "20", "`a.b`": "6"})
    assert deltatx.Table(table_uri).to_arrow().to_pylist() == [{"id": 1, "a.b": 6, "s": {"a": 1, "x.y": 20}}]
    t.merge(pa.table({"id": [1]}), on="t.id = s.id").when_matched_update({"`s`.`x.y`": "30"}).execute()
    assert deltatx.Table(table_uri).to_arrow()["s"].to_pylist() == [{"a": 1, "x.y": 30}]
    with pytest.raises(PredicateError, match="no field 'x'"):
        t.update(where="id = 1", set={"s.x.y": "1"})  # unquoted: field x of s, which has none
