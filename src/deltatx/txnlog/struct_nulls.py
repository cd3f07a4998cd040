"""NULL structs whose fields are NOT NULL: placeholder values under the NULL parents.

Delta lets a nullable struct column hold a NOT NULL field (``c struct<a: bigint NOT NULL>``):
the field has a value whenever the struct is not NULL. Arrow builds a NULL struct with NULL
children (``pa.nulls``, a cast of NULL, a missing column filled in), and both Parquet's writer
("declared non-nullable but contains nulls") and a zero-copy view as the table type refuse
such a child, although no reader ever sees it (the parent is NULL). So before writing, the
children's NULLs under NULL parents become placeholder values (zero, '', empty); a NULL where
the parent is present is left alone, for the NOT NULL checks to refuse.
"""

from __future__ import annotations

import datetime as dt
from contextlib import contextmanager
from decimal import Decimal
from typing import Any, Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SchemaMismatchError


def has_required_fields(t: pa.DataType) -> bool:
    """Whether ``t`` holds a struct with a NOT NULL field anywhere (the only case to fill)."""
    if pa.types.is_struct(t):
        return any(not f.nullable or has_required_fields(f.type) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return has_required_fields(t.value_type)
    if pa.types.is_map(t):
        return has_required_fields(t.key_type) or has_required_fields(t.item_type)
    return False


def fill_hidden_nulls(table: pa.Table) -> pa.Table:
    """``table`` with every NULL under a NULL struct in a NOT NULL field replaced by a placeholder."""
    for i, f in enumerate(table.schema):
        if has_required_fields(f.type):
            column = table.column(i)
            table = table.set_column(i, f, pa.chunked_array([fill_array(c) for c in column.chunks], f.type))
    return table


def fill_array(arr: pa.Array, target: pa.DataType | None = None) -> pa.Array:
    """One array of :func:`fill_hidden_nulls` (returned as is when nothing needs filling). With
    ``target`` (the same type up to field names and nullability, as :func:`schema.view_as` takes)
    the NOT NULL fields are ``target``'s and the result has that type."""
    t = target if target is not None else arr.type
    if not has_required_fields(t) or len(arr) == 0:
        return arr if target is None else arr.view(target)
    if pa.types.is_struct(t):
        valid = pc.is_valid(arr) if arr.null_count else None
        children = []
        for i, f in enumerate(t):
            child = fill_array(arr.field(i), f.type)  # the struct's slice of the child
            if not f.nullable and valid is not None and child.null_count:
                child = pc.if_else(valid, child, pa.scalar(_placeholder(f.type), f.type))
            children.append(child)
        mask = pc.invert(valid) if valid is not None else None
        return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)
    if arr.offset and arr.null_count:  # Arrow rebuilds no list from a slice's offsets with a mask
        arr = pa.concat_arrays([arr])
    mask = pc.is_null(arr) if arr.null_count else None
    if pa.types.is_map(t):
        return pa.MapArray.from_arrays(arr.offsets, fill_array(arr.keys, t.key_type),
                                       fill_array(arr.items, t.item_type), type=t, mask=mask)
    cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
    return cls.from_arrays(arr.offsets, fill_array(arr.values, t.value_type), type=t, mask=mask)


def converted(values: pa.Array, t: pa.DataType, convert: Callable[[pa.Array, pa.DataType], pa.Array]) -> pa.Array:
    """``convert(values, t)`` (Arrow's cast or view); where Arrow refuses because a NULL struct
    of ``t`` has NULLs under a NOT NULL field, ``values`` filled (:func:`fill_array`) as ``t``."""
    try:
        return convert(values, t)
    except pa.ArrowInvalid:
        if not has_required_fields(t):
            raise
        return fill_array(values, t)


def _placeholder(t: pa.DataType) -> Any:
    """A value of type ``t`` standing in under a NULL parent (never read)."""
    if pa.types.is_struct(t):
        return {f.name: (_placeholder(f.type) if not f.nullable else None) for f in t}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        return []
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return ""
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return b""
    if pa.types.is_boolean(t):
        return False
    if pa.types.is_decimal(t):
        return Decimal(0)
    if pa.types.is_floating(t):
        return 0.0
    if pa.types.is_date(t):
        return dt.date(1970, 1, 1)
    if pa.types.is_timestamp(t):
        return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc if t.tz else None)
    return 0


@contextmanager
def not_null_violations_typed() -> Iterator[None]:
    """Parquet's writer is where a NULL in a NOT NULL array element or map value (or a struct
    field under a present struct) is found: say so as a SchemaMismatchError."""
    try:
        yield
    except pa.ArrowInvalid as exc:
        if "declared non-nullable but contains nulls" not in str(exc):
            raise
        raise SchemaMismatchError(f"the data has a NULL where the table's type allows none ({exc}): an array "
                                  f"element, map value or struct field declared NOT NULL") from None
