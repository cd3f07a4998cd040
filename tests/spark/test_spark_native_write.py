"""deltatx.spark.write with Spark's own Parquet writer: files in Delta's layout, footer stats, one commit.

The commit path (conflicts, idempotency, schema changes) is the format's; these tests cover what
differs: where the files land, their partition values and statistics, cleanup on failure, and
which writes fall back to the format.
"""

from __future__ import annotations

import datetime as dt
import os

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tablefiles import data_files

import deltatx
import deltatx.spark as dspark
from deltatx.errors import ConcurrentAppendException, NativeUnavailableError, SchemaMismatchError
from deltatx.io.paths import decode_path
from deltatx.spark.native_write import native_write, unavailable_reason
from deltatx.spark.writer import plan_write
from deltatx.txnlog.stats import compute_stats


def _rows(uri: str) -> list[dict]:
    return sorted(deltatx.Table(uri).to_arrow().to_pylist(), key=lambda r: r["id"])


def test_native_write_lands_files_in_delta_layout_with_footer_stats(spark, table_uri):
    df = spark.createDataFrame(
        [(i, f"n{i:02d}", None if i % 4 == 0 else i * 10, i / 2, f"r{i % 2}" if i % 3 else None,
          dt.date(2024, 1, 1 + i % 2), i % 2 == 0) for i in range(12)],
        "id long, name string, score int, x double, region string, day date, flag boolean")
    result = dspark.write(df, table_uri, engine="parquet", partitionBy="region,day,flag")
    assert result.version == 0 and result.read_version == -1

    table = deltatx.Table(table_uri)
    files = table.files()
    paths = [decode_path(p) for p in files["path"].to_pylist()]
    assert data_files(table_uri) == set(paths)  # no staging folder, no .crc, no _SUCCESS left
    assert all(p.split("/")[0].startswith("region=") for p in paths)
    assert any(p.startswith("region=__HIVE_DEFAULT_PARTITION__/") for p in paths)

    rows = _rows(table_uri)
    assert [r["id"] for r in rows] == list(range(12))
    assert rows[3] == {"id": 3, "name": "n03", "score": 30, "x": 1.5, "region": None,
                       "day": dt.date(2024, 1, 2), "flag": False}
    assert rows[4]["score"] is None and rows[4]["region"] == "r0" and rows[4]["flag"] is True

    for add in files.to_pylist():  # footer stats = stats of the file's rows, minus float bounds
        rows_of_file = pq.read_table(os.path.join(table_uri, decode_path(add["path"])))
        expected = orjson.loads(compute_stats(rows_of_file))
        got = orjson.loads(add["stats"])
        assert got["numRecords"] == expected["numRecords"] and got["nullCount"] == expected["nullCount"]
        assert got["minValues"] == {k: v for k, v in expected["minValues"].items() if k != "x"}
        assert got["maxValues"] == {k: v for k, v in expected["maxValues"].items() if k != "x"}

    pruned = table.to_arrow(where="id >= 10", columns=["id"])
    assert sorted(pruned["id"].to_pylist()) == [10, 11]


def test_native_append_overwrite_merge_schema_and_idempotency(spark, table_uri):
    dspark.write(spark.range(5).selectExpr("id", "cast(id % 2 as int) as part"), table_uri,
                 engine="parquet", partitionBy="part")
    wider = spark.range(5, 7).selectExpr("id", "cast(id % 2 as int) as part", "'new' as tag")
    dspark.write(wider, table_uri, engine="parquet", mergeSchema=True)
    assert deltatx.Table(table_uri).schema.names == ["id", "part", "tag"]
    assert [r["tag"] for r in _rows(table_uri)] == [None] * 5 + ["new", "new"]

    first = dspark.write(spark.range(100, 101).selectExpr("id", "1 as part"), table_uri,
                         engine="parquet", txnAppId="job", txnVersion=3)
    before = data_files(table_uri)
    again = dspark.write(spark.range(200, 201).selectExpr("id", "1 as part"), table_uri,
                         engine="parquet", txnAppId="job", txnVersion=3)
    assert again.skipped and not first.skipped
    assert data_files(table_uri) == before  # the skipped write leaves nothing behind

    result = dspark.write(spark.range(3).selectExpr("id + 1000 as id", "0 as part"), table_uri,
                          mode="overwrite", engine="parquet")
    assert result.metrics["numRemovedFiles"] >= 3
    assert [r["id"] for r in _rows(table_uri)] == [1000, 1001, 1002]


def test_a_lost_race_raises_typed_and_deletes_the_files(spark, table_uri):
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]),
                                 properties={"delta.isolationLevel": "Serializable"})
    table.append(pa.table({"id": [1]}))
    df = spark.range(10, 12)
    plan = plan_write({"path": table_uri}, df.schema, True)  # the overwrite reads version 1 ...
    table.append(pa.table({"id": [2]}))                        # ... and an append lands first
    before = data_files(table_uri)
    with pytest.raises(ConcurrentAppendException) as info:
        native_write(df, plan)
    assert info.value.version == 2
    assert data_files(table_uri) == before and deltatx.Table(table_uri).version == 2


