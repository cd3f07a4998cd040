"""Commits through the catalog are serialized in the database, on SQLite and PostgreSQL: a loser
rebases on the winners its offer read (inline commits: no staged file, no fsync), a commit that
keeps losing keeps the lock through its rebase so its next offer cannot lose, big commits still go
through staged files, and the catalog keeps an inline commit's bytes until its file is durable."""

from __future__ import annotations

import os
import sqlite3
import threading

import pyarrow as pa
import pytest
from threads import run_threads

import deltatx
from deltatx import phases
from deltatx.catalog import store as catalog_store
from deltatx.catalog.db import SCHEMA_VERSION
from deltatx.errors import CatalogTableNotFoundError

SCHEMA = pa.schema([("id", pa.int64()), ("balance", pa.int64())])


def _row(i: int) -> pa.Table:
    return pa.table({"id": [i], "balance": [i]}, schema=SCHEMA)


def _log_files(uri: str) -> list[str]:
    return sorted(os.listdir(os.path.join(uri, "_delta_log")))


def _data_files(uri: str) -> list[str]:
    return sorted(f for f in os.listdir(uri) if f.endswith(".parquet"))


def _lock_is_free(url: str, table_id: str) -> bool:
    """Could another writer take the table's commit lock right now? (asks without waiting)"""
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url[len("sqlite://"):], timeout=0, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:
            return False
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(url) as conn:
        try:
            conn.execute("SELECT id FROM deltatx_tables WHERE id = %s FOR UPDATE NOWAIT", (table_id,))
            return True
        except psycopg.errors.LockNotAvailable:
            return False


@pytest.mark.parametrize("optimistic_offers", [2, 0])
def test_a_loser_rebases_on_what_its_offer_read(cat, tmp_path, monkeypatch, optimistic_offers):
    """Two writers at version 0; the second one's first offer loses. With optimistic offers left
    it lets the lock go for its rebase; without, it keeps the lock. Either way it commits on its
    next offer, stamped once, and writes no file but its data file and its published commit."""
    monkeypatch.setattr(catalog_store, "OPTIMISTIC_OFFERS", optimistic_offers)
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA)
    other = deltatx.Catalog(cat.url)
    first, second = cat.table("t"), other.table("t")
    tx = second.transaction()  # pinned at version 0
    tx.read(where="id = 2")  # not a blind append: it must check the winner (a commuting one need not)
    tx.append(_row(2))
    first.append(_row(1))
    log_before = _log_files(uri)
    seen: list[tuple[str, bool]] = []

    def observe(phase, **ctx):
        if phase == "resolve_conflict":
            seen.append((phase, _lock_is_free(cat.url, first.store.table_id)))
        elif phase == "ratified":
            seen.append((phase, ctx["version"]))

    with phases.observe(observe):
        result = tx.commit()
    other.close()
    assert (result.version, result.attempts, result.conflicts_resolved) == (2, 2, 1)
    # the lock was free during the rebase only with optimistic offers left; one ratification
    assert seen == [("resolve_conflict", optimistic_offers > 0), ("ratified", 2)]
    # the lost offer wrote nothing: no staged file, one new published commit
    assert _log_files(uri) == log_before + [f"{2:020d}.json"]
    assert not os.path.exists(os.path.join(uri, "_delta_log", "_staged_commits"))
    assert sorted(cat.table("t").to_arrow()["id"].to_pylist()) == [1, 2]


