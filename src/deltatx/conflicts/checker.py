"""The conflict checker: may a transaction that lost the commit race still commit after a winner?

Pure: no I/O, no clock, no store. Given what the current transaction read and staged
(:class:`TransactionInfo`) and one winning commit (a parsed :class:`CommitActions`), it either
returns the *rebased* transaction (the winner's protocol / allow-listed metadata adopted as the new
read-time state) or raises the exact :mod:`deltatx.errors` exception. The committer calls it once
per winner, oldest first, and retries at the next version::

    lost the race at version N
        for winner in N, N+1, ...:  txn = check_commit(txn, winner)   # raises on a real conflict
        put_if_absent(next version, re-serialized txn)

The checks run in Delta's order (``CHECKS``), one named function each:

1. ``protocol``        the winner's protocol must be readable and writable by deltatx; a
                       concurrent protocol change conflicts with ours; a feature removal conflicts.
2. ``metadata``        both change metadata → conflict; a winner-only change is tolerated only when
                       it adds/changes allow-listed configuration keys (Delta's list).
3. ``domains``         the same metadata domain written by both → conflict (not the row-tracking
                       watermark, which ``row_ids`` reconciles).
4. ``app_ids``         the winner set a ``txn`` version for an appId we looked up (or write).
5. ``backfill``        a row-tracking backfill that lost drops its re-adds of every path the
                       winner removed or added, and commits the rest (Delta's #5, backfill side).
6. ``row_ids``         row tracking (Delta's #5, #7, #8): files a winning backfill gave ids keep
                       them; ids this transaction handed out (above its read watermark) move above
                       the winner's watermark, and a watermark it writes never falls below the
                       winner's; adds stamped with the winner's version move past it.
7. ``row_level``       files both sides changed through deletion vectors are settled row by row
                       (:mod:`.row_level`): only a shared row conflicts (checked before added
                       files, so that a row both changed is reported as that); otherwise rebase
                       onto the union DV. OPTIMIZE and DML follow each other's rows by row id.
8. ``added_files``     the winner added files our read predicates could have matched. Candidates
                       depend on the isolation level (S: all adds; WS: adds of non-blind-append
                       winners unless we change metadata; SI: none). With ``use_stats`` a file
                       conflicts only if the *whole* predicate may match it by partition values
                       and min/max stats; without, Delta's partition-level rule applies. On
                       deletion-vector tables a DV re-add or a compaction's add holds no new rows.
9. ``deleted_read``    the winner removed a file we read (by path), or removed anything while we
                       read the whole table — except the files ``row_level`` settled.
10. ``deleted_deleted`` the winner removed a file we also remove (by path) — same exception.
11. ``enablement``     a commit that turns row tracking on conflicts with a winner that added
                       files without row ids (no Delta rule: Delta enables it only after a
                       backfill); last, so that Delta's own rules name what they also see.

The checks take the winner plus what the committer loaded for it (:class:`WinnerRows`: decoded
DVs, row-id columns); they never read storage themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, replace as dataclass_replace
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping, NoReturn, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
)
from ..expr import TRUE, Expr, files_matching, matches, partition_predicate
from ..isolation import IsolationLevel
from ..txnlog.actions import CommitActions
from ..txnlog.replay import only_rows, without_paths
from ..txnlog import column_mapping
from ..txnlog.schema import schema_from_json
from ..txnlog.stats import record_counts
from .hints import added_file_location, file_location, operation_name
from ..txnlog import row_tracking
from .metadata_rules import check_metadata, check_protocol
from .row_level import NO_ROWS, WinnerRows, resolve_row_level
from .txn_info import TransactionInfo

Check = Callable[[TransactionInfo, CommitActions, WinnerRows], TransactionInfo]

#: Delta's row-tracking watermark domain is reconciled by rebase, never a domain conflict
ROW_TRACKING_DOMAIN = "delta.rowTracking"


def _raise(cls: type, summary: str, winner: CommitActions, conflict: str | None = None) -> NoReturn:
    raise cls(
        summary,
        version=winner.version,
        operation=winner.operation,
        commit_info=winner.commit_info,
        conflict=conflict,
    )


# --------------------------------------------------------------------------------------------
# 1-2. protocol and metadata (rules in metadata_rules.py; adoption happens here)
# --------------------------------------------------------------------------------------------


def check_protocol_compatibility(txn: TransactionInfo, winner: CommitActions,
                                 loaded: WinnerRows = NO_ROWS) -> TransactionInfo:
    """The winner's protocol must be one we can read and write; then we adopt it."""
    if winner.protocol is None:
        return txn
    check_protocol(txn, winner)
    return txn.replace(read_protocol=winner.protocol)


