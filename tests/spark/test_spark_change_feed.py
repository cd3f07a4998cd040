"""``.option("readChangeFeed", "true")`` on ``spark.read`` and ``spark.readStream``: the same rows as
``Table.changes`` (the core planner and reader run on the executors), delta-spark's column types,
typed errors, and a stream that delivers each commit's changes exactly once across restarts."""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import ChangeDataFeedError
from deltatx.spark.unwrap import typed_error

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("value", pa.int64())])
CDF = {"delta.enableChangeDataFeed": "true"}
KEY = ["_commit_version", "id", "_change_type"]


def _rows(ids, part: str = "a") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "part": [part] * len(ids), "value": [i * 10 for i in ids]}, schema=SCHEMA)


def changing_table(uri: str, **properties) -> deltatx.Table:
    """v0 create, v1-v2 appends, v3 UPDATE, v4 DELETE, v5 partition DELETE, v6 MERGE."""
    t = deltatx.create_table(uri, SCHEMA, partition_by=["part"], properties={**CDF, **properties})
    t.append(pa.concat_tables([_rows(range(0, 10)), _rows(range(10, 15), "b")]))
    t.append(_rows(range(20, 25), "c"))
    t.update("id < 3", set={"value": "value + 1"})
    t.delete("id = 7")
    t.delete("part = 'c'")
    t.merge(_rows([1, 50]), "t.id = s.id").when_matched_update_all().when_not_matched_insert_all().execute()
    return t


def core_rows(uri: str, **bounds) -> list[dict]:
    out = deltatx.Table(uri).changes(**bounds)
    out = out.set_column(out.schema.get_field_index("_commit_timestamp"), "_commit_timestamp",
                         out.column("_commit_timestamp").cast(pa.int64()))
    return sorted(out.to_pylist(), key=lambda r: tuple(r[k] for k in KEY))


def spark_rows(df) -> list[dict]:
    from pyspark.sql import functions as F

    df = df.withColumn("_commit_timestamp", F.unix_millis("_commit_timestamp"))
    return sorted((r.asDict() for r in df.collect()), key=lambda r: tuple(r[k] for k in KEY))


def read_changes(spark, uri: str, **options):
    reader = spark.read.format("deltatx").option("readChangeFeed", "true")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load(uri)


# --------------------------------------------------------------------------------------------
# Batch
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("properties", [{}, {"delta.enableDeletionVectors": "true"}], ids=["cow", "dv"])
def test_batch_read_equals_table_changes(spark, tmp_path, properties):
    uri = str(tmp_path / "t")
    changing_table(uri, **properties)
    df = read_changes(spark, uri, startingVersion=0, minPartitions=3)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("id", "bigint"), ("part", "string"), ("value", "bigint"), ("_change_type", "string"),
        ("_commit_version", "bigint"), ("_commit_timestamp", "timestamp")]
    got = spark_rows(df)
    assert got == core_rows(uri, starting_version=0)
    assert {r["_change_type"] for r in got} == {"insert", "delete", "update_preimage", "update_postimage"}
    assert df.rdd.getNumPartitions() > 1  # versions spread over tasks


def test_version_and_timestamp_bounds(spark, tmp_path):
    uri = str(tmp_path / "t")
    t = changing_table(uri)
    assert spark_rows(read_changes(spark, uri, startingVersion=3, endingVersion=4)) == \
        core_rows(uri, starting_version=3, ending_version=4)
    stamps = {h["version"]: h["timestamp"] for h in t.history()}
    got = spark_rows(read_changes(spark, uri, startingTimestamp=stamps[3], endingTimestamp=stamps[5]))
    assert got == core_rows(uri, starting_timestamp=stamps[3], ending_timestamp=stamps[5])
    assert {r["_commit_version"] for r in got} == {3, 4, 5}


def test_the_range_is_pinned_at_load(spark, tmp_path):
    uri = str(tmp_path / "t")
    t = changing_table(uri)
    df = read_changes(spark, uri, startingVersion=5)
    before = spark_rows(df)
    t.append(_rows([99]))
    assert spark_rows(df) == before  # the same versions on every scan
    assert {r["_commit_version"] for r in spark_rows(read_changes(spark, uri, startingVersion=5))} == {5, 6, 7}


def test_errors_are_typed(spark, tmp_path):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA)
    t.append(_rows([1]))
    t.set_properties(CDF)
    t.append(_rows([2]))
    with pytest.raises(Exception) as info:
        read_changes(spark, uri, startingVersion=0).collect()
    error = typed_error(info.value)
    assert isinstance(error, ChangeDataFeedError) and error.version == 0
    with pytest.raises(Exception) as info:
        read_changes(spark, uri, startingVersion=9).collect()
    assert isinstance(typed_error(info.value), ChangeDataFeedError)
    with pytest.raises(Exception) as info:
        read_changes(spark, uri).collect()  # Delta too needs a starting bound in a batch read
    assert isinstance(typed_error(info.value), ChangeDataFeedError)
    assert spark_rows(read_changes(spark, uri, startingVersion=3)) == core_rows(uri, starting_version=3)


