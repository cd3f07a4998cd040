"""DECIMAL arithmetic with Spark's result types (DecimalPrecision, Spark 3.4+/4 with
``spark.sql.decimalOperations.allowPrecisionLoss`` on, its default).

An integer column takes the digits its type holds (TINYINT 3, SMALLINT 5, INT 10, BIGINT 20), an
integer constant only its own (``2`` is DECIMAL(1,0)); ``+``/``-`` keep the larger scale and one
more integer digit, ``*`` adds precisions (+1) and scales, ``%`` keeps the larger scale and the
narrower integer part; beyond 38 digits the scale gives way down to 6 and the exact result is
rounded half up. Delta holds a generated column's type to its expression's exactly, so these types
decide which generated columns Spark-made tables may have (``g DECIMAL(12,2) AS (dec * 2)``).
"""

from __future__ import annotations

import json
import os
from decimal import ROUND_HALF_UP, Context, Decimal

import pyarrow as pa
import pytest

import deltatx
import sql_values
from deltatx.errors import ConstraintViolationError, InvalidConstraintError, PredicateError

EXACT = Context(prec=200)

T = pa.table({
    "id": [1, 2, 3, 4],
    "dec": pa.array([Decimal("1.25"), Decimal("99999999.99"), Decimal("-1.25"), None], pa.decimal128(10, 2)),
    "e": pa.array([Decimal("0.3"), Decimal("0.9"), Decimal("-0.7"), Decimal("1")], pa.decimal128(3, 1)),
    "v": pa.array([15, 25, -15, None], pa.int64()),
    "i": pa.array([3, 2, -7, 1], pa.int32()),
    "s": pa.array([3, 2, -7, 1], pa.int16()),
    "b": pa.array([3, 2, -7, 1], pa.int8()),
    "w": pa.array([Decimal("1.5"), Decimal("-12345678901234567890.123456789012345678"), Decimal("1E-18"), None],
                  pa.decimal128(38, 18)),
    "x": pa.array([Decimal("2.25"), Decimal("3"), Decimal("0.5"), Decimal("1")], pa.decimal128(38, 18)),
})


def both(sql: str, table: pa.Table = T) -> pa.Array:
    """``sql`` evaluated eagerly; the lazy scan expression must give the same type and values."""
    eager = sql_values.eager(sql, table)
    lazy = sql_values.lazy(sql, table)
    assert lazy.type == eager.type and lazy.to_pylist() == eager.to_pylist(), sql
    return eager


@pytest.mark.parametrize("sql, precision, scale", [
    ("dec * 2", 12, 2),  # 2 is DECIMAL(1,0)
    ("dec + 1", 11, 2),
    ("dec - 100", 11, 2),  # 100 is DECIMAL(3,0)
    ("dec * v", 31, 2),  # BIGINT is DECIMAL(20,0)
    ("dec * i", 21, 2),  # INT is DECIMAL(10,0)
    ("dec + s", 11, 2),  # SMALLINT is DECIMAL(5,0)
    ("dec * b", 14, 2),  # TINYINT is DECIMAL(3,0)
    ("v + dec", 23, 2),
    ("dec - 1.5", 11, 2),  # 1.5 is DECIMAL(2,1)
    ("dec * 2.5", 13, 3),
    ("dec + dec", 11, 2),
    ("dec * dec", 21, 4),
    ("dec / 3", 14, 6),
    ("dec % 3", 3, 2),
    ("dec % v", 10, 2),
    ("v % dec", 10, 2),
    ("dec % e", 4, 2),
    ("i * 2.5", 13, 1),  # an INT with a DECIMAL constant is DECIMAL arithmetic, not DOUBLE
    ("v / 2.5", 27, 6),
    ("2 * 2.5", 4, 1),
    ("w + dec", 38, 17),  # 39 digits: the scale gives one up
    ("w * 2", 38, 16),
    ("w * v", 38, 6),  # 59 digits: the scale goes down to 6
    ("w * x", 38, 6),  # 77 digits
])
def test_result_types_are_sparks(sql, precision, scale):
    assert both(sql).type == pa.decimal128(precision, scale)


