"""deltatx.spark.read of tables with deletion vectors through Spark's own Parquet reader.

The oracle of every test is ``deltatx.Table(uri).to_arrow()`` (deltatx's own DV reader, itself
checked against DuckDB and polars in tests/io). Tables are written with the core API and their
DVs committed byte for byte by tests/dvtables.py (inline, ``u`` and ``p`` storage) or by
deltatx's DELETE, so that only the reads cost Spark time.
"""

from __future__ import annotations

import datetime as dt
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from duckdb_delta import read_duckdb
from dvtables import add_deletion_vectors

import deltatx
import deltatx.spark as dspark
from deltatx.errors import CorruptDeletionVectorError, MissingDeletionVectorError, NativeUnavailableError
from deltatx.io.paths import decode_path
from deltatx.spark import native_dv
from deltatx.spark.native import unavailable_reason

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("value", pa.float64())])


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def _spark_rows(df, key: str = "id") -> list[dict]:
    return sorted((r.asDict() for r in df.collect()), key=lambda r: r[key])


def _oracle(uri: str, version: int | None = None, columns: list[str] | None = None) -> list[dict]:
    rows = deltatx.Table(uri, version=version).to_arrow(columns=columns).to_pylist()
    return sorted(rows, key=lambda r: r["id"])


def _append_files(table, count: int, rows_per_file: int, partitioned: bool = False) -> None:
    for f in range(count):
        ids = list(range(f * rows_per_file, (f + 1) * rows_per_file))
        table.append(pa.table({"id": ids, "part": [f"p{i % 2}" if partitioned else f"f{f}" for i in ids],
                               "value": [i * 0.5 for i in ids]}, schema=SCHEMA))


def _paths(uri: str) -> list[str]:
    """The snapshot's data file paths, ordered by their smallest id."""
    files = deltatx.Table(uri).files()
    order = sorted(range(files.num_rows), key=lambda i: min(
        pq.read_table(os.path.join(uri, decode_path(files["path"][i].as_py())), columns=["id"])["id"]
        .to_pylist()))
    return [files["path"][i].as_py() for i in order]


@pytest.fixture
def mixed_dvs(table_uri) -> str:
    """Five files of 200 rows: one with an inline DV, two sharing a ``u`` DV file, one with a
    ``p`` DV, one without. Deleted rows include the first and last row of a file and rows on
    both sides of a 64-row word boundary."""
    table = deltatx.create_table(table_uri, SCHEMA)
    _append_files(table, 5, 200)
    paths = _paths(table_uri)
    add_deletion_vectors(table_uri, {paths[0]: [0, 63, 64, 199]}, storage="i")
    add_deletion_vectors(table_uri, {paths[1]: [5, 6, 7, 128], paths[2]: list(range(0, 200, 3))}, storage="u")
    add_deletion_vectors(table_uri, {paths[3]: [150]}, storage="p")
    return table_uri


def test_the_native_read_of_a_dv_table_returns_the_live_rows(spark, mixed_dvs):
    assert unavailable_reason(deltatx.Table(mixed_dvs)) is None
    df = dspark.read(spark, mixed_dvs)  # auto: native now that DVs are applied on the JVM side
    plan = _plan(df)
    assert "FileScan parquet" in plan and "PythonDataSource" not in plan
    rows = _spark_rows(df)
    assert rows == _oracle(mixed_dvs)
    assert [r["id"] for r in rows] == sorted(read_duckdb(mixed_dvs)["id"].to_pylist())  # delta-kernel agrees
    ids = {r["id"] for r in rows}
    assert len(rows) == 1000 - 4 - 4 - 67 - 1
    assert {0, 63, 64, 199, 205, 206, 207, 328, 400, 403, 750} & ids == set()
    assert {1, 62, 65, 198, 200, 204, 208, 401, 749, 751, 800, 999} <= ids
    assert df.count() == len(rows) and df.where("id < 200").count() == 196


def test_selected_columns_and_filters_keep_the_deletes(spark, mixed_dvs):
    df = dspark.read(spark, mixed_dvs, columns=["value", "id"])
    assert df.columns == ["value", "id"]
    assert _spark_rows(df) == _oracle(mixed_dvs, columns=["value", "id"])
    assert dspark.read(spark, mixed_dvs).select("value").agg({"value": "sum"}).collect()[0][0] == \
        sum(r["value"] for r in _oracle(mixed_dvs))


def test_time_travel_before_and_after_the_dvs(spark, mixed_dvs):
    before = dspark.read(spark, mixed_dvs, version=5, engine="parquet")  # the 5 appends, no DV yet
    assert [r["id"] for r in _spark_rows(before)] == list(range(1000))
    middle = dspark.read(spark, mixed_dvs, version=6, engine="parquet")  # only the inline DV
    assert _spark_rows(middle) == _oracle(mixed_dvs, version=6) and middle.count() == 996


