"""Writing variant columns (PROTOCOL.md "Variant Data Type", writer requirements).

A column of ``deltatx.VARIANT`` (struct<value: binary NOT NULL, metadata: binary NOT NULL>) is a
Delta ``variant``: the table gets the ``variantType`` reader and writer feature, files store the
unshredded struct, and every value that comes from outside the table is checked against the
Variant binary encoding before anything is written. The encoded values used here come from
``deltatx.variant.parse_json`` (PySpark's encoder) and a few hand-made byte strings of the
encoding spec, so the checks do not only compare deltatx with itself.
"""

from __future__ import annotations

import datetime as dt

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tablefiles import data_files

import deltatx
from deltatx import VARIANT
from deltatx.errors import MalformedVariantError, SchemaMismatchError

# Variant binary encoding by hand: metadata = version 1, 1-byte offsets, an empty dictionary;
# value = the int8 6 (primitive type 3 = int8: header 3 << 2 = 0x0c).
EMPTY_METADATA = b"\x01\x00\x00"
INT8_6 = b"\x0c\x06"
SCHEMA = pa.schema([("id", pa.int64()), ("v", VARIANT)])
CANONICAL_ORDER = pa.struct([("metadata", pa.binary()), ("value", pa.binary())])  # Arrow's own field order


def _json(table: deltatx.Table, where: str | None = None) -> dict[int, str | None]:
    rows = table.to_arrow(where=where).sort_by("id")
    return dict(zip(rows["id"].to_pylist(), deltatx.variant.to_json(rows["v"]).to_pylist()))


def _rows(ids: list[int], texts: list[str | None]) -> pa.Table:
    return pa.table({"id": ids, "v": deltatx.variant.parse_json(texts)}, schema=SCHEMA)