def reference(op: str, a: Decimal | None, b: Decimal | None, scale: int) -> Decimal | None:
    if a is None or b is None:
        return None
    if op == "%" and b == 0:
        return None
    # (Context.remainder has the sign of the dividend, as Java's BigDecimal.remainder)
    exact = {"+": EXACT.add, "-": EXACT.subtract, "*": EXACT.multiply, "%": EXACT.remainder}[op](a, b)
    return exact.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=EXACT)


@pytest.mark.parametrize("sql, left, op, right", [
    ("dec * 2", "dec", "*", 2), ("dec + 1", "dec", "+", 1), ("dec - 100", "dec", "-", 100),
    ("dec * v", "dec", "*", "v"), ("v - dec", "v", "-", "dec"), ("dec * 2.5", "dec", "*", Decimal("2.5")),
    ("dec % e", "dec", "%", "e"), ("dec % 3", "dec", "%", 3), ("v % dec", "v", "%", "dec"), ("dec % i", "dec", "%", "i"),
    ("w + dec", "w", "+", "dec"), ("w * 2", "w", "*", 2), ("w * x", "w", "*", "x"), ("x * w", "x", "*", "w"),
    ("w - x", "w", "-", "x"),
])
def test_values_are_exact_and_rounded_half_up_where_the_scale_gives_way(sql, left, op, right):
    out = both(sql)

    def column(side):
        if isinstance(side, str):
            return [None if v is None else Decimal(v) for v in T.column(side).to_pylist()]
        return [Decimal(side)] * T.num_rows

    expected = [reference(op, a, b, out.type.scale) for a, b in zip(column(left), column(right))]
    assert out.to_pylist() == expected


def test_the_narrower_types_hold_every_value_of_their_operands():
    """DECIMAL(12,2) for ``dec * 2`` is enough for the largest DECIMAL(10,2), as Spark's rule promises."""
    top = pa.table({"dec": pa.array([Decimal("99999999.99"), Decimal("-99999999.99")], pa.decimal128(10, 2)),
                    "v": pa.array([2**63 - 1, -(2**63)], pa.int64())})
    assert both("dec * 2", top).to_pylist() == [Decimal("199999999.98"), Decimal("-199999999.98")]
    assert both("dec + 1", top).to_pylist() == [Decimal("100000000.99"), Decimal("-99999998.99")]
    assert both("dec * v", top).to_pylist() == [EXACT.multiply(Decimal("99999999.99"), 2**63 - 1),
                                                 EXACT.multiply(Decimal("-99999999.99"), -(2**63))]
    assert both("dec % 7", top).to_pylist() == [Decimal("1.99"), Decimal("-1.99")]


def test_a_result_that_does_not_fit_its_bounded_type_fails():
    """ANSI: Spark fails where the bounded result type cannot hold the value (no NULL, no wrap)."""
    big = pa.table({"d": pa.array([Decimal("9" * 38)], pa.decimal128(38, 0)),
                    "w": pa.array([Decimal("12345678901234567890.5")], pa.decimal128(38, 18))})
    for sql in ("d + 1", "d + d", "w * w"):
        with pytest.raises(PredicateError, match="does not fit"):
            sql_values.eager(sql, big)
    assert sql_values.eager("d - d", big).to_pylist() == [Decimal(0)]
    with pytest.raises(PredicateError, match="CAST an operand"):  # 77 digits, scales where a value could fit
        sql_values.eager("h * h", pa.table({"h": pa.array([Decimal("0.5")], pa.decimal128(38, 38))}))


@pytest.mark.parametrize("sql, error", [("dec % 0", "REMAINDER_BY_ZERO"), ("dec / 0", "DIVIDE_BY_ZERO"),
                                        ("dec DIV 0", "DIVIDE_BY_ZERO"), ("dec % (e - e)", "REMAINDER_BY_ZERO")])
def test_a_zero_divisor_fails_as_in_spark_ansi_unless_a_branch_guards_it(sql, error):
    """Spark 4 (ANSI) fails on a zero divisor of a non-NULL dividend; a NULL dividend gives NULL.
    A division Spark may skip for the row (a CASE branch) gives NULL here: deltatx evaluates every
    branch for every row, and the guard is how Spark users avoid the error."""
    with pytest.raises(PredicateError, match=error):
        sql_values.eager(sql, T)
    with pytest.raises(pa.ArrowInvalid, match="divide by zero"):  # a scan: PredicateError (io/reader.py)
        sql_values.lazy(sql, T)
    guarded = f"CASE WHEN id > 100 THEN {sql} END"
    assert both(guarded).to_pylist() == [None] * 4
    only_null = T.filter(pa.compute.is_null(T["dec"]))
    assert both(sql, only_null).to_pylist() == [None]