@pytest.mark.parametrize("optimistic_offers", [2, 0])
def test_blind_appends_under_contention_never_exhaust_their_offers(cat, tmp_path, monkeypatch, optimistic_offers):
    """Four writers (own connections) append at once with a retry limit of OPTIMISTIC_OFFERS + 2
    (the optimistic offers, one that keeps the lock, one that cannot lose): every commit lands
    within it, however the writers interleave."""
    monkeypatch.setattr(catalog_store, "OPTIMISTIC_OFFERS", optimistic_offers)
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA)
    writers, per_writer = 4, 15
    limit = catalog_store.OPTIMISTIC_OFFERS + 2
    start = threading.Barrier(writers)
    results: dict[int, list] = {}

    def writer(w: int) -> None:
        with deltatx.Catalog(cat.url) as mine:
            table = mine.table("t")
            start.wait()
            out = []
            for i in range(per_writer):
                tx = table.transaction(max_attempts=limit)
                tx.append(_row(w * 1000 + i))
                out.append(tx.commit().attempts)
            results[w] = out

    assert run_threads(writer, writers) == []
    assert all(1 <= a <= limit for attempts in results.values() for a in attempts)
    table = cat.table("t")
    assert table.version == writers * per_writer
    assert sorted(table.to_arrow()["id"].to_pylist()) == sorted(w * 1000 + i for w in range(writers)
                                                                 for i in range(per_writer))
    assert not os.path.exists(os.path.join(uri, "_delta_log", "_staged_commits"))


def test_a_big_commit_goes_through_a_staged_file(cat, tmp_path, monkeypatch):
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA)
    monkeypatch.setattr(catalog_store, "INLINE_COMMIT_MAX_BYTES", 0)
    other = deltatx.Catalog(cat.url)
    stale = other.table("t").transaction()
    stale.append(_row(2))
    cat.table("t").append(_row(1))
    assert stale.commit().attempts == 2  # its first offer lost: no staged file for it
    other.close()
    staged = sorted(os.listdir(os.path.join(uri, "_delta_log", "_staged_commits")))
    assert [s.split(".")[0] for s in staged] == [f"{1:020d}", f"{2:020d}"]  # one per version, none lost
    rows = cat._db.query("SELECT version, staged_name, content IS NULL FROM deltatx_commits ORDER BY version")
    assert [(int(v), n, bool(c)) for v, n, c in rows][1:] == [(1, staged[0], True), (2, staged[1], True)]
    for name in staged:
        with open(os.path.join(uri, "_delta_log", "_staged_commits", name), "rb") as a, \
                open(os.path.join(uri, "_delta_log", name.split(".")[0] + ".json"), "rb") as b:
            assert a.read() == b.read()  # published as ratified
    assert sorted(cat.table("t").to_arrow()["id"].to_pylist()) == [1, 2]


def test_a_dropped_table_refuses_the_commit_and_writes_nothing(cat, tmp_path):
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA).append(_row(1))
    handle = cat.table("t")
    other = deltatx.Catalog(cat.url)
    other.drop_table("t")
    other.close()
    log, data = _log_files(uri), _data_files(uri)
    with pytest.raises(CatalogTableNotFoundError):
        handle.append(_row(2))
    assert _log_files(uri) == log and _data_files(uri) == data


def test_inline_bytes_leave_the_catalog_once_their_file_is_durable(cat, tmp_path):
    """A writer that exits without closing its catalog leaves the bytes there; log cleanup
    (vacuum_staged) fsyncs the published files and drops them."""
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA)
    writer = deltatx.Catalog(cat.url)
    writer.table("t").append(_row(1))
    writer._published.clear()  # as if the process died before close
    writer.close()
    held = "SELECT version FROM deltatx_commits WHERE content IS NOT NULL ORDER BY version"
    assert [int(r[0]) for r in cat._db.query(held)] == [0, 1]
    cat._published.clear()
    assert cat.vacuum_staged("t", retention_hours=0) == []
    assert cat._db.query(held) == []
    assert sorted(cat.table("t").to_arrow()["id"].to_pylist()) == [1]


def test_an_emptied_published_file_is_published_again_from_the_catalog(cat, tmp_path):
    """What an OS crash can leave of a published file that never reached the disk."""
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA).append(_row(1))
    path = os.path.join(uri, "_delta_log", f"{1:020d}.json")
    with open(path, "rb") as fh:
        published = fh.read()
    open(path, "wb").close()
    fresh = deltatx.Catalog(cat.url)
    assert fresh.table("t").to_arrow()["id"].to_pylist() == [1]
    fresh.close()
    with open(path, "rb") as fh:
        assert fh.read() == published


