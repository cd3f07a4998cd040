"""Copy-on-write building blocks shared by DELETE, UPDATE, MERGE and replaceWhere.

Only files that can hold affected rows are touched: candidates are pruned by partition values
and min/max stats, then each candidate is read and rewritten only if a row really matches.
A predicate over partition columns alone removes whole files without reading them.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...expr import Expr, matches, references_only, to_arrow
from ...io.reader import read_files
from ...txnlog.stats import record_counts, split_column_name
from ...io.row_metadata import ROW_COMMIT_VERSION, ROW_INDEX, metadata_field
from ...io.writer import WriteOptions, write_data_files
from .. import identity
from .. import properties as props
from . import change_feed
from .dml_metrics import total_size, with_deletion_vectors
from ..constraints import enforce, rules_for
from ..iceberg_compat import materializes_partition_values
from .merge_on_read import (
    drop_metadata,
    mark_changed,
    materialized,
    physical,
    record_read,
    row_columns,
    stage_changed_rows,
    uses_deletion_vectors,
)

if TYPE_CHECKING:
    from ...txnlog.column_mapping import ColumnMapping
    from ..transaction import Transaction


def write_options(tx: "Transaction") -> WriteOptions:
    """The table's write options, and its column mapping (files use physical names)."""
    opts = options_for(tx.properties)
    opts.column_mapping = mapping = tx.column_mapping
    if mapping is not None and opts.stats_columns is not None:  # stats are taken of physical columns
        opts.stats_columns = [physical_column_name(mapping, c) for c in opts.stats_columns]
    return opts


def physical_column_name(mapping: "ColumnMapping", name: str) -> str:
    """A (dotted, backtick-quoted) column name under its physical names."""
    parts = split_column_name(name)
    top, path = mapping.physical_path(parts[0], parts[1:])
    return ".".join(f"`{p}`" if "." in p or "`" in p else p for p in (top, *path))


def options_for(properties: dict[str, str]) -> WriteOptions:
    """The write options a table's properties ask for (which columns get statistics...)."""
    opts = WriteOptions()
    opts.num_indexed_cols = props.int_property(properties, props.NUM_INDEXED_COLS, opts.num_indexed_cols)
    opts.stats_columns = props.stats_columns(properties)
    opts.materialize_partition_columns = materializes_partition_values(properties)
    return opts


def write_files(tx: "Transaction", data: pa.Table | pa.RecordBatchReader, schema: pa.Schema | None = None,
                data_change: bool = True, *, absent: frozenset[str] = frozenset(),
                origin: "identity.Origin | None" = None) -> pa.Table:
    """Write data files for this transaction's table; returns add actions (not yet staged).

    Every row written with ``data_change`` passes the table's rules first (tables/constraints.py:
    CHECK constraints, invariants, generated columns; identity and generated columns named in
    ``absent`` are filled in) — the one place all write paths share, so none can skip them.
    Rows read with ``_metadata.row_id``/``row_commit_version`` keep them in the table's
    materialized row-tracking columns (merge_on_read.physical). ``origin``: where the rows'
    identity values come from, for new rows (append, overwrite, MERGE INSERT); None for rows a
    DML copies (tables/identity.py: a rebase moves only values the transaction generated)."""
    options = write_options(tx)
    rules = rules_for(tx.schema, tx.properties, tx.protocol) if data_change else None
    if rules is not None:
        data = enforce(rules, data, schema or tx.schema, absent, identity.assigner(tx) if rules.identity else None)
    if isinstance(data, pa.Table) and any(c.startswith("_metadata.") for c in data.column_names):
        data, schema, options.unindexed_columns = physical(tx, data)
    adds = write_data_files(tx.store, data, schema or tx.schema, tx.partition_columns, options,
                            data_change=data_change)
    if rules is not None and rules.identity:
        identity.note_written(tx, adds, rules.identity, origin)
    return adds


def num_records(files: pa.Table) -> int:
    """Rows the files hold: ``numRecords`` from their stats (columnar; files without stats count
    0), less the rows their deletion vectors delete (``numRecords`` counts those too)."""
    if not files.num_rows:
        return 0
    total = pc.sum(record_counts(files["stats"])).as_py() or 0
    if "deletionVector" in files.column_names and files.column("deletionVector").null_count < files.num_rows:
        total -= pc.sum(pc.struct_field(files.column("deletionVector"), "cardinality")).as_py() or 0
    return total


def is_partition_only(pred: Expr, partition_columns: list[str]) -> bool:
    return bool(partition_columns) and references_only(pred, partition_columns)


