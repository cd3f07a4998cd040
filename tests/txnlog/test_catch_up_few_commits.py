"""A writer catching up on a few small commits converts their file actions together (one
conversion per kind): the snapshot equals a fresh load, and a malformed line is still refused
naming its commit and line."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import deltatx
from deltatx.errors import CorruptLogError
from deltatx.txnlog.snapshot import load_snapshot

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


def _state(files: pa.Table) -> list[tuple]:
    dvs = [None if d is None else (d["storageType"], d["pathOrInlineDv"], d.get("offset"))
           for d in files.column("deletionVector").to_pylist()]
    return sorted(zip(files.column("path").to_pylist(), dvs, files.column("baseRowId").to_pylist()))


def test_catching_up_on_a_few_commits_equals_a_fresh_load(tmp_path):
    uri = str(tmp_path / "t")
    table = deltatx.create_table(uri, SCHEMA, properties={"delta.enableDeletionVectors": "true",
                                                          "delta.enableRowTracking": "true",
                                                          "delta.checkpointInterval": "1000"})
    table.append(pa.table({"id": list(range(10)), "v": [0] * 10}, schema=SCHEMA))
    behind = deltatx.Table(uri)
    other = deltatx.Table(uri)
    other.delete("id = 1")                           # remove + re-add of one path (a DV)
    other.update("id = 2", {"v": "v + 1"})           # the same path again, and a new file
    other.append(pa.table({"id": [20], "v": [0]}, schema=SCHEMA))
    other.delete("id = 20")                          # a file removed whole
    other.delete("id = 3")                           # the first file's DV once more
    caught_up = behind._snapshot.catch_up(behind._store)
    fresh = load_snapshot(behind._store)
    assert caught_up.version == fresh.version == 6
    assert _state(caught_up.files) == _state(fresh.files)
    rows = behind.refresh().to_arrow().sort_by("id")
    assert rows["id"].to_pylist() == [0, 2, 4, 5, 6, 7, 8, 9]
    assert pc.sum(rows["v"]).as_py() == 1


def test_a_malformed_line_among_them_names_its_commit_and_line(tmp_path):
    uri = str(tmp_path / "t")
    table = deltatx.create_table(uri, SCHEMA)
    behind = deltatx.Table(uri)
    table.append(pa.table({"id": [1], "v": [0]}, schema=SCHEMA))
    bad = {"add": {"path": "x.parquet", "partitionValues": {}, "size": "not a number", "modificationTime": 0,
                   "dataChange": True}}
    with open(os.path.join(uri, "_delta_log", f"{2:020d}.json"), "wb") as fh:
        fh.write(orjson.dumps({"commitInfo": {"operation": "WRITE"}}) + b"\n" + orjson.dumps(bad) + b"\n")
    with pytest.raises(CorruptLogError, match="commit 2, line 2"):
        behind._snapshot.catch_up(behind._store)
