"""upgradeTableProtocol (tables/ops/upgrade_protocol.py): versions only grow, legacy features are
listed when moving to named features, and refused upgrades commit nothing."""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import InvalidArgumentError, ProtocolDowngradeError
from deltatx.tables.ops.upgrade_protocol import stage_upgrade_protocol, upgraded_protocol
from deltatx.txnlog.actions import Protocol

SCHEMA = pa.schema([("id", pa.int64())])


def _upgrade(uri: str, reader, writer) -> deltatx.CommitResult:
    tx = deltatx.Table(uri).transaction()
    try:
        stage_upgrade_protocol(tx, reader, writer)
        return tx.commit()
    except BaseException:
        tx.abort()
        raise


@pytest.mark.parametrize("current, target, expected", [
    (Protocol(1, 2), (1, 3), Protocol(1, 3)),
    (Protocol(1, 2), (2, 5), Protocol(2, 5)),
    (Protocol(1, 2), (1, 7), Protocol(1, 7, None, ("appendOnly", "invariants"))),
    (Protocol(1, 4), (3, 7), Protocol(3, 7, (), ("appendOnly", "invariants", "checkConstraints", "changeDataFeed",
                                                 "generatedColumns"))),
    (Protocol(2, 5), (3, 7), Protocol(3, 7, ("columnMapping",),
                                      ("appendOnly", "invariants", "checkConstraints", "changeDataFeed",
                                       "generatedColumns", "columnMapping"))),
    (Protocol(3, 7, ("deletionVectors",), ("deletionVectors",)), (3, 7),
     Protocol(3, 7, ("deletionVectors",), ("deletionVectors",))),
])
def test_upgraded_protocol(current, target, expected):
    assert upgraded_protocol(current, *target) == expected


@pytest.mark.parametrize("target, exc, match", [
    ((1, 1), ProtocolDowngradeError, "cannot be downgraded"),
    ((0, 3), InvalidArgumentError, "readerVersion"),
    ((1, 8), InvalidArgumentError, "writerVersion"),
    ((3, 5), InvalidArgumentError, "needs writer version 7"),
    (("1", 3), InvalidArgumentError, "readerVersion"),
    ((1, True), InvalidArgumentError, "writerVersion"),
])
def test_refused_upgrades(target, exc, match):
    with pytest.raises(exc, match=match):
        upgraded_protocol(Protocol(1, 2), *target)


def test_upgrade_commits_once_and_refusals_commit_nothing(table_uri):
    deltatx.create_table(table_uri, SCHEMA)
    result = _upgrade(table_uri, 1, 4)
    t = deltatx.Table(table_uri)
    assert result.version == 1 and t.protocol == Protocol(1, 4)
    info = t.history(1)[0]
    assert info["operation"] == "UPGRADE PROTOCOL"
    assert info["operationParameters"]["newProtocol"] == '{"minReaderVersion":1,"minWriterVersion":4}'

    assert _upgrade(table_uri, 1, 4).attempts == 0  # already there: no commit
    with pytest.raises(ProtocolDowngradeError):
        _upgrade(table_uri, 1, 3)
    assert deltatx.Table(table_uri).version == 1
    t.append(pa.table({"id": [1]}))  # still writable: the implied features are dormant
    assert deltatx.Table(table_uri).to_arrow().column("id").to_pylist() == [1]
