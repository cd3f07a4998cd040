"""Change data feed across clients: deltalake's ``load_cdf`` reads the feed deltatx writes, and
``Table.changes`` reads the feed deltalake writes, row for row.

Rows are compared sorted, on every column but ``_commit_timestamp``: deltalake stamps a version
with its ``commitInfo.timestamp``, Delta (and deltatx) with the commit's timestamp (the commit
file's time, or the in-commit timestamp); both are checked on their own. deltalake returns the
version as uint64, deltatx as a Delta long (int64).
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from interop_helpers import SCHEMA, normalise, rows

import deltatx
from deltatx.errors import ChangeDataFeedError

deltalake = pytest.importorskip("deltalake")

CDF = {"delta.enableChangeDataFeed": "true"}


def load_cdf(uri: str, **kwargs) -> pa.Table:
    from deltalake import DeltaTable

    return normalise(pa.table(DeltaTable(uri).load_cdf(**kwargs).read_all()))


def comparable(table: pa.Table) -> list[tuple]:
    """Sorted rows without the commit timestamp, columns by name, the version as a Python int."""
    names = sorted(n for n in table.column_names if n != "_commit_timestamp")
    columns = [table.column(n).to_pylist() for n in names]
    return sorted(zip(*columns), key=repr)


def assert_same_feed(ours: pa.Table, theirs: pa.Table) -> None:
    assert sorted(ours.column_names) == sorted(theirs.column_names)
    assert ours.schema.field("_commit_timestamp").type == theirs.schema.field("_commit_timestamp").type
    assert ours.num_rows == theirs.num_rows
    assert comparable(ours) == comparable(theirs)


def source(ids: list[int], value: float) -> pa.Table:
    data = rows(ids[0], 0, part=0) if not ids else pa.concat_tables([rows(i, 1) for i in ids])
    return data.set_column(data.schema.get_field_index("value"), "value", pa.array([value] * len(ids), pa.float64()))


def deltatx_history(uri: str, properties: dict[str, str], partitioned: bool) -> deltatx.Table:
    """v0 create, v1-2 appends, v3 delete, v4 update, v5 MERGE (all clauses), v6 insert-only
    MERGE, v7 delete of a whole partition (or of rows), v8 OPTIMIZE."""
    t = deltatx.create_table(uri, SCHEMA, partition_by=["part"] if partitioned else None, properties=properties)
    t.append(rows(0, 30))
    t.append(rows(30, 30))
    t.delete("id % 7 = 0")
    t.update("id > 40 AND id < 50", {"value": "value + 0.5", "name": "'updated'"})
    (t.merge(source([1, 2, 3, 100, 101], 9.0), "t.id = s.id")
     .when_matched_delete("t.id = 1")
     .when_matched_update_all()
     .when_not_matched_insert_all()
     .when_not_matched_by_source_update({"flag": "NOT t.flag"}, condition="t.id = 59")
     .execute())
    t.merge(source([102, 2], 1.0), "t.id = s.id").when_not_matched_insert_all().execute()
    t.delete("part = 2" if partitioned else "id >= 50 AND id < 55")
    t.optimize()
    return t


@pytest.mark.parametrize("properties, partitioned", [
    (CDF, True), (CDF, False), ({**CDF, "delta.enableDeletionVectors": "true"}, True),
], ids=["partitioned", "unpartitioned", "deletion-vectors"])
def test_deltalake_reads_the_feed_deltatx_writes(table_uri, properties, partitioned):
    t = deltatx_history(table_uri, properties, partitioned)
    assert t.version == 8
    if "delta.enableDeletionVectors" not in properties:
        assert_same_feed(t.changes(starting_version=0), load_cdf(table_uri, starting_version=0))
    else:
        # deltalake does not apply deletion vectors (it refuses to scan such tables), so for v7,
        # whole files with DVs removed, its load_cdf repeats rows deleted earlier; our rows for
        # v7 are the partition's live rows at v6, the versions with change files must match
        assert_same_feed(t.changes(starting_version=0, ending_version=6),
                         load_cdf(table_uri, starting_version=0, ending_version=6))
        deleted = t.changes(starting_version=7)
        live = deltatx.Table(table_uri, version=6).to_arrow(where="part = 2")
        assert set(deleted["_change_type"].to_pylist()) == {"delete"}
        assert sorted(deleted["id"].to_pylist()) == sorted(live["id"].to_pylist())
    assert_same_feed(t.changes(starting_version=3, ending_version=6),
                     load_cdf(table_uri, starting_version=3, ending_version=6))


def test_deltatx_reads_the_feed_deltalake_writes(table_uri):
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(table_uri, rows(0, 30), partition_by=["part"], configuration=CDF)  # v0
    write_deltalake(table_uri, rows(30, 30), mode="append")  # v1
    dt = DeltaTable(table_uri)
    dt.delete("id % 7 = 0")  # v2
    dt.update(predicate="id > 40 AND id < 50", updates={"value": "value + 0.5"})  # v3
    (dt.merge(source([1, 2, 3, 100], 9.0), "t.id = s.id", source_alias="s", target_alias="t")
     .when_matched_update_all().when_not_matched_insert_all().execute())  # v4
    dt.delete("part = 2")  # v5: whole files only
    write_deltalake(table_uri, rows(200, 5, part=1), mode="overwrite", predicate="part = 1")  # v6
    ours = deltatx.Table(table_uri)
    assert ours.version == 6
    assert_same_feed(ours.changes(starting_version=0), load_cdf(table_uri, starting_version=0))
    assert_same_feed(ours.changes(starting_version=2, ending_version=4),
                     load_cdf(table_uri, starting_version=2, ending_version=4))


def test_deltatx_writes_the_feed_of_a_deltalake_table_and_deltalake_goes_on(table_uri):
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(table_uri, rows(0, 20), partition_by=["part"], configuration=CDF)  # v0, protocol (1, 4)
    t = deltatx.Table(table_uri)
    t.delete("id < 3")  # v1
    t.update("id = 10", {"name": "'ten'"})  # v2
    DeltaTable(table_uri).delete("id = 11")  # v3 by deltalake
    t.refresh()
    assert (t.protocol.min_reader_version, t.protocol.min_writer_version) == (1, 4)
    expected = sorted([("delete", v, i) for v, i in [(1, 0), (1, 1), (1, 2), (3, 11)]]
                      + [("update_preimage", 2, 10), ("update_postimage", 2, 10)])
    got = t.changes(starting_version=1)
    assert sorted(zip(got["_change_type"].to_pylist(), got["_commit_version"].to_pylist(),
                      got["id"].to_pylist())) == expected
    assert_same_feed(got, load_cdf(table_uri, starting_version=1))


def test_a_range_before_the_feed_was_enabled_is_refused(table_uri):
    from deltalake import write_deltalake

    write_deltalake(table_uri, rows(0, 5))  # v0, feed off
    t = deltatx.Table(table_uri)
    t.set_properties(CDF)  # v1
    t.delete("id = 1")  # v2
    with pytest.raises(ChangeDataFeedError) as info:
        t.changes(starting_version=0)
    assert info.value.version == 0
    assert_same_feed(t.changes(starting_version=1), load_cdf(table_uri, starting_version=1))
