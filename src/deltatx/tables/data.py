"""Turning what users pass (arrow, readers, pandas) into batches that fit the table's schema.

Why here and not in the writer: the rules are table rules — which missing columns may be
filled with nulls, which casts are safe, when schema merge applies — and they must give a
typed :class:`SchemaMismatchError` *before* any file is written.
"""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidArgumentError, PredicateError, SchemaMismatchError
from ..expr.values import is_number
from ..txnlog.schema import (
    check_field_names,
    dropped_fields,
    is_list_type,
    is_text_type,
    is_variant_storage,
    merge_schemas,
    missing_required_fields,
    normalize_schema,
    renamed_like,
    schema_renamed_like,
    type_holds,
    view_as,
)
from .defaults import default_values, fill
from .variant import check_variant_columns, has_variant


def to_reader(data: Any) -> pa.RecordBatchReader:
    """Accept a pyarrow Table / RecordBatch / RecordBatchReader or a pandas DataFrame."""
    if isinstance(data, pa.RecordBatchReader):
        return data
    if isinstance(data, pa.Table):
        return data.to_reader()
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data]).to_reader()
    mod = type(data).__module__
    if mod.startswith("pandas"):
        try:
            return pa.Table.from_pandas(_named_index_as_columns(data), preserve_index=False).to_reader()
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise SchemaMismatchError(f"the DataFrame cannot be converted to Arrow: {exc} (an object column "
                                      f"of mixed types? give it one type)") from None
    if hasattr(data, "__arrow_c_stream__"):  # polars, duckdb relations, ...
        return pa.RecordBatchReader.from_stream(data)
    from ..errors import ArgumentTypeError

    raise ArgumentTypeError(  # a TypeError too
        f"cannot write {type(data).__name__}: pass a pyarrow Table, RecordBatch, "
        f"RecordBatchReader, or a pandas DataFrame"
    )


def _named_index_as_columns(frame: Any) -> Any:
    """A pandas DataFrame with its named index levels as columns (as ``pa.table(df)`` and
    deltalake keep them); an unnamed index is row numbering, not data."""
    named = [n for n in frame.index.names if n is not None]
    if not named:
        return frame
    clash = [n for n in named if n in frame.columns]
    if clash:
        raise SchemaMismatchError(f"the DataFrame's index level(s) {clash} have the names of columns too")
    return frame.reset_index(level=named)


def check_unique_names(schema: pa.Schema, what: str = "the data") -> None:
    """Column names must be unique: a second ``id`` would otherwise be dropped without a word.
    (Names that differ in case only are told apart against the table: :func:`with_table_names`
    refuses two that name one column, and a schema merge refuses them as two new columns.)"""
    seen: set[str] = set()
    for name in schema.names:
        if name in seen:
            raise SchemaMismatchError(f"{what} has the column {name!r} more than once")
        seen.add(name)


def data_schema(reader: pa.RecordBatchReader) -> pa.Schema:
    """The incoming schema in Delta's canonical types where a column has one. A column whose
    Arrow type has none (an all-null column, uint64) stays as it is: its cast into the table's
    column decides, and schema merge refuses it as a new column."""
    check_unique_names(reader.schema)
    try:
        return normalize_schema(reader.schema)  # the usual case: every type has a Delta name
    except SchemaMismatchError:
        pass
    fields = []
    for f in reader.schema:
        try:
            fields.append(normalize_schema(pa.schema([f])).field(0))
        except SchemaMismatchError:
            fields.append(f)
    return pa.schema(fields)


def with_table_names(reader: pa.RecordBatchReader, table_schema: pa.Schema) -> pa.RecordBatchReader:
    """``reader`` with its columns (and nested struct fields) spelled as the table spells them.

    Delta matches column names case-insensitively and keeps the table's case (delta-spark
    ``SchemaUtils.normalizeColumnNames``), so data with ``ID`` writes the column ``id``. Renamed
    here, once, before anything looks at the names (schema merge, generated and identity columns,
    the cast): every later step matches exactly. Two data columns naming one table column are a
    :class:`SchemaMismatchError`; columns the table lacks keep their case (a schema merge adds them)."""
    check_unique_names(reader.schema)  # a name given twice is that, not two spellings of one
    schema = schema_renamed_like(reader.schema, table_schema)
    if schema.equals(reader.schema):
        return reader

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            arrays = [view_as(batch.column(i), f.type) for i, f in enumerate(schema)]
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


