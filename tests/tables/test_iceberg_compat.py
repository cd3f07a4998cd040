"""Iceberg compatibility V1/V2: the writer rules deltatx checks on every metadata/protocol change,
partition values stored in the data files, and Iceberg-safe type changes."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tablefiles import data_files

import deltatx
from deltatx.errors import InvalidPropertyError, SchemaMismatchError, TypeChangeError, UnsupportedFeatureError
from deltatx.io.paths import decode_path
from deltatx.io.writer import WriteOptions, write_data_files
from deltatx.tables.iceberg_compat import validate
from deltatx.txnlog.actions import Metadata, Protocol
from deltatx.txnlog.features import required_protocol
from deltatx.txnlog.schema import VARIANT_STORAGE, schema_to_json

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("ts", pa.timestamp("us", tz="UTC"))])
V1 = {"delta.enableIcebergCompatV1": "true", "delta.columnMapping.mode": "name"}
V2 = {"delta.enableIcebergCompatV2": "true", "delta.columnMapping.mode": "name"}
CM_PROTOCOL = ("columnMapping",)


def _metadata(config: dict, schema: pa.Schema = SCHEMA, partition_columns: tuple = ("part",)) -> Metadata:
    return Metadata(id="t", schema_string=schema_to_json(schema), partition_columns=partition_columns,
                    configuration=dict(config))


def _protocol(*writer: str) -> Protocol:
    return Protocol(3, 7, CM_PROTOCOL + tuple(f for f in writer if f == "deletionVectors"),
                    CM_PROTOCOL + tuple(writer))


@pytest.mark.parametrize(("config", "protocol"), [
    (V1, _protocol("icebergCompatV1")),
    (V2, _protocol("icebergCompatV2")),
    ({**V2, "delta.columnMapping.mode": "id"}, _protocol("icebergCompatV2")),
    # V2 allows the deletion-vector feature as long as deletion vectors are not enabled
    ({**V2, "delta.enableDeletionVectors": "false"}, _protocol("icebergCompatV2", "deletionVectors")),
    ({}, Protocol(1, 2)),  # inactive: nothing checked
])
def test_tables_that_follow_the_rules_pass(config, protocol):
    validate(_metadata(config), protocol)


@pytest.mark.parametrize(("config", "protocol", "error", "match"), [
    ({"delta.enableIcebergCompatV2": "true"}, _protocol("icebergCompatV2"), InvalidPropertyError, "column mapping"),
    ({**V1, "delta.columnMapping.mode": "none"}, _protocol("icebergCompatV1"), InvalidPropertyError, "column mapping"),
    (V1, _protocol("icebergCompatV1", "deletionVectors"), InvalidPropertyError, "deletionVectors"),
    ({**V2, "delta.enableDeletionVectors": "true"}, _protocol("icebergCompatV2", "deletionVectors"),
     InvalidPropertyError, "enableDeletionVectors=false"),
    ({**V1, **V2}, _protocol("icebergCompatV1", "icebergCompatV2"), InvalidPropertyError, "cannot both be true"),
])
def test_broken_rules_are_typed_errors(config, protocol, error, match):
    with pytest.raises(error, match=match):
        validate(_metadata(config), protocol)


@pytest.mark.parametrize(("config", "column", "error", "match"), [
    (V1, pa.field("tags", pa.list_(pa.string())), SchemaMismatchError, "forbids map and array"),
    (V1, pa.field("attrs", pa.map_(pa.string(), pa.string())), SchemaMismatchError, "forbids map and array"),
    (V1, pa.field("s", pa.struct([("inner", pa.list_(pa.int32()))])), SchemaMismatchError, "'s.inner'"),
    (V2, pa.field("tags", pa.list_(pa.string())), UnsupportedFeatureError, "nested.ids"),
    (V2, pa.field("v", VARIANT_STORAGE), SchemaMismatchError, "variant"),
])
def test_column_types_iceberg_cannot_hold_are_refused(config, column, error, match):
    schema = SCHEMA.append(column)
    feature = "icebergCompatV1" if config is V1 else "icebergCompatV2"
    with pytest.raises(error, match=match):
        validate(_metadata(config, schema), _protocol(feature))


def test_partition_columns_cannot_be_replaced_by_others():
    protocol = _protocol("icebergCompatV2")
    before = _metadata(V2)
    validate(_metadata(V2), protocol, previous=before)
    with pytest.raises(SchemaMismatchError, match="replacing the partition columns"):
        validate(_metadata(V2, partition_columns=("id",)), protocol, previous=before)


def test_recorded_type_changes_must_be_iceberg_evolutions():
    def with_change(old: str, new: str) -> pa.Schema:
        return pa.schema([pa.field("id", pa.int64(), metadata={"delta.typeChanges": orjson.dumps(
            [{"fromType": old, "toType": new}])}), ("part", pa.string())])

    protocol = _protocol("icebergCompatV2", "typeWidening")
    validate(_metadata(V2, with_change("integer", "long")), protocol)
    with pytest.raises(SchemaMismatchError, match="Iceberg cannot evolve"):
        validate(_metadata(V2, with_change("integer", "double")), protocol)


def test_enabling_needs_the_writer_feature_and_column_mapping(table_uri):
    protocol = required_protocol({"delta.enableIcebergCompatV2": "true"}, SCHEMA)
    assert "icebergCompatV2" in protocol.writer_features and protocol.min_writer_version == 7
    table = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    table.append(pa.table({"id": [1], "part": ["a"], "ts": [None]}, schema=SCHEMA))
    before = data_files(table_uri)
    with pytest.raises(InvalidPropertyError, match="needs column mapping"):
        table.set_properties({"delta.enableIcebergCompatV2": "true"})
    with pytest.raises(InvalidPropertyError, match="needs column mapping"):
        deltatx.create_table(table_uri + "-2", SCHEMA, properties={"delta.enableIcebergCompatV1": "true"})
    assert deltatx.Table(table_uri).version == 1 and data_files(table_uri) == before
    assert not os.path.exists(table_uri + "-2")


def test_type_widening_on_a_table_supporting_iceberg_compat_takes_only_iceberg_changes(table_uri):
    schema = pa.schema([("a", pa.int32()), ("b", pa.int32()), ("c", pa.decimal128(5, 2))])
    table = deltatx.create_table(table_uri, schema, properties={
        "delta.feature.icebergCompatV1": "supported", "delta.enableTypeWidening": "true"})
    assert "icebergCompatV1" in table.protocol.writer_features
    table.alter_column_type("a", pa.int64())
    table.alter_column_type("c", pa.decimal128(9, 2))  # precision only: Iceberg can
    for column, new in (("b", pa.float64()), ("b", pa.decimal128(12, 0)), ("c", pa.decimal128(12, 4))):
        with pytest.raises(TypeChangeError, match="Iceberg cannot evolve"):
            table.alter_column_type(column, new)
    assert deltatx.Table(table_uri).version == 2


def test_materialized_partition_values_are_written_after_the_data_columns(table_uri):
    """What an Iceberg-compatible table's writes do: the files hold the partition columns too
    (last, without statistics), and deltatx reads such files like any other."""
    table = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    rows = pa.table({"id": [1, 2, 3], "part": ["a", "b", "a"], "ts": [None, None, None]}, schema=SCHEMA)
    adds = write_data_files(table.store, rows, SCHEMA, ["part"], WriteOptions(materialize_partition_columns=True))
    for add in adds.to_pylist():
        in_file = pq.read_table(os.path.join(table_uri, decode_path(add["path"])))
        assert in_file.column_names == ["id", "ts", "part"]
        assert set(in_file.column("part").to_pylist()) == {dict(add["partitionValues"])["part"]}
        stats = orjson.loads(add["stats"])
        assert stats["numRecords"] == in_file.num_rows and "part" not in stats["minValues"]
    with table.transaction() as tx:
        tx.stage_adds(adds)
    got = deltatx.Table(table_uri).to_arrow().sort_by("id")
    assert got.equals(rows)
    assert deltatx.Table(table_uri).to_arrow(where="part = 'b'").column("id").to_pylist() == [2]


def test_an_existing_table_breaking_the_rules_is_read_but_not_written(table_uri):
    """Checked when a transaction starts too, not only when metadata changes: an append to a
    table that is Iceberg-compatible in name only would write files breaking the rules."""
    from deltatx.txnlog.actions import encode_commit
    from deltatx.txnlog.store import open_store

    open_store(table_uri).put_commit(0, encode_commit(
        {"timestamp": 1, "operation": "CREATE TABLE"},
        protocol=Protocol(1, 7, None, ("icebergCompatV2",)),
        metadata=_metadata({"delta.enableIcebergCompatV2": "true"}, partition_columns=())))
    table = deltatx.Table(table_uri)
    assert table.to_arrow().num_rows == 0
    with pytest.raises(InvalidPropertyError, match="needs column mapping"):
        table.append(pa.table({"id": [1], "part": ["a"], "ts": [None]}, schema=SCHEMA))
    assert deltatx.Table(table_uri).version == 0 and data_files(table_uri) == set()
