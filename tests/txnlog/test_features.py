"""Protocol features: what deltatx refuses to read or write, and the protocol a table needs."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pytest
from txnlog_logs import LogWriter, add_row, table_metadata

from deltatx.errors import UnsupportedFeatureError
from deltatx.txnlog.actions import Protocol
from deltatx.txnlog.features import (
    SUPPORTED_READER_FEATURES,
    SUPPORTED_WRITER_FEATURES,
    check_readable,
    check_writable,
    required_protocol,
)
from deltatx.txnlog.snapshot import load_snapshot

PLAIN = pa.schema([("id", pa.int64()), ("part", pa.string())])
WITH_NTZ = pa.schema([("id", pa.int64()), ("at", pa.struct([("local", pa.timestamp("us"))]))])


def test_unknown_reader_feature_is_refused_at_load(log: LogWriter) -> None:
    log.create(protocol=Protocol(3, 7, ("deletionVectors", "madeUpFeature"), ("deletionVectors", "madeUpFeature")))
    with pytest.raises(UnsupportedFeatureError, match="'madeUpFeature'") as info:
        load_snapshot(log.store)
    assert info.value.kind == "reader" and info.value.feature == "madeUpFeature"


def test_reader_feature_added_later_is_refused_on_refresh(log: LogWriter) -> None:
    log.create()
    snap = load_snapshot(log.store)
    log.commit(protocol=Protocol(3, 7, ("someFutureReaderFeature",), ("someFutureReaderFeature",)))
    with pytest.raises(UnsupportedFeatureError) as info:
        snap.refresh(log.store)
    assert info.value.feature == "someFutureReaderFeature"


def test_supported_reader_features_load(log: LogWriter) -> None:
    features = ("deletionVectors", "timestampNtz", "v2Checkpoint")
    log.create(protocol=Protocol(3, 7, features, features),
               schema=WITH_NTZ, partition_columns=())
    log.commit(adds=[add_row("a.parquet", None)])
    assert load_snapshot(log.store).files.num_rows == 1


def test_check_readable_versions() -> None:
    check_readable(Protocol(1, 2))
    check_readable(Protocol(3, 7, tuple(SUPPORTED_READER_FEATURES), tuple(SUPPORTED_READER_FEATURES)))
    with pytest.raises(UnsupportedFeatureError, match="readerVersion4"):
        check_readable(Protocol(4, 7, (), ()))
    check_readable(Protocol(2, 5))  # legacy reader 2 = column mapping, which deltatx reads
    check_readable(Protocol(2, 5), table_metadata({"delta.columnMapping.mode": "name"}))
    check_writable(Protocol(2, 5), table_metadata({"delta.columnMapping.mode": "id"}))


def test_check_writable_unknown_writer_feature() -> None:
    md = table_metadata()
    check_writable(Protocol(1, 7, None, tuple(SUPPORTED_WRITER_FEATURES)), md)
    check_writable(Protocol(1, 7, None, ("appendOnly", "allowColumnDefaults")),  # column defaults are filled now
                   table_metadata(schema=pa.schema([pa.field("id", pa.int64(), metadata={"CURRENT_DEFAULT": '"1"'}),
                                                    pa.field("part", pa.string())])))
    with pytest.raises(UnsupportedFeatureError) as info:
        check_writable(Protocol(1, 7, None, ("someFutureFeature",)), md)
    assert info.value.feature == "someFutureFeature"
    with pytest.raises(UnsupportedFeatureError, match="writerVersion8"):
        check_writable(Protocol(1, 8), md)


def test_dormant_writer_features_are_writable_until_used() -> None:
    protocol = Protocol(1, 7, None, ("appendOnly", "changeDataFeed", "checkConstraints", "inCommitTimestamp"))
    check_writable(protocol, table_metadata())
    check_writable(protocol, table_metadata({"delta.enableChangeDataFeed": "true"}))  # implemented
    check_writable(protocol, table_metadata({"delta.constraints.positive": "id > 0"}))  # enforced now
    check_writable(protocol, table_metadata({"delta.enableInCommitTimestamps": "true"}))  # stamped now
    # variant columns are written now (tables/variant.py): dormant or in use, the table is writable
    variant = Protocol(3, 7, ("variantType",), ("variantType",))
    check_writable(variant, table_metadata(partition_columns=()))
    with_variant = table_metadata(partition_columns=()).replace(
        schema_string='{"type":"struct","fields":[{"name":"v","type":"variant","nullable":true,"metadata":{}}]}')
    check_writable(variant, with_variant)
    # ...but not while shredded values may be in the files (variantShredding is read only dormant)
    shredded = Protocol(3, 7, ("variantType", "variantShredding"), ("variantType", "variantShredding"))
    with pytest.raises(UnsupportedFeatureError) as info:
        check_writable(shredded, with_variant)
    assert info.value.feature == "variantShredding"


def test_legacy_writer_versions_imply_features() -> None:
    check_writable(Protocol(1, 4), table_metadata())  # CDF and generated columns unused
    check_writable(Protocol(1, 4), table_metadata({"delta.enableChangeDataFeed": "true"}))  # CDF is written
    generated = pa.schema([pa.field("id", pa.int64()),
                           pa.field("part", pa.string(),
                                    metadata={"delta.generationExpression": orjson.dumps("CAST(id AS STRING)")})])
    check_writable(Protocol(1, 3), table_metadata(schema=generated))  # writer 3 has no generated columns
    check_writable(Protocol(1, 4), table_metadata(schema=generated))  # writer 4 has them: enforced
    identity = pa.schema([pa.field("id", pa.int64(), metadata={"delta.identity.start": b"1"})])
    check_writable(Protocol(1, 6), table_metadata(schema=identity))  # writer 6: identity columns


# --------------------------------------------------------------------------------------------
# required_protocol
# --------------------------------------------------------------------------------------------


def test_default_protocol_is_legacy_1_2() -> None:
    assert required_protocol({}, PLAIN) == Protocol(1, 2)
    assert required_protocol({"delta.appendOnly": "true"}, PLAIN) == Protocol(1, 2)
    assert required_protocol({}, PLAIN, Protocol(1, 1)) == Protocol(1, 2)


def test_timestamp_ntz_needs_table_features() -> None:
    protocol = required_protocol({}, WITH_NTZ)
    assert protocol == Protocol(3, 7, ("timestampNtz",), ("appendOnly", "invariants", "timestampNtz"))
    check_writable(protocol, table_metadata(schema=WITH_NTZ, partition_columns=()))
    assert required_protocol({}, WITH_NTZ, protocol) is protocol  # already there: unchanged


def test_never_lowers_the_current_protocol() -> None:
    current = Protocol(3, 7, ("timestampNtz",), ("appendOnly", "invariants", "timestampNtz", "domainMetadata"))
    assert required_protocol({}, PLAIN, current) == current
    assert required_protocol({}, PLAIN, Protocol(1, 4)) == Protocol(1, 4)
    upgraded = required_protocol({}, WITH_NTZ, Protocol(1, 7, None, ("appendOnly", "domainMetadata")))
    assert upgraded == Protocol(3, 7, ("timestampNtz",), ("appendOnly", "domainMetadata", "timestampNtz"))


def test_writer_only_feature_moves_writer_to_7() -> None:
    protocol = required_protocol({"delta.feature.domainMetadata": "supported"}, PLAIN)
    assert protocol == Protocol(1, 7, None, ("appendOnly", "invariants", "domainMetadata"))
    v2 = required_protocol({"delta.checkpointPolicy": "v2"}, PLAIN)
    assert v2 == Protocol(3, 7, ("v2Checkpoint",), ("appendOnly", "invariants", "v2Checkpoint"))


@pytest.mark.parametrize(
    "config, feature",
    [
        ({"delta.feature.collations-preview": "supported"}, "collations-preview"),
    ],
)
def test_features_we_do_not_write_are_refused(config: dict[str, str], feature: str) -> None:
    with pytest.raises(UnsupportedFeatureError) as info:
        required_protocol(config, PLAIN)
    assert info.value.feature == feature and info.value.kind == "writer"


def test_deletion_vectors_and_row_tracking_name_their_features() -> None:
    dv = required_protocol({"delta.enableDeletionVectors": "true"}, PLAIN)
    assert dv == Protocol(3, 7, ("deletionVectors",), ("appendOnly", "invariants", "deletionVectors"))
    rt = required_protocol({"delta.enableRowTracking": "true"}, PLAIN)
    assert rt == Protocol(1, 7, None, ("appendOnly", "invariants", "domainMetadata", "rowTracking"))
    # asking for the feature alone brings the domain it keeps its watermark in
    explicit = required_protocol({"delta.feature.rowTracking": "supported"}, PLAIN)
    assert explicit.writer_features == ("appendOnly", "invariants", "domainMetadata", "rowTracking")


@pytest.mark.parametrize("version", [1, 2])
def test_iceberg_compat_supported_brings_column_mapping(version: int) -> None:
    """PROTOCOL.md and Delta's IcebergCompatV1/V2 features require columnMapping support."""
    protocol = required_protocol({f"delta.feature.icebergCompatV{version}": "supported"}, PLAIN)
    assert protocol == Protocol(3, 7, ("columnMapping",),
                                ("appendOnly", "invariants", "columnMapping", f"icebergCompatV{version}"))


