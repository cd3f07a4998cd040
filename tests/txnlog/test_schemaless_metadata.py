"""A metaData without a schema (Databricks' Delta Live Tables create version 0 that way and supply
the schema in version 1) loads: the version has an empty schema, later versions the real one."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tablefiles import data_files

import deltatx
from deltatx.errors import SchemaMismatchError
from deltatx.txnlog.schema import schema_to_json
from deltatx.txnlog.snapshot import load_snapshot
from deltatx.txnlog.store import commit_name, open_store

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def _line(action: str, body: dict) -> bytes:
    return orjson.dumps({action: body})


def _metadata(schema_string: object, absent: bool = False) -> dict:
    body = {"id": "dlt-table", "format": {"provider": "parquet", "options": {}}, "partitionColumns": [],
            "configuration": {"pipelines.pipelineId": "p-1"}, "createdTime": 1_700_000_000_000}
    if not absent:
        body["schemaString"] = schema_string
    return body


def _write_dlt_log(uri: str, v0_metadata: dict) -> None:
    """Version 0: protocol + schema-less metaData; version 1: the schema and a data file."""
    os.makedirs(os.path.join(uri, "_delta_log"))
    pq.write_table(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=SCHEMA), os.path.join(uri, "part-0.parquet"))
    size = os.path.getsize(os.path.join(uri, "part-0.parquet"))
    v0 = [_line("commitInfo", {"timestamp": 1, "operation": "CREATE STREAMING TABLE"}),
          _line("protocol", {"minReaderVersion": 1, "minWriterVersion": 2}),
          _line("metaData", v0_metadata)]
    v1 = [_line("commitInfo", {"timestamp": 2, "operation": "STREAMING UPDATE"}),
          _line("metaData", {**_metadata(schema_to_json(SCHEMA))}),
          _line("add", {"path": "part-0.parquet", "partitionValues": {}, "size": size, "modificationTime": 2,
                        "dataChange": True, "stats": '{"numRecords":2}'})]
    for version, lines in enumerate((v0, v1)):
        with open(os.path.join(uri, "_delta_log", commit_name(version)), "wb") as fh:
            fh.write(b"\n".join(lines) + b"\n")


V0_SHAPES = {
    "schemaString absent": _metadata(None, absent=True),
    "schemaString null": _metadata(None),
    "schemaString empty": _metadata(""),
}


@pytest.mark.parametrize("v0", list(V0_SHAPES.values()), ids=list(V0_SHAPES))
def test_schemaless_version_zero_loads_and_the_later_schema_wins(table_uri, v0):
    _write_dlt_log(table_uri, v0)
    at_zero = load_snapshot(open_store(table_uri), version=0)
    assert at_zero.schema == pa.schema([]) and at_zero.files.num_rows == 0
    old = deltatx.Table(table_uri, version=0).to_arrow()
    assert old.num_columns == 0 and old.num_rows == 0
    table = deltatx.Table(table_uri)
    assert table.version == 1 and table.schema == SCHEMA
    assert table.to_arrow().sort_by("id").to_pylist() == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
    assert [h["version"] for h in table.history()] == [1, 0]


def test_checkpoints_of_a_schemaless_version_round_trip(table_uri):
    _write_dlt_log(table_uri, _metadata(None, absent=True))
    store = open_store(table_uri)
    deltatx.Table(table_uri, version=0).checkpoint()  # the checkpoint stores the empty schema
    os.remove(os.path.join(table_uri, "_delta_log", commit_name(0)))  # only the checkpoint is left
    assert load_snapshot(store, version=0).schema == pa.schema([])
    assert load_snapshot(store).schema == SCHEMA


def test_the_table_is_written_on_once_the_schema_is_there(table_uri):
    _write_dlt_log(table_uri, _metadata(None, absent=True))
    table = deltatx.Table(table_uri)
    table.append(pa.table({"id": [3], "name": ["c"]}, schema=SCHEMA))
    table.delete("id = 1")
    assert sorted(deltatx.Table(table_uri).to_arrow().column("id").to_pylist()) == [2, 3]


def test_writing_to_a_table_still_without_schema_is_a_typed_error(table_uri):
    _write_dlt_log(table_uri, _metadata(None, absent=True))
    os.remove(os.path.join(table_uri, "_delta_log", commit_name(1)))  # the schema never came
    table = deltatx.Table(table_uri)
    before = data_files(table_uri)
    with pytest.raises(SchemaMismatchError, match="does not have"):
        table.append(pa.table({"id": [3], "name": ["c"]}, schema=SCHEMA))
    assert deltatx.Table(table_uri).version == 0 and data_files(table_uri) == before
