"""Pure rules of row-level resolution when one file plays two parts in a transaction, or the winner
removed a file outright (conflicts/row_level.py): hand-built transactions, winners and loaded
bitmaps, no I/O.

- A transaction that read rows of F (``tx.read()``) and then compacted F (OPTIMIZE, REORG) must
  still carry the winner's deletes into its new file by row id: the read is not the compaction.
- A transaction that read rows of F and then removed F whole (a DELETE by partition) is a
  whole-file remove, never a read that changed nothing.
- A winner that removed F outright (a DELETE of its last rows, no re-add) deleted every row F
  still held: only a row this transaction changed, or under Serializable read, conflicts.
"""

from __future__ import annotations

import numpy as np
import pytest
from conflict_builders import S, WS, PROTOCOL, file_row, metadata, predicate, winner
from pyroaring import BitMap64
from test_row_level import add, dv, rm  # the DV, add and remove rows every row-level unit test builds

from deltatx.conflicts import ReadSet, TransactionInfo, check_commit
from deltatx.conflicts.row_level import FileRows, RowLevelState, WinnerRows, dv_unique_id, load_request
from deltatx.errors import ConcurrentDeleteDeleteException, ConcurrentDeleteReadException
from deltatx.isolation import IsolationLevel
from deltatx.txnlog.actions import FILE_SCHEMA, REMOVE_SCHEMA, file_actions_table

F, G = "f.parquet", "g.parquet"
SI = IsolationLevel.SNAPSHOT_ISOLATION
POSITIONS = np.arange(100, dtype=np.int64)
#: the compaction wrote F's rows into G in reverse order: row id 1000 + p sits at position 99 - p
G_IDS = POSITIONS[::-1] + 1000


def read_rows(read: list[int]) -> FileRows:
    """F as ``tx.read()`` recorded it: the positions (and row ids) of the rows it returned."""
    at = np.array(read, dtype=np.int64)
    return FileRows(path=F, base_dv=None, base_deleted=BitMap64(), num_records=100, read=BitMap64(read),
                    row_positions=at, row_ids=at + 1000)


def compaction(read: list[int] | None, level: IsolationLevel = SI) -> TransactionInfo:
    """OPTIMIZE of F into G, after reading ``read`` rows of F (None: no read)."""
    source = FileRows(path=F, base_dv=None, base_deleted=BitMap64(), num_records=100, read=BitMap64(range(100)),
                      row_positions=POSITIONS, row_ids=POSITIONS + 1000)
    predicates = (predicate("id = 1"),) if read is not None else ()
    return TransactionInfo(
        read_version=5, read_set=ReadSet(predicates=predicates, files=frozenset({F})),
        read_metadata=metadata(partitioned=False), read_protocol=PROTOCOL,
        adds=file_actions_table([file_row(G, None, range(0, 100), data_change=False)], FILE_SCHEMA),
        removes=file_actions_table([rm(F, None, data_change=False)], REMOVE_SCHEMA),
        isolation_level=level, operation="OPTIMIZE",
        row_level=RowLevelState(files={F: read_rows(read)} if read is not None else {},
                                compacted={F: source}, compaction_outputs=(G,)))


def dv_winner(deleted: list[int], base: dict | None = None, version: int = 6) -> tuple:
    """A DELETE that put (base ∪ ``deleted``) on F: remove(F, base) + add(F, new DV)."""
    new = dv(f"w{version}", len(deleted))
    won = winner(version, "DELETE", add_rows=[add(F, new)], remove_rows=[rm(F, base)])
    return won, new, BitMap64(deleted)


def loaded_for(new: dict, bitmap: BitMap64) -> WinnerRows:
    return WinnerRows(bitmaps={(F, dv_unique_id(new)): bitmap}, row_ids={G: G_IDS})


# --------------------------------------------------------------------------- read, then compacted