def test_partitioned_table_with_dvs_in_some_partitions(spark, table_uri):
    schema = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("region", pa.string())])
    table = deltatx.create_table(table_uri, schema, partition_by=["day", "region"],
                                 properties={"delta.enableDeletionVectors": "true"})
    for low in (0, 300):
        ids = list(range(low, low + 300))
        table.append(pa.table({"id": ids, "day": [dt.date(2024, 1, 1 + i % 2) for i in ids],
                               "region": [None if i % 3 == 0 else f"r{i % 3}" for i in ids]}, schema=schema))
    table.delete("id % 7 = 0 AND region = 'r1'")  # DVs on some files of some partitions
    files = deltatx.Table(table_uri).files()
    with_dv = sum(d is not None for d in files["deletionVector"].to_pylist())
    assert 0 < with_dv < files.num_rows
    df = dspark.read(spark, table_uri, engine="parquet")
    assert _spark_rows(df) == _oracle(table_uri)
    assert sorted(r["id"] for r in _spark_rows(df)) == sorted(read_duckdb(table_uri)["id"].to_pylist())
    assert df.where("region = 'r1' AND day = DATE'2024-01-02'").count() == len(
        [r for r in _oracle(table_uri) if r["region"] == "r1" and r["day"] == dt.date(2024, 1, 2)])
    assert df.where("region IS NULL").count() == 200  # the null partition keeps its nullable literal


def test_deltatx_delete_with_dvs_then_native_read(spark, table_uri):
    table = deltatx.create_table(table_uri, SCHEMA, properties={"delta.enableDeletionVectors": "true"})
    _append_files(table, 3, 1000)
    table.delete("id % 100 = 7")
    table.delete("id >= 2990")
    assert all(d is not None for d in deltatx.Table(table_uri).files()["deletionVector"].to_pylist())
    df = dspark.read(spark, table_uri, engine="parquet")
    assert _spark_rows(df) == _oracle(table_uri)
    assert df.count() == 3000 - 30 - 10


def test_files_of_equal_size_are_told_apart(spark, table_uri):
    """Identical small files have identical sizes: the row keys cannot tell them apart, so they
    go to separate filters/joins."""
    table = deltatx.create_table(table_uri, SCHEMA)
    for _ in range(3):
        table.append(pa.table({"id": [1, 2, 3], "part": ["a"] * 3, "value": [0.5] * 3}, schema=SCHEMA))
    paths = deltatx.Table(table_uri).files()["path"].to_pylist()
    assert len({os.path.getsize(os.path.join(table_uri, decode_path(p))) for p in paths}) == 1
    add_deletion_vectors(table_uri, {paths[0]: [0], paths[1]: [1, 2]}, storage="u")
    # live: file 0 keeps ids 2, 3; file 1 keeps 1; file 2 keeps all (one DV applied to every
    # file of that size would leave 2, 3 three times)
    assert sorted(r["id"] for r in _oracle(table_uri)) == [1, 1, 2, 2, 3, 3]
    for words in (native_dv.MAX_BITMAP_WORDS, 0):  # the bitmap filters, then the joins
        native_dv.MAX_BITMAP_WORDS, saved = words, native_dv.MAX_BITMAP_WORDS
        try:
            df = dspark.read(spark, table_uri, engine="parquet")
            assert sorted(r.id for r in df.collect()) == [1, 1, 2, 2, 3, 3]
        finally:
            native_dv.MAX_BITMAP_WORDS = saved


@pytest.mark.parametrize("max_words, max_files, paths", [(0, 32, {"join"}), (6, 1, {"join", "bitmap"}),
                                                          (1 << 20, 1, {"bitmap"})])
def test_the_join_path_and_small_filters_return_the_same_rows(spark, mixed_dvs, monkeypatch, max_words, max_files,
                                                              paths):
    """Each DV's bitmap takes 5 words (200 rows, then a zero word). (0, 32): every file is
    anti-joined; (6, 1): one file per bitmap filter while the budget lasts (one), the rest
    joined; (2**20, 1): one bitmap filter per file."""
    monkeypatch.setattr(native_dv, "MAX_BITMAP_WORDS", max_words)
    monkeypatch.setattr(native_dv, "MAX_BITMAP_FILES", max_files)
    df = dspark.read(spark, mixed_dvs, engine="parquet")
    plan = _plan(df)
    assert {p for p, marker in (("join", "BroadcastHashJoin"), ("bitmap", "Subquery")) if marker in plan} == paths
    assert _spark_rows(df) == _oracle(mixed_dvs)


def test_join_path_on_a_partitioned_table_with_equal_sizes(spark, table_uri, monkeypatch):
    monkeypatch.setattr(native_dv, "MAX_BITMAP_WORDS", 0)
    table = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    for _ in range(2):
        table.append(pa.table({"id": [1, 2, 3, 4], "part": ["a", "a", "b", "b"], "value": [1.0] * 4}, schema=SCHEMA))
    files = deltatx.Table(table_uri).files()
    add_deletion_vectors(table_uri, {p: [0] for p in files["path"].to_pylist()}, storage="i")
    df = dspark.read(spark, table_uri, engine="parquet")
    assert "BroadcastHashJoin" in _plan(df)
    assert _spark_rows(df) == _oracle(table_uri) and df.count() == 4


