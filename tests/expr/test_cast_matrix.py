"""CAST between temporal types, numbers and text, held to Spark 4.3 (ANSI mode, its default;
session time zone UTC).

Every expected value below was checked with a local SparkSession. Each conversion is held to
agree between a constant (folded when parsed), a column evaluated eagerly (``evaluate``) and the
lazy Arrow expression a dataset scan runs (``to_arrow``); a CAST that fails on a value fails in
each, and TRY_CAST gives NULL there instead.

1. Spark has no cast from a number or a BOOLEAN to DATE or TIMESTAMP_NTZ, nor from those to a
   number or a BOOLEAN, nor between BOOLEAN and TIMESTAMP (ANSI): refused when the query is
   analysed (DATATYPE_MISMATCH), for CAST and TRY_CAST alike, whatever the value.
2. A TIMESTAMP and a number convert as SECONDS since 1970-01-01 00:00:00 UTC. To an integer:
   the whole seconds rounded down (-0.1 s is -1), an overflow failing; to DOUBLE/FLOAT: the
   fraction kept; to DECIMAL: the exact seconds rounded half up. From an integer: microseconds
   saturating at BIGINT's range (no error); from a float: the product by 10^6 truncated toward
   zero, NaN, an infinity and an overflow failing; from a DECIMAL: its microseconds truncated
   toward zero, wrapped to 64 bits (Java's BigDecimal.longValue: no error).
3. Timestamp text may name its zone after the seconds as Java does ('Z', '+2', ' +02:00',
   'UTC', 'GMT+2', 'Europe/Paris', 'PST', ...), with or without a space; an offset beyond 18
   hours, a zone after a time without seconds, and a name Java does not know (case counts)
   are malformed. A TIMESTAMP takes the instant, a TIMESTAMP_NTZ the local time.
4. DECIMAL and BOOLEAN convert both ways (not zero is true; true is 1).
5. ``x IN ()`` is refused by Spark's parser (INVALID_SQL_SYNTAX.EMPTY_IN_PREDICATE).
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from decimal import Decimal

import pyarrow as pa
import pytest

import deltatx
import sql_values
from deltatx.errors import PredicateError
from deltatx.expr import Literal, bind, evaluate, parse_expression, parse_predicate, to_arrow

UTC = dt.timezone.utc
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
FAILS = "fails"  # CAST fails on the value (Spark: CAST_OVERFLOW, CAST_INVALID_INPUT, ...), TRY_CAST is NULL

ARROW = {
    "TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(), "BIGINT": pa.int64(), "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(), "DECIMAL(2,1)": pa.decimal128(2, 1), "DECIMAL(38,18)": pa.decimal128(38, 18),
    "DECIMAL(38,0)": pa.decimal128(38, 0), "DECIMAL(38,37)": pa.decimal128(38, 37), "BOOLEAN": pa.bool_(),
    "DATE": pa.date32(), "TIMESTAMP": pa.timestamp("us", "UTC"), "TIMESTAMP_NTZ": pa.timestamp("us"),
    "STRING": pa.string(),
}


_eager, _lazy = sql_values.eager, sql_values.lazy


def _constant(sql: str) -> pa.Scalar:
    folded = parse_expression(sql)
    assert isinstance(folded, Literal), sql
    return folded.to_scalar()


def _plain(values: pa.Array | pa.ChunkedArray | pa.Scalar) -> list:
    """Values as Python, a timestamp as its microseconds (Spark's reach past Python's year 9999)."""
    if pa.types.is_timestamp(values.type):
        values = values.cast(pa.int64())
    return [values.as_py()] if isinstance(values, pa.Scalar) else values.to_pylist()


def _check(cast_of_column: str, constant_cast: str, table: pa.Table, expected: object) -> None:
    """``CAST`` and ``TRY_CAST`` of a column (eager and lazy) and of a constant give ``expected``
    (FAILS: CAST raises, TRY_CAST is NULL)."""
    if expected is FAILS:
        with pytest.raises(PredicateError):
            _eager(cast_of_column, table)
        with pytest.raises((PredicateError, pa.ArrowInvalid)):
            _lazy(cast_of_column, table)
        with pytest.raises(PredicateError):
            parse_expression(constant_cast)
    else:
        assert _plain(_eager(cast_of_column, table)) == [expected], cast_of_column
        assert _plain(_lazy(cast_of_column, table)) == [expected], cast_of_column
        assert _plain(_constant(constant_cast)) == [expected], constant_cast
    tried = None if expected is FAILS else expected
    try_column, try_constant = "TRY_" + cast_of_column, "TRY_" + constant_cast
    assert _plain(_eager(try_column, table)) == [tried], try_column
    assert _plain(_lazy(try_column, table)) == [tried], try_column
    assert _plain(_constant(try_constant)) == [tried], try_constant


# --------------------------------------------------------------------------------------------
# 1. Casts Spark does not have
# --------------------------------------------------------------------------------------------

NUMBERS = {"TINYINT": "1", "SMALLINT": "1", "INT": "1", "BIGINT": "1", "FLOAT": "1.5", "DOUBLE": "1.5",
           "DECIMAL(2,1)": "1.5", "BOOLEAN": "true"}
SAMPLES = {**NUMBERS, "DATE": "DATE '2024-01-02'", "TIMESTAMP": "TIMESTAMP '2024-01-02 00:00:00'",
           "TIMESTAMP_NTZ": "TIMESTAMP_NTZ '2024-01-02 00:00:00'"}
VALUES = {
    "TINYINT": 1, "SMALLINT": 1, "INT": 1, "BIGINT": 1, "FLOAT": 1.5, "DOUBLE": 1.5, "DECIMAL(2,1)": Decimal("1.5"),
    "BOOLEAN": True, "DATE": dt.date(2024, 1, 2), "TIMESTAMP": dt.datetime(2024, 1, 2, tzinfo=UTC),
    "TIMESTAMP_NTZ": dt.datetime(2024, 1, 2),
}

REFUSED = ([(n, "DATE") for n in NUMBERS] + [("DATE", n) for n in NUMBERS]
           + [(n, "TIMESTAMP_NTZ") for n in NUMBERS] + [("TIMESTAMP_NTZ", n) for n in NUMBERS]
           + [("BOOLEAN", "TIMESTAMP"), ("TIMESTAMP", "BOOLEAN")])


@pytest.mark.parametrize("source, target", REFUSED, ids=[f"{s}->{t}" for s, t in REFUSED])
@pytest.mark.parametrize("cast", ["CAST", "TRY_CAST"])
def test_a_cast_spark_does_not_have_is_refused_before_any_value_is_read(cast, source, target):
    """Spark: ``cannot cast "INT" to "DATE"`` (DATATYPE_MISMATCH), even for a NULL of the type."""
    table = pa.table({"c": pa.array([VALUES[source], None], ARROW[source])})
    sql = f"{cast}(c AS {target})"
    with pytest.raises(PredicateError, match="DATATYPE_MISMATCH"):
        bind(parse_expression(sql), table.schema)
    with pytest.raises(PredicateError, match="DATATYPE_MISMATCH"):
        evaluate(parse_expression(sql), table)
    with pytest.raises(PredicateError, match="DATATYPE_MISMATCH"):
        to_arrow(parse_expression(sql), table.schema)
    with pytest.raises(PredicateError, match="DATATYPE_MISMATCH"):
        parse_expression(f"{cast}(CAST({SAMPLES[source]} AS {source}) AS {target})")
    with pytest.raises(PredicateError, match="DATATYPE_MISMATCH"):
        parse_expression(f"{cast}(CAST(NULL AS {source}) AS {target})")


def test_the_casts_of_dates_and_local_timestamps_spark_has_still_work():
    """Spark: CAST(DATE '2024-01-02' AS TIMESTAMP_NTZ) is midnight, CAST(TIMESTAMP ... AS DATE)
    its UTC date, CAST(TIMESTAMP_NTZ ... AS TIMESTAMP) the same wall time in UTC."""
    table = pa.table({"d": [dt.date(2024, 1, 2)], "n": pa.array([dt.datetime(2024, 1, 2, 3)], pa.timestamp("us"))})
    for sql, expected in [("CAST(d AS TIMESTAMP_NTZ)", dt.datetime(2024, 1, 2)),
                          ("CAST(n AS DATE)", dt.date(2024, 1, 2)),
                          ("CAST(n AS TIMESTAMP)", dt.datetime(2024, 1, 2, 3, tzinfo=UTC)),
                          ("CAST(n AS STRING)", "2024-01-02 03:00:00")]:
        assert _eager(sql, table).to_pylist() == [expected] == _lazy(sql, table).to_pylist(), sql


# --------------------------------------------------------------------------------------------
# 2a. TIMESTAMP to a number: seconds
# --------------------------------------------------------------------------------------------

#: (the timestamp, UTC; target; Spark's CAST, or FAILS)
TIMESTAMP_TO_NUMBER = [
    ("2024-01-02 00:00:00", "BIGINT", 1704153600),
    ("2024-01-02 00:00:00.9", "BIGINT", 1704153600),
    ("1969-12-31 23:59:59.1", "BIGINT", -1),
    ("1969-12-31 23:59:59.9", "BIGINT", -1),
    ("0001-01-01 00:00:00", "BIGINT", -62135596800),
    ("2024-01-02 00:00:00", "INT", 1704153600),
    ("1969-12-31 23:59:59.1", "INT", -1),
    ("2038-01-19 03:14:07", "INT", 2147483647),
    ("2038-01-19 03:14:08", "INT", FAILS),
    ("1901-12-13 20:45:52", "INT", -2147483648),
    ("1901-12-13 20:45:51", "INT", FAILS),
    ("2099-01-02 00:00:00", "INT", FAILS),
    ("0001-01-01 00:00:00", "INT", FAILS),
    ("1970-01-01 00:01:00", "SMALLINT", 60),
    ("1970-01-01 10:01:00", "SMALLINT", FAILS),
    ("1970-01-01 00:01:00", "TINYINT", 60),
    ("1970-01-01 00:02:07.9", "TINYINT", 127),
    ("1970-01-01 00:03:00", "TINYINT", FAILS),
    ("1969-12-31 23:57:52", "TINYINT", -128),
    ("1969-12-31 23:57:52.5", "TINYINT", -128),
    ("1969-12-31 23:57:51.5", "TINYINT", FAILS),
    ("2024-01-02 00:00:00.25", "DOUBLE", 1704153600.25),
    ("2024-01-02 00:00:00.123456", "DOUBLE", 1704153600.123456),
    ("1969-12-31 23:59:59.75", "DOUBLE", -0.25),
    ("1969-12-31 23:59:59.999999", "DOUBLE", -1e-06),
    ("9999-12-31 23:59:59.999999", "DOUBLE", 253402300800.0),
    ("2024-01-02 00:00:00.25", "FLOAT", 1704153600.0),
    ("2024-01-02 00:00:00.25", "DECIMAL(20,6)", Decimal("1704153600.250000")),
    ("2024-01-02 00:00:00.123457", "DECIMAL(24,6)", Decimal("1704153600.123457")),
    ("9999-12-31 23:59:59.999999", "DECIMAL(24,6)", Decimal("253402300799.999999")),
    ("2024-01-02 00:00:00.25", "DECIMAL(12,1)", Decimal("1704153600.3")),
    ("2024-01-02 00:00:00.05", "DECIMAL(24,1)", Decimal("1704153600.1")),
    ("1969-12-31 23:59:59.95", "DECIMAL(24,1)", Decimal("-0.1")),
    ("2024-01-02 00:00:00.7", "DECIMAL(10,0)", Decimal("1704153601")),
    ("2024-01-02 00:00:00.25", "DECIMAL(5,1)", FAILS),
]


@pytest.mark.parametrize("text, target, expected", TIMESTAMP_TO_NUMBER,
                         ids=[f"{t}->{target}" for t, target, _ in TIMESTAMP_TO_NUMBER])
def test_a_timestamp_as_a_number_is_its_seconds(text, target, expected):
    value = dt.datetime.fromisoformat(text).replace(tzinfo=UTC)
    table = pa.table({"ts": pa.array([value], pa.timestamp("us", "UTC"))})
    _check(f"CAST(ts AS {target})", f"CAST(TIMESTAMP '{text}' AS {target})", table, expected)


def test_a_zoned_timestamp_constant_is_its_instant_in_seconds():
    """Spark: CAST(TIMESTAMP '2024-01-02 00:00:00+02:00' AS BIGINT) is 1704146400."""
    assert _constant("CAST(TIMESTAMP '2024-01-02 00:00:00+02:00' AS BIGINT)").as_py() == 1704146400


def test_a_null_timestamp_is_a_null_number():
    table = pa.table({"ts": pa.array([None], pa.timestamp("us", "UTC"))})
    for target in ("BIGINT", "INT", "DOUBLE", "DECIMAL(20,6)"):
        for cast in ("CAST", "TRY_CAST"):
            assert _eager(f"{cast}(ts AS {target})", table).to_pylist() == [None]
            assert _lazy(f"{cast}(ts AS {target})", table).to_pylist() == [None]


# --------------------------------------------------------------------------------------------
# 2b. A number to TIMESTAMP: seconds
# --------------------------------------------------------------------------------------------

#: (SQL type, the value's text, Spark's CAST(... AS TIMESTAMP) in microseconds, or FAILS)
NUMBER_TO_TIMESTAMP = [
    ("INT", "1704153600", 1704153600000000),
    ("BIGINT", "1704153600", 1704153600000000),
    ("BIGINT", "-1", -1000000),
    ("TINYINT", "5", 5000000),
    ("SMALLINT", "5", 5000000),
    ("BIGINT", "9223372036854", 9223372036854000000),
    ("BIGINT", "9223372036855", INT64_MAX),  # saturates: no error, TRY_CAST too
    ("BIGINT", "9223372036854775807", INT64_MAX),
    ("BIGINT", "-9223372036855", INT64_MIN),
    ("BIGINT", "-9223372036854775808", INT64_MIN),
    ("DOUBLE", "1.5", 1500000),
    ("DOUBLE", "-1.5", -1500000),
    ("DOUBLE", "0.1", 100000),
    ("DOUBLE", "1.1", 1100000),
    ("DOUBLE", "1.0000005", 1000000),
    ("DOUBLE", "1.0000015", 1000001),
    ("DOUBLE", "1.0000009", 1000000),
    ("DOUBLE", "1.9999999", 1999999),
    ("DOUBLE", "-1.0000005", -1000000),
    ("DOUBLE", "-0.0000001", 0),
    ("DOUBLE", "9.2e12", 9200000000000000000),
    ("DOUBLE", "9223372036854.775807", INT64_MAX),  # 2^63 as a double: Java's (long) saturates
    ("DOUBLE", "9223372036854.7758", INT64_MAX),
    ("DOUBLE", "-9223372036854.7758", INT64_MIN),
    ("DOUBLE", "-9223372036854.775808", INT64_MIN),
    ("DOUBLE", "9.3e12", FAILS),
    ("DOUBLE", "1e30", FAILS),
    ("DOUBLE", "NaN", FAILS),
    ("DOUBLE", "Infinity", FAILS),
    ("DOUBLE", "-Infinity", FAILS),
    ("FLOAT", "1.5", 1500000),
    ("FLOAT", "0.1", 100000),
    ("FLOAT", "0.7", 699999),  # the FLOAT's double, 0.699999988..., truncated
    ("FLOAT", "1.1", 1100000),
    ("FLOAT", "16777217", 16777216000000),
    ("FLOAT", "NaN", FAILS),
    ("FLOAT", "1e20", FAILS),
    ("DECIMAL(38,18)", "1.5", 1500000),
    ("DECIMAL(38,18)", "-1.5", -1500000),
    ("DECIMAL(38,18)", "1.0000005", 1000000),
    ("DECIMAL(38,18)", "1.0000009", 1000000),
    ("DECIMAL(38,18)", "-1.0000009", -1000000),
    ("DECIMAL(38,18)", "-0.0000009", 0),
    ("DECIMAL(38,18)", "1.23456789", 1234567),
    ("DECIMAL(38,18)", "9223372036854.775807", INT64_MAX),
    ("DECIMAL(38,18)", "9223372036854.775808", INT64_MIN),  # wraps: no error, TRY_CAST too
    ("DECIMAL(38,18)", "-9223372036854.775809", INT64_MAX),
    ("DECIMAL(38,18)", "99999999999999999999", -2537764290116403776),
    ("DECIMAL(38,0)", "1000000000000000000000000000000", -5527149226598858752),
    ("DECIMAL(38,37)", "1.5", 1500000),
]


def _number_column(sql_type: str, text: str) -> pa.Array:
    t = ARROW[sql_type]
    if pa.types.is_decimal(t):
        return pa.array([Decimal(text)], t)
    if pa.types.is_floating(t):
        return pa.array([float(text)], pa.float64()).cast(t)
    return pa.array([int(text)], t)


@pytest.mark.parametrize("sql_type, text, micros", NUMBER_TO_TIMESTAMP,
                         ids=[f"{t}:{v}" for t, v, _ in NUMBER_TO_TIMESTAMP])
def test_a_number_as_a_timestamp_is_seconds(sql_type, text, micros):
    table = pa.table({"n": _number_column(sql_type, text)})
    _check("CAST(n AS TIMESTAMP)", f"CAST(CAST('{text}' AS {sql_type}) AS TIMESTAMP)", table, micros)


def test_a_number_and_a_timestamp_make_the_round_trip():
    """Spark: CAST(CAST(1704153600 AS TIMESTAMP) AS BIGINT) is 1704153600 again, and a BIGINT
    past the range comes back as the whole seconds of BIGINT's microseconds."""
    table = pa.table({"n": pa.array([1704153600, -1, 9223372036854775807, None], pa.int64())})
    sql = "CAST(CAST(n AS TIMESTAMP) AS BIGINT)"
    expected = [1704153600, -1, 9223372036854, None]
    assert _eager(sql, table).to_pylist() == expected == _lazy(sql, table).to_pylist()


