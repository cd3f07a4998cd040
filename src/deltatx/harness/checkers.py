"""Checkers: does a recorded history, together with the table it produced, obey the rules?

========================  ===================================================================
checker                   what must hold
========================  ===================================================================
``no_lost_commit``        commit versions are contiguous; no txnId appears twice; every
                          operation that reported success is in the log exactly once, at the
                          version it reported; no failed operation is in the log; every row an
                          operation inserted is in the table exactly once unless a later
                          committed operation removed it, and no other row is.
``serializable``          running the committed operations one at a time in *version order*
                          on a fresh table reproduces each operation's observation (ids it
                          deleted / updated / matched, balances it read) and the final table.
``write_serializable``    the same, except that each operation runs without the rows of the
                          blind appends that committed while it was open: WriteSerializable
                          may serialize such an append *after* the operation (Delta's rule);
                          nothing else may be reordered.
``bank``                  the sum of balances (and the set of accounts) is the same at every
                          version of the table, read by time travel.
``errors``                no operation failed with anything but a concurrency conflict.
``row_ids``               (row-tracking tables, :mod:`.row_ids`) at every version row ids are
                          unique; a surviving row keeps its id; an id is never reused.
========================  ===================================================================

Each checker returns :class:`Anomaly` objects; an empty list means the history passed. Each one is
tested against a deliberately broken commit path (:mod:`deltatx.harness.faults`) and must fail
there: a checker that cannot fail proves nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..io.reader import read_files
from ..tables.table import Table
from ..txnlog.snapshot import load_snapshot
from .history import ERROR, OpRecord, sort_records
from .serial import LogView, ReplayResult, describe_difference, replay, sorted_rows

CHECKERS = ("no_lost_commit", "serializable", "write_serializable", "bank", "errors", "row_ids")
MAX_PER_CHECKER = 20


@dataclass(frozen=True)
class Anomaly:
    """One violation found by one checker."""

    checker: str
    message: str
    version: int | None = None
    writer: str | None = None
    txn_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return f"[{self.checker}] {self.message}"


def _anomaly(checker: str, message: str, record: OpRecord | None = None, version: int | None = None) -> Anomaly:
    if record is not None:
        return Anomaly(checker, message, version if version is not None else record.version, record.writer,
                       record.txn_id)
    return Anomaly(checker, message, version)


# --------------------------------------------------------------------------------------------
# no lost commit
# --------------------------------------------------------------------------------------------


def check_no_lost_commit(history: Sequence[OpRecord], log: LogView, final: pa.Table | None,
                         key: str = "id", complete: bool = True) -> list[Anomaly]:
    """See the module table. ``complete=False`` when the history omits some writers."""
    name = "no_lost_commit"
    out = [_anomaly(name, p) for p in log.problems]
    versions = sorted(log.commits)
    if versions:
        missing = sorted(set(range(versions[0], versions[-1] + 1)) - set(versions))
        out += [_anomaly(name, f"version {v} is missing: commit versions must be contiguous", version=v)
                for v in missing]
    by_txn = log.txn_versions()
    for txn_id, vs in by_txn.items():
        if len(vs) > 1:
            out.append(Anomaly(name, f"txnId {txn_id} is committed {len(vs)} times, at versions {vs}",
                               vs[1], None, txn_id))
    recorded: set[str] = set()
    for r in history:
        if r.txn_id:
            recorded.add(r.txn_id)
        if r.committed:
            vs = by_txn.get(r.txn_id or "", [])
            if not vs:
                holder = log.commits.get(r.version)  # type: ignore[arg-type]
                there = (f"version {r.version} holds txn {holder.txn_id} ({holder.operation})" if holder
                         else f"version {r.version} does not exist")
                out.append(_anomaly(name, f"lost commit: {r.label()} reported success but its txnId is not "
                                          f"in the log; {there}", r))
            elif r.version not in vs:
                out.append(_anomaly(name, f"{r.label()} reported version {r.version} but the log has it at {vs}", r))
        elif r.txn_id in by_txn:
            out.append(_anomaly(name, f"{r.label()} reported {r.error or r.outcome} but it is in the log at "
                                      f"{by_txn[r.txn_id]}", r))
        if r.committed and r.version in log.commits and r.operation().inserted_keys(r.observed) \
                and log.commits[r.version].adds.num_rows == 0:
            out.append(_anomaly(name, f"{r.label()} inserted rows, but its commit (version {r.version}) adds "
                                      f"no data file: the rows are not in the table at that version", r))
    out += _file_lineage(log, name)
    if complete:
        for v in versions:
            c = log.commits[v]
            if v > 0 and c.txn_id not in recorded:
                out.append(_anomaly(name, f"version {v} ({c.operation}, txn {c.txn_id}) was committed by no "
                                          f"recorded operation", version=v))
    if final is not None and key in final.column_names:
        out += _check_rows(history, final, key)
    return out[:MAX_PER_CHECKER]


def _file_lineage(log: LogView, name: str) -> list[Anomaly]:
    """Every remove names a file that is live at that point (added before, not removed since):
    a remove of anything else means a commit was changed or lost. Checked when the log starts
    at version 0 (otherwise what was live before its first commit is not known)."""
    if 0 not in log.commits:
        return []
    live: set[str] = set()
    out = []
    for v in sorted(log.commits):
        c = log.commits[v]
        for path in c.removes.column("path").to_pylist() if c.removes.num_rows else ():
            if path not in live:
                out.append(_anomaly(name, f"version {v} ({c.operation}) removes {path}, which no earlier version "
                                          f"added (or one removed already): a commit was changed or lost",
                                    version=v))
            live.discard(path)
        if c.adds.num_rows:
            live.update(c.adds.column("path").to_pylist())
    return out


def _check_rows(history: Sequence[OpRecord], final: pa.Table, key: str) -> list[Anomaly]:
    """Each inserted row present exactly once unless later removed; no row from nowhere."""
    expected: dict[Any, OpRecord] = {}
    removed: dict[Any, OpRecord] = {}
    for r in sort_records(history):
        if not r.committed:
            continue
        op = r.operation()
        for k in op.removed_keys(r.observed):
            expected.pop(k, None)
            removed[k] = r
        for k in op.inserted_keys(r.observed):
            expected[k] = r
            removed.pop(k, None)
    counts = Counter(final[key].to_pylist())
    out = []
    for k, r in expected.items():
        n = counts.get(k, 0)
        if n == 0:
            out.append(_anomaly("no_lost_commit", f"row {key}={k} written by {r.label()} is missing and no "
                                                  f"later committed operation removed it", r))
        elif n > 1:
            out.append(_anomaly("no_lost_commit", f"row {key}={k} written by {r.label()} is present {n} times", r))
    for k, n in counts.items():
        if k in expected:
            continue
        why = (f"removed by {removed[k].label()}" if k in removed else "written by no committed operation")
        out.append(_anomaly("no_lost_commit", f"row {key}={k} is in the table ({n}x) but was {why}"))
    return out


# --------------------------------------------------------------------------------------------
# serializability by replay
# --------------------------------------------------------------------------------------------


def _replay_anomalies(name: str, result: ReplayResult, final: pa.Table | None,
                      final_properties: dict[str, str], order_name: str) -> list[Anomaly]:
    out = []
    if result.failure:
        out.append(_anomaly(name, f"in {order_name}: {result.failure}"))
    for m in result.mismatches:
        out.append(_anomaly(name, f"{m.record.label()} observed {m.recorded} but {m.replayed} when the committed "
                                  f"operations run one at a time in {order_name}", m.record))
    if result.rows is not None and final is not None:
        actual = sorted_rows(final.select(result.rows.column_names))
        if not actual.equals(result.rows):
            out.append(_anomaly(name, f"the final table differs from the serial replay in {order_name}: "
                                      f"{describe_difference(actual, result.rows)}"))
    if result.rows is not None and result.properties != final_properties:
        out.append(_anomaly(name, f"final properties {final_properties} differ from the serial replay's "
                                  f"{result.properties} ({order_name})"))
    return out


def committed_in_version_order(history: Iterable[OpRecord]) -> list[OpRecord]:
    return sorted((r for r in history if r.committed), key=lambda r: r.version)


def check_serializable(history: Sequence[OpRecord], log: LogView, final: pa.Table | None,
                       final_properties: dict[str, str]) -> list[Anomaly]:
    order = committed_in_version_order(history)
    result = replay(order, log.creation_metadata())
    return _replay_anomalies("serializable", result, final, final_properties, "version order")[:MAX_PER_CHECKER]


def unseen_blind_appends(committed: Sequence[OpRecord], log: LogView) -> dict[str, list]:
    """For each committed non-blind operation T, the keys inserted by the blind appends that
    committed while T was open (after its read version, before its version): the rows
    WriteSerializable lets T not see, i.e. those appends are serialized after T."""
    blind = [r for r in committed if log.is_blind(r.version)]
    out: dict[str, list] = {}
    for t in committed:
        if log.is_blind(t.version) or t.txn_id is None:
            continue
        read = t.read_version if t.read_version is not None else -1
        keys = [k for a in blind if read < a.version < t.version  # type: ignore[operator]
                for k in a.operation().inserted_keys(a.observed)]
        if keys:
            out[t.txn_id] = keys
    return out


def check_write_serializable(history: Sequence[OpRecord], log: LogView, final: pa.Table | None,
                             final_properties: dict[str, str], key: str = "id") -> list[Anomaly]:
    """Replay in version order, each operation blind to the appends WriteSerializable lets it miss."""
    committed = committed_in_version_order(history)
    hidden = unseen_blind_appends(committed, log)
    result = replay(committed, log.creation_metadata(), hidden=hidden, key=key)
    label = "version order, blind appends serialized after the operations that did not see them"
    return _replay_anomalies("write_serializable", result, final, final_properties, label)[:MAX_PER_CHECKER]


# --------------------------------------------------------------------------------------------
# bank invariant
# --------------------------------------------------------------------------------------------


def check_bank(history: Sequence[OpRecord], log: LogView, key: str = "id", column: str = "balance") -> list[Anomaly]:
    """The total and the set of accounts never change, at any version after the setup."""
    name = "bank"
    setup_versions = [r.version for r in history if r.committed and r.writer == "setup"]
    first = max(setup_versions) if setup_versions else min((v for v in log.commits if v > 0), default=0)
    if first > log.latest:
        return [Anomaly(name, f"the log ends at version {log.latest}, before the bank's setup (version {first})")]
    out: list[Anomaly] = []
    snapshot = load_snapshot(log.store, version=first)
    expected_total = expected_accounts = None
    for v in range(first, log.latest + 1):
        if v > first:
            commit = log.commits.get(v)
            if commit is None:
                out.append(Anomaly(name, f"version {v} is missing; cannot check the invariant there", v))
                break
            snapshot = snapshot.apply(commit)
        rows = read_files(log.store, snapshot.files, snapshot.schema, snapshot.partition_columns,
                          columns=[key, column])
        total = int(pc.sum(rows[column]).as_py() or 0)
        accounts = Counter(rows[key].to_pylist())
        if expected_total is None:
            expected_total, expected_accounts = total, accounts
            continue
        if total != expected_total:
            c = log.commits[v]
            out.append(Anomaly(name, f"total balance is {total} at version {v} ({c.operation}, txn {c.txn_id}), "
                                     f"expected {expected_total}", v, None, c.txn_id))
        if accounts != expected_accounts:
            out.append(Anomaly(name, f"accounts at version {v} differ from the opening ones: "
                                     f"{sorted((accounts - expected_accounts).elements())[:5]} extra, "
                                     f"{sorted((expected_accounts - accounts).elements())[:5]} missing", v))
        if len(out) >= MAX_PER_CHECKER:
            break
    return out


def check_errors(history: Sequence[OpRecord]) -> list[Anomaly]:
    return [_anomaly("errors", f"{r.label()} failed with {r.error}: {r.message}", r)
            for r in history if r.outcome == ERROR][:MAX_PER_CHECKER]


# --------------------------------------------------------------------------------------------


def check_history(history: Sequence[OpRecord], uri: str, *, isolation: str | None = None,
                  storage_options: dict[str, Any] | None = None, bank: bool | None = None,
                  checkers: Sequence[str] | None = None, complete: bool = True, key: str = "id") -> list[Anomaly]:
    """Run the checkers that apply to ``history`` (recorded against the table at ``uri``).

    ``isolation`` defaults to the table's level (Serializable → ``serializable``,
    WriteSerializable → ``write_serializable``); ``bank`` defaults to "the history contains
    transfers"; ``checkers`` restricts the set (names in :data:`CHECKERS`).
    """
    history = list(history)
    log = LogView.load(uri, storage_options)
    final: pa.Table | None = None
    final_properties: dict[str, str] = {}
    out: list[Anomaly] = []
    tracks_rows = False
    try:
        from .row_ids import applies

        table = Table(uri, storage_options=storage_options)
        final, final_properties = table.to_arrow(), dict(table.properties)
        level = isolation or table.isolation_level.value
        tracks_rows = applies(table)
    except Exception as exc:
        out.append(Anomaly("no_lost_commit", f"the table cannot be read: {type(exc).__name__}: {exc}"))
        level = isolation or "WriteSerializable"
    if bank is None:
        bank = any(r.op.get("kind") == "transfer" for r in history)
    wanted = set(checkers) if checkers is not None else {
        "no_lost_commit", "errors", "serializable" if level == "Serializable" else "write_serializable",
        *(["bank"] if bank else []), *(["row_ids"] if tracks_rows else [])}
    unknown = wanted - set(CHECKERS)
    if unknown:
        from .errors import HarnessError

        raise HarnessError(f"unknown checker(s) {sorted(unknown)}; known: {', '.join(CHECKERS)}")
    if "errors" in wanted:
        out += check_errors(history)
    if "no_lost_commit" in wanted:
        out += check_no_lost_commit(history, log, final, key=key, complete=complete)
    replay_ok = final is not None and not log.problems
    if "serializable" in wanted and replay_ok:
        out += check_serializable(history, log, final, final_properties)
    if "write_serializable" in wanted and replay_ok:
        out += check_write_serializable(history, log, final, final_properties, key=key)
    if "bank" in wanted and not log.problems:
        column = next((r.op.get("column") for r in history if r.op.get("kind") == "transfer"), "balance")
        out += check_bank(history, log, key=key, column=column)
    if "row_ids" in wanted and replay_ok:  # it replays every version: a broken log is reported above
        from ..errors import DeltaTxError
        from .row_ids import check_row_ids

        try:
            out += check_row_ids(uri, storage_options, key=key)
        except DeltaTxError as exc:  # a version that cannot be rebuilt is an anomaly, not a crash
            out.append(Anomaly("row_ids", f"a version cannot be replayed: {type(exc).__name__}: {exc}"))
    return out