def check_metadata_changes(txn: TransactionInfo, winner: CommitActions,
                           loaded: WinnerRows = NO_ROWS) -> TransactionInfo:
    """A concurrent metadata change conflicts unless it only adds allow-listed properties."""
    if winner.metadata is None:
        return txn
    check_metadata(txn, winner)
    return txn.replace(read_metadata=winner.metadata)


# --------------------------------------------------------------------------------------------
# 3-4. domains and application transaction ids
# --------------------------------------------------------------------------------------------


def check_domain_metadata(txn: TransactionInfo, winner: CommitActions,
                          loaded: WinnerRows = NO_ROWS) -> TransactionInfo:
    """The same metadata domain written by both transactions conflicts (last writer would win)."""
    if not txn.domains or not winner.domains:
        return txn
    theirs = {d.domain for d in winner.domains}
    for ours in txn.domains:
        if ours.domain in theirs and ours.domain != ROW_TRACKING_DOMAIN:
            _raise(
                ConcurrentTransactionException,
                f"this {txn.operation} and the concurrent {operation_name(winner.operation)} both "
                f"changed metadata domain '{ours.domain}'.",
                winner,
                conflict=f"domain {ours.domain}",
            )
    return txn


def check_app_transaction_ids(txn: TransactionInfo, winner: CommitActions,
                              loaded: WinnerRows = NO_ROWS) -> TransactionInfo:
    """The winner recorded a version for an application id this transaction depends on."""
    if not winner.txns:
        return txn
    used = txn.app_ids_used
    if not used:
        return txn
    for t in winner.txns:
        if t.app_id in used:
            _raise(
                ConcurrentTransactionException,
                f"the concurrent {operation_name(winner.operation)} committed txnVersion {t.version} "
                f"of application id '{t.app_id}', which this {txn.operation} also uses; two "
                f"instances of the same job or stream are running.",
                winner,
                conflict=f"appId {t.app_id}",
            )
    return txn


# --------------------------------------------------------------------------------------------
# 5. added files vs read predicates
# --------------------------------------------------------------------------------------------


def candidate_added_files(txn: TransactionInfo, winner: CommitActions) -> pa.Table | None:
    """The winner's adds this transaction must not have missed, by isolation level; None = none.

    - SnapshotIsolation: none (the commit changes no data).
    - a blind append (this transaction read nothing): none.
    - either side is a row-tracking backfill: none.
    - WriteSerializable: the winner's adds unless the winner is a blind append — blind appends
      may be ordered after us — except when this transaction changes metadata (then all).
    - Serializable: every add of the winner.
    """
    level = txn.isolation_level
    if level is IsolationLevel.SNAPSHOT_ISOLATION or txn.is_blind_append:
        return None
    if row_tracking.BACKFILL_OPERATION in (winner.operation, txn.operation):
        return None  # a backfill re-adds files to give them row ids: no rows come or go (Delta skips it too)
    if level is IsolationLevel.WRITE_SERIALIZABLE and winner.is_blind_append and not txn.changes_metadata:
        return None
    adds = winner.adds
    if adds.num_rows and txn.row_level is not None:
        # Row-level tables (deletion vectors on): a file removed and re-added in one commit (a DV
        # update) holds no new rows, nor does a file added with dataChange=false (a compaction
        # moves rows this transaction saw where they were). Delta counts both; Databricks'
        # row-level concurrency does not.
        adds = _new_rows_only(adds, winner.removes)
    return adds if adds.num_rows else None


