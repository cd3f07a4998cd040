"""df.write.format("deltatx"): one commit per job, modes, replaceWhere, schema merge, idempotency, failures.

Tiny data and few Spark jobs per test: every job costs ~1-2 s on the shared local session.
"""

from __future__ import annotations

import glob
import os

import pytest

import deltatx
import deltatx.spark as dspark
from deltatx.errors import (
    ReplaceWhereViolationError,
    SchemaMismatchError,
    TableAlreadyExistsError,
)
from deltatx.io.paths import decode_path


def parquet_on_disk(uri: str) -> set[str]:
    return {os.path.relpath(p, uri) for p in glob.glob(os.path.join(uri, "**", "*.parquet"), recursive=True)}


def parquet_in_table(uri: str) -> set[str]:
    return {decode_path(p) for p in deltatx.Table(uri).files().column("path").to_pylist()}


def sorted_rows(uri: str, columns: list[str] | None = None) -> list[dict]:
    table = deltatx.Table(uri).to_arrow(columns=columns)
    return sorted(table.to_pylist(), key=lambda r: tuple(str(v) for v in r.values()))


def test_append_round_trip_one_commit_per_job(spark, table_uri):
    df = spark.range(20).selectExpr("id", "concat('v', cast(id as string)) as name")
    df.write.format("deltatx").mode("append").save(table_uri)
    df.where("id < 5").write.format("deltatx").mode("append").save(table_uri)

    table = deltatx.Table(table_uri)
    assert table.version == 1  # created with its data in version 0, one commit for the second job
    assert table.schema.names == ["id", "name"]
    assert all(f.nullable for f in table.schema)  # a table created from a DataFrame is nullable
    rows = sorted_rows(table_uri)
    assert len(rows) == 25
    assert rows.count({"id": 3, "name": "v3"}) == 2
    history = table.history()
    assert [h["operation"] for h in history] == ["WRITE", "WRITE"]
    assert history[0]["readVersion"] == 0 and history[0]["isBlindAppend"] is True
    assert history[0]["operationMetrics"]["numOutputRows"] == "5"
    assert parquet_on_disk(table_uri) == parquet_in_table(table_uri)


def test_partitioned_write_creates_hive_layout_and_appends(spark, table_uri):
    df = spark.range(12).selectExpr("id", "cast(id % 3 as int) as part")
    result = dspark.write(df, table_uri, partitionBy="part")
    assert result.version == 0
    dspark.write(df.where("part = 2"), table_uri)  # partitioning is the table's from now on

    table = deltatx.Table(table_uri)
    assert table.partition_columns == ["part"]
    assert {p.split("/")[0] for p in parquet_in_table(table_uri)} == {"part=0", "part=1", "part=2"}
    counts = table.to_arrow().group_by("part").aggregate([("id", "count")]).sort_by("part")
    assert counts.column("id_count").to_pylist() == [4, 4, 8]

    with pytest.raises(SchemaMismatchError, match="partitionBy"):
        dspark.write(df, table_uri, partition_by=["id"])


def test_overwrite_whole_table(spark, table_uri):
    dspark.write(spark.range(10).selectExpr("id"), table_uri)
    result = dspark.write(spark.range(3).selectExpr("id + 100 as id"), table_uri, mode="overwrite")
    assert result.version == 1 and result.metrics["numRemovedFiles"] >= 1
    assert [r["id"] for r in sorted_rows(table_uri)] == [100, 101, 102]
    entry = deltatx.Table(table_uri).history()[0]
    assert entry["operationParameters"]["mode"] == "Overwrite"