def test_a_number_compared_with_a_timestamp_through_cast_selects_by_seconds(table_uri):
    """A table read whose filter casts: the scan's lazy filter and the eager one agree."""
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", "UTC"))])
    table = deltatx.create_table(table_uri, schema)
    table.append(pa.table({"id": [1, 2, 3], "ts": [dt.datetime(2024, 1, 2, tzinfo=UTC),
                                                   dt.datetime(2024, 1, 2, 0, 0, 0, 500000, tzinfo=UTC),
                                                   dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC)]},
                          schema=schema))
    got = deltatx.Table(table_uri)
    assert got.to_arrow(where="CAST(ts AS BIGINT) = 1704153600")["id"].to_pylist() == [1, 2]
    assert got.to_arrow(where="CAST(ts AS BIGINT) = -1")["id"].to_pylist() == [3]
    assert got.to_arrow(where="CAST(ts AS DOUBLE) = 1704153600.5")["id"].to_pylist() == [2]
    assert got.to_arrow(where="ts = CAST(1704153600 AS TIMESTAMP)")["id"].to_pylist() == [1]
    assert got.to_arrow(where="ts = CAST(1704153600.5 AS TIMESTAMP)")["id"].to_pylist() == [2]


# --------------------------------------------------------------------------------------------
# 3. Timestamp text with a zone
# --------------------------------------------------------------------------------------------

