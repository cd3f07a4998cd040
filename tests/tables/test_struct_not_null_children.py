"""Data whose struct lacks a field of the table's struct column: a nullable field is filled with
NULLs, a NOT NULL one is a SchemaMismatchError naming the nested path (Delta's
DELTA_MISSING_NOT_NULL_COLUMN_VALUE), never a pyarrow error, and nothing is committed."""

from __future__ import annotations

import os
from typing import Callable

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import SchemaMismatchError

#: the table's struct: ``a`` may be NULL, ``b`` may not
INNER = pa.struct([pa.field("a", pa.int64()), pa.field("b", pa.int64(), nullable=False)])
ONLY_A = pa.struct([pa.field("a", pa.int64())])
NULLABLE_B = pa.struct([pa.field("a", pa.int64()), pa.field("b", pa.int64())])

# (table type of column ``c``, a valid value, the data's type lacking ``b``, its value, the path named)
NESTINGS = {
    "struct": (INNER, {"a": 1, "b": 2}, ONLY_A, {"a": 5}, "c.b"),
    "struct_in_struct": (pa.struct([pa.field("inner", INNER)]), {"inner": {"a": 1, "b": 2}},
                         pa.struct([pa.field("inner", ONLY_A)]), {"inner": {"a": 5}}, "c.inner.b"),
    "list_of_struct": (pa.list_(INNER), [{"a": 1, "b": 2}], pa.list_(ONLY_A), [{"a": 5}], "c.element.b"),
    "map_of_struct": (pa.map_(pa.string(), INNER), [("k", {"a": 1, "b": 2})],
                      pa.map_(pa.string(), ONLY_A), [("k", {"a": 5})], "c.value.b"),
}


def _merge_insert(table: deltatx.Table, data: pa.Table) -> None:
    (table.merge(data, on="t.id = s.id").with_schema_evolution()
     .when_matched_update_all().when_not_matched_insert_all().execute())


def _merge_update(table: deltatx.Table, data: pa.Table) -> None:
    table.merge(data, on="t.id = s.id").with_schema_evolution().when_matched_update_all().execute()


WRITES: dict[str, Callable[[deltatx.Table, pa.Table], None]] = {
    "append": lambda t, d: t.append(d),
    "append_schema_merge": lambda t, d: t.append(d, schema_mode="merge"),
    "overwrite": lambda t, d: t.overwrite(d),
    "merge_evolution_insert": _merge_insert,
}


def _table(uri: str, column_type: pa.DataType, value: object) -> tuple[deltatx.Table, pa.Schema]:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("c", column_type)])
    table = deltatx.create_table(uri, schema)
    table.append(pa.table({"id": [1], "c": pa.array([value], column_type)}, schema=schema))
    return table, schema


def _data_files(uri: str) -> set[str]:
    return {os.path.join(d, f) for d, _, fs in os.walk(uri) if "_delta_log" not in d for f in fs
            if f.endswith(".parquet")}


def _refused(uri: str, table: deltatx.Table, write: Callable[[deltatx.Table, pa.Table], None],
             data: pa.Table, path: str) -> None:
    """``write`` raises the typed error naming ``path`` and leaves the table as it was."""
    before_version, before_rows = deltatx.Table(uri).version, deltatx.Table(uri).to_arrow().to_pylist()
    with pytest.raises(SchemaMismatchError, match=rf"NOT NULL field\(s\) \['{path}'\].*nothing was written"):
        write(table, data)
    after = deltatx.Table(uri)
    assert after.version == before_version
    assert after.to_arrow().to_pylist() == before_rows


@pytest.mark.parametrize("nesting", list(NESTINGS))
@pytest.mark.parametrize("how", list(WRITES))
def test_a_missing_not_null_child_is_a_schema_error(table_uri, how, nesting):
    column_type, value, data_type, data_value, path = NESTINGS[nesting]
    table, _ = _table(table_uri, column_type, value)
    data = pa.table({"id": [2], "c": pa.array([data_value], data_type)})
    _refused(table_uri, table, WRITES[how], data, path)


