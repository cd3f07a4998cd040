"""APPEND and OVERWRITE (with an optional replaceWhere predicate), as staged actions.

An append that reads nothing is a *blind append* — the operation Delta's conflict rules let
through almost everything. An overwrite reads what it replaces: the whole table, or the files
its ``where`` predicate selects (that predicate is its read predicate for conflict detection).
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InvalidArgumentError, ReplaceWhereViolationError
from ...expr import Expr, bind_predicate, parse_predicate, to_arrow
from ...io.reader import raise_if_filter_failed
from ..constraints import WriteRules, rules_for
from ..data import Widening, conform, conform_table, data_schema, resolve_write_schema, to_reader, with_table_names
from ..identity import Origin, assigner, refuse_explicit_values
from . import change_feed
from .partition_overwrite import DYNAMIC, overwrite_mode, stage_partition_overwrite
from .rewrite import num_records, remove_matching_rows, write_files
from .columns import refuse_dependent_type_changes

if TYPE_CHECKING:
    from ..transaction import Transaction


def _evolve_schema(tx: "Transaction", incoming: pa.Schema, schema_mode: str | None) -> pa.Schema:
    """The schema after this write; stages a metaData action when it grows (schema merge)."""
    from ...txnlog.schema import schema_to_json

    target = resolve_write_schema(tx.schema, incoming, schema_mode, column_mapped=tx.column_mapping is not None,
                                  widening=Widening.of(tx.properties, tx.protocol))
    if not target.equals(tx.schema):
        refuse_dependent_type_changes(tx, tx.schema, target, evolution=True)
        tx.stage_metadata(tx.metadata.replace(schema_string=schema_to_json(target)))
        return tx.schema  # as staged: new columns carry their column-mapping ids, if mapped
    return target


def _computed_columns(tx: "Transaction", incoming: pa.Schema, what: str) -> frozenset[str]:
    """Generated and identity columns the data leaves out (the write computes them); refuses
    values for GENERATED ALWAYS identity columns before anything is written."""
    rules = rules_for(tx.schema, tx.properties, tx.protocol)
    if rules is None:
        return frozenset()
    refuse_explicit_values(rules.identity, set(incoming.names), what)
    return rules.absent_from(incoming.names)


def _with_computed(tx: "Transaction", table: pa.Table, schema: pa.Schema, absent: frozenset[str]) -> pa.Table:
    """Only the computed columns filled in (the rules are checked when the rows are written)."""
    rules = rules_for(tx.schema, tx.properties, tx.protocol)
    assert rules is not None
    only_fill = WriteRules((), rules.generated, rules.identity)
    filled = only_fill.apply(table, schema, absent, assigner(tx) if rules.identity else None)
    return filled


def stage_append(tx: "Transaction", data: Any, *, schema_mode: str | None = None, app_id: str | None = None,
                 app_version: int | None = None) -> bool:
    """Write ``data`` as new files. Returns False when an idempotent (app_id, version) was skipped."""
    if (app_id is None) != (app_version is None):
        raise InvalidArgumentError("app_id and app_version go together: pass both (an idempotent write) or neither")
    if app_version is not None and (isinstance(app_version, bool) or not isinstance(app_version, numbers.Integral)):
        raise InvalidArgumentError(f"app_version must be an integer (the app's batch number), got {app_version!r}")
    if app_id is not None:
        last = tx.app_version(app_id)
        if last is not None and int(app_version) <= last:
            tx.note_operation("WRITE", {"mode": "Append", "skipped": True}, {}, changes_data=False)
            return False
    reader = with_table_names(to_reader(data), tx.schema)  # ID writes id: Delta ignores case
    schema = _evolve_schema(tx, data_schema(reader), schema_mode)
    absent = _computed_columns(tx, reader.schema, "append")
    adds = write_files(tx, conform(reader, schema, absent), schema, absent=absent, origin=Origin.new_rows(absent))
    tx.stage_adds(adds)
    if app_id is not None:
        tx.stage_txn(app_id, int(app_version))
    tx.note_operation(
        "WRITE",
        {"mode": "Append", "partitionBy": tx.partition_columns},
        {"numFiles": adds.num_rows, "numOutputRows": num_records(adds), "numOutputBytes": pc.sum(adds["size"]).as_py() or 0},
    )
    return True


def stage_overwrite(tx: "Transaction", data: Any, *, where: str | None = None, schema_mode: str | None = None,
                    partition_overwrite_mode: str | None = None) -> None:
    """Replace the whole table, only the rows matching ``where`` (replaceWhere), or with
    ``partition_overwrite_mode="dynamic"`` only the partitions the data writes into."""
    dynamic = overwrite_mode(partition_overwrite_mode) == DYNAMIC and bool(tx.partition_columns)
    if dynamic and where is not None:
        raise InvalidArgumentError("a dynamic partition overwrite replaces the partitions the data writes into; "
                                   "it cannot also take where= (replaceWhere)")
    reader = with_table_names(to_reader(data), tx.schema)  # ID writes id: Delta ignores case
    schema = _evolve_schema(tx, data_schema(reader), schema_mode)
    absent = _computed_columns(tx, reader.schema, "overwrite")
    params: dict[str, Any] = {"mode": "Overwrite", "partitionBy": tx.partition_columns}
    origin = Origin.new_rows(absent)
    if dynamic:
        adds = write_files(tx, conform(reader, schema, absent), schema, absent=absent, origin=origin)
        removed, deleted_rows = stage_partition_overwrite(tx, adds), None
    elif where is None:
        _, files = tx.scan(None)
        removed = files.num_rows
        change_feed.files_leaving(tx, files)
        tx.stage_removes(files)
        adds = write_files(tx, conform(reader, schema, absent), schema, absent=absent, origin=origin)
        deleted_rows = None
    else:
        pred = bind_predicate(parse_predicate(where), schema)
        params["predicate"] = where if isinstance(where, str) else str(pred)  # Delta's WRITE: the text as given
        table = conform_table(reader, schema, absent)
        if absent:  # generated columns first: replaceWhere often names one (a generated partition)
            table = _with_computed(tx, table, schema, absent)
            absent = frozenset()
        bad = table.num_rows - _rows_matching(table, pred, schema)
        if bad:
            raise ReplaceWhereViolationError(
                f"{bad} of {table.num_rows} new row(s) do not satisfy replaceWhere predicate {str(pred)!r}; "
                f"overwrite(where=...) only replaces rows matching the predicate, so every new row must match it"
            )
        stats = remove_matching_rows(tx, pred)
        removed, deleted_rows = stats["numRemovedFiles"], stats["numDeletedRows"]
        adds = write_files(tx, table, schema, origin=origin)
    tx.stage_adds(adds)
    metrics = {"numFiles": adds.num_rows, "numOutputRows": num_records(adds), "numRemovedFiles": removed,
               "numOutputBytes": pc.sum(adds["size"]).as_py() or 0}
    if deleted_rows is not None:
        metrics["numDeletedRows"] = deleted_rows
    tx.note_operation("WRITE", params, metrics)


def _rows_matching(table: pa.Table, pred: Expr, schema: pa.Schema) -> int:
    """How many of the new rows ``pred`` (replaceWhere) selects; a value it cannot compute (a
    CAST that fails on one of them) is a PredicateError, as on a read."""
    row_filter = to_arrow(pred, schema)
    try:
        return table.filter(row_filter).num_rows
    except pa.ArrowInvalid as exc:
        raise_if_filter_failed(exc, row_filter)
        raise
