"""The catalog's database under failure: lost PostgreSQL connections, deadlocks, opening a catalog
while a committer holds the lock, and URLs that name no shared file (issue 13's audit).

Why these matter: a catalog is a long-lived handle in a service. A PostgreSQL restart or failover
must cost one call at most, never the handle; a deadlock the database resolves by rolling one
transaction back must not surface as a raw driver error (or as a "duplicate row", which makes a
writer rebase against winners that do not exist); and opening a catalog must not queue behind
committers. Each failure is made deterministic: the session is ended with
``pg_terminate_backend`` (waiting until it is gone), a deadlock is raised once by a fault hook or
built from two connections whose order is fixed by waiting for the lock wait itself.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import psycopg
import pyarrow as pa
import pytest

import deltatx
from deltatx import phases
from deltatx.catalog import db as catalog_db
from deltatx.catalog.db import CatalogUnavailableError, DuplicateRowError
from deltatx.errors import CatalogURLError, DeltaTxError

SCHEMA = pa.schema([("id", pa.int64())])

#: how long a test waits for something that happens at once with the fix (a bound, not a pause)
BOUND_S = 30.0


def _rows(*ids: int) -> pa.Table:
    return pa.table({"id": list(ids)}, schema=SCHEMA)


def _ids(table: deltatx.Table) -> list[int]:
    return sorted(table.to_arrow().column("id").to_pylist())


def _table_id(cat: deltatx.Catalog, name: str) -> str:
    return cat._db.query("SELECT id FROM deltatx_tables WHERE name = ?", (name,))[0][0]


def _terminate(url: str, cat: deltatx.Catalog) -> None:
    """End the catalog's database session from another connection, and wait until it is gone
    (what a server restart, a failover or an idle timeout does to a long-lived handle)."""
    pid = cat._db._conn.info.backend_pid
    with psycopg.connect(url, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,)).fetchall() == [(True,)]


def _wait_for_lock_wait(url: str, pid: int) -> None:
    """Return once session ``pid`` waits for a lock (asked of pg_locks, no pause in between)."""
    deadline = time.monotonic() + BOUND_S
    with psycopg.connect(url, autocommit=True) as probe:
        while not probe.execute("SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted", (pid,)).fetchall():
            assert time.monotonic() < deadline, f"session {pid} never waited for a lock"


@pytest.fixture
def pg_url(postgres_server) -> str:
    return postgres_server.new_database()


# ------------------------------------------------------------------ URLs


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "sqlite:///:memory:?cache=shared"])
def test_an_in_memory_sqlite_catalog_is_refused_and_creates_no_file(tmp_path, monkeypatch, url):
    """``sqlite:///:memory:`` used to create files named ':memory:', ':memory:-wal' and
    ':memory:.writelock' in the working directory: a catalog must be a file every writer opens."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CatalogURLError, match="cannot live in memory"):
        deltatx.Catalog(url)
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------ opening


def test_opening_a_catalog_does_not_wait_for_a_committer_holding_the_lock(catalog_url, tmp_path):
    """A committer holds the commit lock with a write pending (a rebase under the lock, a big
    staged file on its way to S3). Opening the catalog elsewhere reads the schema version without
    the writers' lock (SQLite: the flock queue and BEGIN IMMEDIATE; PostgreSQL: the DDL of the
    schema check waited for the committer's row locks), so it returns at once and reads."""
    with deltatx.Catalog(catalog_url) as cat:
        cat.create_table("t", str(tmp_path / "t"), SCHEMA).append(_rows(1))
        table_id = _table_id(cat, "t")
        opened = threading.Event()
        seen: list[list[int]] = []

        def open_and_read() -> None:
            with deltatx.Catalog(catalog_url) as other:
                opened.set()
                seen.append(_ids(other.snapshot().table("t")))

        reader = threading.Thread(target=open_and_read, daemon=True)
        lease = cat._db.lease({table_id: 0})
        try:
            # a ratification in progress: its row written, its COMMIT not sent yet
            lease._cur.execute("UPDATE deltatx_commits SET plain = plain WHERE table_id = ?", (table_id,))
            reader.start()
            assert opened.wait(BOUND_S), "opening the catalog waited for the committer"
            reader.join(BOUND_S)
            assert seen == [[1]]
        finally:
            lease.release()
            if reader.is_alive():
                reader.join(BOUND_S)