def test_a_variant_column_makes_a_variant_table(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    assert "variantType" in t.protocol.reader_features and "variantType" in t.protocol.writer_features
    assert (t.protocol.min_reader_version, t.protocol.min_writer_version) == (3, 7)
    fields = orjson.loads(t.metadata.schema_string)["fields"]
    assert fields[1] == {"name": "v", "type": "variant", "nullable": True, "metadata": {}}
    assert t.schema.field("v").type == VARIANT  # and reads back as the same arrow type


def test_values_round_trip_as_json_and_files_hold_the_unshredded_struct(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    texts = ['{"a":1,"b":[true,null,"x"],"c":{"d":1.5}}', "[]", '"text"', "12345678901", None]
    t.append(_rows([1, 2, 3, 4, 5], texts))
    assert _json(deltatx.Table(table_uri)) == {1: '{"a":1,"b":[true,null,"x"],"c":{"d":1.5}}', 2: "[]",
                                               3: '"text"', 4: "12345678901", 5: None}
    (path,) = [p for p in data_files(table_uri) if p.endswith(".parquet")]
    stored = pq.read_schema(f"{table_uri}/{path}").field("v").type
    assert [(stored.field(i).name, stored.field(i).type, stored.field(i).nullable) for i in range(2)] == [
        ("value", pa.binary(), False), ("metadata", pa.binary(), False)]
    # stats: a variant is one leaf with a null count and no bounds (Delta keeps none for it)
    stats = orjson.loads(t.files()["stats"][0].as_py())
    assert stats["nullCount"]["v"] == 1 and "v" not in stats["minValues"] and "v" not in stats["maxValues"]


def test_hand_encoded_values_in_arrows_field_order_are_accepted(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(pa.table({"id": [1], "v": pa.array([{"metadata": EMPTY_METADATA, "value": INT8_6}], CANONICAL_ORDER)}))
    assert _json(t) == {1: "6"}


def test_dml_keeps_variant_values_and_null_variants(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, properties={"delta.enableDeletionVectors": "true",
                                                           "delta.enableChangeDataFeed": "true"})
    t.append(_rows([1, 2, 3, 4], ['{"k":1}', '{"k":2}', "[3]", None]))
    t.append(pa.table({"id": [5]}))  # the variant column left out: NULL
    t.delete("id = 2")  # a deletion vector
    t.update(where="id = 3", set={"id": "30"})  # the value is copied as it is
    t.update(where="id = 1", set={"v": "NULL"})  # a NULL variant written by an UPDATE
    source = pa.table({"id": [4, 6, 7],
                       "v": pa.array([{"metadata": EMPTY_METADATA, "value": INT8_6}, None,
                                      {"metadata": EMPTY_METADATA, "value": b"\x0c\x07"}], CANONICAL_ORDER)})
    t.merge(source, on="t.id = s.id").when_matched_update_all().when_not_matched_insert_all().execute()
    t.merge(pa.table({"id": [8]}), on="t.id = s.id").when_not_matched_insert_all().execute()  # no v: NULL
    expected = {1: None, 4: "6", 5: None, 6: None, 7: "7", 8: None, 30: "[3]"}
    assert _json(deltatx.Table(table_uri)) == expected
    assert sorted(t.to_arrow(where="v IS NULL")["id"].to_pylist()) == [1, 5, 6, 8]
    t.optimize()
    assert _json(deltatx.Table(table_uri)) == expected and len(t.files()) == 1
    changes = t.changes(starting_version=0)
    assert changes.num_rows > 0 and changes.schema.field("v").type == VARIANT


def test_nested_variants_and_column_mapping(table_uri):
    schema = pa.schema([("id", pa.int64()), ("vs", pa.list_(VARIANT)), ("s", pa.struct([("inner", VARIANT)]))])
    t = deltatx.create_table(table_uri, schema, properties={"delta.columnMapping.mode": "name"})
    one = deltatx.variant.parse_json(['{"x":1}'])[0].as_py()
    t.append(pa.table({"id": [1, 2], "vs": [[one, None], None], "s": [{"inner": one}, {"inner": None}]}, schema=schema))
    t.rename_column("vs", "values")
    rows = deltatx.Table(table_uri).to_arrow().sort_by("id").to_pylist()
    assert rows == [{"id": 1, "values": [one, None], "s": {"inner": one}}, {"id": 2, "values": None, "s": {"inner": None}}]
    doc = orjson.loads(deltatx.Table(table_uri).metadata.schema_string)
    assert doc["fields"][1]["type"] == {"type": "array", "elementType": "variant", "containsNull": True}
    # the variant's own fields get no physical names: files keep value/metadata
    (path,) = [p for p in data_files(table_uri) if p.endswith(".parquet")]
    stored = pq.read_schema(f"{table_uri}/{path}")
    assert stored.field(1).type.value_type.names == ["value", "metadata"]


@pytest.mark.parametrize("bad", [
    {"metadata": EMPTY_METADATA, "value": b"\x0c"},  # an int8 without its byte
    {"metadata": b"\x02\x00\x00", "value": INT8_6},  # metadata version 2
    {"metadata": b"\x01\x01\x00\x09a", "value": INT8_6},  # a dictionary string past the end
    {"metadata": EMPTY_METADATA, "value": b"\x02\x01\x00\x00\x02\x0c\x01"},  # object key 0 of an empty dictionary
])
def test_malformed_values_are_refused_and_nothing_is_written(table_uri, bad):
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(_rows([1], ["1"]))
    before = data_files(table_uri)
    data = pa.table({"id": [2, 3], "v": pa.array([{"metadata": EMPTY_METADATA, "value": INT8_6}, bad], CANONICAL_ORDER)})
    with pytest.raises(MalformedVariantError, match=r"variant column 'v', row 1"):
        t.append(data)
    with pytest.raises(MalformedVariantError, match=r"variant column 'v', row 1"):
        t.merge(data, on="t.id = s.id").when_not_matched_insert_all().execute()
    assert deltatx.Table(table_uri).version == 1 and data_files(table_uri) == before


def test_json_text_must_go_through_parse_json(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    with pytest.raises(SchemaMismatchError, match="parse_json"):
        t.append(pa.table({"id": [1], "v": ['{"a": 1}']}))
    with pytest.raises(MalformedVariantError, match="not valid JSON"):
        deltatx.variant.parse_json(['{"a": '])
    assert deltatx.Table(table_uri).version == 0 and not [p for p in data_files(table_uri) if p.endswith(".parquet")]


def test_adding_a_variant_or_timestamp_ntz_column_upgrades_the_protocol(table_uri, tmp_path):
    """Delta lists the feature a new column needs in the commit that adds it."""
    t = deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]))
    assert t.protocol.min_writer_version == 2
    t.append(pa.table({"id": [1], "v": deltatx.variant.parse_json(["[1]"])}), schema_mode="merge")
    assert "variantType" in t.protocol.reader_features and "variantType" in t.protocol.writer_features
    assert deltatx.Table(table_uri).to_arrow()["v"].type == VARIANT
    u = deltatx.create_table(str(tmp_path / "ntz"), pa.schema([("id", pa.int64())]))
    u.append(pa.table({"id": [1], "ts": pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("us"))}), schema_mode="merge")
    assert "timestampNtz" in u.protocol.reader_features and "timestampNtz" in u.protocol.writer_features
    w = deltatx.create_table(str(tmp_path / "add"), pa.schema([("id", pa.int64())]))
    w.add_columns(pa.field("v", VARIANT))
    assert "variantType" in w.protocol.writer_features


