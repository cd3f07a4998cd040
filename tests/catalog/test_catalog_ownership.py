"""What makes a catalog the one owner of a table's history (SQLite and PostgreSQL each): one path
is managed by one catalog under one name (the catalog's identity in the table, canonical paths,
a UNIQUE path in the schema, version 5); the catalog's ratified commit wins over a stray
published file, and the catalog keeps its copy until it has verified the published one; only
checkpoints the catalog can vouch for are read; in-commit timestamps stay on; checkpoints and
commit-time maintenance obey the catalog's policy."""

from __future__ import annotations

import multiprocessing as mp
import os
import sqlite3
import warnings

import orjson
import pyarrow as pa
import pytest

import deltatx
from crash_points import Crash, crash_at
from deltatx import phases
from deltatx.catalog.db import SCHEMA_VERSION
from deltatx.catalog.rules import CATALOG_ID, CatalogManagedPropertyError, CatalogTableOwnedError
from deltatx.errors import CatalogLogAheadError, CatalogMaintenanceError, CatalogTableExistsError, PostCommitHookWarning
from deltatx.txnlog.checkpoint import write_checkpoint
from deltatx.txnlog.snapshot import load_snapshot
from deltatx.txnlog.store import open_store

SCHEMA = pa.schema([("id", pa.int64())])


def _rows(table) -> list[int]:
    return sorted(table.to_arrow()["id"].to_pylist())


def _log(uri: str) -> list[str]:
    return sorted(os.listdir(os.path.join(uri, "_delta_log")))


@pytest.fixture
def other_url(catalog_url, request, tmp_path):
    """A second, separate catalog on the same backend."""
    if catalog_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path}/other.db"
    return request.getfixturevalue("postgres_server").new_database()


# ---------------------------------------------------------------------------------- 1: owner
def test_a_table_another_catalog_manages_is_refused(cat, other_url, tmp_path):
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA).append(pa.table({"id": [1]}))
    assert cat.table("t").properties[CATALOG_ID] == cat.catalog_id
    before = _log(uri)
    with deltatx.Catalog(other_url) as other:
        assert other.catalog_id != cat.catalog_id
        with pytest.raises(CatalogTableOwnedError, match="catalog-managed by catalog"):
            other.register("t", uri)
        assert isinstance(CatalogTableOwnedError("x"), CatalogTableExistsError)
        assert other.list_tables() == [] and _log(uri) == before
        # released from its catalog, it is a path table any catalog may adopt
        cat.release("t")
        assert _rows(other.register("t", uri)) == [1]
        assert other.table("t").properties[CATALOG_ID] == other.catalog_id


def test_a_registered_path_table_records_the_catalog_and_is_adopted_again_after_a_drop(cat, tmp_path):
    uri = str(tmp_path / "p")
    deltatx.create_table(uri, SCHEMA).append(pa.table({"id": [1]}))
    assert cat.register("p", uri).properties[CATALOG_ID] == cat.catalog_id
    cat.drop_table("p")  # releases it (version 3): a path table again
    assert _rows(cat.register("p", uri)) == [1]
    assert cat.table("p").version == 4


def test_one_path_has_one_name_however_it_is_spelled(cat, tmp_path):
    uri = str(tmp_path / "u")
    cat.create_table("a", uri, SCHEMA)
    link = str(tmp_path / "link")
    os.symlink(uri, link)
    for spelling in (f"file://{uri}", f"file:{uri}", f"{uri}/", f"{tmp_path}/x/../u", link):
        with pytest.raises(CatalogTableExistsError):
            cat.register("alias", spelling)
        with pytest.raises(CatalogTableExistsError):
            cat.create_table("alias", spelling, SCHEMA)
    assert cat.list_tables() == ["a"]


def _create_at_barrier(url, path, name, barrier, results):
    def meet(phase, **ctx):
        if phase == "staged" and ctx.get("version") == 0:
            barrier.wait(timeout=60)  # both have passed the name check; neither has ratified
    phases.install(meet)
    try:
        with deltatx.Catalog(url) as cat:
            cat.create_table(name, path, SCHEMA)
        results.put((name, "created"))
    except Exception as exc:
        results.put((name, type(exc).__name__))


