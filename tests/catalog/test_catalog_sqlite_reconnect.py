"""A SQLite catalog whose connection is discarded (a ROLLBACK that failed) and opened again.

Why: every (re)connect opened ``<db>.writelock`` anew and dropped the previous descriptor
without closing it, so each reconnect of a long-lived catalog leaked one file descriptor.
"""

from __future__ import annotations

import os
import sqlite3
import sys

import pytest

import deltatx


def _writelock_descriptors(path: str) -> int:
    """How many of this process's descriptors are open on ``path`` (Linux: /proc/self/fd)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == path:
                count += 1
        except OSError:
            pass  # the listing's own descriptor, gone by now
    return count


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts descriptors in /proc/self/fd")
def test_a_reconnect_keeps_one_descriptor_of_the_writers_lock(tmp_path, monkeypatch):
    db_path = str(tmp_path / "catalog.db")
    cat = deltatx.Catalog(f"sqlite:///{db_path}")
    try:
        db = cat._db
        lock_path = os.path.realpath(db_path + ".writelock")
        assert _writelock_descriptors(lock_path) == 1
        real_rollback = db._rollback
        failed: list[bool] = []

        def rollback_fails_once(conn):
            if not failed:
                failed.append(True)
                raise sqlite3.OperationalError("disk I/O error")
            return real_rollback(conn)

        monkeypatch.setattr(db, "_rollback", rollback_fails_once)

        def body(cur):
            cur.execute("SELECT 1")
            raise ValueError("the caller's own error: the transaction is rolled back")

        with pytest.raises(ValueError):
            db.transact(body)
        assert failed and db._conn is None  # the connection whose rollback failed is discarded
        for _ in range(3):
            assert cat.list_tables() == []  # reconnects once, then reuses the connection
        with db.write() as cur:  # the writers' lock still works
            cur.execute("SELECT 1")
        assert _writelock_descriptors(lock_path) == 1
    finally:
        cat.close()
    assert _writelock_descriptors(lock_path) == 0
