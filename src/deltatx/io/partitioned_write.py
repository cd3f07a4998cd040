"""Rows held in memory, cut into files: by partition, then by size, one pool task per file.

Serves a whole table and each chunk of a partitioned stream (~one file's worth of rows at a
time, the next chunk read while the last one writes)::

    chunk ─► partitions: group_by(partition columns) -> distinct keys + row counts   columnar
               one key      -> zero-copy slices of the chunk
               a few keys   -> each worker filters its own partition (no row-sized indices)
               many keys    -> one stable sort of dense group codes, slices of the order
             └─► pool task per output file (pyarrow releases the GIL) ─► DataFileSink.write_file

A small whole-table write is spread over up to ``max_workers`` files so that every core encodes
one; a stream's chunks are not (each chunk is about one file already).
"""

from __future__ import annotations

import math
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from .file_sink import DataFileSink
from .grouping import group_codes
from ..txnlog.partition_values import serialize_partition_value
from .paths import partition_dir

#: at most this many partitions in one chunk are split by filtering (one pass over the data each);
#: more are split by one sort of the group codes
FILTER_MAX_PARTITIONS = 12

PartitionValues = tuple[tuple[str, str | None], ...]


def write_table(sink: DataFileSink, table: pa.Table) -> None:
    """A whole table, spread over the workers when it is small."""
    table = sink.conform(table)
    if table.num_rows == 0:
        return
    sink.wait(_submit_chunk(sink, table, spread=True))


def write_chunks(sink: DataFileSink, reader: pa.RecordBatchReader) -> None:
    """A partitioned stream, chunk by chunk: at most two chunks in memory, the one writing and
    the one being read."""
    pending: list[Future] = []
    for chunk in _chunks(sink, reader):
        futures = _submit_chunk(sink, sink.conform(chunk), spread=False)
        sink.wait(pending)
        pending = futures
    sink.wait(pending)


def pieces(count: int, rows_per_file: int) -> list[tuple[int, int]]:
    """(offset, length) of ceil(count / rows_per_file) near-equal files."""
    n = max(1, math.ceil(count / rows_per_file))
    size = math.ceil(count / n)
    return [(offset, min(size, count - offset)) for offset in range(0, count, size)] or [(0, 0)]


def _chunks(sink: DataFileSink, reader: pa.RecordBatchReader) -> Iterator[pa.Table]:
    batches: list[pa.RecordBatch] = []
    rows = 0
    limit = None
    for batch in reader:
        if batch.num_rows == 0:
            continue
        if limit is None:
            limit = sink.rows_per_file(batch.nbytes / batch.num_rows)
        batches.append(batch)
        rows += batch.num_rows
        if rows >= limit:
            yield pa.Table.from_batches(batches)
            batches, rows = [], 0
    if batches:
        yield pa.Table.from_batches(batches)


@dataclass(frozen=True)
class _Group:
    """One partition of a chunk: its serialized values, row count and how to get its rows."""

    values: PartitionValues
    count: int
    fetch_range: Callable[[int, int], pa.Table] | None  # (offset, length) within the partition
    fetch_all: Callable[[], pa.Table] | None


def _submit_chunk(sink: DataFileSink, table: pa.Table, *, spread: bool) -> list[Future]:
    rows_per_file = sink.rows_per_file(table.nbytes / max(table.num_rows, 1))
    data = table.select(sink.data_columns)
    groups = _plan_groups(sink, table, data)
    if spread and len(groups) < sink.options.max_workers:
        rows_per_file = _spread(sink, groups, rows_per_file)
    tasks: list[Callable[[], None]] = []
    for group in groups:
        folder = partition_dir(sink.partition_columns, dict(group.values))
        if group.fetch_range is not None:  # row count known: one task per file
            for offset, length in pieces(group.count, rows_per_file):
                fetch = partial(group.fetch_range, offset, length)
                tasks.append(partial(_write_rows, sink, fetch, folder, group.values, None))
        else:  # rows known only once selected: the task cuts its own files
            tasks.append(partial(_write_rows, sink, group.fetch_all, folder, group.values, rows_per_file))
    return sink.run_all(tasks)


