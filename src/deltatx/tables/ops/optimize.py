"""OPTIMIZE (bin-packing compaction) and the "which partitions need it" test of auto-compaction.

::

    files matching ``where`` (partition columns only, as Delta requires)
      └─► small = size < target size
            └─► per partition, sorted by size: running total // target ─► bins     (columnar)
                  └─► bins with ≥ 2 files: read, write one file each (dataChange=false)

The rows do not change, only their files: removes and adds carry ``dataChange=false`` and the
operation is noted with ``changes_data=False``, so the commit downgrades to SnapshotIsolation
and a concurrent blind append never conflicts with it. What it does depend on are the files it
compacts: those are its read (a concurrent DELETE/UPDATE of one of them is a conflict).
"""

from __future__ import annotations

import dataclasses
import numbers
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InvalidPropertyError, PredicateError
from ...expr import (
    FALSE,
    Column,
    Comparison,
    Expr,
    IsNull,
    Literal,
    and_all,
    bind_predicate,
    files_matching,
    or_all,
    parse_predicate,
)
from ...expr.values import plain_type
from ...io.grouping import group_codes
from ...txnlog import column_mapping
from ...io.reader import read_files
from ...txnlog.partition_values import parse_partition_values
from ...io.writer import WriteOptions, write_data_files
from .. import properties as props
from ...io.deletion_vector_writer import load_bitmap
from ...io.row_metadata import FILE_PATH, ROW_ID, ROW_INDEX
from .dml_metrics import file_size_distribution, total_size, with_deletion_vectors
from .merge_on_read import materialized, physical, row_columns, uses_deletion_vectors
from .rewrite import write_options

if TYPE_CHECKING:
    from ...txnlog.snapshot import Snapshot
    from ..transaction import Transaction
    from .layout import Layout

#: target size of compacted files when ``delta.targetFileSize`` is not set
DEFAULT_TARGET_SIZE = 256 * 1024 * 1024

#: bins compacted at once (each holds about one target-size file of rows in memory)
_PARALLEL_BINS = 2

_HUGE = 1 << 62


def target_file_size(properties: dict[str, str], target_size: int | None = None) -> int:
    if target_size is None:
        size = props.int_property(properties, props.TARGET_FILE_SIZE, DEFAULT_TARGET_SIZE)
    elif isinstance(target_size, bool) or not isinstance(target_size, numbers.Integral):
        raise InvalidPropertyError(f"target_size must be an integer number of bytes, got {target_size!r}")
    else:
        size = target_size
    if not 1 <= int(size) < 2 ** 63:  # Delta's target sizes are longs
        raise InvalidPropertyError(f"target_size must be a positive number of bytes below 2^63, got {target_size!r}")
    return int(size)


def _partition_strings(files: pa.Table, keys: list[str]) -> list[pa.Array]:
    """The ``partitionValues`` strings under ``keys`` (physical names under column mapping:
    :func:`deltatx.txnlog.column_mapping.partition_keys`)."""
    pv = files["partitionValues"]
    out = []
    for col in keys:
        values = pc.map_lookup(pv, pa.scalar(col), "first")
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks() if values.num_chunks else pa.array([], pa.string())
        out.append(values)
    return out


def partition_codes(files: pa.Table, partition_columns: list[str]) -> np.ndarray:
    if not partition_columns or not files.num_rows:
        return np.zeros(files.num_rows, dtype=np.int64)
    return group_codes(_partition_strings(files, partition_columns)).to_numpy(zero_copy_only=False)


