"""P1 — 1,000 sequential 1-row appends to a local table, one table object reused.

deltatx: ``Table.append`` on one ``deltatx.Table``; deltalake: ``write_deltalake(dt, mode="append")``
on one reused ``DeltaTable``. Reports the median time per commit and the medians of the first
and last 100 commits (is the cost flat as the log grows?). Target: median ≤ 3 ms and flat
(last-100 median ≤ 1.5 × first-100 median). Baseline measured here: deltalake 27 ms median,
growing from ≈ 6 ms to ≈ 67 ms.
"""

from __future__ import annotations

import deltatx
from deltalake import DeltaTable, write_deltalake

from .common import BenchResult, median, now, scratch_dir
from .workloads import SMALL_SCHEMA, deltalake_facts, small_row, stats_row_count

ID = "P1"
TITLE = "sequential 1-row appends"
TARGET_MEDIAN_MS = 3.0
FLATNESS = 1.5


def _deltatx_appends(uri: str, n: int) -> tuple[list[float], deltatx.Table]:
    table = deltatx.create_table(uri, SMALL_SCHEMA)
    times = []
    for i in range(n):
        batch = small_row(i)
        start = now()
        table.append(batch)
        times.append(now() - start)
    return times, table


def _deltalake_appends(uri: str, n: int) -> tuple[list[float], DeltaTable]:
    DeltaTable.create(uri, schema=SMALL_SCHEMA)
    dt = DeltaTable(uri)
    times = []
    for i in range(n):
        batch = small_row(i)
        start = now()
        write_deltalake(dt, batch, mode="append")
        times.append(now() - start)
    return times, dt


def _summary(times_s: list[float], window: int) -> dict[str, float]:
    ms = [t * 1000 for t in times_s]
    ordered = sorted(ms)
    return {
        "median_ms": median(ms),
        f"first_{window}_median_ms": median(ms[:window]),
        f"last_{window}_median_ms": median(ms[-window:]),
        "p95_ms": ordered[int(0.95 * (len(ordered) - 1))],
        "max_ms": ordered[-1],
        "total_s": sum(times_s),
    }


def run(quick: bool = False) -> BenchResult:
    n = 50 if quick else 1000
    window = 10 if quick else 100
    with scratch_dir("p1") as root:
        dtx_uri, dl_uri = str(root / "deltatx"), str(root / "deltalake")
        dtx_times, table = _deltatx_appends(dtx_uri, n)
        dl_times, dt = _deltalake_appends(dl_uri, n)
        dtx, dl = _summary(dtx_times, window), _summary(dl_times, window)

        result = BenchResult(
            id=ID, title=TITLE, metric="median time per commit", unit="ms",
            deltatx=dtx["median_ms"], deltalake=dl["median_ms"],
            target=f"≤ {TARGET_MEDIAN_MS:g} ms median, flat (last {window} ≤ {FLATNESS}× first {window})",
            quick=quick,
            parameters={"appends": n, "rows_per_append": 1, "window": window, "storage": "local",
                        "deltatx_fsync": True},
            details={"deltatx": dtx, "deltalake": dl},
            deltalake_baseline_notes="27 ms median/commit measured earlier, growing ≈ 6 → 67 ms",
        )
        result.check("deltatx final version", n, table.version)
        result.check("deltatx reopened version", n, deltatx.Table(dtx_uri).version)
        result.check("deltatx rows (stats)", n, stats_row_count(deltatx.Table(dtx_uri).files()))
        facts = deltalake_facts(dtx_uri)
        result.check("deltatx table read by deltalake: rows", n, facts["rows"])
        result.check("deltatx table read by deltalake: version", n, facts["version"])
        result.check("deltalake final version", n, deltalake_facts(dl_uri)["version"])
        result.check("deltalake rows", n, deltalake_facts(dl_uri)["rows"])
        del dt

    first, last = dtx[f"first_{window}_median_ms"], dtx[f"last_{window}_median_ms"]
    result.criterion("median per commit", dtx["median_ms"] <= TARGET_MEDIAN_MS,
                     f"{dtx['median_ms']:.2f} ms (target ≤ {TARGET_MEDIAN_MS:g} ms)")
    result.criterion("flat as the log grows", last <= FLATNESS * first,
                     f"first {window}: {first:.2f} ms, last {window}: {last:.2f} ms "
                     f"(deltalake {dl[f'first_{window}_median_ms']:.1f} → {dl[f'last_{window}_median_ms']:.1f} ms)")
    return result
