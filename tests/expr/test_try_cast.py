"""TRY_CAST: CAST's value where CAST succeeds, NULL for each value CAST fails on (Spark's try_cast).

The reference for every pair of types is the row-level CAST itself, applied to one value at a
time: a value CAST refuses is NULL, any other value is what CAST gives. Both back ends are held
to it: the eager evaluator (``evaluate``/``matches``) and the lazy Arrow expression a dataset scan
runs (``to_arrow``).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

import deltatx
import sql_values
from deltatx.errors import PredicateError
from deltatx.expr import (
    Cast,
    Column,
    Literal,
    bind,
    bind_predicate,
    evaluate,
    matches,
    parse_expression,
    parse_predicate,
    to_arrow,
    to_arrow_filter,
)

UTC = dt.timezone.utc


def _comparable(values: list) -> list:
    return ["NaN" if isinstance(v, float) and v != v else v for v in values]


def _py(values) -> list:
    """Values as Python; a timestamp past Python's year 9999 (CAST(2^40 AS TIMESTAMP)) as its microseconds."""
    if not pa.types.is_timestamp(values.type):
        return values.to_pylist()
    out = []
    for v in values:
        try:
            out.append(v.as_py())
        except OverflowError:
            out.append(v.cast(pa.int64()).as_py())
    return out


def _eager(sql: str, table: pa.Table) -> list:
    return _comparable(_py(sql_values.eager(sql, table)))


def _lazy(sql: str, table: pa.Table) -> list:
    return _comparable(_py(sql_values.lazy(sql, table)))


def _cast_each(sql: str, table: pa.Table) -> list:
    """The reference: ``sql`` with CAST for TRY_CAST, row by row; NULL where it raises."""
    cast_sql = sql.replace("TRY_CAST", "CAST")
    out = []
    for i in range(table.num_rows):
        try:
            out.append(_eager(cast_sql, table.slice(i, 1))[0])
        except PredicateError:
            out.append(None)
    return out


# column -> values mixing ones CAST converts with ones it refuses, and a NULL
VALUES = pa.table({
    "s": ["1", "abc", " 7 ", None, "300", "2024-13-01", "2024-02-03", "1.5", "true", "1e3", "-12",
          "99999999999", "2024-02-03 10:11:12", "", "n"],
    "b": pa.array([1, 2, 300, None, -129, 127, -128, 128, 2**31, -(2**31) - 1, 2**40, 0, 5, 6, 7], pa.int64()),
    "d": [1.5, float("nan"), 1e20, None, -2.5, float("inf"), 2147483647.9, 2147483648.0, -2147483648.9,
          -2147483649.0, float("-inf"), 0.0, 99.95, -99.95, 100.0],
    "m": pa.array([Decimal("123.45"), Decimal("99999.99"), None, Decimal("1.00"), Decimal("0.05"),
                   Decimal("-99999.99"), Decimal("999.94"), Decimal("999.95"), Decimal("-999.95"), Decimal("127.99"),
                   Decimal("128.00"), Decimal("-128.99"), Decimal("-129.00"), Decimal("0"), Decimal("5")],
                  pa.decimal128(7, 2)),
    "bo": [True, False, None] * 5,
    "dt": [dt.date(2024, 1, 1), None, dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1970, 1, 1)] * 3,
    "ts": pa.array([dt.datetime(2024, 1, 1, 10, 11, 12, 123456), None, dt.datetime(1, 1, 1),
                    dt.datetime(9999, 12, 31, 23, 59, 59), dt.datetime(1970, 1, 1)] * 3, pa.timestamp("us", "UTC")),
})

