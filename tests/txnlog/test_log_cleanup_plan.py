"""Metadata cleanup's planner (txnlog/log_cleanup.py), rule by rule, without I/O: listings are
built from names, sizes and modification times (PROTOCOL.md "Metadata Cleanup")."""

from __future__ import annotations

import pytest

from deltatx.errors import InvalidPropertyError
from deltatx.txnlog.log_cleanup import (CLOCK_SKEW_MS, DAY_MS, CleanupPlan, cutoff_ms, log_retention_ms,
                                        may_be_cleaned_after, plan_cleanup)
from deltatx.txnlog.store import LogFile, classify

T0 = 1_750_000_000_000  # ms; every listing's times are offsets from it
CUT = T0 + 1_000  # a cutoff between the commits' times


def commit(v: int, t: int) -> LogFile:
    return classify(f"{v:020d}.json", 100, t)


def checkpoint(v: int, t: int, size: int = 100) -> LogFile:
    return classify(f"{v:020d}.checkpoint.parquet", size, t)


def part(v: int, p: int, n: int, t: int, size: int = 100) -> LogFile:
    return classify(f"{v:020d}.checkpoint.{p:010d}.{n:010d}.parquet", size, t)


def log(n: int, old_through: int, checkpoints=(), *, skip=()) -> list[LogFile]:
    """Commits 0..n-1 (minus ``skip``); those up to ``old_through`` before CUT, the rest after;
    a classic checkpoint at each of ``checkpoints``, written just after its commit."""
    files = []
    for v in range(n):
        t = T0 + v if v <= old_through else CUT + 1 + v
        if v not in skip:
            files.append(commit(v, t))
        if v in checkpoints:
            files.append(checkpoint(v, t + 1))
    return files


def names(plan: CleanupPlan) -> list[str]:
    return plan.names


def versions(plan: CleanupPlan) -> set[int]:
    return {f.version for f in plan.delete}


# -------------------------------------------------------------------------------- the cutoff

def test_the_cutoff_is_midnight_utc_of_the_day_now_minus_the_retention_falls_in():
    now = 1_750_000_000_000  # 2025-06-15 15:06:40 UTC
    assert cutoff_ms(now, 30 * DAY_MS) == 1_747_353_600_000  # 2025-05-16 00:00 UTC
    assert cutoff_ms(now, 0) == 1_749_945_600_000  # today's midnight: nothing from today expires
    assert cutoff_ms(1_749_945_600_000, 0) == 1_749_945_600_000  # exactly midnight stays


def test_the_retention_is_the_table_property_or_30_days():
    assert log_retention_ms({}) == 30 * DAY_MS
    assert log_retention_ms({"delta.logRetentionDuration": "interval 2 days"}) == 2 * DAY_MS
    with pytest.raises(InvalidPropertyError, match="logRetentionDuration"):
        log_retention_ms({"delta.logRetentionDuration": "forever"})


# -------------------------------------------------------------------------------- the boundary

def test_nothing_goes_while_no_commit_is_older_than_the_cutoff():
    plan = plan_cleanup(log(5, old_through=-1, checkpoints=(2,)), CUT, latest_version=4)
    assert plan.delete == () and plan.boundary is None and plan.blocked is None
    assert "no commit is older than the cutoff" in plan.note


def test_nothing_goes_without_a_checkpoint_at_or_before_the_newest_expired_commit():
    # every commit expired but the only checkpoint is of a version after the newest expired one
    plan = plan_cleanup(log(8, old_through=4, checkpoints=(6,)), CUT, latest_version=7)
    assert plan.delete == () and plan.boundary is None
    assert "no complete checkpoint at or before version 4" in plan.note


def test_the_newest_checkpoint_at_or_before_the_cutoff_commit_stays_with_its_commit_and_all_after():
    plan = plan_cleanup(log(12, old_through=8, checkpoints=(3, 6, 10)), CUT, latest_version=11)
    assert plan.boundary == 6
    assert names(plan) == sorted([f"{v:020d}.json" for v in range(6)] + [f"{3:020d}.checkpoint.parquet"])
    assert plan.blocked is None


