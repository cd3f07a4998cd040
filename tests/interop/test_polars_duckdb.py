"""Tables written by deltatx, read by polars (``read_delta`` / ``scan_delta(version=)``) and by
DuckDB's delta extension (delta-kernel-rs underneath): partitioned and not, after replaceWhere,
deletes and updates, with checkpoints, with filters that make the readers skip files by our
partition values and min/max stats, and with partition values that need escaping in paths.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import deltatx
from deltatx.io.encodings import DELTA, SAMPLE_ROWS
from interop_helpers import (
    Model,
    assert_has_checkpoint,
    copy_with_checkpoint_only,
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


LATE_TS = datetime(2024, 1, 2, 10, 1, 28, 2008, tzinfo=timezone.utc)  # row 2008: max ts of its file

# (label, SQL for deltatx and DuckDB, polars expression, pyarrow mask for the model)
FILTERS = [
    ("part = 2", pl.col("part") == 2, lambda tb: pc.equal(tb["part"], 2)),
    ("id > 70", pl.col("id") > 70, lambda tb: pc.greater(tb["id"], 70)),
    ("id < 40", pl.col("id") < 40, lambda tb: pc.less(tb["id"], 40)),
    ("id BETWEEN 5 AND 9", pl.col("id").is_between(5, 9), lambda tb: pc.and_(pc.greater_equal(tb["id"], 5),
                                                                                 pc.less_equal(tb["id"], 9))),
    ("name = 'late2003'", pl.col("name") == "late2003", lambda tb: pc.equal(tb["name"], "late2003")),
    ("day >= DATE '2024-02-01'", pl.col("day") >= date(2024, 2, 1),
     lambda tb: pc.greater_equal(tb["day"], pa.scalar(date(2024, 2, 1)))),
    # stats hold milliseconds: the file's max (…28.002) is below this row's value (…28.002008)
    ("ts >= TIMESTAMP '2024-01-02 10:01:28.002008+00:00'", pl.col("ts") >= LATE_TS,
     lambda tb: pc.greater_equal(tb["ts"], pa.scalar(LATE_TS, pa.timestamp("us", tz="UTC")))),
    ("value IS NULL", pl.col("value").is_null(), lambda tb: pc.is_null(tb["value"])),
]


@pytest.mark.parametrize("sql, expr, mask", FILTERS, ids=[f[0] for f in FILTERS])
def test_filtered_reads_skip_files_correctly(deltatx_written, duck, sql, expr, mask):
    """deltatx, polars and DuckDB prune files by our partition values and stats: wrong stats (or
    wrong pruning) = lost rows."""
    uri, model = deltatx_written
    expected = model.current.filter(pc.fill_null(mask(model.current), False))
    assert expected.num_rows, "each filter keeps some rows"
    assert_same_rows(deltatx.Table(uri).to_arrow(where=sql), expected, f"deltatx where {sql}")
    assert_same_rows(pl.scan_delta(uri).filter(expr).collect().to_arrow(), expected, f"polars where {sql}")
    got = duck.execute(f"SELECT * FROM delta_scan(?) WHERE {sql}", [uri]).to_arrow_table()
    assert_same_rows(got, expected, f"duckdb where {sql}")


def test_truncated_string_stats_do_not_lose_rows(tmp_path, duck):
    """Long string min/max are stored truncated; every reader must still find every value."""
    uri = str(tmp_path / "strings")
    schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    values = ["z" * 40 + "a", "z" * 40 + "b", "\U0010ffff" * 40 + "x", "ÿ" * 50, "a", "zz"]
    t = deltatx.create_table(uri, schema)
    for i in range(0, len(values), 2):
        t.append(pa.table({"id": [i, i + 1], "s": values[i:i + 2]}, schema=schema))
    for v in values:
        for op in ("=", ">=", "<="):
            want = sorted(i for i, x in enumerate(values) if (x == v if op == "=" else x >= v if op == ">=" else x <= v))
            pl_expr = {"=": pl.col("s") == v, ">=": pl.col("s") >= v, "<=": pl.col("s") <= v}[op]
            assert sorted(pl.scan_delta(uri).filter(pl_expr).collect()["id"].to_list()) == want, (op, v)
            got = duck.execute(f"SELECT id FROM delta_scan(?) WHERE s {op} ? ORDER BY id", [uri, v]).fetchall()
            assert [g[0] for g in got] == want, (op, v)
            literal = "'" + v.replace("'", "''") + "'"
            assert sorted(t.to_arrow(where=f"s {op} {literal}")["id"].to_pylist()) == want, (op, v)


# ------------------------------------------------------------------------------ duckdb
def test_duckdb_reads_latest(deltatx_written, duck):
    uri, model = deltatx_written
    got = duck.execute("SELECT * FROM delta_scan(?)", [uri]).to_arrow_table()
    assert_same_rows(got, model.current, "duckdb latest")
    count, total = duck.execute("SELECT count(*), sum(id) FROM delta_scan(?)", [uri]).fetchone()
    assert (count, total) == (model.current.num_rows, pc.sum(model.current["id"]).as_py())


def test_readers_from_checkpoint_alone(deltatx_written, tmp_path):
    uri, model = deltatx_written
    copy = copy_with_checkpoint_only(uri, str(tmp_path / "copy"))
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


# ------------------------------------------------------------------------------ types
TYPED = pa.schema([
    ("id", pa.int64()),
    ("ts", pa.timestamp("us", tz="UTC")),
    ("flag", pa.bool_()),
    ("big", pa.int64()),
    ("dec", pa.decimal128(10, 2)),
    ("f32", pa.float32()),
    ("i8", pa.int8()),
    ("i16", pa.int16()),
    ("bin", pa.binary()),
    ("ntz", pa.timestamp("us")),
    ("l", pa.list_(pa.int32())),
    ("s", pa.struct([("a", pa.int32()), ("b", pa.string())])),
    ("m", pa.map_(pa.string(), pa.int64())),
])


def typed_rows() -> pa.Table:
    utc = timezone.utc
    return pa.table({
        "id": [1, 2, 3, 4],
        "ts": [datetime(2024, 1, 1, 12, 30, 15, 123456, tzinfo=utc), datetime(1999, 12, 31, tzinfo=utc), None,
               datetime(2024, 1, 1, 12, 30, 15, 123456, tzinfo=utc)],
        "flag": [True, False, None, True],
        "big": [2**40, -5, None, 2**40],
        "dec": [Decimal("1.50"), Decimal("-2.25"), None, Decimal("1.50")],
        "f32": [1.5, None, -0.25, 3.0],
        "i8": [1, None, -128, 127],
        "i16": [2, None, -32768, 32767],
        "bin": [b"\x00\x01", None, b"", b"\xff"],
        "ntz": [datetime(2024, 1, 1), None, datetime(1970, 1, 1), datetime(2038, 1, 19, 3, 14, 8)],
        "l": [[1, 2], None, [], [None, 3]],
        "s": [{"a": 1, "b": "x"}, None, {"a": None, "b": None}, {"a": 4, "b": "y"}],
        "m": [[("k", 1)], None, [], [("a", 1), ("b", None)]],
    }, schema=TYPED)


@pytest.mark.parametrize("partition_by", [[], ["ts"], ["flag", "big"], ["dec"]], ids=lambda p: "+".join(p) or "none")
def test_types_read_by_every_client(tmp_path, duck, partition_by):
    """Nested, decimal, small-int, binary, timestamp-without-timezone columns, and partition
    columns of timestamp/bool/int64/decimal type (with nulls), through a checkpoint."""
    uri = str(tmp_path / "typed")
    data = typed_rows()
    t = deltatx.create_table(uri, TYPED, partition_by=partition_by,
                             properties={"delta.checkpointInterval": "2"})
    t.append(data.slice(0, 2))
    t.append(data.slice(2))  # version 2: checkpoint
    assert_has_checkpoint(uri)
    assert_same_rows(t.to_arrow(), data, "deltatx")
    assert_same_rows(read_deltalake(uri), data, "deltalake")
    assert_same_rows(read_polars(uri), data, "polars")
    assert_same_rows(duck.execute("SELECT * FROM delta_scan(?)", [uri]).to_arrow_table(), data, "duckdb")
    assert_same_rows(read_polars(uri, version=1), data.slice(0, 2), "polars v1")


def test_delta_encoded_columns_are_read_by_every_client(tmp_path, duck):
    """Large files write sorted ids, times and dates DELTA_BINARY_PACKED (io/encodings.py):
    deltalake, polars and DuckDB read them, with a deletion vector on top, and skip by stats."""
    n = SAMPLE_ROWS * 4
    ids = np.arange(n, dtype=np.int64)
    data = pa.table({
        "id": ids,
        "at": pa.array(ids * 1_000_000 + 1_700_000_000_000_000, pa.timestamp("us", "UTC")),
        "day": pa.array((ids // 7).astype(np.int32), pa.int32()).cast(pa.date32()),
        "small": pa.array((ids % 50_000).astype(np.int32), pa.int32()),
        "v": pa.array(np.random.default_rng(3).random(n)),
    })
    uri = str(tmp_path / "delta_encoded")
    t = deltatx.create_table(uri, data.schema, properties={"delta.enableDeletionVectors": "true"})
    t.append(data)
    path = f"{uri}/{t.files()['path'][0].as_py()}"
    group = pq.ParquetFile(path).metadata.row_group(0)
    used = {group.column(i).path_in_schema: group.column(i).encodings for i in range(group.num_columns)}
    assert all(DELTA in used[c] for c in ("id", "at", "day", "small")), used
    t.delete(where="id = 1234 OR id = 40000")
    expected = data.filter(pc.invert(pc.is_in(data["id"], pa.array([1234, 40000], pa.int64()))))
    assert_same_rows(read_deltalake(uri), expected, "deltalake")
    assert_same_rows(read_polars(uri), expected, "polars")
    assert_same_rows(duck.execute("SELECT * FROM delta_scan(?)", [uri]).to_arrow_table(), expected, "duckdb")
    picked = duck.execute("SELECT id, small FROM delta_scan(?) WHERE id BETWEEN 39999 AND 40001", [uri]).fetchall()
    assert sorted(picked) == [(39999, 39999), (40001, 40001)]
