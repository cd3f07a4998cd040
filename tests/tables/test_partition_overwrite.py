"""Dynamic partition overwrite through the Python API (Delta's partitionOverwriteMode=dynamic)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import ConcurrentAppendException, InvalidArgumentError

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])


def rows(t: deltatx.Table) -> list[tuple]:
    return sorted(((r["id"], r["p"]) for r in deltatx.Table(t.uri).to_arrow().to_pylist()),
                  key=lambda r: (r[0], r[1] or ""))


@pytest.fixture
def table(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["p"], properties={
        "delta.enableChangeDataFeed": "true", "delta.isolationLevel": "Serializable"})
    t.append(pa.table({"id": [1, 2, 3, 4], "p": ["a", "b", "c", None]}, schema=SCHEMA))
    return t


def test_only_the_partitions_the_data_writes_into_are_replaced(table):
    result = table.overwrite(pa.table({"id": [10, 11], "p": ["a", None]}, schema=SCHEMA),
                             partition_overwrite_mode="dynamic")
    assert rows(table) == [(2, "b"), (3, "c"), (10, "a"), (11, None)]
    assert result.metrics["numRemovedFiles"] == 2
    feed = sorted((r["_change_type"], r["id"]) for r in table.changes(starting_version=2).to_pylist())
    assert feed == [("delete", 1), ("delete", 4), ("insert", 10), ("insert", 11)]


def test_static_is_the_default_and_an_unpartitioned_table_is_replaced_whole(table, tmp_path):
    table.overwrite(pa.table({"id": [10], "p": ["a"]}, schema=SCHEMA), partition_overwrite_mode="STATIC")
    assert rows(table) == [(10, "a")]
    flat = deltatx.create_table(str(tmp_path / "flat"), SCHEMA)
    flat.append(pa.table({"id": [1, 2], "p": ["a", "b"]}, schema=SCHEMA))
    flat.overwrite(pa.table({"id": [9], "p": ["a"]}, schema=SCHEMA), partition_overwrite_mode="dynamic")
    assert rows(flat) == [(9, "a")]


@pytest.mark.parametrize("kwargs, message", [
    ({"partition_overwrite_mode": "dynamic", "where": "p = 'a'"}, "cannot also take where"),
    ({"partition_overwrite_mode": "sometimes"}, "'static' or 'dynamic'"),
])
def test_bad_combinations_are_refused_and_write_nothing(table, kwargs, message):
    with pytest.raises(InvalidArgumentError, match=message):
        table.overwrite(pa.table({"id": [10], "p": ["a"]}, schema=SCHEMA), **kwargs)
    assert deltatx.Table(table.uri).version == 1


def test_it_conflicts_only_with_writes_into_the_partitions_it_replaces(table):
    mine = deltatx.Table(table.uri).transaction()
    mine.overwrite(pa.table({"id": [10], "p": ["a"]}, schema=SCHEMA), partition_overwrite_mode="dynamic")
    deltatx.Table(table.uri).append(pa.table({"id": [20], "p": ["b"]}, schema=SCHEMA))
    mine.commit()
    assert rows(table) == [(2, "b"), (3, "c"), (4, None), (10, "a"), (20, "b")]
    again = deltatx.Table(table.uri).transaction()
    again.overwrite(pa.table({"id": [30], "p": ["a"]}, schema=SCHEMA), partition_overwrite_mode="dynamic")
    deltatx.Table(table.uri).append(pa.table({"id": [21], "p": ["a"]}, schema=SCHEMA))
    with pytest.raises(ConcurrentAppendException):
        again.commit()
