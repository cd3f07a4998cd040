"""``python -m benchmarks.soak [--quick] [--only R1,R2,...]``: the reliability suite at full size.

``make test`` runs each part scaled down; this runs them as issue 5 sizes them:

====  ==============================================================================  =================
part  what                                                                              --quick
====  ==============================================================================  =================
R1    stress, 8 processes × 250 mixed ops, Serializable and WriteSerializable, local     2 × 15
      — plus the same on a deletion-vector + row-tracking table (row-level concurrency;
      the row_ids checker: ids unique, stable for surviving rows, never reused)
R2    1,000 random crash points (phase, N) of the write/commit/checkpoint path, local   20 points
R4    4 writers × 100 appends against S3 (a moto server this runner starts on           2 × 10
      127.0.0.1)
R5    bank transfers, Serializable, 4 processes × 250 transfers, invariant at every     2 × 15
      version
====  ==============================================================================  =================

R1/R4/R5 use :func:`deltatx.harness.run_stress` (its checkers: no lost commit, the isolation
level by serial replay, the bank total). R2 uses ``tests/reliability/crash_helpers.py``: each
point kills a forked child with ``os._exit(137)`` at the Nth time it reaches a phase, then
checks the table opens, acknowledged commits are intact, uncommitted rows are invisible,
VACUUM removes the orphans and a new writer commits.

Prints a summary table and writes ``benchmarks/results/soak.json`` (``soak-quick.json`` with --quick). Exit status 0 when every
part passed, 1 otherwise (a part that raises is a failed part, the others still run).
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import orjson

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "benchmarks" / "results"
CRASH_HELPERS_DIR = REPO / "tests" / "reliability"

FULL = {"r1_processes": 8, "r1_ops": 250, "r2_points": 1000, "r2_plans": 10, "r4_processes": 4, "r4_ops": 100,
        "r5_processes": 4, "r5_ops": 250}
QUICK = {"r1_processes": 2, "r1_ops": 15, "r2_points": 20, "r2_plans": 3, "r4_processes": 2, "r4_ops": 10,
         "r5_processes": 2, "r5_ops": 15}
PARTS = ("R1", "R2", "R4", "R5")


def _crash_helpers():
    for folder in (CRASH_HELPERS_DIR.parent, CRASH_HELPERS_DIR):  # tests/ holds shared helpers
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    import crash_helpers

    return crash_helpers


# --------------------------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------------------------


class Bar:
    """A rich progress bar on stderr for one part (``update(done, total)`` is the stress callback)."""

    def __init__(self, label: str) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 console=Console(stderr=True), transient=True)
        self.task = self.progress.add_task(label, total=None)

    def update(self, done: int, total: int | None) -> None:
        self.progress.update(self.task, completed=done, total=total)

    def __enter__(self) -> "Bar":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)


# --------------------------------------------------------------------------------------------
# Parts
# --------------------------------------------------------------------------------------------


def _stress_summary(report) -> dict[str, Any]:
    data = report.to_dict()
    keep = ("ok", "workload", "isolation", "processes", "ops", "elapsed_s", "operations", "commits", "attempts",
            "commits_per_s", "conflicts_by_class", "errors_by_class", "final_version", "anomalies")
    return {k: data.get(k) for k in keep}


def _anomalies_text(run: dict[str, Any]) -> str:
    found = Counter(a.get("checker", "?") for a in run["anomalies"])
    detail = ", ".join(f"{checker}: {n}" for checker, n in sorted(found.items()))
    return f"{len(run['anomalies'])} anomalies" + (f" ({detail})" if detail else "")


def _stress(label: str, uri: str, history_dir: Path, **kwargs: Any) -> dict[str, Any]:
    """One stress run; a failed run's per-writer histories are kept under results/soak-failures/."""
    from deltatx.harness import run_stress

    with Bar(label) as bar:
        report = run_stress(uri, progress=bar.update, history_dir=str(history_dir), **kwargs)
    summary = _stress_summary(report)
    if not report.ok:
        kept = RESULTS_DIR / "soak-failures" / label.replace(" ", "-")
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(history_dir, kept)  # the writers' records: what each op read, wrote and got
        summary["kept_in"] = str(kept.relative_to(REPO))
    return summary


def part_r1(sizes: dict[str, int], scratch: Path) -> dict[str, Any]:
    from deltatx.harness.stress import ROW_LEVEL_PROPERTIES

    runs = []
    for row_level in (False, True):
        for isolation in ("Serializable", "WriteSerializable"):
            label = f"R1 {isolation}{' row-level' if row_level else ''}"
            run = _stress(label, str(scratch / label.replace(" ", "-")), scratch / f"h-{label.replace(' ', '-')}",
                          processes=sizes["r1_processes"], ops=sizes["r1_ops"], workload="mixed",
                          isolation=isolation, seed=1, properties=ROW_LEVEL_PROPERTIES if row_level else None)
            run["table"] = "deletion vectors + row tracking" if row_level else "plain"
            runs.append(run)
    return {"ok": all(r["ok"] for r in runs), "runs": runs,
            "summary": "; ".join(f"{r['isolation']} ({r['table']}): {r['commits']} commits, {_anomalies_text(r)}"
                                 for r in runs)}


