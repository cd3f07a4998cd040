"""The small result DataFrames of the DeltaTable API, in delta-spark's column names and types.

``history()`` is DESCRIBE HISTORY, ``detail()`` DESCRIBE DETAIL, OPTIMIZE returns its path and a
``metrics`` struct, RESTORE and the DML calls return one row of metrics (Delta SQL's output
columns). Built on the driver from what the core already knows (commitInfo, the snapshot, a
commit's metrics and its actions): one local relation each, no job until the caller runs one.
Columns Delta fills from its environment (user, job, notebook, cluster) are null here.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any, Iterable

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..tables.table import Table
from ..tables.transaction import CommitResult
from ..txnlog.features import reader_features, writer_features


def _fields(*spec: tuple[str, Any]) -> StructType:
    return StructType([StructField(name, t, True) for name, t in spec])


_STRING_MAP = MapType(StringType(), StringType(), True)

HISTORY_SCHEMA = _fields(
    ("version", LongType()),
    ("timestamp", TimestampType()),
    ("userId", StringType()),
    ("userName", StringType()),
    ("operation", StringType()),
    ("operationParameters", _STRING_MAP),
    ("job", _fields(("jobId", StringType()), ("jobName", StringType()), ("jobRunId", StringType()),
                    ("runId", StringType()), ("jobOwnerId", StringType()), ("triggerType", StringType()))),
    ("notebook", _fields(("notebookId", StringType()))),
    ("clusterId", StringType()),
    ("readVersion", LongType()),
    ("isolationLevel", StringType()),
    ("isBlindAppend", BooleanType()),
    ("operationMetrics", _STRING_MAP),
    ("userMetadata", StringType()),
    ("engineInfo", StringType()),
)

DETAIL_SCHEMA = _fields(
    ("format", StringType()),
    ("id", StringType()),
    ("name", StringType()),
    ("description", StringType()),
    ("location", StringType()),
    ("createdAt", TimestampType()),
    ("lastModified", TimestampType()),
    ("partitionColumns", ArrayType(StringType(), True)),
    ("clusteringColumns", ArrayType(StringType(), True)),
    ("numFiles", LongType()),
    ("sizeInBytes", LongType()),
    ("properties", _STRING_MAP),
    ("minReaderVersion", IntegerType()),
    ("minWriterVersion", IntegerType()),
    ("tableFeatures", ArrayType(StringType(), True)),
    ("statistics", MapType(StringType(), LongType(), True)),
)

_FILE_STATS = _fields(("min", LongType()), ("max", LongType()), ("avg", DoubleType()),
                      ("totalFiles", LongType()), ("totalSize", LongType()))
_FILE_COUNT = _fields(("num", LongType()), ("size", LongType()))
_ZORDER_STATS = _fields(("strategyName", StringType()), ("inputCubeFiles", _FILE_COUNT),
                        ("inputOtherFiles", _FILE_COUNT), ("inputNumCubes", LongType()),
                        ("mergedFiles", _FILE_COUNT), ("numOutputCubes", LongType()),
                        ("mergedNumCubes", LongType()))
OPTIMIZE_SCHEMA = _fields(
    ("path", StringType()),
    ("metrics", _fields(
        ("numFilesAdded", LongType()),
        ("numFilesRemoved", LongType()),
        ("filesAdded", _FILE_STATS),
        ("filesRemoved", _FILE_STATS),
        ("partitionsOptimized", LongType()),
        ("zOrderStats", _ZORDER_STATS),
        ("numBatches", LongType()),
        ("totalConsideredFiles", LongType()),
        ("totalFilesSkipped", LongType()),
        ("preserveInsertionOrder", BooleanType()),
        ("startTimeMs", LongType()),
        ("endTimeMs", LongType()),
        ("deletionVectorStats", _fields(("numDeletionVectorsRemoved", LongType()),
                                        ("numDeletionVectorRowsRemoved", LongType()))),
    )),
)

RESTORE_SCHEMA = _fields(*((name, LongType()) for name in (
    "table_size_after_restore", "num_of_files_after_restore", "num_removed_files", "num_restored_files",
    "removed_files_size", "restored_files_size")))
_RESTORE_METRICS = ("tableSizeAfterRestore", "numOfFilesAfterRestore", "numRemovedFiles", "numRestoredFiles",
                    "removedFilesSize", "restoredFilesSize")

DELETE_SCHEMA = _fields(("num_affected_rows", LongType()))
UPDATE_SCHEMA = DELETE_SCHEMA
MERGE_SCHEMA = _fields(("num_affected_rows", LongType()), ("num_updated_rows", LongType()),
                       ("num_deleted_rows", LongType()), ("num_inserted_rows", LongType()))


def _utc(ms: Any) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(int(ms) / 1000, tz=dt.timezone.utc) if isinstance(ms, (int, float)) else None


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _strings(mapping: Any) -> dict[str, str] | None:
    """A commitInfo map as map<string,string> (Delta writes strings; others may write JSON values)."""
    if not isinstance(mapping, dict):
        return None
    return {str(k): v if isinstance(v, str) else orjson.dumps(v).decode() for k, v in mapping.items()}


def frame(spark: Any, rows: Iterable[tuple], schema: StructType) -> Any:
    return spark.createDataFrame(list(rows), schema)


def history_frame(spark: Any, commits: list[dict[str, Any]]) -> Any:
    """DESCRIBE HISTORY rows from commitInfo dicts (``Table.history``), newest first."""
    rows = []
    for c in commits:
        job = c.get("job") if isinstance(c.get("job"), dict) else None
        notebook = c.get("notebook") if isinstance(c.get("notebook"), dict) else None
        rows.append((
            _int(c.get("version")), _utc(c.get("timestamp")), c.get("userId"), c.get("userName"),
            c.get("operation"), _strings(c.get("operationParameters")),
            tuple(job.get(k) for k in ("jobId", "jobName", "jobRunId", "runId", "jobOwnerId", "triggerType"))
            if job else None,
            (notebook.get("notebookId"),) if notebook else None,
            c.get("clusterId"), _int(c.get("readVersion")), c.get("isolationLevel"), c.get("isBlindAppend"),
            _strings(c.get("operationMetrics")), c.get("userMetadata"), c.get("engineInfo"),
        ))
    return frame(spark, rows, HISTORY_SCHEMA)


def clustering_columns(table: Table) -> list[str]:
    """Liquid clustering columns from the ``delta.clustering`` domain (PROTOCOL.md), if any."""
    domain = table.snapshot.domains.get("delta.clustering")
    if domain is None or domain.removed:
        return []
    try:
        columns = orjson.loads(domain.configuration).get("clusteringColumns") or []
    except (orjson.JSONDecodeError, AttributeError):
        return []
    return [".".join(c) if isinstance(c, list) else str(c) for c in columns]


def table_features(table: Table) -> list[str]:
    """Every feature the protocol supports, legacy versions' implied ones included (as Delta lists them)."""
    protocol = table.protocol
    return sorted(set(reader_features(protocol)) | set(writer_features(protocol)))


