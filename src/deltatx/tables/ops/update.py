"""UPDATE: rewrite the rows matching a predicate with new column values, copy-on-write.

``set`` maps column names to SQL expressions evaluated on the old row (``{"v": "v * 2"}``).
A row whose partition column changes moves to its new partition: files are re-partitioned
by the writer.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import ArgumentTypeError, InvalidArgumentError, PredicateError, SchemaMismatchError
from ...expr import Expr, Literal, bind, bind_predicate, evaluate, parse_expression, parse_predicate
from ..constraints import rules_for
from ..data import assign_value
from ..defaults import default_keyword
from ..generated import with_update_assignments
from ..identity import check_no_update
from .dml_metrics import UPDATE_KEYS, with_delta_keys
from .rewrite import rewrite_files
from .scatter import scatter, scatter_index
from .struct_fields import FieldAssignments, assign, refuse_generated_inputs, with_fields

if TYPE_CHECKING:
    from ..transaction import Transaction


def require_assignments(set_: Any, where: str) -> dict[str, Any]:
    """``set=`` as given to UPDATE or a MERGE update clause: a non-empty mapping of column names
    to expressions (a list or None is a wrong type, an empty mapping a wrong value)."""
    if not isinstance(set_, Mapping):
        raise ArgumentTypeError(
            f"{where} needs set= as a mapping {{'column': 'sql expression'}}, got {type(set_).__name__}")
    if not set_:
        raise InvalidArgumentError(f"{where} needs set={{'column': 'sql expression', ...}}, got an empty mapping")
    return dict(set_)


def bind_assignments(set_: dict[str, Any], schema: pa.Schema) -> dict[str, Any]:
    """Resolve target column names (exact match first, else a unique case-insensitive one) and
    parse their expressions. A value that is neither SQL text nor an Expr is a literal. A name
    like ``st.a`` that is no column sets a field of struct column ``st`` (FieldAssignments)."""
    out: dict[str, Any] = {}
    for col, sql in set_.items():
        if not isinstance(col, str):
            raise PredicateError(f"UPDATE column names must be strings, got {col!r}")
        if isinstance(sql, str):
            expr = default_keyword(sql, schema, col) or parse_expression(sql)
        elif isinstance(sql, Expr):
            expr = sql
        else:
            try:
                expr = Literal(sql)
            except TypeError as exc:
                raise PredicateError(f"UPDATE value for column {col!r} is not SQL text, an Expr or a literal: "
                                     f"{sql!r} ({exc})") from None
        if not assign(out, schema, col, bind(expr, schema), "UPDATE"):
            raise PredicateError(f"UPDATE sets unknown column {col!r}; table columns: {schema.names}")
    return out


def apply_assignments(rows: pa.Table, matches: pa.ChunkedArray, assignments: dict[str, Any],
                      schema: pa.Schema) -> pa.Table:
    """New rows: assigned columns take their expression's value where ``matches``."""
    columns = []
    mask = pc.fill_null(matches, False)
    everything = pc.all(mask).as_py() is not False
    positions: np.ndarray | None = None
    matched: dict[str, pa.ChunkedArray] = {}  # the matched rows of each column a value reads

    def matched_rows(names: set[str]) -> pa.Table:
        if everything:
            return rows
        wanted = [n for n in rows.column_names if n in names]
        for n in wanted:
            if n not in matched:
                matched[n] = rows.column(n).filter(mask)
        count = int(pc.sum(mask).as_py() or 0)
        return pa.table({n: matched[n] for n in wanted}) if wanted else pa.table({"__rows": pa.nulls(count)})

    for field in schema:
        col = rows.column(field.name)
        expr = assignments.get(field.name)
        if isinstance(expr, FieldAssignments):
            # only the matched rows are rebuilt (and checked: a NULL struct elsewhere is no NULL field)
            mask = pc.fill_null(matches, False)
            matched_rows = rows.filter(mask)
            values = {}
            for path, field_expr in expr.fields.items():
                value = evaluate(field_expr, matched_rows)
                values[path] = pa.repeat(value, matched_rows.num_rows) if isinstance(value, pa.Scalar) else value
            column = col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col])
            rebuilt = with_fields(column.filter(mask).combine_chunks(), field.type, values, "UPDATE")
            positions = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
            col = scatter(column, [rebuilt], scatter_index(len(column), [(positions, rebuilt)], None))
        elif expr is not None and (fast := _on_every_row(expr, rows, mask, col, field)) is not None:
            col = fast
            if not field.nullable and col.null_count:
                raise SchemaMismatchError(f"UPDATE would set NOT NULL column {field.name!r} to null")
        elif expr is not None:
            # evaluated on the matched rows only, as Spark's If(condition, value, column): a value
            # that fails on a row the UPDATE does not touch ('x' cast to INT) fails nothing
            subject = matched_rows(expr.columns())
            value = evaluate(expr, subject)
            if isinstance(value, pa.Scalar):
                value = pa.repeat(value, subject.num_rows)
            try:
                value = assign_value(value, field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaMismatchError(
                    f"UPDATE value for column {field.name!r} cannot be converted to {field.type}: {exc}"
                ) from None
            if everything:
                col = value
            elif subject.num_rows:
                column = col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col])
                value = value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value
                if positions is None:
                    positions = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
                col = scatter(column, [value], scatter_index(len(column), [(positions, value)], None))
            if not field.nullable and col.null_count:
                raise SchemaMismatchError(f"UPDATE would set NOT NULL column {field.name!r} to null")
        columns.append(col)
    out = pa.table(columns, schema=schema)
    for name in rows.column_names:  # carried-along columns (``_metadata.*``) stay as they are
        if name not in schema.names:
            out = out.append_column(rows.schema.field(name), rows.column(name))
    return out


