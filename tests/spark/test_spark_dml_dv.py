"""Spark-distributed DELETE / UPDATE / MERGE on merge-on-read tables: DVs written by the tasks,
one commit by the driver, the core's results and row-level conflicts.

Every comparison runs the Spark operation on one copy of a table and the core ``deltatx.Table``
operation on another copy of the same files. Files hold 500 rows, and the tables keep only DVs
of at most 64 bytes inline, so that a DV deleting every third row lands in a
``deletion_vector_*.bin`` file (what a failure must clean up). Interleavings with a concurrent core writer are made with transaction objects
(staged first, committed before or after the Spark DML) and a phase observer on the driver,
never with sleeps. The shared session-scoped ``spark`` fixture is the only SparkSession.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import deltatx
from deltatx import phases
from deltatx.errors import ConcurrentDeleteDeleteException, DataFileNotFoundError
from deltatx.spark.dml import SparkTable
from deltatx.txnlog.actions import parse_commit

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("value", pa.int64())])
ROWS_PER_FILE = 500
LEVELS = ["WriteSerializable", "Serializable"]

#: metrics that depend on timing or on how many files a writer cut its output into
_LAYOUT_METRICS = {"executionTimeMs", "scanTimeMs", "rewriteTimeMs", "numAddedFiles", "numTargetFilesAdded",
                   "numTargetBytesAdded", "numAddedBytes"}  # bytes depend on how the writer cut the files


def dv_properties(row_tracking: bool = False, level: str = "WriteSerializable", dvs: bool = True) -> dict:
    props = {"delta.isolationLevel": level}
    if dvs:
        props["delta.enableDeletionVectors"] = "true"
        props["deltatx.deletionVectors.inlineMaxBytes"] = "64"  # bigger bitmaps go to DV files
    if row_tracking:
        props["delta.enableRowTracking"] = "true"
    return props


def _rows(ids: range, part: str) -> pa.Table:
    return pa.table({"id": list(ids), "part": [part] * len(ids), "value": [i * 10 for i in ids]}, schema=SCHEMA)


def make_table(path: Path, partitioned: bool, properties: dict) -> Path:
    """Six files of 500 rows: ids 0-999 in part a, 1000-1999 in b, 2000-2999 in c (two per part)."""
    t = deltatx.create_table(str(path), SCHEMA, partition_by=["part"] if partitioned else None,
                             properties=properties)
    for k, part in enumerate("abc"):
        start = 2 * ROWS_PER_FILE * k
        t.append(_rows(range(start, start + ROWS_PER_FILE), part))
        t.append(_rows(range(start + ROWS_PER_FILE, start + 2 * ROWS_PER_FILE), part))
    return path


def twin(tmp_path: Path, partitioned: bool, properties: dict) -> tuple[Path, Path]:
    spark_copy = make_table(tmp_path / "spark", partitioned, properties)
    core_copy = tmp_path / "core"
    shutil.copytree(spark_copy, core_copy)
    return spark_copy, core_copy


def content(path: Path, columns: list[str] | None = None) -> list[dict]:
    return deltatx.Table(str(path)).to_arrow(columns=columns).sort_by("id").to_pylist()


def comparable(metrics: dict) -> dict:
    return {k: int(v) for k, v in metrics.items() if k not in _LAYOUT_METRICS}


def last_commit(path: Path):
    t = deltatx.Table(str(path))
    return parse_commit(t._store.read_commit(t.version), t.version)


def parquet_files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*.parquet")}


def dv_files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("deletion_vector_*.bin")}


def dvs_by_path(adds: pa.Table) -> dict[str, int | None]:
    """Each add's DV cardinality (None: no DV)."""
    return {a["path"]: (a["deletionVector"] or {}).get("cardinality") for a in adds.to_pylist()}


def assert_same_result(spark_path: Path, core_path: Path, spark_result, core_result) -> None:
    assert not (spark_path / "_deltatx_spark").exists()  # the jobs' manifests are cleaned up
    assert content(spark_path) == content(core_path)
    assert comparable(spark_result.metrics) == comparable(core_result.metrics)
    s, c = last_commit(spark_path), last_commit(core_path)
    assert set(s.removes.column("path").to_pylist()) == set(c.removes.column("path").to_pylist())
    assert dvs_by_path(s.removes) == dvs_by_path(c.removes)  # each remove names the DV it replaces
    old = set(s.removes.column("path").to_pylist())  # re-adds of the files given a DV: same DVs
    assert {p: n for p, n in dvs_by_path(s.adds).items() if p in old} == \
        {p: n for p, n in dvs_by_path(c.adds).items() if p in old}
    assert (s.commit_info["operation"], s.commit_info["operationParameters"]) == \
        (c.commit_info["operation"], c.commit_info["operationParameters"])
    assert s.commit_info["readVersion"] == c.commit_info["readVersion"]


