"""Property values Delta refuses are refused by set_properties (nothing committed), integer
properties another engine left bad in the log are InvalidPropertyError (nothing written), known
``delta.*`` keys are matched case-insensitively, and delta.minReaderVersion / minWriterVersion
upgrade the protocol instead of being stored."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import InvalidPropertyError
from deltatx.txnlog.snapshot_cache import SNAPSHOTS

SCHEMA = pa.schema([("id", pa.int64())])


def _table(uri: str, **kwargs) -> deltatx.Table:
    t = deltatx.create_table(uri, SCHEMA, **kwargs)
    t.append(pa.table({"id": [1, 2]}, schema=SCHEMA))
    return t


def _listing(uri: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), uri) for d, _, fs in os.walk(uri) for f in fs)


@pytest.mark.parametrize("key,value", [
    ("delta.minReaderVersion", "x"),
    ("delta.minWriterVersion", "abc"),
    ("delta.minWriterVersion", "8"),
    ("delta.checkpointInterval", "99999999999999999999999"),
    ("delta.checkpointInterval", " 5"),
    ("delta.checkpointInterval", "1_000"),
    ("delta.dataSkippingNumIndexedCols", "x"),
    ("delta.targetFileSize", "big"),
    ("delta.checkpointPolicy", "bogus"),
    ("delta.enableIcebergCompatV2", "x"),
    ("delta.feature.deletionVectors", "disabled"),
    ("delta.APPENDONLY", "maybe"),  # a known key in another case is validated as that key
    # Delta's own settings deltatx does not act on: Spark would fail on these values later
    ("delta.tuneFileSizesForRewrites", "maybe"),
    ("delta.randomizeFilePrefixes", "maybe"),
    ("delta.randomPrefixLength", "0"),
    ("delta.compatibility.symlinkFormatManifest.enabled", "yes"),
    ("delta.autoOptimize.optimizeWrite", "1"),
    ("delta.checkpoint.writeStatsAsJson", "x"),
    ("delta.checkpoint.writeStatsAsStruct", "x"),
    ("delta.checkpoint.partSize", "-1"),
    ("delta.inCommitTimestampEnablementVersion", "x"),  # every later open would fail on it
    ("delta.inCommitTimestampEnablementVersion", "-7"),
    ("delta.inCommitTimestampEnablementTimestamp", "abc"),
])
def test_set_properties_refuses_a_value_delta_refuses_and_commits_nothing(tmp_path, key, value):
    uri = str(tmp_path / "t")
    t = _table(uri)
    before = _listing(uri)
    named = "delta.appendOnly" if key == "delta.APPENDONLY" else key
    with pytest.raises(InvalidPropertyError, match=named.replace(".", r"\.")) as info:
        t.set_properties({key: value})
    assert repr(value) in str(info.value)
    with pytest.raises(InvalidPropertyError):
        deltatx.create_table(str(tmp_path / "new"), SCHEMA, properties={key: value})
    assert not os.path.exists(tmp_path / "new" / "_delta_log")
    SNAPSHOTS.clear()
    assert deltatx.Table(uri).version == 1 and _listing(uri) == before


@pytest.mark.parametrize("ict", [True, False])
def test_in_commit_timestamp_enablement_keys_are_kept_by_the_writer(tmp_path, ict):
    """The writer that turns in-commit timestamps on records where they start; a user value,
    even a well-formed one, would move that point (or the history's timestamps with it)."""
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA)
    t.append(pa.table({"id": [1]}, schema=SCHEMA))
    if ict:
        t.set_properties({"delta.enableInCommitTimestamps": "true"})
    version, stored = t.version, dict(t.properties)
    for key, value in [("delta.inCommitTimestampEnablementVersion", "1"),
                       ("delta.inCommitTimestampEnablementTimestamp", "1700000000000")]:
        if stored.get(key) == value:
            continue
        with pytest.raises(InvalidPropertyError, match="enableInCommitTimestamps"):
            t.set_properties({key: value})
    SNAPSHOTS.clear()
    reopened = deltatx.Table(uri)
    assert reopened.version == version and dict(reopened.properties) == stored
    if ict:  # the same values set again change nothing
        t.set_properties({k: v for k, v in stored.items() if "EnablementV" in k})
        assert deltatx.Table(uri).version == version


