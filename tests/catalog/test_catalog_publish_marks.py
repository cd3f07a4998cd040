"""The catalog's published_through keeps up with its committers. SQLite committers record their
mark while the next one waits, so marks land in version order; a mark lost (to a nested write,
or recorded after a later one) leaves published_through behind, and every reader then compares
every later version with its published file — on S3 a request per version per read, which took
P14's S3 SQLite run from 58 to 19 commits/s before this was fixed."""

from __future__ import annotations

import multiprocessing
import sqlite3

import pyarrow as pa

import deltatx

SCHEMA = pa.schema([("id", pa.int64())])


def _appender(url: str, index: int, barrier, n: int) -> None:
    with deltatx.Catalog(url) as cat:
        table = cat.table("t")
        barrier.wait()
        for i in range(n):
            table.append(pa.table({"id": [index * 1000 + i]}, schema=SCHEMA))


def test_published_through_reaches_the_latest_version_with_concurrent_committers(tmp_path):
    url = f"sqlite:///{tmp_path}/cat.db"
    with deltatx.Catalog(url) as cat:
        cat.create_table("t", str(tmp_path / "t"), SCHEMA, properties={"delta.checkpointInterval": "5"})
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    workers = [ctx.Process(target=_appender, args=(url, i, barrier, 15)) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert all(w.exitcode == 0 for w in workers)
    con = sqlite3.connect(f"{tmp_path}/cat.db")
    try:
        (through,), = con.execute("SELECT published_through FROM deltatx_tables").fetchall()
        (latest,), = con.execute("SELECT max(version) FROM deltatx_commits").fetchall()
    finally:
        con.close()
    assert latest == 60 and through == latest
    with deltatx.Catalog(url) as cat:
        assert cat.table("t").to_arrow().num_rows == 60


def test_a_mark_recorded_while_publishing_after_the_write_lands_in_order(cat, tmp_path):
    """A committer publishes after its write committed and before the next writer may ratify
    (SQLite: still holding the writers' lock); a mark recorded there (the committer's own, or
    what a publish_pending verified) lands at once. It used to raise RuntimeError (a write
    transaction open already) or, once that was silenced, be lost."""
    table = cat.create_table("m", str(tmp_path / "m"), SCHEMA)
    table.append(pa.table({"id": [1]}, schema=SCHEMA))
    db = cat._db
    table_id = db.query("SELECT id FROM deltatx_tables WHERE name = ?", ("m",))[0][0]
    latest, _, through = db.publish_state(table_id)
    cur = db.begin_write()
    cur.execute("UPDATE deltatx_tables SET published_through = ? WHERE id = ?", (latest - 1, table_id))
    db.end_write(cur, True, then=lambda: db.mark_published([(table_id, latest, latest)]))
    assert db.publish_state(table_id)[2] == latest


def test_a_registered_table_whose_mark_starts_before_its_registration_still_publishes(tmp_path):
    """A catalog that gained published_through (schema 5) starts it at -1. A registered table's
    versions before registration were never the catalog's: they may not stop the walk, or the
    mark stays at -1 for good (every later mark applies only next to it) and a version whose
    committer died before publishing is never published."""
    path = str(tmp_path / "t")
    plain = deltatx.create_table(path, SCHEMA)
    plain.append(pa.table({"id": [1]}, schema=SCHEMA))
    url = f"sqlite:///{tmp_path}/cat.db"
    with deltatx.Catalog(url) as cat:
        cat.register("t", path)
        cat.table("t").append(pa.table({"id": [2]}, schema=SCHEMA))
    con = sqlite3.connect(f"{tmp_path}/cat.db")
    con.execute("UPDATE deltatx_tables SET published_through = -1")  # as the schema-5 migration leaves it
    con.commit()
    con.close()
    with deltatx.Catalog(url) as cat:
        table = cat.table("t")
        table.append(pa.table({"id": [3]}, schema=SCHEMA))
        latest = table.version
        assert sorted(cat.table("t").to_arrow()["id"].to_pylist()) == [1, 2, 3]
    con = sqlite3.connect(f"{tmp_path}/cat.db")
    try:
        assert con.execute("SELECT published_through FROM deltatx_tables").fetchall() == [(latest,)]
    finally:
        con.close()
