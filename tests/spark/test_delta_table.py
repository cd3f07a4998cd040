"""delta-spark's DeltaTable API on deltatx: the behaviour of delta-spark's own Python tests
(python/delta/tests/test_deltatable.py), ported call by call, plus deltatx's rules: every refused
call raises a typed deltatx error (also the TypeError / ValueError delta-spark raises) and writes
nothing.

Tables are set up with the core API (no Spark job) and read back with it; each DeltaTable call
under test runs its real Spark jobs on the shared session-scoped ``spark`` fixture.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import Row
from pyspark.sql.functions import col, expr, lit
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

import deltatx
from deltatx.errors import (
    ArgumentTypeError,
    DeltaTxError,
    InvalidArgumentError,
    InvalidConstraintError,
    LocationNotEmptyError,
    PredicateError,
    ProtocolDowngradeError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TimeTravelError,
    UnsupportedFeatureError,
    UnsupportedOperationError,
    VacuumRetentionError,
    ZOrderError,
)
from deltatx.spark import DeltaMergeBuilder, DeltaOptimizeBuilder, DeltaTable, DeltaTableBuilder


pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

KV = pa.schema([("key", pa.string()), ("value", pa.int64())])


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def write_kv(path: Path | str, rows: list[tuple[str, int]], *, partition_by: list[str] | None = None,
             files: int = 1) -> deltatx.Table:
    """A key/value table (the shape of delta-spark's tests), ``files`` appends."""
    table = deltatx.create_table(str(path), KV, partition_by=partition_by)
    chunk = max(1, len(rows) // files)
    for i in range(0, len(rows), chunk):
        part = rows[i:i + chunk]
        table.append(pa.table({"key": [k for k, _ in part], "value": [v for _, v in part]}, schema=KV))
    return table


def reset_kv(path: Path | str, rows: list[tuple[str, int]]) -> None:
    deltatx.Table(str(path)).overwrite(pa.table({"key": [k for k, _ in rows], "value": [v for _, v in rows]},
                                                schema=KV))


def content(path: Path | str) -> list[tuple]:
    table = deltatx.Table(str(path)).to_arrow()
    return sorted(tuple(r.values()) for r in table.to_pylist())


def version(path: Path | str) -> int:
    return deltatx.Table(str(path)).version


def parquet_files(path: Path | str) -> set[str]:
    root = Path(path)
    return {str(p.relative_to(root)) for p in root.rglob("*.parquet")}


def last_commit_info(path: Path | str) -> dict:
    return deltatx.Table(str(path)).history(1)[0]


class Untouched:
    """Asserts that a refused call wrote nothing: same version, same data files."""

    def __init__(self, path: Path | str):
        self.path = path
        self.version = version(path) if (Path(path) / "_delta_log").exists() else None
        self.files = parquet_files(path) if Path(path).exists() else set()

    def check(self) -> None:
        now = version(self.path) if (Path(self.path) / "_delta_log").exists() else None
        assert now == self.version
        assert (parquet_files(self.path) if Path(self.path).exists() else set()) == self.files


def refused(path: Path | str, exc: type[BaseException], call, match: str | None = None):
    """``call()`` raises ``exc`` (matching ``match``) and leaves the table untouched."""
    before = Untouched(path)
    with pytest.raises(exc, match=match) as info:
        call()
    before.check()
    return info.value


# --------------------------------------------------------------------------------------------
# opening a table, toDF, alias
# --------------------------------------------------------------------------------------------


def test_for_path_to_df_alias_and_is_delta_table(spark, tmp_path):
    path = tmp_path / "t"
    write_kv(path, [("a", 1), ("b", 2), ("c", 3)])
    dt_ = DeltaTable.forPath(spark, str(path))
    assert sorted(map(tuple, dt_.toDF().collect())) == [("a", 1), ("b", 2), ("c", 3)]
    aliased = dt_.toDF().alias("myTable").select("myTable.key", "myTable.value")
    assert sorted(map(tuple, aliased.collect())) == [("a", 1), ("b", 2), ("c", 3)]
    assert sorted(r.key for r in dt_.alias("t").toDF().select("t.key").collect()) == ["a", "b", "c"]

    parquet_dir = tmp_path / "plain"
    parquet_dir.mkdir()
    pq.write_table(pa.table({"key": ["a"]}), parquet_dir / "part-0.parquet")
    assert DeltaTable.isDeltaTable(spark, str(path)) is True
    assert DeltaTable.isDeltaTable(spark, str(parquet_dir)) is False
    assert DeltaTable.isDeltaTable(spark, str(tmp_path / "nothing")) is False

    by_name = DeltaTable.forName(spark, f"delta.`{path}`")
    assert by_name.table.version == dt_.table.version
    with pytest.raises(TableNotFoundError):
        DeltaTable.forPath(spark, str(parquet_dir))
    with pytest.raises(UnsupportedOperationError, match="path tables"):
        DeltaTable.forName(spark, "test")
    with pytest.raises(UnsupportedOperationError, match="storage_options"):
        DeltaTable.forPath(spark, str(path), {"fs.s3a.access.key": "x"})


# --------------------------------------------------------------------------------------------
# DELETE / UPDATE
# --------------------------------------------------------------------------------------------


def test_delete_with_string_column_and_no_condition(spark, tmp_path):
    path = tmp_path / "t"
    write_kv(path, [("a", 1), ("b", 2), ("c", 3), ("d", 4)])
    dt_ = DeltaTable.forPath(spark, str(path))

    assert dt_.delete("key = 'a'").collect() == [Row(num_affected_rows=1)]
    assert content(path) == [("b", 2), ("c", 3), ("d", 4)]
    dt_.delete(col("key") == lit("b"))  # a Column: analyzed by Spark, its SQL parsed by deltatx
    assert content(path) == [("c", 3), ("d", 4)]
    dt_.delete()
    assert content(path) == []
    assert [h["operation"] for h in deltatx.Table(str(path)).history(3)] == ["DELETE"] * 3

    err = refused(path, TypeError, lambda: dt_.delete(condition=1))
    assert isinstance(err, ArgumentTypeError)


def test_update_with_strings_and_columns(spark, tmp_path):
    path = tmp_path / "t"
    write_kv(path, [("a", 1), ("b", 2), ("c", 3), ("d", 4)])
    dt_ = DeltaTable.forPath(spark, str(path))

    dt_.update("key = 'a' or key = 'b'", {"value": "1"})
    assert content(path) == [("a", 1), ("b", 1), ("c", 3), ("d", 4)]
    result = dt_.update(expr("key = 'a' or key = 'b'"), {"value": expr("0")})
    assert result.collect() == [Row(num_affected_rows=2)]
    assert content(path) == [("a", 0), ("b", 0), ("c", 3), ("d", 4)]
    dt_.update(col("key") == "c", {"value": col("value") + 7})  # Spark coerces: value + CAST(7 AS BIGINT)
    assert content(path) == [("a", 0), ("b", 0), ("c", 10), ("d", 4)]
    dt_.update(set={"value": "200"})
    assert content(path) == [("a", 200), ("b", 200), ("c", 200), ("d", 200)]


def test_update_bad_arguments_are_refused_like_delta_spark(spark, tmp_path):
    path = tmp_path / "t"
    write_kv(path, [("a", 1)])
    dt_ = DeltaTable.forPath(spark, str(path))
    refused(path, ValueError, lambda: dt_.update({"value": "200"}), "cannot be None")
    refused(path, ValueError, lambda: dt_.update(condition="a"), "cannot be None")
    refused(path, TypeError, lambda: dt_.update(set=1), "must be a dict")
    refused(path, TypeError, lambda: dt_.update(1, {}), "must be a Spark SQL Column or a string")
    refused(path, TypeError, lambda: dt_.update(set={"value": 1}), "Values of dict in .* must contain only")
    err = refused(path, TypeError, lambda: dt_.update(set={1: ""}), "Keys of dict in .* must contain only")
    assert isinstance(err, DeltaTxError)
    refused(path, PredicateError, lambda: dt_.update(col("nope") == 1, {"value": "1"}), "cannot resolve")
    refused(path, DeltaTxError, lambda: dt_.update("key = 'a'", {"nope": "1"}))


def test_delete_and_update_of_an_aliased_table(spark, tmp_path):
    path = tmp_path / "t"
    write_kv(path, [("a", 1), ("b", 2), ("c", 3)])
    t = DeltaTable.forPath(spark, str(path)).alias("t")
    t.delete("t.key = 'a'")
    t.update(col("t.key") == "b", {"t.value": "t.value + 100"})
    assert content(path) == [("b", 102), ("c", 3)]


# --------------------------------------------------------------------------------------------
# MERGE
# --------------------------------------------------------------------------------------------

START = [("a", 1), ("b", 2), ("c", 3), ("d", 4)]


@pytest.fixture
def merge_case(spark, tmp_path):
    path = tmp_path / "t"
    write_kv(path, START)
    source = spark.createDataFrame([("a", -1), ("b", 0), ("e", -5), ("f", -6)], ["k", "v"])
    return path, DeltaTable.forPath(spark, str(path)), source


def test_merge_basic_syntax_strings_and_columns(merge_case):
    path, dt_, source = merge_case
    result = (dt_.merge(source, "key = k")
              .whenMatchedUpdate(set={"value": "v + 0"})
              .whenNotMatchedInsert(values={"key": "k", "value": "v + 0"})
              .whenNotMatchedBySourceUpdate(set={"value": "value + 0"})
              .execute())
    assert content(path) == [("a", -1), ("b", 0), ("c", 3), ("d", 4), ("e", -5), ("f", -6)]
    assert result.collect() == [Row(num_affected_rows=6, num_updated_rows=4, num_deleted_rows=0,
                                    num_inserted_rows=2)]
    assert last_commit_info(path)["operation"] == "MERGE"

    reset_kv(path, START)
    (dt_.merge(source, expr("key = k"))
     .whenMatchedUpdate(set={"value": col("v") + 0})
     .whenNotMatchedInsert(values={"key": "k", "value": col("v") + 0})
     .whenNotMatchedBySourceUpdate(set={"value": col("value") + 0})
     .execute())
    assert content(path) == [("a", -1), ("b", 0), ("c", 3), ("d", 4), ("e", -5), ("f", -6)]


def test_columns_bound_to_dataframes_resolve_as_in_delta_spark(spark, tmp_path):
    """Columns bound to a DataFrame (``updates.value``, ``updates["key"]``, ``dt.toDF().key``)
    name the same columns as the target: they resolve by the frame they came from, as in
    delta-spark, not by name (which would be ambiguous, or the target's)."""
    path = tmp_path / "t"
    write_kv(path, START)
    table = DeltaTable.forPath(spark, str(path))
    updates = spark.createDataFrame([("a", 10), ("e", 50)], ["key", "value"])
    (table.alias("t").merge(updates.alias("u"), "t.key = u.key")
     .whenMatchedUpdate(set={"value": updates.value + col("t.value")})
     .whenNotMatchedInsert(values={"key": updates["key"], "value": updates.value})
     .execute())
    assert content(path) == [("a", 11), ("b", 2), ("c", 3), ("d", 4), ("e", 50)]
    (table.merge(updates, table.toDF().key == updates.key)
     .whenMatchedUpdate(set={"value": table.toDF().value - updates.value}).execute())
    assert content(path) == [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 0)]
    table.update(table.toDF().key == "b", {"value": lit(20)})
    table.alias("q").delete(table.alias("q").toDF()["key"] == "c")
    assert content(path) == [("a", 1), ("b", 20), ("d", 4), ("e", 0)]
    refused(path, PredicateError, lambda: table.update(updates.key == "b", {"value": lit(0)}),
            match="cannot resolve the Column")
    frame = table.toDF()
    derived = frame.where("key = 'a'")  # carries the frame's ids: its columns name both sides
    refused(path, PredicateError, lambda: table.merge(derived, frame.key == derived.key)
            .whenMatchedUpdate(set={"value": derived.value + 100}).execute(), match="ambiguous")


def test_merge_not_matched_by_source_clauses_in_order(merge_case):
    path, dt_, source = merge_case
    (dt_.merge(source, expr("key = k"))
     .whenNotMatchedBySourceUpdate(condition="key = 'c'", set={"value": "5"})
     .whenNotMatchedBySourceUpdate(set={"value": "0"})
     .execute())
    assert content(path) == [("a", 1), ("b", 2), ("c", 5), ("d", 0)]

    reset_kv(path, START)
    (dt_.merge(source, expr("key = k"))
     .whenNotMatchedBySourceDelete(condition="key = 'c'")
     .whenNotMatchedBySourceDelete()
     .execute())
    assert content(path) == [("a", 1), ("b", 2)]

    reset_kv(path, START)  # interleaved: the first clause whose condition holds applies
    (dt_.merge(source, expr("key = k"))
     .whenNotMatchedBySourceDelete(condition="key = 'c'")
     .whenNotMatchedBySourceUpdate(condition="key = 'c'", set={"value": "5"})
     .whenNotMatchedBySourceDelete(condition="key = 'd'")
     .whenNotMatchedBySourceUpdate(set={"value": "6"})
     .execute())
    assert content(path) == [("a", 1), ("b", 2)]


def test_merge_clause_conditions_as_strings_columns_and_positional(merge_case):
    path, dt_, source = merge_case
    (dt_.merge(source, "key = k")
     .whenMatchedUpdate(condition="k = 'a'", set={"value": "v + 0"})
     .whenMatchedDelete(condition="k = 'b'")
     .whenNotMatchedInsert(condition="k = 'e'", values={"key": "k", "value": "v + 0"})
     .whenNotMatchedBySourceUpdate(condition="key = 'c'", set={"value": col("value") + 0})
     .whenNotMatchedBySourceDelete(condition="key = 'd'")
     .execute())
    assert content(path) == [("a", -1), ("c", 3), ("e", -5)]

    reset_kv(path, START)
    (dt_.merge(source, expr("key = k"))
     .whenMatchedUpdate(expr("k = 'a'"), {"value": col("v") + 0})  # positional, Columns
     .whenMatchedDelete(expr("k = 'b'"))
     .whenNotMatchedInsert(expr("k = 'e'"), {"key": "k", "value": col("v") + 0})
     .whenNotMatchedBySourceUpdate(expr("key = 'c'"), {"value": col("value") + 0})
     .whenNotMatchedBySourceDelete(expr("key = 'd'"))
     .execute())
    assert content(path) == [("a", -1), ("c", 3), ("e", -5)]


def test_merge_update_all_insert_all_with_aliases(merge_case):
    path, dt_, source = merge_case
    renamed = source.toDF("key", "value")
    (dt_.alias("t").merge(renamed.alias("s"), expr("t.key = s.key"))
     .whenMatchedUpdateAll()
     .whenNotMatchedInsertAll()
     .execute())
    assert content(path) == [("a", -1), ("b", 0), ("c", 3), ("d", 4), ("e", -5), ("f", -6)]

    reset_kv(path, START)
    (dt_.alias("t").merge(renamed.alias("s"), "s.key = t.key")
     .whenMatchedUpdateAll("s.key = 'a'")
     .whenNotMatchedInsertAll(col("s.key") == "e")
     .execute())
    assert content(path) == [("a", -1), ("b", 2), ("c", 3), ("d", 4), ("e", -5)]


def test_merge_with_schema_evolution_adds_source_columns(spark, tmp_path):
    path = tmp_path / "t"
    write_kv(path, [("a", 1), ("b", 2)])
    source = spark.createDataFrame([("a", 10, "x"), ("z", 26, "y")], ["key", "value", "extra"])
    (DeltaTable.forPath(spark, str(path)).alias("t").merge(source.alias("s"), "t.key = s.key")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().execute())
    table = deltatx.Table(str(path))
    assert table.schema.names == ["key", "value", "extra"]
    assert content(path) == [("a", 10, "x"), ("b", 2, None), ("z", 26, "y")]


def test_merge_bad_arguments_are_refused_like_delta_spark(merge_case):
    path, dt_, source = merge_case
    refused(path, TypeError, lambda: dt_.merge(1, "key = k"), "must be DataFrame")
    refused(path, ValueError, lambda: dt_.merge(None, "key = k"), "cannot be None")
    refused(path, TypeError, lambda: dt_.merge(source, 1), "must be a Spark SQL Column or a string")
    b = dt_.merge(source, "key = k")
    cases = [
        (ValueError, lambda: b.whenMatchedUpdate({"value": "v"}), "cannot be None"),
        (ValueError, lambda: b.whenMatchedUpdate(1), "cannot be None"),
        (ValueError, lambda: b.whenMatchedUpdate(condition="key = 'a'"), "cannot be None"),
        (TypeError, lambda: b.whenMatchedUpdate(1, {"value": "v"}), "must be a Spark SQL Column or a string"),
        (TypeError, lambda: b.whenMatchedUpdate("k = 'a'", 1), "must be a dict"),
        (TypeError, lambda: b.whenMatchedUpdate(set={"value": 1}), "Values of dict in .* must contain only"),
        (TypeError, lambda: b.whenMatchedUpdate(set={1: ""}), "Keys of dict in .* must contain only"),
        (TypeError, lambda: b.whenMatchedUpdate(set="k = 'a'", condition={"value": 1}), None),
        (TypeError, lambda: b.whenMatchedDelete(1), "must be a Spark SQL Column or a string"),
        (ValueError, lambda: b.whenNotMatchedInsert({"value": "v"}), "cannot be None"),
        (ValueError, lambda: b.whenNotMatchedInsert(1), "cannot be None"),
        (TypeError, lambda: b.whenNotMatchedInsert(1, {"value": "v"}), "must be a Spark SQL Column or a string"),
        (TypeError, lambda: b.whenNotMatchedInsert("k = 'a'", 1), "must be a dict"),
        (TypeError, lambda: b.whenNotMatchedInsert(values={1: "value"}), "Keys of dict in .* must contain only"),
        (ValueError, lambda: b.whenNotMatchedBySourceUpdate({"value": "value"}), "cannot be None"),
        (TypeError, lambda: b.whenNotMatchedBySourceUpdate("key = 'a'", 1), "must be a dict"),
        (TypeError, lambda: b.whenNotMatchedBySourceDelete(1), "must be a Spark SQL Column or a string"),
    ]
    for exc, call, match in cases:
        err = refused(path, exc, call, match)
        assert isinstance(err, (ArgumentTypeError, InvalidArgumentError))
    # a clause on a column neither side has: deltatx's typed error at execute(), nothing written
    bad = dt_.merge(source, "key = k").whenMatchedUpdate(set={"value": "nope + 1"})
    refused(path, PredicateError, bad.execute)
    assert isinstance(b, DeltaMergeBuilder)


def test_merge_interop_with_a_table_deltalake_wrote(spark, tmp_path):
    from deltalake import DeltaTable as RsTable, write_deltalake

    path = str(tmp_path / "rs")
    write_deltalake(path, pa.table({"key": ["a", "b"], "value": [1, 2]}, schema=KV))
    source = spark.createDataFrame([("b", 20), ("c", 30)], ["key", "value"])
    (DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.key = s.key")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    rows = sorted(tuple(r.values()) for r in pa.table(RsTable(path).scan()).to_pylist())
    assert rows == [("a", 1), ("b", 20), ("c", 30)]


# --------------------------------------------------------------------------------------------
# history, detail
# --------------------------------------------------------------------------------------------


def test_history_has_delta_spark_columns(spark, tmp_path):
    path = tmp_path / "t"
    df = spark.createDataFrame([("a", 1), ("b", 2), ("c", 3)], ["key", "value"])
    deltatx.spark.write(df, str(path))
    deltatx.spark.write(spark.createDataFrame([("a", 3)], ["key", "value"]), str(path), mode="overwrite")
    dt_ = DeltaTable.forPath(spark, str(path))

    history = dt_.history()
    assert history.columns == ["version", "timestamp", "userId", "userName", "operation", "operationParameters",
                               "job", "notebook", "clusterId", "readVersion", "isolationLevel", "isBlindAppend",
                               "operationMetrics", "userMetadata", "engineInfo"]
    assert [r.operation for r in history.select("operation").collect()] == ["WRITE", "WRITE"]
    last = dt_.history(1).collect()
    assert len(last) == 1
    assert last[0].version == 1 and last[0].readVersion == 0 and last[0].userId is None
    assert last[0].operationParameters["mode"] == "Overwrite"
    assert dt_.history(1).select("operationParameters.mode").collect() == [Row(mode="Overwrite")]
    assert isinstance(last[0].timestamp, dt.datetime)
    with pytest.raises(ValueError):
        dt_.history("1")


def test_detail_describes_the_table(spark, tmp_path):
    path = tmp_path / "t"
    write_kv(path, [("a", 1), ("b", 2)], partition_by=["key"], files=2)
    deltatx.Table(str(path)).set_properties({"delta.appendOnly": "false"})
    row = DeltaTable.forPath(spark, str(path)).detail().collect()[0]
    assert row.format == "delta"
    assert row.id == deltatx.Table(str(path)).metadata.id
    assert row.location == f"file:{path}"  # qualified, as Spark gives it
    assert row.partitionColumns == ["key"] and row.clusteringColumns == []
    assert row.numFiles == 2 and row.sizeInBytes == sum(os.path.getsize(path / p) for p in parquet_files(path))
    assert row.properties == {"delta.appendOnly": "false"}
    assert (row.minReaderVersion, row.minWriterVersion) == (1, 2)
    assert row.tableFeatures == ["appendOnly", "invariants"]
    assert row.statistics == {"numRowsDeletedByDeletionVectors": 0, "numDeletionVectors": 0}
    assert isinstance(row.createdAt, dt.datetime) and row.lastModified >= row.createdAt


def test_detail_counts_deletion_vectors(spark, tmp_path):
    path = str(tmp_path / "dv")
    table = deltatx.create_table(path, pa.schema([("id", pa.int64())]),
                                 properties={"delta.enableDeletionVectors": "true"})
    table.append(pa.table({"id": list(range(10))}))
    table.append(pa.table({"id": list(range(10, 20))}))
    table.delete("id IN (1, 2, 3, 15)")
    row = DeltaTable.forPath(spark, path).detail().collect()[0]
    assert row.statistics == {"numRowsDeletedByDeletionVectors": 4, "numDeletionVectors": 2}


# --------------------------------------------------------------------------------------------
# vacuum
# --------------------------------------------------------------------------------------------


def test_vacuum_respects_retention_and_the_session_check(spark, tmp_path):
    path = tmp_path / "t"
    write_kv(path, [("a", 1), ("b", 2), ("c", 3)])
    dt_ = DeltaTable.forPath(spark, str(path))
    old = (dt.datetime.now() - dt.timedelta(hours=2)).timestamp()
    for name in ("abc.txt", "bac.txt"):
        (path / name).write_text("abcde")
        os.utime(path / name, (old, old))  # two hours old: only a short retention removes them

    assert dt_.vacuum().columns == []  # default retention (7 days): kept
    dt_.vacuum(1000)  # integers work
    assert (path / "abc.txt").exists() and (path / "bac.txt").exists()
    with pytest.raises(VacuumRetentionError):
        dt_.vacuum(0.0)  # shorter than the table's retention, and the check is on
    assert (path / "abc.txt").exists()
    conf = "spark.databricks.delta.retentionDurationCheck.enabled"
    spark.conf.set(conf, "false")
    try:
        dt_.vacuum(0.0)
    finally:
        spark.conf.unset(conf)
    assert not (path / "abc.txt").exists() and not (path / "bac.txt").exists()
    assert content(path) == [("a", 1), ("b", 2), ("c", 3)]


def test_vacuum_is_in_the_history_unless_the_session_turns_its_logging_off(spark, tmp_path):
    path = tmp_path / "t"
    write_kv(path, [("a", 1)])
    dt_ = DeltaTable.forPath(spark, str(path))
    dt_.vacuum()
    ops = [r["operation"] for r in dt_.history(2).collect()]
    assert ops == ["VACUUM END", "VACUUM START"]
    before = len(dt_.history().collect())
    conf = "spark.databricks.delta.vacuum.logging.enabled"
    spark.conf.set(conf, "false")
    try:
        dt_.vacuum()
    finally:
        spark.conf.unset(conf)
    assert len(dt_.history().collect()) == before  # nothing recorded


# --------------------------------------------------------------------------------------------
# convertToDelta
# --------------------------------------------------------------------------------------------


def test_convert_to_delta_unpartitioned_and_partitioned(spark, tmp_path):
    from deltalake import DeltaTable as RsTable

    df = spark.createDataFrame([("a", 1), ("b", 2), ("c", 3)], ["key", "value"])
    plain = str(tmp_path / "plain")
    df.write.format("parquet").save(plain)
    converted = DeltaTable.convertToDelta(spark, f"parquet.`{plain}`")
    assert isinstance(converted, DeltaTable)
    assert content(plain) == [("a", 1), ("b", 2), ("c", 3)]
    info = last_commit_info(plain)
    assert info["operation"] == "CONVERT" and info["version"] == 0
    assert deltatx.Table(plain).files().column("stats").null_count == 0  # stats from the footers
    assert sorted(tuple(r.values()) for r in pa.table(RsTable(plain).scan()).to_pylist()) == \
        [("a", 1), ("b", 2), ("c", 3)]

    partitioned = str(tmp_path / "partitioned")
    df.write.partitionBy("value").format("parquet").save(partitioned)
    schema = StructType()
    schema.add("value", IntegerType(), True)
    converted = DeltaTable.convertToDelta(spark, f"parquet.`{partitioned}`", schema)
    table = deltatx.Table(partitioned)
    assert table.partition_columns == ["value"] and table.schema.field("value").type == pa.int32()
    assert sorted(map(tuple, converted.toDF().select("key", "value").collect())) == [("a", 1), ("b", 2), ("c", 3)]

    ddl = str(tmp_path / "ddl")
    df.write.partitionBy("value").format("parquet").save(ddl)
    DeltaTable.convertToDelta(spark, f"parquet.`{ddl}`", "value int")
    assert content(ddl) == [("a", 1), ("b", 2), ("c", 3)]


def test_convert_to_delta_refusals_write_nothing(spark, tmp_path):
    df = spark.createDataFrame([("a", 1), ("b", 2)], ["key", "value"])
    partitioned = str(tmp_path / "p")
    df.write.partitionBy("value").format("parquet").save(partitioned)
    refused(partitioned, SchemaMismatchError, lambda: DeltaTable.convertToDelta(spark, f"parquet.`{partitioned}`"),
            "Expecting 0 partition column")
    refused(partitioned, SchemaMismatchError,
            lambda: DeltaTable.convertToDelta(spark, f"parquet.`{partitioned}`", "other int"))
    assert not (Path(partitioned) / "_delta_log").exists()
    refused(partitioned, UnsupportedOperationError,
            lambda: DeltaTable.convertToDelta(spark, f"orc.`{partitioned}`"), "only supports Parquet")

    # already a Delta table: left as it is (delta-spark's behaviour), with a warning
    DeltaTable.convertToDelta(spark, f"parquet.`{partitioned}`", "value long")
    before = Untouched(partitioned)
    with pytest.warns(UserWarning, match="already a delta table"):
        again = DeltaTable.convertToDelta(spark, f"parquet.`{partitioned}`", "value long")
    before.check()
    assert again.table.version == 0


# --------------------------------------------------------------------------------------------
# create / replace builder
# --------------------------------------------------------------------------------------------


def build(builder: DeltaTableBuilder) -> DeltaTable:
    return (builder.addColumn("col1", "int", comment="foo", nullable=False)
            .addColumn("col2", IntegerType())
            .property("foo", "bar")
            .comment("comment")
            .partitionedBy("col1")
            .execute())


def test_create_and_create_if_not_exists_with_location(spark, tmp_path):
    from deltalake import DeltaTable as RsTable

    for if_not_exists in (False, True):
        path = str(tmp_path / f"t{if_not_exists}")
        builder = DeltaTable.createIfNotExists(spark) if if_not_exists else DeltaTable.create(spark)
        created = build(builder.location(path))
        schema = created.toDF().schema
        assert [(f.name, f.dataType, f.nullable) for f in schema] == [("col1", IntegerType(), False),
                                                                      ("col2", IntegerType(), True)]
        assert schema["col1"].metadata == {"comment": "foo"}
        detail = created.detail().collect()[0]
        assert detail.description == "comment" and detail.partitionColumns == ["col1"]
        assert detail.properties == {"foo": "bar"}
        assert RsTable(path).metadata().partition_columns == ["col1"]  # deltalake reads it

    path = str(tmp_path / "tTrue")
    deltatx.Table(path).append(pa.table({"col1": pa.array([1], pa.int32()), "col2": pa.array([2], pa.int32())}))
    before = Untouched(path)
    again = DeltaTable.createIfNotExists(spark).location(path).addColumn("other", "string").execute()
    before.check()  # an existing table is left as it is
    assert again.table.schema.names == ["col1", "col2"]
    refused(path, TableAlreadyExistsError,
            lambda: DeltaTable.create(spark).location(path).addColumn("x", "int").execute(), "already exists")


def test_create_from_existing_schema_and_field_list(spark, tmp_path):
    df = spark.createDataFrame([("a", 1), ("b", 2), ("c", 3)], ["key", "value"])
    first = (DeltaTable.create(spark).location(str(tmp_path / "one")).addColumns(df.schema)
             .addColumn("value2", dataType="int").partitionedBy(["value2", "value"]).execute())
    second = (DeltaTable.create(spark).location(str(tmp_path / "two")).addColumns(df.schema.fields)
              .addColumn("value2", dataType="int").partitionedBy("value2", "value").execute())
    for created in (first, second):
        assert [(f.name, f.dataType) for f in created.toDF().schema] == [
            ("key", StringType()), ("value", LongType()), ("value2", IntegerType())]
        assert created.table.partition_columns == ["value2", "value"]


def test_replace_and_create_or_replace(spark, tmp_path):
    from deltalake import DeltaTable as RsTable

    path = str(tmp_path / "t")
    write_kv(path, [("a", 1), ("b", 2)])
    old_id = deltatx.Table(path).metadata.id
    replaced = build(DeltaTable.replace(spark).location(path))
    table = replaced.table
    assert table.version == 2 and table.schema.names == ["col1", "col2"]
    assert table.files().num_rows == 0 and table.metadata.id != old_id
    assert last_commit_info(path)["operation"] == "REPLACE TABLE"
    assert pa.table(RsTable(path).scan()).num_rows == 0

    again = DeltaTable.createOrReplace(spark).location(path).addColumn("key", "string").execute()
    assert again.table.schema.names == ["key"] and last_commit_info(path)["operation"] == "CREATE OR REPLACE TABLE"
    fresh = str(tmp_path / "fresh")
    DeltaTable.createOrReplace().location(fresh).addColumn("key", "string").execute()  # the active session
    assert version(fresh) == 0

    missing = str(tmp_path / "missing")
    refused(missing, TableNotFoundError,
            lambda: DeltaTable.replace(spark).location(missing).addColumn("x", "int").execute(), "did not exist")
    assert not Path(missing).exists()


def test_builder_refusals_write_nothing(spark, tmp_path):
    builder = DeltaTable.create(spark)
    with pytest.raises(TypeError):
        builder.tableName(1)
    with pytest.raises(TypeError):
        builder.location(1)
    with pytest.raises(TypeError):
        builder.comment(1)
    with pytest.raises(TypeError):
        builder.addColumn(1, "int")
    with pytest.raises(TypeError):
        builder.addColumn("a", 1)
    with pytest.raises(InvalidArgumentError):
        builder.addColumn("a", "1")  # not a type (delta-spark: Spark's ParseException)
    with pytest.raises(TypeError):
        builder.addColumn("a", "int", comment=1)
    with pytest.raises(TypeError):
        builder.addColumn("a", "int", generatedAlwaysAs=1)
    with pytest.raises(TypeError):
        builder.addColumn("a", "int", nullable=1)
    with pytest.raises(TypeError):
        builder.addColumns(1)
    with pytest.raises(TypeError):
        builder.addColumns([StructField("1", IntegerType()), 1])
    with pytest.raises(TypeError):
        builder.partitionedBy(1)
    with pytest.raises(TypeError):
        builder.partitionedBy(1, "1")
    with pytest.raises(TypeError):
        builder.partitionedBy([1])
    with pytest.raises(TypeError):
        builder.property(1, "1")
    with pytest.raises(TypeError):
        builder.property("1", 1)
    with pytest.raises(UnsupportedOperationError, match="path tables"):
        builder.tableName("testTable")

    path = str(tmp_path / "t")
    refused(path, UnsupportedOperationError, lambda: DeltaTable.create(spark).addColumn("a", "int").execute(),
            "location")
    refused(path, InvalidConstraintError,  # a generation expression naming no column of the table
            lambda: DeltaTable.create(spark).location(path).addColumn("a", "int")
            .addColumn("b", "int", generatedAlwaysAs="nope + 10").execute())
    refused(path, SchemaMismatchError, lambda: DeltaTable.create(spark).location(path).execute(), "no columns")
    refused(path, SchemaMismatchError,
            lambda: DeltaTable.create(spark).location(path).addColumn("a", "int").partitionedBy("b").execute())
    assert not Path(path).exists()

    occupied = tmp_path / "occupied"
    occupied.mkdir()
    pq.write_table(pa.table({"a": [1]}), occupied / "part-0.parquet")
    refused(occupied, LocationNotEmptyError,
            lambda: DeltaTable.create(spark).location(str(occupied)).addColumn("a", "int").execute(), "not empty")
    assert not (occupied / "_delta_log").exists()

    via_identifier = str(tmp_path / "ident")
    DeltaTable.create(spark).tableName(f"delta.`{via_identifier}`").addColumn("a", "int").execute()
    assert version(via_identifier) == 0


# --------------------------------------------------------------------------------------------
# upgradeTableProtocol, addFeatureSupport
# --------------------------------------------------------------------------------------------


def test_upgrade_table_protocol(spark, tmp_path):
    path = tmp_path / "t"
    write_kv(path, [("a", 1)])
    dt_ = DeltaTable.forPath(spark, str(path))
    assert dt_.upgradeTableProtocol(1, 3) is None
    protocol = deltatx.Table(str(path)).protocol
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 3)
    assert last_commit_info(path)["operation"] == "UPGRADE PROTOCOL"

    refused(path, ProtocolDowngradeError, lambda: dt_.upgradeTableProtocol(1, 2), "cannot be downgraded")
    before = Untouched(path)
    dt_.upgradeTableProtocol(1, 3)  # already there: nothing to commit (Delta skips it too)
    before.check()
    for bad in ("abc", [1], [], {}):
        refused(path, ValueError, lambda: dt_.upgradeTableProtocol(bad, 3), "readerVersion")
        refused(path, ValueError, lambda: dt_.upgradeTableProtocol(1, bad), "writerVersion")

    dt_.upgradeTableProtocol(3, 7)  # named features: the legacy writer-3 features are listed
    protocol = deltatx.Table(str(path)).protocol
    assert protocol.reader_features == ()
    assert set(protocol.writer_features) == {"appendOnly", "invariants", "checkConstraints"}
    from deltalake import DeltaTable as RsTable

    assert pa.table(RsTable(str(path)).scan()).to_pylist() == [{"key": "a", "value": 1}]
    dt_.addFeatureSupport("deletionVectors")
    protocol = RsTable(str(path)).protocol()  # deltalake sees the listed feature
    assert "deletionVectors" in protocol.reader_features and "deletionVectors" in protocol.writer_features


# --------------------------------------------------------------------------------------------
# restore
# --------------------------------------------------------------------------------------------


def test_restore_to_version_and_timestamp(spark, tmp_path):
    path = tmp_path / "t"
    write_kv(path, [("a", 1), ("b", 2)])  # versions 0 (create) and 1 (rows)
    local = DeltaTable.forPath(spark, str(path)).history().head().timestamp  # pyspark: naive, process-local
    ts = local.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")  # the session time zone is UTC
    reset_kv(path, [("a", 3), ("b", 2)])  # version 2

    metrics = DeltaTable.forPath(spark, str(path)).restoreToVersion(1).collect()[0]
    assert content(path) == [("a", 1), ("b", 2)]
    assert metrics.num_restored_files == 1 and metrics.num_removed_files == 1
    assert metrics.num_of_files_after_restore == 1
    assert last_commit_info(path)["operation"] == "RESTORE"

    reset_kv(path, [("z", 9)])
    DeltaTable.forPath(spark, str(path)).restoreToTimestamp(ts)
    assert content(path) == [("a", 1), ("b", 2)]

    dt_ = DeltaTable.forPath(spark, str(path))
    refused(path, TimeTravelError, lambda: dt_.restoreToTimestamp("05/04/1999"),
            r"The provided timestamp \('05/04/1999'\) cannot be converted to a valid timestamp")
    refused(path, ValueError, lambda: dt_.restoreToTimestamp(12342323232),
            "timestamp needs to be a string but got '<class 'int'>'")
    refused(path, ValueError, lambda: dt_.restoreToVersion("0"), "version needs to be an int but got '<class 'str'>'")
    refused(path, TimeTravelError, lambda: dt_.restoreToVersion(99))


# --------------------------------------------------------------------------------------------
# optimize
# --------------------------------------------------------------------------------------------


def test_optimize_compaction(spark, tmp_path):
    path = tmp_path / "t"
    write_kv(path, [("a", 1), ("a", 2), ("a", 3), ("a", 4), ("b", 1), ("b", 2)], files=3)
    dt_ = DeltaTable.forPath(spark, str(path))
    optimizer = dt_.optimize()
    assert isinstance(optimizer, DeltaOptimizeBuilder)
    result = optimizer.executeCompaction()
    metrics = result.first().metrics
    assert metrics.numFilesAdded == 1 and metrics.numFilesRemoved == 3
    assert metrics.filesRemoved.totalFiles == 3 and metrics.filesAdded.totalFiles == 1
    assert result.first().path == str(path)
    assert dt_.history().first().operationParameters["predicate"] == "[]"
    assert content(path) == [("a", 1), ("a", 2), ("a", 3), ("a", 4), ("b", 1), ("b", 2)]
    refused(path, PredicateError, lambda: dt_.optimize().where("key = 'a'").executeCompaction(),
            re.escape("Predicate references non-partition column 'key'. Only the partition columns may be "
                      "referenced: []"))  # delta-spark's test_optimize looks for Delta's wording
    assert metrics.zOrderStats is None  # a compaction has none (as Delta)


def test_optimize_with_partition_filter(spark, tmp_path):
    path = tmp_path / "t"
    table = write_kv(path, [("a", 1), ("a", 2)], partition_by=["key"])
    table.append(pa.table({"key": ["a", "a"], "value": [3, 4]}, schema=KV))
    table.append(pa.table({"key": ["b", "b"], "value": [1, 2]}, schema=KV))
    dt_ = DeltaTable.forPath(spark, str(path))
    metrics = dt_.optimize().where("key = 'a'").executeCompaction().first().metrics
    assert metrics.numFilesAdded == 1 and metrics.numFilesRemoved == 2
    assert dt_.history().first().operationParameters["predicate"] == '["key = \'a\'"]'
    refused(path, PredicateError, lambda: dt_.optimize().where("value = 1").executeCompaction(),
            re.escape("Predicate references non-partition column 'value'. Only the partition columns may be "
                      "referenced: [key]"))


def _zorder_table(path: Path) -> deltatx.Table:
    schema = pa.schema([("value", pa.int64()), ("col1", pa.int64()), ("col2", pa.int64()), ("p", pa.int64())])
    table = deltatx.create_table(str(path), schema, partition_by=["p"])
    for start in range(0, 100, 25):  # four appends, each with a file per partition
        ids = list(range(start, start + 25))
        table.append(pa.table({"value": ids, "col1": [i % 7 for i in ids], "col2": [i % 27 for i in ids],
                               "p": [i % 10 for i in ids]}, schema=schema))
    return table


def test_optimize_zorder_by(spark, tmp_path):
    path = tmp_path / "t"
    before = _zorder_table(path).files().num_rows
    dt_ = DeltaTable.forPath(spark, str(path))
    metrics = dt_.optimize().executeZOrderBy(["col1", "col2"]).select("metrics.*").head()
    assert metrics.numFilesAdded == 10 and metrics.numFilesRemoved == before
    assert metrics.totalConsideredFiles == before and metrics.totalFilesSkipped == 0
    # Delta's ZOrderStats (delta-spark's test_optimize_zorder_by): every file merged, a cube per partition
    stats = metrics.zOrderStats
    assert stats.strategyName == "all" and stats.numOutputCubes == 10
    assert stats.mergedFiles.num == before == stats.inputOtherFiles.num and stats.inputCubeFiles.num == 0
    assert stats.mergedFiles.size == metrics.filesRemoved.totalSize
    assert deltatx.Table(str(path)).to_arrow().num_rows == 100

    fresh = tmp_path / "fresh"
    in_p2 = _zorder_table(fresh).to_arrow(where="p = 2").num_rows
    metrics = (DeltaTable.forPath(spark, str(fresh)).optimize().where("p = 2").executeZOrderBy("col1", "col2")
               .select("metrics.*").head())
    assert metrics.numFilesAdded == 1 and metrics.numFilesRemoved == 4 and metrics.zOrderStats.numOutputCubes == 1
    assert deltatx.Table(str(fresh)).to_arrow(where="p = 2").num_rows == in_p2


def test_zorder_with_bad_columns_is_refused(spark, tmp_path):
    path = tmp_path / "t"
    _zorder_table(path)
    dt_ = DeltaTable.forPath(spark, str(path))
    refused(path, TypeError, lambda: dt_.optimize().executeZOrderBy(1), "Z-order column must be str")
    refused(path, ZOrderError, lambda: dt_.optimize().where("p = 1").executeZOrderBy(["p"]),
            "p is a partition column. Z-Ordering can only be performed on data columns")  # Delta's wording


# --------------------------------------------------------------------------------------------
# unsupported calls
# --------------------------------------------------------------------------------------------


def test_unsupported_calls_raise_typed_errors(spark, tmp_path):
    path = tmp_path / "t"
    write_kv(path, [("a", 1)])
    dt_ = DeltaTable.forPath(spark, str(path))
    refused(path, UnsupportedOperationError, lambda: dt_.generate("symlink_format_manifest"))
    refused(path, UnsupportedOperationError, lambda: dt_.clone(str(tmp_path / "c")))
    refused(path, UnsupportedOperationError, lambda: dt_.dropFeatureSupport("deletionVectors"))


# --------------------------------------------------------------------------------------------
# save modes
# --------------------------------------------------------------------------------------------


def test_spark_refuses_error_and_ignore_modes_for_python_sources(spark, tmp_path):
    """The evidence behind deltatx.spark.write's modes: Spark rejects these before asking the source."""
    path = str(tmp_path / "t")
    df = spark.createDataFrame([("a", 1)], ["key", "value"])
    for mode in ("error", "ignore"):
        with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
            df.write.format("deltatx").mode(mode).save(path)
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("deltatx").save(path)  # the default mode is ErrorIfExists
    assert not Path(path).exists()


@pytest.mark.parametrize("engine", ["auto", "format"])
def test_write_error_and_ignore_modes(spark, tmp_path, engine):
    path = str(tmp_path / "t")
    df = spark.createDataFrame([("a", 1)], ["key", "value"])
    assert deltatx.spark.write(df, path, mode="error", engine=engine).version == 0
    for mode in ("error", "errorifexists", "default"):
        refused(path, TableAlreadyExistsError, lambda: deltatx.spark.write(df, path, mode=mode, engine=engine))
    before = Untouched(path)
    assert deltatx.spark.write(df, path, mode="ignore", engine=engine) is None
    before.check()
    fresh = str(tmp_path / "fresh")
    assert deltatx.spark.write(df, fresh, mode="ignore", engine=engine).version == 0
    assert content(fresh) == [("a", 1)]
    refused(path, DeltaTxError, lambda: deltatx.spark.write(df, path, mode="upsert", engine=engine), "mode must be")


def test_a_create_only_write_planned_on_an_existing_table_is_refused(spark, tmp_path):
    """The table appears between the cheap existence check and the planning: the plan refuses."""
    from deltatx.spark.options import CREATE_ONLY_OPTION
    from deltatx.spark.writer import plan_write

    path = str(tmp_path / "t")
    write_kv(path, [("a", 1)])
    schema = StructType([StructField("key", StringType()), StructField("value", LongType())])
    with pytest.raises(TableAlreadyExistsError):
        plan_write({"path": path, CREATE_ONLY_OPTION: "true"}, schema, False)
    assert plan_write({"path": path}, schema, False).read_version == 1


def test_merge_aliases_default_without_colliding():
    from deltatx.spark.delta_table import _merge_aliases

    assert _merge_aliases(None, None) == ("source", "target")
    assert _merge_aliases("s", "t") == ("s", "t")
    assert _merge_aliases(None, "source") == ("src", "source")  # a target aliased "source"
    assert _merge_aliases("target", None) == ("target", "tgt")


def test_builder_generated_column_is_computed_on_write(spark, tmp_path):
    path = str(tmp_path / "t")
    DeltaTable.create(spark).location(path).addColumn("a", "bigint") \
        .addColumn("b", "bigint", generatedAlwaysAs="a + 10").execute()
    table = deltatx.Table(path)
    assert "generatedColumns" in (table.protocol.writer_features or ())
    table.append(pa.table({"a": [1, 2]}))
    assert sorted(table.to_arrow().to_pylist(), key=lambda r: r["a"]) == [{"a": 1, "b": 11}, {"a": 2, "b": 12}]


def test_an_overwrite_may_not_partition_a_clustered_table(spark, tmp_path):
    """PROTOCOL.md: a clustered table is never partitioned; the clustering feature stays."""
    import deltatx.spark as dspark
    from deltatx.errors import ClusteringError

    path = tmp_path / "t"
    deltatx.create_table(str(path), pa.schema([("key", pa.string()), ("value", pa.int64())]), cluster_by=["value"])
    df = spark.createDataFrame([("a", 1)], ["key", "value"])
    refused(path, ClusteringError, lambda: dspark.write(df, str(path), mode="overwrite", overwriteSchema="true",
                                                        partitionBy=["key"]), match="partition")


# --------------------------------------------------------------------------------------------
# errors as delta-spark raises them, schemas as it reads them
# --------------------------------------------------------------------------------------------


def test_errors_are_also_the_pyspark_classes_delta_spark_raises(spark, tmp_path):
    """Code written for delta-spark catches AnalysisException (missing or existing table, bad
    names), IllegalArgumentException (VACUUM retention) and UnsupportedOperationException (a
    MERGE whose source matches a target row twice); deltatx's own classes still catch them."""
    from pyspark.errors import AnalysisException, IllegalArgumentException, UnsupportedOperationException

    path = tmp_path / "t"
    write_kv(path, [("a", 1), ("b", 2)])
    dt_ = DeltaTable.forPath(spark, str(path))
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(AnalysisException) as info:
        DeltaTable.forPath(spark, str(plain))
    assert isinstance(info.value, TableNotFoundError) and str(plain) in str(info.value)
    with pytest.raises(AnalysisException):  # delta-spark's test_create_table_behavior
        DeltaTable.create(spark).location(str(path)).addColumn("x", "int").execute()
    with pytest.raises(AnalysisException):  # delta-spark's test_replace_table_behavior
        DeltaTable.replace(spark).location(str(tmp_path / "none")).addColumn("x", "int").execute()
    with pytest.raises(IllegalArgumentException) as retention:
        dt_.vacuum(0.0)
    assert isinstance(retention.value, VacuumRetentionError)
    with pytest.raises(AnalysisException):
        dt_.delete("nope = 1")
    duplicated = spark.createDataFrame([("a", 10), ("a", 20)], ["k", "v"])
    with pytest.raises(UnsupportedOperationException,
                       match=r"\[DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE\] Cannot perform Merge as "
                             r"multiple source rows matched"):
        dt_.merge(duplicated, "key = k").whenMatchedUpdate(set={"value": "v"}).execute()
    assert content(path) == [("a", 1), ("b", 2)]


def test_concurrent_modification_errors_are_captured_exceptions_as_in_delta_spark(spark, tmp_path):
    """delta-spark's delta.exceptions derive its ConcurrentModificationException family from
    PySpark's CapturedException; code catching that must catch deltatx's too."""
    from pyspark.errors.exceptions.captured import CapturedException

    from deltatx import phases
    from deltatx.errors import ConcurrentModificationException

    path = tmp_path / "t"
    write_kv(path, [("a", 1), ("b", 2)])
    dt_ = DeltaTable.forPath(spark, str(path))
    fired = []

    def winner(phase: str, **context) -> None:
        if phase == "attempt_commit" and not fired:
            fired.append(context.get("version"))
            deltatx.Table(str(path)).delete(where="key = 'a'")  # commits first, same file

    with phases.observe(winner), pytest.raises(CapturedException) as info:
        dt_.delete("key = 'a'")
    assert isinstance(info.value, ConcurrentModificationException)
    assert "key" in str(info.value) or "file" in str(info.value)
    assert content(path) == [("b", 2)]


def test_read_schemas_leave_out_writer_only_field_metadata(spark, tmp_path):
    """delta-spark's DataFrames carry a column's comment, not how the log generates it: no
    generation expression or identity state (removeInternalMetadata)."""
    from deltatx.spark import IdentityGenerator

    path = str(tmp_path / "t")
    (DeltaTable.create(spark).location(path).addColumn("col1", "int", comment="foo", nullable=False)
     .addColumn("col2", "int", generatedAlwaysAs="col1 + 10")
     .addColumn("id", "bigint", generatedByDefaultAs=IdentityGenerator()).execute())
    logged = {f.name: f.metadata for f in deltatx.Table(path).schema}
    assert b"delta.generationExpression" in logged["col2"] and b"delta.identity.start" in logged["id"]
    expected = {"col1": {"comment": "foo"}, "col2": {}, "id": {}}
    assert {f.name: f.metadata for f in DeltaTable.forPath(spark, path).toDF().schema} == expected
    assert {f.name: f.metadata for f in spark.read.format("deltatx").load(path).schema} == expected
