"""Writing rows as Delta data files: the Parquet files and the ``add`` actions that describe them.

Owns the write half of the data path::

    table or batch stream
      └─► chunk (streams: ~one file's worth of rows at a time)
            └─► group code per row (dictionary-encode partition columns, combined)   columnar
                  └─► one stable sort of the codes ─► per partition: a slice of row indices
                        └─► thread pool, one task per output file:
                              take rows (data columns only) ─► Parquet (snappy, ~1M-row groups)
                              ─► size, mtime ─► stats JSON (compute_stats)
      └─► add actions as a pyarrow Table with actions.FILE_SCHEMA columns

Delta conventions kept: partition columns are not stored in the files, folders are Hive-style
(``col=value``, escaped; null -> ``__HIVE_DEFAULT_PARTITION__``), file names are
``part-00000-<uuid4>-c000.snappy.parquet`` and ``add.path`` is the URI-encoded relative path.
If anything fails, every file this call already wrote is deleted before the error propagates:
nothing references them yet, so they would only be litter for VACUUM.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import SchemaMismatchError
from ..txnlog.actions import FILE_SCHEMA
from ..txnlog.stats import compute_stats
from .paths import encode_path, partition_dir, serialize_partition_value

if TYPE_CHECKING:
    from ..txnlog.store import LogStore


@dataclass
class WriteOptions:
    """How data files are cut and encoded.

    A file gets at most ``target_file_rows`` rows and about ``target_file_bytes`` of (in-memory,
    uncompressed) arrow data, which lands Parquet files in the 128–512 MB range for typical
    columns. Small writes are split into up to ``max_workers`` files (never below one row
    group) so that both cores encode at once.
    """

    target_file_rows: int = 16 * 1024 * 1024
    target_file_bytes: int = 512 * 1024 * 1024
    row_group_rows: int = 1024 * 1024
    max_workers: int = 4
    num_indexed_cols: int = 32
    stats_columns: list[str] | None = None
    compression: str = "snappy"

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


@dataclass(frozen=True)
class _FileTask:
    """One output file: rows ``indices`` (or a slice) of the chunk, in one partition."""

    rows: pa.Table
    indices: pa.Array | None
    folder: str
    partition_values: tuple[tuple[str, str | None], ...]


class _WriteJob:
    """State of one write_data_files call: the pool, what was written, what to undo."""

    def __init__(self, store: "LogStore", schema: pa.Schema, partition_columns: list[str],
                 options: WriteOptions, data_change: bool):
        self.store = store
        self.schema = schema
        self.partition_columns = partition_columns
        self.data_columns = [n for n in schema.names if n not in partition_columns]
        self.file_schema = pa.schema([schema.field(n) for n in self.data_columns])
        self.options = options
        self.data_change = data_change
        self.fs = store.arrow_fs
        self.pool = ThreadPoolExecutor(max_workers=options.max_workers, thread_name_prefix="deltatx-write")
        self.lock = threading.Lock()
        self.started: list[str] = []  # full paths, registered before opening (cleanup set)
        self.results: list[tuple[str, tuple[tuple[str, str | None], ...], int, int, str]] = []
        self.made_dirs: set[str] = set()
        self.file_counter = 0

    # ---- inputs ---------------------------------------------------------------------------------
    def write_table(self, table: pa.Table) -> None:
        table = self._conform(table)
        if table.num_rows == 0:
            return
        self._wait(self._submit_chunk(table, spread=True))

    def write_stream(self, reader: pa.RecordBatchReader) -> None:
        """Chunks of about one file's rows; the next chunk is read while the last one is written."""
        pending: list[Future] = []
        for chunk in self._chunks(reader):
            futures = self._submit_chunk(self._conform(chunk), spread=False)
            self._wait(pending)  # at most two chunks in memory: the one writing, the one read
            pending = futures
        self._wait(pending)

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
        if table.schema.names != self.schema.names:
            missing = [n for n in self.schema.names if n not in table.schema.names]
            if missing:
                raise SchemaMismatchError(f"the data lacks columns {missing} of the schema {self.schema.names}")
            table = table.select(self.schema.names)
        if not table.schema.equals(self.schema, check_metadata=False):
            table = table.cast(self.schema)
        return table

    # ---- planning -------------------------------------------------------------------------------
    def _rows_per_file(self, bytes_per_row: float) -> int:
        by_bytes = int(self.options.target_file_bytes / max(bytes_per_row, 1.0))
        return max(1, min(self.options.target_file_rows, by_bytes))

    def _submit_chunk(self, table: pa.Table, *, spread: bool) -> list[Future]:
        rows_per_file = self._rows_per_file(table.nbytes / max(table.num_rows, 1))
        data = table.select(self.data_columns)
        if not self.partition_columns:
            groups = [(None, 0, table.num_rows, ())]
        else:
            groups = list(self._partition_groups(table))
        if spread and len(groups) < self.options.max_workers:
            rows_per_file = self._spread(groups, rows_per_file)
        futures = []
        for indices, start, count, values in groups:
            folder = partition_dir(self.partition_columns, dict(values))
            pieces = max(1, math.ceil(count / rows_per_file))
            size = math.ceil(count / pieces)
            for offset in range(start, start + count, size):
                length = min(size, start + count - offset)
                if indices is None:
                    task = _FileTask(data.slice(offset, length), None, folder, values)
                else:
                    task = _FileTask(data, indices.slice(offset, length), folder, values)
                futures.append(self.pool.submit(self._write_file, task))
        return futures

    def _spread(self, groups: list, rows_per_file: int) -> int:
        """Smaller files for a small write, so that every worker has one (≥ one row group each)."""
        largest = max(count for _, _, count, _ in groups)
        wanted = math.ceil(self.options.max_workers / len(groups))
        return max(self.options.row_group_rows, min(rows_per_file, math.ceil(largest / wanted)))

    def _partition_groups(self, table: pa.Table):
        """(sorted row indices, start, count, serialized values) per distinct partition."""
        codes = _group_codes([table.column(c) for c in self.partition_columns])
        order = pc.sort_indices(codes)  # stable: rows keep their order inside a partition
        codes_and_counts = pc.value_counts(codes).flatten()  # codes are dense: 0..K-1
        by_code = pc.sort_indices(codes_and_counts[0])
        counts_sorted = codes_and_counts[1].take(by_code).to_pylist()
        types = [self.schema.field(c).type for c in self.partition_columns]
        start = 0
        for count in counts_sorted:
            first_row = order[start].as_py()
            serialized = tuple(
                (col, serialize_partition_value(table.column(col)[first_row], t))
                for col, t in zip(self.partition_columns, types)
            )
            yield order, start, count, serialized
            start += count

    # ---- one file -------------------------------------------------------------------------------
    def _write_file(self, task: _FileTask) -> None:
        rows = task.rows if task.indices is None else task.rows.take(task.indices)
        name = f"part-{self._next_file_number():05d}-{uuid.uuid4()}-c000.{self.options.compression}.parquet"
        relative = f"{task.folder}/{name}" if task.folder else name
        directory = f"{self.store.arrow_root}/{task.folder}" if task.folder else self.store.arrow_root
        self._ensure_dir(directory)
        full = f"{directory}/{name}"
        with self.lock:
            self.started.append(full)
        with self.fs.open_output_stream(full) as sink:
            pq.write_table(
                rows,
                sink,
                row_group_size=self.options.row_group_rows,
                compression=self.options.compression,
            )
            size = sink.tell()
        mtime = int(time.time() * 1000)
        stats = compute_stats(rows, self.options.stats_columns, self.options.num_indexed_cols)
        with self.lock:
            self.results.append((encode_path(relative), task.partition_values, size, mtime, stats))

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
        self.pool.shutdown(wait=True, cancel_futures=True)
        with self.lock:
            paths = list(self.started)
        for path in paths:
            try:
                self.fs.delete_file(path)
            except (FileNotFoundError, OSError):
                pass

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def _group_codes(columns: list[pa.ChunkedArray]) -> pa.Array:
    """A dense int64 code per row naming its combination of partition values (null included)."""
    code = None
    for column in columns:
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        enc = pc.dictionary_encode(column, null_encoding="encode")
        indices = enc.indices.cast(pa.int64())
        if code is None:
            code = indices
        else:
            combined = pc.add(pc.multiply(code, len(enc.dictionary)), indices)
            code = pc.dictionary_encode(combined).indices.cast(pa.int64())
    return code
