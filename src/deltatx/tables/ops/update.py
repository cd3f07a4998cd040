"""UPDATE: rewrite the rows matching a predicate with new column values, copy-on-write.

``set`` maps column names to SQL expressions evaluated on the old row (``{"v": "v * 2"}``).
A row whose partition column changes moves to its new partition: files are re-partitioned
by the writer.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import PredicateError, SchemaMismatchError
from ...expr import Expr, Literal, bind, bind_predicate, evaluate, parse_expression, parse_predicate
from ...expr.bind import find_field
from ..constraints import rules_for
from ..data import cast_value
from ..generated import with_update_assignments
from ..identity import check_no_update
from .rewrite import rewrite_files

if TYPE_CHECKING:
    from ..transaction import Transaction


def bind_assignments(set_: dict[str, Any], schema: pa.Schema) -> dict[str, Any]:
    """Resolve target column names (exact match first, else a unique case-insensitive one) and
    parse their expressions. A value that is neither SQL text nor an Expr is a literal."""
    out = {}
    for col, sql in set_.items():
        if not isinstance(col, str):
            raise PredicateError(f"UPDATE column names must be strings, got {col!r}")
        field = find_field(list(schema), col, "UPDATE SET")  # ambiguous → PredicateError
        if field is None:
            raise PredicateError(f"UPDATE sets unknown column {col!r}; table columns: {schema.names}")
        if isinstance(sql, str):
            expr = parse_expression(sql)
        elif isinstance(sql, Expr):
            expr = sql
        else:
            try:
                expr = Literal(sql)
            except TypeError as exc:
                raise PredicateError(f"UPDATE value for column {col!r} is not SQL text, an Expr or a literal: "
                                     f"{sql!r} ({exc})") from None
        out[field.name] = bind(expr, schema)
    return out


def apply_assignments(rows: pa.Table, matches: pa.ChunkedArray, assignments: dict[str, Any],
                      schema: pa.Schema) -> pa.Table:
    """New rows: assigned columns take their expression's value where ``matches``."""
    columns = []
    for field in schema:
        col = rows.column(field.name)
        expr = assignments.get(field.name)
        if expr is not None:
            value = evaluate(expr, rows)
            if isinstance(value, pa.Scalar):
                value = pa.repeat(value, rows.num_rows)
            try:
                value = cast_value(value, field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaMismatchError(
                    f"UPDATE value for column {field.name!r} cannot be converted to {field.type}: {exc}"
                ) from None
            col = pc.if_else(matches, value, col)
            if not field.nullable and col.null_count:
                raise SchemaMismatchError(f"UPDATE would set NOT NULL column {field.name!r} to null")
        columns.append(col)
    out = pa.table(columns, schema=schema)
    for name in rows.column_names:  # carried-along columns (``_metadata.*``) stay as they are
        if name not in schema.names:
            out = out.append_column(rows.schema.field(name), rows.column(name))
    return out


def stage_update(tx: "Transaction", where: str | None, set_: dict[str, str]) -> dict[str, Any]:
    if not set_:
        raise ValueError("update() needs set={'column': 'sql expression', ...}")
    started = time.perf_counter()
    schema = tx.schema
    pred = bind_predicate(parse_predicate(where), schema) if where is not None else None
    assignments = bind_assignments(set_, schema)
    rules = rules_for(schema, tx.properties, tx.protocol)
    if rules is not None:  # identity values never change; generated columns follow their inputs
        check_no_update(rules.identity, set(assignments), "UPDATE")
        assignments = with_update_assignments(rules, assignments, schema)

    def rewrite(rows: pa.Table, matches: pa.ChunkedArray) -> tuple[pa.Table, int]:
        n = pc.sum(pc.cast(matches, pa.int64())).as_py() or 0
        return apply_assignments(rows, matches, assignments, schema), n

    metrics = rewrite_files(tx, pred, rewrite)
    metrics["numUpdatedRows"] = metrics.pop("numAffectedRows")
    metrics["executionTimeMs"] = int((time.perf_counter() - started) * 1000)
    tx.note_operation("UPDATE", {"predicate": [str(pred)] if pred is not None else []}, metrics)
    return metrics
