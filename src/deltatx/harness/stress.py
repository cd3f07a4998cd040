"""Stress: N writer *processes* run a workload against one table, then the checkers judge it.

::

    parent: prepare_table (CREATE + initial rows) ─► spawn N workers ─► barrier ─► collect progress
    worker: open table, build its seeded generator, wait at the barrier, then per operation:
            execute (one transaction) ─► append an OpRecord to its own history file
    parent: merge the history files ─► check_history ─► StressReport

Workers are separate OS processes (``multiprocessing`` spawn), so they share nothing but the
storage: exactly the situation put-if-absent and the conflict checker must handle. They start
together at a barrier; nothing sleeps. Progress comes back over a queue and is passed to the
caller's ``progress(done, total)`` (``total`` is None for a run bounded by duration).

``worker_init`` ("module:function") is called in every worker before the barrier: it is how the
checker tests install a deliberately broken commit path (:mod:`deltatx.harness.faults`) and how
crash injection can install a phases observer in the writers.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import queue as queue_mod
import tempfile
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from ..isolation import validate_isolation_property
from ..errors import DeltaTxError
from .checkers import Anomaly, check_history
from .errors import HarnessError
from .history import COMMITTED, CONFLICT, ERROR, NOOP, HistoryWriter, OpRecord, execute, read_history
from .workloads import WORKLOADS, WriterSpec, get_workload, prepare_table

#: table properties of a stress run on merge-on-read tables (row-level concurrency, row ids)
ROW_LEVEL_PROPERTIES = {"delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true"}

Progress = Callable[[int, "int | None"], None]

#: how long the parent waits for a silent worker before checking that it is still alive
_POLL_S = 1.0


@dataclass
class StressReport:
    """The outcome of one stress run (``ok`` is False when any checker found an anomaly)."""

    uri: str
    workload: str
    isolation: str
    processes: int
    ops: int | None
    duration_s: float | None
    seed: int
    elapsed_s: float = 0.0
    history: list[OpRecord] = field(default_factory=list)
    anomalies: list[Anomaly] = field(default_factory=list)
    final_version: int = -1
    history_dir: str | None = None

    @property
    def ok(self) -> bool:
        return not self.anomalies

    @property
    def operations(self) -> list[OpRecord]:
        """The workers' records (setup excluded)."""
        return [r for r in self.history if r.writer != "setup"]

    @property
    def commits(self) -> int:
        return sum(1 for r in self.operations if r.outcome == COMMITTED)

    @property
    def noops(self) -> int:
        return sum(1 for r in self.operations if r.outcome == NOOP)

    @property
    def attempts(self) -> int:
        """Commit attempts of all workers (a commit that lost the race twice counts 3, whether it
        lost at the put or found the version taken before it)."""
        return sum(r.attempts for r in self.operations)

    @property
    def conflicts_by_class(self) -> dict[str, int]:
        return dict(Counter(r.error for r in self.operations if r.outcome == CONFLICT))

    @property
    def errors_by_class(self) -> dict[str, int]:
        return dict(Counter(r.error for r in self.operations if r.outcome == ERROR))

    @property
    def operations_by_kind(self) -> dict[str, dict[str, int]]:
        out: dict[str, Counter] = {}
        for r in self.operations:
            out.setdefault(r.op.get("kind", "?"), Counter())[r.outcome] += 1
        return {k: dict(v) for k, v in sorted(out.items())}

    @property
    def commits_per_s(self) -> float:
        return self.commits / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok, "uri": self.uri, "workload": self.workload, "isolation": self.isolation,
            "processes": self.processes, "ops": self.ops, "duration_s": self.duration_s, "seed": self.seed,
            "elapsed_s": round(self.elapsed_s, 3), "operations": len(self.operations), "commits": self.commits,
            "noops": self.noops, "attempts": self.attempts, "commits_per_s": round(self.commits_per_s, 2),
            "conflicts_by_class": self.conflicts_by_class, "errors_by_class": self.errors_by_class,
            "operations_by_kind": self.operations_by_kind, "final_version": self.final_version,
            "anomalies": [a.to_dict() for a in self.anomalies], "history_dir": self.history_dir,
        }


def _call_init(spec: str) -> None:
    module, _, func = spec.partition(":")
    if not module or not func:
        raise HarnessError(f"worker_init must be 'module:function', got {spec!r}")
    getattr(importlib.import_module(module), func)()


