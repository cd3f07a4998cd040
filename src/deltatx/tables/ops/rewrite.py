"""Copy-on-write building blocks shared by DELETE, UPDATE, MERGE and replaceWhere.

Only files that can hold affected rows are touched: candidates are pruned by partition values
and min/max stats, then each candidate is read and rewritten only if a row really matches.
A predicate over partition columns alone removes whole files without reading them.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable

import pyarrow as pa
import pyarrow.compute as pc

from ...expr import Expr, matches, references_only
from ...io.reader import read_files
from ...io.writer import WriteOptions, write_data_files
from .. import properties as props

if TYPE_CHECKING:
    from ..transaction import Transaction


def write_options(tx: "Transaction") -> WriteOptions:
    p = tx.properties
    opts = WriteOptions()
    opts.num_indexed_cols = props.int_property(p, props.NUM_INDEXED_COLS, opts.num_indexed_cols)
    return opts


def write_files(tx: "Transaction", data: pa.Table | pa.RecordBatchReader, schema: pa.Schema | None = None,
                data_change: bool = True) -> pa.Table:
    """Write data files for this transaction's table; returns add actions (not yet staged)."""
    return write_data_files(tx.store, data, schema or tx.schema, tx.partition_columns, write_options(tx),
                            data_change=data_change)


def num_records(files: pa.Table) -> int:
    """Rows the files hold: ``numRecords`` from their stats (columnar; files without stats count
    0), less the rows their deletion vectors delete (``numRecords`` counts those too)."""
    if not files.num_rows:
        return 0
    found = pc.extract_regex(files["stats"], r'"numRecords":(?P<n>\d+)')
    nums = pc.cast(pc.struct_field(found, "n"), pa.int64())
    total = pc.sum(nums).as_py() or 0
    if "deletionVector" in files.column_names and files.column("deletionVector").null_count < files.num_rows:
        total -= pc.sum(pc.struct_field(files.column("deletionVector"), "cardinality")).as_py() or 0
    return total


def is_partition_only(pred: Expr, partition_columns: list[str]) -> bool:
    return bool(partition_columns) and references_only(pred, partition_columns)


def _read_each(tx: "Transaction", files: pa.Table) -> list[pa.Table]:
    """Read candidate files one table per file (parallel), as the txn's schema."""
    def one(i: int) -> pa.Table:
        return read_files(tx.store, files.slice(i, 1), tx.schema, tx.partition_columns)

    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(one, range(files.num_rows)))


def rewrite_files(tx: "Transaction", pred: Expr | None,
                  transform: Callable[[pa.Table, pa.ChunkedArray], tuple[pa.Table, int]]) -> dict[str, int]:
    """Scan with ``pred`` (recorded as the read), and rewrite every file holding a matching row.

    ``transform(rows, matches)`` returns (rows to write back, number of rows affected), where
    ``matches`` is the boolean "predicate is TRUE" mask of ``rows``.
    """
    _, candidates = tx.scan(pred)
    metrics = {"numRemovedFiles": 0, "numAddedFiles": 0, "numAffectedRows": 0, "numCopiedRows": 0,
               "numFilesRead": candidates.num_rows}
    if not candidates.num_rows:
        return metrics
    touched: list[int] = []
    outputs: list[pa.Table] = []
    for i, rows in enumerate(_read_each(tx, candidates)):
        if pred is None:
            mask = pa.chunked_array([pa.repeat(pa.scalar(True), rows.num_rows)], pa.bool_())
        else:
            mask = matches(pred, rows)  # TRUE rows; NULL counts as not matched
            if not isinstance(mask, pa.ChunkedArray):
                mask = pa.chunked_array([mask], pa.bool_())
        n = pc.sum(pc.cast(mask, pa.int64())).as_py() or 0
        if n == 0:
            continue
        out, affected = transform(rows, mask)
        touched.append(i)
        metrics["numAffectedRows"] += affected
        metrics["numCopiedRows"] += rows.num_rows - affected
        if out.num_rows:
            outputs.append(out)
    if not touched:
        return metrics
    removed = candidates.take(pa.array(touched, pa.int64()))
    tx.stage_removes(removed)
    metrics["numRemovedFiles"] = removed.num_rows
    if outputs:
        adds = write_files(tx, pa.concat_tables(outputs))
        tx.stage_adds(adds)
        metrics["numAddedFiles"] = adds.num_rows
    return metrics


def remove_matching_rows(tx: "Transaction", pred: Expr | None) -> dict[str, int]:
    """DELETE's core: drop rows where ``pred`` is TRUE (None = every row)."""
    if pred is None or is_partition_only(pred, tx.partition_columns):
        # Whole files go: no need to read them. Their rows are counted from stats.
        _, files = tx.scan(pred)
        tx.stage_removes(files)
        return {"numRemovedFiles": files.num_rows, "numAddedFiles": 0, "numDeletedRows": num_records(files),
                "numCopiedRows": 0, "numFilesRead": 0}

    def drop(rows: pa.Table, matches: pa.ChunkedArray) -> tuple[pa.Table, int]:
        keep = pc.invert(matches)
        kept = rows.filter(keep)
        return kept, rows.num_rows - kept.num_rows

    m = rewrite_files(tx, pred, drop)
    m["numDeletedRows"] = m.pop("numAffectedRows")
    return m