def test_opening_still_creates_and_upgrades_the_schema(catalog_url, tmp_path):
    """The read-first open takes the write path when it must: a new catalog, an older schema."""
    with deltatx.Catalog(catalog_url) as cat:
        first_id = cat.catalog_id
        cat.create_table("t", str(tmp_path / "t"), SCHEMA)
        with cat._db.write() as cur:
            cur.execute("UPDATE deltatx_schema_version SET version = 4")
    with deltatx.Catalog(catalog_url) as cat:
        assert cat.catalog_id == first_id
        assert cat._db.query("SELECT version FROM deltatx_schema_version") == [(catalog_db.SCHEMA_VERSION,)]
        assert cat.list_tables() == ["t"]


# ------------------------------------------------------------------ lost connections (PostgreSQL)


def test_reads_and_writes_reconnect_after_the_session_is_terminated(pg_url, tmp_path):
    """The session behind a Catalog ends (server restart, failover, pg_terminate_backend): the
    next call notices before sending anything, connects again and goes through — a read, an
    append, a multi-table transaction, a release — instead of raising psycopg's AdminShutdown
    and then 'the connection is closed' for ever."""
    cat = deltatx.Catalog(pg_url)
    try:
        for name in ("a", "b"):
            cat.create_table(name, str(tmp_path / name), SCHEMA).append(_rows(0))
        _terminate(pg_url, cat)
        assert cat.list_tables() == ["a", "b"]
        _terminate(pg_url, cat)
        assert cat.table("a").append(_rows(1)).version == 2
        _terminate(pg_url, cat)
        with cat.transaction() as tx:
            tx.table("a").append(_rows(2))
            tx.table("b").append(_rows(2))
        assert _ids(cat.table("a")) == [0, 1, 2] and _ids(cat.table("b")) == [0, 2]
        _terminate(pg_url, cat)
        assert _ids(cat.release("b")) == [0, 2]
        assert cat.list_tables() == ["a"]
    finally:
        cat.close()


def test_a_session_ended_just_before_an_offer_is_replaced_before_sending_it(pg_url, tmp_path):
    """The offer is one autocommit statement: sent on a dead connection its outcome would be
    unknown. The connection is checked first (without a round trip), so the offer goes out on a
    new one and the append simply succeeds."""
    cat = deltatx.Catalog(pg_url)
    try:
        table = cat.create_table("t", str(tmp_path / "t"), SCHEMA)
        table.append(_rows(1))
        ended = []

        def end_session_once(phase: str, **context: object) -> None:
            if phase == "staged" and not ended:  # inside the offer, before its statement is sent
                ended.append(True)
                _terminate(pg_url, cat)

        with phases.observe(end_session_once):
            result = table.append(_rows(2))
        assert ended and result.version == 2 and result.attempts == 1
        assert _ids(cat.table("t")) == [1, 2]
    finally:
        cat.close()


def test_an_offer_in_flight_when_the_session_ends_raises_a_typed_unknown_outcome(pg_url, tmp_path, monkeypatch):
    """When the connection dies after the offer was sent (here: the liveness check is made to
    miss it), whether it ratified is unknown: a CatalogUnavailableError with committed=None, not a
    psycopg error. The transaction layer looks whether its version landed (it did not); the next
    call reconnects and commits."""
    cat = deltatx.Catalog(pg_url)
    try:
        table = cat.create_table("t", str(tmp_path / "t"), SCHEMA)
        table.append(_rows(1))
        monkeypatch.setattr(cat._db, "_alive", lambda conn: True, raising=False)
        ended = []

        def end_session_once(phase: str, **context: object) -> None:
            if phase == "staged" and not ended:
                ended.append(True)
                _terminate(pg_url, cat)

        with phases.observe(end_session_once):
            with pytest.raises(CatalogUnavailableError, match="unknown") as err:
                table.append(_rows(2))
        assert err.value.committed is None and isinstance(err.value, DeltaTxError)
        assert cat.table("t").append(_rows(3)).version == 2
        assert _ids(cat.table("t")) == [1, 3]
    finally:
        cat.close()


