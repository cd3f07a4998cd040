"""Shared fixtures: fresh table locations on local disk and in memory, and a moto S3 server.

The S3 server is started on 127.0.0.1 (random free port) by the fixture and stopped after the
session: tests never reach the network beyond loopback.
"""

from __future__ import annotations

import os
import uuid

import pytest
from hypothesis import settings

# Property tests are deterministic, as every test here must be: the same examples on every run and
# machine (derandomize), none replayed from a local example database, no wall-clock deadline (CI's
# two cores are slower than a laptop). A test's own @settings still sets its example count.
settings.register_profile("deltatx", derandomize=True, database=None, deadline=None)
settings.load_profile("deltatx")


@pytest.fixture
def table_uri(tmp_path) -> str:
    """A local path where no table exists yet."""
    return str(tmp_path / "table")


@pytest.fixture
def memory_uri() -> str:
    return f"memory://deltatx-tests/{uuid.uuid4().hex}"


@pytest.fixture(params=["local", "memory"])
def any_uri(request, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "table")
    return f"memory://deltatx-tests/{uuid.uuid4().hex}"


@pytest.fixture(scope="session")
def s3_server():
    """A moto S3 server on 127.0.0.1 for the whole session; yields storage_options."""
    from deltatx.harness import s3server

    server, options = s3server.start()  # conditional PUTs atomic, as on S3 (see the module)
    # moto accepts any credentials; these are dummies, not secrets.
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield options
    finally:
        server.stop()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def s3_bucket(s3_server):
    """A fresh bucket; yields (uri_prefix, storage_options)."""
    import boto3

    name = f"deltatx-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=s3_server["endpoint_url"], aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
    client.create_bucket(Bucket=name)
    yield f"s3://{name}", dict(s3_server)


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for every test that asks (a JVM start costs ~10 s).

    Without Java this fails with deltatx's SparkUnavailableError, which says what to install,
    rather than a Py4J stack trace.
    """
    from deltatx.spark.session import local_session

    session = local_session("deltatx-tests", fast_start=True)
    yield session
    session.stop()


# ------------------------------------------------------------------ catalog (SQLite and PostgreSQL)


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server for the session (deltatx.harness.pgserver); never a mock."""
    from deltatx.harness import pgserver

    server = pgserver.start()  # fails with a clear message when PostgreSQL cannot be started
    yield server
    pgserver.stop(server)


@pytest.fixture(params=["sqlite", "postgresql"])
def catalog_url(request, tmp_path) -> str:
    """Every catalog test runs against SQLite AND PostgreSQL (a fresh database per test)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/catalog.db"
    return request.getfixturevalue("postgres_server").new_database()
