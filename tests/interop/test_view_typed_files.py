"""Data files whose strings are Arrow view types (polars writes ``string_view``, delta-rs keeps
it when it rewrites such a file): merge-on-read DML reads them by position and used to fail in
Arrow's ``take`` (no kernel for view types) on every UPDATE and on DELETEs the point reader does
not answer. Rows and results must match deltalake's."""

from __future__ import annotations

import os

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltatx


def _deltalake_rows(uri: str) -> list[str]:
    from deltalake import DeltaTable, QueryBuilder

    table = pa.RecordBatchReader.from_stream(
        QueryBuilder().register("t", DeltaTable(uri)).execute("SELECT id, g, v FROM t")).read_all()
    return sorted(map(str, table.to_pylist()))


def _rows(uri: str) -> list[str]:
    return sorted(map(str, deltatx.Table(uri).to_arrow(columns=["id", "g", "v"]).to_pylist()))


@pytest.mark.parametrize("change_feed", [False, True], ids=["plain", "change-feed"])
def test_dml_on_a_dv_table_whose_files_hold_string_views(tmp_path, change_feed):
    uri = str(tmp_path / "t")
    config = {"delta.enableDeletionVectors": "true"}
    if change_feed:
        config["delta.enableChangeDataFeed"] = "true"
    frame = pl.DataFrame({"id": list(range(10)), "g": [f"g{i % 3}" for i in range(10)],
                          "v": [float(i) for i in range(10)]})
    frame.write_delta(uri, delta_write_options={"configuration": config})
    data = [os.path.join(uri, f) for f in os.listdir(uri) if f.endswith(".parquet")]
    assert pa.types.is_string_view(pq.read_schema(data[0]).field("g").type)  # what this test is about
    table = deltatx.Table(uri)
    table.update(where="g = 'g1'", set={"v": "v + 100"})
    table.delete(where="g = 'g2' AND id < 8")
    table.delete(where="id = 0")
    rows = {r["id"]: r["v"] for r in deltatx.Table(uri).to_arrow().to_pylist()}
    assert rows == {1: 101.0, 3: 3.0, 4: 104.0, 6: 6.0, 7: 107.0, 8: 8.0, 9: 9.0}
    assert _rows(uri) == _deltalake_rows(uri)
    if change_feed:
        changes = deltatx.Table(uri).changes(starting_version=1)
        assert sorted(changes["_change_type"].to_pylist()).count("delete") == 3
