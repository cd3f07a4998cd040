"""ROUND and BROUND of DOUBLE and FLOAT as Spark computes them: the value's shortest decimal text
(Java's Double.toString) rounded half up (BROUND: half even), not its binary value, so
``round(1.005, 2)`` is 1.01 where rounding the binary 1.00499999999999989... gives 1.0. A FLOAT is
widened to DOUBLE first (1.005f is 1.0049999952316284: 1.0). NaN and the infinities are returned as
they are, zero comes out as 0.0. The eager evaluator and the lazy scan expression agree on every
value (both run :mod:`deltatx.expr.float_round`), and DECIMAL and integer rounding is unchanged.
"""

from __future__ import annotations

import math
import random
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Context, Decimal

import numpy as np
import pyarrow as pa
import pytest

import deltatx
import sql_values
from deltatx.errors import ConstraintViolationError, PredicateError
from deltatx.expr.float_round import round_like_spark

where = sql_values.where


def both(sql: str, table: pa.Table) -> list:
    """The values of ``sql`` eagerly; the lazy scan expression must give the same (NaN included)."""
    eager = sql_values.eager(sql, table).to_pylist()
    lazy = sql_values.lazy(sql, table).to_pylist()
    assert repr(lazy) == repr(eager), sql
    return eager


def spark_round(value: float, digits: int, half_even: bool = False) -> float:
    """Spark's BigDecimal.valueOf(d).setScale(n, mode).doubleValue(), for the reference."""
    mode = ROUND_HALF_EVEN if half_even else ROUND_HALF_UP
    exact = Context(prec=1000)  # a BigDecimal has every digit: 1e308 at two places too
    out = float(Decimal(repr(value)).quantize(Decimal(1).scaleb(-digits), rounding=mode, context=exact))
    return 0.0 if out == 0 else out


DOUBLES = pa.table({"id": [1, 2, 3, 4, 5, 6, 7],
                    "d": [1.005, 0.285, -1.005, 2.675, 1234.5, -0.001, None]})


@pytest.mark.parametrize("sql, expected", [
    ("round(d, 2)", [1.01, 0.29, -1.01, 2.68, 1234.5, 0.0, None]),
    ("round(d, 1)", [1.0, 0.3, -1.0, 2.7, 1234.5, 0.0, None]),
    ("round(d)", [1.0, 0.0, -1.0, 3.0, 1235.0, 0.0, None]),
    ("round(d, -2)", [0.0, 0.0, 0.0, 0.0, 1200.0, 0.0, None]),
    ("bround(d, 2)", [1.0, 0.28, -1.0, 2.68, 1234.5, 0.0, None]),
    ("bround(d, 0)", [1.0, 0.0, -1.0, 3.0, 1234.0, 0.0, None]),
])
def test_doubles_round_their_shortest_text(sql, expected):
    assert both(sql, DOUBLES) == expected


def test_nan_infinities_and_negative_zero():
    t = pa.table({"id": [1, 2, 3, 4], "d": [math.nan, math.inf, -math.inf, -0.0]})
    out = both("round(d, 2)", t)
    assert math.isnan(out[0]) and out[1:3] == [math.inf, -math.inf]
    assert math.copysign(1.0, out[3]) == 1.0  # a BigDecimal has no -0: Spark gives 0.0
    assert math.copysign(1.0, both("round(d, 2)", pa.table({"d": [-0.001]}))[0]) == 1.0


def test_floats_are_widened_to_double_and_read_back_as_float():
    t = pa.table({"id": [1, 2, 3, 4], "f": pa.array([1.005, 0.125, 2.5, -0.0], pa.float32())})
    assert sql_values.eager("round(f, 2)", t).type == pa.float32()
    # 1.005f is 1.00499999523...: 1.0; 0.125f is exactly 0.125: 0.13 (as FLOAT)
    assert both("round(f, 2)", t) == [1.0, float(np.float32(0.13)), 2.5, 0.0]
    assert both("bround(f, 2)", t) == [1.0, float(np.float32(0.12)), 2.5, 0.0]
    assert both("round(f)", t) == [1.0, 0.0, 3.0, 0.0]