def plan_bins(files: pa.Table, partition_columns: list[str], target_size: int,
              purge: np.ndarray | None = None) -> pa.Table:
    """The small files to compact, with a ``bin`` column (int64); bins of one file are dropped.

    Within each partition, files sorted by size are cut wherever the running total crosses a
    multiple of ``target_size``: every bin stays under ``target_size`` plus one file. Files
    marked in ``purge`` (their deletion vectors must go) are taken whatever their size, and a
    bin holding one of them is kept even alone.
    """
    sizes = files["size"].to_numpy()
    small = sizes < target_size
    if purge is not None:
        small |= purge
        files, purge = files.filter(pa.array(small)), purge[small]
        sizes = files["size"].to_numpy()
        if files.num_rows == 1 and purge.any():
            return files.append_column("bin", pa.array([0], pa.int64()))
    else:
        files = files.filter(pa.array(small))
    if files.num_rows < 2:
        files = files.slice(0, 0)  # a lone small file has nothing to be compacted with
        return files.append_column("bin", pa.array([], pa.int64()))
    sizes = files["size"].to_numpy()
    codes = partition_codes(files, partition_columns)
    order = np.lexsort((sizes, codes))
    codes, sizes = codes[order], sizes[order]
    files = files.take(pa.array(order))
    running = np.cumsum(sizes) - sizes  # bytes before this file, table-wide
    first = np.r_[True, codes[1:] != codes[:-1]]
    group_start = np.maximum.accumulate(np.where(first, np.arange(len(codes)), 0))
    within = running - running[group_start]  # bytes before this file within its partition
    bin_in_partition = within // target_size
    bins = codes * (int(bin_in_partition.max()) + 1) + bin_in_partition
    _, inverse, counts = np.unique(bins, return_inverse=True, return_counts=True)
    keep = counts[inverse] >= 2
    if purge is not None:
        purge = purge[order]
        has_purge = np.zeros(len(counts), dtype=bool)
        np.logical_or.at(has_purge, inverse, purge)
        keep |= has_purge[inverse]
    return files.append_column("bin", pa.array(inverse.astype(np.int64))).filter(pa.array(keep))


#: Delta's ``delta.optimize.maxDeletedRowsRatio``: OPTIMIZE also rewrites a file of any size
#: whose deletion vector deletes more than this share of its rows
MAX_DELETED_ROWS_RATIO = 0.05


def files_to_purge(files: pa.Table, all_with_dv: bool) -> np.ndarray:
    """Files whose DV must be purged: every file with one (REORG), or those over the ratio."""
    dv = files.column("deletionVector")
    has = pc.is_valid(dv).to_numpy(zero_copy_only=False)
    if all_with_dv or not has.any():
        return has
    from ...txnlog.row_tracking import physical_records

    deleted = pc.fill_null(pc.struct_field(dv, "cardinality"), 0).to_numpy(zero_copy_only=False)
    records = np.where(has, 0, 1).astype(np.int64)
    records[has] = physical_records(files.filter(pa.array(has)))
    return has & (deleted > MAX_DELETED_ROWS_RATIO * np.maximum(records, 1))


def _write_options(tx: "Transaction") -> WriteOptions:
    """The table's write options, but one file per bin (no size cut, one writer)."""
    opts = write_options(tx)
    opts.target_file_rows = opts.target_file_bytes = _HUGE
    opts.max_workers = 1
    return opts


def files_in_partitions(tx: "Transaction", where: str | Expr | None,
                        operation: str = "OPTIMIZE") -> tuple[Expr | None, pa.Table]:
    """The bound ``where`` (partition columns only, as Delta requires) and the files it selects.

    ``operation`` names the command in the refusal: REORG shares this selection, and a user who
    called ``reorg(where=...)`` should not be told about an OPTIMIZE they did not run."""
    schema, partition_columns = tx.schema, tx.partition_columns
    files = tx.current_files()
    if where is None:
        return None, files
    pred = bind_predicate(parse_predicate(where) if isinstance(where, str) else where, schema)
    outside = sorted(pred.columns() - set(partition_columns))
    if outside:
        raise PredicateError(  # Delta's wording first (delta-spark's tests look for it)
            f"Predicate references non-partition column '{outside[0]}'. Only the partition columns may be "
            f"referenced: [{', '.join(partition_columns)}]. {operation} where= selects partitions: it rewrites "
            f"whole files, so it cannot select rows."
        )
    if files.num_rows:
        files = files.filter(files_matching(pred, files, schema, partition_columns, use_stats=False))
    return pred, files


