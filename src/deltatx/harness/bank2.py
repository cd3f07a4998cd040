"""bank2: transfers between accounts held in TWO catalog tables, in one catalog transaction each.

::

    parent: create bank2_a, bank2_b in the catalog; one catalog transaction opens every account
            ─► spawn N workers ─► barrier ─► collect records ─► check_bank2
    worker: per operation, ``with cat.transaction()``: read the source balance in one table,
            debit it, read the target balance in the other table, credit it (literal values, so a
            lost update or a half-ratified transaction changes the total)

Why: a Delta log makes one table atomic, never two. The catalog ratifies the next version of both
tables in one database transaction; the checker proves it by walking the catalog's own commit
order (``deltatx_catalog_commits.seq``) and reading both tables at EVERY cut — the total over both
tables must never change, and every catalog commit after the setup must have ratified both tables.

Crash injection: ``crash_at=(phase, nth)`` makes writer 0 die (``os._exit``) the ``nth`` time it
reaches ``phase`` (``staged``, ``ratified``, ``published``): a real process death between two steps
of the commit. The checker then runs on what is left: every table changed or none. The command
line's ``deltatx stress DIR --workload bank2 --catalog URL --crash-at PHASE[:N]`` runs the same.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import threading
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConcurrentModificationException, DeltaTxError
from .checkers import Anomaly
from .errors import HarnessError
from .history import COMMITTED, CONFLICT, ERROR, NOOP
from .stress import gather_events, stop_workers

BANK2_TABLES = ("bank2_a", "bank2_b")
BANK2_SCHEMA = pa.schema([("id", pa.int64()), ("balance", pa.int64())])
BANK2_ACCOUNTS = 8  # per table
BANK2_OPENING_BALANCE = 100
#: exit code of a writer killed on purpose at a phase (not a failure of the run)
CRASH_EXIT_CODE = 77
CRASH_PHASES = ("staged", "ratified", "published")


@dataclass
class Bank2Record:
    """How one transfer ended (``txn_id`` is the catalog transaction's, as ratified)."""

    writer: int
    seq: int
    outcome: str
    txn_id: str | None = None
    error: str | None = None
    message: str | None = None


@dataclass
class Bank2Report:
    catalog_url: str
    processes: int
    ops: int
    seed: int
    elapsed_s: float = 0.0
    records: list[Bank2Record] = field(default_factory=list)
    anomalies: list[Anomaly] = field(default_factory=list)
    crashed: bool = False
    catalog_commits: int = 0
    #: the crash asked for (phase, nth), None without one; ``crashed`` says whether it happened
    crash_at: tuple[str, int] | None = None

    @property
    def ok(self) -> bool:
        return not self.anomalies

    @property
    def commits(self) -> int:
        return sum(1 for r in self.records if r.outcome == COMMITTED)

    @property
    def commits_per_s(self) -> float:
        return self.commits / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def conflicts_by_class(self) -> dict[str, int]:
        return dict(Counter(r.error for r in self.records if r.outcome == CONFLICT))

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "catalog": self.catalog_url, "workload": "bank2", "processes": self.processes,
                "ops": self.ops, "seed": self.seed, "elapsed_s": round(self.elapsed_s, 3),
                "operations": len(self.records), "commits": self.commits,
                "commits_per_s": round(self.commits_per_s, 2), "conflicts_by_class": self.conflicts_by_class,
                "crash_at": list(self.crash_at) if self.crash_at else None, "crashed": self.crashed,
                "catalog_commits": self.catalog_commits,
                "anomalies": [a.to_dict() for a in self.anomalies]}


# --------------------------------------------------------------------------------------------
# setup and one transfer
# --------------------------------------------------------------------------------------------


def prepare_bank2(catalog: Any, root: str) -> None:
    """Create both tables under ``root`` and open every account in ONE catalog transaction (so
    no catalog cut after it has one table funded and the other not)."""
    taken = set(catalog.list_tables()) & set(BANK2_TABLES)
    if taken:
        raise HarnessError(f"catalog {catalog.url!r} has bank2 tables already: {sorted(taken)}")
    for name in BANK2_TABLES:
        catalog.create_table(name, os.path.join(root, name), BANK2_SCHEMA)
    opening = pa.table({"id": list(range(BANK2_ACCOUNTS)), "balance": [BANK2_OPENING_BALANCE] * BANK2_ACCOUNTS},
                       schema=BANK2_SCHEMA)
    with catalog.transaction() as tx:
        for name in BANK2_TABLES:
            tx.table(name).append(opening)


def _balance(tx: Any, account: int) -> int:
    rows = tx.read(where=f"id = {account}", columns=["balance"])
    if rows.num_rows != 1:
        raise DeltaTxError(f"account {account}: expected one row, found {rows.num_rows}")
    return int(rows["balance"][0].as_py())