def _spread(sink: DataFileSink, groups: list[_Group], rows_per_file: int) -> int:
    """Smaller files for a small write, so that every worker has one (≥ one row group each)."""
    largest = max(g.count for g in groups)
    wanted = math.ceil(sink.options.max_workers / len(groups))
    return max(sink.options.spread_min_rows, min(rows_per_file, math.ceil(largest / wanted)))


def _plan_groups(sink: DataFileSink, table: pa.Table, data: pa.Table) -> list[_Group]:
    """The chunk's partitions and how a worker selects each one's rows.

    - one partition: zero-copy slices;
    - a few partitions: each worker filters its own (no row-sized index arrays at all);
    - many partitions (or float keys, where ``==`` and hashing disagree on NaN/-0.0): one
      stable sort of the group codes, then each file takes its slice of the order.
    """
    partition_columns = sink.partition_columns
    if not partition_columns:
        return [_Group((), data.num_rows, partial(_slice, data), None)]
    keys = (
        table.select(partition_columns)
        .group_by(partition_columns, use_threads=False)
        .aggregate([([], "count_all")])
    )
    types = [sink.schema.field(c).type for c in partition_columns]
    if keys.num_rows == 1:
        return [_Group(_serialized(partition_columns, keys, 0, types), data.num_rows, partial(_slice, data), None)]
    floats = any(pa.types.is_floating(t) for t in types)
    if keys.num_rows <= FILTER_MAX_PARTITIONS and not floats:
        counts = keys.column("count_all").to_pylist()
        groups = []
        for i in range(keys.num_rows):
            terms = [(table.column(c), keys.column(c)[i]) for c in partition_columns]
            groups.append(_Group(_serialized(partition_columns, keys, i, types), counts[i], None,
                                 partial(_filter, data, terms)))
        return groups
    codes = group_codes([table.column(c) for c in partition_columns])
    order = pc.sort_indices(codes)  # stable: rows keep their order inside a partition
    codes_and_counts = pc.value_counts(codes).flatten()  # codes are dense: 0..K-1
    counts = codes_and_counts[1].take(pc.sort_indices(codes_and_counts[0])).to_pylist()
    firsts = pc.take(order, pa.array(_starts(counts), pa.int64()))
    first_rows = table.select(partition_columns).take(firsts)
    groups = []
    start = 0
    for i, count in enumerate(counts):
        fetch = partial(_take_range, data, order, start)
        groups.append(_Group(_serialized(partition_columns, first_rows, i, types), count, fetch, None))
        start += count
    return groups


def _serialized(partition_columns: list[str], keys: pa.Table, row: int, types: list[pa.DataType]) -> PartitionValues:
    return tuple(
        (col, serialize_partition_value(keys.column(col)[row], t))
        for col, t in zip(partition_columns, types)
    )


def _write_rows(sink: DataFileSink, fetch: Callable[[], pa.Table], folder: str, values: PartitionValues,
                rows_per_file: int | None) -> None:
    if sink.aborted:  # another file failed: the call is being undone, write nothing more
        return
    rows = fetch()
    if rows_per_file is None:
        sink.write_file(rows, folder, values)
        return
    for offset, length in pieces(rows.num_rows, rows_per_file):
        sink.write_file(rows.slice(offset, length), folder, values)


def _slice(data: pa.Table, offset: int, length: int) -> pa.Table:
    return data.slice(offset, length)


def _take_range(data: pa.Table, order: pa.Array, start: int, offset: int, length: int) -> pa.Table:
    return data.take(order.slice(start + offset, length))


def _filter(data: pa.Table, terms: list[tuple[pa.ChunkedArray, pa.Scalar]]) -> pa.Table:
    mask = None
    for column, value in terms:
        term = pc.equal(column, value) if value.is_valid else pc.is_null(column)
        mask = term if mask is None else pc.and_(mask, term)
    return data.filter(mask)


def _starts(counts: list[int]) -> list[int]:
    out, total = [], 0
    for c in counts:
        out.append(total)
        total += c
    return out