def test_a_checkpoint_at_the_cutoff_commit_itself_is_the_boundary():
    plan = plan_cleanup(log(10, old_through=6, checkpoints=(3, 6)), CUT, latest_version=9)
    assert plan.boundary == 6 and versions(plan) == {0, 1, 2, 3, 4, 5}


def test_a_commit_exactly_at_the_cutoff_has_expired():
    files = [commit(0, T0), commit(1, CUT), checkpoint(1, CUT + 5), commit(2, CUT + 10)]
    plan = plan_cleanup(files, CUT, latest_version=2)
    assert plan.boundary == 1 and names(plan) == [f"{0:020d}.json"]


def test_the_checkpoint_just_written_for_the_latest_version_is_a_boundary_when_everything_expired():
    plan = plan_cleanup(log(6, old_through=5, checkpoints=(5,)), CUT, latest_version=5)
    assert plan.boundary == 5 and versions(plan) == {0, 1, 2, 3, 4}


def test_nothing_is_left_to_delete_once_everything_before_the_boundary_is_gone():
    files = [f for f in log(12, old_through=8, checkpoints=(6, 10)) if f.version >= 6]
    plan = plan_cleanup(files, CUT, latest_version=11)
    assert plan.boundary == 6 and plan.delete == () and plan.blocked is None
    assert "nothing before checkpoint 6 is left" in plan.note


# -------------------------------------------------------------------------------- times

def test_commit_times_never_decrease_with_version():
    # commit 3's file was written with a clock far ahead, so 4 and 5 (older mtimes) count as
    # younger than it: nothing after 2 has expired, and checkpoint 4 cannot be the boundary
    files = [commit(0, T0), commit(1, T0 + 1), checkpoint(1, T0 + 2), commit(2, T0 + 3),
             commit(3, CUT + 10_000), commit(4, T0 + 4), checkpoint(4, T0 + 5), commit(5, T0 + 6)]
    plan = plan_cleanup(files, CUT, latest_version=5)
    assert plan.boundary == 1 and names(plan) == [f"{0:020d}.json"]


def test_checkpoint_file_times_do_not_decide_only_commit_times_do():
    # a checkpoint written long after its (expired) commit still stands for that version
    files = [commit(0, T0), commit(1, T0 + 1), checkpoint(1, CUT + 99_999), commit(2, CUT + 5)]
    assert plan_cleanup(files, CUT, latest_version=2).boundary == 1


# -------------------------------------------------------------------------------- checkpoints

def test_an_incomplete_multi_part_checkpoint_is_never_the_boundary_and_older_parts_go():
    files = log(10, old_through=8, checkpoints=(2,))
    files += [part(6, 1, 3, T0 + 6), part(6, 3, 3, T0 + 6)]  # part 2 of 3 missing
    plan = plan_cleanup(sorted(files, key=lambda f: (f.version, f.name)), CUT, latest_version=9)
    assert plan.boundary == 2
    assert versions(plan) == {0, 1}  # the incomplete set at 6 is after the boundary: left alone


def test_a_complete_multi_part_checkpoint_is_a_boundary_and_all_its_parts_stay():
    files = log(10, old_through=8, checkpoints=(2,)) + [part(6, p, 3, T0 + 6) for p in (1, 2, 3)]
    plan = plan_cleanup(files, CUT, latest_version=9)
    assert plan.boundary == 6 and [f.name for f in plan.checkpoint] == [part(6, p, 3, 0).name for p in (1, 2, 3)]
    assert versions(plan) == {0, 1, 2, 3, 4, 5}
    assert not any(f.version == 6 for f in plan.delete)


def test_incomplete_parts_before_the_boundary_are_deleted_with_it():
    files = log(10, old_through=8, checkpoints=(6,)) + [part(3, 1, 2, T0 + 3)]
    plan = plan_cleanup(files, CUT, latest_version=9)
    assert plan.boundary == 6 and part(3, 1, 2, 0).name in names(plan)


def test_a_checkpoint_with_an_empty_file_is_not_a_boundary():
    files = log(10, old_through=8, checkpoints=(3,)) + [checkpoint(6, T0 + 7, size=0)]
    plan = plan_cleanup(files, CUT, latest_version=9)
    assert plan.boundary == 3 and versions(plan) == {0, 1, 2}


