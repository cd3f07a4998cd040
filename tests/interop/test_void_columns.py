"""A ``void`` column (Spark's NullType, left in old tables by a CTAS of NULL literals): PROTOCOL.md
leaves it undefined; deltalake and polars read it as an all-null column, and deltatx does too —
reads, writes and DML keep working — while no change may add one (Delta refuses VOID columns)."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

import deltatx
from deltatx.errors import SchemaMismatchError


@pytest.fixture
def void_table(tmp_path) -> str:
    uri = str(tmp_path / "t")
    os.makedirs(os.path.join(uri, "_delta_log"))
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), os.path.join(uri, "f.parquet"))
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                           {"name": "v", "type": "void", "nullable": True, "metadata": {}}]}
    actions = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": "x", "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps(schema),
                      "partitionColumns": [], "configuration": {}}},
        {"add": {"path": "f.parquet", "partitionValues": {}, "size": os.path.getsize(os.path.join(uri, "f.parquet")),
                 "modificationTime": 1, "dataChange": True}},
    ]
    with open(os.path.join(uri, "_delta_log", f"{0:020d}.json"), "w") as fh:
        fh.write("\n".join(json.dumps(a) for a in actions) + "\n")
    return uri


def test_a_void_column_reads_as_nulls_and_the_table_stays_writable(void_table):
    t = deltatx.Table(void_table)
    assert t.schema.field("v").type == pa.null()
    assert t.to_arrow().to_pylist() == [{"id": 1, "v": None}, {"id": 2, "v": None}]
    t.append(pa.table({"id": [3]}))
    t.delete("id = 1")
    t.update("id = 2", {"id": "20"})
    t.add_columns(pa.field("w", pa.string()))
    t.checkpoint()
    fields = json.loads(deltatx.Table(void_table).metadata.schema_string)["fields"]
    assert [(f["name"], f["type"]) for f in fields] == [("id", "long"), ("v", "void"), ("w", "string")]
    expected = [{"id": 3, "v": None, "w": None}, {"id": 20, "v": None, "w": None}]
    assert sorted(deltatx.Table(void_table).to_arrow().to_pylist(), key=lambda r: r["id"]) == expected
    theirs = pa.table(DeltaTable(void_table).to_pyarrow_dataset().to_table()).to_pylist()
    assert sorted(theirs, key=lambda r: r["id"]) == expected


def test_no_change_adds_a_void_column(tmp_path, void_table):
    with pytest.raises(SchemaMismatchError, match="void"):
        deltatx.create_table(str(tmp_path / "new"), pa.schema([("id", pa.int64()), ("x", pa.null())]))
    t = deltatx.create_table(str(tmp_path / "merge"), pa.schema([("id", pa.int64())]))
    with pytest.raises(SchemaMismatchError, match="new column 'x' is null"):
        t.append(pa.table({"id": [1], "x": [None]}), schema_mode="merge")
    with pytest.raises(SchemaMismatchError, match="void"):
        deltatx.Table(void_table).add_columns(pa.field("y", pa.null()))
    assert deltatx.Table(str(tmp_path / "merge")).version == 0
