"""One SparkSession for every Spark test (session-scoped: a JVM start costs ~10 s).

Spark tests are marked ``spark``; without a Java runtime they fail with deltatx's clear
SparkUnavailableError rather than a Py4J stack trace.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from deltatx.spark.session import local_session

    session = local_session("deltatx-tests", fast_start=True)
    try:
        import deltatx.spark as dspark

        dspark.register(session)
    except (ImportError, AttributeError):
        pass  # the data source module is written alongside; tests that need it will say so
    yield session
    session.stop()


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/spark/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.spark)
