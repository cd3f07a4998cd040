"""Every catalog test runs against SQLite AND a real PostgreSQL server (tests/pgserver.py)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
import pgserver  # noqa: E402


@pytest.fixture(scope="session")
def postgres_server():
    server = pgserver.start()  # fails with a clear message when PostgreSQL cannot be started
    yield server
    pgserver.stop(server)


@pytest.fixture(params=["sqlite", "postgresql"])
def catalog_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/catalog.db"
    return request.getfixturevalue("postgres_server").new_database()