def detail_frame(spark: Any, table: Table) -> Any:
    """DESCRIBE DETAIL: one row about the table's latest version."""
    snapshot = table.snapshot
    files = snapshot.files
    size = int(pc.sum(files["size"]).as_py() or 0) if files.num_rows else 0
    meta = snapshot.metadata
    row = ("delta", meta.id, meta.name, meta.description, qualified_location(table.uri), _utc(meta.created_time),
           _utc(snapshot.timestamp_ms), list(snapshot.partition_columns), clustering_columns(table),
           files.num_rows, size, dict(snapshot.properties), snapshot.protocol.min_reader_version,
           snapshot.protocol.min_writer_version, table_features(table), deletion_vector_statistics(files))
    return frame(spark, [row], DETAIL_SCHEMA)


def qualified_location(uri: str) -> str:
    """The table's location as Spark qualifies it: a local path as ``file:/abs/path``, a URI as is."""
    if "://" in uri:
        return "file:" + uri[len("file://"):] if uri.startswith("file://") else uri
    return "file:" + os.path.abspath(uri)


def deletion_vector_statistics(files: pa.Table) -> dict[str, int]:
    """DESCRIBE DETAIL's ``statistics``: how many live files carry a DV and the rows they delete."""
    if not files.num_rows or "deletionVector" not in files.column_names:
        return {"numRowsDeletedByDeletionVectors": 0, "numDeletionVectors": 0}
    dvs = files["deletionVector"]
    deleted = pc.sum(pc.struct_field(dvs, "cardinality")).as_py() if dvs.null_count < len(dvs) else 0
    return {"numRowsDeletedByDeletionVectors": int(deleted or 0), "numDeletionVectors": len(dvs) - dvs.null_count}


