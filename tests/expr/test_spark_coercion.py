"""Spark's casts and type coercion (ANSI, Spark 4), each case checked against Spark itself.

Constant CASTs fold through the row-level CAST; strings compared with numbers read as numbers;
IN lists and comparisons meet in Spark's common type (FLOAT with DOUBLE as DOUBLE, DECIMALs
bounded at 38 digits); DECIMAL division is exact; ``%`` on BIGINT's smallest value; Java's text
of doubles and timestamps; full Unicode case mapping; isnan/greatest with NULL and NaN.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

import sql_values
from deltatx.errors import PredicateError
from deltatx.expr import (
    Literal,
    bind,
    evaluate,
    files_matching,
    parse_expression,
    parse_predicate,
)


where = sql_values.where


def values(table: pa.Table, sql: str) -> list:
    return evaluate(bind(parse_expression(sql), table.schema), table).to_pylist()


def test_constant_casts_fold_as_spark_casts():
    assert parse_expression("CAST(2.5 AS INT)") == Literal(2, pa.int32())
    assert parse_expression("CAST(-2.9 AS INT)") == Literal(-2, pa.int32())
    assert parse_expression("CAST(2.5e0 AS INT)") == Literal(2, pa.int32())
    assert parse_expression("CAST(TIMESTAMP '2024-01-01 10:00:00' AS DATE)") == Literal(dt.date(2024, 1, 1))
    assert parse_expression("CAST(1.55 AS DECIMAL(3,1))") == Literal(Decimal("1.6"), pa.decimal128(3, 1))
    for sql in ("CAST(300 AS TINYINT)", "CAST(1e10 AS INT)", "CAST(99.99 AS DECIMAL(3,1))"):
        with pytest.raises(PredicateError):
            parse_expression(sql)
    t = pa.table({"id": [1, 2], "i": pa.array([2, 3], pa.int32()), "d": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2)])})
    assert where(t, "i = CAST(2.5 AS INT)") == [1]
    assert where(t, "i = CAST(-2.9 AS INT) + 5") == [2]
    assert where(t, "d = CAST(TIMESTAMP '2024-01-01 10:00:00' AS DATE)") == [1]


def test_string_compared_with_a_number_reads_as_a_number():
    t = pa.table({"id": [1, 2, 3, 4, 5], "s": ["05", "5", " 5", "40", None]})
    assert where(t, "s = 5") == [1, 2, 3]
    assert where(t, "5 = s") == [1, 2, 3]
    assert where(t, "s > 4") == [1, 2, 3, 4]
    assert where(t, "s IN (5, 6)") == [1, 2, 3]
    assert where(t, "s = 5.0") == [1, 2, 3]  # as DOUBLE
    bad = pa.table({"id": [1], "s": ["5.5"]})
    with pytest.raises(PredicateError):  # ANSI: CAST_INVALID_INPUT (as BIGINT)
        where(bad, "s = 5")
    assert where(bad, "s = 5.5") == [1]


def test_string_number_comparison_never_prunes_by_text_bounds():
    schema = pa.schema([("s", pa.string())])
    files = pa.table({"path": ["a"], "partitionValues": pa.array([[]], pa.map_(pa.string(), pa.string())),
                      "stats": ['{"numRecords": 1, "minValues": {"s": "05"}, "maxValues": {"s": "05"}, "nullCount": {"s": 0}}']})
    assert files_matching(parse_predicate("s = 5"), files, schema, []).to_pylist() == [True]
    assert files_matching(parse_predicate("s > 40"), files, schema, []).to_pylist() == [True]


def test_in_lists_meet_in_the_common_type():
    t = pa.table({"id": [1, 2], "i8": pa.array([5, 100], pa.int8()),
                  "dec": pa.array([Decimal("1.50"), Decimal("99999999.99")], pa.decimal128(10, 2)),
                  "g": pa.array([float("inf"), 0.1], pa.float32())})
    assert where(t, "i8 NOT IN (5, 1000)") == [2]
    assert where(t, "i8 IN (100, 1000)") == [2]
    assert where(t, "dec IN (1.50, 1.499)") == [1]
    assert where(t, "dec NOT IN (1.50, 1.551)") == [2]
    assert where(t, "dec IN (99999999.99, 100000000)") == [2]
    assert where(t, "g IN (1e300)") == []  # FLOAT widened to DOUBLE, not 1e300 narrowed to inf
    assert where(t, "g NOT IN (1e300)") == [1, 2]
    assert where(t, "g IN (0.1)") == []
    assert where(t, "g = 0.1") == []


def test_in_list_pruning_with_values_wider_than_the_column():
    schema = pa.schema([("i8", pa.int8())])
    files = pa.table({"path": ["a"], "partitionValues": pa.array([[]], pa.map_(pa.string(), pa.string())),
                      "stats": ['{"numRecords": 1, "minValues": {"i8": 5}, "maxValues": {"i8": 5}, "nullCount": {"i8": 0}}']})
    assert files_matching(parse_predicate("i8 NOT IN (5, 1000)"), files, schema, []).to_pylist() == [False]
    assert files_matching(parse_predicate("i8 NOT IN (6, 1000)"), files, schema, []).to_pylist() == [True]
    assert files_matching(parse_predicate("i8 IN (5, 1000)"), files, schema, []).to_pylist() == [True]


def test_decimal_division_is_exact_and_wide_decimals_compare():
    t = pa.table({"id": [1, 2, 3], "dec": pa.array([Decimal("99.99"), Decimal("0.30"), None], pa.decimal128(10, 2))})
    assert values(t, "dec / 3") == [Decimal("33.330000"), Decimal("0.100000"), None]  # decimal(14,6)
    assert evaluate(bind(parse_expression("dec / 3"), t.schema), t).type == pa.decimal128(14, 6)
    assert evaluate(bind(parse_expression("dec / id"), t.schema), t).type == pa.decimal128(31, 23)
    assert where(t, "dec / 3 = 33.33") == [1]
    assert where(t, "dec / 3 = 0.1") == [2]
    assert values(t, "CASE WHEN id > 9 THEN dec / 0 END") == [None, None, None]  # guarded: NULL, not a failure
    assert where(t, "NOT (dec <=> 100000000)") == [1, 2, 3]
    assert where(t, "coalesce(dec, 100000000) > 50") == [1, 3]
    wide = pa.table({"id": [1, 2], "d": pa.array([Decimal("5"), Decimal("4")], pa.decimal128(38, 10))})
    assert where(wide, "d > 4.00000000001") == [1]  # Spark: the constant rounded to decimal(38,10)
    assert where(wide, "d = 4.00000000001") == [2]


def test_remainder_of_the_smallest_bigint():
    t = pa.table({"id": [1, 2, 3, 4], "i": pa.array([-2**63, -9, 7, -7], pa.int64())})
    assert values(t, "i % 7") == [-1, -2, 0, 0]
    assert values(t, "i % 3") == [-2, 0, 1, -1]
    assert values(t, "i % -3") == [-2, 0, 1, -1]
    assert values(t, "i % -1") == [0, 0, 0, 0]
    f = pa.table({"x": [-7.5, 7.5]})
    assert values(f, "x % 2") == [-1.5, 1.5]


def test_bigint_beyond_2_53_mixes_with_doubles():
    t = pa.table({"id": [1, 2], "i": [9007199254740993, 4], "f": [1.0, 10.0]})
    assert where(t, "i / 2 > 3") == [1]
    assert where(t, "i + 0.5 > 2") == [1, 2]
    assert where(t, "f <= i") == [1]
    assert where(t, "i * 1.5 > 100") == [1]


def test_integer_literal_past_bigint():
    t = pa.table({"id": [1, 2]})
    assert where(t, "id = 99999999999999999999") == []
    assert where(t, "id < 99999999999999999999") == [1, 2]
    assert where(t, "id = -9223372036854775808") == []


def test_text_of_doubles_floats_and_timestamps_is_spark_s():
    f = pa.table({"f": [1.0, float("nan"), float("inf"), -float("inf"), -0.0, 1e20, 1e7, 9999999.0, 1e-3, 1e-4,
                        123456789.0, 0.1 + 0.2, 1.5e300, -1.25e-7, 12345678.9, None]})
    assert values(f, "CAST(f AS STRING)") == [
        "1.0", "NaN", "Infinity", "-Infinity", "-0.0", "1.0E20", "1.0E7", "9999999.0", "0.001", "1.0E-4",
        "1.23456789E8", "0.30000000000000004", "1.5E300", "-1.25E-7", "1.23456789E7", None]
    g = pa.table({"g": pa.array([0.1, 1e20, 3.4028235e38, 16777216.0, 1.1], pa.float32())})
    assert values(g, "CAST(g AS STRING)") == ["0.1", "1.0E20", "3.4028235E38", "1.6777216E7", "1.1"]
    ts = pa.table({"ts": pa.array([dt.datetime(2024, 1, 31, 23, 30), dt.datetime(2024, 1, 31, 23, 30, 0, 120000),
                                   dt.datetime(2024, 1, 31, 23, 30, 0, 1), dt.datetime(1, 1, 1)], pa.timestamp("us", tz="UTC"))})
    assert values(ts, "CAST(ts AS STRING)") == ["2024-01-31 23:30:00", "2024-01-31 23:30:00.12",
                                               "2024-01-31 23:30:00.000001", "0001-01-01 00:00:00"]
    assert values(ts, "concat('v=', ts)")[0] == "v=2024-01-31 23:30:00"
    assert values(f, "concat('v=', f)")[:2] == ["v=1.0", "v=NaN"]
    assert parse_expression("CAST(1.0E0 AS STRING)") == Literal("1.0")
    t = pa.table({"id": [1, 2], "f": [1.0, 2.5]})
    assert where(t, "CAST(f AS STRING) = '1.0'") == [1]


def test_upper_and_lower_use_the_full_case_mapping():
    t = pa.table({"id": [1, 2, 3, 4, 5], "s": ["straße", "ﬁx", "İx", "abc", None]})
    assert values(t, "upper(s)") == ["STRASSE", "FIX", "İX", "ABC", None]
    assert values(t, "lower(s)") == ["straße", "ﬁx", "i\u0307x", "abc", None]
    assert where(t, "upper(s) = 'STRASSE'") == [1]
    assert where(t, "lower(s) = 'i\u0307x'") == [3]


def test_isnan_of_null_is_false_and_nan_is_the_greatest():
    t = pa.table({"id": [1, 2, 3], "f": [float("nan"), None, 0.5]})
    assert values(t, "isnan(f)") == [True, False, False]
    assert where(t, "NOT isnan(f)") == [2, 3]
    assert where(t, "greatest(f, 1.0) > 1.0") == [1]
    assert where(t, "least(f, 1.0) = 1.0") == [1, 2]  # NULL is skipped: least(NULL, 1.0) = 1.0
    assert values(t, "greatest(f, 1.0)")[1:] == [1.0, 1.0]


def test_negative_decimal_literals_are_exact():
    """Spark reads -1.000000000000000000000000000001 as an exact DECIMAL(31,30): negating must not
    round to Python's 28-digit default context (it picked, deleted and updated the wrong rows)."""
    b = pa.table({"id": [1, 2], "b": pa.array([Decimal("-1.000000000000000000000000000001"), Decimal("-1")],
                                             pa.decimal128(38, 30))})
    assert where(b, "b = -1.000000000000000000000000000001") == [1]
    assert where(b, "b <= -1.000000000000000000000000000001") == [1]
    k = pa.table({"id": [1, 2], "k": pa.array([Decimal("-12345678901234567890123456789"),
                                               Decimal("-12345678901234567890123456790")], pa.decimal128(38, 0))})
    assert where(k, "k = -12345678901234567890123456789") == [1]
    assert where(k, "k > -" + "9" * 38) == [1, 2]


