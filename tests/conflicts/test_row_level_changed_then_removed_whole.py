"""Pure rules (conflicts/row_level.py) for a file this transaction changed row by row through a
DV and then removed whole (a DELETE of one row, then of its partition), when the winner compacted
it (OPTIMIZE): hand-built transactions, winners and loaded row ids, no I/O.

Its remove deletes every live row of the file, not only the ones the DML recorded: followed into
the winner's new file, all of them must be deleted there, and when they cannot all be followed
the file level decides (a conflict). Following the recorded rows alone resurrected the others.
"""

from __future__ import annotations

import pytest
from conflict_builders import S, WS, PROTOCOL, file_row, metadata, predicate, winner
from pyroaring import BitMap64
from test_row_level import rm
from test_row_level_file_roles import F, G, G_IDS, POSITIONS

from deltatx.conflicts import ReadSet, TransactionInfo, check_commit
from deltatx.conflicts.row_level import FileRows, RowLevelState, WinnerRows, load_request
from deltatx.errors import ConcurrentModificationException
from deltatx.isolation import IsolationLevel
from deltatx.txnlog.actions import FILE_SCHEMA, REMOVE_SCHEMA, file_actions_table

COMPACTED = winner(6, "OPTIMIZE", add_rows=[file_row(G, None, range(0, 100), data_change=False)],
                   remove_rows=[rm(F, None, data_change=False)])


def changed_then_removed_whole(level: IsolationLevel) -> TransactionInfo:
    """A DELETE of row 2 of F (recorded: position 2, row id 1002), then a DELETE by partition
    that removed F whole (its re-add with the DV dropped)."""
    fr = FileRows(path=F, base_dv=None, base_deleted=BitMap64(), num_records=100, changed=BitMap64([2]),
                  read=BitMap64([2]), row_positions=POSITIONS[2:3], row_ids=POSITIONS[2:3] + 1000)
    return TransactionInfo(
        read_version=5, read_set=ReadSet(predicates=(predicate("id = 2"),), files=frozenset({F})),
        read_metadata=metadata(partitioned=False), read_protocol=PROTOCOL,
        adds=file_actions_table([], FILE_SCHEMA),
        removes=file_actions_table([rm(F, None, baseRowId=1000)], REMOVE_SCHEMA),
        isolation_level=level, operation="DELETE", row_level=RowLevelState(files={F: fr}))


@pytest.mark.parametrize("level", [S, WS])
def test_every_row_of_the_file_is_deleted_in_the_compactions_output(level):
    txn = changed_then_removed_whole(level)
    request = load_request(txn.row_level, COMPACTED, txn.adds, txn.removes)
    assert sorted(request.row_id_files.column("path").to_pylist()) == [F, G]  # F's own ids: every row
    rebased = check_commit(txn, COMPACTED, WinnerRows(row_ids={F: POSITIONS + 1000, G: G_IDS}))
    assert set(rebased.row_level.pending[G]) == set(range(100))  # was {97}: row 2 alone
    assert rebased.removes.column("path").to_pylist() == [G]
    assert rebased.row_level.resolved_for(6) == frozenset({F})


@pytest.mark.parametrize("level", [S, WS])
def test_a_file_whose_rows_cannot_all_be_followed_is_left_to_the_file_level(level):
    """Without F's row ids only the recorded row could be followed: that is no whole-file
    remove, so the commit is refused rather than committed with F's other rows alive in G."""
    with pytest.raises(ConcurrentModificationException):
        check_commit(changed_then_removed_whole(level), COMPACTED, WinnerRows(row_ids={G: G_IDS}))
