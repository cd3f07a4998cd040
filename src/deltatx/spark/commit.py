"""The driver half of a Spark write: turn the files the executors wrote into ONE Delta commit.

Shared by the batch writer and the streaming sink. The executors already wrote Parquet files with
stats and sent their ``add`` rows; here we only decide what the commit says and hand it to the
core :class:`~deltatx.tables.transaction.Transaction`, so conflicts, retries and isolation levels
are exactly the core's:

- existing table: a transaction pinned at the read version captured when the job was planned
  (``Table.transaction(read_version=...)``); overwrite reads and removes the whole table, or,
  with replaceWhere, the files the predicate selects (rows of partially matching files that do
  not match are written back, as Delta does for data-column predicates); an idempotent
  (txnAppId, txnVersion) already applied is skipped;
- new table: version 0 holds protocol, metaData, the files and the txn action together, so a
  create-and-write is atomic; a writer that loses the race to create gets
  ``ProtocolChangedException`` (as in Delta: several writers wrote to an empty directory).

Whatever fails, the files of this write are deleted before the error propagates: nothing refers
to them. ``report`` records the outcome (result or exception) in a driver-local file so that
:func:`deltatx.spark.write` can give the caller the typed exception Spark's error wrapping loses.
"""

from __future__ import annotations

import pickle
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import (
    ColumnMappingError,
    MetadataChangedException,
    ProtocolChangedException,
    SchemaMismatchError,
    TableNotFoundError,
)
from ..expr import bind, parse_predicate
from ..io.paths import decode_path
from ..isolation import table_isolation_level
from ..tables.ops.partition_overwrite import stage_partition_overwrite
from ..tables.ops.replace_table import check_table_schema, refuse_partitioning_a_clustered_table
from ..tables.ops.rewrite import num_records, remove_matching_rows
from ..tables import properties as props
from ..tables.constraints import rules_signature
from ..tables.table import Table
from ..tables.data import Widening, resolve_write_schema
from ..tables.transaction import ENGINE_INFO, CommitResult, Transaction
from ..txnlog.actions import FILE_SCHEMA, Metadata, Txn, encode_commit, parse_commit
from ..txnlog import row_tracking
from ..txnlog.in_commit_timestamps import stamp_creation
from ..txnlog.features import check_writable, required_protocol
from ..txnlog.schema import schema_from_json, schema_to_json
from ..txnlog.snapshot import load_snapshot
from ..txnlog.store import LogStore, VersionExistsError, open_store


@dataclass(frozen=True)
class CommitRequest:
    """What one commit must do, independent of whether a batch job or a micro-batch asks."""

    uri: str
    storage_options: dict[str, str]
    read_version: int | None  # None: latest at commit time (created if missing); -1: did not exist
    schema_string: str  # the schema the files were written with (the table's after this commit)
    partition_columns: tuple[str, ...]
    overwrite: bool = False
    replace_where: str | None = None
    schema_changed: bool = False
    merge_schema: bool = False
    #: overwrite only the partitions ``adds`` write into (partitionOverwriteMode=dynamic)
    dynamic_partition_overwrite: bool = False
    app_id: str | None = None
    app_version: int | None = None
    user_metadata: str | None = None
    table_properties: dict[str, str] = field(default_factory=dict)
    operation: str = "WRITE"
    parameters: dict[str, Any] = field(default_factory=dict)
    #: tables/constraints.rules_signature of the rules the tasks enforced
    rules_signature: tuple = ()

    @property
    def schema(self) -> pa.Schema:
        return schema_from_json(self.schema_string)


def combine_adds(tables: list[pa.Table]) -> pa.Table:
    parts = [t.select(FILE_SCHEMA.names).cast(FILE_SCHEMA) for t in tables if t is not None and t.num_rows]
    return pa.concat_tables(parts) if parts else FILE_SCHEMA.empty_table()


def delete_written(uri: str, storage_options: dict[str, str], adds: pa.Table) -> None:
    """Delete the data files of ``adds`` (a failed or skipped write)."""
    if adds.num_rows:
        store = open_store(uri, storage_options)
        store.delete_files([decode_path(p) for p in adds.column("path").to_pylist()])


