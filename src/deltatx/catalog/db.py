"""The catalog's database: one schema, two backends (SQLite embedded, PostgreSQL for many machines).

Why a database: the put-if-absent that a Delta log needs from storage becomes a unique row
``(table_id, version)`` in ``deltatx_commits``. A database gives it in well under a millisecond and,
unlike object storage, inside a transaction that can ratify the next version of *several* tables at
once — the basis of multi-table transactions.

The schema is versioned (``deltatx_schema_version``) and created on first use. SQL is written once
with ``?`` placeholders; the PostgreSQL backend rewrites them to ``%s``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence
from urllib.parse import urlparse

from ..errors import CatalogURLError

try:  # the SQLite writers' queue (POSIX); elsewhere SQLite's own busy handler alone
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

SCHEMA_VERSION = 2  # 2: deltatx_tables.maintenance (maintenance gating)


class DuplicateRowError(Exception):
    """Internal: a unique constraint refused a row (the database's put-if-absent lost)."""


@dataclass(frozen=True)
class Ratification:
    """One row to ratify: ``version`` of ``table_id``, staged as ``staged_name`` (None = already
    in ``_delta_log``), stamped with in-commit timestamp ``ict``."""

    table_id: str
    version: int
    staged_name: str | None
    txn_id: str
    ict: int


def _ddl(serial: str) -> list[str]:
    return [
        "CREATE TABLE IF NOT EXISTS deltatx_schema_version (version INTEGER NOT NULL)",
        "CREATE TABLE IF NOT EXISTS deltatx_tables (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, "
        "uri TEXT NOT NULL, created_ms BIGINT NOT NULL, maintenance TEXT NOT NULL DEFAULT 'allowed')",
        # one row per catalog transaction: the global order the bank2 checker walks
        f"CREATE TABLE IF NOT EXISTS deltatx_catalog_commits (seq {serial}, txn_id TEXT NOT NULL, "
        "committed_ms BIGINT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS deltatx_commits (table_id TEXT NOT NULL, version BIGINT NOT NULL, "
        "staged_name TEXT, txn_id TEXT NOT NULL, ict BIGINT NOT NULL, catalog_seq BIGINT NOT NULL, "
        "PRIMARY KEY (table_id, version))",
    ]


class Database:
    """A connection with the few operations the catalog needs; thread-safe by one lock."""

    dialect = "base"

    def __init__(self, url: str):
        self.url = url
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._conn = self._connect()
        self._ensure_schema()

    # ---- backend hooks ------------------------------------------------------------------------
    def _connect(self) -> Any:
        raise NotImplementedError

    def _serial(self) -> str:
        raise NotImplementedError

    def _begin(self, cur: Any) -> None:
        raise NotImplementedError

    def _is_duplicate(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def _sql(self, sql: str) -> str:
        return sql

    def _commit(self, conn: Any) -> None:
        conn.commit()

    def _rollback(self, conn: Any) -> None:
        conn.rollback()

    def _schema_lock(self, cur: "_Cursor") -> None:
        """Serialise concurrent first use (SQLite: BEGIN IMMEDIATE does already)."""

    # ---- plumbing -----------------------------------------------------------------------------
    def _conn_for_process(self) -> Any:
        if os.getpid() != self._pid:  # a forked child must not share the parent's socket/file
            self._pid = os.getpid()
            self._conn = self._connect()
        return self._conn

    @contextmanager
    def write(self) -> Iterator[Any]:
        """One write transaction; a unique violation inside becomes DuplicateRowError."""
        with self._lock:
            conn = self._conn_for_process()
            cur = conn.cursor()
            try:
                self._begin(cur)
                yield _Cursor(self, cur)
                self._commit(conn)
            except BaseException as exc:
                self._rollback(conn)
                if self._is_duplicate(exc):
                    raise DuplicateRowError(str(exc)) from None
                raise
            finally:
                cur.close()

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """A read in its own (short) transaction: one consistent view for a multi-row query."""
        with self._lock:
            conn = self._conn_for_process()
            cur = conn.cursor()
            try:
                cur.execute(self._sql(sql), tuple(params))
                rows = cur.fetchall()
                conn.commit()
                return rows
            except BaseException:
                conn.rollback()
                raise
            finally:
                cur.close()

    def _ensure_schema(self) -> None:
        with self.write() as cur:
            self._schema_lock(cur)
            for stmt in _ddl(self._serial()):
                cur.execute(stmt)
            cur.execute("CREATE INDEX IF NOT EXISTS deltatx_commits_seq ON deltatx_commits (catalog_seq)")
            rows = cur.execute("SELECT version FROM deltatx_schema_version").fetchall()
            if not rows:
                cur.execute("INSERT INTO deltatx_schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            elif rows[0][0] == 1:  # version 1 catalogs: every table keeps maintenance allowed
                cur.execute("ALTER TABLE deltatx_tables ADD COLUMN maintenance TEXT NOT NULL DEFAULT 'allowed'")
                cur.execute("UPDATE deltatx_schema_version SET version = ?", (SCHEMA_VERSION,))
            elif rows[0][0] > SCHEMA_VERSION:
                raise CatalogURLError(f"catalog {self.url!r} has schema version {rows[0][0]}; this deltatx "
                                      f"knows up to {SCHEMA_VERSION}: upgrade deltatx")

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.close()
            except Exception:
                pass

    # ---- the catalog's operations -------------------------------------------------------------
    def ratify(self, rows: Sequence[Ratification], catalog_txn_id: str, now_ms: int,
               extra: Any = None) -> int:
        """Ratify every row in ONE transaction, or none: each version must follow the table's
        latest ratified one with a larger in-commit timestamp (else DuplicateRowError: someone
        else won a version). ``extra(cur)`` runs inside the same transaction (register/drop)."""
        with self.write() as cur:
            if extra is not None:
                extra(cur)
            seq = cur.insert_returning_seq(catalog_txn_id, now_ms)
            # one lock order for everyone: two catalog transactions inserting (a, n), (b, m) in
            # opposite orders deadlock on PostgreSQL's unique index (found by the bank2 harness)
            for r in sorted(rows, key=lambda r: (r.table_id, r.version)):
                prev = cur.execute(
                    "SELECT version, ict FROM deltatx_commits WHERE table_id = ? ORDER BY version DESC LIMIT 1",
                    (r.table_id,)).fetchall()
                if prev and (prev[0][0] != r.version - 1 or prev[0][1] >= r.ict):
                    raise DuplicateRowError(f"version {r.version} of {r.table_id} is not next")
                if not prev and r.version != 0 and r.staged_name is not None:
                    raise DuplicateRowError(f"table {r.table_id} is not registered")
                cur.execute("INSERT INTO deltatx_commits (table_id, version, staged_name, txn_id, ict, catalog_seq) "
                            "VALUES (?, ?, ?, ?, ?, ?)", (r.table_id, r.version, r.staged_name, r.txn_id, r.ict, seq))
            return seq

    def latest(self, table_id: str) -> tuple[int, int] | None:
        """(latest ratified version, its in-commit timestamp), None for an unknown table."""
        rows = self.query("SELECT version, ict FROM deltatx_commits WHERE table_id = ? ORDER BY version DESC LIMIT 1",
                          (table_id,))
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def ratified_after(self, table_id: str, version: int) -> list[tuple[int, str | None]]:
        """(version, staged name) of every ratified version > ``version``, ascending."""
        rows = self.query("SELECT version, staged_name FROM deltatx_commits WHERE table_id = ? AND version > ? "
                          "ORDER BY version", (table_id, version))
        return [(int(v), s) for v, s in rows]


class _Cursor:
    """A cursor that speaks ``?`` on both backends and returns itself from execute()."""

    def __init__(self, db: Database, cur: Any):
        self.db, self.cur = db, cur

    def execute(self, sql: str, params: Sequence[Any] = ()) -> "_Cursor":
        self.cur.execute(self.db._sql(sql), tuple(params))
        return self

    def fetchall(self) -> list[tuple]:
        return self.cur.fetchall()

    def insert_returning_seq(self, txn_id: str, now_ms: int) -> int:
        self.execute("INSERT INTO deltatx_catalog_commits (txn_id, committed_ms) VALUES (?, ?) RETURNING seq",
                     (txn_id, now_ms))
        return int(self.cur.fetchall()[0][0])


class SQLiteDatabase(Database):
    """Embedded default: WAL (readers never block the writer), a busy timeout instead of errors
    under contention, and ``BEGIN IMMEDIATE`` so writers queue for the lock up front instead of
    failing on upgrade from a read lock."""

    dialect = "sqlite"

    def __init__(self, url: str, path: str):
        self.path = path
        super().__init__(url)

    def _connect(self) -> sqlite3.Connection:
        parent = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(parent):
            raise CatalogURLError(f"catalog {self.url!r}: directory {parent!r} does not exist")
        self._lock_fd = os.open(self.path + ".writelock", os.O_RDWR | os.O_CREAT, 0o644) if fcntl else None
        conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 60000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: durable across process crashes
        return conn

    def _commit(self, conn: Any) -> None:
        if conn.in_transaction:
            conn.execute("COMMIT")

    def _rollback(self, conn: Any) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")

    @contextmanager
    def write(self) -> Iterator[Any]:
        """Writers queue on an flock of ``<db>.writelock`` before ``BEGIN IMMEDIATE``.

        Why: SQLite's busy handler polls a held lock with sleeps growing to 100 ms, so under 8
        contending processes a waiter sleeps long past the holder's sub-millisecond commit, its
        read version goes stale, and it loses race after race (P14 saw commits give up after 100
        attempts). The kernel wakes an flock waiter as soon as the lock is released."""
        with self._lock:
            self._conn_for_process()  # (re)opens the lock file in a forked child too
            fd = self._lock_fd
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                with super().write() as cur:
                    yield cur
            finally:
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        super().close()
        if getattr(self, "_lock_fd", None) is not None:
            try:
                os.close(self._lock_fd)
            except OSError:
                pass
            self._lock_fd = None

    def _serial(self) -> str:
        return "INTEGER PRIMARY KEY AUTOINCREMENT"

    def _begin(self, cur: Any) -> None:
        cur.execute("BEGIN IMMEDIATE")

    def _is_duplicate(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.IntegrityError)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._lock:
            return self._conn_for_process().execute(sql, tuple(params)).fetchall()


class PostgresDatabase(Database):
    """PostgreSQL through psycopg 3: writers on many machines share one catalog."""

    dialect = "postgresql"

    def _connect(self) -> Any:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise CatalogURLError("a postgresql:// catalog needs psycopg 3: pip install 'psycopg[binary]>=3.2'") from exc
        try:
            return psycopg.connect(self.url, autocommit=False)
        except psycopg.OperationalError as exc:
            raise CatalogURLError(f"cannot connect to catalog {self.url!r}: {exc}") from exc

    def _serial(self) -> str:
        return "BIGSERIAL PRIMARY KEY"

    def _begin(self, cur: Any) -> None:
        pass  # psycopg opens a transaction on the first statement

    def _is_duplicate(self, exc: BaseException) -> bool:
        import psycopg

        # a deadlock victim was rolled back whole: nothing ratified, so it lost the race like a duplicate
        return isinstance(exc, (psycopg.errors.UniqueViolation, psycopg.errors.DeadlockDetected))

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s")

    def _schema_lock(self, cur: "_Cursor") -> None:
        # CREATE TABLE IF NOT EXISTS races in PostgreSQL: first users queue on an advisory lock
        cur.execute("SELECT pg_advisory_xact_lock(7461636174)")


def open_database(url: str) -> Database:
    """``sqlite:///path/catalog.db`` or ``postgresql://user@host:port/db``; anything else is refused."""
    if not isinstance(url, str) or "://" not in url:
        raise CatalogURLError(f"catalog URL {url!r} must be sqlite:///path/catalog.db or postgresql://...")
    scheme = urlparse(url).scheme.lower()
    if scheme == "sqlite":
        path = url[len("sqlite://"):]
        if not path or path == "/":
            raise CatalogURLError(f"catalog URL {url!r} names no database file (sqlite:///path/catalog.db)")
        return SQLiteDatabase(url, path)
    if scheme in ("postgresql", "postgres"):
        return PostgresDatabase(url)
    raise CatalogURLError(f"catalog URL {url!r}: unknown scheme {scheme!r} (use sqlite:// or postgresql://)")