def test_known_keys_are_matched_case_insensitively_and_stored_canonically(tmp_path):
    uri = str(tmp_path / "t")
    t = _table(uri)
    t.set_properties({"delta.appendonly": "TRUE", "Delta.CheckpointInterval": "5"})
    assert t.properties == {"delta.appendOnly": "true", "delta.checkpointInterval": "5"}
    from deltatx.errors import AppendOnlyError

    with pytest.raises(AppendOnlyError):
        t.delete(where="id = 1")
    with pytest.raises(InvalidPropertyError, match="given twice"):
        t.set_properties({"delta.appendOnly": "true", "delta.APPENDONLY": "false"})
    t.set_properties({"team.owner": "x"})  # a key outside delta.* is the user's own, kept as given
    assert t.properties["team.owner"] == "x"


@pytest.mark.parametrize("key, hint", [("delta.enableDeletionVector", "delta.enableDeletionVectors"),
                                       ("delta.appendOnlyy", "delta.appendOnly"),
                                       ("DELTA.someOtherEngineKey", None)])
def test_an_unknown_delta_key_is_refused_naming_the_closest_known_one(tmp_path, key, hint):
    """Delta (DELTA_UNKNOWN_CONFIGURATION), deltalake and Kernel refuse a delta.* key they do not
    know: stored, a misspelt feature switch would leave the user believing the feature is on."""
    uri = str(tmp_path / "t")
    t = _table(uri)
    version = t.version
    with pytest.raises(InvalidPropertyError, match="unknown table property") as refused:
        t.set_properties({key: "true"})
    assert (f"did you mean {hint!r}" in str(refused.value)) == (hint is not None)
    with pytest.raises(InvalidPropertyError, match="unknown table property"):
        deltatx.create_table(str(tmp_path / "new"), SCHEMA, properties={key: "true"})
    assert not os.path.exists(tmp_path / "new" / "_delta_log")
    SNAPSHOTS.clear()
    assert deltatx.Table(uri).version == version
    # the keys Delta keeps under a free prefix, and Delta's own keys deltatx does not act on, are accepted
    t.set_properties({"delta.feature.appendOnly": "supported", "delta.universalFormat.enabledFormats": "iceberg",
                      "delta.dropFeatureTruncateHistory.retentionDuration": "interval 2 days"})
    assert deltatx.Table(uri).properties["delta.universalFormat.enabledFormats"] == "iceberg"


def test_a_configuration_delta_3_2_wrote_can_be_copied_into_a_new_table(tmp_path):
    """Delta 3.2 names in-commit timestamps' keys with a -preview suffix: a table made like one of
    its tables (create_table(properties=other.properties), the harness's fresh copies) is accepted."""
    preview = {"delta.enableInCommitTimestamps-preview": "true",
               "delta.inCommitTimestampEnablementVersion-preview": "0",
               "delta.inCommitTimestampEnablementTimestamp-preview": "1700000000000"}
    t = deltatx.create_table(str(tmp_path / "t"), SCHEMA, properties=preview)
    assert {k: t.properties[k] for k in preview} == preview


def test_checkpoint_policy_is_stored_in_the_lower_case_spark_compares_it_in(tmp_path):
    t = _table(str(tmp_path / "t"))
    t.set_properties({"delta.checkpointPolicy": "V2"})
    assert t.properties["delta.checkpointPolicy"] == "v2"
    assert "v2Checkpoint" in (t.protocol.writer_features or ())


@pytest.mark.parametrize("key", ["delta.rowTracking.materializedRowIdColumnName",
                                 "delta.rowTracking.materializedRowCommitVersionColumnName",
                                 "delta.requireCheckpointProtectionBeforeVersion"])
def test_keys_a_feature_writer_keeps_cannot_be_changed(tmp_path, key):
    """Another materialized column name would change the id of every row that has one stored."""
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA, properties={"delta.enableRowTracking": "true"})
    t.append(pa.table({"id": [1, 2]}, schema=SCHEMA))
    version, stored = t.version, dict(t.properties)
    with pytest.raises(InvalidPropertyError, match="kept by the writer"):
        t.set_properties({key: "5"})
    if key in stored:  # the value it already has: a no-op, so a copied configuration still applies
        t.set_properties({key: stored[key]})
    SNAPSHOTS.clear()
    reopened = deltatx.Table(uri)
    assert dict(reopened.properties) == stored and reopened.version in (version, version + 1)


