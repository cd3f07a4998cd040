"""What a table demands of every row written: CHECK constraints, column invariants, generated
columns (PROTOCOL.md "Column Invariants", "CHECK Constraints", "Generated Columns").

- a CHECK constraint is ``delta.constraints.<name> = <SQL>`` in the configuration;
- an invariant is ``delta.invariants = {"expression": {"expression": "<SQL>"}}`` in a field's
  metadata (legacy, still honoured);
- a generated column has ``delta.generationExpression = <SQL>`` in its field metadata: a writer
  computes it when the data leaves it out, and otherwise requires
  ``(value <=> expression) IS TRUE``.

A row violates a constraint or invariant when its expression is FALSE *or NULL* (Delta's rule,
stricter than SQL's CHECK). :func:`rules_for` turns a schema + configuration into one cached,
bound :class:`WriteRules` (or None: a table without rules pays a scan of its property keys per
write — its schema's field metadata is looked at once per schema object — and nothing per row),
and :meth:`WriteRules.apply` enforces it on a batch:
one vectorized evaluation per rule, all rules AND-ed, and only when that fails a second look to
say which rule, how many rows and one example. Identity columns (``tables/identity.py``) ride
along: their values are filled in by the same pass when the data leaves them out.

Every write path funnels through ``ops/rewrite.write_files``, which calls :func:`enforce`; so a
violation raises :class:`ConstraintViolationError` before the writer finishes, the writer deletes
the files it already wrote, and nothing is committed.
"""

from __future__ import annotations

import re
import threading
import weakref
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Iterable, Iterator, Mapping

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import (
    ConstraintViolationError,
    IdentityColumnError,
    InvalidConstraintError,
    InvalidTableError,
    PredicateError,
    SchemaMismatchError,
)
from ..expr import Cast, Column, Comparison, Expr, bind, bind_predicate, evaluate, parse_expression, parse_predicate
from ..txnlog.actions import Protocol
from ..txnlog.features import writer_features
from ..txnlog.identity import PREFIX as IDENTITY_PREFIX
from ..txnlog.identity import IdentitySpec, spec_from_metadata

CONSTRAINT_PREFIX = "delta.constraints."
INVARIANTS = "delta.invariants"
GENERATION_EXPRESSION = "delta.generationExpression"

#: fills an identity column: (spec, number of rows) -> the values
Assign = Callable[[IdentitySpec, int], pa.Array]


@dataclass(frozen=True)
class RowCheck:
    """One condition every written row must satisfy (TRUE; FALSE and NULL violate)."""

    kind: str  # "CHECK constraint", "invariant", "generated column"
    name: str
    sql: str
    expr: Expr  # bound to the table schema, boolean


@dataclass(frozen=True)
class GeneratedColumn:
    column: str
    sql: str
    expr: Expr  # bound value expression over the table schema
    field: pa.Field

    @cached_property
    def check(self) -> RowCheck:
        """``(column <=> expression) IS TRUE``: a given value must be the generated one."""
        return RowCheck("generated column", self.column, f"{self.column} <=> ({self.sql})",
                        Comparison("<=>", Column(self.column), Cast(self.expr, self.field.type)))


# --------------------------------------------------------------------------------------------
# Reading the rules from a table's schema and configuration
# --------------------------------------------------------------------------------------------