def test_replace_where_replaces_only_matching_partition_and_rejects_outsiders(spark, table_uri):
    df = spark.range(9).selectExpr("id", "cast(id % 3 as int) as part")
    dspark.write(df, table_uri, partitionBy="part")
    before_files = parquet_in_table(table_uri)

    replacement = spark.range(2).selectExpr("id + 1000 as id", "1 as part")
    result = dspark.write(replacement, table_uri, mode="overwrite", replaceWhere="part = 1")
    assert result.version == 1
    rows = sorted_rows(table_uri)
    assert sorted(r["id"] for r in rows if r["part"] == 1) == [1000, 1001]
    assert sorted(r["id"] for r in rows if r["part"] != 1) == [0, 2, 3, 5, 6, 8]
    entry = deltatx.Table(table_uri).history()[0]
    assert entry["operationParameters"]["predicate"] == "part = 1"  # Delta's WRITE: the replaceWhere text
    assert int(entry["operationMetrics"]["numDeletedRows"]) == 3
    # untouched partitions keep their files
    assert {f for f in before_files if not f.startswith("part=1/")} <= parquet_in_table(table_uri)

    version, on_disk = deltatx.Table(table_uri).version, parquet_on_disk(table_uri)
    with pytest.raises(ReplaceWhereViolationError, match="replaceWhere"):
        dspark.write(df, table_uri, mode="overwrite", replaceWhere="part = 1")
    assert deltatx.Table(table_uri).version == version
    assert parquet_on_disk(table_uri) == on_disk  # the failed job left no files


def test_merge_schema(spark, table_uri):
    dspark.write(spark.range(3).selectExpr("id"), table_uri)
    wider = spark.range(3, 5).selectExpr("id", "id * 10 as score")
    with pytest.raises(SchemaMismatchError, match="mergeSchema"):
        dspark.write(wider, table_uri)
    dspark.write(wider, table_uri, mergeSchema=True)

    table = deltatx.Table(table_uri)
    assert table.schema.names == ["id", "score"]
    assert table.schema.field("score").nullable  # older rows have no score
    assert sorted_rows(table_uri) == [
        {"id": 0, "score": None}, {"id": 1, "score": None}, {"id": 2, "score": None},
        {"id": 3, "score": 30}, {"id": 4, "score": 40},
    ]
    assert "metaData" in open(os.path.join(table_uri, "_delta_log", f"{table.version:020d}.json")).read()


def test_a_column_of_another_type_family_is_refused_before_any_task_runs(spark, table_uri):
    """Delta's schema check (DELTA_FAILED_TO_MERGE_FIELDS) refuses text into a BIGINT column when
    the write is planned; the format path failed inside a task, as a raw PythonException."""
    from pyspark.errors import AnalysisException

    dspark.write(spark.range(3).selectExpr("id"), table_uri)
    version, on_disk = deltatx.Table(table_uri).version, parquet_on_disk(table_uri)
    text = spark.createDataFrame([("x",)], "id string")
    with pytest.raises(AnalysisException, match="DELTA_FAILED_TO_MERGE_FIELDS"):
        text.write.format("deltatx").mode("append").save(table_uri)
    with pytest.raises(SchemaMismatchError, match="DELTA_FAILED_TO_MERGE_FIELDS"):
        dspark.write(text, table_uri)
    assert deltatx.Table(table_uri).version == version and parquet_on_disk(table_uri) == on_disk
    dspark.write(spark.createDataFrame([(7,)], "id int"), table_uri)  # INT into BIGINT: converted
    assert sorted(r["id"] for r in sorted_rows(table_uri)) == [0, 1, 2, 7]


def test_idempotent_txn_app_id_and_version(spark, table_uri):
    df = spark.range(4).selectExpr("id")
    first = dspark.write(df, table_uri, txnAppId="nightly", txnVersion=7)
    files = parquet_on_disk(table_uri)

    again = dspark.write(df, table_uri, txn_app_id="nightly", txn_version=7)  # a re-run of the same job
    assert again.skipped and again.version == first.version
    older = dspark.write(df, table_uri, txnAppId="nightly", txnVersion=6)
    assert older.skipped
    assert parquet_on_disk(table_uri) == files  # skipped writes leave no files behind
    assert deltatx.Table(table_uri).version == first.version

    newer = dspark.write(df, table_uri, txnAppId="nightly", txnVersion=8)
    assert not newer.skipped and newer.version == first.version + 1
    table = deltatx.Table(table_uri)
    assert table.snapshot.app_txns["nightly"].version == 8
    assert table.to_arrow().num_rows == 8