# ------------------------------------------------------------------------------ 2: UNIQUE uri
def test_two_processes_creating_one_path_under_two_names_one_wins(cat, tmp_path):
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    uri = str(tmp_path / "t")
    procs = [ctx.Process(target=_create_at_barrier, args=(cat.url, uri, n, barrier, results)) for n in ("x", "y")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    outcome = sorted(results.get(timeout=5)[1] for _ in procs)
    assert outcome == ["CatalogTableExistsError", "created"]
    assert len(cat.entries()) == 1 and cat.entries()[0].uri == os.path.realpath(uri)


def _v4_schema(cur) -> None:
    cur.execute("CREATE TABLE deltatx_schema_version (version INTEGER NOT NULL)")
    cur.execute("INSERT INTO deltatx_schema_version VALUES (4)")
    cur.execute("CREATE TABLE deltatx_tables (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, uri TEXT NOT NULL, "
                "created_ms BIGINT NOT NULL, maintenance TEXT NOT NULL DEFAULT 'allowed')")
    cur.execute("INSERT INTO deltatx_tables VALUES ('i1', 'one', '/nowhere/one', 0, 'allowed')")


def test_version_4_catalog_is_upgraded_with_a_unique_path(catalog_url, tmp_path):
    if catalog_url.startswith("sqlite"):
        conn = sqlite3.connect(catalog_url[len("sqlite:///"):])
        _v4_schema(conn)
        conn.commit()
        conn.close()
    else:
        import psycopg

        with psycopg.connect(catalog_url, autocommit=True) as conn:
            _v4_schema(conn.cursor())
    with deltatx.Catalog(catalog_url) as c:
        assert c._db.query("SELECT version FROM deltatx_schema_version") == [(SCHEMA_VERSION,)] == [(5,)]
        assert c._db.query("SELECT published_through FROM deltatx_tables") == [(-1,)]
        assert c.list_tables() == ["one"]
        with pytest.raises(Exception) as err:  # the database itself refuses a second name for a path
            with c._db.write() as cur:
                cur.execute("INSERT INTO deltatx_tables (id, name, uri, created_ms) VALUES ('i2', 'two', "
                            "'/nowhere/one', 0)")
        assert "Duplicate" in type(err.value).__name__ or "unique" in str(err.value).lower()


def test_a_catalog_whose_paths_are_shared_already_warns_and_upgrades_once_fixed(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    _v4_schema(conn)
    conn.execute("INSERT INTO deltatx_tables VALUES ('i2', 'two', '/nowhere/one', 0, 'allowed')")
    conn.commit()
    conn.close()
    with pytest.warns(RuntimeWarning, match="several names share one path"):
        c = deltatx.Catalog(f"sqlite:///{path}")
    assert c._db.query("SELECT version FROM deltatx_schema_version") == [(4,)]
    c._db.query("DELETE FROM deltatx_tables WHERE id = 'i2'")
    c._db._conn.commit()
    c.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with deltatx.Catalog(f"sqlite:///{path}") as c:
            assert c._db.query("SELECT version FROM deltatx_schema_version") == [(SCHEMA_VERSION,)]


# -------------------------------------------------------------------- 3: stray published file
def _stray_commit(uri: str, version: int, copy_of: int) -> None:
    """What a client that ignores catalogManaged puts at ``version``: a copy of ``copy_of``'s add."""
    log = os.path.join(uri, "_delta_log")
    with open(os.path.join(log, f"{copy_of:020d}.json"), "rb") as fh:
        lines = fh.read().splitlines()
    info = orjson.loads(lines[0])
    info["commitInfo"]["operation"] = "STRAY"
    adds = [line for line in lines if line.startswith(b'{"add"')]
    with open(os.path.join(log, f"{version:020d}.json"), "wb") as fh:
        fh.write(orjson.dumps(info) + b"\n" + b"\n".join(adds) + b"\n")


def test_a_stray_file_never_hides_a_ratified_unpublished_commit(cat, tmp_path):
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA).append(pa.table({"id": [1]}))
    with phases.observe(crash_at("ratified")), pytest.raises(Crash):
        cat.table("t").append(pa.table({"id": [2]}))  # ratified as 2, never published
    _stray_commit(uri, 2, copy_of=1)
    fresh = deltatx.Catalog(cat.url)
    assert _rows(fresh.table("t")) == [1, 2]  # the catalog's version 2, not the stray file
    assert fresh.table("t").history(1)[0]["operation"] == "WRITE"
    fresh.vacuum_staged("t")
    fresh.close()
    with open(os.path.join(uri, "_delta_log", f"{2:020d}.json"), "rb") as fh:
        assert b"STRAY" not in fh.read()  # replaced by the ratified bytes before they were dropped
    cat.drop_table("t")
    assert _rows(cat.register("t", uri)) == [1, 2]


def test_the_catalog_keeps_its_copy_until_it_has_verified_the_published_file(cat, tmp_path):
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA).append(pa.table({"id": [1]}))
    cat.table("t").append(pa.table({"id": [2]}))  # published by its committer, content kept
    _stray_commit(uri, 2, copy_of=1)  # overwritten afterwards by a client ignoring the catalog
    cat.vacuum_staged("t")  # compares before dropping: the ratified bytes go back first
    assert cat._db.query("SELECT COUNT(*) FROM deltatx_commits WHERE content IS NOT NULL") == [(0,)]
    with deltatx.Catalog(cat.url) as fresh:
        assert _rows(fresh.table("t")) == [1, 2]