def test_change_data_feed_is_a_writer_feature() -> None:
    protocol = required_protocol({"delta.enableChangeDataFeed": "true"}, PLAIN)
    assert protocol == Protocol(1, 7, None, ("appendOnly", "invariants", "changeDataFeed"))
    assert required_protocol({"delta.enableChangeDataFeed": "true"}, PLAIN, Protocol(1, 4)) == Protocol(1, 4)


def test_column_rules_and_constraints_name_their_features() -> None:
    """CHECK constraints, invariants, generated and identity columns are written now: the
    protocol names their features instead of refusing them."""
    constrained = required_protocol({"delta.constraints.positive": "id > 0"}, PLAIN)
    assert constrained == Protocol(1, 7, None, ("appendOnly", "invariants", "checkConstraints"))
    schema = pa.schema([
        pa.field("id", pa.int64(), metadata={"delta.identity.start": b"1", "delta.identity.step": b"1"}),
        pa.field("twice", pa.int64(), metadata={"delta.generationExpression": orjson.dumps("id * 2")}),
        pa.field("x", pa.int32(), metadata={"delta.invariants": orjson.dumps('{"expression":{"expression":"x > 3"}}')}),
    ])
    protocol = required_protocol({}, schema)
    assert protocol == Protocol(1, 7, None, ("appendOnly", "invariants", "identityColumns", "generatedColumns"))
    # a legacy protocol that implies them already needs no upgrade
    assert required_protocol({"delta.constraints.p": "id > 0"}, schema, Protocol(1, 6)) == Protocol(1, 6)


def test_disabled_flags_need_nothing() -> None:
    config = {"delta.enableChangeDataFeed": "false", "delta.columnMapping.mode": "none",
              "delta.enableDeletionVectors": "false"}
    assert required_protocol(config, PLAIN) == Protocol(1, 2)


def test_column_mapping_needs_the_reader_writer_feature() -> None:
    for mode in ("name", "id"):
        protocol = required_protocol({"delta.columnMapping.mode": mode}, PLAIN)
        assert protocol == Protocol(3, 7, ("columnMapping",), ("appendOnly", "invariants", "columnMapping"))
    # the legacy (2, 5) protocol delta-rs creates implies the feature: nothing to upgrade
    assert required_protocol({"delta.columnMapping.mode": "name"}, PLAIN, Protocol(2, 5)) == Protocol(2, 5)
