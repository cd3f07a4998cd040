"""delta.setTransactionRetentionDuration: expired txn identifiers are ignored and not checkpointed."""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import InvalidPropertyError
from deltatx.txnlog import snapshot as snapshot_module
from deltatx.txnlog.checkpoint import build_checkpoint_table

HOUR_MS = 3_600_000


class _Clock:
    """Stands in for the ``time`` module inside snapshot.py: a wall clock the test sets."""

    def __init__(self, now_ms: int):
        self.now_ms = now_ms

    def time(self) -> float:
        return self.now_ms / 1000


def _table(uri: str, **properties: str) -> deltatx.Table:
    table = deltatx.create_table(uri, pa.schema([("id", pa.int64())]), properties=properties or None)
    table.append(pa.table({"id": [1]}), app_id="job", app_version=5)
    return deltatx.Table(uri)


def test_a_txn_expires_after_the_retention(table_uri):
    table = _table(table_uri, **{"delta.setTransactionRetentionDuration": "interval 1 hour"})
    written = table.snapshot.app_txns["job"].last_updated
    assert table.snapshot.live_app_txns(now_ms=written + HOUR_MS - 1)["job"].version == 5
    assert table.snapshot.live_app_txns(now_ms=written + HOUR_MS) == {}  # at the horizon: expired
    assert "job" in table.snapshot.app_txns  # the log still holds it; only its meaning lapses


def test_without_the_property_a_txn_never_expires(table_uri):
    table = _table(table_uri)
    written = table.snapshot.app_txns["job"].last_updated
    assert table.snapshot.live_app_txns(now_ms=written + 10_000 * HOUR_MS)["job"].version == 5


def test_an_expired_txn_no_longer_makes_a_write_idempotent(table_uri, monkeypatch):
    table = _table(table_uri, **{"delta.setTransactionRetentionDuration": "interval 1 hour"})
    written = table.snapshot.app_txns["job"].last_updated

    monkeypatch.setattr(snapshot_module, "time", _Clock(written + 1000))
    table.append(pa.table({"id": [2]}), app_id="job", app_version=5)  # a replay: skipped
    assert sorted(deltatx.Table(table_uri).to_arrow()["id"].to_pylist()) == [1]

    monkeypatch.setattr(snapshot_module, "time", _Clock(written + 2 * HOUR_MS))
    table.append(pa.table({"id": [3]}), app_id="job", app_version=5)  # expired: applied again
    assert sorted(deltatx.Table(table_uri).to_arrow()["id"].to_pylist()) == [1, 3]


def test_checkpoints_leave_expired_txns_out(table_uri):
    table = _table(table_uri, **{"delta.setTransactionRetentionDuration": "interval 1 hour"})
    written = table.snapshot.app_txns["job"].last_updated
    fresh = build_checkpoint_table(table.snapshot, now_ms=written + 1000)
    assert fresh.column("txn").drop_null().to_pylist()[0]["appId"] == "job"
    later = build_checkpoint_table(table.snapshot, now_ms=written + 2 * HOUR_MS)
    assert later.column("txn").null_count == later.num_rows


def test_a_bad_retention_value_is_refused(table_uri):
    with pytest.raises(InvalidPropertyError, match="setTransactionRetentionDuration"):
        deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]),
                             properties={"delta.setTransactionRetentionDuration": "soon"})
