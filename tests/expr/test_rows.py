"""Row evaluation: SQL three-valued semantics against a Python reference, binding, functions."""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltatx.errors import PredicateError
from deltatx.expr import (
    And,
    Arithmetic,
    Column,
    Comparison,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
    bind,
    bind_predicate,
    evaluate,
    filter_table,
    matches,
    parse_expression,
    parse_predicate,
    rows_to_keep,
    to_arrow,
    to_arrow_filter,
    to_arrow_keep,
)

UTC = dt.timezone.utc

# --------------------------------------------------------------------------------------------
# A Python reference for SQL semantics
# --------------------------------------------------------------------------------------------


def _like_regex(pattern: str) -> re.Pattern:
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def _arith(op, x, y):
    if x is None or y is None:
        return None
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if op == "/":
        return None if y == 0 else float(x) / float(y)
    if y == 0:
        return None
    if isinstance(x, float) or isinstance(y, float):
        return math.fmod(x, y)
    magnitude = abs(x) % abs(y)
    return magnitude if x >= 0 else -magnitude


def _spark_key(v):
    """Spark orders floats with NaN above every number and equal to itself; -0.0 equals 0.0."""
    return (1, 0.0) if isinstance(v, float) and math.isnan(v) else (0, v)


_OPS = {
    "=": lambda x, y: x == y,
    "!=": lambda x, y: x != y,
    "<": lambda x, y: x < y,
    "<=": lambda x, y: x <= y,
    ">": lambda x, y: x > y,
    ">=": lambda x, y: x >= y,
}


def ref(e, row):
    if isinstance(e, Column):
        return row[e.name]
    if isinstance(e, Literal):
        return e.value
    if isinstance(e, Comparison):
        x, y = ref(e.left, row), ref(e.right, row)
        if e.op == "<=>":
            return (x is None and y is None) or (x is not None and y is not None and _spark_key(x) == _spark_key(y))
        return None if x is None or y is None else _OPS[e.op](_spark_key(x), _spark_key(y))
    if isinstance(e, And):
        x, y = ref(e.left, row), ref(e.right, row)
        if x is False or y is False:
            return False
        return None if x is None or y is None else True
    if isinstance(e, Or):
        x, y = ref(e.left, row), ref(e.right, row)
        if x is True or y is True:
            return True
        return None if x is None or y is None else False
    if isinstance(e, Not):
        x = ref(e.operand, row)
        return None if x is None else not x
    if isinstance(e, In):
        x = ref(e.operand, row)
        vals = [ref(v, row) for v in e.values]
        if x is None:
            out = None
        elif any(v is not None and _spark_key(v) == _spark_key(x) for v in vals):
            out = True
        else:
            out = None if any(v is None for v in vals) else False
        return out if not e.negated or out is None else not out
    if isinstance(e, IsNull):
        return (ref(e.operand, row) is None) != e.negated
    if isinstance(e, Like):
        x = ref(e.operand, row)
        if x is None:
            return None
        hit = _like_regex(e.pattern).fullmatch(x) is not None
        return hit != e.negated
    if isinstance(e, Arithmetic):
        return _arith(e.op, ref(e.left, row), ref(e.right, row))
    raise AssertionError(e)


# --------------------------------------------------------------------------------------------
# Random tables and predicates
# --------------------------------------------------------------------------------------------

SCHEMA = pa.schema([("i", pa.int32()), ("j", pa.int64()), ("f", pa.float64()), ("s", pa.string())])

small_ints = st.integers(min_value=-20, max_value=20)
floats = st.one_of(st.floats(min_value=-50, max_value=50, allow_nan=False), st.just(float("nan")))
strings = st.text(alphabet="ab%_", max_size=4)

rows_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "i": st.one_of(st.none(), small_ints),
            "j": st.one_of(st.none(), small_ints),
            "f": st.one_of(st.none(), floats),
            "s": st.one_of(st.none(), strings),
        }
    ),
    min_size=0,
    max_size=25,
)

numeric_cols = st.sampled_from([Column("i"), Column("j"), Column("f")])
numeric_values = st.recursive(
    st.one_of(numeric_cols, st.builds(Literal, small_ints)),
    lambda inner: st.builds(Arithmetic, st.sampled_from(["+", "-", "*", "/", "%"]), inner, inner),
    max_leaves=3,
)
maybe_null_ints = st.one_of(st.none(), small_ints).map(Literal)

