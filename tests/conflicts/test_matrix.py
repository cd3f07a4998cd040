"""Every cell of the Databricks write-conflict matrix (no row-level concurrency), under S and WS.

Rows are the transaction that loses the commit race, columns the one that won. "Can conflict"
cells conflict when both touch the same partition and never when they touch different ones; the
expected exception class is the one Delta's check order produces first.
"""

from __future__ import annotations

import pytest

from conflict_builders import S, SI, WS, make_op
from deltatx.conflicts import check_commit
from deltatx.errors import ConcurrentAppendException, ConcurrentDeleteReadException

OPS = ("INSERT", "UPDATE", "DELETE", "MERGE", "OPTIMIZE")
UDM = ("UPDATE", "DELETE", "MERGE")
APPEND, DELETE_READ, OK = ConcurrentAppendException, ConcurrentDeleteReadException, None

# (loser, winner) -> (outcome under Serializable, outcome under WriteSerializable), same partition.
SAME_PARTITION: dict[tuple[str, str], tuple[type | None, type | None]] = {}
for w in OPS:
    SAME_PARTITION[("INSERT", w)] = (OK, OK)  # a blind append never conflicts
for l in UDM:
    SAME_PARTITION[(l, "INSERT")] = (APPEND, OK)  # S: can conflict; WS: cannot
    for w in UDM:
        SAME_PARTITION[(l, w)] = (APPEND, APPEND)  # the winner's rewrite lands in the read partition
    SAME_PARTITION[(l, "OPTIMIZE")] = (APPEND, APPEND)  # OPTIMIZE's adds are not blind appends
SAME_PARTITION[("OPTIMIZE", "INSERT")] = (OK, OK)  # SnapshotIsolation + a blind winner
for w in UDM + ("OPTIMIZE",):
    SAME_PARTITION[("OPTIMIZE", w)] = (DELETE_READ, DELETE_READ)  # the winner removed a file we rewrite

CASES = [
    pytest.param(loser, winner, level, same, id=f"{loser}-vs-{winner}-{level.value}-{'same' if same else 'other'}")
    for (loser, winner) in SAME_PARTITION
    for level in (S, WS)
    for same in (True, False)
]


def test_matrix_is_complete():
    assert set(SAME_PARTITION) == {(l, w) for l in OPS for w in OPS}


@pytest.mark.parametrize("loser_name, winner_name, level, same_partition", CASES)
def test_matrix_cell(loser_name, winner_name, level, same_partition):
    loser = make_op(loser_name, 1, "loser").as_loser(level)
    won = make_op(winner_name, 1 if same_partition else 2, "winner").as_winner()
    expected = SAME_PARTITION[(loser_name, winner_name)][0 if level is S else 1] if same_partition else None
    if expected is None:
        rebased = check_commit(loser, won)
        assert rebased.read_set == loser.read_set
    else:
        with pytest.raises(expected) as info:
            check_commit(loser, won)
        assert info.value.version == won.version
        assert info.value.operation == winner_name
        assert "part=1" in str(info.value)


@pytest.mark.parametrize("level", [S, WS])
def test_optimize_runs_at_snapshot_isolation(level):
    assert make_op("OPTIMIZE", 1, "x").as_loser(level).isolation_level is SI


@pytest.mark.parametrize("loser_name", UDM)
def test_metadata_change_makes_ws_see_blind_appends(loser_name):
    """WS ignores blind appends only when the loser does not change metadata (schema evolution)."""
    from conflict_builders import metadata

    loser = make_op(loser_name, 1, "loser").as_loser(WS, new_metadata=metadata(configuration={"k": "v"}))
    with pytest.raises(ConcurrentAppendException):
        check_commit(loser, make_op("INSERT", 1, "winner").as_winner())
