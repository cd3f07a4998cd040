"""A catalog-managed table's lifecycle (SQLite and PostgreSQL each), from issue 13's audit:

* the staged commit files of published versions are deleted (``vacuum_staged``, and after a
  checkpoint), never the one of a ratified version that is not published yet;
* ``drop_table`` without purge leaves a path table (released first), not files every path
  client and every other catalog refuses;
* a released table's whole history stays readable by path, and RESTORE of a version from its
  catalog era never brings the catalog's identity or in-commit timestamps back;
* ``Catalog.table(name, timestamp=...)`` travels by in-commit timestamp;
* ``deltatx.catalogId`` cannot be unset on a catalog-managed table."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import deltatx
from crash_points import Crash, crash_at
from deltatx import phases
from deltatx.catalog import store as catalog_store
from deltatx.catalog.rules import CATALOG_ID, ICT_ENABLED, CatalogManagedPropertyError
from deltatx.errors import CatalogMaintenanceError, CatalogManagedTableError, TimeTravelError

SCHEMA = pa.schema([("id", pa.int64())])
#: what catalog management brings into a table's protocol
CATALOG_FEATURES = {"catalogManaged", "inCommitTimestamp", "vacuumProtocolCheck"}


def _row(i: int) -> pa.Table:
    return pa.table({"id": [i]}, schema=SCHEMA)


def _rows(table) -> list[int]:
    return sorted(table.to_arrow()["id"].to_pylist())


def _staged(uri: str) -> list[str]:
    folder = os.path.join(uri, "_delta_log", "_staged_commits")
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def _published(uri: str, version: int) -> bool:
    return os.path.exists(os.path.join(uri, "_delta_log", f"{version:020d}.json"))


@pytest.fixture
def other_url(catalog_url, request, tmp_path):
    """A second, separate catalog on the same backend."""
    if catalog_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path}/other.db"
    return request.getfixturevalue("postgres_server").new_database()


def _stage_every_commit(monkeypatch) -> None:
    """Every commit from now on goes through a staged file (as one over 1 MiB does)."""
    monkeypatch.setattr(catalog_store, "INLINE_COMMIT_MAX_BYTES", 0)


# ------------------------------------------------------------------ 1: staged commit cleanup
def test_vacuum_staged_deletes_the_staged_commits_of_published_versions(cat, tmp_path, monkeypatch):
    """Before, only staged files never ratified were deleted: every big commit's file stayed
    next to its published copy for good."""
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA)
    _stage_every_commit(monkeypatch)
    for i in (1, 2):
        cat.table("t").append(_row(i))
    names = _staged(uri)
    assert [n[:20] for n in names] == [f"{1:020d}", f"{2:020d}"] and _published(uri, 2)
    assert cat.vacuum_staged("t") == names  # the default retention: a published one goes at any age
    assert _staged(uri) == [] and cat.vacuum_staged("t") == []
    with deltatx.Catalog(cat.url) as fresh:
        assert _rows(fresh.table("t")) == [1, 2]
        fresh.table("t").append(_row(3))
        assert _rows(fresh.table("t")) == [1, 2, 3]


def test_the_staged_commit_of_a_ratified_unpublished_version_is_kept(cat, tmp_path, monkeypatch):
    """It is the only copy of a committed version until it is published."""
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA)
    _stage_every_commit(monkeypatch)
    cat.table("t").append(_row(1))
    with phases.observe(crash_at("ratified")), pytest.raises(Crash):
        cat.table("t").append(_row(2))  # ratified as 2, never published
    first, second = _staged(uri)
    assert not _published(uri, 2)
    publish = catalog_store.CatalogLogStore.publish_pending
    # a publisher that cannot get version 2 into _delta_log (as a failing store would)
    monkeypatch.setattr(catalog_store.CatalogLogStore, "publish_pending", lambda self: self.latest_ratified())
    assert cat.vacuum_staged("t", retention_hours=0) == [first]
    assert _staged(uri) == [second] and not _published(uri, 2)
    monkeypatch.setattr(catalog_store.CatalogLogStore, "publish_pending", publish)
    with deltatx.Catalog(cat.url) as fresh:
        assert _rows(fresh.table("t")) == [1, 2]  # published from the staged file kept
    assert _published(uri, 2)
    assert cat.vacuum_staged("t", retention_hours=0) == [second] and _staged(uri) == []


def test_a_checkpoint_deletes_the_staged_commits_of_published_versions(cat, tmp_path, monkeypatch):
    """PROTOCOL.md's metadata cleanup deletes staged commits up to its checkpoint (the expired
    published files go in the Table's own cleanup after it: test_log_cleanup_catalog.py)."""
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA)
    _stage_every_commit(monkeypatch)
    for i in (1, 2):
        cat.table("t").append(_row(i))
    assert len(_staged(uri)) == 2
    cat.table("t").checkpoint()
    assert _staged(uri) == []
    with deltatx.Catalog(cat.url) as fresh:
        assert _rows(fresh.table("t")) == [1, 2]


