"""checkpointProtection: the table stays writable, no checkpoint of a protected version is written,
and metadata cleanup keeps every checkpoint from the version it truncates to on (the RFC's
exception (a)): the protected ones stay until a cleanup truncates past them."""

from __future__ import annotations

import os
import time

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


def test_history_within_the_retention_is_never_removed(table_uri):
    table = _protected_table(table_uri, boundary=3)
    table.set_properties({"delta.checkpointInterval": "2", "delta.logRetentionDuration": "interval 0 hours"})
    for i in range(6):
        table.append(pa.table({"id": [100 + i]}))
    files = _log_files(table_uri)  # the cutoff is today's midnight (UTC): nothing written today goes
    assert all(commit_name(v) in files for v in range(deltatx.Table(table_uri).version + 1))
    assert deltatx.Table(table_uri, version=1).to_arrow().column("id").to_pylist() == [0]


def _age_through(uri: str, through: int, days: float = 40) -> None:
    base = time.time() - days * 86400
    folder = os.path.join(uri, "_delta_log")
    for name in os.listdir(folder):
        if name[:20].isdigit() and int(name[:20]) <= through:
            os.utime(os.path.join(folder, name), (base + int(name[:20]),) * 2)


def test_a_cleanup_short_of_the_protected_version_keeps_the_protected_checkpoints(table_uri):
    table = deltatx.create_table(table_uri, SCHEMA, properties={"delta.feature.checkpointProtection": "supported",
                                                                "delta.checkpointInterval": "1000"})
    for i in range(1, 4):
        table.append(pa.table({"id": [i]}))
        if i == 2:
            table.checkpoint()  # 2, before any boundary
    with table.transaction() as tx:  # 4: Delta's DROP FEATURE protects the history before 6
        config = {**tx.metadata.configuration, "delta.requireCheckpointProtectionBeforeVersion": "6"}
        tx.stage_metadata(tx.metadata.replace(configuration=config))
    for i in range(5, 8):
        table.append(pa.table({"id": [i]}))
    deltatx.Table(table_uri, version=6).checkpoint()  # the protected checkpoint at the boundary
    table.checkpoint()  # 7
    _age_through(table_uri, 5)  # expired up to 5: the cleanup truncates to 2, short of 6
    assert table.cleanup_metadata() == [commit_name(0), commit_name(1)]
    files = _log_files(table_uri)
    assert {f"{v:020d}.checkpoint.parquet" for v in (2, 6, 7)} <= set(files)
    assert sorted(deltatx.Table(table_uri).to_arrow().column("id").to_pylist()) == [1, 2, 3, 5, 6, 7]
    _age_through(table_uri, 7)  # then past it: everything before the checkpoint at 7 goes in one go
    deleted = table.cleanup_metadata()
    assert deleted == sorted([commit_name(v) for v in range(2, 7)]
                             + [f"{v:020d}.checkpoint.parquet" for v in (2, 6)])
    assert deltatx.Table(table_uri, version=7).to_arrow().num_rows == 6