def test_a_negated_suffixed_literal_is_one_literal():
    """Spark's grammar takes the sign into the literal: -9223372036854775808L is BIGINT's minimum."""
    t = pa.table({"id": pa.array([-(2 ** 63), 0], pa.int64())})
    assert where(t, "id = -9223372036854775808L") == [-(2 ** 63)]
    assert where(t, "id > -5L") == [0]
    assert where(t, "id = - -0L") == [0]
    with pytest.raises(PredicateError):
        where(t, "id = -9223372036854775809L")


def test_date_text_reads_as_spark_reads_it():
    """Spark's CAST of text to DATE takes ``yyyy``, ``yyyy-[m]m``, ``yyyy-[m]m-[d]d`` and anything
    after a space or 'T'; '2024-1-2' was refused."""
    table = pa.table({"id": [1, 2], "d": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2)], pa.date32())})
    assert where(table, "d < '2024-1-2'") == [1]
    assert where(table, "d = '2024-01'") == [1]
    assert where(table, "d = '2024'") == [1]
    assert where(table, "d = '2024-1-2T10:00'") == [2]
    for bad in ["'2024-13-01'", "'2024-02-30'", "'24-1-1'", "'2024/01/02'"]:
        with pytest.raises(PredicateError):
            where(table, f"d = {bad}")


