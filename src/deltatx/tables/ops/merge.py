"""MERGE INTO: the builder users call, and the binding of its clauses (what each one means).

::

    table.merge(source, on="t.id = s.id")            MergeBuilder collects WHEN clauses
         .when_matched_update_all()
         .when_not_matched_insert_all()
         .execute()  ─► plan_merge: bind ON and every clause (t.* / s.* scopes, Delta's rules),
                        split ON into target-only / source-only / equi-key / residual conjuncts
                     ─► merge_rows.execute_merge: prune, join, rewrite, insert, stage (columnar)

Semantics are Delta's (and Spark SQL's): clauses run in order and the first whose condition is
TRUE applies (``WHEN MATCHED``, ``WHEN NOT MATCHED [BY TARGET]``, ``WHEN NOT MATCHED BY SOURCE``);
only the last clause of each kind may omit its condition. Matched conditions and SET expressions
see ``t.*`` and ``s.*``; NOT MATCHED clauses only the source; NOT MATCHED BY SOURCE only the
target. ``UPDATE SET *`` / ``INSERT *`` pair columns by name (case-insensitive); a target column
the source lacks is kept (update) or NULL (insert). ``with_schema_evolution()`` first adds the
source columns the target lacks (:func:`evolve_schema`): all of them for a ``*`` clause, the
ones an explicit assignment sets by name otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ...errors import DeltaTxError, InvalidArgumentError, PredicateError, SchemaMismatchError
from ...expr import (
    Column,
    Comparison,
    Expr,
    bind,
    bind_predicate,
    conjuncts,
    parse_expression,
    parse_predicate,
    qualifiers,
)
from ...txnlog.schema import check_field_names, field_index, merge_schemas, pair_fields, schema_to_json
from ..constraints import WriteRules, rules_for
from ..data import Widening, check_unique_names, to_reader
from ..defaults import default_keyword, without_new_defaults
from ..generated import with_update_assignments
from ..identity import check_no_update, refuse_explicit_values
from ..variant import check_variant_columns, has_variant
from .update import require_assignments
from .struct_fields import assign, refuse_generated_inputs, top_level_field
from .columns import refuse_dependent_type_changes

if TYPE_CHECKING:
    from ..transaction import CommitResult, Transaction

MATCHED = "matched"
NOT_MATCHED = "notMatched"
NOT_MATCHED_BY_SOURCE = "notMatchedBySource"

_NO_COLUMNS = pa.schema([])


@dataclass(frozen=True)
class MergeClause:
    """One WHEN clause as the user wrote it (``assignments`` None means ``*``)."""

    kind: str
    action: str  # "update" | "delete" | "insert"
    condition: str | Expr | None = None
    assignments: dict[str, str | Expr] | None = None


@dataclass(frozen=True)
class BoundClause:
    """A clause bound to the MERGE's scopes: columns resolved, literals typed."""

    kind: str
    action: str
    condition: Expr | None
    assignments: dict[str, Expr]

    def describe(self) -> dict[str, str]:
        out = {"actionType": self.action}
        if self.condition is not None:
            out["predicate"] = str(self.condition)
        return out