#: text -> Spark's CAST(text AS TIMESTAMP) in UTC (naive here), and CAST(text AS TIMESTAMP_NTZ)
ZONED_TEXT = [
    ("2024-01-02 03:04:05+18:00", "2024-01-01 09:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05-18:00", "2024-01-02 21:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 UTC", "2024-01-02 03:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05UTC", "2024-01-02 03:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02T03:04:05 UTC", "2024-01-02 03:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05  UTC", "2024-01-02 03:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05\tUTC", "2024-01-02 03:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 GMT", "2024-01-02 03:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 UT", "2024-01-02 03:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 Z", "2024-01-02 03:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 GMT+2", "2024-01-02 01:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05GMT+2", "2024-01-02 01:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 GMT-2", "2024-01-02 05:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 GMT+02:00", "2024-01-02 01:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 GMT+1:30", "2024-01-02 01:34:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 GMT+0130", "2024-01-02 01:34:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 GMT+18", "2024-01-01 09:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 UTC+2", "2024-01-02 01:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 UTC+02:00", "2024-01-02 01:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 UT+2", "2024-01-02 01:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 +02:00", "2024-01-02 01:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 +0200", "2024-01-02 01:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 +02", "2024-01-02 01:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 -2", "2024-01-02 05:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 +0:00", "2024-01-02 03:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 -00", "2024-01-02 03:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05+2", "2024-01-02 01:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05+2:00", "2024-01-02 01:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05+02:0", "2024-01-02 01:04:05", "2024-01-02 03:04:05"),
    ("2024-07-02 03:04:05 +1:3", "2024-07-02 02:01:05", "2024-07-02 03:04:05"),
    ("2024-01-02 03:04:05+020000", "2024-01-02 01:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05+02:00:00", "2024-01-02 01:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05+02:00:30", "2024-01-02 01:03:35", "2024-01-02 03:04:05"),
    ("2024-07-02 03:04:05 +18:00:00", "2024-07-01 09:04:05", "2024-07-02 03:04:05"),
    ("2024-01-02 03:04:05 +02:00 ", "2024-01-02 01:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05.123 UTC", "2024-01-02 03:04:05.123", "2024-01-02 03:04:05.123"),
    ("2024-01-02 03:04:05.UTC", "2024-01-02 03:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02T03:04:05.5 GMT+1", "2024-01-02 02:04:05.5", "2024-01-02 03:04:05.5"),
]

