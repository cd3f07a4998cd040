"""Column-mapped tables where deltatx reads its own files back for something other than a query:
the change data feed (its change files and the rows of whole added/removed files) and the
check of existing rows when a CHECK constraint is added. PROTOCOL.md, Column Mapping: writers
write every data file with physical names, readers resolve columns by physical name (``id``
mode: by field id) and return nulls for a column a file does not have."""

from __future__ import annotations

import glob
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltatx
from deltatx.errors import ConstraintViolationError

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64()), ("day", pa.string())])


def _rows(ids, vs, days=None):
    return pa.table({"id": ids, "v": vs, "day": days or ["d1"] * len(ids)}, schema=SCHEMA)


def _changes(t, start=1, columns=("id", "v")):
    got = t.changes(starting_version=start)
    return sorted(zip(got["_commit_version"].to_pylist(), got["_change_type"].to_pylist(),
                      *(got[c].to_pylist() for c in columns)))


@pytest.fixture(params=["name", "id"])
def mode(request):
    return request.param


@pytest.mark.parametrize("dvs", [False, True])
@pytest.mark.parametrize("partitioned", [False, True])
def test_change_feed_of_a_column_mapped_table(tmp_path, mode, dvs, partitioned):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA, partition_by=["day"] if partitioned else None, properties={
        "delta.columnMapping.mode": mode, "delta.enableChangeDataFeed": "true",
        "delta.enableDeletionVectors": str(dvs).lower()})
    t.append(_rows([1, 2, 3], [10, 20, 30]))                      # v1: inserts, from the add
    t.delete(where="id = 1")                                      # v2
    t.update(where="id = 2", set={"v": "v + 1"})                  # v3
    t.merge(_rows([3, 4], [33, 40]), on="t.id = s.id") \
        .when_matched_update_all().when_not_matched_insert_all().execute()   # v4
    t.delete(where="id > 0")                                      # v5: every remaining row
    assert _changes(t) == [
        (1, "insert", 1, 10), (1, "insert", 2, 20), (1, "insert", 3, 30),
        (2, "delete", 1, 10),
        (3, "update_postimage", 2, 21), (3, "update_preimage", 2, 20),
        (4, "insert", 4, 40), (4, "update_postimage", 3, 33), (4, "update_preimage", 3, 30),
        (5, "delete", 2, 21), (5, "delete", 3, 33), (5, "delete", 4, 40),
    ]
    days = t.changes(starting_version=1)["day"].to_pylist()
    assert set(days) == {"d1"}
    # change files hold physical columns, as data files do
    data_columns = set(pq.read_schema(glob.glob(f"{uri}/**/part-*.parquet", recursive=True)[0]).names)
    for f in glob.glob(os.path.join(uri, "_change_data", "**", "*.parquet"), recursive=True):
        names = set(pq.read_schema(f).names)
        assert "_change_type" in names and "v" not in names and names - {"_change_type"} <= data_columns


def test_change_feed_after_rename_and_after_drop_and_add(tmp_path):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA, properties={"delta.columnMapping.mode": "name",
                                                      "delta.enableChangeDataFeed": "true"})
    t.append(_rows([1, 2], [10, 20]))
    t.delete(where="id = 1")
    t.rename_column("v", "w")  # same physical column: the values follow the new name
    assert _changes(t, columns=("id", "w")) == [(1, "insert", 1, 10), (1, "insert", 2, 20), (2, "delete", 1, 10)]
    t.drop_column("w")
    t.add_columns(pa.field("v", pa.int64()))  # a new column: older files do not have it
    assert _changes(t) == [(1, "insert", 1, None), (1, "insert", 2, None), (2, "delete", 1, None)]
    assert t.to_arrow()["v"].to_pylist() == [None]


def test_change_feed_of_a_transaction_mixing_an_append_and_an_update(tmp_path, mode):
    """The append's rows are read back from its file (uncovered by recorded changes)."""
    t = deltatx.create_table(str(tmp_path / "t"), SCHEMA, properties={
        "delta.columnMapping.mode": mode, "delta.enableChangeDataFeed": "true"})
    t.append(_rows([1], [10]))
    with t.transaction() as tx:
        tx.append(_rows([2], [20]))
        tx.update(where="id = 1", set={"v": "0"})
    assert _changes(t, start=2) == [(2, "insert", 2, 20), (2, "update_postimage", 1, 0),
                                    (2, "update_preimage", 1, 10)]


def test_adding_a_check_constraint_reads_the_mapped_columns(tmp_path, mode):
    t = deltatx.create_table(str(tmp_path / "t"), SCHEMA, properties={"delta.columnMapping.mode": mode})
    t.append(_rows([1, 2], [5, 3]))
    t.add_constraint("positive", "v > 0")  # every existing row satisfies it
    assert "delta.constraints.positive" in t.properties
    with pytest.raises(ConstraintViolationError):
        t.append(_rows([3], [-1]))
    u = deltatx.create_table(str(tmp_path / "u"), SCHEMA, properties={"delta.columnMapping.mode": mode})
    u.append(_rows([1, 2], [-5, 3]))
    version = u.version
    with pytest.raises(ConstraintViolationError, match=r"1 of 2 existing row.*-5"):
        u.add_constraint("positive", "v > 0")
    assert u.refresh().version == version


def test_identity_values_of_a_rebased_append_move_on_a_column_mapped_table(tmp_path, mode):
    """The rebase rewrites this transaction's own files, which hold physical columns: the
    identity values must move there too, or two appends share values."""
    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    deltatx.create_table(uri, schema, identity_columns={"id": {"start": 1, "step": 1, "always": True}},
                         properties={"delta.columnMapping.mode": mode})
    a, b = deltatx.Table(uri).transaction(), deltatx.Table(uri).transaction()
    a.append(pa.table({"v": ["a1", "a2"]}))
    b.append(pa.table({"v": ["b1", "b2"]}))
    a.commit()
    b.commit()
    got = deltatx.Table(uri).to_arrow().sort_by("id")
    assert got["id"].to_pylist() == [1, 2, 3, 4]
    assert sorted(got["v"].to_pylist()[2:]) == ["b1", "b2"]
