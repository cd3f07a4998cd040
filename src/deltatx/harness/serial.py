"""Ground truth for the checkers: the log as written, and serial replays of a history.

- :class:`LogView` reads every commit of a table once (version → txnId, operation,
  isBlindAppend, readVersion) plus the table's creation metadata, so the checkers can compare
  writers' claims with what the log really says.
- :func:`replay` runs committed operations *one at a time*, in a given order, on a fresh
  ``memory://`` copy of the table as created, and reports every operation whose observation
  differs from the one recorded, plus the final rows and properties. An execution is
  serializable in that order exactly when nothing differs.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import pyarrow as pa

from ..errors import DeltaTxError
from ..tables.table import Table, create_table
from ..txnlog.actions import CommitActions, Metadata, parse_commit
from ..txnlog.schema import schema_from_json
from ..txnlog.store import LogStore, open_store
from .history import OpRecord


@dataclass
class LogView:
    """Every commit of a table, parsed once."""

    uri: str
    store: LogStore
    commits: dict[int, CommitActions]
    problems: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, uri: str, storage_options: dict[str, Any] | None = None) -> "LogView":
        store = open_store(uri, storage_options)
        commits: dict[int, CommitActions] = {}
        problems: list[str] = []
        for f in store.list_log():
            if f.kind != "commit":
                continue
            try:
                commits[f.version] = parse_commit(store.read_commit(f.version), f.version)
            except (DeltaTxError, OSError) as exc:
                problems.append(f"commit {f.version} is unreadable: {exc}")
        return cls(uri, store, commits, problems)

    @property
    def latest(self) -> int:
        return max(self.commits, default=-1)

    def creation_metadata(self) -> Metadata:
        first = self.commits.get(0)
        if first is None or first.metadata is None:
            raise DeltaTxError(f"{self.uri}: version 0 (CREATE TABLE with metaData) is missing from the log")
        return first.metadata

    def txn_versions(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for v, c in sorted(self.commits.items()):
            if c.txn_id:
                out.setdefault(c.txn_id, []).append(v)
        return out

    def is_blind(self, version: int | None) -> bool:
        c = self.commits.get(version) if version is not None else None
        return bool(c is not None and c.is_blind_append)


def normalized(value: Any) -> Any:
    """JSON round trip: tuples become lists, keys become strings (as after a history file)."""
    return json.loads(json.dumps(value, default=str))


def sorted_rows(table: pa.Table) -> pa.Table:
    """Rows in a canonical order (every column ascending) for equality tests."""
    if table.num_rows == 0:
        return table
    return table.sort_by([(name, "ascending") for name in table.column_names])


def describe_difference(actual: pa.Table, expected: pa.Table, limit: int = 5) -> str:
    """A short human description of how two row multisets differ."""
    got = Counter(tuple(r.values()) for r in actual.to_pylist())
    want = Counter(tuple(r.values()) for r in expected.to_pylist())
    extra = list((got - want).elements())[:limit]
    missing = list((want - got).elements())[:limit]
    cols = ", ".join(actual.column_names)
    return (f"{actual.num_rows} rows vs {expected.num_rows} expected; rows ({cols}) only in the table: "
            f"{extra}; only in the serial replay: {missing}")


@dataclass
class Mismatch:
    """One operation that observed something else when replayed serially."""

    record: OpRecord
    recorded: Any
    replayed: Any


@dataclass
class ReplayResult:
    order: list[OpRecord]
    mismatches: list[Mismatch]
    rows: pa.Table | None
    properties: dict[str, str]
    failure: str | None = None

    @property
    def ok_observations(self) -> bool:
        return not self.mismatches and self.failure is None


def fresh_copy(metadata: Metadata) -> Table:
    """An empty ``memory://`` table created like ``metadata`` (schema, partitioning, properties)."""
    uri = f"memory://deltatx-replay/{uuid.uuid4().hex}"
    return create_table(uri, schema_from_json(metadata.schema_string),
                        partition_by=list(metadata.partition_columns), properties=dict(metadata.configuration))


def replay(order: Sequence[OpRecord], metadata: Metadata, hidden: Mapping[str, Sequence[Any]] | None = None,
           key: str = "id") -> ReplayResult:
    """Run ``order``'s operations one at a time on a fresh copy; compare observations.

    ``hidden`` maps a txnId to keys of rows that operation must not see (the WriteSerializable
    checker's blind appends serialized after it): they are taken out of the table just before
    the operation runs and put back, unchanged, right after — the serial order "operation, then
    those appends".
    """
    table = fresh_copy(metadata)
    mismatches: list[Mismatch] = []
    for record in order:
        op = record.operation()
        keys = list((hidden or {}).get(record.txn_id or "", ()))
        try:
            set_aside = _take_out(table, keys, key) if keys else None
            _, observed = op.commit(table)
            if set_aside is not None and set_aside.num_rows:
                table.refresh().append(set_aside)
        except Exception as exc:  # the serial execution itself fails: not equivalent
            return ReplayResult(list(order), mismatches, None, {},
                                failure=f"{record.label()} fails when run serially: {type(exc).__name__}: {exc}")
        recorded, replayed = normalized(record.observed), normalized(observed)
        if recorded != replayed:
            mismatches.append(Mismatch(record, recorded, replayed))
    table.refresh()
    return ReplayResult(list(order), mismatches, sorted_rows(table.to_arrow()), dict(table.properties))


def _take_out(table: Table, keys: Sequence[Any], key: str) -> pa.Table:
    """Delete the rows with these keys (committing), returning them as they were."""
    where = f"{key} IN ({', '.join(repr(k) for k in sorted(set(keys)))})"
    table.refresh()
    rows = table.to_arrow(where=where)
    if rows.num_rows:
        table.delete(where=where)
    return rows
