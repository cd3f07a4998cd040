"""The numpy evaluation of point and range predicates selects exactly the rows the general
evaluator selects; the binder's direct path for them binds exactly as the general binder does."""

from __future__ import annotations

import importlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from integer_predicates import COMPARISONS, integer_predicates

from deltatx.errors import PredicateError
from deltatx.expr import Column, Comparison, In, Literal, Not, Or, bind_predicate, parse_predicate
from deltatx.expr.point_rows import matching_positions
from deltatx.expr.rows import matches

binder = importlib.import_module("deltatx.expr.bind")  # the module, not the function of that name

SCHEMA = pa.schema([("i", pa.int64()), ("b", pa.int8()), ("u", pa.uint16()), ("s", pa.string())])
INT_COLUMNS = {"i": (-(1 << 63), (1 << 63) - 1), "b": (-128, 127), "u": (0, 65535)}
values = st.one_of(st.integers(-300, 300), st.sampled_from([-(1 << 63), (1 << 63) - 1, 70000, -129, 128, 1 << 64]))


def predicates():
    return integer_predicates(sorted(INT_COLUMNS), values, ops=COMPARISONS + ("<=>",), negated_in=True)


@st.composite
def tables(draw):
    n = draw(st.integers(0, 40))
    columns = {}
    for name, (lo, hi) in INT_COLUMNS.items():
        small = st.one_of(st.integers(-5, 5), st.integers(lo, hi)).filter(lambda v, lo=lo, hi=hi: lo <= v <= hi)
        cells = draw(st.lists(st.one_of(st.none(), small), min_size=n, max_size=n))
        columns[name] = pa.array(cells, SCHEMA.field(name).type)
    columns["s"] = pa.array(["x"] * n, pa.string())
    table = pa.table(columns, schema=SCHEMA)
    if n > 1 and draw(st.booleans()):  # several chunks, as two row groups read together are
        table = pa.concat_tables([table.slice(0, n // 2), table.slice(n // 2)])
    return table


def general_positions(bound, table: pa.Table) -> np.ndarray:
    return np.flatnonzero(np.asarray(matches(bound, table).to_numpy(zero_copy_only=False), dtype=bool))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=tables(), predicate=predicates())
def test_point_rows_select_exactly_what_the_evaluator_selects(table, predicate):
    try:
        bound = bind_predicate(predicate, SCHEMA)
    except PredicateError:
        return
    fast = matching_positions(bound, table)
    if fast is None:  # outside the subset: the caller evaluates in general
        return
    assert fast.dtype == np.int64
    assert fast.tolist() == general_positions(bound, table).tolist()


def test_the_subset_is_taken_and_the_rest_declined():
    table = pa.table({"i": pa.array([1, None, 3, 4], pa.int64()), "s": ["a", "b", "c", None]})
    schema = table.schema
    taken = {"i = 3": [2], "i != 3": [0, 3], "i >= 3 AND i < 4 OR i = 1": [0, 2], "i IN (4, 1)": [0, 3], "3 < i": [3]}
    for where, rows in taken.items():
        assert matching_positions(bind_predicate(parse_predicate(where), schema), table).tolist() == rows, where
    for where in ("s = 'a'", "i IS NULL", "NOT i = 3", "i <=> 3", "i NOT IN (3)", "i + 1 = 4", "i = 3.5"):
        assert matching_positions(bind_predicate(parse_predicate(where), schema), table) is None, where
    assert matching_positions(Not(Comparison("=", Column("i"), Literal(3))), table) is None


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(predicate=predicates())
def test_direct_binding_equals_general_binding(predicate):
    direct = binder._bind_point(predicate, SCHEMA)
    try:
        general = binder._bind_typed(predicate, SCHEMA, None)[0]
    except PredicateError:
        assert direct is None
        return
    if direct is not None:
        assert direct == general
        assert str(direct) == str(general)


@pytest.mark.parametrize("where", ["I = 5", "i = 5.0", "s = 5", "b = 300", "b <=> 5", "i = 5 AND s = 'x'"])
def test_direct_binding_leaves_other_conditions_to_the_general_binder(where):
    assert binder._bind_point(parse_predicate(where), SCHEMA) is None
    bind_predicate(parse_predicate(where), SCHEMA)  # still binds (or raises) the general way


def test_direct_binding_declines_names_differing_only_in_case():
    schema = pa.schema([("id", pa.int64()), ("ID", pa.int64())])
    assert binder._bind_point(parse_predicate("id = 1"), schema) is None
    with pytest.raises(PredicateError, match="ambiguous"):
        bind_predicate(parse_predicate("iD = 1"), schema)


def test_an_in_list_no_arrow_integer_type_holds_evaluates_exactly():
    """A negative constant and one above 2^63 in one IN list against an unsigned column (found
    by the property test above): the general evaluator used to raise OverflowError building the
    value set; it compares them as DECIMAL(38, 0) now, and only 48 matches."""
    schema = pa.schema([("u", pa.uint16()), ("b", pa.int8())])
    table = pa.table({"u": pa.array([3, 48, None, 65535], pa.uint16()), "b": pa.array([26, 1, 2, 3], pa.int8())},
                     schema=schema)
    for predicate in (In(Column("u"), (Literal(-159), Literal(48), Literal(1 << 64))),
                      Or(Comparison("<=>", Literal(26), Column("b")),
                         In(Column("u"), (Literal(-159), Literal(48), Literal(1 << 64))))):
        bound = bind_predicate(predicate, schema)
        expected = [1] if isinstance(predicate, In) else [0, 1]
        assert general_positions(bound, table).tolist() == expected