CASES = [
    ("TRY_CAST(s AS INT)", [1, None, 7, None, 300, None, None, None, None, None, -12, None, None, None, None]),
    ("TRY_CAST(s AS BIGINT)", [1, None, 7, None, 300, None, None, None, None, None, -12, 99999999999, None, None,
                               None]),
    ("TRY_CAST(s AS DOUBLE)", [1.0, None, 7.0, None, 300.0, None, None, 1.5, None, 1000.0, -12.0, 99999999999.0,
                               None, None, None]),
    ("TRY_CAST(s AS DECIMAL(5,2))", [Decimal("1.00"), None, Decimal("7.00"), None, Decimal("300.00"), None, None,
                                     Decimal("1.50"), None, None, Decimal("-12.00"), None, None, None, None]),
    ("TRY_CAST(s AS DATE)", [None, None, None, None, None, None, dt.date(2024, 2, 3), None, None, None, None, None,
                             dt.date(2024, 2, 3), None, None]),
    ("TRY_CAST(s AS TIMESTAMP)", [None, None, None, None, None, None, dt.datetime(2024, 2, 3, tzinfo=UTC), None,
                                  None, None, None, None, dt.datetime(2024, 2, 3, 10, 11, 12, tzinfo=UTC), None,
                                  None]),
    ("TRY_CAST(s AS BOOLEAN)", [True, None, None, None, None, None, None, None, True, None, None, None, None, None,
                                False]),
    ("TRY_CAST(b AS TINYINT)", [1, 2, None, None, None, 127, -128, None, None, None, None, 0, 5, 6, 7]),
    ("TRY_CAST(b AS INT)", [1, 2, 300, None, -129, 127, -128, 128, None, None, None, 0, 5, 6, 7]),
    ("TRY_CAST(d AS INT)", [1, None, None, None, -2, None, 2147483647, None, -2147483648, None, None, 0, 99, -99,
                            100]),
    ("TRY_CAST(d AS DECIMAL(3,1))", [Decimal("1.5"), None, None, None, Decimal("-2.5"), None, None, None, None, None,
                                     None, Decimal("0.0"), None, None, None]),
    ("TRY_CAST(m AS DECIMAL(4,1))", [Decimal("123.5"), None, None, Decimal("1.0"), Decimal("0.1"), None,
                                     Decimal("999.9"), None, None, Decimal("128.0"), Decimal("128.0"),
                                     Decimal("-129.0"), Decimal("-129.0"), Decimal("0.0"), Decimal("5.0")]),
    ("TRY_CAST(m AS TINYINT)", [123, None, None, 1, 0, None, None, None, None, 127, None, -128, None, 0, 5]),
    ("TRY_CAST(b AS DECIMAL(3,0))", [Decimal(1), Decimal(2), Decimal(300), None, Decimal(-129), Decimal(127),
                                     Decimal(-128), Decimal(128), None, None, None, Decimal(0), Decimal(5),
                                     Decimal(6), Decimal(7)]),
]


@pytest.mark.parametrize("sql, expected", CASES, ids=[c[0] for c in CASES])
def test_failing_values_are_null_and_the_others_cast(sql, expected):
    assert _eager(sql, VALUES) == expected
    assert _lazy(sql, VALUES) == expected
    assert _cast_each(sql, VALUES) == expected  # each value: what CAST gives it, or NULL where CAST fails


TARGETS = ["TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL(5,2)", "DECIMAL(38,0)", "STRING",
           "BOOLEAN", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "BINARY"]


def test_every_pair_of_types_agrees_with_cast_value_by_value():
    failing = 0
    for column in VALUES.column_names:
        for target in TARGETS:
            sql = f"TRY_CAST({column} AS {target})"
            try:
                evaluate(bind(parse_expression(f"CAST({column} AS {target})"), VALUES.schema), VALUES.slice(0, 0))
            except PredicateError:  # no such cast for the types: TRY_CAST refuses it too, in both back ends
                with pytest.raises(PredicateError):
                    _eager(sql, VALUES)
                with pytest.raises(PredicateError):
                    _lazy(sql, VALUES)
                continue
            expected = _cast_each(sql, VALUES)
            failing += sum(v is None for v in expected) > VALUES.column(column).null_count
            assert _eager(sql, VALUES) == expected, sql
            assert _lazy(sql, VALUES) == expected, sql
    assert failing >= 25  # pairs where some value does not convert


def test_null_stays_null():
    table = pa.table({"s": pa.array([None, None], pa.string()), "b": pa.array([None, 300], pa.int64())})
    for target in ["INT", "DATE", "DECIMAL(5,2)", "BOOLEAN", "TIMESTAMP"]:
        assert _eager(f"TRY_CAST(s AS {target})", table) == [None, None]
        assert _lazy(f"TRY_CAST(s AS {target})", table) == [None, None]
    assert _eager("TRY_CAST(b AS TINYINT)", table) == [None, None]
    assert _lazy("TRY_CAST(b AS TINYINT)", table) == [None, None]
    assert parse_expression("TRY_CAST(NULL AS INT)") == Literal(None, pa.int32())


@pytest.mark.parametrize("sql", ["CAST(s AS INT)", "CAST(s AS DATE)", "CAST(s AS DECIMAL(5,2))", "CAST(b AS TINYINT)",
                                 "CAST(d AS INT)", "CAST(m AS DECIMAL(4,1))", "CAST(s AS BOOLEAN)"])
def test_cast_still_fails_where_try_cast_gives_null(sql):
    with pytest.raises(PredicateError):
        _eager(sql, VALUES)
    with pytest.raises((PredicateError, pa.ArrowInvalid)):
        _lazy(sql, VALUES)
    try_sql = sql.replace("CAST", "TRY_CAST")
    assert _eager(try_sql, VALUES) == _lazy(try_sql, VALUES) == _cast_each(try_sql, VALUES)


