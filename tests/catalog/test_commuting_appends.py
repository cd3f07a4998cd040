"""Commuting appends through the catalog (conflicts/commuting.py), on SQLite and PostgreSQL: a
blind append is ratified after plain winners without the writer reading them — one offer, no
rebase — and anything else the table went through sends it down the usual road (rebase, or a
fresh start from the latest version), with the outcome an append that caught up first would have."""

from __future__ import annotations

import os
import threading

import orjson

import pyarrow as pa
import pytest
from threads import run_threads

import deltatx
from deltatx.catalog.db import RatifiedCommit, next_free_version

SCHEMA = pa.schema([("id", pa.int64()), ("balance", pa.int64())])


def _row(i: int) -> pa.Table:
    return pa.table({"id": [i], "balance": [i]}, schema=SCHEMA)


def _published(uri: str) -> list[int]:
    return sorted(int(f[:20]) for f in os.listdir(os.path.join(uri, "_delta_log")) if f.endswith(".json")
                  and f[:20].isdigit())


def _ids(table: deltatx.Table) -> list[int]:
    return sorted(table.to_arrow()["id"].to_pylist())


@pytest.fixture
def two(catalog_url, tmp_path):
    """Two writers of one table, each with its own catalog connection (two jobs)."""
    uri = str(tmp_path / "t")
    a, b = deltatx.Catalog(catalog_url), deltatx.Catalog(catalog_url)
    a.create_table("t", uri, SCHEMA)
    yield a, b, uri
    a.close()
    b.close()


def test_a_stale_append_lands_after_plain_winners_unread(two):
    a, b, uri = two
    ta, tb = a.table("t"), b.table("t")
    for i in range(1, 4):
        ta.append(_row(i))
    ta.delete("id = 1")  # a plain winner that removes a file: no blind append depends on it
    reads = []
    tb.store.read_commit = lambda v: reads.append(v) or pytest.fail("read a winner")  # type: ignore[method-assign]
    result = tb.append(_row(9))
    del tb.store.read_commit
    assert (result.version, result.attempts, result.conflicts_resolved, result.read_version) == (5, 1, 4, 0)
    assert reads == []
    assert _published(uri) == [0, 1, 2, 3, 4, 5]  # in order, nothing missing
    # read your writes: the handle catches up when asked
    assert tb.version == 5 and _ids(tb) == [2, 3, 9]
    assert _ids(a.table("t")) == [2, 3, 9]


def test_a_stale_offer_reads_a_few_rows_however_many_winners(two, monkeypatch):
    """A writer that never catches up must not pay one catalog row per commit since its snapshot
    on every offer (it made a long-running appender's commits slower and slower)."""
    import deltatx.catalog.db as db_module

    a, b, uri = two
    ta, tb = a.table("t"), b.table("t")
    for i in range(1, 41):
        ta.append(_row(i))
    rows_read = []
    real = db_module._ratified
    monkeypatch.setattr(db_module, "_ratified", lambda row: rows_read.append(row[0]) or real(row))
    result = tb.append(_row(99))
    assert (result.version, result.attempts, result.read_version) == (41, 1, 0)
    assert len(rows_read) <= 3, rows_read
    monkeypatch.undo()
    ta.set_properties({"delta.checkpointInterval": "7"})  # not plain: the next stale offer must rebase
    ta.append(_row(100))
    result = tb.append(_row(101))
    assert result.version == 44 and result.read_version == 43
    assert _ids(a.table("t")) == [*range(1, 41), 99, 100, 101]
    assert _published(uri) == list(range(45))


def test_the_catalog_records_which_commits_are_plain(two):
    a, _, _ = two
    t = a.table("t")
    t.append(_row(1))
    t.set_properties({"delta.appendOnly": "false"})
    t.append(_row(2), app_id="job", app_version=1)
    t.delete("id = 1")
    rows = a._db.query("SELECT version, plain FROM deltatx_commits ORDER BY version")
    assert [(int(v), bool(p)) for v, p in rows] == [(0, False), (1, True), (2, False), (3, False), (4, True)]