atoms = st.one_of(
    st.builds(Comparison, st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "<=>"]), numeric_values, numeric_values),
    st.builds(Comparison, st.sampled_from(["=", "!=", "<", ">="]), st.just(Column("s")), strings.map(Literal)),
    st.builds(In, numeric_cols, st.lists(maybe_null_ints, min_size=1, max_size=4).map(tuple), st.booleans()),
    st.builds(IsNull, st.sampled_from([Column("i"), Column("f"), Column("s")]), st.booleans()),
    st.builds(Like, st.just(Column("s")), st.sampled_from(["a%", "%b", "a_", "\\%%", "%", "ab"]), st.booleans()),
)
predicates = st.recursive(
    atoms,
    lambda inner: st.one_of(st.builds(And, inner, inner), st.builds(Or, inner, inner), st.builds(Not, inner)),
    max_leaves=5,
)


@given(rows_strategy, predicates)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_rows_match_python_reference(rows, predicate):
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    table = table.append_column("_n", pa.array(range(len(rows)), pa.int64()))
    bound = bind(predicate, SCHEMA)
    expected = [ref(bound, row) is True for row in rows]
    wanted = [n for n, keep in enumerate(expected) if keep]
    assert matches(bound, table).to_pylist() == expected
    assert filter_table(table, bound).column("_n").to_pylist() == wanted
    assert table.filter(to_arrow(bound, SCHEMA)).column("_n").to_pylist() == wanted
    keep = rows_to_keep(bound, table).to_pylist()
    assert keep == [not x for x in expected]


# --------------------------------------------------------------------------------------------
# Specific semantics
# --------------------------------------------------------------------------------------------

T = pa.table(
    {
        "part": pa.array([1, 2, 3, None], pa.int32()),
        "id": pa.array([5, 15, None, 20], pa.int64()),
        "name": ["a", "bb", None, "ab"],
        "d": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2), None, dt.date(2024, 1, 1)]),
        "ts": pa.array(
            [dt.datetime(2024, 1, 1, tzinfo=UTC), None, dt.datetime(2024, 1, 2, 10, tzinfo=UTC), dt.datetime(2023, 1, 1, tzinfo=UTC)],
            pa.timestamp("us", tz="UTC"),
        ),
        "price": pa.array([Decimal("1.50"), Decimal("2.25"), None, Decimal("0.10")], pa.decimal128(10, 2)),
        "flag": [True, None, False, True],
        "st": pa.array([{"a": 1, "b": "x"}, {"a": 2, "b": None}, None, {"a": None, "b": "y"}]),
    }
)


def where(sql: str) -> list[bool]:
    return matches(bind(parse_predicate(sql), T.schema), T).to_pylist()


@pytest.mark.parametrize(
    "sql, expected",
    [
        ("part = 3 OR id > 10", [False, True, True, True]),
        ("d = '2024-01-01'", [True, False, False, True]),
        ("ts >= '2024-01-01'", [True, False, True, False]),
        ("ts = TIMESTAMP '2024-01-02 10:00:00'", [False, False, True, False]),
        ("price > 1.5", [False, True, False, False]),
        ("price = 2.25", [False, True, False, False]),
        ("name IN ('a', 'bb', NULL)", [True, True, False, False]),
        ("name NOT IN ('a', NULL)", [False, False, False, False]),
        ("name NOT IN ('a')", [False, True, False, True]),
        ("PART = 1", [True, False, False, False]),
        ("st.a = 2", [False, True, False, False]),
        ("st.b IS NULL", [False, True, True, False]),
        ("flag", [True, False, False, True]),
        ("NOT flag", [False, False, True, False]),
        ("flag IS TRUE", [True, False, False, True]),
        ("flag IS NOT TRUE", [False, True, True, False]),
        ("part <=> NULL", [False, False, False, True]),
        ("part IS DISTINCT FROM 1", [False, True, True, True]),
        ("id > 100 AND id / 0 > 1", [False, False, False, False]),  # guarded: never fails
        ("id % 7 = 1", [False, True, False, False]),
        ("-id < -10", [False, True, False, True]),
        ("coalesce(id, 0) = 0", [False, False, True, False]),
        ("upper(name) = 'AB'", [False, False, False, True]),
        ("length(name) = 2", [False, True, False, True]),
        ("concat(name, '-', part) = 'a-1'", [True, False, False, False]),
        ("substring(name, 2) = 'b'", [False, True, False, True]),
        ("substring(name, -1, 1) = 'b'", [False, True, False, True]),
        ("year(d) = 2024 AND month(d) = 1 AND day(d) = 2", [False, True, False, False]),
        ("startswith(name, 'a')", [True, False, False, True]),
        ("endswith(name, 'b')", [False, True, False, True]),
        ("contains(name, 'b')", [False, True, False, True]),
        ("name LIKE 'a%'", [True, False, False, True]),
        ("name ILIKE 'A_'", [False, False, False, True]),
        ("CASE WHEN id > 10 THEN 'big' WHEN id IS NULL THEN 'none' ELSE 'small' END = 'big'", [False, True, False, True]),
        ("CASE WHEN flag THEN 1 ELSE 0 END = 0", [False, True, True, False]),
        ("IF(flag, 1, 0) = 0", [False, True, True, False]),
        # an untyped NULL branch takes the other branch's type; a NULL condition takes ELSE
        ("IF(name = 'a', TRUE, NULL)", [True, False, False, False]),
        ("IF(name = 'a', NULL, 'x') = 'x'", [False, True, True, True]),
        ("CASE WHEN id > 10 THEN NULL ELSE 1 END = 1", [True, False, True, False]),
        ("greatest(part, 2) = 2", [True, True, False, True]),
        ("id IN (5, part * 15)", [True, False, False, False]),
        ("trim(concat(' ', name, ' ')) = name", [True, True, False, True]),
        ("CAST(id AS STRING) = '15'", [False, True, False, False]),
        ("round(price) = 2", [True, True, False, False]),
    ],
)
def test_sql_semantics(sql, expected):
    assert where(sql) == expected