def test_a_failing_job_leaves_no_files_and_no_commit(spark, table_uri):
    deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]))

    def explode(batches):
        for batch in batches:
            yield batch
            raise RuntimeError("task broke")

    df = spark.range(0, 50, numPartitions=2)
    broken = df.mapInArrow(explode, df.schema)
    with pytest.raises(Exception, match="task broke"):
        dspark.write(broken, table_uri, engine="parquet")
    assert data_files(table_uri) == set() and deltatx.Table(table_uri).version == 0


def test_writes_the_native_path_cannot_do_use_the_format(spark, table_uri, memory_uri):
    dspark.write(spark.range(4).selectExpr("id", "cast(id % 2 as int) as part"), table_uri, partitionBy="part")
    replacement = spark.range(10, 12).selectExpr("id", "1 as part")
    with pytest.raises(NativeUnavailableError, match="replaceWhere"):
        dspark.write(replacement, table_uri, mode="overwrite", replaceWhere="part = 1", engine="parquet")
    result = dspark.write(replacement, table_uri, mode="overwrite", replaceWhere="part = 1")  # auto: the format
    assert result.version == 1 and [r["id"] for r in _rows(table_uri)] == [0, 2, 10, 11]

    stamped = spark.range(1).selectExpr("id", "timestamp'2024-01-01 00:00:00' as ts")
    plan = plan_write({"path": table_uri + "-ts"}, stamped.schema, False)
    assert "timestamp" in unavailable_reason(plan)
    dspark.write(stamped, table_uri + "-ts")
    assert deltatx.Table(table_uri + "-ts").to_arrow()["ts"].to_pylist()[0].year == 2024

    plan = plan_write({"path": memory_uri}, spark.range(1).schema, False)
    assert "not on a local filesystem" in unavailable_reason(plan)


def test_partition_values_spark_escapes_in_folder_names_round_trip(spark, table_uri):
    values = ["a b", "x:y", "50%", "a/b", "é=1", "", None, "plain"]
    df = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "id long, tag string")
    dspark.write(df, table_uri, engine="parquet", partitionBy="tag")
    rows = {r["id"]: r["tag"] for r in deltatx.Table(table_uri).to_arrow().to_pylist()}
    # Delta (and Spark) store an empty string partition value as null
    assert rows == {i: (v if v != "" else None) for i, v in enumerate(values)}
    assert deltatx.Table(table_uri).to_arrow(where="tag = 'x:y'")["id"].to_pylist() == [1]


def test_an_underscore_partition_column_keeps_its_rows(spark, table_uri):
    df = spark.createDataFrame([(1, "a"), (2, "b"), (3, None)], "id long, _p string")
    result = dspark.write(df, table_uri, engine="parquet", partitionBy="_p")
    assert result.version == 0
    assert {r["id"]: r["_p"] for r in deltatx.Table(table_uri).to_arrow().to_pylist()} == {1: "a", 2: "b", 3: None}
    assert all(p.startswith("_p=") for p in data_files(table_uri))


def test_a_lossy_type_change_goes_through_the_format_and_is_refused(spark, table_uri):
    deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]))
    doubles = spark.createDataFrame([(1.5,), (2.7,)], "id double")
    plan = plan_write({"path": table_uri}, doubles.schema, False)
    from deltatx.spark.options import spark_schema_to_arrow

    assert "double in the DataFrame but int64 in the table" in unavailable_reason(plan, spark_schema_to_arrow(doubles.schema))
    with pytest.raises(NativeUnavailableError, match="double in the DataFrame"):
        dspark.write(doubles, table_uri, engine="parquet")
    with pytest.raises(SchemaMismatchError):
        dspark.write(doubles, table_uri)  # auto: the format, whose safe cast refuses 1.5 -> 1
    assert deltatx.Table(table_uri).version == 0 and data_files(table_uri) == set()


def test_a_dataframe_already_in_the_table_layout_is_written_as_it_is(spark, table_uri):
    """No projection is built when names, order and types already match (it costs the driver
    Py4J calls and analysis on every write); any difference still gets the projection."""
    from deltatx.spark.native_write import _conformed

    df = spark.range(3).selectExpr("id", "cast(id as int) as part")
    plan = plan_write({"path": table_uri}, df.schema, False)
    assert _conformed(df, plan) is df
    reordered = df.select("part", "id")
    conformed = _conformed(reordered, plan)
    assert conformed is not reordered and conformed.columns == ["id", "part"]
    renamed = df.withColumnRenamed("id", "ID")
    assert _conformed(renamed, plan) is not renamed
    dspark.write(reordered, table_uri, engine="parquet")
    assert [(r["id"], r["part"]) for r in _rows(table_uri)] == [(0, 0), (1, 1), (2, 2)]


@pytest.mark.parametrize("engine", ["parquet", "format"])
def test_spark_writes_follow_the_stats_columns_property(spark, table_uri, engine):
    """``delta.dataSkippingStatsColumns``: only the named columns get statistics, from Spark's
    writer's footers as from the format's."""
    deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.int64())]),
                         properties={"delta.dataSkippingStatsColumns": "score"})
    df = spark.createDataFrame([(i, f"n{i}", i * 10) for i in range(4)], "id long, name string, score long")
    dspark.write(df, table_uri, mode="append", engine=engine)
    stats = [orjson.loads(s) for s in deltatx.Table(table_uri).files()["stats"].to_pylist()]
    assert stats and all(sorted(s["minValues"]) == ["score"] for s in stats)
    assert deltatx.Table(table_uri).to_arrow(where="score >= 20")["id"].to_pylist() == [2, 3]