def _file_stats(files: pa.Table | None) -> tuple | None:
    if files is None or not files.num_rows:
        return (None, None, None, 0, 0)
    sizes = files["size"]
    total = int(pc.sum(sizes).as_py() or 0)
    return (int(pc.min(sizes).as_py()), int(pc.max(sizes).as_py()), total / files.num_rows, files.num_rows, total)


def _zorder_stats(adds: pa.Table | None, removes: pa.Table | None) -> tuple:
    """Delta's ``ZOrderStats`` of a Z-order OPTIMIZE. deltatx Z-orders every selected file of a
    partition together (Delta's "all" strategy: no file is kept as an existing cube), so every
    input file is "other" and merged, and each rewritten partition is one output cube."""
    count = (removes.num_rows, int(pc.sum(removes["size"]).as_py() or 0)) if removes is not None else (0, 0)
    cubes = 0
    if adds is not None and adds.num_rows:
        cubes = len({tuple(sorted(v or ())) for v in adds["partitionValues"].to_pylist()})
    return ("all", (0, 0), count, 0, count, cubes, None)


def optimize_frame(spark: Any, location: str, result: CommitResult, adds: pa.Table | None,
                   removes: pa.Table | None, started_ms: int, ended_ms: int, *, zorder: bool = False) -> Any:
    """OPTIMIZE's result: the table path and Delta's ``OptimizeMetrics`` (the fields deltatx has);
    ``zOrderStats`` for a Z-order, null for a compaction (as Delta)."""
    m = result.metrics
    zorder_row = _zorder_stats(adds, removes) if zorder else None
    metrics = (
        _int(m.get("numFilesAdded", m.get("numAddedFiles", 0))),
        _int(m.get("numFilesRemoved", m.get("numRemovedFiles", 0))),
        _file_stats(adds), _file_stats(removes),
        _int(m.get("partitionsOptimized", 0)), zorder_row, _int(m.get("numBatches", 0)),
        _int(m.get("totalConsideredFiles", 0)), _int(m.get("totalFilesSkipped", 0)),
        False, started_ms, ended_ms,
        (_int(m.get("numDeletionVectorsRemoved", 0)), _int(m.get("numDeletionVectorRowsRemoved", 0))),
    )
    return frame(spark, [(location, metrics)], OPTIMIZE_SCHEMA)


def restore_frame(spark: Any, result: CommitResult) -> Any:
    return frame(spark, [tuple(_int(result.metrics.get(k, 0)) for k in _RESTORE_METRICS)], RESTORE_SCHEMA)


def delete_frame(spark: Any, result: CommitResult) -> Any:
    return frame(spark, [(_int(result.metrics.get("numDeletedRows")),)], DELETE_SCHEMA)


def update_frame(spark: Any, result: CommitResult) -> Any:
    return frame(spark, [(_int(result.metrics.get("numUpdatedRows")),)], UPDATE_SCHEMA)


def merge_frame(spark: Any, result: CommitResult) -> Any:
    m = result.metrics
    updated, deleted, inserted = (_int(m.get(k, 0)) or 0 for k in
                                  ("numTargetRowsUpdated", "numTargetRowsDeleted", "numTargetRowsInserted"))
    return frame(spark, [(updated + deleted + inserted, updated, deleted, inserted)], MERGE_SCHEMA)