def test_a_missing_dv_file_raises_typed_and_changes_nothing(spark, table_uri):
    table = deltatx.create_table(table_uri, SCHEMA)
    _append_files(table, 1, 10)
    path = table.files()["path"][0].as_py()
    version = add_deletion_vectors(table_uri, {path: [1, 2]}, storage="u")
    os.remove(next(os.path.join(table_uri, "dv", n) for n in os.listdir(os.path.join(table_uri, "dv"))))
    with pytest.raises(MissingDeletionVectorError, match="deletion vector file"):
        dspark.read(spark, table_uri, engine="parquet")
    with pytest.raises(MissingDeletionVectorError):
        dspark.read(spark, table_uri)  # auto raises it too: returning the deleted rows is never an option
    assert deltatx.Table(table_uri).version == version


def test_files_too_long_for_the_row_keys_use_the_format(spark, mixed_dvs, monkeypatch):
    monkeypatch.setattr(native_dv, "MAX_ROWS_PER_FILE", 200)
    reason = unavailable_reason(deltatx.Table(mixed_dvs))
    assert reason is not None and "deletion vector and 200 rows or more" in reason
    with pytest.raises(NativeUnavailableError, match="200 rows or more"):
        dspark.read(spark, mixed_dvs, engine="parquet")
    fallback = dspark.read(spark, mixed_dvs)
    assert "FileScan parquet" not in _plan(fallback)
    assert _spark_rows(fallback) == _oracle(mixed_dvs)


def test_wrong_row_counts_never_delete_another_files_rows(spark, mixed_dvs, monkeypatch):
    """The bitmaps are sized by numRecords: a file longer than its statistic says reads its own
    zero word past the end, a shorter one a longer bitmap; the other files' bits are never read."""
    ordered = _paths(mixed_dvs)
    short = {os.path.basename(decode_path(ordered[i])) for i in (1, 3)}  # their last deleted rows: 128, 150

    def skewed(files, paths):
        return [151 if os.path.basename(p) in short else 400 for p in paths]

    monkeypatch.setattr(native_dv, "row_counts", skewed)
    df = dspark.read(spark, mixed_dvs, engine="parquet")
    assert "Subquery" in _plan(df)
    assert _spark_rows(df) == _oracle(mixed_dvs)


def test_a_dv_past_the_end_of_its_file_raises_typed(spark, table_uri):
    table = deltatx.create_table(table_uri, SCHEMA)
    _append_files(table, 1, 10)
    version = add_deletion_vectors(table_uri, {table.files()["path"][0].as_py(): [2, 12]}, storage="i")
    with pytest.raises(CorruptDeletionVectorError, match="deletes row 12, but the file has 10 rows"):
        dspark.read(spark, table_uri, engine="parquet")
    with pytest.raises(CorruptDeletionVectorError):
        deltatx.Table(table_uri).to_arrow()  # what deltatx's own reader says too
    assert deltatx.Table(table_uri).version == version


def test_a_session_without_py4j_cannot_read_dvs_natively(mixed_dvs):
    """Spark Connect sessions have no JVM at hand: the native DV read says so (auto then uses
    the format) before it touches the session."""
    from types import SimpleNamespace

    from deltatx.spark.native import native_dataframe

    with pytest.raises(NativeUnavailableError, match="Spark Connect"):
        native_dataframe(SimpleNamespace(), deltatx.Table(mixed_dvs))


# ------------------------------------------------------------------ the pure helpers


def test_bitmap_words_hold_exactly_the_deleted_rows():
    words = native_dv.bitmap(np.array([3, 63, 64, 200, 1000], dtype=np.uint64), 1001, "f")
    assert len(words) == native_dv.bitmap_words(1001) == 1001 // 64 + 1 + 1
    bits = [w * 64 + b for w, word in enumerate(words.view(np.uint64).tolist()) for b in range(64) if word >> b & 1]
    assert bits == [3, 63, 64, 200, 1000] and words[-1] == 0
    assert native_dv.bitmap_words(0) == 1 and native_dv.bitmap_words(64) == 2 and native_dv.bitmap_words(65) == 3
    with pytest.raises(CorruptDeletionVectorError, match="deletes row 1000, but the file has 1000 rows"):
        native_dv.bitmap(np.array([1000], dtype=np.uint64), 1000, "f")


def test_size_groups_and_keys():
    assert native_dv.size_groups([5, 7, 5, 5, 7, 9]) == [[0, 1, 5], [2, 4], [3]]
    assert native_dv.size_groups([1, 1 + (1 << 32)], (1 << 32) - 1) == [[0], [1]]
    assert native_dv.size_groups([1, 1 + (1 << 32)]) == [[0, 1]]
    keys = native_dv.deleted_keys([3, (1 << 31) + 1], [np.array([0, 7], np.uint64), np.array([2], np.uint64)])
    assert keys.column(native_dv.KEY_COLUMN).to_pylist() == [
        3 << 32, (3 << 32) | 7, ((1 << 31) + 1 << 32 | 2) - (1 << 64)]  # as Spark's signed longs