def test_a_commit_lost_in_flight_raises_a_typed_unknown_outcome(pg_url, tmp_path, monkeypatch):
    """A multi-table transaction whose COMMIT is sent on a connection that just died: the
    outcome is unknown to the client (committed=None); here the server never got the COMMIT, so
    nothing changed, and the catalog works again on the next call."""
    cat = deltatx.Catalog(pg_url)
    try:
        for name in ("a", "b"):
            cat.create_table(name, str(tmp_path / name), SCHEMA).append(_rows(0))
        db = cat._db
        real_commit = db._commit
        ended = []

        def commit_after_the_session_ended(conn):
            if db.current_lease is not None and not ended:  # the ratification's COMMIT
                ended.append(True)
                _terminate(pg_url, cat)
            return real_commit(conn)

        monkeypatch.setattr(db, "_commit", commit_after_the_session_ended)
        with pytest.raises(CatalogUnavailableError, match="unknown") as err:
            with cat.transaction() as tx:
                tx.table("a").append(_rows(1))
                tx.table("b").append(_rows(1))
        assert ended and err.value.committed is None
        assert _ids(cat.table("a")) == [0] and _ids(cat.table("b")) == [0]
        with cat.transaction() as tx:
            tx.table("a").append(_rows(2))
            tx.table("b").append(_rows(2))
        assert _ids(cat.table("a")) == [0, 2] and _ids(cat.table("b")) == [0, 2]
    finally:
        cat.close()


def _lose_the_session_before_inserting(monkeypatch, url: str, cat: deltatx.Catalog, meanwhile=None) -> list:
    """Fault hook: the first time the catalog inserts a ratified row, its session is ended first
    (the INSERT then fails on the dead connection: nothing was committed), after ``meanwhile()``
    ran — another writer, which the dead session's locks no longer hold back."""
    real_execute = catalog_db._Cursor.execute
    fired = []

    def execute(self, sql, params=()):
        if sql.startswith("INSERT INTO deltatx_commits") and self.db is cat._db and not fired:
            fired.append(True)
            _terminate(url, cat)
            if meanwhile is not None:
                meanwhile()
        return real_execute(self, sql, params)

    monkeypatch.setattr(catalog_db._Cursor, "execute", execute)
    return fired


def test_a_ratification_whose_session_ended_before_commit_runs_again(pg_url, tmp_path, monkeypatch):
    """The session ends after a multi-table commit took its locks and before it sent COMMIT:
    nothing was written, and nothing moved meanwhile, so the catalog takes the locks again on a
    new connection and ratifies the same versions — the caller sees one clean commit."""
    cat = deltatx.Catalog(pg_url)
    try:
        for name in ("a", "b"):
            cat.create_table(name, str(tmp_path / name), SCHEMA).append(_rows(0))
        fired = _lose_the_session_before_inserting(monkeypatch, pg_url, cat)
        with cat.transaction() as tx:
            tx.table("a").append(_rows(1))
            tx.table("b").append(_rows(1))
        assert fired
        assert [cat.table(n).version for n in ("a", "b")] == [2, 2]
        assert _ids(cat.table("a")) == [0, 1] and _ids(cat.table("b")) == [0, 1]
    finally:
        cat.close()


