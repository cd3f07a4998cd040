"""P4b — P4 with a fresh handle per commit: 4 OS processes × 100 × ``Table(path).append(1 row)``.

The common job shape opens the table, appends once and drops the handle. P4 keeps one handle
per process; here every commit pays for opening, which without the process-wide snapshot cache
(txnlog/snapshot_cache.py) is a listing, a checkpoint read and a replay. deltalake does the same
in the same run: ``write_deltalake(path, rows, mode="append")`` opens the table on every call.

Rounds alternate between the engines; the headline is the median commits/s over rounds (each
round: first start to last finish over all processes, released by one barrier), with the
median per-commit latency beside it. Target: ≥ 400 commits/s, 0 failures, final version
exact, every row readable by deltalake.
"""

from __future__ import annotations

from typing import Any

import deltatx
from deltalake import DeltaTable, write_deltalake

from .common import BenchResult, median, now, scratch_dir
from .procs import OpCounter, combine, run_workers
from .workloads import SMALL_SCHEMA, deltalake_facts, deltalake_ids, small_row

ID = "P4b"
TITLE = "concurrent blind appends, a fresh handle per commit (processes)"
TARGET_COMMITS_PER_S = 400.0
ID_STRIDE = 1_000_000


def _timed_loop(index: int, barrier, rows: list, commit) -> tuple[OpCounter, list[float]]:
    counter = OpCounter(index)
    latencies: list[float] = []
    barrier.wait()
    counter.begin()
    for row in rows:
        start = now()
        try:
            attempts = commit(row)
            counter.commits += 1
            counter.internal_retries += attempts - 1
        except Exception as exc:
            counter.failure(exc)
        latencies.append(now() - start)
    counter.finish()
    return counter, latencies


def deltatx_fresh_appender(index: int, barrier, uri: str, n: int, id_base: int) -> dict[str, Any]:
    from deltatx.txnlog.snapshot_cache import SNAPSHOTS

    rows = [small_row(id_base + index * ID_STRIDE + i) for i in range(n)]
    deltatx.Table(uri)  # imports and the first load happen before the start line, as in P4

    def commit(row) -> int:
        return deltatx.Table(uri).append(row).attempts

    counter, latencies = _timed_loop(index, barrier, rows, commit)
    report = counter.report()
    report.update(latency_median_s=median(latencies), opens=dict(SNAPSHOTS.stats))
    return report


def deltalake_fresh_appender(index: int, barrier, uri: str, n: int, id_base: int) -> dict[str, Any]:
    rows = [small_row(id_base + index * ID_STRIDE + i) for i in range(n)]
    DeltaTable(uri)

    def commit(row) -> int:
        write_deltalake(uri, row, mode="append")  # opens the table from its path on every call
        return 1

    counter, latencies = _timed_loop(index, barrier, rows, commit)
    report = counter.report()
    report["latency_median_s"] = median(latencies)
    return report


def _round(worker, processes: int, uri: str, n: int, id_base: int) -> dict[str, Any]:
    reports = run_workers(worker, processes, (uri, n, id_base))
    out = combine(reports)
    out["latency_median_ms"] = 1000 * median([r["latency_median_s"] for r in reports])
    if "opens" in reports[0]:
        out["opens"] = {k: sum(r["opens"][k] for r in reports) for k in reports[0]["opens"]}
    return out


def run(quick: bool = False) -> BenchResult:
    processes, n, rounds = (2, 10, 1) if quick else (4, 100, 3)
    with scratch_dir("p4b") as root:
        dtx_uri, dl_uri = str(root / "deltatx"), str(root / "deltalake")
        deltatx.create_table(dtx_uri, SMALL_SCHEMA)
        DeltaTable.create(dl_uri, schema=SMALL_SCHEMA)
        dtx_rounds, dl_rounds = [], []
        for r in range(rounds):  # alternate, so a change in machine load hits both engines
            id_base = r * processes * ID_STRIDE
            dtx_rounds.append(_round(deltatx_fresh_appender, processes, dtx_uri, n, id_base))
            dl_rounds.append(_round(deltalake_fresh_appender, processes, dl_uri, n, id_base))
        dtx_rate = median([x["commits_per_s"] or 0.0 for x in dtx_rounds])
        dl_rate = median([x["commits_per_s"] or 0.0 for x in dl_rounds])
        total = rounds * processes * n
        dtx_failures = sum(x["failures"] for x in dtx_rounds)
        dl_commits = sum(x["commits"] for x in dl_rounds)
        dl_failures = sum(x["failures"] for x in dl_rounds)

        result = BenchResult(
            id=ID, title=TITLE, metric="commits per second (median over rounds)", unit="commits/s",
            higher_is_better=True, deltatx=dtx_rate, deltalake=dl_rate,
            target=f"≥ {TARGET_COMMITS_PER_S:g} commits/s, 0 failures, final version exact", quick=quick,
            parameters={"processes": processes, "appends_per_process": n, "rounds": rounds, "rows_per_append": 1,
                        "handle": "a fresh deltatx.Table(path) / write_deltalake(path) per commit",
                        "start": "multiprocessing barrier (spawn)", "benchmark_retries": False},
            details={
                "deltatx_latency_median_ms": median([x["latency_median_ms"] for x in dtx_rounds]),
                "deltalake_latency_median_ms": median([x["latency_median_ms"] for x in dl_rounds]),
                "deltatx_rounds": dtx_rounds, "deltalake_rounds": dl_rounds,
            },
        )
        expected_ids = sorted(r * processes * ID_STRIDE + p * ID_STRIDE + i
                              for r in range(rounds) for p in range(processes) for i in range(n))
        table = deltatx.Table(dtx_uri)
        result.check("deltatx failures", 0, dtx_failures)
        result.check("deltatx final version", total, table.version)
        result.check("deltatx ids (read by deltalake)", expected_ids, deltalake_ids(dtx_uri))
        dl_facts = deltalake_facts(dl_uri)
        result.check("deltalake final version = its successful commits", dl_commits, dl_facts["version"])
        result.check("deltalake rows = its successful commits", dl_commits, dl_facts["rows"])
        result.details["deltalake_failures"] = dl_failures
    result.criterion("throughput", dtx_rate >= TARGET_COMMITS_PER_S,
                     f"{dtx_rate:.0f} commits/s (target ≥ {TARGET_COMMITS_PER_S:g}); deltalake "
                     f"{dl_rate:.0f} commits/s with {dl_failures} failure(s)")
    result.criterion("no failures", dtx_failures == 0, f"{dtx_failures} failure(s)")
    result.criterion("final version exact", result.checks["deltatx final version"]["ok"],
                     f"version {result.checks['deltatx final version']['actual']} (expected {total})")
    return result