@pytest.mark.parametrize("sql, value", [
    ("TRY_CAST('abc' AS INT)", Literal(None, pa.int32())),
    ("TRY_CAST(300 AS TINYINT)", Literal(None, pa.int8())),
    ("TRY_CAST('2024-13-01' AS DATE)", Literal(None, pa.date32())),
    ("TRY_CAST(1e20 AS INT)", Literal(None, pa.int32())),
    ("TRY_CAST(123.45 AS DECIMAL(3,1))", Literal(None, pa.decimal128(3, 1))),
])
def test_a_constant_that_does_not_convert_folds_to_null(sql, value):
    assert parse_expression(sql) == value
    with pytest.raises(PredicateError):  # CAST still refuses it
        parse_expression(sql.replace("TRY_CAST", "CAST"))
    assert parse_expression("TRY_CAST('12' AS INT)") == Literal(12, pa.int32())
    assert parse_expression("TRY_CAST('2024-02-03' AS DATE)") == Literal(dt.date(2024, 2, 3))


def test_a_cast_the_types_do_not_have_fails_for_try_cast_too():
    table = pa.table({"f": [True, None]})
    with pytest.raises(PredicateError):
        _eager("TRY_CAST(f AS DATE)", table)
    with pytest.raises(PredicateError):
        to_arrow(parse_expression("TRY_CAST(f AS DATE)"), table.schema)
    with pytest.raises(PredicateError):
        parse_expression("TRY_CAST(TRUE AS DATE)")


def test_negated_try_cast_is_the_negation_of_its_value():
    """-128Y is a TINYINT literal, but -TRY_CAST(128 AS TINYINT) is -(NULL)."""
    assert evaluate(parse_expression("-TRY_CAST(128 AS TINYINT)"), pa.table({"x": [1]})).to_pylist() == [None]
    assert evaluate(parse_expression("-TRY_CAST(5 AS INT)"), pa.table({"x": [1]})).to_pylist() == [-5]


@pytest.mark.parametrize("sql", [
    "TRY_CAST(s AS INT) > 5",
    "TRY_CAST(s AS DECIMAL(10, 2)) = 1.5",
    "TRY_CAST(TRY_CAST(s AS INT) AS STRING) = '7'",
    "TRY_CAST(s AS DATE) IS NULL AND CAST(b AS INT) < 3",
    "NOT TRY_CAST(`odd name` AS BOOLEAN)",
])
def test_sql_text_round_trips(sql):
    e = parse_predicate(sql)
    assert "TRY_CAST(" in str(e)
    assert parse_predicate(str(e)) == e


def test_try_cast_and_cast_are_different_nodes():
    cast, try_cast = Cast(Column("s"), pa.int32()), Cast(Column("s"), pa.int32(), try_=True)
    assert cast != try_cast and len({cast, try_cast}) == 2
    assert str(cast) == "CAST(s AS INT)" and str(try_cast) == "TRY_CAST(s AS INT)"
    assert parse_expression("TRY_CAST(s AS INT)") == try_cast
    assert parse_expression("CAST(s AS INT)") == cast
    assert parse_expression("s::int") == cast  # sqlglot reads these as TryCast too, without its "safe" mark
    assert parse_expression("int(s)") == cast
    assert bind(try_cast, pa.schema([("s", pa.string())])) == try_cast


def test_a_predicate_filters_alike_eagerly_and_in_a_scan():
    table = pa.table({"id": list(range(len(VALUES))), "s": VALUES.column("s")})
    pred = bind_predicate(parse_predicate("TRY_CAST(s AS INT) > 5"), table.schema)
    eager = table.filter(matches(pred, table))["id"].to_pylist()
    scanned = ds.dataset(table).to_table(filter=to_arrow_filter(pred, table.schema))["id"].to_pylist()
    assert eager == scanned == [2, 4]
    assert table.filter(to_arrow(pred, table.schema))["id"].to_pylist() == [2, 4]


def test_many_rows_several_chunks_and_repeated_words():
    words = ["n/a", "", "x1", "1x"]
    values = [str(i) if i % 3 else words[i % 4] for i in range(5000)] + ["99999999999", "-2147483649", None]
    chunked = pa.chunked_array([values[:1234], values[1234:4000], values[4000:]])
    table = pa.table({"s": chunked, "b": pc.cast(pc.multiply(pa.array(range(len(values)), pa.int64()), 7), pa.int64())})
    expected = [int(v) if v is not None and v.lstrip("-").isdigit() and -(2**31) <= int(v) < 2**31 else None
                for v in values]
    assert _eager("TRY_CAST(s AS INT)", table) == expected
    assert _lazy("TRY_CAST(s AS INT)", table) == expected
    small = [7 * i if 7 * i <= 32767 else None for i in range(len(values))]
    assert _eager("TRY_CAST(b AS SMALLINT)", table) == small
    assert _lazy("TRY_CAST(b AS SMALLINT)", table) == small