def constraint_key(name: str) -> str:
    """The configuration key of a CHECK constraint (Delta stores names lower-cased)."""
    return CONSTRAINT_PREFIX + name.lower()


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def validate_constraint_name(name: Any) -> str:
    """A constraint name as Delta keeps it: an identifier, lower-cased."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidConstraintError(
            f"constraint name {name!r} is not valid: use letters, digits and underscores, not starting with a digit"
        )
    return name.lower()


def check_constraints(configuration: Mapping[str, str]) -> dict[str, str]:
    """name -> SQL of every CHECK constraint of a configuration."""
    return {k[len(CONSTRAINT_PREFIX):]: v for k, v in configuration.items() if k.startswith(CONSTRAINT_PREFIX)}


def _decoded(raw: bytes | str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode() if isinstance(raw, bytes) else raw


def _invariant_sql(column: str, raw: Any) -> str:
    """``{"expression": {"expression": "x > 3"}}`` (itself usually a JSON string) -> ``x > 3``."""
    doc = _decoded(raw) if isinstance(raw, (bytes, str)) else raw
    if isinstance(doc, str):
        doc = _decoded(doc)
    try:
        sql = doc["expression"]["expression"]
    except (TypeError, KeyError):
        sql = None
    if not isinstance(sql, str):
        raise InvalidTableError(f"column {column!r} has a malformed {INVARIANTS} value {raw!r}: PROTOCOL.md's form "
                                f"is the text '{{\"expression\": {{\"expression\": \"<SQL>\"}}}}' (for new "
                                f"tables, prefer a CHECK constraint: add_constraint)")
    return sql


def _walk(fields: Iterable[pa.Field], prefix: str = "") -> Iterator[tuple[str, pa.Field]]:
    for f in fields:
        yield prefix + f.name, f
        if pa.types.is_struct(f.type):
            yield from _walk((f.type.field(i) for i in range(f.type.num_fields)), f"{prefix}{f.name}.")


def _column_rules(schema: pa.Schema) -> tuple[tuple[str, str, bytes], ...]:
    """(column path, key, raw value) of every rule-bearing field-metadata entry; identity
    high-water marks excluded (they move on every insert and change no rule)."""
    out = []
    for path, f in _walk(schema):
        if not f.metadata:
            continue
        for key, value in f.metadata.items():
            k = key.decode() if isinstance(key, bytes) else key
            if k == INVARIANTS or (k == GENERATION_EXPRESSION and "." not in path) or \
                    (k.startswith(IDENTITY_PREFIX) and k != "delta.identity.highWaterMark" and "." not in path):
                out.append((path, k, value if isinstance(value, bytes) else str(value).encode()))
    return tuple(out)


class _PerSchema:
    """What one schema *object* yields, cached by identity: a table's schema is parsed once per
    snapshot and reused by every write, and hashing or walking an Arrow schema costs more
    (~15 µs) than a plain append can spare on every call."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref, tuple, dict]] = {}
        self._lock = threading.Lock()

    def get(self, schema: pa.Schema) -> tuple[tuple, dict]:
        key = id(schema)
        hit = self._entries.get(key)
        if hit is not None and hit[0]() is schema:
            return hit[1], hit[2]

        def forget(ref: weakref.ref, key: int = key) -> None:
            with self._lock:
                if self._entries.get(key, (None,))[0] is ref:
                    del self._entries[key]

        entry = (weakref.ref(schema, forget), _column_rules(schema), {})
        with self._lock:
            self._entries[key] = entry
        return entry[1], entry[2]


_PER_SCHEMA = _PerSchema()


def rules_signature(schema: pa.Schema, configuration: Mapping[str, str]) -> tuple:
    """What the rules of a table version are made of (identity high-water marks excluded): a
    distributed write compares the one its tasks enforced with the one it commits against."""
    return tuple(sorted(check_constraints(configuration).items())), _PER_SCHEMA.get(schema)[0]


def rules_for(schema: pa.Schema, configuration: Mapping[str, str], protocol: Protocol | None = None) -> "WriteRules | None":
    """The rules rows written to this table must follow; None when there are none.

    A rule binds only when the protocol supports its feature (a ``delta.generationExpression``
    on a writer-3 table is just metadata). ``protocol`` None: every rule binds.
    """
    constraints = tuple(sorted(check_constraints(configuration).items()))
    columns, built = _PER_SCHEMA.get(schema)
    if not constraints and not columns:
        return None
    features = frozenset(writer_features(protocol)) if protocol is not None else None
    key = (constraints, features)
    rules = built.get(key)
    if rules is None:
        rules = built[key] = _build(schema, constraints, columns, features)
    return None if rules.empty else rules


