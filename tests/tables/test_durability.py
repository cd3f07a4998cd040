"""On local disk, the files a commit names are fsynced before the commit is put.

The commit file itself is fsynced (txnlog/store.py); these tests pin the other half: the data,
deletion-vector and change-data files a transaction wrote reach stable storage first, once each,
and a file that vanished before the commit fails it with nothing committed.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import deltatx
from deltatx import phases
from deltatx.errors import DataFileNotFoundError
from deltatx.io.paths import decode_path
from deltatx.tables.properties import DV_INLINE_MAX_BYTES
from deltatx.txnlog.store import LocalLogStore

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


@pytest.fixture
def synced(monkeypatch):
    """Every path fsynced, in order, with the phase each commit attempt reached in between."""
    events: list[tuple[str, object]] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)

    def observer(phase: str, **context) -> None:
        if phase == "attempt_commit":
            events.append(("attempt_commit", context.get("version")))

    with phases.observe(observer):
        yield events


def _fsynced(events, before_attempt: bool = True) -> list[str]:
    out = []
    for kind, value in events:
        if kind == "attempt_commit" and before_attempt:
            break
        if kind == "fsync":
            out.append(value)
    return out


def test_an_append_fsyncs_its_data_file_before_the_commit(table_uri, synced):
    table = deltatx.create_table(table_uri, SCHEMA)
    synced.clear()
    table.append(pa.table({"id": [1, 2], "v": [0, 0]}, schema=SCHEMA))
    [path] = [decode_path(p) for p in deltatx.Table(table_uri).files().column("path").to_pylist()]
    assert os.path.join(table_uri, path) in _fsynced(synced)


def test_a_deletion_vector_file_is_fsynced_before_the_commit(table_uri, synced):
    table = deltatx.create_table(table_uri, SCHEMA, properties={"delta.enableDeletionVectors": "true",
                                                                DV_INLINE_MAX_BYTES: "0"})  # never inline
    table.append(pa.table({"id": list(range(1000)), "v": [0] * 1000}, schema=SCHEMA))
    synced.clear()
    deltatx.Table(table_uri).delete("id % 3 = 0")
    [dv] = deltatx.Table(table_uri).files().column("deletionVector").to_pylist()
    assert dv["storageType"] == "u"
    dv_files = [f for f in os.listdir(table_uri) if f.startswith("deletion_vector_")]
    assert os.path.join(table_uri, dv_files[0]) in _fsynced(synced)


def test_a_rebase_does_not_fsync_the_same_file_again(table_uri, synced):
    table = deltatx.create_table(table_uri, SCHEMA)
    loser = deltatx.Table(table_uri).transaction()
    loser.append(pa.table({"id": [1], "v": [0]}, schema=SCHEMA))
    table.append(pa.table({"id": [2], "v": [0]}, schema=SCHEMA))
    synced.clear()
    assert loser.commit().conflicts_resolved == 1
    ours = [decode_path(p) for p in deltatx.Table(table_uri).files().column("path").to_pylist()]
    data = [p for p in _fsynced(synced, before_attempt=False) if p.endswith(".parquet")]
    assert len(data) == 1 and os.path.relpath(data[0], table_uri) in ours


def test_a_data_file_gone_before_the_commit_fails_it_with_nothing_committed(table_uri):
    deltatx.create_table(table_uri, SCHEMA)
    tx = deltatx.Table(table_uri).transaction()
    tx.append(pa.table({"id": [1], "v": [0]}, schema=SCHEMA))
    [path] = [decode_path(p) for p in tx.current_files().column("path").to_pylist()]
    os.remove(os.path.join(table_uri, path))
    with pytest.raises(DataFileNotFoundError, match="nothing was committed"):
        tx.commit()
    assert deltatx.Table(table_uri).version == 0


def test_fsync_false_skips_it(table_uri, synced):
    table = deltatx.create_table(table_uri, SCHEMA, storage_options={"fsync": False})
    assert isinstance(table.store, LocalLogStore) and not table.store.fsync
    synced.clear()
    table.append(pa.table({"id": [1], "v": [0]}, schema=SCHEMA))
    assert _fsynced(synced, before_attempt=False) == []
