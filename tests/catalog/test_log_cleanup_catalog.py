"""Metadata cleanup of catalog-managed tables (SQLite and PostgreSQL each): maintenance, so only
through ``cat.table(name)`` and where the catalog's policy allows it (PROTOCOL.md, catalogManaged:
"Maintenance Operations on Catalog-managed Tables"); only versions the catalog verified published;
and nothing the catalog keeps (inline bytes, staged files) brings a cleaned-up commit back or makes
the table unreadable afterwards. Log files are made old with ``os.utime``."""

from __future__ import annotations

import os
import time
import warnings

import pyarrow as pa
import pytest

import deltatx
from deltatx.catalog import store as catalog_store
from deltatx.errors import CatalogMaintenanceError, TimeTravelError
from deltatx.tables.ops.log_cleanup import PACING
from deltatx.txnlog.checkpoint import checkpoint_name
from deltatx.txnlog.store import commit_name

SCHEMA = pa.schema([("id", pa.int64())])
DAY = 86400


@pytest.fixture(autouse=True)
def _no_pacing():
    PACING.clear()
    yield
    PACING.clear()


def _row(i: int) -> pa.Table:
    return pa.table({"id": [i]}, schema=SCHEMA)


def _rows(table) -> list[int]:
    return sorted(table.to_arrow()["id"].to_pylist())


def _log(uri: str) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(uri, "_delta_log")) if not n.startswith("."))


def _age(uri: str, through: int, days: float = 40) -> None:
    base = time.time() - days * DAY
    folder = os.path.join(uri, "_delta_log")
    for name in os.listdir(folder):
        if name[:20].isdigit() and int(name[:20]) <= through:
            os.utime(os.path.join(folder, name), (base + int(name[:20]),) * 2)


def _table(cat, tmp_path, versions: int = 12, name: str = "t") -> str:
    uri = str(tmp_path / name)
    cat.create_table(name, uri, SCHEMA, properties={"delta.checkpointInterval": "5"})
    for i in range(1, versions + 1):
        cat.table(name).append(_row(i))
    return uri


EXPIRED_UP_TO_10 = sorted([commit_name(v) for v in range(10)] + [checkpoint_name(5)])


def test_cat_table_cleans_up_expired_published_versions(cat, tmp_path):
    uri = _table(cat, tmp_path)
    _age(uri, 11)
    assert cat.table("t").cleanup_metadata() == EXPIRED_UP_TO_10
    assert commit_name(10) in _log(uri) and checkpoint_name(10) in _log(uri)
    assert _rows(cat.table("t")) == list(range(1, 13))
    assert [h["version"] for h in cat.table("t").history()] == [12, 11, 10]
    with pytest.raises(TimeTravelError):
        cat.table("t", version=3)
    cat.table("t").append(_row(13))
    with deltatx.Catalog(cat.url) as fresh:
        assert _rows(fresh.table("t")) == list(range(1, 14))


@pytest.mark.parametrize("route", ["pinned version", "catalog snapshot", "bare store"])
def test_other_routes_are_refused_and_delete_nothing(cat, tmp_path, route):
    uri = _table(cat, tmp_path)
    _age(uri, 11)
    files = _log(uri)
    handle = {"pinned version": lambda: cat.table("t", version=12),
              "catalog snapshot": lambda: cat.snapshot().table("t"),
              "bare store": lambda: deltatx.Table(uri, _store=cat.store("t"))}[route]()
    with pytest.raises(CatalogMaintenanceError, match="METADATA CLEANUP .*cat.table"):
        handle.cleanup_metadata()
    assert _log(uri) == files


def test_the_policy_refuses_the_explicit_call_and_the_automatic_cleanup_skips_quietly(cat, tmp_path):
    uri = _table(cat, tmp_path)
    _age(uri, 11)
    files = _log(uri)
    cat.set_maintenance("t", False)
    with pytest.raises(CatalogMaintenanceError, match="METADATA CLEANUP on table 't' is not allowed"):
        cat.table("t").cleanup_metadata()
    t = cat.table("t")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(13, 16):
            t.append(_row(i))  # 15 is checkpointed: no cleanup, no warning
    assert set(files) <= set(_log(uri))
    cat.set_maintenance("t", True)
    PACING.clear()  # the files were aged by hand after this process last looked
    for i in range(16, 21):
        t.append(_row(i))  # 20 is checkpointed and the expired files go
    assert commit_name(0) not in _log(uri) and commit_name(10) in _log(uri)
    assert _rows(cat.table("t")) == list(range(1, 21))


