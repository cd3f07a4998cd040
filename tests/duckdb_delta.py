"""Test helper: DuckDB with its delta extension (delta-kernel) as a reading oracle, from any folder.

The extension ships inside the ``duckdb-extension-delta`` wheel (a test dependency): it is loaded
from there, never downloaded.
"""

from __future__ import annotations

import glob
import importlib.util
import os

import pyarrow as pa


def duckdb_delta_extension() -> str:
    """Absolute path of ``delta.duckdb_extension`` shipped in the duckdb-extension-delta wheel."""
    spec = importlib.util.find_spec("duckdb_extension_delta")
    assert spec is not None and spec.origin, "duckdb-extension-delta is not installed"
    found = glob.glob(os.path.join(os.path.dirname(spec.origin), "extensions", "*", "delta.duckdb_extension"))
    assert found, "delta.duckdb_extension not found inside duckdb_extension_delta"
    return os.path.abspath(found[0])


def read_duckdb(uri: str, sql: str = "SELECT * FROM delta_scan(?)") -> pa.Table:
    import duckdb

    con = duckdb.connect()
    try:
        con.execute(f"LOAD '{duckdb_delta_extension()}'")
        return con.execute(sql, [uri]).to_arrow_table()
    finally:
        con.close()