def test_a_metadata_change_sends_a_stale_append_back_to_the_latest_version(two):
    a, b, uri = two
    ta, tb = a.table("t"), b.table("t")
    ta.append(_row(1))
    ta.set_properties({"delta.checkpointInterval": "7"})  # not plain: the offer cannot land unread
    ta.append(_row(2))
    result = tb.append(_row(3))
    assert result.version == 4 and result.read_version == 3  # started again from the latest
    assert tb.properties["delta.checkpointInterval"] == "7"
    assert _ids(tb) == [1, 2, 3]
    assert _published(uri) == [0, 1, 2, 3, 4]


def test_a_stale_idempotent_append_is_still_skipped(two):
    """The stale handle never saw the winner's txn action; the catalog does not let it past it."""
    a, b, _ = two
    ta, tb = a.table("t"), b.table("t")
    ta.append(_row(1), app_id="job", app_version=1)
    skipped = tb.append(_row(2), app_id="job", app_version=1)
    assert skipped.skipped and skipped.version == 1
    assert _ids(tb) == [1]
    assert tb.append(_row(3), app_id="job", app_version=2).version == 2
    assert _ids(a.table("t")) == [1, 3]


def test_a_commuting_landing_due_a_checkpoint_catches_up_and_writes_it(two):
    a, b, uri = two
    ta, tb = a.table("t"), b.table("t")
    for i in range(1, 10):  # versions 1..9
        ta.append(_row(i))
    assert tb.append(_row(10)).version == 10
    assert os.path.exists(os.path.join(uri, "_delta_log", f"{10:020d}.checkpoint.parquet"))
    assert tb._behind_to is None and tb._snap.version == 10
    assert _ids(deltatx.Catalog(a.url).table("t")) == list(range(1, 11))


def test_concurrent_appenders_never_lose_an_offer(catalog_url, tmp_path):
    """Four writers, released together by a barrier: every append is ratified on its first
    offer (no winner is read, no rebase), every version is published once, in order."""
    uri = str(tmp_path / "t")
    with deltatx.Catalog(catalog_url) as c:
        c.create_table("t", uri, SCHEMA)
    writers, each = 4, 15
    start = threading.Barrier(writers)
    results: dict[int, list] = {}

    def writer(w: int) -> None:
        with deltatx.Catalog(catalog_url) as cat:
            t = cat.table("t")
            start.wait()
            results[w] = [t.append(_row(w * 100 + i)) for i in range(each)]

    assert run_threads(writer, writers) == []
    flat = [r for rs in results.values() for r in rs]
    assert all(r.attempts == 1 for r in flat)
    assert sorted(r.version for r in flat) == list(range(1, writers * each + 1))
    assert _published(uri) == list(range(0, writers * each + 1))
    # in-commit timestamps strictly increase (PostgreSQL moves a stale one past the winner's in place)
    icts = []
    for v in range(1, writers * each + 1):
        with open(os.path.join(uri, "_delta_log", f"{v:020d}.json"), "rb") as fh:
            icts.append(orjson.loads(fh.readline())["commitInfo"]["inCommitTimestamp"])
    assert all(a < b for a, b in zip(icts, icts[1:]))
    with deltatx.Catalog(catalog_url) as c:
        assert _ids(c.table("t")) == sorted(w * 100 + i for w in range(writers) for i in range(each))
    # deltalake reads the released table: the log is whole
    with deltatx.Catalog(catalog_url) as c:
        c.release("t")
    from deltalake import DeltaTable

    assert DeltaTable(uri).version() == writers * each + 1  # + the release commit