@pytest.mark.parametrize("read", [None, [4], [5], list(range(100))], ids=["no-read", "other-row", "that-row", "all"])
def test_a_compaction_that_read_the_file_still_carries_the_winners_deletes(read):
    """Found by the audit of issue #10: the read shadowed the compaction and the deleted row
    came back in G. Whatever was read, row 5 (id 1005, position 94 of G) is deleted in G."""
    won, new, deleted = dv_winner([5])
    rebased = check_commit(compaction(read), won, loaded_for(new, deleted))
    assert set(rebased.row_level.pending[G]) == {94}
    assert rebased.removes.column("deletionVector").to_pylist() == [new]  # the remove names the winner's DV
    assert rebased.row_level.resolved_for(6) == frozenset({F})


def test_a_compaction_that_read_the_file_carries_the_deletes_of_each_winner_in_turn():
    """The read's record of F moves onto each winner's DV too: the second DML winner is compared
    with what the first left (it failed with ConcurrentDeleteReadException before)."""
    won6, new6, deleted6 = dv_winner([5])
    once = check_commit(compaction([4, 60]), won6, loaded_for(new6, deleted6))
    new7 = dv("w7", 2)
    won7 = winner(7, "UPDATE", add_rows=[add(F, new7)], remove_rows=[rm(F, new6)])
    twice = check_commit(once, won7, loaded_for(new7, BitMap64([5, 62])))
    assert set(twice.row_level.pending[G]) == {94, 37}
    assert twice.removes.column("deletionVector").to_pylist() == [new7]
    assert twice.row_level.resolved_for(7) == frozenset({F})


def test_a_compaction_that_read_the_row_the_winner_deleted_conflicts_only_under_serializable():
    """A compaction commits at SnapshotIsolation (it changes no data: Delta's downgrade), so what
    it read never conflicts; were it to run at Serializable (a metadata action alongside), the
    rule of every reader applies: the read row deleted is ConcurrentDeleteReadException."""
    won, new, deleted = dv_winner([5])
    check_commit(compaction([5], level=SI), won, loaded_for(new, deleted))
    check_commit(compaction([5], level=WS), won, loaded_for(new, deleted))
    with pytest.raises(ConcurrentDeleteReadException, match="row id 1005") as info:
        check_commit(compaction([5], level=S), won, loaded_for(new, deleted))
    assert F in info.value.conflict


def test_a_compaction_that_read_the_file_drops_its_copy_when_the_winner_removed_it():
    """The winner deleted every row of F (no re-add): G keeps none of them, the read is settled."""
    won = winner(6, "DELETE", remove_rows=[rm(F, None)])
    rebased = check_commit(compaction([4]), won, WinnerRows(row_ids={G: G_IDS}))
    assert set(rebased.row_level.pending[G]) == set(range(100))
    assert rebased.removes.num_rows == 0 and F not in rebased.row_level.files


# --------------------------------------------------------------------------- removed outright by the winner


def dml(changed: list[int], read: list[int] = (), level: IsolationLevel = WS) -> TransactionInfo:
    """An UPDATE of another file that recorded F (no row of F changed unless ``changed``)."""
    fr = FileRows(path=F, base_dv=None, base_deleted=BitMap64(), num_records=100, changed=BitMap64(changed),
                  read=BitMap64(list(changed) + list(read)), row_positions=POSITIONS, row_ids=POSITIONS + 1000)
    return TransactionInfo(
        read_version=5, read_set=ReadSet(predicates=(predicate("id = 1"),), files=frozenset({F})),
        read_metadata=metadata(partitioned=False), read_protocol=PROTOCOL,
        adds=file_actions_table([add(F, dv("mine", len(changed)))] if changed else [], FILE_SCHEMA),
        removes=file_actions_table([rm(F, None)] if changed else [], REMOVE_SCHEMA),
        isolation_level=level, operation="UPDATE", row_level=RowLevelState(files={F: fr}))


REMOVED = winner(6, "DELETE", remove_rows=[rm(F, None)])