def file_holding(path: Path, first_id: int) -> str:
    """The add path of the file whose ids start at ``first_id``."""
    files = deltatx.Table(str(path)).files().to_pylist()
    return next(f["path"] for f in files if json.loads(f["stats"])["minValues"]["id"] == first_id)


def merge_source(spark, ids: list[int], value: int):
    return spark.createDataFrame([(i, value) for i in ids], "id long, value long")


# --------------------------------------------------------------------------------------------
# The tasks write DVs; the results equal the core's
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
@pytest.mark.parametrize("max_tasks", [None, 1], ids=["task-per-file", "one-task"])
def test_delete_marks_rows_in_dvs_and_rewrites_no_file(spark, tmp_path, partitioned, max_tasks):
    spark_path, core_path = twin(tmp_path, partitioned, dv_properties())
    parquet_before = parquet_files(spark_path)
    where = "id % 3 = 0 AND id < 1000"  # every third row of both files of part a: DVs in a file
    r = SparkTable(spark, str(spark_path), max_tasks=max_tasks).delete(where)
    c = deltatx.Table(str(core_path)).delete(where)
    assert_same_result(spark_path, core_path, r, c)
    assert r.metrics["numDeletedRows"] == 334 and r.metrics["numDeletionVectorsAdded"] == 2
    commit = last_commit(spark_path)
    removed, added = commit.removes.column("path").to_pylist(), commit.adds.column("path").to_pylist()
    assert len(removed) == 2 and sorted(removed) == sorted(added)  # remove + re-add of the same path
    assert all(d is None for d in dvs_by_path(commit.removes).values())
    assert sorted(dvs_by_path(commit.adds).values()) == [167, 167]
    assert parquet_files(spark_path) == parquet_before  # no data file written
    assert len(dv_files(spark_path)) == (1 if max_tasks == 1 else 2)  # one DV file per task

    # a second DELETE unions the DVs; its removes name the first one's
    where = "id = 1 OR id = 502"
    r = SparkTable(spark, str(spark_path), max_tasks=max_tasks).delete(where)
    c = deltatx.Table(str(core_path)).delete(where)
    assert_same_result(spark_path, core_path, r, c)
    assert r.metrics["numDeletionVectorsUpdated"] == 2
    assert sorted(dvs_by_path(last_commit(spark_path).removes).values()) == [167, 167]
    assert sorted(dvs_by_path(last_commit(spark_path).adds).values()) == [168, 168]


def test_delete_of_every_row_of_a_file_removes_it(spark, tmp_path):
    spark_path, core_path = twin(tmp_path, False, dv_properties())
    where = "id >= 490 AND id < 1000"  # all of file 500-999, ten rows of file 0-499
    r = SparkTable(spark, str(spark_path)).delete(where)
    c = deltatx.Table(str(core_path)).delete(where)
    assert_same_result(spark_path, core_path, r, c)
    assert r.metrics["numRemovedFiles"] == 1 and r.metrics["numDeletionVectorsAdded"] == 1
    assert last_commit(spark_path).adds.num_rows == 1


@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_update_marks_old_rows_and_writes_only_the_updated_ones(spark, tmp_path, partitioned):
    spark_path, core_path = twin(tmp_path, partitioned, dv_properties())
    parquet_before = parquet_files(spark_path)
    where, assignments = "id % 3 = 0 AND id >= 1000", {"value": "value + 1"}  # parts b and c
    r = SparkTable(spark, str(spark_path)).update(where, set=assignments)
    c = deltatx.Table(str(core_path)).update(where, set=assignments)
    assert_same_result(spark_path, core_path, r, c)
    assert r.metrics["numUpdatedRows"] == 666 and r.metrics["numDeletionVectorsAdded"] == 4
    assert r.metrics["numCopiedRows"] == 0
    commit = last_commit(spark_path)
    removed = set(commit.removes.column("path").to_pylist())
    new_files = [a for a in commit.adds.to_pylist() if a["path"] not in removed]
    assert len(removed) == 4 and removed <= set(commit.adds.column("path").to_pylist())
    assert sum(int(f["stats"].split('"numRecords":')[1].split(",")[0]) for f in new_files) == 666
    assert parquet_files(spark_path) == parquet_before | {f["path"] for f in new_files}


