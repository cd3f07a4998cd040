"""Row-level concurrency on deletion-vector + row-tracking tables, end to end.

Two transactions are opened at the same version, staged, then committed one after the other (the
second loses the race and goes through the conflict checker): deterministic, no threads.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    UnsupportedOperationError,
)

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("v", pa.int64())])
LEVELS = ["Serializable", "WriteSerializable"]


def make(uri: str, level: str, partitioned: bool = False, row_tracking: bool = True) -> None:
    props = {"delta.enableDeletionVectors": "true", "delta.isolationLevel": level}
    if row_tracking:
        props["delta.enableRowTracking"] = "true"
    table = deltatx.create_table(uri, SCHEMA, partition_by=["part"] if partitioned else None, properties=props)
    ids = list(range(100))
    table.append(pa.table({"id": ids, "part": ["a"] * 100, "v": [0] * 100}, schema=SCHEMA))


def pair(uri: str):
    return deltatx.Table(uri).transaction(), deltatx.Table(uri).transaction()


def rows(uri: str) -> dict[int, dict]:
    table = deltatx.Table(uri)
    tracked = "rowTracking" in (table.protocol.writer_features or ())
    cols = ["id", "v"] + (["_metadata.row_id"] if tracked else [])
    return {r["id"]: r for r in table.to_arrow(columns=cols).to_pylist()}


def merge_update(tx, ids, value):
    return tx.merge(pa.table({"id": ids, "v": [value] * len(ids)}), on="t.id = s.id") \
        .when_matched_update({"v": "s.v"}).execute()


OPS = {
    "DELETE": lambda tx, i: tx.delete(f"id = {i}"),
    "UPDATE": lambda tx, i: tx.update(f"id = {i}", set={"v": "v + 1"}),
    "MERGE": lambda tx, i: merge_update(tx, [i], 1),
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
@pytest.mark.parametrize("first", sorted(OPS))
@pytest.mark.parametrize("second", sorted(OPS))
def test_dml_on_different_rows_of_one_file_both_commit(table_uri, level, partitioned, first, second):
    make(table_uri, level, partitioned)
    a, b = pair(table_uri)
    OPS[first](a, 10)
    OPS[second](b, 20)
    a.commit()
    result = b.commit()
    assert result.conflicts_resolved == 1
    after = rows(table_uri)
    for op, i in ((first, 10), (second, 20)):
        if op == "DELETE":
            assert i not in after
        else:
            assert after[i]["v"] == 1 and after[i]["_metadata.row_id"] == i
    assert len(after) == 100 - [first, second].count("DELETE")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("first", sorted(OPS))
@pytest.mark.parametrize("second", sorted(OPS))
def test_dml_on_the_same_row_conflicts_naming_file_and_row(table_uri, level, first, second):
    make(table_uri, level)
    a, b = pair(table_uri)
    OPS[first](a, 10)
    OPS[second](b, 10)
    a.commit()
    path = deltatx.Table(table_uri).files().column("path")[0].as_py()
    with pytest.raises(ConcurrentDeleteDeleteException, match="row id 10") as info:
        b.commit()
    assert path in str(info.value)
    assert deltatx.Table(table_uri).version == 2  # nothing written by the loser


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dml_first", [True, False], ids=["dml-first", "optimize-first"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_optimize_never_conflicts_with_dml_and_never_loses_its_change(table_uri, level, dml_first, op):
    make(table_uri, level)
    deltatx.Table(table_uri).append(pa.table({"id": [100, 101], "part": ["a", "a"], "v": [0, 0]}, schema=SCHEMA))
    a, b = pair(table_uri)
    OPS[op](a, 10)
    b.optimize()
    first, second = (a, b) if dml_first else (b, a)
    first.commit()
    second.commit()
    after = rows(table_uri)
    if op == "DELETE":
        assert 10 not in after and len(after) == 101
    else:
        assert after[10]["v"] == 1 and len(after) == 102
    assert all(r["_metadata.row_id"] == i for i, r in after.items())  # ids never moved
    assert deltatx.Table(table_uri).files().num_rows <= 2


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dml_first", [True, False], ids=["dml-first", "optimize-first"])
@pytest.mark.parametrize("dml", ["partition", "everything", "replace_where"])
def test_optimize_never_conflicts_with_dml_that_removes_whole_files(table_uri, level, dml_first, dml):
    """A DELETE by partition, a DELETE of everything and a replaceWhere remove whole files without
    reading their rows. When OPTIMIZE compacted those files first, their rows are deleted again in
    its new file by row id (they conflicted, with ConcurrentDeleteReadException)."""
    make(table_uri, level, partitioned=True)
    table = deltatx.Table(table_uri)
    table.append(pa.table({"id": [100, 101], "part": ["a", "a"], "v": [0, 0]}, schema=SCHEMA))
    table.append(pa.table({"id": [200, 201], "part": ["b", "b"], "v": [0, 0]}, schema=SCHEMA))
    table.append(pa.table({"id": [202], "part": ["b"], "v": [0]}, schema=SCHEMA))
    a, b = pair(table_uri)
    if dml == "partition":
        a.delete(where="part = 'a'")
        expected = {200, 201, 202}
    elif dml == "everything":
        a.delete()
        expected = set()
    else:
        a.overwrite(pa.table({"id": [300], "part": ["a"], "v": [0]}, schema=SCHEMA), where="part = 'a'")
        expected = {200, 201, 202, 300}
    b.optimize()
    first, second = (a, b) if dml_first else (b, a)
    first.commit()
    second.commit()
    after = rows(table_uri)
    assert set(after) == expected
    ids = {i: r["_metadata.row_id"] for i, r in after.items()}
    assert len(set(ids.values())) == len(ids)  # row ids stay unique
    from duckdb_delta import read_duckdb

    assert sorted(read_duckdb(table_uri)["id"].to_pylist()) == sorted(expected)


def two_compactions(uri: str, level: str):
    """Two transactions at one version, each staging OPTIMIZE of the same two files."""
    make(uri, level)
    deltatx.Table(uri).append(pa.table({"id": [100], "part": ["a"], "v": [0]}, schema=SCHEMA))
    a, b = pair(uri)
    a.optimize()
    b.optimize()
    return a, b


@pytest.mark.parametrize("level", LEVELS)
def test_two_compactions_of_the_same_files_keep_every_row_once(table_uri, level):
    """OPTIMIZE vs OPTIMIZE does not conflict on row-level tables (Databricks' matrix): the loser
    finds its source rows already moved and adds nothing."""
    a, b = two_compactions(table_uri, level)
    a.commit()
    b.commit()
    after = deltatx.Table(table_uri)
    assert sorted(after.to_arrow().column("id").to_pylist()) == list(range(101))
    assert after.files().num_rows == 1 and after.files()["deletionVector"].null_count == 1


@pytest.mark.parametrize("matches", [False, True], ids=["insert-outside", "insert-matching"])
@pytest.mark.parametrize("level", LEVELS)
def test_blind_insert_vs_dml(table_uri, level, matches):
    make(table_uri, level)
    dml, insert = pair(table_uri)
    dml.delete("id >= 50 AND id < 60")
    new_id = 55 if matches else 500
    insert.append(pa.table({"id": [new_id], "part": ["a"], "v": [0]}, schema=SCHEMA))
    insert.commit()
    if level == "Serializable" and matches:
        with pytest.raises(ConcurrentAppendException):
            dml.commit()
    else:
        dml.commit()
        assert new_id in rows(table_uri)


@pytest.mark.parametrize("level", LEVELS)
def test_a_row_read_then_deleted_concurrently(table_uri, level):
    make(table_uri, level)
    reader, deleter = pair(table_uri)
    total = sum(reader.read("id < 10").column("v").to_pylist())
    reader.append(pa.table({"id": [1000], "part": ["a"], "v": [total]}, schema=SCHEMA))
    deleter.delete("id = 5")
    deleter.commit()
    if level == "Serializable":
        with pytest.raises(ConcurrentDeleteReadException, match="row id 5"):
            reader.commit()
    else:
        reader.commit()


def test_a_row_not_read_may_be_deleted_concurrently_under_serializable(table_uri):
    make(table_uri, "Serializable")
    reader, deleter = pair(table_uri)
    reader.read("id < 10")
    reader.append(pa.table({"id": [1000], "part": ["a"], "v": [0]}, schema=SCHEMA))
    deleter.delete("id = 50")
    deleter.commit()
    assert reader.commit().conflicts_resolved == 1


def test_three_writers_of_one_file_rebase_in_turn(table_uri):
    make(table_uri, "WriteSerializable")
    txs = [deltatx.Table(table_uri).transaction() for _ in range(3)]
    for k, tx in enumerate(txs):
        tx.delete(f"id = {k}")
    results = [tx.commit() for tx in txs]
    assert [r.conflicts_resolved for r in results] == [0, 1, 2]
    after = rows(table_uri)
    assert len(after) == 97 and not {0, 1, 2} & set(after)
    [dv] = deltatx.Table(table_uri).files().column("deletionVector").to_pylist()
    assert dv["cardinality"] == 3


def test_without_row_tracking_dml_vs_dml_is_still_row_level(table_uri):
    make(table_uri, "WriteSerializable", row_tracking=False)
    a, b = pair(table_uri)
    a.delete("id = 1")
    b.update("id = 2", set={"v": "7"})
    a.commit()
    b.commit()
    after = rows(table_uri)
    assert 1 not in after and after[2]["v"] == 7


def test_concurrent_inserts_never_share_row_ids(table_uri):
    make(table_uri, "WriteSerializable")
    txs = [deltatx.Table(table_uri).transaction() for _ in range(3)]
    for k, tx in enumerate(txs):
        tx.append(pa.table({"id": [200 + k, 300 + k], "part": ["a", "a"], "v": [0, 0]}, schema=SCHEMA))
    for tx in txs:
        tx.commit()
    ids = [r["_metadata.row_id"] for r in rows(table_uri).values()]
    assert len(ids) == len(set(ids)) == 106
    assert max(ids) == 105


@pytest.mark.parametrize("level", LEVELS)
def test_a_compaction_left_with_nothing_never_takes_the_watermark_back(table_uri, level):
    """Found by the soak (R1, row-level, Serializable: one row id held by two rows). A compaction
    loses to a concurrent one, so its output holds only moved rows and is dropped, yet it still
    carries the watermark it wrote for that output. It then loses again, to an append that gave out
    more ids than the output had: committed as it was, its watermark took the table's back, and
    the next append handed out ids the appended rows already held."""
    from deltatx import phases
    from deltatx.txnlog import row_tracking

    first, second = two_compactions(table_uri, level)
    first.commit()
    many = pa.table({"id": list(range(1000, 1200)), "part": ["a"] * 200, "v": [0] * 200}, schema=SCHEMA)
    appended = []

    def append_between_attempts(phase: str, **context) -> None:
        # after its first rebase (its output dropped), before its second try
        if phase == "attempt_commit" and context.get("txn_id") == second.txn_id and context.get("attempt") == 2 \
                and not appended:
            appended.append(deltatx.Table(table_uri).append(many))

    with phases.observe(append_between_attempts):
        result = second.commit()
    assert appended and result.conflicts_resolved == 2
    deltatx.Table(table_uri).append(pa.table({"id": [5000], "part": ["a"], "v": [0]}, schema=SCHEMA))
    latest = deltatx.Table(table_uri)
    ids = latest.to_arrow(columns=["_metadata.row_id"]).column(0).to_pylist()
    assert len(ids) == len(set(ids)) == 302
    assert row_tracking.high_watermark(latest.snapshot.domains) == max(ids)


def _two_files(uri: str, level: str) -> None:
    t = deltatx.create_table(uri, SCHEMA, properties={"delta.enableDeletionVectors": "true",
                                                      "delta.enableRowTracking": "true", "delta.isolationLevel": level})
    t.append(pa.table({"id": [1, 2], "part": ["a"] * 2, "v": [10, 20]}, schema=SCHEMA))
    t.append(pa.table({"id": [3, 4], "part": ["a"] * 2, "v": [30, 40]}, schema=SCHEMA))


MIXED = {
    "DELETE then OPTIMIZE": (lambda tx: tx.delete("id = 1"), lambda tx: tx.optimize()),
    "UPDATE then REORG": (lambda tx: tx.update("id = 1", set={"v": "v + 1000"}), lambda tx: tx.reorg(purge=True)),
    "OPTIMIZE then UPDATE": (lambda tx: tx.optimize(), lambda tx: tx.update("id = 1", set={"v": "v + 1000"})),
    "OPTIMIZE then append": (lambda tx: tx.optimize(),
                             lambda tx: tx.append(pa.table({"id": [9], "part": ["a"], "v": [9]}, schema=SCHEMA))),
}


@pytest.mark.parametrize("mixed", sorted(MIXED))
def test_a_compaction_runs_in_a_transaction_of_its_own(tmp_path, mixed):
    """Found by fuzzing: a transaction that both changed data and compacted committed its new rows
    as dataChange=false and, losing to a concurrent OPTIMIZE, rebased into duplicated rows, a
    lost update and a deleted row back. As in Delta, OPTIMIZE and REORG are their own
    transaction: mixing is refused when staged, with a typed error, and nothing is committed."""
    uri = str(tmp_path / "t")
    _two_files(uri, "WriteSerializable")
    first, second = MIXED[mixed]
    tx = deltatx.Table(uri).transaction()
    first(tx)
    with pytest.raises(UnsupportedOperationError, match="transaction of its own"):
        second(tx)
    tx.abort()
    assert sorted(rows(uri)) == [1, 2, 3, 4] and deltatx.Table(uri).version == 2
    assert sorted(f for f in os.listdir(uri) if f.endswith(".parquet")) == sorted(
        p for p in deltatx.Table(uri).files()["path"].to_pylist())


def test_serializable_read_is_followed_through_a_compaction_to_a_later_delete(tmp_path):
    """OPTIMIZE moves the row this transaction read, then a DELETE removes it from the new file:
    under Serializable that is still the read row deleted."""
    uri = str(tmp_path / "t")
    _two_files(uri, "Serializable")
    t = deltatx.Table(uri)
    optimize, delete, reader = t.transaction(), t.transaction(), t.transaction()
    optimize.optimize()
    delete.delete("id = 2")
    seen = reader.read(where="id = 2")
    reader.append(pa.table({"id": [99], "part": ["a"], "v": seen["v"].to_pylist()}, schema=SCHEMA))
    optimize.commit()
    delete.commit()
    with pytest.raises(ConcurrentDeleteReadException, match="row id 1"):
        reader.commit()
    assert sorted(rows(uri)) == [1, 3, 4]


@pytest.mark.parametrize("level", LEVELS)
def test_dml_after_a_dml_and_an_optimize_of_the_same_file_still_commits(tmp_path, level):
    """UPDATE id=2 wins, then OPTIMIZE (rebased over it: its output carries a DV), then UPDATE id=3
    from the same start: the last one follows its row into the DV'd output and commits."""
    uri = str(tmp_path / "t")
    _two_files(uri, level)
    t = deltatx.Table(uri)
    a, b, c = t.transaction(), t.transaction(), t.transaction()
    a.update("id = 2", set={"v": "v + 1"})
    b.optimize()
    c.update("id = 3", set={"v": "v + 1"})
    a.commit()
    b.commit()
    assert c.commit().conflicts_resolved == 2
    got = rows(uri)
    assert {i: r["v"] for i, r in got.items()} == {1: 10, 2: 21, 3: 31, 4: 40}
    assert {i: r["_metadata.row_id"] for i, r in got.items()} == {1: 0, 2: 1, 3: 2, 4: 3}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("loser", ["DELETE", "OPTIMIZE"])
def test_a_concurrent_restore_that_brings_rows_back_is_never_undone(table_uri, level, loser):
    """RESTORE re-adds the file with its older, smaller DV (id 5 lives again). A DML or compaction
    that read the larger DV must not rebase onto the union with it, which deletes id 5 again: the
    row-level rule stands aside and the file-level checks fail the loser."""
    t = deltatx.create_table(table_uri, SCHEMA, properties={
        "delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true", "delta.isolationLevel": level})
    t.append(pa.table({"id": list(range(20)), "part": ["a"] * 20, "v": [0] * 20}, schema=SCHEMA))
    t.delete("id = 1")
    t.delete("id = 5")  # 10 % of the file deleted: OPTIMIZE purges it
    tx = deltatx.Table(table_uri).transaction()
    tx.delete("id = 7") if loser == "DELETE" else tx.optimize()
    assert tx.staged_file_actions()[1].num_rows == 1
    deltatx.Table(table_uri).restore(version=2)
    with pytest.raises((ConcurrentAppendException, ConcurrentDeleteReadException)):
        tx.commit()
    got = rows(table_uri)
    assert 5 in got and 7 in got and 1 not in got


def test_a_serializable_read_sees_rows_a_concurrent_restore_brought_back(table_uri):
    """The read of id 5 found nothing; RESTORE brings id 5 back: inserting it would duplicate it."""
    make(table_uri, "Serializable")
    deltatx.Table(table_uri).delete("id = 5")
    tx = deltatx.Table(table_uri).transaction()
    assert tx.read(where="id = 5").num_rows == 0
    tx.append(pa.table({"id": [5], "part": ["a"], "v": [1]}, schema=SCHEMA))
    deltatx.Table(table_uri).restore(version=1)
    with pytest.raises(ConcurrentAppendException, match="RESTORE"):
        tx.commit()
    assert deltatx.Table(table_uri).to_arrow(where="id = 5").num_rows == 1


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", ["DELETE", "UPDATE"])
def test_enabling_row_tracking_does_not_fail_a_concurrent_dml(table_uri, level, op):
    """The backfill re-adds every file to give it row ids: no rows come or go, so Delta skips the
    added-files check for it (#10) and the DML copies the backfilled ids (#7)."""
    table = deltatx.create_table(table_uri, SCHEMA, properties={"delta.isolationLevel": level})
    table.append(pa.table({"id": list(range(10)), "part": ["a"] * 10, "v": [0] * 10}, schema=SCHEMA))
    tx = deltatx.Table(table_uri).transaction()
    OPS[op](tx, 3)
    deltatx.Table(table_uri).set_properties({"delta.enableRowTracking": "true"})
    tx.commit()
    got = rows(table_uri)
    assert (3 in got) == (op == "UPDATE")
    ids = [r["_metadata.row_id"] for r in got.values()]
    assert len(set(ids)) == len(ids) and None not in ids


@pytest.mark.parametrize("level", LEVELS)
def test_updates_of_different_rows_of_one_file_both_commit(table_uri, level):
    """A's new file holds rows 1 and 10 (min 1, max 10): its statistics cannot rule out row 5,
    which B updates. The committer reads A's new rows (the predicate's columns) and the check
    finds none that B's predicate selects, so B rebases: only a shared row conflicts."""
    make(table_uri, level)
    a, b = pair(table_uri)
    a.update("id IN (1, 10)", set={"v": "v + 1"})
    b.update("id = 5", set={"v": "v + 2"})
    a.commit()
    assert b.commit().conflicts_resolved == 1
    got = rows(table_uri)
    assert (got[1]["v"], got[10]["v"], got[5]["v"]) == (1, 1, 2)


@pytest.mark.parametrize("level", LEVELS)
def test_a_winner_that_moves_a_row_into_the_predicate_still_conflicts(table_uri, level):
    """A rewrites row 1 as id 5: its new file holds a row B's predicate selects."""
    make(table_uri, level)
    a, b = pair(table_uri)
    a.update("id = 1", set={"id": "5"})
    b.update("id = 5", set={"v": "v + 2"})
    a.commit()
    with pytest.raises(ConcurrentAppendException):
        b.commit()
