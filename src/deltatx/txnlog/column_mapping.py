"""Column mapping (PROTOCOL.md "Column Mapping"): a table's logical columns ↔ its files' columns.

Why one module: with ``delta.columnMapping.mode`` = ``name`` or ``id`` a column's display name is
only a label. Data files, ``partitionValues`` and ``stats`` use the column's *physical name*
(static; ``col-<uuid>`` for every column created under column mapping), and in ``id`` mode a data
file's columns are found by their Parquet ``field_id``. Renaming or dropping a column is then a
metadata-only commit, and a dropped name added again is a new column (new physical name and id),
so old files cannot bring its old values back. The reader, the writer, stats and pruning all ask
this module for the translation; no other module knows the field-metadata keys.

With mode ``none`` :func:`of` answers ``None`` after one dict lookup: plain tables pay nothing.

Writer rules kept here (:func:`prepare_metadata`, run on every staged ``metaData``): every field,
nested struct fields included, carries ``delta.columnMapping.id`` and
``delta.columnMapping.physicalName``; ``delta.columnMapping.maxColumnId`` only grows; physical
names are never reused. Mode changes follow Delta: ``none`` → ``name`` on an existing table keeps
the current names as physical names (nothing is rewritten); every other change is refused.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence, TypeVar

import orjson
import pyarrow as pa

from ..errors import ColumnMappingError, InvalidPropertyError, SchemaMismatchError
from .schema import each_field, map_struct_fields

if TYPE_CHECKING:
    from .actions import Metadata

MODE = "delta.columnMapping.mode"
MAX_COLUMN_ID = "delta.columnMapping.maxColumnId"
PHYSICAL_NAME = "delta.columnMapping.physicalName"
COLUMN_ID = "delta.columnMapping.id"
#: field-metadata key pyarrow reads and writes as the Parquet ``SchemaElement.field_id``
PARQUET_FIELD_ID = b"PARQUET:field_id"
MODES = ("none", "name", "id")

_KEY_PREFIX = "delta.columnMapping."
_PHYSICAL_KEY = PHYSICAL_NAME.encode()
_ID_KEY = COLUMN_ID.encode()

_Data = TypeVar("_Data", pa.Table, pa.RecordBatch)


# --------------------------------------------------------------------------------------------
# Field metadata
# --------------------------------------------------------------------------------------------


def mode_of(configuration: dict[str, str]) -> str:
    """``none``, ``name`` or ``id`` (absent or empty = ``none``); raises for anything else."""
    raw = configuration.get(MODE)
    if raw is None:
        return "none"
    mode = raw.strip().lower() or "none"
    if mode not in MODES:
        raise InvalidPropertyError(f"{MODE}={raw!r} must be one of {', '.join(MODES)}")
    return mode


def validate_mode(key: str, value: str) -> None:
    """Property validator for ``delta.columnMapping.mode``."""
    mode_of({MODE: value})


def _json_value(raw: bytes) -> object:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode()


def physical_name(field: pa.Field) -> str:
    """The name files, stats and partition values use: the physical name if set, else the name."""
    md = field.metadata
    raw = md.get(_PHYSICAL_KEY) if md else None
    if raw:
        name = _json_value(raw)
        if isinstance(name, str) and name:
            return name
    return field.name


def column_id(field: pa.Field) -> int | None:
    md = field.metadata
    raw = md.get(_ID_KEY) if md else None
    if raw is None:
        return None
    value = _json_value(raw)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _without_keys(md: dict[bytes, bytes] | None) -> dict[bytes, bytes] | None:
    if not md:
        return md
    kept = {k: v for k, v in md.items() if not k.decode(errors="replace").startswith(_KEY_PREFIX)}
    return kept or None


def _strip_one(f: pa.Field) -> pa.Field:
    return pa.field(f.name, f.type, f.nullable, metadata=_without_keys(f.metadata))


def strip_field(f: pa.Field) -> pa.Field:
    """``f`` without column-mapping metadata (its own and its nested fields')."""
    return each_field(_strip_one)([f])[0]


def strip_schema(schema: pa.Schema) -> pa.Schema:
    """The schema users see: column-mapping metadata is the table's bookkeeping, not theirs."""
    return pa.schema(each_field(_strip_one)(list(schema)), metadata=schema.metadata)


def _physical_one(f: pa.Field) -> pa.Field:
    fid = column_id(f)
    md = {PARQUET_FIELD_ID: str(fid).encode()} if fid is not None else None
    return pa.field(physical_name(f), f.type, f.nullable, metadata=md)


def physical_field(f: pa.Field) -> pa.Field:
    """``f`` as stored in data files: physical names at every level, ids as Parquet field ids."""
    return each_field(_physical_one)([f])[0]


# --------------------------------------------------------------------------------------------
# Translating data and schemas
# --------------------------------------------------------------------------------------------


def _view(column: pa.ChunkedArray | pa.Array, target: pa.DataType, logical: pa.DataType) -> pa.ChunkedArray | pa.Array:
    """``column`` relabelled as ``target`` (same layout, other field names): zero-copy. A column of
    another physical type is cast to ``logical`` first."""
    if column.type.equals(target, check_metadata=True):
        return column
    from .struct_nulls import converted  # NULLs under a NULL struct's NOT NULL field block a view

    try:
        if isinstance(column, pa.ChunkedArray):
            return pa.chunked_array([converted(c, target, pa.Array.view) for c in column.chunks], target)
        return converted(column, target, pa.Array.view)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return _view(column.cast(logical), target, logical)


@dataclass(frozen=True, eq=False)
class ColumnMapping:
    """The mapping of one table schema (``mode`` ``name`` or ``id``).

    ``schema`` is the table's logical schema (with its column-mapping metadata); the physical
    field of a top-level column is looked up by its logical name.
    """

    mode: str
    schema: pa.Schema

    @functools.cached_property
    def _physical(self) -> dict[str, pa.Field]:
        return {f.name: physical_field(f) for f in self.schema}

    @functools.cached_property
    def _logical(self) -> dict[str, pa.Field]:
        return {f.name: f for f in self.schema}

    @property
    def by_field_id(self) -> bool:
        """Files are resolved by Parquet field id (``id`` mode), not by physical name."""
        return self.mode == "id"

    def physical_name(self, column: str) -> str:
        """A top-level column's physical name (names outside the schema are kept)."""
        f = self._physical.get(column)
        return f.name if f is not None else column

    def physical_names(self, columns: Iterable[str]) -> list[str]:
        return [self.physical_name(c) for c in columns]

    def physical_path(self, column: str, path: Sequence[str] = ()) -> tuple[str, tuple[str, ...]]:
        """A column reference (top-level name, struct field path) under its physical names."""
        f = self._physical.get(column)
        if f is None:
            return column, tuple(path)
        logical, physical, out = self._logical[column].type, f.type, []
        for part in path:
            i = logical.get_field_index(part) if pa.types.is_struct(logical) else -1
            if i < 0:
                return f.name, tuple(out) + tuple(path[len(out):])
            out.append(physical.field(i).name)
            logical, physical = logical.field(i).type, physical.field(i).type
        return f.name, tuple(out)

    def physical_schema(self, schema: pa.Schema) -> pa.Schema:
        """``schema``'s fields as stored: table columns physical, other columns (``_metadata.*``,
        row tracking's materialized columns) as they are."""
        return pa.schema([self._physical.get(f.name, f) for f in schema], metadata=schema.metadata)

    def output_schema(self, schema: pa.Schema) -> pa.Schema:
        """What a read returns: the logical fields without column-mapping metadata."""
        return strip_schema(schema)

    def to_physical(self, data: _Data) -> _Data:
        """Rows named logically → the same rows with physical names (and field ids), zero-copy."""
        if not data.num_columns:
            return data
        fields, columns = [], []
        for f, column in zip(data.schema, data.columns):
            target = self._physical.get(f.name)
            if target is None:
                fields.append(f)
                columns.append(column)
            else:
                fields.append(target)
                columns.append(_view(column, target.type, self._logical[f.name].type))
        schema = pa.schema(fields, metadata=data.schema.metadata)
        return type(data).from_arrays(columns, schema=schema)

    def to_logical(self, data: _Data, names: Sequence[str]) -> _Data:
        """Rows read with physical names → named ``names`` (logical; other columns kept), each
        relabelled with its logical type."""
        if not data.num_columns:
            return data  # no columns to relabel; the row count stays
        fields, columns = [], []
        for name, column in zip(names, data.columns):
            logical = self._logical.get(name)
            if logical is None or name.startswith("_metadata."):
                fields.append(pa.field(name, column.type))
                columns.append(column)
                continue
            out = strip_field(logical)
            fields.append(out)
            columns.append(_view(column, out.type, out.type))
        return type(data).from_arrays(columns, schema=pa.schema(fields))


@functools.lru_cache(maxsize=64)
def _mapping(mode: str, schema_string: str) -> ColumnMapping:
    from .schema import schema_from_json

    return ColumnMapping(mode, schema_from_json(schema_string))


def of(metadata: "Metadata") -> ColumnMapping | None:
    """The table's column mapping, or None when its mode is ``none`` (one dict lookup)."""
    return for_schema_string(metadata.configuration, metadata.schema_string)


def for_schema_string(configuration: dict[str, str], schema_string: str) -> ColumnMapping | None:
    """The mapping of a table with this configuration and ``schemaString`` (cached per schema)."""
    if MODE not in configuration:
        return None
    mode = mode_of(configuration)
    return None if mode == "none" else _mapping(mode, schema_string)


def for_schema(configuration: dict[str, str], schema: pa.Schema) -> ColumnMapping | None:
    """The mapping of a table with this configuration and (parsed) schema."""
    if MODE not in configuration:
        return None
    mode = mode_of(configuration)
    return None if mode == "none" else ColumnMapping(mode, schema)


def partition_keys(metadata: "Metadata", schema: pa.Schema) -> list[str]:
    """The ``partitionValues`` keys of the partition columns (physical names under mapping)."""
    mapping = of(metadata)
    columns = list(metadata.partition_columns)
    return [physical_name(schema.field(c)) for c in columns] if mapping is not None else columns


# --------------------------------------------------------------------------------------------
# id mode: a file's columns by Parquet field id
# --------------------------------------------------------------------------------------------


def _field_id(f: pa.Field) -> int | None:
    raw = f.metadata.get(PARQUET_FIELD_ID) if f.metadata else None
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def columns_by_field_id(file_schema: pa.Schema, wanted: Iterable[pa.Field]) -> dict[str, str]:
    """``{wanted physical name: the file's column name}`` for the wanted top-level fields whose
    Parquet field id the file has (a file without field ids matches nothing: PROTOCOL.md lets
    readers return nulls for such a file). A wanted field without an id is no table column (a
    change file's ``_change_type``): it is matched by name."""
    in_file = {_field_id(f): f.name for f in file_schema if _field_id(f) is not None}
    out = {}
    for f in wanted:
        fid = _field_id(f)
        if fid is None:
            if f.name in file_schema.names:
                out[f.name] = f.name
        elif fid in in_file:
            out[f.name] = in_file[fid]
    return out


def _align(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """One chunk of a file column as ``target``: struct fields matched by field id (missing ones
    null), lists and maps recursed, leaves cast (timestamps unsafely: ns → us truncation)."""
    t = arr.type
    if pa.types.is_struct(target) and pa.types.is_struct(t):
        ids = {_field_id(t.field(i)): i for i in range(t.num_fields)}
        children = []
        for child in target:
            i = ids.get(_field_id(child)) if _field_id(child) is not None else None
            if i is None:
                children.append(pa.nulls(len(arr), child.type))
            else:
                children.append(_align(arr.field(i), child.type))
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_list(target) and pa.types.is_list(t):
        values = _align(arr.values, target.value_type)
        mask = arr.is_null() if arr.null_count else None
        return pa.ListArray.from_arrays(arr.offsets, values, type=target, mask=mask)
    if pa.types.is_large_list(target) and pa.types.is_large_list(t):
        values = _align(arr.values, target.value_type)
        mask = arr.is_null() if arr.null_count else None
        return pa.LargeListArray.from_arrays(arr.offsets, values, type=target, mask=mask)
    if pa.types.is_map(target) and pa.types.is_map(t):
        keys, items = _align(arr.keys, target.key_type), _align(arr.items, target.item_type)
        mask = arr.is_null() if arr.null_count else None
        return pa.MapArray.from_arrays(arr.offsets, keys, items, type=target, mask=mask)
    if t.equals(target):
        return arr
    return arr.cast(target, safe=not pa.types.is_timestamp(target))


def align_by_field_id(raw: pa.Table, renames: dict[str, str], wanted: Sequence[pa.Field],
                      path: str = "") -> pa.Table:
    """The file columns ``raw`` read (file names) as the ``wanted`` physical fields: each renamed
    and its nested struct fields matched by field id. Columns not in ``renames`` stay as read.
    A value the wanted type cannot hold raises SchemaMismatchError naming ``path`` (the file)."""
    if not renames:
        return raw  # nothing to relabel (and a table without columns keeps its row count)
    from_file = {file_name: wanted_name for wanted_name, file_name in renames.items()}
    by_name = {f.name: f for f in wanted}
    fields, columns = [], []
    for f, column in zip(raw.schema, raw.columns):
        name = from_file.get(f.name)
        if name is None:
            fields.append(f)
            columns.append(column)
            continue
        target = by_name[name]
        try:
            chunks = [_align(c, target.type) for c in column.chunks]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise SchemaMismatchError(
                f"column {name!r} of data file {path!r} cannot be read as {target.type} ({exc}); the file "
                f"was written with an incompatible type") from exc
        fields.append(target)
        columns.append(pa.chunked_array(chunks, target.type))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


# --------------------------------------------------------------------------------------------
# Writer rules: ids, physical names, maxColumnId, mode changes
# --------------------------------------------------------------------------------------------


def _has_keys(schema_string: str) -> bool:
    return _KEY_PREFIX in schema_string


def max_column_id(configuration: dict[str, str]) -> int:
    """The largest column id the table ever assigned (``delta.columnMapping.maxColumnId``)."""
    raw = configuration.get(MAX_COLUMN_ID)
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        raise InvalidPropertyError(f"{MAX_COLUMN_ID}={raw!r} is not an integer") from None


def _pairs(schema: pa.Schema) -> set[tuple[int, str]]:
    """(id, physical name) of every field of ``schema`` that has an id, nested ones included."""
    found: set[tuple[int, str]] = set()

    def note(f: pa.Field) -> pa.Field:
        fid = column_id(f)
        if fid is not None:
            found.add((fid, physical_name(f)))
        return f

    each_field(note)(list(schema))
    return found


def check_mode_change(old: str, new: str, *, existing_table: bool) -> None:
    """Raise ColumnMappingError for the mode changes Delta refuses."""
    if old == new or not existing_table:
        return
    if old == "none" and new == "name":
        return
    if old == "none":
        why = ("an existing table can only move to 'name' mode (its files hold no field ids); "
               "create a new table with delta.columnMapping.mode=id instead")
    else:
        why = ("column mapping cannot be switched off or changed once on: files written since hold "
               "physical column names")
    raise ColumnMappingError(f"cannot change {MODE} from {old!r} to {new!r}: {why}")


def prepare_metadata(previous: "Metadata | None", metadata: "Metadata", *, keep_known: bool = False) -> "Metadata":
    """``metadata`` as it may be committed after ``previous`` (None: a new table).

    Under column mapping, every field without its own id and physical name gets fresh ones
    (``col-<uuid>``; the current name when ``none`` → ``name`` is switched on in place), and
    ``maxColumnId`` becomes the largest id ever assigned. A field whose (id, physical name) the
    previous schema does not have is a new column and gets fresh ones too, so a column copied from
    another table, or a dropped one added again, never reaches old data. A new table id (REPLACE
    TABLE: a new definition of an emptied table) starts afresh.

    ``keep_known`` (RESTORE) trusts the metadata: it is one of the table's own past versions,
    consistent with the files restored with it, so its ids and physical names stay and its mode
    is not checked against the current one; ``maxColumnId`` still never goes down. With mode
    ``none`` the schema keeps no column-mapping metadata. Returns ``metadata`` itself when
    nothing needs assigning.
    """
    if previous is not None and previous.id != metadata.id and not keep_known:
        previous = None
    new_mode = mode_of(metadata.configuration)
    old_mode = mode_of(previous.configuration) if previous is not None else "none"
    from .schema import schema_from_json, schema_to_json

    if new_mode == "none" and (old_mode == "none" or keep_known):
        if not _has_keys(metadata.schema_string):
            return metadata
        stripped = strip_schema(schema_from_json(metadata.schema_string))
        return metadata.replace(schema_string=schema_to_json(stripped))
    if not keep_known:
        check_mode_change(old_mode, new_mode, existing_table=previous is not None)
    schema = schema_from_json(metadata.schema_string)
    top = max(max_column_id(previous.configuration) if previous is not None else 0,
              max_column_id(metadata.configuration))
    in_place = previous is not None and old_mode == "none" and not keep_known
    known = _pairs(schema_from_json(previous.schema_string)) if previous is not None and not in_place else set()
    used_ids: set[int] = set()
    changed = False

    def annotate(fields: list[pa.Field]) -> list[pa.Field]:
        """One struct's fields, depth first in schema order (ids number the schema as Delta does)."""
        nonlocal top, changed
        names: set[str] = set()  # physical names are unique among siblings
        out = []
        for f in fields:
            fid, name = column_id(f), physical_name(f)
            own = fid is not None and f.metadata is not None and _PHYSICAL_KEY in f.metadata
            if own and (keep_known or (fid, name) in known) and fid not in used_ids and name not in names:
                top = max(top, fid)
            else:
                top += 1
                fid = top
                name = f.name if in_place and f.name not in names else f"col-{uuid.uuid4()}"
                md = dict(_without_keys(f.metadata) or {})
                md[_ID_KEY] = orjson.dumps(fid)
                md[_PHYSICAL_KEY] = orjson.dumps(name)
                f = pa.field(f.name, f.type, f.nullable, metadata=md)
                changed = True
            used_ids.add(fid)
            names.add(name)
            out.append(f.with_type(map_struct_fields(f.type, annotate)))
        return out

    fields = annotate(list(schema))
    config = dict(metadata.configuration)
    config[MODE] = new_mode
    config[MAX_COLUMN_ID] = str(top)
    if not changed and config == metadata.configuration:
        return metadata
    schema_string = schema_to_json(pa.schema(fields)) if changed else metadata.schema_string
    return metadata.replace(schema_string=schema_string, configuration=config)
