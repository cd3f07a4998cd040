"""P6 — write 10M rows (id i64, part i32 × 10 values, value f64, name str) partitioned by ``part``.

deltatx: ``create_table`` + ``append`` (one commit of data); deltalake: ``write_deltalake`` with
``partition_by=["part"]`` into a new table. Same in-memory Arrow table for both, generated once
outside the timing; each repetition writes a fresh table, alternating engines. Target: deltatx ≤
1.0× deltalake (deltalake measured 1.44 s here).
"""

from __future__ import annotations

import shutil

import deltatx
from deltalake import write_deltalake

from .common import BenchResult, dir_size_bytes, median, scratch_dir, time_call
from .workloads import PARTITIONS, WIDE_SCHEMA, deltalake_facts, wide_rows

ID = "P6"
TITLE = "bulk write, 10M rows, 10 partitions"
TARGET_RATIO = 1.0


def write_deltatx(uri: str, data) -> deltatx.Table:
    table = deltatx.create_table(uri, WIDE_SCHEMA, partition_by=["part"])
    table.append(data)
    return table


def write_deltalake_table(uri: str, data) -> None:
    write_deltalake(uri, data, partition_by=["part"])


def run(quick: bool = False) -> BenchResult:
    rows = 100_000 if quick else 10_000_000
    reps = 3
    data = wide_rows(rows)
    dtx_times, dl_times = [], []
    facts: dict[str, dict] = {}
    with scratch_dir("p6") as root:
        for rep in range(reps):
            dtx_uri, dl_uri = str(root / f"deltatx-{rep}"), str(root / f"deltalake-{rep}")
            t, table = time_call(lambda: write_deltatx(dtx_uri, data))
            dtx_times.append(t)
            t, _ = time_call(lambda: write_deltalake_table(dl_uri, data))
            dl_times.append(t)
            if rep == reps - 1:
                facts["deltatx"] = {**deltalake_facts(dtx_uri), "bytes": dir_size_bytes(root / f"deltatx-{rep}"),
                                    "partitions": len({tuple(sorted(pv)) for pv in
                                                       table.files().column("partitionValues").to_pylist()})}
                facts["deltalake"] = {**deltalake_facts(dl_uri), "bytes": dir_size_bytes(root / f"deltalake-{rep}")}
                facts["deltatx"]["deltatx_version"] = deltatx.Table(dtx_uri).version
            shutil.rmtree(dtx_uri, ignore_errors=True)
            shutil.rmtree(dl_uri, ignore_errors=True)

    result = BenchResult(
        id=ID, title=TITLE, metric="median write time", unit="s",
        deltatx=median(dtx_times), deltalake=median(dl_times),
        target=f"≤ {TARGET_RATIO:g}× deltalake", quick=quick,
        parameters={"rows": rows, "partitions": PARTITIONS, "schema": str(WIDE_SCHEMA).replace("\n", ", "),
                    "repetitions": reps, "deltatx": "create_table + append", "deltalake": "write_deltalake"},
        details={"deltatx_samples_s": dtx_times, "deltalake_samples_s": dl_times, "tables": facts},
        deltalake_baseline_notes="1.44 s measured earlier",
    )
    result.check("deltatx rows (read by deltalake)", rows, facts["deltatx"]["rows"])
    result.check("deltatx version", 1, facts["deltatx"]["deltatx_version"])
    result.check("deltatx partitions", PARTITIONS, facts["deltatx"]["partitions"])
    result.check("deltalake rows", rows, facts["deltalake"]["rows"])
    r = result.ratio
    result.criterion("write time vs deltalake", r is not None and r <= TARGET_RATIO,
                     f"{result.deltatx:.2f} s vs {result.deltalake:.2f} s = {r:.2f}× (target ≤ {TARGET_RATIO:g}×)")
    return result