def test_where_an_offer_lands():
    def c(v: int, plain: bool = True) -> RatifiedCommit:
        return RatifiedCommit(v, 1000 + v, None, None, plain)

    assert next_free_version([c(4)], 5, commutes=False) == 5
    assert next_free_version([c(4), c(5), c(6)], 5, commutes=False) is None
    assert next_free_version([c(4), c(5), c(6)], 5, commutes=True) == 7
    assert next_free_version([c(4, plain=False), c(5), c(6)], 5, commutes=True) == 7  # before the read version
    assert next_free_version([c(4), c(5, plain=False), c(6)], 5, commutes=True) is None
    assert next_free_version([c(2)], 5, commutes=True) is None  # the catalog is behind the writer
    assert next_free_version([], 5, commutes=True) is None


def test_catching_up_reads_the_catalog_not_the_files(two):
    """The commits a handle has not seen come from the catalog's inline bytes in one query (on an
    object store, one request instead of one GET per version)."""
    a, b, _ = two
    ta, tb = a.table("t"), b.table("t")
    for i in range(1, 6):
        ta.append(_row(i))
    tb.store.inner.read_commit = lambda v: pytest.fail(f"read version {v} from storage")  # type: ignore[method-assign]
    assert tb.delete("id = 1").version == 6  # a DML catches up first
    del tb.store.inner.read_commit
    assert _ids(tb) == [2, 3, 4, 5]


@pytest.fixture
def two_on_s3(catalog_url, s3_bucket):
    """Two catalog connections (two jobs) and a table on moto S3: yields (a, b, uri)."""
    prefix, options = s3_bucket
    uri = f"{prefix}/t"
    with deltatx.Catalog(catalog_url, storage_options=options) as a, \
            deltatx.Catalog(catalog_url, storage_options=options) as b:
        a.create_table("t", uri, SCHEMA)
        yield a, b, uri


def test_a_catalog_on_s3(two_on_s3, s3_bucket):
    """Tables of a catalog on an object store: the storage options stay in the process (not in
    the database); commuting appends land unread and are published in order with conditional PUTs."""
    a, b, uri = two_on_s3
    options = s3_bucket[1]
    ta, tb = a.table("t"), b.table("t")
    ta.append(_row(1))
    ta.append(_row(2))
    result = tb.append(_row(3))
    assert (result.version, result.attempts) == (3, 1)
    assert _ids(tb) == [1, 2, 3]
    names = sorted(p.rsplit("/", 1)[-1] for p in tb.store.fs.ls(f"{uri}/_delta_log", detail=False))
    assert [n for n in names if n.endswith(".json")] == [f"{v:020d}.json" for v in range(4)]
    assert "testing" not in repr(a._db.query("SELECT * FROM deltatx_tables"))
    a.release("t")
    assert deltatx.Table(uri, storage_options=options).to_arrow().num_rows == 3


def test_postgresql_moves_a_stale_timestamp_past_the_winners_in_place(postgres_server, tmp_path):
    """An offer whose in-commit timestamp is not after the latest ratified one (stamped before it
    waited its turn) is ratified with the latest + 1, written into the same digits: no lost offer."""
    from deltatx.catalog.db import Ratification
    from deltatx.catalog.store import ict_offset, stamp_in_commit_timestamp

    url = postgres_server.new_database()
    with deltatx.Catalog(url) as cat:
        t = cat.create_table("t", str(tmp_path / "t"), SCHEMA)
        t.append(_row(1))
        store = t.store
        latest = cat._db.ratified_after(store.table_id, 0)[-1]
        old = 1_000_000_000_000  # 2001: long before the winner's
        data = b'{"commitInfo":{"operation":"WRITE","txnId":"x"}}\n{"add":{"path":"p","size":1}}\n'
        stamped, _ = stamp_in_commit_timestamp(data, old)

        def make_row(previous, version):
            return Ratification(store.table_id, version, None, "x", old, content=stamped, plain=True,
                                ict_at=ict_offset(stamped, old))

        row, _ = cat._db.offer(store.table_id, 2, make_row, None, 0, commutes=True)
        assert row is not None and (row.version, row.ict) == (2, latest.ict + 1)
        assert orjson.loads(row.content.split(b"\n", 1)[0])["commitInfo"]["inCommitTimestamp"] == latest.ict + 1
        assert row.content.split(b"\n", 1)[1] == data.split(b"\n", 1)[1]
        assert cat._db.ratified_after(store.table_id, 1)[0].content == row.content


