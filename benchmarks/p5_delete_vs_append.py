"""P5 — 4 processes × 100 iterations of (DELETE id = k, then a blind append) on one unpartitioned table.

Process ``p`` owns the ids ``(p+1)·10⁶ + i``: iteration ``i`` deletes the row it appended in
iteration ``i-1`` (the seed row for ``i = 0``) — a one-row file, so the DELETE removes exactly
that file — then appends the row ``k+1``. No two processes ever touch the same row or file, so
every conflict that surfaces is between a DELETE and the *other* processes' blind appends or
deletes. deltatx runs each DELETE and each append as its own transaction; a
``ConcurrentModificationException`` reaching the caller is counted by class and the operation
retried on a refreshed table. deltalake: ``dt.delete`` and ``write_deltalake(mode="append")``,
exceptions counted by message and retried the same way.

Configurations: deltatx WriteSerializable (the default; the target: *no* conflict between
DELETEs and blind appends), deltatx Serializable (stats-based detection, the default), deltatx
Serializable with ``deltatx.conflictDetection.useStats=false`` (Delta's own granularity: an
unpartitioned table conflicts on any add), and deltalake (Serializable; ≈ 900 conflicts and
22–26 commits/s measured here).
"""

from __future__ import annotations

from typing import Any, Callable

import deltatx
from deltalake import DeltaTable, write_deltalake

from deltatx.errors import ConcurrentModificationException

from .common import BenchResult, scratch_dir
from .procs import MAX_OP_ATTEMPTS, OpCounter, combine, deltalake_conflict_kind, run_workers
from .workloads import SMALL_SCHEMA, deltalake_facts, deltalake_ids, small_row

ID = "P5"
TITLE = "DELETE + append loops (processes)"
ID_STRIDE = 1_000_000

DELTATX_CONFIGS: dict[str, dict[str, str]] = {
    "WriteSerializable": {"delta.isolationLevel": "WriteSerializable"},
    "Serializable": {"delta.isolationLevel": "Serializable"},
    "Serializable, useStats=false": {"delta.isolationLevel": "Serializable",
                                     "deltatx.conflictDetection.useStats": "false"},
}


def _base(index: int) -> int:
    return (index + 1) * ID_STRIDE


def _with_retries(counter: OpCounter, op_name: str, op: Callable[[], Any], on_conflict: Callable[[], None],
                  is_conflict: Callable[[BaseException], str | None]) -> bool:
    """Run ``op`` until it commits; count each conflict by kind and retry; False if it never did."""
    for _ in range(MAX_OP_ATTEMPTS):
        try:
            op()
            counter.commits += 1
            return True
        except Exception as exc:
            kind = is_conflict(exc)
            if kind is None:
                counter.failure(exc)
                return False
            counter.conflicts[f"{op_name}: {kind}"] += 1
            on_conflict()
    counter.failure(RuntimeError(f"{op_name} did not commit in {MAX_OP_ATTEMPTS} attempts"))
    return False


def _deltatx_conflict(exc: BaseException) -> str | None:
    return type(exc).__name__ if isinstance(exc, ConcurrentModificationException) else None


def deltatx_worker(index: int, barrier, uri: str, n: int) -> dict[str, Any]:
    table = deltatx.Table(uri)
    rows = [small_row(_base(index) + i + 1) for i in range(n)]
    counter = OpCounter(index)
    barrier.wait()
    counter.begin()
    for i in range(n):
        k = _base(index) + i
        _with_retries(counter, "DELETE", lambda: table.delete(where=f"id = {k}"), table.refresh, _deltatx_conflict)
        _with_retries(counter, "APPEND", lambda: table.append(rows[i]), table.refresh, _deltatx_conflict)
    counter.finish()
    return counter.report()


def _deltalake_conflict(exc: BaseException) -> str | None:
    from deltalake.exceptions import CommitFailedError, DeltaError

    return deltalake_conflict_kind(exc) if isinstance(exc, (CommitFailedError, DeltaError)) else None


