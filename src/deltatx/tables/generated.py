"""Generated columns: defining them (``create_table(generated_columns=...)``) and keeping them
right when UPDATE and MERGE change the columns they are computed from.

Appends and overwrites compute a generated column the data leaves out, and check a given one,
in the write pass (``tables/constraints.py``). UPDATE and MERGE rewrite rows: a generated column
must follow its inputs' *new* values. Rather than a second pass, the statement is widened the
way Delta does it: for each generated column the statement does not set itself but whose inputs
it sets, an assignment ``column = expression`` is added in which every input is replaced by the
value the statement gives it (``year(ts)`` with ``SET ts = s.ts`` becomes ``year(s.ts)``). An
INSERT clause that leaves an input out gives it NULL; an UPDATE keeps the target's value. The
write pass then checks ``(column <=> expression)`` on every row it stores, so an explicit wrong
value is still refused.
"""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa

from ..errors import InvalidConstraintError, PredicateError
from ..expr import Case, Cast, Column, Expr, Func, IsNull, Literal, bind, map_columns, parse_expression, result_type
from ..txnlog.clustering import resolve_field
from ..txnlog.schema import is_variant_storage, type_holds
from .constraints import GENERATION_EXPRESSION, WriteRules


def with_generated_columns(schema: pa.Schema, generated: dict[str, str] | None) -> pa.Schema:
    """``schema`` with ``delta.generationExpression`` on each column of ``generated``.

    Checked now, not at the first write: the column exists, the expression parses, reads only
    non-generated columns of the table (Delta's rule: no chains, no self-reference) and gives a
    value that converts to the column's type.
    """
    if not generated:
        return schema
    if not isinstance(generated, dict):
        raise InvalidConstraintError("generated_columns must map column names to SQL expressions")
    fields = list(schema)
    for name, sql in generated.items():
        if name not in schema.names:
            raise InvalidConstraintError(f"generated column {name!r} is not in the schema {schema.names}")
        if not isinstance(sql, str) or not sql.strip():
            raise InvalidConstraintError(f"generated column {name!r} needs a SQL expression, got {sql!r}")
        try:
            expr = bind(parse_expression(sql), schema)
            value_type = result_type(expr, schema)
        except PredicateError as exc:
            raise InvalidConstraintError(f"generated column {name!r}: {exc}") from None
        inputs = {c.split(".")[0] for c in expr.columns()}
        chained = sorted(c for c in inputs if c in generated)
        if chained:
            raise InvalidConstraintError(
                f"generated column {name!r} ({sql}) reads generated column(s) {chained}; a generation "
                f"expression may only read ordinary columns"
            )
        if not inputs:
            raise InvalidConstraintError(f"generated column {name!r} ({sql}) reads no column; use a default instead")
        target = schema.field(name).type
        if type_holds(target, is_variant_storage):
            raise InvalidConstraintError(
                f"generated column {name!r} is of the variant type, which PROTOCOL.md does not allow as the "
                f"result of a generation expression")
        if not _widens_to(value_type, target):
            raise InvalidConstraintError(
                f"generated column {name!r} is {target} but {sql} gives {value_type}; cast the "
                f"expression to the column's type (CAST(... AS ...))"
            )
        meta = dict(schema.field(name).metadata or {})
        meta[GENERATION_EXPRESSION.encode()] = orjson.dumps(sql)
        fields[schema.get_field_index(name)] = schema.field(name).with_metadata(meta)
    return pa.schema(fields, metadata=schema.metadata)


