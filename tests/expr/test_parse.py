"""SQL text -> expression model: coverage, SQL rendering round trips, and refusals."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltatx.errors import PredicateError
from deltatx.expr import (
    FALSE,
    TRUE,
    And,
    Arithmetic,
    Case,
    Cast,
    Column,
    Comparison,
    Func,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
    and_all,
    conjuncts,
    map_columns,
    parse_expression,
    parse_predicate,
    partition_predicate,
    qualifiers,
    qualify,
    strip_alias,
)

UTC = dt.timezone.utc
a, b, c = Column("a"), Column("b"), Column("c")


@pytest.mark.parametrize(
    "sql, expected",
    [
        ("part = 3 AND id > 10", And(Comparison("=", Column("part"), 3), Comparison(">", Column("id"), 10))),
        ("a <> 1", Comparison("!=", a, 1)),
        ("a == 1", Comparison("=", a, 1)),
        ("date = '2024-01-01'", Comparison("=", Column("date"), "2024-01-01")),
        ("name IN ('a', 'b')", In(Column("name"), ("a", "b"))),
        ("a NOT IN (1, NULL)", In(a, (1, None), negated=True)),
        ("x IS NULL", IsNull(Column("x"))),
        ("x IS NOT NULL", IsNull(Column("x"), negated=True)),
        ("NOT (a < 5)", Not(Comparison("<", a, 5))),
        ("id BETWEEN 1 AND 10", And(Comparison(">=", Column("id"), 1), Comparison("<=", Column("id"), 10))),
        ("a NOT BETWEEN 1 AND 2", Not(And(Comparison(">=", a, 1), Comparison("<=", a, 2)))),
        ("s LIKE 'ab%'", Like(Column("s"), "ab%")),
        ("s NOT LIKE 'ab%'", Like(Column("s"), "ab%", negated=True)),
        ("s ILIKE 'AB%'", Like(Column("s"), "AB%", case_insensitive=True)),
        ("s LIKE 'a!%%' ESCAPE '!'", Like(Column("s"), "a\\%%")),
        ("`my col` > -3", Comparison(">", Column("my col"), -3)),
        ("t.id = s.id", Comparison("=", Column("id", "t"), Column("id", "s"))),
        ("t.s.a = 1", Comparison("=", Column("s", "t", ("a",)), 1)),
        ("a = 1.50", Comparison("=", a, Decimal("1.50"))),
        ("a = 1.5e3", Comparison("=", a, 1500.0)),
        ("a = 1.5D", Comparison("=", a, Literal(1.5, pa.float64()))),
        ("a = TRUE OR b = FALSE", Or(Comparison("=", a, True), Comparison("=", b, False))),
        ("d = DATE '2024-01-02'", Comparison("=", Column("d"), Literal(dt.date(2024, 1, 2), pa.date32()))),
        (
            "ts > TIMESTAMP '2024-01-01 10:00:00'",
            Comparison(">", Column("ts"), Literal(dt.datetime(2024, 1, 1, 10, tzinfo=UTC), pa.timestamp("us", tz="UTC"))),
        ),
        ("CAST(a AS INT) = 1", Comparison("=", Cast(a, pa.int32()), 1)),
        ("CAST(a AS DECIMAL(10,2)) = 1", Comparison("=", Cast(a, pa.decimal128(10, 2)), 1)),
        ("a + b * 2 > c % 3", Comparison(">", Arithmetic("+", a, Arithmetic("*", b, 2)), Arithmetic("%", c, 3))),
        ("a / 2 = 1", Comparison("=", Arithmetic("/", a, 2), 1)),
        ("-a < 0", Comparison("<", Func("negative", (a,)), 0)),
        ("upper(a) = 'X'", Comparison("=", Func("upper", (a,)), "X")),
        ("coalesce(a, 0) = 0", Comparison("=", Func("coalesce", (a, 0)), 0)),
        ("nvl(a, 0) = 0", Comparison("=", Func("coalesce", (a, 0)), 0)),
        ("concat(a, 'x') = 'y'", Comparison("=", Func("concat", (a, "x")), "y")),
        ("substr(a, 2, 3) = 'y'", Comparison("=", Func("substring", (a, 2, 3)), "y")),
        ("ltrim(a) = 'y'", Comparison("=", Func("ltrim", (a,)), "y")),
        ("year(d) = 2024", Comparison("=", Func("year", (Column("d"),)), 2024)),
        ("startswith(a, 'x')", Func("startswith", (a, "x"))),
        ("a <=> NULL", Comparison("<=>", a, None)),
        ("a IS DISTINCT FROM b", Not(Comparison("<=>", a, b))),
        ("a IS TRUE", Func("coalesce", (a, FALSE))),
        ("IF(a > 1, 'x', 'y') = 'x'", Comparison("=", Func("if", (Comparison(">", a, 1), "x", "y")), "x")),
        (
            "CASE WHEN a > 1 THEN 'x' WHEN b THEN 'y' ELSE 'z' END = 'x'",
            Comparison("=", Case(((Comparison(">", a, 1), "x"), (b, "y")), "z"), "x"),
        ),
        ("CASE a WHEN 1 THEN 2 END = 2", Comparison("=", Case(((Comparison("=", a, 1), 2),)), 2)),
        ("x = X'0A0B'", Comparison("=", Column("x"), b"\n\x0b")),
        ("(a = 1)", Comparison("=", a, 1)),
        ("TRUE", TRUE),
    ],
)
def test_parse_coverage(sql, expected):
    assert parse_predicate(sql) == expected


@pytest.mark.parametrize(
    "sql, fragment",
    [
        ("x IN (SELECT id FROM t)", "subquery"),
        ("EXISTS (SELECT 1)", "EXISTS"),
        ("a = ?", "placeholder"),
        ("a = :name", "placeholder"),
        ("rand() < 0.5", "function rand()"),
        ("my_udf(a) = 1", "function my_udf()"),
        ("a RLIKE 'x'", "RLIKE"),
        ("a + INTERVAL 1 DAY > b", "INTERVAL"),
        ("s LIKE b", "non-constant pattern"),
        ("CAST(a AS ARRAY<INT>) = 1", "type"),
        ("SELECT 1", "SELECT"),
        ("a = 1; b = 2", "expected one expression"),
        ("a = ", "cannot parse"),
        ("", "empty"),
        ("   ", "empty"),
        ("DATE 'not a date' = d", "cannot read"),
        ("sum(a) > 1", "sum"),
    ],
)
def test_parse_errors_name_the_construct(sql, fragment):
    with pytest.raises(PredicateError) as info:
        parse_predicate(sql)
    assert fragment.lower() in str(info.value).lower()


def test_parse_expression_values():
    assert parse_expression("value * 2") == Arithmetic("*", Column("value"), 2)
    assert parse_expression("'x'") == Literal("x")
    assert parse_expression("upper(name)") == Func("upper", (Column("name"),))


def test_literals_of_different_kinds_do_not_compare_equal():
    assert Literal(1) != Literal(True)
    assert Literal(1) != Literal(1.0)
    assert Literal(1, pa.int32()) != Literal(1)
    assert len({Literal(1), Literal(True), Literal(1.0)}) == 3


def test_str_is_readable_sql():
    e = parse_predicate("part = 3 and (id > 10 or name = 'x')")
    assert str(e) == "part = 3 AND (id > 10 OR name = 'x')"
    assert str(parse_predicate("name = 'it\\'s'")) == "name = 'it\\'s'"
    assert str(parse_predicate("NOT (a < 5)")) == "NOT (a < 5)"
    assert str(parse_predicate("`my col` = 1 AND `date` = DATE '2024-01-01'")) == "`my col` = 1 AND date = DATE '2024-01-01'"
    assert str(parse_predicate("`select` = 1")) == "`select` = 1"


# --------------------------------------------------------------------------------------------
# Round trip: str(expr) parses back to expr
# --------------------------------------------------------------------------------------------

names = st.sampled_from(["a", "b", "part", "date", "my col", "select", "x`y", "Ünïcode", "if"])
columns = st.builds(Column, names)
literal_values = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-10**6, max_value=10**6),
    st.text(max_size=8),
    st.booleans(),
    st.none(),
    st.dates(),
)
literals = st.builds(Literal, literal_values)
values = st.one_of(columns, literals)


def _value_exprs(leaf):
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.builds(Arithmetic, st.sampled_from(["+", "-", "*", "/", "%", "DIV"]), inner, inner),
            st.builds(lambda x: Func("upper", (x,)), inner),
            st.builds(lambda x, y: Func("coalesce", (x, y)), inner, inner),
        ),
        max_leaves=4,
    )


value_exprs = _value_exprs(values)
def _valid_like_pattern(pattern: str) -> bool:
    """Spark's rule: a backslash escapes only '_', '%' or a backslash, and does not end the pattern."""
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            if i + 1 == len(pattern) or pattern[i + 1] not in "_%\\":
                return False
            i += 1
        i += 1
    return True


