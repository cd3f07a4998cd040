"""Turning row tracking on over a table whose files have no row ids, with other writers around.

``Table.set_properties({"delta.enableRowTracking": "true"})`` runs Delta's three commits: UPGRADE
PROTOCOL, ROW TRACKING BACKFILL (every file without ids re-added, ``dataChange=false``), then SET
TBLPROPERTIES. These tests pin down

- the backfill losing the race to a DELETE / UPDATE / OPTIMIZE that rewrote some of the files it
  re-adds: Delta's #5 drops those re-adds and commits the rest (it used to raise
  ConcurrentDeleteReadException, leaving the table upgraded with row tracking off);
- a DML that read after the upgrade and loses to the backfill: its re-added files take the
  backfill's ids (it used to keep ids it handed out itself, which other rows held);
- an explicit transaction: it cannot carry the backfill, so it refuses the property over files
  without ids (it used to commit the property with every row's id NULL), and a one-commit
  enablement conflicts with a writer that added files without ids first.

Races are deterministic: a :mod:`deltatx.phases` observer commits the winner when the backfill
reaches ``attempt_commit`` (after it staged its re-adds, before its put), or the loser is a
transaction staged first and committed after; no threads, no sleeps.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import orjson
import pyarrow as pa
import pytest

import deltatx
from deltatx import phases
from deltatx.errors import ConcurrentWriteException, InvalidPropertyError, UnsupportedOperationError
from deltatx.txnlog import row_tracking
from backfill_races import enable_with_dml_staged_after_upgrade

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])
RT = {"delta.enableRowTracking": "true"}
ROW_ID = "_metadata.row_id"


def _rows(ids: list[int], v: int = 0) -> pa.Table:
    return pa.table({"id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


def make(uri: str, dvs: bool = False) -> deltatx.Table:
    """Three files of three rows, written before row tracking: none has a baseRowId."""
    props = {"delta.enableDeletionVectors": "true"} if dvs else {}
    table = deltatx.create_table(uri, SCHEMA, properties=props)
    for start in (0, 3, 6):
        table.append(_rows(list(range(start, start + 3))))
    return table


def commit_actions(uri: str, version: int) -> tuple[str, list[dict], list[dict]]:
    """(operation, adds, removes) of one commit, read straight from the log."""
    op, adds, removes = "", [], []
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        for line in fh:
            action = orjson.loads(line)
            if "commitInfo" in action:
                op = action["commitInfo"]["operation"]
            elif "add" in action:
                adds.append(action["add"])
            elif "remove" in action:
                removes.append(action["remove"])
    return op, adds, removes


def operations(uri: str, first: int) -> list[str]:
    return [commit_actions(uri, v)[0] for v in range(first, deltatx.Table(uri).version + 1)]


def row_ids(uri: str) -> dict[int, tuple[int, Any]]:
    """id -> (v, row id), every live row; asserts row tracking is on and the ids are unique."""
    table = deltatx.Table(uri)
    assert table.properties.get("delta.enableRowTracking") == "true"
    got = {r["id"]: (r["v"], r[ROW_ID]) for r in table.to_arrow(columns=["id", "v", ROW_ID]).to_pylist()}
    ids = [rid for _, rid in got.values()]
    assert None not in ids, got
    assert len(set(ids)) == len(ids), got
    assert max(ids) <= row_tracking.high_watermark(table.snapshot.domains)
    assert table.snapshot.files["baseRowId"].null_count == 0
    return got


def at_backfill_attempt(uri: str, first_version: int, winner: Callable[[], Any]) -> Callable[..., None]:
    """An observer committing ``winner()`` once, when the commit of ``first_version + 2`` (the
    backfill: the upgrade takes ``first_version + 1``) is about to be put for the first time."""
    fired: list[bool] = []

    def observer(phase: str, **context: Any) -> None:
        if phase == "attempt_commit" and context.get("version") == first_version + 2 and not fired:
            fired.append(True)  # first: the winner's own attempt at that version passes through
            winner()

    return observer


# --------------------------------------------------------------------------------------------
# The backfill loses the race
# --------------------------------------------------------------------------------------------

WINNERS: dict[str, Callable[[Any], Any]] = {
    "DELETE": lambda tx: tx.delete("id = 1"),
    "UPDATE": lambda tx: tx.update("id = 4", set={"v": "v + 100"}),
    "OPTIMIZE": lambda tx: tx.optimize(),
    "WRITE": lambda tx: tx.append(_rows([9, 10], v=7)),
}


def expected_rows(winner: str) -> dict[int, int]:
    rows = {i: 0 for i in range(9)}
    if winner == "DELETE":
        del rows[1]
    elif winner == "UPDATE":
        rows[4] = 100
    elif winner == "WRITE":
        rows.update({9: 7, 10: 7})
    return rows


@pytest.mark.parametrize("read", ["after the upgrade", "before the upgrade"])
@pytest.mark.parametrize("dvs", [False, True], ids=["copy-on-write", "deletion vectors"])
@pytest.mark.parametrize("winner", sorted(WINNERS))
def test_a_backfill_that_loses_to_a_rewrite_drops_those_files_and_commits(table_uri, winner, dvs, read):
    """The winner committed after the protocol upgrade, so its new files have ids; the backfill
    drops its re-adds of the paths the winner removed or added (a DV update removes and re-adds
    the same path) and gives ids to the rest. The winner's change stays, every row has an id."""
    v0 = make(table_uri, dvs).version
    early = None
    if read == "before the upgrade":  # it loses to the upgrade first, and adopts the protocol
        early = deltatx.Table(table_uri).transaction()
        WINNERS[winner](early)

    def commit_winner() -> None:
        tx = early or deltatx.Table(table_uri).transaction()
        if early is None:
            WINNERS[winner](tx)
        tx.commit()

    with phases.observe(at_backfill_attempt(table_uri, v0, commit_winner)):
        deltatx.Table(table_uri).set_properties(RT)

    assert operations(table_uri, v0 + 1) == [
        "UPGRADE PROTOCOL", winner, row_tracking.BACKFILL_OPERATION, "SET TBLPROPERTIES"]
    _, won_adds, won_removes = commit_actions(table_uri, v0 + 2)
    _, backfilled, _ = commit_actions(table_uri, v0 + 3)
    touched = {a["path"] for a in won_adds} | {r["path"] for r in won_removes}
    assert {a["path"] for a in backfilled}.isdisjoint(touched)
    assert all(a["baseRowId"] is not None for a in won_adds)  # the winner gave its files ids
    info = deltatx.Table(table_uri).history()[-(v0 + 4)]  # the backfill's: counts what it committed
    assert info["operation"] == row_tracking.BACKFILL_OPERATION
    assert info["operationMetrics"]["numSuccessfullyBackfilledFiles"] == str(len(backfilled))
    assert str(info["operationParameters"]["numFiles"]) == str(len(backfilled))
    got = row_ids(table_uri)
    assert {i: v for i, (v, _) in got.items()} == expected_rows(winner)
    # the next writer hands out ids above every id a row holds
    deltatx.Table(table_uri).append(_rows([50]))
    assert len(row_ids(table_uri)) == len(got) + 1


