"""ALTER TABLE ADD COLUMNS / RENAME COLUMN / DROP COLUMNS: metadata-only commits.

Why rename and drop need column mapping: without it a column's name *is* its name in the data
files, so a rename would orphan every stored value and dropping a column then adding one of the
same name would bring the old values back. Under column mapping (``delta.columnMapping.mode`` =
``name`` or ``id``) the files use physical names that never change and are never reused
(:mod:`deltatx.txnlog.column_mapping`), so both are schema changes in the log and nothing is
rewritten. Adding a column needs no mapping: files written before it lack it and read it as null,
which is why an added column must be nullable.

A column is named as in a predicate: ``a`` for a top-level column, ``s.x`` for field ``x`` of
struct ``s`` (backticks quote a name containing a dot); a top-level column literally named
``s.x`` wins. Names match case-insensitively when they do not match exactly, as Spark resolves
them. Every refusal raises before anything is staged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import orjson
import pyarrow as pa

from ...errors import ColumnMappingError, SchemaMismatchError, TypeChangeError
from ...txnlog.column_mapping import MODE, strip_field
from ...txnlog.features import required_protocol
from ...txnlog.schema import (
    check_field_names,
    field_index,
    field_metadata_keys,
    field_to_delta,
    is_list_type,
    normalize_schema,
    schema_to_json,
)
from ...txnlog.stats import split_column_name
from .. import stats_columns
from ..defaults import CURRENT_DEFAULT, validate_defaults

if TYPE_CHECKING:
    from ..transaction import Transaction

Path = tuple[str, ...]


# --------------------------------------------------------------------------------------------
# Resolving names
# --------------------------------------------------------------------------------------------


def _index(fields: Sequence[pa.Field], name: str) -> int | None:
    """Position of ``name`` among ``fields``: exact match, else the one case-insensitive match."""
    return field_index(fields, name)


def _resolve(schema: pa.Schema, name: str) -> Path:
    """The column ``name`` names, as the exact names of the fields on its path. ``element`` steps
    into an array, ``key`` / ``value`` into a map (``arr.element.x``: field ``x`` of the structs
    in array ``arr``), as Spark names nested fields in ALTER TABLE; the path ends at a field."""
    if not isinstance(name, str) or not name:
        raise SchemaMismatchError(f"a column name must be a non-empty string, got {name!r}")
    fields: Sequence[pa.Field] | None = list(schema)
    top = _index(fields, name)
    parts = (name,) if top is not None else split_column_name(name)
    path: list[str] = []
    current: pa.DataType | None = None
    for depth, part in enumerate(parts):
        if fields is None:  # at an array or a map: the next part steps into it
            assert current is not None
            step = part.lower()
            inner = _container_child(current, step)
            if inner is None:
                steps = "element" if is_list_type(current) else "key or value"
                raise SchemaMismatchError(
                    f"column {name!r}: {'.'.join(path)!r} is {current}; name its {steps} to reach a field inside")
            path.append(step)
            current = inner
            if depth == len(parts) - 1:
                raise SchemaMismatchError(
                    f"column {name!r} names an array element or map key/value, not a field: rename or drop a "
                    f"struct field inside it, or the column itself")
        else:
            i = _index(fields, part)
            if i is None:
                where = "the table" if depth == 0 else f"struct {'.'.join(path)!r}"
                raise SchemaMismatchError(
                    f"column {name!r} does not exist: {where} has {[f.name for f in fields]}")
            path.append(fields[i].name)
            current = fields[i].type
        if depth < len(parts) - 1:
            if pa.types.is_struct(current):
                fields = list(current)
            elif is_list_type(current) or pa.types.is_map(current):
                fields = None
            else:
                raise SchemaMismatchError(f"column {name!r}: {'.'.join(path)!r} is {current}, not a struct")
    return tuple(path)



def _container_child(t: pa.DataType, step: str) -> pa.DataType | None:
    """The type ``step`` (``element``, ``key``, ``value``) leads to inside array/map ``t``."""
    if is_list_type(t) and step == "element":
        return t.value_type
    if pa.types.is_map(t) and step in ("key", "value"):
        return t.key_type if step == "key" else t.item_type
    return None


def _edit(fields: list[pa.Field], path: Path, change: Callable[[list[pa.Field], int], list[pa.Field]]) -> list[pa.Field]:
    """``fields`` with ``change(siblings, index)`` applied to the level holding ``path``."""
    i = next(k for k, f in enumerate(fields) if f.name == path[0])
    if len(path) == 1:
        return change(fields, i)
    f = fields[i]
    return fields[:i] + [f.with_type(_edit_type(f.type, path[1:], change))] + fields[i + 1:]


def _edit_type(t: pa.DataType, path: Path, change: Callable[[list[pa.Field], int], list[pa.Field]]) -> pa.DataType:
    """Type ``t`` with ``change`` applied below it at ``path`` (struct fields, array/map steps)."""
    if pa.types.is_struct(t):
        return pa.struct(_edit(list(t), path, change))
    if is_list_type(t):
        inner = t.value_field.with_type(_edit_type(t.value_type, path[1:], change))
        return pa.large_list(inner) if pa.types.is_large_list(t) else pa.list_(inner)
    if path[0] == "key":
        return pa.map_(t.key_field.with_type(_edit_type(t.key_type, path[1:], change)), t.item_field)
    return pa.map_(t.key_field, t.item_field.with_type(_edit_type(t.item_type, path[1:], change)))


def _siblings(schema: pa.Schema, path: Path) -> list[pa.Field]:
    """The fields of the struct holding the last field of ``path``."""
    fields: Sequence[pa.Field] | None = list(schema)
    current: pa.DataType | None = None
    for part in path[:-1]:
        if fields is None:
            current = _container_child(current, part)
        else:
            current = next(f for f in fields if f.name == part).type
        fields = list(current) if pa.types.is_struct(current) else None
    assert fields is not None
    return list(fields)


def _dotted(path: Path) -> str:
    return ".".join(f"`{p}`" if "." in p else p for p in path)


def _require_mapping(tx: "Transaction", operation: str) -> None:
    if tx.column_mapping is None:
        raise ColumnMappingError(
            f"{operation} needs column mapping: without it a column's name is its name in the data files, "
            f"so old values would be lost or come back. Enable it first with "
            f"set_properties({{'{MODE}': 'name'}}) (nothing is rewritten)"
        )


def _stage_schema(tx: "Transaction", fields: list[pa.Field], partition_columns: Sequence[str] | None = None,
                  configuration: dict[str, str] | None = None) -> None:
    """Stage the new schema (ids for new columns are assigned when staged), and the protocol it
    needs (a ``timestamp_ntz`` column needs the ``timestampNtz`` feature). A name Delta refuses
    (case-insensitive duplicates; without column mapping, Parquet's special characters) is refused
    here for every ALTER, as delta-spark checks every new metadata; names the table already had
    may stay (a DROP on a table written before the check)."""
    schema = pa.schema(fields)
    check_field_names(schema, tx.column_mapping is not None, before=tx.schema)
    changes: dict[str, Any] = {"schema_string": schema_to_json(schema)}
    if partition_columns is not None:
        changes["partition_columns"] = tuple(partition_columns)
    if configuration is not None:
        changes["configuration"] = configuration
    protocol = required_protocol(dict(tx.metadata.configuration), schema, tx.protocol)
    tx.stage_metadata(tx.metadata.replace(**changes))
    if protocol != tx.protocol:
        tx.stage_protocol(protocol)


# --------------------------------------------------------------------------------------------
# Operations
# --------------------------------------------------------------------------------------------


def stage_add_columns(tx: "Transaction", fields: pa.Field | Sequence[pa.Field]) -> dict[str, Any]:
    """Append nullable columns to the schema (top level). Any column-mapping metadata the fields
    carry (say, copied from another table's schema) is dropped: they get this table's own ids."""
    new = [fields] if isinstance(fields, pa.Field) else list(fields) if isinstance(fields, (list, tuple)) else None
    if not new or not all(isinstance(f, pa.Field) for f in new):
        raise SchemaMismatchError(f"add_columns takes a pyarrow.Field or a non-empty list of them, got {fields!r}")
    taken = {f.name.lower() for f in tx.schema}
    for f in new:
        if not f.nullable:
            raise SchemaMismatchError(
                f"column {f.name!r} is NOT NULL, but the rows already in the table have no value for it; "
                f"add it as nullable")
        if not f.name:
            raise SchemaMismatchError("a new column needs a non-empty name")
        if f.name.lower() in taken:
            raise SchemaMismatchError(f"column {f.name!r} already exists (names are compared case-insensitively)")
        taken.add(f.name.lower())
    added = list(normalize_schema(pa.schema([strip_field(f) for f in new])))
    with_default = [f.name for f in added if CURRENT_DEFAULT in field_metadata_keys([f])]
    if with_default:
        raise SchemaMismatchError(
            f"column {with_default[0]!r} is added with a DEFAULT: PROTOCOL.md (Default Columns) forbids a "
            f"default in the command that creates the column; add it, then "
            f"set_column_default({with_default[0]!r}, sql)")
    _stage_schema(tx, list(tx.schema) + added)
    tx.note_operation("ADD COLUMNS", {"columns": [{"column": field_to_delta(f)} for f in added]}, {},
                      changes_data=False)
    return {"numColumnsAdded": len(added)}


def stage_set_column_default(tx: "Transaction", column: str, sql: str | None) -> dict[str, Any]:
    """ALTER TABLE ALTER COLUMN SET DEFAULT ``sql`` (None: DROP DEFAULT) of a top-level column:
    rows written from then on without a value for it get the default; rows already there keep
    theirs. The table gets the ``allowColumnDefaults`` feature with its first default."""
    if sql is not None and (not isinstance(sql, str) or not sql.strip()):
        raise SchemaMismatchError(f"a default is a SQL expression string (None drops it), got {sql!r}")
    index = tx.schema.get_field_index(column) if isinstance(column, str) else -1
    if index < 0:
        raise SchemaMismatchError(f"no top-level column {column!r} in the table; it has {tx.schema.names}")
    field = tx.schema.field(index)
    metadata = {k: v for k, v in (field.metadata or {}).items() if k != CURRENT_DEFAULT.encode()}
    if sql is not None:
        metadata[CURRENT_DEFAULT.encode()] = sql.encode()
    fields = list(tx.schema)
    fields[index] = field.with_metadata(metadata or None)
    validate_defaults(pa.schema([fields[index]]))  # a constant that fits the column's type
    _stage_schema(tx, fields)
    change = {"SET DEFAULT": sql} if sql is not None else {"DROP DEFAULT": True}
    tx.note_operation("CHANGE COLUMN", {"column": column, **change}, {}, changes_data=False)
    return {}


def _check_not_clustering(tx: "Transaction", paths: Sequence[tuple[str, ...]]) -> None:
    """Refuse to drop a clustering column or a struct holding one (delta-spark:
    DELTA_UNSUPPORTED_DROP_CLUSTERING_COLUMN): the ``delta.clustering`` domain must name columns
    of the schema, or OPTIMIZE and every later CLUSTER BY of the table fail."""
    from .clustering import clustering_columns_of

    clustering = clustering_columns_of(tx)
    for path in paths:
        lowered = tuple(p.lower() for p in path)
        for column in clustering:
            if tuple(p.lower() for p in column)[:len(lowered)] == lowered:
                raise SchemaMismatchError(
                    f"cannot drop {_dotted(path)!r}: the table is clustered by {_dotted(column)!r}; change the "
                    f"clustering first (cluster_by([...]) without it, or cluster_by(None))")


def _check_no_dependents(tx: "Transaction", paths: Sequence[tuple[str, ...]], action: str, *,
                         error: type[SchemaMismatchError] = SchemaMismatchError,
                         error_classes: tuple[str, str] | None = None) -> None:
    """Refuse to rename, drop or retype columns a CHECK constraint or a generated column reads
    (Delta's ``checkDependentExpressions``): their SQL names the column, so afterwards every write
    that evaluates them fails, in deltatx and in every other engine. ``error_classes`` (generated
    column's, constraint's) are Delta's error classes, named in the message."""
    from ...expr import parse_expression
    from ...expr.model import Column
    from ..constraints import GENERATION_EXPRESSION, check_constraints

    expressions = [(f"CHECK constraint {name!r}", sql, 1)
                   for name, sql in check_constraints(tx.metadata.configuration).items()]
    changed = {tuple(p.lower() for p in path) for path in paths}
    for f in tx.schema:
        raw = (f.metadata or {}).get(GENERATION_EXPRESSION.encode())
        if raw is not None and (f.name.lower(),) not in changed:  # a generated column dropped with its inputs
            try:
                sql = orjson.loads(raw)
            except orjson.JSONDecodeError:
                sql = raw.decode()
            expressions.append((f"generated column {f.name!r}", str(sql), 0))
    for what, sql, kind in expressions:
        try:
            referenced = [tuple(p.lower() for p in ((node.qualifier,) if node.qualifier else ()) + (node.name, *node.path))
                          for node in parse_expression(sql).walk() if isinstance(node, Column)]
        except Exception:  # an expression deltatx cannot parse: its writes fail already; say nothing new
            continue
        for ref in referenced:
            for path in changed:
                if ref[:len(path)] == path or path[:len(ref)] == ref:
                    raise error(
                        f"cannot {action} column {'.'.join(path)!r}: {what} ({sql}) reads it; drop or change "
                        f"that first" + (f" ({error_classes[kind]})" if error_classes else ""))


def refuse_dependent_type_changes(tx: "Transaction", before: pa.Schema, after: pa.Schema, *, evolution: bool) -> None:
    """Refuse a type widening of a column a CHECK constraint or a generated column reads, as Delta
    does: the expression's result type (a generated column's must equal its column's) and its
    meaning were settled for the old type. ``evolution``: the widening comes from the data
    (schema merge on append or MERGE), not from ALTER COLUMN; Delta names the two differently."""
    changed = list(_type_changed_paths(before, after, ()))
    if not changed:
        return
    classes = (("DELTA_GENERATED_COLUMNS_DATA_TYPE_MISMATCH", "DELTA_CONSTRAINT_DATA_TYPE_MISMATCH") if evolution
               else ("DELTA_GENERATED_COLUMNS_DEPENDENT_COLUMN_CHANGE", "DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE"))
    from ..constraints import GENERATION_EXPRESSION

    generated = {f.name.lower(): f.name for f in before if GENERATION_EXPRESSION.encode() in (f.metadata or {})}
    for path in changed:
        if path[0].lower() in generated:  # its type must stay its expression's (Delta checks them equal)
            raise TypeChangeError(f"cannot change the type of generated column {generated[path[0].lower()]!r}: its "
                                  f"type is its generation expression's ({classes[0]})")
    _check_no_dependents(tx, changed, "change the type of", error=TypeChangeError, error_classes=classes)


def _type_changed_paths(before: pa.Schema | pa.StructType, after: pa.Schema | pa.StructType,
                        prefix: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """Paths of the fields of ``after`` whose type differs from the same field's in ``before``
    (struct fields followed down; anything else that changed is named by its own path)."""
    old = {f.name.lower(): f for f in before}
    for f in after:
        was = old.get(f.name.lower())
        if was is None or was.type == f.type:
            continue
        if pa.types.is_struct(was.type) and pa.types.is_struct(f.type):
            yield from _type_changed_paths(was.type, f.type, (*prefix, f.name))
        else:
            yield (*prefix, f.name)


def stage_rename_column(tx: "Transaction", old: str, new: str) -> dict[str, Any]:
    """Rename a column or struct field (``new`` is its new name, not a path). The physical name
    stays, so every data file still finds its values."""
    _require_mapping(tx, "RENAME COLUMN")
    path = _resolve(tx.schema, old)
    if not isinstance(new, str) or not new:
        raise SchemaMismatchError(f"the new column name must be a non-empty string, got {new!r}")
    clash = [f.name for f in _siblings(tx.schema, path)
             if f.name != path[-1] and f.name.lower() == new.lower()]
    if clash:
        raise SchemaMismatchError(f"cannot rename {_dotted(path)!r} to {new!r}: column {clash[0]!r} exists")

    _check_no_dependents(tx, [path], "rename")

    def rename(siblings: list[pa.Field], i: int) -> list[pa.Field]:
        return siblings[:i] + [siblings[i].with_name(new)] + siblings[i + 1:]

    partition_columns = None
    if len(path) == 1 and path[0] in tx.partition_columns:
        partition_columns = [new if c == path[0] else c for c in tx.partition_columns]
    new_path = path[:-1] + (new,)
    # delta.dataSkippingStatsColumns names columns logically: it follows the rename, as in Delta
    _stage_schema(tx, _edit(list(tx.schema), path, rename), partition_columns,
                  stats_columns.after_rename(tx.metadata.configuration, path, new_path))
    tx.note_operation("RENAME COLUMN", {"oldColumnPath": _dotted(path), "newColumnPath": _dotted(new_path)}, {},
                      changes_data=False)
    return {}


def stage_drop_columns(tx: "Transaction", names: str | Sequence[str]) -> dict[str, Any]:
    """Drop columns or struct fields from the schema; their values stay in old files, unread."""
    _require_mapping(tx, "DROP COLUMN")
    wanted = [names] if isinstance(names, str) else list(names) if isinstance(names, (list, tuple)) else None
    if not wanted:
        raise SchemaMismatchError(f"drop_column takes a column name or a non-empty list of names, got {names!r}")
    paths = list(dict.fromkeys(_resolve(tx.schema, n) for n in wanted))
    _check_no_dependents(tx, paths, "drop")
    _check_not_clustering(tx, paths)
    partition = [_dotted(p) for p in paths if len(p) == 1 and p[0] in tx.partition_columns]
    if partition:
        raise SchemaMismatchError(
            f"cannot drop partition column(s) {partition}: every file's location and partition values depend on "
            f"them; rewrite the table without them instead")
    fields = list(tx.schema)
    for path in paths:
        if any(path[:len(other)] == other and path != other for other in paths):
            continue  # its parent struct goes too
        siblings = _siblings(pa.schema(fields), path)
        if len(path) > 1 and len(siblings) == 1:
            raise SchemaMismatchError(
                f"cannot drop {_dotted(path)!r}: it is the only field of struct {_dotted(path[:-1])!r}; "
                f"drop the struct instead")
        fields = _edit(fields, path, lambda siblings, i: siblings[:i] + siblings[i + 1:])
    if not [f for f in fields if f.name not in tx.partition_columns]:
        raise SchemaMismatchError("cannot drop every data column: a table needs at least one column outside "
                                  "its partition columns")
    _stage_schema(tx, fields, None, stats_columns.after_drop(tx.metadata.configuration, paths))
    tx.note_operation("DROP COLUMNS", {"columns": [_dotted(p) for p in paths]}, {}, changes_data=False)
    return {"numColumnsDropped": len(paths)}