def resolve_write_schema(table_schema: pa.Schema, incoming: pa.Schema, schema_mode: str | None,
                         column_mapped: bool = False, widening: "Widening | None" = None) -> pa.Schema:
    """The schema the table will have after this write (== table_schema unless merging).

    ``incoming`` matches the table's names case-insensitively (:func:`with_table_names`). A merge
    may not add a name Delta refuses (``column_mapped``: the table uses column mapping, which
    allows more names). With ``widening`` (the table has type widening on) a merge also widens
    the types the data holds wider, where Delta widens them by itself."""
    if schema_mode not in (None, "merge"):
        raise InvalidArgumentError(f"schema_mode must be None or 'merge', got {schema_mode!r}")
    incoming = schema_renamed_like(incoming, table_schema)  # callers that did not rename (Spark's writer)
    extra = [n for n in incoming.names if n not in table_schema.names]
    nested = [p for f in incoming if f.name in table_schema.names
              for p in dropped_fields(f.type, table_schema.field(f.name).type, f"{f.name}.")]
    if (extra or nested) and schema_mode != "merge":
        raise SchemaMismatchError(
            f"the data has column(s) {extra + nested} that the table does not have "
            f"(table columns: {table_schema.names}); pass schema_mode='merge' to add them"
        )
    merged = table_schema
    if extra or nested:
        from .defaults import without_new_defaults

        # a column added by evolution takes no DEFAULT from the data's schema: PROTOCOL.md
        # ("Default Columns") forbids adding a column and its default in one command
        merged = without_new_defaults(merge_schemas(table_schema, incoming), table_schema)
        check_field_names(merged, column_mapped, before=table_schema)
    if schema_mode == "merge" and widening is not None:
        merged = widening.apply(merged, incoming)
    for f in incoming:  # before any file is written: the cast would only fail as the writer pulls
        if f.name in merged.names:
            refuse_missing_required(f.type, merged.field(f.name).type, f.name)
    return merged


def refuse_missing_required(data: pa.DataType, table: pa.DataType, column: str, what: str = "the data") -> None:
    """Refuse values of type ``data`` for column ``column`` (type ``table``) when they lack a
    NOT NULL nested field: Delta fills a missing nullable field with NULLs but refuses a missing
    NOT NULL one (DELTA_MISSING_NOT_NULL_COLUMN_VALUE), and Arrow's cast would fail untyped."""
    missing = missing_required_fields(data, table, f"{column}.")
    if missing:
        raise SchemaMismatchError(
            f"{what} lacks the NOT NULL field(s) {missing} of column {column!r} ({table}): a missing "
            f"nullable field is filled with nulls, a NOT NULL one must be given; nothing was written")


class Widening:
    """Type widening by schema evolution on a table with ``delta.enableTypeWidening=true``
    (txnlog/type_widening.py has the rules); None where the table does not allow it."""

    def __init__(self, iceberg: bool) -> None:
        self.iceberg = iceberg  # Iceberg-compatible tables take only the changes Iceberg knows

    @classmethod
    def of(cls, properties: dict[str, str], protocol: Any) -> "Widening | None":
        from ..txnlog import type_widening
        from ..txnlog.features import writer_features
        from . import properties as props

        if not props.flag(properties, type_widening.ENABLE_PROPERTY, False):
            return None
        return cls(any(f in type_widening.ICEBERG_FEATURES for f in writer_features(protocol)))

    def apply(self, schema: pa.Schema, data: pa.Schema) -> pa.Schema:
        from ..txnlog import type_widening

        return type_widening.widen_to_data(schema, data, iceberg=self.iceberg)