#: the same, naming regions of the zone database (Java's, and the system's here)
REGION_TEXT = [
    ("2024-01-02 03:04:05 Europe/Paris", "2024-01-02 02:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05Europe/Paris", "2024-01-02 02:04:05", "2024-01-02 03:04:05"),
    ("2024-07-02 03:04:05 Europe/Paris", "2024-07-02 01:04:05", "2024-07-02 03:04:05"),
    ("2024-01-02 03:04:05 America/New_York", "2024-01-02 08:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 Asia/Kolkata", "2024-01-01 21:34:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 Australia/Lord_Howe", "2024-01-01 16:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 Etc/GMT+2", "2024-01-02 05:04:05", "2024-01-02 03:04:05"),
    ("2024-07-02 03:04:05 Etc/GMT-14", "2024-07-01 13:04:05", "2024-07-02 03:04:05"),
    ("2024-01-02 03:04:05 CET", "2024-01-02 02:04:05", "2024-01-02 03:04:05"),
    ("2024-07-02 03:04:05 EST5EDT", "2024-07-02 07:04:05", "2024-07-02 03:04:05"),
    ("2024-07-02 03:04:05 MET", "2024-07-02 01:04:05", "2024-07-02 03:04:05"),
    ("2024-07-02 03:04:05 US/Pacific", "2024-07-02 10:04:05", "2024-07-02 03:04:05"),
    ("2024-01-02 03:04:05 GMT0", "2024-01-02 03:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 Etc/UTC", "2024-01-02 03:04:05", "2024-01-02 03:04:05"),
    ("2024-01-02 03:04:05 Universal", "2024-01-02 03:04:05", "2024-01-02 03:04:05"),
    # Java's short ids: a fixed offset (EST, HST, MST) or a region (PST, ECT, ...)
    ("2024-01-02 03:04:05 PST", "2024-01-02 11:04:05", "2024-01-02 03:04:05"),
    ("2024-07-02 03:04:05 PST", "2024-07-02 10:04:05", "2024-07-02 03:04:05"),
    ("2024-01-02 03:04:05 EST", "2024-01-02 08:04:05", "2024-01-02 03:04:05"),
    ("2024-07-02 03:04:05 ECT", "2024-07-02 01:04:05", "2024-07-02 03:04:05"),
    ("2024-07-02 03:04:05 HST", "2024-07-02 13:04:05", "2024-07-02 03:04:05"),
    ("2024-07-02 03:04:05 MST", "2024-07-02 10:04:05", "2024-07-02 03:04:05"),
    # a gap (02:30 does not exist: the offset before it) and an overlap (the earlier offset)
    ("2024-03-31 02:30:00 Europe/Paris", "2024-03-31 01:30:00", "2024-03-31 02:30:00"),
    ("2024-10-27 02:30:00 Europe/Paris", "2024-10-27 00:30:00", "2024-10-27 02:30:00"),
    ("1900-01-01 00:00:00 Europe/Paris", "1899-12-31 23:50:39", "1900-01-01 00:00:00"),  # Paris mean time
]