def test_publishing_a_version_whose_staged_copy_was_cleaned_up_is_no_error(cat, tmp_path, monkeypatch):
    """A committer publishing the winners its lease read, after another client published them
    and cleaned up their staged files: nothing is left to do. Before, the link of the missing
    staged file raised FileNotFoundError out of a commit that had landed."""
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA)
    _stage_every_commit(monkeypatch)
    cat.table("t").append(_row(1))
    store = cat.store("t")
    [commit] = cat._db.ratified_after(store.table_id, 0)  # read before the cleanup
    os.unlink(os.path.join(uri, "_delta_log", "_staged_commits", commit.staged_name))
    store.publish(commit)
    assert _rows(cat.table("t")) == [1]
    os.unlink(os.path.join(uri, "_delta_log", f"{1:020d}.json"))
    with pytest.raises(FileNotFoundError):  # both copies gone: a lost commit stays an error
        store.publish(commit)


# ------------------------------------------------------------------ 2: drop without purge
def test_drop_without_purge_leaves_a_path_table_every_client_can_use(cat, other_url, tmp_path):
    """Before, the files stayed catalog-managed with the dropping catalog's identity: path
    clients refused them, other catalogs refused to register them, and the dropping catalog
    could no longer release them (the name was gone)."""
    import deltalake

    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA).append(_row(1))
    cat.drop_table("t")
    assert cat.list_tables() == []
    path = deltatx.Table(uri)
    assert _rows(path) == [1] and path.history(1)[0]["operation"] == "RELEASE FROM CATALOG"
    assert CATALOG_ID not in path.properties and not CATALOG_FEATURES & set(path.protocol.writer_features or ())
    deltalake.write_deltalake(uri, _row(2), mode="append")
    assert _rows(deltatx.Table(uri)) == [1, 2]
    with deltatx.Catalog(other_url) as other:
        assert _rows(other.register("t", uri)) == [1, 2]


def test_drop_without_purge_publishes_a_ratified_commit_first(cat, tmp_path):
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA).append(_row(1))
    with phases.observe(crash_at("ratified")), pytest.raises(Crash):
        cat.table("t").append(_row(2))  # ratified, never published
    cat.drop_table("t")
    assert _rows(deltatx.Table(uri)) == [1, 2]
    assert _rows(cat.register("t", uri)) == [1, 2]  # and the dropping catalog may adopt it again


def test_dropping_one_of_two_names_of_one_path_releases_nothing(cat, tmp_path):
    """A catalog from before a path had one name (schema 4) warns to drop all but one of them
    (db.py): released by that drop, the files would be taken from the name that stays."""
    uri = str(tmp_path / "t")
    cat.create_table("one", uri, SCHEMA).append(_row(1))
    one = cat._entry("one")
    with cat._db.write() as cur:  # what such a catalog holds: a second name for the same table
        cur.execute("DROP INDEX deltatx_tables_uri")
        cur.execute("INSERT INTO deltatx_tables (id, name, uri, created_ms, published_through) VALUES (?, ?, ?, ?, ?)",
                    ("i2", "two", one.uri, 0, -1))
        cur.execute("INSERT INTO deltatx_commits (table_id, version, staged_name, txn_id, ict, catalog_seq, content, "
                    "plain) SELECT ?, version, staged_name, txn_id, ict, catalog_seq, content, plain "
                    "FROM deltatx_commits WHERE table_id = ?", ("i2", one.table_id))
    cat.drop_table("two")
    assert cat.list_tables() == ["one"]
    with pytest.raises(CatalogManagedTableError):  # no release commit in _delta_log: still managed
        deltatx.Table(uri)
    assert not _published(uri, 2)
    assert cat.table("one").append(_row(2)).version == 2


