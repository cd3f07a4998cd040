"""P10 — DELETE one row by id from a 10M-row, 10-file table (merge-on-read vs copy-on-write).

deltatx's table has ``delta.enableDeletionVectors=true``: the DELETE prunes to the one file by
min/max stats, reads the row group holding the id (footer statistics), and commits
``remove(path, old DV)`` + ``add(path, new DV)`` — no data file is written. deltalake (no DV
writes) rewrites the 1M-row file holding the id. Both tables hold the same rows (ids sorted,
1M per file, written as 10 appends); each repetition deletes a different id of a different file
from both, alternating engines. The checks: both tables lose exactly one row per DELETE, the ids
are gone, and deltalake (its DataFusion reader, which applies DVs) reads deltatx's table with the
same rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, QueryBuilder, write_deltalake

import deltatx
from deltatx.txnlog.store import open_store

from .common import BenchResult, median, scratch_dir, time_call

ID = "P10"
TITLE = "DELETE one row by id, merge-on-read (10M rows, 10 files)"
SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.int64())])


def _rows(first: int, n: int) -> pa.Table:
    ids = np.arange(first, first + n, dtype=np.int64)
    return pa.table({"id": ids, "value": ids * 3}, schema=SCHEMA)


def _victim(rep: int, files: int, rows_per_file: int) -> int:
    """A different file each time, a different id inside it."""
    f = rep % files
    return f * rows_per_file + (rep * 7919 + 13) % rows_per_file


def _floors(table: "deltatx.Table", victims: list[int], scratch: str) -> dict[str, float]:
    """Medians (ms) of the two steps no DELETE can skip, measured on the same table and disk:
    decoding the one row group that holds the id (pyarrow, id column only), and one fsync'd
    put-if-absent of a commit as large as the DELETE's (its remove + add + commitInfo), into a
    scratch log beside the table."""
    reads: list[float] = []
    paths = [f"{table.uri}/{p}" for p in table.files()["path"].to_pylist()]
    for victim in victims:
        for path in paths:
            meta = pq.ParquetFile(path).metadata
            for g in range(meta.num_row_groups):
                stats = meta.row_group(g).column(0).statistics
                if stats.min <= victim <= stats.max:
                    elapsed, _ = time_call(lambda: pq.ParquetFile(path).read_row_groups([g], columns=["id"]))
                    reads.append(elapsed)
    payload = table.store.read_commit(table.version)
    store = open_store(scratch)
    puts = [time_call(lambda: store.prepare_commit(payload).put(v))[0] for v in range(len(victims))]
    return {"read_one_row_group_ms": median(reads) * 1000, "fsynced_commit_ms": median(puts) * 1000}


def _deltalake_count(uri: str, where: str | None = None) -> int:
    sql = "SELECT count(*) AS n FROM t" + (f" WHERE {where}" if where else "")
    return pa.table(QueryBuilder().register("t", DeltaTable(uri)).execute(sql).read_all()).column("n")[0].as_py()


def run(quick: bool = False) -> BenchResult:
    files, rows_per_file, reps, warmup = (10, 20_000, 5, 2) if quick else (10, 1_000_000, 15, 3)
    total = files * rows_per_file
    with scratch_dir("p10") as root:
        dtx_uri, dl_uri = str(root / "deltatx"), str(root / "deltalake")
        table = deltatx.create_table(dtx_uri, SCHEMA, properties={"delta.enableDeletionVectors": "true"})
        for f in range(files):
            rows = _rows(f * rows_per_file, rows_per_file)
            table.append(rows)
            write_deltalake(dl_uri, rows, mode="append")
        dt = DeltaTable(dl_uri)
        table = deltatx.Table(dtx_uri)
        dtx_times: list[float] = []
        dl_times: list[float] = []
        deleted: list[int] = []
        for rep in range(warmup + reps):
            victim = _victim(rep, files, rows_per_file)
            elapsed_dtx, result = time_call(lambda: table.delete(where=f"id = {victim}"))
            elapsed_dl, _ = time_call(lambda: dt.delete(f"id = {victim}"))
            assert result.metrics["numDeletedRows"] == 1, result.metrics
            deleted.append(victim)
            if rep >= warmup:
                dtx_times.append(elapsed_dtx)
                dl_times.append(elapsed_dl)
        after = deltatx.Table(dtx_uri)
        remaining = after.to_arrow(columns=["id"])
        gone = pc.sum(pc.is_in(remaining["id"], value_set=pa.array(deleted, pa.int64()))).as_py() or 0
        data_files_written = sum(
            1 for h in after.history() if h["operation"] == "DELETE" and int(h["operationMetrics"]["numAddedFiles"])
        )
        dl_rows_of_deltatx = _deltalake_count(dtx_uri)
        dl_rows = _deltalake_count(dl_uri)
        dv_files = int(pc.sum(pc.is_valid(after.files()["deletionVector"])).as_py() or 0)
        floors = _floors(after, deleted[warmup:], str(root / "scratch-log"))

    dtx_ms, dl_ms = median(dtx_times) * 1000, median(dl_times) * 1000
    result = BenchResult(
        id=ID, title=TITLE, metric="median DELETE latency", unit="ms", deltatx=dtx_ms, deltalake=dl_ms,
        target="≤ 50 ms and ≤ 0.05× deltalake's", quick=quick,
        parameters={"files": files, "rows_per_file": rows_per_file, "repetitions": reps, "warmup": warmup,
                    "deltatx": "delta.enableDeletionVectors=true (merge-on-read)",
                    "deltalake": "copy-on-write DELETE (delta-rs writes no deletion vectors)"},
        details={"deltatx_ms": [t * 1000 for t in dtx_times], "deltalake_ms": [t * 1000 for t in dl_times],
                 "files_with_a_dv": dv_files,
                 "floors (same table, same run)": floors},
    )
    n_deletes = warmup + reps
    result.check("deltatx: rows left", total - n_deletes, remaining.num_rows)
    result.check("deltatx: deleted ids still present", 0, gone)
    result.check("deltatx: DELETEs that wrote a data file", 0, data_files_written)
    result.check("deltalake reads deltatx's table (DVs applied): rows", total - n_deletes, dl_rows_of_deltatx)
    result.check("deltalake: rows left", total - n_deletes, dl_rows)
    result.criterion("≤ 50 ms", dtx_ms <= 50, f"{dtx_ms:.1f} ms")
    ratio = dtx_ms / dl_ms if dl_ms else None
    result.criterion("≤ 0.05× deltalake", ratio is not None and ratio <= 0.05,
                     f"{ratio:.3f}× ({dl_ms:.1f} ms)" if ratio is not None else "no deltalake time")
    return result