#: text Spark refuses for both (CAST_INVALID_INPUT)
MALFORMED = [
    "2024-01-02 03:04:05+19:00", "2024-01-02 03:04:05+18:01", "2024-07-02 03:04:05 +18:00:01",
    "2024-01-02 03:04:05 +02:00:60", "2024-07-02 03:04:05 +123", "2024-07-02 03:04:05 +12345",
    "2024-01-02 03:04:05 GMT+19", "2024-01-02 03:04:05 GMT+", "2024-01-02 03:04:05 +", "2024-01-02 03:04:05 Z+02",
    "2024-01-02 03:04:05 utc", "2024-01-02 03:04:05 z", "2024-01-02 03:04:05 gmt+2", "2024-01-02 03:04:05 utc+2",
    "2024-01-02 03:04:05 europe/paris", "2024-01-02 03:04:05 EUROPE/PARIS", "2024-01-02 03:04:05 Europe/paris",
    "2024-01-02 03:04:05 Nowhere/Land", "2024-01-02 03:04:05 Europe/Paris+1", "2024-01-02T03:04:05[UTC]",
    "2024-01-02T03:04:05Z[UTC]", "2024-01-02 03:04 UTC", "2024-01-02 03:04UTC", "2024-01-02 03:04+02:00",
    "2024-01-02 03 UTC", "2024-01-02 UTC", "2024-07-02 03:04:05 posixrules", "2024-07-02 03:04:05 localtime",
    "2024-07-02 03:04:05 Factory", "2024-07-02 03:04:05 ROC",
]