def _widens_to(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether every value of ``source`` converts to ``target`` without loss (Spark's up-cast:
    the only implicit conversion a generation expression gets)."""
    if source.equals(target) or pa.types.is_null(source):
        return True
    if pa.types.is_integer(source) and pa.types.is_integer(target):
        return target.bit_width >= source.bit_width
    if pa.types.is_integer(source) and (pa.types.is_floating(target) or pa.types.is_decimal(target)):
        return True
    if pa.types.is_floating(source) and pa.types.is_floating(target):
        return target.bit_width >= source.bit_width
    if pa.types.is_date(source) and pa.types.is_timestamp(target):
        return True
    return False


def _substituted(expr: Expr, values: dict[str, Expr], keep: Any, types: dict[str, pa.DataType]) -> Expr:
    """``expr`` with each input column replaced by the statement's value for it (``values``), or
    by ``keep(column)`` when the statement leaves it alone."""

    def swap(c: Column) -> Expr:
        value = values.get(c.name) if c.qualifier is None else None
        if value is None:
            return keep(c)
        if not c.path:
            return Cast(value, types[c.name]) if isinstance(value, Expr) else keep(c)
        return _field_of(value, c, _field_type(types[c.name], c.path)) or keep(c)

    return map_columns(expr, swap)


def _field_type(t: pa.DataType, path: tuple[str, ...]) -> pa.DataType | None:
    """The type of the struct field at ``path`` inside ``t`` (None: no such field)."""
    found = resolve_field(list(t), path) if pa.types.is_struct(t) else None
    return found[1].type if found is not None else None


def _field_of(value: Any, read: Column, field_type: pa.DataType) -> Expr | None:
    """What a generation expression's read of struct field ``read`` (``st.a``) becomes when the
    statement assigns ``value`` to the struct: the same field of a struct-valued column
    (``s.st`` -> ``s.st.a``), or the value a ``SET st.a = …`` gives it. None: the statement leaves
    that field as it was (the caller keeps it)."""
    if isinstance(value, Column):
        return Cast(Column(value.name, value.qualifier, value.path + read.path), field_type)
    if isinstance(value, Literal) and value.value is None:
        return Literal(None, field_type)
    if isinstance(value, Case) or isinstance(value, Func) and value.name == "if" and len(value.args) == 3:
        # the field of a choice between structs is the choice between their fields
        whens = value.whens if isinstance(value, Case) else ((value.args[0], value.args[1]),)
        default = value.default if isinstance(value, Case) else value.args[2]
        return Case(tuple((cond, _field_of(v, read, field_type)) for cond, v in whens),
                    Literal(None, field_type) if default is None else _field_of(default, read, field_type))
    if isinstance(value, Func) and value.name == "coalesce":  # the first struct that is not NULL
        return Case(tuple((IsNull(arg, negated=True), _field_of(arg, read, field_type)) for arg in value.args),
                    Literal(None, field_type))
    fields = getattr(value, "fields", None)  # SET st.a = … (ops.struct_fields.FieldAssignments)
    if fields is None:
        # Never keep the old field: the stored generated value would no longer follow its input
        raise PredicateError(
            f"a generated column reads {read}, and the statement sets {read.name!r} to {value}, "
            f"whose field deltatx cannot derive; set {read.name!r} from a struct column, a CASE/if of "
            f"them, or field by field")
    wanted = tuple(p.lower() for p in read.path)
    for path, assigned in fields.items():
        key = tuple(p.lower() for p in path)
        if key == wanted:
            return Cast(assigned, field_type)
        if wanted[:len(key)] == key and isinstance(assigned, Column):  # reads inside a struct field set whole
            return Cast(Column(assigned.name, assigned.qualifier, assigned.path + read.path[len(key):]), field_type)
        if wanted[:len(key)] == key or key[:len(wanted)] == wanted:
            # it reads a struct some of whose fields change, or inside a field set from an expression
            raise PredicateError(
                f"a generated column reads {read}, which the statement changes in part "
                f"({read.name}.{'.'.join(path)}); set {read.name!r} whole instead")
    return None


def with_update_assignments(rules: WriteRules | None, assignments: dict[str, Expr], schema: pa.Schema,
                            *, keep_alias: str | None = None, insert: bool = False,
                            assigned_later: frozenset[str] = frozenset()) -> dict[str, Expr]:
    """``assignments`` plus one for each generated column whose inputs they change.

    ``keep_alias``: how an input the statement leaves alone is read (``t`` in a MERGE, None in
    UPDATE); ``insert``: an INSERT clause, where an input left out is NULL and every generated
    column it does not set gets computed. ``assigned_later``: columns the writer fills only after
    the statement's values (identity columns an INSERT leaves out); a generated column reading
    one gets no assignment here — no expression over the statement gives its value — and is
    computed from the row once they are filled, as an append computes it.
    """
    if rules is None or not rules.generated:
        return assignments
    types = {f.name: f.type for f in schema}
    out = dict(assignments)
    for g in rules.generated:
        if g.column in assignments:
            continue
        inputs = {c.name for c in g.expr.walk() if isinstance(c, Column)}
        if not insert and not inputs & set(assignments):
            continue  # nothing it reads changes: the stored value stays right
        if inputs & assigned_later:
            continue  # computed by the writer once those inputs hold their values

        def keep(c: Column) -> Expr:
            if insert:
                return Literal(None, _field_type(types[c.name], c.path) if c.name in types else None)
            return Column(c.name, keep_alias, c.path) if keep_alias else c

        out[g.column] = _substituted(g.expr, assignments, keep, types)
    return out
