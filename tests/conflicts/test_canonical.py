"""Delta's canonical optimistic-transaction cases (OptimisticTransactionSuite / LegacyTests).

Setup in every case: a table partitioned by ``part`` with ``part=1/a.parquet`` and
``part=2/b.parquet`` (ids 0..99 each). The loser read at version 5; the winner is version 6 and,
as in Delta's harness, is a data-changing (not blind) commit unless the case says otherwise.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from conflict_builders import (
    S,
    SI,
    WS,
    adds,
    file_row,
    metadata,
    predicate,
    remove_row,
    removes,
    txn,
    winner,
)
from deltatx.conflicts import ReadSet, check_commit
from deltatx.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    MetadataChangedException,
    ProtocolChangedException,
)
from deltatx.txnlog.actions import Protocol, Txn
from deltatx.txnlog.schema import schema_to_json

A, B = "part=1/a.parquet", "part=2/b.parquet"
add_a, add_b = file_row(A, 1), file_row(B, 2)
add_c = file_row("part=1/c.parquet", 1, range(500, 600))
add_d = file_row("part=2/d.parquet", 2, range(500, 600))
add_e = file_row("part=3/e.parquet", 3, range(500, 600))


def read(sql: str, *files: str) -> ReadSet:
    return ReadSet(predicates=(predicate(sql),), files=frozenset(files))


def concurrent(**kwargs) -> object:
    return winner(6, kwargs.pop("op", "TRUNCATE"), blind=kwargs.pop("blind", False), **kwargs)


CASES = [
    # name, loser kwargs, winner kwargs, expected exception (None = commits)
    ("append / append",
     dict(add_table=adds(add_c)), dict(add_rows=[add_d], blind=True, op="WRITE"), None),
    ("disjoint txns",
     dict(read_set=read("part = 1", A), add_table=adds(add_c)), dict(add_rows=[add_d]), None),
    ("disjoint delete / read",
     dict(read_set=read("part = 2", B), add_table=adds(add_d)), dict(remove_rows=[remove_row(A, 1)]), None),
    ("disjoint add / read",
     dict(read_set=read("part = 2", B), add_table=adds(add_d)), dict(add_rows=[add_c]), None),
    ("delete / delete",
     dict(remove_table=removes(remove_row(A, 1))), dict(remove_rows=[remove_row(A, 1)]),
     ConcurrentDeleteDeleteException),
    ("add / read + write",
     dict(read_set=read("part = 1", A), add_table=adds(add_c)), dict(add_rows=[file_row("part=1/x.parquet", 1)]),
     ConcurrentAppendException),
    ("add / read + no write",
     dict(read_set=read("part = 1", A)), dict(add_rows=[file_row("part=1/x.parquet", 1)]), None),
    ("add in part=2 / read part=1,2 / write part=1",
     dict(read_set=read("part IN (1, 2)", A, B), add_table=adds(add_c)), dict(add_rows=[add_d]),
     ConcurrentAppendException),
    ("add in part=3 / read part=1,2 / write part=1",
     dict(read_set=read("part = 1 OR part = 2", A, B), add_table=adds(add_c)), dict(add_rows=[add_e]), None),
    ("delete / read",
     dict(read_set=read("part = 1", A), add_table=adds(add_c)), dict(remove_rows=[remove_row(A, 1)]),
     ConcurrentDeleteReadException),
    ("schema change",
     dict(read_set=read("part = 1", A)),
     dict(metadata=metadata(schema_string=schema_to_json(pa.schema([("id", pa.int64()), ("part", pa.int32())]))),
          op="CHANGE COLUMN"),
     MetadataChangedException),
    ("conflicting txns",
     dict(read_set=ReadSet(app_ids=frozenset({"stream-1"})), add_table=adds(add_c),
          txns=(Txn("stream-1", 4),)),
     dict(txns=[Txn("stream-1", 4)], add_rows=[add_d], blind=True, op="STREAMING UPDATE"),
     ConcurrentTransactionException),
    ("upgrade / upgrade",
     dict(new_protocol=Protocol(1, 3)), dict(protocol=Protocol(1, 3), op="UPGRADE PROTOCOL"),
     ProtocolChangedException),
    ("taint whole table",
     dict(read_set=ReadSet(whole_table=True, files=frozenset({A, B})), add_table=adds(add_c)),
     dict(add_rows=[add_e]), ConcurrentAppendException),
    ("taint whole table + concurrent remove",
     dict(read_set=ReadSet(whole_table=True), add_table=adds(add_c)),
     dict(remove_rows=[remove_row("part=3/old.parquet", 3)]), ConcurrentDeleteReadException),
    ("allow blind-append against any data change",
     dict(add_table=adds(add_c)),
     dict(add_rows=[file_row("part=1/x.parquet", 1)], remove_rows=[remove_row(A, 1)],
          metadata=None, op="DELETE"),
     None),
    ("no data change: allow rearrange vs concurrent add",
     dict(read_set=read("part = 1", A), remove_table=removes(remove_row(A, 1, data_change=False)),
          add_table=adds(file_row("part=1/opt.parquet", 1, data_change=False)), changes_data=False),
     dict(add_rows=[file_row("part=1/x.parquet", 1)]), None),
    ("no data change: block rearrange vs concurrent delete of the same file",
     dict(read_set=read("part = 1", A), remove_table=removes(remove_row(A, 1, data_change=False)),
          add_table=adds(file_row("part=1/opt.parquet", 1, data_change=False)), changes_data=False),
     dict(remove_rows=[remove_row(A, 1)], op="DELETE"), ConcurrentDeleteReadException),
]


@pytest.mark.parametrize("level", [S, WS])
@pytest.mark.parametrize("name, loser_kwargs, winner_kwargs, expected", CASES, ids=[c[0] for c in CASES])
def test_canonical_case(name, loser_kwargs, winner_kwargs, expected, level):
    loser = txn(table_level=level, **loser_kwargs)
    won = concurrent(**winner_kwargs)
    if expected is None:
        rebased = check_commit(loser, won)
        assert rebased.adds is loser.adds and rebased.removes is loser.removes
    else:
        with pytest.raises(expected) as info:
            check_commit(loser, won)
        assert info.value.version == 6
        assert info.value.operation == won.operation


def test_add_read_no_write_is_an_empty_commit_at_snapshot_isolation():
    assert txn(read_set=read("part = 1", A)).isolation_level is SI


def test_add_read_write_names_the_partition():
    loser = txn(read_set=read("part = 1", A), add_table=adds(add_c), operation="UPDATE")
    with pytest.raises(ConcurrentAppendException) as info:
        check_commit(loser, concurrent(add_rows=[file_row("part=1/x.parquet", 1)], op="MERGE"))
    assert info.value.conflict == "part=1"


def test_read_part_1_and_2_hint_names_part_2():
    loser = txn(read_set=read("part IN (1, 2)", A, B), add_table=adds(add_c))
    with pytest.raises(ConcurrentAppendException) as info:
        check_commit(loser, concurrent(add_rows=[add_e, add_d]))
    assert info.value.conflict == "part=2"


def test_delete_read_names_partition_and_file():
    loser = txn(read_set=read("part = 1", A), add_table=adds(add_c))
    with pytest.raises(ConcurrentDeleteReadException) as info:
        check_commit(loser, concurrent(remove_rows=[remove_row(B, 2), remove_row(A, 1)], op="DELETE"))
    assert info.value.conflict == f"part=1, file {A}"


def test_delete_delete_names_the_file():
    loser = txn(remove_table=removes(remove_row(B, 2), remove_row(A, 1)))
    with pytest.raises(ConcurrentDeleteDeleteException) as info:
        check_commit(loser, concurrent(remove_rows=[remove_row(A, 1)], op="OPTIMIZE"))
    assert info.value.conflict == f"part=1, file {A}"


def test_taint_whole_table_vs_blind_append_depends_on_level():
    whole = dict(read_set=ReadSet(whole_table=True), add_table=adds(add_c))
    blind_winner = concurrent(add_rows=[add_e], blind=True, op="WRITE")
    with pytest.raises(ConcurrentAppendException):
        check_commit(txn(table_level=S, **whole), blind_winner)
    assert check_commit(txn(table_level=WS, **whole), blind_winner).isolation_level is WS


def test_winner_without_blind_flag_counts_as_not_blind():
    """A delta-rs append carries no isBlindAppend: Delta (and we) treat it as a data change."""
    loser = txn(table_level=WS, read_set=read("part = 1", A), add_table=adds(add_c))
    with pytest.raises(ConcurrentAppendException):
        check_commit(loser, winner(6, "WRITE", add_rows=[file_row("part=1/x.parquet", 1)], blind=None))


def test_read_without_predicates_on_partitioned_table_ignores_adds():
    loser = txn(read_set=ReadSet(files=frozenset({A})), add_table=adds(add_c), remove_table=removes(remove_row(A, 1)))
    assert check_commit(loser, concurrent(add_rows=[file_row("part=1/x.parquet", 1)])).read_set == loser.read_set

