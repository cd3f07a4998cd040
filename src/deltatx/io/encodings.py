"""Which Parquet encoding each column of a data file gets, decided from a sample of its rows.

Why a choice at all: Arrow's defaults try a dictionary for every column and fall back to PLAIN
after a 1 MB dictionary. For near-unique columns (ids, measurements) that attempt costs as much
as the encoding itself, and PLAIN is a poor home for the most common near-unique columns of a
data lake: sequence ids, event times, dates. Their neighbouring values differ by little, which
``DELTA_BINARY_PACKED`` stores in a few bits each. A sorted 1M-row id column then takes ~6 KB
instead of ~4 MB of snappy-compressed PLAIN, and a point lookup (a merge-on-read DELETE of one
id) decodes its 128k-row group in ~0.25 ms instead of ~1.8 ms. Every Delta reader decodes it: it is a
core Parquet encoding (Spark 3.3+, parquet-mr, arrow-rs/deltalake, DuckDB, polars).

The rules, per top-level column of a file with at least :data:`SAMPLE_ROWS` rows:

- nested columns keep Arrow's default (a dictionary where it pays, per leaf);
- a column of integers, dates or timestamps whose sample's successive differences need at most
  half the type's bits (see :func:`_delta_bits`) is written ``DELTA_BINARY_PACKED`` when it is
  mostly distinct, or when those differences need fewer bits than a dictionary's indices would
  (sorted dates, say);
- any other primitive column whose sample is mostly distinct gets no dictionary;
- every other column keeps a dictionary.

Small files keep Arrow's defaults: there the choice saves nothing worth a sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

#: rows sampled per column (the first rows of the file)
SAMPLE_ROWS = 16384
#: above this share of distinct values in the sample, a column is written without a dictionary
MAX_DISTINCT_RATIO = 0.5
#: Parquet's encoding for integer columns whose neighbouring values are close
DELTA = "DELTA_BINARY_PACKED"


@dataclass(frozen=True)
class Encodings:
    """Arguments for ``pq.write_table`` / ``pq.ParquetWriter``: ``use_dictionary`` and
    ``column_encoding`` (Arrow refuses both for one column, so a delta column is never in the
    dictionary list)."""

    use_dictionary: list[str] | bool = True
    column_encoding: dict[str, str] = field(default_factory=dict)

    def writer_args(self) -> dict[str, object]:
        args: dict[str, object] = {"use_dictionary": self.use_dictionary}
        if self.column_encoding:
            args["column_encoding"] = self.column_encoding
        return args


#: Arrow's own choice: every column tries a dictionary
DEFAULT = Encodings()


def leaf_paths(schema: pa.Schema) -> dict[str, list[str]]:
    """Parquet column paths (``a.b``, ``l.list.element``) under each top-level field (the names a
    dictionary list must use for nested columns)."""
    sink = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), sink)
    parquet_schema = pq.ParquetFile(pa.BufferReader(sink.getvalue())).schema
    paths = [parquet_schema.column(i).path for i in range(len(parquet_schema))]
    return {name: [p for p in paths if p == name or p.startswith(name + ".")] for name in schema.names}


def choose(rows: pa.Table, nested_leaves: dict[str, list[str]] | None = None) -> Encodings:
    """The encodings for a file whose first rows are ``rows`` (its schema is the file's).

    ``nested_leaves`` gives the Parquet leaf paths of nested columns (:func:`leaf_paths`); it is
    computed here when a nested column needs it and the caller did not pass it."""
    if rows.num_rows < SAMPLE_ROWS:
        return DEFAULT
    dictionary: list[str] = []
    delta: dict[str, str] = {}
    without_dictionary = False
    for name, column in zip(rows.column_names, rows.columns):
        kind = column.type
        if pa.types.is_nested(kind) or pa.types.is_boolean(kind):
            if pa.types.is_nested(kind):
                if nested_leaves is None:
                    nested_leaves = leaf_paths(rows.schema)
                dictionary.extend(nested_leaves[name])
            else:
                dictionary.append(name)
            continue
        sample = column.slice(0, SAMPLE_ROWS)
        distinct = pc.count_distinct(sample, mode="all").as_py()
        delta_bits = _delta_bits(sample)
        if delta_bits is not None and (distinct > SAMPLE_ROWS * MAX_DISTINCT_RATIO
                                       or delta_bits < distinct.bit_length()):
            delta[name] = DELTA  # narrower than a dictionary's indices would be
            without_dictionary = True
        elif distinct <= SAMPLE_ROWS * MAX_DISTINCT_RATIO:
            dictionary.append(name)
        else:
            without_dictionary = True
    if not without_dictionary:
        return DEFAULT
    return Encodings(use_dictionary=dictionary, column_encoding=delta)


def _integer_bits(kind: pa.DataType) -> int | None:
    """Bits of the Parquet integer a column of this type is stored as, if delta encoding applies
    (signed and unsigned integers up to 32 bits, int64, dates, timestamps); None otherwise."""
    if pa.types.is_timestamp(kind) or pa.types.is_int64(kind):
        return 64
    if pa.types.is_date32(kind) or (pa.types.is_integer(kind) and kind.bit_width <= 32):
        return 32
    return None  # uint64 (values past 2**63), decimals, floats, strings...


def _delta_bits(sample: pa.ChunkedArray) -> int | None:
    """Bits per value ``DELTA_BINARY_PACKED`` would need for the sample, if at most half its
    type's bits; None when the encoding does not apply or would not pay.

    The encoding stores, per block, each difference between neighbours less the block's smallest
    difference, in as many bits as the largest of those needs; so the spread of the differences,
    not the values, sets its size. Sorted or slowly varying columns qualify; random ones (spread
    about twice their range) do not."""
    bits = _integer_bits(sample.type)
    if bits is None:
        return None
    values = pc.drop_null(sample)
    if len(values) < 2:
        return None
    if pa.types.is_timestamp(values.type) or pa.types.is_date32(values.type):
        values = values.cast(pa.int64() if bits == 64 else pa.int32())
    numbers = values.to_numpy().astype(np.int64, copy=False)
    low, high = int(numbers.min()), int(numbers.max())
    if high - low >= 1 << 62:  # differences could overflow int64; such spreads never qualify
        return None
    steps = np.diff(numbers)
    width = (int(steps.max()) - int(steps.min())).bit_length()
    return width if width <= bits // 2 else None
