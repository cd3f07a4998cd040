"""Catalog edge cases found by probing the API as a user would (SQLite and PostgreSQL each):
what a multi-table transaction only read is checked too, its member transactions commit only
with it, a release or drop that stops half-way loses no committed version, the catalog's
commit wins over a stray published file, REORG obeys the maintenance policy, relative SQLite
URLs."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pytest

import deltatx
from deltatx import phases
from crash_points import Crash, crash_at
from deltatx.errors import (CatalogLogAheadError, 
    CatalogMaintenanceError,
    CatalogManagedTableError,
    CatalogTableNotFoundError,
    ConcurrentModificationException,
    DeltaTxError,
)

SCHEMA = pa.schema([("id", pa.int64()), ("balance", pa.int64())])


def _accounts(cat, tmp_path, level="WriteSerializable"):
    for n in ("t0", "t1"):
        cat.create_table(n, str(tmp_path / n), SCHEMA, properties={"delta.isolationLevel": level}) \
            .append(pa.table({"id": [1], "balance": [50]}))


def _balances(cat) -> dict[str, int]:
    snap = cat.snapshot()
    return {n: snap.table(n).to_arrow()["balance"][0].as_py() for n in ("t0", "t1")}


@pytest.mark.parametrize("level", ["Serializable", "WriteSerializable"])
def test_a_table_only_read_is_checked_against_its_winners(cat, tmp_path, level):
    """Write skew across tables: each transaction reads both accounts and debits a different one
    (the rule: the sum stays >= 0). The read of the table a transaction does not write must be
    checked at commit, or both debits land."""
    _accounts(cat, tmp_path, level)
    a, b = cat.transaction(), cat.transaction()
    for tx in (a, b):
        assert sum(tx.table(n).read(where="id = 1")["balance"][0].as_py() for n in ("t0", "t1")) == 100
    a.table("t0").update(where="id = 1", set={"balance": "balance - 100"})
    b.table("t1").update(where="id = 1", set={"balance": "balance - 100"})
    a.commit()
    versions = cat.snapshot().versions
    with pytest.raises(ConcurrentModificationException) as err:
        b.commit()
    assert "t0" in str(err.value) or str(tmp_path / "t0") in str(err.value) or err.value.version == 2
    assert cat.snapshot().versions == versions  # the loser changed no table
    assert _balances(cat) == {"t0": -50, "t1": 50}


def test_a_table_only_read_passes_when_its_winner_touched_nothing_read(cat, tmp_path):
    """WriteSerializable: a blind append to the table read is no conflict, and the table read
    gets no new version from the transaction."""
    _accounts(cat, tmp_path)
    tx = cat.transaction()
    tx.table("t1").read(where="id = 1")
    tx.table("t0").update(where="id = 1", set={"balance": "balance - 10"})
    cat.table("t1").append(pa.table({"id": [2], "balance": [7]}))  # a blind append meanwhile
    results = tx.commit()
    assert set(results) == {"t0"}
    assert cat.snapshot().versions == {"t0": 2, "t1": 2}


def test_a_member_transaction_commits_only_with_the_catalog_transaction(cat, tmp_path):
    _accounts(cat, tmp_path)
    with pytest.raises(RuntimeError, match="boom"):
        with cat.transaction() as tx:
            tx.table("t0").append(pa.table({"id": [2], "balance": [1]}))
            with pytest.raises(DeltaTxError, match="commits with it"):
                tx.table("t0").commit()
            with tx.table("t1") as t1:  # leaving a member's own block commits nothing by itself
                t1.append(pa.table({"id": [2], "balance": [1]}))
            assert cat.snapshot().versions == {"t0": 1, "t1": 1}
            raise RuntimeError("boom")
    assert cat.snapshot().versions == {"t0": 1, "t1": 1}
    with cat.transaction() as tx:  # the normal way still commits both
        with tx.table("t0") as t0:
            t0.append(pa.table({"id": [2], "balance": [1]}))
        tx.table("t1").append(pa.table({"id": [2], "balance": [1]}))
    assert cat.snapshot().versions == {"t0": 2, "t1": 2}


def test_a_member_aborted_on_its_own_fails_the_whole_commit(cat, tmp_path):
    _accounts(cat, tmp_path)
    tx = cat.transaction()
    tx.table("t0").append(pa.table({"id": [2], "balance": [1]}))
    tx.table("t1").append(pa.table({"id": [2], "balance": [1]}))
    tx.table("t1").abort()
    with pytest.raises(DeltaTxError, match="committed nothing"):
        tx.commit()
    assert cat.snapshot().versions == {"t0": 1, "t1": 1}


def test_change_data_feed_of_a_multi_table_transaction(cat, tmp_path):
    props = {"delta.enableChangeDataFeed": "true"}
    for n in ("t0", "t1"):
        cat.create_table(n, str(tmp_path / n), SCHEMA, properties=props).append(
            pa.table({"id": [1, 2], "balance": [50, 60]}))
    with cat.transaction() as tx:
        tx.table("t0").update(where="id = 1", set={"balance": "balance - 5"})
        tx.table("t1").delete(where="id = 2")
    ch0 = cat.table("t0").changes(starting_version=2).sort_by("_change_type")
    assert ch0["_change_type"].to_pylist() == ["update_postimage", "update_preimage"]
    assert ch0["balance"].to_pylist() == [45, 50]
    ch1 = cat.table("t1").changes(starting_version=2)
    assert ch1["_change_type"].to_pylist() == ["delete"] and ch1["id"].to_pylist() == [2]


@pytest.mark.parametrize("phase", ["ratified", "published"])
def test_a_release_that_stopped_half_way_is_finished_not_split(cat, tmp_path, phase):
    """release() = a commit dropping catalogManaged, then forgetting the name. Dying between the
    two must not leave a table that both the catalog and path clients commit to."""
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA).append(pa.table({"id": [1], "balance": [1]}))
    with phases.observe(crash_at(phase)), pytest.raises(Crash):
        cat.release("t")
    fresh = deltatx.Catalog(cat.url)
    with pytest.raises(CatalogTableNotFoundError, match="released"):
        fresh.table("t")  # the catalog never ratifies another version of it
    assert fresh.list_tables() == []
    path = deltatx.Table(uri)  # the release commit was published (by the catalog, if not before)
    assert "catalogManaged" not in (path.protocol.writer_features or ())
    path.append(pa.table({"id": [2], "balance": [2]}))
    assert sorted(deltatx.Table(uri).to_arrow()["id"].to_pylist()) == [1, 2]
    fresh.register("t", uri)  # and it can be adopted again
    assert sorted(fresh.table("t").to_arrow()["id"].to_pylist()) == [1, 2]
    fresh.close()


def test_release_again_finishes_a_release_that_stopped(cat, tmp_path):
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA).append(pa.table({"id": [1], "balance": [1]}))
    with phases.observe(crash_at("published")), pytest.raises(Crash):
        cat.release("t")
    released = cat.release("t")
    assert cat.list_tables() == [] and released.version == 2
    released.append(pa.table({"id": [2], "balance": [2]}))


def test_a_catalog_handle_from_before_the_release_cannot_commit_after_it(cat, tmp_path):
    uri = str(tmp_path / "t")
    old = cat.create_table("t", uri, SCHEMA)
    old.append(pa.table({"id": [1, 2], "balance": [1, 2]}))
    pending = old.transaction()  # pinned before the release
    pending.delete(where="id = 2")
    with phases.observe(crash_at("published")), pytest.raises(Crash):
        cat.release("t")
    before = sorted(os.listdir(os.path.join(uri, "_delta_log")))
    with pytest.raises(CatalogTableNotFoundError, match="released"):
        pending.commit()  # its rebase meets the release commit
    with pytest.raises(CatalogTableNotFoundError, match="released"):
        old.delete(where="id = 1")  # caught up: a catalog route to a path table
    assert sorted(os.listdir(os.path.join(uri, "_delta_log"))) == before
    assert sorted(deltatx.Table(uri).to_arrow()["id"].to_pylist()) == [1, 2]


def test_drop_publishes_what_was_ratified_first(cat, tmp_path):
    uri = str(tmp_path / "t")
    t = cat.create_table("t", uri, SCHEMA)
    t.append(pa.table({"id": [1], "balance": [1]}))
    with phases.observe(crash_at("ratified")), pytest.raises(Crash):
        cat.table("t").append(pa.table({"id": [2], "balance": [2]}))  # ratified, never published
    assert not os.path.exists(os.path.join(uri, "_delta_log", f"{2:020d}.json"))
    cat.drop_table("t")
    cat.register("t", uri)
    assert sorted(cat.table("t").to_arrow()["id"].to_pylist()) == [1, 2]


def _stray_commit(uri: str, version: int) -> str:
    """A published file for ``version`` that the catalog never ratified (a copy of version 1's)."""
    log = os.path.join(uri, "_delta_log")
    with open(os.path.join(log, f"{1:020d}.json"), "rb") as fh:
        info = orjson.loads(fh.readline())
    info["commitInfo"]["operation"] = "STRAY"
    info["commitInfo"]["inCommitTimestamp"] += 1
    path = os.path.join(log, f"{version:020d}.json")
    with open(path, "wb") as fh:
        fh.write(orjson.dumps(info) + b"\n")
    return path


def test_a_published_file_past_the_catalog_is_ignored_by_readers_and_never_overwritten(cat, tmp_path):
    """PROTOCOL.md: readers ignore published files past the catalog's latest ratified version, and
    writers must never overwrite a log entry. A writer that finds one (a client wrote behind the
    catalog's back, or the catalog's database was restored from an older backup) refuses to
    ratify that version again, naming both; once the file is moved away it commits."""
    uri = str(tmp_path / "t")
    t = cat.create_table("t", uri, SCHEMA)
    t.append(pa.table({"id": [1], "balance": [1]}))
    stray = _stray_commit(uri, 2)
    with open(stray, "rb") as fh:
        stray_bytes = fh.read()
    assert cat.table("t").version == 1  # not ratified: ignored
    with pytest.raises(CatalogLogAheadError, match="restored from an older backup") as info:
        cat.table("t").append(pa.table({"id": [2], "balance": [2]}))
    assert (info.value.catalog_latest, info.value.published_through) == (1, 2)
    with open(stray, "rb") as fh:
        assert fh.read() == stray_bytes
    assert [int(v) for (v,) in cat._db.query("SELECT version FROM deltatx_commits ORDER BY version")] == [0, 1]
    refused = cat.table("t")
    with pytest.raises(CatalogLogAheadError):
        refused.append(pa.table({"id": [2], "balance": [2]}))
    os.rename(stray, str(tmp_path / "stray.json"))
    assert refused.refresh().append(pa.table({"id": [2], "balance": [2]})).version == 2  # the same handle
    fresh = deltatx.Catalog(cat.url)
    assert fresh.table("t").history(1)[0]["operation"] == "WRITE"
    assert sorted(fresh.table("t").to_arrow()["id"].to_pylist()) == [1, 2]
    fresh.close()


def test_the_ratified_commit_replaces_a_stray_file_put_after_the_writer_listed_the_log(cat, tmp_path):
    """A file put under a version while a writer was ratifying it: the catalog's commit is the
    version (PROTOCOL.md), so its bytes replace the stray ones."""
    uri = str(tmp_path / "t")
    t = cat.create_table("t", uri, SCHEMA)
    t.append(pa.table({"id": [1], "balance": [1]}))
    writer = cat.table("t")
    _stray_commit(uri, 2)
    assert writer.append(pa.table({"id": [2], "balance": [2]})).version == 2
    fresh = deltatx.Catalog(cat.url)
    assert fresh.table("t").history(1)[0]["operation"] == "WRITE"
    assert sorted(fresh.table("t").to_arrow()["id"].to_pylist()) == [1, 2]
    fresh.close()


def test_reorg_obeys_the_maintenance_policy(cat, tmp_path):
    uri = str(tmp_path / "t")
    t = cat.create_table("t", uri, SCHEMA, properties={"delta.enableDeletionVectors": "true"})
    t.append(pa.table({"id": [1, 2], "balance": [1, 2]}))
    t.delete(where="id = 1")
    cat.set_maintenance("t", False)
    before = sorted(os.listdir(os.path.join(uri, "_delta_log")))
    with pytest.raises(CatalogMaintenanceError, match="REORG"):
        cat.table("t").reorg(purge=True)
    assert sorted(os.listdir(os.path.join(uri, "_delta_log"))) == before
    cat.set_maintenance("t", True)
    assert cat.table("t").reorg(purge=True).metrics["numRemovedFiles"] == 1


def test_sqlite_url_with_three_slashes_is_relative(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.makedirs("warehouse")
    with deltatx.Catalog("sqlite:///warehouse/catalog.db") as cat:
        cat.create_table("t", "warehouse/t", SCHEMA)
    assert os.path.isfile(tmp_path / "warehouse" / "catalog.db")
    with deltatx.Catalog(f"sqlite:///{tmp_path}/warehouse/catalog.db") as cat:  # four slashes: absolute
        assert cat.list_tables() == ["t"]
        with pytest.raises(CatalogManagedTableError):
            deltatx.Table(str(tmp_path / "warehouse" / "t"))


def test_drop_of_a_table_whose_files_are_gone_forgets_it_without_writing(cat, tmp_path):
    import shutil

    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA).append(pa.table({"id": [1], "balance": [1]}))
    shutil.rmtree(uri)
    cat.drop_table("t")
    assert cat.list_tables() == [] and not os.path.exists(uri)  # nothing published into a new folder
    cat.create_table("t2", uri, SCHEMA).append(pa.table({"id": [2], "balance": [2]}))
    cat.drop_table("t2", purge=True)
    assert not os.path.exists(uri)


def test_creating_a_table_where_a_file_is_registers_nothing(cat, tmp_path):
    """Before, the name and version 0 were ratified, then publishing failed with a raw
    NotADirectoryError and the name stayed taken by a table nobody could open."""
    from deltatx.errors import LocationNotEmptyError

    (tmp_path / "afile").write_bytes(b"x")
    with pytest.raises(LocationNotEmptyError, match="is a file"):
        cat.create_table("y", str(tmp_path / "afile"), SCHEMA)
    assert cat.list_tables() == [] and cat.snapshot().versions == {}
    assert cat.create_table("y", str(tmp_path / "y"), SCHEMA).version == 0
    with pytest.raises(LocationNotEmptyError, match="is a file"):
        deltatx.create_table(str(tmp_path / "afile"), SCHEMA)
    with pytest.raises(LocationNotEmptyError, match="is a file"):  # a folder under the file
        cat.create_table("z", str(tmp_path / "afile" / "sub"), SCHEMA)
    assert (tmp_path / "afile").read_bytes() == b"x" and cat.list_tables() == ["y"]


def test_a_drop_another_client_finished_meanwhile_is_no_error(cat, catalog_url, tmp_path, monkeypatch):
    """Two clients dropping one table: the second, having published, finds the table row gone.
    Before, it said a ratified version "could not be published" (nothing was at risk)."""
    from deltatx.catalog import store as catalog_store

    cat.create_table("t", str(tmp_path / "t"), SCHEMA).append(pa.table({"id": [1], "balance": [1]}))
    other = deltatx.Catalog(catalog_url)
    publish = catalog_store.CatalogLogStore.publish_pending

    def publish_then_lose_the_race(self):
        out = publish(self)
        if self.catalog is other:
            monkeypatch.setattr(catalog_store.CatalogLogStore, "publish_pending", publish)
            cat.drop_table("t")
        return out

    monkeypatch.setattr(catalog_store.CatalogLogStore, "publish_pending", publish_then_lose_the_race)
    other.drop_table("t")
    assert cat.list_tables() == [] and other.list_tables() == []
    other.close()


def test_a_purging_drop_another_client_finished_meanwhile_is_no_error(cat, catalog_url, tmp_path, monkeypatch):
    from deltatx.catalog import catalog as catalog_module

    cat.create_table("t", str(tmp_path / "t"), SCHEMA).append(pa.table({"id": [1], "balance": [1]}))
    other = deltatx.Catalog(catalog_url)
    forget = catalog_module.Catalog._forget

    def forget_then_lose_the_race(self, entry, publish=True):
        forget(self, entry, publish)
        if self is other:
            import shutil

            shutil.rmtree(tmp_path / "t")  # the other client, dropping it too, purged first

    monkeypatch.setattr(catalog_module.Catalog, "_forget", forget_then_lose_the_race)
    other.drop_table("t", purge=True)
    assert not (tmp_path / "t").exists() and cat.list_tables() == []
    other.close()


def test_a_transaction_refuses_a_table_dropped_and_created_again_after_its_cut(cat, tmp_path):
    """The cut holds the old table at version 3; the name now holds a new table. Before, the
    new table was read at the old table's version number."""
    cat.create_table("a", str(tmp_path / "a"), SCHEMA)
    old = cat.create_table("b", str(tmp_path / "b_old"), SCHEMA)
    for i in range(3):
        old.append(pa.table({"id": [i], "balance": [i]}))
    tx = cat.transaction()
    tx.table("a").append(pa.table({"id": [9], "balance": [9]}))
    cat.drop_table("b", purge=True)
    new = cat.create_table("b", str(tmp_path / "b_new"), SCHEMA)
    for i in range(4):
        new.append(pa.table({"id": [100 + i], "balance": [0]}))
    with pytest.raises(CatalogTableNotFoundError, match="dropped after this transaction's cut"):
        tx.table("b")
    tx.abort()
    # the same after a table created since the cut joined it: only that table's entry joins
    tx = cat.transaction()
    tx.table("a").read()
    cat.drop_table("b", purge=True)
    cat.create_table("b", str(tmp_path / "b_newer"), SCHEMA)
    cat.create_table("c", str(tmp_path / "c"), SCHEMA)
    tx.table("c")
    with pytest.raises(CatalogTableNotFoundError, match="dropped after this transaction's cut"):
        tx.table("b")
    tx.abort()
    assert cat.snapshot().versions["a"] == 0


def test_a_closed_catalog_raises_a_typed_error(cat, tmp_path):
    from deltatx.errors import CatalogError

    t = cat.create_table("t", str(tmp_path / "t"), SCHEMA)
    cat.close()
    for call in (lambda: t.append(pa.table({"id": [1], "balance": [1]})), lambda: cat.table("t"), cat.list_tables):
        with pytest.raises(CatalogError, match="was closed"):
            call()
    reopened = deltatx.Catalog(cat.url)
    assert reopened.table("t").version == 0 and reopened.table("t").to_arrow().num_rows == 0  # nothing written
    reopened.close()


def test_bad_locations_and_attempt_counts_are_refused(cat, tmp_path):
    from deltatx.errors import ArgumentTypeError, InvalidArgumentError

    with pytest.raises(ArgumentTypeError, match="location"):
        cat.create_table("t", None, SCHEMA)  # before: a table at ./None
    for bad in (0, -1, True):
        with pytest.raises(InvalidArgumentError, match="max_attempts"):
            cat.transaction(max_attempts=bad)
    assert cat.list_tables() == []


def test_a_ratified_commit_whose_staged_file_is_lost_is_corruption_not_an_older_version(cat, tmp_path, monkeypatch):
    """Ratified, not published yet, and its staged file gone: readers used to serve the version
    before it without a word (half of a multi-table commit), and writers failed with a bare
    FileNotFoundError. Every route now says which version's bytes are lost."""
    from deltatx.catalog import store as catalog_store
    from deltatx.errors import CorruptLogError

    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA).append(pa.table({"id": [1], "balance": [1]}))
    monkeypatch.setattr(catalog_store, "INLINE_COMMIT_MAX_BYTES", 0)  # staged, as a commit over 1 MiB
    with phases.observe(crash_at("ratified")), pytest.raises(Crash):
        cat.table("t").append(pa.table({"id": [2], "balance": [2]}))
    staged_dir = os.path.join(uri, "_delta_log", "_staged_commits")
    (name,) = os.listdir(staged_dir)
    os.rename(os.path.join(staged_dir, name), str(tmp_path / name))
    fresh = deltatx.Catalog(cat.url)
    try:
        for attempt in (lambda: fresh.table("t").version,
                        lambda: fresh.snapshot().table("t").to_arrow(),
                        lambda: fresh.table("t").append(pa.table({"id": [3], "balance": [3]}))):
            with pytest.raises(CorruptLogError, match=f"version 2 was ratified.*{name}") as info:
                attempt()
            assert info.value.version == 2
        os.rename(str(tmp_path / name), os.path.join(staged_dir, name))  # restored from a backup
        assert sorted(fresh.table("t").to_arrow()["id"].to_pylist()) == [1, 2]
    finally:
        fresh.close()


