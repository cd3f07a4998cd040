"""Row-level concurrency end to end when one file plays two parts in a transaction (read row by
row, then compacted or removed whole), or when the winner removed a file outright.

Two transactions open at the same version, stage, then commit in a fixed order: the second loses
the race and goes through the conflict checker. Deterministic, no threads. Found by the audit of
issue #10 (OPTIMIZE after ``tx.read()`` lost the winner's deletes; a winner that deleted the last
rows of a file failed a loser that touched none of them).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import ConcurrentDeleteDeleteException, ConcurrentDeleteReadException, ConcurrentModificationException

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("v", pa.int64())])
LEVELS = ["Serializable", "WriteSerializable"]


def make(uri: str, level: str, *batches: list[int], row_tracking: bool = True, partitioned: bool = False) -> None:
    """A DV table (and row tracking) with one file per batch of ids, all in partition 'a'."""
    props = {"delta.enableDeletionVectors": "true", "delta.isolationLevel": level}
    if row_tracking:
        props["delta.enableRowTracking"] = "true"
    t = deltatx.create_table(uri, SCHEMA, properties=props, partition_by=["part"] if partitioned else None)
    for ids in batches:
        t.append(pa.table({"id": ids, "part": ["a"] * len(ids), "v": [0] * len(ids)}, schema=SCHEMA))


def rows(uri: str) -> list[tuple[int, int]]:
    return sorted((r["id"], r["v"]) for r in deltatx.Table(uri).to_arrow(columns=["id", "v"]).to_pylist())


def compact(tx, op: str) -> None:
    tx.optimize() if op == "optimize" else tx.reorg(purge=True)


# --------------------------------------------------------------------------- read, then compacted


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", ["optimize", "reorg"])
@pytest.mark.parametrize("read", ["id = 4", "id = 5", "id >= 0"])
def test_a_compaction_after_a_read_keeps_the_concurrent_dmls_changes(table_uri, level, op, read):
    """The DML commits first: deleted row 5 must not come back, updated row 6 must appear once."""
    make(table_uri, level, [0, 1, 2, 3], [4, 5, 6, 7])
    deltatx.Table(table_uri).delete("id IN (0, 7)")  # both files have a DV: REORG rewrites both
    t = deltatx.Table(table_uri)
    dml, compaction = t.transaction(), t.transaction()
    compaction.read(where=read)
    dml.delete("id = 5")
    dml.update("id = 6", set={"v": "1"})
    compact(compaction, op)
    dml.commit()
    result = compaction.commit()
    assert result.conflicts_resolved == 1
    assert rows(table_uri) == [(1, 0), (2, 0), (3, 0), (4, 0), (6, 1)]
    ids = deltatx.Table(table_uri).to_arrow(columns=["id", "_metadata.row_id"]).to_pylist()
    assert {r["id"]: r["_metadata.row_id"] for r in ids if r["id"] != 6} == {1: 1, 2: 2, 3: 3, 4: 4}


@pytest.mark.parametrize("level", LEVELS)
def test_what_a_compaction_read_conflicts_only_at_the_level_it_commits_at(table_uri, level):
    """A compaction alone commits at SnapshotIsolation (Delta's downgrade: no data change), so a
    row it read and the winner deleted is no conflict (the test above, read ``id = 5``). With a
    property change it commits at the table's level: under Serializable the read row deleted is
    ConcurrentDeleteReadException naming file and row id; under WriteSerializable it commits and
    both deleted rows stay deleted (row 6, which it did not read, came back before)."""
    make(table_uri, level, [0, 1, 2, 3], [4, 5, 6, 7])
    t = deltatx.Table(table_uri)
    path = t.files().column("path")[1].as_py()
    dml, compaction = t.transaction(), t.transaction()
    compaction.read(where="id = 5")
    compaction.optimize()
    compaction.set_properties({"app.note": "compacted"})
    dml.delete("id IN (5, 6)")
    dml.commit()
    if level == "Serializable":
        with pytest.raises(ConcurrentDeleteReadException, match="row id 5") as info:
            compaction.commit()
        assert path in str(info.value)
        assert deltatx.Table(table_uri).version == 3
    else:
        assert compaction.commit().isolation_level == "WriteSerializable"
    assert rows(table_uri) == [(i, 0) for i in (0, 1, 2, 3, 4, 7)]


@pytest.mark.parametrize("level", LEVELS)
def test_a_compaction_after_a_read_commits_after_two_dml_winners(table_uri, level):
    """It failed with ConcurrentDeleteReadException (its record of the read file still named the
    DV the first winner replaced); now both winners' changes survive, no row twice."""
    make(table_uri, level, list(range(0, 40)), list(range(40, 80)), list(range(80, 120)))
    t = deltatx.Table(table_uri)
    compaction, first, second = t.transaction(), t.transaction(), t.transaction()
    compaction.read(where="id IN (37, 60)")
    first.update("id = 58", set={"v": "1"})
    second.update("id IN (62, 88)", set={"v": "1"})
    second.delete("id = 61")
    compaction.optimize()
    first.commit()
    second.commit()
    assert compaction.commit().conflicts_resolved == 2
    after = rows(table_uri)
    assert [i for i, _ in after] == [i for i in range(120) if i != 61]
    assert {i for i, v in after if v == 1} == {58, 62, 88}
    assert deltatx.Table(table_uri).files().num_rows == 3  # the compacted file, each UPDATE's new rows


# --------------------------------------------------------------------------- removed outright by the winner


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("row_tracking", [True, False], ids=["row-tracking", "dv-only"])
def test_a_winner_that_removes_a_file_outright_spares_a_loser_that_touched_none_of_its_rows(
        table_uri, level, row_tracking):
    """F holds ids 10 and 20: its statistics cannot rule out ``id = 15``, but no row of F
    matches. The winner deleting both rows (F removed, no re-add) is no conflict, as deleting
    one of them (a DV) is not."""
    make(table_uri, level, [10, 20], [15, 16], row_tracking=row_tracking)
    t = deltatx.Table(table_uri)
    winner, loser = t.transaction(), t.transaction()
    winner.delete("id IN (10, 20)")
    loser.update("id = 15", set={"v": "1"})
    winner.commit()
    assert loser.commit().conflicts_resolved == 1
    assert rows(table_uri) == [(15, 1), (16, 0)]


@pytest.mark.parametrize("level", LEVELS)
def test_a_row_both_deleted_in_a_file_the_winner_removed_names_file_and_row_id(table_uri, level):
    make(table_uri, level, [1, 2, 3])
    t = deltatx.Table(table_uri)
    path = t.files().column("path")[0].as_py()
    winner, loser = t.transaction(), t.transaction()
    winner.delete("id > 0")
    loser.delete("id = 3")
    winner.commit()
    with pytest.raises(ConcurrentDeleteDeleteException, match="row id 2") as info:
        loser.commit()
    assert path in str(info.value)
    assert rows(table_uri) == [] and deltatx.Table(table_uri).version == 2


@pytest.mark.parametrize("level", LEVELS)
def test_a_row_read_in_a_file_the_winner_removed_conflicts_only_under_serializable(table_uri, level):
    make(table_uri, level, [1, 2, 3], [7, 8])
    t = deltatx.Table(table_uri)
    winner, loser = t.transaction(), t.transaction()
    winner.delete("id <= 3")
    seen = loser.read(where="id = 2")
    loser.update("id = 7", set={"v": str(seen.num_rows)})
    winner.commit()
    if level == "Serializable":
        with pytest.raises(ConcurrentDeleteReadException, match="row id 1"):
            loser.commit()
        assert rows(table_uri) == [(7, 0), (8, 0)]
    else:
        loser.commit()
        assert rows(table_uri) == [(7, 1), (8, 0)]


# --------------------------------------------------------------------------- read, then removed whole


@pytest.mark.parametrize("level", LEVELS)
def test_a_file_read_then_deleted_by_partition_never_comes_back(table_uri, level):
    """The loser read a row of F, then deleted partition 'a' (F removed whole); the winner put a
    DV on F. The commit went through and F, with the winner's DV, stayed: rows deleted by the
    loser came back. A DELETE of the same rows as the winner's is a conflict."""
    make(table_uri, level, [1, 2, 3], partitioned=True)
    deltatx.Table(table_uri).append(pa.table({"id": [4], "part": ["b"], "v": [0]}, schema=SCHEMA))
    t = deltatx.Table(table_uri)
    winner, loser = t.transaction(), t.transaction()
    loser.read(where="id = 2")
    loser.delete("part = 'a'")
    winner.delete("id = 1")
    winner.commit()
    with pytest.raises(ConcurrentModificationException):
        loser.commit()
    assert rows(table_uri) == [(2, 0), (3, 0), (4, 0)]


@pytest.mark.parametrize("level", LEVELS)
def test_a_file_read_then_deleted_by_partition_is_followed_into_a_concurrent_optimize(table_uri, level):
    make(table_uri, level, [1, 2, 3], [5, 6], partitioned=True)
    deltatx.Table(table_uri).append(pa.table({"id": [4], "part": ["b"], "v": [0]}, schema=SCHEMA))
    t = deltatx.Table(table_uri)
    optimize, loser = t.transaction(), t.transaction()
    loser.read(where="id = 2")
    loser.delete("part = 'a'")
    optimize.optimize()
    optimize.commit()
    loser.commit()
    assert rows(table_uri) == [(4, 0)]