class MergeBuilder:
    """Collects WHEN clauses; :meth:`execute` runs the MERGE.

    Built by ``Table.merge`` (``execute()`` commits one transaction and returns its
    :class:`CommitResult`) or ``Transaction.merge`` (``execute()`` only stages, returns metrics).
    """

    def __init__(self, tx: "Transaction | None", source: Any, on: str, source_alias: str = "s",
                 target_alias: str = "t", table: Any = None):
        if tx is None and table is None:
            raise ValueError("MergeBuilder needs a transaction or a table")
        if source_alias.lower() == target_alias.lower():
            raise PredicateError(f"MERGE source and target aliases must differ, both are {source_alias!r}")
        self._tx, self._table = tx, table
        self._source, self._on = source, on
        self._source_alias, self._target_alias = source_alias, target_alias
        self._clauses: list[MergeClause] = []
        self._executed = False
        self._schema_evolution = False

    def with_schema_evolution(self) -> "MergeBuilder":
        """MERGE WITH SCHEMA EVOLUTION: source columns the target lacks join the table.

        As Delta's ``withSchemaEvolution()``: ``UPDATE SET *`` / ``INSERT *`` add every source
        column the target lacks; an explicit assignment adds the column it sets when the target
        lacks it and the source has a column of that name (``set={"extra": "s.other"}`` adds
        ``extra`` with the source's ``extra`` type). New columns are nullable, at the end, in
        the source's order; rows the MERGE does not give a value keep null there. The commit
        changes the table's metadata, so concurrent writers that read the old schema fail with
        ``MetadataChangedException``.
        """
        self._schema_evolution = True
        return self

    def _add(self, clause: MergeClause) -> "MergeBuilder":
        self._clauses.append(clause)
        return self

    def when_matched_update(self, set: dict[str, str], condition: str | None = None) -> "MergeBuilder":  # noqa: A002
        return self._add(MergeClause(MATCHED, "update", condition, require_assignments(set, "when_matched_update")))

    def when_matched_update_all(self, condition: str | None = None) -> "MergeBuilder":
        return self._add(MergeClause(MATCHED, "update", condition, None))

    def when_matched_delete(self, condition: str | None = None) -> "MergeBuilder":
        return self._add(MergeClause(MATCHED, "delete", condition, {}))

    def when_not_matched_insert(self, values: dict[str, str], condition: str | None = None) -> "MergeBuilder":
        if not values:
            raise ValueError("when_not_matched_insert needs values={'column': 'expression', ...}")
        return self._add(MergeClause(NOT_MATCHED, "insert", condition, dict(values)))

    def when_not_matched_insert_all(self, condition: str | None = None) -> "MergeBuilder":
        return self._add(MergeClause(NOT_MATCHED, "insert", condition, None))

    def when_not_matched_by_source_update(self, set: dict[str, str],  # noqa: A002
                                          condition: str | None = None) -> "MergeBuilder":
        return self._add(MergeClause(NOT_MATCHED_BY_SOURCE, "update", condition,
                                     require_assignments(set, "when_not_matched_by_source_update")))

    def when_not_matched_by_source_delete(self, condition: str | None = None) -> "MergeBuilder":
        return self._add(MergeClause(NOT_MATCHED_BY_SOURCE, "delete", condition, {}))

    def execute(self) -> "CommitResult | dict[str, Any]":
        if self._executed:
            raise DeltaTxError("this MERGE was already executed; build a new one with merge(...)")
        self._executed = True

        def stage(tx: "Transaction") -> dict[str, Any]:
            return stage_merge(tx, self._source, self._on, self._clauses, source_alias=self._source_alias,
                               target_alias=self._target_alias, schema_evolution=self._schema_evolution)

        if self._tx is not None:  # one statement of an explicit transaction: all of it or none
            tx = self._tx
            return tx.run_statement(lambda: stage(tx))
        return self._table._run(None, stage)


# --------------------------------------------------------------------------------------------
# Binding
# --------------------------------------------------------------------------------------------


def as_source_table(source: Any) -> pa.Table:
    """The MERGE source as one Arrow table with Delta's canonical types where it has them."""
    from ...txnlog.schema import normalize_schema

    table = to_reader(source).read_all()
    check_unique_names(table.schema, "the MERGE source")
    try:
        canonical = normalize_schema(table.schema)
        if not canonical.equals(table.schema, check_metadata=False):
            table = table.cast(canonical)
    except (DeltaTxError, pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, TypeError, KeyError):
        pass  # types Delta has no name for: use them as they are
    return table.combine_chunks()


def _find_column(schema: pa.Schema, name: str) -> str | None:
    """The column of ``schema`` that ``name`` names (txnlog.schema.field_index: exact, else the
    one case-insensitive match)."""
    i = field_index(list(schema), name)
    return None if i is None else schema.names[i]


def _bind_clauses(clauses: list[MergeClause], target: pa.Schema, source: pa.Schema,
                  ta: str, sa: str, rules: "WriteRules | None" = None) -> list[BoundClause]:
    if not clauses:
        raise InvalidArgumentError("a MERGE needs at least one when_matched_* / when_not_matched_* clause")
    scopes = {MATCHED: {ta: target, sa: source}, NOT_MATCHED: {sa: source}, NOT_MATCHED_BY_SOURCE: {ta: target}}
    for kind in scopes:
        same = [c for c in clauses if c.kind == kind]
        if any(c.condition is None for c in same[:-1]):
            raise PredicateError(
                f"only the last {_kind_sql(kind)} clause may omit its condition: a clause without "
                f"one applies to every row, so the clauses after it could never run"
            )
    out = []
    for c in clauses:
        scope = scopes[c.kind]
        cond = None
        if c.condition is not None:
            raw = parse_predicate(c.condition) if isinstance(c.condition, str) else c.condition
            cond = bind_predicate(raw, _NO_COLUMNS, aliases=scope)
        assignments = _bind_assignments(c, target, source, ta, sa, scope)
        out.append(BoundClause(c.kind, c.action, cond, _column_rules(c, assignments, rules, target, ta)))
    return out


