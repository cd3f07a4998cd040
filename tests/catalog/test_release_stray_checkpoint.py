"""A checkpoint a catalog-ignoring client left in a managed table's log is ignored while the
catalog manages the table (rules.vouched); releasing the table deletes it and checkpoints the
released version, so path readers, which trust every checkpoint, read the real table."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
from deltalake import DeltaTable

import deltatx

SCHEMA = pa.schema([("id", pa.int64())])


def _log(uri: str) -> list[str]:
    return sorted(os.listdir(os.path.join(uri, "_delta_log")))


def test_release_drops_the_checkpoints_the_catalog_ignored(cat, tmp_path):
    other, uri = str(tmp_path / "other"), str(tmp_path / "t")
    cat.create_table("other", other, SCHEMA, properties={"delta.checkpointInterval": "3"})
    for i in range(3):
        cat.table("other").append(pa.table({"id": [100 + i]}, schema=SCHEMA))
    cat.create_table("t", uri, SCHEMA)
    stray = f"{3:020d}.checkpoint.parquet"
    for name in (stray, "_last_checkpoint"):  # another table's checkpoint of v3, before t has a v3
        shutil.copy(os.path.join(other, "_delta_log", name), os.path.join(uri, "_delta_log", name))
    for i in range(4):
        cat.table("t").append(pa.table({"id": [i]}, schema=SCHEMA))
    assert sorted(cat.table("t").to_arrow()["id"].to_pylist()) == [0, 1, 2, 3]  # ignored while managed
    cat.release("t")
    assert stray not in _log(uri)
    assert f"{5:020d}.checkpoint.parquet" in _log(uri)  # the release version, for _last_checkpoint
    assert sorted(deltatx.Table(uri).to_arrow()["id"].to_pylist()) == [0, 1, 2, 3]
    assert sorted(deltatx.Table(uri, version=3).to_arrow()["id"].to_pylist()) == [0, 1, 2]
    assert sorted(DeltaTable(uri).to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2, 3]


def test_a_release_without_stray_checkpoints_writes_none(cat, tmp_path):
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA)
    cat.table("t").append(pa.table({"id": [1]}, schema=SCHEMA))
    cat.release("t")
    assert [n for n in _log(uri) if "checkpoint" in n] == []
