"""Metadata cleanup across clients, on local disk: deltalake (delta-rs) reads a table deltatx cleaned
up, with the same rows at the latest version and at every version kept; deltatx reads a table
deltalake cleaned up with ``DeltaTable.cleanup_metadata()``. Log files are made 40 days old with
``os.utime`` (no sleeping); deltalake compares them with ``now − 30 days``, deltatx with that
day's midnight UTC."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import deltatx
from deltatx.errors import TimeTravelError
from deltatx.txnlog.snapshot_cache import SNAPSHOTS
from interop_helpers import read_deltalake

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def _rows(ids) -> pa.Table:
    return pa.table({"id": list(ids), "name": [f"n{i}" for i in ids]}, schema=SCHEMA)


def _age(uri: str, through: int, days: float = 40) -> None:
    base = time.time() - days * 86400
    folder = os.path.join(uri, "_delta_log")
    for name in os.listdir(folder):
        if name[:20].isdigit() and int(name[:20]) <= through:
            os.utime(os.path.join(folder, name), (base + int(name[:20]),) * 2)


def _sorted_ids(table: pa.Table) -> list[int]:
    return sorted(table["id"].to_pylist())


def _commits(uri: str) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(os.path.join(uri, "_delta_log")) if n.endswith(".json")
                  and n[:20].isdigit() and ".checkpoint." not in n)


def test_deltalake_reads_a_table_deltatx_cleaned_up(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, properties={"delta.checkpointInterval": "5"})
    for i in range(1, 13):
        t.append(_rows([i]))
    t.delete("id = 3")  # 13
    _age(table_uri, 11)
    deleted = t.cleanup_metadata()
    assert len(deleted) == 11 and _commits(table_uri) == [10, 11, 12, 13]
    expected = _sorted_ids(t.to_arrow())
    assert _sorted_ids(read_deltalake(table_uri)) == expected
    assert DeltaTable(table_uri).version() == 13
    for version in (10, 11, 12, 13):
        SNAPSHOTS.clear()
        assert _sorted_ids(read_deltalake(table_uri, version=version)) == \
            _sorted_ids(deltatx.Table(table_uri, version=version).to_arrow())
    write_deltalake(table_uri, _rows([99]), mode="append")  # and deltalake writes on after it
    SNAPSHOTS.clear()
    assert _sorted_ids(deltatx.Table(table_uri).to_arrow()) == expected + [99]


def test_deltatx_reads_a_table_deltalake_cleaned_up(table_uri):
    write_deltalake(table_uri, _rows([0]))
    for i in range(1, 9):
        write_deltalake(table_uri, _rows([i]), mode="append")
        if i == 5:
            DeltaTable(table_uri).create_checkpoint()
    _age(table_uri, 8)
    dt = DeltaTable(table_uri)
    dt.cleanup_metadata()
    assert _commits(table_uri)[0] == 5  # deltalake kept its checkpoint at 5 and the commits from it on
    SNAPSHOTS.clear()
    t = deltatx.Table(table_uri)
    assert t.version == 8 and _sorted_ids(t.to_arrow()) == list(range(9))
    assert _sorted_ids(t.to_arrow()) == _sorted_ids(read_deltalake(table_uri))
    assert [h["version"] for h in t.history()] == [8, 7, 6, 5]
    with pytest.raises(TimeTravelError, match="earliest version that can be rebuilt is 5"):
        deltatx.Table(table_uri, version=4)
    t.append(_rows([100]))  # deltatx writes on, and cleans up after its own checkpoints
    assert _sorted_ids(read_deltalake(table_uri)) == list(range(9)) + [100]