@pytest.mark.parametrize("how", [*WRITES, "merge_evolution_update"])
def test_a_refused_write_writes_no_file(table_uri, how):
    """Refused before any file is written (a write: from the schemas, before the writer pulls a
    batch; a MERGE: while it computes the new rows): not even an orphan file."""
    table, _ = _table(table_uri, INNER, {"a": 1, "b": 2})
    files = _data_files(table_uri)
    write = _merge_update if how == "merge_evolution_update" else WRITES[how]
    _refused(table_uri, table, write, pa.table({"id": [1, 2], "c": pa.array([{"a": 5}, {"a": 6}], ONLY_A)}), "c.b")
    assert _data_files(table_uri) == files


def test_an_empty_write_lacking_the_child_is_refused_too(table_uri):
    """The rule is about the schema (Delta checks it before any row), not about the rows."""
    table, _ = _table(table_uri, INNER, {"a": 1, "b": 2})
    empty = pa.table({"id": pa.array([], pa.int64()), "c": pa.array([], ONLY_A)})
    _refused(table_uri, table, WRITES["append"], empty, "c.b")


def test_merge_evolution_update_of_a_matched_row_is_refused(table_uri):
    table, _ = _table(table_uri, INNER, {"a": 1, "b": 2})
    data = pa.table({"id": [1], "c": pa.array([{"a": 5}], ONLY_A)})
    _refused(table_uri, table, _merge_update, data, "c.b")


def test_evolution_adding_a_field_still_needs_the_not_null_one(table_uri):
    """schema_mode='merge' adds ``x`` to the struct, but cannot excuse the missing ``b``."""
    table, _ = _table(table_uri, INNER, {"a": 1, "b": 2})
    with_x = pa.struct([pa.field("a", pa.int64()), pa.field("x", pa.string())])
    data = pa.table({"id": [2], "c": pa.array([{"a": 5, "x": "new"}], with_x)})
    _refused(table_uri, table, WRITES["append_schema_merge"], data, "c.b")
    _refused(table_uri, table, _merge_insert, data, "c.b")
    assert deltatx.Table(table_uri).schema.field("c").type == INNER  # no evolution committed either


@pytest.mark.parametrize("how", list(WRITES))
def test_a_missing_nullable_child_is_filled_with_nulls(table_uri, how):
    table, _ = _table(table_uri, NULLABLE_B, {"a": 1, "b": 2})
    WRITES[how](table, pa.table({"id": [2], "c": pa.array([{"a": 5}], ONLY_A)}))
    rows = {r["id"]: r["c"] for r in deltatx.Table(table_uri).to_arrow().to_pylist()}
    assert rows[2] == {"a": 5, "b": None}
    assert deltatx.Table(table_uri).schema.field("c").type == NULLABLE_B


@pytest.mark.parametrize("nesting", ["struct_in_struct", "list_of_struct"])
def test_a_missing_nullable_child_deeper_down_is_filled_with_nulls(table_uri, nesting):
    column_type, value, data_type, data_value, _ = NESTINGS[nesting]
    relaxed = pa.struct([pa.field("a", pa.int64()), pa.field("b", pa.int64())])
    column_type = (pa.struct([pa.field("inner", relaxed)]) if nesting == "struct_in_struct" else pa.list_(relaxed))
    table, _ = _table(table_uri, column_type, value)
    table.append(pa.table({"id": [2], "c": pa.array([data_value], data_type)}))
    rows = {r["id"]: r["c"] for r in deltatx.Table(table_uri).to_arrow().to_pylist()}
    assert rows[2] == ({"inner": {"a": 5, "b": None}} if nesting == "struct_in_struct" else [{"a": 5, "b": None}])


def test_the_not_null_child_given_in_another_case_is_not_missing(table_uri):
    """Names match case-insensitively (Delta): ``B`` is the table's ``b``."""
    table, _ = _table(table_uri, INNER, {"a": 1, "b": 2})
    upper = pa.struct([pa.field("A", pa.int64()), pa.field("B", pa.int64())])
    table.append(pa.table({"id": [2], "c": pa.array([{"A": 5, "B": 6}], upper)}))
    rows = {r["id"]: r["c"] for r in deltatx.Table(table_uri).to_arrow().to_pylist()}
    assert rows[2] == {"a": 5, "b": 6}


def test_missing_required_fields_walks_every_nesting():
    from deltatx.txnlog.schema import missing_required_fields

    assert missing_required_fields(ONLY_A, INNER, "c.") == ["c.b"]
    assert missing_required_fields(ONLY_A, NULLABLE_B, "c.") == []
    for column_type, _, data_type, _, path in NESTINGS.values():
        assert missing_required_fields(data_type, column_type, "c.") == [path]