atoms = st.one_of(
    st.builds(Comparison, st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "<=>"]), value_exprs, value_exprs),
    st.builds(In, columns, st.lists(literals, min_size=1, max_size=3).map(tuple), st.booleans()),
    st.builds(IsNull, value_exprs, st.booleans()),
    st.builds(Like, columns, st.text(alphabet="ab%_\\'", max_size=6).filter(_valid_like_pattern), st.booleans(),
              st.booleans()),
)
predicates = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.builds(And, inner, inner),
        st.builds(Or, inner, inner),
        st.builds(Not, inner.filter(lambda e: not isinstance(e, (In, IsNull, Like)))),
    ),
    max_leaves=6,
)


@given(predicates)
@settings(max_examples=400, deadline=None)
def test_round_trip_through_sql_text(expr):
    text = str(expr)
    assert parse_predicate(text) == expr, text


# --------------------------------------------------------------------------------------------
# Tree helpers
# --------------------------------------------------------------------------------------------


def test_conjuncts_and_and_all():
    e = parse_predicate("a = 1 AND (b = 2 AND c = 3) AND (a = 4 OR b = 5)")
    parts = conjuncts(e)
    assert [str(p) for p in parts] == ["a = 1", "b = 2", "c = 3", "a = 4 OR b = 5"]
    assert and_all(parts) == parse_predicate("a = 1 AND b = 2 AND c = 3 AND (a = 4 OR b = 5)")
    assert and_all([]) == TRUE
    assert and_all([TRUE, Comparison("=", a, 1)]) == Comparison("=", a, 1)
    assert conjuncts(TRUE) == []


