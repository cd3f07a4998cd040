"""Catalog.create_table refuses properties that contradict catalog management, as
set_properties refuses the same change, instead of overriding them silently; the refusals are
importable from deltatx.errors like every other deltatx error."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import CatalogManagedPropertyError, CatalogTableNotFoundError, CatalogTableOwnedError, InvalidPropertyError

SCHEMA = pa.schema([("id", pa.int64())])


@pytest.mark.parametrize("properties, says", [
    ({"delta.enableInCommitTimestamps": "false"}, "in-commit timestamps"),
    ({"DELTA.enableInCommitTimestamps": "FALSE"}, "in-commit timestamps"),
    ({"delta.feature.catalogManaged": "disabled"}, "contradicts"),
    ({"deltatx.catalogId": "someone-else"}, "another one"),
])
def test_a_create_contradicting_catalog_management_is_refused(cat, tmp_path, properties, says):
    uri = str(tmp_path / "t")
    with pytest.raises(CatalogManagedPropertyError, match=says) as caught:
        cat.create_table("t", uri, SCHEMA, properties=properties)
    assert isinstance(caught.value, InvalidPropertyError)  # a bad property value, as elsewhere
    assert not os.path.exists(os.path.join(uri, "_delta_log"))  # nothing was created
    with pytest.raises(CatalogTableNotFoundError):
        cat.table("t")


def test_what_catalog_management_sets_anyway_may_be_given(cat, tmp_path):
    t = cat.create_table("t", str(tmp_path / "t"), SCHEMA, properties={
        "delta.enableInCommitTimestamps": "true", "delta.feature.catalogManaged": "supported",
        "deltatx.catalogId": cat.catalog_id, "delta.appendOnly": "true"})
    assert t.properties["delta.appendOnly"] == "true"
    assert t.properties["delta.enableInCommitTimestamps"] == "true"


def test_the_catalog_errors_are_deltatx_errors():
    from deltatx import catalog

    assert catalog.CatalogManagedPropertyError is CatalogManagedPropertyError
    assert catalog.CatalogTableOwnedError is CatalogTableOwnedError
    assert issubclass(CatalogTableOwnedError, deltatx.errors.CatalogTableExistsError)
