"""metaData.partitionColumns naming a column the schema lacks (a hand edit, a faulty writer): the
snapshot does not load (InvalidTableError), so no operation reads nulls for the partition column
or commits on such a table; older versions still load."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import InvalidTableError
from deltatx.txnlog.snapshot import load_snapshot
from deltatx.txnlog.snapshot_cache import SNAPSHOTS
from deltatx.txnlog.store import commit_name, open_store

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string())])


def _edit_metadata(uri: str, version: int, partition_columns: list[str]) -> None:
    path = os.path.join(uri, "_delta_log", commit_name(version))
    with open(path, "rb") as fh:
        actions = [orjson.loads(line) for line in fh.read().splitlines()]
    for action in actions:
        if "metaData" in action:
            action["metaData"]["partitionColumns"] = partition_columns
    with open(path, "wb") as fh:
        fh.write(b"\n".join(orjson.dumps(a) for a in actions) + b"\n")
    SNAPSHOTS.clear()  # as another process would open it


def _table(uri: str) -> deltatx.Table:
    t = deltatx.create_table(uri, SCHEMA, partition_by=["part"])
    t.append(pa.table({"id": [1, 2], "part": ["a", "b"]}, schema=SCHEMA))
    return t


def _listing(uri: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), uri) for d, _, fs in os.walk(uri) for f in fs)


def test_an_unknown_partition_column_fails_the_load_and_nothing_is_committed(tmp_path):
    uri = str(tmp_path / "t")
    _table(uri)
    _edit_metadata(uri, 0, ["nope"])
    before = _listing(uri)
    with pytest.raises(InvalidTableError, match=r"partition column\(s\) \['nope'\] that are not in its schema"):
        deltatx.Table(uri)
    with pytest.raises(InvalidTableError, match="nope"):
        load_snapshot(open_store(uri), version=0)
    assert _listing(uri) == before


def test_a_later_metadata_with_an_unknown_partition_column_fails_refresh_and_time_travel_back_works(tmp_path):
    uri = str(tmp_path / "t")
    _table(uri)
    reader = deltatx.Table(uri)  # at version 1
    deltatx.Table(uri).set_properties({"delta.logRetentionDuration": "interval 30 days"})  # a new metaData
    _edit_metadata(uri, 2, ["nope"])
    with pytest.raises(InvalidTableError, match="nope"):
        reader.delete(where="id = 1")  # refreshes from version 1 to 2 (incremental replay)
    with pytest.raises(InvalidTableError, match="nope"):
        deltatx.Table(uri)
    assert load_snapshot(open_store(uri), version=1).partition_columns == ["part"]
    assert len([n for n in os.listdir(os.path.join(uri, "_delta_log")) if n.endswith(".json")]) == 3


def test_partition_columns_match_the_schema_case_insensitively(tmp_path):
    """As the reader matches them: a table another writer created with 'PART' still loads."""
    uri = str(tmp_path / "t")
    _table(uri)
    _edit_metadata(uri, 0, ["PART"])
    assert deltatx.Table(uri).version == 1