def test_a_ratification_whose_session_ended_rebases_when_a_table_moved_meanwhile(pg_url, tmp_path, monkeypatch):
    """Same, but another writer committed to one of the tables while the locks were gone: the
    rows built under the old locks are not next any more, so the ratification is not run again
    as it was — the transaction rebases on the winner and commits after it."""
    cat = deltatx.Catalog(pg_url)
    other = deltatx.Catalog(pg_url)
    try:
        for name in ("a", "b"):
            cat.create_table(name, str(tmp_path / name), SCHEMA).append(_rows(0))
        fired = _lose_the_session_before_inserting(
            monkeypatch, pg_url, cat, meanwhile=lambda: other.table("a").append(_rows(9)))
        with cat.transaction() as tx:
            tx.table("a").append(_rows(1))
            tx.table("b").append(_rows(1))
        assert fired
        assert [cat.table(n).version for n in ("a", "b")] == [3, 2]
        assert _ids(cat.table("a")) == [0, 1, 9] and _ids(cat.table("b")) == [0, 1]
    finally:
        other.close()
        cat.close()


# ------------------------------------------------------------------ deadlocks (PostgreSQL)


def _deadlock() -> psycopg.errors.DeadlockDetected:
    return psycopg.errors.DeadlockDetected("deadlock detected")


def test_a_deadlock_is_not_a_duplicate_row(pg_url):
    """A deadlock victim lost no race for a row: it was rolled back whole. Classifying it as a
    duplicate made callers treat it as a lost put-if-absent (and leaked the internal
    DuplicateRowError from release()). It is a typed, retryable CatalogUnavailableError."""
    with deltatx.Catalog(pg_url) as cat:
        with pytest.raises(CatalogUnavailableError) as err:
            with cat._db.write():
                raise _deadlock()
        assert err.value.committed is False and not isinstance(err.value, DuplicateRowError)


def test_a_release_chosen_as_deadlock_victim_runs_its_transaction_again(pg_url, tmp_path, monkeypatch):
    """The database picks the release's last transaction (forget the name and its commits) as a
    deadlock victim once: the catalog runs that transaction again and the release completes."""
    with deltatx.Catalog(pg_url) as cat:
        cat.create_table("t", str(tmp_path / "t"), SCHEMA).append(_rows(1))
        real_execute = catalog_db._Cursor.execute
        fired = []

        def execute(self, sql, params=()):
            if sql.startswith("DELETE FROM deltatx_commits") and not fired:
                fired.append(True)
                raise _deadlock()
            return real_execute(self, sql, params)

        monkeypatch.setattr(catalog_db._Cursor, "execute", execute)
        released = cat.release("t")
        assert fired and cat.list_tables() == [] and _ids(released) == [1]


def test_a_release_that_keeps_deadlocking_raises_a_typed_error_and_forgets_nothing(pg_url, tmp_path, monkeypatch):
    """Past the retries the release raises CatalogUnavailableError (a DeltaTxError) saying nothing
    was written — never the internal DuplicateRowError — and the table is still in the catalog."""
    with deltatx.Catalog(pg_url) as cat:
        cat.create_table("t", str(tmp_path / "t"), SCHEMA).append(_rows(1))
        real_execute = catalog_db._Cursor.execute
        calls = []

        def execute(self, sql, params=()):
            if sql.startswith("DELETE FROM deltatx_commits"):
                calls.append(sql)
                raise _deadlock()
            return real_execute(self, sql, params)

        monkeypatch.setattr(catalog_db._Cursor, "execute", execute)
        with pytest.raises(CatalogUnavailableError, match="nothing was written") as err:
            cat.release("t")
        assert err.value.committed is False
        assert len(calls) == catalog_db.TRANSIENT_ATTEMPTS
        monkeypatch.undo()
        assert cat.list_tables() == ["t"]
        assert cat.release("t").version == 2  # the released path table


