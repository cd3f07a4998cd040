"""Binding is idempotent, and a bound expression handed back with its schema costs nothing."""

from __future__ import annotations

import importlib

import pyarrow as pa
import pytest

from deltatx.errors import PredicateError
from deltatx.expr import bind, bind_predicate, parse_predicate
from deltatx.expr.bind import is_bound

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def test_a_bound_predicate_bound_again_is_the_same_object():
    bound = bind_predicate(parse_predicate("id = 5 AND name = 'x'"), SCHEMA)
    assert is_bound(bound, SCHEMA)
    assert bind_predicate(bound, SCHEMA) is bound
    assert bind(bound, SCHEMA) is bound
    # an equal schema built anew counts as the same schema
    assert bind_predicate(bound, pa.schema(list(SCHEMA))) is bound


def test_another_schema_binds_again_and_still_checks():
    bound = bind_predicate(parse_predicate("id = 5"), SCHEMA)
    wider = pa.schema([("id", pa.int32()), ("name", pa.string())])
    rebound = bind_predicate(bound, wider)
    assert rebound == bind_predicate(parse_predicate("id = 5"), wider)
    with pytest.raises(PredicateError):
        bind_predicate(bound, pa.schema([("other", pa.int64())]))


def test_an_expression_bound_as_a_value_is_still_checked_as_a_condition():
    value = bind(parse_predicate("id + 1"), SCHEMA)
    assert bind(value, SCHEMA) is value
    with pytest.raises(PredicateError, match="not a condition"):
        bind_predicate(value, SCHEMA)


def test_unbound_expressions_are_never_taken_for_bound_ones():
    parsed = parse_predicate("id = 5")
    assert not is_bound(parsed, SCHEMA)
    assert bind_predicate(parsed, SCHEMA) is not parsed


# --------------------------------------------------------------------------------------------
# ``column op literal`` is typed from its operand types, remembered (bind.py::_Binder._shape_type)

_TYPED = pa.schema([
    ("i8", pa.int8()), ("u8", pa.uint8()), ("i32", pa.int32()), ("i64", pa.int64()), ("f", pa.float64()),
    ("s", pa.string()), ("b", pa.binary()), ("d", pa.date32()), ("t", pa.timestamp("us", tz="UTC")),
    ("flag", pa.bool_()), ("dec", pa.decimal128(10, 2)), ("st", pa.struct([("x", pa.int64())])),
])
_LITERALS = ["0", "127", "128", "-1", "300", "5000000000", "2.5", "1e3", "'x'", "'2024-01-01'", "true", "NULL",
             "DATE '2024-01-01'", "X'00'"]


def _outcome(sql: str):
    try:
        return "bound", bind_predicate(parse_predicate(sql), _TYPED)
    except PredicateError as exc:
        return "error", str(exc)


@pytest.mark.parametrize("column", _TYPED.names + ["st.x"])
def test_shape_typing_binds_exactly_as_evaluating_on_the_empty_table(column, monkeypatch):
    bind_module = importlib.import_module("deltatx.expr.bind")

    statements = [f"{column} {op} {lit}" for op in ("=", "<", ">=", "!=") for lit in _LITERALS]
    with_shapes = [_outcome(sql) for sql in statements]
    with_shapes_again = [_outcome(sql) for sql in statements]  # now served from the memo
    monkeypatch.setattr(bind_module._Binder, "_shape_type", lambda self, e: None)
    monkeypatch.setattr(bind_module, "_RECENTLY_BOUND", type(bind_module._RECENTLY_BOUND)())
    evaluated = [_outcome(sql) for sql in statements]
    assert with_shapes == evaluated
    assert with_shapes_again == evaluated


def test_a_comparison_that_does_not_type_fails_every_time():
    bind_module = importlib.import_module("deltatx.expr.bind")

    for _ in range(2):
        with pytest.raises(PredicateError):
            bind_predicate(parse_predicate("b < 5"), _TYPED)
    assert ("<", pa.binary(), pa.int64()) not in bind_module._COMPARISON_TYPES


@pytest.mark.parametrize("value,target,kept", [
    (127, pa.int8(), True), (128, pa.int8(), False), (-128, pa.int8(), True), (-129, pa.int8(), False),
    (-1, pa.uint8(), False), (255, pa.uint8(), True), (2**31 - 1, pa.int32(), True), (2**31, pa.int32(), False),
    (2**63 - 1, pa.int64(), True), (0, pa.uint64(), True),
])
def test_an_integer_converts_to_an_integer_type_only_when_it_fits(value, target, kept):
    from deltatx.expr.model import Literal
    from deltatx.expr.values import convert_literal

    converted = convert_literal(Literal(value), target)
    assert converted.value == value
    assert (converted.arrow_type == target) is kept