# --------------------------------------------------------------------------------------------
# Streaming
# --------------------------------------------------------------------------------------------


class Batches:
    """foreachBatch sink: the change rows of every micro-batch, timestamps as epoch ms."""

    def __init__(self):
        self.batches: list[list[dict]] = []

    def __call__(self, df, batch_id: int) -> None:
        self.batches.append(spark_rows(df))

    def rows(self) -> list[dict]:
        return sorted((r for b in self.batches for r in b), key=lambda r: tuple(r[k] for k in KEY))


def run_stream(spark, uri: str, checkpoint: str, sink: Batches, **options):
    reader = spark.readStream.format("deltatx").option("readChangeFeed", "true")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    query = (reader.load(uri).writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination()
    except Exception:
        pass
    return query


def test_stream_from_a_version_delivers_each_commit_once_across_restarts(spark, tmp_path):
    uri, checkpoint = str(tmp_path / "t"), str(tmp_path / "ckpt")
    t = changing_table(uri)
    sink = Batches()
    query = run_stream(spark, uri, checkpoint, sink, startingVersion=1, maxFilesPerTrigger=1)
    assert query.exception() is None
    assert sink.rows() == core_rows(uri, starting_version=1)
    assert len(sink.batches) == 6  # one commit per batch at maxFilesPerTrigger=1
    t.update("id = 50", set={"value": "0"})  # v7
    t.append(_rows([60]))  # v8
    query = run_stream(spark, uri, checkpoint, sink, startingVersion=1, maxFilesPerTrigger=1)
    assert query.exception() is None
    assert sink.rows() == core_rows(uri, starting_version=1)  # v7 and v8 once, nothing twice


def test_stream_without_a_start_delivers_the_snapshot_as_inserts_then_changes(spark, tmp_path):
    uri, checkpoint = str(tmp_path / "t"), str(tmp_path / "ckpt")
    t = changing_table(uri, **{"delta.enableDeletionVectors": "true"})
    sink = Batches()
    assert run_stream(spark, uri, checkpoint, sink).exception() is None
    snapshot = deltatx.Table(uri).to_arrow().sort_by("id").to_pylist()
    assert [(r["id"], r["value"]) for r in sorted(sink.rows(), key=lambda r: r["id"])] == \
        [(r["id"], r["value"]) for r in snapshot]
    assert {(r["_change_type"], r["_commit_version"]) for r in sink.rows()} == {("insert", 6)}
    t.delete("id = 50")  # v7
    assert run_stream(spark, uri, checkpoint, sink).exception() is None
    assert sink.batches[-1] == core_rows(uri, starting_version=7)


def test_stream_fails_typed_where_the_feed_was_off(spark, tmp_path):
    uri, checkpoint = str(tmp_path / "t"), str(tmp_path / "ckpt")
    t = deltatx.create_table(uri, SCHEMA)
    t.append(_rows([1]))
    query = run_stream(spark, uri, checkpoint, Batches(), startingVersion=0)
    error = typed_error(query.exception())
    assert isinstance(error, ChangeDataFeedError) and error.version == 0


def test_stream_from_latest_delivers_only_later_commits(spark, tmp_path):
    """startingVersion=latest is a streaming start of delta-spark's for the change feed too."""
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, pa.schema([("id", pa.int64())]), properties={"delta.enableChangeDataFeed": "true"})
    t.append(pa.table({"id": [1]}))
    df = spark.readStream.format("deltatx").option("readChangeFeed", "true").option("startingVersion", "latest").load(uri)
    query = df.writeStream.format("memory").queryName("cdf_from_latest").start()
    try:
        query.processAllAvailable()
        t.append(pa.table({"id": [2]}))
        query.processAllAvailable()
    finally:
        query.stop()
    rows = spark.sql("SELECT id, _change_type, _commit_version FROM cdf_from_latest").collect()
    assert [tuple(r) for r in rows] == [(2, "insert", 2)]


# --------------------------------------------------------------------------------------------
# Schema changes under a running change-feed stream (checked as in the plain stream)
# --------------------------------------------------------------------------------------------


def _widen(t: deltatx.Table) -> None:
    t.alter_column_type("value", pa.int64())
    t.append(pa.table({"id": pa.array([30], pa.int64()), "value": pa.array([2**40], pa.int64())}))


def _rename(t: deltatx.Table) -> None:
    t.rename_column("value", "amount")
    t.append(pa.table({"id": pa.array([30], pa.int64()), "amount": pa.array([300], pa.int32())}))