def _worker_main(spec: WriterSpec, barrier: Any, events: Any) -> None:
    """Entry point of one writer process (module-level so that spawn can import it)."""
    writer = None
    try:
        if spec.worker_init:
            _call_init(spec.worker_init)
        from ..tables.table import Table

        table = Table(spec.uri, storage_options=spec.storage_options)
        generator = get_workload(spec.workload).generator(spec.index, spec.seed)
        writer = HistoryWriter(spec.history_path)
    except BaseException:
        events.put(("crash", spec.index, traceback.format_exc()))
        barrier.abort()
        return
    try:
        barrier.wait(timeout=spec.barrier_timeout_s)
    except threading.BrokenBarrierError:
        events.put(("crash", spec.index, "the start barrier broke (another writer failed to start)"))
        writer.close()
        return
    started = time.monotonic()
    seq = 0
    try:
        while True:
            if spec.duration_s is not None:
                if time.monotonic() - started >= spec.duration_s:
                    break
            elif seq >= (spec.ops or 0):
                break
            op = generator.next(seq)
            record = execute(table, op, writer=spec.name, seq=seq)
            generator.observe(record)
            writer.write(record)
            events.put(("op", spec.index, record.outcome))
            seq += 1
        events.put(("done", spec.index, seq))
    except BaseException:
        events.put(("crash", spec.index, traceback.format_exc()))
    finally:
        writer.close()


def _validate(uri: str, processes: int, ops: int | None, workload: str, isolation: str,
              duration_s: float | None) -> str:
    if workload not in WORKLOADS:
        raise HarnessError(f"unknown workload {workload!r}; choose one of {', '.join(WORKLOADS)}")
    try:
        validate_isolation_property(isolation)
    except DeltaTxError as exc:
        raise HarnessError(str(exc)) from None
    if not isinstance(processes, int) or processes < 1:
        raise HarnessError(f"processes must be a positive integer, got {processes!r}")
    if duration_s is None and (not isinstance(ops, int) or ops < 1):
        raise HarnessError(f"ops must be a positive integer (or give duration_s), got {ops!r}")
    if duration_s is not None and duration_s <= 0:
        raise HarnessError(f"duration_s must be positive, got {duration_s!r}")
    uri = str(uri)
    if not uri.strip():  # os.path.abspath("") is the working directory
        raise HarnessError("the table location is empty: give a path or s3://bucket/path")
    if uri.startswith("memory://"):
        raise HarnessError("stress runs its writers in separate processes and a memory:// table lives in one "
                           "process; use a local path or s3://")
    if "://" not in uri:
        uri = os.path.abspath(uri)
    return uri


def run_stress(uri: str, processes: int = 8, ops: int | None = 250, workload: str = "mixed",
               isolation: str = "WriteSerializable", duration_s: float | None = None,
               storage_options: dict[str, Any] | None = None, seed: int = 0, progress: Progress | None = None,
               *, history_dir: str | None = None, worker_init: str | None = None,
               timeout_s: float | None = None, check: bool = True,
               properties: dict[str, str] | None = None) -> StressReport:
    """Create the workload's table at ``uri``, run ``processes`` writers, check the history.

    Writers are spawned processes: a script calling this must guard its entry point with
    ``if __name__ == "__main__":`` (as for any ``multiprocessing`` spawn).

    Each writer runs ``ops`` operations, or keeps going for ``duration_s`` seconds when that is
    given (``ops`` is then ignored). ``history_dir`` keeps the per-writer history files (a
    temporary directory otherwise). ``timeout_s`` bounds the whole run (default: generous,
    derived from the size); a writer that crashes or hangs becomes a ``workers`` anomaly.
    ``properties`` are extra table properties: ``ROW_LEVEL_PROPERTIES`` runs the workload on a
    deletion-vector + row-tracking table, where the ``row_ids`` checker runs too.
    """
    uri = _validate(uri, processes, ops, workload, isolation, duration_s)
    options = dict(storage_options or {})
    setup = prepare_table(uri, workload, isolation, options, properties)
    tmp = None if history_dir is not None else tempfile.TemporaryDirectory(prefix="deltatx-stress-")
    folder = history_dir if history_dir is not None else tmp.name  # type: ignore[union-attr]
    os.makedirs(folder, exist_ok=True)
    specs = [WriterSpec(i, uri, workload, None if duration_s is not None else ops, duration_s, seed, options,
                        os.path.join(folder, f"w{i}.jsonl"), worker_init) for i in range(processes)]
    if timeout_s is None:
        timeout_s = 300.0 + (duration_s * 2 if duration_s is not None else 2.0 * (ops or 0) * processes)
    report = StressReport(uri, workload, isolation, processes, ops if duration_s is None else None, duration_s,
                          seed, history_dir=history_dir)
    try:
        report.elapsed_s, failures = _run_writers(specs, progress, timeout_s)
        report.history = setup + read_history(s.history_path for s in specs if os.path.exists(s.history_path))
    finally:
        if tmp is not None:
            tmp.cleanup()
    report.anomalies = [Anomaly("workers", f) for f in failures]
    if check:
        spec = get_workload(workload)
        report.anomalies += check_history(report.history, uri, isolation=isolation, storage_options=options,
                                          bank=spec.check_bank, complete=not failures)
    versions = [r.version for r in report.history if r.version is not None]
    report.final_version = max(versions, default=-1)
    return report