def test_table_properties_on_create_and_user_metadata(spark, table_uri):
    df = spark.range(2).selectExpr("id")
    (df.write.format("deltatx").mode("append").option("delta.isolationLevel", "Serializable")
     .option("delta.checkpointInterval", "5").option("userMetadata", "load #1").save(table_uri))
    table = deltatx.Table(table_uri)
    assert table.properties == {"delta.isolationLevel": "Serializable", "delta.checkpointInterval": "5"}
    assert table.isolation_level == deltatx.IsolationLevel.SERIALIZABLE
    assert table.history()[0]["userMetadata"] == "load #1"


def test_error_and_ignore_modes_of_write_helper(spark, table_uri):
    df = spark.range(2).selectExpr("id")
    dspark.write(df, table_uri, mode="error")
    with pytest.raises(TableAlreadyExistsError):
        dspark.write(df, table_uri, mode="errorifexists")
    assert dspark.write(df, table_uri, mode="ignore") is None
    assert deltatx.Table(table_uri).version == 0


def test_failed_job_leaves_nothing_visible(spark, table_uri):
    dspark.write(spark.range(4).selectExpr("id"), table_uri)
    before = parquet_on_disk(table_uri)

    def fail_in_second_partition(batches):
        import pyarrow.compute as pc

        for batch in batches:
            if pc.max(batch.column("id")).as_py() >= 50:
                raise RuntimeError("boom in a task")
            yield batch

    failing = spark.range(0, 100, numPartitions=2).mapInArrow(fail_in_second_partition, "id long")
    with pytest.raises(Exception, match="boom in a task"):
        failing.write.format("deltatx").mode("append").save(table_uri)
    assert deltatx.Table(table_uri).version == 0
    assert parquet_on_disk(table_uri) == before  # the finished task's files were deleted by abort()


# ---- driver-side pieces, without a Spark job ------------------------------------------------


def test_losing_the_race_to_create_the_table_is_protocol_changed(table_uri):
    import pyarrow as pa

    from deltatx.errors import ProtocolChangedException
    from deltatx.io.writer import write_data_files
    from deltatx.spark.commit import CommitRequest, commit_files
    from deltatx.txnlog.schema import schema_to_json
    from deltatx.txnlog.store import open_store

    schema = pa.schema([("id", pa.int64())])
    request = CommitRequest(uri=table_uri, storage_options={}, read_version=-1,
                            schema_string=schema_to_json(schema), partition_columns=())
    # another writer created the table after we planned (read_version=-1: no table yet) and
    # before our files were written (create_table refuses a location already holding files)
    deltatx.create_table(table_uri, schema)
    adds = write_data_files(open_store(table_uri), pa.table({"id": [1]}), schema, [])
    with pytest.raises(ProtocolChangedException) as info:
        commit_files(request, adds)
    assert info.value.version == 0 and info.value.operation == "CREATE TABLE"
    assert parquet_on_disk(table_uri) == set()  # our files are gone


def test_typed_error_rebuilds_the_deltatx_exception_from_spark_text():
    from deltatx.errors import ConcurrentDeleteReadException, ReplaceWhereViolationError
    from deltatx.spark.unwrap import typed_error

    original = ConcurrentDeleteReadException("a file this transaction read was removed", version=7,
                                             operation="DELETE", conflict="part=3")
    text = f"[PYTHON_DATA_SOURCE_ERROR] Traceback ...\ndeltatx.errors.ConcurrentDeleteReadException: {original}\n"
    rebuilt = typed_error(RuntimeError(text))
    assert isinstance(rebuilt, ConcurrentDeleteReadException)
    assert (rebuilt.version, rebuilt.operation, rebuilt.conflict) == (7, "DELETE", "part=3")
    assert str(rebuilt).startswith("ConcurrentDeleteReadException: a file this transaction read was removed")
    violation = typed_error(RuntimeError("x\ndeltatx.errors.ReplaceWhereViolationError: 2 new row(s) ...\n"))
    assert isinstance(violation, ReplaceWhereViolationError)
    assert typed_error(RuntimeError("java.lang.OutOfMemoryError")) is None