def _build(schema: pa.Schema, constraints: tuple[tuple[str, str], ...], columns: tuple[tuple[str, str, bytes], ...],
           features: frozenset[str] | None) -> "WriteRules":
    def on(feature: str) -> bool:
        return features is None or feature in features

    checks: list[RowCheck] = []
    if on("checkConstraints"):
        for name, sql in constraints:
            checks.append(RowCheck("CHECK constraint", name, sql, bound_condition(sql, schema, f"CHECK constraint {name!r}")))
    generated: list[GeneratedColumn] = []
    identity_meta: dict[str, dict[str, Any]] = {}
    for path, key, raw in columns:
        if key == INVARIANTS and on("invariants"):
            sql = _invariant_sql(path, raw)
            checks.append(RowCheck("invariant", path, sql, bound_condition(sql, schema, f"invariant of column {path!r}")))
        elif key == GENERATION_EXPRESSION and on("generatedColumns"):
            sql = _decoded(raw)
            if not isinstance(sql, str):
                raise InvalidTableError(f"column {path!r} has a malformed {GENERATION_EXPRESSION} value {raw!r}")
            generated.append(GeneratedColumn(path, sql, _bound_value(sql, schema, path), schema.field(path)))
        elif key.startswith(IDENTITY_PREFIX) and on("identityColumns"):
            identity_meta.setdefault(path, {})[key] = _decoded(raw)
    identity = tuple(s for s in (spec_from_metadata(c, m) for c, m in identity_meta.items()) if s is not None)
    return WriteRules(tuple(checks), tuple(generated), identity)


def bound_condition(sql: str, schema: pa.Schema, what: str) -> Expr:
    try:
        return bind_predicate(parse_predicate(sql), schema)
    except PredicateError as exc:
        raise InvalidConstraintError(f"{what} ({sql}) cannot be evaluated: {exc}") from None


def _bound_value(sql: str, schema: pa.Schema, column: str) -> Expr:
    try:
        return bind(parse_expression(sql), schema)
    except PredicateError as exc:
        raise InvalidConstraintError(
            f"the generation expression of column {column!r} ({sql}) cannot be evaluated by deltatx: {exc}"
        ) from None


# --------------------------------------------------------------------------------------------
# Enforcement
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WriteRules:
    """The bound rules of one table version (cached; immutable)."""

    checks: tuple[RowCheck, ...]
    generated: tuple[GeneratedColumn, ...]
    identity: tuple[IdentitySpec, ...]

    @property
    def empty(self) -> bool:
        return not (self.checks or self.generated or self.identity)

    @cached_property
    def computable(self) -> frozenset[str]:
        """Columns a write may leave out: the writer computes (generated) or assigns (identity) them."""
        return frozenset(g.column for g in self.generated) | frozenset(s.column for s in self.identity)

    def absent_from(self, names: Iterable[str]) -> frozenset[str]:
        """The computable columns missing from data with these column names."""
        given = set(names)
        return frozenset(c for c in self.computable if c not in given)

    def identity_of(self, column: str) -> IdentitySpec | None:
        return next((s for s in self.identity if s.column == column), None)

    def _checks(self, absent: frozenset[str]) -> tuple[RowCheck, ...]:
        return self.checks + tuple(g.check for g in self.generated if g.column not in absent)

    def apply(self, table: pa.Table, schema: pa.Schema, absent: frozenset[str] = frozenset(),
              assign: Assign | None = None) -> pa.Table:
        """``table`` (conformed to ``schema``, absent columns as placeholders) with identity and
        generated columns filled in, after checking every rule. Raises on the first violation."""
        n = table.num_rows
        for spec in self.identity:
            if spec.column in absent:
                if assign is None:
                    raise IdentityColumnError(
                        f"this write cannot assign values to identity column {spec.column!r}; give them "
                        f"explicitly or write through deltatx.Table / Transaction")
                table = _set(table, schema.field(spec.column), assign(spec, n))
        for g in self.generated:
            if g.column in absent:
                table = _set(table, g.field, generated_values(g, table))
        check_rows(table, self._checks(absent))
        return table


