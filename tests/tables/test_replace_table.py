"""REPLACE TABLE (tables/ops/replace_table.py): one commit that empties the table under a new
definition, never lowers the protocol, conflicts with any concurrent file change, and refuses a
bad definition without writing anything."""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import (
    ConcurrentAppendException,
    MetadataChangedException,
    SchemaMismatchError,
    UnsupportedFeatureError,
)
from deltatx.tables.ops.replace_table import stage_replace_table

OLD = pa.schema([("id", pa.int64()), ("part", pa.string())])
NEW = pa.schema([("key", pa.string()), ("n", pa.int32()), ("day", pa.date32())])


def _table(uri: str, properties: dict | None = None) -> deltatx.Table:
    t = deltatx.create_table(uri, OLD, partition_by=["part"], properties=properties)
    t.append(pa.table({"id": [1, 2], "part": ["a", "b"]}, schema=OLD))
    return t


def _replace(table: deltatx.Table, schema: pa.Schema, **kwargs) -> deltatx.CommitResult:
    tx = table.transaction()
    try:
        stage_replace_table(tx, schema, **kwargs)
        return tx.commit()
    except BaseException:
        tx.abort()
        raise


def test_replace_empties_the_table_under_the_new_definition(table_uri):
    table = _table(table_uri)
    old_id = table.metadata.id
    result = _replace(table, NEW, partition_by=["day"], properties={"delta.appendOnly": "false", "foo": "bar"},
                      description="new one")
    t = deltatx.Table(table_uri)
    assert result.version == 2 and t.version == 2
    assert t.schema.names == ["key", "n", "day"] and t.partition_columns == ["day"]
    assert t.properties == {"delta.appendOnly": "false", "foo": "bar"}
    assert t.metadata.description == "new one" and t.metadata.id != old_id
    assert t.files().num_rows == 0 and t.to_arrow().num_rows == 0
    info = t.history(1)[0]
    assert info["operation"] == "CREATE OR REPLACE TABLE"
    assert info["operationParameters"]["partitionBy"] == '["day"]'
    assert info["operationMetrics"]["numRemovedFiles"] == "2"
    assert deltatx.Table(table_uri, version=1).to_arrow().num_rows == 2  # time travel still sees the rows


def test_replace_never_lowers_the_protocol(table_uri):
    table = _table(table_uri, properties={"delta.enableDeletionVectors": "true"})
    before = table.protocol
    assert before.min_reader_version == 3
    _replace(table, NEW)
    after = deltatx.Table(table_uri).protocol
    assert after == before
    assert deltatx.Table(table_uri).properties == {}


def test_bad_definitions_write_nothing(table_uri):
    table = _table(table_uri)
    for schema, kwargs, exc in [
        (NEW, {"partition_by": ["nope"]}, SchemaMismatchError),
        (NEW, {"partition_by": ["key", "n", "day"]}, SchemaMismatchError),
        (NEW, {"properties": {"delta.feature.collations-preview": "supported"}}, UnsupportedFeatureError),
    ]:
        with pytest.raises(exc):
            _replace(table, schema, **kwargs)
        t = deltatx.Table(table_uri)
        assert t.version == 1 and t.schema.names == ["id", "part"] and t.files().num_rows == 2


def test_a_concurrent_append_conflicts_with_a_replace(table_uri):
    """A blind append that committed after the replace read the table would survive it with the
    old schema; the replace changes metadata, so it must fail (Delta: WriteSerializable too)."""
    table = _table(table_uri)
    tx = table.transaction()
    stage_replace_table(tx, NEW)
    deltatx.Table(table_uri).append(pa.table({"id": [3], "part": ["c"]}, schema=OLD))  # commits version 2
    with pytest.raises(ConcurrentAppendException):
        tx.commit()
    t = deltatx.Table(table_uri)
    assert t.version == 2 and t.schema.names == ["id", "part"]


def test_a_writer_that_read_the_old_definition_fails_after_a_replace(table_uri):
    table = _table(table_uri)
    with table.transaction() as tx:
        tx.append(pa.table({"id": [9], "part": ["z"]}, schema=OLD))
        _replace(deltatx.Table(table_uri), NEW)
        with pytest.raises(MetadataChangedException):
            tx.commit()
    assert deltatx.Table(table_uri).to_arrow().num_rows == 0