def test_timestamps_with_and_without_zone_compare_in_the_zone():
    table = pa.table({"id": [1, 2],
                      "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)] * 2, pa.timestamp("us", tz="UTC")),
                      "tn": pa.array([dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2)], pa.timestamp("us"))})
    assert where(table, "ts = tn") == [1]


@pytest.mark.parametrize("pattern", [r"'a\\c'", r"'ab\\'", "'a#c' ESCAPE '#'", "'ab#' ESCAPE '#'"])
def test_a_like_escape_before_an_ordinary_character_is_refused(pattern):
    """Spark: the escape character may precede only '_', '%' or itself, and may not end the
    pattern. Arrow matched such a pattern against nothing, silently."""
    table = pa.table({"id": [1], "s": ["a\\c"]})
    with pytest.raises(PredicateError, match="escape character"):
        where(table, f"s LIKE {pattern}")
    assert where(table, r"s LIKE 'a\\\\c'") == [1]  # an escaped escape is the character itself
    assert where(table, "s LIKE 'a#%' ESCAPE '#'") == []


def test_concat_ws_to_date_and_negative_are_spark_functions():
    """sqlglot's ConcatWs is a kind of Concat: concat_ws ran as concat (separator first, NULLs not
    skipped); to_date(ts) was taken for a no-op, so conditions on it matched the wrong rows."""
    table = pa.table({"id": [1, 2, 3], "s": ["a", None, "c"],
                      "ts": pa.array([dt.datetime(2024, 1, 1, 10, 30), dt.datetime(2024, 1, 2), None],
                                     pa.timestamp("us"))})
    assert values(table, "concat_ws('-', s, 'x')") == ["a-x", "x", "c-x"]
    assert values(table, "concat_ws('|', s, 'k', NULL)") == ["a|k", "k", "c|k"]
    assert values(table, "concat_ws(',', s)") == ["a", "", "c"]  # every value NULL: ''
    assert values(table, "concat_ws(NULL, s)") == [None, None, None]
    assert values(table, "concat_ws('-', id, 1.5)") == ["1-1.5", "2-1.5", "3-1.5"]
    assert where(table, "concat_ws(',', s) = ''") == [2]
    assert values(table, "to_date(ts)") == [dt.date(2024, 1, 1), dt.date(2024, 1, 2), None]
    assert where(table, "to_date(ts) = DATE '2024-01-01'") == [1]
    assert values(table, "year(ts)") == [2024, 2024, None]
    assert values(table, "negative(id)") == [-1, -2, -3]
    with pytest.raises(PredicateError, match="format"):
        parse_expression("to_date(s, 'yyyy-MM-dd')")
    assert values(table, "concat_ws(s, id, s)") == ["1aa", None, "3cc"]  # a column separator
    assert values(table, "concat_ws(s, s)") == ["a", None, "c"]