def _set(table: pa.Table, field: pa.Field, values: pa.Array | pa.ChunkedArray) -> pa.Table:
    return table.set_column(table.schema.get_field_index(field.name), field, values)


def generated_values(g: GeneratedColumn, table: pa.Table) -> pa.Array | pa.ChunkedArray:
    """Generated column ``g`` computed for the rows of ``table`` (which holds its inputs)."""
    values = evaluate(g.expr, table)
    if not values.type.equals(g.field.type):
        try:
            values = pc.cast(values, g.field.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaMismatchError(
                f"generated column {g.column!r}: {g.sql} gives {values.type}, which does not convert to "
                f"{g.field.type} ({exc})"
            ) from None
    if not g.field.nullable and values.null_count:
        raise SchemaMismatchError(
            f"generated column {g.column!r} is NOT NULL but {g.sql} is NULL for {values.null_count} row(s)"
        )
    return values


def _example(table: pa.Table, index: int) -> dict[str, Any]:
    names = [c for c in table.column_names if not c.startswith("_metadata.")]
    return table.select(names).slice(index, 1).to_pylist()[0]


def _truth(check: RowCheck, table: pa.Table) -> pa.Array | pa.ChunkedArray:
    """TRUE where the row satisfies ``check``; FALSE where its expression is FALSE or NULL."""
    values = evaluate(check.expr, table)
    if pa.types.is_null(values.type):
        return pa.repeat(pa.scalar(False), table.num_rows)
    if not pa.types.is_boolean(values.type):
        raise InvalidConstraintError(f"{check.kind} {check.name!r} ({check.sql}) is not a condition: it gives {values.type}")
    return pc.fill_null(values, False)


def violations(table: pa.Table, check: RowCheck) -> tuple[int, dict[str, Any] | None]:
    """How many rows of ``table`` break ``check``, and the first of them."""
    bad = pc.invert(_truth(check, table))
    count = pc.sum(pc.cast(bad, pa.int64())).as_py() or 0
    return int(count), (_example(table, pc.index(bad, True).as_py()) if count else None)


def violation_error(check: RowCheck, count: int, total: int, row: dict[str, Any] | None,
                    what: str = "row(s) written") -> ConstraintViolationError:
    why = ("the value written differs from what its expression computes" if check.kind == "generated column"
           else "its expression is false or null")
    return ConstraintViolationError(
        f"{check.kind} {check.name!r} ({check.sql}) is violated by {count} of {total} {what} "
        f"({why}), e.g. {row}; nothing was committed",
        constraint=check.name, expression=check.sql, num_violations=count, row=row,
    )


def check_rows(table: pa.Table, checks: Iterable[RowCheck]) -> None:
    """Raise :class:`ConstraintViolationError` unless every row satisfies every check: all
    checks AND-ed in one pass; only on failure a second look says which, how many, an example."""
    checks = tuple(checks)
    if not checks or not table.num_rows:
        return
    truths = [_truth(c, table) for c in checks]
    ok = truths[0]
    for t in truths[1:]:
        ok = pc.and_(ok, t)
    if pc.all(ok).as_py():
        return
    for check in checks:
        count, row = violations(table, check)
        if count:
            raise violation_error(check, count, table.num_rows, row)


def enforce(rules: WriteRules, data: pa.Table | pa.RecordBatchReader, schema: pa.Schema,
            absent: frozenset[str] = frozenset(), assign: Assign | None = None) -> pa.Table | pa.RecordBatchReader:
    """Apply ``rules`` to what a write is about to store: a table now, a stream batch by batch
    (so a violation in a late batch still stops the write; the writer deletes its files)."""
    if isinstance(data, pa.Table):
        return rules.apply(data, schema, absent, assign)

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in data:
            yield from rules.apply(pa.Table.from_batches([batch]), schema, absent, assign).to_batches()

    return pa.RecordBatchReader.from_batches(data.schema, batches())

