"""Tables with table features, across deltalake (delta-rs 1.x) and deltatx.

For each feature deltalake can put on a table, deltalake builds the table, deltatx appends and
deletes, and deltalake reads the result back: same rows as deltatx. For the features deltalake
cannot create (in-commit timestamps, type widening, column defaults, checkpoint protection),
deltatx builds the table and deltalake reads it — or, where delta-rs does not implement the
reader feature (typeWidening), DuckDB's delta-kernel does, and deltalake's refusal is recorded.
"""

from __future__ import annotations

import os
from typing import Callable

import pyarrow as pa
import pytest
from interop_helpers import read_deltalake, read_duckdb

import deltatx
from deltatx.errors import AppendOnlyError

BASE = pa.schema([("id", pa.int64()), ("name", pa.string())])


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def _rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids]}, schema=BASE)


def _deltalake_table(uri: str, data: pa.Table, configuration: dict[str, str] | None = None) -> None:
    from deltalake import write_deltalake

    write_deltalake(uri, data, configuration=configuration)


def _with_feature(name: str) -> Callable[[str], None]:
    def build(uri: str) -> None:
        from deltalake import DeltaTable, TableFeatures

        _deltalake_table(uri, _rows([1, 2, 3, 4, 5, 6]))
        DeltaTable(uri).alter.add_feature(getattr(TableFeatures, name), allow_protocol_versions_increase=True)

    return build


def _with_configuration(configuration: dict[str, str]) -> Callable[[str], None]:
    return lambda uri: _deltalake_table(uri, _rows([1, 2, 3, 4, 5, 6]), configuration)


def _with_constraint(uri: str) -> None:
    from deltalake import DeltaTable

    _deltalake_table(uri, _rows([1, 2, 3, 4, 5, 6]))
    DeltaTable(uri).alter.add_constraint({"positive_id": "id > 0"})


def _with_timestamp_ntz(uri: str) -> None:
    _deltalake_table(uri, _rows([1, 2, 3, 4, 5, 6]).append_column("at", pa.array([None] * 6, pa.timestamp("us"))))


def _with_generated_column(uri: str) -> None:
    from deltalake import DeltaTable, Field, Schema, write_deltalake

    DeltaTable.create(uri, Schema([Field("id", "long", nullable=True), Field("name", "string", nullable=True),
                                   Field("twice", "long", nullable=True,
                                         metadata={"delta.generationExpression": "id * 2"})]))
    ids = [1, 2, 3, 4, 5, 6]
    write_deltalake(uri, _rows(ids).append_column("twice", pa.array([i * 2 for i in ids], pa.int64())), mode="append")


# name -> (builder, the feature the built table lists)
CASES = [
    pytest.param(_with_configuration({"delta.enableDeletionVectors": "true"}), "deletionVectors", id="deletionVectors"),
    pytest.param(_with_timestamp_ntz, "timestampNtz", id="timestampNtz"),
    pytest.param(_with_feature("DomainMetadata"), "domainMetadata", id="domainMetadata"),
    pytest.param(_with_feature("RowTracking"), "rowTracking", id="rowTracking-supported"),
    pytest.param(_with_feature("V2Checkpoint"), "v2Checkpoint", id="v2Checkpoint"),
    pytest.param(_with_feature("IcebergCompatV1"), "icebergCompatV1", id="icebergCompatV1-dormant"),
    pytest.param(_with_feature("AppendOnly"), "appendOnly", id="appendOnly-dormant"),
    pytest.param(_with_constraint, "checkConstraints", id="checkConstraints"),
    pytest.param(_with_configuration({"delta.enableChangeDataFeed": "true"}), "changeDataFeed", id="changeDataFeed"),
    pytest.param(_with_configuration({"delta.columnMapping.mode": "name"}), "columnMapping", id="columnMapping"),
    pytest.param(_with_generated_column, "generatedColumns", id="generatedColumns"),
]


@pytest.mark.parametrize(("build", "feature"), CASES)
def test_deltalake_table_with_feature_written_by_deltatx_read_by_deltalake(table_uri, build, feature):
    from deltatx.txnlog.features import writer_features

    build(table_uri)
    table = deltatx.Table(table_uri)
    assert feature in writer_features(table.protocol)
    schema = table.schema
    new = _rows([7, 8])
    if "at" in schema.names:
        new = new.append_column("at", pa.array([None, None], pa.timestamp("us")))
    if "twice" in schema.names:
        new = new.append_column("twice", pa.array([14, 16], pa.int64()))
    table.append(new)
    table.delete("id <= 2")
    expected = [3, 4, 5, 6, 7, 8]
    assert _ids(deltatx.Table(table_uri).to_arrow()) == expected
    assert _ids(read_deltalake(table_uri)) == expected
    if feature == "v2Checkpoint":  # a checkpoint deltatx writes for it, read by deltalake too
        deltatx.Table(table_uri).checkpoint()
        assert any(".checkpoint." in f for f in os.listdir(os.path.join(table_uri, "_delta_log")))
        assert _ids(read_deltalake(table_uri)) == expected