def test_a_backfill_that_loses_to_another_backfill_readds_nothing(table_uri):
    """Two enablements race: the first backfill gave every file ids; the second one drops every
    re-add (the winner added those paths) instead of re-committing them, so the ids stay."""
    v0 = make(table_uri).version
    with phases.observe(at_backfill_attempt(table_uri, v0, lambda: deltatx.Table(table_uri).set_properties(RT))):
        deltatx.Table(table_uri).set_properties(RT)
    ops = operations(table_uri, v0 + 1)
    assert ops[:4] == ["UPGRADE PROTOCOL", row_tracking.BACKFILL_OPERATION, "SET TBLPROPERTIES",
                       row_tracking.BACKFILL_OPERATION]
    _, first, _ = commit_actions(table_uri, v0 + 2)
    _, second, _ = commit_actions(table_uri, v0 + 4)
    assert len(first) == 3 and second == []
    assert sorted(rid for _, rid in row_ids(table_uri).values()) == list(range(9))


# --------------------------------------------------------------------------------------------
# A DML loses to the backfill
# --------------------------------------------------------------------------------------------


SECOND_FILE_DML: dict[str, Callable[[Any], Any]] = {  # row 4 is in the second file (rows 3-5)
    "DELETE": lambda tx: tx.delete("id = 4"),
    "UPDATE": lambda tx: tx.update("id = 4", set={"v": "v + 100"}),
}


@pytest.mark.parametrize("dml", sorted(SECOND_FILE_DML))
def test_a_dv_update_that_read_after_the_upgrade_takes_the_backfilled_ids(table_uri, dml):
    """A DML that reads after the upgrade hands out ids to the second file, which it re-adds with
    a DV (it had none): 0-2, as the first ids above an empty watermark. The backfill wins and gave
    that file 3-5 (the first file 0-2). The DML takes the backfill's ids (Delta's #5); keeping its
    own, rows 3 and 5 would share ids 0 and 2 with rows 0 and 2."""
    v0 = make(table_uri, dvs=True).version
    loser = enable_with_dml_staged_after_upgrade(table_uri, v0, SECOND_FILE_DML[dml])
    before = row_ids(table_uri)
    loser.commit()
    after = row_ids(table_uri)
    expected = {i: 0 for i in range(9) if i != 4 or dml == "UPDATE"} | ({4: 100} if dml == "UPDATE" else {})
    assert {i: v for i, (v, _) in after.items()} == expected
    for i in (0, 2, 3, 5, 6):  # rows of the re-added file and of files the DML did not touch
        assert after[i][1] == before[i][1]


# --------------------------------------------------------------------------------------------
# Inside an explicit transaction
# --------------------------------------------------------------------------------------------


def _unchanged(uri: str, version: int) -> None:
    table = deltatx.Table(uri)
    assert table.version == version
    assert "delta.enableRowTracking" not in table.properties
    assert "rowTracking" not in (table.protocol.writer_features or ())
    assert sorted(table.to_arrow(columns=["id"]).column(0).to_pylist()) == list(range(9))


