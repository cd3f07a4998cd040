"""Spark-distributed DELETE / UPDATE / MERGE give the core's results, commits and conflicts.

Every comparison runs the Spark operation on one copy of a table and the core ``deltatx.Table``
operation on another copy of the same files: rows, row metrics, removed files and the commit's
operation parameters must be equal. Interleavings are made with phase observers (a concurrent
core commit at the DML's recorded read), never with sleeps. The shared session-scoped ``spark``
fixture is the only SparkSession.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import deltatx
from deltatx import phases
from deltatx.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteReadException,
    DataFileNotFoundError,
    DeltaTxError,
    MergeCardinalityError,
    PredicateError,
    SchemaMismatchError,
)
from deltatx.spark.dml import SparkTable
from deltatx.txnlog.actions import parse_commit

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("value", pa.int64())])

#: metrics that depend on timing or on how many files a writer cut its output into
_LAYOUT_METRICS = {"executionTimeMs", "scanTimeMs", "rewriteTimeMs", "numAddedFiles", "numTargetFilesAdded",
                   "numTargetBytesAdded", "numAddedBytes"}  # bytes depend on how the writer cut the files


def _rows(ids: range, part: str) -> pa.Table:
    return pa.table({"id": list(ids), "part": [part] * len(ids), "value": [i * 10 for i in ids]}, schema=SCHEMA)


def make_table(path: Path, partitioned: bool, properties: dict | None = None) -> Path:
    """Six files: ids 0-29 in part a, 30-59 in b, 60-89 in c, two appends (files) per part."""
    t = deltatx.create_table(str(path), SCHEMA, partition_by=["part"] if partitioned else None,
                             properties=properties)
    for k, part in enumerate("abc"):
        t.append(_rows(range(30 * k, 30 * k + 15), part))
        t.append(_rows(range(30 * k + 15, 30 * k + 30), part))
    return path


def twin(tmp_path: Path, partitioned: bool, properties: dict | None = None) -> tuple[Path, Path]:
    spark_copy = make_table(tmp_path / "spark", partitioned, properties)
    core_copy = tmp_path / "core"
    shutil.copytree(spark_copy, core_copy)
    return spark_copy, core_copy


def content(path: Path) -> list[dict]:
    return deltatx.Table(str(path)).to_arrow().sort_by("id").to_pylist()


def comparable(metrics: dict) -> dict:
    return {k: int(v) for k, v in metrics.items() if k not in _LAYOUT_METRICS}


def last_commit(path: Path):
    t = deltatx.Table(str(path))
    return parse_commit(t._store.read_commit(t.version), t.version)


def removed_paths(path: Path) -> set[str]:
    return set(last_commit(path).removes.column("path").to_pylist())


def parquet_files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*.parquet")}


def assert_same_commit(spark_path: Path, core_path: Path, spark_result, core_result) -> None:
    assert not (spark_path / "_deltatx_spark").exists()  # the jobs' manifests are cleaned up
    assert content(spark_path) == content(core_path)
    assert comparable(spark_result.metrics) == comparable(core_result.metrics)
    assert removed_paths(spark_path) == removed_paths(core_path)  # same files rewritten, no others
    s, c = last_commit(spark_path).commit_info, last_commit(core_path).commit_info
    assert (s["operation"], s["operationParameters"]) == (c["operation"], c["operationParameters"])
    assert s["readVersion"] == c["readVersion"] and s["isolationLevel"] == c["isolationLevel"]


# --------------------------------------------------------------------------------------------
# Results equal the core's
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_delete_matches_core(spark, tmp_path, partitioned):
    spark_path, core_path = twin(tmp_path, partitioned)
    where = "id >= 10 AND id < 20 AND value <> 150"  # two files of part a hold matches
    max_tasks = None if partitioned else 1  # one task per file, or both files in one task
    r = SparkTable(spark, str(spark_path), max_tasks=max_tasks).delete(where)
    c = deltatx.Table(str(core_path)).delete(where)
    assert_same_commit(spark_path, core_path, r, c)
    assert r.operation == "DELETE" and r.metrics["numDeletedRows"] == 9
    assert r.metrics["numRemovedFiles"] == 2  # the four files of parts b and c were not touched
    assert all("part=a" in p for p in removed_paths(spark_path)) or not partitioned


def test_delete_candidate_without_matching_row_is_not_rewritten(spark, tmp_path):
    spark_path, core_path = twin(tmp_path, partitioned=False)
    where = "id = 3 AND value = 31"  # file 0-14 is a candidate by stats, but no row matches
    r = SparkTable(spark, str(spark_path)).delete(where)
    c = deltatx.Table(str(core_path)).delete(where)
    assert r.metrics["numFilesRead"] == c.metrics["numFilesRead"] == 1
    assert r.metrics["numRemovedFiles"] == 0 and r.version == r.read_version  # nothing to commit
    assert comparable(r.metrics) == comparable(c.metrics)
    assert deltatx.Table(str(spark_path)).version == deltatx.Table(str(core_path)).version


def test_partition_only_delete_removes_files_unread(spark, tmp_path):
    spark_path, core_path = twin(tmp_path, partitioned=True)
    r = SparkTable(spark, str(spark_path)).delete("part = 'b'")
    c = deltatx.Table(str(core_path)).delete("part = 'b'")
    assert_same_commit(spark_path, core_path, r, c)
    assert r.metrics["numFilesRead"] == 0 and r.metrics["numDeletedRows"] == 30


@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_update_matches_core(spark, tmp_path, partitioned):
    spark_path, core_path = twin(tmp_path, partitioned)
    where, assign = "id >= 40 AND id < 50", {"value": "value * 2 + 1", "part": "'d'"}  # rows change partition
    r = SparkTable(spark, str(spark_path)).update(where, set=assign)
    c = deltatx.Table(str(core_path)).update(where, set=assign)
    assert_same_commit(spark_path, core_path, r, c)
    assert r.operation == "UPDATE" and r.metrics["numUpdatedRows"] == 10
    assert r.metrics["numRemovedFiles"] == 2
    if partitioned:
        assert all("part=b" in p for p in removed_paths(spark_path))


def test_update_rejects_unknown_column_before_any_job(spark, tmp_path):
    path = make_table(tmp_path / "t", partitioned=False)
    with pytest.raises(PredicateError):
        SparkTable(spark, str(path)).update("id = 1", set={"nope": "1"})
    with pytest.raises(ValueError):
        SparkTable(spark, str(path), max_tasks=0)
    deltatx.create_table("memory://dml-test", SCHEMA)
    with pytest.raises(DeltaTxError, match="executors run in other processes"):
        SparkTable(spark, "memory://dml-test")
    assert deltatx.Table(str(path)).version == 6


def _source(n_dup: int = 0) -> pa.Table:
    """ids 25..34 update (25, 26 are deleted by a clause), 200..202 are new; ``n_dup`` extra copies of id 33."""
    ids = list(range(25, 35)) + [200, 201, 202] + [33] * n_dup
    return pa.table({"id": ids, "part": ["a"] * len(ids), "value": [-i for i in ids]}, schema=SCHEMA)


def _clauses(builder):
    return (builder.when_matched_delete(condition="s.id < 27")
            .when_matched_update(set={"value": "s.value", "part": "t.part"})
            .when_not_matched_insert_all()
            .when_not_matched_by_source_update(set={"value": "t.value + 1"}, condition="t.id >= 85"))


@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_merge_matches_core(spark, tmp_path, partitioned):
    spark_path, core_path = twin(tmp_path, partitioned)
    source = _source()
    table = SparkTable(spark, str(spark_path), max_tasks=None if partitioned else 1)
    r = _clauses(table.merge(spark.createDataFrame(source), on="t.id = s.id")).execute()
    c = _clauses(deltatx.Table(str(core_path)).merge(source, on="t.id = s.id")).execute()
    assert_same_commit(spark_path, core_path, r, c)
    m = r.metrics
    assert (m["numTargetRowsMatchedDeleted"], m["numTargetRowsMatchedUpdated"], m["numTargetRowsInserted"],
            m["numTargetRowsNotMatchedBySourceUpdated"]) == (2, 8, 3, 5)
    assert m["numSourceRows"] == 13


def test_merge_into_empty_table_only_inserts(spark, tmp_path):
    spark_path, core_path = tmp_path / "spark", tmp_path / "core"
    for path in (spark_path, core_path):
        deltatx.create_table(str(path), SCHEMA, partition_by=["part"])
    source = _source()
    r = (SparkTable(spark, str(spark_path)).merge(spark.createDataFrame(source), on="t.id = s.id")
         .when_matched_delete().when_not_matched_insert_all(condition="s.id < 200").execute())
    c = (deltatx.Table(str(core_path)).merge(source, on="t.id = s.id")
         .when_matched_delete().when_not_matched_insert_all(condition="s.id < 200").execute())
    assert_same_commit(spark_path, core_path, r, c)
    assert r.metrics["numTargetRowsInserted"] == 10 and r.metrics["numTargetFilesRemoved"] == 0


def test_merge_with_schema_evolution_matches_core(spark, tmp_path):
    spark_path, core_path = twin(tmp_path, partitioned=True)
    source = pa.table({"id": [5, 31, 500], "part": ["a", "b", "c"], "value": [1, 2, 3], "note": ["x", "y", "z"]})
    r = (SparkTable(spark, str(spark_path)).merge(spark.createDataFrame(source.to_pandas()), on="t.id = s.id")
         .with_schema_evolution().when_matched_update_all().when_not_matched_insert_all().execute())
    c = (deltatx.Table(str(core_path)).merge(source, on="t.id = s.id")
         .with_schema_evolution().when_matched_update_all().when_not_matched_insert_all().execute())
    assert_same_commit(spark_path, core_path, r, c)
    assert deltatx.Table(str(spark_path)).schema.names == ["id", "part", "value", "note"]
    notes = {row["id"]: row["note"] for row in content(spark_path)}
    assert (notes[5], notes[31], notes[500], notes[6]) == ("x", "y", "z", None)


def test_merge_cardinality_violation_is_typed_and_commits_nothing(spark, tmp_path):
    path = make_table(tmp_path / "t", partitioned=True)
    before = parquet_files(path)
    merge = SparkTable(spark, str(path)).merge(spark.createDataFrame(_source(n_dup=1)), on="t.id = s.id")
    with pytest.raises(MergeCardinalityError, match="matched more than one source row"):
        merge.when_matched_update_all().execute()
    with pytest.raises(MergeCardinalityError):  # the core says the same
        deltatx.Table(str(path)).merge(_source(n_dup=1), on="t.id = s.id").when_matched_update_all().execute()
    assert deltatx.Table(str(path)).version == 6
    assert parquet_files(path) == before


# --------------------------------------------------------------------------------------------
# Failures leave nothing visible
# --------------------------------------------------------------------------------------------


def test_failed_insert_job_deletes_the_files_the_target_job_wrote(spark, tmp_path):
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("value", pa.int64())])
    path = tmp_path / "t"
    t = deltatx.create_table(str(path), schema)
    t.append(pa.table({"id": [1, 2, 3], "value": [10, 20, 30]}, schema=schema))
    before, rows = parquet_files(path), content(path)
    source = spark.createDataFrame([(2, -2), (9, -9)], "id long, value long")
    merge = (SparkTable(spark, str(path)).merge(source, on="t.id = s.id")
             .when_matched_update(set={"value": "s.value"})             # the first job rewrites a file
             .when_not_matched_insert(values={"value": "s.value"}))     # the second fails: id is NOT NULL
    with pytest.raises(SchemaMismatchError, match="NOT NULL"):
        merge.execute()
    assert deltatx.Table(str(path)).version == 1 and content(path) == rows
    assert parquet_files(path) == before


def test_failed_task_commits_nothing_and_raises_the_typed_error(spark, tmp_path):
    path = make_table(tmp_path / "t", partitioned=True)
    table = deltatx.Table(str(path))
    files_before = table.files().column("path").to_pylist()
    assert parquet_files(path) == set(files_before)
    victim = path / [p for p in files_before if "part=b" in p][0]
    kept_aside = tmp_path / "aside.parquet"
    shutil.move(victim, kept_aside)
    with pytest.raises(DataFileNotFoundError):
        SparkTable(spark, str(path)).update("value > 100", set={"value": "0"})  # parts a, b and c
    shutil.move(kept_aside, victim)
    assert parquet_files(path) == set(files_before)  # the other tasks' files were deleted
    after = deltatx.Table(str(path))
    assert after.version == 6 and after.files().column("path").to_pylist() == files_before
    assert content(path) == _all_rows()


def _all_rows() -> list[dict]:
    return pa.concat_tables([_rows(range(30 * k, 30 * k + 30), p) for k, p in enumerate("abc")]).sort_by("id").to_pylist()


# --------------------------------------------------------------------------------------------
# Conflicts are the core's
# --------------------------------------------------------------------------------------------


def _at_first_read(action):
    """An observer that runs ``action`` (a concurrent core commit) when the DML records its read."""
    fired: list[str] = []

    def observer(phase: str, **ctx) -> None:
        if phase == "read" and not fired:
            fired.append(ctx["txn_id"])
            action()

    return observer


def _outcome(run) -> tuple[str, int | None]:
    try:
        result = run()
    except (ConcurrentAppendException, ConcurrentDeleteReadException) as exc:
        return type(exc).__name__, exc.version
    return "committed", result.attempts


@pytest.mark.parametrize("level,concurrent,expected", [
    ("WriteSerializable", "append", "committed"),
    ("Serializable", "append", "ConcurrentAppendException"),
    ("WriteSerializable", "delete", "ConcurrentDeleteReadException"),
])
def test_concurrent_core_write_gets_the_core_outcome(spark, tmp_path, level, concurrent, expected):
    spark_path, core_path = twin(tmp_path, partitioned=True, properties={"delta.isolationLevel": level})
    where = "part = 'a' AND id < 5"

    def concurrent_write(path: Path):
        def run() -> None:
            other = deltatx.Table(str(path))
            if concurrent == "append":
                other.append(_rows(range(-3, 0), "a"))        # rows the DELETE would have matched
            else:
                other.delete("part = 'a' AND id < 15")       # removes a file the DELETE read
        return run

    before = parquet_files(spark_path)
    with phases.observe(_at_first_read(concurrent_write(spark_path))):
        spark_outcome = _outcome(lambda: SparkTable(spark, str(spark_path)).delete(where))
    with phases.observe(_at_first_read(concurrent_write(core_path))):
        core_outcome = _outcome(lambda: deltatx.Table(str(core_path)).delete(where))
    assert spark_outcome == core_outcome
    assert spark_outcome[0] == expected
    assert content(spark_path) == content(core_path)
    if expected != "committed":  # the loser's rewritten files are gone; only the winner's remain
        winner = set(last_commit(spark_path).adds.column("path").to_pylist())
        assert parquet_files(spark_path) == before | winner