def _new_rows_only(adds: pa.Table, removes: pa.Table) -> pa.Table:
    """The adds that bring rows: dataChange not false and not a re-add of a file the same commit
    removed whose DV kept every row the removed one deleted (a DV update changes no row but the
    ones it deletes). A re-add with a smaller DV — RESTORE to a version before some of the file's
    deletes — brings those rows back, and counts as new rows.

    Checked once per winner of every row-level commit, so it avoids copying the table: the few
    re-added files are looked at one by one, and the rows kept come back as the table itself or a
    slice when they can (taking or filtering the eleven nested columns of an add costs ~70 µs)."""
    if adds.num_rows <= _FEW_READDS:
        return only_rows(adds, pa.array(_bringing_rows_few(adds, removes), pa.bool_()))
    keep = pc.fill_null(adds["dataChange"], True).to_numpy(zero_copy_only=False).copy()
    if removes.num_rows:
        readds = np.flatnonzero(pc.is_in(adds["path"], value_set=removes["path"].combine_chunks())
                                .to_numpy(zero_copy_only=False))
        if len(readds):
            removed = dict(zip(removes.column("path").to_pylist(),
                               map(_dv_cardinality, removes.column("deletionVector").to_pylist())))
            paths, dvs = adds.column("path"), adds.column("deletionVector")
            if len(readds) <= _FEW_READDS:  # a DV update re-adds one or two files
                paths, dvs = [paths[i].as_py() for i in readds], [dvs[i].as_py() for i in readds]
            else:
                paths, dvs = paths.take(readds).to_pylist(), dvs.take(readds).to_pylist()
            for i, path, dv in zip(readds.tolist(), paths, dvs):
                if keep[i]:
                    keep[i] = _dv_cardinality(dv) < removed[path]
    return only_rows(adds, pa.array(keep, pa.bool_()))


#: up to this many re-added files are read one value at a time (a column take costs ~15 µs)
_FEW_READDS = 8


def _bringing_rows_few(adds: pa.Table, removes: pa.Table) -> list[bool]:
    """:func:`_new_rows_only`'s mask for a commit's few adds, in Python: a DV update's winner
    (one re-add, one new file) is checked by every concurrent writer, and the kernels the
    columnar path runs (fill_null, is_in, to_numpy) cost ~5–16 µs each on two rows."""
    keep = [flag is not False for flag in adds.column("dataChange").to_pylist()]
    if not removes.num_rows or not any(keep):
        return keep
    removed = dict(zip(removes.column("path").to_pylist(),
                       map(_dv_cardinality, removes.column("deletionVector").to_pylist())))
    dvs = adds.column("deletionVector")
    for i, path in enumerate(adds.column("path").to_pylist()):
        if keep[i] and path in removed:
            keep[i] = _dv_cardinality(dvs[i].as_py()) < removed[path]
    return keep


def _dv_cardinality(descriptor: Mapping[str, Any] | None) -> int:
    """Rows a DV descriptor deletes (0 without one): DVs of one file only grow, except by RESTORE."""
    return int(descriptor.get("cardinality") or 0) if descriptor else 0


def _physical_keys(txn: TransactionInfo) -> dict[str, str] | None:
    """Partition column -> its key in ``partitionValues`` (a column-mapped table's physical name)."""
    mapping = column_mapping.of(txn.read_metadata)
    if mapping is None:
        return None
    return {c: mapping.physical_name(c) for c in txn.read_metadata.partition_columns}


@lru_cache(maxsize=64)
def _read_schema(schema_string: str) -> pa.Schema:
    return schema_from_json(schema_string)


def _distinct(predicates: Sequence) -> list:
    out: list = []
    for p in predicates:
        if p not in out:
            out.append(p)
    return out


def _first_true(mask: pa.Array | pa.ChunkedArray) -> int | None:
    """Index of the first true (a null means "may match" and counts as true); None if none."""
    if len(mask) <= _FEW_READDS:  # a winner's few adds: three kernels cost ~15 µs
        return next((i for i, hit in enumerate(mask.to_pylist()) if hit is not False), None)
    mask = pc.fill_null(mask, True)
    if not pc.any(mask).as_py():
        return None
    return pc.index(mask, True).as_py()


