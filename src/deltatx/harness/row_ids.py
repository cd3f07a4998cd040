"""The ``row_ids`` checker: on a row-tracking table, row ids never collide and never change.

Every version of the table is read by time travel with ``_metadata.row_id`` beside the workload's
key column, and three things must hold:

- within a version, every row has an id and no two rows share one (``collide``);
- a row (identified by its key, where the key is unique in both versions) that survives from one
  version to the next keeps its id — an UPDATE, a MERGE, an OPTIMIZE or a purge rewrites the row,
  never its identity (``changed``);
- an id, once given to a row, is never given to a row with another key later, even after the
  first row is deleted (``reused``);
- the table's ``rowIdHighWaterMark`` never goes down and is never below an id a row holds
  (``watermark``): a writer hands out ids above it, so either would let the next one collide —
  this names the commit that broke it, where ``collide`` names the later one that suffered.

Versions before row tracking was enabled (ids may be missing there) are skipped. All comparisons
are Arrow joins and group-bys over the (key, id) pairs: no Python object per row.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..io.row_metadata import ROW_ID
from ..tables.table import Table
from ..txnlog import row_tracking
from .checkers import MAX_PER_CHECKER, Anomaly

NAME = "row_ids"


def applies(table: Table) -> bool:
    """The checker runs on tables whose protocol lists row tracking."""
    return row_tracking.is_supported(table.protocol)


def _unique_keys(rows: pa.Table, key: str) -> pa.Table:
    counts = rows.group_by(key).aggregate([(ROW_ID, "count")])
    single = counts.filter(pc.equal(counts[f"{ROW_ID}_count"], 1)).select([key])
    return rows.join(single, keys=key, join_type="inner")


def check_row_ids(uri: str, storage_options: dict[str, Any] | None = None, key: str = "id") -> list[Anomaly]:
    """Anomalies of the row ids of every version of the table at ``uri`` (see the module)."""
    latest = Table(uri, storage_options=storage_options)
    if not applies(latest):
        return []
    out: list[Anomaly] = []
    previous: pa.Table | None = None
    seen = pa.table({ROW_ID: pa.array([], pa.int64()), "owner": pa.array([], pa.string())})
    last_mark = row_tracking.NO_WATERMARK
    for version in range(latest.version + 1):
        table = Table(uri, version=version, storage_options=storage_options)
        if not row_tracking.is_enabled(table.properties):
            previous = None
            continue
        rows = table.to_arrow(columns=[key, ROW_ID])
        mark = row_tracking.high_watermark(table.snapshot.domains)
        if mark < last_mark:
            out.append(Anomaly(NAME, f"watermark: the row-id high watermark went from {last_mark} down to {mark}",
                               version))
        top = pc.max(rows.column(ROW_ID)).as_py() if rows.num_rows else None
        if top is not None and top > mark:
            out.append(Anomaly(NAME, f"watermark: row id {top} is above the high watermark {mark}", version))
        last_mark = max(last_mark, mark)
        if rows.column(ROW_ID).null_count:
            out.append(Anomaly(NAME, f"{rows.column(ROW_ID).null_count} row(s) have no row id", version))
        counts = pc.value_counts(rows.column(ROW_ID).drop_null()) if rows.num_rows else None
        if counts is not None and len(counts):
            shared = counts.filter(pc.greater(pc.struct_field(counts, "counts"), 1))
            for item in shared.to_pylist()[:3]:
                out.append(Anomaly(NAME, f"collide: row id {item['values']} is held by {item['counts']} rows", version))
        current = _unique_keys(rows.filter(pc.is_valid(rows.column(ROW_ID))), key)
        if previous is not None and current.num_rows and previous.num_rows:
            both = previous.join(current, keys=key, join_type="inner", right_suffix="_now")
            moved = both.filter(pc.not_equal(both[ROW_ID], both[f"{ROW_ID}_now"]))
            for item in moved.slice(0, 3).to_pylist():
                out.append(Anomaly(NAME, f"changed: the row with {key}={item[key]} had row id {item[ROW_ID]} at "
                                         f"version {version - 1} and {item[f'{ROW_ID}_now']} at {version}", version))
        pairs = pa.table({ROW_ID: current[ROW_ID], "owner": pc.cast(current[key], pa.string())})
        seen = pa.concat_tables([seen, pairs]).group_by([ROW_ID, "owner"]).aggregate([])
        owners = seen.group_by(ROW_ID).aggregate([("owner", "count_distinct")])
        reused = owners.filter(pc.greater(owners["owner_count_distinct"], 1))
        for item in reused.slice(0, 3).to_pylist():
            out.append(Anomaly(NAME, f"reused: row id {item[ROW_ID]} was given to rows with different {key}s",
                               version))
        previous = current
        if len(out) >= MAX_PER_CHECKER:
            break
    return out[:MAX_PER_CHECKER]
