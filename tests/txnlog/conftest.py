"""Fixtures for the txnlog tests: a fresh store per test (local disk and memory://)."""

from __future__ import annotations

import uuid

import pytest
from txnlog_logs import CountingLocalStore, LogWriter

from deltatx.txnlog.store import LogStore, open_store


@pytest.fixture(params=["local", "memory"])
def store(request: pytest.FixtureRequest, tmp_path) -> LogStore:
    if request.param == "local":
        return open_store(str(tmp_path / "table"), {"fsync": False})
    return open_store(f"memory://txnlog-tests/{uuid.uuid4().hex}")


@pytest.fixture
def local_store(tmp_path) -> CountingLocalStore:
    root = tmp_path / "table"
    root.mkdir()
    return CountingLocalStore(str(root))


@pytest.fixture
def log(store: LogStore) -> LogWriter:
    return LogWriter(store)


@pytest.fixture
def local_log(local_store: CountingLocalStore) -> LogWriter:
    return LogWriter(local_store)