def test_text_columns_cast_to_date_in_spark_forms():
    table = pa.table({"id": [1, 2, 3, 4], "s": ["2024-01-02 10:00:00", "2024-1-2", "2024", None]})
    assert values(table, "to_date(s)") == [dt.date(2024, 1, 2), dt.date(2024, 1, 2), dt.date(2024, 1, 1), None]
    assert where(table, "CAST(s AS DATE) = DATE '2024-01-02'") == [1, 2]
    with pytest.raises(PredicateError):
        values(pa.table({"s": ["garbage"]}), "to_date(s)")


def test_text_casts_to_boolean_with_sparks_words():
    table = pa.table({"id": [1, 2, 3, 4, 5, 6], "s": ["t", "Yes", " n ", "FALSE", "1", None]})
    assert values(table, "CAST(s AS BOOLEAN)") == [True, True, False, False, True, None]
    with pytest.raises(PredicateError):
        values(pa.table({"s": ["maybe"]}), "CAST(s AS BOOLEAN)")


def test_a_string_compared_with_a_decimal_reads_as_a_double_unless_it_is_a_value_of_the_column():
    """Checked against Spark 4.3: ``CAST(1.01 AS DECIMAL(5,2)) = '1.005'`` is FALSE, ``> '1.005'``
    TRUE and ``= '1.01000000000000000000001'`` TRUE (both sides as DOUBLE); malformed text fails
    as Spark's cast does. Before, any text with more digits than the scale raised."""
    t = pa.table({"id": [1, 2], "d": pa.array([Decimal("1.00"), Decimal("1.01")], pa.decimal128(5, 2))})
    assert where(t, "d = '1.005'") == []
    assert where(t, "d > '1.005'") == [2]
    assert where(t, "'1.005' < d") == [2]
    assert where(t, "d = '1.01000000000000000000001'") == [2]
    assert where(t, "d IN ('1.005', '1.00')") == [1]
    assert where(t, "d = ' 1.01 '") == [2]
    with pytest.raises(PredicateError, match="1.01x"):
        where(t, "d = '1.01x'")


