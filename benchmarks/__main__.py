"""``python -m benchmarks [IDS...] [--quick] [--results-dir DIR] [--in-process]``.

Runs each selected benchmark in its own Python process by default (a crash or a leak in one —
deltalake's Rust runtime included — cannot spoil the next, and memory starts clean), then
prints one summary table built from the JSON files the runs wrote. Exit status: 0 when every
benchmark ran and its correctness checks held (targets missed are reported, not fatal), 1
otherwise.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from . import BENCHMARKS, canonical_id, load
from .common import RESULTS_DIR, print_result, print_summary, read_result, result_path, write_result

CHILD_TIMEOUT_S = 1200


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*", help=f"benchmarks to run (default: all of {' '.join(BENCHMARKS)})")
    parser.add_argument("--quick", action="store_true", help="small sizes: proves each benchmark works")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR, help="where <id>.json files go")
    parser.add_argument("--in-process", action="store_true", help="run benchmarks in this process")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # child mode
    args = parser.parse_args(argv)
    unknown = [i for i in args.ids if canonical_id(i) is None]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; choose from {' '.join(BENCHMARKS)}")
    args.ids = [canonical_id(i) for i in args.ids] or list(BENCHMARKS)
    return args


def run_in_process(bench_id: str, quick: bool, results_dir: Path) -> dict:
    module = load(bench_id)
    start = time.perf_counter()
    result = module.run(quick=quick)
    result.elapsed_s = time.perf_counter() - start
    write_result(result, results_dir)
    print_result(result)
    return read_result(bench_id, results_dir)


def run_in_child(bench_id: str, quick: bool, results_dir: Path) -> dict:
    path = result_path(bench_id, results_dir)
    path.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "benchmarks", bench_id, "--one", "--results-dir", str(results_dir)]
    if quick:
        cmd.append("--quick")
    env = dict(os.environ)
    root = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root / "src"), str(root), env.get("PYTHONPATH")) if p)
    try:
        proc = subprocess.run(cmd, env=env, cwd=root, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"id": bench_id, "error": f"timed out after {CHILD_TIMEOUT_S} s"}
    if not path.exists():
        return {"id": bench_id, "error": f"no result (exit status {proc.returncode})"}
    row = read_result(bench_id, results_dir)
    if proc.returncode != 0:
        row["error"] = f"exit status {proc.returncode} after writing results"
    return row


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.one or args.in_process:
        rows = []
        for bench_id in args.ids:
            try:
                rows.append(run_in_process(bench_id, args.quick, args.results_dir))
            except Exception as exc:  # report and continue with the next benchmark
                import traceback

                traceback.print_exc()
                rows.append({"id": bench_id, "error": f"{type(exc).__name__}: {exc}"})
        if args.one:
            return 0 if all("error" not in r for r in rows) else 1
    else:
        rows = [run_in_child(bench_id, args.quick, args.results_dir) for bench_id in args.ids]
    print_summary(rows)
    ok = all("error" not in r and r.get("checks_ok") for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
