"""The files of one write: naming, encoding, statistics, the add rows, and undoing it all.

Both ways of cutting rows into files — whole tables and partitioned chunks
(:mod:`.partitioned_write`), unpartitioned streams file by file (:mod:`.streamed_write`) — hand
their rows to one :class:`DataFileSink`. It owns what they share: the physical layout (column
mapping, which columns go into the files and which get statistics), fresh file names and their
folders, the Parquet encoding of a file, the statistics and the add row of every file written,
the worker pool, and the list of every file started, so that a failed write deletes them all
(nothing references them yet: they would only be litter for VACUUM).
"""

from __future__ import annotations

import functools
import threading
import time
import uuid
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import TYPE_CHECKING, Callable

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..errors import SchemaMismatchError
from ..txnlog.actions import FILE_SCHEMA
from ..txnlog.stats import FileStats, compute_stats
from ..txnlog.store import write_new_file
from . import encodings, variant_storage
from .paths import encode_path
from .streamfile import StreamedFile
from ..txnlog.struct_nulls import fill_hidden_nulls, not_null_violations_typed

if TYPE_CHECKING:
    from ..txnlog.store import LogStore
    from .writer import WriteOptions

#: data smaller than this (in memory) is encoded into a buffer and written to a local disk at once
BUFFERED_FILE_BYTES = 4 * 1024 * 1024

#: one written file: (add path, serialized partition values, size, modification time, stats JSON)
WrittenFile = tuple[str, tuple[tuple[str, str | None], ...], int, int, str]


