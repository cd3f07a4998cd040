"""Helpers on expression trees: splitting, joining, renaming columns, partition filters.

Owns the structural operations the operations layer needs (conjunct lists for DELETE/MERGE
planning, alias handling for MERGE, Delta's "partition predicate" for conflict detection); they
only rebuild trees and never evaluate anything.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Iterable

import pyarrow as pa

from .model import FALSE, TRUE, And, Column, Expr, Literal, Or


def col(name: str, qualifier: str | None = None) -> Column:
    return Column(name, qualifier)


def lit(value: Any, type: pa.DataType | None = None) -> Literal:  # noqa: A002 - SQL word
    return Literal(value, type)


def conjuncts(expr: Expr) -> list[Expr]:
    """The AND-ed parts of ``expr`` (flattened; ``TRUE`` alone gives ``[]``)."""
    if isinstance(expr, And):
        return conjuncts(expr.left) + conjuncts(expr.right)
    if expr == TRUE:
        return []
    return [expr]


def disjuncts(expr: Expr) -> list[Expr]:
    if isinstance(expr, Or):
        return disjuncts(expr.left) + disjuncts(expr.right)
    return [expr]


def and_all(exprs: Iterable[Expr]) -> Expr:
    """AND of the given predicates, ``TRUE`` for none (``TRUE`` operands dropped)."""
    parts = [e for e in exprs if e != TRUE]
    if not parts:
        return TRUE
    out = parts[0]
    for e in parts[1:]:
        out = And(out, e)
    return out


def or_all(exprs: Iterable[Expr]) -> Expr:
    """OR of the given predicates, ``FALSE`` for none."""
    parts = list(exprs)
    if not parts:
        return FALSE
    out = parts[0]
    for e in parts[1:]:
        out = Or(out, e)
    return out


def map_columns(expr: Expr, fn: Callable[[Column], Expr]) -> Expr:
    """Replace every column reference by ``fn(column)``."""
    return expr.transform(lambda node: fn(node) if isinstance(node, Column) else node)


def strip_alias(expr: Expr, alias: str) -> Expr:
    """Drop the qualifier ``alias`` (case-insensitive): ``t.id`` -> ``id`` when alias is ``t``."""
    low = alias.lower()
    return map_columns(
        expr,
        lambda c: replace(c, qualifier=None) if c.qualifier and c.qualifier.lower() == low else c,
    )


def qualify(expr: Expr, alias: str) -> Expr:
    """Qualify every unqualified column with ``alias``: ``id`` -> ``t.id``."""
    return map_columns(expr, lambda c: c if c.qualifier else replace(c, qualifier=alias))


def qualifiers(expr: Expr) -> frozenset[str]:
    """The aliases that qualify columns in ``expr`` (``None`` not included)."""
    return frozenset(n.qualifier for n in expr.walk() if isinstance(n, Column) and n.qualifier)


def references_only(expr: Expr, names: Iterable[str]) -> bool:
    """Whether every column of ``expr`` is one of ``names`` (case-insensitive, unqualified)."""
    allowed = {n.lower() for n in names}
    return all(
        n.qualifier is None and n.name.lower() in allowed
        for n in expr.walk()
        if isinstance(n, Column)
    )


def partition_predicate(expr: Expr, partition_columns: Iterable[str]) -> Expr:
    """AND of the conjuncts of ``expr`` that reference only partition columns; ``TRUE`` if none.

    Delta's rule for what a transaction "read" of a partitioned table: data-column conjuncts
    widen to TRUE. A conjunct with no column at all (a constant) counts as a partition filter.
    """
    cols = list(partition_columns)
    return and_all(c for c in conjuncts(expr) if references_only(c, cols))

