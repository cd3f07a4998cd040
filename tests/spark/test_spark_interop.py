"""Tables written through Spark are read by deltalake (delta-rs), and tables deltalake wrote by Spark."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

import deltatx.spark as dspark


def test_spark_written_partitioned_table_reads_in_deltalake(spark, table_uri):
    df = spark.range(6).selectExpr("id", "cast(id % 2 as string) as part", "date_add(date'2024-01-01', cast(id as int)) as day")
    dspark.write(df, table_uri, partitionBy="part", userMetadata="from spark")
    dspark.write(df.where("id = 0"), table_uri, mode="overwrite", replaceWhere="part = '0'")

    dl = DeltaTable(table_uri)
    assert dl.version() == 1
    assert dl.metadata().partition_columns == ["part"]
    rows = sorted(dl.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["part"]) for r in rows] == [(0, "0"), (1, "1"), (3, "1"), (5, "1")]
    assert rows[0]["day"] == dt.date(2024, 1, 1)
    assert dl.history()[-1]["userMetadata"] == "from spark"
    assert dl.to_pyarrow_table(filters=[("part", "=", "1")]).num_rows == 3


def test_deltalake_written_table_reads_in_spark_and_takes_spark_appends(spark, table_uri):
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"],
                     "region": ["eu", "us", "eu"]})
    write_deltalake(table_uri, data, partition_by=["region"])
    write_deltalake(table_uri, data.slice(0, 1), mode="append")

    df = spark.read.format("deltatx").load(table_uri)
    assert sorted(df.columns) == ["id", "name", "region"]
    assert sorted((r.id, r.region) for r in df.collect()) == [(1, "eu"), (1, "eu"), (2, "us"), (3, "eu")]

    dspark.write(spark.createDataFrame([(4, "d", "us")], "id long, name string, region string"), table_uri)
    dl = DeltaTable(table_uri)
    assert dl.version() == 2
    assert sorted(dl.to_pyarrow_table()["id"].to_pylist()) == [1, 1, 2, 3, 4]
    assert dspark.read(spark, table_uri, version=1).count() == 4