def first_conflicting_add(txn: TransactionInfo, candidates: pa.Table) -> int | None:
    """Row index of the first candidate add that this transaction's reads could have matched.

    - whole-table read: any candidate.
    - no predicates but files read: on a partitioned table nothing (the delete checks cover the
      files read); on an unpartitioned table any candidate (Delta's rule).
    - nothing read at all (e.g. a metadata-only commit, or removes by path): nothing — an add
      cannot change what the transaction never read; its removes are covered by delete-delete.
    - ``use_stats``: the whole predicate against partition values and min/max stats of each add;
      a file without stats may match (conflict).
    - otherwise (Delta's partition level): only the partition part of each predicate against the
      adds' partition values; an unpartitioned table conflicts with any candidate.
    """
    read = txn.read_set
    partition_columns = list(txn.read_metadata.partition_columns)
    if read.whole_table:
        return 0
    if not read.predicates:
        return 0 if read.files and not partition_columns else None
    if not txn.use_stats and not partition_columns:
        return 0
    schema = _read_schema(txn.read_metadata.schema_string)
    for predicate in _distinct(read.predicates):
        on_partitions = partition_predicate(predicate, partition_columns) if partition_columns else TRUE
        if not txn.use_stats:
            index = _first_true(files_matching(on_partitions, candidates, schema, partition_columns, use_stats=False))
        else:
            index = _first_match_with_stats(predicate, on_partitions, candidates, schema, partition_columns)
        if index is not None:
            return index
    return None


def _first_match_with_stats(
    predicate: Expr, on_partitions: Expr, candidates: pa.Table, schema: pa.Schema, partition_columns: list[str]
) -> int | None:
    """First candidate the whole predicate may match, by partition values and min/max stats.

    Stats are parsed only for files in the predicate's partitions: the partition part is a
    conjunction of the predicate's own conjuncts, so a file it excludes cannot match the whole
    predicate, and evaluating it first (exactly, on partition values) skips parsing the stats
    JSON of every other file — the dominant cost on a partitioned table.
    """
    if on_partitions == TRUE:
        return _first_true(files_matching(predicate, candidates, schema, partition_columns, use_stats=True))
    in_partitions = files_matching(on_partitions, candidates, schema, partition_columns, use_stats=False)
    positions = pc.indices_nonzero(pc.fill_null(in_partitions, True))
    if len(positions) == 0:
        return None
    subset = candidates if len(positions) == candidates.num_rows else candidates.take(positions)
    index = _first_true(files_matching(predicate, subset, schema, partition_columns, use_stats=True))
    return None if index is None else positions[index].as_py()


#: added rows read to decide the added-files check exactly, at most (beyond it: statistics decide)
ADDED_ROWS_LIMIT = 1_000_000


@dataclass(frozen=True)
class AddedRowsRequest:
    """Winner adds whose rows the added-files check wants (see :func:`added_rows_request`)."""

    files: pa.Table
    columns: tuple[str, ...]


def added_rows_request(txn: TransactionInfo, winner: CommitActions) -> AddedRowsRequest | None:
    """On a row-level table (deletion vectors), the winner's candidate adds that this
    transaction's read predicates may match by their statistics, and the columns needed to
    evaluate the predicates on their rows: an UPDATE's new file spans ids 1..10 when it rewrote
    rows 1 and 10, which says nothing about row 5. None when statistics decide alone (the
    committer reads nothing), or the rows would be too many to read."""
    read = txn.read_set
    if txn.row_level is None or not txn.use_stats or read.whole_table or not read.predicates:
        return None
    candidates = candidate_added_files(txn, winner)
    if candidates is None:
        return None
    schema = _read_schema(txn.read_metadata.schema_string)
    partition_columns = list(txn.read_metadata.partition_columns)
    may = np.zeros(candidates.num_rows, dtype=bool)
    for predicate in _distinct(read.predicates):
        mask = files_matching(predicate, candidates, schema, partition_columns, use_stats=True)
        may |= pc.fill_null(mask, True).to_numpy(zero_copy_only=False)
    if not may.any():
        return None
    wanted = candidates.filter(pa.array(may))
    records = pc.sum(pc.fill_null(record_counts(wanted["stats"]), ADDED_ROWS_LIMIT + 1)).as_py()
    if records is None or records > ADDED_ROWS_LIMIT:
        return None
    names = sorted({ref.split(".")[0] for p in read.predicates for ref in p.columns()} & set(schema.names))
    return AddedRowsRequest(wanted, tuple(names))


def _rows_may_match(txn: TransactionInfo, candidates: pa.Table, added_rows: Mapping[str, pa.Table]) -> pa.Table:
    """``candidates`` without the adds whose loaded rows no read predicate holds for (TRUE only:
    a row a predicate is NULL on is one the read did not select)."""
    if not added_rows:
        return candidates
    keep = []
    for path in candidates.column("path").to_pylist():
        rows = added_rows.get(path)
        keep.append(rows is None or any(pc.any(matches(p, rows)).as_py() for p in _distinct(txn.read_set.predicates)))
    return candidates.filter(pa.array(keep, pa.bool_()))


