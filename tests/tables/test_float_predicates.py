"""Predicates on float columns read, delete and update the rows Spark would.

Spark (and so Delta) compares floats with NaN equal to itself and above every other number, and
-0.0 equal to 0.0. Arrow compares by IEEE, and its Parquet scan judges row groups by min/max
statistics that leave NaN out — a group holding [-1.5, NaN] looks like the constant -1.5, so
``isnan(x)`` or ``x != -1.5`` would skip its NaN row. Each case below builds exactly such files
(several rows per file, one row group each) and checks every way rows are selected.
"""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

import deltatx

NAN = float("nan")
SCHEMA = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("y", pa.float32())])
# file 1: x's non-NaN values all -1.5 (Parquet min == max == -1.5); file 2: 0.0 and NaN
# (Parquet min -0.0, max 0.0); file 3: no NaN; file 4: NULLs
FILES = [
    {"id": [1, 2, 3], "x": [-1.5, NAN, -1.5], "y": [1.0, NAN, 2.0]},
    {"id": [4, 5], "x": [0.0, NAN], "y": [0.0, NAN]},
    {"id": [6, 7], "x": [-0.0, 3.0], "y": [-0.0, 3.0]},
    {"id": [8, 9], "x": [None, NAN], "y": [None, 5.0]},
]

CASES = [
    ("isnan(x)", [2, 5, 9]),
    ("x != -1.5", [2, 4, 5, 6, 7, 9]),  # NaN != -1.5 (IEEE agrees; Arrow's row-group skip did not)
    ("x > 1.0", [2, 5, 7, 9]),  # NaN is the largest value
    ("x >= 3.0", [2, 5, 7, 9]),
    ("x < 1.0", [1, 3, 4, 6]),  # NaN is not below anything; NULL is never selected
    ("x <= -1.5", [1, 3]),
    ("x = 0.0", [4, 6]),  # -0.0 = 0.0
    ("x IN (0.0)", [4, 6]),  # the same for IN (a hash lookup tells -0.0 from 0.0)
    ("x IN (-0.0, 3.0)", [4, 6, 7]),
    ("x = CAST('NaN' AS DOUBLE)", [2, 5, 9]),  # NaN = NaN
    ("NOT (x = -1.5)", [2, 4, 5, 6, 7, 9]),
    ("x <=> CAST('NaN' AS DOUBLE)", [2, 5, 9]),
    ("y > x", [1, 3]),  # a column against a column: NaN > -1.5 but not NaN > NaN
    ("y >= x", [1, 2, 3, 4, 5, 6, 7]),
    ("x IS NULL", [8]),
]


@pytest.fixture
def table_with_nan(table_uri) -> str:
    t = deltatx.create_table(table_uri, SCHEMA)
    for rows in FILES:
        t.append(pa.table(rows, schema=SCHEMA))
    return table_uri


@pytest.mark.parametrize("where, expected", CASES)
def test_reads_select_what_spark_selects(table_with_nan, where, expected):
    t = deltatx.Table(table_with_nan)
    assert sorted(t.to_arrow(where=where)["id"].to_pylist()) == expected
    assert sorted(t.to_arrow(where=where, columns=["id"])["id"].to_pylist()) == expected  # a narrow projection
    with t.transaction() as tx:
        assert sorted(tx.read(where=where)["id"].to_pylist()) == expected


@pytest.mark.parametrize("deletion_vectors", [False, True])
@pytest.mark.parametrize("where, expected", CASES)
def test_delete_and_update_change_what_spark_changes(tmp_path, where, expected, deletion_vectors):
    props = {"delta.enableDeletionVectors": "true"} if deletion_vectors else {}
    deleted = deltatx.create_table(str(tmp_path / "d"), SCHEMA, properties=props)
    updated = deltatx.create_table(str(tmp_path / "u"), SCHEMA, properties=props)
    for rows in FILES:
        deleted.append(pa.table(rows, schema=SCHEMA))
        updated.append(pa.table(rows, schema=SCHEMA))
    deleted.delete(where)
    left = deltatx.Table(str(tmp_path / "d")).to_arrow()["id"].to_pylist()
    assert sorted(set(range(1, 10)) - set(left)) == expected
    updated.update(where=where, set={"id": "id + 100"})
    ids = deltatx.Table(str(tmp_path / "u")).to_arrow()["id"].to_pylist()
    assert sorted(i - 100 for i in ids if i > 100) == expected


def test_nan_values_come_back_as_nan(table_with_nan):
    values = dict(zip(*deltatx.Table(table_with_nan).to_arrow().select(["id", "x"]).to_pydict().values()))
    assert math.isnan(values[2]) and values[8] is None and values[6] == 0.0


def test_a_decimal_literal_meets_a_double_column_as_the_nearest_double(tmp_path):
    """``f = 0.3`` is the DECIMAL 0.3 cast to DOUBLE as Spark casts it (the nearest double).
    Arrow's DECIMAL cast scales in floating point and gave 0.30000000000000004: reads, DELETE
    and UPDATE then matched no row and ``SET f = 0.3`` stored the wrong value."""
    schema = pa.schema([("id", pa.int64()), ("f", pa.float64()), ("g", pa.float32())])
    t = deltatx.create_table(str(tmp_path / "t"), schema)
    t.append(pa.table({"id": [1, 2, 3], "f": [0.3, 2.3, 0.7], "g": [0.3, 2.3, 0.7]}, schema=schema))
    assert t.to_arrow(where="f = 0.3")["id"].to_pylist() == [1]
    assert t.to_arrow(where="f >= 0.7 AND f <= 0.7")["id"].to_pylist() == [3]
    assert t.to_arrow(where="f IN (2.3, 9.9)")["id"].to_pylist() == [2]
    # FLOAT meets DECIMAL in DOUBLE (Spark): the float nearest 0.3 is not 0.3 there
    assert t.to_arrow(where="g = 0.3")["id"].to_pylist() == []
    assert t.to_arrow(where="g = CAST(0.3 AS FLOAT)")["id"].to_pylist() == [1]
    assert t.delete(where="f = 2.3").metrics["numDeletedRows"] == 1
    t.update(where="id = 1", set={"f": "0.1", "g": "0.1"})
    row = t.to_arrow(where="id = 1").to_pylist()[0]
    assert row["f"] == 0.1 and pa.scalar(row["g"], pa.float32()) == pa.scalar(0.1, pa.float32())
    assert t.to_arrow(where="f = 0.1")["id"].to_pylist() == [1]


def test_a_decimal_column_compared_with_a_double_column_uses_the_nearest_double(tmp_path):
    from decimal import Decimal

    schema = pa.schema([("d", pa.decimal128(10, 2)), ("f", pa.float64())])
    t = deltatx.create_table(str(tmp_path / "t"), schema)
    t.append(pa.table({"d": [Decimal("0.30"), Decimal("2.30")], "f": [0.3, 2.31]}, schema=schema))
    assert t.to_arrow(where="d = f")["f"].to_pylist() == [0.3]
