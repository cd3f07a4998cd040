"""Type widening (reader-writer feature ``typeWidening``): which type changes are allowed, and
where a table remembers them.

A widened column keeps its old data files: a file written as ``integer`` stays an ``integer``
file after the column became ``long``, and readers convert its values to the wider type
(io/reader.py casts every file column to the table type). So the rules are the protocol's list
of changes whose every old value has exactly one value in the new type (PROTOCOL.md, "Type
Widening"):

- ``byte`` → ``short`` → ``integer`` → ``long``;
- ``float`` → ``double``; ``byte``/``short``/``integer`` → ``double``;
- ``date`` → ``timestamp_ntz``;
- ``decimal(p, s)`` → ``decimal(p + k1, s + k2)`` with ``k1 >= k2 >= 0``;
- ``byte``/``short``/``integer`` → ``decimal(10 + k1, k2)``, ``long`` → ``decimal(20 + k1, k2)``,
  ``k1 >= k2 >= 0``.

Tables that also support Iceberg compatibility (V1/V2) may only take the changes Iceberg's schema
evolution knows (integer widening, ``float`` → ``double``, decimal precision increase).

Each change is recorded in the ``delta.typeChanges`` metadata of the nearest enclosing struct field
(``fieldPath`` names the array element / map key or value below it), so that readers can check
they understand every change a table went through (:func:`check_type_changes`).
"""

from __future__ import annotations

import re
from typing import Any, Iterator

import orjson
import pyarrow as pa

from ..errors import SchemaMismatchError, TypeChangeError, UnsupportedFeatureError
from .actions import Metadata
from .schema import schema_from_json, type_from_delta, type_to_delta

ENABLE_PROPERTY = "delta.enableTypeWidening"
TYPE_CHANGES = "delta.typeChanges"
#: the feature's names: the released one, and the preview name older Delta versions wrote
FEATURES = ("typeWidening", "typeWidening-preview")
ICEBERG_FEATURES = ("icebergCompatV1", "icebergCompatV2")

_INTEGER_RANK = {"byte": 1, "short": 2, "integer": 3, "long": 4}
#: digits an integer type needs as a decimal: the smallest decimal(p, 0) holding all its values
_INTEGER_DECIMAL_DIGITS = {"byte": 10, "short": 10, "integer": 10, "long": 20}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_MAX_PRECISION = 38