@pytest.mark.parametrize("text, as_int, as_double", [
    (" 7 ", 7, 7.0), ("\t8\n", 8, 8.0), ("\x0b9", 9, 9.0), ("\x1c9", 9, 9.0), ("+4", 4, 4.0),
    ("\u00a05", None, None),  # a no-break space is no ASCII space: Spark does not trim it
    ("1\u2003", None, None),  # nor an em space
    ("0x10", None, None),  # Arrow reads hexadecimal integers; Spark does not
    ("-0X1", None, None),
    ("5.", None, 5.0), ("1e3", None, 1000.0),
])
def test_text_read_as_a_number_is_trimmed_and_parsed_as_spark_does(text, as_int, as_double):
    """Checked against Spark 4.3's CAST (None: Spark's CAST_INVALID_INPUT)."""
    t = pa.table({"s": [text]})
    for sql_type, expected in (("INT", as_int), ("DOUBLE", as_double)):
        if expected is None:
            with pytest.raises(PredicateError):
                values(t, f"CAST(s AS {sql_type})")
        else:
            assert values(t, f"CAST(s AS {sql_type})") == [expected]
    with pytest.raises(PredicateError):
        values(pa.table({"s": ["1\u2003"]}), "CAST(s AS BOOLEAN)")


@pytest.mark.parametrize("sql", ["i = '\u00a05'", "i = '0x10'", "i = '1_6'", "i = '\u0663'", "d = '1_6'",
                                 "d = '\u0663'", "e = '1_6'", "e = '\u0663'"])
def test_a_compared_string_is_read_as_spark_reads_numbers(sql):
    """Python's int/float/Decimal read underscores, Unicode digits and spaces, and Arrow reads
    hexadecimal integers; Spark (checked on 4.3) reads none of them, so neither do comparisons.
    Before, ``i = '0x10'`` matched 16 and ``e = '1_6'`` matched 16."""
    t = pa.table({"id": [1, 2, 3], "i": pa.array([3, 5, 16], pa.int32()), "d": [3.0, 5.0, 16.0],
                  "e": pa.array([Decimal(3), Decimal(5), Decimal(16)], pa.decimal128(5, 1))})
    with pytest.raises(PredicateError):
        where(t, sql)
    assert where(t, "i = ' 5 '") == where(t, "e = '\x0b5'") == [2]


def test_text_compared_with_a_wide_decimal_compares_as_doubles_as_spark_does():
    """Checked against Spark 4.3: the text is no value of DECIMAL(22,2), so both sides are
    DOUBLEs, and 12345678901234567890.12 and .123 are the same double. Before, the double was
    bound back into the DECIMAL and compared exactly (the opposite answers)."""
    t = pa.table({"id": [1, 2], "big": pa.array([Decimal("12345678901234567890.12"), Decimal("1.00")],
                                                 pa.decimal128(22, 2))})
    assert where(t, "big = '12345678901234567890.123'") == [1]
    assert where(t, "big > '12345678901234567890.121'") == []
    assert where(t, "big <= '12345678901234567890.121'") == [1, 2]


def test_del_is_trimmed_around_integers_and_booleans_only_and_booleans_read_spark_words():
    """Spark's integer and boolean casts trim DEL (0x7f); its DOUBLE and DECIMAL casts use
    Java's String.trim, which keeps it. Text read as BOOLEAN takes Spark's words; a leading
    '+' is read on integers. All checked against Spark 4.3."""
    t = pa.table({"id": [1], "s": ["\x7f5"], "b": [True], "i": pa.array([5], pa.int32())})
    assert values(t, "CAST(s AS INT)") == [5]
    for sql in ("CAST(s AS DOUBLE)", "CAST(s AS DECIMAL(5,1))"):
        with pytest.raises(PredicateError):
            values(t, sql)
    assert where(t, "b = 'yes'") == where(t, "b = '\x7ftrue'") == where(t, "b = 'T'") == [1]
    with pytest.raises(PredicateError):
        where(t, "b = '\u00a0true'")
    assert where(t, "i = '+5'") == [1] and values(t, "CAST('+5' AS INT)") == [5]
