"""P3 — open a table of 100k adds in 10k commits (10 adds each) with a checkpoint at the last version.

The log is written directly (partitioned by ``part``, stats on every add), then checkpointed at
the last version by deltatx's checkpoint writer; both engines open it alternately, reading only
``_last_checkpoint`` and the checkpoint Parquet. As a cross-check the same log is also
checkpointed by deltalake (``DeltaTable.create_checkpoint``) in a copy, and both engines open
that one too (reported in details). Target: deltatx ≤ 0.10 s (deltalake measured 0.22 s here).
"""

from __future__ import annotations

import shutil

from deltalake import DeltaTable

from deltatx.txnlog.checkpoint import write_checkpoint
from deltatx.txnlog.snapshot import load_snapshot
from deltatx.txnlog.store import open_store

from .common import BenchResult, median, scratch_dir, time_call
from .logbuilder import build_log
from .workloads import open_both

ID = "P3"
TITLE = "open 100k adds / 10k commits with a checkpoint"
TARGET_S = 0.10


def run(quick: bool = False) -> BenchResult:
    commits, per_commit = (100, 10) if quick else (10_000, 10)
    total_adds = commits * per_commit
    reps = 5
    with scratch_dir("p3") as root:
        uri = str(root / "table")
        build_s, last = time_call(lambda: build_log(uri, commits, per_commit, partitioned=True))
        rs_uri = str(root / "table-rs-checkpoint")
        shutil.copytree(uri, rs_uri)

        store = open_store(uri, {"fsync": False})
        checkpoint_s, _ = time_call(lambda: write_checkpoint(store, load_snapshot(store)))
        DeltaTable(rs_uri).create_checkpoint()

        dtx_times, dl_times, table, dt = open_both(uri, reps)
        rs_dtx_times, rs_dl_times, rs_table, rs_dt = open_both(rs_uri, reps)

        result = BenchResult(
            id=ID, title=TITLE, metric="median open time", unit="s",
            deltatx=median(dtx_times), deltalake=median(dl_times),
            target=f"≤ {TARGET_S:g} s", quick=quick,
            parameters={"commits": commits + 1, "adds_per_commit": per_commit, "adds": total_adds,
                        "partitioned_by": ["part"], "checkpoint_version": last, "checkpoint_writer": "deltatx",
                        "repetitions": reps},
            details={
                "deltatx_samples_s": dtx_times, "deltalake_samples_s": dl_times,
                "delta-rs checkpoint: deltatx median s": median(rs_dtx_times),
                "delta-rs checkpoint: deltalake median s": median(rs_dl_times),
                "build_log_s": build_s, "deltatx_replay_and_checkpoint_s": checkpoint_s,
            },
            deltalake_baseline_notes="0.217 s measured earlier",
        )
        for label, t, d in (("deltatx checkpoint", table, dt), ("delta-rs checkpoint", rs_table, rs_dt)):
            result.check(f"{label}: deltatx version", last, t.version)
            result.check(f"{label}: deltatx active files", total_adds, t.files().num_rows)
            result.check(f"{label}: deltalake version", last, d.version())
            result.check(f"{label}: deltalake active files", total_adds, len(d.file_uris()))
        result.check("checkpoint file present", True, (root / "table" / "_delta_log" / f"{last:020d}.checkpoint.parquet").exists())
    result.criterion("open time", result.deltatx <= TARGET_S, f"{result.deltatx:.3f} s (target ≤ {TARGET_S:g} s)")
    return result
