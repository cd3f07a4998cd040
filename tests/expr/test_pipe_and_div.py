"""Spark's ``||`` (string concatenation, ``concat``: NULL when a side is NULL) and ``DIV`` (integral
division: BIGINT, truncated toward zero), in expressions, CHECK constraints, generated columns and
``where=`` predicates. A zero divisor of ``DIV`` gives NULL, as ``/`` and ``%`` do here.

``||`` has the precedence of ``+`` and ``-`` in Spark's grammar, left to right (``a || b + c`` is
``(a || b) + c``); ``DIV`` that of ``*``, ``/`` and ``%``.
"""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

import deltatx
import sql_values
from deltatx.errors import ConstraintViolationError, PredicateError
from deltatx.expr import Arithmetic, Column, Func, Literal, parse_expression

where = sql_values.where

T = pa.table({
    "id": pa.array([1, 2, 3, 4], pa.int64()),
    "first": ["Ada", None, "Alan", "Grace"],
    "last": ["Lovelace", "Hopper", None, "Hopper"],
    "v": pa.array([7, -7, 9, None], pa.int64()),
    "i": pa.array([2, 2, 0, 3], pa.int32()),
    "dec": pa.array([Decimal("7.50"), Decimal("-7.50"), Decimal("99999999.99"), None], pa.decimal128(10, 2)),
    "d": [7.9, -7.9, 2.5, None],
})


def both(sql: str, table: pa.Table = T) -> list:
    """The values of ``sql`` eagerly; the lazy scan expression must give the same type and values."""
    eager = sql_values.eager(sql, table)
    lazy = sql_values.lazy(sql, table)
    assert lazy.type == eager.type and lazy.to_pylist() == eager.to_pylist(), sql
    return eager.to_pylist()


@pytest.mark.parametrize("sql, expected", [
    ("a || b", Func("concat", (Column("a"), Column("b")))),
    ("a || b || c", Func("concat", (Column("a"), Column("b"), Column("c")))),
    ("a || b + c", Arithmetic("+", Func("concat", (Column("a"), Column("b"))), Column("c"))),
    ("a || b * c", Func("concat", (Column("a"), Arithmetic("*", Column("b"), Column("c"))))),
    ("a || (b + c)", Func("concat", (Column("a"), Arithmetic("+", Column("b"), Column("c"))))),
    ("x - a || b - c", Arithmetic("-", Func("concat", (Arithmetic("-", Column("x"), Column("a")), Column("b"))),
                                  Column("c"))),
    ("a DIV b", Arithmetic("DIV", Column("a"), Column("b"))),
    ("a div b * 2", Arithmetic("*", Arithmetic("DIV", Column("a"), Column("b")), Literal(2))),
    ("a + b DIV c", Arithmetic("+", Column("a"), Arithmetic("DIV", Column("b"), Column("c")))),
])
def test_parsed_with_sparks_precedence(sql, expected):
    assert parse_expression(sql) == expected
    assert parse_expression(str(expected)) == expected  # the SQL text reads back


def test_pipe_concatenates_and_is_null_with_a_null_side():
    assert both("first || ' ' || last") == ["Ada Lovelace", None, None, "Grace Hopper"]
    assert both("last || id") == ["Lovelace1", "Hopper2", None, "Hopper4"]  # cast to STRING as concat does
    assert both("first || NULL") == [None] * 4
    assert where(T, "first || last = 'GraceHopper'") == [4]


@pytest.mark.parametrize("sql, expected", [
    ("CASE WHEN i <> 0 THEN v DIV i END", [3, -3, None, None]),  # 9 DIV 0 guarded: NULL
    ("v DIV 2", [3, -3, 4, None]),  # toward zero: -7 DIV 2 is -3
    ("-7 DIV 2", [-3] * 4),
    ("i DIV 2", [1, 1, 0, 1]),
    ("dec DIV 2", [3, -3, 49999999, None]),  # DECIMAL: the exact quotient truncated
    ("dec DIV 0.3", [25, -25, 333333333, None]),
    ("v DIV 2.5", [2, -2, 3, None]),  # an integer with a DECIMAL constant divides exactly
    ("d DIV 2", [3, -3, 1, None]),  # a DOUBLE is cast to BIGINT first, as Spark casts it
    ("v DIV NULL", [None] * 4),
])
def test_div_is_integral_division_as_bigint(sql, expected):
    assert both(sql) == expected
    assert sql_values.eager(sql, T).type == pa.int64()


def test_div_overflow_and_refusals():
    extreme = pa.table({"v": pa.array([-(2**63)], pa.int64()), "d": [float("nan")],
                        "w": pa.array([Decimal("1E37")], pa.decimal128(38, 0))})
    for sql in ("v DIV -1", "d DIV 1", "w DIV 1"):  # BIGINT's range, as Spark with ANSI on fails
        with pytest.raises(PredicateError):
            sql_values.eager(sql, extreme)
    assert sql_values.eager("v DIV 1", extreme).to_pylist() == [-(2**63)]
    with pytest.raises(PredicateError, match="DIV divides numbers"):
        sql_values.eager("first DIV 2", T)


def test_in_constraints_generated_columns_and_predicates(table_uri):
    schema = pa.schema([("id", pa.int64()), ("first", pa.string()), ("last", pa.string()), ("v", pa.int64()),
                        ("full", pa.string()), ("half", pa.int64())])
    t = deltatx.create_table(table_uri, schema, generated_columns={"full": "first || ' ' || last", "half": "v DIV 2"})
    t.add_constraint("named", "first || last IS NOT NULL")
    t.add_constraint("small", "v DIV 10 < 100")
    t.append(pa.table({"id": pa.array([1, 2], pa.int64()), "first": ["Ada", "Grace"], "last": ["Lovelace", "Hopper"],
                       "v": pa.array([7, -7], pa.int64())}))
    rows = deltatx.Table(table_uri).to_arrow().sort_by("id").to_pylist()
    assert [(r["full"], r["half"]) for r in rows] == [("Ada Lovelace", 3), ("Grace Hopper", -3)]
    with pytest.raises(ConstraintViolationError):
        t.append(pa.table({"id": pa.array([3], pa.int64()), "first": [None], "last": [None],
                           "v": pa.array([1], pa.int64())}))
    with pytest.raises(ConstraintViolationError):
        t.append(pa.table({"id": pa.array([3], pa.int64()), "first": ["a"], "last": ["b"],
                           "v": pa.array([1000], pa.int64())}))
    with pytest.raises(ConstraintViolationError):  # a generated value that is not the expression's
        t.append(pa.table({"id": pa.array([3], pa.int64()), "first": ["a"], "last": ["b"],
                           "v": pa.array([5], pa.int64()), "half": pa.array([3], pa.int64())}))
    assert t.to_arrow(where="first || ' ' || last = 'Grace Hopper'").column("id").to_pylist() == [2]
    assert t.to_arrow(where="v DIV 2 = -3").column("id").to_pylist() == [2]
    t.delete("id DIV 2 = 1")
    assert t.to_arrow().column("id").to_pylist() == [1]