def transfer(catalog: Any, source: tuple[str, int], target: tuple[str, int], amount: int) -> tuple[str, int]:
    """Move ``min(amount, balance)`` from ``source`` (table, account) to ``target`` in one catalog
    transaction; returns (catalog txn id, amount moved). New balances are literals computed from
    what the transaction read."""
    ctx = catalog.transaction()
    return ctx.txn_id, transfer_in(ctx, source, target, amount)


def transfer_in(ctx: Any, source: tuple[str, int], target: tuple[str, int], amount: int) -> int:
    """:func:`transfer` in the catalog transaction ``ctx`` (not entered yet); returns the amount
    moved. The caller keeps ``ctx.txn_id``, so a transfer that raised can still be looked for
    among the catalog's commits (one that committed must not report a failure)."""
    with ctx:
        src, dst = ctx.table(source[0]), ctx.table(target[0])
        src_balance, dst_balance = _balance(src, source[1]), _balance(dst, target[1])
        moved = max(0, min(amount, src_balance))
        if moved:
            src.update(f"id = {source[1]}", set={"balance": str(src_balance - moved)})
            dst.update(f"id = {target[1]}", set={"balance": str(dst_balance + moved)})
    return moved


def _next_transfer(rng: random.Random) -> tuple[tuple[str, int], tuple[str, int], int]:
    a, b = (BANK2_TABLES if rng.random() < 0.5 else BANK2_TABLES[::-1])
    return (a, rng.randrange(BANK2_ACCOUNTS)), (b, rng.randrange(BANK2_ACCOUNTS)), rng.randint(1, 30)


# --------------------------------------------------------------------------------------------
# workers
# --------------------------------------------------------------------------------------------


def _install_crash(phase: str, nth: int) -> None:
    from .. import phases

    seen = [0]

    def observer(reached: str, **_: Any) -> None:
        if reached == phase:
            seen[0] += 1
            if seen[0] == nth:
                os._exit(CRASH_EXIT_CODE)  # a real death: no finally, no flush, no cleanup

    phases.install(observer)


def _worker_main(index: int, catalog_url: str, ops: int, seed: int, worker_init: str | None,
                 crash_at: tuple[str, int] | None, barrier: Any, events: Any,
                 storage_options: dict[str, Any] | None = None) -> None:
    """One writer process (module-level so that spawn can import it)."""
    try:
        if worker_init:
            from .stress import _call_init

            _call_init(worker_init)
        from ..catalog.catalog import Catalog

        catalog = Catalog(catalog_url, storage_options)
        if crash_at is not None and index == 0:
            _install_crash(*crash_at)
        rng = random.Random(f"deltatx-bank2:{seed}:{index}")
    except BaseException:
        events.put(("crash", index, traceback.format_exc()))
        barrier.abort()
        return
    try:
        barrier.wait(timeout=120)
    except threading.BrokenBarrierError:
        events.put(("crash", index, "the start barrier broke"))
        return
    try:
        for seq in range(ops):
            source, target, amount = _next_transfer(rng)
            ctx = catalog.transaction()
            try:
                moved = transfer_in(ctx, source, target, amount)
                record = Bank2Record(index, seq, COMMITTED if moved else NOOP, ctx.txn_id)
            except ConcurrentModificationException as exc:
                record = Bank2Record(index, seq, CONFLICT, ctx.txn_id, type(exc).__name__, str(exc)[:300])
            except Exception as exc:
                record = Bank2Record(index, seq, ERROR, ctx.txn_id, type(exc).__name__, str(exc)[:300])
            events.put(("op", index, record))
        events.put(("done", index, ops))
    except BaseException:
        events.put(("crash", index, traceback.format_exc()))
    finally:
        catalog.close()