@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_merge_marks_changed_rows_and_inserts_like_the_core(spark, tmp_path, partitioned):
    spark_path, core_path = twin(tmp_path, partitioned, dv_properties())
    source = spark.createDataFrame(
        [(i, "a", -i) for i in range(0, 1000, 4)] + [(i, "c", -i) for i in (2001, 2003)]
        + [(i, "b", -i) for i in range(3000, 3010)],
        "id long, part string, value long")

    def merge(target):
        return (target.merge(source if isinstance(target, SparkTable) else source.toArrow(), on="t.id = s.id")
                .when_matched_delete(condition="s.id % 8 = 0")
                .when_matched_update(set={"value": "s.value"})
                .when_not_matched_insert_all()
                .execute())

    r = merge(SparkTable(spark, str(spark_path)))
    c = merge(deltatx.Table(str(core_path)))
    assert_same_result(spark_path, core_path, r, c)
    assert r.metrics["numTargetRowsDeleted"] == 125 and r.metrics["numTargetRowsUpdated"] == 127
    assert r.metrics["numTargetRowsInserted"] == 10 and r.metrics["numTargetRowsCopied"] == 0
    assert r.metrics["numTargetDeletionVectorsAdded"] == 3  # Delta's MERGE name


# --------------------------------------------------------------------------------------------
# Row ids survive
# --------------------------------------------------------------------------------------------

ROW_COLUMNS = ["id", "value", "_metadata.row_id", "_metadata.row_commit_version"]


@pytest.mark.parametrize("dvs", [True, False], ids=["merge-on-read", "copy-on-write"])
def test_updated_and_merged_rows_keep_their_row_ids(spark, tmp_path, dvs):
    spark_path, core_path = twin(tmp_path, False, dv_properties(row_tracking=True, dvs=dvs))
    before = {r["id"]: r for r in content(spark_path, ROW_COLUMNS)}
    assert [before[i]["_metadata.row_id"] for i in (0, 499, 500, 2999)] == [0, 499, 500, 2999]

    where, assignments = "id % 5 = 0 AND id < 1500", {"value": "value + 1"}
    r = SparkTable(spark, str(spark_path)).update(where, set=assignments)
    c = deltatx.Table(str(core_path)).update(where, set=assignments)
    assert_same_result(spark_path, core_path, r, c)

    source = merge_source(spark, list(range(1, 3000, 7)) + [5000, 5001], -1)
    r = (SparkTable(spark, str(spark_path)).merge(source, on="t.id = s.id")
         .when_matched_update(set={"value": "s.value"}).when_not_matched_insert_all().execute())
    c = (deltatx.Table(str(core_path)).merge(source.toArrow(), on="t.id = s.id")
         .when_matched_update(set={"value": "s.value"}).when_not_matched_insert_all().execute())
    assert content(spark_path) == content(core_path)

    after = {row["id"]: row for row in content(spark_path, ROW_COLUMNS)}
    core_after = {row["id"]: row for row in content(core_path, ROW_COLUMNS)}
    for i, row in before.items():  # every old row keeps its id; a changed one carries its version
        assert after[i]["_metadata.row_id"] == row["_metadata.row_id"] == core_after[i]["_metadata.row_id"]
        changed_at = r.version if i % 7 == 1 else r.version - 1 if (i % 5 == 0 and i < 1500) else None
        expected = changed_at if changed_at is not None else row["_metadata.row_commit_version"]
        assert after[i]["_metadata.row_commit_version"] == expected, i
    inserted = [after[i]["_metadata.row_id"] for i in (5000, 5001)]
    assert len(set(inserted)) == 2 and min(inserted) >= 3000  # fresh ids above the old watermark


# --------------------------------------------------------------------------------------------
# Failures leave no new DV or data files
# --------------------------------------------------------------------------------------------


def test_failed_job_leaves_no_dv_or_data_files(spark, tmp_path):
    path = make_table(tmp_path / "t", partitioned=True, properties=dv_properties(row_tracking=True))
    table = deltatx.Table(str(path))
    files_before = table.files().column("path").to_pylist()
    parquet_before, rows_before = parquet_files(path), content(path)
    victim = path / [p for p in files_before if "part=b" in p][0]
    kept_aside = tmp_path / "aside.parquet"
    shutil.move(victim, kept_aside)
    with pytest.raises(DataFileNotFoundError):  # the tasks of parts a and c wrote DVs and rows
        SparkTable(spark, str(path)).update("id % 3 = 0", set={"value": "0"})
    shutil.move(kept_aside, victim)
    assert dv_files(path) == set() and parquet_files(path) == parquet_before
    assert not (path / "_deltatx_spark").exists()
    after = deltatx.Table(str(path))
    assert after.version == 6 and after.files().column("path").to_pylist() == files_before
    assert content(path) == rows_before


