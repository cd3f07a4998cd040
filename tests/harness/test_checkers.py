"""Every checker passes correct histories and FAILS on a deliberately broken commit path.

The histories come from interleavings (deterministic: barriers, no sleeps) on memory:// tables;
the broken paths are :mod:`deltatx.harness.faults`.
"""

from __future__ import annotations

import uuid

import pytest

import deltatx
from deltatx.harness import (
    Append,
    Delete,
    HarnessError,
    Merge,
    Transfer,
    Update,
    check_history,
    execute,
    faults,
    run_interleaving,
)
from deltatx.harness.serial import LogView
from deltatx.harness.checkers import check_no_lost_commit
from deltatx.harness.workloads import prepare_table

# both transactions pin their snapshot, then commit one after the other
CONCURRENT = "A.begin B.begin A.attempt_commit A.published B.attempt_commit B.published"


def table(workload: str = "mixed", level: str = "Serializable") -> tuple[str, list]:
    uri = f"memory://harness-checkers/{uuid.uuid4().hex}"
    return uri, prepare_table(uri, workload, level)


def race(uri: str, a, b, order: str = CONCURRENT) -> list:
    records = run_interleaving(uri, {"A": a, "B": b}, order).records
    return [records["A"], records["B"]]


def checkers_of(anomalies) -> set[str]:
    return {a.checker for a in anomalies}


def two_increments():
    return (Update("part = 1 AND value >= 0", {"value": "value + 1"}),
            Update("part = 1 AND value >= 0", {"value": "value + 100"}))


# ---------------------------------------------------------------------------- no lost commit


def test_no_lost_commit_passes_a_race_and_fails_when_put_if_absent_overwrites():
    uri, setup = table()
    appends = (Append({"id": [501], "part": [1], "value": [1]}), Append({"id": [502], "part": [1], "value": [2]}))
    assert check_history(setup + race(uri, *appends), uri) == []

    uri, setup = table()
    with faults.overwrite_commits():
        records = race(uri, *appends)
    assert [r.version for r in records] == [2, 2], "both writers believe they committed version 2"
    anomalies = check_history(setup + records, uri, checkers=["no_lost_commit"])
    messages = " | ".join(a.message for a in anomalies)
    assert "lost commit: A#0 append" in messages
    assert "row id=501" in messages and "is missing" in messages


def test_the_overwrite_fault_overwrites_on_local_disk_too(tmp_path):
    """A local writer looks whether its version is taken before it puts (LocalLogStore
    .version_taken): the fault must take that look away too, or the race it stages would be
    settled by the look and the checker proven against nothing."""
    uri = str(tmp_path / "t")
    setup = prepare_table(uri, "mixed", "Serializable")
    appends = (Append({"id": [501], "part": [1], "value": [1]}), Append({"id": [502], "part": [1], "value": [2]}))
    with faults.overwrite_commits():
        records = race(uri, *appends)
    assert [r.version for r in records] == [2, 2]
    assert "lost commit: A#0 append" in " | ".join(
        a.message for a in check_history(setup + records, uri, checkers=["no_lost_commit"]))


def test_no_lost_commit_fails_when_the_store_drops_an_acknowledged_commit():
    uri, setup = table()
    t = deltatx.Table(uri)
    with faults.drop_commits():
        record = execute(t, Append({"id": [77], "part": [0], "value": [0]}), writer="w")
    assert record.outcome == "committed" and record.version == 2
    anomalies = check_history(setup + [record], uri, checkers=["no_lost_commit"])
    assert any("lost commit" in a.message and "version 2 does not exist" in a.message for a in anomalies)


def test_no_lost_commit_finds_duplicate_txn_ids_gaps_and_unrecorded_commits():
    uri, setup = table()
    t = deltatx.Table(uri)
    records = setup + [execute(t, Append({"id": [i], "part": [0], "value": [0]}), writer="w", seq=i)
                       for i in (100, 101)]
    assert check_history(records, uri) == []
    log = LogView.load(uri)
    log.store.write_log_file("00000000000000000005.json", log.store.read_commit(3))  # replayed commit, gap at 4
    log = LogView.load(uri)
    messages = [a.message for a in check_no_lost_commit(records, log, None)]
    assert any("version 4 is missing" in m for m in messages)
    assert any("is committed 2 times, at versions [3, 5]" in m for m in messages)
    unrecorded = check_no_lost_commit(records[:-1], LogView.load(uri), None)
    assert any("committed by no recorded operation" in a.message for a in unrecorded)