_HAS_ZONES = {"Europe/Paris", "America/New_York", "US/Pacific", "EST5EDT"} <= zoneinfo.available_timezones()


def _check_text(text: str, zoned: str, local: str) -> None:
    table = pa.table({"s": [text]})
    quoted = text.replace("'", "''")
    instant = dt.datetime.fromisoformat(zoned).replace(tzinfo=UTC)
    wall = dt.datetime.fromisoformat(local)
    for cast in ("CAST", "TRY_CAST"):
        for target, expected in (("TIMESTAMP", instant), ("TIMESTAMP_NTZ", wall)):
            assert _eager(f"{cast}(s AS {target})", table).to_pylist() == [expected], (cast, target)
            assert _lazy(f"{cast}(s AS {target})", table).to_pylist() == [expected], (cast, target)
            assert _constant(f"{cast}('{quoted}' AS {target})").as_py() == expected, (cast, target)
    assert _constant(f"TIMESTAMP '{quoted}'").as_py() == instant
    assert _constant(f"TIMESTAMP_NTZ '{quoted}'").as_py() == wall


@pytest.mark.parametrize("text, zoned, local", ZONED_TEXT, ids=[t for t, _, _ in ZONED_TEXT])
def test_timestamp_text_with_a_zone_java_reads(text, zoned, local):
    _check_text(text, zoned, local)


