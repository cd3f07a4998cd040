"""What a write accepts as input and what it refuses: nothing is dropped without a word (a named
pandas index, a second column of one name, a nested field the table lacks), and a column whose
Arrow type Delta has no name for still goes into a typed column when its values fit."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

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


def test_a_null_struct_over_a_not_null_field_is_written_and_rewritten(tmp_path):
    """``c struct<a: bigint NOT NULL>`` may be NULL as a whole. Arrow builds a NULL struct with a
    NULL ``a`` under it, which Parquet's writer and Arrow's casts refuse: leaving ``c`` out, SET
    c = NULL, MERGE without ``c``, and rewriting files from before ``c`` existed all failed."""
    from duckdb_delta import read_duckdb

    inner = pa.struct([pa.field("a", pa.int64(), nullable=False)])
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": [1, 2]}))
    t.append(pa.table({"id": [3], "c": pa.array([{"a": 3}], inner)}), schema_mode="merge")
    t.append(pa.table({"id": [4]}))  # leaves c out
    t.optimize()  # rewrites files from before c
    t.update(where="id = 3", set={"c": "NULL"})
    t.merge(pa.table({"id": [5, 1]}), on="t.id = s.id").when_not_matched_insert_all() \
        .when_matched_update({"c": "NULL"}).execute()
    t.update(where="id = 2", set={"c.a": "20"})  # a field of a NULL struct: the struct appears
    expected = [{"id": 1, "c": None}, {"id": 2, "c": {"a": 20}}, {"id": 3, "c": None}, {"id": 4, "c": None},
                {"id": 5, "c": None}]
    assert sorted(deltatx.Table(uri).to_arrow().to_pylist(), key=lambda r: r["id"]) == expected
    assert sorted(read_duckdb(uri).to_pylist(), key=lambda r: r["id"]) == expected
    with pytest.raises(SchemaMismatchError):  # a present struct still needs its NOT NULL field
        t.append(pa.table({"id": [6], "c": pa.array([{"a": None}], pa.struct([("a", pa.int64())]))}))


@pytest.mark.parametrize("column_type, values", [
    (pa.bool_(), pa.array([0, 2, -7])),  # numbers are no booleans
    (pa.bool_(), pa.array([0.5])),
    (pa.struct([("a", pa.bool_())]), pa.array([{"a": 7}])),
    (pa.decimal128(5, 2), pa.array([1234.5])),  # out of the DECIMAL's range
    (pa.float64(), pa.array(["1e400"])),  # text is not read as a number
    (pa.int32(), pa.array(["007"])),
    (pa.struct([("x", pa.decimal128(5, 2))]), pa.array([{"x": 0.125}])),  # Arrow would not round half up
], ids=["int-bool", "double-bool", "nested-bool", "double-decimal-overflow", "text-double", "text-int",
        "nested-double-decimal"])
def test_conversions_that_invent_or_drop_values_are_refused(tmp_path, column_type, values):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, pa.schema([("v", column_type)]))
    with pytest.raises(SchemaMismatchError):
        t.append(pa.table({"v": values}))
    assert _versions(uri) == ["00000000000000000000.json"]


def test_numbers_convert_as_spark_stores_them(tmp_path):
    """Spark's store assignment converts number to number: a float into a DECIMAL rounds half up
    (0.1 + 0.2 is 0.30, 0.125 is 0.13), a DECIMAL into a double is its nearest double."""
    schema = pa.schema([("d", pa.decimal128(5, 2)), ("f", pa.float64()), ("s", pa.string()), ("g", pa.decimal128(5, 2))])
    t = deltatx.create_table(str(tmp_path / "t"), schema)
    t.append(pa.table({"d": [0.1 + 0.2, 0.125],
                       "f": pa.array([Decimal("0.30"), Decimal("12345678901234567.89")], pa.decimal128(20, 2)),
                       "s": pa.array([dt.datetime(2024, 1, 1, 10, 0, 0, 500000), dt.datetime(1970, 1, 1)],
                                     pa.timestamp("us")),
                       "g": pa.array([0.1, 12.34], pa.float32())}))
    assert t.to_arrow().to_pylist() == [  # timestamps as text as Spark writes them
        {"d": Decimal("0.30"), "f": 0.3, "s": "2024-01-01 10:00:00.5", "g": Decimal("0.10")},
        {"d": Decimal("0.13"), "f": 12345678901234568.0, "s": "1970-01-01 00:00:00", "g": Decimal("12.34")}]


def test_update_and_merge_values_convert_with_spark_ansi_cast(tmp_path):
    """Delta casts SET and MERGE values with Spark's ANSI CAST: '5' into an INT is 5, 1 into a
    BOOLEAN is true (an append of the same refuses them, as Spark's INSERT does)."""
    schema = pa.schema([("id", pa.int64()), ("i", pa.int32()), ("b", pa.bool_()), ("txt", pa.string())])
    t = deltatx.create_table(str(tmp_path / "t"), schema)
    t.append(pa.table({"id": [1, 2], "i": [0, 0], "b": [False, False], "txt": ["7", "true"]}, schema=schema))
    t.update(where="id = 1", set={"i": "'5'", "b": "1"})
    t.update(where="id = 2", set={"b": "txt"})
    t.merge(pa.table({"id": [1], "v": ["9"]}), on="t.id = s.id").when_matched_update({"i": "s.v"}).execute()
    rows = sorted(deltatx.Table(t.uri).to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [(r["i"], r["b"]) for r in rows] == [(9, True), (0, True)]
    with pytest.raises(SchemaMismatchError):
        t.update(where="id = 1", set={"i": "'x'"})  # text that is no number still fails


def test_maps_with_struct_or_list_keys_refuse_a_key_twice(tmp_path):
    key = pa.struct([("a", pa.int32()), ("b", pa.string())])
    t = deltatx.create_table(str(tmp_path / "s"), pa.schema([("m", pa.map_(key, pa.int64()))]))
    distinct = [[({"a": 1, "b": "x"}, 1), ({"a": 1, "b": None}, 2), ({"a": 2, "b": "x"}, 3)]]
    t.append(pa.table({"m": pa.array(distinct, pa.map_(key, pa.int64()))}))
    inner = pa.struct([("l", pa.int32()), ("s", pa.struct([("x", pa.int32())]))])
    nested = deltatx.create_table(str(tmp_path / "n"), pa.schema([("m", pa.map_(inner, pa.int64()))]))
    nested.append(pa.table({"m": pa.array([[({"l": 1, "s": None}, 1), ({"l": 1, "s": {"x": 0}}, 2)]],
                                          pa.map_(inner, pa.int64()))}))  # a NULL struct is no {x: 0}
    assert nested.to_arrow().num_rows == 1
    with pytest.raises(SchemaMismatchError, match="twice"):
        t.append(pa.table({"m": pa.array([[({"a": 1, "b": "x"}, 1), ({"a": 1, "b": "x"}, 2)]], pa.map_(key, pa.int64()))}))
    listed = deltatx.create_table(str(tmp_path / "l"), pa.schema([("m", pa.map_(pa.list_(pa.int32()), pa.int64()))]))
    with pytest.raises(SchemaMismatchError, match="twice"):
        listed.append(pa.table({"m": pa.array([[([1, 2], 1), ([1, 2], 2)]], pa.map_(pa.list_(pa.int32()), pa.int64()))}))
    assert t.to_arrow().num_rows == 1 and listed.version == 0


def test_bad_values_are_typed_errors_and_commit_nothing(tmp_path):
    uri = str(tmp_path / "t")
    schema = pa.schema([("l", pa.list_(pa.field("element", pa.int64(), nullable=False))),
                        ("m", pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False))),
                        ("s", pa.string())])
    t = deltatx.create_table(uri, schema)
    bad_utf8 = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(bytes([0, 0, 0, 0, 3, 0, 0, 0])),
                                                        pa.py_buffer(b"\xed\xa0\x80")])
    for data in [pa.table({"l": pa.array([[1, None]], pa.list_(pa.int64()))}),
                 pa.table({"m": pa.array([[("k", None)]], pa.map_(pa.string(), pa.int64()))}),
                 pa.table({"m": pa.array([[("k", 1), ("k", 2)]], pa.map_(pa.string(), pa.int64()))}),
                 pa.table({"s": bad_utf8}),
                 pd.DataFrame({"s": ["a", 1]})]:
        with pytest.raises(SchemaMismatchError):
            t.append(data)
    with pytest.raises(SchemaMismatchError, match="38"):
        deltatx.create_table(str(tmp_path / "wide"), pa.schema([("d", pa.decimal256(50, 2))]))
    with pytest.raises(SchemaMismatchError, match="NUL"):
        deltatx.create_table(str(tmp_path / "nul"), pa.schema([("a\x00b", pa.int64())]),
                             properties={"delta.columnMapping.mode": "name"})
    assert _versions(uri) == ["00000000000000000000.json"]
    # what fits goes in: a list view, a decimal256 whose values fit the table's DECIMAL(38, 2)
    t.append(pa.table({"l": pa.array([[1, 2], None, []], pa.list_view(pa.int64()))}))
    assert deltatx.Table(uri).to_arrow()["l"].to_pylist() == [[1, 2], None, []]
    w = deltatx.create_table(str(tmp_path / "d"), pa.schema([("d", pa.decimal128(38, 2))]))
    w.append(pa.table({"d": pa.array([Decimal("1.25")], pa.decimal256(40, 2))}))
    assert w.to_arrow()["d"].to_pylist() == [Decimal("1.25")]