def test_protocol_version_properties_upgrade_the_protocol_and_are_not_stored(tmp_path):
    uri = str(tmp_path / "t")
    t = _table(uri)
    t.set_properties({"delta.minReaderVersion": "3", "delta.minWriterVersion": "7"})
    SNAPSHOTS.clear()
    t = deltatx.Table(uri)
    assert (t.protocol.min_reader_version, t.protocol.min_writer_version) == (3, 7)
    assert "appendOnly" in t.protocol.writer_features  # what legacy (1, 2) implied is kept
    assert "delta.minReaderVersion" not in t.properties and "delta.minWriterVersion" not in t.properties
    version = t.version
    t.set_properties({"delta.minWriterVersion": "2"})  # lower than the table's: nothing to do
    assert deltatx.Table(uri).version == version
    created = deltatx.create_table(str(tmp_path / "c"), SCHEMA, properties={"delta.minWriterVersion": "4"})
    assert created.protocol.min_writer_version == 4 and created.properties == {}
    # REPLACE TABLE asks the same way (delta-spark's builder replace, CREATE OR REPLACE)
    from deltatx.tables.ops.replace_table import stage_replace_table

    with created.transaction() as tx:
        stage_replace_table(tx, SCHEMA, properties={"delta.minReaderVersion": "3", "delta.minWriterVersion": "7"})
    SNAPSHOTS.clear()
    replaced = deltatx.Table(str(tmp_path / "c"))
    assert (replaced.protocol.min_reader_version, replaced.protocol.min_writer_version) == (3, 7)
    assert replaced.properties == {}


def test_an_integer_property_left_bad_in_the_log_is_refused_before_a_write(tmp_path):
    uri = str(tmp_path / "t")
    _table(uri).append(pa.table({"id": [3]}, schema=SCHEMA))  # two files: OPTIMIZE has work to do
    for key, value in (("delta.dataSkippingNumIndexedCols", "x"), ("delta.targetFileSize", "big")):
        path = os.path.join(uri, "_delta_log", f"{0:020d}.json")
        with open(path, "rb") as fh:
            actions = [orjson.loads(line) for line in fh.read().splitlines()]
        for action in actions:
            if "metaData" in action:
                action["metaData"]["configuration"] = {key: value}
        with open(path, "wb") as fh:
            fh.write(b"\n".join(orjson.dumps(a) for a in actions) + b"\n")
        SNAPSHOTS.clear()
        t = deltatx.Table(uri)
        before = _listing(uri)
        operations = [lambda: t.optimize()]
        if key == "delta.dataSkippingNumIndexedCols":  # statistics are written by every write
            operations += [lambda: t.append(pa.table({"id": [9]}, schema=SCHEMA)), lambda: t.delete(where="id = 1")]
        for operation in operations:
            with pytest.raises(InvalidPropertyError, match=f"the table's {key}='{value}'"):
                operation()
            assert _listing(uri) == before


@pytest.mark.parametrize("key", ["delta.columnMapping.mode", "delta.appendOnly", "my.own.key"])
def test_a_property_without_a_value_is_refused(tmp_path, key):
    """None is no property value: ``str(None)`` stored the text 'None', which every reader then
    took as the setting (or refused as a bad one)."""
    uri = str(tmp_path / "t")
    with pytest.raises(InvalidPropertyError, match="no value"):
        deltatx.create_table(uri, SCHEMA, properties={key: None})
    assert not os.path.exists(os.path.join(uri, "_delta_log"))
    t = _table(str(tmp_path / "u"))
    with pytest.raises(InvalidPropertyError, match="no value"):
        t.set_properties({key: None})
    SNAPSHOTS.clear()
    assert key not in deltatx.Table(t.uri).properties


def test_a_refused_setting_beside_row_tracking_commits_no_backfill(tmp_path):
    """Turning row tracking on over existing files commits a protocol upgrade and a backfill
    before the settings; a bad value among them was found only after those two commits."""
    uri = str(tmp_path / "t")
    t = _table(uri)
    before = _listing(uri)
    protocol = t.protocol
    with pytest.raises(InvalidPropertyError, match="nosuch"):
        t.set_properties({"delta.enableRowTracking": "true", "delta.dataSkippingStatsColumns": "nosuch"})
    SNAPSHOTS.clear()
    assert _listing(uri) == before and deltatx.Table(uri).protocol == protocol