def commit_files(request: CommitRequest, adds: pa.Table) -> CommitResult:
    """Commit ``adds`` as described by ``request``; delete them if the commit does not happen."""
    try:
        if request.read_version == -1:
            return _create_and_write(request, adds)
        try:
            # the snapshot the job was planned at (latest for streams): loaded once, not latest + it
            store = open_store(request.uri, request.storage_options)
            snapshot = load_snapshot(store, version=request.read_version)
            table = Table(request.uri, storage_options=request.storage_options, _store=store, _snapshot=snapshot)
        except TableNotFoundError:
            if request.read_version is not None:
                raise
            return _create_and_write(request, adds)
        return _commit_existing(table, request, adds)
    except BaseException:
        if not _referenced(request, adds):  # never delete files a published commit refers to
            delete_written(request.uri, request.storage_options, adds)
        raise


def _referenced(request: CommitRequest, adds: pa.Table) -> bool:
    """Does the table's latest version hold any of ``adds`` (the commit landed, a later step failed)?"""
    if not adds.num_rows:
        return False
    try:
        files = Table(request.uri, storage_options=request.storage_options).files()
    except Exception:  # no table, or unreadable: nothing of ours can be referenced
        return False
    known = files.column("path").combine_chunks() if files.num_rows else pa.array([], pa.string())
    return bool(pc.any(pc.is_in(adds.column("path"), value_set=known)).as_py())


def _mode(request: CommitRequest) -> str:
    return "Overwrite" if request.overwrite else "Append"


def _parameters(request: CommitRequest) -> dict[str, Any]:
    params: dict[str, Any] = {"mode": _mode(request), "partitionBy": list(request.partition_columns)}
    params.update(request.parameters)
    return params


def _metrics(adds: pa.Table) -> dict[str, Any]:
    return {
        "numFiles": adds.num_rows,
        "numOutputRows": num_records(adds),
        "numOutputBytes": (pc.sum(adds["size"]).as_py() or 0) if adds.num_rows else 0,
    }


def _commit_existing(table: Table, request: CommitRequest, adds: pa.Table) -> CommitResult:
    tx = table.transaction(read_version=request.read_version, user_metadata=request.user_metadata)
    try:
        if request.app_id is not None:
            last = tx.app_version(request.app_id)
            if last is not None and int(request.app_version) <= last:
                tx.abort()
                delete_written(request.uri, request.storage_options, adds)
                return CommitResult(version=tx.read_version, operation=request.operation, attempts=0,
                                    read_version=tx.read_version, txn_id=tx.txn_id, skipped=True,
                                    metrics={"skippedAppVersion": int(request.app_version), "lastAppVersion": last})
        if request.read_version is None and rules_signature(tx.schema, tx.properties) != request.rules_signature:
            # the tasks checked the rows against other constraints or generation expressions
            # than the table has now (a stream planned before an ADD CONSTRAINT)
            raise MetadataChangedException(
                "the table's CHECK constraints or column rules changed since this write was planned; "
                "its rows were checked against the old ones", conflict="metadata")
        params = _parameters(request)
        metrics = _metrics(adds)
        _stage_schema(tx, request)
        if request.overwrite:
            if request.replace_where is not None:
                predicate = bind(parse_predicate(request.replace_where), tx.schema)
                params["predicate"] = request.replace_where  # Delta's WRITE records the text as given
                removed = remove_matching_rows(tx, predicate)
                metrics["numRemovedFiles"] = removed["numRemovedFiles"]
                metrics["numDeletedRows"] = removed["numDeletedRows"]
                metrics["numCopiedRows"] = removed["numCopiedRows"]
            elif request.dynamic_partition_overwrite and tx.partition_columns:
                metrics["numRemovedFiles"] = stage_partition_overwrite(tx, adds)
            else:
                _, files = tx.scan(None)
                tx.stage_removes(files)
                metrics["numRemovedFiles"] = files.num_rows
        tx.stage_adds(adds)
        if request.app_id is not None:
            tx.stage_txn(request.app_id, int(request.app_version))
        tx.note_operation(request.operation, params, metrics)
        return tx.commit()
    except BaseException:
        tx.abort()
        raise


def _stage_schema(tx: Transaction, request: CommitRequest) -> None:
    """Stage the new schema/partitioning of a write that changes them (mergeSchema, overwriteSchema).

    A write planned at a pinned read version knows whether it changes the schema. A write on the
    latest version (streaming) checks again now: the files' schema must still fit the table's.
    """
    if request.read_version is None:
        if tuple(request.partition_columns) != tuple(tx.partition_columns):
            raise SchemaMismatchError(
                f"the table's partition columns changed to {tx.partition_columns} since this write was "
                f"planned with {list(request.partition_columns)}; restart the query"
            )
        target = resolve_write_schema(tx.schema, request.schema, "merge" if request.merge_schema else None,
                                      widening=Widening.of(tx.properties, tx.protocol))
        if not target.equals(tx.schema):
            added = [n for n in target.names if n not in tx.schema.names]
            if tx.column_mapping is not None and added:  # the files hold them under names it would not map
                raise ColumnMappingError(
                    f"the table now uses column mapping and this write adds columns "
                    f"{added}; add them with Table.add_columns "
                    f"and restart the query")
            tx.stage_metadata(tx.metadata.replace(schema_string=schema_to_json(target)))
    elif request.schema_changed:
        if tuple(request.partition_columns) != tuple(tx.partition_columns):
            refuse_partitioning_a_clustered_table(tx.protocol, list(request.partition_columns), tx.table.uri)
        tx.stage_metadata(tx.metadata.replace(schema_string=request.schema_string,
                                              partition_columns=tuple(request.partition_columns)))


