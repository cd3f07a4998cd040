"""Spark tests are marked ``spark``; the shared session-scoped ``spark`` fixture lives in the
root conftest so that the P8 benchmark's smoke test reuses the same JVM."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/spark/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.spark)
