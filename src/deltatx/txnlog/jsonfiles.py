"""JSON ``add``/``remove`` lines → columnar file actions, parsed by Arrow's JSON reader.

Why: a long or wide log holds hundreds of thousands of file actions. Parsing each line into a
Python dict and then building Arrow columns costs ~10 µs and ~3 KB of short-lived objects per
action (a 1M-add log took tens of seconds). Arrow's C++ reader parses newline-joined lines straight
into columns, in parallel.

The reader is strict where it matters: the protocol's fields get explicit types, so a wrong type
fails the whole batch. Any failure raises :class:`NotColumnar`, and the caller falls back to the
line-by-line parser, which names the bad version and line in a CorruptLogError — or, when nothing
was wrong (an unknown field whose type changes between lines, say), simply does the slow thing.

``partitionValues`` and ``tags`` are string maps in the protocol; Arrow's JSON reader cannot build
maps, so they are read as inferred structs and turned into maps here, column by column.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from .actions import _MAP_FIELDS as _MAPS
from .actions import _REQUIRED, FILE_SCHEMA, REMOVE_SCHEMA, STRING_MAP

#: below this many lines the per-call cost of the Arrow reader (~0.2 ms) exceeds the dict path
MIN_COLUMNAR_LINES = 64

_SCHEMAS = {"add": FILE_SCHEMA, "remove": REMOVE_SCHEMA}


class NotColumnar(Exception):
    """The lines could not be read columnar; parse them line by line instead."""


def _parse_options(kind: str) -> pj.ParseOptions:
    schema = _SCHEMAS[kind]
    typed = pa.struct([f for f in schema if f.name not in _MAPS])
    return pj.ParseOptions(explicit_schema=pa.schema([(kind, typed)]), unexpected_field_behavior="infer",
                           newlines_in_values=False)


_OPTIONS = {kind: _parse_options(kind) for kind in _SCHEMAS}


def file_lines_table(blob: bytes, kind: str) -> pa.Table:
    """Columnar ``kind`` ("add"/"remove") actions from newline-joined ``{"<kind>": {...}}`` lines.

    Raises NotColumnar on anything unexpected (wrong type, missing required field, a line
    longer than a block, a map value that is not a string).
    """
    schema = _SCHEMAS[kind]
    try:
        block = max(1 << 20, min(len(blob) + 1, 1 << 26))
        table = pj.read_json(pa.BufferReader(blob), parse_options=_OPTIONS[kind],
                             read_options=pj.ReadOptions(block_size=block))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError) as exc:
        raise NotColumnar(str(exc)) from None
    if table.column_names != [kind]:
        raise NotColumnar(f"lines other than {kind!r} actions")
    actions = table.column(kind).combine_chunks()
    if actions.null_count:
        raise NotColumnar(f"a line holds no {kind!r} object")
    fields = {actions.type.field(i).name: actions.field(i) for i in range(actions.type.num_fields)}
    columns = []
    for f in schema:
        column = fields.get(f.name)
        if column is None:
            column = pa.nulls(len(actions), f.type)
        elif f.name in _MAPS:
            column = _struct_to_map(column)
        if f.name in _REQUIRED[kind] and column.null_count:
            raise NotColumnar(f"required field {f.name} is missing or null")
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


def _struct_to_map(column: pa.Array) -> pa.Array:
    """An inferred ``struct<k1: string, k2: string|null, ...>`` column as ``map<string, string>``.

    Every key present in any line becomes an entry in every non-null row (a key missing from a
    line reads as a null value, which is what a missing partition value means).
    """
    n = len(column)
    if pa.types.is_null(column.type):
        return pa.nulls(n, STRING_MAP)
    if not pa.types.is_struct(column.type):
        raise NotColumnar(f"expected an object of strings, found {column.type}")
    names = [column.type.field(i).name for i in range(column.type.num_fields)]
    values = []
    for i, name in enumerate(names):
        child = column.field(i)
        if pa.types.is_null(child.type):
            child = pa.nulls(n, pa.string())
        elif not pa.types.is_string(child.type):
            raise NotColumnar(f"map value {name!r} is {child.type}, not a string")
        values.append(child)
    valid = np.ones(n, dtype=bool) if column.null_count == 0 else pc.is_valid(column).to_numpy(zero_copy_only=False)
    k = len(names)
    lengths = np.where(valid, k, 0).astype(np.int32)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    rows = np.flatnonzero(valid)
    if k and len(rows):
        # entry j of row r is values[j][r]: gather from the k value columns laid end to end
        index = (np.arange(k, dtype=np.int64)[None, :] * n + rows[:, None]).ravel()
        items = pa.concat_arrays(values).take(pa.array(index))
        keys = pa.array(np.tile(np.array(names, dtype=object), len(rows)), pa.string())
    else:
        items, keys = pa.array([], pa.string()), pa.array([], pa.string())
    mask = None if column.null_count == 0 else pa.array(~valid)
    return pa.MapArray.from_arrays(pa.array(offsets), keys, items, type=STRING_MAP, mask=mask)