def test_a_checkpoint_whose_commit_file_is_gone_is_not_a_boundary():
    # PROTOCOL.md keeps the boundary's commit file; a checkpoint without one (a half-done cleanup
    # by another tool) cannot be kept with it
    files = [f for f in log(10, old_through=8, checkpoints=(3, 6)) if f.name != commit(6, 0).name]
    plan = plan_cleanup(files, CUT, latest_version=9)
    assert plan.boundary == 3


def test_several_checkpoints_of_one_version_all_stay():
    files = log(8, old_through=6, checkpoints=(4,))
    files.append(classify(f"{4:020d}.checkpoint.3a0d65cd-4056-49b8-937b-95f9e3ee90e5.json", 50, T0 + 5))
    plan = plan_cleanup(files, CUT, latest_version=7)
    assert plan.boundary == 4 and not any(f.version == 4 for f in plan.delete)


# -------------------------------------------------------------------------------- gaps

def test_a_gap_in_the_commits_kept_blocks_the_cleanup():
    plan = plan_cleanup(log(12, old_through=8, checkpoints=(4,), skip=(6,)), CUT, latest_version=11)
    assert plan.delete == () and plan.boundary == 4
    assert plan.blocked is not None and "commit 6 is missing" in plan.blocked and plan.next_due_ms is None


def test_a_gap_before_the_boundary_goes_with_it():
    plan = plan_cleanup(log(12, old_through=8, checkpoints=(6,), skip=(2,)), CUT, latest_version=11)
    assert plan.blocked is None and versions(plan) == {0, 1, 3, 4, 5}


def test_files_after_the_latest_version_are_not_looked_at():
    files = log(10, old_through=8, checkpoints=(4,)) + [commit(12, CUT + 50)]  # 10, 11 not listed yet
    plan = plan_cleanup(files, CUT, latest_version=9)
    assert plan.blocked is None and versions(plan) == {0, 1, 2, 3}


# -------------------------------------------------------------------------------- other files

def test_checksums_before_the_boundary_go_and_compactions_starting_at_or_before_it():
    files = log(10, old_through=8, checkpoints=(5,))
    files += [classify(f"{v:020d}.crc", 10, T0 + v, extra=True) for v in range(10)]
    files += [classify(f"{a:020d}.{b:020d}.compacted.json", 10, T0 + b, extra=True)
              for a, b in ((1, 3), (4, 6), (5, 7), (6, 8))]
    plan = plan_cleanup(files, CUT, latest_version=9)
    assert plan.boundary == 5
    crcs = sorted(f.version for f in plan.delete if f.kind == "checksum")
    compactions = sorted((f.version, f.end_version) for f in plan.delete if f.kind == "compaction")
    assert crcs == [0, 1, 2, 3, 4]
    assert compactions == [(1, 3), (4, 6), (5, 7)]  # start ≤ the boundary (PROTOCOL.md)


def test_only_the_kinds_of_files_cleanup_knows_are_ever_named():
    assert classify("_last_checkpoint") is None and classify("00000000000000000001.crc") is None
    assert classify(".00000000000000000001.json.tmp", extra=True) is None
    assert classify("00000000000000000001.crc", extra=True).kind == "checksum"
    compaction = classify("00000000000000000001.00000000000000000004.compacted.json", extra=True)
    assert (compaction.kind, compaction.version, compaction.end_version) == ("compaction", 1, 4)


def test_deletion_goes_oldest_version_first_and_names_are_sorted():
    files = log(10, old_through=8, checkpoints=(2, 6))
    files += [classify(f"{v:020d}.crc", 10, T0 + v, extra=True) for v in range(6)]
    plan = plan_cleanup(list(reversed(files)), CUT, latest_version=9)
    order = [f.version for f in plan.delete]
    assert order == sorted(order)
    assert plan.names == sorted(plan.names)


# -------------------------------------------------------------------------------- rules of features

def test_a_catalog_bound_keeps_the_boundary_at_or_before_the_last_verified_version():
    plan = plan_cleanup(log(12, old_through=10, checkpoints=(3, 6, 9)), CUT, latest_version=11,
                        deletable_through=7)
    assert plan.boundary == 6 and max(versions(plan)) == 5


