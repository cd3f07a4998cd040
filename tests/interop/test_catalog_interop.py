"""What path-only readers see of a catalog-managed table: deltalake refuses it (as PROTOCOL.md
tells path-only clients to) until it is released; then it reads and writes it like any table."""

from __future__ import annotations

import deltalake
import pyarrow as pa
import pytest

import deltatx


def test_deltalake_refuses_catalog_managed_then_reads_and_writes_after_release(tmp_path):
    cat = deltatx.Catalog(f"sqlite:///{tmp_path}/catalog.db")
    uri = str(tmp_path / "t")
    cat.create_table("t", uri, pa.schema([("id", pa.int64())])).append(pa.table({"id": [1, 2]}))
    with pytest.raises(Exception, match="(?i)catalog"):
        deltalake.DeltaTable(uri).to_pyarrow_table()
    cat.release("t")
    assert sorted(deltalake.DeltaTable(uri).to_pyarrow_table()["id"].to_pylist()) == [1, 2]
    deltalake.write_deltalake(uri, pa.table({"id": [3]}), mode="append")
    assert sorted(deltatx.Table(uri).to_arrow()["id"].to_pylist()) == [1, 2, 3]
    # and deltalake's table can be adopted by the catalog again
    cat.register("t", uri).append(pa.table({"id": [4]}))
    assert sorted(cat.table("t").to_arrow()["id"].to_pylist()) == [1, 2, 3, 4]