def test_deltalake_deletion_vector_tables_list_variant_type_and_stay_writable(table_uri):
    """delta-rs lists variantType on every table it creates with deletion vectors (bullet 9b)."""
    _with_configuration({"delta.enableDeletionVectors": "true"})(table_uri)
    table = deltatx.Table(table_uri)
    assert "variantType" in table.protocol.writer_features
    table.delete("id = 3")  # merge-on-read: a deletion vector deltalake must honour
    assert table.refresh().files().column("deletionVector").null_count < table.files().num_rows
    assert _ids(read_deltalake(table_uri)) == [1, 2, 4, 5, 6]


def test_append_only_table_from_deltalake_refuses_deletes(table_uri):
    from deltalake import DeltaTable

    _with_configuration({"delta.appendOnly": "true"})(table_uri)
    table = deltatx.Table(table_uri)
    table.append(_rows([7]))
    with pytest.raises(AppendOnlyError):
        table.delete("id = 1")
    assert deltatx.Table(table_uri).version == 1 == DeltaTable(table_uri).version()
    assert _ids(read_deltalake(table_uri)) == [1, 2, 3, 4, 5, 6, 7]


# ------------------------------------------------------------------ features deltalake cannot create


def test_in_commit_timestamp_table_is_read_by_deltalake(table_uri):
    from deltalake import DeltaTable

    table = deltatx.create_table(table_uri, BASE, properties={"delta.enableInCommitTimestamps": "true"})
    table.append(_rows([1, 2, 3]))
    table.delete("id = 2")
    dt = DeltaTable(table_uri)
    assert _ids(pa.table(dt.scan())) == [1, 3]
    history = {h["version"]: h for h in dt.history()}
    ours = {h["version"]: h for h in deltatx.Table(table_uri).history()}
    assert all(history[v]["inCommitTimestamp"] == ours[v]["timestamp"] for v in ours)
    # enabled mid-history on another table: deltalake still reads every version
    other = table_uri + "-later"
    later = deltatx.create_table(other, BASE)
    later.append(_rows([1]))
    later.set_properties({"delta.enableInCommitTimestamps": "true"})
    later.append(_rows([2]))
    assert _ids(read_deltalake(other)) == [1, 2] and _ids(read_deltalake(other, version=1)) == [1]


def test_deltalake_cannot_write_in_commit_timestamp_tables(table_uri):
    """Recorded limit of delta-rs 1.x: it neither creates ICT tables nor writes to ours (so there
    is no deltalake-made ICT table for deltatx to write to)."""
    from deltalake import write_deltalake

    with pytest.raises(Exception, match="delta.enableInCommitTimestamps"):
        write_deltalake(table_uri, _rows([1]), configuration={"delta.enableInCommitTimestamps": "true"})
    deltatx.create_table(table_uri + "-ours", BASE, properties={"delta.enableInCommitTimestamps": "true"})
    with pytest.raises(Exception, match="InCommitTimestamp"):
        write_deltalake(table_uri + "-ours", _rows([1]), mode="append")
    assert deltatx.Table(table_uri + "-ours").version == 0


def test_type_widened_table_is_read_by_duckdb_and_refused_by_deltalake(table_uri):
    schema = pa.schema([("id", pa.int32()), ("x", pa.float32())])
    table = deltatx.create_table(table_uri, schema, properties={"delta.enableTypeWidening": "true"})
    table.append(pa.table({"id": pa.array([1, 2], pa.int32()), "x": pa.array([0.5, 1.5], pa.float32())}))
    table.alter_column_type("id", pa.int64())
    table.alter_column_type("x", pa.float64())
    table.append(pa.table({"id": [2**40], "x": [1e300]}))
    ours = deltatx.Table(table_uri).to_arrow().sort_by("id")
    duck = read_duckdb(table_uri).sort_by("id")
    assert duck.schema.field("id").type == pa.int64() and duck.schema.field("x").type == pa.float64()
    assert duck.to_pylist() == ours.to_pylist() == [
        {"id": 1, "x": 0.5}, {"id": 2, "x": 1.5}, {"id": 2**40, "x": 1e300}]
    with pytest.raises(Exception, match="(?i)typeWidening"):  # delta-rs 1.x lacks the reader feature
        read_deltalake(table_uri)


