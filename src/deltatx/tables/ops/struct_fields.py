"""Assignments to fields inside struct columns: ``SET st.a = …`` in UPDATE and MERGE UPDATE.

Delta resolves ``st.a`` (case-insensitively, like column names) to a field of struct column
``st`` and rebuilds the struct with that field replaced and every other one kept; a NULL struct
becomes one whose other fields are NULL. Several fields of one struct may be set in one
statement, but not a field together with the whole column or with a field that contains it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import PredicateError, SchemaMismatchError
from ...expr import Column
from ...expr.bind import _resolve_path, find_field
from ...txnlog.stats import split_column_name
from ..data import assign_value


@dataclass(frozen=True)
class FieldAssignments:
    """New values (bound expressions) for fields of one struct column, by field path."""

    fields: dict[tuple[str, ...], Any]

    def columns(self) -> set[str]:
        """The columns the expressions read (as ``Expr.columns`` does)."""
        return {ref for e in self.fields.values() for ref in e.columns()}


def nested_target(schema: pa.Schema, name: str, where: str) -> tuple[pa.Field, tuple[str, ...]] | None:
    """(top-level struct column, field path) that ``name`` (``st.a.b``) names, or None."""
    if "." not in name and "`" not in name:
        return None
    head, *rest = split_column_name(name)  # backticks quote a field name holding a dot
    if not rest:
        return None
    top = find_field(list(schema), head, where)
    if top is None or not pa.types.is_struct(top.type):
        return None
    return top, _resolve_path(top, tuple(rest), name)


def top_level_field(schema: pa.Schema, name: str, where: str) -> pa.Field | None:
    """The top-level column ``name`` names: as written (a column named ``a`b``), else in
    backquotes (```my col```, ```a.b```: a column named a.b). Ambiguous → PredicateError."""
    field = find_field(list(schema), name, where)
    if field is None and "`" in name and len(parts := split_column_name(name)) == 1:
        field = find_field(list(schema), parts[0], where)
    return field


def assign(out: dict[str, Any], schema: pa.Schema, name: str, bound: Any, where: str) -> bool:
    """Add ``name = bound`` to ``out`` (a top-level column, or a struct field). False when
    ``name`` names neither; PredicateError when it collides with another assignment."""
    field = top_level_field(schema, name, where)
    if field is not None:
        if field.name in out:
            raise PredicateError(f"{where} sets column {field.name!r} more than once, or with one of its fields")
        out[field.name] = bound
        return True
    nested = nested_target(schema, name, where)
    if nested is None:
        return False
    top, path = nested
    current = out.setdefault(top.name, FieldAssignments({}))
    if not isinstance(current, FieldAssignments):
        raise PredicateError(f"{where} sets {name!r} and the whole column {top.name!r} at once")
    for other in current.fields:
        if other[:len(path)] == path or path[:len(other)] == other:
            raise PredicateError(f"{where} sets {name!r} and {top.name}.{'.'.join(other)}, which overlap")
    current.fields[path] = bound
    return True


def with_fields(struct: pa.Array, type_: pa.StructType, values: dict[tuple[str, ...], pa.Array],
                where: str) -> pa.StructArray:
    """``struct`` rebuilt with the fields at ``values``' paths replaced (cast to their types)."""
    children = []
    for i, child in enumerate(type_):
        here = {path[1:]: v for path, v in values.items() if path[0] == child.name}
        current = pc.struct_field(struct, [i])
        if () in here:
            try:
                current = assign_value(here[()], child.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaMismatchError(
                    f"{where} value for field {child.name!r} cannot be converted to {child.type}: {exc}") from None
        elif here:
            current = with_fields(current, child.type, here, where)
        if isinstance(current, pa.ChunkedArray):
            current = current.combine_chunks()
        if not child.nullable and current.null_count:
            raise SchemaMismatchError(f"{where} would set NOT NULL field {child.name!r} to null")
        children.append(current)
    return pa.StructArray.from_arrays(children, fields=list(type_))


def refuse_generated_inputs(rules: Any, assignments: dict[str, Any], where: str) -> None:
    """A generated column that reads a whole struct whose fields are set one by one would need
    the struct rebuilt in its expression: refused rather than left stale. (One that reads
    fields follows them: tables/generated.py.)"""
    partial = {name for name, a in assignments.items() if isinstance(a, FieldAssignments)}
    for g in (rules.generated if rules is not None and partial else ()):
        read = {c.name for c in g.expr.walk() if isinstance(c, Column) and not c.path} & partial
        if read:
            raise PredicateError(
                f"{where} sets fields of {sorted(read)[0]!r}, which generated column {g.column!r} reads; "
                f"set the whole struct column instead")