def _add_column(t: deltatx.Table) -> None:
    t.append(pa.table({"id": pa.array([30], pa.int64()), "value": pa.array([300], pa.int32()), "note": ["n"]}),
             schema_mode="merge")


@pytest.mark.parametrize("change, expected", [
    (_widen, {"id": 30, "value": 2**40}),
    (_rename, {"id": 30, "amount": 300}),
    (_add_column, {"id": 30, "value": 300, "note": "n"}),
])
def test_a_schema_change_fails_the_running_change_stream_and_a_restart_reads_on(spark, tmp_path, change, expected):
    """Before, a widened INT read on as INT (a raw ArrowInvalid past its range), a renamed column
    was delivered as NULLs and an added one not at all. Now the stream delivers every commit
    before the change, fails typed at it, and a restart reads on with the new schema."""
    from deltatx.errors import StreamSchemaChangedError

    uri, checkpoint = str(tmp_path / "t"), str(tmp_path / "ckpt")
    schema = pa.schema([("id", pa.int64()), ("value", pa.int32())])
    t = deltatx.create_table(uri, schema, properties={**CDF, "delta.enableTypeWidening": "true",
                                                       "delta.columnMapping.mode": "name"})
    t.append(pa.table({"id": pa.array([1], pa.int64()), "value": pa.array([10], pa.int32())}))
    seen: list[dict] = []

    def collect(df, _):
        seen.extend(r.asDict() for r in df.drop("_commit_timestamp").collect())

    df = spark.readStream.format("deltatx").option("readChangeFeed", "true").option("startingVersion", "1").load(uri)
    running = df.writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint).start()
    try:
        running.processAllAvailable()
        t.append(pa.table({"id": pa.array([2], pa.int64()), "value": pa.array([20], pa.int32())}))  # v2
        change(t)  # v3 changes the schema (v4 appends after it, when the change is its own commit)
        with pytest.raises(Exception):
            running.processAllAvailable()
    finally:
        running.stop()
    error = typed_error(running.exception())
    assert isinstance(error, StreamSchemaChangedError) and error.version == 3
    assert [(r["id"], r["value"], r["_commit_version"]) for r in seen] == [(1, 10, 1), (2, 20, 2)]

    seen.clear()
    reader = spark.readStream.format("deltatx").option("readChangeFeed", "true").option("startingVersion", "1")
    restarted = (reader.load(uri).writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
    restarted.awaitTermination()
    assert [{k: v for k, v in r.items() if k not in ("_change_type", "_commit_version")} for r in seen] == [expected]
    assert {r["_change_type"] for r in seen} == {"insert"}


def test_a_change_stream_restarts_after_log_cleanup_removed_its_start(spark, tmp_path):
    """startingVersion applies to a new query only, as in Delta: a restart goes on from its
    checkpoint though the version it started at is gone from the log."""
    import os

    uri, checkpoint = str(tmp_path / "t"), str(tmp_path / "ckpt")
    t = deltatx.create_table(uri, SCHEMA, properties=CDF)
    for v in range(1, 6):
        t.append(_rows([v * 10]))
    sink = Batches()
    assert run_stream(spark, uri, checkpoint, sink, startingVersion=1).exception() is None
    t.checkpoint()  # at v5
    for version in range(5):  # what log retention removes
        os.remove(os.path.join(uri, "_delta_log", f"{version:020d}.json"))
    t.append(_rows([60]))  # v6
    assert run_stream(spark, uri, checkpoint, sink, startingVersion=1).exception() is None
    assert sink.batches[-1] == core_rows(uri, starting_version=6)
    assert sorted(r["id"] for r in sink.rows()) == [10, 20, 30, 40, 50, 60]  # each exactly once
    with pytest.raises(Exception) as info:  # a batch read of that range still names the problem
        read_changes(spark, uri, startingVersion=1).collect()
    assert isinstance(typed_error(info.value), ChangeDataFeedError)


def test_timestamps_between_the_same_two_commits_read_no_change(spark, tmp_path):
    """Delta's CDCReader.verifyEndingVersion: both bounds fall after version 1 and before version 2,
    so no version is in range: an empty read, as Table.changes gives."""
    import os

    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA, properties=CDF)
    for v in (1, 2, 3):
        t.append(_rows([v]))
    for version in range(4):  # commit times 1000 s, 2000 s, ... (the file times, no in-commit ones)
        seconds = 1000 * (version + 1)
        os.utime(os.path.join(uri, "_delta_log", f"{version:020d}.json"), (seconds, seconds))
    bounds = {"startingTimestamp": "1970-01-01T00:33:40Z", "endingTimestamp": "1970-01-01T00:33:50Z"}  # 2020 s, 2030 s
    assert deltatx.Table(uri).changes(starting_timestamp=bounds["startingTimestamp"],
                                      ending_timestamp=bounds["endingTimestamp"]).num_rows == 0
    assert read_changes(spark, uri, **bounds).count() == 0
