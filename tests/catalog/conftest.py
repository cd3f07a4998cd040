"""The catalog every catalog test uses: on the SQLite or PostgreSQL URL of ``catalog_url``
(tests/conftest.py), closed after."""

from __future__ import annotations

import pytest

import deltatx


@pytest.fixture
def cat(catalog_url):
    c = deltatx.Catalog(catalog_url)
    yield c
    c.close()