def _create_and_write(request: CommitRequest, adds: pa.Table) -> CommitResult:
    """Version 0 = protocol + metaData + the files (+ txn): the table appears with its data."""
    store = open_store(request.uri, request.storage_options)
    if store.table_exists():
        raise _created_concurrently(store, request)
    schema = request.schema
    # as the core's create_table: row tracking's materialized column names are chosen at creation
    config = row_tracking.with_materialized_names(dict(request.table_properties))
    # the same definition rules as create_table (reserved change-feed names, the stats-columns
    # list, void columns, names Delta refuses): a table made here must not be one it refuses
    check_table_schema(schema, list(request.partition_columns), config)
    now_ms = int(time.time() * 1000)
    metadata = Metadata(id=Metadata.new_id(), schema_string=request.schema_string,
                        partition_columns=tuple(request.partition_columns),
                        configuration=props.stored_configuration(config), created_time=now_ms)
    protocol = required_protocol(config, schema, props.requested_protocol(config, None))
    check_writable(protocol, metadata)
    txn_id = str(uuid.uuid4())
    commit_info: dict[str, Any] = {
        "timestamp": now_ms,
        "operation": request.operation,
        "operationParameters": {k: v if isinstance(v, str) else _json(v) for k, v in _parameters(request).items()},
        "isolationLevel": table_isolation_level(config).value,
        "isBlindAppend": not request.overwrite,
        "operationMetrics": {k: str(v) for k, v in _metrics(adds).items()},
        "engineInfo": ENGINE_INFO,
        "txnId": txn_id,
    }
    if request.user_metadata is not None:
        commit_info["userMetadata"] = request.user_metadata
    txns = [Txn(request.app_id, int(request.app_version), now_ms)] if request.app_id is not None else []
    domains = []
    if row_tracking.assigns_ids(protocol, config):  # PROTOCOL.md: every add gets its ids, the mark is kept
        adds, hwm = row_tracking.assign_row_ids(adds, row_tracking.NO_WATERMARK, row_tracking.NO_WATERMARK, 0)
        if hwm is not None:
            domains.append(row_tracking.watermark_domain(hwm))
    stamp_creation(commit_info, config)
    payload = encode_commit(commit_info, protocol=protocol, metadata=metadata, txns=txns, domains=domains, adds=adds)
    try:
        store.put_commit(0, payload)
    except VersionExistsError:
        raise _created_concurrently(store, request) from None
    return CommitResult(version=0, operation=request.operation, attempts=1, metrics=_metrics(adds),
                        read_version=-1, isolation_level=commit_info["isolationLevel"], txn_id=txn_id)


def _created_concurrently(store: LogStore, request: CommitRequest) -> ProtocolChangedException:
    operation = None
    try:
        operation = parse_commit(store.read_commit(0), 0).commit_info.get("operation")
    except (FileNotFoundError, ValueError):
        pass
    return ProtocolChangedException(
        f"the table at {request.uri!r} did not exist when this write was planned, and a concurrent "
        f"writer created it first (several writers wrote to an empty location)",
        version=0, operation=operation,
    )


def _json(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()


# --------------------------------------------------------------------------------------------
# Outcome report for deltatx.spark.write()
# --------------------------------------------------------------------------------------------


def report(path: str | None, outcome: CommitResult | BaseException) -> None:
    """Record the commit's outcome where the calling driver can read it (no-op without a path)."""
    if not path:
        return
    try:
        data = pickle.dumps(outcome)
    except Exception:  # an exception that does not pickle: keep its class and message
        data = pickle.dumps(RuntimeError(f"{type(outcome).__name__}: {outcome}"))
    with open(path, "wb") as fh:
        fh.write(data)


def read_report(path: str) -> CommitResult | BaseException | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    return pickle.loads(data) if data else None
