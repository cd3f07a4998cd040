"""Change data feed, write side: the changed rows of DELETE/UPDATE/MERGE as ``_change_data/`` files.

With ``delta.enableChangeDataFeed=true`` (PROTOCOL.md "Change Data Files", "Add CDC File") a
commit that changes rows *inside* files carries ``cdc`` actions: Parquet files under
``_change_data/`` (partitioned like the table) holding the changed rows plus ``_change_type``
(``delete``, ``update_preimage``, ``update_postimage``, ``insert``). A reader of such a commit takes
its cdc files **instead of** its adds and removes, so once a commit has cdc files every change of
it must be in them (a MERGE's inserts too).

Commits that only add files (appends, insert-only MERGEs) or only remove whole files (DELETE by
partition) need none: readers turn their adds into inserts and removes into deletes. So:

- operations call :func:`record_changes` with the rows they changed and :func:`cover` with the
  files those rows describe (the rewritten inputs and outputs); nothing is written yet;
- at commit, :func:`stage_change_files` writes one set of change files for the whole
  transaction. If some of its file actions are not covered (an append and an UPDATE in one
  transaction, a replaceWhere that drops whole files and rewrites others) their rows are read
  back and recorded as inserts / deletes, because the reader will not look at them.

Nothing here runs unless the feature is on: :func:`enabled` is checked by each operation once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...io.reader import read_files
from ...io.variant_storage import storable
from ...io.writer import WriteOptions, write_data_files
from ...txnlog.actions import CDC_SCHEMA
from ...errors import ChangeDataFeedError, SchemaMismatchError
from ...txnlog.change_feed import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION
from ...txnlog.features import writer_features
from ...txnlog.struct_nulls import converted
from .. import properties as props

if TYPE_CHECKING:
    from ...txnlog.column_mapping import ColumnMapping
    from ...txnlog.store import LogStore
    from ..transaction import Transaction

CHANGE_DATA_DIR = "_change_data"
DELETE = "delete"
INSERT = "insert"
UPDATE_PREIMAGE = "update_preimage"
UPDATE_POSTIMAGE = "update_postimage"


@dataclass
class ChangeRecorder:
    """What one transaction's operations changed: rows per change type, and the file paths whose
    add/remove actions those rows already describe."""

    rows: list[pa.Table] = field(default_factory=list)
    covered: set[str] = field(default_factory=set)


def enabled(tx: "Transaction") -> bool:
    """The transaction must write change data: the property is on and the protocol has the feature
    (on writer 7 a table honours the property only when it lists ``changeDataFeed``)."""
    return props.flag(tx.properties, props.ENABLE_CHANGE_DATA_FEED, False) and \
        "changeDataFeed" in writer_features(tx.protocol)


def check_reserved_columns(schema: pa.Schema, configuration: dict[str, str]) -> None:
    """Refuse a table with the change data feed on whose columns take the feed's own names
    (``_change_type``, ``_commit_version``, ``_commit_timestamp``; compared case-insensitively):
    its change rows could not carry both, and no engine could read its feed. Delta refuses such
    a table when the feed is turned on (DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS) and such a
    column while it is on (RESERVED_CDC_COLUMNS_ON_WRITE)."""
    if not props.flag(configuration, props.ENABLE_CHANGE_DATA_FEED, False):
        return
    reserved = {name.lower() for name in (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)}
    clash = [name for name in schema.names if name.lower() in reserved]
    if clash:
        raise SchemaMismatchError(
            f"column(s) {clash} use names the change data feed reserves for its own columns "
            f"({CHANGE_TYPE}, {COMMIT_VERSION}, {COMMIT_TIMESTAMP}): rename them, or leave "
            f"{props.ENABLE_CHANGE_DATA_FEED} off")


def change_schema(schema: pa.Schema) -> pa.Schema:
    """A change data file's logical schema: the table's columns plus ``_change_type``."""
    return pa.schema(list(schema) + [pa.field(CHANGE_TYPE, pa.string())], metadata=schema.metadata)


def _recorder(tx: "Transaction") -> ChangeRecorder:
    if tx.changes is None:
        tx.changes = ChangeRecorder()
    return tx.changes


def record_changes(tx: "Transaction", rows: pa.Table | None, change_type: str) -> None:
    """Record ``rows`` (table columns; ``_metadata.*`` columns are dropped) as ``change_type``."""
    if rows is None or not rows.num_rows:
        return
    data = rows.select([n for n in tx.schema.names if n in rows.column_names])
    data = data.append_column(pa.field(CHANGE_TYPE, pa.string()),
                              pa.array([change_type] * data.num_rows, pa.string()))
    _recorder(tx).rows.append(data)


def cover(tx: "Transaction", files: pa.Table | None, *, inputs: bool = False) -> None:
    """The add/remove actions of ``files`` are described by recorded change rows. Among the
    ``inputs`` of a DML, the files this transaction wrote itself are not: their rows were never
    committed, so the feed shows them as inserts in the form the commit leaves them (read back
    at commit when such a file stays, with a DV; recorded by the DML as inserts where it
    rewrote them: :func:`own_rows`)."""
    if files is not None and files.num_rows:
        paths = files.column("path").to_pylist()
        _recorder(tx).covered.update(p for p in paths if not (inputs and tx.is_own_file(p)))


def own_rows(tx: "Transaction", paths: list[str], counts: list[int] | np.ndarray) -> np.ndarray | None:
    """Per row of files ``paths`` (``counts`` rows each, in order): is it a row this transaction
    appended itself (a file no recorded change describes: every row an insert)? None when none
    is (the usual case). Rows of files an earlier DML of the transaction wrote are
    :func:`described_rows`."""
    own = [tx.is_own_file(p) and not describes(tx, p) for p in paths]
    if not any(own):
        return None
    return np.repeat(np.array(own, dtype=bool), np.asarray(counts, dtype=np.int64))


def described_rows(tx: "Transaction", paths: list[str], counts: list[int] | np.ndarray) -> np.ndarray | None:
    """Per row of files ``paths``: is it in a file an earlier DML of this transaction wrote (its
    rows are copies of committed rows, or rows the recorded changes hold)? None when none is."""
    mine = [tx.is_own_file(p) and describes(tx, p) for p in paths]
    if not any(mine):
        return None
    return np.repeat(np.array(mine, dtype=bool), np.asarray(counts, dtype=np.int64))


def describes(tx: "Transaction", path: str) -> bool:
    """Do recorded changes describe the add of ``path`` (a file a DML of this transaction wrote)?"""
    return tx.changes is not None and path in tx.changes.covered


def amend(tx: "Transaction", before: pa.Table, after: pa.Table | None) -> None:
    """Rows of files an earlier DML of this transaction wrote change again: deleted (``after``
    None) or updated (``after``: their new form, row for row). The feed must show the commit's
    net change, so each row is found among what was recorded, by value:

    - an inserted row: the insert goes (deleted) or carries the new values (updated);
    - an update's post-image: it goes and its pre-image becomes a delete (deleted), or it carries
      the new values (updated) — the committed row was changed once, to its final form;
    - otherwise a committed row the earlier DML only copied: a delete, or a pre/post-image pair.

    Identical rows are interchangeable here: whichever copy is taken, the feed describes the
    same change. Rows are handled in Python: this only runs when one transaction changes the
    same rows twice."""
    if before is None or not before.num_rows:
        return
    recorder = _recorder(tx)
    names = list(tx.schema.names)
    recorded = pa.concat_tables(recorder.rows, promote_options="default") if recorder.rows else None
    entries = [] if recorded is None else [
        [tuple(row.get(n) for n in names), row[CHANGE_TYPE]] for row in recorded.to_pylist()]
    slots: dict[tuple[str, str], list[int]] = {}
    pre_order = [i for i, (_, kind) in enumerate(entries) if kind == UPDATE_PREIMAGE]
    post_order = [i for i, (_, kind) in enumerate(entries) if kind == UPDATE_POSTIMAGE]
    pair_of_post = {post: pre for pre, post in zip(pre_order, post_order)}
    for i, (values, kind) in enumerate(entries):
        if kind in (INSERT, UPDATE_POSTIMAGE):
            slots.setdefault((kind, repr(values)), []).append(i)
    gone: set[int] = set()
    olds = [tuple(row.get(n) for n in names) for row in before.to_pylist()]
    news = [tuple(row.get(n) for n in names) for row in after.to_pylist()] if after is not None else None
    for k, old in enumerate(olds):
        new = news[k] if news is not None else None
        key = repr(old)
        if slots.get((INSERT, key)):
            i = slots[(INSERT, key)].pop()
            if new is None:
                gone.add(i)
            else:
                entries[i][0] = new
        elif slots.get((UPDATE_POSTIMAGE, key)):
            i = slots[(UPDATE_POSTIMAGE, key)].pop()
            if new is None:
                gone.add(i)
                entries[pair_of_post[i]][1] = DELETE
            else:
                entries[i][0] = new
        elif new is None:
            entries.append([old, DELETE])
        else:
            entries.extend([[old, UPDATE_PREIMAGE], [new, UPDATE_POSTIMAGE]])
    kept = [dict(zip(names, values), **{CHANGE_TYPE: kind}) for i, (values, kind) in enumerate(entries)
            if i not in gone]
    recorder.rows = [pa.Table.from_pylist(kept, schema=change_schema(tx.schema))] if kept else []


def files_leaving(tx: "Transaction", files: pa.Table) -> None:
    """Whole files an operation removes without reading them (an overwrite, a DELETE by
    partition): those an earlier DML of this transaction wrote or re-added with a deletion
    vector hold rows no recorded change will otherwise account for once they are gone (the
    first DML covered their paths). Record them now, before the files are dropped."""
    recorder = tx.changes
    if recorder is None or not files.num_rows or not enabled(tx):
        return
    mine = pc.is_in(files["path"], value_set=pa.array(sorted(recorder.covered), pa.string()))
    if not pc.any(mine).as_py():
        return
    mine = files.filter(mine)
    written = pa.array([tx.is_own_file(p) for p in mine["path"].to_pylist()], pa.bool_())

    def rows_of(group: pa.Table) -> pa.Table | None:
        if not group.num_rows:
            return None
        return read_files(tx.store, group, tx.schema, tx.partition_columns, column_mapping=tx.column_mapping)

    # a committed file re-added with a deletion vector: its live rows are committed rows
    record_changes(tx, rows_of(mine.filter(pc.invert(written))), DELETE)
    amend(tx, rows_of(mine.filter(written)), None)


def _uncovered(files: pa.Table, covered: set[str]) -> pa.Table:
    """Data-changing file actions no recorded change rows describe."""
    if not files.num_rows:
        return files
    keep = pc.fill_null(files["dataChange"], True)
    if covered:
        keep = pc.and_(keep, pc.invert(pc.is_in(files["path"], value_set=pa.array(sorted(covered), pa.string()))))
    return files.filter(keep)


def stage_change_files(tx: "Transaction") -> None:
    """Write the recorded change rows as ``_change_data/`` files and stage their ``cdc`` actions.

    Called by the transaction right before it commits. Does nothing when no operation recorded
    rows (appends, whole-file deletes, OPTIMIZE): readers use the adds and removes then.
    """
    if tx.removed_without_feed and enabled(tx):
        # The feed was turned on by this transaction after a DELETE/UPDATE/MERGE/overwrite that
        # recorded nothing: readers would take the commit's adds and removes as the change, so
        # every row of a rewritten file would read as deleted and inserted again.
        raise ChangeDataFeedError(
            f"{props.ENABLE_CHANGE_DATA_FEED} was turned on in this transaction after it changed rows with the "
            f"feed off, so the commit could not say what changed: turn the feed on first (or in its own "
            f"commit); nothing was committed")
    recorder = tx.changes
    if recorder is None or not recorder.rows or not enabled(tx):
        return
    schema, partitions, mapping = tx.schema, tx.partition_columns, tx.column_mapping
    adds, removes = tx.staged_file_actions()
    inserted, deleted = _uncovered(adds, recorder.covered), _uncovered(removes, recorder.covered)
    if inserted.num_rows:  # an append in the same transaction: its rows join the feed as inserts
        record_changes(tx, read_files(tx.store, inserted, schema, partitions, column_mapping=mapping), INSERT)
    if deleted.num_rows:  # whole files removed (their deletion vectors applied): deletes
        record_changes(tx, read_files(tx.store, deleted, schema, partitions, column_mapping=mapping), DELETE)
    cdc = write_change_files(tx.store, schema, partitions, recorder.rows, mapping)
    tx.stage_cdc(cdc)
    tx.note_change_files(cdc.num_rows)


def write_change_files(store: "LogStore", schema: pa.Schema, partition_columns: list[str],
                       parts: list[pa.Table], column_mapping: "ColumnMapping | None" = None) -> pa.Table:
    """Write recorded change rows (table columns + ``_change_type``) as ``_change_data/`` files
    and return their ``cdc`` actions (not staged: a Spark DML task writes its own share of the
    change files with this and hands the actions to the driver's one commit). On a
    column-mapped table they hold physical columns and partition values, as data files do
    (PROTOCOL.md, Column Mapping: every data file a writer writes)."""
    target = change_schema(schema)
    if not parts:
        return CDC_SCHEMA.empty_table()
    data = pa.concat_tables(parts, promote_options="default") if len(parts) > 1 else parts[0]
    data = storable(data.select(target.names))  # storable: NULL variants cast too
    data = pa.table([pa.chunked_array([converted(c, f.type, pa.Array.cast) for c in data.column(i).chunks], f.type)
                     for i, f in enumerate(target)], schema=target)  # NULL structs over NOT NULL fields too
    options = WriteOptions(directory=CHANGE_DATA_DIR, num_indexed_cols=0, column_mapping=column_mapping)
    written = write_data_files(store, data, target, partition_columns, options, data_change=False)
    return _cdc_actions(written)


def _cdc_actions(written: pa.Table) -> pa.Table:
    """``cdc`` actions for files the writer made (it returns add actions): no stats, dataChange=false."""
    n = written.num_rows
    return pa.table({
        "path": written["path"],
        "partitionValues": written["partitionValues"],
        "size": written["size"],
        "dataChange": pa.array([False] * n, pa.bool_()),
        "tags": pa.nulls(n, CDC_SCHEMA.field("tags").type),
    }, schema=CDC_SCHEMA)
