"""UPDATE: rewrite the rows matching a predicate with new column values, copy-on-write.

``set`` maps column names to SQL expressions evaluated on the old row (``{"v": "v * 2"}``).
A row whose partition column changes moves to its new partition: files are re-partitioned
by the writer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import PredicateError, SchemaMismatchError
from ...expr import Column, Expr, Literal, bind, bind_predicate, evaluate, parse_expression, parse_predicate
from ...expr.bind import _resolve_path, find_field
from ..constraints import rules_for
from ..data import cast_value
from ..generated import with_update_assignments
from ..identity import check_no_update
from .rewrite import rewrite_files

if TYPE_CHECKING:
    from ..transaction import Transaction


@dataclass(frozen=True)
class FieldAssignments:
    """``SET st.a = …, st.b.c = …``: new values for fields inside one struct column (Delta's
    nested UPDATE). The struct is rebuilt with those fields replaced and the others kept; a NULL
    struct becomes one whose other fields are NULL, as in Delta."""

    fields: dict[tuple[str, ...], Any]


def _nested_target(schema: pa.Schema, col: str) -> tuple[pa.Field, tuple[str, ...]] | None:
    """(top-level struct column, field path) that ``col`` (``st.a.b``) names, or None."""
    if "." not in col:
        return None
    head, *rest = col.split(".")
    top = find_field(list(schema), head, "UPDATE SET")
    if top is None or not pa.types.is_struct(top.type):
        return None
    return top, _resolve_path(top, tuple(rest), col)


def bind_assignments(set_: dict[str, Any], schema: pa.Schema) -> dict[str, Any]:
    """Resolve target column names (exact match first, else a unique case-insensitive one) and
    parse their expressions. A value that is neither SQL text nor an Expr is a literal. A name
    like ``st.a`` that is no column sets a field of struct column ``st`` (FieldAssignments)."""
    out: dict[str, Any] = {}
    for col, sql in set_.items():
        if not isinstance(col, str):
            raise PredicateError(f"UPDATE column names must be strings, got {col!r}")
        field = find_field(list(schema), col, "UPDATE SET")  # ambiguous → PredicateError
        nested = _nested_target(schema, col) if field is None else None
        if field is None and nested is None:
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
        bound = bind(expr, schema)
        if nested is None:
            if field.name in out:
                raise PredicateError(f"UPDATE sets column {field.name!r} more than once")
            out[field.name] = bound
            continue
        top, path = nested
        current = out.setdefault(top.name, FieldAssignments({}))
        if not isinstance(current, FieldAssignments):
            raise PredicateError(f"UPDATE sets {col!r} and the whole column {top.name!r} at once")
        for other in current.fields:
            if other[:len(path)] == path or path[:len(other)] == other:
                raise PredicateError(f"UPDATE sets {col!r} and {top.name}.{'.'.join(other)}, which overlap")
        current.fields[path] = bound
    return out


def _with_fields(struct: pa.Array, type_: pa.StructType, values: dict[tuple[str, ...], pa.Array]) -> pa.Array:
    """``struct`` rebuilt with the fields at ``values``' paths replaced (cast to their types)."""
    children = []
    for i, child in enumerate(type_):
        here = {path[1:]: v for path, v in values.items() if path[0] == child.name}
        current = pc.struct_field(struct, [i])
        if () in here:
            try:
                current = cast_value(here[()], child.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaMismatchError(
                    f"UPDATE value for field {child.name!r} cannot be converted to {child.type}: {exc}") from None
        elif here:
            current = _with_fields(current, child.type, here)
        if isinstance(current, pa.ChunkedArray):
            current = current.combine_chunks()
        if not child.nullable and current.null_count:
            raise SchemaMismatchError(f"UPDATE would set NOT NULL field {child.name!r} to null")
        children.append(current)
    return pa.StructArray.from_arrays(children, fields=list(type_))


def apply_assignments(rows: pa.Table, matches: pa.ChunkedArray, assignments: dict[str, Any],
                      schema: pa.Schema) -> pa.Table:
    """New rows: assigned columns take their expression's value where ``matches``."""
    columns = []
    for field in schema:
        col = rows.column(field.name)
        expr = assignments.get(field.name)
        if isinstance(expr, FieldAssignments):
            values = {}
            for path, field_expr in expr.fields.items():
                value = evaluate(field_expr, rows)
                values[path] = pa.repeat(value, rows.num_rows) if isinstance(value, pa.Scalar) else value
            whole = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
            col = pc.if_else(matches, _with_fields(whole, field.type, values), col)
        elif expr is not None:
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


def _refuse_nested_generated_inputs(rules: Any, assignments: dict[str, Any]) -> None:
    """A generated column computed from a struct whose fields this UPDATE sets one by one would
    need its expression re-derived field by field: refused rather than left stale."""
    partial = {name for name, a in assignments.items() if isinstance(a, FieldAssignments)}
    for g in rules.generated if partial else ():
        read = {c.name for c in g.expr.walk() if isinstance(c, Column)} & partial
        if read:
            raise PredicateError(
                f"UPDATE sets fields of {sorted(read)[0]!r}, which generated column {g.column!r} reads; "
                f"set the whole struct column instead")


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
        _refuse_nested_generated_inputs(rules, assignments)
        assignments = with_update_assignments(rules, assignments, schema)

    def rewrite(rows: pa.Table, matches: pa.ChunkedArray) -> tuple[pa.Table, int]:
        n = pc.sum(pc.cast(matches, pa.int64())).as_py() or 0
        return apply_assignments(rows, matches, assignments, schema), n

    metrics = rewrite_files(tx, pred, rewrite)
    metrics["numUpdatedRows"] = metrics.pop("numAffectedRows")
    metrics["executionTimeMs"] = int((time.perf_counter() - started) * 1000)
    tx.note_operation("UPDATE", {"predicate": [str(pred)] if pred is not None else []}, metrics)
    return metrics
