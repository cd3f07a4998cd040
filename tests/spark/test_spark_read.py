"""spark.read.format("deltatx"): exact types, time travel, file skipping from pushed filters, SQL views.

Tables are written with the core API (no Spark job) so that only the reads cost Spark time.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql.datasource import EqualTo, GreaterThan, In, IsNull, LessThan, Not, StringStartsWith

import deltatx
import deltatx.spark as dspark
from deltatx.spark import DeltaTable
from deltatx.spark.options import read_spec
from deltatx.spark.reader import DeltaTxReader, bin_files, plan_scan

UTC = dt.timezone.utc


def typed_rows() -> pa.Table:
    return pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "small": pa.array([10, None, 30], pa.int32()),
        "name": ["a", "b", None],
        "day": [dt.date(2024, 1, 1), dt.date(2024, 1, 2), None],
        "ts": pa.array([dt.datetime(2024, 1, 1, 12, tzinfo=UTC), None, dt.datetime(2024, 3, 1, tzinfo=UTC)],
                       pa.timestamp("us", tz="UTC")),
        "amount": pa.array([Decimal("1.50"), Decimal("-2.25"), None], pa.decimal128(10, 2)),
        "flag": [True, False, None],
        "score": [0.5, None, 2.5],
    })


def test_read_round_trip_with_exact_types(spark, table_uri):
    table = deltatx.create_table(table_uri, typed_rows().schema)
    table.append(typed_rows())

    df = spark.read.format("deltatx").load(table_uri)
    assert df.schema.simpleString() == (
        "struct<id:bigint,small:int,name:string,day:date,ts:timestamp,amount:decimal(10,2),"
        "flag:boolean,score:double>"
    )
    rows = sorted((r.asDict() for r in df.collect()), key=lambda r: r["id"])
    assert rows[0] == {"id": 1, "small": 10, "name": "a", "day": dt.date(2024, 1, 1),
                       "ts": dt.datetime(2024, 1, 1, 12), "amount": Decimal("1.50"), "flag": True, "score": 0.5}
    assert rows[1]["small"] is None and rows[2]["name"] is None and rows[2]["amount"] is None
    # the arrow path Spark uses for toPandas/toArrow sees the same values
    assert df.toArrow().sort_by("id").column("amount").to_pylist() == [Decimal("1.50"), Decimal("-2.25"), None]


def test_time_travel_by_version_and_timestamp(spark, table_uri):
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1, 2]}))          # version 1
    table.append(pa.table({"id": [3]}))             # version 2
    table.delete("id = 1")                          # version 3
    history = {h["version"]: h["timestamp"] for h in table.history()}

    def ids(**options) -> list[int]:
        return sorted(r.id for r in dspark.read(spark, table_uri, **options).collect())

    assert ids() == [2, 3]
    assert ids(version=1) == [1, 2]
    assert ids(version=2) == [1, 2, 3]
    at = dt.datetime.fromtimestamp(history[2] / 1000, UTC)
    assert ids(timestamp=at) == sorted(deltatx.Table(table_uri, timestamp=at).to_arrow()["id"].to_pylist())
    assert ids(timestamp=at) in ([1, 2, 3], [2, 3])  # v2, or v3 if it landed in the same millisecond
    assert sorted(r.id for r in spark.read.format("deltatx").option("versionAsOf", "0").load(table_uri).collect()) == []
    with pytest.raises(Exception, match="TimeTravelError"):
        spark.read.format("deltatx").option("versionAsOf", 99).load(table_uri).collect()
    # as in delta-spark: a timestamp after the last commit is refused, not answered with the latest
    with pytest.raises(Exception, match="is after the latest version available"):
        spark.read.format("deltatx").option("timestampAsOf", "2100-01-01 00:00:00").load(table_uri).collect()
    with pytest.raises(Exception, match="is after the latest version available"):
        DeltaTable.forPath(spark, table_uri).restoreToTimestamp("2100-01-01")
    assert deltatx.Table(table_uri).version == 3  # nothing restored


def test_a_cast_in_a_dml_condition_truncates_as_spark_does(spark, table_uri):
    """CAST(1.5 AS INT) is 1 in Spark (ANSI mode too): a DELETE by it finds the row."""
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("v", pa.float64())]))
    table.append(pa.table({"id": [1, 2, 3], "v": [1.5, -1.7, 2.2]}))
    assert [r.n for r in spark.sql("SELECT CAST(1.5D AS INT) AS n").collect()] == [1]
    DeltaTable.forPath(spark, table_uri).delete(F.col("v").cast("int") == 1)
    DeltaTable.forPath(spark, table_uri).delete("CAST(v AS INT) = -1")
    assert deltatx.Table(table_uri).to_arrow()["id"].to_pylist() == [3]


@pytest.fixture
def eight_files(table_uri) -> str:
    """4 partitions x 2 files; within a partition the files hold disjoint id ranges (stats)."""
    table = deltatx.create_table(
        table_uri, pa.schema([("id", pa.int64()), ("part", pa.string()), ("x", pa.float64())]),
        partition_by=["part"],
    )
    for low in (0, 100):
        ids = list(range(low, low + 40))
        table.append(pa.table({"id": ids, "part": [f"p{i % 4}" for i in ids], "x": [float(i) for i in ids]}))
    assert table.files().num_rows == 8
    return table_uri


def planned(uri: str, filters: list, **options) -> tuple[DeltaTxReader, list]:
    """Plan a read as Spark does (pushFilters, then partitions) without running a Spark job."""
    from pyspark.sql.types import StructType

    reader = DeltaTxReader(read_spec({"path": uri, "maxPartitionBytes": "1", "filterPushdown": "true", **options}),
                           StructType.fromJson({"type": "struct", "fields": []}))
    returned = list(reader.pushFilters(filters))
    return reader, returned


def test_pushed_filters_skip_files_by_partition_and_stats(eight_files):
    table = deltatx.Table(eight_files)

    reader, returned = planned(eight_files, [EqualTo(("part",), "p1")])
    assert returned == []  # partition-only: answered exactly by the source
    assert plan_scan(table, reader.predicate(), reader.spec).num_files == 2

    reader, returned = planned(eight_files, [GreaterThan(("id",), 120)])
    assert returned == [GreaterThan(("id",), 120)]  # data column: Spark re-checks the rows
    plan = plan_scan(table, reader.predicate(), reader.spec)
    assert (plan.num_files, plan.skipped_files) == (4, 4)  # stats: the 0..39 files cannot match

    both = [In(("part",), ("p0", "p3")), LessThan(("id",), 50), Not(EqualTo(("part",), "p3"))]
    reader, returned = planned(eight_files, both)
    assert returned == [LessThan(("id",), 50)]
    assert plan_scan(table, reader.predicate(), reader.spec).num_files == 1

    reader, returned = planned(eight_files, [StringStartsWith(("part",), "p2"), IsNull(("id",))])
    assert returned == [IsNull(("id",))]
    assert plan_scan(table, reader.predicate(), reader.spec).num_files == 0

    # floating point columns are not pushed (NaN sorts above every number in Spark)
    reader, returned = planned(eight_files, [GreaterThan(("x",), 1000.0)])
    assert returned == [GreaterThan(("x",), 1000.0)] and reader.predicate() is None


def test_spark_plans_one_partition_per_matching_file(spark, eight_files):
    def load():
        return (spark.read.format("deltatx").option("maxPartitionBytes", "1")
                .option("filterPushdown", "true").load(eight_files))

    assert load().rdd.getNumPartitions() == 8
    pruned = load().where("part = 'p1' AND id >= 100")
    assert pruned.rdd.getNumPartitions() == 1  # 8 files -> 1: partition pruning + stats skipping
    rows = pruned.select("id").collect()
    assert sorted(r.id for r in rows) == [101, 105, 109, 113, 117, 121, 125, 129, 133, 137]
    # small files share partitions by default (each costs openCostInBytes; at least minPartitions)
    binned = spark.read.format("deltatx").option("minPartitions", "2").load(eight_files)
    assert 2 <= binned.rdd.getNumPartitions() < 8


def test_default_read_is_right_when_a_dataframe_is_reused(spark, eight_files):
    """Spark 4.3 reuses a relation's planned read for later scans: without pushdown that is safe."""
    df = spark.read.format("deltatx").load(eight_files)
    assert df.where("part = 'p1'").count() == 20
    assert df.count() == 80
    assert df.where("id >= 130").count() == 10
    assert df.count() == 80
    deltatx.Table(eight_files).append(pa.table({"id": [999], "part": ["p0"], "x": [1.0]}))
    assert df.count() == 80 and df.where("part = 'p0'").count() == 20  # pinned at load(): a snapshot
    assert spark.read.format("deltatx").load(eight_files).count() == 81