def stage_optimize(tx: "Transaction", where: str | None = None, target_size: int | None = None,
                   purge_only: bool = False, auto: bool = False) -> dict[str, Any]:
    """Compact small files (optionally only in the partitions ``where`` selects); returns metrics.

    Files whose deletion vectors delete many rows are rewritten too (their DVs purged).
    ``purge_only`` is REORG ... APPLY (PURGE): rewrite exactly the files that have a DV.
    """
    started = time.perf_counter()
    keys = column_mapping.partition_keys(tx.metadata, tx.schema)  # partitionValues keys
    target = target_file_size(tx.properties, target_size)
    pred, files = files_in_partitions(tx, where, "REORG" if purge_only else "OPTIMIZE")
    considered = files.num_rows
    purge = files_to_purge(files, purge_only) if files.num_rows else None
    if purge_only:
        files, purge = (files.filter(pa.array(purge)) if purge is not None else files), None
        planned = plan_bins(files, keys, _HUGE, np.ones(files.num_rows, dtype=bool))
    else:
        planned = plan_bins(files, keys, target, purge)
    compacted, adds = stage_rewrite(tx, planned, pred)
    metrics = rewrite_metrics(tx, planned, compacted, adds, considered, started)
    params = {"predicate": [str(pred)] if pred is not None else [], "targetSize": target,
              "zOrderBy": [], "auto": auto}  # Delta's OPTIMIZE parameters (auto: an auto compaction)
    if purge_only:
        tx.note_operation("REORG", {"predicate": params["predicate"], "applyPurge": True}, metrics, changes_data=False)
    else:
        tx.note_operation("OPTIMIZE", params, metrics, changes_data=False)
    return metrics


def stage_rewrite(tx: "Transaction", planned: pa.Table, pred: Expr | None,
                  layout: "Layout | None" = None) -> tuple[pa.Table, pa.Table]:
    """Rewrite each bin of ``planned`` as new files and stage removes + adds (dataChange=false).

    ``layout`` (clustering, Z-order) orders each bin's rows and cuts and tags its files; without
    it a bin becomes one file. Returns (the files removed, the add actions)."""
    compacted = planned.drop_columns(["bin"])
    # The read is the compacted files themselves (by path): without a where=, FALSE rather than
    # "the whole table", so that concurrent changes to files it does not touch never conflict.
    tx.record_read(pred if pred is not None else FALSE, compacted)

    adds = _compact(tx, planned, layout)
    if compacted.num_rows:
        tx.stage_removes(compacted, data_change=False)
        tx.stage_adds(adds)
        if uses_deletion_vectors(tx):
            tx.row_level.note_compaction_output(adds.column("path").to_pylist())
    return compacted, adds


def rewrite_metrics(tx: "Transaction", planned: pa.Table, compacted: pa.Table, adds: pa.Table,
                    considered: int, started: float) -> dict[str, Any]:
    """Delta's OPTIMIZE metrics of one rewrite."""
    removed_bytes, added_bytes = total_size(compacted), total_size(adds)
    keys = column_mapping.partition_keys(tx.metadata, tx.schema)
    partitions = len(np.unique(partition_codes(compacted, keys))) if compacted.num_rows else 0
    return {
        "numRemovedFiles": compacted.num_rows,
        "numAddedFiles": adds.num_rows,
        "numRemovedBytes": removed_bytes,
        "numAddedBytes": added_bytes,
        "numFilesRemoved": compacted.num_rows,
        "numFilesAdded": adds.num_rows,
        "partitionsOptimized": partitions,
        "numBatches": len(pc.unique(planned["bin"])) if planned.num_rows else 0,
        "totalConsideredFiles": considered,
        "totalFilesSkipped": considered - compacted.num_rows,
        "numDeletionVectorsRemoved": with_deletion_vectors(compacted),
        **file_size_distribution(adds["size"] if adds.num_rows else pa.array([], pa.int64())),
        # the rows those DVs deleted (their cardinality), as Delta's OPTIMIZE reports them
        "numDeletionVectorRowsRemoved": int(pc.sum(pc.struct_field(compacted["deletionVector"], "cardinality"))
                                            .as_py() or 0) if compacted.num_rows else 0,
        "executionTimeMs": int((time.perf_counter() - started) * 1000),
    }