@pytest.mark.parametrize("level", [S, WS])
def test_a_file_the_winner_removed_outright_conflicts_with_nothing_this_transaction_did_not_touch(level):
    """F's statistics could not rule out the predicate, but no row of F matched it: the winner
    deleting all of F is no conflict (it was a ConcurrentDeleteReadException by path)."""
    txn = dml([], level=level)
    request = load_request(txn.row_level, REMOVED, txn.adds)
    assert request is None or request.row_id_files is None  # no row id to read: no row is followed
    rebased = check_commit(txn, REMOVED)
    assert rebased.row_level.resolved_for(6) == frozenset({F}) and F not in rebased.row_level.files


@pytest.mark.parametrize("level", [S, WS])
def test_a_row_both_changed_in_a_file_the_winner_removed_is_a_delete_delete_naming_the_row(level):
    with pytest.raises(ConcurrentDeleteDeleteException, match="row id 1003") as info:
        check_commit(dml([3], level=level), REMOVED)
    assert F in info.value.conflict and info.value.version == 6


def test_a_row_read_in_a_file_the_winner_removed_conflicts_only_under_serializable():
    with pytest.raises(ConcurrentDeleteReadException, match="row id 1040"):
        check_commit(dml([], read=[40], level=S), REMOVED)
    assert check_commit(dml([], read=[40], level=WS), REMOVED).row_level.resolved_for(6) == frozenset({F})


def test_a_file_removed_outright_over_a_dv_of_its_own_spares_the_rows_already_deleted():
    """F had rows 0..49 deleted when this transaction read it; a read of row 10 (deleted then)
    cannot have been deleted by the winner."""
    base = dv("base", 50)
    fr = FileRows(path=F, base_dv=base, base_deleted=BitMap64(range(50)), num_records=100,
                  read=BitMap64([10]), row_positions=POSITIONS[50:], row_ids=POSITIONS[50:] + 1000)
    txn = dml([], level=S).replace(row_level=RowLevelState(files={F: fr}))
    rebased = check_commit(txn, winner(6, "DELETE", remove_rows=[rm(F, base)]))
    assert rebased.row_level.resolved_for(6) == frozenset({F})


# --------------------------------------------------------------------------- read, then removed whole


def read_then_removed_whole(level: IsolationLevel = WS) -> TransactionInfo:
    """``tx.read(where=...)`` returned row 2 of F, then a DELETE by partition removed F whole."""
    return TransactionInfo(
        read_version=5, read_set=ReadSet(predicates=(predicate("id = 2"),), files=frozenset({F})),
        read_metadata=metadata(partitioned=False), read_protocol=PROTOCOL,
        adds=file_actions_table([], FILE_SCHEMA),
        removes=file_actions_table([rm(F, None, baseRowId=1000)], REMOVE_SCHEMA),
        isolation_level=level, operation="DELETE", row_level=RowLevelState(files={F: read_rows([2])}))


@pytest.mark.parametrize("level", [S, WS])
def test_a_file_read_then_removed_whole_is_never_settled_as_a_read(level):
    """Found with the audit's repro: the winner's DV on F settled F as "read, nothing changed",
    and this transaction's remove(F, old DV) left the winner's F, and every row of it, alive."""
    won, new, deleted = dv_winner([1])
    with pytest.raises((ConcurrentDeleteReadException, ConcurrentDeleteDeleteException)):
        check_commit(read_then_removed_whole(level), won, WinnerRows(bitmaps={(F, dv_unique_id(new)): deleted}))


@pytest.mark.parametrize("level", [S, WS])
def test_a_file_read_then_removed_whole_is_followed_into_a_concurrent_compaction(level):
    """The winner compacted F into G: every row of F is deleted in G, found by row id."""
    won = winner(6, "OPTIMIZE", add_rows=[file_row(G, None, range(0, 100), data_change=False)],
                 remove_rows=[rm(F, None, data_change=False)])
    txn = read_then_removed_whole(level)
    request = load_request(txn.row_level, won, txn.adds, txn.removes)
    assert sorted(request.row_id_files.column("path").to_pylist()) == [F, G]
    rebased = check_commit(txn, won, WinnerRows(row_ids={F: POSITIONS + 1000, G: G_IDS}))
    assert set(rebased.row_level.pending[G]) == set(range(100))
    assert rebased.removes.column("path").to_pylist() == [G]