def _column_rules(c: MergeClause, assignments: dict[str, Expr], rules: "WriteRules | None", target: pa.Schema,
                  ta: str) -> dict[str, Expr]:
    """Identity values are never updated (``SET *`` keeps them) and GENERATED ALWAYS ones never
    inserted; generated columns follow the clause's new values (tables/generated.py)."""
    if rules is None or c.action == "delete":
        return assignments
    if c.action == "update":
        if c.assignments is None:
            assignments = {k: v for k, v in assignments.items() if rules.identity_of(k) is None}
        check_no_update(rules.identity, set(assignments), "MERGE UPDATE")
        refuse_generated_inputs(rules, assignments, "MERGE UPDATE")
        return with_update_assignments(rules, assignments, target, keep_alias=ta)
    refuse_explicit_values(rules.identity, set(assignments), "MERGE INSERT")
    # identity values are assigned when the rows are built (merge_rows), after these expressions:
    # a generated column reading one is computed from the built row, as an append does
    later = frozenset(s.column for s in rules.identity if s.column not in assignments)
    return with_update_assignments(rules, assignments, target, insert=True, assigned_later=later)


def _bind_assignments(c: MergeClause, target: pa.Schema, source: pa.Schema, ta: str, sa: str,
                      scope: dict[str, pa.Schema]) -> dict[str, Expr]:
    if c.action == "delete":
        return {}
    if c.assignments is None:  # UPDATE SET * / INSERT *: target columns from same-named source ones
        # one source column per target column: ``id`` and ``ID`` would both name ``id``
        found = {j: f.name for f, j in zip(source, pair_fields(list(source), list(target))) if j is not None}
        out = {}
        for j, f in enumerate(target):
            name = found.get(j)
            if name is not None:
                out[f.name] = Column(name, sa)
            elif c.action == "insert" and not f.nullable:
                raise SchemaMismatchError(f"INSERT * needs NOT NULL column {f.name!r}, which the source lacks")
        if not out:
            raise SchemaMismatchError(
                f"{c.action.upper()} * found no source column named like a target column "
                f"(target: {target.names}, source: {source.names})"
            )
        return out
    out = {}
    for key, sql in c.assignments.items():
        name = _assigned_name(key, ta)
        raw = (default_keyword(sql, target, name) or parse_expression(sql)) if isinstance(sql, str) else sql
        where = f"MERGE {c.action.upper()}"
        if c.action != "update" and top_level_field(target, name, where) is None:  # INSERT sets whole columns
            raise PredicateError(f"MERGE {c.action} sets unknown column {key!r}; target columns: {target.names}")
        if not assign(out, target, name, bind(raw, _NO_COLUMNS, aliases=scope), where):
            raise PredicateError(f"MERGE {c.action} sets unknown column {key!r}; target columns: {target.names}")
    return out


def _assigned_name(key: str, target_alias: str) -> str:
    """The target column a SET / VALUES key names (``t.extra`` and ``extra`` alike)."""
    prefix = f"{target_alias}."
    return key[len(prefix):] if key.lower().startswith(prefix.lower()) else key


def _kind_sql(kind: str) -> str:
    return {MATCHED: "WHEN MATCHED", NOT_MATCHED: "WHEN NOT MATCHED",
            NOT_MATCHED_BY_SOURCE: "WHEN NOT MATCHED BY SOURCE"}[kind]


def _equi_key(e: Expr, ta: str, sa: str) -> tuple[str, str] | None:
    """(target column, source column) of a conjunct ``t.a = s.b`` (either side order)."""
    if not isinstance(e, Comparison) or e.op != "=":
        return None
    left, right = e.left, e.right
    if not (isinstance(left, Column) and isinstance(right, Column)) or left.path or right.path:
        return None
    if left.qualifier == ta and right.qualifier == sa:
        return left.name, right.name
    if left.qualifier == sa and right.qualifier == ta:
        return right.name, left.name
    return None


@dataclass
class MergePlan:
    """Everything the execution needs, bound and classified (see the module docstring)."""

    source: pa.Table
    on: Expr
    target_alias: str
    source_alias: str
    matched: list[BoundClause]
    not_matched: list[BoundClause]
    by_source: list[BoundClause]
    keys: list[tuple[str, str]]  # (target column, source column) of each ``t.a = s.b``
    target_only: list[Expr]
    source_only: list[Expr]
    residual: list[Expr]