def _read_each(tx: "Transaction", files: pa.Table, extra: list[str] | None = None,
               only: set[str] | None = None, pred: Expr | None = None) -> list[pa.Table]:
    """Read candidate files one table per file (parallel), as the txn's schema (plus ``extra``
    ``_metadata.*`` columns; only the ``only`` table columns when given; only the rows ``pred``
    matches when given)."""
    names_wanted = [n for n in tx.schema.names if only is None or n in only]
    columns = names_wanted + extra if extra else (names_wanted if only is not None else None)
    names = materialized(tx) if extra else None
    row_filter = to_arrow(pred, tx.schema) if pred is not None else None
    mapping = tx.column_mapping

    def one(i: int) -> pa.Table:
        return read_files(tx.store, files.slice(i, 1), tx.schema, tx.partition_columns, columns=columns,
                          materialized=names, filter=row_filter, prune=pred, column_mapping=mapping)

    if files.num_rows == 1:  # a point change: no pool to start
        return [one(0)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(one, range(files.num_rows)))


def _read_marks(tx: "Transaction", files: pa.Table, extra: list[str], pred: Expr) -> list[pa.Table]:
    """A DV-only DELETE's read: per file, the positions of its live rows ``pred`` selects (the
    ``_metadata.row_index`` column :func:`_read_each` would give, and nothing else). Files the
    point reader (io/point_read.py) can answer cost it only the decode of the key's row group;
    the rest, and every file when row ids or mapped columns are involved, go through
    :func:`_read_each`."""
    if extra != [ROW_INDEX] or tx.column_mapping is not None or \
            any(c in tx.partition_columns for c in pred.columns()):
        return _read_each(tx, files, extra, set(), pred)
    from ...io.point_read import live_matching_positions

    paths, sizes = files.column("path").to_pylist(), files.column("size").to_pylist()
    times, dvs = files.column("modificationTime").to_pylist(), files.column("deletionVector").to_pylist()
    out: list[pa.Table] = []
    for i in range(files.num_rows):
        positions = live_matching_positions(tx.store, paths[i], sizes[i], times[i], dvs[i], pred, tx.schema)
        if positions is None:
            out.append(_read_each(tx, files.slice(i, 1), extra, set(), pred)[0])
        else:
            out.append(pa.table([pa.array(positions, pa.int64())], schema=_POSITIONS))
    return out


_POSITIONS = pa.schema([metadata_field(ROW_INDEX)])


def _all_rows(n: int) -> pa.ChunkedArray:
    """The mask that matches every one of ``n`` rows."""
    return pa.chunked_array([pa.repeat(pa.scalar(True), n)], pa.bool_())


