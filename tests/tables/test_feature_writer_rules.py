"""Writer rules of PROTOCOL.md that a feature-by-feature audit found unmet, one test each:
appendOnly named on writer 7, no default in the command that adds a column, icebergCompatV1
only on tables whose files hold their partition values, clustering columns by physical name,
system domains untouchable, and a restored file keeping its last row ids."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import AppendOnlyError, InvalidArgumentError, InvalidPropertyError, SchemaMismatchError
from deltatx.txnlog.actions import DomainMetadata

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string())])


def _actions(uri: str, version: int) -> list[dict]:
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        return [orjson.loads(line) for line in fh]


def test_append_only_is_a_named_feature_on_writer_7(tmp_path):
    """PROTOCOL.md, Append-only Tables: on writer version 7 the appendOnly feature must be listed."""
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA, properties={"delta.enableDeletionVectors": "true"})
    t.set_properties({"delta.appendOnly": "true"})
    assert "appendOnly" in t.protocol.writer_features
    assert "appendOnly" not in (t.protocol.reader_features or ())
    t.append(pa.table({"id": [1], "day": ["d"]}, schema=SCHEMA))
    with pytest.raises(AppendOnlyError):
        t.delete(where="id = 1")
    legacy = deltatx.create_table(str(tmp_path / "legacy"), SCHEMA, properties={"delta.appendOnly": "true"})
    assert (legacy.protocol.min_reader_version, legacy.protocol.min_writer_version) == (1, 2)  # implied there


def test_a_column_is_not_added_with_a_default_but_may_get_one_after(tmp_path):
    """PROTOCOL.md, Default Columns: an ADD COLUMN must not specify a default in the same command."""
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA)
    t.append(pa.table({"id": [1], "day": ["d"]}, schema=SCHEMA))
    version = t.version
    with pytest.raises(SchemaMismatchError, match="set_column_default"):
        t.add_columns(pa.field("z", pa.int64(), metadata={"CURRENT_DEFAULT": "42"}))
    assert t.refresh().version == version
    t.add_columns(pa.field("z", pa.int64()))
    t.set_column_default("z", "42")
    assert "allowColumnDefaults" in t.protocol.writer_features
    t.append(pa.table({"id": [2], "day": ["d"]}, schema=SCHEMA))
    t.set_column_default("z", None)
    t.append(pa.table({"id": [3], "day": ["d"]}, schema=SCHEMA))
    rows = {r["id"]: r["z"] for r in t.to_arrow().to_pylist()}
    assert rows == {1: None, 2: 42, 3: None}
    assert t.history(1)[0]["operation"] == "WRITE" and t.history(2)[1]["operation"] == "CHANGE COLUMN"
    with pytest.raises(SchemaMismatchError, match="does not fit"):
        t.set_column_default("z", "'abc'")
    with pytest.raises(SchemaMismatchError, match="no top-level column"):
        t.set_column_default("nope", "1")


def test_iceberg_compat_v1_is_refused_on_a_partitioned_table_with_files(tmp_path):
    """PROTOCOL.md, IcebergCompatV1: partition values materialized in ANY data file of the table."""
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA, partition_by=["day"])
    t.append(pa.table({"id": [1], "day": ["d"]}, schema=SCHEMA))
    version = t.version
    with pytest.raises(InvalidPropertyError, match="icebergCompatV1"):
        t.set_properties({"delta.columnMapping.mode": "name", "delta.enableIcebergCompatV1": "true"})
    assert t.refresh().version == version
    t.set_properties({"delta.columnMapping.mode": "name", "delta.enableIcebergCompatV2": "true"})  # new files only


def test_clustering_columns_of_a_new_column_mapped_table_are_physical(tmp_path):
    """PROTOCOL.md, Clustered Table: with column mapping the domain names physical columns."""
    uri = str(tmp_path / "t")
    schema = pa.schema([("x", pa.int64()), ("y", pa.int64())])
    t = deltatx.create_table(uri, schema, cluster_by=["x"], properties={"delta.columnMapping.mode": "name"})
    [domain] = [a["domainMetadata"] for a in _actions(uri, 0) if "domainMetadata" in a]
    [[physical]] = orjson.loads(domain["configuration"])["clusteringColumns"]
    assert physical.startswith("col-") and physical in t.metadata.schema_string
    assert t.clustering_columns == ["x"]
    for k in range(3):
        t.append(pa.table({"x": [3 - k, k], "y": [k, k]}, schema=schema))
    t.optimize()  # used to fail: "clustering column 'x' is no longer in the schema"
    assert sorted(t.to_arrow()["x"].to_pylist()) == [0, 1, 1, 2, 2, 3]


def test_system_domains_are_not_the_callers_and_a_domain_brings_its_feature(tmp_path):
    """PROTOCOL.md, Domain Metadata: writer 7 with the domainMetadata feature; users must not
    modify system-controlled domains (delta.rowTracking keeps row ids unique)."""
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA, properties={"delta.enableRowTracking": "true"})
    t.append(pa.table({"id": [1, 2], "day": ["d", "d"]}, schema=SCHEMA))
    tx = t.transaction()
    with pytest.raises(InvalidArgumentError, match="system domain"):
        tx.stage_domain(DomainMetadata("delta.rowTracking", '{"rowIdHighWaterMark":0}', False))
    tx.abort()
    plain = deltatx.create_table(str(tmp_path / "plain"), SCHEMA)
    tx = plain.transaction()
    tx.stage_domain(DomainMetadata("myapp.state", '{"k":1}', False))
    tx.commit()
    assert "domainMetadata" in plain.protocol.writer_features
    assert plain.snapshot.domains["myapp.state"].configuration == '{"k":1}'


def test_a_restored_file_keeps_the_row_ids_of_its_last_add(tmp_path):
    """PROTOCOL.md, Row Tracking: recommitted adds carry the baseRowId and defaultRowCommitVersion
    of the last committed add with the same path (here: the backfill's, not the old version's none)."""
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": [1, 2, 3]}))  # v1, before row tracking
    t.set_properties({"delta.enableRowTracking": "true"})  # v2-v4: upgrade, backfill, properties
    t.delete(where="id = 1")  # v5: the file is rewritten
    t.restore(version=1)  # v6: the v1 file comes back
    [add] = [a["add"] for a in _actions(uri, 6) if "add" in a]
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (0, 3)
