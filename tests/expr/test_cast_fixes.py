"""CAST defects fixed against Spark 4.3 (ANSI mode, its default; session time zone UTC).

Each expected value was checked with a local SparkSession (``spark.sql.ansi.enabled`` true;
where ANSI off differs it is said). Every conversion is held to agree between a constant (folded
when parsed or bound), a column evaluated eagerly (``evaluate``/``matches``) and the lazy Arrow
expression a dataset scan runs (``to_arrow``):

1. Text with a zone read as TIMESTAMP_NTZ keeps its local date and time; the zone is ignored
   (``CAST('2024-01-02 03:04:05+02:00' AS TIMESTAMP_NTZ)`` is 03:04:05, with ANSI on or off).
2. A dictionary-encoded column converts (and compares, matches LIKE, ...) as its values.
3. A DATE has no cast to a number or a boolean: Spark refuses it when it analyses the query
   (DATATYPE_MISMATCH), for CAST and TRY_CAST alike. (ANSI off, CAST gives NULL instead; TRY_CAST
   is refused in both modes.)
4. ``d + 1 = 5 AND c <= 9223372036854775807``: INT arithmetic, a BIGINT comparison; an
   overflow fails the statement when a row that exists overflows, never for a row a deletion
   vector removed (there is none on a copy-on-write table).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

import deltatx
import sql_values
from deltatx.errors import PredicateError
from deltatx.expr import (
    Literal,
    bind,
    bind_predicate,
    evaluate,
    matches,
    parse_expression,
    parse_predicate,
    to_arrow,
)
from deltatx.expr.rows import cast_values

UTC = dt.timezone.utc
DV = {"delta.enableDeletionVectors": "true"}


def _eager(sql: str, table: pa.Table) -> list:
    return sql_values.eager(sql, table).to_pylist()


def _lazy(sql: str, table: pa.Table) -> list:
    return sql_values.lazy(sql, table).to_pylist()


_where = sql_values.where


def _constant(sql: str) -> object:
    folded = parse_expression(sql)
    assert isinstance(folded, Literal), sql
    return folded.value


# --------------------------------------------------------------------------------------------
# 1. Text with a zone as TIMESTAMP_NTZ
# --------------------------------------------------------------------------------------------

#: text -> Spark's CAST(text AS TIMESTAMP_NTZ)
LOCAL_TIMES = [
    ("2024-01-02 03:04:05+02:00", dt.datetime(2024, 1, 2, 3, 4, 5)),
    ("2024-01-02 03:04:05Z", dt.datetime(2024, 1, 2, 3, 4, 5)),
    ("2024-01-02T03:04:05-0130", dt.datetime(2024, 1, 2, 3, 4, 5)),
    ("2024-01-02 03:04:05+02", dt.datetime(2024, 1, 2, 3, 4, 5)),
    ("2024-01-02 03:04:05-00:00", dt.datetime(2024, 1, 2, 3, 4, 5)),
    ("2024-01-02 03:04:05+18:00", dt.datetime(2024, 1, 2, 3, 4, 5)),
    ("2024-01-02T03:04:05.5-01:30", dt.datetime(2024, 1, 2, 3, 4, 5, 500000)),
    ("2024-01-02 03:04:05.123456+02:00", dt.datetime(2024, 1, 2, 3, 4, 5, 123456)),
    (" 2024-01-02 03:04:05+02:00 ", dt.datetime(2024, 1, 2, 3, 4, 5)),
    ("2024-01-02 03:04:05", dt.datetime(2024, 1, 2, 3, 4, 5)),
    ("2024-01-02", dt.datetime(2024, 1, 2)),
]


@pytest.mark.parametrize("text, expected", LOCAL_TIMES, ids=[t for t, _ in LOCAL_TIMES])
def test_text_with_a_zone_is_its_local_time_as_timestamp_ntz_constant_or_column(text, expected):
    table = pa.table({"s": [text]})
    for cast in ("CAST", "TRY_CAST"):
        assert _constant(f"{cast}('{text}' AS TIMESTAMP_NTZ)") == expected, cast
        assert _eager(f"{cast}(s AS TIMESTAMP_NTZ)", table) == [expected], cast
        assert _lazy(f"{cast}(s AS TIMESTAMP_NTZ)", table) == [expected], cast


#: zones Spark refuses after a time (CAST_INVALID_INPUT): an offset beyond 18 hours, minutes
#: beyond 59, a zone without seconds before it or after a bare date, a lower-case 'z'
REFUSED_ZONES = ["2024-01-02 03:04:05+19:00", "2024-01-02 03:04:05+02:60", "2024-01-02T03:04Z",
                 "2024-01-02Z", "2024-01-02+02:00", "2024-01-02T03:04:05z"]


@pytest.mark.parametrize("text", REFUSED_ZONES)
def test_a_zone_spark_refuses_fails_cast_and_is_null_for_try_cast_constant_or_column(text):
    table = pa.table({"s": [text]})
    with pytest.raises(PredicateError):
        parse_expression(f"CAST('{text}' AS TIMESTAMP_NTZ)")
    with pytest.raises(PredicateError):
        _eager("CAST(s AS TIMESTAMP_NTZ)", table)
    with pytest.raises((PredicateError, pa.ArrowInvalid)):
        _lazy("CAST(s AS TIMESTAMP_NTZ)", table)
    assert _constant(f"TRY_CAST('{text}' AS TIMESTAMP_NTZ)") is None
    assert _eager("TRY_CAST(s AS TIMESTAMP_NTZ)", table) == [None]
    assert _lazy("TRY_CAST(s AS TIMESTAMP_NTZ)", table) == [None]


def test_a_timestamp_ntz_compared_with_zoned_text_reads_the_text_as_its_local_time():
    """Spark: ``TIMESTAMP_NTZ '2024-01-02 03:04:05' = '2024-01-02 03:04:05+02:00'`` is TRUE (IN too)."""
    table = pa.table({"id": [1, 2], "t": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5), dt.datetime(2024, 1, 2, 1, 4, 5)],
                                                 pa.timestamp("us"))})
    assert _where(table, "t = '2024-01-02 03:04:05+02:00'") == [1]
    assert _where(table, "t IN ('2024-01-02 03:04:05Z', '1999-01-01 00:00:00+05:00')") == [1]
    assert _where(table, "t = TIMESTAMP_NTZ '2024-01-02 03:04:05+02:00'") == [1]
    assert _where(table, "t = CAST('2024-01-02 03:04:05+02:00' AS TIMESTAMP_NTZ)") == [1]


def test_zoned_text_as_timestamp_still_moves_to_utc():
    """TIMESTAMP (with the session zone UTC) is unchanged: the zone says which instant it is."""
    table = pa.table({"s": ["2024-01-02 03:04:05+02:00"]})
    expected = dt.datetime(2024, 1, 2, 1, 4, 5, tzinfo=UTC)
    assert _constant("CAST('2024-01-02 03:04:05+02:00' AS TIMESTAMP)") == expected
    assert _eager("CAST(s AS TIMESTAMP)", table) == [expected]
    assert _lazy("CAST(s AS TIMESTAMP)", table) == [expected]


def test_a_table_read_with_zoned_text_against_a_timestamp_ntz_column(table_uri):
    """File pruning (the constant against the stats) and the row filter read the text alike."""
    schema = pa.schema([("id", pa.int64()), ("t", pa.timestamp("us"))])
    table = deltatx.create_table(table_uri, schema)
    table.append(pa.table({"id": [1, 2], "t": [dt.datetime(2024, 1, 2, 3, 4, 5), dt.datetime(2024, 1, 2, 1, 4, 5)]},
                          schema=schema))
    table.append(pa.table({"id": [3], "t": [dt.datetime(2030, 1, 1)]}, schema=schema))
    got = deltatx.Table(table_uri).to_arrow(where="t = '2024-01-02 03:04:05+02:00'")
    assert got["id"].to_pylist() == [1]


# --------------------------------------------------------------------------------------------
# 2. Dictionary-encoded columns
# --------------------------------------------------------------------------------------------

TEXTS = ["5", " 7 ", "x", None, "2024-01-02", "true", "1.25", "5"]


def _plain_and_encoded() -> tuple[pa.Table, pa.Table]:
    plain = pa.table({"id": list(range(1, len(TEXTS) + 1)), "s": pa.array(TEXTS, pa.string())})
    encoded = plain.set_column(1, "s", pa.array(TEXTS, pa.string()).dictionary_encode())
    assert pa.types.is_dictionary(encoded.schema.field("s").type)
    return plain, encoded


CAST_TARGETS = ["INT", "BIGINT", "DOUBLE", "DECIMAL(5,2)", "BOOLEAN", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "STRING"]


@pytest.mark.parametrize("target", CAST_TARGETS)
def test_a_dictionary_column_casts_as_its_values(target):
    plain, encoded = _plain_and_encoded()
    sql = f"TRY_CAST(s AS {target})"
    expected = _eager(sql, plain)
    assert any(v is not None for v in expected)
    assert _eager(sql, encoded) == expected
    assert _lazy(sql, encoded) == expected
    numbers = pa.table({"s": pa.array(["5", "7", None, "5"]).dictionary_encode()})
    if target not in ("BOOLEAN", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ"):
        cast = f"CAST(s AS {target})"
        assert _eager(cast, numbers) == _lazy(cast, numbers) == _eager(cast, numbers.cast(pa.schema([("s", pa.string())])))


def test_a_dictionary_column_still_fails_cast_where_its_values_do():
    _, encoded = _plain_and_encoded()
    with pytest.raises(PredicateError):
        _eager("CAST(s AS INT)", encoded)  # 'x' is no number (ANSI: CAST_INVALID_INPUT)


def test_chunks_with_different_dictionaries_cast_as_their_values():
    chunks = pa.chunked_array([pa.array(["1", "2"]).dictionary_encode(), pa.array(["3", "1", None]).dictionary_encode()])
    table = pa.table({"s": chunks})
    assert _eager("CAST(s AS INT)", table) == [1, 2, 3, 1, None]
    assert _lazy("CAST(s AS INT)", table) == [1, 2, 3, 1, None]


def test_dictionary_values_cast_through_cast_values():
    """The cast MERGE keys and written values go through (expr.rows.cast_values)."""
    values = pa.array(["5", "7", None]).dictionary_encode()
    assert cast_values(values, pa.int64()).to_pylist() == [5, 7, None]
    assert cast_values(values, pa.string()).to_pylist() == ["5", "7", None]


@pytest.mark.parametrize("sql", [
    "s = 'x'", "s IN ('x', '5')", "s LIKE '2024%'", "upper(s) = 'TRUE'", "length(s) = 3",
    "concat(s, '!') = 'x!'", "try_cast(s AS INT) = 5", "try_cast(s AS DOUBLE) > 1", "s IS NULL",
])
def test_dictionary_columns_in_predicates_select_as_their_values(sql):
    plain, encoded = _plain_and_encoded()
    assert _where(encoded, sql) == _where(plain, sql)


@pytest.mark.parametrize("stored", [pa.large_string(), pa.string_view(), pa.dictionary(pa.int8(), pa.large_string())],
                         ids=str)
def test_large_and_view_strings_read_as_their_values_too(stored):
    """The same storage variants :func:`deltatx.expr.values.plain_type` folds for comparisons."""
    plain, _ = _plain_and_encoded()
    table = plain.set_column(1, "s", plain.column("s").cast(stored))
    for sql in ("TRY_CAST(s AS INT)", "TRY_CAST(s AS DATE)", "upper(s)", "concat(s, '!')", "s LIKE '2024%'",
                "try_cast(s AS INT) = 5"):
        # (values, not filtered rows: Arrow 26 has no filter kernel for a view column itself)
        assert _eager(sql, table) == _lazy(sql, table) == _eager(sql, plain), sql


def test_a_dictionary_column_compared_with_numbers_reads_as_numbers():
    """Spark: a STRING compared with a number is read as one (``'05' = 5``), IN too."""
    table = pa.table({"id": [1, 2, 3, 4], "s": pa.array(["5", "05", " 7", None]).dictionary_encode()})
    assert _where(table, "s = 5") == [1, 2]
    assert _where(table, "s IN (5, 7)") == [1, 2, 3]
    assert _where(table, "s > 6") == [3]


# --------------------------------------------------------------------------------------------
# 3. DATE to numbers
# --------------------------------------------------------------------------------------------

NUMBERS = ["TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL(10,0)", "BOOLEAN"]


@pytest.mark.parametrize("target", NUMBERS)
@pytest.mark.parametrize("cast", ["CAST", "TRY_CAST"])
def test_a_date_has_no_cast_to_a_number(cast, target):
    """Spark: DATATYPE_MISMATCH (cannot cast "DATE" to "INT"), when the query is analysed."""
    table = pa.table({"d": [dt.date(2024, 1, 2), None]})
    with pytest.raises(PredicateError, match="DATE"):
        bind(parse_expression(f"{cast}(d AS {target})"), table.schema)  # refused when bound, no row read
    with pytest.raises(PredicateError, match="DATE"):
        evaluate(parse_expression(f"{cast}(d AS {target})"), table)
    with pytest.raises(PredicateError, match="DATE"):
        to_arrow(parse_expression(f"{cast}(d AS {target})"), table.schema)
    with pytest.raises(PredicateError, match="DATE"):
        parse_expression(f"{cast}(DATE '2024-01-02' AS {target})")
    with pytest.raises(PredicateError, match="DATE"):
        bind_predicate(parse_predicate(f"{cast}(d AS {target}) > 0"), table.schema)


def test_the_other_casts_of_a_date_are_unchanged():
    table = pa.table({"d": [dt.date(2024, 1, 2)]})
    assert _eager("CAST(d AS STRING)", table) == _lazy("CAST(d AS STRING)", table) == ["2024-01-02"]
    assert _eager("CAST(d AS TIMESTAMP)", table) == [dt.datetime(2024, 1, 2, tzinfo=UTC)]
    assert _eager("TRY_CAST(d AS TIMESTAMP_NTZ)", table) == [dt.datetime(2024, 1, 2)]
    assert _constant("CAST(DATE '2024-01-02' AS STRING)") == "2024-01-02"


def test_a_date_column_in_a_table_refuses_the_cast(table_uri):
    schema = pa.schema([("id", pa.int64()), ("d", pa.date32())])
    table = deltatx.create_table(table_uri, schema)
    table.append(pa.table({"id": [1], "d": [dt.date(1970, 1, 2)]}, schema=schema))
    with pytest.raises(PredicateError):
        deltatx.Table(table_uri).delete("CAST(d AS INT) = 1")  # Arrow's cast would say day 1: deleted
    assert deltatx.Table(table_uri).to_arrow()["id"].to_pylist() == [1]


# --------------------------------------------------------------------------------------------
# 4. Integer overflow and an out-of-range constant
# --------------------------------------------------------------------------------------------

PREDICATE = "d + 1 = 5 AND c <= 9223372036854775807"
INT_MAX, BIGINT_MAX = 2**31 - 1, 2**63 - 1


def _rows(d: list[int | None], c: list[int | None]) -> pa.Table:
    return pa.table({"id": list(range(1, len(d) + 1)), "d": pa.array(d, pa.int32()), "c": pa.array(c, pa.int64())})


def test_the_predicate_adds_ints_and_compares_bigints_as_spark_types_them():
    """Spark: ``typeof(d + 1)`` is int, 9223372036854775807 is a BIGINT constant and
    9223372036854775808 a DECIMAL(19,0) one (compared with a BIGINT as DECIMAL(20,0))."""
    schema = _rows([1], [1]).schema
    assert evaluate(bind(parse_expression("d + 1"), schema), _rows([1], [1])).type == pa.int32()
    bound = bind_predicate(parse_predicate("c <= 9223372036854775807"), schema)
    assert bound.right.arrow_type == pa.int64()
    wide = bind_predicate(parse_predicate("c < 9223372036854775808"), schema)
    assert pa.types.is_decimal(wide.right.arrow_type)
    table = _rows([1, 2], [BIGINT_MAX, -(2**63)])
    assert _where(table, "c < 9223372036854775808") == [1, 2]  # as DECIMAL: no rounding to 2^63
    assert _where(table, "c <= 9223372036854775807") == [1, 2]


def test_an_overflow_fails_only_when_a_row_overflows():
    """Spark (ANSI): ARITHMETIC_OVERFLOW for a row where ``d + 1`` overflows, none otherwise;
    without an overflowing row the answer for each row is its own (any subset of rows agrees)."""
    table = _rows([4, 3, None, INT_MAX - 1], [5, BIGINT_MAX, 5, 5])
    assert _where(table, PREDICATE) == [1]
    for i in range(table.num_rows):
        assert _where(table.slice(i, 1), PREDICATE) == ([1] if i == 0 else [])
    with pytest.raises(PredicateError, match="overflow"):
        _where(_rows([4, INT_MAX], [5, 5]), PREDICATE)
    with pytest.raises(PredicateError, match="overflow"):
        _where(_rows([INT_MAX], [5]), "c <= 9223372036854775807 AND d + 1 = 5")


def _table_with_a_deleted_overflow(uri: str, properties: dict[str, str]) -> deltatx.Table:
    """A table whose row 1 (``d`` = INT's largest value) was deleted; rows 2 and 3 remain."""
    schema = _rows([1], [1]).schema
    table = deltatx.create_table(uri, schema, properties=properties)
    table.append(_rows([INT_MAX, 3, 7], [5, 5, BIGINT_MAX]))
    deltatx.Table(uri).delete("id = 1")
    return deltatx.Table(uri)


@pytest.mark.parametrize("properties", [pytest.param({}, id="copy-on-write"), pytest.param(DV, id="deletion-vectors")])
def test_a_live_overflow_fails_the_delete_on_either_kind_of_table(table_uri, properties):
    schema = _rows([1], [1]).schema
    table = deltatx.create_table(table_uri, schema, properties=properties)
    table.append(_rows([INT_MAX, 4], [5, 5]))
    with pytest.raises(PredicateError, match="overflow"):
        deltatx.Table(table_uri).delete(PREDICATE)
    assert deltatx.Table(table_uri).to_arrow()["id"].to_pylist() == [1, 2]


def test_a_deleted_overflow_is_not_evaluated_on_a_copy_on_write_table(table_uri):
    table = _table_with_a_deleted_overflow(table_uri, {})
    assert table.delete(PREDICATE).metrics["numDeletedRows"] == 0
    assert deltatx.Table(table_uri).to_arrow()["id"].to_pylist() == [2, 3]


def test_a_deleted_overflow_is_not_evaluated_on_a_deletion_vector_table(table_uri):
    """The same statement as on the copy-on-write table: the deleted row no longer exists."""
    table = _table_with_a_deleted_overflow(table_uri, DV)
    assert table.delete(PREDICATE).metrics["numDeletedRows"] == 0
    assert deltatx.Table(table_uri).to_arrow(where="d + 1 = 8")["id"].to_pylist() == [3]
    assert deltatx.Table(table_uri).delete("d + 1 = 4").metrics["numDeletedRows"] == 1
    assert deltatx.Table(table_uri).to_arrow()["id"].to_pylist() == [3]