def test_a_variant_is_neither_a_partition_nor_a_clustering_column(table_uri, tmp_path):
    with pytest.raises(SchemaMismatchError):
        deltatx.create_table(table_uri, SCHEMA, partition_by=["v"])
    t = deltatx.create_table(str(tmp_path / "c"), SCHEMA)
    with pytest.raises(deltatx.errors.ClusteringError):
        t.cluster_by(["v"])


def test_a_plain_struct_of_two_binaries_is_not_taken_for_a_variant(table_uri):
    """Only the exact variant type (both fields NOT NULL, value first) is a variant; a struct
    that merely has the same names stays a struct, and its bytes are nobody's business."""
    plain = pa.struct([("value", pa.binary()), ("metadata", pa.binary())])
    t = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("s", plain)]))
    assert "variant" not in t.metadata.schema_string and t.protocol.min_writer_version == 2
    junk = pa.table({"id": [1], "s": pa.array([{"value": b"\xff", "metadata": b"\xff"}], plain)})
    t.append(junk)
    t.merge(junk.set_column(0, "id", pa.array([2])), on="t.id = s.id").when_not_matched_insert_all().execute()
    assert deltatx.Table(table_uri).to_arrow().num_rows == 2


def test_the_default_of_a_variant_is_null_and_no_generated_column_is_a_variant(table_uri, tmp_path):
    """PROTOCOL.md "Default Columns": variant columns default to NULL (SET v = DEFAULT failed);
    "Variant Data Type": a variant is never the result of a generation expression."""
    from deltatx.errors import InvalidConstraintError

    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(pa.table({"id": [1, 2], "v": deltatx.variant.parse_json(["1", "2"])}, schema=SCHEMA))
    t.update("id = 1", {"v": "DEFAULT"})
    t.merge(pa.table({"id": [2, 3]}), on="t.id = s.id").when_matched_update({"v": "DEFAULT"}) \
        .when_not_matched_insert({"id": "s.id", "v": "DEFAULT"}).execute()
    assert deltatx.variant.to_json(deltatx.Table(table_uri).to_arrow().sort_by("id")["v"]).to_pylist() == [None] * 3
    with pytest.raises(InvalidConstraintError, match="variant"):
        deltatx.create_table(str(tmp_path / "g"), pa.schema([("id", pa.int64()), ("src", VARIANT), ("g", VARIANT)]),
                             generated_columns={"g": "src"})
    assert not (tmp_path / "g" / "_delta_log").exists()
