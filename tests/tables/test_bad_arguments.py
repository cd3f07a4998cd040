"""Bad arguments fail with typed deltatx errors and write nothing: non-boolean WHERE
predicates, UPDATE values and column names, RESTORE versions and OPTIMIZE target sizes."""

from __future__ import annotations

import pyarrow as pa
import pytest
from tablefiles import data_files

import deltatx
from deltatx import errors

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("s", pa.string())])


def rows(ids: list[int], part: int = 0) -> pa.Table:
    return pa.table({"id": ids, "part": [part] * len(ids), "s": [str(i) for i in ids]}, schema=SCHEMA)


@pytest.fixture
def table(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    t.append(rows([1, 2, 3], 0))
    t.append(rows([4, 5], 0))
    return t


NOT_CONDITIONS = {
    "delete": lambda t: t.delete(where="id + 1"),
    "update": lambda t: t.update(where="id", set={"s": "'x'"}),
    "replace_where": lambda t: t.overwrite(rows([1]), where="id"),
    "to_arrow": lambda t: t.to_arrow(where="id"),
    "optimize": lambda t: t.optimize(where="part"),
    "transaction_read": lambda t: t.transaction().read(where="s"),
}


@pytest.mark.parametrize("op", list(NOT_CONDITIONS))
def test_a_non_boolean_predicate_is_a_predicate_error(table, table_uri, op):
    before_files, before_version = data_files(table_uri), table.version
    with pytest.raises(errors.PredicateError, match="not a condition"):
        NOT_CONDITIONS[op](table)
    assert deltatx.Table(table_uri).version == before_version
    assert data_files(table_uri) == before_files


def _legacy_table(uri: str, schema: pa.Schema) -> deltatx.Table:
    """A table whose columns differ only by case, as an older writer left it: create_table now
    refuses such a schema (Delta does), so version 0 is written with stand-in names, renamed in
    the log; reading and UPDATE must still resolve its columns."""
    import os

    stand_ins = [f"col{i}" for i in range(len(schema))]
    deltatx.create_table(uri, pa.schema([f.with_name(n) for f, n in zip(schema, stand_ins)]))
    log = os.path.join(uri, "_delta_log", f"{0:020d}.json")
    with open(log) as f:
        text = f.read()
    for f, n in zip(schema, stand_ins):
        text = text.replace(f'\\"name\\":\\"{n}\\"', f'\\"name\\":\\"{f.name}\\"')
    with open(log, "w") as f:
        f.write(text)
    table = deltatx.Table(uri)
    assert table.schema.names == schema.names
    return table


def test_update_prefers_the_exact_column_name(table_uri):
    schema = pa.schema([("a", pa.int64()), ("A", pa.int64())])
    t = _legacy_table(table_uri, schema)
    t.append(pa.table({"a": [1, 2], "A": [10, 20]}, schema=schema))
    t.update(set={"a": "5"})
    assert t.to_arrow().sort_by("A").to_pylist() == [{"a": 5, "A": 10}, {"a": 5, "A": 20}]
    t.update(set={"A": "7"})
    assert t.to_arrow().to_pylist() == [{"a": 5, "A": 7}, {"a": 5, "A": 7}]


def test_update_resolves_a_unique_case_insensitive_name(table):
    table.update(where="id = 1", set={"S": "'one'"})
    assert table.to_arrow(where="id = 1")["s"].to_pylist() == ["one"]


def test_update_refuses_an_ambiguous_or_unknown_name(table_uri):
    schema = pa.schema([("ab", pa.int64()), ("AB", pa.int64())])
    t = _legacy_table(table_uri, schema)
    t.append(pa.table({"ab": [1], "AB": [10]}, schema=schema))
    with pytest.raises(errors.PredicateError, match="ambiguous"):
        t.update(set={"Ab": "1"})
    with pytest.raises(errors.PredicateError, match="unknown column"):
        t.update(set={"c": "1"})
    assert t.version == 1


def test_update_accepts_python_literals(table):
    table.update(where="id = 2", set={"s": 5})  # cast to the column type like SQL 5 would be
    table.update(where="id = 3", set={"s": None})
    got = {r["id"]: r["s"] for r in table.to_arrow().to_pylist()}
    assert got == {1: "1", 2: "5", 3: None, 4: "4", 5: "5"}


def test_update_refuses_a_value_that_is_no_literal(table, table_uri):
    before = data_files(table_uri)
    with pytest.raises(errors.PredicateError, match="literal"):
        table.update(set={"s": object()})
    assert table.version == 2 and data_files(table_uri) == before


@pytest.mark.parametrize("target_size", ["x", "100", 1.5, 0, -1])
def test_optimize_target_size_must_be_a_positive_integer(table, table_uri, target_size):
    before = data_files(table_uri)
    with pytest.raises(errors.InvalidPropertyError, match="target_size"):
        table.optimize(target_size=target_size)
    assert deltatx.Table(table_uri).version == 2 and data_files(table_uri) == before
