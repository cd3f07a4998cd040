"""Row-level conflict resolution on deletion-vector tables (pure: everything arrives loaded).

Delta matches a winner's removes against this transaction's files by *path*: two DELETEs that
mark different rows of one file in deletion vectors still fail. Here each file this transaction
read or changed through DVs carries its rows (:class:`FileRows`: positions deleted when it read
the file, positions it changed, positions it read), and a winner that touched the same file is
compared row by row:

- the winner re-added the file with a larger DV (a merge-on-read DELETE/UPDATE/MERGE): the rows
  it newly deleted must not be rows this transaction changed (``ConcurrentDeleteDeleteException``)
  nor, under Serializable, rows it read (``ConcurrentDeleteReadException``); otherwise this
  transaction rebases: its ``remove`` names the winner's DV, its ``add`` carries the union;
- the winner rewrote the file without changing data (OPTIMIZE, purge) and the table tracks row
  ids: the rows this transaction changed are found again by row id in the winner's new files,
  and its DVs move there;
- this transaction is the compaction (OPTIMIZE, purge) and the winner deleted rows of a file it
  compacted: those rows, found by row id in this transaction's new files, get a DV there;
- the winner removed the file outright (``dataChange=true``, no re-add: a DELETE of its last rows):
  every row the file still held is deleted by the winner, so only a row this transaction changed
  (``ConcurrentDeleteDeleteException``) or, under Serializable, read (``ConcurrentDeleteReadException``)
  conflicts.

A file can play two parts in one transaction: read or changed row by row (``tx.read()``, a DV
DELETE) and then compacted (OPTIMIZE, REORG) or removed whole (a DELETE by partition, an
overwrite). Each part is settled on its own: the compaction carries the winner's deletes into its
new files whatever was read, and a whole-file remove is followed by row id (every live row of the
file, or else the file level decides), never mistaken for a read that changed nothing nor for a
change of only the rows a DML recorded.

What it cannot resolve it leaves to the file-level checks (``deleted_read``, ``deleted_deleted``),
which skip only the paths resolved here. The DV bitmaps are rebased in memory
(``RowLevelState.pending``); the committer writes them before it retries.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, NoReturn

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from ..errors import ConcurrentDeleteDeleteException, ConcurrentDeleteReadException
from ..isolation import IsolationLevel
from ..txnlog.actions import CommitActions, removes_for
from ..txnlog.actions import deletion_vector_unique_id as dv_unique_id
from .txn_info import fast_replace


@dataclass(frozen=True, eq=False)
class FileRows:
    """One data file as this transaction used it, in physical row positions.

    ``row_positions``/``row_ids`` (row-tracking tables) give the row id of every position this
    transaction read, sorted by position, so rows can be followed into another file.
    """

    path: str
    base_dv: Mapping[str, Any] | None
    base_deleted: BitMap64
    num_records: int
    changed: BitMap64 = field(default_factory=BitMap64)
    read: BitMap64 = field(default_factory=BitMap64)
    row_positions: np.ndarray | None = None
    row_ids: np.ndarray | None = None

    def row_ids_at(self, positions: BitMap64) -> np.ndarray | None:
        """Row ids of ``positions`` (None when this transaction did not read row ids)."""
        if self.row_ids is None or self.row_positions is None:
            return None
        wanted = np.asarray(positions.to_array(), dtype=np.int64)
        at = np.searchsorted(self.row_positions, wanted)
        at = np.clip(at, 0, max(len(self.row_positions) - 1, 0))
        if not len(self.row_positions) or not np.array_equal(self.row_positions[at], wanted):
            return None
        return self.row_ids[at]

    def describe_row(self, position: int) -> str:
        ids = self.row_ids_at(BitMap64([position]))
        return f"row id {int(ids[0])}" if ids is not None else f"row position {position}"


@dataclass(frozen=True, eq=False)
class RowLevelState:
    """The row-level part of a transaction, rebased winner by winner.

    - ``files``: the files it read or changed through DVs, by path;
    - ``compacted``: for a compaction, the source files it rewrote (path -> FileRows with every
      live row read) and ``compaction_outputs``, the paths of the files it wrote;
    - ``pending``: the whole DV (as a bitmap) of each add a rebase changed; the committer writes
      those that differ from ``written`` (what it wrote last time) before it retries;
    - ``resolved``: (winner version, paths) settled here for that winner — the file-level checks
      skip them.
    """

    files: Mapping[str, FileRows] = field(default_factory=dict)
    compacted: Mapping[str, FileRows] = field(default_factory=dict)
    compaction_outputs: tuple[str, ...] = ()
    pending: Mapping[str, BitMap64] = field(default_factory=dict)
    written: Mapping[str, BitMap64] = field(default_factory=dict)
    resolved: tuple[int, frozenset[str]] = (-1, frozenset())

    def resolved_for(self, version: int) -> frozenset[str]:
        return self.resolved[1] if self.resolved[0] == version else frozenset()

    def replace(self, **changes: Any) -> "RowLevelState":
        return fast_replace(self, changes)


@dataclass(frozen=True, eq=False)
class WinnerRows:
    """What the committer loaded for one winner before checking it (the checker does no I/O).

    ``bitmaps``: decoded DVs, keyed by (path, uniqueId); ``row_ids``: the row id of every
    physical position of some data files (the winner's new files, or this transaction's own).
    """

    bitmaps: Mapping[tuple[str, str], BitMap64] = field(default_factory=dict)
    row_ids: Mapping[str, np.ndarray] = field(default_factory=dict)
    #: rows (the columns the read predicates name, deletion vectors applied) of winner adds whose
    #: statistics could not rule out a match: the added-files check evaluates them exactly
    added_rows: Mapping[str, pa.Table] = field(default_factory=dict)


NO_ROWS = WinnerRows()


# --------------------------------------------------------------------------------------------
# What the loader must fetch (pure: decided here, fetched by the committer)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadRequest:
    """DVs (path, descriptor) and row-id columns (add rows) the checker will need for a winner."""

    dvs: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    row_id_files: pa.Table | None = None


def _by_path(table: pa.Table) -> dict[str, int]:
    return {p: i for i, p in enumerate(table.column("path").to_pylist())}


def whole_file_removes(state: RowLevelState, own_adds: pa.Table, own_removes: pa.Table | None,
                       winner: CommitActions) -> pa.Table | None:
    """This transaction's removes of whole files (a DELETE by partition, an overwrite, a DV
    DELETE of a file's last rows) that the winner moved without changing data (OPTIMIZE, purge),
    on a row-tracking table: their rows can be followed into the winner's new files by row id.

    Whatever this transaction read or changed of such a file row by row beforehand (``tx.read()``,
    a DELETE of one row, then the partition's DELETE), it deletes every live row: following only
    the rows a DML recorded would leave the others alive in the winner's files."""
    if own_removes is None or own_removes.num_rows == 0 or "baseRowId" not in own_removes.column_names:
        return None
    moved = {p for p, dc in zip(winner.removes.column("path").to_pylist(),
                                winner.removes.column("dataChange").to_pylist()) if dc is False}
    moved -= set(winner.adds.column("path").to_pylist())
    if not moved:
        return None
    readded = set(own_adds.column("path").to_pylist())
    keep = [i for i, (p, dc, base) in enumerate(zip(own_removes.column("path").to_pylist(),
                                                    own_removes.column("dataChange").to_pylist(),
                                                    own_removes.column("baseRowId").to_pylist()))
            if p in moved and dc is not False and base is not None and p not in readded
            and p not in state.compacted]
    return own_removes.take(pa.array(keep, pa.int64())) if keep else None


def _only_read(state: RowLevelState, path: str) -> bool:
    """This transaction changed no row of ``path`` through a DV: at most it read some (a
    ``tx.read()`` before a DELETE by partition or an overwrite). Such a file it removes is a
    whole-file remove: what it read says nothing about which rows it deletes (all of them)."""
    fr = state.files.get(path)
    return fr is None or not fr.changed


def _every_live_row_changed(fr: FileRows) -> FileRows:
    """``fr`` as this transaction leaves it when it removes the file whole after changing some
    rows (a DELETE of one row, then of the partition): every row live when it read the file is
    deleted, not only those the DML recorded. (Against a winner's larger DV the recorded rows
    suffice: the rebased remove still takes the whole file.)"""
    live = BitMap64(range(fr.num_records)) - fr.base_deleted
    return dataclasses.replace(fr, changed=fr.changed | live, read=fr.read | live)


def _removed_whole(txn_removes: pa.Table | None, txn_adds: pa.Table) -> set[str]:
    """Paths this transaction removes with a data change and does not re-add."""
    if txn_removes is None or txn_removes.num_rows == 0:
        return set()
    removed = {p for p, dc in zip(txn_removes.column("path").to_pylist(),
                                  txn_removes.column("dataChange").to_pylist()) if dc is not False}
    return removed - set(txn_adds.column("path").to_pylist())


def load_request(state: RowLevelState | None, winner: CommitActions, own_adds: pa.Table,
                 own_removes: pa.Table | None = None) -> LoadRequest | None:
    """Which of the winner's DVs and which files' row ids the row-level check will read."""
    if state is None or winner.removes.num_rows == 0:
        return None
    whole = whole_file_removes(state, own_adds, own_removes, winner)
    if not state.files and not state.compacted and whole is None:
        return None
    removed = set(winner.removes.column("path").to_pylist())
    mine = (set(state.files) | set(state.compacted)) & removed
    if not mine and whole is None:
        return None
    readds = _by_path(winner.adds)
    dvs = winner.adds.column("deletionVector")
    wanted: list[tuple[str, Mapping[str, Any]]] = []
    row_id_files: list[pa.Table] = []
    needs_winner_ids = needs_own_ids = False
    if whole is not None:  # their own row ids and DVs, and the winner's new files'
        needs_winner_ids = True
        row_id_files.append(whole.select(["path", "baseRowId"]))
        for path, descriptor in zip(whole.column("path").to_pylist(), whole.column("deletionVector").to_pylist()):
            if descriptor is not None:
                wanted.append((path, descriptor))
    moved = {p for p, dc in zip(winner.removes.column("path").to_pylist(),
                                winner.removes.column("dataChange").to_pylist()) if dc is False}
    for path in mine:
        i = readds.get(path)
        descriptor = dvs[i].as_py() if i is not None else None
        if descriptor is not None:
            wanted.append((path, descriptor))
        if path in state.files and i is None and path in moved \
                and (state.files[path].changed or state.files[path].read):
            needs_winner_ids = True  # its rows are followed into the winner's new files
        if path in state.compacted:
            needs_own_ids = True
    if needs_winner_ids:
        new_files = winner.adds.filter(pc.invert(pc.is_in(winner.adds["path"], value_set=pa.array(list(removed)))))
        row_id_files.append(new_files.select(["path", "baseRowId"]))
        # a compaction that was itself rebased over a DML carries DVs on its outputs
        for new_path, descriptor in zip(new_files.column("path").to_pylist(),
                                        new_files.column("deletionVector").to_pylist()):
            if descriptor is not None:
                wanted.append((new_path, descriptor))
    if needs_own_ids and state.compaction_outputs:
        outputs = own_adds.filter(pc.is_in(own_adds["path"], value_set=pa.array(list(state.compaction_outputs))))
        row_id_files.append(outputs.select(["path", "baseRowId"]))
    files = pa.concat_tables(row_id_files) if row_id_files else None
    return LoadRequest(dvs=tuple(wanted), row_id_files=files)


# --------------------------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------------------------


def _raise(cls: type, summary: str, winner: CommitActions, conflict: str) -> NoReturn:
    raise cls(summary, version=winner.version, operation=winner.operation, commit_info=winner.commit_info,
              conflict=conflict)


def _first(bitmap: BitMap64) -> int:
    return int(bitmap.min())


@dataclass
class _Rebase:
    """Mutable scratch of one resolution; frozen back into the TransactionInfo at the end."""

    adds: pa.Table
    removes: pa.Table
    files: dict[str, FileRows]
    compacted: dict[str, FileRows]
    pending: dict[str, BitMap64]
    compaction_outputs: tuple[str, ...]
    drop_adds: set[str] = field(default_factory=set)
    drop_removes: set[str] = field(default_factory=set)
    remove_dv: dict[str, Any] = field(default_factory=dict)  # path -> the DV our remove must name
    extra: list[pa.Table] = field(default_factory=list)  # winner files this transaction now changes


def resolve_row_level(txn: Any, winner: CommitActions, loaded: WinnerRows = NO_ROWS) -> Any:
    """Settle, row by row, the files both this transaction and the winner changed (see module)."""
    state: RowLevelState | None = txn.row_level
    if state is None or winner.removes.num_rows == 0:
        return txn
    whole = whole_file_removes(state, txn.adds, txn.removes, winner)
    if not state.files and not state.compacted and whole is None:
        return txn
    w_removes = _by_path(winner.removes)
    mine = (set(state.files) | set(state.compacted)) & set(w_removes)
    if not mine and whole is None:
        return txn
    w_adds = _by_path(winner.adds)
    w_remove_dvs = winner.removes.column("deletionVector")
    w_add_dvs = winner.adds.column("deletionVector")
    serializable = txn.isolation_level is IsolationLevel.SERIALIZABLE
    work = _Rebase(txn.adds, txn.removes, dict(state.files), dict(state.compacted), dict(state.pending),
                   state.compaction_outputs)
    resolved: set[str] = set()
    if whole is not None:
        resolved |= _follow_whole_files(work, whole, winner, w_removes, loaded)
    removed_whole = _removed_whole(txn.removes, txn.adds)
    for path in sorted(mine - resolved):
        w_removed_id = dv_unique_id(w_remove_dvs[w_removes[path]].as_py())
        i = w_adds.get(path)
        w_dv = w_add_dvs[i].as_py() if i is not None else None
        compacted = work.compacted.get(path)
        if compacted is not None:
            # the compaction's part: its new files lose the rows the winner deleted, whatever
            # this transaction read of the file beforehand (the read is settled below)
            if w_removed_id != dv_unique_id(compacted.base_dv) \
                    or not _rebase_compaction(work, compacted, winner, i, w_dv, loaded):
                continue
            if path not in work.files:
                resolved.add(path)
                continue
        elif path in removed_whole and _only_read(state, path):
            # read row by row, then removed whole (a DELETE by partition, an overwrite): not a
            # read that changed nothing. A compaction winner was followed by row id above
            # (whole_file_removes); any other winner that removed it is the file level's.
            continue
        fr = work.files.get(path)
        if fr is None or w_removed_id != dv_unique_id(fr.base_dv):
            continue  # the winner removed another version of the file than ours: file level decides
        if path in removed_whole and i is None and _moved_without_change(winner, w_removes[path]):
            # changed row by row, then removed whole, and compacted by the winner but not
            # followed above: following only the rows the DML recorded would leave the others
            # alive in the winner's files; every live row or the file level
            fr = _every_live_row_changed(fr)
        if _settle_rows(work, fr, path, txn, winner, w_removes[path], i, w_dv, loaded, serializable):
            resolved.add(path)
    if not resolved:
        return txn
    return _frozen(txn, work, winner.version, resolved)


def _settle_rows(work: _Rebase, fr: FileRows, path: str, txn: Any, winner: CommitActions, removed: int,
                 readd: int | None, w_dv: Mapping[str, Any] | None, loaded: WinnerRows, serializable: bool) -> bool:
    """The rows this transaction changed or read in ``path`` against what the winner did to the
    file; raises on a shared row. False when the file level must decide."""
    if readd is not None and w_dv is not None:
        w_new = loaded.bitmaps.get((path, dv_unique_id(w_dv)))
        if w_new is None or not _only_deletes(fr, w_new):
            return False
        _check_shared_rows(fr, path, w_new - fr.base_deleted, txn, winner, serializable)
        _rebase_onto_dv(work, fr, path, w_dv, w_new)
        return True
    if readd is not None:
        return False  # re-added without a DV: a rewrite we cannot follow
    if _moved_without_change(winner, removed):
        if not fr.changed and not (serializable and fr.read):
            work.files.pop(path)
            return True
        return _follow_rows(work, fr, path, winner, loaded, follow_reads=serializable)
    # removed outright with a data change (a DELETE of its last rows, a rewrite whose new files
    # the added-files check looks at): every row the file still held is gone, so of the rows this
    # transaction touched, all but those deleted when it read the file (no bitmap of every row)
    _check_shared_rows(fr, path, (fr.changed | fr.read) - fr.base_deleted, txn, winner, serializable)
    work.files.pop(path)
    return True


def _check_shared_rows(fr: FileRows, path: str, w_deleted: BitMap64, txn: Any, winner: CommitActions,
                       serializable: bool) -> None:
    """Raise when the winner deleted (``w_deleted``) a row this transaction changed, or, under
    Serializable, one it read; the message names the file and the row."""
    overlap = w_deleted & fr.changed
    if overlap:
        row = fr.describe_row(_first(overlap))
        _raise(ConcurrentDeleteDeleteException,
               f"the concurrent {winner.operation or 'commit'} deleted or updated a row this "
               f"{txn.operation} also deletes or updates ({row} of file {path}).",
               winner, f"file {path}, {row}")
    if serializable and w_deleted & fr.read:
        row = fr.describe_row(_first(w_deleted & fr.read))
        _raise(ConcurrentDeleteReadException,
               f"the concurrent {winner.operation or 'commit'} deleted a row this {txn.operation} "
               f"read ({row} of file {path}).",
               winner, f"file {path}, {row}")


def _follow_whole_files(work: _Rebase, whole: pa.Table, winner: CommitActions, w_removes: Mapping[str, int],
                        loaded: WinnerRows) -> set[str]:
    """This transaction removed whole files the winner compacted (:func:`whole_file_removes`):
    every live row of each is deleted instead in the winner's new files, found by row id, so the
    compaction keeps none of them and this transaction conflicts with nothing. The paths it
    settled (a file whose rows cannot all be found is left to the file-level checks)."""
    w_remove_dvs = winner.removes.column("deletionVector")
    settled: set[str] = set()
    for path, descriptor in zip(whole.column("path").to_pylist(), whole.column("deletionVector").to_pylist()):
        if dv_unique_id(w_remove_dvs[w_removes[path]].as_py()) != dv_unique_id(descriptor):
            continue  # the winner compacted another version of the file
        row_ids = loaded.row_ids.get(path)
        if row_ids is None:
            continue
        deleted = loaded.bitmaps.get((path, dv_unique_id(descriptor))) if descriptor is not None else BitMap64()
        if deleted is None:
            continue
        n = len(row_ids)
        live = BitMap64(range(n)) - deleted
        fr = FileRows(path=path, base_dv=descriptor, base_deleted=deleted, num_records=n, changed=live,
                      row_positions=np.arange(n, dtype=np.int64), row_ids=np.asarray(row_ids, dtype=np.int64))
        read_before = work.files.get(path)  # what tx.read() recorded of it, if anything
        work.files[path] = fr
        if _follow_rows(work, fr, path, winner, loaded, follow_reads=False):
            settled.add(path)
        elif read_before is not None:
            work.files[path] = read_before
        else:
            work.files.pop(path, None)
    return settled


def _only_deletes(fr: FileRows, w_new: BitMap64) -> bool:
    """The winner's DV keeps every row ours deleted: it only deleted more. A smaller DV (RESTORE
    to a version before some of the file's deletes) brings rows back, which a rebase onto the
    union would delete again: the file-level checks decide that case."""
    return fr.base_deleted.issubset(w_new)


def _moved_without_change(winner: CommitActions, index: int) -> bool:
    dc = winner.removes.column("dataChange")[index].as_py()
    return dc is False


def _rebase_onto_dv(work: _Rebase, fr: FileRows, path: str, w_dv: Mapping[str, Any], w_new: BitMap64) -> None:
    """This transaction's changes to ``path`` now apply on top of the winner's DV."""
    if fr.changed:
        union = w_new | fr.changed | fr.base_deleted
        work.remove_dv[path] = w_dv
        if len(union) >= fr.num_records:
            work.drop_adds.add(path)
            work.pending.pop(path, None)
        else:
            work.pending[path] = union
    work.files[path] = dataclasses.replace(fr, base_dv=w_dv, base_deleted=w_new)


def _follow_rows(work: _Rebase, fr: FileRows, path: str, winner: CommitActions, loaded: WinnerRows,
                 follow_reads: bool) -> bool:
    """The winner rewrote ``path`` without changing data: move this transaction's DV onto the
    winner's new files by row id, and (``follow_reads``: Serializable) the rows it read, so that
    a later winner deleting one of them is still seen. False when the rows cannot be found
    (file level decides)."""
    changed_ids = fr.row_ids_at(fr.changed) if fr.changed else np.empty(0, np.int64)
    read_only = fr.read - fr.changed if follow_reads else BitMap64()
    read_ids = fr.row_ids_at(read_only) if read_only else np.empty(0, np.int64)
    if changed_ids is None or read_ids is None:
        return False
    new_files = winner.adds.filter(pc.invert(pc.is_in(winner.adds["path"], value_set=winner.removes["path"])))
    left_changed, left_read = np.unique(changed_ids), np.unique(read_ids)
    targets: list[tuple[int, BitMap64, BitMap64, BitMap64]] = []  # (file, changed, read, its deleted rows)
    dvs = new_files.column("deletionVector")
    for j, new_path in enumerate(new_files.column("path").to_pylist()):
        row_ids = loaded.row_ids.get(new_path)
        if row_ids is None:
            return False
        hit_changed = np.flatnonzero(np.isin(row_ids, left_changed))
        hit_read = np.flatnonzero(np.isin(row_ids, left_read))
        if not len(hit_changed) and not len(hit_read):
            continue
        deleted = BitMap64()
        if dvs[j].is_valid:  # a compaction rebased over a DML: its output has a DV
            found = loaded.bitmaps.get((new_path, dv_unique_id(dvs[j].as_py())))
            if found is None:
                return False
            deleted = found
        changed, read = BitMap64(hit_changed.tolist()), BitMap64(hit_read.tolist())
        if (changed | read) & deleted:
            return False  # a row we changed or read is deleted there: file level decides
        targets.append((j, changed, read, deleted))
        left_changed = np.setdiff1d(left_changed, row_ids[hit_changed], assume_unique=False)
        left_read = np.setdiff1d(left_read, row_ids[hit_read], assume_unique=False)
    if len(left_changed) or len(left_read):
        return False  # some rows are gone: they were deleted by someone -> file-level conflict
    work.drop_adds.add(path)
    work.drop_removes.add(path)
    work.pending.pop(path, None)
    work.files.pop(path)
    for j, changed, read, deleted in targets:
        row = new_files.slice(j, 1)
        new_path = row.column("path")[0].as_py()
        followed = work.files.get(new_path)
        if followed is None:
            ids_of_new = np.asarray(loaded.row_ids[new_path], dtype=np.int64)
            followed = FileRows(path=new_path, base_dv=row.column("deletionVector")[0].as_py(), base_deleted=deleted,
                                num_records=len(ids_of_new), row_positions=np.arange(len(ids_of_new), dtype=np.int64),
                                row_ids=ids_of_new)
        if changed and not followed.changed:
            # a winner's file this transaction now deletes rows from: remove + re-add (the
            # committer attaches the pending DV, the whole of it, to the re-add)
            work.extra.append(row)
        if changed:
            work.pending[new_path] = work.pending.get(new_path, deleted) | changed
        work.files[new_path] = dataclasses.replace(followed, changed=followed.changed | changed,
                                                   read=followed.read | changed | read)
    return True


def _rebase_compaction(work: _Rebase, fr: FileRows, winner: CommitActions, readd: int | None,
                       w_dv: Mapping[str, Any] | None, loaded: WinnerRows) -> bool:
    """This transaction compacted ``fr``; the winner deleted some (re-add with a larger DV) or all
    (plain remove) of its rows. Mark those rows deleted in this transaction's new files."""
    path = fr.path
    live = BitMap64(fr.row_positions.tolist()) if fr.row_positions is not None else None
    if live is None:
        return False
    if readd is not None:
        if w_dv is None:
            return False  # re-added without a DV: a rewrite we cannot follow
        w_new = loaded.bitmaps.get((path, dv_unique_id(w_dv)))
        if w_new is None or not _only_deletes(fr, w_new):
            return False
        gone = (w_new - fr.base_deleted) & live
    else:
        gone = live
    if gone:
        ids = fr.row_ids_at(gone)
        if ids is None:
            return False
        for out_path in work.compaction_outputs:
            row_ids = loaded.row_ids.get(out_path)
            if row_ids is None:
                return False
            hit = np.flatnonzero(np.isin(row_ids, ids))
            if len(hit):
                work.pending[out_path] = work.pending.get(out_path, BitMap64()) | BitMap64(hit.tolist())
    if readd is not None:
        work.remove_dv[path] = w_dv
        work.compacted[path] = dataclasses.replace(fr, base_dv=w_dv, base_deleted=fr.base_deleted | gone)
    else:
        work.drop_removes.add(path)
        work.compacted.pop(path)
    return True


def _frozen(txn: Any, work: _Rebase, version: int, resolved: set[str]) -> Any:
    adds, removes = work.adds, work.removes
    if work.drop_adds:
        adds = adds.filter(pc.invert(pc.is_in(adds["path"], value_set=pa.array(sorted(work.drop_adds)))))
    if work.drop_removes:
        removes = removes.filter(pc.invert(pc.is_in(removes["path"], value_set=pa.array(sorted(work.drop_removes)))))
    if work.remove_dv:
        removes = _set_dvs(removes, work.remove_dv)
    if work.extra:
        # the winner's new files this transaction now deletes rows from: remove + re-add (the
        # committer attaches the pending DV to the re-add)
        rows = pa.concat_tables(work.extra)
        rows = rows.set_column(rows.schema.get_field_index("dataChange"), "dataChange",
                               pa.array([True] * rows.num_rows, pa.bool_()))
        timestamp = int(pc.max(removes["deletionTimestamp"]).as_py() or 0) if removes.num_rows else 0
        removes = pa.concat_tables([removes, removes_for(rows, timestamp).cast(removes.schema)])
        adds = pa.concat_tables([adds, rows.select(adds.schema.names).cast(adds.schema)])
    state = txn.row_level.replace(files=work.files, compacted=work.compacted, pending=work.pending,
                                  resolved=(version, frozenset(resolved)))
    return txn.replace(adds=adds, removes=removes, row_level=state)


def _set_dvs(table: pa.Table, dvs: Mapping[str, Any]) -> pa.Table:
    """``deletionVector`` of the rows whose path is in ``dvs`` replaced (columnar, small)."""
    from ..txnlog.actions import DELETION_VECTOR

    paths = table.column("path").to_pylist()
    current = table.column("deletionVector").to_pylist()
    new = [dvs.get(p, c) if p in dvs else c for p, c in zip(paths, current)]
    return table.set_column(table.schema.get_field_index("deletionVector"), "deletionVector",
                            pa.array(new, type=DELETION_VECTOR))
