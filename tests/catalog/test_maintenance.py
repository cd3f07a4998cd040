"""Maintenance gating of catalog-managed tables (VACUUM, OPTIMIZE, staged-commit cleanup), on
SQLite and PostgreSQL: allowed through cat.table(name) by default, refused through any other
route or when the catalog's policy says so — with a typed error and nothing written."""

from __future__ import annotations

import os
import sqlite3

import pyarrow as pa
import pytest

import deltatx
from deltatx.catalog.db import SCHEMA_VERSION
from deltatx.errors import CatalogMaintenanceError, CatalogTableNotFoundError

SCHEMA = pa.schema([("id", pa.int64()), ("balance", pa.int64())])


def _files(uri: str) -> list[str]:
    out = []
    for d, _, names in os.walk(uri):
        out += [os.path.relpath(os.path.join(d, n), uri) for n in names]
    return sorted(out)


def _small_files_table(cat, tmp_path, name="t"):
    """Three small files, one of them removed by an overwrite-free delete: work for both ops."""
    t = cat.create_table(name, str(tmp_path / name), SCHEMA, properties={"delta.deletedFileRetentionDuration": "interval 0 hours"})
    for i in range(3):
        t.append(pa.table({"id": [i], "balance": [10 * i]}))
    t.delete("id = 0")
    return cat.table(name)


def test_cat_table_may_optimize_and_vacuum_by_default(cat, tmp_path):
    t = _small_files_table(cat, tmp_path)
    assert cat.maintenance_allowed("t")
    before = t.version
    t.optimize()
    assert cat.table("t").version == before + 1
    removed = cat.table("t").vacuum(retention_hours=0, enforce_retention_duration=False)
    assert len(removed) == 3  # the deleted file and the two compacted ones
    assert sorted(cat.table("t").to_arrow()["id"].to_pylist()) == [1, 2]
    # the VACUUM's START and END records are ratified by the catalog like any commit
    after = cat.table("t")
    assert after.version == before + 3
    assert [h["operation"] for h in after.history(limit=2)] == ["VACUUM END", "VACUUM START"]
    assert after.history(limit=1)[0]["operationMetrics"]["numDeletedFiles"] == "3"


@pytest.mark.parametrize("route", ["pinned version", "catalog snapshot"])
def test_other_routes_are_refused_and_write_nothing(cat, tmp_path, route):
    t = _small_files_table(cat, tmp_path)
    uri, version, files = str(tmp_path / "t"), t.version, _files(str(tmp_path / "t"))
    handle = cat.table("t", version=t.version) if route == "pinned version" else cat.snapshot().table("t")
    with pytest.raises(CatalogMaintenanceError, match="cat.table"):
        handle.vacuum(retention_hours=0, enforce_retention_duration=False)
    assert cat.table("t").version == version and _files(uri) == files


def test_bare_store_route_is_refused_and_writes_nothing(cat, tmp_path):
    """A Table over the catalog's commit path that did not come from cat.table(name)."""
    t = _small_files_table(cat, tmp_path)
    uri, version, files = str(tmp_path / "t"), t.version, _files(str(tmp_path / "t"))
    handle = deltatx.Table(uri, _store=cat.store("t"))
    with pytest.raises(CatalogMaintenanceError, match="cat.table"):
        handle.optimize()
    with pytest.raises(CatalogMaintenanceError, match="cat.table"):
        handle.vacuum(retention_hours=0, enforce_retention_duration=False)
    handle.append(pa.table({"id": [7], "balance": [7]}))  # writes are not maintenance: they pass
    assert cat.table("t").version == version + 1
    assert len(_files(uri)) == len(files) + 2  # the new data file and its published (inline-ratified) commit


def test_policy_refuses_every_route_until_allowed_again(cat, tmp_path):
    t = _small_files_table(cat, tmp_path)
    uri, version, files = str(tmp_path / "t"), t.version, _files(str(tmp_path / "t"))
    cat.set_maintenance("t", False)
    assert not cat.maintenance_allowed("t")
    other = deltatx.Catalog(cat.url)  # the policy lives in the catalog, not in this process
    for handle in (cat.table("t"), other.table("t")):
        with pytest.raises(CatalogMaintenanceError, match="not allowed by catalog"):
            handle.vacuum(retention_hours=0, enforce_retention_duration=False)
        with pytest.raises(CatalogMaintenanceError, match="not allowed by catalog"):
            handle.optimize()
        with cat.transaction() as tx, pytest.raises(CatalogMaintenanceError):
            tx.table("t").optimize()  # inside a multi-table transaction too
    with pytest.raises(CatalogMaintenanceError):
        cat.vacuum_staged("t", retention_hours=0)
    assert cat.table("t").version == version and _files(uri) == files  # nothing written or deleted
    # ordinary writes are not maintenance
    cat.table("t").append(pa.table({"id": [9], "balance": [9]}))
    other.set_maintenance("t", True)
    cat.table("t").optimize()
    assert cat.table("t").version == version + 2
    other.close()


def test_maintenance_of_unknown_table_is_a_typed_error(cat):
    with pytest.raises(CatalogTableNotFoundError):
        cat.set_maintenance("nope", False)
    with pytest.raises(CatalogTableNotFoundError):
        cat.maintenance_allowed("nope")


def test_dropped_table_handle_cannot_run_maintenance(cat, tmp_path):
    t = _small_files_table(cat, tmp_path)
    cat.drop_table("t")  # releases it: one more log file
    files = _files(str(tmp_path / "t"))
    with pytest.raises(CatalogMaintenanceError, match="dropped"):
        t.vacuum(retention_hours=0, enforce_retention_duration=False)
    assert _files(str(tmp_path / "t")) == files


def test_version_1_catalog_is_upgraded_with_maintenance_allowed(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE deltatx_schema_version (version INTEGER NOT NULL);"
        "INSERT INTO deltatx_schema_version VALUES (1);"
        "CREATE TABLE deltatx_tables (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, uri TEXT NOT NULL, "
        "created_ms BIGINT NOT NULL);"
        "INSERT INTO deltatx_tables VALUES ('x', 'old', '/nowhere', 0);")
    conn.close()
    with deltatx.Catalog(f"sqlite:///{path}") as c:
        assert c._db.query("SELECT version FROM deltatx_schema_version") == [(SCHEMA_VERSION,)]
        assert c.maintenance_allowed("old")