def cast_value(values: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """``values`` as a column of type ``target`` takes them: a safe cast that never drops a
    nested field ``target`` has no place for (Arrow's struct cast drops those silently).
    Raises ``pa.ArrowInvalid``, which callers word as a SchemaMismatchError of their own.
    Nested fields match case-insensitively: ``struct<A>`` values fill ``struct<a>`` (Arrow's struct
    cast matches names exactly and would fill it with nulls)."""
    try:
        values = view_as(values, renamed_like(values.type, target))
    except SchemaMismatchError as exc:  # two fields naming one of the target's
        raise pa.ArrowInvalid(str(exc)) from None
    dropped = dropped_fields(values.type, target)
    if dropped:
        raise pa.ArrowInvalid(f"nested field(s) {dropped} are not in the table's type {target}; schema "
                              f"evolution (schema_mode='merge', MERGE with_schema_evolution()) adds them")
    missing = missing_required_fields(values.type, target)
    if missing:  # Arrow's cast fails on these with an ArrowTypeError no caller expects
        raise pa.ArrowInvalid(f"the value lacks the NOT NULL field(s) {missing} of {target}")
    if values.type.equals(target):
        # nothing to convert; Arrow's cast of a type to itself still fails on a NULL struct whose
        # NOT NULL fields hold NULLs beneath it (a typed NULL variant), which writers fill later
        return values
    if pa.types.is_list_view(values.type) or pa.types.is_large_list_view(values.type):
        values = _from_list_view(values)  # Arrow's own cast of a list view can build an invalid list
        if values.type.equals(target):
            return values
    numbers = (pa.types.is_decimal(values.type) and pa.types.is_floating(target)
               or pa.types.is_floating(values.type) and pa.types.is_decimal(target))
    as_text = is_text_type(target) and (pa.types.is_timestamp(values.type) or pa.types.is_floating(values.type))
    if numbers or as_text:
        # Spark's cast, where Arrow's differs: a DECIMAL as its nearest float (Arrow: 0.3 ->
        # 0.30000000000000004), a float rounded half up into a DECIMAL (0.125 -> 0.13; overflow
        # fails), timestamps and floats as Spark prints them ('2024-01-01 10:00:00.5', '1.0E20')
        from ..expr.rows import cast_values

        try:
            return cast_values(values, target)
        except PredicateError as exc:
            raise pa.ArrowInvalid(str(exc)) from None
    refused = _refused_conversion(values.type, target)
    if refused is not None:
        raise pa.ArrowInvalid(refused)
    cast = values.cast(target, safe=True)
    if _may_lose(values.type, target):
        lost = _first_lost(values, cast)
        if lost is not None:
            raise pa.ArrowInvalid(lost)
    return cast


#: up to this many (row, key) slots the duplicate-key check counts them in one array
_BINCOUNT_LIMIT = 32_000_000


def _holds_map(t: pa.DataType) -> bool:
    return type_holds(t, pa.types.is_map)


def _check_map_keys(values: pa.Array | pa.ChunkedArray, name: str) -> None:
    """Refuse a map with one key twice: Parquet's MAP is no multi-map, Spark refuses to build
    one, and engines read it differently (polars keeps the last entry, others both)."""
    import numpy as np

    for arr in (values.chunks if isinstance(values, pa.ChunkedArray) else [values]):
        t = arr.type
        if pa.types.is_struct(t):
            for i, f in enumerate(t):
                if _holds_map(f.type):
                    _check_map_keys(arr.field(i), f"{name}.{f.name}")
        elif is_list_type(t):
            _check_map_keys(arr.flatten(), f"{name}.element")
        elif pa.types.is_map(t) and len(arr):
            offsets = arr.offsets.to_numpy()
            start, end = int(offsets[0]), int(offsets[-1])
            keys = arr.keys.slice(start, end - start)
            if len(keys):
                # one hash pass: (row, key code) pairs must all differ
                codes = _key_codes(keys)
                parents = np.repeat(np.arange(len(arr), dtype=np.int64), np.diff(offsets))
                distinct = int(codes.max()) + 1
                pairs = parents * distinct + codes
                if len(arr) * distinct <= _BINCOUNT_LIMIT:  # few distinct keys (the usual map): a count
                    repeated = bool((np.bincount(pairs) > 1).any())
                else:
                    repeated = len(pc.unique(pa.array(pairs))) != len(pairs)
                if repeated:
                    _, first, counts = np.unique(pairs, return_index=True, return_counts=True)
                    key = keys[int(first[np.argmax(counts > 1)])].as_py()
                    raise SchemaMismatchError(f"map column {name!r} has key {key!r} twice in one value; a map "
                                              f"holds each key once")
            items = arr.items.slice(start, end - start)
            if _holds_map(t.item_type):
                _check_map_keys(items, f"{name}.value")


def _key_codes(keys: pa.Array) -> Any:
    """One int64 per key, equal exactly for equal keys, dense from 0: a hash pass per column.
    A struct key combines its fields' codes (a NULL field is a value of its own); a list or map
    key, which no engine writes in practice, is compared by its Python value."""
    import numpy as np

    t = keys.type
    if pa.types.is_struct(t):
        codes = np.zeros(len(keys), dtype=np.int64)
        for i in range(t.num_fields):
            field = _key_codes(keys.field(i))
            codes = np.unique(codes * (int(field.max(initial=0)) + 1) + field, return_inverse=True)[1].astype(np.int64)
        if keys.null_count:  # a NULL struct is one value, whatever its fields hold beneath it
            codes = np.where(keys.is_valid().to_numpy(zero_copy_only=False), codes + 1, 0)
        return codes
    if pa.types.is_nested(t):
        keys = pa.array([repr(v) for v in keys.to_pylist()], pa.string())
    encoded = pc.dictionary_encode(keys).indices
    return pc.fill_null(encoded, -1).to_numpy(zero_copy_only=False).astype(np.int64) + 1


def _from_list_view(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A list view as the plain list of the same values (offsets from the sizes)."""
    if isinstance(values, pa.ChunkedArray):
        return pa.chunked_array([_from_list_view(c) for c in values.chunks])
    import numpy as np

    large = pa.types.is_large_list_view(values.type)
    sizes = pc.fill_null(pc.list_value_length(values), 0).to_numpy(zero_copy_only=False)
    offsets = pa.array(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64 if large else np.int32))
    cls = pa.LargeListArray if large else pa.ListArray
    mask = values.is_null() if values.null_count else None
    return cls.from_arrays(offsets, pc.list_flatten(values), type=(pa.large_list if large else pa.list_)(
        values.type.value_field), mask=mask)



def _refused_conversion(source: pa.DataType, target: pa.DataType) -> str | None:
    """Why values of ``source`` may not be stored as ``target`` at all (at any depth), or None.
    Spark's store assignment refuses these, and Arrow's cast would invent values: a number as a
    BOOLEAN (2 -> true), text as a number or BOOLEAN ('007' -> 7, '1e400' -> inf), a number as a
    DATE or TIMESTAMP and back (days or microseconds since 1970)."""
    if pa.types.is_boolean(target) and not (pa.types.is_boolean(source) or pa.types.is_null(source)):
        return f"{source} values are not booleans (a write does not turn numbers or text into true/false)"
    if is_text_type(source) and is_number(target):
        return (f"text is not read as {target} on a write (Spark refuses it too): cast the column to the "
                f"number type first")
    if is_number(source) and (pa.types.is_date(target) or pa.types.is_timestamp(target)):
        return f"{source} values are no {target} (a write does not read numbers as days or microseconds)"
    if (pa.types.is_date(source) or pa.types.is_timestamp(source)) and is_number(target):
        return (f"{source} values are no {target} (a write does not store dates or timestamps as days or "
                f"microseconds; Spark cannot safely cast them either)")
    if pa.types.is_floating(source) and pa.types.is_decimal(target):  # reached inside a struct, list, map
        return (f"a {source} field is not rounded into {target} inside a nested value (Arrow's cast would "
                f"not round as Spark does): cast it to the DECIMAL first")
    if pa.types.is_struct(source) and pa.types.is_struct(target):
        for f in target:
            i = source.get_field_index(f.name)
            if i >= 0 and (why := _refused_conversion(source.field(i).type, f.type)) is not None:
                return f"field {f.name!r}: {why}"
        return None
    if pa.types.is_map(source) and pa.types.is_map(target):
        return (_refused_conversion(source.key_type, target.key_type)
                or _refused_conversion(source.item_type, target.item_type))
    if is_list_type(source) and is_list_type(target):
        return _refused_conversion(source.value_type, target.value_type)
    return None


def _may_lose(source: pa.DataType, target: pa.DataType) -> bool:
    """Could Arrow's safe cast from ``source`` to ``target`` drop information it does not check?
    A timestamp to a date (the time of day) and a wider float to a narrower one (overflow to
    infinity), at any depth."""
    if pa.types.is_timestamp(source) and pa.types.is_date(target):
        return True
    if pa.types.is_floating(source) and pa.types.is_floating(target):
        return source.bit_width > target.bit_width
    if pa.types.is_struct(source) and pa.types.is_struct(target):
        return any(_may_lose(source.field(i).type, f.type) for f in target
                   for i in [source.get_field_index(f.name)] if i >= 0)
    if pa.types.is_map(source) and pa.types.is_map(target):
        return _may_lose(source.key_type, target.key_type) or _may_lose(source.item_type, target.item_type)
    if is_list_type(source) and is_list_type(target):
        return _may_lose(source.value_type, target.value_type)
    return False



def _first_lost(source: pa.Array | pa.ChunkedArray, cast: pa.Array | pa.ChunkedArray) -> str | None:
    """What the cast of ``source`` into ``cast`` lost (first case found), or None."""
    if isinstance(source, pa.ChunkedArray):
        cast_chunks = cast.chunks if isinstance(cast, pa.ChunkedArray) else [cast]
        if len(cast_chunks) != source.num_chunks:
            source, cast_chunks = source.combine_chunks(), [pa.concat_arrays(cast_chunks)]
            return _first_lost(source, cast_chunks[0])
        return next((lost for a, b in zip(source.chunks, cast_chunks)
                     if (lost := _first_lost(a, b)) is not None), None)
    st, tt = source.type, cast.type
    if pa.types.is_timestamp(st) and pa.types.is_date(tt):
        changed = pc.fill_null(pc.not_equal(pc.cast(cast, st), source), False)
        if pc.any(changed).as_py():
            value = source.filter(changed)[0]
            return f"{value} has a time of day that a {tt} column cannot hold"
        return None
    if pa.types.is_floating(st) and pa.types.is_floating(tt):
        overflow = pc.fill_null(pc.and_(pc.is_finite(source), pc.invert(pc.is_finite(cast))), False)
        if pc.any(overflow).as_py():
            return f"{source.filter(overflow)[0]} is out of the range of {tt}"
        return None
    if pa.types.is_struct(st):
        for i, f in enumerate(tt):
            j = st.get_field_index(f.name)
            if j >= 0 and _may_lose(st.field(j).type, f.type):
                lost = _first_lost(source.field(j), cast.field(i))
                if lost is not None:
                    return lost
        return None
    if pa.types.is_map(st):
        src_keys, src_items = _entries(source)
        cast_keys, cast_items = _entries(cast)
        lost = _first_lost(src_keys, cast_keys) if _may_lose(st.key_type, tt.key_type) else None
        if lost is None and _may_lose(st.item_type, tt.item_type):
            lost = _first_lost(src_items, cast_items)
        return lost
    if is_list_type(st):
        return _first_lost(source.flatten(), cast.flatten())
    return None


def _entries(values: pa.MapArray) -> tuple[pa.Array, pa.Array]:
    """The keys and the items of ``values``' entries (its slice only)."""
    offsets = values.offsets
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    return values.keys.slice(start, end - start), values.items.slice(start, end - start)


def assign_value(values: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """An UPDATE / MERGE SET (or MERGE INSERT) value stored into a column of type ``target``:
    Delta casts these with Spark's ANSI CAST. Where :func:`cast_value` cannot (7.9 into an INT
    is 7, 1.235 into DECIMAL(5,2) is 1.24, '5' into an INT is 5, 1 into a BOOLEAN is true; a
    value out of range or text that is no number still fails), between any two atomic types, the
    CAST decides. Raises ``pa.ArrowInvalid`` like :func:`cast_value`."""
    try:
        return cast_value(values, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if pa.types.is_nested(values.type) or pa.types.is_nested(target):
            raise
        if is_number(values.type) and (pa.types.is_date(target) or pa.types.is_timestamp(target)):
            raise  # Spark's CAST takes no number as a DATE (and seconds, not microseconds, as a TIMESTAMP)
        if (pa.types.is_date(values.type) or pa.types.is_timestamp(values.type)) and is_number(target):
            raise  # nor a DATE as a number; a TIMESTAMP's seconds only when written as a CAST
    from ..expr.rows import cast_values

    try:
        return cast_values(values, target)
    except PredicateError as exc:
        raise pa.ArrowInvalid(str(exc)) from None


def conform_batch(batch: pa.RecordBatch, schema: pa.Schema, computed: frozenset[str] = frozenset(),
                  defaults: dict[str, pa.Scalar] | None = None) -> pa.RecordBatch:
    """Reorder, fill missing columns (their ``defaults``, else nulls), and cast safely to ``schema``.

    ``computed`` columns (generated, identity) may be missing whatever their nullability: they get
    null placeholders that the table's rules fill in (tables/constraints.py) before writing.
    ``defaults`` (column defaults, tables/defaults.py) fill the columns the data leaves out."""
    arrays = []
    names = batch.schema.names
    if any(f.name not in names for f in schema):  # ``ID`` for ``id``? (nested names: cast_value)
        names = schema_renamed_like(batch.schema, schema).names
    for field in schema:
        if field.name in names:
            col = batch.column(names.index(field.name))
            if not col.type.equals(field.type):
                refuse_missing_required(col.type, field.type, field.name)
                try:
                    col = cast_value(col, field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    if is_variant_storage(field.type):
                        raise SchemaMismatchError(
                            f"column {field.name!r} is a variant column and the data has {col.type}; pass "
                            f"variants as struct<value: binary, metadata: binary> (JSON text becomes one "
                            f"with deltatx.variant.parse_json)") from None
                    raise SchemaMismatchError(
                        f"column {field.name!r} is {col.type} in the data but {field.type} in the table "
                        f"and cannot be converted safely ({exc})"
                    ) from None
        elif defaults and (filled := fill(field, defaults, batch.num_rows)) is not None:
            col = filled
        else:
            if not field.nullable and field.name not in computed:
                raise SchemaMismatchError(f"the data lacks non-nullable column {field.name!r}")
            col = pa.nulls(batch.num_rows, field.type)
            if field.name in computed:
                arrays.append(col)
                continue
        if not field.nullable and col.null_count:
            raise SchemaMismatchError(f"column {field.name!r} is NOT NULL but the data has {col.null_count} null(s)")
        if _holds_map(field.type):
            _check_map_keys(col, field.name)
        arrays.append(col)
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    if has_variant(schema):  # values from outside must be the Variant binary encoding
        check_variant_columns(batch)
    return batch


def conform(reader: pa.RecordBatchReader, schema: pa.Schema, computed: frozenset[str] = frozenset()) -> pa.RecordBatchReader:
    """Lazily conform a stream of batches (errors surface when the writer pulls them)."""
    defaults = default_values(schema)  # evaluated once per write (current_timestamp() included)

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            yield conform_batch(batch, schema, computed, defaults)

    return pa.RecordBatchReader.from_batches(schema, batches())


def conform_table(data: Any, schema: pa.Schema, computed: frozenset[str] = frozenset()) -> pa.Table:
    """Eagerly conform (used where the rows must be inspected before writing)."""
    reader = to_reader(data)
    defaults = default_values(schema)
    batches = [conform_batch(b, schema, computed, defaults) for b in reader]
    return pa.Table.from_batches(batches, schema=schema)
