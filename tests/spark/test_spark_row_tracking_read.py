"""Row ids through the Spark reader: ``.option("readRowTracking", "true")`` adds Spark's ``_metadata``
struct, so ``select("_metadata.row_id")`` reads what ``Table.to_arrow`` reads."""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx
import deltatx.spark  # noqa: F401  (registers the format)
from deltatx.errors import SchemaMismatchError

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


def _table(uri: str, props: dict[str, str]) -> None:
    table = deltatx.create_table(uri, SCHEMA, properties=props)
    table.append(pa.table({"id": list(range(20)), "v": [0] * 20}, schema=SCHEMA))
    table.append(pa.table({"id": list(range(20, 30)), "v": [0] * 10}, schema=SCHEMA))


def test_row_ids_and_commit_versions_read_through_spark(spark, table_uri):
    _table(table_uri, {"delta.enableRowTracking": "true", "delta.enableDeletionVectors": "true"})
    table = deltatx.Table(table_uri)
    updated = table.update("id = 3", set={"v": "1"})
    table.delete("id = 4")
    df = spark.read.format("deltatx").option("readRowTracking", "true").load(table_uri)
    got = sorted((r["id"], r["row_id"], r["row_commit_version"])
                 for r in df.select("id", "_metadata.row_id", "_metadata.row_commit_version").collect())
    expected = deltatx.Table(table_uri).to_arrow(columns=["id", "_metadata.row_id", "_metadata.row_commit_version"])
    assert got == sorted(tuple(r.values()) for r in expected.to_pylist())
    assert (3, 3, updated.version) in got and all(i != 4 for i, _, _ in got) and len(got) == 29
    assert "_metadata" not in spark.read.format("deltatx").load(table_uri).columns  # only when asked


def test_row_tracking_read_of_a_table_without_ids_is_a_typed_error(spark, table_uri):
    _table(table_uri, {})
    with pytest.raises(Exception) as info:
        spark.read.format("deltatx").option("readRowTracking", "true").load(table_uri).collect()
    assert "does not track row ids" in str(info.value)
    with pytest.raises(SchemaMismatchError):
        from deltatx.spark.reader import with_row_tracking_metadata

        with_row_tracking_metadata(SCHEMA, deltatx.Table(table_uri))
