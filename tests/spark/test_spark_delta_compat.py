"""delta-spark behaviours of the Spark layer: dynamic partition overwrite, the session confs
delta-spark reads (partitionOverwriteMode, schema autoMerge, commitInfo.userMetadata), refused
write options, MERGE source aliases under further transformations, ``UPDATE SET *`` / ``INSERT *``
resolution, and the builder's clusterBy / identity columns / convertToDelta(collectStats).

The write-planning and conflict tests call the planner, a write task and the driver commit in
this process (no Spark job): deterministic interleavings without threads or sleeps.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltatx
import deltatx.spark as dspark
from deltatx.errors import (
    ArgumentTypeError,
    ConcurrentAppendException,
    InvalidArgumentError,
    InvalidPropertyError,
    SchemaMismatchError,
    UnsupportedOperationError,
)
from deltatx.spark import DeltaTable, IdentityGenerator
from deltatx.spark.commit import commit_files
from deltatx.spark.conf import AUTO_MERGE, PARTITION_OVERWRITE_MODE, USER_METADATA, session_key
from deltatx.spark.options import write_spec
from deltatx.spark.writer import plan_write, write_task

PART_SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string())])


def rows(uri: str) -> list[tuple]:
    return sorted((tuple(r.values()) for r in deltatx.Table(uri).to_arrow().to_pylist()), key=_key)


def _key(row: tuple) -> tuple:
    return tuple((v is None, v if v is not None else 0) for v in row)


@contextmanager
def session_conf(spark, **confs: str) -> Iterator[None]:
    """Set SQL confs on the shared session for the block only."""
    for key, value in confs.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key in confs:
            spark.conf.unset(key)


def spark_struct(schema: pa.Schema):
    from deltatx.spark.options import arrow_schema_to_spark

    return arrow_schema_to_spark(schema)


def partitioned_table(uri: str, partitions: dict[str | None, list[int]],
                      properties: dict[str, str] | None = None) -> deltatx.Table:
    t = deltatx.create_table(uri, PART_SCHEMA, partition_by=["part"], properties=properties)
    for part, ids in partitions.items():  # one commit (one file) per partition
        t.append(pa.table({"id": ids, "part": [part] * len(ids)}, schema=PART_SCHEMA))
    return deltatx.Table(uri)


def planned_overwrite(uri: str, data: pa.Table, **options: str):
    """Plan an overwrite as the format does and run its write task here; (plan, adds)."""
    plan = plan_write({"path": uri, **options}, spark_struct(data.schema), overwrite=True)
    written = write_task(plan, iter(data.to_batches()))
    return plan, written.adds()


# --------------------------------------------------------------------------------------------
# 1. dynamic partition overwrite
# --------------------------------------------------------------------------------------------


def test_dynamic_partition_overwrite_by_option_session_conf_and_write_helper(spark, tmp_path):
    """Only the partitions with rows in the DataFrame are replaced, however dynamic is asked for."""
    expected = [(2, "b"), (3, "c"), (10, "a")]
    for how in ("option", "session", "helper"):
        uri = str(tmp_path / how)
        spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id long, part string") \
            .write.format("deltatx").mode("append").option("partitionBy", "part").save(uri)
        new = spark.createDataFrame([(10, "a")], "id long, part string")
        if how == "option":
            new.write.format("deltatx").mode("overwrite").option("partitionOverwriteMode", "dynamic").save(uri)
        elif how == "session":
            with session_conf(spark, **{PARTITION_OVERWRITE_MODE: "dynamic"}):
                new.write.format("deltatx").mode("overwrite").save(uri)
        else:
            result = dspark.write(new, uri, mode="overwrite", partitionOverwriteMode="dynamic")
            assert result.metrics["numRemovedFiles"] == 1
        assert rows(uri) == expected, how
    # the option wins over the session conf: static replaces the whole table
    uri = str(tmp_path / "option")
    with session_conf(spark, **{PARTITION_OVERWRITE_MODE: "dynamic"}):
        spark.createDataFrame([(20, "z")], "id long, part string").write.format("deltatx") \
            .mode("overwrite").option("partitionOverwriteMode", "static").save(uri)
    assert rows(uri) == [(20, "z")]


def test_dynamic_partition_overwrite_replaces_exactly_the_written_partitions(table_uri):
    partitioned_table(table_uri, {"a": [1, 2], "b": [3], None: [4], "c": [5]})
    data = pa.table({"id": [10, 11, 12], "part": ["a", None, "d"]}, schema=PART_SCHEMA)
    plan, adds = planned_overwrite(table_uri, data, partitionOverwriteMode="dynamic")
    assert plan.dynamic_partition_overwrite
    result = commit_files(plan.request(), adds)
    assert result.metrics["numRemovedFiles"] == 2  # partitions a and NULL; b and c untouched
    assert rows(table_uri) == [(3, "b"), (5, "c"), (10, "a"), (11, None), (12, "d")]
    # an empty DataFrame writes into no partition: nothing is replaced
    plan, adds = planned_overwrite(table_uri, PART_SCHEMA.empty_table(), partitionOverwriteMode="dynamic")
    assert commit_files(plan.request(), adds).metrics["numRemovedFiles"] == 0
    assert len(rows(table_uri)) == 5


def test_dynamic_partition_overwrite_reads_only_its_partitions_for_conflicts(table_uri):
    """The commit's read is the written partitions. Under Serializable (where even a blind append
    into what a transaction read conflicts; WriteSerializable lets blind appends through, as
    Delta does for any overwrite) a concurrent append into another partition commits alongside —
    the whole table was not read — and one into a replaced partition is ConcurrentAppendException."""
    t = partitioned_table(table_uri, {"a": [1], "b": [2]}, {"delta.isolationLevel": "Serializable"})
    data = pa.table({"id": [10], "part": ["a"]}, schema=PART_SCHEMA)
    plan, adds = planned_overwrite(table_uri, data, partitionOverwriteMode="dynamic")
    t.append(pa.table({"id": [3], "part": ["b"]}, schema=PART_SCHEMA))  # another partition
    commit_files(plan.request(), adds)
    assert rows(table_uri) == [(2, "b"), (3, "b"), (10, "a")]

    plan, adds = planned_overwrite(table_uri, pa.table({"id": [20], "part": ["a"]}, schema=PART_SCHEMA),
                                   partitionOverwriteMode="dynamic")
    t.append(pa.table({"id": [21], "part": ["a"]}, schema=PART_SCHEMA))  # into the replaced partition
    with pytest.raises(ConcurrentAppendException):
        commit_files(plan.request(), adds)
    assert rows(table_uri) == [(2, "b"), (3, "b"), (10, "a"), (21, "a")]


def test_dynamic_partition_overwrite_rules_follow_delta(table_uri):
    o = {"path": table_uri}
    dyn = {"partitionOverwriteMode": "dynamic"}
    session_dyn = {session_key(PARTITION_OVERWRITE_MODE): "DYNAMIC"}
    assert write_spec({**o, **dyn}, overwrite=True).dynamic_partition_overwrite
    assert write_spec({**o, **session_dyn}, overwrite=True).dynamic_partition_overwrite
    assert not write_spec({**o, **dyn}, overwrite=False).dynamic_partition_overwrite  # appends: no meaning
    assert not write_spec({**o, **session_dyn, "partitionOverwriteMode": "static"},
                          overwrite=True).dynamic_partition_overwrite  # the option wins
    # replaceWhere: refused with the option, wins over the session conf
    with pytest.raises(InvalidPropertyError, match="replaceWhere"):
        write_spec({**o, **dyn, "replaceWhere": "part = 'a'"}, overwrite=True)
    spec = write_spec({**o, **session_dyn, "replaceWhere": "part = 'a'"}, overwrite=True)
    assert not spec.dynamic_partition_overwrite and spec.replace_where == "part = 'a'"
    with pytest.raises(InvalidPropertyError, match="STATIC"):
        write_spec({**o, "partitionOverwriteMode": "sometimes"}, overwrite=True)
    with pytest.raises(InvalidPropertyError, match="disabled"):
        write_spec({**o, **dyn, session_key("spark.databricks.delta.dynamicPartitionOverwrite.enabled"): "false"},
                   overwrite=True)

    partitioned_table(table_uri, {"a": [1]})
    with pytest.raises(InvalidPropertyError, match="overwriteSchema"):
        plan_write({**o, **dyn, "overwriteSchema": "true"}, spark_struct(PART_SCHEMA), overwrite=True)


def test_dynamic_partition_overwrite_of_an_unpartitioned_table_replaces_everything(table_uri):
    schema = pa.schema([("id", pa.int64())])
    deltatx.create_table(table_uri, schema).append(pa.table({"id": [1, 2]}, schema=schema))
    plan, adds = planned_overwrite(table_uri, pa.table({"id": [9]}, schema=schema), partitionOverwriteMode="dynamic")
    assert not plan.dynamic_partition_overwrite
    commit_files(plan.request(), adds)
    assert rows(table_uri) == [(9,)]


@pytest.mark.parametrize("option", [{"replaceOn": "t.id = s.id"}, {"replaceUsing": "id"},
                                    {"dataChange": "false"}, {"targetAlias": "t"}])
def test_write_options_that_would_change_the_write_are_refused(table_uri, option):
    with pytest.raises(UnsupportedOperationError, match="not supported"):
        write_spec({"path": table_uri, **option}, overwrite=True)


def test_harmless_values_of_refused_options_pass(table_uri):
    write_spec({"path": table_uri, "dataChange": "true", "writePartitionColumns": "false"}, overwrite=False)


# --------------------------------------------------------------------------------------------
# 2, 3. session confs: schema autoMerge, commitInfo.userMetadata
# --------------------------------------------------------------------------------------------


def test_session_auto_merge_evolves_merge_and_append_schemas(spark, table_uri):
    spark.createDataFrame([(1, "a"), (2, "b")], "id long, s string").write.format("deltatx") \
        .mode("append").save(table_uri)
    src = spark.createDataFrame([(1, "A", "new1"), (3, "c", "new3")], "id long, s string, extra string")
    with session_conf(spark, **{AUTO_MERGE: "true"}):
        (DeltaTable.forPath(spark, table_uri).alias("t").merge(src.alias("s"), "t.id = s.id")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
        assert deltatx.Table(table_uri).schema.names == ["id", "s", "extra"]
        assert rows(table_uri) == [(1, "A", "new1"), (2, "b", None), (3, "c", "new3")]
        spark.createDataFrame([(4, "d", 1.0)], "id long, s string, d double").write.format("deltatx") \
            .mode("append").save(table_uri)
        assert deltatx.Table(table_uri).schema.names == ["id", "s", "extra", "d"]
        # the write's own mergeSchema=false wins over the session conf
        with pytest.raises(SchemaMismatchError):
            dspark.write(spark.createDataFrame([(5, 2)], "id long, e int"), table_uri, mergeSchema=False)
    assert deltatx.Table(table_uri).schema.names == ["id", "s", "extra", "d"]


def test_session_user_metadata_tags_every_commit_and_the_option_wins(spark, table_uri):
    with session_conf(spark, **{USER_METADATA: "nightly-run"}):
        df = spark.createDataFrame([(1,), (2,)], "id long")
        df.write.format("deltatx").mode("append").save(table_uri)
        dt = DeltaTable.forPath(spark, table_uri)
        dt.delete("id = 1")
        dt.update("id = 2", {"id": "3"})
        (dt.alias("t").merge(df.alias("s"), "t.id = s.id").whenNotMatchedInsertAll().execute())
        df.write.format("deltatx").mode("append").option("userMetadata", "mine").save(table_uri)
    tagged = [(h["operation"], h.get("userMetadata")) for h in deltatx.Table(table_uri).history()]
    assert tagged == [("WRITE", "mine"), ("MERGE", "nightly-run"), ("UPDATE", "nightly-run"),
                      ("DELETE", "nightly-run"), ("WRITE", "nightly-run")]


# --------------------------------------------------------------------------------------------
# 4, 6. MERGE: the source's alias, and what * needs of the source
# --------------------------------------------------------------------------------------------


def test_merge_source_alias_survives_further_transformations(spark, table_uri):
    spark.createDataFrame([(1, 10), (2, 20)], "id long, v int").write.format("deltatx").mode("append").save(table_uri)
    updates = spark.createDataFrame([(1, -1), (1, -1), (3, 30)], "id long, v int")
    dt = DeltaTable.forPath(spark, table_uri)
    (dt.alias("t").merge(updates.alias("s").dropDuplicates(), "t.id = s.id")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    assert rows(table_uri) == [(1, -1), (2, 20), (3, 30)]
    (dt.alias("t").merge(updates.alias("u").where("u.v > 0").select("id", "v"), "t.id = u.id")
     .whenMatchedUpdate(set={"v": "u.v * 10"}).execute())
    assert rows(table_uri) == [(1, -1), (2, 20), (3, 300)]
    # columns of two aliases: no single name to bind the source under
    joined = updates.alias("x").join(updates.alias("y"), "id")
    with pytest.raises(UnsupportedOperationError, match="several aliases"):
        dt.alias("t").merge(joined, "t.id = x.id")


def test_merge_star_needs_every_target_column_unless_schema_evolves(spark, table_uri):
    spark.createDataFrame([(1, "a", 10), (2, "b", 20)], "id long, k string, v int").write.format("deltatx") \
        .mode("append").save(table_uri)
    src = spark.createDataFrame([(1, "z"), (9, "n")], "id long, k string")  # no column v
    dt = DeltaTable.forPath(spark, table_uri)
    version = deltatx.Table(table_uri).version
    for build in (lambda m: m.whenMatchedUpdateAll(), lambda m: m.whenNotMatchedInsertAll()):
        with pytest.raises(SchemaMismatchError, match="`v`"):
            build(dt.alias("t").merge(src.alias("s"), "t.id = s.id")).execute()
    assert deltatx.Table(table_uri).version == version
    # explicit assignments need no v
    dt.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"k": "s.k"}).execute()
    # with schema evolution, * means the source's columns: v kept (update) / NULL (insert)
    (dt.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll()
     .withSchemaEvolution().execute())
    assert rows(table_uri) == [(1, "z", 10), (2, "b", 20), (9, "n", None)]


# --------------------------------------------------------------------------------------------
# 5. builder: clusterBy, identity columns; convertToDelta(collectStats)
# --------------------------------------------------------------------------------------------


def test_builder_cluster_by_creates_a_clustered_table(spark, tmp_path):
    uri = str(tmp_path / "clustered")
    DeltaTable.create(spark).location(uri).addColumn("id", "int").addColumn("ts", "timestamp") \
        .clusterBy("id", "ts").execute()
    assert deltatx.Table(uri).clustering_columns == ["id", "ts"]
    with pytest.raises(TypeError):
        DeltaTable.create(spark).clusterBy(1)
    with pytest.raises(UnsupportedOperationError, match="clusterBy"):
        DeltaTable.replace(spark).location(uri).addColumn("id", "int").clusterBy("id").execute()


def test_builder_identity_columns(spark, tmp_path):
    uri = str(tmp_path / "identity")
    (DeltaTable.create(spark).location(uri)
     .addColumn("id", "bigint", generatedAlwaysAs=IdentityGenerator())
     .addColumn("seq", "bigint", generatedByDefaultAs=IdentityGenerator(start=100, step=10))
     .addColumn("v", "string").execute())
    t = deltatx.Table(uri)
    t.append(pa.table({"v": ["x", "y"]}))
    assert sorted((r["id"], r["seq"], r["v"]) for r in deltatx.Table(uri).to_arrow().to_pylist()) == \
        [(1, 100, "x"), (2, 110, "y")]
    deltatx.Table(uri).append(pa.table({"seq": [7], "v": ["z"]}))  # BY DEFAULT: explicit values allowed
    # createOrReplace defines them too
    (DeltaTable.createOrReplace(spark).location(uri)
     .addColumn("id", "bigint", generatedByDefaultAs=IdentityGenerator(5)).addColumn("v", "string").execute())
    deltatx.Table(uri).append(pa.table({"v": ["r"]}))
    assert [(r["id"], r["v"]) for r in deltatx.Table(uri).to_arrow().to_pylist()] == [(5, "r")]

    builder = DeltaTable.create(spark)
    with pytest.raises(ArgumentTypeError, match="IdentityGenerator"):
        builder.addColumn("id", "bigint", generatedByDefaultAs=object())
    with pytest.raises(InvalidArgumentError, match="cannot both be set"):
        builder.addColumn("id", "bigint", generatedAlwaysAs=IdentityGenerator(), generatedByDefaultAs=IdentityGenerator())
    with pytest.raises(InvalidArgumentError, match="step cannot be 0"):
        builder.addColumn("id", "bigint", generatedAlwaysAs=IdentityGenerator(step=0))
    with pytest.raises(ArgumentTypeError, match="start must be int"):
        builder.addColumn("id", "bigint", generatedAlwaysAs=IdentityGenerator(start="1"))


def test_convert_to_delta_accepts_collect_stats(spark, tmp_path):
    folder = tmp_path / "pq"
    os.makedirs(folder)
    pq.write_table(pa.table({"a": [1, 2]}), folder / "part-0.parquet")
    dt = DeltaTable.convertToDelta(spark, f"parquet.`{folder}`", None, False)
    assert dt.toDF().count() == 2
    with pytest.raises(TypeError):
        DeltaTable.convertToDelta(spark, f"parquet.`{folder}`", None, "no")


def test_a_first_write_asking_for_protocol_versions_gets_them(tmp_path):
    """delta.minReaderVersion / minWriterVersion in a creating write's properties upgrade the new
    table's protocol (and are not stored), as create_table and set_properties do."""
    from deltatx.spark.commit import CommitRequest, _create_and_write
    from deltatx.spark.options import table_properties
    from deltatx.txnlog.actions import FILE_SCHEMA
    from deltatx.txnlog.schema import schema_to_json

    uri = str(tmp_path / "t")
    request = CommitRequest(uri=uri, storage_options={}, read_version=-1,
                            schema_string=schema_to_json(pa.schema([("id", pa.int64())])), partition_columns=(),
                            table_properties=table_properties({"delta.minWriterVersion": "7",
                                                               "delta.minReaderVersion": "3"}))
    _create_and_write(request, FILE_SCHEMA.empty_table())
    table = deltatx.Table(uri)
    assert (table.protocol.min_reader_version, table.protocol.min_writer_version) == (3, 7)
    assert table.properties == {}