def _on_every_row(expr: Any, rows: pa.Table, mask: pa.ChunkedArray, col: Any, field: pa.Field) -> Any:
    """The column with ``expr``'s value where ``mask``, computed on every row at once (vectorized,
    no scatter); None when computing it fails on some row, which may be a row the UPDATE does not
    touch: the caller then computes the matched rows alone (and raises if one of them fails)."""
    try:
        value = evaluate(expr, rows)
        if isinstance(value, pa.Scalar):
            value = pa.repeat(value, rows.num_rows)
        value = assign_value(value, field.type)
    except (PredicateError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    return pc.if_else(mask, value, col)


def stage_update(tx: "Transaction", where: str | None, set_: dict[str, str]) -> dict[str, Any]:
    set_ = require_assignments(set_, "update()")
    started = time.perf_counter()
    schema = tx.schema
    pred = bind_predicate(parse_predicate(where), schema) if where is not None else None
    assignments = bind_assignments(set_, schema)
    rules = rules_for(schema, tx.properties, tx.protocol)
    if rules is not None:  # identity values never change; generated columns follow their inputs
        check_no_update(rules.identity, set(assignments), "UPDATE")
        refuse_generated_inputs(rules, assignments, "UPDATE")
        assignments = with_update_assignments(rules, assignments, schema)

    def rewrite(rows: pa.Table, matches: pa.ChunkedArray) -> tuple[pa.Table, int]:
        n = pc.sum(pc.cast(matches, pa.int64())).as_py() or 0
        return apply_assignments(rows, matches, assignments, schema), n

    metrics = rewrite_files(tx, pred, rewrite)
    metrics["numUpdatedRows"] = metrics.pop("numAffectedRows")
    with_delta_keys(metrics, UPDATE_KEYS)
    metrics["executionTimeMs"] = int((time.perf_counter() - started) * 1000)
    tx.note_operation("UPDATE", {"predicate": [str(pred)] if pred is not None else []}, metrics)
    return metrics
