"""delta-spark option behaviour a Spark user relies on: a table created by a Spark write with row
tracking is a row-tracking table from version 0; ``readChangeData`` is ``readChangeFeed``'s older
name; ``delta.feature.*`` options survive Spark's lower-casing; options deltatx lacks that would
change the rows (``excludeRegex``, a non-Snappy ``compression``) are refused, not ignored."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pytest

import deltatx
import deltatx.spark  # noqa: F401  (registers the format)
from deltatx.spark import DeltaTable

pytestmark = pytest.mark.spark


def _actions(uri: str, version: int) -> list[dict]:
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        return [orjson.loads(line) for line in fh if line.strip()]


def test_a_spark_created_row_tracking_table_has_ids_from_version_0(spark, table_uri):
    (spark.range(0, 6).selectExpr("id", "id * 2 as v").coalesce(1).write.format("deltatx").mode("append")
     .option("delta.enableRowTracking", "true").option("delta.enableDeletionVectors", "true").save(table_uri))
    actions = _actions(table_uri, 0)
    config = next(a["metaData"]["configuration"] for a in actions if "metaData" in a)
    assert "delta.rowTracking.materializedRowIdColumnName" in config
    assert "delta.rowTracking.materializedRowCommitVersionColumnName" in config
    adds = [a["add"] for a in actions if "add" in a]
    assert adds and all(a.get("baseRowId") is not None and a.get("defaultRowCommitVersion") == 0 for a in adds)
    domains = {a["domainMetadata"]["domain"]: a["domainMetadata"] for a in actions if "domainMetadata" in a}
    assert orjson.loads(domains["delta.rowTracking"]["configuration"]) == {"rowIdHighWaterMark": 5}

    def ids() -> dict[int, int]:
        rows = deltatx.Table(table_uri).to_arrow(columns=["id", "_metadata.row_id"]).to_pylist()
        return {r["id"]: r["_metadata.row_id"] for r in rows}

    assert ids() == {i: i for i in range(6)}
    DeltaTable.forPath(spark, table_uri).update("id = 3", {"v": "v + 100"})
    assert ids() == {i: i for i in range(6)}, "an UPDATE keeps the row ids"


def test_read_change_data_is_read_change_feed(spark, table_uri):
    t = deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]), properties={"delta.enableChangeDataFeed": "true"})
    t.append(pa.table({"id": [0, 1, 2]}))
    t.delete("id = 0")

    def feed(option: str) -> list[tuple]:
        df = spark.read.format("deltatx").option(option, "true").option("startingVersion", 2).load(table_uri)
        return sorted((r["id"], r["_change_type"], r["_commit_version"])
                      for r in df.select("id", "_change_type", "_commit_version").collect())

    assert feed("readChangeData") == feed("readChangeFeed") == [(0, "delete", 2)]


def test_feature_options_keep_their_spelling(spark, table_uri):
    (spark.range(0, 3).write.format("deltatx").mode("append")
     .option("delta.feature.deletionVectors", "supported").option("delta.feature.rowTracking", "supported")
     .save(table_uri))
    protocol = next(a["protocol"] for a in _actions(table_uri, 0) if "protocol" in a)
    assert {"deletionVectors", "rowTracking"} <= set(protocol["writerFeatures"])


def test_options_that_would_change_the_rows_are_refused(spark, table_uri):
    deltatx.create_table(table_uri, pa.schema([("id", pa.int64())])).append(pa.table({"id": [1]}))
    with pytest.raises(Exception, match="excludeRegex"):
        spark.readStream.format("deltatx").option("excludeRegex", "part=1").load(table_uri)
    with pytest.raises(Exception, match="compression"):
        spark.range(2).write.format("deltatx").mode("append").option("compression", "gzip").save(table_uri)
    spark.range(2).write.format("deltatx").mode("append").option("compression", "snappy") \
        .option("maxRecordsPerFile", "0").save(table_uri)
    assert deltatx.Table(table_uri).to_arrow().num_rows == 3


def test_a_spark_created_table_follows_create_tables_rules(spark, table_uri):
    """Reserved change-feed names and a stats-columns list naming no column are refused, as
    create_table refuses them; nothing is committed."""
    with pytest.raises(Exception, match="reserves"):
        (spark.range(2).selectExpr("id", "'x' as _change_type").write.format("deltatx").mode("append")
         .option("delta.enableChangeDataFeed", "true").save(table_uri))
    with pytest.raises(Exception, match="dataSkippingStatsColumns"):
        (spark.range(2).write.format("deltatx").mode("append")
         .option("delta.dataSkippingStatsColumns", "nope").save(table_uri))
    assert not os.path.exists(os.path.join(table_uri, "_delta_log", f"{0:020d}.json"))