def test_bins_follow_spark_split_rules():
    spec = read_spec({"path": "/t", "maxPartitionBytes": "100", "openCostInBytes": "10", "minPartitions": "1"})
    assert bin_files([50, 30, 80, 5, 5], spec) == [[0, 1], [2], [3, 4]]
    assert bin_files([], spec) == []
    spread = read_spec({"path": "/t", "maxPartitionBytes": "1000", "openCostInBytes": "0", "minPartitions": "4"})
    assert len(bin_files([10] * 8, spread)) == 4


def test_columns_option_and_user_schema_read_fewer_columns(spark, eight_files):
    df = spark.read.format("deltatx").option("columns", "id").load(eight_files)
    assert df.columns == ["id"]
    assert df.agg({"id": "sum"}).collect()[0][0] == sum(range(40)) + sum(range(100, 140))
    narrowed = spark.read.format("deltatx").schema("part string, id long").load(eight_files)
    assert narrowed.where("id = 7").collect()[0].asDict() == {"part": "p3", "id": 7}


def test_sql_temporary_view(spark, eight_files):
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW deltatx_events USING deltatx OPTIONS (path '{eight_files}')")
    try:
        row = spark.sql(
            "SELECT count(*) AS n, max(id) AS top FROM deltatx_events WHERE part = 'p2'"
        ).collect()[0]
        assert (row.n, row.top) == (20, 138)
        assert spark.sql("SELECT max(id) FROM deltatx_events").collect()[0][0] == 139
        deltatx.Table(eight_files).append(pa.table({"id": [500], "part": ["p2"], "x": [0.0]}))
        assert spark.sql("SELECT max(id) FROM deltatx_events").collect()[0][0] == 139  # pinned version
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW deltatx_events USING deltatx OPTIONS (path '{eight_files}')")
        assert spark.sql("SELECT max(id) FROM deltatx_events").collect()[0][0] == 500
    finally:
        spark.catalog.dropTempView("deltatx_events")
