"""Variant columns in a table another engine made: read as the struct of binaries Parquet stores
(``value`` + ``metadata``), and written to like any other table (tests/tables/test_variant_writes.py
covers the writing side); a table that only *lists* the variant features (delta-rs does, on every
deletion-vector table) stays writable too."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltatx
from deltatx.expr import bind_predicate, files_matching, parse_predicate
from deltatx.errors import UnsupportedFeatureError
from deltatx.txnlog.actions import FILE_SCHEMA, Metadata, Protocol, encode_commit, file_actions_table
from deltatx.txnlog.stats import parse_stats
from deltatx.txnlog.store import open_store

# Variant binary encoding (parquet-format VariantEncoding.md): metadata = header 0x01 (version 1,
# 1-byte offsets), an empty dictionary; values: the int8 42 and the short string "hi".
EMPTY_METADATA = b"\x01\x00\x00"
INT8_42 = b"\x0c\x2a"
STRING_HI = b"\x09hi"

STORED = pa.struct([pa.field("value", pa.binary(), False), pa.field("metadata", pa.binary(), False)])
VARIANT_SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "v", "type": "variant", "nullable": True, "metadata": {}},
        {"name": "vs", "type": {"type": "array", "elementType": {"type": "variant"}, "containsNull": True},
         "nullable": True, "metadata": {}},
    ],
}
PLAIN_SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}


def _variant(value: bytes | None) -> dict | None:
    return None if value is None else {"value": value, "metadata": EMPTY_METADATA}


def _table(uri: str, features: tuple[str, ...], schema: dict = VARIANT_SCHEMA) -> None:
    """A table as Spark leaves one: a variant column in the log, its struct of binaries in Parquet."""
    os.makedirs(uri)
    files = []
    if schema is VARIANT_SCHEMA:
        data = pa.table({
            "id": pa.array([1, 2, 3], pa.int64()),
            "v": pa.array([_variant(INT8_42), None, _variant(STRING_HI)], STORED),
            "vs": pa.array([[_variant(STRING_HI)], None, []], pa.list_(STORED)),
        })
        stats = {"numRecords": 3, "minValues": {"id": 1}, "maxValues": {"id": 3}, "nullCount": {"id": 0, "v": 1, "vs": 1}}
    else:
        data = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
        stats = {"numRecords": 3, "minValues": {"id": 1}, "maxValues": {"id": 3}, "nullCount": {"id": 0}}
    pq.write_table(data, os.path.join(uri, "part-0.parquet"))
    files.append({"path": "part-0.parquet", "partitionValues": {}, "size": os.path.getsize(os.path.join(uri, "part-0.parquet")),
                  "modificationTime": 1, "dataChange": True, "stats": orjson.dumps(stats).decode()})
    open_store(uri).put_commit(0, encode_commit(
        {"timestamp": 1, "operation": "CREATE TABLE"},
        protocol=Protocol(3, 7, features, features),
        metadata=Metadata(id="variant-table", schema_string=orjson.dumps(schema).decode()),
        adds=file_actions_table(files, FILE_SCHEMA)))


@pytest.mark.parametrize("feature", ["variantType", "variantType-preview"])
def test_variant_columns_read_as_their_parquet_struct(table_uri, feature):
    _table(table_uri, (feature,))
    table = deltatx.Table(table_uri)
    assert table.schema.field("v").type == STORED
    assert table.schema.field("vs").type == pa.list_(pa.field("element", STORED))
    rows = table.to_arrow().sort_by("id").to_pylist()
    assert rows == [
        {"id": 1, "v": {"value": INT8_42, "metadata": EMPTY_METADATA}, "vs": [{"value": STRING_HI, "metadata": EMPTY_METADATA}]},
        {"id": 2, "v": None, "vs": None},
        {"id": 3, "v": {"value": STRING_HI, "metadata": EMPTY_METADATA}, "vs": []},
    ]
    # the variant's null count (one number per variant column) does not spoil the file's other stats
    pred = bind_predicate(parse_predicate("id > 5"), table.schema)
    assert files_matching(pred, table.files(), table.schema, []).to_pylist() == [False]
    null_counts = parse_stats(table.files()["stats"], table.schema).field("nullCount").to_pylist()
    assert null_counts == [{"id": 0, "v": 1, "vs": 1}]
    assert table.to_arrow(where="id = 3", columns=["v"]).column("v").to_pylist() == [
        {"value": STRING_HI, "metadata": EMPTY_METADATA}]


def test_a_table_another_engine_made_with_variant_columns_takes_appends_deletes_and_properties(table_uri):
    _table(table_uri, ("variantType",))
    table = deltatx.Table(table_uri)
    table.append(pa.table({"id": [4], "v": pa.array([_variant(STRING_HI)], STORED)}))  # "vs" left out: NULL
    table.delete("id = 1")
    table.set_properties({"delta.appendOnly": "false"})
    after = deltatx.Table(table_uri)
    assert after.metadata.schema_string.count('"variant"') == 2  # both variant columns stay variants
    assert after.protocol.writer_features == ("variantType",)
    assert after.to_arrow().sort_by("id").to_pylist() == [
        {"id": 2, "v": None, "vs": None},
        {"id": 3, "v": {"value": STRING_HI, "metadata": EMPTY_METADATA}, "vs": []},
        {"id": 4, "v": {"value": STRING_HI, "metadata": EMPTY_METADATA}, "vs": None},
    ]


@pytest.mark.parametrize("features", [("variantType",), ("variantType-preview",), ("variantType", "variantShredding"),
                                      ("deletionVectors", "variantType")])
def test_listed_but_unused_variant_features_leave_the_table_writable(table_uri, features):
    _table(table_uri, features, schema=PLAIN_SCHEMA)
    table = deltatx.Table(table_uri)
    table.append(pa.table({"id": [4]}))
    table.delete("id = 1")
    assert sorted(deltatx.Table(table_uri).to_arrow().column("id").to_pylist()) == [2, 3, 4]
    assert set(deltatx.Table(table_uri).protocol.reader_features) == set(features)  # features kept


def test_shredding_with_a_variant_column_is_refused_on_read(table_uri):
    """Shredded files move parts of a value into typed columns; reading only value + metadata
    would return wrong values, so such a table is not read at all."""
    _table(table_uri, ("variantType", "variantShredding"))
    with pytest.raises(UnsupportedFeatureError, match="variantShredding") as info:
        deltatx.Table(table_uri)
    assert info.value.kind == "reader"