@pytest.mark.parametrize("before", ["nothing", "a DELETE", "an append"])
def test_a_transaction_refuses_row_tracking_over_files_without_ids(table_uri, before):
    """The backfill is a commit of its own (between the upgrade and the property): a transaction
    cannot carry it, so it refuses, typed, before staging anything, and commits nothing."""
    v0 = make(table_uri).version
    with pytest.raises(UnsupportedOperationError, match="cannot join a transaction while files have no row ids") \
            as raised:
        with deltatx.Table(table_uri).transaction() as tx:
            if before == "a DELETE":
                tx.delete("id = 1")
            elif before == "an append":
                tx.append(_rows([20]))
            tx.set_properties(RT)
    assert "Table.set_properties({'delta.enableRowTracking': 'true'})" in str(raised.value)
    _unchanged(table_uri, v0)
    deltatx.Table(table_uri).set_properties(RT)  # what the message says to do
    assert len(row_ids(table_uri)) == 9


def test_a_transaction_that_rewrites_every_file_may_turn_row_tracking_on(table_uri):
    """Every file the commit leaves is one it adds: they get ids as it commits, in one commit."""
    v0 = make(table_uri).version
    with deltatx.Table(table_uri).transaction() as tx:
        tx.overwrite(_rows([1, 2], v=5))
        tx.set_properties(RT)
    assert deltatx.Table(table_uri).version == v0 + 1
    assert row_ids(table_uri) == {1: (5, 0), 2: (5, 1)}


def test_a_one_commit_enablement_conflicts_with_a_write_without_ids(table_uri):
    """On an empty table a transaction turns row tracking on in one commit; an append that read the
    old protocol and committed first added a file without ids, which that commit cannot give ids:
    it conflicts (typed) instead of enabling row tracking over rows without ids."""
    deltatx.create_table(table_uri, SCHEMA)
    tx = deltatx.Table(table_uri).transaction()
    tx.set_properties(RT)
    deltatx.Table(table_uri).append(_rows([1, 2]))
    with pytest.raises(ConcurrentWriteException, match="turns row tracking on.*added files without row ids"):
        tx.commit()
    table = deltatx.Table(table_uri)
    assert table.version == 1 and "delta.enableRowTracking" not in table.properties
    with deltatx.Table(table_uri).transaction() as tx:  # retried: now there is a file without ids
        with pytest.raises(UnsupportedOperationError):
            tx.set_properties(RT)
    table.set_properties(RT)
    assert {i for i in row_ids(table_uri)} == {1, 2}


def test_a_one_commit_enablement_on_an_empty_table_still_commits(table_uri):
    deltatx.create_table(table_uri, SCHEMA)
    with deltatx.Table(table_uri).transaction() as tx:
        tx.set_properties(RT)
        tx.append(_rows([1, 2, 3]))
    assert sorted(rid for _, rid in row_ids(table_uri).values()) == [0, 1, 2]


@pytest.mark.parametrize("inside", [False, True], ids=["Table.set_properties", "a transaction"])
def test_row_tracking_is_not_turned_on_while_suspended(table_uri, inside):
    """Delta's DELTA_ROW_TRACKING_ILLEGAL_PROPERTY_COMBINATION: writers of a suspended table assign
    no ids, so the backfill would give none; refused before the protocol upgrade commits."""
    table = deltatx.create_table(table_uri, SCHEMA, properties={"delta.rowTrackingSuspended": "true"})
    for start in (0, 3, 6):
        table.append(_rows(list(range(start, start + 3))))
    v0 = table.version
    with pytest.raises(InvalidPropertyError, match="cannot be set while delta.rowTrackingSuspended=true"):
        if inside:
            with deltatx.Table(table_uri).transaction() as tx:
                tx.set_properties(RT)
        else:
            deltatx.Table(table_uri).set_properties(RT)
    _unchanged(table_uri, v0)
    with pytest.raises(InvalidPropertyError, match="first, in a commit of its own"):  # the backfill would
        deltatx.Table(table_uri).set_properties({"delta.rowTrackingSuspended": "false", **RT})  # run suspended
    _unchanged(table_uri, v0)
    deltatx.Table(table_uri).set_properties({"delta.rowTrackingSuspended": "false"})
    deltatx.Table(table_uri).set_properties(RT)
    assert len(row_ids(table_uri)) == 9


def test_an_overwrite_that_enables_row_tracking_loses_to_an_append_as_in_delta(table_uri):
    """Delta's own rule sees this one first: the append added data the overwrite read."""
    from deltatx.errors import ConcurrentAppendException

    make(table_uri)
    tx = deltatx.Table(table_uri).transaction()
    tx.overwrite(_rows([7]))
    tx.set_properties(RT)
    deltatx.Table(table_uri).append(_rows([8]))
    version = deltatx.Table(table_uri).version
    with pytest.raises(ConcurrentAppendException):
        tx.commit()
    assert deltatx.Table(table_uri).version == version