def _decimal(name: str) -> tuple[int, int] | None:
    m = _DECIMAL.match(name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _decimal_widens(p: int, s: int, to_p: int, to_s: int) -> bool:
    """``decimal(p, s)`` → ``decimal(p + k1, s + k2)`` with ``k1 >= k2 >= 0``."""
    k1, k2 = to_p - p, to_s - s
    return k1 >= k2 >= 0 and to_p <= _MAX_PRECISION


def is_supported_change(from_type: str, to_type: str) -> bool:
    """Whether the protocol allows widening Delta type ``from_type`` to ``to_type``."""
    if from_type == to_type:
        return False
    if from_type in _INTEGER_RANK:
        if to_type in _INTEGER_RANK:
            return _INTEGER_RANK[to_type] > _INTEGER_RANK[from_type]
        if to_type == "double":
            return from_type != "long"
        target = _decimal(to_type)
        return target is not None and _decimal_widens(_INTEGER_DECIMAL_DIGITS[from_type], 0, *target)
    if from_type == "float":
        return to_type == "double"
    if from_type == "date":
        return to_type == "timestamp_ntz"
    source, target = _decimal(from_type), _decimal(to_type)
    return source is not None and target is not None and _decimal_widens(*source, *target)


def is_iceberg_compatible(from_type: str, to_type: str) -> bool:
    """Whether Iceberg V2 schema evolution knows this (supported) change too: integer widening,
    ``float`` → ``double``, and a decimal precision increase that keeps the scale."""
    if from_type in _INTEGER_RANK:
        return to_type in _INTEGER_RANK
    if from_type == "float":
        return to_type == "double"
    source, target = _decimal(from_type), _decimal(to_type)
    return source is not None and target is not None and source[1] == target[1]


# --------------------------------------------------------------------------------------------
# Reading the recorded changes
# --------------------------------------------------------------------------------------------


def _children(t: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(t):
        return list(t)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [t.value_field]
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    return []


def _struct_fields(fields: list[pa.Field], prefix: str = "") -> Iterator[tuple[str, pa.Field]]:
    """Every struct field (the fields that can hold metadata), with its dotted path."""
    for f in fields:
        path = f"{prefix}{f.name}"
        yield path, f
        stack = [f.type]
        while stack:  # struct fields inside arrays and maps hold their own metadata
            t = stack.pop()
            if pa.types.is_struct(t):
                yield from _struct_fields(list(t), f"{path}.")
            else:
                stack.extend(c.type for c in _children(t))


def recorded_changes(schema: pa.Schema) -> list[tuple[str, dict[str, Any]]]:
    """(column path, change) for every ``delta.typeChanges`` entry, in schema order."""
    out = []
    for path, f in _struct_fields(list(schema)):
        raw = (f.metadata or {}).get(TYPE_CHANGES.encode())
        if raw is None:
            continue
        changes = _changes_list(raw)
        if changes is None:
            raise UnsupportedFeatureError(
                f"column {path!r} has malformed {TYPE_CHANGES} metadata {raw[:80]!r}; deltatx cannot tell "
                f"which type changes its data files went through",
                feature="typeWidening", kind="reader",
            )
        out += [(path, c) for c in changes]
    return out


def _changes_list(raw: bytes) -> list[dict[str, Any]] | None:
    """The recorded changes of one field (a JSON list; some writers nest it in a JSON string)."""
    try:
        changes = orjson.loads(raw)
        if isinstance(changes, str):
            changes = orjson.loads(changes)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(changes, list) or not all(isinstance(c, dict) for c in changes):
        return None
    return changes


def check_type_changes(metadata: Metadata) -> None:
    """PROTOCOL.md reader rule: fail on a recorded type change deltatx does not support (its old
    files would be read wrong)."""
    if TYPE_CHANGES not in metadata.schema_string:  # O(1)-ish: no change recorded at all
        return
    for path, change in recorded_changes(schema_from_json(metadata.schema_string)):
        old, new = change.get("fromType"), change.get("toType")
        if not (isinstance(old, str) and isinstance(new, str) and is_supported_change(old, new)):
            raise UnsupportedFeatureError(
                f"column {path!r} went through the type change {old!r} -> {new!r}, which deltatx cannot "
                f"read its old data files with",
                feature="typeWidening", kind="reader",
            )


# --------------------------------------------------------------------------------------------
# Applying a change to a schema
# --------------------------------------------------------------------------------------------


def _type_name(t: pa.DataType) -> str:
    name = type_to_delta(t)
    if not isinstance(name, str):
        raise TypeChangeError(f"type widening changes primitive types only, not {t}")
    return name


def as_arrow_type(new_type: Any) -> pa.DataType:
    """A type given as arrow or as a Delta type name, as the arrow type a table schema uses."""
    if isinstance(new_type, str):
        try:
            return type_from_delta(new_type.strip().lower().replace(" ", ""))
        except Exception:
            raise TypeChangeError(f"{new_type!r} is not a Delta type name") from None
    if not isinstance(new_type, pa.DataType):
        raise TypeChangeError(f"the new type must be a pyarrow DataType or a Delta type name, not {type(new_type).__name__}")
    return type_from_delta(_type_name(new_type))


def widen(schema: pa.Schema, path: tuple[str, ...], new_type: pa.DataType, *,
          iceberg: bool = False) -> tuple[pa.Schema, str, str]:
    """``schema`` with the column at ``path`` widened to ``new_type`` and the change recorded.

    ``path`` names a top-level column, then struct fields, ``element`` (arrays), ``key`` /
    ``value`` (maps). Returns (new schema, old Delta type, new Delta type); raises
    :class:`TypeChangeError` for a change the protocol (or Iceberg compatibility) forbids.
    """
    top = _find(list(schema), path[0], path)
    changed, old, new = _widen_field(top, path[1:], new_type, (), path, iceberg)
    if old == new:
        return schema, old, new
    fields = [changed if f.name == top.name else f for f in schema]
    return pa.schema(fields, metadata=schema.metadata), old, new


def _find(fields: list[pa.Field], name: str, path: tuple[str, ...]) -> pa.Field:
    for f in fields:
        if f.name == name:
            return f
    matches = [f for f in fields if f.name.lower() == name.lower()]
    if len(matches) == 1:
        return matches[0]
    raise TypeChangeError(f"column {'.'.join(path)!r} does not exist (no field {name!r} there)")


def _widen_field(f: pa.Field, rest: tuple[str, ...], new_type: pa.DataType, field_path: tuple[str, ...],
                 path: tuple[str, ...], iceberg: bool) -> tuple[pa.Field, str, str]:
    t, record, old, new = _widen_type(f.type, rest, new_type, field_path, path, iceberg)
    metadata = dict(f.metadata or {})
    if record is not None:  # this is the nearest struct field above the changed type
        previous = _changes_list(metadata[TYPE_CHANGES.encode()]) if TYPE_CHANGES.encode() in metadata else []
        metadata[TYPE_CHANGES.encode()] = orjson.dumps((previous or []) + [record])
    return pa.field(f.name, t, f.nullable, metadata=metadata or None), old, new


def _widen_type(t: pa.DataType, rest: tuple[str, ...], new_type: pa.DataType, field_path: tuple[str, ...],
                path: tuple[str, ...], iceberg: bool) -> tuple[pa.DataType, dict[str, Any] | None, str, str]:
    if not rest:
        old, new = _type_name(t), _type_name(new_type)
        if old == new:
            return t, None, old, new
        if not is_supported_change(old, new):
            raise TypeChangeError(
                f"cannot change column {'.'.join(path)!r} from {old} to {new}: type widening allows only "
                f"byte→short→integer→long, float→double, byte/short/integer→double, date→timestamp_ntz, "
                f"and decimal widenings (precision and scale up by k1 ≥ k2 ≥ 0, integers to decimal(10+/20+, ..))"
            )
        if iceberg and not is_iceberg_compatible(old, new):
            raise TypeChangeError(
                f"cannot change column {'.'.join(path)!r} from {old} to {new}: the table is Iceberg-compatible "
                f"(icebergCompatV1/V2), and Iceberg cannot evolve that type change"
            )
        record: dict[str, Any] = {"fromType": old, "toType": new}
        if field_path:
            record["fieldPath"] = ".".join(field_path)
        return new_type, record, old, new
    head, tail = rest[0], rest[1:]
    if pa.types.is_struct(t):
        child = _find(list(t), head, path)
        changed, old, new = _widen_field(child, tail, new_type, (), path, iceberg)
        return pa.struct([changed if c.name == child.name else c for c in t]), None, old, new
    if pa.types.is_list(t) and head == "element":
        inner, record, old, new = _widen_type(t.value_type, tail, new_type, field_path + ("element",), path, iceberg)
        return pa.list_(t.value_field.with_type(inner)), record, old, new
    if pa.types.is_map(t) and head in ("key", "value"):
        item = t.key_field if head == "key" else t.item_field
        inner, record, old, new = _widen_type(item.type, tail, new_type, field_path + (head,), path, iceberg)
        key = inner if head == "key" else t.key_type
        value = t.item_field if head == "key" else t.item_field.with_type(inner)
        return pa.map_(key, value), record, old, new
    raise TypeChangeError(
        f"column {'.'.join(path)!r} does not exist: {head!r} is not a field of {t} "
        f"(arrays take 'element', maps 'key' or 'value')"
    )


# --------------------------------------------------------------------------------------------
# Widening by schema evolution
# --------------------------------------------------------------------------------------------


def is_automatic_change(from_type: str, to_type: str) -> bool:
    """Whether schema evolution (an append with ``schema_mode="merge"``, MERGE with schema
    evolution) widens ``from_type`` to ``to_type`` by itself on a table with type widening on.
    Delta's rule: every supported change except integer → decimal / double, which must be made
    explicitly (so integers do not silently become fractional)."""
    if not is_supported_change(from_type, to_type):
        return False
    return not (from_type in _INTEGER_RANK and to_type not in _INTEGER_RANK)


def widen_to_data(schema: pa.Schema, data: pa.Schema, *, iceberg: bool = False) -> pa.Schema:
    """``schema`` with each column or nested field that ``data`` holds in a wider type eligible
    for automatic widening (:func:`is_automatic_change`) widened to it and the change recorded,
    as Delta's schema evolution does when ``delta.enableTypeWidening`` is on. Fields match by name
    case-insensitively; array elements and map keys/values by position. Other differences are
    left to the write's cast to accept or refuse."""
    for path, new_type in _automatic(list(schema), list(data), ()):
        schema, _, _ = widen(schema, path, new_type, iceberg=iceberg)
    return schema


def _automatic(table: list[pa.Field], data: list[pa.Field], prefix: tuple[str, ...]
               ) -> Iterator[tuple[tuple[str, ...], pa.DataType]]:
    by_name = {f.name.lower(): f for f in table}
    for f in data:
        mine = next((t for t in table if t.name == f.name), None) or by_name.get(f.name.lower())
        if mine is not None:
            yield from _automatic_type(mine.type, f.type, prefix + (mine.name,))


def _automatic_type(table: pa.DataType, data: pa.DataType, path: tuple[str, ...]
                    ) -> Iterator[tuple[tuple[str, ...], pa.DataType]]:
    if pa.types.is_struct(table) and pa.types.is_struct(data):
        yield from _automatic(list(table), list(data), path)
    elif pa.types.is_map(table) and pa.types.is_map(data):
        yield from _automatic_type(table.key_type, data.key_type, path + ("key",))
        yield from _automatic_type(table.item_type, data.item_type, path + ("value",))
    elif (pa.types.is_list(table) or pa.types.is_large_list(table)) and (
            pa.types.is_list(data) or pa.types.is_large_list(data)):
        yield from _automatic_type(table.value_type, data.value_type, path + ("element",))
    elif not pa.types.is_nested(table) and not pa.types.is_nested(data):
        old, new = type_to_delta(table), _delta_name(data)
        if isinstance(old, str) and new is not None and is_automatic_change(old, new):
            yield path, type_from_delta(new)


def _delta_name(t: pa.DataType) -> str | None:
    """The Delta type a data column's Arrow type stands for (None: no primitive Delta type)."""
    try:
        name = type_to_delta(t)
    except SchemaMismatchError:  # an Arrow type Delta has no name for (uint64, ...): the cast decides
        return None
    return name if isinstance(name, str) else None
