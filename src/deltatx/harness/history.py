"""Histories: what each writer tried, what it saw, and how its commit ended.

One :class:`OpRecord` per operation a writer ran, written as a JSON line the moment the operation
ends (so a killed worker leaves everything it finished). The checkers work on the merged list
of records plus the table itself: a record is the writer's *claim* ("I committed txn X at
version 7 after reading version 5; I deleted ids [..]") and the log must agree with it.

:func:`execute` is the single place where an operation becomes a recorded transaction, for
the stress workers, interleavings and the checkers' own tests alike.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from .. import phases
from ..errors import ConcurrentModificationException
from .ops import Operation, operation_from_dict

if TYPE_CHECKING:
    from ..tables.table import Table
    from ..tables.transaction import Transaction

COMMITTED = "committed"  #: the commit is in the log at ``version``
NOOP = "noop"  #: nothing to write: no commit was made (Delta skips empty commits)
CONFLICT = "conflict"  #: lost the race and could not rebase (a ConcurrentModificationException)
ERROR = "error"  #: any other exception


@dataclass
class OpRecord:
    """One operation of one writer, as the writer saw it."""

    writer: str
    seq: int
    op: dict[str, Any]
    outcome: str = ERROR
    txn_id: str | None = None
    read_version: int | None = None
    version: int | None = None
    attempts: int = 0
    blind: bool = False
    observed: dict[str, Any] = field(default_factory=dict)
    read_set: dict[str, Any] = field(default_factory=dict)
    rows_written: list = field(default_factory=list)
    error: str | None = None
    message: str | None = None
    started: float = 0.0
    ended: float = 0.0

    @property
    def committed(self) -> bool:
        return self.outcome == COMMITTED

    def operation(self) -> Operation:
        return operation_from_dict(self.op)

    def label(self) -> str:
        where = f"v{self.version}" if self.version is not None else self.outcome
        return f"{self.writer}#{self.seq} {self.op.get('kind')} (read v{self.read_version}, {where})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "OpRecord":
        return cls(**data)


class AttemptCounter:
    """A phases observer counting commit attempts per txn_id (failed commits included), as
    ``CommitResult.attempts`` counts them: each version a commit tried, one it found taken before
    putting included (the committer reports the attempt number at ``attempt_commit`` and at
    ``resolve_conflict``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.attempts: dict[str, int] = defaultdict(int)

    def __call__(self, phase: str, **ctx: Any) -> None:
        if phase in ("attempt_commit", "resolve_conflict") and ctx.get("txn_id"):
            with self._lock:
                txn = ctx["txn_id"]
                self.attempts[txn] = max(self.attempts[txn], int(ctx.get("attempt") or self.attempts[txn] + 1))

    def pop(self, txn_id: str | None) -> int:
        with self._lock:
            return self.attempts.pop(txn_id, 0) if txn_id else 0


_counter = AttemptCounter()
_counter_installed = False
_counter_lock = threading.Lock()


def _attempt_counter() -> AttemptCounter:
    global _counter_installed
    with _counter_lock:
        if not _counter_installed:
            phases.install(_counter)
            _counter_installed = True
    return _counter


def _read_set(tx: "Transaction") -> dict[str, Any]:
    """The read set the transaction recorded (what the conflict checker will test winners against)."""
    read_set = tx.read_set
    return {"predicates": [str(p) for p in read_set.predicates], "files": len(read_set.files),
            "whole_table": read_set.whole_table}


def execute(table: "Table", op: Operation, *, writer: str = "main", seq: int = 0) -> OpRecord:
    """Run ``op`` as one transaction on ``table`` (refreshed first) and record how it ended.

    Never raises for a failed commit: the exception's class and message go into the record.
    """
    counter = _attempt_counter()
    record = OpRecord(writer=writer, seq=seq, op=op.to_dict(), blind=op.blind, started=time.time())
    tx = None
    try:
        table.refresh()
        tx = table.transaction()
        record.txn_id, record.read_version = tx.txn_id, tx.read_version
        record.observed = op.stage(tx)
        record.read_set = _read_set(tx)
        record.rows_written = op.inserted_keys(record.observed)
        result = tx.commit()
        record.attempts = result.attempts
        if result.attempts == 0:
            record.outcome = NOOP
        else:
            record.outcome, record.version = COMMITTED, result.version
    except ConcurrentModificationException as exc:
        record.outcome, record.error, record.message = CONFLICT, type(exc).__name__, str(exc)
    except Exception as exc:  # recorded, judged by the checkers
        record.outcome, record.error, record.message = ERROR, type(exc).__name__, str(exc)
    finally:
        if tx is not None:
            tx.abort()  # no-op unless staging failed before commit
            attempts = counter.pop(tx.txn_id)
            if record.outcome != COMMITTED:
                record.attempts = attempts
                record.rows_written = []
    record.ended = time.time()
    return record


class HistoryWriter:
    """Appends records as JSON lines to one file per writer, flushed per record."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8")

    def write(self, record: OpRecord) -> None:
        self._fh.write(json.dumps(record.to_dict(), default=str) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> "HistoryWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_history(paths: Iterable[str | os.PathLike]) -> list[OpRecord]:
    """Merge history files (a torn last line of a killed writer is ignored)."""
    records: list[OpRecord] = []
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    records.append(OpRecord.from_dict(json.loads(line)))
                except (json.JSONDecodeError, TypeError):
                    continue
    return sort_records(records)


def sort_records(records: Iterable[OpRecord]) -> list[OpRecord]:
    """Committed records in version order, then the rest by start time."""
    records = list(records)
    done = sorted((r for r in records if r.committed), key=lambda r: r.version)
    rest = sorted((r for r in records if not r.committed), key=lambda r: (r.started, r.writer, r.seq))
    return done + rest