def test_where_constraint_and_generated_column_use_spark_rounding(table_uri, tmp_path):
    """The audit's cases: a WHERE found no row, a CHECK constraint Spark accepts was refused, and a
    generated column's value Spark wrote (1.01) was refused as a wrong value."""
    assert where(DOUBLES, "round(d, 2) = 1.01") == [1]
    assert where(DOUBLES, "round(d, 2) = 0.29") == [2]
    assert where(DOUBLES, "round(d, 2) = -1.01") == [3]
    t = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("d", pa.float64())]))
    t.append(pa.table({"id": pa.array([1, 2], pa.int64()), "d": [1.005, 0.285]}))
    assert t.to_arrow(where="round(d, 2) = 1.01").column("id").to_pylist() == [1]
    t.add_constraint("rounded", "round(d, 2) >= 1.01 OR id <> 1")
    with pytest.raises(ConstraintViolationError):
        t.append(pa.table({"id": pa.array([1], pa.int64()), "d": [1.0049]}))
    t.delete("round(d, 2) = 0.29")
    assert t.to_arrow().column("id").to_pylist() == [1]

    gen_uri = str(tmp_path / "generated")
    g = deltatx.create_table(gen_uri, pa.schema([("d", pa.float64()), ("r", pa.float64())]),
                             generated_columns={"r": "round(d, 2)"})
    g.append(pa.table({"d": [1.005], "r": [1.01]}))  # as Spark computes it
    g.append(pa.table({"d": [0.285]}))
    assert sorted(deltatx.Table(gen_uri).to_arrow().column("r").to_pylist()) == [0.29, 1.01]
    with pytest.raises(ConstraintViolationError):
        g.append(pa.table({"d": [1.005], "r": [1.0]}))  # the binary rounding is not Spark's value


def test_a_sample_of_doubles_matches_the_decimal_reference():
    """Decimal ties (the values the binary rounding gets wrong), random doubles of every size, and
    every number of places from -25 to 25, BROUND too: each value as the exact reference gives it."""
    rng = random.Random(7)
    values = [float(Decimal(rng.randint(-10**6, 10**6)).scaleb(-rng.randint(0, 5)) + Decimal("5E-6"))
              for _ in range(300)]
    values += [rng.uniform(-1e4, 1e4) for _ in range(200)]
    values += [float(Decimal(rng.randint(1, 10**17)).scaleb(rng.randint(-30, 30))) for _ in range(200)]
    values += [5e-324, 1.7976931348623157e308, 4503599627370496.5, 0.5, 1.5, 2.5, -2.5]
    x = np.array(values)
    for digits in range(-25, 26):
        for half_even in (False, True):
            got = round_like_spark(x, digits, half_even, single=False).tolist()
            assert got == [spark_round(v, digits, half_even) for v in values], (digits, half_even)


def test_decimal_ties_of_every_length_and_their_neighbours():
    """Ties k + 1/2 at every scale from 10^22 to 10^-22, with 1 to 17 digits (the longest a double's
    shortest text has), and the doubles just above and below each: where the tie is decided from the
    binary value (narrow intervals) and where it is read from the text (wide ones)."""
    rng = random.Random(11)
    for digits in range(-22, 23):
        values = []
        for _ in range(40):
            length = rng.randint(1, 17)
            whole = rng.randint(10 ** (length - 2), 10 ** (length - 1) - 1) if length > 1 else 0
            tie = float((Decimal(2 * whole + 1) / 2).scaleb(-digits))
            values += [tie, float(np.nextafter(tie, math.inf)), float(np.nextafter(tie, -math.inf)), -tie]
        for half_even in (False, True):
            got = round_like_spark(np.array(values), digits, half_even, single=False).tolist()
            assert got == [spark_round(v, digits, half_even) for v in values], (digits, half_even)


def test_places_far_beyond_a_double():
    x = np.array([1.5e-300, 123.456, 1e300, 5e-324])
    assert round_like_spark(x, 400, False, False).tolist() == x.tolist()  # every digit kept
    assert round_like_spark(x, -400, False, False).tolist() == [0.0] * 4
    assert round_like_spark(np.array([1.25e-30]), 31, False, False).tolist() == [1.3e-30]
    assert round_like_spark(np.array([1.25e-30]), 31, True, False).tolist() == [1.2e-30]


def test_decimals_and_integers_round_as_before():
    t = pa.table({"id": [1, 2, 3], "dec": pa.array([Decimal("1.25"), Decimal("99999999.99"), Decimal("-1.25")],
                                                   pa.decimal128(10, 2)),
                  "i": pa.array([15, 25, -15], pa.int64())})
    assert both("round(dec, 1)", t) == [Decimal("1.30"), Decimal("100000000.00"), Decimal("-1.30")]
    assert both("bround(dec, 1)", t) == [Decimal("1.20"), Decimal("100000000.00"), Decimal("-1.20")]
    assert both("round(i, -1)", t) == [20, 30, -20]
    assert both("bround(i, -1)", t) == [20, 20, -20]
    assert both("round(i, 2)", t) == [15, 25, -15]
    assert sql_values.eager("round(i, -1)", t).type == pa.int64()


def test_places_must_be_an_int_constant():
    with pytest.raises(PredicateError, match="constant"):
        sql_values.eager("round(d, id)", DOUBLES)
    with pytest.raises(PredicateError, match="INT"):
        sql_values.eager("round(d, 3000000000)", DOUBLES)