def test_a_large_string_column():
    table = pa.table({"s": pa.array(["1", "abc", "1", None, "abc", "40"], pa.large_string())})
    assert _eager("TRY_CAST(s AS INT)", table) == [1, None, 1, None, None, 40]
    assert _lazy("TRY_CAST(s AS INT)", table) == [1, None, 1, None, None, 40]


def test_a_lazy_expression_without_types_is_refused():
    with pytest.raises(PredicateError, match="schema"):
        to_arrow(parse_predicate("TRY_CAST(s AS INT) > 5"))


def test_timestamp_text_without_a_zone_is_read_in_utc_by_cast_too():
    """A column's text is read as a literal's (``TIMESTAMP '2024-02-03 10:11:12'``): in the
    session time zone, UTC. Arrow's cast wanted a zone in the text, so CAST of a column failed."""
    table = pa.table({"s": ["2024-02-03", "2024-02-03 10:11:12", "2024-02-03T10:11:12Z",
                            "2024-02-03 10:11:12+02:00", None]})
    expected = [dt.datetime(2024, 2, 3, tzinfo=UTC), dt.datetime(2024, 2, 3, 10, 11, 12, tzinfo=UTC),
                dt.datetime(2024, 2, 3, 10, 11, 12, tzinfo=UTC), dt.datetime(2024, 2, 3, 8, 11, 12, tzinfo=UTC), None]
    assert _eager("CAST(s AS TIMESTAMP)", table) == expected
    assert _lazy("CAST(s AS TIMESTAMP)", table) == expected
    for text, value in zip(table.column("s").to_pylist()[:4], expected):
        assert parse_expression(f"CAST('{text}' AS TIMESTAMP)").value == value


# --------------------------------------------------------------------------------------------
# A table: reads, DELETE and UPDATE
# --------------------------------------------------------------------------------------------

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string())])
FILES = [
    {"id": [1, 2, 3], "s": ["3", "6", "10"]},  # numbers only
    {"id": [4, 5, 6, 7, 8], "s": ["abc", "7", None, "5", "x9"]},  # numbers and words
]


def _table(uri: str, properties: dict | None = None) -> deltatx.Table:
    t = deltatx.create_table(uri, SCHEMA, properties=properties or {})
    for rows in FILES:
        t.append(pa.table(rows, schema=SCHEMA))
    return t


def test_reads_select_rows_whose_text_converts(table_uri):
    t = _table(table_uri)
    assert sorted(t.to_arrow(where="try_cast(s AS INT) > 5")["id"].to_pylist()) == [2, 3, 5]
    assert sorted(t.to_arrow(where="try_cast(s AS INT) > 5", columns=["id"])["id"].to_pylist()) == [2, 3, 5]
    assert sorted(t.to_arrow(where="try_cast(s AS INT) IS NULL")["id"].to_pylist()) == [4, 6, 8]
    with t.transaction() as tx:
        assert sorted(tx.read(where="try_cast(s AS INT) > 5")["id"].to_pylist()) == [2, 3, 5]
    with pytest.raises(PredicateError):
        t.to_arrow(where="cast(s AS INT) > 5")  # CAST still fails on 'abc'


@pytest.mark.parametrize("deletion_vectors", [False, True])
def test_delete_and_update(tmp_path, deletion_vectors):
    props = {"delta.enableDeletionVectors": "true"} if deletion_vectors else {}
    t = _table(str(tmp_path / "d"), props)
    assert t.delete(where="try_cast(s AS INT) > 5").metrics["numDeletedRows"] == 3
    assert sorted(deltatx.Table(str(tmp_path / "d")).to_arrow()["id"].to_pylist()) == [1, 4, 6, 7, 8]
    u = _table(str(tmp_path / "u"), props)
    u.update(where="try_cast(s AS INT) <= 5", set={"s": "concat(s, '!')"})
    rows = dict(zip(*deltatx.Table(str(tmp_path / "u")).to_arrow().select(["id", "s"]).to_pydict().values()))
    assert rows == {1: "3!", 2: "6", 3: "10", 4: "abc", 5: "7", 6: None, 7: "5!", 8: "x9"}
    u.update(where="id >= 4", set={"s": "CAST(try_cast(s AS INT) + 1 AS STRING)"})
    rows = dict(zip(*deltatx.Table(str(tmp_path / "u")).to_arrow().select(["id", "s"]).to_pydict().values()))
    assert rows == {1: "3!", 2: "6", 3: "10", 4: None, 5: "8", 6: None, 7: None, 8: None}
