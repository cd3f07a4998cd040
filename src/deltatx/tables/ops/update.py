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
from ...expr import bind, evaluate, parse_expression, parse_predicate
from .rewrite import rewrite_files

if TYPE_CHECKING:
    from ..transaction import Transaction


def bind_assignments(set_: dict[str, str], schema: pa.Schema) -> dict[str, Any]:
    """Resolve target column names (case-insensitively) and parse their expressions."""
    lower = {n.lower(): n for n in schema.names}
    out = {}
    for col, sql in set_.items():
        name = lower.get(col.lower())
        if name is None:
            raise PredicateError(f"UPDATE sets unknown column {col!r}; table columns: {schema.names}")
        out[name] = bind(parse_expression(sql) if isinstance(sql, str) else sql, schema)
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
                value = pc.cast(value, field.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaMismatchError(
                    f"UPDATE value for column {field.name!r} cannot be converted to {field.type}: {exc}"
                ) from None
            col = pc.if_else(matches, value, col)
            if not field.nullable and col.null_count:
                raise SchemaMismatchError(f"UPDATE would set NOT NULL column {field.name!r} to null")
        columns.append(col)
    return pa.table(columns, schema=schema)


def stage_update(tx: "Transaction", where: str | None, set_: dict[str, str]) -> dict[str, Any]:
    if not set_:
        raise ValueError("update() needs set={'column': 'sql expression', ...}")
    started = time.perf_counter()
    schema = tx.schema
    pred = bind(parse_predicate(where), schema) if where is not None else None
    assignments = bind_assignments(set_, schema)

    def rewrite(rows: pa.Table, matches: pa.ChunkedArray) -> tuple[pa.Table, int]:
        n = pc.sum(pc.cast(matches, pa.int64())).as_py() or 0
        return apply_assignments(rows, matches, assignments, schema), n

    metrics = rewrite_files(tx, pred, rewrite)
    metrics["numUpdatedRows"] = metrics.pop("numAffectedRows")
    metrics["executionTimeMs"] = int((time.perf_counter() - started) * 1000)
    tx.note_operation("UPDATE", {"predicate": [str(pred)] if pred is not None else []}, metrics)
    return metrics
