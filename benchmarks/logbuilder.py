"""Build long Delta logs fast for the open-time benchmarks (P2, P3).

Writes commit JSON files directly with deltatx's own encoder and put-if-absent
(``encode_commit`` + ``store.put_commit``, fsync off) instead of running thousands of real
appends: version 0 holds commitInfo + protocol + metaData, every later version commitInfo + N
adds. The add actions reference data files that are never written: opening a table reads only
the log, and both engines are timed on exactly these bytes.
"""

from __future__ import annotations

import time
import uuid

import orjson
import pyarrow as pa

from deltatx.txnlog.actions import FILE_SCHEMA, Metadata, Protocol, encode_commit
from deltatx.txnlog.schema import schema_to_json
from deltatx.txnlog.store import open_store

from .workloads import PARTITIONS, WIDE_SCHEMA

#: far beyond any version we build, so no checkpoint is ever due
NO_CHECKPOINT_INTERVAL = "100000000"


def add_actions(first_version: int, commits: int, per_commit: int, partitioned: bool, now_ms: int, *,
                id_start: int = 0, path_prefix: str = "") -> pa.Table:
    """All add actions of versions ``first_version..`` as one columnar table (sliced per commit).

    File ``i`` is in partition ``i % 10`` and its stats say it holds ids
    ``id_start + 1000·i .. id_start + 1000·i + 999``.
    """
    n = commits * per_commit
    rows_per_file = 1000
    paths, parts, stats = [], [], []
    for i in range(n):
        version = first_version + i // per_commit
        part = i % PARTITIONS
        lo = id_start + i * rows_per_file
        prefix = path_prefix + (f"part={part}/" if partitioned else "")
        paths.append(f"{prefix}v{version:08d}-{i % per_commit:03d}-{uuid.UUID(int=i).hex}.parquet")
        parts.append([("part", str(part))] if partitioned else [])
        stats.append(orjson.dumps({
            "numRecords": rows_per_file,
            "minValues": {"id": lo, "value": lo * 0.5, "name": "name-0"},
            "maxValues": {"id": lo + rows_per_file - 1, "value": (lo + rows_per_file - 1) * 0.5, "name": "name-9"},
            "nullCount": {"id": 0, "value": 0, "name": 0},
        }).decode())
    return pa.table({
        "path": paths,
        "partitionValues": pa.array(parts, FILE_SCHEMA.field("partitionValues").type),
        "size": pa.array([4096] * n, pa.int64()),
        "modificationTime": pa.array([now_ms] * n, pa.int64()),
        "dataChange": pa.array([True] * n, pa.bool_()),
        "stats": stats,
        "tags": pa.nulls(n, FILE_SCHEMA.field("tags").type),
        "deletionVector": pa.nulls(n, FILE_SCHEMA.field("deletionVector").type),
        "baseRowId": pa.nulls(n, pa.int64()),
        "defaultRowCommitVersion": pa.nulls(n, pa.int64()),
        "clusteringProvider": pa.nulls(n, pa.string()),
    }, schema=FILE_SCHEMA)


def build_log(uri: str, commits: int, adds_per_commit: int, *, partitioned: bool = False,
              checkpoint_interval: str = NO_CHECKPOINT_INTERVAL) -> int:
    """Write versions 0..``commits`` at ``uri``; return the last version (= ``commits``)."""
    store = open_store(uri, {"fsync": False})
    now_ms = int(time.time() * 1000)
    metadata = Metadata(
        id=str(uuid.uuid4()),
        schema_string=schema_to_json(WIDE_SCHEMA),
        partition_columns=("part",) if partitioned else (),
        configuration={"delta.checkpointInterval": checkpoint_interval},
        created_time=now_ms,
    )
    create_info = {"timestamp": now_ms, "operation": "CREATE TABLE", "operationParameters": {},
                   "isBlindAppend": True, "engineInfo": "deltatx-benchmarks"}
    store.put_commit(0, encode_commit(create_info, protocol=Protocol(1, 2), metadata=metadata))
    adds = add_actions(1, commits, adds_per_commit, partitioned, now_ms)
    for version in range(1, commits + 1):
        info = {"timestamp": now_ms + version, "operation": "WRITE",
                "operationParameters": {"mode": "Append"}, "readVersion": version - 1,
                "isBlindAppend": True, "engineInfo": "deltatx-benchmarks"}
        chunk = adds.slice((version - 1) * adds_per_commit, adds_per_commit)
        store.put_commit(version, encode_commit(info, adds=chunk))
    return commits
