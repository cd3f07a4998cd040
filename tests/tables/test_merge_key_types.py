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
