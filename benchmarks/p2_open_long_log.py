"""P2 — open a table whose log has 10,001 commits and no checkpoint.

The log (commitInfo + one add per commit; ``delta.checkpointInterval`` huge) is written once and
opened alternately by ``deltatx.Table(uri)`` and ``deltalake.DeltaTable(uri)``: each open
replays every commit. Target: deltatx ≤ 1.0 s (deltalake measured 2.07 s here).
"""

from __future__ import annotations

from .common import BenchResult, median, scratch_dir, time_call
from .logbuilder import build_log
from .workloads import open_both, stats_row_count

ID = "P2"
TITLE = "open a 10,001-commit log (no checkpoint)"
TARGET_S = 1.0


def run(quick: bool = False) -> BenchResult:
    commits = 200 if quick else 10_000
    reps = 3
    with scratch_dir("p2") as root:
        uri = str(root / "table")
        build_s, last = time_call(lambda: build_log(uri, commits, 1))
        dtx_times, dl_times, table, dt = open_both(uri, reps)

        result = BenchResult(
            id=ID, title=TITLE, metric="median open time", unit="s",
            deltatx=median(dtx_times), deltalake=median(dl_times),
            target=f"≤ {TARGET_S:g} s", quick=quick,
            parameters={"commits": commits + 1, "adds_per_commit": 1, "checkpoint": False, "repetitions": reps},
            details={"deltatx_samples_s": dtx_times, "deltalake_samples_s": dl_times, "build_log_s": build_s},
            deltalake_baseline_notes="2.07 s measured earlier",
        )
        result.check("deltatx version", last, table.version)
        result.check("deltatx active files", commits, table.files().num_rows)
        result.check("deltatx rows (stats)", commits * 1000, stats_row_count(table.files()))
        result.check("deltalake version", last, dt.version())
        result.check("deltalake active files", commits, len(dt.file_uris()))
        result.check("no checkpoint written", [], sorted(p.name for p in (root / "table" / "_delta_log").glob("*checkpoint*")))
    result.criterion("open time", result.deltatx <= TARGET_S, f"{result.deltatx:.3f} s (target ≤ {TARGET_S:g} s)")
    return result
