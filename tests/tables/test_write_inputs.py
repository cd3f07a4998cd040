"""What a write accepts as input and what it refuses: nothing is dropped without a word (a named
pandas index, a second column of one name, a nested field the table lacks), and a column whose
Arrow type Delta has no name for still goes into a typed column when its values fit."""

from __future__ import annotations

import os

import pandas as pd
import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import SchemaMismatchError


def _versions(uri: str) -> list[str]:
    return sorted(f for f in os.listdir(os.path.join(uri, "_delta_log")) if f.endswith(".json"))


def test_a_named_pandas_index_is_a_column(tmp_path):
    t = deltatx.create_table(str(tmp_path / "t"), pa.schema([("key", pa.int64()), ("id", pa.int64())]))
    t.append(pd.DataFrame({"id": [1, 2]}, index=pd.Index([10, 20], name="key")))
    t.append(pd.DataFrame({"id": [3], "key": [30]}))  # an unnamed index is row numbering only
    assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"key": 10, "id": 1}, {"key": 20, "id": 2}, {"key": 30, "id": 3}]
    source = pd.DataFrame({"key": [99]}, index=pd.Index([1], name="id"))
    t.merge(source, on="t.id = s.id").when_matched_update_all().execute()
    assert t.to_arrow(where="id = 1")["key"].to_pylist() == [99]


def test_a_column_given_twice_is_refused(tmp_path):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, pa.schema([("id", pa.int64()), ("x", pa.int64())]))
    twice = pa.Table.from_arrays([pa.array([1]), pa.array([2]), pa.array([3])], names=["id", "id", "x"])
    before = _versions(uri)
    for write in (lambda: t.append(twice), lambda: t.overwrite(twice),
                  lambda: t.merge(twice, on="t.id = s.id").when_not_matched_insert_all().execute()):
        with pytest.raises(SchemaMismatchError, match="'id' more than once"):
            write()
    assert _versions(uri) == before and t.to_arrow().num_rows == 0


def test_a_nested_field_the_table_lacks_is_refused_or_merged(tmp_path):
    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("s", pa.struct([("a", pa.int64())]))])
    t = deltatx.create_table(uri, schema)
    wider = pa.table({"id": [1], "s": [{"a": 1, "b": 2}]})
    with pytest.raises(SchemaMismatchError, match=r"\['s.b'\]"):
        t.append(wider)  # Arrow's cast would drop s.b without a word
    with pytest.raises(SchemaMismatchError, match=r"column 's'.*\['b'\]"):
        t.merge(wider, on="t.id = s.id").when_not_matched_insert_all().execute()
    assert t.refresh().version == 0
    t.append(wider, schema_mode="merge")
    assert t.schema.field("s").type == pa.struct([("a", pa.int64()), ("b", pa.int64())])
    t.merge(pa.table({"id": [1, 2], "s": [{"a": 5, "b": 6, "c": 7}, {"a": 8, "b": 9, "c": 10}]}), on="t.id = s.id") \
        .with_schema_evolution().when_matched_update_all().when_not_matched_insert_all().execute()
    assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "s": {"a": 5, "b": 6, "c": 7}}, {"id": 2, "s": {"a": 8, "b": 9, "c": 10}}]


def test_null_typed_and_unsigned_columns_go_into_typed_columns_when_they_fit(tmp_path):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, pa.schema([("id", pa.int64()), ("s", pa.string())]))
    t.append(pa.table({"id": pa.array([1, 2], pa.uint64()), "s": pa.nulls(2)}))
    assert t.to_arrow().to_pylist() == [{"id": 1, "s": None}, {"id": 2, "s": None}]
    with pytest.raises(SchemaMismatchError, match="cannot be converted safely"):
        t.append(pa.table({"id": pa.array([2**63 + 1], pa.uint64())}))
    with pytest.raises(SchemaMismatchError, match="new column 'z'"):
        t.append(pa.table({"id": [3], "z": pa.nulls(1)}), schema_mode="merge")
    assert t.refresh().version == 1


def test_a_cast_that_would_lose_values_is_refused(tmp_path):
    """README: values are cast to the table's types only where nothing is lost. Arrow's safe
    cast drops a timestamp's time of day into a DATE and turns a DOUBLE beyond FLOAT's range
    into infinity without a word; both are refused, at any depth, and nothing is committed."""
    import datetime as dt

    schema = pa.schema([("id", pa.int32()), ("d", pa.date32()), ("f", pa.float32()),
                        ("s", pa.struct([("d", pa.date32())])), ("l", pa.list_(pa.float32())),
                        ("m", pa.map_(pa.string(), pa.float32()))])
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, schema)
    before = _versions(uri)
    noon = dt.datetime(2024, 1, 1, 12, 30)
    bad = [
        {"id": pa.array([1], pa.int32()), "d": pa.array([noon], pa.timestamp("us"))},
        {"id": pa.array([1], pa.int32()), "s": pa.array([{"d": noon}], pa.struct([("d", pa.timestamp("us"))]))},
        {"id": pa.array([1], pa.int32()), "f": pa.array([1e300], pa.float64())},
        {"id": pa.array([1], pa.int32()), "l": pa.array([[1.0], [1e300]], pa.list_(pa.float64())).slice(1)},
        {"id": pa.array([1], pa.int32()), "m": pa.array([[("k", 1e300)]], pa.map_(pa.string(), pa.float64()))},
    ]
    for columns in bad:
        with pytest.raises(SchemaMismatchError, match="time of day|out of the range"):
            t.append(pa.table(columns))
    assert _versions(uri) == before
    # what loses nothing still goes in: midnight, finite values, inf and NaN as they are
    t.append(pa.table({"id": pa.array([2, 3], pa.int32()),
                       "d": pa.array([dt.datetime(2024, 1, 2), None], pa.timestamp("us")),
                       "f": pa.array([1.5, float("inf")], pa.float64()),
                       "l": pa.array([[1.0], [1e300]], pa.list_(pa.float64())).slice(0, 1).to_pylist() + [None],
                       }))
    rows = sorted(t.to_arrow(columns=["id", "d", "f"]).to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 2, "d": dt.date(2024, 1, 2), "f": 1.5}, {"id": 3, "d": None, "f": float("inf")}]
