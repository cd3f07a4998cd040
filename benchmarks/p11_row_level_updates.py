"""P11 — 8 processes × 50 single-row UPDATEs of distinct ids in ONE 1M-row file.

deltatx's table has deletion vectors and row tracking (WriteSerializable, the default): every
UPDATE marks its row in the file's DV and writes the new row to a new file, so all eight writers
change the same data file at once. Row-level concurrency resolves that: a loser checks that the
winner deleted none of its rows and rebases onto the union DV, so no conflict reaches the caller.
deltalake (file-level conflicts, copy-on-write) runs the same workload; each conflict it raises
is counted and the UPDATE retried on a refreshed table (at most ``MAX_OP_ATTEMPTS`` times), like
P5. Worker ``p`` updates ids ``p·1000 + i``; the checks read every updated row back: its value
went up by exactly one, and (deltatx) its row id did not change.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, QueryBuilder, write_deltalake

import deltatx
from deltatx.errors import ConcurrentModificationException

from .common import BenchResult, scratch_dir
from .procs import MAX_OP_ATTEMPTS, OpCounter, combine, deltalake_conflict_kind, run_workers

ID = "P11"
TITLE = "8 processes × 50 single-row UPDATEs in one 1M-row file (row-level concurrency)"
SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.int64())])
STRIDE = 1000


def _ids(index: int, n: int) -> list[int]:
    return [index * STRIDE + i for i in range(n)]


def _rows(n: int) -> pa.Table:
    ids = np.arange(n, dtype=np.int64)
    return pa.table({"id": ids, "value": np.zeros(n, dtype=np.int64)}, schema=SCHEMA)


def deltatx_worker(index: int, barrier, uri: str, n: int) -> dict[str, Any]:
    table = deltatx.Table(uri)
    counter = OpCounter(index)
    counter.conflicts_resolved = 0  # type: ignore[attr-defined]
    barrier.wait()
    counter.begin()
    resolved = 0
    for k in _ids(index, n):
        for _ in range(MAX_OP_ATTEMPTS):
            try:
                resolved += table.update(where=f"id = {k}", set={"value": "value + 1"}).conflicts_resolved
                counter.commits += 1
                break
            except ConcurrentModificationException as exc:  # surfaced to the caller: counted
                counter.conflicts[type(exc).__name__] += 1
                table.refresh()
            except Exception as exc:  # noqa: BLE001 - reported as a failure
                counter.failure(exc)
                break
    counter.finish()
    report = counter.report()
    report["conflicts_resolved"] = resolved
    return report


def deltalake_worker(index: int, barrier, uri: str, n: int) -> dict[str, Any]:
    from deltalake.exceptions import CommitFailedError, DeltaError

    dt = DeltaTable(uri)
    counter = OpCounter(index)
    barrier.wait()
    counter.begin()
    for k in _ids(index, n):
        for attempt in range(MAX_OP_ATTEMPTS):
            try:
                dt.update(predicate=f"id = {k}", updates={"value": "value + 1"})
                counter.commits += 1
                break
            except (CommitFailedError, DeltaError) as exc:
                counter.conflicts[deltalake_conflict_kind(exc)] += 1
                dt.update_incremental()
                if attempt == MAX_OP_ATTEMPTS - 1:
                    counter.failure(exc)
            except Exception as exc:  # noqa: BLE001
                counter.failure(exc)
                break
    counter.finish()
    return counter.report()


def _updated(uri: str, ids: list[int], engine: str) -> dict[str, Any]:
    """How the updated rows read back: values, and (deltatx) row ids."""
    wanted = pa.array(ids, pa.int64())
    if engine == "deltatx":
        rows = deltatx.Table(uri).to_arrow(columns=["id", "value", "_metadata.row_id"])
        total = rows.num_rows
    else:
        rows = pa.table(QueryBuilder().register("t", DeltaTable(uri)).execute("SELECT id, value FROM t").read_all())
        total = rows.num_rows
    mine = rows.filter(pc.is_in(rows["id"], value_set=wanted))
    out = {"rows": total, "updated_rows": mine.num_rows,
           "updated_once": int(pc.sum(pc.equal(mine["value"], 1)).as_py() or 0)}
    if engine == "deltatx":
        out["row_id_changed"] = int(pc.sum(pc.not_equal(mine["id"], mine["_metadata.row_id"])).as_py() or 0)
        out["row_ids_unique"] = len(pc.unique(rows["_metadata.row_id"])) == total
    return out


def run(quick: bool = False) -> BenchResult:
    processes, n, rows = (4, 5, 20_000) if quick else (8, 50, 1_000_000)
    ids = [k for p in range(processes) for k in _ids(p, n)]
    with scratch_dir("p11") as root:
        dtx_uri, dl_uri = str(root / "deltatx"), str(root / "deltalake")
        table = deltatx.create_table(dtx_uri, SCHEMA, properties={
            "delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true"})
        table.append(_rows(rows))
        dtx_files = deltatx.Table(dtx_uri).files().num_rows
        reports = run_workers(deltatx_worker, processes, (dtx_uri, n))
        dtx = combine(reports)
        dtx["conflicts_resolved"] = sum(r["conflicts_resolved"] for r in reports)  # rebased, not surfaced
        dtx_check = _updated(dtx_uri, ids, "deltatx")
        write_deltalake(dl_uri, _rows(rows))
        dl_files = len(DeltaTable(dl_uri).file_uris())
        dl = combine(run_workers(deltalake_worker, processes, (dl_uri, n)))
        dl_check = _updated(dl_uri, ids, "deltalake")
    result = BenchResult(
        id=ID, title=TITLE, metric="commits per second", unit="commits/s", higher_is_better=True,
        deltatx=dtx["commits_per_s"], deltalake=dl["commits_per_s"],
        target="0 conflicts surfaced, all updates present, ≥ 100 commits/s", quick=quick,
        parameters={"processes": processes, "updates_per_process": n, "rows": rows,
                    "deltatx": "DVs + row tracking, WriteSerializable",
                    "deltalake": f"copy-on-write UPDATE, conflicts retried (≤ {MAX_OP_ATTEMPTS} attempts)"},
        details={"deltatx": dtx, "deltalake": dl, "deltatx rows": dtx_check, "deltalake rows": dl_check,
                 "conflicts surfaced": {"deltatx": dtx["conflicts_total"], "deltalake": dl["conflicts_total"]}},
    )
    result.check("deltatx: one data file to start", 1, dtx_files)
    result.check("deltalake: one data file to start", 1, dl_files)
    result.check("deltatx: failures", 0, dtx["failures"])
    result.check("deltatx: commits", processes * n, dtx["commits"])
    result.check("deltatx: rows", rows, dtx_check["rows"])
    result.check("deltatx: every updated row read back once, value + 1", len(ids), dtx_check["updated_once"])
    result.check("deltatx: row ids of updated rows unchanged", 0, dtx_check["row_id_changed"])
    result.check("deltatx: row ids unique", True, dtx_check["row_ids_unique"])
    result.check("deltalake: rows", rows, dl_check["rows"])
    result.check("deltalake: updates present = its commits", dl["commits"], dl_check["updated_once"])
    result.criterion("0 conflicts surfaced", dtx["conflicts_total"] == 0,
                     f"{dtx['conflicts_total']} (deltalake surfaced {dl['conflicts_total']})")
    result.criterion(f"all {len(ids)} updates present", dtx_check["updated_once"] == len(ids),
                     f"{dtx_check['updated_once']}")
    rate = dtx["commits_per_s"] or 0.0
    result.criterion("≥ 100 commits/s", rate >= 100, f"{rate:.1f} commits/s")
    return result
