"""A hypothesis strategy shared by the tests of the integer point/range subset (pruning_few,
point_rows): AND / OR of comparisons and IN lists between integer columns and constants."""

from __future__ import annotations

from hypothesis import strategies as st

from deltatx.expr import And, Column, Comparison, In, Literal, Or

COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")


def integer_predicates(columns: list[str], values: st.SearchStrategy, ops: tuple[str, ...] = COMPARISONS,
                       negated_in: bool = False, depth: int = 0) -> st.SearchStrategy:
    """Predicates over ``columns`` with constants from ``values``; ``ops`` may add operators
    outside the subset (``<=>``) and ``negated_in`` NOT IN lists, which the code must decline."""

    @st.composite
    def build(draw, depth: int):
        if depth < 2 and draw(st.integers(0, 3)) == 0:
            left, right = draw(build(depth + 1)), draw(build(depth + 1))
            return And(left, right) if draw(st.booleans()) else Or(left, right)
        name = draw(st.sampled_from(columns))
        if draw(st.integers(0, 4)) == 0:
            items = tuple(Literal(draw(values)) for _ in range(draw(st.integers(1, 4))))
            return In(Column(name), items, negated=negated_in and draw(st.integers(0, 5)) == 0)
        op = draw(st.sampled_from(ops))
        if draw(st.booleans()):
            return Comparison(op, Column(name), Literal(draw(values)))
        return Comparison(op, Literal(draw(values)), Column(name))

    return build(depth)
