"""Data and oracles shared by the benchmarks: row generators and independent row counts.

Owns the shape of the benchmark data (so P6 and P7 write the same table) and how a result is
verified: row counts come from the Parquet footers of the files each table's log references, read
through deltalake (an independent reader) — never from ``to_pyarrow_table``/``to_pandas``, which
can abort the interpreter at exit (delta-rs #2184).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

#: the P6/P7 table: 10 partitions of ``part``
WIDE_SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("value", pa.float64()), ("name", pa.string())])
PARTITIONS = 10

#: the tiny rows of the commit-rate benchmarks (P1, P4, P5)
SMALL_SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.float64())])


def wide_rows(n: int, id_start: int = 0, ids: pa.Array | None = None, value_offset: float = 0.0) -> pa.Table:
    """``n`` rows of (id, part = id % 10, value, name); ids ``id_start..`` unless given."""
    if ids is None:
        ids = pa.array(np.arange(id_start, id_start + n, dtype=np.int64))
    part = pc.cast(pc.remainder(ids, PARTITIONS), pa.int32())
    value = pc.add(pc.multiply(pc.cast(ids, pa.float64()), 0.5), value_offset)
    name = pc.binary_join_element_wise("name-", pc.cast(pc.remainder(ids, 100_000), pa.string()), "")
    return pa.table([ids, part, value, name], schema=WIDE_SCHEMA)


def small_row(row_id: int, value: float = 1.0) -> pa.Table:
    return pa.table({"id": pa.array([row_id], pa.int64()), "value": pa.array([value], pa.float64())},
                    schema=SMALL_SCHEMA)


def stats_row_count(files: pa.Table) -> int | None:
    """Sum of ``numRecords`` over the add actions' stats; None if a file has no stats."""
    total = 0
    for stats in files.column("stats").to_pylist():
        if not stats:
            return None
        total += int(orjson.loads(stats)["numRecords"])
    return total


def deltalake_facts(uri: str) -> dict[str, int]:
    """Version, file count and exact row count of the table at ``uri`` as deltalake sees it."""
    from deltalake import DeltaTable

    dt = DeltaTable(uri)
    uris = dt.file_uris()
    rows = pads.dataset(uris, format="parquet").count_rows() if uris else 0
    return {"version": dt.version(), "files": len(uris), "rows": rows}


def deltalake_ids(uri: str) -> list[int]:
    """Sorted ``id`` values of a small table, read through deltalake's file list."""
    from deltalake import DeltaTable

    uris = DeltaTable(uri).file_uris()
    if not uris:
        return []
    return sorted(pads.dataset(uris, format="parquet").to_table(columns=["id"]).column("id").to_pylist())


def open_both(uri: str, reps: int) -> tuple[list[float], list[float], Any, Any]:
    """Open ``uri`` with each engine ``reps`` times, alternating; the open times and last handles.

    Every deltatx open is cold: the process's snapshot cache (which serves a fresh ``Table(uri)``
    of a table this process has open already, see P4b) is emptied first, so the log or the
    checkpoint is really read, as a new process reads it."""
    import deltatx
    from deltalake import DeltaTable
    from deltatx.txnlog.snapshot_cache import SNAPSHOTS

    from .common import time_call

    dtx_times, dl_times = [], []
    table = dt = None
    for _ in range(reps):
        SNAPSHOTS.clear()
        t, table = time_call(lambda: deltatx.Table(uri))
        dtx_times.append(t)
        t, dt = time_call(lambda: DeltaTable(uri))
        dl_times.append(t)
    return dtx_times, dl_times, table, dt