def test_column_defaults_and_checkpoint_protection_tables_are_read_by_deltalake(table_uri):
    schema = pa.schema([("id", pa.int64()), pa.field("qty", pa.int32(), metadata={"CURRENT_DEFAULT": "42"})])
    table = deltatx.create_table(table_uri, schema, properties={"delta.feature.checkpointProtection": "supported"})
    table.append(pa.table({"id": [1, 2]}))
    table.delete("id = 1")
    got = read_deltalake(table_uri)
    assert got.to_pylist() == [{"id": 2, "qty": 42}]
    assert {"allowColumnDefaults", "checkpointProtection"} <= set(deltatx.Table(table_uri).protocol.writer_features)


@pytest.mark.parametrize("version", [1, 2])
def test_iceberg_compatible_table_is_read_by_deltalake_and_duckdb(table_uri, version):
    """With column mapping on, deltatx creates, writes and reads the table; its files hold the
    partition column (by its physical name, after the data columns); deltalake reads the same rows."""
    import orjson
    import pyarrow.parquet as pq
    from tablefiles import data_files

    from deltatx.errors import InvalidPropertyError, SchemaMismatchError, UnsupportedFeatureError
    from deltatx.io.paths import decode_path

    schema = pa.schema([("id", pa.int64()), ("part", pa.string()), ("ts", pa.timestamp("us", tz="UTC"))])
    config = {"delta.columnMapping.mode": "name", f"delta.enableIcebergCompatV{version}": "true"}
    table = deltatx.create_table(table_uri, schema, partition_by=["part"], properties=config)
    assert f"icebergCompatV{version}" in table.protocol.writer_features
    table.append(pa.table({"id": [1, 2, 3], "part": ["a", "b", "a"], "ts": [None] * 3}, schema=schema))
    table.delete("id = 2")
    table = deltatx.Table(table_uri)
    physical = {f.name: orjson.loads(f.metadata[b"delta.columnMapping.physicalName"]) for f in table.schema}
    for add in table.files().to_pylist():
        in_file = pq.read_table(os.path.join(table_uri, decode_path(add["path"])))
        assert in_file.column_names[-1] == physical["part"]
        assert orjson.loads(add["stats"])["numRecords"] == in_file.num_rows
    expected = [{"id": 1, "part": "a"}, {"id": 3, "part": "a"}]
    assert table.to_arrow(columns=["id", "part"]).sort_by("id").to_pylist() == expected
    assert sorted(read_deltalake(table_uri).select(["id", "part"]).to_pylist(), key=lambda r: r["id"]) == expected
    # DuckDB's delta extension returns NULL partition values for every column-mapped partitioned
    # table (deltalake's too), so it is the oracle for the data columns only
    assert _ids(read_duckdb(table_uri)) == [1, 3]
    # refused, nothing written: an array column (V1: not allowed; V2: nested ids not assigned), DVs
    before = data_files(table_uri)
    with_array = pa.table({"id": [4], "part": ["c"], "ts": pa.array([None], schema.field("ts").type),
                           "tags": pa.array([["x"]], pa.list_(pa.string()))})
    with pytest.raises(SchemaMismatchError if version == 1 else UnsupportedFeatureError,
                       match="forbids map and array" if version == 1 else "nested.ids"):
        table.append(with_array, schema_mode="merge")
    with pytest.raises(InvalidPropertyError, match="(?i)deletion"):
        table.set_properties({"delta.enableDeletionVectors": "true"})
    assert deltatx.Table(table_uri).version == table.version and data_files(table_uri) == before


def test_row_tracking_listed_without_domain_metadata_gets_it_with_the_first_watermark(table_uri):
    """deltalake's ``add_feature(RowTracking)`` lists rowTracking alone, though PROTOCOL.md makes
    it require domainMetadata. deltatx's first append keeps the row-id watermark in the
    ``delta.rowTracking`` domain, so that commit lists domainMetadata too (Delta Spark refuses a
    domainMetadata action on a table without the feature)."""
    import orjson
    from deltalake import DeltaTable, TableFeatures

    _deltalake_table(table_uri, _rows([1, 2]))
    DeltaTable(table_uri).alter.add_feature(TableFeatures.RowTracking, allow_protocol_versions_increase=True)
    assert "domainMetadata" not in (deltatx.Table(table_uri).protocol.writer_features or ())
    result = deltatx.Table(table_uri).append(_rows([3]))
    with open(os.path.join(table_uri, "_delta_log", f"{result.version:020d}.json"), "rb") as f:
        actions = [orjson.loads(line) for line in f if line.strip()]
    kinds = [next(iter(a)) for a in actions]
    assert "domainMetadata" in kinds and "protocol" in kinds
    protocol = next(a["protocol"] for a in actions if "protocol" in a)
    assert {"rowTracking", "domainMetadata"} <= set(protocol["writerFeatures"])
    assert _ids(read_deltalake(table_uri)) == [1, 2, 3]
    rows = deltatx.Table(table_uri).to_arrow(columns=["id", "_metadata.row_id"])
    assert rows.sort_by("id")["_metadata.row_id"].to_pylist()[2] is not None