def test_columns_lists_top_level_and_qualified_names():
    e = parse_predicate("t.id = s.id AND upper(name) = 'X' AND st.f.g = 1")
    assert e.columns() == frozenset({"t.id", "s.id", "name", "st.f"})


def test_qualify_and_strip_alias():
    e = parse_predicate("t.id = s.id AND T.part = 3 AND x > 1")
    assert qualifiers(e) == frozenset({"t", "s", "T"})
    stripped = strip_alias(e, "t")
    assert str(stripped) == "id = s.id AND part = 3 AND x > 1"
    assert str(qualify(stripped, "t")) == "t.id = s.id AND t.part = 3 AND t.x > 1"
    renamed = map_columns(e, lambda col: Column(col.name.upper(), col.qualifier))
    assert "t.ID = s.ID" in str(renamed)


def test_partition_predicate_keeps_partition_only_conjuncts():
    e = parse_predicate("part = 3 AND id > 10 AND (PART = 4 OR id = 1) AND region IN ('eu') AND 1 = 1")
    assert str(partition_predicate(e, ["part", "region"])) == "part = 3 AND region IN ('eu') AND 1 = 1"
    assert partition_predicate(parse_predicate("id > 10"), ["part"]) == TRUE
    assert partition_predicate(parse_predicate("t.part = 1"), ["part"]) == TRUE


# --------------------------------------------------------------------------------------------
# ``column op integer`` is parsed from a cached template (expr/parse.py::_point_comparison)

_NAMES = st.one_of(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True),
    st.sampled_from(["null", "NULL", "true", "false", "select", "from", "and", "or", "not", "in", "is",
                     "case", "date", "timestamp", "interval", "id", "ID", "_", "x1"]),
)


@settings(max_examples=400, deadline=None)
@given(name=_NAMES, op=st.sampled_from(["=", "==", "!=", "<>", "<", "<=", ">", ">="]),
       sign=st.sampled_from(["", "-"]), value=st.integers(0, 10**18 - 1),
       left=st.sampled_from(["", " ", "  "]), middle=st.sampled_from(["", " "]), right=st.sampled_from(["", " "]))
def test_a_point_comparison_parses_as_sqlglot_parses_it(name, op, sign, value, left, middle, right):
    from deltatx.expr.parse import _convert, _parse

    sql = f"{left}{name}{middle}{op}{middle}{sign}{value}{right}"
    try:
        expected = _convert(_parse(sql, "predicate"))
    except PredicateError as exc:
        with pytest.raises(PredicateError) as raised:
            parse_predicate(sql)
        assert str(raised.value) == str(exc)  # the caller's text is quoted, never the template's
        return
    got = parse_predicate(sql)
    assert got == expected and str(got) == str(expected)
    assert type(getattr(got, "right", None)) is type(getattr(expected, "right", None))


def test_a_point_comparison_keeps_the_numbers_type_and_sign():
    got = parse_predicate("id = -42")
    assert isinstance(got, Comparison) and got.right == Literal(-42) and type(got.right.value) is int
    assert parse_predicate("id = 42") != parse_predicate("id = 43")  # the template is not returned
    assert parse_predicate("id = 007") == parse_predicate("id = 7")  # leading zeros: sqlglot decides
