"""Tables with deletion vectors: deltatx drops exactly the rows DuckDB (delta-kernel) and polars drop.

The DVs are built to PROTOCOL.md by ``tests/dvtables.py``; the two engines are the oracles.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from dvtables import add_deletion_vectors
from interop_helpers import read_duckdb
from tablefiles import data_files

import deltatx
from deltatx.errors import CorruptDeletionVectorError, MissingDeletionVectorError
from deltatx.io.paths import decode_path

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("x", pa.float64())])


def _table(uri: str, partitioned: bool) -> deltatx.Table:
    table = deltatx.create_table(uri, SCHEMA, partition_by=["part"] if partitioned else None)
    for low in (0, 100):
        ids = list(range(low, low + 20))
        table.append(pa.table({"id": ids, "part": [f"p{i % 2}" for i in ids], "x": [i / 4 for i in ids]},
                              schema=SCHEMA))
    return deltatx.Table(uri)


def _delete_every_third_row(uri: str, storage: str) -> list[int]:
    """DVs on every file deleting its rows 0, 3, 6, ...; returns the ids that remain (read before)."""
    table = deltatx.Table(uri)
    import pyarrow.parquet as pq

    deleted, remaining = {}, []
    for add in table.files().to_pylist():
        rows = pq.read_table(os.path.join(uri, decode_path(add["path"])))
        deleted[add["path"]] = list(range(0, rows.num_rows, 3))
        remaining += [v for k, v in enumerate(rows.column("id").to_pylist()) if k % 3]
    add_deletion_vectors(uri, deleted, storage=storage)
    return sorted(remaining)


def _ids(t: pa.Table) -> list[int]:
    return sorted(t.column("id").to_pylist())


@pytest.mark.parametrize("storage", ["i", "u", "p"], ids=["inline", "relative-file", "absolute-file"])
@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_deleted_rows_are_not_read(table_uri, storage, partitioned):
    _table(table_uri, partitioned)
    expected = _delete_every_third_row(table_uri, storage)
    table = deltatx.Table(table_uri)
    assert "deletionVectors" in table.protocol.reader_features
    assert _ids(table.to_arrow()) == expected == _ids(read_duckdb(table_uri))
    import polars as pl

    assert sorted(pl.read_delta(table_uri)["id"].to_list()) == expected
    # a predicate applies to the rows that remain (positions are the file's, before any filter)
    assert _ids(table.to_arrow(where="id >= 100 AND part = 'p1'", columns=["id"])) == \
        [i for i in expected if i >= 100 and i % 2 == 1]


def test_a_delete_on_a_table_with_dvs_rewrites_live_rows_and_removes_the_dv(table_uri):
    _table(table_uri, partitioned=False)
    expected = _delete_every_third_row(table_uri, "u")
    table = deltatx.Table(table_uri)
    result = table.delete("id < 10")
    assert result.metrics["numDeletedRows"] == len([i for i in expected if i < 10])
    after = [i for i in expected if i >= 10]
    assert _ids(deltatx.Table(table_uri).to_arrow()) == after == _ids(read_duckdb(table_uri))
    deltatx.Table(table_uri).checkpoint()  # the checkpoint's add structs carry the remaining DVs
    assert _ids(deltatx.Table(table_uri).to_arrow()) == after == _ids(read_duckdb(table_uri))


@pytest.mark.parametrize("storage", ["i", "u", "p"], ids=["inline", "relative-file", "absolute-file"])
def test_tables_that_write_dvs_are_written_merge_on_read(table_uri, storage):
    """Another engine's DV table with delta.enableDeletionVectors=true: deltatx appends, deletes,
    updates and compacts it, marking rows in DVs on top of the other engine's DVs."""
    _table(table_uri, partitioned=False)
    expected = _delete_every_third_row(table_uri, storage)
    log = os.path.join(table_uri, "_delta_log")
    version = deltatx.Table(table_uri).version + 1
    metadata = deltatx.Table(table_uri).metadata.to_json()
    metadata["configuration"] = {**metadata.get("configuration", {}), "delta.enableDeletionVectors": "true"}
    import json

    with open(os.path.join(log, f"{version:020d}.json"), "w") as fh:
        fh.write(json.dumps({"commitInfo": {"timestamp": 2, "operation": "SET TBLPROPERTIES"}}) + "\n")
        fh.write(json.dumps({"metaData": metadata}) + "\n")
    table = deltatx.Table(table_uri)
    assert len(table.to_arrow()) == len(expected) == 26
    table.append(pa.table({"id": [500], "part": ["p0"], "x": [0.0]}, schema=SCHEMA))
    expected.append(500)
    before = data_files(table_uri)
    result = table.delete("id = 1")
    assert result.metrics["numDeletionVectorsUpdated"] == 1 and data_files(table_uri) == before
    expected.remove(1)
    table.update("id = 2", set={"x": "-1"})
    assert _ids(deltatx.Table(table_uri).to_arrow()) == sorted(expected) == _ids(read_duckdb(table_uri))
    assert deltatx.Table(table_uri).to_arrow(where="id = 2").column("x").to_pylist() == [-1.0]
    table.optimize()
    assert deltatx.Table(table_uri).files()["deletionVector"].null_count == deltatx.Table(table_uri).files().num_rows
    assert _ids(deltatx.Table(table_uri).to_arrow()) == sorted(expected) == _ids(read_duckdb(table_uri))