def deltalake_worker(index: int, barrier, uri: str, n: int) -> dict[str, Any]:
    dt = DeltaTable(uri)
    rows = [small_row(_base(index) + i + 1) for i in range(n)]
    counter = OpCounter(index)
    barrier.wait()
    counter.begin()
    for i in range(n):
        k = _base(index) + i
        _with_retries(counter, "DELETE", lambda: dt.delete(f"id = {k}"), dt.update_incremental, _deltalake_conflict)
        _with_retries(counter, "APPEND", lambda: write_deltalake(dt, rows[i], mode="append"),
                      dt.update_incremental, _deltalake_conflict)
    counter.finish()
    return counter.report()


def _seed_deltatx(uri: str, processes: int, properties: dict[str, str]) -> None:
    table = deltatx.create_table(uri, SMALL_SCHEMA, properties=properties)
    for p in range(processes):
        table.append(small_row(_base(p)))


def _seed_deltalake(uri: str, processes: int) -> None:
    DeltaTable.create(uri, schema=SMALL_SCHEMA)
    dt = DeltaTable(uri)
    for p in range(processes):
        write_deltalake(dt, small_row(_base(p)), mode="append")


def _delete_vs_append_conflicts(summary: dict[str, Any]) -> int:
    """Conflicts a DELETE hit (every winner it can meet here is a blind append or a disjoint DELETE)."""
    return sum(v for k, v in summary["conflicts"].items() if k.startswith("DELETE"))


def run(quick: bool = False) -> BenchResult:
    processes, n = (2, 5) if quick else (4, 100)
    final_version = processes + 2 * processes * n
    expected_ids = sorted(_base(p) + n for p in range(processes))
    runs: dict[str, dict[str, Any]] = {}
    checks: list[tuple[str, Any, Any]] = []
    with scratch_dir("p5") as root:
        for label, properties in DELTATX_CONFIGS.items():
            uri = str(root / f"deltatx-{len(runs)}")
            _seed_deltatx(uri, processes, properties)
            runs[label] = combine(run_workers(deltatx_worker, processes, (uri, n)))
            checks.append((f"deltatx {label}: failures", 0, runs[label]["failures"]))
            checks.append((f"deltatx {label}: final version", final_version, deltatx.Table(uri).version))
            checks.append((f"deltatx {label}: surviving ids (read by deltalake)", expected_ids, deltalake_ids(uri)))
        dl_uri = str(root / "deltalake")
        _seed_deltalake(dl_uri, processes)
        dl = combine(run_workers(deltalake_worker, processes, (dl_uri, n)))
        facts = deltalake_facts(dl_uri)

    ws = runs["WriteSerializable"]
    result = BenchResult(
        id=ID, title=TITLE, metric="commits per second (WriteSerializable)", unit="commits/s",
        higher_is_better=True, deltatx=ws["commits_per_s"], deltalake=dl["commits_per_s"],
        target="WriteSerializable: 0 conflicts between DELETEs and blind appends; 0 failures",
        quick=quick,
        parameters={"processes": processes, "iterations_per_process": n, "table": "unpartitioned, 1 row per file",
                    "retry_after_conflict": True, "max_attempts_per_op": MAX_OP_ATTEMPTS},
        details={**{f"deltatx {k}": v for k, v in runs.items()}, "deltalake": dl,
                 "conflicts by configuration": {**{f"deltatx {k}": v["conflicts_total"] for k, v in runs.items()},
                                                "deltalake": dl["conflicts_total"]}},
        deltalake_baseline_notes="22–26 commits/s and ≈ 900 conflicts measured earlier",
    )
    for name, expected, actual in checks:
        result.check(name, expected, actual)
    result.check("deltalake: rows", processes, facts["rows"])
    # the peer's own accounting, reported rather than checked: a deltalake DELETE that matched
    # nothing may write no version, and one that gave up may have landed (seen once: off by one)
    result.details["deltalake: final version vs seed + its commits"] = [facts["version"], processes + dl["commits"]]
    ws_conflicts = _delete_vs_append_conflicts(ws)
    result.criterion("WriteSerializable: DELETE vs blind-append conflicts", ws_conflicts == 0,
                     f"{ws_conflicts} (deltalake surfaced {dl['conflicts_total']} conflicts)")
    result.criterion("WriteSerializable: no conflicts at all", ws["conflicts_total"] == 0, f"{ws['conflicts']}")
    result.criterion("no failures", all(r["failures"] == 0 for r in runs.values()),
                     ", ".join(f"{k}: {v['failures']}" for k, v in runs.items()))
    return result
