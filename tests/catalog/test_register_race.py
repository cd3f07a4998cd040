"""Concurrent registrations of one path table (SQLite and PostgreSQL each): exactly one wins, and
a loser gets the error a registration after the winner gets — CatalogTableExistsError naming the
winner — whichever step it lost at. Deterministic: the winner's whole registration runs inside the
loser's, right after the loser read the (still path-only) table, which is where four processes
racing lose (their registration commit then finds the winner's, which made the table
catalog-managed)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx
from deltatx.catalog import catalog as catalog_module
from deltatx.errors import CatalogTableExistsError

SCHEMA = pa.schema([("id", pa.int64())])


def test_a_registration_that_loses_the_race_gets_the_error_a_later_one_gets(cat, catalog_url, tmp_path,
                                                                            monkeypatch):
    uri = str(tmp_path / "t")
    deltatx.create_table(uri, SCHEMA).append(pa.table({"id": [1]}, schema=SCHEMA))
    winner_catalog = deltatx.Catalog(catalog_url)  # another client of the same catalog
    real_load = catalog_module.load_snapshot
    raced: list[bool] = []

    def load_then_lose_the_race(store, *args, **kwargs):
        snapshot = real_load(store, *args, **kwargs)
        if not raced:  # the loser's read: the winner registers the path between it and the commit
            raced.append(True)
            winner_catalog.register("winner", uri)
        return snapshot

    monkeypatch.setattr(catalog_module, "load_snapshot", load_then_lose_the_race)
    try:
        with pytest.raises(CatalogTableExistsError) as lost:
            cat.register("loser", uri)
        monkeypatch.undo()
        assert raced
        with pytest.raises(CatalogTableExistsError) as later:
            cat.register("late", uri)
        assert str(lost.value) == str(later.value)
        assert "registered already as 'winner'" in str(lost.value)
        assert cat.list_tables() == ["winner"]
        assert cat.table("winner").to_arrow()["id"].to_pylist() == [1]
    finally:
        winner_catalog.close()


def test_a_create_that_loses_the_race_for_its_path_gets_the_error_a_later_one_gets(cat, catalog_url, tmp_path,
                                                                                   monkeypatch):
    """Two creates of one path under different names: the loser passed its catalog check before
    the winner ratified, then found the winner's published version 0 at the path."""
    uri = str(tmp_path / "t")
    winner_catalog = deltatx.Catalog(catalog_url)
    real_check = catalog_module.Catalog._check_new
    raced: list[bool] = []

    def check_then_lose_the_race(self, name, uri_):
        real_check(self, name, uri_)
        if not raced and self is cat:
            raced.append(True)
            winner_catalog.create_table("winner", uri, SCHEMA)

    monkeypatch.setattr(catalog_module.Catalog, "_check_new", check_then_lose_the_race)
    try:
        with pytest.raises(CatalogTableExistsError) as lost:
            cat.create_table("loser", uri, SCHEMA)
        monkeypatch.undo()
        assert raced
        with pytest.raises(CatalogTableExistsError) as later:
            cat.create_table("late", uri, SCHEMA)
        assert type(lost.value) is type(later.value) and "winner" in str(lost.value)
        assert cat.list_tables() == ["winner"]
    finally:
        winner_catalog.close()


def test_a_registration_retries_when_a_path_writer_changed_the_metadata_meanwhile(cat, tmp_path, monkeypatch):
    """A concurrent property change by a path writer (not a registration) fails the registration
    commit with MetadataChangedException; the table is still a path table, so registering tries
    again on the new snapshot instead of calling it owned by an unknown catalog."""
    uri = str(tmp_path / "t")
    deltatx.create_table(uri, SCHEMA).append(pa.table({"id": [1]}, schema=SCHEMA))
    real_load = catalog_module.load_snapshot
    raced: list[bool] = []

    def load_then_a_path_writer_changes_properties(store, *args, **kwargs):
        snapshot = real_load(store, *args, **kwargs)
        if not raced:
            raced.append(True)
            deltatx.Table(uri).set_properties({"delta.appendOnly": "false"})
        return snapshot

    monkeypatch.setattr(catalog_module, "load_snapshot", load_then_a_path_writer_changes_properties)
    table = cat.register("t", uri)
    assert raced and cat.list_tables() == ["t"]
    assert table.metadata.configuration["delta.appendOnly"] == "false"
    assert table.to_arrow()["id"].to_pylist() == [1]
