"""Dynamic partition overwrite: replace exactly the partitions the new data writes into.

Delta's ``partitionOverwriteMode=dynamic`` (delta-spark's write option and session conf, here
also ``Table.overwrite(data, partition_overwrite_mode="dynamic")``): the new files are written
first, then every file of the partitions they land in is removed in the same commit; partitions
the data does not touch stay as they are. An unpartitioned table is overwritten whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from ...expr import FALSE, Column, Comparison, Expr, In, IsNull, Literal, Or, and_all
from ...expr.values import plain_type
from ...txnlog.partition_values import partition_values_table

if TYPE_CHECKING:
    from ..transaction import Transaction

STATIC, DYNAMIC = "static", "dynamic"


def partitions_predicate(tx: "Transaction", adds: pa.Table) -> Expr:
    """The partitions ``adds`` land in, as a predicate on the partition columns.

    Typed values parsed from the adds' ``partitionValues`` (so NULL partitions are ``IS NULL``,
    and column mapping's physical keys are honoured); one ``IN`` list for a single partition
    column, otherwise an OR of one conjunction per partition, built as a balanced tree so that
    thousands of partitions do not nest thousands deep. No adds: FALSE (nothing is replaced).
    """
    columns = list(tx.partition_columns)
    schema = tx.schema
    values = partition_values_table(adds, schema, columns)
    if not values.num_rows:
        return FALSE
    distinct = values.group_by(values.column_names, use_threads=False).aggregate([])
    types = {c: plain_type(schema.field(c).type) for c in columns}
    if len(columns) == 1:
        c = columns[0]
        present = distinct.column(c).to_pylist()
        terms: list[Expr] = []
        known = [v for v in present if v is not None]
        if known:
            terms.append(In(Column(c), tuple(Literal(v, types[c]) for v in known)) if len(known) > 1
                         else Comparison("=", Column(c), Literal(known[0], types[c])))
        if len(known) < len(present):
            terms.append(IsNull(Column(c)))
        return _balanced_or(terms)
    conjunctions = [
        and_all(IsNull(Column(c)) if row[c] is None else Comparison("=", Column(c), Literal(row[c], types[c]))
                for c in columns)
        for row in distinct.to_pylist()
    ]
    return _balanced_or(conjunctions)


def _balanced_or(terms: list[Expr]) -> Expr:
    if not terms:
        return FALSE
    if len(terms) == 1:
        return terms[0]
    middle = len(terms) // 2
    return Or(_balanced_or(terms[:middle]), _balanced_or(terms[middle:]))


def stage_partition_overwrite(tx: "Transaction", adds: pa.Table) -> int:
    """Dynamic partition overwrite (Delta's WriteIntoDelta with partitionOverwriteMode=dynamic):
    remove every file of exactly the partitions ``adds`` write into; returns how many.

    ``tx.scan`` with the partitions' predicate both selects those files (partition pruning is
    exact on a partition-only predicate) and records it as this transaction's read, so the
    conflict checker treats a concurrent write into one of those partitions as a conflict and
    one into any other partition as none — the same footprint as a replaceWhere on them.
    Must run before ``adds`` are staged (their own files are not the table's yet).
    """
    from . import change_feed

    _, files = tx.scan(partitions_predicate(tx, adds))
    change_feed.files_leaving(tx, files)
    tx.stage_removes(files)
    return files.num_rows


def overwrite_mode(value: str | None) -> str:
    """``static`` (the default: replace the whole table, or what ``where`` names) or ``dynamic``."""
    from ...errors import InvalidArgumentError

    mode = (value or STATIC).strip().lower()
    if mode not in (STATIC, DYNAMIC):
        raise InvalidArgumentError(f"partition_overwrite_mode must be 'static' or 'dynamic', got {value!r}")
    return mode