# ---------------------------------------------------------------------- 4: stray checkpoints
def test_a_checkpoint_of_an_unratified_version_is_not_read(cat, tmp_path):
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA)
    for i in (1, 2):
        cat.table("t").append(pa.table({"id": [i]}))
    _stray_commit(uri, 3, copy_of=2)
    path_store = open_store(uri)
    write_checkpoint(path_store, load_snapshot(path_store))  # 3.checkpoint.parquet + _last_checkpoint
    log = os.path.join(uri, "_delta_log")
    for name in (f"{3:020d}.json", f"{3:020d}.checkpoint.parquet"):  # written before the catalog's 3
        os.utime(os.path.join(log, name), (os.stat(os.path.join(log, name)).st_mtime - 5,) * 2)
    assert cat.table("t").version == 2
    with pytest.raises(CatalogLogAheadError):  # never ratified: the writer will not overwrite it
        cat.table("t").append(pa.table({"id": [3]}))
    os.unlink(os.path.join(log, f"{3:020d}.json"))  # the operator moves the stray commit away
    assert cat.table("t").append(pa.table({"id": [3]})).version == 3
    with deltatx.Catalog(cat.url) as fresh:
        assert _rows(fresh.table("t")) == [1, 2, 3]
        assert _rows(fresh.table("t", version=3)) == [1, 2, 3]
    # a checkpoint the catalog's own client writes after publishing is used
    cat.table("t").checkpoint()
    listed = [f.name for f in cat.store("t").list_log(0) if f.kind == "checkpoint"]
    assert listed == [f"{3:020d}.checkpoint.parquet"]
    with deltatx.Catalog(cat.url) as fresh:
        assert _rows(fresh.table("t")) == [1, 2, 3]


# ------------------------------------------------------------------- 5: in-commit timestamps
def _commit_infos(uri: str) -> dict[int, dict]:
    log = os.path.join(uri, "_delta_log")
    out = {}
    for name in sorted(os.listdir(log)):
        if name.endswith(".json") and name[:20].isdigit():
            with open(os.path.join(log, name), "rb") as fh:
                out[int(name[:20])] = orjson.loads(fh.readline())["commitInfo"]
    return out


def test_registration_enables_in_commit_timestamps_after_the_previous_commit_file(cat, tmp_path):
    """PROTOCOL.md ICT requirement 5: the enabling commit's timestamp is later than the previous
    commit file's modification time (here 10 minutes ahead of the clock): history stays ordered
    and time travel to every version's timestamp finds it."""
    uri = str(tmp_path / "p")
    deltatx.create_table(uri, SCHEMA).append(pa.table({"id": [1]}))
    last = os.path.join(uri, "_delta_log", f"{1:020d}.json")
    ahead = os.stat(last).st_mtime + 600
    os.utime(last, (ahead, ahead))
    cat.register("p", uri)
    ict = _commit_infos(uri)[2]["inCommitTimestamp"]
    assert ict > int(ahead * 1000)
    assert cat.table("p").properties["delta.inCommitTimestampEnablementTimestamp"] == str(ict)
    history = [(h["version"], h["timestamp"]) for h in cat.table("p").history()]
    assert [v for v, _ in history] == [2, 1, 0] and history[0][1] > history[1][1] > history[2][1]
    for version, timestamp in history:
        assert cat.table("p", timestamp=timestamp).version == version