@pytest.mark.skipif(not _HAS_ZONES, reason="the system has no zone database (tzdata)")
@pytest.mark.parametrize("text, zoned, local", REGION_TEXT, ids=[t for t, _, _ in REGION_TEXT])
def test_timestamp_text_naming_a_region(text, zoned, local):
    _check_text(text, zoned, local)


@pytest.mark.parametrize("text", MALFORMED)
@pytest.mark.parametrize("target", ["TIMESTAMP", "TIMESTAMP_NTZ"])
def test_timestamp_text_with_a_zone_spark_refuses(target, text):
    table = pa.table({"s": [text]})
    quoted = text.replace("'", "''")
    with pytest.raises(PredicateError):
        _eager(f"CAST(s AS {target})", table)
    with pytest.raises((PredicateError, pa.ArrowInvalid)):
        _lazy(f"CAST(s AS {target})", table)
    with pytest.raises(PredicateError):
        parse_expression(f"CAST('{quoted}' AS {target})")
    assert _eager(f"TRY_CAST(s AS {target})", table).to_pylist() == [None]
    assert _lazy(f"TRY_CAST(s AS {target})", table).to_pylist() == [None]
    assert _constant(f"TRY_CAST('{quoted}' AS {target})").as_py() is None


@pytest.mark.skipif(not _HAS_ZONES, reason="the system has no zone database (tzdata)")
def test_a_column_of_mixed_zones_converts_each_value():
    """Offsets, regions and no zone in one column, repeated (each zone is read once), with a
    NULL; TRY_CAST makes NULL only of the malformed one."""
    texts = ["2024-01-02 03:04:05 Europe/Paris", "2024-07-02 03:04:05 Europe/Paris", "2024-01-02 03:04:05+02:00",
             None, "2024-01-02 03:04:05", "2024-01-02", "2024-01-02 03:04:05 utc", "2024-01-02 03:04:05 GMT+2"] * 3
    table = pa.table({"s": texts})
    expected = [dt.datetime(2024, 1, 2, 2, 4, 5, tzinfo=UTC), dt.datetime(2024, 7, 2, 1, 4, 5, tzinfo=UTC),
                dt.datetime(2024, 1, 2, 1, 4, 5, tzinfo=UTC), None, dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
                dt.datetime(2024, 1, 2, tzinfo=UTC), None, dt.datetime(2024, 1, 2, 1, 4, 5, tzinfo=UTC)] * 3
    assert _eager("TRY_CAST(s AS TIMESTAMP)", table).to_pylist() == expected
    assert _lazy("TRY_CAST(s AS TIMESTAMP)", table).to_pylist() == expected
    with pytest.raises(PredicateError):
        _eager("CAST(s AS TIMESTAMP)", table)