def test_a_path_handle_opened_before_registration_refuses_to_refresh(cat, tmp_path):
    """The table is the catalog's now: a path handle's refresh used to read on by path, a
    published file the catalog never ratified included."""
    from deltatx.errors import CatalogManagedTableError

    uri = str(tmp_path / "t")
    deltatx.create_table(uri, SCHEMA).append(pa.table({"id": [1], "balance": [1]}))
    stale = deltatx.Table(uri)
    cat.register("t", uri)
    with pytest.raises(CatalogManagedTableError, match="open it through its catalog"):
        stale.refresh()
    assert stale.version == 1 and stale.to_arrow()["id"].to_pylist() == [1]  # its snapshot stands


def test_a_snapshot_taken_before_a_release_still_reads_its_versions(cat, tmp_path):
    uri = str(tmp_path / "t")
    t = cat.create_table("t", uri, SCHEMA)
    t.append(pa.table({"id": [1], "balance": [1]}))
    snap = cat.snapshot()
    cat.release("t")
    deltatx.Table(uri).append(pa.table({"id": [2], "balance": [2]}))
    assert snap.table("t").version == 1
    assert snap.table("t").to_arrow()["id"].to_pylist() == [1]


def test_a_snapshot_of_a_table_dropped_with_its_files_says_so(cat, tmp_path):
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA).append(pa.table({"id": [1], "balance": [1]}))
    snap = cat.snapshot()
    cat.drop_table("t", purge=True)
    with pytest.raises(CatalogTableNotFoundError, match="dropped .* with its files"):
        snap.table("t")


@pytest.mark.parametrize("operation", ["VACUUM", "OPTIMIZE"])
def test_maintenance_through_a_handle_kept_across_a_release_says_the_table_left(cat, tmp_path, operation):
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA).append(pa.table({"id": [1], "balance": [1]}))
    kept = cat.table("t")
    cat.release("t")
    with pytest.raises(CatalogMaintenanceError, match=f"{operation}: the table is no longer in catalog"):
        kept.vacuum() if operation == "VACUUM" else kept.optimize()


def test_a_nul_in_a_catalog_url_is_a_url_error(tmp_path):
    from deltatx.errors import CatalogURLError

    with pytest.raises(CatalogURLError, match="NUL"):
        deltatx.Catalog(f"sqlite:///{tmp_path}/c.db\x00x")
