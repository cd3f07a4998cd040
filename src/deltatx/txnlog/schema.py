"""Table schemas: Delta's ``schemaString`` (Spark's JSON) to and from pyarrow.

Why it matters: other engines read our ``schemaString`` to know the table, and we read theirs.
The mapping is the protocol's primitive table; arrow's large/view variants are normalised to the
plain ones so that two ways of writing the same column compare equal.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Iterator, Sequence

import orjson
import pyarrow as pa

from ..errors import InvalidTableError, SchemaMismatchError

_PRIMITIVE_TO_ARROW: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    # Spark's NullType, left by old CTAS of NULL literals; PROTOCOL.md leaves it undefined and
    # Delta refuses it in new tables, but existing tables have it: read as an all-null column
    "void": pa.null(),
}

_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")

#: The arrow type of a Delta ``variant`` column: the struct of two binaries its unshredded Parquet
#: form is (PROTOCOL.md, "Variant data in Parquet"). pyarrow has no variant type, so this exact
#: struct (``value`` then ``metadata``, both NOT NULL) *is* the variant type in both directions:
#: a variant column reads as it, and a column of it is written as ``variant`` (``deltatx.VARIANT``).
VARIANT_STORAGE = pa.struct([pa.field("value", pa.binary(), False), pa.field("metadata", pa.binary(), False)])


def is_variant_storage(t: pa.DataType) -> bool:
    """Whether ``t`` is the variant type (a variant's stats count it as one leaf)."""
    return t.equals(VARIANT_STORAGE)


def child_fields(t: pa.DataType) -> list[pa.Field]:
    """The fields directly inside ``t``: a struct's fields, a list's element, a map's key and value."""
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [t.value_field]
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    return []


def field_metadata_keys(fields: Iterable[pa.Field]) -> Iterator[str]:
    """Every field-metadata key of ``fields``, nested fields included."""
    for f in fields:
        if f.metadata:
            for key in f.metadata:
                yield key.decode() if isinstance(key, bytes) else key
        yield from field_metadata_keys(child_fields(f.type))


def type_holds(t: pa.DataType, predicate: Callable[[pa.DataType], bool]) -> bool:
    """Whether ``t`` or any type inside it (struct fields, list elements, map keys and values)
    satisfies ``predicate``."""
    return predicate(t) or any(type_holds(f.type, predicate) for f in child_fields(t))


def uses_variant(schema_string: str) -> bool:
    """Whether a ``schemaString`` has a ``variant`` column anywhere (nested ones too)."""
    if "variant" not in schema_string:
        return False
    try:
        return _mentions_variant(orjson.loads(schema_string))
    except orjson.JSONDecodeError:
        return False


def _mentions_variant(node: Any) -> bool:
    if node == "variant":
        return True
    if isinstance(node, dict):
        return any(_mentions_variant(node.get(k)) for k in ("type", "elementType", "keyType", "valueType", "fields"))
    if isinstance(node, list):
        return any(_mentions_variant(v) for v in node)
    return False


def _type_from_delta(t: Any) -> pa.DataType:
    if t == "variant" or (isinstance(t, dict) and t.get("type") == "variant"):
        return VARIANT_STORAGE
    if isinstance(t, str):
        if t in _PRIMITIVE_TO_ARROW:
            return _PRIMITIVE_TO_ARROW[t]
        m = _DECIMAL.match(t)
        if m:
            return pa.decimal128(int(m.group(1)), int(m.group(2)))
        raise InvalidTableError(f"unsupported Delta type {t!r} in the table schema")
    kind = t.get("type")
    if kind == "struct":
        return pa.struct([field_from_delta(f) for f in t["fields"]])
    if kind == "array":
        return pa.list_(pa.field("element", _type_from_delta(t["elementType"]), t.get("containsNull", True)))
    if kind == "map":
        return pa.map_(
            _type_from_delta(t["keyType"]),
            pa.field("value", _type_from_delta(t["valueType"]), t.get("valueContainsNull", True)),
        )
    raise InvalidTableError(f"unsupported Delta type {t!r} in the table schema")


def type_from_delta(t: Any) -> pa.DataType:
    """The arrow type of a Delta type (a name such as ``"decimal(10,2)"``, or a nested dict)."""
    return _type_from_delta(t)


def type_to_delta(t: pa.DataType) -> Any:
    """The Delta type of an arrow type: a name for primitives, a dict for nested types."""
    return _type_to_delta(t)


def field_from_delta(f: dict[str, Any]) -> pa.Field:
    md = f.get("metadata") or {}
    meta = {k: orjson.dumps(v) for k, v in md.items()} if md else None
    return pa.field(f["name"], _type_from_delta(f["type"]), f.get("nullable", True), metadata=meta)


def schema_from_json(schema_string: str) -> pa.Schema:
    """Parse a ``schemaString`` into an arrow schema (field metadata kept as JSON bytes).

    An empty string is the empty schema: the metaData of a table whose schema is not known yet
    (Delta Live Tables write such a version 0, then the schema in a later commit).
    """
    if not schema_string:
        return pa.schema([])
    try:
        doc = orjson.loads(schema_string)
    except orjson.JSONDecodeError as exc:
        raise InvalidTableError(f"the table's schemaString is not valid JSON: {exc}") from None
    try:
        if doc.get("type") != "struct":
            raise InvalidTableError("the table's schemaString is not a struct")
        return pa.schema([field_from_delta(f) for f in doc["fields"]])
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        detail = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
        raise InvalidTableError(f"the table's schemaString is malformed ({detail})") from None


def _type_to_delta(t: pa.DataType) -> Any:
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return "long"
    if pa.types.is_int32(t) or pa.types.is_uint16(t):
        return "integer"
    if pa.types.is_int16(t) or pa.types.is_uint8(t):
        return "short"
    if pa.types.is_int8(t):
        return "byte"
    if pa.types.is_float32(t) or pa.types.is_float16(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pa.types.is_decimal(t):
        if not 1 <= t.precision <= 38:
            raise SchemaMismatchError(f"{t} has {t.precision} digits: Delta's DECIMAL holds at most 38; cast the "
                                      f"values to decimal128(38, s) or less")
        return f"decimal({t.precision},{t.scale})"
    if is_variant_storage(t):
        return "variant"
    if pa.types.is_null(t):
        return "void"
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [field_to_delta(t.field(i)) for i in range(t.num_fields)]}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_list_view(t):
        return {"type": "array", "elementType": _type_to_delta(t.value_type), "containsNull": t.value_field.nullable}
    if pa.types.is_map(t):
        return {
            "type": "map",
            "keyType": _type_to_delta(t.key_type),
            "valueType": _type_to_delta(t.item_type),
            "valueContainsNull": t.item_field.nullable,
        }
    if pa.types.is_dictionary(t):
        return _type_to_delta(t.value_type)
    raise SchemaMismatchError(f"arrow type {t} has no Delta equivalent")


#: column metadata Delta defines as text: kept as the string given even when it parses as JSON —
#: Delta Spark reads each with ``getString`` (a CHECK-like invariant is a string holding JSON, per
#: PROTOCOL.md "Column Invariants"; a default or generation expression ``42`` is SQL, not a number)
_TEXT_METADATA = frozenset(("CURRENT_DEFAULT", "EXISTS_DEFAULT", "comment", "delta.invariants",
                            "delta.generationExpression", "delta.columnMapping.physicalName",
                            "__CHAR_VARCHAR_TYPE_STRING"))
#: key prefixes of Arrow's and Parquet's own field metadata (extension types, Parquet field ids):
#: properties of the in-memory or file representation, not of the table's column
_PRIVATE_METADATA_PREFIXES = ("ARROW:", "PARQUET:")


def field_to_delta(f: pa.Field) -> dict[str, Any]:
    """A Delta ``StructField`` of an Arrow field. Arrow keeps metadata values as bytes; deltatx's
    own schemas hold each Delta value JSON-encoded (:func:`field_from_delta`), so a value that
    parses as JSON is that value, and one that does not is the text itself — a user's
    ``{"comment": "user id"}`` is kept, not dropped. Keys Delta defines as text stay text."""
    md = {}
    if f.metadata:
        for k, v in f.metadata.items():
            key = k.decode()
            if key.startswith(_PRIVATE_METADATA_PREFIXES):
                continue
            text = v.decode("utf-8", errors="replace")
            try:
                value = orjson.loads(v)
            except orjson.JSONDecodeError:
                value = text
            if key in _TEXT_METADATA and not isinstance(value, str):
                value = text
            md[key] = value
    return {"name": f.name, "type": _type_to_delta(f.type), "nullable": f.nullable, "metadata": md}


def schema_to_json(schema: pa.Schema) -> str:
    """Arrow schema → ``schemaString``."""
    doc = {"type": "struct", "fields": [field_to_delta(f) for f in schema]}
    return orjson.dumps(doc).decode()


def normalize_schema(schema: pa.Schema) -> pa.Schema:
    """The canonical arrow schema for a table: what Delta's types map back to."""
    return schema_from_json(schema_to_json(schema))


# --------------------------------------------------------------------------------------------
# Column names: Delta is case-preserving but case-insensitive
# --------------------------------------------------------------------------------------------

#: Characters a column name may not hold without column mapping (delta-spark
#: ``SchemaUtils.checkFieldNames`` / ``findInvalidColumnNames``): they are Parquet schema syntax,
#: and without column mapping a column's name is its name in the Parquet files (and, for a
#: partition column, in the folder names). Under column mapping files use physical names instead.
INVALID_NAME_CHARS = " ,;{}()\n\t="


def field_index(fields: Sequence[pa.Field], name: str) -> int | None:
    """Position of the field ``name`` names among ``fields``: the exact match, else the one
    case-insensitive match (Delta resolves names as Spark does: case-insensitively, case kept).
    The exact match first, so a table written before names were checked (``a`` and ``A``) still
    resolves both; None when nothing, or more than one field, matches."""
    for i, f in enumerate(fields):
        if f.name == name:
            return i
    low = name.lower()
    hits = [i for i, f in enumerate(fields) if f.name.lower() == low]
    return hits[0] if len(hits) == 1 else None


def pair_fields(data: Sequence[pa.Field], table: Sequence[pa.Field], path: str = "") -> list[int | None]:
    """For each field of ``data``, the position of the ``table`` field it is (None: a new one).

    Two data fields that name the same table field (``id`` and ``ID`` for ``id``) are refused:
    which one's values the column would get is not for a writer to guess."""
    out: list[int | None] = []
    taken: dict[int, str] = {}
    for f in data:
        j = field_index(table, f.name)
        if j is not None:
            if j in taken:
                raise SchemaMismatchError(
                    f"the data has columns {path + taken[j]!r} and {path + f.name!r}, which both name the "
                    f"table's column {path + table[j].name!r} (Delta compares column names case-insensitively)")
            taken[j] = f.name
        out.append(j)
    return out


def renamed_like(data: pa.DataType, table: pa.DataType, path: str = "") -> pa.DataType:
    """``data`` with every struct field that matches one of ``table`` (case-insensitively) named
    as the table names it, at every depth: what a write stores is the table's spelling, as Delta's
    ``SchemaUtils.normalizeColumnNames`` does. The layout is unchanged, so arrays take the new
    type with :func:`view_as` (no copy). Fields the table lacks keep their names."""
    if pa.types.is_struct(data) and pa.types.is_struct(table):
        mine, theirs = child_fields(data), child_fields(table)
        fields = []
        for f, j in zip(mine, pair_fields(mine, theirs, path)):
            if j is not None:
                name = theirs[j].name
                f = f.with_name(name).with_type(renamed_like(f.type, theirs[j].type, f"{path}{name}."))
            fields.append(f)
        return pa.struct(fields)
    if pa.types.is_map(data) and pa.types.is_map(table):
        key = renamed_like(data.key_type, table.key_type, f"{path}key.")
        item = renamed_like(data.item_type, table.item_type, f"{path}value.")
        return pa.map_(data.key_field.with_type(key), data.item_field.with_type(item), data.keys_sorted)
    if _is_list(data) and _is_list(table):
        element = data.value_field.with_type(renamed_like(data.value_type, table.value_type, f"{path}element."))
        if pa.types.is_fixed_size_list(data):
            return pa.list_(element, data.list_size)
        return pa.large_list(element) if pa.types.is_large_list(data) else pa.list_(element)
    return data


def schema_renamed_like(data: pa.Schema, table: pa.Schema) -> pa.Schema:
    """:func:`renamed_like` for a whole schema (top-level columns and their nested fields)."""
    renamed = renamed_like(pa.struct(list(data)), pa.struct(list(table)))
    return pa.schema(child_fields(renamed), metadata=data.metadata)


def view_as(values: pa.Array | pa.ChunkedArray, t: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """``values`` as type ``t``, which differs from theirs in field names only (no copy)."""
    if values.type.equals(t):
        return values
    if isinstance(values, pa.ChunkedArray):
        return pa.chunked_array([_view(c, t) for c in values.chunks], t)
    return _view(values, t)


def _view(values: pa.Array, t: pa.DataType) -> pa.Array:
    from .struct_nulls import converted  # a NULL struct over a NOT NULL field blocks Arrow's view

    return converted(values, t, pa.Array.view)


def name_problems(schema: pa.Schema, column_mapped: bool) -> list[str]:
    """What Delta refuses in ``schema``'s columns, nested fields included: an empty name, a
    ``void`` (null) type, which old tables may hold but no change may add,
    two names equal up to case at one level (delta-spark ``checkColumnNameDuplication``: a
    case-insensitive reader could not tell them apart, deltalake and Spark refuse such a table)
    and, without column mapping, :data:`INVALID_NAME_CHARS` (``checkSchemaFieldNames``)."""
    problems: list[str] = []

    def walk(fields: list[pa.Field], path: str) -> None:
        seen: dict[str, str] = {}
        for f in fields:
            full = path + f.name
            if not f.name:
                problems.append(f"an empty column name{f' in {path[:-1]!r}' if path else ''}")
            elif "\x00" in f.name:  # deltalake and polars cannot open such a table; DuckDB cuts the name
                problems.append(f"a NUL character in column name {full!r}")
            elif not column_mapped and any(c in f.name for c in INVALID_NAME_CHARS):
                problems.append(f"invalid character(s) among ' ,;{{}}()\\n\\t=' in column name {full!r} "
                                f"(allowed only with column mapping: delta.columnMapping.mode = 'name')")
            low = f.name.lower()
            if low in seen:
                problems.append(f"duplicate column(s) {path + seen[low]!r} and {full!r} "
                                f"(Delta compares column names case-insensitively)")
            else:
                seen[low] = f.name
            if pa.types.is_null(f.type):
                problems.append(f"column {full!r} of type void (no values but NULL; Delta refuses it in a new "
                                f"column: cast it to the type it should have)")
            _walk_type(f.type, full + ".")

    def _walk_type(t: pa.DataType, path: str) -> None:
        if pa.types.is_struct(t):
            walk(child_fields(t), path)
        else:
            for part, inner in _nested(t):
                _walk_type(inner, f"{path}{part}.")

    walk(list(schema), "")
    return problems


def check_field_names(schema: pa.Schema, column_mapped: bool, before: pa.Schema | None = None) -> None:
    """Refuse a schema whose column names Delta refuses (:func:`name_problems`), with a
    :class:`SchemaMismatchError` raised before anything is written. ``before``: the table's
    schema so far, whose own problems (a table written before these checks) a change that
    does not add them may keep — a change must not add a bad name, it need not repair old ones."""
    problems = name_problems(schema, column_mapped)
    if before is not None:
        old = set(name_problems(before, column_mapped))
        problems = [p for p in problems if p not in old]
    if problems:
        raise SchemaMismatchError(f"Delta refuses this schema: found {'; '.join(problems)}")


def merge_schemas(table_schema: pa.Schema, data_schema: pa.Schema) -> pa.Schema:
    """Schema evolution (``schema_mode="merge"``, MERGE ``with_schema_evolution()``): new columns
    at the end, new fields of a struct column at the end of the struct (nullable); the rest stays.
    A data column matches a table column case-insensitively (:func:`field_index`) and keeps the
    table's spelling; a new one keeps its own. Whether a column's values fit its type is the
    write's cast to decide, as without merge."""
    fields = list(table_schema)
    for f, i in zip(data_schema, pair_fields(list(data_schema), list(table_schema))):
        if i is not None:
            fields[i] = fields[i].with_type(with_added_fields(fields[i].type, f.type, f"{fields[i].name}."))
        else:
            if pa.types.is_null(f.type):  # all-NULL data with no type: Delta refuses a void column
                raise SchemaMismatchError(f"new column {f.name!r} is null in the data, which gives it no Delta "
                                          f"type: cast it to the type the column should have")
            try:
                fields.append(normalize_schema(pa.schema([f])).field(0).with_nullable(True))
            except SchemaMismatchError as exc:
                raise SchemaMismatchError(f"new column {f.name!r} is {f.type} in the data, which gives it no Delta "
                                          f"type ({exc}): cast it to the type the column should have") from None
    return pa.schema(fields, metadata=table_schema.metadata)


def is_list_type(t: pa.DataType) -> bool:
    """Any Arrow list layout (Delta's array)."""
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def is_text_type(t: pa.DataType) -> bool:
    """Any Arrow string layout (Delta's string)."""
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


_is_list = is_list_type


def _nested(t: pa.DataType) -> list[tuple[str, pa.DataType]]:
    """(path part, type) of the children a cast matches by position rather than by name."""
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [("element", t.value_type)]
    if pa.types.is_map(t):
        return [("key", t.key_type), ("value", t.item_type)]
    return []


def dropped_fields(data: pa.DataType, table: pa.DataType, path: str = "") -> list[str]:
    """Nested fields of ``data`` that ``table`` has no place for: Arrow's cast of a struct drops
    them without a word, so a write must refuse them (or merge them in) first. A field matches
    case-insensitively (:func:`field_index`), as :func:`renamed_like` then names it."""
    if pa.types.is_struct(data) and pa.types.is_struct(table):
        out = []
        mine, theirs = child_fields(data), child_fields(table)
        for f, j in zip(mine, pair_fields(mine, theirs, path)):
            out += [path + f.name] if j is None else dropped_fields(f.type, theirs[j].type, f"{path}{f.name}.")
        return out
    pairs = list(zip(_nested(data), _nested(table)))
    return [d for (part, dt), (_, tt) in pairs for d in dropped_fields(dt, tt, f"{path}{part}.")]


def missing_required_fields(data: pa.DataType, table: pa.DataType, path: str = "") -> list[str]:
    """NOT NULL struct fields of ``table`` that ``data`` lacks, at any depth (in structs, list
    elements, map keys and values), as paths under ``path``.

    Why: a missing nullable field is filled with NULLs, but a NOT NULL one has no value to take,
    so Delta refuses the write (DELTA_MISSING_NOT_NULL_COLUMN_VALUE) where Arrow's struct cast
    would fail with an untyped error. Fields match case-insensitively, as :func:`dropped_fields`."""
    if pa.types.is_struct(data) and pa.types.is_struct(table):
        mine, theirs = child_fields(data), child_fields(table)
        given = {j: f for f, j in zip(mine, pair_fields(mine, theirs, path)) if j is not None}
        out: list[str] = []
        for j, t in enumerate(theirs):
            if j in given:
                out += missing_required_fields(given[j].type, t.type, f"{path}{t.name}.")
            elif not t.nullable:
                out.append(path + t.name)
        return out
    pairs = list(zip(_nested(data), _nested(table)))
    return [m for (part, dt), (_, tt) in pairs for m in missing_required_fields(dt, tt, f"{path}{part}.")]


def with_added_fields(table: pa.DataType, data: pa.DataType, path: str = "") -> pa.DataType:
    """``table`` with the struct fields only ``data`` has appended (nullable, canonical types),
    at every depth: what schema evolution adds inside an existing column. Fields match
    case-insensitively (:func:`field_index`): ``A`` in the data is the table's ``a``, not a new one."""
    if pa.types.is_struct(table) and pa.types.is_struct(data):
        fields = child_fields(table)
        mine = child_fields(data)
        for f, j in zip(mine, pair_fields(mine, fields, path)):
            if j is None:
                fields.append(normalize_schema(pa.schema([f])).field(0).with_nullable(True))
            else:
                fields[j] = fields[j].with_type(with_added_fields(fields[j].type, f.type, f"{path}{fields[j].name}."))
        return pa.struct(fields)
    if (pa.types.is_list(table) or pa.types.is_large_list(table)) and _nested(data):
        element = with_added_fields(table.value_type, data.value_type, f"{path}element.")
        if element.equals(table.value_type):
            return table
        value = table.value_field.with_type(element)
        return pa.large_list(value) if pa.types.is_large_list(table) else pa.list_(value)
    if pa.types.is_map(table) and pa.types.is_map(data):
        item = with_added_fields(table.item_type, data.item_type, f"{path}value.")
        return table if item.equals(table.item_type) else pa.map_(table.key_field, table.item_field.with_type(item))
    return table


# --------------------------------------------------------------------------------------------
# Walking nested fields
# --------------------------------------------------------------------------------------------


Level = Callable[[list[pa.Field]], list[pa.Field]]


def map_struct_fields(t: pa.DataType, level: Level) -> pa.DataType:
    """``t`` with the fields of each struct in it replaced by ``level(fields)``; lists and maps
    are walked through. ``level`` sees one struct's fields together (to keep sibling names
    apart) and recurses into their types itself, so it chooses the order. A variant is a leaf:
    its ``value`` and ``metadata`` fields keep their names and get no ids."""
    if is_variant_storage(t):
        return t
    if pa.types.is_struct(t):
        return pa.struct(level(list(t)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(map_struct_fields(t.value_type, level)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(map_struct_fields(t.value_type, level)), t.list_size)
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(map_struct_fields(t.value_type, level)))
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(map_struct_fields(t.key_type, level)),
                       t.item_field.with_type(map_struct_fields(t.item_type, level)), t.keys_sorted)
    return t


def each_field(change: Callable[[pa.Field], pa.Field]) -> Level:
    """A level function applying ``change`` to every field at every depth."""
    def level(fields: list[pa.Field]) -> list[pa.Field]:
        return [change(f.with_type(map_struct_fields(f.type, level))) for f in fields]

    return level
