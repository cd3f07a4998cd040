"""Hand-built transactions and winning commits for the conflict-checker tests (no I/O).

The model table has ``id long, value string, part int`` and, when partitioned, is partitioned by
``part``. Files hold id ranges; their stats are computed with the real ``compute_stats`` so that
stats-based conflict detection sees what a writer would write.

Operations are built as the Delta suites describe them:

- INSERT   — a blind append: one add, reads nothing, ``isBlindAppend=true``.
- UPDATE / DELETE / MERGE — read with a predicate on the partition, read the partition's file,
  remove it and add its rewrite (MERGE also adds inserted rows).
- OPTIMIZE — reads the partition, removes and re-adds with ``dataChange=false``; runs at
  SnapshotIsolation after the downgrade.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import pyarrow as pa

from deltatx.conflicts import ReadSet, TransactionInfo, is_blind_append
from deltatx.expr import bind, parse_predicate
from deltatx.isolation import IsolationLevel, effective_isolation_level
from deltatx.txnlog.actions import (
    FILE_SCHEMA,
    REMOVE_SCHEMA,
    CommitActions,
    DomainMetadata,
    Metadata,
    Protocol,
    Txn,
    file_actions_table,
)
from deltatx.txnlog.schema import schema_to_json
from deltatx.txnlog.stats import compute_stats

S = IsolationLevel.SERIALIZABLE
WS = IsolationLevel.WRITE_SERIALIZABLE
SI = IsolationLevel.SNAPSHOT_ISOLATION

TABLE_SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.string()), ("part", pa.int32())])
DATA_SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.string())])
TABLE_ID = "5b6b2a4e-0000-4000-8000-000000000001"
PROTOCOL = Protocol(1, 2)


def metadata(partitioned: bool = True, configuration: dict[str, str] | None = None, **changes: Any) -> Metadata:
    md = Metadata(
        id=TABLE_ID,
        schema_string=schema_to_json(TABLE_SCHEMA),
        partition_columns=("part",) if partitioned else (),
        configuration=dict(configuration or {}),
        created_time=1_700_000_000_000,
    )
    return md.replace(**changes) if changes else md


def stats_for(ids: range | None) -> str | None:
    """Stats JSON for a file holding ``ids`` (None = a file written without stats)."""
    if ids is None:
        return None
    data = pa.table({"id": pa.array(list(ids), pa.int64()), "value": pa.array([f"v{i}" for i in ids])})
    return compute_stats(data)


def file_row(path: str, part: int | None = None, ids: range | None = range(0, 100),
             data_change: bool = True) -> dict[str, Any]:
    return {
        "path": path,
        "partitionValues": {} if part is None else {"part": str(part)},
        "size": 1000,
        "modificationTime": 1_700_000_000_000,
        "dataChange": data_change,
        "stats": stats_for(ids),
    }


def remove_row(path: str, part: int | None = None, data_change: bool = True) -> dict[str, Any]:
    return {
        "path": path,
        "partitionValues": {} if part is None else {"part": str(part)},
        "deletionTimestamp": 1_700_000_000_000,
        "dataChange": data_change,
        "extendedFileMetadata": True,
        "size": 1000,
    }


def adds(*rows: dict[str, Any]) -> pa.Table:
    return file_actions_table(list(rows), FILE_SCHEMA)


def removes(*rows: dict[str, Any]) -> pa.Table:
    return file_actions_table(list(rows), REMOVE_SCHEMA)


def predicate(sql: str):
    return bind(parse_predicate(sql), TABLE_SCHEMA)


def winner(
    version: int,
    operation: str,
    *,
    add_rows: Iterable[dict[str, Any]] = (),
    remove_rows: Iterable[dict[str, Any]] = (),
    blind: bool | None = None,
    metadata: Metadata | None = None,
    protocol: Protocol | None = None,
    txns: Iterable[Txn] = (),
    domains: Iterable[DomainMetadata] = (),
    commit_info: dict[str, Any] | None = None,
) -> CommitActions:
    """A parsed winning commit. ``blind=None`` leaves isBlindAppend out of commitInfo."""
    info = {"operation": operation, "readVersion": version - 1, "txnId": f"winner-{version}"}
    if blind is not None:
        info["isBlindAppend"] = blind
    if commit_info is not None:
        info = commit_info
    return CommitActions(
        version=version,
        commit_info=info,
        protocol=protocol,
        metadata=metadata,
        txns=list(txns),
        domains=list(domains),
        add_rows=list(add_rows),
        remove_rows=list(remove_rows),
    )


def txn(
    *,
    table_level: IsolationLevel = WS,
    read_set: ReadSet = ReadSet(),
    add_table: pa.Table | None = None,
    remove_table: pa.Table | None = None,
    read_metadata: Metadata | None = None,
    read_protocol: Protocol = PROTOCOL,
    new_metadata: Metadata | None = None,
    new_protocol: Protocol | None = None,
    domains: tuple[DomainMetadata, ...] = (),
    txns: tuple[Txn, ...] = (),
    changes_data: bool = True,
    use_stats: bool = True,
    operation: str = "WRITE",
) -> TransactionInfo:
    """The losing transaction, with its effective isolation level and blind-append flag derived
    exactly as the transaction layer derives them."""
    add_table = add_table if add_table is not None else adds()
    remove_table = remove_table if remove_table is not None else removes()
    has_non_file = bool(new_metadata or new_protocol or domains or txns)
    level = effective_isolation_level(
        table_level, adds=add_table, removes=remove_table, has_non_file_actions=has_non_file,
        changes_data=changes_data,
    )
    return TransactionInfo(
        read_version=5,
        read_set=read_set,
        read_metadata=read_metadata or metadata(),
        read_protocol=read_protocol,
        adds=add_table,
        removes=remove_table,
        metadata=new_metadata,
        protocol=new_protocol,
        domains=domains,
        txns=txns,
        isolation_level=level,
        is_blind_append=add_table.num_rows > 0 and is_blind_append(read_set, remove_table),
        use_stats=use_stats,
        operation=operation,
        txn_id="loser",
    )


# --------------------------------------------------------------------------------------------
# The five operations of the Databricks matrix, on a table with part=1 -> f1.parquet (ids 0..99)
# and part=2 -> f2.parquet (ids 100..199)
# --------------------------------------------------------------------------------------------

EXISTING = {1: ("part=1/f1.parquet", range(0, 100)), 2: ("part=2/f2.parquet", range(100, 200))}


@dataclass(frozen=True)
class Op:
    """One operation in partition ``part``: what it reads and what it commits."""

    name: str
    part: int
    who: str  # distinguishes the file names the two sides write
    read: ReadSet = ReadSet()
    add_rows: tuple[dict[str, Any], ...] = ()
    remove_rows: tuple[dict[str, Any], ...] = ()
    changes_data: bool = True
    blind: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def as_loser(self, table_level: IsolationLevel, **kwargs: Any) -> TransactionInfo:
        return txn(
            table_level=table_level,
            read_set=self.read,
            add_table=adds(*self.add_rows),
            remove_table=removes(*self.remove_rows),
            changes_data=self.changes_data,
            operation=self.name,
            **kwargs,
        )

    def as_winner(self, version: int = 6) -> CommitActions:
        return winner(version, self.name, add_rows=self.add_rows, remove_rows=self.remove_rows,
                      blind=self.blind)


def make_op(name: str, part: int, who: str) -> Op:
    path, ids = EXISTING[part]
    read_part = ReadSet(predicates=(predicate(f"part = {part}"),), files=frozenset({path}))
    new = f"part={part}/{who}-{name.lower()}.parquet"
    if name == "INSERT":
        return Op(name, part, who, add_rows=(file_row(new, part, range(1000, 1010)),), blind=True)
    if name in ("UPDATE", "DELETE"):
        kept = ids if name == "UPDATE" else range(ids.start + 10, ids.stop)
        return Op(name, part, who, read=read_part, remove_rows=(remove_row(path, part),),
                  add_rows=(file_row(new, part, kept),))
    if name == "MERGE":
        return Op(name, part, who, read=read_part, remove_rows=(remove_row(path, part),),
                  add_rows=(file_row(new, part, ids), file_row(new.replace(".parquet", "-ins.parquet"),
                                                                part, range(5000, 5010))))
    if name == "OPTIMIZE":
        return Op(name, part, who, read=read_part, remove_rows=(remove_row(path, part, data_change=False),),
                  add_rows=(file_row(new, part, ids, data_change=False),), changes_data=False)
    raise ValueError(name)
