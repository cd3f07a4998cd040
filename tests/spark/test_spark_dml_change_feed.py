"""Spark-distributed DML on a change-data-feed table: the tasks write the ``_change_data/`` files,
the driver commits their ``cdc`` actions once, and the feed equals the core's for the same DML
(copy-on-write and deletion vectors). Failed jobs and failed commits leave no change file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import deltatx
from deltatx import phases
from deltatx.errors import ConcurrentDeleteReadException, SchemaMismatchError
from deltatx.io.paths import decode_path
from deltatx.spark.dml import SparkTable
from deltatx.txnlog.actions import parse_commit

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("value", pa.int64())])
CDF = {"delta.enableChangeDataFeed": "true"}
CDF_DV = {**CDF, "delta.enableDeletionVectors": "true"}


def _rows(ids: range, part: str) -> pa.Table:
    return pa.table({"id": list(ids), "part": [part] * len(ids), "value": [i * 10 for i in ids]}, schema=SCHEMA)


def twin(tmp_path: Path, properties: dict, partitioned: bool = True) -> tuple[Path, Path]:
    """Two copies of one table (six files, ids 0-89 in parts a, b, c) with the feed on."""
    spark_copy = tmp_path / "spark"
    t = deltatx.create_table(str(spark_copy), SCHEMA, partition_by=["part"] if partitioned else None,
                             properties=properties)
    for k, part in enumerate("abc"):
        t.append(_rows(range(30 * k, 30 * k + 15), part))
        t.append(_rows(range(30 * k + 15, 30 * k + 30), part))
    core_copy = tmp_path / "core"
    shutil.copytree(spark_copy, core_copy)
    return spark_copy, core_copy


def feed(path: Path, since: int) -> list[dict]:
    """The change rows since ``since``, sorted, without the commit timestamp (copies differ)."""
    out = deltatx.Table(str(path)).changes(starting_version=since)
    return out.drop_columns(["_commit_timestamp"]).sort_by(
        [("_commit_version", "ascending"), ("id", "ascending"), ("_change_type", "ascending")]).to_pylist()


def last_commit(path: Path):
    t = deltatx.Table(str(path))
    return parse_commit(t._store.read_commit(t.version), t.version)


def change_files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*.parquet") if "_change_data" in p.parts}


def assert_same_feed(spark_path: Path, core_path: Path) -> None:
    assert not (spark_path / "_deltatx_spark").exists()
    version = deltatx.Table(str(spark_path)).version
    assert deltatx.Table(str(core_path)).version == version
    spark_feed, core_feed = feed(spark_path, version), feed(core_path, version)
    assert spark_feed == core_feed and spark_feed
    assert last_commit(spark_path).cdc_rows  # the change rows come from change data files
    committed = {r["path"] for r in last_commit(spark_path).cdc_rows}
    assert change_files(spark_path) == {decode_path(p) for p in committed}  # no stray change file


@pytest.mark.parametrize("properties", [CDF, CDF_DV], ids=["copy-on-write", "deletion-vectors"])
@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_delete_feed_matches_core(spark, tmp_path, properties, partitioned):
    spark_path, core_path = twin(tmp_path, properties, partitioned)
    SparkTable(spark, str(spark_path)).delete("id % 7 = 3")
    deltatx.Table(str(core_path)).delete("id % 7 = 3")
    assert_same_feed(spark_path, core_path)
    assert {r["_change_type"] for r in feed(spark_path, 7)} == {"delete"}


@pytest.mark.parametrize("properties", [CDF, CDF_DV], ids=["copy-on-write", "deletion-vectors"])
def test_update_feed_matches_core(spark, tmp_path, properties):
    spark_path, core_path = twin(tmp_path, properties)
    SparkTable(spark, str(spark_path)).update("id < 20 OR id > 80", set={"value": "value + 1"})
    deltatx.Table(str(core_path)).update("id < 20 OR id > 80", set={"value": "value + 1"})
    assert_same_feed(spark_path, core_path)
    kinds = [r["_change_type"] for r in feed(spark_path, 7)]
    assert kinds.count("update_preimage") == kinds.count("update_postimage") == 29


@pytest.mark.parametrize("properties", [CDF, CDF_DV], ids=["copy-on-write", "deletion-vectors"])
def test_merge_feed_matches_core_inserts_included(spark, tmp_path, properties):
    spark_path, core_path = twin(tmp_path, properties)
    source = pa.table({"id": [5, 40, 88, 100, 101], "part": ["a", "b", "c", "c", "a"],
                       "value": [-5, -40, -88, -100, -101]}, schema=SCHEMA)
    for path, merge in ((spark_path, SparkTable(spark, str(spark_path)).merge(spark.createDataFrame(
            source.to_pandas()), "t.id = s.id")), (core_path, deltatx.Table(str(core_path)).merge(source, "t.id = s.id"))):
        merge.when_matched_delete("s.id = 40").when_matched_update_all().when_not_matched_insert_all().execute()
    assert_same_feed(spark_path, core_path)
    kinds = sorted((r["id"], r["_change_type"]) for r in feed(spark_path, 7))
    assert (100, "insert") in kinds and (101, "insert") in kinds and (40, "delete") in kinds


def test_insert_only_merge_writes_no_change_files_as_in_core(spark, tmp_path):
    spark_path, core_path = twin(tmp_path, CDF)
    source = pa.table({"id": [200, 201], "part": ["a", "b"], "value": [1, 2]}, schema=SCHEMA)
    SparkTable(spark, str(spark_path)).merge(source, "t.id = s.id").when_not_matched_insert_all().execute()
    deltatx.Table(str(core_path)).merge(source, "t.id = s.id").when_not_matched_insert_all().execute()
    assert not last_commit(spark_path).cdc_rows and not last_commit(core_path).cdc_rows
    assert feed(spark_path, 7) == feed(core_path, 7)
    assert [r["_change_type"] for r in feed(spark_path, 7)] == ["insert", "insert"]


def test_failed_insert_job_deletes_the_change_files_of_the_target_job(spark, tmp_path):
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("value", pa.int64())])
    path = tmp_path / "t"
    t = deltatx.create_table(str(path), schema, properties=CDF)
    t.append(pa.table({"id": [1, 2, 3], "value": [10, 20, 30]}, schema=schema))
    source = spark.createDataFrame([(2, -2), (9, -9)], "id long, value long")
    merge = (SparkTable(spark, str(path)).merge(source, on="t.id = s.id")
             .when_matched_update(set={"value": "s.value"})             # the target job writes change files
             .when_not_matched_insert(values={"value": "s.value"}))     # the insert job fails: id is NOT NULL
    with pytest.raises(SchemaMismatchError, match="NOT NULL"):
        merge.execute()
    assert deltatx.Table(str(path)).version == 1
    assert change_files(path) == set() and not (path / "_deltatx_spark").exists()


def test_failed_commit_deletes_the_tasks_change_files(spark, tmp_path):
    path, _ = twin(tmp_path, CDF)
    fired: list[bool] = []

    def concurrent_delete(phase: str, **ctx) -> None:  # removes a file the DELETE read
        if phase == "read" and not fired:
            fired.append(True)
            deltatx.Table(str(path)).delete("part = 'a' AND id < 15")

    with phases.observe(concurrent_delete):
        with pytest.raises(ConcurrentDeleteReadException):
            SparkTable(spark, str(path)).delete("part = 'a' AND id < 5")
    assert fired and deltatx.Table(str(path)).version == 7
    committed = {decode_path(r["path"]) for r in last_commit(path).cdc_rows}  # the concurrent DELETE's
    assert change_files(path) == committed and not (path / "_deltatx_spark").exists()