def test_evaluate_values_and_constants():
    def values(sql):
        return evaluate(bind(parse_expression(sql), T.schema), T).to_pylist()

    assert values("id * 2") == [10, 30, None, 40]
    assert values("id / 4") == [1.25, 3.75, None, 5.0]
    assert values("-7 % 2") == [-1, -1, -1, -1]
    assert values("7 % -2") == [1, 1, 1, 1]
    assert values("'x'") == ["x"] * 4
    assert values("NULL") == [None] * 4
    assert evaluate(bind(parse_expression("part + 1"), T.schema), T).type == pa.int32()
    # Spark: an INT literal keeps INT arithmetic INT, so this overflows there too (ANSI)
    with pytest.raises(PredicateError, match="overflow"):
        values("part * 1000000000")
    assert values("part * 10000000000") == [10**10, 2 * 10**10, 3 * 10**10, None]  # a BIGINT literal
    small = pa.table({"b": pa.array([100], pa.int8())})
    assert evaluate(bind(parse_expression("b * 1000"), small.schema), small).to_pylist() == [100000]


def test_overflow_raises_predicate_error():
    table = pa.table({"x": pa.array([2**62], pa.int64())})
    with pytest.raises(PredicateError, match="overflow"):
        evaluate(bind(parse_expression("x * 4"), table.schema), table)


def test_delete_keeps_rows_where_predicate_is_not_true():
    e = bind(parse_predicate("id > 10"), T.schema)
    assert rows_to_keep(e, T).to_pylist() == [True, False, True, False]
    dataset = ds.dataset(T)
    assert dataset.to_table(filter=to_arrow_keep(e)).column("id").to_pylist() == [5, None]
    assert dataset.to_table(filter=to_arrow_filter(e)).column("id").to_pylist() == [15, 20]


def test_bind_types_literals_like_the_column():
    e = bind(parse_predicate("part = 3"), T.schema)
    assert e.right == Literal(3, pa.int32())
    e = bind(parse_predicate("d = '2024-01-01'"), T.schema)
    assert e.right == Literal(dt.date(2024, 1, 1))
    e = bind(parse_predicate("ts < '2024-01-01 10:00:00'"), T.schema)
    assert e.right == Literal(dt.datetime(2024, 1, 1, 10, tzinfo=UTC))
    e = bind(parse_predicate("price = 3"), T.schema)
    assert e.right == Literal(Decimal("3.00"), pa.decimal128(10, 2))
    e = bind(parse_predicate("part IN (1, '2')"), T.schema)
    assert e.values == (Literal(1, pa.int32()), Literal(2, pa.int32()))
    # lossy conversions keep the literal: the comparison happens in the wider type
    e = bind(parse_predicate("part < 2.5"), T.schema)
    assert where("part < 2.5") == [True, True, False, False]
    e = bind(parse_predicate("part = 3000000000"), T.schema)
    assert e.right == Literal(3000000000)
    # binding is idempotent
    once = bind(parse_predicate("PART = 3 AND d = '2024-01-01'"), T.schema)
    assert bind(once, T.schema) == once


