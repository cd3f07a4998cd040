"""Variant columns on their way into Parquet: a NULL variant with NULL children.

A ``variant`` is stored as a nullable struct whose ``value`` and ``metadata`` are REQUIRED binaries
(PROTOCOL.md "Variant data in Parquet"). A NULL variant is a NULL struct; what its children hold
underneath is never read. pyarrow's Parquet writer still refuses a NOT NULL child with a null
slot, and the arrays Arrow makes for a NULL of the struct type (``pa.nulls``, a NULL literal of
an UPDATE, a column a MERGE insert leaves out) have exactly that. This fills those hidden slots
with empty binaries before the file is written; the values a reader sees do not change.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..txnlog.schema import type_holds


def is_variant_like(t: pa.DataType) -> bool:
    """A struct of exactly the binaries ``value`` and ``metadata`` (any order, any nullability):
    the variant type, or what one looks like before it is cast to the table's types."""
    return (pa.types.is_struct(t) and t.num_fields == 2
            and {t.field(0).name, t.field(1).name} == {"value", "metadata"}
            and all(pa.types.is_binary(t.field(i).type) or pa.types.is_large_binary(t.field(i).type)
                    for i in range(2)))


def holds_variant(t: pa.DataType) -> bool:
    """Whether a column of type ``t`` has a variant in it (struct fields, list elements...)."""
    return type_holds(t, is_variant_like)


def storable(table: pa.Table) -> pa.Table:
    """``table`` with the children of its NULL variants filled (see the module docstring)."""
    for i, field in enumerate(table.schema):
        if holds_variant(field.type):
            column = table.column(i)
            fixed = pa.chunked_array([_fill(chunk) for chunk in column.chunks], type=field.type)
            table = table.set_column(i, field, fixed)
    return table


def _fill(arr: pa.Array) -> pa.Array:
    t = arr.type
    if pa.types.is_struct(t):
        children = [arr.field(i) for i in range(t.num_fields)]
        if is_variant_like(t):
            if not any(c.null_count for c in children):
                return arr
            children = [pc.fill_null(c, b"") for c in children]
        else:
            children = [_fill(c) if holds_variant(c.type) else c for c in children]
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        cls = pa.ListArray if pa.types.is_list(t) else pa.LargeListArray
        mask = arr.is_null() if arr.null_count else None
        return cls.from_arrays(arr.offsets, _fill(arr.values), type=t, mask=mask)
    return arr