def part_r2(sizes: dict[str, int], scratch: Path) -> dict[str, Any]:
    crash = _crash_helpers()
    multiprocessing.set_forkserver_preload(["deltatx", "deltatx.tables.table", "pyarrow.parquet", "crash_helpers"])
    rng = random.Random(2)
    plans = []
    for seed in range(sizes["r2_plans"]):
        plan = crash.plan_workload(seed, n_ops=16)
        plans.append((plan, crash.census(scratch, plan)))
    failures: list[str] = []
    by_phase: Counter[str] = Counter()
    in_flight_committed = orphans = 0
    with Bar("R2 crash points") as bar:
        for point in range(sizes["r2_points"]):
            plan, counts = rng.choice(plans)
            phase = rng.choice(crash.CRASH_PHASES)
            nth = rng.randint(1, counts[phase])
            try:
                outcome = crash.run_crash_point(scratch, plan, phase, nth, start_method="forkserver")
            except Exception as exc:  # noqa: BLE001 - every failure is recorded, the soak goes on
                failures.append(f"{phase}#{nth}: {type(exc).__name__}: {exc}")
            else:
                by_phase[phase] += 1
                in_flight_committed += outcome.in_flight_committed
                orphans += outcome.orphans_vacuumed
                if not outcome.crashed:
                    failures.append(f"{phase}#{nth}: the child did not crash")
            bar.update(point + 1, sizes["r2_points"])
    return {"ok": not failures, "points": sizes["r2_points"], "crashes_by_phase": dict(by_phase),
            "in_flight_commits_found_durable": in_flight_committed, "orphan_files_vacuumed": orphans,
            "failures": failures[:50],
            "summary": f"{sum(by_phase.values())}/{sizes['r2_points']} points verified, {len(failures)} failures"}


def part_r4(sizes: dict[str, int], scratch: Path) -> dict[str, Any]:
    from .s3 import moto_bucket

    with moto_bucket("deltatx-soak") as (bucket, options):
        run = _stress("R4 S3 appends", f"{bucket}/r4", scratch / "h-r4", processes=sizes["r4_processes"],
                      ops=sizes["r4_ops"],
                      workload="append", isolation="WriteSerializable", storage_options=options, seed=4)
    expected = sizes["r4_processes"] * sizes["r4_ops"]
    ok = run["ok"] and run["commits"] == expected
    return {"ok": ok, "run": run, "expected_commits": expected,
            "summary": f"{run['commits']}/{expected} commits, {_anomalies_text(run)}"}


def part_r5(sizes: dict[str, int], scratch: Path) -> dict[str, Any]:
    run = _stress("R5 bank", str(scratch / "r5-bank"), scratch / "h-r5", processes=sizes["r5_processes"],
                  ops=sizes["r5_ops"],
                  workload="bank", isolation="Serializable", seed=5)
    return {"ok": run["ok"], "run": run,
            "summary": f"{run['commits']} transfers committed, {_anomalies_text(run)}"}


PART_FUNCTIONS: dict[str, Callable[[dict[str, int], Path], dict[str, Any]]] = {
    "R1": part_r1, "R2": part_r2, "R4": part_r4, "R5": part_r5,
}


# --------------------------------------------------------------------------------------------
# Runner
# --------------------------------------------------------------------------------------------


def run_parts(parts: list[str], quick: bool) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    results: dict[str, Any] = {}
    scratch = Path(tempfile.mkdtemp(prefix="deltatx-soak-"))
    try:
        for part in parts:
            started = time.perf_counter()
            (scratch / part).mkdir(parents=True)
            try:
                result = PART_FUNCTIONS[part](sizes, scratch / part)
            except Exception as exc:  # noqa: BLE001 - a broken part is a failed part
                result = {"ok": False, "summary": f"{type(exc).__name__}: {exc}",
                          "traceback": traceback.format_exc()}
            result["elapsed_s"] = round(time.perf_counter() - started, 1)
            results[part] = result
            print(f"{part}: {'PASS' if result['ok'] else 'FAIL'} in {result['elapsed_s']} s — {result['summary']}",
                  flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"quick": quick, "sizes": sizes, "ok": all(r["ok"] for r in results.values()), "parts": results,
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def print_summary(doc: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"deltatx soak ({'quick' if doc['quick'] else 'full'})", title_justify="left")
    for column in ("part", "result", "seconds", "summary"):
        table.add_column(column, overflow="fold")
    for part, result in doc["parts"].items():
        table.add_row(part, "PASS" if result["ok"] else "FAIL", str(result["elapsed_s"]), result["summary"])
    console = Console(width=None if sys.stdout.isatty() else 120)
    console.print(table)
    for part, result in doc["parts"].items():
        runs = result.get("runs") or ([result["run"]] if "run" in result else [])
        messages = [a["message"] for r in runs for a in r["anomalies"]] + list(result.get("failures", []))
        for message in messages[:5]:
            console.print(f"{part}: {message}", markup=False)
        if len(messages) > 5:
            console.print(f"{part}: ... {len(messages) - 5} more in the JSON file", markup=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: proves every part works")
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts (default {','.join(PARTS)})")
    parser.add_argument("--output", type=Path, default=None,
                        help="where the JSON summary goes (default benchmarks/results/soak.json, soak-quick.json)")
    args = parser.parse_args(argv)
    parts = [p.strip().upper() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PART_FUNCTIONS]
    if unknown:
        parser.error(f"unknown part(s) {unknown}; choose from {', '.join(PARTS)}")
    doc = run_parts(parts, args.quick)
    if args.output is None:
        args.output = RESULTS_DIR / ("soak-quick.json" if args.quick else "soak.json")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2, default=str) + b"\n")
    print_summary(doc)
    print(f"written {args.output}")
    return 0 if doc["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