def rewrite_files(tx: "Transaction", pred: Expr | None,
                  transform: Callable[[pa.Table, pa.ChunkedArray], tuple[pa.Table, int]],
                  writes_rows: bool = True) -> dict[str, int]:
    """Scan with ``pred`` (recorded as the read), and rewrite every file holding a matching row.

    ``transform(rows, matches)`` returns (rows to write back, number of rows affected), where
    ``matches`` is the boolean "predicate is TRUE" mask of ``rows``. ``writes_rows=True`` (an
    UPDATE): the transform returns every row, changed where ``matches``; ``writes_rows=False`` (a
    DELETE): it drops the matching rows, which lets a merge-on-read pass read only the
    predicate's columns (unless the change data feed needs the deleted rows); on read, with no
    feed, it is not called at all: the rows' positions, marked in the DV, are the whole change.
    On a change-data-feed table the affected rows are recorded (ops/change_feed.py): updates as
    pre- and post-images, deletes as deletes.
    """
    started = time.perf_counter()
    _, candidates = tx.scan(pred)
    metrics = {"numRemovedFiles": 0, "numAddedFiles": 0, "numAffectedRows": 0, "numCopiedRows": 0,
               "numFilesRead": candidates.num_rows}
    if not candidates.num_rows:
        metrics["scanTimeMs"] = _ms_since(started)
        return metrics
    on_read = uses_deletion_vectors(tx)
    touched: list[int] = []
    changed: list[np.ndarray] = []
    outputs: list[pa.Table] = []
    extra = row_columns(tx, on_read)
    only = None
    feed = change_feed.enabled(tx)
    before: list[pa.Table] = []  # affected rows as they were, and as written (change data feed)
    after: list[pa.Table] = []
    inserted: list[pa.Table] = []  # rows of files this transaction appended: inserts, as they end up
    again: list[tuple[pa.Table, pa.Table | None]] = []  # rows an earlier DML of it wrote, changed again
    paths = candidates.column("path").to_pylist() if feed else []
    # a DELETE on read, with no change feed to record, writes no row back: its DV is the change
    marks_only = on_read and not writes_rows and not feed
    if marks_only:  # positions (and ids) are all a DV needs
        only = set()
        extra = [c for c in extra if c != ROW_COMMIT_VERSION]
    # merge-on-read needs only the matching rows: the predicate filters them as they are read
    read = _read_marks(tx, candidates, extra, pred) if marks_only and pred is not None \
        else _read_each(tx, candidates, extra, only, pred if on_read else None)
    for i, rows in enumerate(read):
        if on_read:  # the read kept only the matching rows
            n = rows.num_rows
            positions = rows.column(ROW_INDEX).to_numpy()
            record_read(tx, candidates, i, rows, changed=positions, read=positions)
        else:
            mask = _all_rows(rows.num_rows) if pred is None else matches(pred, rows)  # NULL: not matched
            if not isinstance(mask, pa.ChunkedArray):
                mask = pa.chunked_array([mask], pa.bool_())
            n = pc.sum(pc.cast(mask, pa.int64())).as_py() or 0
        if n == 0:
            continue
        touched.append(i)
        if marks_only:
            metrics["numAffectedRows"] += n
            changed.append(positions)
            continue
        if on_read:  # only the changed rows are written again, in their new form
            out, affected = transform(mark_changed(rows), _all_rows(n))
            changed.append(positions)
        else:
            out, affected = transform(mark_changed(rows, mask), mask)
            metrics["numCopiedRows"] += rows.num_rows - affected
        if feed and tx.is_own_file(paths[i]) and change_feed.describes(tx, paths[i]):
            again.append((rows if on_read else rows.filter(mask),
                           (out if on_read else out.filter(mask)) if writes_rows else None))
        elif feed and tx.is_own_file(paths[i]):  # appended, never committed: only how it ends up
            inserted.append(out)  # copy-on-write: the file's rows; on read: the changed rows' new form
        elif feed:
            before.append(rows if on_read else rows.filter(mask))
            if writes_rows:
                after.append(out if on_read else out.filter(mask))
        metrics["numAffectedRows"] += affected
        if out.num_rows:
            outputs.append(drop_metadata(out))
    scanned = time.perf_counter()
    metrics["scanTimeMs"] = _ms_since(started, scanned)
    if not touched:
        return metrics
    removed = candidates if len(touched) == candidates.num_rows else candidates.take(pa.array(touched, pa.int64()))
    if on_read:
        metrics.update(stage_changed_rows(tx, removed, changed))
    else:
        tx.stage_removes(removed)
        metrics["numRemovedFiles"] = removed.num_rows
        metrics["numRemovedBytes"] = total_size(removed)
        metrics["numDeletionVectorsRemoved"] = with_deletion_vectors(removed)  # rewritten without them
    adds = None
    if outputs:
        adds = write_files(tx, pa.concat_tables(outputs))
        tx.stage_adds(adds)
        metrics["numAddedFiles"] = adds.num_rows
        metrics["numAddedBytes"] = total_size(adds)
    metrics["rewriteTimeMs"] = _ms_since(scanned)
    if feed:
        for rows in before:
            change_feed.record_changes(tx, rows, change_feed.UPDATE_PREIMAGE if writes_rows else change_feed.DELETE)
        for rows in after:
            change_feed.record_changes(tx, rows, change_feed.UPDATE_POSTIMAGE)
        for rows in inserted:
            change_feed.record_changes(tx, drop_metadata(rows), change_feed.INSERT)
        for rows, new in again:
            change_feed.amend(tx, drop_metadata(rows), drop_metadata(new) if new is not None else None)
        change_feed.cover(tx, removed, inputs=True)
        change_feed.cover(tx, adds)
    return metrics


def remove_matching_rows(tx: "Transaction", pred: Expr | None) -> dict[str, int]:
    """DELETE's core: drop rows where ``pred`` is TRUE (None = every row)."""
    if pred is None or is_partition_only(pred, tx.partition_columns):
        # Whole files go: no need to read them. Their rows are counted from stats.
        started = time.perf_counter()
        _, files = tx.scan(pred)
        change_feed.files_leaving(tx, files)
        tx.stage_removes(files)
        return {"numRemovedFiles": files.num_rows, "numAddedFiles": 0, "numDeletedRows": num_records(files),
                "numCopiedRows": 0, "numFilesRead": 0, "numRemovedBytes": total_size(files),
                "numDeletionVectorsRemoved": with_deletion_vectors(files), "scanTimeMs": _ms_since(started)}

    def drop(rows: pa.Table, matches: pa.ChunkedArray) -> tuple[pa.Table, int]:
        keep = pc.invert(matches)
        kept = rows.filter(keep)
        return kept, rows.num_rows - kept.num_rows

    m = rewrite_files(tx, pred, drop, writes_rows=False)
    m["numDeletedRows"] = m.pop("numAffectedRows")
    return m


def _ms_since(start: float, end: float | None = None) -> int:
    return int(((time.perf_counter() if end is None else end) - start) * 1000)