def test_a_missing_or_damaged_dv_file_fails_the_read_typed(table_uri):
    _table(table_uri, partitioned=False)
    _delete_every_third_row(table_uri, "u")
    [dv] = [os.path.join(table_uri, "dv", n) for n in os.listdir(os.path.join(table_uri, "dv"))]
    with open(dv, "r+b") as fh:
        fh.seek(12)
        byte = fh.read(1)
        fh.seek(12)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(CorruptDeletionVectorError, match="checksum"):
        deltatx.Table(table_uri).to_arrow()
    os.remove(dv)
    with pytest.raises(MissingDeletionVectorError, match="deletion vector file"):
        deltatx.Table(table_uri).to_arrow()


def test_vacuum_keeps_referenced_dv_files_and_drops_unreferenced_ones(table_uri, monkeypatch):
    from deltatx.tables.ops import vacuum as vacuum_module

    _table(table_uri, partitioned=False)
    _delete_every_third_row(table_uri, "u")
    table = deltatx.Table(table_uri)
    dv_files = [f"dv/{n}" for n in os.listdir(os.path.join(table_uri, "dv"))]
    monkeypatch.setattr(vacuum_module, "now_ms", lambda: 4_000_000_000_000)  # every file is old
    assert table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True) == []
    before = _ids(read_duckdb(table_uri))
    result = table.delete("id >= 0")  # every file removed: only tombstones refer to the DVs now
    assert result.metrics["numDeletedRows"] == len(before)  # numRecords less each DV's cardinality
    deleted = deltatx.Table(table_uri).vacuum(retention_hours=0, enforce_retention_duration=False)
    assert set(dv_files) <= set(deleted) and before and _ids(deltatx.Table(table_uri).to_arrow()) == []


def test_a_partition_delete_counts_the_rows_left_after_the_dvs(table_uri):
    _table(table_uri, partitioned=True)
    expected = _delete_every_third_row(table_uri, "i")
    result = deltatx.Table(table_uri).delete("part = 'p0'")  # whole files go, counted from stats
    assert result.metrics["numFilesRead"] == 0
    assert result.metrics["numDeletedRows"] == len([i for i in expected if i % 2 == 0])
    assert _ids(deltatx.Table(table_uri).to_arrow()) == [i for i in expected if i % 2] == _ids(read_duckdb(table_uri))


def test_projected_reads_of_files_with_dvs_keep_row_positions(table_uri):
    _table(table_uri, partitioned=True)
    expected = _delete_every_third_row(table_uri, "u")
    table = deltatx.Table(table_uri)
    assert sorted(table.to_arrow(columns=["x"]).column("x").to_pylist()) == [i / 4 for i in expected]
    assert sorted(table.to_arrow(columns=["part"]).column("part").to_pylist()) == \
        sorted(f"p{i % 2}" for i in expected)
    assert sorted(table.to_arrow(where="x >= 25", columns=["id"]).column("id").to_pylist()) == \
        [i for i in expected if i >= 100]