def test_maps_with_nested_keys_and_sliced_nested_nulls_are_written(tmp_path):
    """Struct and array map keys (Delta allows them) skip the duplicate-key check, and a slice
    of lists holding NULL structs over NOT NULL fields is written (Arrow rebuilt no list from a
    sliced array with NULLs)."""
    struct_key = pa.map_(pa.struct([("a", pa.int32())]), pa.int64())
    t = deltatx.create_table(str(tmp_path / "m"), pa.schema([("m", struct_key)]))
    t.append(pa.table({"m": pa.array([[({"a": 1}, 1), ({"a": 2}, 2)]], struct_key)}))
    assert t.to_arrow().num_rows == 1
    inner = pa.struct([pa.field("a", pa.int64(), nullable=False)])
    schema = pa.schema([("id", pa.int64()), ("l", pa.list_(inner))])
    data = pa.table({"id": list(range(6)), "l": pa.array([[{"a": 1}], None, [None, {"a": 2}], [], None, [{"a": 3}]],
                                                        pa.list_(inner))}, schema=schema)
    u = deltatx.create_table(str(tmp_path / "l"), schema)
    u.append(data.slice(1, 4))
    assert sorted(u.to_arrow().to_pylist(), key=lambda r: r["id"]) == data.slice(1, 4).to_pylist()


def test_a_null_struct_over_a_not_null_field_on_mapped_and_change_feed_tables(tmp_path):
    inner = pa.struct([pa.field("a", pa.int64(), nullable=False)])
    schema = pa.schema([("id", pa.int64()), ("c", inner)])
    for i, props in enumerate([{"delta.columnMapping.mode": "name"}, {"delta.enableChangeDataFeed": "true"}]):
        t = deltatx.create_table(str(tmp_path / f"t{i}"), schema, properties=props)
        t.append(pa.table({"id": [1, 2], "c": pa.array([{"a": 1}, None], inner)}, schema=schema))
        t.append(pa.table({"id": [3]}))
        t.update(where="id = 1", set={"c": "NULL"})
        t.merge(pa.table({"id": [4]}), on="t.id = s.id").when_not_matched_insert_all().execute()
        assert [r["c"] for r in deltatx.Table(t.uri).to_arrow().to_pylist()] == [None] * 4
