"""A PostgreSQL catalog in a process that holds more than 1024 file descriptors.

Why: the catalog checks, without a round trip, that its idle connection is still alive before
each statement (db.PostgresDatabase._alive). ``select.select`` refuses descriptors at or above
FD_SETSIZE (1024), so in a service holding that many files every check failed, the connection was
thrown away and a new one opened before every statement — and with it the session-level
publishing turn a ratified offer keeps until its committer has published.
"""

from __future__ import annotations

import os
import resource

import pyarrow as pa
import pytest

import deltatx

SCHEMA = pa.schema([("id", pa.int64())])

#: enough open descriptors that the catalog's connection gets one above FD_SETSIZE
_HELD = 1100


@pytest.fixture
def many_descriptors():
    """Hold ``_HELD`` descriptors open for the test (closed afterwards)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < _HELD + 200:
        pytest.skip(f"the open-files limit ({soft}) is too low to hold {_HELD} descriptors")
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(_HELD)]
    try:
        yield held
    finally:
        for fd in held:
            os.close(fd)


def test_a_live_connection_above_fd_setsize_is_kept(postgres_server, tmp_path, many_descriptors):
    url = postgres_server.new_database()
    cat = deltatx.Catalog(url)
    try:
        assert cat._db._conn.fileno() >= 1024  # the case under test
        cat.create_table("t", str(tmp_path / "t"), SCHEMA)
        conn = cat._db._conn
        cat.table("t").append(pa.table({"id": [1, 2]}, schema=SCHEMA))
        assert cat.list_tables() == ["t"]
        assert sorted(cat.table("t").to_arrow().column("id").to_pylist()) == [1, 2]
        assert cat._db._conn is conn  # no reconnect: the connection was alive all along
    finally:
        cat.close()
