"""The table commands open a catalog-managed table through its catalog (--catalog URL, the
table's name as URI); by path they refuse it, and say how to open it."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

import deltatx
from deltatx.cli import EXIT_OK, EXIT_USAGE, main

SCHEMA = pa.schema([("id", pa.int64())])


@pytest.fixture
def managed(tmp_path):
    url = f"sqlite:///{tmp_path}/catalog.db"
    cat = deltatx.Catalog(url)
    cat.create_table("orders", str(tmp_path / "orders"), SCHEMA)
    cat.table("orders").append(pa.table({"id": [1, 2]}, schema=SCHEMA))
    cat.close()
    return url, str(tmp_path / "orders")


def test_history_describe_and_checkpoint_through_the_catalog(capsys, managed):
    url, _ = managed
    capsys.readouterr()
    assert main(["history", "orders", "--catalog", url, "--json"]) == EXIT_OK
    history = json.loads(capsys.readouterr().out)
    assert [h["operation"] for h in history] == ["WRITE", "CREATE TABLE"]
    assert all(isinstance(h["inCommitTimestamp"], int) for h in history)
    assert main(["describe", "orders", "--catalog", url, "--json"]) == EXIT_OK
    described = json.loads(capsys.readouterr().out)
    assert described["version"] == 1 and "catalogManaged" in described["protocol"]["writerFeatures"]
    assert main(["checkpoint", "orders", "--catalog", url]) == EXIT_OK


def test_by_path_a_catalog_table_is_refused_with_the_way_to_open_it(capsys, managed):
    url, path = managed
    assert main(["history", path]) == EXIT_USAGE
    assert "CatalogManagedTableError" in (err := capsys.readouterr().err) and "--catalog URL" in err
    assert main(["history", "nope", "--catalog", url]) == EXIT_USAGE
    assert "CatalogTableNotFoundError" in capsys.readouterr().err


def test_a_mistyped_catalog_path_is_reported_not_created(capsys, managed, tmp_path):
    url, _ = managed
    typo = url.replace("catalog.db", "catalgo.db")
    assert main(["describe", "orders", "--catalog", typo]) == EXIT_USAGE
    assert "no catalog database" in capsys.readouterr().err
    assert not (tmp_path / "catalgo.db").exists()
