"""Run N writer processes against one table with a common start line (P4, P5).

Processes are started with the ``spawn`` method: forking a parent that already runs deltalake's
Rust runtime (tokio threads) is unsafe. Each worker prepares everything (imports, table handle,
input rows) *before* the barrier, so the measured window is only the writes. Workers report a
plain dict through a queue: their start/end on the system-wide monotonic clock, successful
commits, failures that reached the caller, and conflicts by class.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_module
from collections import Counter
from typing import Any, Callable

from .common import now, settle_disk

WORKER_TIMEOUT_S = 900
MAX_OP_ATTEMPTS = 50  # per operation, in the benchmark's own retry loop after a conflict


def _entry(worker: Callable[..., dict[str, Any]], index: int, barrier, results, args: tuple) -> None:
    try:
        report = worker(index, barrier, *args)
    except BaseException as exc:  # the parent must hear about it, not wait forever
        try:
            barrier.abort()
        except Exception:
            pass
        report = {"index": index, "crashed": f"{type(exc).__name__}: {exc}"}
    results.put(report)


def run_workers(worker: Callable[..., dict[str, Any]], processes: int, args: tuple) -> list[dict[str, Any]]:
    """Start ``processes`` copies of ``worker(index, barrier, *args)``; return their reports."""
    settle_disk()  # the previous round's (or peer's) unsynced writes are not this round's to flush
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(processes)
    results = ctx.Queue()
    procs = [ctx.Process(target=_entry, args=(worker, i, barrier, results, args), daemon=True)
             for i in range(processes)]
    for p in procs:
        p.start()
    reports = []
    try:
        for _ in procs:
            reports.append(results.get(timeout=WORKER_TIMEOUT_S))
    except queue_module.Empty:
        reports.append({"index": -1, "crashed": f"a worker sent nothing within {WORKER_TIMEOUT_S} s"})
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
                p.join()
    crashed = [r["crashed"] for r in reports if "crashed" in r]
    if crashed:
        raise RuntimeError(f"benchmark worker(s) crashed: {crashed}")
    return sorted(reports, key=lambda r: r["index"])


class OpCounter:
    """What one worker saw: commits, conflicts by class (and by operation), failures, samples."""

    def __init__(self, index: int):
        self.index = index
        self.commits = 0
        self.failures = 0
        self.conflicts: Counter[str] = Counter()
        self.internal_retries = 0
        self.errors: list[str] = []
        self.start = 0.0
        self.end = 0.0

    def begin(self) -> None:
        self.start = now()

    def finish(self) -> None:
        self.end = now()

    def failure(self, exc: BaseException) -> None:
        self.failures += 1
        if len(self.errors) < 5:
            self.errors.append(f"{type(exc).__name__}: {str(exc)[:300]}")

    def report(self) -> dict[str, Any]:
        return {"index": self.index, "commits": self.commits, "failures": self.failures,
                "conflicts": dict(self.conflicts), "internal_retries": self.internal_retries,
                "errors": self.errors, "start": self.start, "end": self.end}


def append_each(index: int, barrier, table: Any, rows: list) -> dict[str, Any]:
    """One writer's measured loop: ``table.append(row)`` for each row after the common start
    line, counting commits, internal retries and failures (P4, P14)."""
    counter = OpCounter(index)
    barrier.wait()
    counter.begin()
    for row in rows:
        try:
            result = table.append(row)
            counter.commits += 1
            counter.internal_retries += result.attempts - 1
        except Exception as exc:
            counter.failure(exc)
    counter.finish()
    return counter.report()


def combine(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals over workers; throughput over the window from the first start to the last end."""
    conflicts: Counter[str] = Counter()
    for r in reports:
        conflicts.update(r["conflicts"])
    window = max(r["end"] for r in reports) - min(r["start"] for r in reports)
    commits = sum(r["commits"] for r in reports)
    return {
        "commits": commits,
        "failures": sum(r["failures"] for r in reports),
        "conflicts": dict(sorted(conflicts.items())),
        "conflicts_total": sum(conflicts.values()),
        "internal_retries": sum(r["internal_retries"] for r in reports),
        "window_s": window,
        "commits_per_s": commits / window if window > 0 else None,
        "errors": [e for r in reports for e in r["errors"]][:5],
    }


def deltalake_conflict_kind(exc: BaseException) -> str:
    """deltalake raises one class for every conflict; its message names the kind."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    for prefix in ("Failed to commit transaction: ", "Commit failed: "):
        message = message.removeprefix(prefix)
    return f"{type(exc).__name__}: {message[:120]}"
