"""Clustered and Z-ordered tables across engines: deltalake, polars and DuckDB read what we
cluster; deltalake refuses to write a clustered table (it does not implement the feature) and
leaves it intact; we cluster and Z-order tables deltalake wrote or Z-ordered itself."""

from __future__ import annotations

import os

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import deltatx
from duckdb_delta import read_duckdb

SCHEMA = pa.schema([("x", pa.int64()), ("y", pa.int64()), ("name", pa.string())])


def random_rows(seed: int, n: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 1_000_000, n)
    return pa.table({"x": x, "y": rng.integers(0, 1_000_000, n), "name": [f"n{v}" for v in x.tolist()]},
                    schema=SCHEMA)


def sorted_rows(t) -> list[tuple]:
    t = pa.table(t) if not isinstance(t, pa.Table) else t
    return sorted(zip(*(t.column(c).to_pylist() for c in ("x", "y", "name"))))


@pytest.fixture
def clustered(table_uri) -> deltatx.Table:
    t = deltatx.create_table(table_uri, SCHEMA, cluster_by=["x", "y"], properties={"delta.targetFileSize": "20000"})
    for seed in range(3):
        t.append(random_rows(seed, 3000))
    t.optimize()
    assert t.files().num_rows >= 4 and set(t.files()["clusteringProvider"].to_pylist()) == {"liquid"}
    return t


def test_deltalake_reads_a_clustered_table_we_wrote(clustered, table_uri):
    from deltalake import DeltaTable

    dt = DeltaTable(table_uri)
    assert "clustering" in dt.protocol().writer_features
    assert sorted_rows(dt.to_pyarrow_table()) == sorted_rows(clustered.to_arrow())
    assert pa.table(dt.get_add_actions(flatten=True)).num_rows == clustered.files().num_rows


def test_polars_and_duckdb_read_a_clustered_table_and_skip_by_its_stats(clustered, table_uri):
    expected = sorted_rows(clustered.to_arrow())
    assert sorted_rows(pl.read_delta(table_uri).to_arrow()) == expected
    assert sorted_rows(read_duckdb(table_uri)) == expected
    x = clustered.to_arrow().column("x")[100].as_py()
    got = read_duckdb(table_uri, f"SELECT * FROM delta_scan(?) WHERE x = {x}")
    assert sorted_rows(got) == sorted_rows(clustered.to_arrow(where=f"x = {x}"))


def test_deltalake_refuses_to_write_a_clustered_table_and_it_stays_intact(clustered, table_uri):
    from deltalake import write_deltalake

    version = clustered.version
    files = set(os.listdir(table_uri))
    with pytest.raises(Exception, match="ClusteredTable"):  # deltalake 1.x: unsupported writer feature
        write_deltalake(table_uri, random_rows(9, 5), mode="append")
    assert deltatx.Table(table_uri).version == version and set(os.listdir(table_uri)) == files
    clustered.append(random_rows(10, 5))  # deltatx still writes it
    assert deltatx.Table(table_uri).to_arrow().num_rows == 9005


def test_we_cluster_a_table_deltalake_wrote_and_deltalake_reads_it(table_uri):
    from deltalake import DeltaTable, write_deltalake

    for seed in range(3):
        write_deltalake(table_uri, random_rows(seed, 2000), mode="append")
    t = deltatx.Table(table_uri)
    t.cluster_by(["y"])
    t.optimize(target_size=15_000)
    expected = sorted_rows(pa.concat_tables([random_rows(seed, 2000) for seed in range(3)]))
    assert sorted_rows(DeltaTable(table_uri).to_pyarrow_table()) == expected
    assert set(deltatx.Table(table_uri).files()["clusteringProvider"].to_pylist()) == {"liquid"}


def test_we_optimize_a_table_deltalake_zordered(table_uri):
    from deltalake import DeltaTable, write_deltalake

    for seed in range(4):
        write_deltalake(table_uri, random_rows(seed, 2000), mode="append")
    DeltaTable(table_uri).optimize.z_order(["x", "y"])
    expected = sorted_rows(pa.concat_tables([random_rows(seed, 2000) for seed in range(4)]))
    assert sorted_rows(deltatx.Table(table_uri).to_arrow()) == expected
    write_deltalake(table_uri, random_rows(7, 500), mode="append")
    t = deltatx.Table(table_uri)
    result = t.optimize(zorder_by=["x", "y"], target_size=30_000)
    assert result.metrics["numRemovedFiles"] == 2 and t.files().num_rows >= 2
    expected = sorted_rows(pa.concat_tables([random_rows(seed, 2000) for seed in range(4)] + [random_rows(7, 500)]))
    assert sorted_rows(deltatx.Table(table_uri).to_arrow()) == expected
    assert sorted_rows(DeltaTable(table_uri).to_pyarrow_table()) == expected
    write_deltalake(table_uri, random_rows(8, 10), mode="append")  # Z-order leaves an ordinary table
    assert deltatx.Table(table_uri).to_arrow().num_rows == 8510
