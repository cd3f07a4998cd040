"""A commit whose version another writer took while it staged learns so by a stat of the commit
file, before encoding its bytes: with many writers most encodings were of bytes that could not
win. The commit still lands, after the winner, with every row."""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx
from deltatx.tables.transaction import Transaction
from deltatx.txnlog.store import LocalLogStore

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


def _rows(ids):
    return pa.table({"id": ids, "v": [0] * len(ids)}, schema=SCHEMA)


@pytest.fixture
def encodings(monkeypatch):
    """How many times transactions encoded their commit bytes."""
    calls: list[int] = []
    encode = Transaction._encode

    def counting(self, info, version=None):
        calls.append(version)
        return encode(self, info, version)

    monkeypatch.setattr(Transaction, "_encode", counting)
    return calls


@pytest.mark.parametrize("row_level", [False, True])
def test_a_version_taken_while_staging_is_lost_without_encoding(tmp_path, encodings, row_level):
    """Blind appends on a plain table; single-row UPDATEs of one file on a row-level table."""
    uri = str(tmp_path / "t")
    properties = {"delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true"} if row_level else {}
    deltatx.create_table(uri, SCHEMA, properties=properties).append(_rows(list(range(10))))
    mine, other = deltatx.Table(uri), deltatx.Table(uri)
    tx = mine.transaction()
    if row_level:
        tx.update(where="id = 1", set={"v": "v + 1"})
        other.update(where="id = 2", set={"v": "v + 1"})  # takes the version tx would offer first
    else:
        tx.append(_rows([10]))
        other.append(_rows([11]))
    encodings.clear()
    result = tx.commit()
    assert (result.attempts, result.version) == (2, 3)
    assert encodings == [3]  # never encoded for version 2, which was taken already
    rows = deltatx.Table(uri).to_arrow().sort_by("id")
    if row_level:
        assert rows["v"].to_pylist()[:3] == [0, 1, 1]
    else:
        assert rows["id"].to_pylist() == list(range(12))


def test_a_free_version_is_encoded_once_and_put(tmp_path, encodings):
    uri = str(tmp_path / "t")
    table = deltatx.create_table(uri, SCHEMA)
    encodings.clear()
    assert table.append(_rows([1])).attempts == 1
    assert encodings == [1]


def test_only_local_disk_answers_whether_a_version_is_taken(tmp_path):
    uri = str(tmp_path / "t")
    deltatx.create_table(uri, SCHEMA)
    store = deltatx.Table(uri)._store
    assert isinstance(store, LocalLogStore)
    assert store.version_taken(0) and not store.version_taken(1)
    memory = deltatx.create_table("memory://lost-version-probe", SCHEMA)._store
    assert not memory.version_taken(0)  # unknown: the put decides


def test_the_staged_files_are_durable_before_the_first_look_at_the_version(tmp_path, monkeypatch):
    """The data file's fsync happens before the commit loop looks at the next version, not in
    the window between that look and the put, where it would let other writers take it."""
    uri = str(tmp_path / "t")
    table = deltatx.create_table(uri, SCHEMA)
    calls: list[str] = []
    durable, taken = LocalLogStore.make_files_durable, LocalLogStore.version_taken

    def recording_durable(self, paths):
        calls.append("durable")
        return durable(self, paths)

    def recording_taken(self, version):
        calls.append("look")
        return taken(self, version)

    monkeypatch.setattr(LocalLogStore, "make_files_durable", recording_durable)
    monkeypatch.setattr(LocalLogStore, "version_taken", recording_taken)
    table.append(_rows([1, 2]))
    assert calls[:2] == ["durable", "look"]
