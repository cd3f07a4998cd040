"""The catalog's database: one schema, two backends (SQLite embedded, PostgreSQL for many machines).

Why a database: the put-if-absent that a Delta log needs from storage becomes a unique row
``(table_id, version)`` in ``deltatx_commits``. A database gives it in well under a millisecond and,
unlike object storage, inside a transaction that can ratify the next version of *several* tables at
once — the basis of multi-table transactions.

Writers are serialized, not raced (:class:`CommitLease`): a commit takes the tables' commit lock
in one database transaction (SQLite: the database's write lock, ``BEGIN IMMEDIATE`` behind an
flock queue; PostgreSQL: ``SELECT … FOR UPDATE`` on the tables' rows), reads the versions ratified
since its snapshot *with their content*, lets the caller check and rebase against them (the pure
conflict checker), and ratifies the next version in the same transaction. Nobody loses a race it
has to redo, and small commits are **inline** (PROTOCOL.md, catalogManaged, commit protocol option
2): their bytes are stored in the ratifying row, so no staged file is written and fsynced at all.

The schema is versioned (``deltatx_schema_version``) and created on first use. SQL is written once
with ``?`` placeholders; the PostgreSQL backend rewrites them to ``%s``.
"""

from __future__ import annotations

import dataclasses
import os
import random
import select
import sqlite3
import threading
import time
import uuid
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, NoReturn, Sequence, TypeVar
from urllib.parse import urlparse

from ..errors import CatalogError, CatalogUnavailableError, CatalogURLError, DeltaTxError

try:  # the SQLite writers' queue (POSIX); elsewhere SQLite's own busy handler alone
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

#: 2: deltatx_tables.maintenance (maintenance gating); 3: deltatx_commits.content (inline commits);
#: 4: deltatx_commits.plain (commits a blind append commutes with: conflicts/commuting.py);
#: 5: deltatx_tables.uri UNIQUE (one path, one name), deltatx_tables.published_through (the
#: versions the catalog verified in ``_delta_log``), deltatx_catalog_info (the catalog's identity)
SCHEMA_VERSION = 5


#: how often one database transaction runs when the database rolled it back whole — a deadlock
#: victim, a serialization failure (SQLSTATE 40P01, 40001), or a connection lost before its
#: COMMIT was sent: nothing of it was written, so running it again is safe. Past that the call
#: raises CatalogUnavailableError.
TRANSIENT_ATTEMPTS = 5

_T = TypeVar("_T")


class DuplicateRowError(Exception):
    """Internal: a unique constraint refused a row (the database's put-if-absent lost)."""


@dataclass(frozen=True)
class Ratification:
    """One row to ratify: ``version`` of ``table_id``, stamped with in-commit timestamp ``ict``.

    Where its bytes are: ``content`` (an inline commit), or the staged file ``staged_name``, or
    neither (already in ``_delta_log``: the registration commit). ``plain``: the commit holds
    only commitInfo/add/remove/cdc actions (:func:`~deltatx.conflicts.commuting.is_plain_commit`),
    so a blind append may be ratified after it unread."""

    table_id: str
    version: int
    staged_name: str | None
    txn_id: str
    ict: int
    content: bytes | None = None
    plain: bool = False
    #: the byte offset of ``ict``'s digits in ``content`` (PostgreSQL restamps there in place)
    ict_at: int | None = None


@dataclass(frozen=True)
class RatifiedCommit:
    """A ratified version as the catalog holds it (see :class:`Ratification` for where its bytes are)."""

    version: int
    ict: int
    staged_name: str | None
    content: bytes | None
    plain: bool = False


def _ddl(serial: str, blob: str) -> list[str]:
    return [
        "CREATE TABLE IF NOT EXISTS deltatx_schema_version (version INTEGER NOT NULL)",
        # the catalog's identity, recorded in every table it manages (catalog.py, CATALOG_ID)
        "CREATE TABLE IF NOT EXISTS deltatx_catalog_info (id TEXT NOT NULL)",
        # published_through: every version up to it is in _delta_log with the ratified bytes, as
        # the catalog itself verified (store.py, publish_pending); uri is UNIQUE (index below)
        "CREATE TABLE IF NOT EXISTS deltatx_tables (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, "
        "uri TEXT NOT NULL, created_ms BIGINT NOT NULL, maintenance TEXT NOT NULL DEFAULT 'allowed', "
        "published_through BIGINT NOT NULL DEFAULT -1)",
        # one row per catalog transaction: the global order the bank2 checker walks
        f"CREATE TABLE IF NOT EXISTS deltatx_catalog_commits (seq {serial}, txn_id TEXT NOT NULL, "
        "committed_ms BIGINT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS deltatx_commits (table_id TEXT NOT NULL, version BIGINT NOT NULL, "
        "staged_name TEXT, txn_id TEXT NOT NULL, ict BIGINT NOT NULL, catalog_seq BIGINT NOT NULL, "
        f"content {blob}, plain BOOLEAN NOT NULL DEFAULT FALSE, PRIMARY KEY (table_id, version))",
    ]


_RATIFIED_SINCE = ("SELECT version, ict, staged_name, content, plain FROM deltatx_commits "
                   "WHERE table_id = ? AND version >= ? ORDER BY version")
#: the same without the bytes: what a commuting offer needs to decide (conflicts/commuting.py)
_RATIFIED_SINCE_FLAGS = ("SELECT version, ict, staged_name, NULL, plain FROM deltatx_commits "
                         "WHERE table_id = ? AND version >= ? ORDER BY version")
_LATEST = ("SELECT version, ict, staged_name, content, plain FROM deltatx_commits WHERE table_id = ? "
           "ORDER BY version DESC LIMIT 1")
#: with the table's published_through: the committer need not look whether the version before
#: its own is published (an object store's HEAD) when the catalog verified it already
_LATEST_FLAGS = ("SELECT c.version, c.ict, c.staged_name, NULL, c.plain, t.published_through FROM deltatx_commits c "
                 "JOIN deltatx_tables t ON t.id = c.table_id WHERE c.table_id = ? ORDER BY c.version DESC LIMIT 1")
#: the oldest winner a commuting offer cannot be ratified after (scanned in the database, not sent)
_FIRST_NOT_PLAIN_SINCE = ("SELECT version, ict, staged_name, NULL, plain FROM deltatx_commits "
                          "WHERE table_id = ? AND version >= ? AND NOT plain ORDER BY version LIMIT 1")
#: one path, one table: two names (or two concurrent creates) for one location would each ratify
#: their own version N and overwrite each other's published files
_URI_INDEX = "CREATE UNIQUE INDEX IF NOT EXISTS deltatx_tables_uri ON deltatx_tables (uri)"