def test_dropping_inline_content_queues_behind_a_release_forgetting_the_table(pg_url, tmp_path):
    """The audit's deadlock, made deterministic. A release forgets a table in one transaction:
    the table's row lock, then its commits deleted (in whatever order the scan meets them). A
    writer that found the table released forgets it too, and first drops the inline content of
    its published commits. That used to update the commit rows in version order *without* the
    table's lock: holding version 1's row and waiting for version 2's, which the release deleted,
    while the release waited for version 1's — a deadlock. The content drop now takes the table's
    row lock first, waits for the release without holding anything, and finds nothing to do."""
    with deltatx.Catalog(pg_url) as cat:
        cat.create_table("t", str(tmp_path / "t"), SCHEMA)
        table = cat.table("t")
        table.append(_rows(1))
        table.append(_rows(2))
        table_id = _table_id(cat, "t")
        writer_pid = cat._db._conn.info.backend_pid
        with psycopg.connect(pg_url) as release:  # the release's last transaction, by hand
            release.execute("SELECT id FROM deltatx_tables WHERE id = %s FOR UPDATE", (table_id,))
            release.execute("DELETE FROM deltatx_commits WHERE table_id = %s AND version = 2", (table_id,))
            outcome: list[BaseException | None] = []

            def drop_content() -> None:
                try:
                    cat._db.drop_content(table_id, [1, 2])
                    outcome.append(None)
                except BaseException as exc:  # noqa: BLE001 - the test reports it
                    outcome.append(exc)

            writer = threading.Thread(target=drop_content, daemon=True)
            writer.start()
            _wait_for_lock_wait(pg_url, writer_pid)
            release.execute("DELETE FROM deltatx_commits WHERE table_id = %s", (table_id,))
            release.execute("DELETE FROM deltatx_tables WHERE id = %s", (table_id,))
            release.commit()
        writer.join(BOUND_S)
        assert outcome == [None]
        assert cat.list_tables() == []


def test_a_deadlock_victims_ratification_runs_again_under_the_lock_taken_again(pg_url, tmp_path, monkeypatch):
    """A lease's ratification rolled back as a deadlock victim is run again under the lock taken
    again (nothing moved): one attempt for the caller — it used to be read as a duplicate row, a
    lost race, and the whole commit was attempted again against winners that do not exist."""
    with deltatx.Catalog(pg_url) as cat:
        for name in ("a", "b"):
            cat.create_table(name, str(tmp_path / name), SCHEMA).append(_rows(0))
        real_execute = catalog_db._Cursor.execute
        fired = []

        def execute(self, sql, params=()):
            if sql.startswith("INSERT INTO deltatx_commits") and not fired:
                fired.append(True)
                raise _deadlock()
            return real_execute(self, sql, params)

        monkeypatch.setattr(catalog_db._Cursor, "execute", execute)
        tx = cat.transaction()
        tx.table("a").append(_rows(1))
        tx.table("b").append(_rows(1))
        results = tx.commit()
        assert fired and {n: r.attempts for n, r in results.items()} == {"a": 1, "b": 1}
        assert [cat.table(n).version for n in ("a", "b")] == [2, 2]
        assert _ids(cat.table("a")) == [0, 1] and _ids(cat.table("b")) == [0, 1]


def test_connection_errors_never_reach_the_caller_raw(pg_url, tmp_path, monkeypatch):
    """With the server unreachable for good (here: every reconnect refused), every public call
    raises a CatalogError — never a psycopg exception."""
    cat = deltatx.Catalog(pg_url)
    try:
        table = cat.create_table("t", str(tmp_path / "t"), SCHEMA)
        bad = pg_url.rsplit("/", 1)[0] + "/no_such_database_" + uuid.uuid4().hex[:8]
        monkeypatch.setattr(cat._db, "url", bad)
        _terminate(pg_url, cat)
        for call in (cat.list_tables, lambda: cat.table("t"), lambda: table.append(_rows(1)),
                     lambda: cat.release("t"), cat.snapshot):
            with pytest.raises(DeltaTxError) as err:
                call()
            assert not isinstance(err.value, psycopg.Error)
            assert isinstance(err.value, CatalogUnavailableError), err.value
    finally:
        cat.close()
