"""Tables written by deltatx, read by polars (``read_delta`` / ``scan_delta(version=)``) and by
DuckDB's delta extension (delta-kernel-rs underneath): partitioned and not, after replaceWhere,
deletes and updates, with checkpoints, with filters that make the readers skip files by our
partition values and min/max stats, and with partition values that need escaping in paths.
"""

from __future__ import annotations

import os
import shutil
from datetime import date

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import deltatx
from interop_helpers import (
    Model,
    assert_has_checkpoint,
    assert_same_rows,
    build_deltatx_table,
    duckdb_delta_extension,
    read_deltalake,
    read_duckdb,
    read_polars,
)


@pytest.fixture(scope="module", params=[True, False], ids=["partitioned", "unpartitioned"])
def deltatx_written(request, tmp_path_factory) -> tuple[str, Model]:
    uri = str(tmp_path_factory.mktemp("dtx") / "table")
    return uri, build_deltatx_table(uri, partitioned=request.param)


@pytest.fixture(scope="module")
def duck():
    import duckdb

    con = duckdb.connect()
    con.execute(f"LOAD '{duckdb_delta_extension()}'")
    yield con
    con.close()


# ------------------------------------------------------------------------------ polars
def test_polars_reads_latest(deltatx_written):
    uri, model = deltatx_written
    assert_same_rows(read_polars(uri), model.current, "polars latest")


def test_polars_time_travel_every_version(deltatx_written):
    uri, model = deltatx_written
    assert_has_checkpoint(uri)
    for version, expected in enumerate(model.versions):
        assert_same_rows(read_polars(uri, version=version), expected, f"polars v{version}")


FILTERS = [
    ("part = 2", pl.col("part") == 2, lambda tb: pc.equal(tb["part"], 2)),
    ("id > 70", pl.col("id") > 70, lambda tb: pc.greater(tb["id"], 70)),
    ("id BETWEEN 5 AND 9", pl.col("id").is_between(5, 9), lambda tb: pc.and_(pc.greater_equal(tb["id"], 5),
                                                                                 pc.less_equal(tb["id"], 9))),
    ("name = 'late2003'", pl.col("name") == "late2003", lambda tb: pc.equal(tb["name"], "late2003")),
    ("day >= DATE '2024-02-01'", pl.col("day") >= date(2024, 2, 1),
     lambda tb: pc.greater_equal(tb["day"], pa.scalar(date(2024, 2, 1)))),
    ("value IS NULL", pl.col("value").is_null(), lambda tb: pc.is_null(tb["value"])),
]


@pytest.mark.parametrize("sql, expr, mask", FILTERS, ids=[f[0] for f in FILTERS])
def test_filtered_reads_skip_files_correctly(deltatx_written, duck, sql, expr, mask):
    """polars and DuckDB prune files by our partition values and stats: wrong stats = lost rows."""
    uri, model = deltatx_written
    expected = model.current.filter(pc.fill_null(mask(model.current), False))
    assert_same_rows(pl.scan_delta(uri).filter(expr).collect().to_arrow(), expected, f"polars where {sql}")
    got = duck.execute(f"SELECT * FROM delta_scan(?) WHERE {sql}", [uri]).to_arrow_table()
    assert_same_rows(got, expected, f"duckdb where {sql}")


# ------------------------------------------------------------------------------ duckdb
def test_duckdb_reads_latest(deltatx_written, duck):
    uri, model = deltatx_written
    got = duck.execute("SELECT * FROM delta_scan(?)", [uri]).to_arrow_table()
    assert_same_rows(got, model.current, "duckdb latest")
    count, total = duck.execute("SELECT count(*), sum(id) FROM delta_scan(?)", [uri]).fetchone()
    assert (count, total) == (model.current.num_rows, pc.sum(model.current["id"]).as_py())


def test_readers_from_checkpoint_alone(deltatx_written, tmp_path):
    uri, model = deltatx_written
    copy = str(tmp_path / "copy")
    shutil.copytree(uri, copy)
    checkpoint = assert_has_checkpoint(copy)
    log = os.path.join(copy, "_delta_log")
    for name in os.listdir(log):
        if name.endswith(".json") and int(name.split(".")[0]) <= checkpoint:
            os.remove(os.path.join(log, name))
    assert_same_rows(read_polars(copy), model.current, "polars from checkpoint")
    assert_same_rows(read_duckdb(copy), model.current, "duckdb from checkpoint")


def test_duckdb_sees_each_write(tmp_path, duck):
    """DuckDB (a fresh scan each time) follows the table through overwrite, delete and update."""
    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("grp", pa.string()), ("v", pa.int64())])
    t = deltatx.create_table(uri, schema, partition_by=["grp"])

    def check(expected: list[tuple[int, str, int]], label: str) -> None:
        got = duck.execute("SELECT id, grp, v FROM delta_scan(?) ORDER BY id", [uri]).fetchall()
        assert got == expected, label

    t.append(pa.table({"id": [1, 2, 3, 4], "grp": ["a", "a", "b", "b"], "v": [10, 20, 30, 40]}, schema=schema))
    check([(1, "a", 10), (2, "a", 20), (3, "b", 30), (4, "b", 40)], "append")
    t.overwrite(pa.table({"id": [5], "grp": ["a"], "v": [50]}, schema=schema), where="grp = 'a'")
    check([(3, "b", 30), (4, "b", 40), (5, "a", 50)], "replaceWhere")
    t.delete(where="id = 3")
    check([(4, "b", 40), (5, "a", 50)], "delete")
    t.update(where="grp = 'b'", set={"v": "v + 1"})
    check([(4, "b", 41), (5, "a", 50)], "update")
    t.overwrite(pa.table({"id": [9], "grp": ["c"], "v": [90]}, schema=schema))
    check([(9, "c", 90)], "full overwrite")
    t.delete()
    check([], "delete all")


# ------------------------------------------------------------------------------ awkward partition values
AWKWARD = ["plain", "with space", "a/b", "k=v", "50%", "ü-ñ", "comma,semi;colon:", "#hash?q", None]


def test_awkward_partition_values_read_by_every_client(tmp_path, duck):
    """Partition values that must be escaped in folder names (and a null) round-trip everywhere."""
    uri = str(tmp_path / "awkward")
    schema = pa.schema([("id", pa.int64()), ("cat", pa.string()), ("day", pa.date32()), ("x", pa.float64())])
    n = len(AWKWARD)
    data = pa.table({
        "id": list(range(n * 2)),
        "cat": AWKWARD * 2,
        "day": [date(2024, 1, 1), None] * n,
        "x": [float(i) for i in range(n * 2)],
    }, schema=schema)
    t = deltatx.create_table(uri, schema, partition_by=["cat", "day"])
    t.append(data)
    t.delete(where="id = 0")
    expected = data.filter(pc.not_equal(data["id"], 0))
    assert_same_rows(t.to_arrow(), expected, "deltatx")
    assert_same_rows(read_deltalake(uri), expected, "deltalake")
    assert_same_rows(read_polars(uri), expected, "polars")
    assert_same_rows(duck.execute("SELECT * FROM delta_scan(?)", [uri]).to_arrow_table(), expected, "duckdb")
    got = duck.execute("SELECT id FROM delta_scan(?) WHERE cat = 'a/b' ORDER BY id", [uri]).fetchall()
    assert got == [(i,) for i in range(2 * n) if AWKWARD[i % n] == "a/b"]
    got = duck.execute("SELECT count(*) FROM delta_scan(?) WHERE cat IS NULL", [uri]).fetchone()
    assert got == (2,)