def check_added_files_vs_read_predicates(txn: TransactionInfo, winner: CommitActions,
                                         loaded: WinnerRows = NO_ROWS) -> TransactionInfo:
    """Files the winner added that this transaction would have read had it started later."""
    candidates = candidate_added_files(txn, winner)
    if candidates is None:
        return txn
    candidates = _rows_may_match(txn, candidates, loaded.added_rows)
    if not candidates.num_rows:
        return txn
    index = first_conflicting_add(txn, candidates)
    if index is None:
        return txn
    partition_columns = txn.read_metadata.partition_columns
    location = added_file_location(candidates, index, partition_columns, _physical_keys(txn))
    if txn.read_set.whole_table:
        where = "the table, which this transaction read in full"
    elif partition_columns:
        where = f"partition {location}, which this transaction read"
    elif txn.use_stats:
        where = f"the table (file {location}) with rows this transaction's predicate may match"
    else:
        where = (
            "the table, which is not partitioned, so any concurrent write that reads data conflicts "
            "(set deltatx.conflictDetection.useStats=true to compare min/max statistics instead)"
        )
    _raise(
        ConcurrentAppendException,
        f"the concurrent {operation_name(winner.operation)} added files to {where} "
        f"(this {txn.operation} runs at isolation level {txn.isolation_level.value}).",
        winner,
        conflict=location,
    )


# --------------------------------------------------------------------------------------------
# 6-7. removed files vs files read / removed
# --------------------------------------------------------------------------------------------


def _first_shared_path(files: pa.Table, paths: pa.Array) -> int | None:
    """Row index in ``files`` of a file whose path is in ``paths``; hashes the smaller side."""
    if files.num_rows == 0 or len(paths) == 0:
        return None
    file_paths = files.column("path")
    if len(paths) <= files.num_rows:
        return _first_true(pc.is_in(file_paths, value_set=paths))
    hit = _first_true(pc.is_in(paths, value_set=file_paths.combine_chunks()))
    if hit is None:
        return None
    return pc.index(file_paths, paths[hit]).as_py()


def _unresolved_removes(txn: TransactionInfo, winner: CommitActions) -> pa.Table:
    """The winner's removes the row-level check did not settle."""
    removes = winner.removes
    settled = txn.row_level.resolved_for(winner.version) if txn.row_level is not None else frozenset()
    if not settled or removes.num_rows == 0:
        return removes
    return without_paths(removes, settled)


def check_row_level_changes(txn: TransactionInfo, winner: CommitActions,
                            loaded: WinnerRows = NO_ROWS) -> TransactionInfo:
    """Files both changed through deletion vectors: conflict only on a shared row (see row_level)."""
    return resolve_row_level(txn, winner, loaded)


def drop_backfill_readds_the_winner_touched(txn: TransactionInfo, winner: CommitActions,
                                            loaded: WinnerRows = NO_ROWS) -> TransactionInfo:
    """Delta's #5 (``resolveRowTrackingBackfillConflicts``), the backfill's side: a backfill that
    lost the race drops every re-add of a path the winner removed or added, and commits the rest.

    The winner committed after the protocol upgrade (commit 1 of the enablement), so it gave ids
    to every file it added: a file it rewrote (DELETE, UPDATE, OPTIMIZE) is gone, and one it
    re-added (a deletion-vector update, another backfill) has ids already. Re-adding either would
    resurrect a removed file or hand its rows a second set of ids; neither is a conflict, since a
    backfill reads no rows (its read is those paths, which leave the read set with the re-adds)."""
    if txn.operation != row_tracking.BACKFILL_OPERATION or not txn.adds.num_rows:
        return txn
    touched = row_tracking.paths_touched(winner.adds, winner.removes)
    if not touched:
        return txn
    adds = without_paths(txn.adds, touched)
    read = txn.read_set
    if adds is txn.adds and not (read.files & touched):
        return txn
    return txn.replace(adds=adds, read_set=dataclass_replace(read, files=read.files - touched))


