"""CHECK constraints, generated and identity columns across deltatx and deltalake (delta-rs 1.x).

* deltatx stores a constraint as Delta does (``delta.constraints.<name>``, writer feature
  ``checkConstraints``): deltalake refuses violating rows in a deltatx table, accepts valid ones,
  and deltatx reads them; a constraint deltalake adds (``DeltaTable.alter.add_constraint``, legacy
  writer 3) is enforced by deltatx.
* Generated columns (``delta.generationExpression``): deltalake computes and checks deltatx's,
  deltatx computes and checks deltalake's (legacy writer 4); both read the same rows.
* Identity columns: deltalake reads a deltatx identity table, and refuses to write to it (it does
  not implement ``identityColumns``), so it cannot hand out colliding values.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.schema import Field, PrimitiveType, Schema

import deltatx
from deltatx.errors import ConstraintViolationError
from interop_helpers import read_deltalake

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64()), ("twice", pa.int64())])


def batch(ids: list[int], v: list[int | None], twice: list[int | None] | None = None) -> pa.Table:
    cols = {"id": pa.array(ids, pa.int64()), "v": pa.array(v, pa.int64())}
    if twice is not None:
        cols["twice"] = pa.array(twice, pa.int64())
    return pa.table(cols)


def by_id(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def test_deltalake_refuses_rows_that_break_a_deltatx_constraint(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(batch([1], [1], [2]))
    t.add_constraint("v_positive", "v > 0")
    assert "checkConstraints" in t.protocol.writer_features
    version = t.version
    with pytest.raises(Exception, match="validation"):
        write_deltalake(table_uri, batch([2], [-2], [-4]), mode="append")
    assert deltatx.Table(table_uri).version == version
    write_deltalake(table_uri, batch([3], [3], [6]), mode="append")
    expected = [{"id": 1, "v": 1, "twice": 2}, {"id": 3, "v": 3, "twice": 6}]
    assert by_id(deltatx.Table(table_uri).to_arrow()) == expected
    assert by_id(read_deltalake(table_uri)) == expected


def test_deltatx_enforces_a_constraint_deltalake_added(table_uri):
    write_deltalake(table_uri, batch([1, 2], [1, 2], [2, 4]))
    DeltaTable(table_uri).alter.add_constraint({"v_positive": "v > 0"})
    t = deltatx.Table(table_uri)
    assert t.properties["delta.constraints.v_positive"] == "v > 0"
    version = t.version
    with pytest.raises(ConstraintViolationError) as info:
        t.append(batch([3], [0], [0]))
    assert info.value.constraint == "v_positive"
    assert deltatx.Table(table_uri).version == version
    t.append(batch([4], [4], [8]))
    t.update("id = 1", set={"v": "10"})
    with pytest.raises(ConstraintViolationError):
        t.update("id = 2", set={"v": "-1"})
    expected = [{"id": 1, "v": 10, "twice": 2}, {"id": 2, "v": 2, "twice": 4}, {"id": 4, "v": 4, "twice": 8}]
    assert by_id(read_deltalake(table_uri)) == expected


def test_deltalake_computes_and_checks_deltatx_generated_columns(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, generated_columns={"twice": "v * 2"})
    t.append(batch([1], [1]))
    write_deltalake(table_uri, batch([2], [2]), mode="append")  # deltalake computes it
    with pytest.raises(Exception, match="validation"):
        write_deltalake(table_uri, batch([3], [3], [7]), mode="append")
    expected = [{"id": 1, "v": 1, "twice": 2}, {"id": 2, "v": 2, "twice": 4}]
    assert by_id(deltatx.Table(table_uri).to_arrow()) == expected
    assert by_id(read_deltalake(table_uri)) == expected


def test_deltatx_computes_and_checks_deltalake_generated_columns(table_uri):
    schema = Schema([Field("id", PrimitiveType("long")), Field("v", PrimitiveType("long")),
                     Field("twice", PrimitiveType("long"), metadata={"delta.generationExpression": "v * 2"})])
    DeltaTable.create(table_uri, schema=schema)
    write_deltalake(table_uri, batch([1], [1]), mode="append")
    t = deltatx.Table(table_uri)
    assert t.protocol.min_writer_version == 4  # legacy writer 4 implies generated columns
    t.append(batch([2], [2]))
    version = t.version
    with pytest.raises(ConstraintViolationError, match="twice"):
        t.append(batch([3], [3], [5]))
    assert deltatx.Table(table_uri).version == version
    t.update("id = 1", set={"v": "v + 100"})
    expected = [{"id": 1, "v": 101, "twice": 202}, {"id": 2, "v": 2, "twice": 4}]
    assert by_id(read_deltalake(table_uri)) == expected
    assert by_id(deltatx.Table(table_uri).to_arrow()) == expected


def test_deltalake_reads_identity_tables_and_does_not_write_them(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, identity_columns={"id": {"start": 5, "step": 5}})
    t.append(batch([0, 0], [1, 2]).drop_columns(["id"]))
    expected = [{"id": 5, "v": 1, "twice": None}, {"id": 10, "v": 2, "twice": None}]
    assert by_id(read_deltalake(table_uri)) == expected
    version = t.version
    with pytest.raises(Exception, match="(?i)identity"):
        write_deltalake(table_uri, batch([99], [3], [6]), mode="append")
    assert deltatx.Table(table_uri).version == version