def _compact(tx: "Transaction", planned: pa.Table, layout: "Layout | None" = None) -> pa.Table:
    """Read each bin and write it back (one file, or as ``layout`` orders and cuts it); add
    actions (dataChange=false)."""
    from ...txnlog.actions import FILE_SCHEMA

    if not planned.num_rows:
        return FILE_SCHEMA.empty_table()
    bin_ids = planned["bin"].to_numpy()
    order = np.argsort(bin_ids, kind="stable")
    bounds = np.flatnonzero(np.r_[True, bin_ids[order][1:] != bin_ids[order][:-1], True])
    groups = [order[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]
    schema, partition_columns, options = tx.schema, tx.partition_columns, _write_options(tx)
    record = uses_deletion_vectors(tx)
    meta = ([ROW_INDEX, FILE_PATH] if record else []) + row_columns(tx, False)
    names = materialized(tx) if meta else None

    def one(rows_of_bin: np.ndarray) -> pa.Table:
        files = planned.take(pa.array(rows_of_bin))
        data = read_files(tx.store, files, schema, partition_columns,
                          columns=schema.names + meta if meta else None, materialized=names,
                          column_mapping=options.column_mapping)
        if record:
            _record_sources(tx, files, data)
        file_schema, opts = schema, options
        if layout is not None:
            data, cuts = layout.arrange(data, files)
        if meta:
            data, file_schema, unindexed = physical(tx, data)
            opts = dataclasses.replace(options, unindexed_columns=unindexed)
        if layout is not None:
            return layout.write(tx.store, data, cuts, file_schema, partition_columns, opts)
        return write_data_files(tx.store, data, file_schema, partition_columns, opts, data_change=False)

    with ThreadPoolExecutor(max_workers=_PARALLEL_BINS) as pool:
        futures = [pool.submit(one, g) for g in groups]
    written = [f.result() for f in futures if f.exception() is None]
    failed = next((f.exception() for f in futures if f.exception() is not None), None)
    if failed is not None:  # undo the bins already written: nothing references them
        for adds in written:
            tx.store.delete_files(_decoded_paths(adds))
        raise failed
    return pa.concat_tables(written) if written else FILE_SCHEMA.empty_table()


def _record_sources(tx: "Transaction", files: pa.Table, data: pa.Table) -> None:
    """Each compacted file, row by row (positions and row ids of its live rows): a concurrent DML
    that deletes some of them is carried over into the new files instead of failing."""
    paths = data.column(FILE_PATH)
    for i, path in enumerate(files.column("path").to_pylist()):
        rows = data.filter(pc.equal(paths, path))
        positions = rows.column(ROW_INDEX).to_numpy()
        file = files.slice(i, 1).select([c for c in files.column_names if c != "bin"]).to_pylist()[0]
        ids = rows.column(ROW_ID) if ROW_ID in rows.column_names else None
        row_ids = ids.to_numpy(zero_copy_only=False) if ids is not None and ids.null_count == 0 else None
        base = load_bitmap(tx.store, file["deletionVector"], path)
        tx.row_level.record(file, base, read=positions, row_positions=positions if row_ids is not None else None,
                            row_ids=row_ids, compaction=True)


def _decoded_paths(adds: pa.Table) -> list[str]:
    from ...io.paths import decode_path

    return [decode_path(p) for p in adds["path"].to_pylist()]


# --------------------------------------------------------------------------------------------
# Auto-compaction's trigger
# --------------------------------------------------------------------------------------------


def partitions_needing_compaction(snapshot: "Snapshot", min_files: int) -> str | None:
    """A SQL predicate naming the partitions with more than ``min_files`` small files, or None.

    ``"true"`` for an unpartitioned table that needs it; otherwise an OR of one conjunction of
    partition values per partition (``part = 1 OR part = 3``).
    """
    files = snapshot.files
    if files.num_rows <= min_files:
        return None
    target = target_file_size(snapshot.properties)
    small = files.filter(pc.less(files["size"], target))
    if small.num_rows <= min_files:
        return None
    partition_columns = snapshot.partition_columns
    if not partition_columns:
        return "true"
    strings = _partition_strings(small, column_mapping.partition_keys(snapshot.metadata, snapshot.schema))
    names = [f"__p{i}" for i in range(len(partition_columns))]
    counts = pa.table(dict(zip(names, strings))).group_by(names, use_threads=False).aggregate([([], "count_all")])
    busy = counts.filter(pc.greater(counts["count_all"], min_files))
    if not busy.num_rows:
        return None
    schema = snapshot.schema
    conjunctions = []
    for col, name in zip(partition_columns, names):
        field = schema.field(col)
        typed = parse_partition_values(busy[name], field.type, col).to_pylist()
        conjunctions.append([
            IsNull(Column(col)) if v is None else Comparison("=", Column(col), Literal(v, plain_type(field.type)))
            for v in typed
        ])
    return str(or_all(and_all(terms) for terms in zip(*conjunctions)))
