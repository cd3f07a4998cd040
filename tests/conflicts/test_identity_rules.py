"""The pure checker's rule for identity columns: a metadata change that only moves
``delta.identity.highWaterMark`` (an insert into an identity table) is adopted, also when both
sides made one; any other change alongside it is still a MetadataChangedException."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pytest
from conflict_builders import adds, file_row, metadata, predicate, txn, winner

from deltatx.conflicts import ReadSet, check_commit
from deltatx.errors import ConcurrentAppendException, MetadataChangedException
from deltatx.txnlog.identity import is_high_water_mark_change, only_marks_differ, with_high_water_marks
from deltatx.txnlog.schema import schema_to_json

IDENTITY = pa.schema([
    pa.field("id", pa.int64(), metadata={"delta.identity.start": b"1", "delta.identity.step": b"1",
                                         "delta.identity.allowExplicitInsert": b"false"}),
    pa.field("value", pa.string()), pa.field("part", pa.int32()),
])
BASE = metadata(schema_string=schema_to_json(IDENTITY))


def with_mark(mark: int, md=BASE):
    return md.replace(schema_string=with_high_water_marks(md.schema_string, {"id": mark}))


def test_marks_only_is_recognised():
    assert only_marks_differ(BASE.schema_string, with_mark(5).schema_string)
    assert is_high_water_mark_change(BASE, with_mark(5))
    assert is_high_water_mark_change(with_mark(5), with_mark(5))
    assert not is_high_water_mark_change(BASE, with_mark(5, BASE.replace(configuration={"x": "1"})))
    renamed = orjson.loads(with_mark(5).schema_string)
    renamed["fields"][1]["name"] = "other"
    assert not only_marks_differ(BASE.schema_string, orjson.dumps(renamed).decode())


def test_both_sides_moving_marks_is_no_conflict_and_the_winner_is_adopted():
    loser = txn(read_metadata=with_mark(3), new_metadata=with_mark(5),
                add_table=adds(file_row("part=1/mine.parquet", 1)))
    won = winner(6, "WRITE", metadata=with_mark(5), add_rows=[file_row("part=1/theirs.parquet", 1)], blind=True)
    rebased = check_commit(loser, won)
    assert rebased.read_metadata == won.metadata
    assert rebased.metadata == with_mark(5)  # the transaction layer moves its values and marks
    assert not rebased.changes_metadata


def test_a_reader_adopts_a_concurrent_identity_insert():
    loser = txn(read_metadata=with_mark(3), read_set=ReadSet(predicates=(predicate("part = 2"),)))
    won = winner(6, "WRITE", metadata=with_mark(9), add_rows=[file_row("part=1/new.parquet", 1)], blind=True)
    assert check_commit(loser, won).read_metadata == won.metadata


def test_marks_next_to_another_change_still_conflict():
    loser = txn(read_metadata=with_mark(3), new_metadata=with_mark(5, BASE.replace(configuration={"k": "v"})))
    with pytest.raises(MetadataChangedException):
        check_commit(loser, winner(6, "WRITE", metadata=with_mark(4), blind=True))
    loser = txn(read_metadata=with_mark(3), new_metadata=with_mark(5))
    with pytest.raises(MetadataChangedException):
        check_commit(loser, winner(6, "SET TBLPROPERTIES", metadata=with_mark(3).replace(configuration={"k": "v"})))


def test_a_marks_only_change_does_not_widen_write_serializable_reads():
    """Under WriteSerializable a transaction that changes metadata sees every concurrent add;
    moving identity marks is not such a change, so a blind append elsewhere stays harmless."""
    reading = ReadSet(predicates=(predicate("part = 1"),))
    loser = txn(read_metadata=with_mark(3), new_metadata=with_mark(5), read_set=reading,
                add_table=adds(file_row("part=1/mine.parquet", 1, ids=range(500, 502))))
    blind = winner(6, "WRITE", add_rows=[file_row("part=1/theirs.parquet", 1, ids=range(0, 10))], blind=True)
    check_commit(loser, blind)  # no ConcurrentAppendException
    changing = txn(read_metadata=with_mark(3), new_metadata=with_mark(5, BASE.replace(configuration={"k": "v"})),
                   read_set=reading, add_table=adds(file_row("part=1/mine.parquet", 1, ids=range(500, 502))))
    with pytest.raises(ConcurrentAppendException):
        check_commit(changing, blind)