@pytest.mark.parametrize(
    "sql, message",
    [
        ("nope = 1", "unknown column 'nope'"),
        ("d = 'garbage'", "cannot read 'garbage'"),
        ("id = 'abc'", "cannot read 'abc'"),
        ("name + 1 = 2", "cannot evaluate"),
        ("x.y = 1", "neither a table alias nor a struct column"),
        ("st.zzz = 1", "no field 'zzz'"),
        ("substring(name, id) = 'x'", "must be a constant"),
    ],
)
def test_bind_errors_are_actionable(sql, message):
    with pytest.raises(PredicateError) as info:
        bind(parse_predicate(sql), T.schema)
    assert message in str(info.value)
    if "unknown column" in message:
        assert "available columns: part, id, name" in str(info.value)


def test_bind_predicate_requires_boolean():
    with pytest.raises(PredicateError, match="not a condition"):
        bind_predicate(parse_predicate("id + 1"), T.schema)
    assert bind_predicate(parse_predicate("id > 1"), T.schema) is not None


def test_case_insensitive_resolution_and_ambiguity():
    schema = pa.schema([("Id", pa.int64()), ("id", pa.int64()), ("Name", pa.string())])
    assert str(bind(parse_predicate("name = 'x'"), schema)) == "Name = 'x'"
    assert str(bind(parse_predicate("id = 1"), schema)) == "id = 1"  # exact spelling wins
    with pytest.raises(PredicateError, match="ambiguous"):
        bind(parse_predicate("ID = 1"), schema)


def test_merge_style_aliases():
    target = pa.schema([("id", pa.int64()), ("v", pa.string())])
    source = pa.schema([("id", pa.int32()), ("w", pa.string())])
    e = bind(parse_predicate("t.id = s.id AND w = 'x' AND T.v = 'y'"), pa.schema([]), aliases={"t": target, "s": source})
    assert str(e) == "t.id = s.id AND s.w = 'x' AND t.v = 'y'"
    joined = pa.table({"t.id": [1, 2], "t.v": ["y", "y"], "s.id": pa.array([1, 3], pa.int32()), "s.w": ["x", "x"]})
    assert matches(e, joined).to_pylist() == [True, False]
    with pytest.raises(PredicateError, match="ambiguous"):
        bind(parse_predicate("id = 1"), pa.schema([]), aliases={"t": target, "s": source})
    with pytest.raises(PredicateError, match="columns of s"):
        bind(parse_predicate("s.v = 1"), pa.schema([]), aliases={"t": target, "s": source})


def test_evaluate_unknown_column_lists_table_columns():
    with pytest.raises(PredicateError, match="available columns: a"):
        evaluate(parse_expression("b + 1"), pa.table({"a": [1]}))


def test_matches_requires_a_boolean():
    with pytest.raises(PredicateError, match="not boolean"):
        matches(parse_expression("1 + 1"), T)
    assert pc.sum(matches(parse_predicate("NULL"), T)).as_py() in (0, None)


def test_float_remainder_is_javas_exactly():
    """Spark's % on DOUBLE is Java's: the exact remainder with the dividend's sign. A floored
    remainder shifted by the divisor rounds tiny dividends away and turns x % Infinity into NaN."""
    t = pa.table({"f": [-1.7e-19, -5.5, -3.0, 3.0, 7.0, 5.5], "g": [1.0, 2.0, math.inf, math.inf, -2.0, -2.0]})
    expected = [-1.7e-19, -1.5, -3.0, 3.0, 1.0, 1.5]
    assert [math.fmod(f, g) for f, g in zip(t["f"].to_pylist(), t["g"].to_pylist())] == expected
    e = bind(parse_expression("f % g"), t.schema)
    assert evaluate(e, t).to_pylist() == expected
    keep = bind_predicate(parse_predicate("f % g < 0"), t.schema)
    lazy = to_arrow_filter(keep, t.schema)  # as a scan passes it: the lazy form knows the types
    assert ds.dataset(t).to_table(filter=lazy).column("f").to_pylist() == [-1.7e-19, -5.5, -3.0]
    assert matches(bind_predicate(parse_predicate("0 = f % 1"), t.schema), t).to_pylist() == [
        False, False, True, True, True, False]