def plan_merge(target: pa.Schema, source: Any, on: str | Expr, clauses: list[MergeClause],
               source_alias: str = "s", target_alias: str = "t", rules: "WriteRules | None" = None) -> MergePlan:
    """Bind ON and the clauses against the target and source schemas (and the target's
    generated/identity column ``rules``, from tables/constraints.rules_for)."""
    ta, sa = target_alias, source_alias
    table = as_source_table(source)
    if has_variant(target):  # what the source inserts or sets into a variant column must be one
        check_variant_columns(table, like=True)
    raw = parse_predicate(on) if isinstance(on, str) else on
    bound_on = bind_predicate(raw, _NO_COLUMNS, aliases={ta: target, sa: table.schema})
    bound = _bind_clauses(clauses, target, table.schema, ta, sa, rules)
    plan = MergePlan(
        source=table, on=bound_on, target_alias=ta, source_alias=sa,
        matched=[c for c in bound if c.kind == MATCHED],
        not_matched=[c for c in bound if c.kind == NOT_MATCHED],
        by_source=[c for c in bound if c.kind == NOT_MATCHED_BY_SOURCE],
        keys=[], target_only=[], source_only=[], residual=[],
    )
    for part in conjuncts(bound_on):
        key = _equi_key(part, ta, sa)
        q = qualifiers(part)
        if key is not None:
            plan.keys.append(key)
        elif q == {ta}:
            plan.target_only.append(part)
        elif q == {sa}:
            plan.source_only.append(part)
        else:
            plan.residual.append(part)
    return plan


def _evolving_source_schema(clauses: list[MergeClause], target: pa.Schema, source: pa.Schema,
                            target_alias: str) -> pa.Schema | None:
    """The source columns schema evolution merges into the target: all of them when an
    ``UPDATE SET *`` / ``INSERT *`` clause carries them over, else those an explicit assignment
    sets by a name the target lacks and the source has (Delta's MergeIntoSchemaEvolutionSuite:
    "new column updated from other new column" adds ``extra`` as the source's ``extra``, set
    from ``s.unused``); None when no clause adds anything."""
    acting = [c for c in clauses if c.action in ("update", "insert")]
    if any(c.assignments is None for c in acting):
        return source
    named: set[str] = set()
    for c in acting:
        for key in c.assignments or {}:
            name = _assigned_name(key, target_alias)
            if _find_column(target, name) is None:
                found = _find_column(source, name)
                if found is not None:
                    named.add(found)
    if not named:
        return None
    return pa.schema([f for f in source if f.name in named])


def evolve_schema(tx: "Transaction", source: pa.Table, clauses: list[MergeClause],
                  target_alias: str = "t") -> list[str]:
    """Stage the target schema widened by the source's new columns; returns their names.

    See :meth:`MergeBuilder.with_schema_evolution`. Staged before the MERGE is planned, so the
    clauses bind to the new columns and every file is read (old files: nulls) and written with
    the new schema.
    """
    target = tx.schema
    joining = _evolving_source_schema(clauses, target, source.schema, target_alias)
    if joining is None:
        return []
    try:  # the same merge as append(schema_mode="merge"): names match case-insensitively
        widened = without_new_defaults(merge_schemas(target, joining), target)
    except SchemaMismatchError as exc:
        raise SchemaMismatchError(f"MERGE schema evolution cannot add the source's columns: {exc}") from None
    widening = Widening.of(tx.properties, tx.protocol)
    if widening is not None:  # the source's wider types too, as Delta's MERGE evolution
        widened = widening.apply(widened, source.schema)
    if widened.equals(target):  # a widening changes a type: never equal
        return []
    check_field_names(widened, tx.column_mapping is not None, before=target)
    refuse_dependent_type_changes(tx, target, widened, evolution=True)
    tx.stage_metadata(tx.metadata.replace(schema_string=schema_to_json(widened)))
    return widened.names[len(target.names):]


def stage_merge(tx: "Transaction", source: Any, on: str | Expr, clauses: list[MergeClause], *,
                source_alias: str = "s", target_alias: str = "t", schema_evolution: bool = False) -> dict[str, Any]:
    """Stage a MERGE into ``tx``; returns Delta's MERGE metrics."""
    from .merge_rows import execute_merge

    if schema_evolution:
        source = as_source_table(source)
        evolve_schema(tx, source, clauses, target_alias)
    plan = plan_merge(tx.schema, source, on, clauses, source_alias=source_alias, target_alias=target_alias,
                      rules=rules_for(tx.schema, tx.properties, tx.protocol))
    return execute_merge(tx, plan)


def inserts_assign_identity(plan: MergePlan, rules: "WriteRules | None") -> list[str]:
    """Identity columns some INSERT clause of ``plan`` leaves to the writer to assign."""
    if rules is None:
        return []
    return sorted({s.column for s in rules.identity for c in plan.not_matched if s.column not in c.assignments})