def test_only_versions_the_catalog_verified_published_are_cleaned_up(cat, tmp_path, monkeypatch):
    uri = _table(cat, tmp_path)
    _age(uri, 11)
    store_class = catalog_store.CatalogLogStore

    def verified_through_7(self):  # a catalog that has verified its log only up to version 7
        self._through = 7
        return self.latest_ratified()

    monkeypatch.setattr(store_class, "publish_pending", verified_through_7)
    assert cat.table("t").cleanup_metadata() == [commit_name(v) for v in range(5)]  # boundary 5, not 10
    monkeypatch.undo()
    assert cat.table("t").cleanup_metadata() == sorted([commit_name(v) for v in range(5, 10)]
                                                       + [checkpoint_name(5)])


def test_the_catalog_s_copies_never_bring_a_cleaned_up_commit_back(cat, tmp_path, monkeypatch):
    """Inline commits the catalog still holds (dropped at close, or by vacuum_staged) and staged
    files of published versions (deleted after a checkpoint, or by vacuum_staged) are compared with
    the published file before they go, and one that is missing used to be written again: a lone
    commit under the table's oldest checkpoint, after every cleanup."""
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, SCHEMA, properties={"delta.checkpointInterval": "5"})
    cat.set_maintenance("t", False)  # so the staged files stay after each checkpoint
    monkeypatch.setattr(catalog_store, "INLINE_COMMIT_MAX_BYTES", 0)
    for i in range(1, 7):
        cat.table("t").append(_row(i))  # staged
    monkeypatch.undo()
    for i in range(7, 13):
        cat.table("t").append(_row(i))  # inline: the catalog keeps their bytes until dropped
    assert os.listdir(os.path.join(uri, "_delta_log", "_staged_commits"))
    cat.set_maintenance("t", True)
    _age(uri, 11)
    assert cat.table("t").cleanup_metadata() == EXPIRED_UP_TO_10
    staged = cat.vacuum_staged("t")  # the staged files of published versions, and the inline bytes
    assert [n[:20] for n in staged] == [f"{v:020d}" for v in range(1, 7)]
    with deltatx.Catalog(cat.url) as again:
        assert _rows(again.table("t")) == list(range(1, 13))
    assert _log(uri)[0] == checkpoint_name(10)
    assert not any(commit_name(v) in _log(uri) for v in range(10))


def test_the_catalog_s_inline_copies_dropped_at_close_stay_dropped(catalog_url, tmp_path):
    with deltatx.Catalog(catalog_url) as cat:
        uri = _table(cat, tmp_path)  # inline commits this process published: dropped at close
        _age(uri, 11)
        assert cat.table("t").cleanup_metadata() == EXPIRED_UP_TO_10
    assert not any(commit_name(v) in _log(uri) for v in range(10))
    with deltatx.Catalog(catalog_url) as cat:
        assert _rows(cat.table("t")) == list(range(1, 13))
        assert cat.vacuum_staged("t") == []
    assert not any(commit_name(v) in _log(uri) for v in range(10))


def test_a_handle_from_before_the_cleanup_writes_after_it(cat, tmp_path):
    uri = _table(cat, tmp_path, versions=3)
    old = cat.table("t")
    for i in range(4, 13):
        cat.table("t").append(_row(i))
    _age(uri, 11)
    assert cat.table("t").cleanup_metadata() == EXPIRED_UP_TO_10
    cat.vacuum_staged("t")  # the catalog drops the bytes of the published versions too
    old.delete("id = 1")
    old.append(_row(100))
    assert cat.table("t").version == 14
    assert _rows(cat.table("t")) == list(range(2, 13)) + [100]
    assert not any(commit_name(v) in _log(uri) for v in range(10))


def test_a_released_table_keeps_reading_after_a_cleanup(cat, tmp_path):
    uri = _table(cat, tmp_path)
    _age(uri, 11)
    cat.table("t").cleanup_metadata()
    cat.release("t")
    assert _rows(deltatx.Table(uri)) == list(range(1, 13))
