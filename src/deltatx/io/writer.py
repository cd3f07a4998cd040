"""Writing rows as Delta data files: the Parquet files and the ``add`` actions that describe them.

Owns the write half of the data path::

    table or batch stream
      └─► chunk (streams: ~one file's worth of rows at a time, the next read while one writes)
            └─► partitions: group_by(partition columns) -> distinct keys + row counts   columnar
                  one key      -> zero-copy slices of the chunk
                  a few keys   -> each worker filters its own partition (no row-sized indices)
                  many keys    -> one stable sort of dense group codes, slices of the order
                  └─► thread pool, one task per output file (pyarrow releases the GIL):
                        rows (data columns only) ─► Parquet (snappy, 128k-row groups; dictionary
                        or delta encoding where a sample says it pays: encodings.py)
                        ─► size, mtime ─► stats JSON
      └─► add actions as a pyarrow Table with actions.FILE_SCHEMA columns

Delta conventions kept: partition columns are not stored in the files, folders are Hive-style
(``col=value``, escaped; null -> ``__HIVE_DEFAULT_PARTITION__``), file names are
``part-00000-<uuid4>-c000.snappy.parquet`` and ``add.path`` is the URI-encoded relative path.
If anything fails, every file this call already wrote is deleted before the error propagates:
nothing references them yet, so they would only be litter for VACUUM.
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
import uuid
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..errors import SchemaMismatchError
from ..txnlog.actions import FILE_SCHEMA
from ..txnlog.stats import FileStats, compute_stats
from ..txnlog.store import write_new_file
from . import encodings
from .grouping import group_codes
from .paths import encode_path, partition_dir, serialize_partition_value
from .streamfile import StreamedFile

if TYPE_CHECKING:
    from ..txnlog.column_mapping import ColumnMapping
    from ..txnlog.store import LogStore

#: data smaller than this (in memory) is encoded into a buffer and written to a local disk at once
_BUFFERED_FILE_BYTES = 4 * 1024 * 1024


#: writer threads by default: the core count, read once (``os.cpu_count`` reads /sys per call)
_DEFAULT_WORKERS = max(2, os.cpu_count() or 2)


@dataclass
class WriteOptions:
    """How data files are cut and encoded.

    A file gets at most ``target_file_rows`` rows and about ``target_file_bytes`` of (in-memory,
    uncompressed) arrow data, which lands Parquet files in the 128–512 MB range for typical
    columns. Small writes are split into up to ``max_workers`` files (never below
    ``spread_min_rows``) so that every core has a file to encode.
    """

    target_file_rows: int = 16 * 1024 * 1024
    target_file_bytes: int = 512 * 1024 * 1024
    #: rows per row group: small enough that a point lookup (a merge-on-read DELETE of one id)
    #: reads one group of a large file, as DuckDB's and Spark's row groups are (~128k rows)
    row_group_rows: int = 128 * 1024
    #: a small write is spread over workers only in files of at least this many rows
    spread_min_rows: int = 1024 * 1024
    max_workers: int = field(default_factory=lambda: _DEFAULT_WORKERS)
    num_indexed_cols: int = 32
    stats_columns: list[str] | None = None
    compression: str = "snappy"
    #: physical columns outside the table schema (row tracking's materialized columns): written,
    #: never given statistics
    unindexed_columns: tuple[str, ...] = ()
    #: also store the partition columns in each file, after the data columns (Iceberg
    #: compatibility needs them there); they get no statistics
    materialize_partition_columns: bool = False
    #: folder under the table root the files (and their partition folders) go to: '' for data
    #: files, ``_change_data`` for change data files
    directory: str = ""
    #: the table's column mapping: files, stats and partition values then use physical names
    #: (and Parquet field ids); the data and ``partition_columns`` stay logical
    column_mapping: "ColumnMapping | None" = None

    def __post_init__(self) -> None:
        for name in ("target_file_rows", "target_file_bytes", "row_group_rows", "max_workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"WriteOptions.{name} must be at least 1, got {getattr(self, name)}")


def write_data_files(
    store: "LogStore",
    data: pa.Table | pa.RecordBatchReader,
    schema: pa.Schema,
    partition_columns: list[str],
    options: WriteOptions | None = None,
    data_change: bool = True,
) -> pa.Table:
    """Write ``data`` (already cast to ``schema``) as Parquet files; return their add actions."""
    options = options or WriteOptions()
    partition_columns = list(partition_columns)
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if not isinstance(data, (pa.Table, pa.RecordBatchReader)):
        raise SchemaMismatchError(
            f"write_data_files takes a pyarrow Table or RecordBatchReader, not {type(data).__name__}; "
            f"convert the data first (the table layer does this for pandas and other inputs)"
        )
    _check_partitioning(schema, partition_columns)
    job = _WriteJob(store, schema, partition_columns, options, data_change)
    try:
        if isinstance(data, pa.RecordBatchReader):
            job.write_stream(data)
        else:
            job.write_table(data)
        return job.actions()
    except BaseException:
        job.abort()
        raise
    finally:
        job.close()


def _check_partitioning(schema: pa.Schema, partition_columns: list[str]) -> None:
    missing = [c for c in partition_columns if c not in schema.names]
    if missing:
        raise SchemaMismatchError(f"partition columns {missing} are not in the schema {schema.names}")
    if len(set(partition_columns)) != len(partition_columns):
        raise SchemaMismatchError(f"partition columns {partition_columns} name a column twice")
    if partition_columns and len(partition_columns) == len(schema):
        raise SchemaMismatchError(
            "every column is a partition column, so the data files would hold no columns; "
            "keep at least one column out of partition_by"
        )


#: at most this many partitions in one chunk are split by filtering (one pass over the data each);
#: more are split by one sort of the group codes
_FILTER_MAX_PARTITIONS = 12


@dataclass(frozen=True)
class _Group:
    """One partition of a chunk: its serialized values, row count and how to get its rows."""

    values: tuple[tuple[str, str | None], ...]
    count: int
    fetch_range: Callable[[int, int], pa.Table] | None  # (offset, length) within the partition
    fetch_all: Callable[[], pa.Table] | None


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


def _pieces(count: int, rows_per_file: int) -> list[tuple[int, int]]:
    """(offset, length) of ceil(count / rows_per_file) near-equal files."""
    n = max(1, math.ceil(count / rows_per_file))
    size = math.ceil(count / n)
    return [(offset, min(size, count - offset)) for offset in range(0, count, size)] or [(0, 0)]


def _starts(counts: list[int]) -> list[int]:
    out, total = [], 0
    for c in counts:
        out.append(total)
        total += c
    return out


class _WriteJob:
    """State of one write_data_files call: the pool, what was written, what to undo."""

    def __init__(self, store: "LogStore", schema: pa.Schema, partition_columns: list[str],
                 options: WriteOptions, data_change: bool):
        self.store = store
        self.mapping = options.column_mapping
        self.input_schema = schema  # what the data is conformed to; physical from there on
        if self.mapping is not None:
            schema = self.mapping.physical_schema(schema)
            partition_columns = self.mapping.physical_names(partition_columns)
        self.schema = schema
        self.partition_columns = partition_columns
        self.data_columns = [n for n in schema.names if n not in partition_columns]
        if options.materialize_partition_columns and partition_columns:
            self.data_columns += partition_columns
            options = replace(options, unindexed_columns=tuple(options.unindexed_columns) + tuple(partition_columns))
        self.file_schema = pa.schema([schema.field(n) for n in self.data_columns])
        self.options = options
        self.data_change = data_change
        self.fs = store.arrow_fs
        self.local = type(self.fs) is pafs.LocalFileSystem  # small files go to disk in one write
        self._pool: ThreadPoolExecutor | None = None  # started on the first write with >1 file
        self.lock = threading.Lock()
        self.started: list[str] = []  # full paths, registered before opening (cleanup set)
        self.results: list[tuple[str, tuple[tuple[str, str | None], ...], int, int, str]] = []
        self.made_dirs: set[str] = set()
        self.file_counter = 0
        self.aborted = False
        codec = (options.compression or "none").lower()
        self.suffix = ".parquet" if codec in ("none", "uncompressed") else f".{codec}.parquet"
        self.has_nested = any(pa.types.is_nested(f.type) for f in self.file_schema)

    @functools.cached_property
    def _stats_schema(self) -> pa.Schema:
        return pa.schema([f for f in self.file_schema if f.name not in self.options.unindexed_columns])

    @functools.cached_property
    def leaf_paths(self) -> dict[str, list[str]]:
        """Only large files with nested columns consult it, so small writes never pay for it."""
        return encodings.leaf_paths(self.file_schema)

    @property
    def pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.options.max_workers, thread_name_prefix="deltatx-write")
        return self._pool

    def _run_all(self, tasks: list[Callable[[], None]]) -> list[Future]:
        """Run tasks on the pool; a lone task runs inline (a thread hop costs more than a small file)."""
        if len(tasks) == 1 and self._pool is None:
            done: Future = Future()
            try:
                tasks[0]()
            except BaseException as exc:  # surfaced by _wait like a pool failure
                done.set_exception(exc)
            else:
                done.set_result(None)
            return [done]
        return [self.pool.submit(task) for task in tasks]

    # ---- inputs ---------------------------------------------------------------------------------
    def write_table(self, table: pa.Table) -> None:
        table = self._conform(table)
        if table.num_rows == 0:
            return
        self._wait(self._submit_chunk(table, spread=True))

    def write_stream(self, reader: pa.RecordBatchReader) -> None:
        """Chunks of about one file's rows; the next chunk is read while the last one is written."""
        if not self.partition_columns:
            self._stream_files(reader)
            return
        pending: list[Future] = []
        for chunk in self._chunks(reader):
            futures = self._submit_chunk(self._conform(chunk), spread=False)
            self._wait(pending)  # at most two chunks in memory: the one writing, the one read
            pending = futures
        self._wait(pending)

    def _stream_files(self, reader: pa.RecordBatchReader) -> None:
        """Unpartitioned: each file is encoded row group by row group while its rows arrive.

        The first rows of a file are held back until there are enough to decide which columns
        deserve a dictionary or delta encoding (see :meth:`_encodings`).
        """
        current: StreamedFile | None = None
        relative = ""
        limit: int | None = None
        head: list[pa.Table] = []
        try:
            for batch in reader:
                if not batch.num_rows:
                    continue
                rows = self._conform(pa.Table.from_batches([batch])).select(self.data_columns)
                if limit is None:
                    limit = self._rows_per_file(batch.nbytes / batch.num_rows)
                while rows.num_rows:
                    if current is None:
                        head.append(rows)
                        if sum(t.num_rows for t in head) < encodings.SAMPLE_ROWS:
                            break
                        rows, head = pa.concat_tables(head), []
                        current, relative = self._open_streamed(rows)
                    room = limit - current.rows
                    current.add(rows.slice(0, room))
                    rows = rows.slice(room)
                    if current.rows >= limit:
                        self._finish_streamed(current, relative)
                        current = None
            if head:  # the rest is shorter than the encodings' sample: small files, Arrow's defaults
                rows = pa.concat_tables(head)
                for offset, length in _pieces(rows.num_rows, limit or rows.num_rows):
                    self._write_file(rows.slice(offset, length), "", ())
            if current is not None:
                self._finish_streamed(current, relative)
                current = None
        except BaseException:
            if current is not None:
                current.abort()
            raise

    def _open_streamed(self, sample: pa.Table) -> tuple[StreamedFile, str]:
        name, full = self._new_file("")
        sink = self.fs.open_output_stream(full)
        streamed = StreamedFile(sink, self.file_schema, compression=self.options.compression,
                                encodings=self._encodings(sample),
                                row_group_rows=self.options.row_group_rows,
                                stats=FileStats(self._stats_schema, self.options.stats_columns,
                                                self.options.num_indexed_cols))
        return streamed, name

    def _finish_streamed(self, streamed: StreamedFile, relative: str) -> None:
        size, mtime, stats = streamed.close()
        with self.lock:
            self.results.append((encode_path(relative), (), size, mtime, stats))

    def _chunks(self, reader: pa.RecordBatchReader) -> Iterator[pa.Table]:
        batches: list[pa.RecordBatch] = []
        rows = 0
        limit = None
        for batch in reader:
            if batch.num_rows == 0:
                continue
            if limit is None:
                limit = self._rows_per_file(batch.nbytes / batch.num_rows)
            batches.append(batch)
            rows += batch.num_rows
            if rows >= limit:
                yield pa.Table.from_batches(batches)
                batches, rows = [], 0
        if batches:
            yield pa.Table.from_batches(batches)

    def _conform(self, table: pa.Table) -> pa.Table:
        schema = self.input_schema
        if table.schema.names != schema.names:
            missing = [n for n in schema.names if n not in table.schema.names]
            if missing:
                raise SchemaMismatchError(f"the data lacks columns {missing} of the schema {schema.names}")
            table = table.select(schema.names)
        if not table.schema.equals(schema, check_metadata=False):
            try:
                table = table.cast(schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                raise SchemaMismatchError(
                    f"the data does not fit the table schema ({exc}); cast it to {schema} first"
                ) from None
        return self.mapping.to_physical(table) if self.mapping is not None else table

    # ---- planning -------------------------------------------------------------------------------
    def _rows_per_file(self, bytes_per_row: float) -> int:
        by_bytes = int(self.options.target_file_bytes / max(bytes_per_row, 1.0))
        return max(1, min(self.options.target_file_rows, by_bytes))

    def _submit_chunk(self, table: pa.Table, *, spread: bool) -> list[Future]:
        rows_per_file = self._rows_per_file(table.nbytes / max(table.num_rows, 1))
        data = table.select(self.data_columns)
        groups = self._plan_groups(table, data)
        if spread and len(groups) < self.options.max_workers:
            rows_per_file = self._spread(groups, rows_per_file)
        tasks: list[Callable[[], None]] = []
        for group in groups:
            folder = partition_dir(self.partition_columns, dict(group.values))
            if group.fetch_range is not None:  # row count known: one task per file
                for offset, length in _pieces(group.count, rows_per_file):
                    fetch = partial(group.fetch_range, offset, length)
                    tasks.append(partial(self._write_rows, fetch, folder, group.values, None))
            else:  # rows known only once selected: the task cuts its own files
                tasks.append(partial(self._write_rows, group.fetch_all, folder, group.values, rows_per_file))
        return self._run_all(tasks)

    def _spread(self, groups: list["_Group"], rows_per_file: int) -> int:
        """Smaller files for a small write, so that every worker has one (≥ one row group each)."""
        largest = max(g.count for g in groups)
        wanted = math.ceil(self.options.max_workers / len(groups))
        return max(self.options.spread_min_rows, min(rows_per_file, math.ceil(largest / wanted)))

    def _plan_groups(self, table: pa.Table, data: pa.Table) -> list["_Group"]:
        """The chunk's partitions and how a worker selects each one's rows.

        - one partition: zero-copy slices;
        - a few partitions: each worker filters its own (no row-sized index arrays at all);
        - many partitions (or float keys, where ``==`` and hashing disagree on NaN/-0.0): one
          stable sort of the group codes, then each file takes its slice of the order.
        """
        if not self.partition_columns:
            return [_Group((), data.num_rows, partial(_slice, data), None)]
        keys = (
            table.select(self.partition_columns)
            .group_by(self.partition_columns, use_threads=False)
            .aggregate([([], "count_all")])
        )
        types = [self.schema.field(c).type for c in self.partition_columns]
        if keys.num_rows == 1:
            return [_Group(self._serialized(keys, 0, types), data.num_rows, partial(_slice, data), None)]
        floats = any(pa.types.is_floating(t) for t in types)
        if keys.num_rows <= _FILTER_MAX_PARTITIONS and not floats:
            counts = keys.column("count_all").to_pylist()
            groups = []
            for i in range(keys.num_rows):
                terms = [(table.column(c), keys.column(c)[i]) for c in self.partition_columns]
                groups.append(_Group(self._serialized(keys, i, types), counts[i], None, partial(_filter, data, terms)))
            return groups
        codes = group_codes([table.column(c) for c in self.partition_columns])
        order = pc.sort_indices(codes)  # stable: rows keep their order inside a partition
        codes_and_counts = pc.value_counts(codes).flatten()  # codes are dense: 0..K-1
        counts = codes_and_counts[1].take(pc.sort_indices(codes_and_counts[0])).to_pylist()
        firsts = pc.take(order, pa.array(_starts(counts), pa.int64()))
        first_rows = table.select(self.partition_columns).take(firsts)
        groups = []
        start = 0
        for i, count in enumerate(counts):
            fetch = partial(_take_range, data, order, start)
            groups.append(_Group(self._serialized(first_rows, i, types), count, fetch, None))
            start += count
        return groups

    def _serialized(self, keys: pa.Table, row: int, types: list[pa.DataType]) -> tuple[tuple[str, str | None], ...]:
        return tuple(
            (col, serialize_partition_value(keys.column(col)[row], t))
            for col, t in zip(self.partition_columns, types)
        )

    def _write_rows(self, fetch: Callable[[], pa.Table], folder: str, values: tuple,
                    rows_per_file: int | None) -> None:
        if self.aborted:  # another file failed: the call is being undone, write nothing more
            return
        rows = fetch()
        if rows_per_file is None:
            self._write_file(rows, folder, values)
            return
        for offset, length in _pieces(rows.num_rows, rows_per_file):
            self._write_file(rows.slice(offset, length), folder, values)

    # ---- one file -------------------------------------------------------------------------------
    def _new_file(self, folder: str) -> tuple[str, str]:
        """A fresh file name in ``folder`` ('' = the table root): (path relative to the root, full
        path). Its directory exists and the file is registered for cleanup before it is opened."""
        if self.options.directory:
            folder = f"{self.options.directory}/{folder}" if folder else self.options.directory
        name = f"part-{self._next_file_number():05d}-{uuid.uuid4()}-c000{self.suffix}"
        relative = f"{folder}/{name}" if folder else name
        directory = f"{self.store.arrow_root}/{folder}" if folder else self.store.arrow_root
        self._ensure_dir(directory)
        full = f"{directory}/{name}"
        with self.lock:
            self.started.append(full)
        return relative, full

    def _write_file(self, rows: pa.Table, folder: str, values: tuple[tuple[str, str | None], ...]) -> None:
        relative, full = self._new_file(folder)
        if self.local and rows.nbytes <= _BUFFERED_FILE_BYTES:
            size = write_new_file(full, self._parquet_bytes(rows))  # fsynced at commit
        else:
            with self.fs.open_output_stream(full) as sink:
                self._write_parquet(rows, sink)
                size = sink.tell()
        mtime = int(time.time() * 1000)
        unindexed = [c for c in self.options.unindexed_columns if c in rows.column_names]
        stats = compute_stats(rows.drop_columns(unindexed) if unindexed else rows, self.options.stats_columns,
                              self.options.num_indexed_cols)
        with self.lock:
            self.results.append((encode_path(relative), values, size, mtime, stats))

    def _write_parquet(self, rows: pa.Table, sink: pa.NativeFile) -> None:
        pq.write_table(
            rows,
            sink,
            row_group_size=self.options.row_group_rows,
            compression=self.options.compression,
            **self._encodings(rows).writer_args(),
        )

    def _parquet_bytes(self, rows: pa.Table) -> pa.Buffer:
        """A small file encoded in memory: Parquet's writer issues a write and a seek per page
        header, column chunk and footer (~25 syscalls for a one-row file); the disk gets one."""
        sink = pa.BufferOutputStream()
        self._write_parquet(rows, sink)
        return sink.getvalue()

    def _encodings(self, rows: pa.Table) -> encodings.Encodings:
        """Per-column Parquet encodings for a file starting with ``rows`` (io/encodings.py)."""
        return encodings.choose(rows, self.leaf_paths if self.has_nested else None)

    def _next_file_number(self) -> int:
        with self.lock:
            n = self.file_counter
            self.file_counter += 1
            return n

    def _ensure_dir(self, directory: str) -> None:
        if directory in self.made_dirs:
            return
        self.store.makedirs(directory)
        with self.lock:
            self.made_dirs.add(directory)

    # ---- completion -----------------------------------------------------------------------------
    def _wait(self, futures: list[Future]) -> None:
        if not futures:
            return
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for f in done:
            exc = f.exception()
            if exc is not None:
                raise exc

    def actions(self) -> pa.Table:
        results = sorted(self.results, key=lambda r: r[0])
        n = len(results)
        columns = {
            "path": pa.array([r[0] for r in results], pa.string()),
            "partitionValues": pa.array([list(r[1]) for r in results], FILE_SCHEMA.field("partitionValues").type),
            "size": pa.array([r[2] for r in results], pa.int64()),
            "modificationTime": pa.array([r[3] for r in results], pa.int64()),
            "dataChange": pa.array([self.data_change] * n, pa.bool_()),
            "stats": pa.array([r[4] for r in results], pa.string()),
        }
        arrays = [columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in FILE_SCHEMA]
        return pa.Table.from_arrays(arrays, schema=FILE_SCHEMA)

    def abort(self) -> None:
        """Stop queued work, let running writes finish, delete every file this call started."""
        self.aborted = True
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        with self.lock:
            paths = list(self.started)
        for path in paths:
            try:
                self.fs.delete_file(path)
            except OSError:  # already gone, or never created
                pass

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


