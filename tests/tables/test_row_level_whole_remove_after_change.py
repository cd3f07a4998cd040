"""A transaction that changes rows of a file through a deletion vector and then removes the file
whole (a DELETE of one row, then of its partition), against a concurrent OPTIMIZE.

Why: row-level resolution follows a file a winner compacted into the winner's new files by row
id. For such a file it followed only the rows the DML had recorded (the one row deleted or
updated), dropped this transaction's remove of the file and committed: every other row of the
file, which the partition's DELETE had removed, came back alive in the OPTIMIZE's output. The
whole file must be followed (or the commit refused), never part of it.

Two transactions open at the same version, stage, then commit in a fixed order; no threads.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import ConcurrentModificationException

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("v", pa.int64())])
LEVELS = ["Serializable", "WriteSerializable"]


def make(uri: str, level: str, row_tracking: bool = True) -> None:
    """Partition 'a': files [1, 2, 3] and [5, 6]; partition 'b': [4]."""
    props = {"delta.enableDeletionVectors": "true", "delta.isolationLevel": level}
    if row_tracking:
        props["delta.enableRowTracking"] = "true"
    t = deltatx.create_table(uri, SCHEMA, properties=props, partition_by=["part"])
    for ids, part in (([1, 2, 3], "a"), ([5, 6], "a"), ([4], "b")):
        t.append(pa.table({"id": ids, "part": [part] * len(ids), "v": [0] * len(ids)}, schema=SCHEMA))


def rows(uri: str) -> list[tuple[int, str]]:
    return sorted((r["id"], r["part"]) for r in deltatx.Table(uri).to_arrow(columns=["id", "part"]).to_pylist())


def change_then_delete_partition(tx, first: str) -> None:
    if first == "delete":
        tx.delete("id = 2")
    else:
        tx.update("id = 2", set={"v": "9"})
    tx.delete("part = 'a'")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("first", ["delete", "update"])
@pytest.mark.parametrize("compaction", ["optimize", "reorg"])
def test_rows_deleted_with_their_partition_stay_deleted_after_a_concurrent_compaction(table_uri, level, first,
                                                                                      compaction):
    make(table_uri, level)
    if compaction == "reorg":
        deltatx.Table(table_uri).delete("id = 3")  # a DV on [1, 2, 3]: REORG rewrites that file
    t = deltatx.Table(table_uri)
    winner, loser = t.transaction(), t.transaction()
    change_then_delete_partition(loser, first)
    winner.optimize() if compaction == "optimize" else winner.reorg(purge=True)
    winner.commit()
    loser.commit()
    assert rows(table_uri) == [(4, "b")]  # id 1 (and 3) came back before


@pytest.mark.parametrize("level", LEVELS)
def test_without_row_ids_the_file_cannot_be_followed_and_the_commit_is_refused(table_uri, level):
    make(table_uri, level, row_tracking=False)
    t = deltatx.Table(table_uri)
    optimize, loser = t.transaction(), t.transaction()
    change_then_delete_partition(loser, "delete")
    optimize.optimize()
    optimize.commit()
    with pytest.raises(ConcurrentModificationException):
        loser.commit()
    assert rows(table_uri) == [(1, "a"), (2, "a"), (3, "a"), (4, "b"), (5, "a"), (6, "a")]


@pytest.mark.parametrize("level", LEVELS)
def test_against_a_winners_larger_dv_the_partition_delete_still_commits(table_uri, level):
    """Unchanged: the winner deleted another row of the file through a DV; this transaction's
    remove, rebased onto the winner's DV, still takes the whole file."""
    make(table_uri, level)
    t = deltatx.Table(table_uri)
    winner, loser = t.transaction(), t.transaction()
    change_then_delete_partition(loser, "delete")
    winner.delete("id = 1")
    winner.commit()
    assert loser.commit().conflicts_resolved == 1
    assert rows(table_uri) == [(4, "b")]
