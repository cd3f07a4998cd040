"""Stats-based (file-level) conflict detection: ``deltatx.conflictDetection.useStats``.

With stats, a concurrently added file conflicts only if the *whole* read predicate may match one
of its rows by partition values and min/max statistics; without, Delta's partition-level rule
applies (and an unpartitioned table conflicts with every concurrent non-blind add).
"""

from __future__ import annotations

import pytest

from conflict_builders import S, WS, adds, file_row, metadata, predicate, remove_row, removes, txn, winner
from deltatx.conflicts import ReadSet, check_commit
from deltatx.errors import ConcurrentAppendException

UNPARTITIONED = metadata(partitioned=False)
LOW, HIGH = "low.parquet", "high.parquet"


def delete_low_ids(use_stats: bool, level=WS):
    """DELETE WHERE id < 100 on an unpartitioned table: read and rewrote low.parquet (ids 0..199)."""
    return txn(
        table_level=level,
        read_metadata=UNPARTITIONED,
        read_set=ReadSet(predicates=(predicate("id < 100"),), files=frozenset({LOW})),
        remove_table=removes(remove_row(LOW)),
        add_table=adds(file_row("low-rewritten.parquet", None, range(100, 200))),
        use_stats=use_stats,
        operation="DELETE",
    )


def update_high_ids(ids=range(500, 601), stats=True):
    """A concurrent UPDATE WHERE id >= 500 that rewrote high.parquet (not a blind append)."""
    return winner(
        6,
        "UPDATE",
        remove_rows=[remove_row(HIGH)],
        add_rows=[file_row("high-rewritten.parquet", None, ids if stats else None)],
        blind=False,
    )


@pytest.mark.parametrize("level", [S, WS])
def test_disjoint_id_ranges_commit_with_stats(level):
    rebased = check_commit(delete_low_ids(use_stats=True, level=level), update_high_ids())
    assert rebased.use_stats


@pytest.mark.parametrize("level", [S, WS])
def test_disjoint_id_ranges_conflict_without_stats(level):
    with pytest.raises(ConcurrentAppendException) as info:
        check_commit(delete_low_ids(use_stats=False, level=level), update_high_ids())
    assert info.value.conflict == "high-rewritten.parquet"
    assert "not partitioned" in str(info.value)


@pytest.mark.parametrize(
    "ids, stats",
    [
        (range(50, 150), True),  # overlaps id < 100
        (range(99, 100), True),  # touches the bound
        (range(500, 601), False),  # no stats: may hold anything
    ],
    ids=["overlap", "boundary", "no-stats"],
)
def test_stats_conflict_when_file_may_match(ids, stats):
    with pytest.raises(ConcurrentAppendException) as info:
        check_commit(delete_low_ids(use_stats=True), update_high_ids(ids, stats))
    assert info.value.conflict == "high-rewritten.parquet"


def test_boundary_just_outside_does_not_conflict():
    assert check_commit(delete_low_ids(use_stats=True), update_high_ids(range(100, 200))).read_version == 5


def test_whole_table_read_conflicts_even_with_stats():
    loser = txn(read_metadata=UNPARTITIONED, read_set=ReadSet(whole_table=True),
                add_table=adds(file_row("x.parquet", None)), use_stats=True)
    with pytest.raises(ConcurrentAppendException):
        check_commit(loser, update_high_ids())


def test_partitioned_stats_refine_within_a_partition():
    """Same partition, disjoint id ranges: stats clear it; the partition rule does not."""
    read = ReadSet(predicates=(predicate("part = 1 AND id < 100"),), files=frozenset({"part=1/a.parquet"}))
    won = winner(6, "MERGE", add_rows=[file_row("part=1/new.parquet", 1, range(500, 600))], blind=False)
    for use_stats, conflicts in ((True, False), (False, True)):
        loser = txn(read_set=read, add_table=adds(file_row("part=1/mine.parquet", 1)), use_stats=use_stats)
        if conflicts:
            with pytest.raises(ConcurrentAppendException) as info:
                check_commit(loser, won)
            assert info.value.conflict == "part=1"
        else:
            assert check_commit(loser, won).use_stats is True


def test_partition_rule_ignores_data_predicate_in_other_partition():
    read = ReadSet(predicates=(predicate("part = 1 AND id < 100"),))
    won = winner(6, "MERGE", add_rows=[file_row("part=2/new.parquet", 2, range(0, 10))], blind=False)
    loser = txn(read_set=read, add_table=adds(file_row("part=1/mine.parquet", 1)), use_stats=False)
    assert check_commit(loser, won).use_stats is False


def test_unpartitioned_files_read_without_predicate_conflict_with_any_add():
    """Delta's rule: on an unpartitioned table a read of explicit files covers the whole table."""
    loser = txn(read_metadata=UNPARTITIONED, read_set=ReadSet(files=frozenset({LOW})),
                remove_table=removes(remove_row(LOW)), use_stats=True)
    with pytest.raises(ConcurrentAppendException):
        check_commit(loser, update_high_ids())


def test_transaction_that_read_nothing_ignores_concurrent_adds():
    """A metadata-only commit (or a remove by path) read nothing, so no add can invalidate it."""
    props_only = txn(read_metadata=UNPARTITIONED,
                     new_metadata=UNPARTITIONED.replace(description="nightly"), operation="SET TBLPROPERTIES")
    assert check_commit(props_only, update_high_ids()).metadata.description == "nightly"


def test_partitioned_stats_check_reports_the_right_file():
    """Stats are consulted only inside the read partitions; the index maps back to the winner's adds."""
    from deltatx.conflicts import first_conflicting_add

    candidates = adds(
        file_row("part=2/low.parquet", 2, range(0, 10)),  # matches by stats, wrong partition
        file_row("part=1/high.parquet", 1, range(500, 600)),  # right partition, ruled out by stats
        file_row("part=1/low.parquet", 1, range(50, 60)),  # the conflict
        file_row("part=1/nostats.parquet", 1, None),
    )
    loser = txn(read_set=ReadSet(predicates=(predicate("part = 1 AND id < 100"),)),
                add_table=adds(file_row("part=1/mine.parquet", 1)))
    assert first_conflicting_add(loser, candidates) == 2
    assert first_conflicting_add(loser, candidates.slice(0, 2)) is None
    assert first_conflicting_add(loser, candidates.slice(3)) == 0
    only_data = txn(read_set=ReadSet(predicates=(predicate("id < 100"),)),
                    add_table=adds(file_row("part=1/mine.parquet", 1)))
    assert first_conflicting_add(only_data, candidates) == 0