def test_failed_commit_leaves_no_dv_or_data_files(spark, tmp_path):
    path = make_table(tmp_path / "t", partitioned=False, properties=dv_properties())
    parquet_before, rows_before = parquet_files(path), content(path)

    def fail_at_commit(phase: str, **ctx) -> None:
        if phase == "attempt_commit":
            raise OSError("storage unavailable")

    spark_table = SparkTable(spark, str(path))
    with phases.observe(fail_at_commit), pytest.raises(OSError, match="storage unavailable"):
        spark_table.update("id % 3 = 0", set={"value": "0"})  # DVs in every file, and new files
    with phases.observe(fail_at_commit), pytest.raises(OSError, match="storage unavailable"):
        spark_table.delete("id % 3 = 1")
    assert dv_files(path) == set() and parquet_files(path) == parquet_before
    assert deltatx.Table(str(path)).version == 6 and content(path) == rows_before


# --------------------------------------------------------------------------------------------
# A concurrent core writer of the same file is resolved row by row
# --------------------------------------------------------------------------------------------


def _spark_op(spark, op: str, where_id: str, ids: list[int]):
    """One Spark DML on the rows ``where_id`` (SQL) = ``ids`` (for the MERGE source)."""
    def run(spark_table: SparkTable):
        if op == "DELETE":
            return spark_table.delete(where_id)
        if op == "UPDATE":
            return spark_table.update(where_id, set={"value": "-1"})
        return (spark_table.merge(merge_source(spark, ids, -1), on="t.id = s.id")
                .when_matched_update(set={"value": "s.value"}).execute())
    return run


def _commit_first(other) -> phases.Observer:
    """An observer that commits the transaction ``other`` right before the Spark driver's first
    attempt to commit (so the Spark DML, planned and run at the old version, loses the race)."""
    fired: list[bool] = []

    def observer(phase: str, **ctx) -> None:
        if phase == "attempt_commit" and ctx["txn_id"] != other.txn_id and not fired:
            fired.append(True)
            other.commit()

    return observer


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", ["DELETE", "UPDATE", "MERGE"])
@pytest.mark.parametrize("spark_first", [True, False], ids=["spark-commits-first", "core-commits-first"])
def test_spark_dml_and_core_delete_of_other_rows_of_one_file_both_commit(spark, tmp_path, level, op, spark_first):
    path = make_table(tmp_path / "t", partitioned=False, properties=dv_properties(row_tracking=True, level=level))
    first_file = file_holding(path, 0)
    core_tx = deltatx.Table(str(path)).transaction()
    core_tx.delete("id = 20")  # staged at version 6: row 20 of the first file
    run = _spark_op(spark, op, "id = 10", [10])  # row 10 of the same file
    if spark_first:
        spark_result = run(SparkTable(spark, str(path)))
        core_result = core_tx.commit()
        loser, winner = core_result, spark_result
    else:
        with phases.observe(_commit_first(core_tx)):
            spark_result = run(SparkTable(spark, str(path)))
        loser, winner = spark_result, None
    assert loser.read_version == 6 and loser.version == 8 and loser.conflicts_resolved == 1
    assert winner is None or (winner.version == 7 and winner.conflicts_resolved == 0)

    after = {r["id"]: r for r in content(path, ["id", "value", "_metadata.row_id"])}
    assert 20 not in after
    if op == "DELETE":
        assert 10 not in after and len(after) == 2998
    else:
        assert after[10]["value"] == -1 and after[10]["_metadata.row_id"] == 10 and len(after) == 2999
    assert all(r["value"] == i * 10 for i, r in after.items() if i != 10)
    files = {f["path"]: f for f in deltatx.Table(str(path)).files().to_pylist()}
    assert files[first_file]["deletionVector"]["cardinality"] == 2  # one DV holds both rows


@pytest.mark.parametrize("spark_first", [True, False], ids=["spark-commits-first", "core-commits-first"])
def test_spark_dml_and_core_delete_of_the_same_row_conflict(spark, tmp_path, spark_first):
    path = make_table(tmp_path / "t", partitioned=False, properties=dv_properties(row_tracking=True))
    core_tx = deltatx.Table(str(path)).transaction()
    core_tx.delete("id = 21")
    run = _spark_op(spark, "DELETE", "id % 3 = 0 AND id < 500", [])  # a DV file; row 21 among them
    dvs_before, parquet_before = dv_files(path), parquet_files(path)
    if spark_first:
        run(SparkTable(spark, str(path)))
        with pytest.raises(ConcurrentDeleteDeleteException, match="row id 21"):
            core_tx.commit()
        assert len(dv_files(path)) == 1
    else:
        with phases.observe(_commit_first(core_tx)), \
                pytest.raises(ConcurrentDeleteDeleteException, match="row id 21"):
            run(SparkTable(spark, str(path)))
        assert dv_files(path) == dvs_before  # the loser's DV file is gone (the winner's DV is inline)
        assert 21 not in {r["id"] for r in content(path)} and len(content(path)) == 2999
    assert parquet_files(path) == parquet_before
    assert deltatx.Table(str(path)).version == 7
