"""Column defaults (writer feature ``allowColumnDefaults``): a value for a column the writer omits.

A column whose field metadata has ``CURRENT_DEFAULT`` (a SQL expression) gets that expression's
value in every written row that gives the column no value at all — an explicit NULL is a value
and is kept (PROTOCOL.md, "Default Columns"). Appends and overwrites that leave the column out of
their data, and MERGE inserts that do not assign it, fill it from here.

Defaults are constants: literals, casts, arithmetic and functions of constants, plus
``current_timestamp()`` / ``now()`` / ``current_date()``, taken once per write. An expression that
names a column, does not parse, or does not fit the column's type is refused with a typed error
when the table is created (:func:`validate_defaults`), so no write meets it later.
"""

from __future__ import annotations

import datetime as dt
import re
from functools import lru_cache

import orjson
import pyarrow as pa

from ..errors import DeltaTxError, SchemaMismatchError
from ..expr import Expr, Literal, evaluate, parse_expression
from ..txnlog.schema import child_fields, each_field, field_index, map_struct_fields

CURRENT_DEFAULT = "CURRENT_DEFAULT"
_KEY = CURRENT_DEFAULT.encode()
#: the clock functions a default may call (with or without parentheses, as SQL spells them)
_CLOCK = re.compile(r"\b(current_timestamp|now|current_date)\b(\s*\(\s*\))?", re.IGNORECASE)


def default_sql(field: pa.Field) -> str | None:
    """The field's ``CURRENT_DEFAULT`` expression, if it has one (O(1) without field metadata)."""
    raw = field.metadata.get(_KEY) if field.metadata else None
    if raw is None:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = raw.decode()
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def has_defaults(schema: pa.Schema) -> bool:
    return any(f.metadata and _KEY in f.metadata for f in schema)


def default_values(schema: pa.Schema) -> dict[str, pa.Scalar]:
    """The default of every top-level column that has one, evaluated now (once per write)."""
    if not has_defaults(schema):
        return {}
    now = dt.datetime.now(dt.timezone.utc)
    return {f.name: _evaluate(f, sql, now) for f in schema if (sql := default_sql(f)) is not None}


def default_keyword(sql: object, schema: pa.Schema, column: str) -> Expr | None:
    """``SET col = DEFAULT`` in UPDATE and MERGE (Spark's DEFAULT keyword): the column's default,
    evaluated now, or NULL when it has none. None when ``sql`` is not the bare keyword or names no
    top-level column (the caller reports that as it reports any other value)."""
    if not isinstance(sql, str) or sql.strip().upper() != "DEFAULT":
        return None
    index = field_index(list(schema), column)
    if index is None:
        return None
    field = schema.field(index)
    value = default_values(pa.schema([field])).get(field.name)
    return Literal(None if value is None else value.as_py(), field.type)


def validate_defaults(schema: pa.Schema) -> None:
    """Raise SchemaMismatchError for a default that names a column, does not parse, or does not
    fit; that sits on a nested field (Spark defines defaults for top-level columns only, and no
    write would ever fill one); or that sits on a generated or identity column, whose values come
    from elsewhere (Spark: GENERATED_COLUMN_WITH_DEFAULT_VALUE, IDENTITY_COLUMN_WITH_DEFAULT_VALUE)."""
    from .constraints import GENERATION_EXPRESSION
    from ..txnlog.identity import START as IDENTITY_START

    for f in schema:
        nested = _nested_default(f.type, f.name)
        if nested is not None:
            raise SchemaMismatchError(f"field {nested!r} has a DEFAULT; defaults are for top-level columns only")
        if default_sql(f) is None:
            continue
        meta = f.metadata or {}
        if GENERATION_EXPRESSION.encode() in meta or IDENTITY_START.encode() in meta:
            kind = "a generated" if GENERATION_EXPRESSION.encode() in meta else "an identity"
            raise SchemaMismatchError(
                f"column {f.name!r} is {kind} column and has a DEFAULT; its values come from its definition, so it "
                f"cannot have a default as well")
    default_values(schema)


def _nested_default(t: pa.DataType, prefix: str) -> str | None:
    """The dotted name of a field below ``t`` that carries a DEFAULT, if one does."""
    for f in child_fields(t):
        if f.metadata and _KEY in f.metadata:
            return f"{prefix}.{f.name}"
        found = _nested_default(f.type, f"{prefix}.{f.name}")
        if found is not None:
            return found
    return None


def _without_default(f: pa.Field) -> pa.Field:
    meta = f.metadata
    if not meta or _KEY not in meta:
        return f
    return f.with_metadata({k: v for k, v in meta.items() if k != _KEY} or None)


def without_new_defaults(merged: pa.Schema, before: pa.Schema) -> pa.Schema:
    """``merged`` (a schema evolved from ``before``) with no DEFAULT on a column ``before`` lacks,
    nor on any nested field: schema evolution adds columns, never their defaults."""
    if not has_defaults(merged) and not any(_nested_default(f.type, f.name) for f in merged):
        return merged
    nested = each_field(_without_default)
    fields = [f.with_type(map_struct_fields(f.type, nested)) for f in merged]
    return pa.schema([_without_default(f) if f.name not in before.names else f for f in fields],
                     metadata=merged.metadata)


@lru_cache(maxsize=256)
def _parsed(sql: str) -> Expr:
    return parse_expression(sql)


def _evaluate(field: pa.Field, sql: str, now: dt.datetime) -> pa.Scalar:
    def fail(why: str) -> SchemaMismatchError:
        return SchemaMismatchError(f"column {field.name!r} has DEFAULT {sql!r}, which {why}")

    if not sql.strip():
        raise fail("is empty")
    try:
        expr = _parsed(_with_clock(sql, now))
    except DeltaTxError as exc:
        raise fail(f"is not an expression deltatx can evaluate ({exc})") from None
    if expr.columns():
        raise fail(f"names column(s) {sorted(expr.columns())}; a default must be a constant")
    try:
        value = evaluate(expr, pa.table({"__one": [0]}))[0]
    except DeltaTxError as exc:
        raise fail(f"cannot be evaluated ({exc})") from None
    try:
        return value.cast(field.type) if not value.type.equals(field.type) else value
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise fail(f"gives {value.type} {value.as_py()!r}, which does not fit the column's type {field.type} ({exc})") from None


def _with_clock(sql: str, now: dt.datetime) -> str:
    """``sql`` with the clock functions outside string literals replaced by this write's time."""

    def literal(m: re.Match[str]) -> str:
        if m.group(1).lower() == "current_date":
            return f"DATE '{now.date().isoformat()}'"
        return f"TIMESTAMP '{now.strftime('%Y-%m-%d %H:%M:%S.%f')}+00:00'"

    parts = sql.split("'")  # even parts are outside quotes ('' inside a string splits evenly too)
    return "'".join(_CLOCK.sub(literal, p) if i % 2 == 0 else p for i, p in enumerate(parts))


def fill(field: pa.Field, defaults: dict[str, pa.Scalar], num_rows: int) -> pa.Array | None:
    """The column for ``field`` when the data lacks it: its default repeated, or None (no default)."""
    value = defaults.get(field.name)
    return None if value is None else pa.repeat(value, num_rows)
