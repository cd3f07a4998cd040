"""UNSET TBLPROPERTIES (``Table.unset_properties`` / ``Transaction.unset_properties``): keys are
removed as Delta removes them, including an unknown ``delta.*`` key an older writer left (the one
way to shed it, now that setting one is refused); the writer's own keys, the protocol versions,
constraints and features are refused, and a removal passes the checks setting the property to
its default would (column mapping, clustering statistics). Nothing is committed on a refusal."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pytest

import deltatx
from deltatx import errors
from deltatx.errors import ArgumentTypeError, InvalidPropertyError
from deltatx.tables import properties as props
from deltatx.txnlog.snapshot_cache import SNAPSHOTS

SCHEMA = pa.schema([("id", pa.int64())])
OLD_KEY = "delta.someOldKey"


def _table(uri: str, **properties: str) -> deltatx.Table:
    t = deltatx.create_table(uri, SCHEMA, properties=properties or None)
    t.append(pa.table({"id": [1, 2]}, schema=SCHEMA))
    return t


def _log(uri: str) -> list[str]:
    return sorted(os.listdir(os.path.join(uri, "_delta_log")))


def _actions(uri: str, version: int) -> list[dict]:
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        return [orjson.loads(line) for line in fh.read().splitlines()]


def _written_by_an_older_writer(uri: str, extra: dict[str, str]) -> deltatx.Table:
    """A table whose latest commit is a metaData action another (older) writer made, with keys
    the current deltatx refuses to set."""
    t = _table(uri)
    metadata = next(a["metaData"] for a in _actions(uri, 0) if "metaData" in a)
    metadata["configuration"] = {**metadata["configuration"], **extra}
    commit = [{"commitInfo": {"timestamp": 1_700_000_000_000, "operation": "SET TBLPROPERTIES"}},
              {"metaData": metadata}]
    with open(os.path.join(uri, "_delta_log", f"{t.version + 1:020d}.json"), "wb") as fh:
        fh.write(b"\n".join(orjson.dumps(a) for a in commit) + b"\n")
    SNAPSHOTS.clear()  # as another process would open it
    return deltatx.Table(uri)


def _committed_configuration(uri: str, version: int) -> dict[str, str]:
    return next(a["metaData"] for a in _actions(uri, version) if "metaData" in a)["configuration"]


# ----------------------------------------------------------------------------------- removing keys
def test_a_user_key_is_removed_by_a_metadata_commit(tmp_path):
    uri = str(tmp_path / "t")
    t = _table(uri, **{"user.owner": "me", "user.keep": "yes"})
    result = t.unset_properties("user.owner")
    assert (result.version, result.attempts, result.operation) == (2, 1, "UNSET TBLPROPERTIES")
    assert _committed_configuration(uri, 2) == {"user.keep": "yes"}
    SNAPSHOTS.clear()
    assert deltatx.Table(uri).properties == {"user.keep": "yes"}
    assert deltatx.Table(uri).to_arrow()["id"].to_pylist() == [1, 2]


def test_an_unknown_delta_key_an_older_writer_left_can_be_unset(tmp_path):
    uri = str(tmp_path / "t")
    t = _written_by_an_older_writer(uri, {OLD_KEY: "x", "user.keep": "yes"})
    assert t.properties[OLD_KEY] == "x"
    with pytest.raises(InvalidPropertyError, match="unknown table property"):
        t.set_properties({OLD_KEY: "y"})  # setting it stays refused ...
    result = t.unset_properties([OLD_KEY])  # ... removing it is the way out
    assert result.version == 3 and result.attempts == 1
    assert OLD_KEY not in _committed_configuration(uri, 3)
    SNAPSHOTS.clear()
    assert deltatx.Table(uri).properties == {"user.keep": "yes"}


def test_several_keys_are_removed_in_one_commit(tmp_path):
    uri = str(tmp_path / "t")
    t = _table(uri, **{"a.one": "1", "a.two": "2", "a.three": "3"})
    assert t.unset_properties(["a.one", "a.three"]).version == 2
    assert t.properties == {"a.two": "2"}
    assert len(_log(uri)) == 3


def test_delta_keys_are_matched_case_insensitively_other_keys_exactly(tmp_path):
    uri = str(tmp_path / "t")
    t = _written_by_an_older_writer(uri, {"delta.appendOnly": "true", OLD_KEY: "x", "user.Key": "v"})
    t.unset_properties(["DELTA.APPENDONLY", "delta.SOMEOLDKEY"])
    assert t.properties == {"user.Key": "v"}
    assert t.history(1)[0]["operationParameters"]["properties"] == '["delta.appendOnly","delta.SOMEOLDKEY"]'
    before = _log(uri)
    with pytest.raises(InvalidPropertyError, match=r"'user\.key'.*the table has 'user\.Key'"):
        t.unset_properties("user.key")
    assert _log(uri) == before


def test_a_delta_key_another_engine_stored_in_its_own_case_is_removed(tmp_path):
    uri = str(tmp_path / "t")
    t = _written_by_an_older_writer(uri, {"delta.checkpointinterval": "5"})
    t.unset_properties("delta.checkpointInterval")
    assert "delta.checkpointinterval" not in t.properties and t.properties == {}


def test_unsetting_append_only_and_the_change_data_feed_is_allowed(tmp_path):
    uri = str(tmp_path / "t")
    t = _table(uri, **{"delta.appendOnly": "true", "delta.enableChangeDataFeed": "true"})
    with pytest.raises(errors.AppendOnlyError):
        t.delete("id = 1")
    t.unset_properties(["delta.appendOnly", "delta.enableChangeDataFeed"])
    assert t.properties == {}
    t.delete("id = 1")  # no longer append-only
    assert deltatx.Table(uri).to_arrow()["id"].to_pylist() == [2]


# ----------------------------------------------------------------------------------- missing keys
def test_a_missing_key_is_refused_naming_it_and_nothing_is_committed(tmp_path):
    uri = str(tmp_path / "t")
    t = _table(uri, **{"user.a": "1"})
    before = _log(uri)
    with pytest.raises(InvalidPropertyError, match=r"no property 'user\.b'.*if_exists=True"):
        t.unset_properties(["user.a", "user.b"])
    assert _log(uri) == before and t.properties == {"user.a": "1"}


def test_if_exists_skips_missing_keys(tmp_path):
    uri = str(tmp_path / "t")
    t = _table(uri, **{"user.a": "1", "user.c": "3"})
    result = t.unset_properties(["user.a", "user.b"], if_exists=True)
    assert result.version == 2 and t.properties == {"user.c": "3"}
    assert t.history(1)[0]["operationParameters"] == {"properties": '["user.a","user.b"]', "ifExists": "true"}


def test_if_exists_with_nothing_to_remove_commits_nothing(tmp_path):
    """As a SET of values the table has: no version, ``attempts == 0``."""
    uri = str(tmp_path / "t")
    t = _table(uri, **{"user.a": "1"})
    before = _log(uri)
    result = t.unset_properties(["user.b", OLD_KEY], if_exists=True)
    assert (result.version, result.attempts) == (1, 0)
    assert result.attempts == t.set_properties({"user.a": "1"}).attempts
    assert _log(uri) == before


# ----------------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("key", [*props.WRITER_KEPT, "delta.columnMapping.maxColumnId",
                                 "DELTA.ROWTRACKING.MATERIALIZEDROWIDCOLUMNNAME"])
def test_keys_the_writer_keeps_cannot_be_unset(tmp_path, key):
    uri = str(tmp_path / "t")
    t = _table(uri, **{"delta.enableRowTracking": "true", "delta.enableInCommitTimestamps": "true",
                       "delta.columnMapping.mode": "name"})
    t.append(pa.table({"id": [3]}, schema=SCHEMA))
    config, before = dict(t.properties), _log(uri)
    with pytest.raises(InvalidPropertyError, match="cannot be unset"):
        t.unset_properties(key, if_exists=True)
    assert _log(uri) == before and t.properties == config


@pytest.mark.parametrize("key, props, refusal", [
    ("delta.minReaderVersion", {"delta.minWriterVersion": "4"}, "never downgrades the protocol"),
    ("delta.minWriterVersion", {"delta.minWriterVersion": "4"}, "never downgrades the protocol"),
    ("delta.MINWRITERVERSION", {"delta.minWriterVersion": "4"}, "never downgrades the protocol"),
    ("delta.feature.deletionVectors", {"delta.feature.deletionVectors": "supported"},
     "table feature cannot be removed by unsetting"),
    ("delta.Feature.appendOnly", {"delta.feature.deletionVectors": "supported"},
     "table feature cannot be removed by unsetting"),
])
def test_the_protocol_cannot_be_changed_by_unsetting(tmp_path, key, props, refusal):
    """Protocol versions and features are the protocol, not stored properties: unset refuses them."""
    uri = str(tmp_path / "t")
    t = _table(uri, **props)
    protocol, before = t.protocol, _log(uri)
    with pytest.raises(InvalidPropertyError, match=refusal):
        t.unset_properties(key, if_exists=True)
    assert _log(uri) == before and t.protocol == protocol


def test_a_constraint_is_dropped_with_drop_constraint_not_unset(tmp_path):
    uri = str(tmp_path / "t")
    t = _table(uri)
    t.add_constraint("positive", "id > 0")
    before = _log(uri)
    with pytest.raises(InvalidPropertyError, match=r"drop_constraint\(name\)"):
        t.unset_properties("delta.constraints.positive")
    assert _log(uri) == before
    with pytest.raises(errors.ConstraintViolationError):  # still enforced
        t.append(pa.table({"id": [-1]}, schema=SCHEMA))


def test_column_mapping_mode_is_refused_as_setting_it_to_none_is(tmp_path):
    uri = str(tmp_path / "t")
    t = _table(uri, **{"delta.columnMapping.mode": "name"})
    before = _log(uri)
    with pytest.raises(errors.ColumnMappingError, match="from 'name' to 'none'") as unset:
        t.unset_properties("delta.columnMapping.mode")
    with pytest.raises(errors.ColumnMappingError) as set_none:
        t.set_properties({"delta.columnMapping.mode": "none"})
    assert str(unset.value) == str(set_none.value)
    assert _log(uri) == before and t.properties["delta.columnMapping.mode"] == "name"


def test_a_removal_that_drops_a_clustering_columns_statistics_is_refused(tmp_path):
    """Without delta.dataSkippingStatsColumns, delta.dataSkippingNumIndexedCols=1 applies and the
    clustering column (the 2nd) would get no statistics: the check a SET passes runs here too."""
    uri = str(tmp_path / "t")
    schema = pa.schema([("x", pa.int64()), ("y", pa.int64())])
    t = deltatx.create_table(uri, schema, cluster_by=["y"], properties={
        "delta.dataSkippingNumIndexedCols": "1", "delta.dataSkippingStatsColumns": "y"})
    before = _log(uri)
    with pytest.raises(errors.ClusteringError, match="gets no statistics"):
        t.unset_properties("delta.dataSkippingStatsColumns")
    assert _log(uri) == before
    t.unset_properties("delta.dataSkippingNumIndexedCols")  # back to 32 columns: fine
    assert t.properties == {"delta.dataSkippingStatsColumns": "y"}


@pytest.mark.parametrize("keys, if_exists, error", [
    (5, False, ArgumentTypeError),
    ({"user.a": "1"}, False, ArgumentTypeError),
    ([b"user.a"], False, ArgumentTypeError),
    ([], False, InvalidPropertyError),
    ([""], False, InvalidPropertyError),
    ("user.a", "yes", ArgumentTypeError),
])
def test_bad_arguments_are_typed_errors(tmp_path, keys, if_exists, error):
    uri = str(tmp_path / "t")
    t = _table(uri, **{"user.a": "1"})
    with pytest.raises(error):
        t.unset_properties(keys, if_exists=if_exists)
    assert t.properties == {"user.a": "1"}


# ----------------------------------------------------------------------------------- history, interop
def test_history_records_unset_tblproperties_as_delta_does(tmp_path):
    uri = str(tmp_path / "t")
    t = _table(uri, **{"user.a": "1", "delta.appendOnly": "false"})
    t.unset_properties(["user.a", "delta.appendonly"])
    entry = t.history(1)[0]
    assert entry["operation"] == "UNSET TBLPROPERTIES"
    assert entry["operationParameters"] == {"properties": '["user.a","delta.appendOnly"]', "ifExists": "false"}
    assert orjson.loads(entry["operationParameters"]["properties"]) == ["user.a", "delta.appendOnly"]


def test_deltalake_reads_the_table_without_the_removed_keys(tmp_path):
    deltalake = pytest.importorskip("deltalake")
    uri = str(tmp_path / "t")
    t = _written_by_an_older_writer(uri, {OLD_KEY: "x", "user.keep": "yes"})
    t.unset_properties([OLD_KEY])
    other = deltalake.DeltaTable(uri)
    assert other.version() == 3
    configuration = other.metadata().configuration
    assert OLD_KEY not in configuration and configuration.get("user.keep") == "yes"
    assert sorted(other.to_pyarrow_table()["id"].to_pylist()) == [1, 2]
    assert other.history(1)[0]["operation"] == "UNSET TBLPROPERTIES"


# ----------------------------------------------------------------------------------- transactions
def test_unset_in_a_transaction_commits_with_the_rest(tmp_path):
    uri = str(tmp_path / "t")
    t = _table(uri, **{"user.a": "1"})
    with t.transaction() as tx:
        tx.unset_properties("user.a")
        tx.set_properties({"user.b": "2"})
        tx.append(pa.table({"id": [3]}, schema=SCHEMA))
    reopened = deltatx.Table(uri)
    assert reopened.version == 2 and reopened.properties == {"user.b": "2"}
    assert reopened.history(1)[0]["operationParameters"]["operations"] == \
        '["UNSET TBLPROPERTIES","SET TBLPROPERTIES","WRITE"]'


def _set(t: deltatx.Table) -> None:
    t.set_properties({"user.a": "2"})


def _unset(t: deltatx.Table) -> None:
    t.unset_properties("user.a")


@pytest.mark.parametrize("change", [_set, _unset], ids=["set", "unset"])
def test_a_concurrent_append_fails_on_unset_as_on_set(memory_uri, change):
    """A property change is a metadata change: every writer that started before it fails."""
    t = _table(memory_uri, **{"user.a": "1"})
    tx = deltatx.Table(memory_uri).transaction()
    tx.append(pa.table({"id": [3]}, schema=SCHEMA))
    change(deltatx.Table(memory_uri))
    with pytest.raises(errors.MetadataChangedException):
        tx.commit()
    assert sorted(t.refresh().to_arrow()["id"].to_pylist()) == [1, 2]


@pytest.mark.parametrize("stage, expected", [(lambda tx: tx.set_properties({"user.a": "2"}), {"user.a": "2"}),
                                             (lambda tx: tx.unset_properties("user.a"), {})], ids=["set", "unset"])
def test_unset_after_a_concurrent_append_commits_as_set_does(memory_uri, stage, expected):
    """The other order: the append wins, the property change (which read no data) commits on
    top of it."""
    t = _table(memory_uri, **{"user.a": "1"})
    tx = deltatx.Table(memory_uri).transaction()
    stage(tx)
    deltatx.Table(memory_uri).append(pa.table({"id": [3]}, schema=SCHEMA))
    assert tx.commit().version == 3
    reopened = t.refresh()
    assert sorted(reopened.to_arrow()["id"].to_pylist()) == [1, 2, 3]
    assert reopened.properties == expected