def test_version_2_catalog_is_upgraded_to_inline_commits(tmp_path):
    url = f"sqlite:///{tmp_path}/catalog.db"
    uri = str(tmp_path / "t")
    with deltatx.Catalog(url) as c:
        c.create_table("t", uri, SCHEMA).append(_row(1))
    conn = sqlite3.connect(tmp_path / "catalog.db")  # what a version 2 catalog looks like
    conn.execute("UPDATE deltatx_commits SET content = NULL")
    conn.execute("ALTER TABLE deltatx_commits DROP COLUMN content")
    conn.execute("UPDATE deltatx_schema_version SET version = 2")
    conn.commit()
    conn.close()
    with deltatx.Catalog(url) as c:
        assert c._db.query("SELECT version FROM deltatx_schema_version") == [(SCHEMA_VERSION,)]
        c.table("t").append(_row(2))
        assert sorted(c.table("t").to_arrow()["id"].to_pylist()) == [1, 2]


def test_staged_commit_cleanup_waits_for_the_commit_lock(cat, tmp_path):
    """A committer writes its staged file and ratifies it inside one hold of the table's commit
    lock; cleanup deleting an unratified staged file meanwhile ratified a commit whose bytes were
    gone (a table no one could read, half a multi-table commit). Cleanup takes the lock: while a
    committer holds it the file stays; once it is let go unratified, the file is a dead one's."""
    t = cat.create_table("t", str(tmp_path / "t"), SCHEMA)
    t.append(_row(1))
    store = cat.store("t")
    staged_dir = os.path.join(str(tmp_path / "t"), "_delta_log", "_staged_commits")
    os.makedirs(staged_dir, exist_ok=True)
    in_flight = os.path.join(staged_dir, f"{2:020d}.{'0' * 8}-0000-0000-0000-{'0' * 12}.json")
    with open(in_flight, "wb") as fh:
        fh.write(b'{"commitInfo":{}}\n')
    os.utime(in_flight, (1, 1))  # old enough for any retention
    janitor = deltatx.Catalog(cat.url)  # opened first: opening checks the catalog's schema (a write)
    lease = cat._db.lease({store.table_id: 1}, content=False)  # a committer between staging and ratifying
    done = threading.Event()
    deleted: list[list[str]] = []

    def clean() -> None:
        deleted.append(janitor.vacuum_staged("t", retention_hours=0))
        done.set()

    worker = threading.Thread(target=clean)
    worker.start()
    try:
        assert not done.wait(0.5), "cleanup ran while a committer held the lock"
        assert os.path.exists(in_flight)
    finally:
        lease.release()
    worker.join()
    janitor.close()
    assert deleted == [[os.path.basename(in_flight)]] and not os.path.exists(in_flight)


@pytest.mark.parametrize("hours", [-1, float("nan"), float("inf"), "x", None])
def test_staged_commit_cleanup_refuses_a_bad_retention(cat, tmp_path, hours):
    from deltatx.errors import InvalidArgumentError

    cat.create_table("t", str(tmp_path / "t"), SCHEMA)
    with pytest.raises(InvalidArgumentError, match="retention_hours"):
        cat.vacuum_staged("t", retention_hours=hours)


def test_the_retry_backoff_never_overflows():
    """2 ** (attempts - 4) as a float overflowed past ~1,027 lost attempts (max_attempts allows 10,000)."""
    from deltatx.tables.transaction import BACKOFF_CAP_S, backoff_s

    assert backoff_s(1) == 0.0 + backoff_s(1) and backoff_s(5) <= backoff_s(6)
    assert backoff_s(1100) == backoff_s(10 ** 6) == BACKOFF_CAP_S
