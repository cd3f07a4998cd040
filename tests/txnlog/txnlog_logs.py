"""Hand-built Delta logs for the txnlog tests: commits written with encode_commit + put_commit.

A uniquely named module (not conftest) so that test modules can import the helpers.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any, Iterable

import pyarrow as pa
from deltatx.txnlog.actions import (
    FILE_SCHEMA,
    REMOVE_SCHEMA,
    DomainMetadata,
    Metadata,
    Protocol,
    Txn,
    encode_commit,
    file_actions_table,
)
from deltatx.txnlog.schema import schema_to_json
from deltatx.txnlog.snapshot import Snapshot
from deltatx.txnlog.store import LocalLogStore, LogStore

TABLE_SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string())])


class CountingLocalStore(LocalLogStore):
    """A local store that records every log file it reads."""

    def __init__(self, root: str):
        super().__init__(root, root, fsync=False)
        self.reads: list[str] = []

    def read_log_file(self, name: str) -> bytes:
        self.reads.append(name)
        return super().read_log_file(name)


def add_row(path: str, part: str | None = "a", *, size: int = 100, dv: dict[str, Any] | None = None,
            stats: str | None = None, data_change: bool = True, tags: dict[str, str] | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "path": path,
        "partitionValues": {"part": part} if part is not None else {},
        "size": size,
        "modificationTime": 1_700_000_000_000,
        "dataChange": data_change,
        "stats": stats if stats is not None else '{"numRecords":10}',
    }
    if dv is not None:
        row["deletionVector"] = dv
    if tags is not None:
        row["tags"] = tags
    return row


def remove_row(path: str, part: str | None = "a", *, dv: dict[str, Any] | None = None,
               deleted_at: int | None = None, size: int = 100) -> dict[str, Any]:
    row: dict[str, Any] = {
        "path": path,
        "deletionTimestamp": deleted_at if deleted_at is not None else int(time.time() * 1000),
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": {"part": part} if part is not None else {},
        "size": size,
    }
    if dv is not None:
        row["deletionVector"] = dv
    return row


def dv(path_or_inline: str, offset: int | None = 1, cardinality: int = 2) -> dict[str, Any]:
    out: dict[str, Any] = {"storageType": "u", "pathOrInlineDv": path_or_inline, "sizeInBytes": 40,
                           "cardinality": cardinality}
    if offset is not None:
        out["offset"] = offset
    return out


def table_metadata(configuration: dict[str, str] | None = None, schema: pa.Schema = TABLE_SCHEMA,
                   partition_columns: tuple[str, ...] = ("part",), table_id: str = "table-id") -> Metadata:
    return Metadata(id=table_id, schema_string=schema_to_json(schema), partition_columns=partition_columns,
                    configuration=dict(configuration or {}), created_time=1_700_000_000_000)


class LogWriter:
    """Writes commits one version after another, as a writer following PROTOCOL.md would."""

    def __init__(self, store: LogStore):
        self.store = store
        self.version = -1

    def commit(
        self,
        *,
        adds: Iterable[dict[str, Any]] = (),
        removes: Iterable[dict[str, Any]] = (),
        protocol: Protocol | None = None,
        metadata: Metadata | None = None,
        txns: Iterable[Txn] = (),
        domains: Iterable[DomainMetadata] = (),
        info: dict[str, Any] | None = None,
    ) -> int:
        version = self.version + 1
        payload = encode_commit(
            info or {"timestamp": int(time.time() * 1000), "operation": "WRITE", "txnId": uuid.uuid4().hex},
            protocol=protocol,
            metadata=metadata,
            txns=txns,
            domains=domains,
            removes=file_actions_table(list(removes), REMOVE_SCHEMA),
            adds=file_actions_table(list(adds), FILE_SCHEMA),
        )
        self.store.put_commit(version, payload)
        self.version = version
        return version

    def raw(self, payload: bytes) -> int:
        version = self.version + 1
        self.store.put_commit(version, payload)
        self.version = version
        return version

    def create(self, configuration: dict[str, str] | None = None, protocol: Protocol = Protocol(1, 2),
               **kwargs: Any) -> int:
        return self.commit(protocol=protocol, metadata=table_metadata(configuration, **kwargs),
                           info={"timestamp": 1, "operation": "CREATE TABLE"})

    def log_path(self, name: str) -> str:
        assert isinstance(self.store, LocalLogStore)
        return os.path.join(self.store.log_root, name)


def paths(table: pa.Table) -> list[str]:
    return sorted(table.column("path").to_pylist())


def file_set(table: pa.Table) -> set[tuple[str, str | None]]:
    dvs = table.column("deletionVector").to_pylist()
    return {(p, d["pathOrInlineDv"] if d else None) for p, d in zip(table.column("path").to_pylist(), dvs)}


def assert_same_snapshot(a: Snapshot, b: Snapshot) -> None:
    assert a.version == b.version
    assert a.protocol == b.protocol
    assert a.metadata == b.metadata
    assert a.app_txns == b.app_txns
    assert a.domains == b.domains
    sort = [("path", "ascending")]
    assert a.files.schema.equals(FILE_SCHEMA) and b.files.schema.equals(FILE_SCHEMA)
    assert a.files.sort_by(sort).to_pylist() == b.files.sort_by(sort).to_pylist()
    assert a.tombstones.sort_by(sort).to_pylist() == b.tombstones.sort_by(sort).to_pylist()