def check_rows_without_ids(txn: TransactionInfo, winner: CommitActions,
                           loaded: WinnerRows = NO_ROWS) -> TransactionInfo:
    """A commit that turns row tracking on (``delta.enableRowTracking=true``) promises readers
    that every row has an id; a winner that added files without ids (it wrote before the protocol
    listed ``rowTracking``) breaks that promise, and only a backfill can give them ids.

    Table.set_properties never gets here: its property commit reads a table whose protocol has
    listed the feature since its first commit, so every winner assigns ids. A transaction that
    enables row tracking in one commit (an empty table, or one whose files it all rewrites) does,
    when a writer that read the old protocol commits first: it must retry."""
    if txn.metadata is None or not row_tracking.is_enabled(txn.metadata.configuration) \
            or row_tracking.is_enabled(txn.read_metadata.configuration):
        return txn
    adds = winner.adds
    if not adds.num_rows or not adds["baseRowId"].null_count:
        return txn
    index = pc.index(pc.is_null(adds["baseRowId"]), True).as_py()
    _raise(
        ConcurrentWriteException,
        f"this {txn.operation} turns row tracking on, but the concurrent {operation_name(winner.operation)} "
        f"added files without row ids (it wrote before the protocol listed rowTracking).",
        winner,
        conflict=file_location(adds, index, txn.read_metadata.partition_columns, _physical_keys(txn)),
    )


def rebase_row_ids(txn: TransactionInfo, winner: CommitActions, loaded: WinnerRows = NO_ROWS) -> TransactionInfo:
    """Delta's #5, #7, #8: after a winning backfill, files it gave ids keep them, both the
    ``baseRowId`` and the ``defaultRowCommitVersion`` (the protocol's rule for a recommitted
    file); this transaction's fresh row ids (above its read watermark) move above the winner's
    watermark; its own ``defaultRowCommitVersion`` moves past the winner's version.

    Delta's checker runs #7 and #8 after the copy, which undoes it for a re-add: the copied
    ``baseRowId`` is above this transaction's read watermark (the backfill handed it out later),
    so #7 moves it, and the copied version is the backfill's own, so #8 bumps it. Rows the DML
    did not change would get new ids and versions, against PROTOCOL.md. deltatx keeps the copy
    (``assign_row_ids``'s ``keep``, and #8 applied before #5)."""
    if not row_tracking.is_supported(txn.protocol or txn.read_protocol):
        return txn
    adds, removes = txn.adds, txn.removes
    # Rule #8 before #5: the backfill's defaultRowCommitVersion is its own version (or older),
    # and a re-add copies it as the path's first commit version (PROTOCOL.md: a recommitted add
    # keeps the last committed add's value). Bumped after the copy, as Delta's checker does, the
    # rows the DML left alone would report its version as their last change.
    if adds.num_rows:
        adds = row_tracking.bump_commit_versions(adds, winner.version)
    backfilled = None
    if winner.operation == row_tracking.BACKFILL_OPERATION and winner.adds.num_rows:
        adds = row_tracking.copy_row_ids(adds, winner.adds, txn.read_row_id_high_watermark)
        removes = row_tracking.copy_row_ids(removes, winner.adds, txn.read_row_id_high_watermark)
        backfilled = winner.adds["path"].combine_chunks()
    domains = txn.domains
    read_hwm = txn.read_row_id_high_watermark
    winner_hwm = row_tracking.high_watermark(winner.domains)
    if adds.num_rows:
        if winner_hwm != row_tracking.NO_WATERMARK or adds["baseRowId"].null_count:
            start = max(winner_hwm, read_hwm)
            adds, hwm = row_tracking.assign_row_ids(adds, read_hwm, start, winner.version + 1, backfilled)
            if hwm is not None:
                domains = _with_watermark(domains, hwm)
    # Every id up to the winner's watermark is someone else's (or copied from them) now, even
    # when this transaction adds nothing yet: a winner's file a later row-level rebase adopts
    # carries ids at or below it, which are not this transaction's to hand out again.
    read_hwm = max(read_hwm, winner_hwm)
    # A watermark this transaction wrote for ids it no longer hands out (its fresh files were
    # dropped: a compaction whose rows a concurrent one moved) must not fall below the winner's:
    # committed as it is, it would take the table's watermark back and a later writer would give
    # out ids that rows already hold.
    own_hwm = row_tracking.high_watermark(domains)
    if own_hwm != row_tracking.NO_WATERMARK and own_hwm < winner_hwm:
        domains = _with_watermark(domains, winner_hwm)
    if adds is txn.adds and domains is txn.domains and removes is txn.removes and read_hwm == txn.read_row_id_high_watermark:
        return txn
    return txn.replace(adds=adds, removes=removes, domains=domains, read_row_id_high_watermark=read_hwm)