class Database:
    """A connection with the few operations the catalog needs; thread-safe by one lock.

    Failures of the database reach callers typed: a unique row refused is :class:`DuplicateRowError`
    (internal: the put-if-absent lost), anything else a :class:`~deltatx.errors.CatalogError` —
    :class:`CatalogUnavailableError` when the connection was lost or the transaction kept being
    rolled back, saying whether anything was written. A lost connection is discarded; the next
    call connects again. A transaction the database rolled back whole runs again (up to
    :data:`TRANSIENT_ATTEMPTS` times) where this layer holds all of it: a read, a
    :meth:`transact` body, a lease's ratification (:meth:`CommitLease.ratify` re-takes the lock
    and checks that nothing moved)."""

    dialect = "base"
    #: does :meth:`offer` record what ``on_ratified`` published (its return value) itself?
    marks_in_offer = False

    def __init__(self, url: str):
        self.url = url
        self._lock = threading.RLock()
        self._write_thread: int | None = None  # the thread whose write transaction is open
        self._deferred_marks: list[tuple[str, int, int]] = []  # mark_published inside that write
        self._in_then = False  # end_write's ``then`` is running (the write committed, the lock held)
        self._pid = os.getpid()
        self._closed = False
        self._conn: Any = self._connect()
        #: the open write transaction's cursor (None outside one): reads inside it see its view
        self._write_cur: Any = None
        #: the commit lease that transaction belongs to, if any (its reads serve the rebase)
        self.current_lease: CommitLease | None = None
        self._ensure_schema()

    # ---- backend hooks ------------------------------------------------------------------------
    def _connect(self) -> Any:
        raise NotImplementedError

    def _serial(self) -> str:
        raise NotImplementedError

    def _blob(self) -> str:
        raise NotImplementedError

    def _begin(self, cur: Any) -> None:
        raise NotImplementedError

    def _is_duplicate(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def _is_database_error(self, exc: BaseException) -> bool:
        """Did the database (its driver) raise ``exc``? Those are translated (:meth:`_failure`)."""
        return False

    def _is_transient(self, exc: BaseException) -> bool:
        """Did the database roll the transaction back whole, so that it may simply run again
        (a deadlock victim, a serialization failure)?"""
        return False

    def _is_lost(self, exc: BaseException) -> bool:
        """Is the connection gone with ``exc`` (server restart, terminated session, network)?"""
        return False

    def _alive(self, conn: Any) -> bool:
        """Can ``conn`` take the next statement, as far as can be told without a round trip?"""
        return True

    def _sql(self, sql: str) -> str:
        return sql

    def _commit(self, conn: Any) -> None:
        conn.commit()

    def _rollback(self, conn: Any) -> None:
        conn.rollback()

    def _schema_lock(self, cur: "_Cursor") -> None:
        """Serialise concurrent first use (SQLite: BEGIN IMMEDIATE does already)."""

    def lock_tables(self, cur: "_Cursor", table_ids: Sequence[str]) -> None:
        """Inside an open write transaction: take the tables' rows' locks, in id order.

        Why: every write transaction that changes a table's rows (its commits, its entry) takes
        them first, so two such transactions queue on the same lock in the same order instead of
        locking rows of ``deltatx_commits`` in different orders and deadlocking (a release
        forgetting the table while a writer that found it released dropped its inline content).
        SQLite: ``BEGIN IMMEDIATE`` serialises every writer already."""

    def _acquire_writer(self) -> None:
        """Queue for the right to write, before the transaction begins (SQLite: an flock)."""

    def _release_writer(self) -> None:
        pass

    def _read_for_commit(self, cur: "_Cursor", since: dict[str, int], content: bool = True
                         ) -> dict[str, list[RatifiedCommit]]:
        """Inside an open write transaction: lock the tables' commits, then read every version
        ``>= since[table]`` (or the latest when there is none), oldest first; without their
        bytes unless ``content``."""
        self.lock_tables(cur, sorted(since))
        return {table_id: self._ratified_since(cur, table_id, version, content)
                for table_id, version in sorted(since.items())}

    def _ratified_since(self, cur: "_Cursor", table_id: str, version: int, content: bool = True
                        ) -> list[RatifiedCommit]:
        rows = cur.execute(_RATIFIED_SINCE if content else _RATIFIED_SINCE_FLAGS, (table_id, version)).fetchall()
        if not rows:  # behind the caller's snapshot, or an unknown table: the latest tells which
            rows = cur.execute(_LATEST, (table_id,)).fetchall()
        return [_ratified(r) for r in rows]

    # ---- failures -----------------------------------------------------------------------------
    def _failure(self, exc: BaseException, *, committing: bool = False) -> BaseException:
        """What ``exc``, raised while talking to the database, means for the caller.

        A unique violation: :class:`DuplicateRowError`. A transaction rolled back whole
        (deadlock, serialization failure), or a connection lost before the COMMIT (or the one
        statement of an autocommit write) was sent: :class:`CatalogUnavailableError` with
        ``committed=False`` — the callers that hold the whole transaction run it again. A
        connection lost with ``committing`` (that statement was in flight):
        ``committed=None``, the outcome is unknown. Any other database error: CatalogError.
        Errors that are not the database's (ours, the caller's, KeyboardInterrupt) are returned
        unchanged. A lost connection is discarded: the next call connects again."""
        if isinstance(exc, (DeltaTxError, DuplicateRowError)) or not self._is_database_error(exc):
            return exc
        if self._is_duplicate(exc):
            return DuplicateRowError(str(exc))
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if self._is_transient(exc):
            return CatalogUnavailableError(
                f"catalog {self.url!r}: the database rolled the transaction back ({first}); nothing was "
                f"written (run again up to {TRANSIENT_ATTEMPTS} times where the catalog can)", committed=False)
        if self._is_lost(exc):
            self._discard()
            if committing:
                return CatalogUnavailableError(
                    f"catalog {self.url!r}: the connection to the database was lost while a commit was in "
                    f"flight ({first}); whether it was written is unknown — look before doing it again "
                    f"(the next call reconnects)", committed=None)
            return CatalogUnavailableError(
                f"catalog {self.url!r}: the connection to the database was lost ({first}); nothing was "
                f"written (the next call reconnects)", committed=False)
        return CatalogError(f"catalog {self.url!r}: the database refused the call: {first}")

    @staticmethod
    def _retryable(err: BaseException) -> bool:
        return isinstance(err, CatalogUnavailableError) and err.committed is False

    @staticmethod
    def _backoff(attempt: int) -> None:
        """A short random pause before running a rolled-back transaction again: two deadlock
        victims retrying in lockstep would meet again."""
        time.sleep(random.uniform(0, 0.002 * attempt))

    def _raise(self, exc: BaseException, *, committing: bool = False) -> None:
        """Raise what :meth:`_failure` makes of ``exc`` (``exc`` itself when it is not the database's)."""
        _throw(self._failure(exc, committing=committing), exc)

    # ---- plumbing -----------------------------------------------------------------------------
    def _discard(self) -> None:
        """Forget a connection that is gone (its server-side transaction and locks went with it)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def _conn_for_process(self) -> Any:
        """This process's live connection: a new one after a fork, or when the last one was lost."""
        if self._closed:
            raise CatalogError(f"catalog {self.url!r} was closed (Catalog.close()); open it again with "
                               f"deltatx.Catalog(url) to read or commit")
        if os.getpid() != self._pid:  # a forked child must not share the parent's socket/file
            self._pid = os.getpid()
            self._conn = self._connect()
            self._write_cur = None
        elif self._conn is None or not self._alive(self._conn):
            self._discard()
            try:
                self._conn = self._connect()
            except CatalogURLError as exc:
                raise CatalogUnavailableError(
                    f"catalog {self.url!r}: the connection to the database was lost and cannot be "
                    f"re-established ({exc}); nothing was written", committed=False) from exc
        return self._conn

    def _rollback_quietly(self) -> None:
        """Roll back the open transaction; on a connection that is gone there is nothing to roll
        back (the server did), so it is only discarded."""
        if self._conn is None:
            return
        try:
            self._rollback(self._conn)
        except BaseException as exc:
            if not self._is_database_error(exc):
                raise
            self._discard()

    def begin_write(self) -> "_Cursor":
        """Open a write transaction (the caller ends it with :meth:`end_write`); this thread
        holds the connection until then. A connection found lost at BEGIN — nothing sent yet —
        is replaced and BEGIN sent again."""
        self._lock.acquire()
        try:
            if self._write_cur is not None:
                raise RuntimeError("a catalog write transaction is open already on this connection")
            attempt = 0
            while True:
                attempt += 1
                conn = self._conn_for_process()
                self._acquire_writer()
                try:
                    cur = _Cursor(self, conn.cursor())
                    try:
                        self._begin(cur.cur)
                    except BaseException:
                        _close_quietly(cur.cur)
                        raise
                except BaseException as exc:
                    self._release_writer()
                    err = self._failure(exc)
                    if self._retryable(err) and attempt < TRANSIENT_ATTEMPTS:
                        continue
                    _throw(err, exc)
                break
            self._write_cur = cur
            self._write_thread = threading.get_ident()
            return cur
        except BaseException:
            self._lock.release()
            raise

    def end_write(self, cur: "_Cursor", commit: bool, then: Callable[[], None] | None = None) -> None:
        """Commit (or roll back) the open write transaction and let the next writer in; ``then``
        runs after a successful commit, before the next writer is let in (SQLite's queue: the
        committer publishes its version before anyone can ratify the next one). A failed COMMIT
        raises what :meth:`_failure` makes of it (the connection lost then: outcome unknown)."""
        try:
            try:
                if commit:
                    if self._conn is None:  # lost inside the transaction (an error someone caught)
                        raise CatalogUnavailableError(
                            f"catalog {self.url!r}: the connection to the database was lost before the "
                            f"commit; nothing was written (the next call reconnects)", committed=False)
                    self._commit(self._conn)
            except BaseException as exc:
                err = self._failure(exc, committing=True)
                _close_quietly(cur.cur)  # before a rollback that may discard the connection (below)
                self._rollback_quietly()
                _throw(err, exc)
            else:
                if not commit:
                    # the cursor first: a SQLite connection closed (discarded after a failed
                    # ROLLBACK) while a cursor holds a statement stays open, its write lock held,
                    # until that cursor is garbage-collected — which a traceback can put off
                    _close_quietly(cur.cur)
                    self._rollback_quietly()
                elif then is not None:
                    self._in_then = True  # committed, writer lock still held: see mark_published
                    try:
                        then()
                    finally:
                        self._in_then = False
        finally:
            self._write_cur = None
            self.current_lease = None
            try:
                _close_quietly(cur.cur)
            finally:
                try:
                    self._release_writer()
                finally:
                    self._lock.release()

    @contextmanager
    def write(self) -> Iterator["_Cursor"]:
        """One write transaction; a unique violation inside becomes DuplicateRowError, any other
        database failure a CatalogError (see :meth:`_failure`). Not run again when the database
        rolls it back: :meth:`transact` does that."""
        cur = self.begin_write()
        try:
            yield cur
        except BaseException as exc:
            err = self._failure(exc)  # before the rollback: it tells whether the connection is gone
            self.end_write(cur, commit=False)
            _throw(err, exc)
        self.end_write(cur, commit=True)

    def transact(self, body: Callable[["_Cursor"], _T]) -> _T:
        """Run ``body(cur)`` in one write transaction and commit; returns what ``body`` returned.

        When the database rolls the transaction back whole — a deadlock victim, a serialization
        failure, the connection lost before COMMIT — ``body`` runs again in a new transaction (it
        must only talk to the database), up to :data:`TRANSIENT_ATTEMPTS` times; then
        :class:`CatalogUnavailableError` (``committed=False``). A connection lost during COMMIT
        raises it with ``committed=None``: the outcome is unknown."""
        attempt = 0
        while True:
            cur, result, attempt = self._run_open(body, attempt)
            try:
                self.end_write(cur, commit=True)
            except CatalogUnavailableError as err:
                if err.committed is False and attempt < TRANSIENT_ATTEMPTS:  # rolled back at COMMIT
                    self._backoff(attempt)
                    continue
                raise
            return result

    def _run_open(self, body: Callable[["_Cursor"], _T], attempt: int = 0) -> tuple["_Cursor", _T, int]:
        """``body(cur)`` in a new write transaction left open for the caller to end; run again in
        another one when the database rolled it back whole, the attempts counted on from
        ``attempt`` up to :data:`TRANSIENT_ATTEMPTS`. Returns the open cursor, what ``body``
        returned and the attempts made so far (:meth:`transact` and :meth:`lease` share it)."""
        while True:
            attempt += 1
            cur = self.begin_write()
            try:
                return cur, body(cur), attempt
            except BaseException as exc:
                err = self._failure(exc)
                self.end_write(cur, commit=False)
                if self._retryable(err) and attempt < TRANSIENT_ATTEMPTS:
                    self._backoff(attempt)
                    continue
                _throw(err, exc)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """A read in its own (short) transaction: one consistent view for a multi-row query.
        Inside this thread's open write transaction it reads that transaction's view. A read is
        run again on a new connection when the connection was lost (it changes nothing)."""
        with self._lock:
            if self._write_cur is not None:
                try:
                    return self._write_cur.execute(sql, params).fetchall()
                except BaseException as exc:
                    self._raise(exc)
            attempt = 0
            while True:
                attempt += 1
                try:
                    return self._read(sql, params)
                except BaseException as exc:
                    err = self._failure(exc)
                    if self._retryable(err) and attempt < TRANSIENT_ATTEMPTS:
                        continue
                    _throw(err, exc)

    def _read(self, sql: str, params: Sequence[Any]) -> list[tuple]:
        """One read, outside any write transaction of this connection."""
        conn = self._conn_for_process()
        cur = conn.cursor()
        try:
            cur.execute(self._sql(sql), tuple(params))
            rows = cur.fetchall()
            conn.commit()
            return rows
        except BaseException:
            self._rollback_quietly()
            raise
        finally:
            _close_quietly(cur)

    def _current_schema(self) -> str | None:
        """This catalog's identity if its schema is current — nothing to create or upgrade — read
        in a read transaction; None when the write path must run (a new catalog, an older schema).

        Why a read first: the write path takes the writers' lock (SQLite: the flock queue and
        BEGIN IMMEDIATE), so opening a catalog would wait for every committer ahead of it — a
        rebase under the lock, a big staged file written to S3 — while a WAL reader never waits."""
        try:
            rows = self.query("SELECT v.version, i.id FROM deltatx_schema_version v CROSS JOIN deltatx_catalog_info i")
        except CatalogUnavailableError:
            raise
        except Exception:  # no schema yet (or not readable as one): the write path creates or reports it
            return None
        if len(rows) != 1:
            return None
        found = rows[0][0]
        if found > SCHEMA_VERSION:
            raise CatalogURLError(f"catalog {self.url!r} has schema version {found}; this deltatx "
                                  f"knows up to {SCHEMA_VERSION}: upgrade deltatx")
        return str(rows[0][1]) if found == SCHEMA_VERSION else None

    def _ensure_schema(self) -> None:
        catalog_id = self._current_schema()
        if catalog_id is not None:
            #: this catalog's identity (the same database under any URL): what a table it manages records
            self.catalog_id = catalog_id
            return
        self.transact(self._create_schema)

    def _create_schema(self, cur: "_Cursor") -> None:
        """Create or upgrade the schema, inside a write transaction (first use, or an upgrade)."""
        self._schema_lock(cur)
        for stmt in _ddl(self._serial(), self._blob()):
            cur.execute(stmt)
        cur.execute("CREATE INDEX IF NOT EXISTS deltatx_commits_seq ON deltatx_commits (catalog_seq)")
        ids = cur.execute("SELECT id FROM deltatx_catalog_info").fetchall()
        if not ids:
            ids = [(str(uuid.uuid4()),)]
            cur.execute("INSERT INTO deltatx_catalog_info (id) VALUES (?)", ids[0])
        #: this catalog's identity (the same database under any URL of it): what a table it manages records
        self.catalog_id = str(ids[0][0])
        rows = cur.execute("SELECT version FROM deltatx_schema_version").fetchall()
        if not rows:
            cur.execute(_URI_INDEX)
            cur.execute("INSERT INTO deltatx_schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            return
        found = rows[0][0]
        if found > SCHEMA_VERSION:
            raise CatalogURLError(f"catalog {self.url!r} has schema version {found}; this deltatx "
                                  f"knows up to {SCHEMA_VERSION}: upgrade deltatx")
        if found < 2:  # version 1 catalogs: every table keeps maintenance allowed
            cur.execute("ALTER TABLE deltatx_tables ADD COLUMN maintenance TEXT NOT NULL DEFAULT 'allowed'")
        if found < 3 and "content" not in cur.columns("deltatx_commits"):
            # version 2 catalogs: their commits are all staged files (content NULL)
            cur.execute(f"ALTER TABLE deltatx_commits ADD COLUMN content {self._blob()}")
        if found < 4 and "plain" not in cur.columns("deltatx_commits"):
            # older commits count as not plain: a commuting offer reads them as any rebase does
            cur.execute("ALTER TABLE deltatx_commits ADD COLUMN plain BOOLEAN NOT NULL DEFAULT FALSE")
        upgraded = SCHEMA_VERSION
        if found < 5:
            if "published_through" not in cur.columns("deltatx_tables"):
                # nothing verified yet: the first publish_pending of each table checks its
                # ratified versions whose bytes the catalog still has against _delta_log
                cur.execute("ALTER TABLE deltatx_tables ADD COLUMN published_through BIGINT NOT NULL DEFAULT -1")
            shared = cur.execute("SELECT uri FROM deltatx_tables GROUP BY uri HAVING COUNT(*) > 1").fetchall()
            if shared:
                # the defect the index prevents happened already: which name is right is the
                # operator's call. New names are still refused a registered path (_check_new);
                # the upgrade completes at the first open after one of each pair is dropped
                names = cur.execute("SELECT name, uri FROM deltatx_tables WHERE uri IN (SELECT uri FROM "
                                    "deltatx_tables GROUP BY uri HAVING COUNT(*) > 1) ORDER BY uri, name").fetchall()
                warnings.warn(f"catalog {self.url!r}: several names share one path ({names}); each path "
                              f"must have one name — drop all but one (drop_table without purge)",
                              RuntimeWarning, stacklevel=6)
                upgraded = 4
            else:
                cur.execute(_URI_INDEX)
        if found < upgraded:
            cur.execute("UPDATE deltatx_schema_version SET version = ?", (upgraded,))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._discard()

    # ---- the catalog's operations -------------------------------------------------------------
    def lease(self, since: dict[str, int], content: bool = True) -> "CommitLease":
        """Take the commit lock of the tables in ``since`` ({table id: first version wanted})
        and read what was ratified from those versions on (their bytes too unless not ``content``).
        Taken again when the database rolled the attempt back (nothing is written before the lease
        is returned)."""
        return self._lease_reading(lambda cur: self._read_for_commit(cur, since, content))

    def _lease_reading(self, read: Callable[["_Cursor"], dict[str, list[RatifiedCommit]]]) -> "CommitLease":
        cur, commits, _ = self._run_open(read)
        self.current_lease = CommitLease(self, cur, commits)
        return self.current_lease

    def _commuting_view(self, cur: "_Cursor", table_id: str, version: int,
                        through: dict[str, int]) -> dict[str, list[RatifiedCommit]]:
        """Inside an open write transaction: what a commuting offer of ``version`` needs to know,
        in two indexed statements whatever the number of winners — the latest version, preceded
        by the oldest non-plain one from ``version`` on when there is one (so that
        :func:`next_free_version` says "rebase"). Reading every winner's flags instead made each
        offer of a writer that never catches up cost one row per commit since its snapshot.
        ``through`` receives the table's published_through."""
        self.lock_tables(cur, [table_id])
        latest = cur.execute(_LATEST_FLAGS, (table_id,)).fetchall()
        if not latest:
            return {table_id: []}
        through[table_id] = int(latest[0][5])
        view = [_ratified(latest[0])]
        if view[0].version >= version:
            blocking = cur.execute(_FIRST_NOT_PLAIN_SINCE, (table_id, version)).fetchall()
            if blocking and blocking[0][0] != view[0].version:
                view.insert(0, _ratified(blocking[0]))
        return {table_id: view}

    def offer(self, table_id: str, version: int, make_row: "MakeRow", known: RatifiedCommit | None, now_ms: int,
              commutes: bool = False, on_ratified: "OnRatified | None" = None
              ) -> tuple[Ratification | None, "CommitLease"]:
        """One offer of ``version``, in one database transaction under the table's commit lock:
        if the latest ratified version is ``version - 1``, ratify ``make_row(latest, version)``.
        With ``commutes`` (the commit is a blind append that commutes with plain commits,
        conflicts/commuting.py) it is ratified after the latest version as well when every
        version from ``version`` on is plain: the checker's answer is known without their bytes.

        Returns (the row ratified — its ``version`` is where it landed — or None when the table
        had moved on) and a view of what was ratified from ``version - 1`` on — the winners,
        bytes included, unless the offer landed — for the loser's rebase. The lock is held for a
        few statements only, never across the caller's work. ``known`` is the caller's best
        knowledge of version ``version - 1`` (PostgreSQL stamps from it so as to send everything
        in one round trip). ``on_ratified(row, view)`` runs once the row is ratified — where the
        backend can, before the next writer may ratify (SQLite: still first in the writers' queue),
        so that the committer publishes in order without waiting for, or redoing, anyone's work."""
        if commutes:
            through: dict[str, int] = {}
            lease = self._lease_reading(lambda cur: self._commuting_view(cur, table_id, version, through))
            lease.through = through
        else:
            lease = self.lease({table_id: version - 1})
        try:
            commits = lease.commits.get(table_id, [])
            at = next_free_version(commits, version, commutes)
            if at is None:
                if commutes and commits:  # the rebase needs the winners' bytes after all
                    lease.commits[table_id] = self._ratified_since(lease._cur, table_id, version - 1)
                return None, lease
            row = make_row(commits[-1], at)
            lease.ratify([row], row.txn_id, now_ms,
                         then=None if on_ratified is None else lambda: on_ratified(row, lease))
            return row, lease
        finally:
            lease.release()

    def ratify(self, rows: Sequence[Ratification], catalog_txn_id: str, now_ms: int,
               extra: Any = None, *, lease: "CommitLease | None" = None) -> int:
        """Ratify every row in ONE transaction, or none.

        Under a :class:`CommitLease` the caller has read the tables' latest versions while holding
        their lock, so the rows are next by construction (the primary key stays the backstop) and
        the lease's transaction commits. Without one (create, register), each version must follow
        the table's latest ratified one with a larger in-commit timestamp, else DuplicateRowError.
        ``extra(cur)`` runs inside the same transaction (register/drop)."""
        if lease is not None:
            return lease.ratify(rows, catalog_txn_id, now_ms, extra)

        def ratify(cur: _Cursor) -> int:
            if extra is not None:
                extra(cur)
            for r in sorted(rows, key=lambda r: (r.table_id, r.version)):
                prev = cur.execute(_LATEST, (r.table_id,)).fetchall()
                if prev and (prev[0][0] != r.version - 1 or prev[0][1] >= r.ict):
                    raise DuplicateRowError(f"version {r.version} of {r.table_id} is not next")
                if not prev and r.version != 0 and (r.staged_name is not None or r.content is not None):
                    raise DuplicateRowError(f"table {r.table_id} is not registered")
            return self._insert(cur, rows, catalog_txn_id, now_ms)

        return self.transact(ratify)

    def _insert(self, cur: "_Cursor", rows: Sequence[Ratification], catalog_txn_id: str, now_ms: int,
                commit: bool = False) -> int:
        """Insert one catalog commit and its rows; with ``commit`` the backend may commit too
        (PostgreSQL sends it all as one round trip)."""
        seq = cur.insert_returning_seq(catalog_txn_id, now_ms)
        # one lock order for everyone: two catalog transactions inserting (a, n), (b, m) in
        # opposite orders deadlock on PostgreSQL's unique index (found by the bank2 harness)
        for r in sorted(rows, key=lambda r: (r.table_id, r.version)):
            cur.execute(_INSERT_COMMIT, (r.table_id, r.version, r.staged_name, r.txn_id, r.ict, seq, r.content,
                                         r.plain))
        return seq

    def drop_content(self, table_id: str, versions: Sequence[int]) -> None:
        """Forget the bytes of inline commits whose published files are durable. The table's row
        lock comes first (:meth:`lock_tables`): a release or drop forgetting the table deletes
        these rows under it."""
        if versions:
            def drop(cur: _Cursor) -> None:
                self.lock_tables(cur, [table_id])
                for version in versions:
                    cur.execute("UPDATE deltatx_commits SET content = NULL WHERE table_id = ? AND version = ?",
                                (table_id, version))

            self.transact(drop)

    def publish_state(self, table_id: str) -> tuple[int, int, int] | None:
        """(latest ratified version, its in-commit timestamp, published_through) in one query;
        None for an unknown table."""
        rows = self.query(
            "SELECT c.version, c.ict, t.published_through FROM deltatx_commits c JOIN deltatx_tables t "
            "ON t.id = c.table_id WHERE c.table_id = ? ORDER BY c.version DESC LIMIT 1", (table_id,))
        return (int(rows[0][0]), int(rows[0][1]), int(rows[0][2])) if rows else None

    def mark_published(self, marks: Sequence[tuple[str, int, int]]) -> None:
        """Record that versions ``first..last`` of each ``(table_id, first, last)`` are verified
        in ``_delta_log``: published_through moves to ``last`` when it had reached ``first - 1``
        (it only ever covers a contiguous prefix of the log)."""
        if not marks and not self._deferred_marks:
            return
        if self._write_cur is not None and self._write_thread == threading.get_ident():
            if self._in_then:
                # a committer publishing after its write committed, the writer lock still held
                # (SQLite: before the next writer may ratify): the marks go in a transaction of
                # their own on this connection, in version order — none is lost, for a mark
                # applies only next to the last one and a lost one would leave every later
                # reader verifying every version since
                if self._conn is None:  # lost with the write it followed: the next reader verifies again
                    self._deferred_marks = []
                    return
                cur = self._conn.cursor()
                try:
                    self._begin(cur)
                    for table_id, first, last in sorted([*self._deferred_marks, *marks], key=lambda m: (m[0], m[1])):
                        cur.execute(self._sql(_MARK_PUBLISHED), (last, table_id, first - 1, last))
                    self._commit(self._conn)
                except BaseException as exc:
                    err = self._failure(exc, committing=True)
                    _close_quietly(cur)  # before a rollback that may discard the connection (end_write)
                    self._rollback_quietly()
                    self._deferred_marks = []
                    _throw(err, exc)
                finally:
                    _close_quietly(cur)
                self._deferred_marks = []
                return
            # inside this thread's open write transaction: after it (the committer's record_published)
            self._deferred_marks.extend(marks)
            return
        # in table order, as every other statement that locks several tables' rows takes them
        # (a lease's FOR UPDATE): two committers marking two tables in opposite orders deadlock
        marks = sorted([*self._deferred_marks, *marks], key=lambda m: (m[0], m[1]))
        self._deferred_marks = []

        def mark(cur: _Cursor) -> None:
            for table_id, first, last in marks:
                cur.execute(_MARK_PUBLISHED, (last, table_id, first - 1, last))

        self.transact(mark)

    def latest(self, table_id: str) -> tuple[int, int] | None:
        """(latest ratified version, its in-commit timestamp), None for an unknown table."""
        rows = self.query("SELECT version, ict FROM deltatx_commits WHERE table_id = ? ORDER BY version DESC LIMIT 1",
                          (table_id,))
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def ratified_after(self, table_id: str, version: int, limit: int | None = None) -> list[RatifiedCommit]:
        """Every ratified version > ``version``, ascending (the first ``limit`` of them)."""
        if limit is None:
            return [_ratified(r) for r in self.query(_RATIFIED_SINCE, (table_id, version + 1))]
        return [_ratified(r) for r in self.query(_RATIFIED_SINCE + " LIMIT ?", (table_id, version + 1, limit))]


_MARK_PUBLISHED = ("UPDATE deltatx_tables SET published_through = ? WHERE id = ? AND published_through >= ? "
                   "AND published_through < ?")

_INSERT_COMMIT = ("INSERT INTO deltatx_commits (table_id, version, staged_name, txn_id, ict, catalog_seq, content, "
                  "plain) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")

#: ``on_ratified(row, view)``: what a committer does once its offer is ratified (publish it);
#: returns the versions (first, last) it verified in ``_delta_log``, if any
OnRatified = Callable[[Ratification, "CommitLease"], "tuple[int, int] | None"]

#: ``make_row(previous, version)``: the row ratifying the caller's bytes as ``version``, stamped
#: after ``previous`` (the latest ratified version, None for a table's first)
MakeRow = Callable[[RatifiedCommit | None, int], Ratification]


def next_free_version(commits: Sequence[RatifiedCommit], version: int, commutes: bool) -> int | None:
    """Where an offer of ``version`` lands, given what was ratified from ``version - 1`` on:
    ``version`` when it is next; after the latest when the commit ``commutes`` and every
    winner is plain; None when it must rebase first (or the catalog is behind the writer)."""
    if not commits:
        return None
    latest = commits[-1].version
    if latest == version - 1:
        return version
    if commutes and latest >= version and all(c.plain for c in commits if c.version >= version):
        return latest + 1
    return None


def _throw(err: BaseException, exc: BaseException) -> NoReturn:
    """Raise ``err``, the typed meaning of ``exc`` (see :meth:`Database._failure`), chained to
    it for the traceback; ``exc`` itself when it had no other meaning."""
    if err is exc:
        raise exc
    raise err from (None if isinstance(err, DuplicateRowError) else exc)


def _readable_now(fd: int) -> bool:
    """Is there something to read on ``fd`` (or has its peer hung up), without waiting?

    ``poll`` where there is one: ``select`` refuses descriptors at or above FD_SETSIZE (1024), so
    in a process holding that many files (a service, a big scan) every connection would look
    dead and be replaced before each statement — and with it the session's publishing turn."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)  # pragma: no cover - Windows
    return bool(readable)


def _close_quietly(cur: Any) -> None:
    """Close a cursor; one of a lost connection has nothing left to close."""
    try:
        cur.close()
    except Exception:
        pass


def _ratified(row: Sequence[Any]) -> RatifiedCommit:
    content = row[3]
    return RatifiedCommit(int(row[0]), int(row[1]), row[2], None if content is None else bytes(content),
                          bool(row[4]) if len(row) > 4 else False)


class CommitLease:
    """The commit lock of some tables, held in one open write transaction of the catalog.

    Taken by a committer (:meth:`Database.lease`) with what was ratified since its snapshot; while
    it is held nobody else can ratify those tables, so a rebase on :meth:`commits` is final and
    :meth:`ratify` cannot lose. Ends with :meth:`ratify` (commit) or :meth:`release` (roll back):
    a process that dies in between holds nothing (its connection's transaction rolls back).
    """

    def __init__(self, db: Database, cur: "_Cursor | None", commits: dict[str, list[RatifiedCommit]],
                 through: dict[str, int] | None = None):
        self.db = db
        self._cur = cur
        self.commits = commits
        #: {table id: published_through} where the read learnt it (the versions the catalog
        #: verified in ``_delta_log``; CatalogLogStore.publish_ratified skips looking at those)
        self.through: dict[str, int] = through or {}
        self.owner = threading.get_ident()
        self.open = cur is not None

    @classmethod
    def view(cls, db: Database, commits: dict[str, list[RatifiedCommit]],
             through: dict[str, int] | None = None) -> "CommitLease":
        """What an offer read, with no lock held (a rebase reads its winners from it)."""
        return cls(db, None, commits, through)

    def latest(self, table_id: str) -> RatifiedCommit | None:
        """The table's latest ratified version (None: the catalog does not know the table)."""
        found = self.commits.get(table_id)
        return found[-1] if found else None

    def commit_at(self, table_id: str, version: int) -> RatifiedCommit | None:
        for c in self.commits.get(table_id, ()):
            if c.version == version:
                return c
        return None

    def held_here(self) -> bool:
        """Open, and this thread's (reads inside it are served from what it read)."""
        return self.open and self.owner == threading.get_ident()

    def ratify(self, rows: Sequence[Ratification], catalog_txn_id: str, now_ms: int, extra: Any = None,
               then: Callable[[], None] | None = None) -> int:
        """Insert the rows and commit; the lock is released either way. ``then`` runs after the
        commit (the rows are this lease's latest by then), before the next writer is let in.

        When the database rolled the transaction back before it committed (a deadlock victim,
        the connection lost before COMMIT: nothing written), the lock is taken again
        (:meth:`_retake`) and, if nothing was ratified meanwhile, the same rows are ratified —
        they are still next; if something was, DuplicateRowError (the caller rebases, as for a
        lost race). A connection lost during COMMIT raises CatalogUnavailableError with
        ``committed=None``: the caller looks whether its version landed."""
        if not self.open:
            raise RuntimeError("this commit lease has ended")
        self.open = False
        db = self.db
        attempt = 0
        while True:
            attempt += 1
            try:
                if extra is not None:
                    extra(self._cur)
                seq = db._insert(self._cur, rows, catalog_txn_id, now_ms, commit=True)
            except BaseException as exc:
                err = db._failure(exc)
                db.end_write(self._cur, commit=False)
                if db._retryable(err) and attempt < TRANSIENT_ATTEMPTS:
                    db._backoff(attempt)
                    self._retake()
                    continue
                _throw(err, exc)
            committed = False

            def ratified() -> None:  # the new versions are the lease's latest now (the committer publishes from here)
                nonlocal committed
                committed = True
                for r in rows:
                    self.commits.setdefault(r.table_id, []).append(
                        RatifiedCommit(r.version, r.ict, r.staged_name, r.content, r.plain))
                if then is not None:
                    then()

            try:
                db.end_write(self._cur, commit=True, then=ratified)
            except CatalogUnavailableError as err:
                # rolled back at COMMIT (not ``then``'s failure: it runs once committed)
                if not committed and err.committed is False and attempt < TRANSIENT_ATTEMPTS:
                    db._backoff(attempt)
                    self._retake()
                    continue
                raise
            return seq

    def _retake(self) -> None:
        """Take this lease's lock again after the database rolled its transaction back, and check
        that every table it locked is where it read it (same latest version, same in-commit
        timestamp): then what the caller checked and built under the lock still holds. Raises
        DuplicateRowError when one moved (or went): the caller rebases, as when it loses a race."""
        since = {table_id: (commits[-1].version if commits else 0) for table_id, commits in self.commits.items()}
        fresh = self.db.lease(since, content=False)
        for table_id, commits in self.commits.items():
            now = fresh.commits.get(table_id, [])
            was = [(c.version, c.ict) for c in commits[-1:]]
            if [(c.version, c.ict) for c in now] != was:
                fresh.release()
                raise DuplicateRowError(f"table {table_id} moved while the catalog's transaction was rolled back "
                                        f"(now {[(c.version, c.ict) for c in now]}, read {was})")
        self._cur = fresh._cur
        fresh.open = False  # this lease carries on with its transaction
        self.db.current_lease = self

    def release(self) -> None:
        """Roll back and let the next writer in (no-op once ratified or released)."""
        if self.open:
            self.open = False
            self.db.end_write(self._cur, commit=False)


class _Cursor:
    """A cursor that speaks ``?`` on both backends and returns itself from execute()."""

    def __init__(self, db: Database, cur: Any):
        self.db, self.cur = db, cur

    def execute(self, sql: str, params: Sequence[Any] = ()) -> "_Cursor":
        self.cur.execute(self.db._sql(sql), tuple(params))
        return self

    def fetchall(self) -> list[tuple]:
        return self.cur.fetchall()

    def columns(self, table: str) -> list[str]:
        """Column names of ``table`` (the same query on both backends)."""
        self.cur.execute(f"SELECT * FROM {table} WHERE 1 = 0")
        names = [d[0] for d in self.cur.description]
        self.cur.fetchall()
        return names

    def insert_returning_seq(self, txn_id: str, now_ms: int) -> int:
        self.execute("INSERT INTO deltatx_catalog_commits (txn_id, committed_ms) VALUES (?, ?) RETURNING seq",
                     (txn_id, now_ms))
        return int(self.cur.fetchall()[0][0])


class SQLiteDatabase(Database):
    """Embedded default: WAL (readers never block the writer), writers queued on an flock and
    then ``BEGIN IMMEDIATE`` (the database's write lock, taken up front instead of on upgrade
    from a read lock), a busy timeout instead of errors.

    ``synchronous = NORMAL`` (with WAL): a commit is in the WAL before COMMIT returns, so a
    ratification survives the death of any process — the crash model the harness checks — and
    the WAL's order keeps the catalog consistent even across an OS crash, which may only take
    back the newest ratifications (the WAL is fsynced at checkpoints). FULL would fsync the WAL
    inside the commit lock on every commit: under eight writers an fsync costs milliseconds,
    and every writer queued behind it waits that long."""

    dialect = "sqlite"

    def __init__(self, url: str, path: str):
        self.path = path
        self._lock_fd: int | None = None
        self._lock_pid: int | None = None  # the process that opened ``_lock_fd``
        super().__init__(url)

    def _connect(self) -> sqlite3.Connection:
        parent = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(parent):
            raise CatalogURLError(f"catalog {self.url!r}: directory {parent!r} does not exist")
        if os.path.isdir(self.path):
            raise CatalogURLError(f"catalog {self.url!r}: {self.path!r} is a directory, not a SQLite database file")
        self._open_writer_lock()
        conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA busy_timeout = 60000")
            conn.execute("PRAGMA journal_mode = WAL")  # reads the file: fails on one that is no database
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.DatabaseError as exc:
            conn.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
            raise CatalogURLError(f"catalog {self.url!r}: {self.path!r} cannot be opened as a SQLite database "
                                  f"({exc})") from exc
        return conn

    def _open_writer_lock(self) -> None:
        """Open ``<db>.writelock`` (:meth:`_acquire_writer`) once per process.

        A reconnect (the connection discarded after a failed rollback) keeps the open file:
        opening another each time leaked one descriptor per reconnect. A forked child opens its
        own — an flock belongs to the open file both processes' descriptors share, so the
        parent's would not exclude the child — and closes the copy it inherited, which leaves
        the parent's lock alone (it goes only with the last descriptor of that open file)."""
        if not fcntl:
            self._lock_fd = None
            return
        if self._lock_fd is not None:
            if self._lock_pid == os.getpid():
                return
            try:
                os.close(self._lock_fd)
            except OSError:
                pass
        self._lock_fd = os.open(self.path + ".writelock", os.O_RDWR | os.O_CREAT, 0o644)
        self._lock_pid = os.getpid()

    def _commit(self, conn: Any) -> None:
        if conn.in_transaction:
            conn.execute("COMMIT")

    def _rollback(self, conn: Any) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")

    def _acquire_writer(self) -> None:
        """Writers queue on an flock of ``<db>.writelock`` before ``BEGIN IMMEDIATE``.

        Why: SQLite's busy handler polls a held lock with sleeps growing to 100 ms, so a waiter
        sleeps long past the holder's sub-millisecond commit. The kernel wakes an flock waiter as
        soon as the lock is released."""
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)

    def _release_writer(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def close(self) -> None:
        super().close()
        if self._lock_fd is not None:
            try:
                os.close(self._lock_fd)
            except OSError:
                pass
            self._lock_fd = None

    def _serial(self) -> str:
        return "INTEGER PRIMARY KEY AUTOINCREMENT"

    def _blob(self) -> str:
        return "BLOB"

    def _begin(self, cur: Any) -> None:
        cur.execute("BEGIN IMMEDIATE")

    def _is_duplicate(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.IntegrityError)

    def _is_database_error(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.Error)

    def _read(self, sql: str, params: Sequence[Any]) -> list[tuple]:
        # autocommit (isolation_level=None): the statement is its own read transaction, which in
        # WAL mode never waits for a writer
        return self._conn_for_process().execute(sql, tuple(params)).fetchall()



class PostgresDatabase(Database):
    """PostgreSQL through psycopg 3: writers on many machines share one catalog.

    One round trip per offer: the server-side function ``deltatx_offer`` takes the table's row
    lock, checks that the offered version is next, ratifies it and returns what was ratified since
    — one statement, its own transaction. Reads are single statements too. The connection is in
    autocommit mode so that a one-statement transaction costs one round trip (psycopg would send
    BEGIN and COMMIT separately otherwise); multi-statement writes (create, register, a lock kept
    across a rebase, multi-table commits) run in explicit BEGIN … COMMIT. psycopg prepares a
    statement on the server after a few executions."""

    dialect = "postgresql"
    marks_in_offer = True  # in the statement that ends the publishing turn: no extra round trip

    def _connect(self) -> Any:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise CatalogURLError("a postgresql:// catalog needs psycopg 3: pip install 'psycopg[binary]>=3.2'") from exc
        try:
            return psycopg.connect(self.url, autocommit=True)
        except psycopg.Error as exc:
            raise CatalogURLError(f"cannot connect to catalog {self.url!r}: {exc}") from exc

    def _serial(self) -> str:
        return "BIGSERIAL PRIMARY KEY"

    def _blob(self) -> str:
        return "BYTEA"

    def _begin(self, cur: Any) -> None:
        cur.execute("BEGIN")

    def _is_duplicate(self, exc: BaseException) -> bool:
        import psycopg

        # only a unique violation: a deadlock victim did not lose a race for a row, it was rolled
        # back whole and runs again (_is_transient)
        return isinstance(exc, psycopg.errors.UniqueViolation)

    def _is_database_error(self, exc: BaseException) -> bool:
        import psycopg

        return isinstance(exc, psycopg.Error)

    def _is_transient(self, exc: BaseException) -> bool:
        import psycopg

        # SQLSTATE 40P01 and 40001: the transaction was rolled back whole, nothing was written
        return isinstance(exc, (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure))

    def _is_lost(self, exc: BaseException) -> bool:
        import psycopg

        if not isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
            return False
        conn = self._conn
        return conn is None or conn.closed or conn.broken

    def _alive(self, conn: Any) -> bool:
        """Without a round trip: not closed or known broken, no transaction left open, and
        nothing to read. An idle connection receives nothing unasked unless its session is
        ending: a server restart or ``pg_terminate_backend`` sends its FATAL message and closes
        the socket, which psycopg only notices at the next statement — too late for a write,
        whose outcome would then be unknown. Found here, nothing was sent: the caller reconnects."""
        import psycopg

        try:
            if conn.closed or conn.broken or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                return False
            return not _readable_now(conn.fileno())
        except (OSError, ValueError, psycopg.Error):
            return False

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s")

    def _schema_lock(self, cur: "_Cursor") -> None:
        # CREATE TABLE IF NOT EXISTS races in PostgreSQL: first users queue on an advisory lock
        cur.execute("SELECT pg_advisory_xact_lock(7461636174)")

    def _current_schema(self) -> str | None:
        """Current when the tables are and ``deltatx_offer`` is this deltatx's (its body compared:
        replacing it on every open would take a lock on the function's catalog row each time)."""
        catalog_id = super()._current_schema()
        if catalog_id is None:
            return None
        rows = self.query("SELECT p.prosrc FROM pg_proc p WHERE p.oid = to_regprocedure(?)", (_OFFER_SIGNATURE,))
        return catalog_id if rows and rows[0][0] == _OFFER_BODY else None

    def _create_schema(self, cur: "_Cursor") -> None:
        super()._create_schema(cur)
        # an older deltatx's function may return other columns, which CREATE OR REPLACE cannot change
        cur.execute(f"DROP FUNCTION IF EXISTS {_OFFER_SIGNATURE}")
        cur.execute(_OFFER_FUNCTION)  # under the same advisory lock: concurrent replaces collide

    def _read(self, sql: str, params: Sequence[Any]) -> list[tuple]:
        """A read: one statement in its own transaction (autocommit), one round trip."""
        cur = self._conn_for_process().cursor()
        try:
            cur.execute(self._sql(sql), tuple(params))
            return cur.fetchall()
        finally:
            _close_quietly(cur)

    def lock_tables(self, cur: "_Cursor", table_ids: Sequence[str]) -> None:
        # The row locks come first, in one order for everyone (no deadlock between two
        # multi-table commits, or a commit and a release), and in their own statement: in READ
        # COMMITTED the reads after it take a new snapshot, which sees every version the previous
        # lock holder ratified.
        cur.execute("SELECT id FROM deltatx_tables WHERE id = ANY(?) ORDER BY id FOR UPDATE", (sorted(table_ids),))
        cur.fetchall()

    def _end_publishing_turn(self, table_id: str, mark: tuple[int, int] | None = None) -> None:
        """Release the table's publishing turn that a ratifying ``deltatx_offer`` kept (a no-op
        when this session does not hold it), recording in the same statement that versions
        ``mark`` = (first, last) are verified in ``_delta_log`` (:meth:`mark_published`).
        Should this connection be gone, so is the turn."""
        with self._lock:
            conn = self._conn
            if conn is None or self._closed or os.getpid() != self._pid:
                return  # the session that held the turn is gone, and the turn with it
            try:
                cur = conn.cursor()
            except Exception:
                self._discard()
                return
            try:
                if mark is None:
                    cur.execute("SELECT pg_advisory_unlock(hashtext('deltatx_publish'), hashtext(%s))", (table_id,))
                else:
                    cur.execute("WITH m AS (" + _MARK_PUBLISHED.replace("?", "%s") + " RETURNING 1) "
                                "SELECT pg_advisory_unlock(hashtext('deltatx_publish'), hashtext(%s))",
                                (mark[1], table_id, mark[0] - 1, mark[1], table_id))
                cur.fetchall()
            except Exception as exc:
                # a broken connection: the server released the session's locks with it (discarded
                # here: the next call reconnects); the mark is best effort, the next reader verifies
                if self._is_database_error(exc) and self._is_lost(exc):
                    self._discard()
            finally:
                _close_quietly(cur)

    def offer(self, table_id: str, version: int, make_row: MakeRow, known: RatifiedCommit | None, now_ms: int,
              commutes: bool = False, on_ratified: OnRatified | None = None
              ) -> tuple[Ratification | None, "CommitLease"]:
        """One round trip (``deltatx_offer``, which decides where a commuting offer lands — see
        :meth:`Database.offer`). The row is stamped from ``known`` beforehand; if that guess was
        stale but the offer could land (the timestamp was too small), it is sent again, stamped
        after what the first one read.

        The statement is its own transaction: rolled back whole (a deadlock victim) it is sent
        again, up to :data:`TRANSIENT_ATTEMPTS` times. A connection found gone before sending is
        replaced (:meth:`_alive`); one lost while the statement was in flight raises
        CatalogUnavailableError with ``committed=None`` — the caller looks whether it landed."""
        if known is None or known.version != version - 1:
            known = None
        view = CommitLease.view(self, {table_id: []})
        stale = rolled_back = 0
        while stale < 3:
            row = make_row(known, version)
            with self._lock:
                if self._write_cur is not None:
                    raise RuntimeError("a catalog write transaction is open already on this connection")
                try:
                    cur = self._conn_for_process().cursor()
                except BaseException as exc:  # nothing sent: the connection could not be had
                    self._raise(exc)
                try:
                    cur.execute("SELECT * FROM deltatx_offer(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                                (table_id, version, row.staged_name, row.txn_id, row.ict, row.content, now_ms,
                                 row.plain, commutes, row.ict_at))
                    rows = cur.fetchall()
                except BaseException as exc:
                    err = self._failure(exc, committing=True)  # sent: a lost connection leaves it unknown
                    self._end_publishing_turn(table_id)  # the statement failed: no turn to keep
                    rolled_back += 1
                    if self._retryable(err) and rolled_back < TRANSIENT_ATTEMPTS:
                        self._backoff(rolled_back)
                        continue
                    _throw(err, exc)
                finally:
                    _close_quietly(cur)
            stale += 1
            commits = [_ratified(r[1:6]) for r in rows]
            view = CommitLease.view(self, {table_id: commits}, {table_id: int(rows[0][6])} if rows else None)
            if rows and rows[0][0]:  # the last row is the one ratified (the one before it has its bytes)
                mine = commits[-1]  # as ratified: its timestamp may have moved past a winner's
                row = dataclasses.replace(row, version=mine.version, ict=mine.ict, content=mine.content)
                mark = None
                try:
                    if on_ratified is not None:
                        mark = on_ratified(row, view)
                finally:
                    self._end_publishing_turn(table_id, mark)
                return row, view
            if next_free_version(commits, version, commutes) is None:
                return None, view
            known = commits[-1]  # it could land: only the timestamp guess was stale
        return None, view


#: PostgreSQL's offer, one statement (and, when it ratified, one more to end the publishing turn): the table's row lock, then (each statement of a volatile
#: function sees a fresh snapshot under READ COMMITTED) the latest version, the ratification if the
#: offered version is next with a larger in-commit timestamp, and what was ratified since.
_OFFER_FUNCTION = """
CREATE OR REPLACE FUNCTION deltatx_offer(p_table TEXT, p_version BIGINT, p_staged TEXT, p_txn TEXT,
                                         p_ict BIGINT, p_content BYTEA, p_now BIGINT, p_plain BOOLEAN,
                                         p_commutes BOOLEAN, p_ict_at INTEGER)
RETURNS TABLE (out_ratified BOOLEAN, out_version BIGINT, out_ict BIGINT, out_staged TEXT, out_content BYTEA,
               out_plain BOOLEAN, out_through BIGINT)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    prev_version BIGINT;
    prev_ict BIGINT;
    new_seq BIGINT;
    at_version BIGINT := NULL;
    new_ict BIGINT := p_ict;
    new_content BYTEA := p_content;
    since BIGINT := p_version - 1;
    done BOOLEAN := FALSE;
BEGIN
    -- the table's publishing turn (session-level: a ratified offer keeps it until its committer
    -- has published, so versions are published in order without anyone redoing another's work)
    PERFORM pg_advisory_lock(hashtext('deltatx_publish'), hashtext(p_table));
    PERFORM 1 FROM deltatx_tables t WHERE t.id = p_table FOR UPDATE;
    SELECT c.version, c.ict INTO prev_version, prev_ict
        FROM deltatx_commits c WHERE c.table_id = p_table ORDER BY c.version DESC LIMIT 1;
    IF prev_version = p_version - 1 THEN
        at_version := p_version;
    ELSIF p_commutes AND prev_version >= p_version AND NOT EXISTS (
            SELECT 1 FROM deltatx_commits c
            WHERE c.table_id = p_table AND c.version >= p_version AND NOT c.plain) THEN
        at_version := prev_version + 1;  -- after plain winners only: no rebase could change it
    END IF;
    IF at_version IS NOT NULL AND prev_ict >= p_ict AND p_ict_at IS NOT NULL
            AND length((prev_ict + 1)::text) = length(p_ict::text) THEN
        -- ratified meanwhile with a later timestamp: ours moves just past it, digits in place
        new_ict := prev_ict + 1;
        new_content := overlay(p_content PLACING convert_to(new_ict::text, 'UTF8') FROM p_ict_at + 1);
    END IF;
    IF at_version IS NOT NULL AND prev_ict < new_ict THEN
        INSERT INTO deltatx_catalog_commits (txn_id, committed_ms) VALUES (p_txn, p_now)
            RETURNING deltatx_catalog_commits.seq INTO new_seq;
        INSERT INTO deltatx_commits (table_id, version, staged_name, txn_id, ict, catalog_seq, content, plain)
            VALUES (p_table, at_version, p_staged, p_txn, new_ict, new_seq, new_content, p_plain);
        done := TRUE;
        since := prev_version;  -- the version before ours (its publisher may have died) and ours
    ELSE
        PERFORM pg_advisory_unlock(hashtext('deltatx_publish'), hashtext(p_table));
    END IF;
    -- published_through too: the committer need not look whether the version before is published
    RETURN QUERY SELECT done, c.version, c.ict, c.staged_name, c.content, c.plain, t.published_through
        FROM deltatx_commits c JOIN deltatx_tables t ON t.id = c.table_id
        WHERE c.table_id = p_table AND c.version >= since ORDER BY c.version;
END
$$
"""
#: how :meth:`PostgresDatabase._current_schema` finds the installed function and tells whether it
#: is this one (PostgreSQL keeps the body between the dollar quotes as given)
_OFFER_SIGNATURE = "deltatx_offer(text, bigint, text, text, bigint, bytea, bigint, boolean, boolean, integer)"
_OFFER_BODY = _OFFER_FUNCTION.split("$$")[1]


def open_database(url: str) -> Database:
    """``sqlite:///relative/catalog.db`` (to the working directory), ``sqlite:////absolute/catalog.db``
    or ``postgresql://user@host:port/db``; anything else is refused."""
    if not isinstance(url, str) or "://" not in url:
        raise CatalogURLError(f"catalog URL {url!r} must be sqlite:///path/catalog.db or postgresql://...")
    if "\x00" in url:  # no file name or connection string holds one (the OS would refuse it untyped)
        raise CatalogURLError(f"catalog URL {url!r} contains a NUL character")
    scheme = urlparse(url).scheme.lower()
    if scheme == "sqlite":
        return SQLiteDatabase(url, sqlite_database_path(url))
    if scheme in ("postgresql", "postgres"):
        return PostgresDatabase(url)
    raise CatalogURLError(f"catalog URL {url!r}: unknown scheme {scheme!r} (use sqlite:// or postgresql://)")


def sqlite_database_path(url: str) -> str:
    """The absolute path of the database file a ``sqlite://`` catalog URL names (SQLAlchemy's
    convention: ``sqlite:///relative/to/cwd.db``, ``sqlite:////absolute/path.db``); raises
    CatalogURLError for a URL that names no file, or memory."""
    prefix = url[:len("sqlite:///")]
    path = url[len("sqlite:///"):]
    if prefix.lower() != "sqlite:///" or not path or path.endswith("/"):
        raise CatalogURLError(f"catalog URL {url!r} names no database file (sqlite:///relative/catalog.db "
                              f"or sqlite:////absolute/catalog.db)")
    if path.split("?", 1)[0] == ":memory:":
        # SQLAlchemy's in-memory database: here it would be a file named ':memory:' in the
        # working directory. An in-memory catalog would be one process's alone, and a table
        # ratified there outlives it in _delta_log, managed by a catalog nobody can open again
        raise CatalogURLError(f"catalog URL {url!r}: a catalog cannot live in memory; it must be a database "
                              f"file that every process writing its tables opens (sqlite:///relative/catalog.db "
                              f"or sqlite:////absolute/catalog.db), or a postgresql:// server")
    return os.path.abspath(path)