def _run_writers(specs: list[WriterSpec], progress: Progress | None, timeout_s: float) -> tuple[float, list[str]]:
    """Start the writer processes, release them together, wait for all; (elapsed, failures)."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(specs) + 1)
    events = ctx.Queue()
    procs = [ctx.Process(target=_worker_main, args=(s, barrier, events), name=f"deltatx-stress-{s.name}",
                         daemon=True) for s in specs]
    for p in procs:
        p.start()
    failures: list[str] = []
    total = None if specs[0].duration_s is not None else sum(s.ops or 0 for s in specs)
    done = 0
    started = ended = time.monotonic()
    try:
        if not _await_start(barrier, procs, specs[0].barrier_timeout_s):
            failures.append("the writers did not all start")

        def on_op(_: Any) -> None:
            nonlocal done
            done += 1
            if progress is not None:
                progress(done, total)

        elapsed, more = gather_events(procs, events, timeout_s, on_op)
        return elapsed, failures + more
    finally:
        stop_workers(procs, events)


def gather_events(procs: list[Any], events: Any, timeout_s: float, on_op: Callable[[Any], None],
                  exited: Callable[[int, int | None], str | None] | None = None) -> tuple[float, list[str]]:
    """Wait for every writer's "done" (or its death, or the deadline), handing each "op" payload
    to ``on_op``. ``exited(i, exit code)`` names the failure of a writer that died without "done"
    (None: it was expected to). Returns (seconds from now to the last writer's end, failures)."""
    failures: list[str] = []
    finished: set[int] = set()
    started = ended = time.monotonic()
    deadline = started + timeout_s
    while len(finished) < len(procs):
        try:
            kind, index, payload = events.get(timeout=_POLL_S)
        except queue_mod.Empty:
            for i, p in enumerate(procs):
                if i not in finished and not p.is_alive():
                    finished.add(i)
                    ended = time.monotonic()
                    message = (exited(i, p.exitcode) if exited is not None
                               else f"writer w{i} exited with code {p.exitcode} before finishing")
                    if message:
                        failures.append(message)
            if time.monotonic() > deadline:
                failures += [f"writer w{i} did not finish within {timeout_s:.0f}s"
                             for i in range(len(procs)) if i not in finished]
                break
            continue
        if kind == "op":
            on_op(payload)
        elif kind == "done":
            finished.add(index)
            ended = time.monotonic()
        else:
            finished.add(index)
            failures.append(f"writer w{index} crashed: {payload}")
    return max(ended - started, 1e-9), failures


def stop_workers(procs: list[Any], events: Any) -> None:
    """Join every worker (killing one that hangs) and close their event queue."""
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    events.close()


def _await_start(barrier: Any, procs: list[Any], timeout_s: float) -> bool:
    """Join the start barrier; break it at once if a writer dies before reaching it."""
    passed: list[bool] = []

    def wait() -> None:
        try:
            barrier.wait(timeout=timeout_s)
            passed.append(True)
        except threading.BrokenBarrierError:
            passed.append(False)

    waiter = threading.Thread(target=wait, name="deltatx-stress-start", daemon=True)
    waiter.start()
    while waiter.is_alive():
        waiter.join(_POLL_S)
        if waiter.is_alive() and any(not p.is_alive() for p in procs):
            barrier.abort()
            waiter.join()
    return bool(passed and passed[0])
