"""Change data feed, reading: the rows of a :class:`~deltatx.txnlog.change_feed.ChangePlan`.

::

    cdc files of every version        ─► one scan; _commit_version is a constant per file
    whole added / removed files       ─► one scan; _commit_version and _change_type constant per file
                                          (insert / delete), each file's own DV applied
    DV pairs (remove oldDV + add newDV) ─► per file: rows at positions newDV − oldDV (delete),
                                          oldDV − newDV (insert)
    ─► + _commit_timestamp (by version) ─► where ─► columns

The per-file constants ride on the reader's partition machinery (they are given to it as extra
partition values), so all files of all versions go through one parallel Parquet scan instead of
one small read per version.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SchemaMismatchError
from ..txnlog.change_feed import COMMIT_TIMESTAMP, COMMIT_VERSION, ChangePlan
from .deletion_vector_writer import load_bitmap
from .reader import read_files
from .row_metadata import ROW_INDEX

if TYPE_CHECKING:
    from ..txnlog.store import LogStore

CHANGE_TYPE = "_change_type"
#: the columns every change row has besides the table's (types as deltalake's ``load_cdf`` gives
#: them, except the version: a Delta long, as Spark gives it)
CHANGE_COLUMNS = (
    pa.field(CHANGE_TYPE, pa.string()),
    pa.field(COMMIT_VERSION, pa.int64()),
    pa.field(COMMIT_TIMESTAMP, pa.timestamp("ms")),
)
_CHANGE_NAMES = tuple(f.name for f in CHANGE_COLUMNS)
_STRING_MAP = pa.map_(pa.string(), pa.string())


def change_feed_schema(schema: pa.Schema) -> pa.Schema:
    """The schema of change rows: the table's columns, then ``_change_type``, ``_commit_version``,
    ``_commit_timestamp``."""
    return pa.schema(list(schema) + list(CHANGE_COLUMNS), metadata=schema.metadata)


def output_columns(schema: pa.Schema, columns: list[str] | None) -> list[str]:
    """The columns to return: all, or ``columns`` (plus the three change columns unless it names one)."""
    full = change_feed_schema(schema)
    if columns is None:
        return full.names
    if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
        raise SchemaMismatchError(f"columns must be a list of column names, got {columns!r}")
    missing = [c for c in columns if c not in full.names]
    if missing:
        raise SchemaMismatchError(f"columns {missing} are not in the change feed; it has {full.names}")
    if any(c in _CHANGE_NAMES for c in columns):
        return list(columns)
    return list(columns) + list(_CHANGE_NAMES)


def _tag(files: pa.Table, tags: dict[str, pa.Array]) -> pa.Table:
    """``path``, ``deletionVector`` and ``partitionValues`` of ``files``, the latter with one more
    entry per tag (the tag's value for each file, as a string)."""
    values = files.column("partitionValues").to_pylist()
    extra = {name: column.cast(pa.string()).to_pylist() for name, column in tags.items()}
    tagged = [list(pv or ()) + [(name, extra[name][i]) for name in extra] for i, pv in enumerate(values)]
    columns = {"path": files.column("path"), "partitionValues": pa.array(tagged, _STRING_MAP)}
    if "deletionVector" in files.column_names:  # cdc files have none
        columns["deletionVector"] = files.column("deletionVector")
    return pa.table(columns)


def _read_cdc(store: "LogStore", plan: ChangePlan, wanted: list[str], row_filter) -> pa.Table | None:
    files = plan.cdc_files
    if not files.num_rows:
        return None
    schema = pa.schema(list(plan.schema) + list(CHANGE_COLUMNS[:2]))
    tagged = _tag(files, {COMMIT_VERSION: files.column(COMMIT_VERSION)})
    return read_files(store, tagged, schema, plan.partition_columns + [COMMIT_VERSION],
                      columns=wanted + [CHANGE_TYPE, COMMIT_VERSION], filter=row_filter)


def _read_whole_files(store: "LogStore", plan: ChangePlan, wanted: list[str], row_filter) -> pa.Table | None:
    """Added files as inserts, removed files as deletes (each file's own DV applied)."""
    parts = []
    for files, kind in ((plan.inserted_files, "insert"), (plan.deleted_files, "delete")):
        if files.num_rows:
            kinds = pa.array([kind] * files.num_rows, pa.string())
            parts.append(_tag(files, {COMMIT_VERSION: files.column(COMMIT_VERSION), CHANGE_TYPE: kinds}))
    if not parts:
        return None
    files = pa.concat_tables(parts, promote_options="default") if len(parts) > 1 else parts[0]
    schema = pa.schema(list(plan.schema) + list(CHANGE_COLUMNS[:2]))
    return read_files(store, files, schema, plan.partition_columns + [CHANGE_TYPE, COMMIT_VERSION],
                      columns=wanted + [CHANGE_TYPE, COMMIT_VERSION], filter=row_filter)


def _read_dv_pair(store: "LogStore", plan: ChangePlan, pair: dict, wanted: list[str], row_filter) -> pa.Table:
    """Rows of one file whose deletion-vector bit one commit flipped: set → delete, cleared → insert."""
    path = pair["path"]
    old = load_bitmap(store, pair["deletionVector"], path)
    new = load_bitmap(store, pair["newDeletionVector"], path)
    deleted, restored = new - old, old - new
    out_schema = pa.schema([plan.schema.field(n) for n in wanted] + list(CHANGE_COLUMNS[:2]))
    if not deleted and not restored:
        return out_schema.empty_table()
    file = pa.table({"path": [path], "partitionValues": pa.array([pair["partitionValues"]], _STRING_MAP)})
    rows = read_files(store, file, plan.schema, plan.partition_columns, columns=wanted + [ROW_INDEX])
    positions = rows.column(ROW_INDEX).to_numpy()
    parts = []
    for bitmap, kind in ((deleted, "delete"), (restored, "insert")):
        if bitmap:
            chosen = rows.filter(pa.array(np.isin(positions, np.fromiter(bitmap, np.int64, len(bitmap)))))
            n = chosen.num_rows
            parts.append(pa.Table.from_arrays(
                [chosen.column(c) for c in wanted] + [pa.array([kind] * n, pa.string()),
                                                      pa.array([pair[COMMIT_VERSION]] * n, pa.int64())],
                schema=out_schema))
    out = pa.concat_tables(parts)
    return out.filter(row_filter) if row_filter is not None else out


def read_changes(store: "LogStore", plan: ChangePlan, columns: list[str] | None = None,
                 where: str | None = None) -> pa.Table:
    """The change rows of ``plan`` (see the module docstring). Like Delta's, in no promised order:
    sorting them would cost a copy of every column."""
    from ..expr import bind_predicate, parse_predicate, to_arrow

    full = change_feed_schema(plan.schema)
    out = output_columns(plan.schema, columns)
    pred = bind_predicate(parse_predicate(where), full) if where is not None else None
    needed = set(out) | (pred.columns() if pred is not None else set())
    wanted = [n for n in plan.schema.names if n in needed]
    # a filter on table columns only is pushed into the scans; one on the change columns waits
    pushed = pred is not None and pred.columns() <= set(plan.schema.names)
    row_filter = to_arrow(pred) if pushed else None
    read_schema = pa.schema([plan.schema.field(n) for n in wanted] + list(CHANGE_COLUMNS[:2]))
    parts: list[pa.Table] = []
    if not plan.empty:
        # the scans overlap (Arrow releases the GIL): small files make each one latency-bound
        jobs = [lambda: _read_cdc(store, plan, wanted, row_filter), lambda: _read_whole_files(store, plan, wanted, row_filter)]
        jobs += [partial(_read_dv_pair, store, plan, pair, wanted, row_filter)
                 for pair in (plan.dv_pairs.to_pylist() if plan.dv_pairs.num_rows else [])]
        with ThreadPoolExecutor(max_workers=min(8, len(jobs))) as pool:
            for part in pool.map(lambda job: job(), jobs):
                if part is not None and part.num_rows:
                    parts.append(part.select(read_schema.names).cast(read_schema))
    rows = pa.concat_tables(parts) if parts else read_schema.empty_table()
    index = pc.subtract(rows.column(COMMIT_VERSION), pa.scalar(plan.start, pa.int64()))
    stamps = pa.array(plan.timestamps_ms, pa.int64()).cast(pa.timestamp("ms"))
    rows = rows.append_column(CHANGE_COLUMNS[2], stamps.take(index) if rows.num_rows else stamps.slice(0, 0))
    if pred is not None and not pushed:
        rows = rows.filter(to_arrow(pred))
    return rows.select(out)