def test_generated_decimal_columns_of_sparks_types(table_uri, tmp_path):
    """``g DECIMAL(12,2) GENERATED ALWAYS AS (dec * 2)`` is what Spark/Delta defines; deltatx
    refused it (its type for the expression was DECIMAL(30,2)) and accepted DECIMAL(30,2)."""
    schema = pa.schema([("dec", pa.decimal128(10, 2)), ("v", pa.int64()), ("g", pa.decimal128(12, 2)),
                        ("h", pa.decimal128(31, 2))])
    t = deltatx.create_table(table_uri, schema, generated_columns={"g": "dec * 2", "h": "dec * v"})
    t.append(pa.table({"dec": pa.array([Decimal("1.25"), Decimal("99999999.99")], pa.decimal128(10, 2)),
                       "v": pa.array([3, -1], pa.int64())}))
    rows = deltatx.Table(table_uri).to_arrow().to_pylist()
    assert [(r["g"], r["h"]) for r in rows] == [(Decimal("2.50"), Decimal("3.75")),
                                                (Decimal("199999999.98"), Decimal("-99999999.99"))]
    with pytest.raises(ConstraintViolationError):
        t.append(pa.table({"dec": pa.array([Decimal("1.25")], pa.decimal128(10, 2)),
                           "g": pa.array([Decimal("2.51")], pa.decimal128(12, 2))}))
    with pytest.raises(InvalidConstraintError, match=r"decimal128\(12, 2\)"):
        deltatx.create_table(str(tmp_path / "wide"), pa.schema([("dec", pa.decimal128(10, 2)),
                                                                ("g", pa.decimal128(30, 2))]),
                             generated_columns={"g": "dec * 2"})


def test_a_spark_written_generated_decimal_column_is_appended_to(tmp_path):
    """A log as Spark writes it (``g decimal(12,2)`` generated as ``dec + 1``): appends compute it."""
    path = str(tmp_path / "spark_made")
    os.makedirs(os.path.join(path, "_delta_log"))
    schema_string = json.dumps({"type": "struct", "fields": [
        {"name": "dec", "type": "decimal(10,2)", "nullable": True, "metadata": {}},
        {"name": "g", "type": "decimal(11,2)", "nullable": True, "metadata": {"delta.generationExpression": "dec + 1"}}]})
    actions = [
        {"commitInfo": {"timestamp": 1700000000000, "operation": "CREATE TABLE"}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}},
        {"metaData": {"id": "5d0a4b61-8b5e-4e8e-9f0e-6f3c2b1a0d11", "format": {"provider": "parquet", "options": {}},
                      "schemaString": schema_string, "partitionColumns": [], "configuration": {},
                      "createdTime": 1700000000000}},
    ]
    with open(os.path.join(path, "_delta_log", "%020d.json" % 0), "w") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")
    t = deltatx.Table(path)
    t.append(pa.table({"dec": pa.array([Decimal("1.25")], pa.decimal128(10, 2))}))
    assert deltatx.Table(path).to_arrow().column("g").to_pylist() == [Decimal("2.25")]
    assert t.to_arrow(where="dec + 1 = 2.25").num_rows == 1


def test_decimal_arithmetic_in_constraints_and_predicates(table_uri):
    t = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("dec", pa.decimal128(10, 2)),
                                                   ("v", pa.int64())]))
    t.append(pa.table({"id": pa.array([1, 2], pa.int64()),
                       "dec": pa.array([Decimal("1.25"), Decimal("99999999.99")], pa.decimal128(10, 2)),
                       "v": pa.array([4, 2], pa.int64())}))
    t.add_constraint("bounded", "dec * 2 < 200000000")
    assert t.to_arrow(where="dec * v = 5").column("id").to_pylist() == [1]
    assert t.to_arrow(where="v * 2.5 = 5.0").column("id").to_pylist() == [2]
    assert t.to_arrow(where="dec % 1 = 0.99").column("id").to_pylist() == [2]