def run_bank2(catalog_url: str, root: str, processes: int = 4, ops: int = 50, seed: int = 0, *,
              worker_init: str | None = None, crash_at: tuple[str, int] | None = None,
              timeout_s: float | None = None, progress: Any = None,
              storage_options: dict[str, Any] | None = None) -> Bank2Report:
    """Create the two bank tables in the catalog at ``catalog_url`` (files under ``root``), run
    ``processes`` writers of ``ops`` transfers each, and check every catalog cut.

    ``worker_init`` ("module:function") runs in every writer first (faults); ``crash_at`` kills
    writer 0 at the ``nth`` time it reaches ``phase``. ``storage_options`` open the tables' files
    in the setup, every writer and the checker (``deltatx.Catalog(url, storage_options)``; on
    local disk e.g. ``fsync``). Writers are spawned: guard scripts with
    ``if __name__ == "__main__":``.
    """
    from ..catalog.catalog import Catalog

    if not isinstance(processes, int) or processes < 1:
        raise HarnessError(f"processes must be a positive integer, got {processes!r}")
    if not isinstance(ops, int) or ops < 1:
        raise HarnessError(f"ops must be a positive integer, got {ops!r}")
    if crash_at is not None and crash_at[0] not in CRASH_PHASES:
        raise HarnessError(f"crash phase must be one of {', '.join(CRASH_PHASES)}, got {crash_at[0]!r}")
    options = dict(storage_options or {}) or None
    root = os.path.abspath(root)
    os.makedirs(root, exist_ok=True)
    with Catalog(catalog_url, options) as catalog:
        prepare_bank2(catalog, root)
    report = Bank2Report(catalog_url, processes, ops, seed, crash_at=tuple(crash_at) if crash_at else None)
    timeout_s = timeout_s if timeout_s is not None else 300.0 + 2.0 * ops * processes
    failures = _run_writers(report, catalog_url, worker_init, crash_at, timeout_s, progress, options)
    report.anomalies = [Anomaly("workers", f) for f in failures]
    with Catalog(catalog_url, options) as catalog:  # a fresh process's view: publishes what a crash left
        report.anomalies += check_bank2(catalog, report.records)
        report.catalog_commits = len(catalog_commit_order(catalog))
    return report


def _run_writers(report: Bank2Report, catalog_url: str, worker_init: str | None,
                 crash_at: tuple[str, int] | None, timeout_s: float, progress: Any,
                 storage_options: dict[str, Any] | None = None) -> list[str]:
    ctx = mp.get_context("spawn")
    n = report.processes
    barrier, events = ctx.Barrier(n + 1), ctx.Queue()
    procs = [ctx.Process(target=_worker_main, args=(i, catalog_url, report.ops, report.seed, worker_init,
                                                    crash_at, barrier, events, storage_options), daemon=True)
             for i in range(n)]
    for p in procs:
        p.start()
    failures: list[str] = []
    try:
        try:
            barrier.wait(timeout=120)
        except threading.BrokenBarrierError:
            failures.append("the writers did not all start")

        def on_op(record: Any) -> None:
            report.records.append(record)
            if progress is not None:
                progress(len(report.records), n * report.ops)

        def exited(i: int, code: int | None) -> str | None:
            if code == CRASH_EXIT_CODE and crash_at is not None and i == 0:
                report.crashed = True  # killed on purpose; its in-flight transfer is unknown
                return None
            return f"writer w{i} exited with code {code} before finishing"

        report.elapsed_s, more = gather_events(procs, events, timeout_s, on_op, exited)
        return failures + more
    finally:
        stop_workers(procs, events)


# --------------------------------------------------------------------------------------------
# the checker
# --------------------------------------------------------------------------------------------


def catalog_commit_order(catalog: Any) -> list[tuple[int, str, dict[str, int]]]:
    """(seq, catalog txn id, {table name: version ratified}) of every catalog commit, in the
    catalog's order — one database query, so it is one consistent history."""
    names = {e.table_id: e.name for e in catalog.entries()}
    rows = catalog._db.query(
        "SELECT cc.seq, cc.txn_id, c.table_id, c.version FROM deltatx_catalog_commits cc "
        "JOIN deltatx_commits c ON c.catalog_seq = cc.seq ORDER BY cc.seq, c.table_id")
    out: list[tuple[int, str, dict[str, int]]] = []
    for seq, txn_id, table_id, version in rows:
        if table_id not in names:
            continue
        if not out or out[-1][0] != seq:
            out.append((int(seq), txn_id, {}))
        out[-1][2][names[table_id]] = int(version)
    return out


def _ratified_outside_catalog_commits(catalog: Any) -> list[Anomaly]:
    """Ratified versions of the bank2 tables whose catalog commit is not in the catalog's log."""
    names = {e.table_id: e.name for e in catalog.entries() if e.name in BANK2_TABLES}
    rows = catalog._db.query(
        "SELECT c.table_id, c.version, c.catalog_seq FROM deltatx_commits c LEFT JOIN deltatx_catalog_commits cc "
        "ON cc.seq = c.catalog_seq WHERE cc.seq IS NULL ORDER BY c.table_id, c.version")
    return [Anomaly("bank2", f"version {int(version)} of {names[table_id]} was ratified by catalog commit {seq}, "
                             f"which is not in the catalog's commit log", int(version))
            for table_id, version, seq in rows if table_id in names]


