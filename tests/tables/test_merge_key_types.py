"""MERGE join keys as Spark joins them: in the keys' common type, floats normalized."""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import PredicateError


def test_double_keys_match_minus_zero_with_zero_and_nan_with_nan(tmp_path):
    t = deltatx.create_table(str(tmp_path / "t"), pa.schema([("k", pa.float64()), ("v", pa.int64())]))
    t.append(pa.table({"k": [0.0, 5.0, float("nan")], "v": [1, 2, 3]}))
    src = pa.table({"k": [-0.0, float("nan")], "v": [100, 300]})
    t.merge(src, on="t.k = s.k").when_matched_update(set={"v": "s.v"}).when_not_matched_insert_all().execute()
    rows = sorted(t.to_arrow().to_pylist(), key=lambda r: r["v"])
    assert [r["v"] for r in rows] == [2, 100, 300]  # two updated, nothing inserted (Spark)


def test_string_key_joins_a_bigint_key_as_a_number(tmp_path):
    t = deltatx.create_table(str(tmp_path / "t"), pa.schema([("id", pa.string()), ("v", pa.int64())]))
    t.append(pa.table({"id": ["05", "6", " 7"], "v": [1, 2, 3]}))
    src = pa.table({"id": pa.array([5, 7, 8], pa.int64()), "v": [50, 70, 80]})
    t.merge(src, on="t.id = s.id").when_matched_update(set={"v": "s.v"}).execute()
    assert sorted((r["id"], r["v"]) for r in t.to_arrow().to_pylist()) == [(" 7", 70), ("05", 50), ("6", 2)]


def test_string_key_that_is_no_number_fails_as_in_spark(tmp_path):
    t = deltatx.create_table(str(tmp_path / "t"), pa.schema([("id", pa.string()), ("v", pa.int64())]))
    t.append(pa.table({"id": ["abc"], "v": [1]}))
    src = pa.table({"id": pa.array([5], pa.int64()), "v": [50]})
    with pytest.raises(PredicateError):
        t.merge(src, on="t.id = s.id").when_matched_update(set={"v": "s.v"}).execute()
    assert t.to_arrow()["v"].to_pylist() == [1]


@pytest.mark.parametrize("zone", [None, "UTC"], ids=["timestamp_ntz", "timestamp"])
def test_a_date_key_joins_a_timestamp_key_as_midnight(tmp_path, zone):
    """Spark compares DATE with a timestamp in the timestamp type: only a source row at midnight
    matches the target's date. The source key was cast to DATE instead (its time dropped): two
    rows of one day matched one target row, and 23:59 matched its date."""
    import datetime as dt

    schema = pa.schema([("k", pa.date32()), ("v", pa.string())])
    source = pa.table({"k": pa.array([dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, 5),
                                      dt.datetime(2024, 1, 2, 23, 59)], pa.timestamp("us", tz=zone)),
                       "v": ["midnight", "five", "late"]})
    t = deltatx.create_table(str(tmp_path / "t"), schema)
    t.append(pa.table({"k": [dt.date(2024, 1, 1), dt.date(2024, 1, 2)], "v": ["a", "b"]}, schema=schema))
    result = t.merge(source, on="t.k = s.k").when_matched_update({"v": "s.v"}).execute()
    assert result.metrics["numTargetRowsUpdated"] == 1
    assert sorted(deltatx.Table(t.uri).to_arrow()["v"].to_pylist()) == ["b", "midnight"]
    assert t.to_arrow(where="k = TIMESTAMP_NTZ '2024-01-02 23:59:00'").num_rows == 0
    assert t.to_arrow(where="k = TIMESTAMP_NTZ '2024-01-02 00:00:00'")["v"].to_pylist() == ["b"]


def test_integers_meet_float_keys_and_values_as_double(tmp_path):
    """Spark's ANSI coercion skips FLOAT when it widens: BIGINT 16777217 is not FLOAT 16777216.0
    (FLOAT would round the integer to it). Joins and predicates alike."""
    schema = pa.schema([("k", pa.int64()), ("i", pa.int32()), ("f", pa.float32())])
    t = deltatx.create_table(str(tmp_path / "t"), schema)
    t.append(pa.table({"k": [16777217, 3], "i": [16777217, 3], "f": [16777216.0, 3.0]}, schema=schema))
    assert t.to_arrow(where="i = f")["k"].to_pylist() == [3]
    assert t.to_arrow(where="k > f")["k"].to_pylist() == [16777217]
    source = pa.table({"k": pa.array([16777216.0, 3.0], pa.float32()), "f": pa.array([1.0, 2.0], pa.float32())})
    result = t.merge(source, on="t.k = s.k").when_matched_update({"f": "s.f"}).execute()
    assert result.metrics["numTargetRowsUpdated"] == 1
    assert deltatx.Table(t.uri).to_arrow(where="k = 3")["f"].to_pylist() == [2.0]