def test_a_timestamp_column_compared_with_zoned_text():
    """Spark: TIMESTAMP '2024-01-02 03:04:05' = '2024-01-02 05:04:05 GMT+2' is TRUE, and text
    with an offset past 18 hours fails the comparison (CAST_INVALID_INPUT)."""
    table = pa.table({"id": [1, 2], "ts": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
                                                    dt.datetime(2024, 1, 2, 5, 4, 5, tzinfo=UTC)],
                                                   pa.timestamp("us", "UTC"))})
    for sql in ("ts = '2024-01-02 05:04:05 GMT+2'", "ts = '2024-01-02 04:04:05 Europe/Paris'"):
        if "Paris" in sql and not _HAS_ZONES:
            continue
        bound = bind(parse_predicate(sql), table.schema)
        assert table.filter(evaluate(bound, table))["id"].to_pylist() == [1], sql
    with pytest.raises(PredicateError):
        bind(parse_predicate("ts = '2024-01-02 05:04:05+19:00'"), table.schema)


# --------------------------------------------------------------------------------------------
# 4. DECIMAL and BOOLEAN
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [("1.5", True), ("0.0", False), ("-0.1", True)])
def test_a_decimal_as_a_boolean_is_whether_it_is_not_zero(text, expected):
    table = pa.table({"m": pa.array([Decimal(text)], pa.decimal128(2, 1))})
    _check("CAST(m AS BOOLEAN)", f"CAST(CAST('{text}' AS DECIMAL(2,1)) AS BOOLEAN)", table, expected)


@pytest.mark.parametrize("target, value, expected", [
    ("DECIMAL(5,2)", True, Decimal("1.00")), ("DECIMAL(5,2)", False, Decimal("0.00")),
    ("DECIMAL(1,1)", True, FAILS), ("DECIMAL(1,1)", False, Decimal("0.0")),
])
def test_a_boolean_as_a_decimal_is_one_or_zero(target, value, expected):
    table = pa.table({"b": [value]})
    _check(f"CAST(b AS {target})", f"CAST({str(value).lower()} AS {target})", table, expected)


# --------------------------------------------------------------------------------------------
# 5. An empty IN list
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sql", ["id IN ()", "id NOT IN ()", "NOT id IN ()", "id > 1 AND id IN ()"])
def test_an_empty_in_list_is_refused_when_parsed(sql):
    with pytest.raises(PredicateError, match="EMPTY_IN_PREDICATE"):
        parse_predicate(sql)


def test_an_empty_in_list_is_refused_by_a_read(table_uri):
    schema = pa.schema([("id", pa.int64())])
    deltatx.create_table(table_uri, schema).append(pa.table({"id": [1]}, schema=schema))
    with pytest.raises(PredicateError, match="EMPTY_IN_PREDICATE"):
        deltatx.Table(table_uri).to_arrow(where="id IN ()")
    assert deltatx.Table(table_uri).to_arrow(where="id IN (1)")["id"].to_pylist() == [1]
