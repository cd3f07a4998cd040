"""P12 — read the change data feed of 100 commits over a 1M-row table (deltatx vs deltalake).

One table, written by deltatx with ``delta.enableChangeDataFeed=true``: 1M rows in 10 partitions
(v1), then 100 commits cycling append (1,000 new rows) / UPDATE of 500 ids / DELETE of 300 ids,
the ids inside one partition's file each time (copy-on-write: the commits carry ``_change_data``
files), and one DELETE of a whole partition (no change files: its removes are the deletes).
Both engines read the feed of versions 2..101 of that same table, each through a table object
opened once: ``Table.changes()`` and ``DeltaTable.load_cdf()`` (read to Arrow), alternating, after
a warm-up each.

The checks: the same change rows from both (sorted, without ``_commit_timestamp``, whose source
differs: see tests/interop/test_change_feed_interop.py), the expected row count per change type,
and which commits have change files.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

import deltatx

from .common import BenchResult, median, scratch_dir, time_call

ID = "P12"
TITLE = "Change data feed of 100 commits over a 1M-row table"
SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("value", pa.int64()), ("name", pa.string())])
PARTITIONS = 10
APPEND_ROWS, UPDATE_IDS, DELETE_IDS = 1_000, 500, 300


def _rows(first: int, n: int, block: int) -> pa.Table:
    ids = np.arange(first, first + n, dtype=np.int64)
    return pa.table({"id": ids, "part": ((ids // block) % PARTITIONS).astype(np.int32), "value": ids * 3,
                     "name": pa.array([f"n{i}" for i in ids.tolist()], pa.string())}, schema=SCHEMA)


def _build(uri: str, rows: int, commits: int) -> dict[str, int]:
    """The table's history; returns the expected number of change rows per change type."""
    block = rows // PARTITIONS
    table = deltatx.create_table(uri, SCHEMA, partition_by=["part"],
                                 properties={"delta.enableChangeDataFeed": "true"})
    table.append(_rows(0, rows, block))  # v1
    expected = {"insert": 0, "delete": 0, "update_preimage": 0, "update_postimage": 0}
    next_id = rows
    for i in range(commits - 1):
        kind = i % 3
        start = (i * 9_000) % (rows - 1_000)  # a fresh 1,000-id range (inside one partition) each time
        if kind == 0:
            table.append(_rows(next_id, APPEND_ROWS, block))
            next_id += APPEND_ROWS
            expected["insert"] += APPEND_ROWS
        elif kind == 1:
            n = table.update(f"id >= {start} AND id < {start + UPDATE_IDS}", {"value": "value + 1"}) \
                .metrics["numUpdatedRows"]
            expected["update_preimage"] += n
            expected["update_postimage"] += n
        else:
            lo = start + UPDATE_IDS  # never the rows just updated
            expected["delete"] += table.delete(f"id >= {lo} AND id < {lo + DELETE_IDS}").metrics["numDeletedRows"]
    last = PARTITIONS - 1
    expected["delete"] += table.delete(f"part = {last}").metrics["numDeletedRows"]  # whole files
    return expected


def _comparable(table: pa.Table) -> pa.Table:
    names = ["id", "part", "value", "name", "_change_type", "_commit_version"]
    out = pa.table({n: table.column(n) for n in names})
    out = out.set_column(4, "_change_type", out.column(4).cast(pa.string()))
    out = out.set_column(5, "_commit_version", out.column(5).cast(pa.int64()))
    out = out.set_column(3, "name", out.column(3).cast(pa.string()))
    return out.sort_by([(n, "ascending") for n in ("_commit_version", "_change_type", "id")])


def run(quick: bool = False) -> BenchResult:
    rows, commits, reps, warmup = (20_000, 12, 3, 1) if quick else (1_000_000, 100, 31, 2)
    with scratch_dir("p12") as root:
        uri = str(root / "table")
        expected = _build(uri, rows, commits)
        first, last = 2, commits + 1
        table, dt = deltatx.Table(uri), DeltaTable(uri)  # both opened once: the feed read is timed
        history = {h["version"]: h for h in table.history()}

        def ours() -> pa.Table:
            return table.changes(starting_version=first, ending_version=last)

        def theirs() -> pa.Table:
            return pa.table(dt.load_cdf(starting_version=first, ending_version=last).read_all())

        dtx_times: list[float] = []
        dl_times: list[float] = []
        for rep in range(warmup + reps):
            elapsed_dtx, got = time_call(ours)
            elapsed_dl, want = time_call(theirs)
            if rep >= warmup:
                dtx_times.append(elapsed_dtx)
                dl_times.append(elapsed_dl)
        with_cdc = sum(1 for v in range(first, last + 1)
                       if b'{"cdc"' in (root / "table" / "_delta_log" / f"{v:020d}.json").read_bytes())
        dml = sum(1 for v in range(first, last + 1) if history[v]["operation"] in ("UPDATE", "DELETE"))

    dtx_ms, dl_ms = median(dtx_times) * 1000, median(dl_times) * 1000
    counts = {kind: int(pc.sum(pc.equal(got["_change_type"], kind)).as_py() or 0) for kind in expected}
    result = BenchResult(
        id=ID, title=TITLE, metric="median change-feed read", unit="ms", deltatx=dtx_ms, deltalake=dl_ms,
        target="≤ 1.0× deltalake's", quick=quick,
        parameters={"rows": rows, "commits": commits, "partitions": PARTITIONS, "repetitions": reps,
                    "warmup": warmup, "append_rows": APPEND_ROWS, "update_ids": UPDATE_IDS,
                    "delete_ids": DELETE_IDS, "versions": f"{first}..{last}"},
        details={"deltatx_ms": [t * 1000 for t in dtx_times], "deltalake_ms": [t * 1000 for t in dl_times],
                 "change_rows": got.num_rows, "commits_with_change_files": with_cdc},
    )
    result.check("change rows: deltatx = deltalake", want.num_rows, got.num_rows)
    result.check("same change rows as deltalake", True, _comparable(got).equals(_comparable(want)))
    for kind, n in expected.items():
        result.check(f"{kind} rows", n, counts[kind])
    result.check("commits with change files (the row-level UPDATEs/DELETEs)", dml - 1, with_cdc)
    ratio = dtx_ms / dl_ms if dl_ms else None
    result.criterion("≤ 1.0× deltalake", ratio is not None and ratio <= 1.0,
                     f"{ratio:.2f}× ({dtx_ms:.1f} ms vs {dl_ms:.1f} ms)" if ratio is not None else "no deltalake time")
    return result
