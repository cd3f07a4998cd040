"""REPLACE TABLE (delta-spark's DeltaTableBuilder.replace, staged by tables/ops/replace_table.py)
of a catalog-managed table keeps it managed: the catalog's identity and the in-commit timestamps
the protocol requires carry over without the caller naming them, as through a RESTORE."""

from __future__ import annotations

import pyarrow as pa

from deltatx.catalog.rules import CATALOG_ID, ICT_ENABLED
from deltatx.tables.ops.replace_table import stage_replace_table

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
NEW = pa.schema([("id", pa.int64()), ("w", pa.float64())])


def test_replace_keeps_the_catalog_properties(cat, tmp_path):
    table = cat.create_table("t", str(tmp_path / "t"), SCHEMA)
    table.append(pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA))
    before = dict(cat.table("t").metadata.configuration)
    with cat.table("t").transaction() as tx:
        stage_replace_table(tx, NEW, properties={"delta.appendOnly": "false"})
    after = cat.table("t")
    assert after.schema.names == ["id", "w"] and after.to_arrow().num_rows == 0
    config = after.metadata.configuration
    assert config[CATALOG_ID] == before[CATALOG_ID] == cat.catalog_id
    assert config[ICT_ENABLED] == "true" and config["delta.appendOnly"] == "false"