def test_registering_a_table_with_in_commit_timestamps_keeps_them_increasing(cat, tmp_path, monkeypatch):
    """ICT on from version 0, its last timestamp ahead of the clock: the registration commit
    follows it (max(now, previous + 1)) and records no enablement (requirement 4: only for tables
    with commits from before the feature was on), so earlier versions keep their timestamps."""
    import time

    uri = str(tmp_path / "p")
    deltatx.create_table(uri, SCHEMA, properties={"delta.enableInCommitTimestamps": "true"})
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 600)  # a writer whose clock runs ahead
    deltatx.Table(uri).append(pa.table({"id": [1]}))
    monkeypatch.setattr(time, "time", real)
    cat.register("p", uri)
    icts = {v: info["inCommitTimestamp"] for v, info in _commit_infos(uri).items()}
    assert icts[2] > icts[1] > icts[0]
    properties = cat.table("p").properties
    assert "delta.inCommitTimestampEnablementVersion" not in properties
    assert [h["timestamp"] for h in cat.table("p").history()] == [icts[2], icts[1], icts[0]]
    assert cat.table("p", timestamp=icts[1]).version == 1


def test_restore_before_registration_keeps_in_commit_timestamps(cat, tmp_path):
    uri = str(tmp_path / "p")
    deltatx.create_table(uri, SCHEMA).append(pa.table({"id": [1]}))
    cat.register("p", uri)  # version 2 enables in-commit timestamps
    kept = {k: v for k, v in cat.table("p").properties.items() if "incommittimestamp" in k.lower() or k == CATALOG_ID}
    assert len(kept) == 4
    cat.table("p").append(pa.table({"id": [2]}))
    cat.table("p").restore(version=0)
    t = cat.table("p")
    assert {k: t.properties.get(k) for k in kept} == kept
    assert _rows(t) == []
    history = {h["version"]: h for h in t.history()}
    assert history[4]["timestamp"] == history[4]["inCommitTimestamp"]


def test_turning_in_commit_timestamps_off_is_refused(cat, tmp_path):
    t = cat.create_table("q", str(tmp_path / "q"), SCHEMA)
    for value in ("false", False):
        with pytest.raises(CatalogManagedPropertyError, match="in-commit timestamps"):
            cat.table("q").set_properties({"delta.enableInCommitTimestamps": value})
    with pytest.raises(CatalogManagedPropertyError, match="another"):
        cat.table("q").set_properties({CATALOG_ID: "someone-else"})
    assert cat.table("q").version == t.version == 0
    assert cat.table("q").properties["delta.enableInCommitTimestamps"] == "true"
    cat.table("q").set_properties({"delta.appendOnly": "false"})  # other properties still change
    assert cat.table("q").version == 1


# ------------------------------------------------------------------ 6: maintenance policy
def _checkpoints(uri: str) -> list[str]:
    return [n for n in _log(uri) if ".checkpoint." in n]


def test_checkpoints_need_no_permission_as_the_protocol_exempts_them(cat, tmp_path):
    """PROTOCOL.md (catalogManaged): maintenance is prohibited unless the catalog permits it,
    except checkpoints, log compaction and version checksums. With maintenance off, and from a
    pinned or snapshot handle, checkpoints are written; VACUUM stays refused."""
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA, properties={"delta.checkpointInterval": "2"})
    cat.set_maintenance("t", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PostCommitHookWarning)  # the post-commit checkpoint runs
        for i in range(2):
            assert cat.table("t").append(pa.table({"id": [i]})).version == i + 1
    assert _checkpoints(uri) == [f"{2:020d}.checkpoint.parquet"]
    cat.table("t", version=1).checkpoint()
    cat.snapshot().table("t").checkpoint()
    assert _checkpoints(uri) == [f"{1:020d}.checkpoint.parquet", f"{2:020d}.checkpoint.parquet"]
    with pytest.raises(CatalogMaintenanceError, match="VACUUM"):
        cat.table("t").vacuum()
    assert sorted(cat.table("t").to_arrow()["id"].to_pylist()) == [0, 1]


@pytest.mark.parametrize("route", ["catalog transaction", "table transaction"])
def test_an_optimize_staged_while_allowed_is_refused_at_commit_once_refused(cat, tmp_path, route):
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA)
    for i in range(3):
        cat.table("t").append(pa.table({"id": [i]}))
    tx = cat.transaction() if route == "catalog transaction" else cat.table("t").transaction()
    (tx.table("t") if route == "catalog transaction" else tx).optimize()
    cat.set_maintenance("t", False)
    before = cat.table("t").version
    with pytest.raises(CatalogMaintenanceError, match="OPTIMIZE"):
        tx.commit()
    assert cat.table("t").version == before
    assert [h["operation"] for h in cat.table("t").history(1)] == ["WRITE"]
