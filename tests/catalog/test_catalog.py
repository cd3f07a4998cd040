"""deltatx.Catalog on SQLite and PostgreSQL: names, commits through the catalog, path guard,
register/release, multi-table transactions, consistent snapshots, crashes at the new phases."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pytest

import deltatx
from deltatx import phases
from crash_points import Crash, crash_at
from deltatx.catalog.db import SCHEMA_VERSION
from deltatx.errors import (
    CatalogManagedTableError,
    CatalogTableExistsError,
    CatalogTableNotFoundError,
    CatalogURLError,
    ConcurrentModificationException,
)

SCHEMA = pa.schema([("id", pa.int64()), ("balance", pa.int64())])


def _log(uri: str) -> list[str]:
    return sorted(f for f in os.listdir(os.path.join(uri, "_delta_log")) if f.endswith(".json"))


def _staged(uri: str) -> list[str]:
    d = os.path.join(uri, "_delta_log", "_staged_commits")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def _data_files(uri: str) -> list[str]:
    return sorted(f for f in os.listdir(uri) if f.endswith(".parquet"))


def _commit_info(uri: str, version: int) -> dict:
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        return orjson.loads(fh.readline())["commitInfo"]


def _catalog_commits(cat) -> list[tuple]:
    """(version, staged name, holds the bytes?) of every ratified commit."""
    rows = cat._db.query("SELECT version, staged_name, content IS NOT NULL FROM deltatx_commits ORDER BY version")
    return [(int(v), s, bool(c)) for v, s, c in rows]


def _bank(cat, tmp_path, names=("a", "b")):
    for n in names:
        cat.create_table(n, str(tmp_path / n), SCHEMA).append(pa.table({"id": [1], "balance": [100]}))


def test_create_append_read_through_catalog(cat, tmp_path):
    uri = str(tmp_path / "t")
    t = cat.create_table("t", uri, SCHEMA, properties={"delta.appendOnly": "false"})
    assert "catalogManaged" in t.protocol.reader_features
    assert {"catalogManaged", "inCommitTimestamp", "vacuumProtocolCheck"} <= set(t.protocol.writer_features)
    assert t.properties["delta.enableInCommitTimestamps"] == "true"
    t.append(pa.table({"id": [1, 2], "balance": [5, 6]}))
    t.append(pa.table({"id": [3], "balance": [7]}))
    assert cat.table("t").to_arrow().sort_by("id")["id"].to_pylist() == [1, 2, 3]
    assert cat.list_tables() == ["t"]
    # ratified inline (no staged file) and published in _delta_log; the catalog keeps the bytes
    # until the publisher has fsynced the files (at close, or log cleanup)
    assert _log(uri) == [f"{v:020d}.json" for v in range(3)]
    assert _staged(uri) == []
    assert _catalog_commits(cat) == [(0, None, True), (1, None, True), (2, None, True)]
    with open(os.path.join(uri, "_delta_log", f"{2:020d}.json"), "rb") as fh:
        assert cat._db.query("SELECT content FROM deltatx_commits WHERE version = 2")[0][0] == fh.read()
    cat.close()
    with deltatx.Catalog(cat.url) as again:
        assert _catalog_commits(again) == [(0, None, False), (1, None, False), (2, None, False)]
    icts = [_commit_info(uri, v)["inCommitTimestamp"] for v in range(3)]
    assert icts == sorted(icts) and len(set(icts)) == 3  # strictly increasing
    assert all(_commit_info(uri, v)["txnId"] for v in range(3))


def test_path_access_refused_and_nothing_written(cat, tmp_path):
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA).append(pa.table({"id": [1], "balance": [1]}))
    before, files = _log(uri), _data_files(uri)
    with pytest.raises(CatalogManagedTableError, match="through its catalog"):
        deltatx.Table(uri)
    with pytest.raises(CatalogManagedTableError):
        deltatx.Table(uri, version=0)
    assert _log(uri) == before and _data_files(uri) == files


def test_typed_errors_for_names_and_urls(cat, tmp_path):
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA)
    with pytest.raises(CatalogTableNotFoundError, match="nope"):
        cat.table("nope")
    with pytest.raises(CatalogTableNotFoundError):
        cat.drop_table("nope")
    with pytest.raises(CatalogTableExistsError):
        cat.create_table("t", str(tmp_path / "other"), SCHEMA)
    assert not os.path.exists(tmp_path / "other")  # refused before anything was written
    with pytest.raises(CatalogTableExistsError):
        cat.register("t2", uri)  # same location, other name
    assert cat.list_tables() == ["t"] and cat.table("t").version == 0
    for bad in ("mysql://x/y", "catalog.db", "sqlite://", f"sqlite:///{tmp_path}/missing/dir/c.db"):
        with pytest.raises(CatalogURLError):
            deltatx.Catalog(bad)


def test_register_and_release_round_trip(cat, tmp_path):
    uri = str(tmp_path / "p")
    p = deltatx.create_table(uri, SCHEMA)
    p.append(pa.table({"id": [1], "balance": [10]}))
    t = cat.register("p", uri)
    assert t.version == 2 and "catalogManaged" in t.protocol.writer_features
    assert t.properties["delta.inCommitTimestampEnablementVersion"] == "2"
    assert "inCommitTimestamp" in _commit_info(uri, 2)  # the enablement commit has one
    with pytest.raises(CatalogManagedTableError):
        deltatx.Table(uri)
    t.append(pa.table({"id": [2], "balance": [20]}))
    released = cat.release("p")
    assert cat.list_tables() == []
    assert "catalogManaged" not in (released.protocol.writer_features or ())
    released.append(pa.table({"id": [3], "balance": [30]}))  # a path table again
    assert deltatx.Table(uri).to_arrow().sort_by("id")["id"].to_pylist() == [1, 2, 3]


def test_stale_path_handle_cannot_bypass_the_catalog(cat, tmp_path):
    uri = str(tmp_path / "p")
    p = deltatx.create_table(uri, SCHEMA)
    pinned = p.transaction()  # pinned before the registration
    pinned.append(pa.table({"id": [1], "balance": [1]}))
    cat.register("p", uri)
    before = _log(uri)
    with pytest.raises(CatalogManagedTableError):
        p.append(pa.table({"id": [1], "balance": [1]}))  # catches up, sees catalogManaged
    with pytest.raises(CatalogManagedTableError):
        pinned.commit()  # the winner made the table catalog-managed: no path commit after it
    assert _log(uri) == before and _data_files(uri) == []


def test_multi_table_transaction_is_all_or_nothing(cat, tmp_path):
    _bank(cat, tmp_path)
    with cat.transaction() as tx:
        tx.table("a").update(where="id = 1", set={"balance": "balance - 30"})
        tx.table("b").update(where="id = 1", set={"balance": "balance + 30"})
    snap = cat.snapshot()
    assert snap.versions == {"a": 2, "b": 2}
    assert snap.table("a").to_arrow()["balance"].to_pylist() == [70]
    assert snap.table("b").to_arrow()["balance"].to_pylist() == [130]
    # a loser on one table commits nothing on any
    t1, t2 = cat.transaction(), cat.transaction()
    for tx, amount in ((t1, 1), (t2, 2)):
        tx.table("a").update(where="id = 1", set={"balance": f"balance - {amount}"})
        tx.table("b").update(where="id = 1", set={"balance": f"balance + {amount}"})
    t1.commit()
    loser_files = {n: sorted(t2.table(n)._written) for n in "ab"}
    assert all(os.path.exists(tmp_path / n / f) for n in "ab" for f in loser_files[n])
    with pytest.raises(ConcurrentModificationException):
        t2.commit()
    assert cat.snapshot().versions == {"a": 3, "b": 3}
    assert not any(os.path.exists(tmp_path / n / f) for n in "ab" for f in loser_files[n])  # nothing left
    total = sum(cat.table(n).to_arrow()["balance"].to_pylist()[0] for n in "ab")
    assert total == 200


def test_blind_appends_rebase_across_tables(cat, tmp_path):
    _bank(cat, tmp_path)
    tx = cat.transaction()
    tx.table("a").append(pa.table({"id": [2], "balance": [0]}))
    tx.table("b").append(pa.table({"id": [2], "balance": [0]}))
    cat.table("a").append(pa.table({"id": [3], "balance": [0]}))  # a winner on one table
    results = tx.commit()
    assert results["a"].version == 3 and results["a"].conflicts_resolved == 1 and results["b"].version == 2


@pytest.mark.parametrize("phase", ["staged", "ratified", "published"])
def test_crash_at_each_phase_changes_every_table_or_none(cat, tmp_path, phase):
    _bank(cat, tmp_path)

    tx = cat.transaction()
    tx.table("a").update(where="id = 1", set={"balance": "balance - 5"})
    tx.table("b").update(where="id = 1", set={"balance": "balance + 5"})
    with phases.observe(crash_at(phase)), pytest.raises(Crash):
        tx.commit()
    fresh = deltatx.Catalog(cat.url)  # another process looking afterwards
    snap = fresh.snapshot()
    expected = {"a": 1, "b": 1} if phase == "staged" else {"a": 2, "b": 2}
    assert snap.versions == expected
    balances = [snap.table(n).to_arrow()["balance"].to_pylist()[0] for n in "ab"]
    assert sum(balances) == 200 and balances == ([100, 100] if phase == "staged" else [95, 105])
    if phase != "staged":  # ratified but maybe unpublished: the reader published it, in order
        assert _log(str(tmp_path / "a"))[-1] == f"{2:020d}.json"
    else:  # the inline commits died with the database transaction: no file anywhere
        assert _staged(str(tmp_path / "a")) == [] and fresh.vacuum_staged("a", retention_hours=0) == []
        assert _log(str(tmp_path / "a"))[-1] == f"{1:020d}.json"
    fresh.close()


def test_snapshot_is_one_cut(cat, tmp_path):
    _bank(cat, tmp_path)
    snap = cat.snapshot()
    with cat.transaction() as tx:
        tx.table("a").update(where="id = 1", set={"balance": "balance - 1"})
        tx.table("b").update(where="id = 1", set={"balance": "balance + 1"})
    assert snap.table("a").to_arrow()["balance"].to_pylist() == [100]
    assert snap.table("b").to_arrow()["balance"].to_pylist() == [100]
    with pytest.raises(CatalogTableNotFoundError):
        snap.table("zzz")


def test_drop_table(cat, tmp_path):
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA)
    cat.drop_table("t")
    assert cat.list_tables() == [] and os.path.isdir(uri)
    cat.register("t", uri)  # a dropped (not purged) table can be adopted again
    cat.drop_table("t", purge=True)
    assert not os.path.exists(uri)


def test_schema_is_versioned_and_created_once(catalog_url):
    c1 = deltatx.Catalog(catalog_url)
    c2 = deltatx.Catalog(catalog_url)
    assert c1._db.query("SELECT version FROM deltatx_schema_version") == [(SCHEMA_VERSION,)]
    c1.close(), c2.close()


def test_a_restore_in_a_catalog_transaction_whose_files_vacuum_deleted_commits_nothing(cat, tmp_path):
    """The re-added files are checked again under the commit lock, as a path table's commit does."""
    from deltatx.errors import DataFileNotFoundError

    t = cat.create_table("a", str(tmp_path / "a"), pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": [1, 2, 3]}))
    t.delete("id = 1")
    t.delete("id = 2")
    tx = cat.transaction()
    tx.table("a").restore(version=2)
    cat.table("a").vacuum(retention_hours=0, enforce_retention_duration=False)
    before = cat.table("a").version
    with pytest.raises(DataFileNotFoundError, match="nothing was committed"):
        tx.commit()
    latest = cat.table("a")
    assert latest.version == before and latest.to_arrow()["id"].to_pylist() == [3]
    cat.table("a").append(pa.table({"id": [4]}))  # the lock was let go


def test_a_failed_statement_on_one_table_commits_no_table(cat, tmp_path):
    """The bank transfer's credit is refused by a CHECK constraint after its removes were staged:
    caught inside the block, the transaction still commits nothing on either table."""
    from deltatx.errors import ConstraintViolationError, TransactionFailedError

    _bank(cat, tmp_path)
    cat.table("b").add_constraint("not_negative", "balance >= 0")
    versions = cat.snapshot().versions
    with pytest.raises(TransactionFailedError, match="table 'b'"):
        with cat.transaction() as tx:
            tx.table("a").update(where="id = 1", set={"balance": "balance + 500"})
            try:
                tx.table("b").update(where="id = 1", set={"balance": "balance - 500"})
            except ConstraintViolationError:
                pass
    assert cat.snapshot().versions == versions
    assert [cat.table(n).to_arrow()["balance"].to_pylist() for n in "ab"] == [[100], [100]]