class DataFileSink:
    """Where the rows of one ``write_data_files`` call become files; thread-safe for its pool."""

    def __init__(self, store: "LogStore", schema: pa.Schema, partition_columns: list[str],
                 options: "WriteOptions", data_change: bool):
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
        self._lock = threading.Lock()
        self._started: list[str] = []  # full paths, registered before opening (cleanup set)
        self._written: list[WrittenFile] = []
        self._made_dirs: set[str] = set()
        self._file_counter = 0
        #: set once the write is being undone: queued files are then not written
        self.aborted = False
        codec = (options.compression or "none").lower()
        self._suffix = ".parquet" if codec in ("none", "uncompressed") else f".{codec}.parquet"
        self._has_nested = any(pa.types.is_nested(f.type) for f in self.file_schema)
        self._has_variant = any(variant_storage.holds_variant(f.type) for f in self.file_schema)

    # ---- rows in ------------------------------------------------------------------------------
    def conform(self, table: pa.Table) -> pa.Table:
        """``table`` as the schema's columns and types (physical names under column mapping)."""
        schema = self.input_schema
        if table.schema.names != schema.names:
            missing = [n for n in schema.names if n not in table.schema.names]
            if missing:
                raise SchemaMismatchError(f"the data lacks columns {missing} of the schema {schema.names}")
            table = table.select(schema.names)
        if self._has_variant:  # before any cast: Arrow refuses to cast a NULL variant's NULL children
            table = variant_storage.storable(table)
        if not table.schema.equals(schema, check_metadata=False):
            try:
                table = table.cast(schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                raise SchemaMismatchError(
                    f"the data does not fit the table schema ({exc}); cast it to {schema} first"
                ) from None
        return self.mapping.to_physical(table) if self.mapping is not None else table

    def rows_per_file(self, bytes_per_row: float) -> int:
        """Rows of one file: ``target_file_rows``, fewer when they would pass ``target_file_bytes``."""
        by_bytes = int(self.options.target_file_bytes / max(bytes_per_row, 1.0))
        return max(1, min(self.options.target_file_rows, by_bytes))

    # ---- work -----------------------------------------------------------------------------------
    @property
    def pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.options.max_workers, thread_name_prefix="deltatx-write")
        return self._pool

    def run_all(self, tasks: list[Callable[[], None]]) -> list[Future]:
        """Run tasks on the pool; a lone task runs inline (a thread hop costs more than a small file)."""
        if len(tasks) == 1 and self._pool is None:
            done: Future = Future()
            try:
                tasks[0]()
            except BaseException as exc:  # surfaced by wait() like a pool failure
                done.set_exception(exc)
            else:
                done.set_result(None)
            return [done]
        return [self.pool.submit(task) for task in tasks]

    @staticmethod
    def wait(futures: list[Future]) -> None:
        """Until all are done or one failed; the first failure is raised."""
        if not futures:
            return
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for f in done:
            exc = f.exception()
            if exc is not None:
                raise exc

    # ---- one file -------------------------------------------------------------------------------
    def write_file(self, rows: pa.Table, folder: str, values: tuple[tuple[str, str | None], ...]) -> None:
        """``rows`` (data columns only) as one new file in ``folder`` of partition ``values``."""
        relative, full = self._new_file(folder)
        if self.local and rows.nbytes <= BUFFERED_FILE_BYTES:
            size = write_new_file(full, self._parquet_bytes(rows))  # fsynced at commit
        else:
            with self.fs.open_output_stream(full) as sink:
                self._write_parquet(rows, sink)
                size = sink.tell()
        mtime = int(time.time() * 1000)
        unindexed = [c for c in self.options.unindexed_columns if c in rows.column_names]
        stats = compute_stats(rows.drop_columns(unindexed) if unindexed else rows, self.options.stats_columns,
                              self.options.num_indexed_cols)
        self._add(relative, values, size, mtime, stats)

    def open_streamed(self, sample: pa.Table) -> tuple[StreamedFile, str]:
        """A new unpartitioned file whose rows will arrive over time, encoded as ``sample`` says
        is best; returns it and its path relative to the table root."""
        relative, full = self._new_file("")
        sink = self.fs.open_output_stream(full)
        streamed = StreamedFile(sink, self.file_schema, compression=self.options.compression,
                                encodings=self._encodings(sample),
                                row_group_rows=self.options.row_group_rows,
                                stats=FileStats(self._stats_schema, self.options.stats_columns,
                                                self.options.num_indexed_cols))
        return streamed, relative

    def finish_streamed(self, streamed: StreamedFile, relative: str) -> None:
        size, mtime, stats = streamed.close()
        self._add(relative, (), size, mtime, stats)

    def _add(self, relative: str, values: tuple[tuple[str, str | None], ...], size: int, mtime: int,
             stats: str) -> None:
        with self._lock:
            self._written.append((encode_path(relative), values, size, mtime, stats))

    def _new_file(self, folder: str) -> tuple[str, str]:
        """A fresh file name in ``folder`` ('' = the table root): (path relative to the root, full
        path). Its directory exists and the file is registered for cleanup before it is opened."""
        if self.options.directory:
            folder = f"{self.options.directory}/{folder}" if folder else self.options.directory
        name = f"part-{self._next_file_number():05d}-{uuid.uuid4()}-c000{self._suffix}"
        relative = f"{folder}/{name}" if folder else name
        directory = f"{self.store.arrow_root}/{folder}" if folder else self.store.arrow_root
        self._ensure_dir(directory)
        full = f"{directory}/{name}"
        with self._lock:
            self._started.append(full)
        return relative, full

    def _write_parquet(self, rows: pa.Table, sink: pa.NativeFile) -> None:
        with not_null_violations_typed():
            pq.write_table(
                fill_hidden_nulls(rows),
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
        return encodings.choose(rows, self._leaf_paths if self._has_nested else None)

    @functools.cached_property
    def _stats_schema(self) -> pa.Schema:
        return pa.schema([f for f in self.file_schema if f.name not in self.options.unindexed_columns])

    @functools.cached_property
    def _leaf_paths(self) -> dict[str, list[str]]:
        """Only large files with nested columns consult it, so small writes never pay for it."""
        return encodings.leaf_paths(self.file_schema)

    def _next_file_number(self) -> int:
        with self._lock:
            n = self._file_counter
            self._file_counter += 1
            return n

    def _ensure_dir(self, directory: str) -> None:
        if directory in self._made_dirs:
            return
        self.store.makedirs(directory)
        with self._lock:
            self._made_dirs.add(directory)

    # ---- completion -----------------------------------------------------------------------------
    def actions(self) -> pa.Table:
        """The add actions of every file written, ordered by path (actions.FILE_SCHEMA)."""
        written = sorted(self._written, key=lambda r: r[0])
        n = len(written)
        columns = {
            "path": pa.array([r[0] for r in written], pa.string()),
            "partitionValues": pa.array([list(r[1]) for r in written], FILE_SCHEMA.field("partitionValues").type),
            "size": pa.array([r[2] for r in written], pa.int64()),
            "modificationTime": pa.array([r[3] for r in written], pa.int64()),
            "dataChange": pa.array([self.data_change] * n, pa.bool_()),
            "stats": pa.array([r[4] for r in written], pa.string()),
        }
        arrays = [columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in FILE_SCHEMA]
        return pa.Table.from_arrays(arrays, schema=FILE_SCHEMA)

    def abort(self) -> None:
        """Stop queued work, let running writes finish, delete every file this call started."""
        self.aborted = True
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            paths = list(self._started)
        for path in paths:
            try:
                self.fs.delete_file(path)
            except OSError:  # already gone, or never created
                pass

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
