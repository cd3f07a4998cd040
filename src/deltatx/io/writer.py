"""Writing rows as Delta data files: the Parquet files and the ``add`` actions that describe them.

The entry point of the write half of the data path; the work is split by how the rows arrive::

    write_data_files(table or batch stream)
      ├─ a table ───────────────► partitioned_write.write_table   partitions, file sizes, pool
      ├─ a partitioned stream ──► partitioned_write.write_chunks  the same, a chunk at a time
      └─ an unpartitioned stream ► streamed_write.write_stream    files filled as rows arrive
           every file ──► file_sink.DataFileSink: its name, Parquet (snappy, 128k-row groups;
                          dictionary or delta encoding where a sample says it pays: encodings.py),
                          stats, its add row; every file started is deleted if the write fails
    ─► DataFileSink.actions(): every file's add row, a pyarrow Table of actions.FILE_SCHEMA

Delta conventions kept: partition columns are not stored in the files, folders are Hive-style
(``col=value``, escaped; null -> ``__HIVE_DEFAULT_PARTITION__``), file names are
``part-00000-<uuid4>-c000.snappy.parquet`` and ``add.path`` is the URI-encoded relative path.
If anything fails, every file this call already wrote is deleted before the error propagates:
nothing references them yet, so they would only be litter for VACUUM.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from ..errors import SchemaMismatchError
from . import partitioned_write, streamed_write
from .file_sink import DataFileSink

if TYPE_CHECKING:
    from ..txnlog.column_mapping import ColumnMapping
    from ..txnlog.store import LogStore


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
    sink = DataFileSink(store, schema, partition_columns, options, data_change)
    try:
        if isinstance(data, pa.Table):
            partitioned_write.write_table(sink, data)
        elif sink.partition_columns:
            partitioned_write.write_chunks(sink, data)
        else:
            streamed_write.write_stream(sink, data)
        return sink.actions()
    except BaseException:
        sink.abort()
        raise
    finally:
        sink.close()


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