def test_no_lost_commit_finds_rows_duplicated_by_an_unchecked_rewrite():
    """A DELETE and an UPDATE both rewrite the same file: with conflicts ignored, the rows the
    DELETE kept are in the table twice."""
    uri, setup = table()
    ops = (Delete("part = 1 AND value < 40"), Update("part = 1 AND value >= 50", {"value": "value - 1"}))
    assert checkers_of(check_history(setup + race(uri, *ops), uri)) == set()
    uri, setup = table()
    with faults.ignore_conflicts():
        records = race(uri, *ops)
    anomalies = check_history(setup + records, uri, checkers=["no_lost_commit"])
    assert any("present 2 times" in a.message for a in anomalies)


def test_a_failed_operation_must_not_be_in_the_log():
    uri, setup = table()
    records = race(uri, *two_increments())
    loser = next(r for r in records if r.outcome == "conflict")
    committed = next(r for r in records if r.committed)
    loser.txn_id = committed.txn_id  # the writer claims failure for a txn that is in the log
    anomalies = check_history(setup + [loser], uri, checkers=["no_lost_commit"])
    assert any("reported ConcurrentAppendException but it is in the log" in a.message for a in anomalies)


# ---------------------------------------------------------------------------- Serializable


def test_serializable_passes_the_real_commit_path_and_fails_without_conflict_checks():
    uri, setup = table(level="Serializable")
    records = race(uri, *two_increments())
    assert sorted(r.outcome for r in records) == ["committed", "conflict"]
    assert check_history(setup + records, uri) == []

    uri, setup = table(level="Serializable")
    with faults.ignore_conflicts():
        records = race(uri, *two_increments())
    assert [r.outcome for r in records] == ["committed", "committed"]
    anomalies = check_history(setup + records, uri, checkers=["serializable"])
    assert anomalies and all(a.checker == "serializable" for a in anomalies)
    assert any("final table differs from the serial replay in version order" in a.message for a in anomalies)


def test_serializable_checker_compares_each_observation():
    """B deletes what it saw at its read version; replayed after A's insert it would delete more."""
    uri, setup = table(level="Serializable")
    ops = (Append({"id": [900, 901], "part": [2, 2], "value": [1, 2]}), Delete("part = 2 AND value < 10"))
    with faults.ignore_conflicts():
        records = race(uri, ops[0], ops[1])
    anomalies = check_history(setup + records, uri, checkers=["serializable"])
    assert any("B#0 delete" in a.message and "when the committed operations run one at a time" in a.message
               for a in anomalies), anomalies


def test_write_serializable_history_is_not_serializable():
    """The seed's example on a WriteSerializable table: the DELETE commits after a concurrent blind
    INSERT it did not see. Legal under WriteSerializable, not under Serializable."""
    uri, setup = table(level="WriteSerializable")
    history = setup + race(uri, Delete("part = 2 AND value < 90"), Append({"id": [950], "part": [2], "value": [5]}),
                           order="A.begin B.begin B.attempt_commit B.published A.attempt_commit A.published")
    assert all(r.committed for r in history)
    assert check_history(history, uri) == []  # the table's level: WriteSerializable
    assert check_history(history, uri, checkers=["write_serializable"]) == []
    assert checkers_of(check_history(history, uri, isolation="Serializable")) == {"serializable"}


# ---------------------------------------------------------------------------- WriteSerializable


def test_write_serializable_fails_without_conflict_checks():
    uri, setup = table(level="WriteSerializable")
    assert check_history(setup + race(uri, *two_increments()), uri) == []
    uri, setup = table(level="WriteSerializable")
    with faults.ignore_conflicts():
        records = race(uri, *two_increments())
    anomalies = check_history(setup + records, uri, checkers=["write_serializable"])
    assert anomalies and all(a.checker == "write_serializable" for a in anomalies)