def test_checkpoint_protection_a_partial_truncation_keeps_every_checkpoint_from_the_boundary_on():
    # Delta's DROP FEATURE left protected checkpoints at 8 (requireCheckpointProtectionBeforeVersion=8):
    # a cleanup up to 4 creates no checkpoint and erases none after 4 (the RFC's exception (a))
    plan = plan_cleanup(log(12, old_through=6, checkpoints=(2, 4, 8)), CUT, latest_version=11, protected_before=8)
    assert plan.boundary == 4 and versions(plan) == {0, 1, 2, 3}
    assert not any(f.kind == "checkpoint" and f.version >= 4 for f in plan.delete)
    assert "protected version 8" in plan.note and "kept from the boundary on" in plan.note


def test_checkpoint_protection_a_truncation_past_the_protected_version_removes_all_before_it():
    plan = plan_cleanup(log(12, old_through=10, checkpoints=(4, 8, 10)), CUT, latest_version=11, protected_before=8)
    assert plan.boundary == 10 and versions(plan) == set(range(10))
    assert "history before the protected version 8 is gone" in plan.note


def test_a_plan_can_never_delete_at_or_after_its_boundary():
    with pytest.raises(AssertionError, match="only files before its boundary"):
        CleanupPlan(CUT, boundary=4, delete=(checkpoint(4, T0),))
    with pytest.raises(AssertionError):
        CleanupPlan(CUT, boundary=None, delete=(commit(0, T0),))


# -------------------------------------------------------------------------------- pacing, stale snapshots

def test_the_next_cleanup_is_due_when_the_next_checkpoint_s_commit_expires():
    plan = plan_cleanup(log(12, old_through=5, checkpoints=(3, 8)), CUT, latest_version=11)
    assert plan.boundary == 3 and plan.next_due_ms == CUT + 1 + 8
    none_yet = plan_cleanup(log(6, old_through=5), CUT, latest_version=5)
    assert none_yet.next_due_ms == T0 + 5 + 1  # no checkpoint: after the latest commit at the earliest


def test_a_version_seen_as_the_latest_before_a_cleanup_horizon_may_have_lost_its_successors():
    """Commits after a version seen as the latest at ``observed`` were written later; a cleanup
    deletes only commits older than its cutoff, which is never later than today's midnight UTC
    (Delta's and deltatx's day-truncated cutoff, whatever retention another client set) nor, for
    delta-rs's, than now minus the retention."""
    midnight = (T0 // DAY_MS + 40) * DAY_MS
    now = midnight + 12 * 3_600_000  # noon
    props = {"delta.logRetentionDuration": "interval 30 days"}
    assert may_be_cleaned_after(T0, props, now)
    assert may_be_cleaned_after(now - 29 * DAY_MS, props, now)  # before today's midnight: any retention may apply
    assert may_be_cleaned_after(midnight - CLOCK_SKEW_MS - 1, props, now)
    assert not may_be_cleaned_after(midnight - CLOCK_SKEW_MS // 2, props, now)  # clocks differ by under an hour
    assert not may_be_cleaned_after(now - 3_600_000, props, now)
    short = {"delta.logRetentionDuration": "interval 1 hours"}  # delta-rs's cutoff: now minus that
    assert may_be_cleaned_after(now - 3 * 3_600_000, short, now)
    assert not may_be_cleaned_after(now - 60_000, short, now)
    nonsense = {"delta.logRetentionDuration": "nonsense"}  # unreadable: counts as zero
    assert may_be_cleaned_after(now - CLOCK_SKEW_MS - 1, nonsense, now)
    assert not may_be_cleaned_after(now - 60_000, nonsense, now)


def test_a_storage_that_reports_no_modification_times_deletes_nothing():
    """A listing without times (read as 0, 1970) would make every commit look expired: with no
    age nothing can be shown expired, so the plan is blocked and says why."""
    files = [classify(f"{v:020d}.json", 100, 0) for v in range(12)] + [classify(f"{10:020d}.checkpoint.parquet", 100, 0)]
    plan = plan_cleanup(files, CUT, latest_version=11)
    assert plan.delete == () and "no modification time" in plan.blocked