def _with_watermark(domains: tuple, hwm: int) -> tuple:
    """``domains`` with the row-tracking watermark domain set to ``hwm``."""
    others = tuple(d for d in domains if d.domain != row_tracking.ROW_TRACKING_DOMAIN)
    return (row_tracking.watermark_domain(hwm),) + others


def check_deleted_files_vs_read_files(txn: TransactionInfo, winner: CommitActions,
                                      loaded: WinnerRows = NO_ROWS) -> TransactionInfo:
    """The winner removed a file this transaction read (by path, whatever its dataChange)."""
    removes = _unresolved_removes(txn, winner)
    if removes.num_rows == 0:
        return txn
    read = txn.read_set
    partition_columns = txn.read_metadata.partition_columns
    index = _first_shared_path(removes, read.files_array) if read.files else None
    if index is not None:
        _raise(
            ConcurrentDeleteReadException,
            f"the concurrent {operation_name(winner.operation)} removed a file this "
            f"{txn.operation} read.",
            winner,
            conflict=file_location(removes, index, partition_columns, _physical_keys(txn)),
        )
    if read.whole_table:
        _raise(
            ConcurrentDeleteReadException,
            f"the concurrent {operation_name(winner.operation)} removed files while this "
            f"{txn.operation} read the whole table.",
            winner,
            conflict=file_location(removes, 0, partition_columns, _physical_keys(txn)),
        )
    return txn


def check_deleted_files_vs_deleted_files(txn: TransactionInfo, winner: CommitActions,
                                         loaded: WinnerRows = NO_ROWS) -> TransactionInfo:
    """The winner removed a file this transaction removes too (the file would be deleted twice)."""
    removes = _unresolved_removes(txn, winner)
    if removes.num_rows == 0 or txn.removes.num_rows == 0:
        return txn
    index = _first_shared_path(txn.removes, removes.column("path").combine_chunks())
    if index is not None:
        _raise(
            ConcurrentDeleteDeleteException,
            f"the concurrent {operation_name(winner.operation)} removed a file this "
            f"{txn.operation} also removes.",
            winner,
            conflict=file_location(txn.removes, index, txn.read_metadata.partition_columns, _physical_keys(txn)),
        )
    return txn


# --------------------------------------------------------------------------------------------
# The ordered list and the entry points
# --------------------------------------------------------------------------------------------

CHECKS: list[tuple[str, Check]] = [
    ("protocol", check_protocol_compatibility),
    ("metadata", check_metadata_changes),
    ("domains", check_domain_metadata),
    ("app_ids", check_app_transaction_ids),
    ("backfill", drop_backfill_readds_the_winner_touched),
    ("row_ids", rebase_row_ids),
    ("row_level", check_row_level_changes),
    ("added_files", check_added_files_vs_read_predicates),
    ("deleted_read", check_deleted_files_vs_read_files),
    ("deleted_deleted", check_deleted_files_vs_deleted_files),
    # last: Delta's own rules name a conflict they also see with their own exception (an overwrite
    # that enables row tracking while an append lands is ConcurrentAppendException, as in Delta)
    ("enablement", check_rows_without_ids),
]


def check_commit(txn: TransactionInfo, winner: CommitActions, loaded: WinnerRows = NO_ROWS) -> TransactionInfo:
    """Check ``txn`` against one winning commit; return it rebased, or raise the conflict.

    ``loaded`` is what the committer read for this winner beforehand (see :mod:`.row_level`)."""
    for _name, check in CHECKS:
        txn = check(txn, winner, loaded)
    return txn


def check_commits(txn: TransactionInfo, winners: Iterable[CommitActions]) -> TransactionInfo:
    """Check against several winners, oldest first (each check sees the previous rebase)."""
    for winner in winners:
        txn = check_commit(txn, winner)
    return txn


def is_own_commit(txn: TransactionInfo, winner: CommitActions) -> bool:
    """True if the "winner" is this transaction's own commit whose success response was lost."""
    return bool(txn.txn_id) and winner.txn_id == txn.txn_id