def test_write_serializable_only_permits_moving_blind_appends():
    """A MERGE's insert (it reads the table: not blind) that the DELETE did not see may not be
    serialized after the DELETE the way a blind append may."""
    order = "A.begin B.begin B.attempt_commit B.published A.attempt_commit A.published"
    delete = Delete("part = 3 AND value < 99")
    insert = Merge({"id": [960, 961], "part": [3, 3], "value": [1, 2]}, match={"part": 3})
    uri, setup = table(level="WriteSerializable")
    records = race(uri, delete, insert, order=order)
    assert records[0].error == "ConcurrentAppendException"
    assert check_history(setup + records, uri) == []
    uri, setup = table(level="WriteSerializable")
    with faults.ignore_conflicts():
        records = race(uri, delete, insert, order=order)
    assert all(r.committed for r in records)
    assert checkers_of(check_history(setup + records, uri)) == {"write_serializable"}
    # the same rows as a blind append: legal
    uri, setup = table(level="WriteSerializable")
    records = race(uri, delete, Append({"id": [960, 961], "part": [3, 3], "value": [1, 2]}), order=order)
    assert all(r.committed for r in records) and check_history(setup + records, uri) == []


# ---------------------------------------------------------------------------- bank


def test_bank_invariant_holds_with_conflicts_and_breaks_without():
    transfers = (Transfer(source=3, target=5, amount=30), Transfer(source=3, target=7, amount=50))
    uri, setup = table("bank", "Serializable")
    records = race(uri, *transfers)
    assert sorted(r.outcome for r in records) == ["committed", "conflict"]
    assert check_history(setup + records, uri) == []

    uri, setup = table("bank", "Serializable")
    with faults.ignore_conflicts():
        records = race(uri, *transfers)
    anomalies = check_history(setup + records, uri, checkers=["bank"])
    assert checkers_of(anomalies) == {"bank"}
    messages = [a.message for a in anomalies]
    assert any(m.startswith("total balance is") and "at version 3" in m and m.endswith("expected 1600")
               for m in messages), messages
    assert any("accounts at version 3 differ" in m for m in messages), "both rewrote account 3's file"


# ---------------------------------------------------------------------------- misc


def test_unexpected_errors_are_anomalies():
    uri, setup = table()
    record = execute(deltatx.Table(uri), Delete("no_such_column = 1"), writer="w")
    assert record.outcome == "error" and record.error == "PredicateError"
    assert checkers_of(check_history(setup + [record], uri)) == {"errors"}


def test_unknown_checker_is_refused():
    uri, setup = table()
    with pytest.raises(HarnessError, match="unknown checker"):
        check_history(setup, uri, checkers=["linearizable"])


def test_no_lost_commit_finds_a_commit_whose_add_was_dropped(tmp_path):
    """The rows of a committed append must be in the table at its version, and a later remove
    must name a file that was added: both fail when the append's add action is taken out."""
    import os

    import pyarrow as pa

    from deltatx.harness import Optimize

    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, pa.schema([("id", pa.int64()), ("value", pa.int64())]))
    history = [execute(t, Append({"id": [1, 2], "value": [10, 20]}), writer="w0", seq=0),
               execute(t, Append({"id": [3, 4], "value": [30, 40]}), writer="w0", seq=1),
               execute(t, Optimize(), writer="w0", seq=2)]
    assert check_history(history, uri) == []
    path = os.path.join(uri, "_delta_log", f"{2:020d}.json")
    with open(path) as fh:
        kept = [line for line in fh if '"add"' not in line]
    with open(path, "w") as fh:
        fh.writelines(kept)
    found = check_history(history, uri)
    messages = [a.message for a in found if a.checker == "no_lost_commit"]
    assert any("adds no data file" in m for m in messages)
    assert any("which no earlier version added" in m and "version 3" in m for m in messages)
