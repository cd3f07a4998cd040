"""Shared machinery of the benchmarks: timing, medians, pass/fail criteria, JSON and the report table.

Owns how a benchmark *reports*, not what it measures. Every benchmark module builds one
:class:`BenchResult` (deltatx and deltalake numbers from the same run, the target, the
correctness checks) and hands it to :func:`write_result` / :func:`print_result`. Timings never
decide a test: the smoke test only reads :attr:`BenchResult.checks` (final versions, row counts).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

RESULTS_DIR = Path(__file__).resolve().parent / "results"


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


def now() -> float:
    """A monotonic clock in seconds, comparable across processes on one machine (CLOCK_MONOTONIC)."""
    return time.perf_counter()


def settle_disk() -> None:
    """Write back every dirty page before a timed step (untimed).

    Why: deltalake does not fsync, deltatx does (every commit, by default). A peer's unsynced
    writes left in the page cache are written back by the kernel inside the next fsync on the
    same filesystem (ext4 commits its journal with the data it orders), so without this a
    deltatx commit timed right after a deltalake rewrite would pay for flushing deltalake's
    file. Each engine's timed step starts from a clean page cache instead."""
    os.sync()


def time_call(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Run ``fn`` once, on a settled disk (:func:`settle_disk`); return (elapsed seconds, its result)."""
    settle_disk()
    start = now()
    value = fn()
    return now() - start, value


def median(samples: list[float]) -> float:
    if not samples:
        raise ValueError("median of no samples")
    return float(statistics.median(samples))


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None when either side is missing or the denominator is 0."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


# --------------------------------------------------------------------------------------------
# Temporary table locations
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def scratch_dir(label: str) -> Iterator[Path]:
    """A fresh temporary directory (TMPDIR) for a benchmark's tables, removed afterwards (even on error)."""
    path = Path(tempfile.mkdtemp(prefix=f"deltatx-bench-{label}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def dir_size_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass
class Criterion:
    """One condition of a benchmark's target (speed or correctness), with what was measured."""

    name: str
    ok: bool
    detail: str = ""


@dataclass
class BenchResult:
    """Everything one benchmark run reports; serialised as-is to ``results/<id>.json``.

    ``deltatx`` and ``deltalake`` are the headline medians in ``unit``; ``higher_is_better`` says
    how to read them (throughput vs time). ``ratio`` is always deltatx / deltalake. ``checks``
    are correctness facts (final version, row counts, failures) that must hold whatever the
    timings; ``criteria`` are the target's conditions, whose conjunction is ``passed``.
    """

    id: str
    title: str
    metric: str
    unit: str
    deltatx: float | None
    deltalake: float | None
    target: str
    quick: bool
    higher_is_better: bool = False
    criteria: list[Criterion] = field(default_factory=list)
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    parameters: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    deltalake_baseline_notes: str = ""
    elapsed_s: float = 0.0

    @property
    def ratio(self) -> float | None:
        return ratio(self.deltatx, self.deltalake)

    @property
    def passed(self) -> bool:
        return bool(self.criteria) and all(c.ok for c in self.criteria) and self.checks_ok

    @property
    def checks_ok(self) -> bool:
        return all(c.get("ok", False) for c in self.checks.values())

    def check(self, name: str, expected: Any, actual: Any) -> bool:
        """Record a correctness fact: ``expected == actual``."""
        ok = expected == actual
        self.checks[name] = {"expected": _compact(expected), "actual": _compact(actual), "ok": ok}
        return ok

    def criterion(self, name: str, ok: bool, detail: str = "") -> None:
        self.criteria.append(Criterion(name, bool(ok), detail))

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ratio"] = self.ratio
        out["passed"] = self.passed
        out["checks_ok"] = self.checks_ok
        out["environment"] = environment()
        return out


def _compact(value: Any) -> Any:
    """Long lists are recorded as count, ends and a digest (the comparison used the full list)."""
    if isinstance(value, list) and len(value) > 20:
        digest = hashlib.sha1(orjson.dumps(value)).hexdigest()[:16]
        return {"count": len(value), "first": value[0], "last": value[-1], "sha1": digest}
    return value


def environment() -> dict[str, Any]:
    """Versions and machine facts, so that a result file says where it came from."""
    import pyarrow

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "loadavg_1_5_15min": [round(x, 2) for x in os.getloadavg()],
        "pyarrow": pyarrow.__version__,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    try:
        import deltalake

        env["deltalake"] = deltalake.__version__
    except Exception:  # pragma: no cover - deltalake is a test dependency
        env["deltalake"] = None
    try:
        import deltatx

        env["deltatx"] = deltatx.__version__
    except Exception:  # pragma: no cover
        env["deltatx"] = None
    return env


def result_path(bench_id: str, results_dir: Path | None = None) -> Path:
    return Path(results_dir or RESULTS_DIR) / f"{bench_id}.json"


def write_result(result: BenchResult, results_dir: Path | None = None) -> Path:
    """Write ``<results_dir>/<id>.json`` atomically (temp file + rename)."""
    path = result_path(result.id, results_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_bytes(orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    os.replace(tmp, path)
    return path


def read_result(bench_id: str, results_dir: Path | None = None) -> dict[str, Any]:
    return orjson.loads(result_path(bench_id, results_dir).read_bytes())


# --------------------------------------------------------------------------------------------
# Printing (rich)
# --------------------------------------------------------------------------------------------


def fmt_value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if abs(value) >= 100:
        return f"{value:,.0f} {unit}"
    if abs(value) >= 10:
        return f"{value:.1f} {unit}"
    return f"{value:.3g} {unit}"


def fmt_ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def _console():
    from rich.console import Console

    return Console(file=sys.stdout, width=max(120, shutil.get_terminal_size((140, 20)).columns))


def print_result(result: BenchResult) -> None:
    """One benchmark's detail: headline numbers, criteria, checks and extra measurements."""
    from rich.table import Table as RichTable

    console = _console()
    status = "[green]PASS[/]" if result.passed else "[red]FAIL[/]"
    mode = " (quick)" if result.quick else ""
    console.rule(f"[bold]{result.id}[/] {result.title}{mode} — {status}")
    console.print(
        f"{result.metric}: deltatx {fmt_value(result.deltatx, result.unit)}, "
        f"deltalake {fmt_value(result.deltalake, result.unit)}, ratio deltatx/deltalake "
        f"{fmt_ratio(result.ratio)}; target {result.target}"
    )
    table = RichTable(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("kind")
    table.add_column("name")
    table.add_column("ok")
    table.add_column("detail", overflow="fold")
    for c in result.criteria:
        table.add_row("target", c.name, "[green]yes[/]" if c.ok else "[red]no[/]", c.detail)
    for name, c in result.checks.items():
        table.add_row("check", name, "[green]yes[/]" if c["ok"] else "[red]no[/]",
                      f"expected {_short(c['expected'])}, got {_short(c['actual'])}")
    console.print(table)
    if result.details:
        for key, value in result.details.items():
            console.print(f"  {key}: {_short(value)}")
    console.print(f"  elapsed {result.elapsed_s:.1f} s")


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        if len(value) > 12:
            return f"({len(value)} entries; see the JSON file)"
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list) and len(value) > 8:
        return f"[{len(value)} values: {value[0]!r}, {value[1]!r}, … {value[-1]!r}]"
    return repr(value)


def print_summary(rows: list[dict[str, Any]]) -> None:
    """The final table: one row per benchmark, from the JSON written by each run."""
    from rich.table import Table as RichTable

    console = _console()
    table = RichTable(title="deltatx vs deltalake (delta-rs), same machine, same run", header_style="bold")
    for col in ("id", "benchmark", "metric", "deltatx", "deltalake", "ratio", "target", "checks", "result"):
        table.add_column(col, overflow="fold")
    for r in rows:
        if "error" in r:
            table.add_row(r["id"], r.get("title", ""), "", "", "", "", "", "", f"[red]ERROR[/] {r['error']}")
            continue
        table.add_row(
            r["id"],
            r["title"] + (" (quick)" if r.get("quick") else ""),
            r["metric"],
            fmt_value(r["deltatx"], r["unit"]),
            fmt_value(r["deltalake"], r["unit"]),
            fmt_ratio(r.get("ratio")),
            r["target"],
            "[green]ok[/]" if r.get("checks_ok") else "[red]wrong[/]",
            "[green]PASS[/]" if r.get("passed") else "[red]FAIL[/]",
        )
    console.print(table)