# ------------------------------------------------------------------ 3: history after a release
def test_a_released_table_is_readable_by_path_at_its_catalog_era_versions(cat, tmp_path):
    """Before, every version written while catalog-managed raised CatalogManagedTableError
    ("open it through its catalog") though the catalog had forgotten the table."""
    uri = str(tmp_path / "t")
    t = cat.create_table("t", uri, SCHEMA)
    t.append(_row(1))
    t.append(_row(2))
    with pytest.raises(CatalogManagedTableError):  # still managed: path clients are refused
        deltatx.Table(uri, version=1)
    cat.release("t")
    assert _rows(deltatx.Table(uri, version=0)) == []
    assert _rows(deltatx.Table(uri, version=1)) == [1]
    assert _rows(deltatx.Table(uri, version=2)) == [1, 2]


def test_restore_of_a_released_table_never_brings_its_catalog_back(cat, other_url, tmp_path):
    """Before, RESTORE to a catalog-era version put back deltatx.catalogId (a catalog that had
    forgotten the table) and delta.enableInCommitTimestamps=true with its writer feature, and
    deltalake could no longer append."""
    import deltalake

    uri = str(tmp_path / "t")
    t = cat.create_table("t", uri, SCHEMA)
    t.append(_row(1))
    t.append(_row(2))
    cat.release("t")
    deltatx.Table(uri).restore(version=1)
    restored = deltatx.Table(uri)
    assert _rows(restored) == [1] and restored.history(1)[0]["operation"] == "RESTORE"
    assert CATALOG_ID not in restored.properties and restored.properties.get(ICT_ENABLED) == "false"
    assert not CATALOG_FEATURES & set(restored.protocol.writer_features or ())
    deltalake.write_deltalake(uri, _row(3), mode="append")
    assert _rows(deltatx.Table(uri)) == [1, 3]
    with deltatx.Catalog(other_url) as other:  # no stale identity: any catalog may adopt it
        assert _rows(other.register("t", uri)) == [1, 3]


def test_catalog_table_travels_by_in_commit_timestamp(cat, tmp_path):
    uri = str(tmp_path / "t")
    t = cat.create_table("t", uri, SCHEMA)
    t.append(_row(1))
    t.append(_row(2))
    ict = {h["version"]: h["inCommitTimestamp"] for h in cat.table("t").history()}
    assert ict[0] < ict[1] < ict[2]
    at_1 = cat.table("t", timestamp=ict[1])
    assert at_1.version == 1 and _rows(at_1) == [1]
    assert cat.table("t", timestamp=ict[2] - 1).version == 1  # the latest commit at or before it
    assert cat.table("t", timestamp=ict[2]).version == 2
    with pytest.raises(CatalogMaintenanceError, match="cat.table"):  # pinned: no maintenance
        at_1.vacuum()
    at_1.checkpoint()  # checkpoints need no permission (PROTOCOL.md's exception), of a published version
    with pytest.raises(TimeTravelError, match="not both"):
        cat.table("t", version=1, timestamp=ict[1])


# ------------------------------------------------------------------ 4: the catalog's identity
def test_unsetting_the_catalog_id_is_refused(cat, tmp_path):
    """Before, it committed; the table then named no catalog, and after a drop not even its own
    catalog could register it again."""
    uri = str(tmp_path / "t")
    t = cat.create_table("t", uri, SCHEMA)
    with pytest.raises(CatalogManagedPropertyError, match="cannot be removed"):
        t.unset_properties([CATALOG_ID])
    with pytest.raises(CatalogManagedPropertyError, match="cannot be removed"):
        with cat.transaction() as tx:
            tx.table("t").unset_properties([CATALOG_ID])
    assert cat.table("t").version == 0
    assert cat.table("t").properties[CATALOG_ID] == cat.catalog_id
    cat.table("t").unset_properties(["delta.appendOnly"], if_exists=True)  # other keys still go
