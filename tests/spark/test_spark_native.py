"""deltatx.spark.read with Spark's own Parquet reader: same rows as the format, pruned columns, fallbacks.

Tables are written with the core API (no Spark job) so that only the reads cost Spark time.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dvtables import add_deletion_vectors

import deltatx
import deltatx.spark as dspark
from deltatx.errors import DeltaTxError, NativeUnavailableError, SchemaMismatchError
from deltatx.io.encodings import DELTA, SAMPLE_ROWS
from deltatx.spark import native
from deltatx.spark.native import unavailable_reason

UTC = dt.timezone.utc


def _rows(df) -> list[dict]:
    return sorted((r.asDict() for r in df.collect()), key=lambda r: (r["id"],))


def _executed_plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@pytest.fixture
def typed_partitions(table_uri) -> str:
    """Partitioned by a string (with a null), a date and an int: 3 partitions, 2 appends, 6 files."""
    schema = pa.schema([("id", pa.int64()), ("region", pa.string()), ("day", pa.date32()),
                        ("bucket", pa.int32()), ("amount", pa.decimal128(10, 2)),
                        ("ts", pa.timestamp("us", tz="UTC"))])
    table = deltatx.create_table(table_uri, schema, partition_by=["region", "day", "bucket"])
    for low in (0, 30):
        ids = list(range(low, low + 30))
        table.append(pa.table({
            "id": ids,
            "region": [None if i % 3 == 0 else f"r{i % 3}" for i in ids],
            "day": [dt.date(2024, 1, 1 + i % 3) for i in ids],
            "bucket": pa.array([i % 3 for i in ids], pa.int32()),
            "amount": pa.array([Decimal(i) / 4 for i in ids], pa.decimal128(10, 2)),
            "ts": pa.array([dt.datetime(2024, 5, 1, i % 24, tzinfo=UTC) for i in ids], pa.timestamp("us", "UTC")),
        }, schema=schema))
    return table_uri


def test_native_read_returns_the_format_rows_with_partition_values_from_the_log(spark, typed_partitions):
    natively = dspark.read(spark, typed_partitions, engine="parquet")
    through_format = dspark.read(spark, typed_partitions, engine="format")
    assert [f for f, g in zip(natively.schema.fields, through_format.schema.fields) if f != g] == []
    assert natively.columns == ["id", "region", "day", "bucket", "amount", "ts"]
    rows = _rows(natively)
    assert rows == _rows(through_format)
    assert len(rows) == 60
    assert rows[0] == {"id": 0, "region": None, "day": dt.date(2024, 1, 1), "bucket": 0,
                       "amount": Decimal("0.00"), "ts": dt.datetime(2024, 5, 1, 0)}
    assert rows[5]["region"] == "r2" and rows[5]["day"] == dt.date(2024, 1, 3) and rows[5]["bucket"] == 2
    assert "FileScan parquet" in _executed_plan(natively)


def test_a_partition_filter_opens_only_that_partitions_files(spark, typed_partitions):
    df = dspark.read(spark, typed_partitions)  # auto: a local table reads natively
    assert "FileScan parquet" in _executed_plan(df)
    assert len(df.inputFiles()) == deltatx.Table(typed_partitions).files().num_rows == 6
    only = df.where("region = 'r1'")
    assert len(only.inputFiles()) == 2  # the other partitions' relations are folded away
    assert sorted(r.id for r in only.collect()) == list(range(1, 60, 3))
    assert df.where("region IS NULL AND day = DATE'2024-01-01'").count() == 20


def test_only_the_queried_columns_are_read(spark, typed_partitions):
    df = dspark.read(spark, typed_partitions).select("id")
    assert "ReadSchema: struct<id:bigint>" in _executed_plan(df)
    fewer = dspark.read(spark, typed_partitions, columns=["amount", "id"])
    assert fewer.columns == ["amount", "id"] and "ReadSchema: struct<id:bigint,amount:decimal(10,2)>" in \
        _executed_plan(fewer)
    assert fewer.agg({"id": "sum"}).collect()[0][0] == sum(range(60))
    with pytest.raises(SchemaMismatchError, match="nope"):  # the format's error, natively too
        dspark.read(spark, typed_partitions, columns=["nope"])


def test_time_travel_removes_and_empty_snapshots(spark, table_uri):
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]))
    assert dspark.read(spark, table_uri).count() == 0  # version 0: no files
    table.append(pa.table({"id": [1, 2]}))          # version 1
    table.append(pa.table({"id": [3]}))             # version 2
    table.delete("id = 1")                          # version 3
    assert sorted(r.id for r in dspark.read(spark, table_uri, engine="parquet").collect()) == [2, 3]
    assert sorted(r.id for r in dspark.read(spark, table_uri, version=1, engine="parquet").collect()) == [1, 2]
    at = deltatx.Table(table_uri).history()[1]["timestamp"]  # version 2's commit time
    expected = sorted(deltatx.Table(table_uri, timestamp=at).to_arrow()["id"].to_pylist())
    assert sorted(r.id for r in dspark.read(spark, table_uri, timestamp=at, engine="parquet").collect()) == expected


def test_format_only_options_and_unreadable_tables_use_the_format(spark, typed_partitions, memory_uri, monkeypatch):
    with_pushdown = dspark.read(spark, typed_partitions, filterPushdown=True)
    assert "FileScan parquet" not in _executed_plan(with_pushdown)  # an option only the format knows
    assert with_pushdown.count() == 60

    deltatx.create_table(memory_uri, pa.schema([("id", pa.int64())]))
    reason = unavailable_reason(deltatx.Table(memory_uri))
    assert reason is not None and "not on a local filesystem" in reason
    with pytest.raises(NativeUnavailableError, match="not on a local filesystem"):
        dspark.read(spark, memory_uri, engine="parquet")

    monkeypatch.setattr(native, "MAX_PARTITION_GROUPS", 2)
    assert "3 distinct partitions" in unavailable_reason(deltatx.Table(typed_partitions))
    fallback = dspark.read(spark, typed_partitions)
    assert "FileScan parquet" not in _executed_plan(fallback) and fallback.count() == 60
    with pytest.raises(DeltaTxError, match="engine must be one of"):
        dspark.read(spark, typed_partitions, engine="arrow")


def test_deletion_vectors_are_applied_natively(spark, table_uri):
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": list(range(10))}))
    add_deletion_vectors(table_uri, {table.files()["path"][0].as_py(): [1, 3, 8]}, storage="u")
    assert unavailable_reason(deltatx.Table(table_uri)) is None
    df = dspark.read(spark, table_uri)  # auto: Spark's Parquet reader, the deleted rows dropped on the JVM side
    assert "FileScan parquet" in _executed_plan(df)
    assert sorted(r.id for r in df.collect()) == [0, 2, 4, 5, 6, 7, 9]
    # (tests/spark/test_spark_native_dv.py covers DV reads in depth)


def test_delta_encoded_ids_times_and_dates_are_read_by_sparks_parquet_reader(spark, table_uri):
    """Large files store sorted integer, date and timestamp columns DELTA_BINARY_PACKED
    (io/encodings.py); Spark's vectorized reader decodes them to the same rows as the format."""
    n = SAMPLE_ROWS * 2
    ids = list(range(n))
    rows = pa.table({
        "id": pa.array(ids, pa.int64()),
        "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i // 5) for i in ids], pa.date32()),
        "ts": pa.array([dt.datetime(2024, 5, 1, tzinfo=UTC) + dt.timedelta(seconds=i) for i in ids],
                       pa.timestamp("us", "UTC")),
        "small": pa.array([i % 30_000 for i in ids], pa.int32()),
    })
    table = deltatx.create_table(table_uri, rows.schema)
    table.append(rows)
    meta = pq.ParquetFile(f"{table_uri}/{table.files()['path'][0].as_py()}").metadata.row_group(0)
    assert all(DELTA in meta.column(i).encodings for i in range(meta.num_columns))
    df = dspark.read(spark, table_uri, engine="parquet")
    assert "FileScan parquet" in _executed_plan(df)
    got = _rows(df)
    assert len(got) == n
    assert got[n - 1] == {"id": n - 1, "day": dt.date(2024, 1, 1) + dt.timedelta(days=(n - 1) // 5),
                          "ts": dt.datetime(2024, 5, 1) + dt.timedelta(seconds=n - 1), "small": (n - 1) % 30_000}
    assert [r["small"] for r in got] == [i % 30_000 for i in ids]
    assert got == _rows(dspark.read(spark, table_uri, engine="format"))


def test_many_files_are_listed_on_the_driver_and_the_session_conf_is_restored(spark, table_uri, monkeypatch):
    """Above native.MANY_FILES the paths go to the JVM as one string and Spark's parallel-listing
    threshold is raised only while the relation is built: same rows, the session's value back."""
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("part", pa.string())]),
                                 partition_by=["part"])
    for i in range(6):
        table.append(pa.table({"id": [i, i + 100], "part": ["a", "b"]}))
    monkeypatch.setattr(native, "MANY_FILES", 2)
    entered = []

    class CountingLock:
        def __enter__(self):
            entered.append(spark.conf.get(native.LISTING_THRESHOLD_CONF, None))

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(native, "_listing_conf_lock", CountingLock())
    key = native.LISTING_THRESHOLD_CONF
    assert spark.conf.get(key, None) in (None, "32")
    df = dspark.read(spark, table_uri, engine="parquet")
    assert sorted(r.id for r in df.collect()) == sorted(list(range(6)) + list(range(100, 106)))
    assert len(df.where("part = 'a'").inputFiles()) == 6
    assert len(entered) == 2  # one relation per partition, 6 files each: both took the driver-listing route
    assert spark.conf.get(key, None) in (None, "32")
    spark.conf.set(key, "7")
    try:
        assert dspark.read(spark, table_uri, columns=["id"]).count() == 12
        assert spark.conf.get(key) == "7"
    finally:
        spark.conf.unset(key)
