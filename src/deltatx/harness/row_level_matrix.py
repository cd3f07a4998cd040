"""The row-level part of the built-in matrix: deletion-vector + row-tracking tables.

The same scenario format as :mod:`.scenarios`, on tables with ``delta.enableDeletionVectors`` and
``delta.enableRowTracking`` (shared notes §2, "with row-level concurrency"), unpartitioned and
partitioned, under both isolation levels. Every transaction and concurrent commit touches the
*same data file*; what decides is the row:

- DELETE / UPDATE / MERGE vs each other: different rows commit (the table equals running them
  one after the other), the same row raises ``ConcurrentDeleteDeleteException``;
- DML vs OPTIMIZE, both ways: never a conflict, and the DML's change is not lost;
- OPTIMIZE vs OPTIMIZE and OPTIMIZE vs a blind INSERT, both ways: never a conflict, each row once;
- a blind INSERT vs DML: WriteSerializable never conflicts; Serializable only when the inserted
  rows match the DML's predicate (``ConcurrentAppendException``);
- a Serializable read, then a concurrent DELETE of a row it read: ``ConcurrentDeleteReadException``
  (of a row it did not read: commits; WriteSerializable: commits).
"""

from __future__ import annotations

from typing import Sequence

from .. import errors
from .ops import Append, Delete, Merge, Operation, Optimize, Update
from .scenarios import CONCURRENT_FIRST, TRANSACTION_FIRST, Scenario, rows

ROW_LEVEL_PROPERTIES = {"delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true"}
LEVELS = ("Serializable", "WriteSerializable")


def row_level_setup() -> list[Operation]:
    """Rows 0..49 in one file and 50..99 in a second one, all in partition 1 (OPTIMIZE compacts them)."""
    return [Append(rows(range(0, 50), 1)), Append(rows(range(50, 100), 1))]


def _dml(kind: str, row: int) -> Operation:
    if kind == "DELETE":
        return Delete(f"part = 1 AND id = {row}")
    if kind == "UPDATE":
        return Update(f"part = 1 AND id = {row}", {"value": "value + 1"})
    if kind == "MERGE":
        return Merge(rows([row], 1, value=9), match={"part": 1}, when_not_matched=None)
    raise ValueError(kind)


DML = ("DELETE", "UPDATE", "MERGE")


def _optimize(partitioned: bool) -> Operation:
    return Optimize("part = 1" if partitioned else None)


def _scenario(name: str, level: str, partitioned: bool, **kwargs) -> Scenario:
    layout = "partitioned" if partitioned else "unpartitioned"
    return Scenario(name=f"row-level {level} {layout}: {name}", isolation=level,
                    partition_by=("part",) if partitioned else (), properties=dict(ROW_LEVEL_PROPERTIES),
                    setup=row_level_setup(), **kwargs)


def row_level_matrix(levels: Sequence[str] = LEVELS) -> list[Scenario]:
    """Every row-level cell, for both layouts and both levels (see the module docstring)."""
    out: list[Scenario] = []
    for level in levels:
        for partitioned in (False, True):
            for current in DML:
                for winner in DML:
                    out.append(_scenario(
                        f"{current} vs concurrent {winner} of another row of the same file", level, partitioned,
                        concurrent=[_dml(winner, 20)], transaction=[_dml(current, 10)],
                        equivalent_to=CONCURRENT_FIRST))
                    out.append(_scenario(
                        f"{current} vs concurrent {winner} of the same row", level, partitioned,
                        concurrent=[_dml(winner, 10)], transaction=[_dml(current, 10)],
                        expect=errors.ConcurrentDeleteDeleteException))
                out.append(_scenario(
                    f"{current} vs concurrent OPTIMIZE of its file", level, partitioned,
                    concurrent=[_optimize(partitioned)], transaction=[_dml(current, 10)],
                    equivalent_to=CONCURRENT_FIRST))
                out.append(_scenario(
                    f"OPTIMIZE vs concurrent {current} of a row it compacts", level, partitioned,
                    concurrent=[_dml(current, 10)], transaction=[_optimize(partitioned)],
                    equivalent_to=CONCURRENT_FIRST))
            # compaction beside compaction and blind appends: Databricks' row-level matrix says
            # "cannot conflict" (without ZORDER BY); a compaction that finds its rows compacted
            # already keeps nothing of its own, and the table holds each row once
            out.append(_scenario(
                "OPTIMIZE vs concurrent OPTIMIZE of the same files", level, partitioned,
                concurrent=[_optimize(partitioned)], transaction=[_optimize(partitioned)],
                equivalent_to=CONCURRENT_FIRST))
            out.append(_scenario(
                "OPTIMIZE vs concurrent blind INSERT", level, partitioned,
                concurrent=[Append(rows([500, 501], 1, value=3))], transaction=[_optimize(partitioned)],
                equivalent_to=CONCURRENT_FIRST))
            out.append(_scenario(
                "blind INSERT vs concurrent OPTIMIZE", level, partitioned,
                concurrent=[_optimize(partitioned)], transaction=[Append(rows([500, 501], 1, value=3))],
                equivalent_to=CONCURRENT_FIRST))
            for matches in (False, True):
                inserted = [5, 6] if matches else [500, 501]
                conflicts = level == "Serializable" and matches
                out.append(_scenario(
                    f"DELETE vs concurrent blind INSERT {'matching' if matches else 'outside'} its predicate",
                    level, partitioned, concurrent=[Append(rows(inserted, 1, value=3))],
                    transaction=[Delete("part = 1 AND id < 10")],
                    expect=errors.ConcurrentAppendException if conflicts else None,
                    equivalent_to=None if conflicts else TRANSACTION_FIRST))
            for victim, read_it in ((5, True), (50, False)):
                conflicts = level == "Serializable" and read_it
                out.append(_scenario(
                    f"a read of rows 0-9, then a concurrent DELETE of row {victim}", level, partitioned,
                    reads=["part = 1 AND id < 10"], concurrent=[Delete(f"part = 1 AND id = {victim}")],
                    transaction=[Append(rows([1000], 1))],
                    expect=errors.ConcurrentDeleteReadException if conflicts else None,
                    equivalent_to=None if conflicts else CONCURRENT_FIRST))
    return out
