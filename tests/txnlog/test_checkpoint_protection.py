"""checkpointProtection: the table stays writable, no checkpoint of a protected version is written,
and deltatx never removes log files (it does no metadata cleanup)."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import ProtectedHistoryError
from deltatx.txnlog.store import commit_name

SCHEMA = pa.schema([("id", pa.int64())])


def _log_files(uri: str) -> list[str]:
    return sorted(f for f in os.listdir(os.path.join(uri, "_delta_log")) if not f.startswith("."))


def _protected_table(uri: str, boundary: int) -> deltatx.Table:
    """A table whose features were dropped at ``boundary`` (as Delta leaves it), 5 versions long."""
    table = deltatx.create_table(uri, SCHEMA, properties={"delta.feature.checkpointProtection": "supported"})
    for i in range(3):
        table.append(pa.table({"id": [i]}))
    # Delta's DROP FEATURE sets the boundary; a user cannot (set_properties refuses the key), so
    # the commit Delta would make is staged directly
    with table.transaction() as tx:
        config = {**tx.metadata.configuration, "delta.requireCheckpointProtectionBeforeVersion": str(boundary)}
        tx.stage_metadata(tx.metadata.replace(configuration=config))
    return deltatx.Table(uri)


def test_the_feature_is_writable_and_listed(table_uri):
    table = _protected_table(table_uri, boundary=3)
    assert table.protocol.min_writer_version == 7 and "checkpointProtection" in table.protocol.writer_features
    table.append(pa.table({"id": [9]}))
    table.delete("id = 0")
    assert sorted(deltatx.Table(table_uri).to_arrow().column("id").to_pylist()) == [1, 2, 9]


def test_no_checkpoint_before_the_protected_version(table_uri):
    _protected_table(table_uri, boundary=3)
    before = _log_files(table_uri)
    for version in (0, 2):
        with pytest.raises(ProtectedHistoryError, match="before version 3"):
            deltatx.Table(table_uri, version=version).checkpoint()
    assert _log_files(table_uri) == before  # nothing written
    deltatx.Table(table_uri, version=3).checkpoint()  # the boundary itself may be checkpointed
    deltatx.Table(table_uri).checkpoint()
    assert any(".checkpoint." in f for f in _log_files(table_uri))


def test_history_before_the_boundary_is_never_removed(table_uri):
    table = _protected_table(table_uri, boundary=3)
    table.set_properties({"delta.checkpointInterval": "2", "delta.logRetentionDuration": "interval 0 hours"})
    for i in range(6):
        table.append(pa.table({"id": [100 + i]}))
    files = _log_files(table_uri)
    assert all(commit_name(v) in files for v in range(deltatx.Table(table_uri).version + 1))
    assert deltatx.Table(table_uri, version=1).to_arrow().column("id").to_pylist() == [0]
