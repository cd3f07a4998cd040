"""Catalog table names (SQLite and PostgreSQL each): a name that is not a ``str`` is an
ArgumentTypeError (a TypeError), a malformed one an InvalidTableNameError (a ValueError) — from
every public method that takes a name, the same on both backends, before the database is asked
and before anything is written. Names are keys, never paths: ``/``, ``..`` and inner spaces are
allowed and build no location."""

from __future__ import annotations

import os
from typing import Any, Callable

import pyarrow as pa
import pytest

from deltatx.catalog.catalog import MAX_TABLE_NAME
from deltatx.errors import (ArgumentTypeError, CatalogError, DeltaTxError, InvalidArgumentError,
                            InvalidTableNameError)

SCHEMA = pa.schema([("id", pa.int64())])

#: not a str: a TypeError, never "not found"
NOT_STR = [None, 5, b"t", ["t"]]
#: malformed: empty, whitespace around it, control characters (NUL: SQLite stored it, PostgreSQL
#: raised a raw psycopg.DataError), line breaks, an unpaired surrogate, too long
MALFORMED = ["", " ", " t", "t ", "t\n", "\tt", "x\x00y", "a\tb", "a\rb", "del\x7f", "c1\x85", "a\u2028b",
             "a\u2029b", "a\ud800b", "x" * (MAX_TABLE_NAME + 1)]


class _NoDatabase:
    """Stands in for the catalog's database while a bad name is passed: any use fails the test,
    so every check is shown to come before the database is asked."""

    def __getattr__(self, attr: str) -> Any:
        raise AssertionError(f"the catalog's database was used ({attr}) for a name that should be refused first")


def _calls(cat: Any, tmp_path: Any) -> dict[str, Callable[[Any], Any]]:
    """Every public method that takes a table name (and the snapshot's)."""
    snap = cat.snapshot()
    return {
        "create_table": lambda n: cat.create_table(n, str(tmp_path / "new"), SCHEMA),
        "register": lambda n: cat.register(n, str(tmp_path / "path_table")),
        "table": lambda n: cat.table(n),
        "table@version": lambda n: cat.table(n, version=0),
        "store": lambda n: cat.store(n),
        "release": lambda n: cat.release(n),
        "drop_table": lambda n: cat.drop_table(n),
        "drop_table(purge)": lambda n: cat.drop_table(n, purge=True),
        "set_maintenance": lambda n: cat.set_maintenance(n, False),
        "maintenance_allowed": lambda n: cat.maintenance_allowed(n),
        "vacuum_staged": lambda n: cat.vacuum_staged(n, retention_hours=0),
        "snapshot.table": lambda n: snap.table(n),
    }


def _refused_before_the_database(cat, tmp_path, monkeypatch, name, error: type) -> list[BaseException]:
    """Every method's refusal of ``name`` (each an ``error``), with the database replaced by a
    stand-in that fails on any use; nothing is written."""
    calls = _calls(cat, tmp_path)
    refusals = []
    with monkeypatch.context() as m:
        m.setattr(cat, "_db", _NoDatabase())
        for method, call in calls.items():
            with pytest.raises(error) as info:
                call(name)
            assert isinstance(info.value, DeltaTxError), method
            refusals.append(info.value)
    assert not (tmp_path / "new").exists()  # nothing written for a name that was refused
    assert cat.list_tables() == []
    return refusals


@pytest.mark.parametrize("name", NOT_STR, ids=repr)
def test_a_name_that_is_not_a_str_is_a_type_error_before_the_database(cat, tmp_path, monkeypatch, name):
    for err in _refused_before_the_database(cat, tmp_path, monkeypatch, name, ArgumentTypeError):
        assert isinstance(err, TypeError) and "must be a str" in str(err)


@pytest.mark.parametrize("name", MALFORMED, ids=repr)
def test_a_malformed_name_is_an_invalid_table_name_error_before_the_database(cat, tmp_path, monkeypatch, name):
    for err in _refused_before_the_database(cat, tmp_path, monkeypatch, name, InvalidTableNameError):
        assert isinstance(err, ValueError) and isinstance(err, InvalidArgumentError) and isinstance(err, CatalogError)
        assert "\n" not in str(err) and "\x00" not in str(err)  # one printable line


def test_the_same_names_fail_the_same_way_against_the_real_database(cat, tmp_path):
    """Without the stand-in: PostgreSQL's own refusal of a NUL (psycopg.DataError) is never reached,
    and SQLite no longer stores what PostgreSQL would refuse."""
    for name in ("x\x00y", "", " t"):
        with pytest.raises(InvalidTableNameError):
            cat.create_table(name, str(tmp_path / "nul"), SCHEMA)
        with pytest.raises(InvalidTableNameError):
            cat.table(name)
    with pytest.raises(ArgumentTypeError):
        cat.create_table(None, str(tmp_path / "nul"), SCHEMA)  # type: ignore[arg-type]
    assert not (tmp_path / "nul").exists()
    assert cat.list_tables() == []


@pytest.mark.parametrize("name", ["sales/2024", "../escape", "..", ".", "a b", "a  b", "dots.in.name", "é表",
                                  "x" * MAX_TABLE_NAME], ids=repr)
def test_a_name_is_a_key_never_a_path(cat, tmp_path, name):
    """``/``, ``..`` and inner spaces are allowed: the catalog never builds a path from a name, so
    the table is where its location says and nowhere else."""
    before = set(os.listdir(tmp_path))
    uri = str(tmp_path / "located_here")
    cat.create_table(name, uri, SCHEMA).append(pa.table({"id": [1, 2]}, schema=SCHEMA))
    assert cat.list_tables() == [name]
    assert cat.table(name).to_arrow()["id"].to_pylist() == [1, 2]
    assert cat.snapshot().table(name).version == 1
    assert set(os.listdir(tmp_path)) - before - {"catalog.db", "catalog.db-wal", "catalog.db-shm",
                                                 "catalog.db.writelock"} == {"located_here"}
    cat.drop_table(name, purge=True)
    assert cat.list_tables() == [] and not os.path.exists(uri)


def test_a_catalog_transaction_checks_the_name_before_the_database(tmp_path):
    import deltatx

    cat = deltatx.Catalog(f"sqlite:///{tmp_path}/catalog.db")
    with cat.transaction() as tx:
        with pytest.raises(ArgumentTypeError):
            tx.table(["not", "a", "name"])
        with pytest.raises(InvalidTableNameError):
            tx.table("")
        tx.abort()  # nothing to commit