def _counting_exists(store, seen: list[str]):
    """Record every existence check the store's filesystem makes (an S3 HEAD each)."""
    real = store.inner.fs.exists

    def exists(path, **kwargs):
        seen.append(path.rsplit("/", 1)[-1])
        return real(path, **kwargs)

    store.inner.fs.exists = exists


def test_on_s3_a_committer_does_not_head_a_version_the_catalog_verified(two_on_s3):
    """The offer reads the catalog's published_through with the latest version: when the version
    before the committer's own is verified there, publishing puts its file without asking S3
    whether the one before is present (a HEAD inside the serial chain of in-order publishes)."""
    a, _, uri = two_on_s3
    t = a.table("t")
    t.append(_row(1))
    seen: list[str] = []
    _counting_exists(t.store, seen)
    assert t.append(_row(2)).version == 2
    assert t.append(_row(3)).version == 3
    assert not [n for n in seen if n.endswith(".json")], seen
    names = sorted(p.rsplit("/", 1)[-1] for p in t.store.fs.ls(f"{uri}/_delta_log", detail=False))
    assert [n for n in names if n.endswith(".json")] == [f"{v:020d}.json" for v in range(4)]
    assert _ids(t) == [1, 2, 3]

def test_on_s3_a_version_whose_publisher_died_is_published_before_the_next(two_on_s3):
    """Ratified but never published (its committer died between the two): the catalog's mark is
    behind, so the next committer looks, finds the file missing and publishes that version
    first, from the catalog's bytes — in order, as ever."""
    a, b, uri = two_on_s3
    ta, tb = a.table("t"), b.table("t")
    ta.append(_row(1))
    ta.store.publish_ratified = lambda commits, through=-1: None  # dies before publishing
    ta.store.record_published = lambda: None
    assert ta.append(_row(2)).version == 2
    fs = tb.store.fs
    assert not fs.exists(f"{uri}/_delta_log/{2:020d}.json")
    assert tb.append(_row(3)).version == 3
    names = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{uri}/_delta_log", detail=False, refresh=True))
    assert [n for n in names if n.endswith(".json")] == [f"{v:020d}.json" for v in range(4)]
    assert orjson.loads(fs.cat_file(f"{uri}/_delta_log/{2:020d}.json").split(b"\n")[1])["add"]
    assert _ids(tb) == [1, 2, 3]


def test_postgresql_replaces_an_older_offer_function_with_other_columns(postgres_server, tmp_path):
    """A catalog an older deltatx created holds a ``deltatx_offer`` that returns fewer columns,
    which CREATE OR REPLACE cannot change: opening the catalog replaces it, and commits work."""
    from deltatx.catalog.db import _OFFER_SIGNATURE

    url = postgres_server.new_database()
    with deltatx.Catalog(url) as cat:
        cat.create_table("t", str(tmp_path / "t"), SCHEMA).append(_row(1))
        cat._db.transact(lambda cur: (
            cur.execute(f"DROP FUNCTION {_OFFER_SIGNATURE}"),
            cur.execute("CREATE FUNCTION deltatx_offer(p_table TEXT, p_version BIGINT, p_staged TEXT, p_txn TEXT, "
                        "p_ict BIGINT, p_content BYTEA, p_now BIGINT, p_plain BOOLEAN, p_commutes BOOLEAN, "
                        "p_ict_at INTEGER) RETURNS TABLE (out_ratified BOOLEAN, out_version BIGINT) "
                        "LANGUAGE sql AS $$ SELECT FALSE, 0::BIGINT $$")))
    with deltatx.Catalog(url) as cat:
        t = cat.table("t")
        assert t.append(_row(2)).version == 2
        assert _ids(t) == [1, 2]
