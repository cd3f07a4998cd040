"""deltatx benchmarks, each run beside deltalake (delta-rs) on the same workload in the same run.

``python -m benchmarks`` runs all of them (each in its own process); ``python -m benchmarks P1 P6``
runs a selection; ``--quick`` uses small sizes (what the smoke test runs). Results are printed
and written to ``benchmarks/results/<id>.json``.

Each benchmark module exposes ``ID``, ``TITLE`` and ``run(quick: bool = False) -> BenchResult``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: benchmark id -> module, in the order they run
BENCHMARKS: dict[str, str] = {
    "P1": "benchmarks.p1_sequential_appends",
    "P2": "benchmarks.p2_open_long_log",
    "P3": "benchmarks.p3_open_checkpoint",
    "P4": "benchmarks.p4_concurrent_appends",
    "P4b": "benchmarks.p4b_fresh_handle_appends",
    "P5": "benchmarks.p5_delete_vs_append",
    "P6": "benchmarks.p6_bulk_write",
    "P7": "benchmarks.p7_merge_upsert",
    "P8": "benchmarks.p8_spark_io",
    "P9": "benchmarks.p9_conflict_check",
    "P10": "benchmarks.p10_dv_delete",
    "P11": "benchmarks.p11_row_level_updates",
    "P12": "benchmarks.p12_change_feed",
    "P13": "benchmarks.p13_constrained_append",
    "P14": "benchmarks.p14_catalog_appends",
    "P15": "benchmarks.p15_catalog_transfers",
}


def canonical_id(bench_id: str) -> str | None:
    """The registered spelling of a benchmark id given in any case ("p4b" -> "P4b"); None if unknown."""
    return next((key for key in BENCHMARKS if key.upper() == bench_id.upper()), None)


def load(bench_id: str) -> ModuleType:
    """The module of one benchmark by id (case-insensitive)."""
    key = canonical_id(bench_id)
    if key is None:
        raise KeyError(f"unknown benchmark {bench_id!r}; choose from {', '.join(BENCHMARKS)}")
    return importlib.import_module(BENCHMARKS[key])
