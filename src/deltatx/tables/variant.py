"""Variant columns (PROTOCOL.md "Variant Data Type"): semi-structured values, written unshredded.

A Delta ``variant`` column is stored in Parquet as a struct of two binaries, ``value`` and
``metadata``, holding the Variant binary encoding (Spark's ``common/variant/README.md``, also
parquet-format's VariantEncoding.md). pyarrow has no variant type, so deltatx's arrow type for it
is that struct, :data:`VARIANT` (``value`` then ``metadata``, both NOT NULL): a table column of
this type is a ``variant`` in the log, and a ``variant`` column reads as it.

The writer rule is that every value stored conforms to the encoding. Values deltatx copies from
the table itself (DML, OPTIMIZE) came from a conforming writer; values from outside — an append,
an overwrite, a MERGE source — are decoded once before any file is written, and a value that
does not decode raises :class:`~deltatx.errors.MalformedVariantError` naming the column and row.
The encoder and decoder are PySpark's pure-Python ``VariantUtils`` (``parse_json`` / ``to_json``,
the same code Spark's Python ``VariantVal`` uses): deltatx does not re-implement the encoding.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import MalformedVariantError
from ..io.variant_storage import is_variant_like
from ..txnlog.schema import VARIANT_STORAGE, is_variant_storage, type_holds

#: The arrow type of a Delta ``variant`` column (see the module docstring).
VARIANT = VARIANT_STORAGE


def _utils():
    from pyspark.sql.variant_utils import VariantUtils  # ~0.1 s to import: only when variants are used

    return VariantUtils


def parse_json(values: Iterable[str | None] | pa.Array | pa.ChunkedArray) -> pa.StructArray:
    """JSON texts -> a :data:`VARIANT` array (Spark's ``parse_json``); None stays NULL.

    Numbers become the narrowest integer, decimal or double Spark picks; object keys are kept in
    the value's dictionary (``metadata``). Invalid JSON raises :class:`MalformedVariantError`.
    """
    texts = values.to_pylist() if isinstance(values, (pa.Array, pa.ChunkedArray)) else list(values)
    utils = _utils()
    out: list[dict[str, bytes] | None] = []
    for i, text in enumerate(texts):
        if text is None:
            out.append(None)
            continue
        try:
            value, metadata = utils.parse_json(text)
        except Exception as exc:  # PySpark raises its own ValueError subclasses, json its own
            raise MalformedVariantError(f"value {i} is not valid JSON for a variant ({exc}): {text[:80]!r}") from None
        out.append({"value": value, "metadata": metadata})
    return pa.array(out, VARIANT)


def to_json(values: pa.Array | pa.ChunkedArray) -> pa.StringArray:
    """A :data:`VARIANT` array -> its values as JSON text (Spark's ``to_json``); NULL stays NULL."""
    utils = _utils()
    return pa.array([None if v is None else utils.to_json(v["value"], v["metadata"]) for v in values.to_pylist()],
                    pa.string())


def has_variant(schema: pa.Schema) -> bool:
    """Whether any column (nested ones too) of ``schema`` is a variant."""
    return any(type_holds(f.type, is_variant_storage) for f in schema)


def check_variant_columns(data: pa.Table | pa.RecordBatch, like: bool = False) -> None:
    """Decode every non-null variant of ``data`` (nested ones too); raise
    :class:`MalformedVariantError` for the first that is not the Variant binary encoding.

    ``like``: also check columns that only look like variants (:func:`is_variant_like`), for
    data whose columns are not cast to the table's types yet (a MERGE source)."""
    utils = None
    for name, column in zip(data.schema.names, data.columns):
        for where, values in _variant_values(name, column, like):
            if utils is None:
                utils = _utils()
            _check_values(utils, where, values)


def _check_values(utils: Any, where: str, values: pa.Array) -> None:
    rows = values.to_pylist()
    for row, item in enumerate(rows):
        if item is None:
            continue
        value, metadata = item.get("value"), item.get("metadata")
        if value is None or metadata is None:
            raise MalformedVariantError(
                f"variant column {where!r}, row {row}: a variant needs both 'value' and 'metadata' "
                f"(a NULL variant is a NULL struct)")
        try:
            _check_metadata(metadata)
            utils.to_json(value, metadata)  # walks the whole value (object keys via the metadata)
        except Exception:  # PySpark's MALFORMED_VARIANT, or a decoding error deeper in the value
            raise MalformedVariantError(
                f"variant column {where!r}, row {row}: the bytes are not the Variant binary encoding "
                f"(value {bytes(value[:16]).hex()}…, metadata {bytes(metadata[:16]).hex()}…); "
                f"build values with deltatx.variant.parse_json or copy them from a variant column") from None


def _check_metadata(metadata: bytes) -> None:
    """The metadata's header and offsets (the decoder reads them only to look up object keys):
    version 1, then the dictionary size and its offsets, non-decreasing, within the bytes."""
    if not metadata or metadata[0] & 0x0F != 1:
        raise ValueError("metadata version is not 1")
    width = (metadata[0] >> 6) + 1
    size = int.from_bytes(metadata[1:1 + width], "little")
    start = 1 + width * (size + 2)  # header, size, size + 1 offsets
    if len(metadata) < start:
        raise ValueError("metadata is shorter than its offsets")
    offsets = [int.from_bytes(metadata[1 + width * (k + 1):1 + width * (k + 2)], "little") for k in range(size + 1)]
    if offsets[0] != 0 or any(b < a for a, b in zip(offsets, offsets[1:])) or start + offsets[-1] > len(metadata):
        raise ValueError("metadata offsets do not fit its bytes")


def _variant_values(name: str, column: pa.Array | pa.ChunkedArray, like: bool) -> Iterator[tuple[str, pa.Array]]:
    """(path, the values) of every variant inside ``column``; a NULL parent hides its children."""
    if not type_holds(column.type, is_variant_like if like else is_variant_storage):
        return
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    for chunk in chunks:
        yield from _walk(name, chunk, like)


def _walk(name: str, arr: pa.Array, like: bool) -> Iterator[tuple[str, pa.Array]]:
    t = arr.type
    if is_variant_storage(t) or (like and is_variant_like(t)):
        yield name, arr
    elif pa.types.is_struct(t):
        for i, child in enumerate(arr.flatten()):  # flatten: a NULL struct's children are NULL
            yield from _walk(f"{name}.{t.field(i).name}", child, like)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        yield from _walk(f"{name}[]", pc.list_flatten(arr), like)
    elif pa.types.is_map(t):
        yield from _walk(f"{name}{{}}", arr.items, like)


__all__ = ["VARIANT", "parse_json", "to_json", "check_variant_columns", "has_variant"]
