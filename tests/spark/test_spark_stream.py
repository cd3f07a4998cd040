"""writeStream.format("deltatx"): one commit per micro-batch with txn (query id, batch id); replays skip.

The replay is Spark's own: after a run, the checkpoint's record that batch N was committed
(``commits/N``) is deleted, so the restarted query re-runs batch N with the same data and id, as
it does after a crash between the sink's commit and the checkpoint update.
"""

from __future__ import annotations

import glob
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltatx
from deltatx.errors import InvalidPropertyError
from deltatx.spark.streaming import plan_stream, query_id_from_checkpoint


def run_available_now(spark, source_dir: str, checkpoint: str, table_uri: str, **options):
    stream = spark.readStream.schema("id long, grp string").option("maxFilesPerTrigger", 1).parquet(source_dir)
    writer = stream.writeStream.format("deltatx").option("checkpointLocation", checkpoint)
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.trigger(availableNow=True).start(table_uri)
    query.awaitTermination()
    assert query.exception() is None
    return query


def test_each_micro_batch_is_one_idempotent_commit_and_a_replay_is_skipped(spark, tmp_path):
    source, checkpoint, uri = str(tmp_path / "in"), str(tmp_path / "ckpt"), str(tmp_path / "table")
    os.makedirs(source)
    pq.write_table(pa.table({"id": [1, 2], "grp": ["a", "b"]}), f"{source}/f0.parquet")
    pq.write_table(pa.table({"id": [3], "grp": ["a"]}), f"{source}/f1.parquet")

    query = run_available_now(spark, source, checkpoint, uri, partitionBy="grp")
    table = deltatx.Table(uri)
    assert table.version == 1  # batch 0 created the table with its rows, batch 1 = version 1
    assert table.partition_columns == ["grp"]
    assert query_id_from_checkpoint(checkpoint) == str(query.id)
    assert table.snapshot.app_txns[str(query.id)].version == 1
    entry = table.history()[0]
    assert entry["operation"] == "STREAMING UPDATE"
    assert entry["operationParameters"]["queryId"] == str(query.id)
    assert entry["operationParameters"]["epochId"] == "1"
    files_before = sorted(glob.glob(f"{uri}/**/*.parquet", recursive=True))

    # Spark forgets it committed batch 1: the restart replays it (same id, same data)
    for name in ("1", ".1.crc"):  # the entry and its checksum file
        os.remove(os.path.join(checkpoint, "commits", name))
    replay = run_available_now(spark, source, checkpoint, uri, partitionBy="grp")
    assert replay.id == query.id and replay.runId != query.runId
    assert replay.lastProgress is not None and replay.lastProgress["batchId"] == 1
    table = deltatx.Table(uri)
    assert table.version == 1  # the replayed batch committed nothing
    assert sorted(table.to_arrow()["id"].to_pylist()) == [1, 2, 3]
    assert sorted(glob.glob(f"{uri}/**/*.parquet", recursive=True)) == files_before  # its files removed

    # new input continues with the next batch id
    pq.write_table(pa.table({"id": [4], "grp": ["c"]}), f"{source}/f2.parquet")
    run_available_now(spark, source, checkpoint, uri, partitionBy="grp")
    table = deltatx.Table(uri)
    assert table.version == 2
    assert table.snapshot.app_txns[str(query.id)].version == 2
    assert sorted(table.to_arrow()["id"].to_pylist()) == [1, 2, 3, 4]


def test_stream_plan_needs_a_stable_query_id(spark, tmp_path):
    from pyspark.sql.types import LongType, StructField, StructType

    never = str(tmp_path / "never-created")
    schema = StructType([StructField("id", LongType())])
    with pytest.raises(InvalidPropertyError, match="checkpointLocation"):
        plan_stream({"path": never}, schema, False)
    with pytest.raises(InvalidPropertyError, match="txnappid"):
        plan_stream({"path": never, "queryId": "q", "txnAppId": "x", "txnVersion": "1"}, schema, False)
    assert plan_stream({"path": never, "queryId": "q"}, schema, False).query_id == "q"
