"""Binding is idempotent, and a bound expression handed back with its schema costs nothing."""

from __future__ import annotations

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