def test_idempotent_dml_and_writes_by_session_confs(spark, tmp_path):
    """delta-spark's spark.databricks.delta.write.txnAppId / txnVersion: a foreachBatch body run
    again after a failure (same appId, same version) is skipped — MERGE, UPDATE, DELETE and
    df.write alike — and the first run commits the txn action."""
    uri = str(tmp_path / "t")
    deltatx.create_table(uri, pa.schema([("id", pa.int64()), ("v", pa.int64())])).append(
        pa.table({"id": [1], "v": [0]}))
    source = spark.createDataFrame([(1, 1)], "id long, v long")
    steps = [
        lambda: (DeltaTable.forPath(spark, uri).alias("t").merge(source.alias("s"), "t.id = s.id")
                 .whenMatchedUpdate(set={"v": "t.v + s.v"}).execute()),
        lambda: DeltaTable.forPath(spark, uri).update("id = 1", {"v": "v + 10"}),
        lambda: spark.createDataFrame([(2, 0)], "id long, v long").write.format("deltatx").mode("append").save(uri),
        lambda: DeltaTable.forPath(spark, uri).delete("id = 1"),
    ]
    for version, step in enumerate(steps, start=5):
        with session_conf(spark, **{"spark.databricks.delta.write.txnAppId": "app1",
                                    "spark.databricks.delta.write.txnVersion": str(version)}):
            step()
            step()  # the replay: skipped
    table = deltatx.Table(uri)
    assert [(r["id"], r["v"]) for r in table.to_arrow().to_pylist()] == [(2, 0)]
    assert table.version == 5  # one commit per step
    assert [h["operation"] for h in table.history()][:4] == ["DELETE", "WRITE", "UPDATE", "MERGE"]
    with session_conf(spark, **{"spark.databricks.delta.write.txnAppId": "app1"}):
        with pytest.raises(Exception, match="txnVersion"):
            DeltaTable.forPath(spark, uri).delete("id = 2")


def test_a_stream_takes_the_sessions_auto_merge_and_user_metadata(spark, tmp_path):
    """Delta's sink merges the schema when the session's autoMerge conf is on (DeltaSink's
    canMergeSchema) and tags its commits with the session's userMetadata."""
    import json as _json

    base = tmp_path / "s"
    (base / "in").mkdir(parents=True)
    out, checkpoint = str(base / "out"), str(base / "ck")

    def run(schema: str) -> None:
        (spark.readStream.schema(schema).json(str(base / "in")).writeStream.format("deltatx")
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start(out).awaitTermination())

    (base / "in" / "a.json").write_text(_json.dumps({"id": 1}) + "\n")
    run("id long")
    (base / "in" / "b.json").write_text(_json.dumps({"id": 2, "extra": "x"}) + "\n")
    with session_conf(spark, **{"spark.databricks.delta.schema.autoMerge.enabled": "true",
                                "spark.databricks.delta.commitInfo.userMetadata": "stream-meta"}):
        run("id long, extra string")
    table = deltatx.Table(out)
    assert "extra" in table.schema.names
    assert table.history(limit=1)[0].get("userMetadata") == "stream-meta"