class _TableBalances:
    """Sum of balances and account set of one table at successive versions, applied commit by
    commit (one replay per table, not one per cut)."""

    def __init__(self, catalog: Any, name: str):
        from ..txnlog.snapshot import load_snapshot

        self.store = catalog.store(name)
        self.store.publish_pending()  # whatever a crash left ratified but unpublished
        self._snapshot = load_snapshot(self.store, version=0)
        self._cache: dict[int, tuple[int, Counter]] = {}

    def at(self, version: int) -> tuple[int, Counter]:
        from ..io.reader import read_files
        from ..txnlog.actions import parse_commit

        if version not in self._cache:
            snap = self._snapshot
            for v in range(snap.version + 1, version + 1):
                snap = snap.apply(parse_commit(self.store.read_commit(v), v))
            self._snapshot = snap
            rows = read_files(self.store, snap.files, snap.schema, snap.partition_columns, columns=["id", "balance"])
            self._cache[version] = (int(pc.sum(rows["balance"]).as_py() or 0), Counter(rows["id"].to_pylist()))
        return self._cache[version]


def check_bank2(catalog: Any, records: list[Bank2Record] | None = None) -> list[Anomaly]:
    """The bank2 invariants over the catalog's whole history:

    * every ratified version belongs to a catalog commit, and each table's versions go up one at a
      time in the catalog's commit order (none ratified on the side, none skipped);
    * every catalog commit after the setup ratified BOTH tables (a transfer is all or nothing);
    * at every catalog cut after the setup the total over both tables and the set of accounts
      equal the opening ones;
    * every transfer a writer reported committed is a catalog commit, and no failed one is.
    """
    name = "bank2"
    missing = [t for t in BANK2_TABLES if t not in catalog.list_tables()]
    if missing:
        return [Anomaly(name, f"the catalog has no table {missing}: run prepare_bank2 first")]
    order = catalog_commit_order(catalog)
    balances = {t: _TableBalances(catalog, t) for t in BANK2_TABLES}
    current = dict.fromkeys(BANK2_TABLES, -1)
    expected: tuple[int, Counter] | None = None
    out: list[Anomaly] = _ratified_outside_catalog_commits(catalog)
    for seq, txn_id, ratified in order:
        for t, version in ratified.items():
            if t in current and version != current[t] + 1:  # a version with no catalog commit of its own
                out.append(Anomaly(name, f"catalog commit {seq} (txn {txn_id}) ratified version {version} of {t} "
                                         f"after version {current[t]}: the versions between belong to no "
                                         f"catalog commit", version, None, txn_id))
        current.update(ratified)
        if min(current.values()) < 1:
            continue  # the setup: created, not yet funded
        if expected is None:
            total = sum(balances[t].at(current[t])[0] for t in BANK2_TABLES)
            accounts = {t: balances[t].at(current[t])[1] for t in BANK2_TABLES}
            expected = (total, accounts)  # type: ignore[assignment]
            continue
        if set(ratified) != set(BANK2_TABLES):
            out.append(Anomaly(name, f"catalog commit {seq} (txn {txn_id}) ratified only {sorted(ratified)}: "
                                     f"a transfer must change both tables or none", None, None, txn_id))
        total = sum(balances[t].at(current[t])[0] for t in BANK2_TABLES)
        if total != expected[0]:
            out.append(Anomaly(name, f"total over both tables is {total} at catalog commit {seq} (txn {txn_id}, "
                                     f"versions {dict(current)}), expected {expected[0]}", None, None, txn_id))
        for t in BANK2_TABLES:
            if balances[t].at(current[t])[1] != expected[1][t]:  # type: ignore[index]
                out.append(Anomaly(name, f"the accounts of {t} at version {current[t]} (catalog commit {seq}) "
                                         f"differ from the opening ones", current[t], None, txn_id))
        if len(out) >= 20:
            return out
    if expected is None:
        return [Anomaly(name, "the bank was never funded: no catalog commit has both tables at version >= 1")]
    committed = {txn for _, txn, _ in order}
    for r in records or ():
        if r.outcome == COMMITTED and r.txn_id not in committed:
            out.append(Anomaly(name, f"lost commit: w{r.writer}#{r.seq} reported success but txn {r.txn_id} "
                                     f"is no catalog commit", None, f"w{r.writer}", r.txn_id))
        elif r.outcome in (CONFLICT, ERROR) and r.txn_id in committed:
            out.append(Anomaly(name, f"w{r.writer}#{r.seq} reported {r.error} but is a catalog commit",
                               None, f"w{r.writer}", r.txn_id))
        if r.outcome == ERROR:
            out.append(Anomaly("errors", f"w{r.writer}#{r.seq} failed with {r.error}: {r.message}",
                               None, f"w{r.writer}"))
    latest = catalog.cut()
    for t in BANK2_TABLES:
        if latest[t][1] != current[t]:
            out.append(Anomaly(name, f"{t}: the catalog's latest version is {latest[t][1]} but its commit "
                                     f"order ends at {current[t]}", latest[t][1]))
    return out[:40]
