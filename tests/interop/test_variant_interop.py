"""Variant tables across clients: deltalake (delta-rs 1.x) and polars read the variant tables
deltatx writes, deletion vectors applied, and deltalake's appends to them read back in deltatx.

DuckDB's delta extension (delta-kernel) is left out: it refuses every variant column on read
("Unsupported Arrow type VARIANT"), whoever wrote the table.
"""

from __future__ import annotations

import pyarrow as pa
from interop_helpers import read_deltalake, read_polars

import deltatx
from deltatx import VARIANT


def _by_id(table: pa.Table) -> dict[int, tuple[bytes, bytes] | None]:
    out = {}
    for row in table.to_pylist():
        v = row["v"]
        out[row["id"]] = None if v is None else (v["value"], v["metadata"])
    return out


def test_deltalake_and_polars_read_deltatx_variant_tables_and_deltalake_appends(table_uri):
    from deltalake import write_deltalake

    t = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("v", VARIANT)]),
                             properties={"delta.enableDeletionVectors": "true"})
    t.append(pa.table({"id": [1, 2, 3, 4], "v": deltatx.variant.parse_json(['{"a":[1,2]}', '"x"', None, "4.5"])},
                      schema=t.schema))
    t.delete("id = 2")  # a deletion vector the readers must apply
    expected = _by_id(deltatx.Table(table_uri).to_arrow())
    assert sorted(expected) == [1, 3, 4]
    assert _by_id(read_deltalake(table_uri)) == expected
    assert _by_id(read_polars(table_uri)) == expected

    write_deltalake(table_uri, pa.table({"id": [5], "v": deltatx.variant.parse_json(['{"z":true}'])}), mode="append")
    after = deltatx.Table(table_uri).to_arrow().sort_by("id")
    assert after["id"].to_pylist() == [1, 3, 4, 5]
    assert deltatx.variant.to_json(after["v"]).to_pylist() == ['{"a":[1,2]}', None, "4.5", '{"z":true}']
