"""Per-file statistics: what compute_stats writes and what parse_stats reads back."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltatx.txnlog.stats import (
    MAX_STRING_TIE_BREAKER,
    STRING_PREFIX_LENGTH,
    FileStats,
    compute_stats,
    stats_from_parquet_footer,
    parse_stats,
    parse_timestamps,
    stats_leaf_paths,
    truncate_max_string,
)

UTC = dt.timezone.utc


def stats_of(table: pa.Table, **kw) -> dict:
    return orjson.loads(compute_stats(table, **kw))


def test_basic_types_and_null_counts():
    table = pa.table(
        {
            "i": pa.array([3, None, -7], pa.int32()),
            "l": pa.array([10, 20, 30], pa.int64()),
            "f": pa.array([1.5, None, -0.25]),
            "s": ["b", "a", None],
            "d": pa.array([dt.date(2024, 1, 2), dt.date(2023, 12, 31), None]),
            "dec": pa.array([Decimal("1.25"), Decimal("-3.10"), None], pa.decimal128(10, 2)),
            "b": [True, False, None],
            "bin": pa.array([b"x", None, b"y"]),
        }
    )
    doc = stats_of(table)
    assert doc["numRecords"] == 3
    assert doc["minValues"] == {"i": -7, "l": 10, "f": -0.25, "s": "a", "d": "2023-12-31", "dec": -3.1}
    assert doc["maxValues"] == {"i": 3, "l": 30, "f": 1.5, "s": "b", "d": "2024-01-02", "dec": 1.25}
    assert doc["nullCount"] == {"i": 1, "l": 0, "f": 1, "s": 1, "d": 1, "dec": 1, "b": 1, "bin": 1}


def test_decimals_are_json_numbers_with_exact_digits():
    table = pa.table({"x": pa.array([Decimal("12345678901234567.89")], pa.decimal128(20, 2))})
    text = compute_stats(table)
    assert '"x":12345678901234567.89' in text


def test_timestamps_truncated_to_millis_and_written_with_z():
    ts = dt.datetime(2024, 1, 1, 12, 30, 45, 123999, tzinfo=UTC)
    table = pa.table(
        {
            "tz": pa.array([ts, ts + dt.timedelta(seconds=1)], pa.timestamp("us", tz="UTC")),
            "ntz": pa.array([ts.replace(tzinfo=None)] * 2, pa.timestamp("us")),
            "old": pa.array([dt.datetime(1969, 12, 31, 23, 59, 59, 999500, tzinfo=UTC)] * 2, pa.timestamp("us", tz="UTC")),
        }
    )
    doc = stats_of(table)
    assert doc["minValues"]["tz"] == "2024-01-01T12:30:45.123Z"
    assert doc["maxValues"]["tz"] == "2024-01-01T12:30:46.123Z"
    assert doc["minValues"]["ntz"] == "2024-01-01T12:30:45.123"
    assert doc["minValues"]["old"] == "1969-12-31T23:59:59.999Z"  # floored, still a lower bound


def test_long_strings_are_prefix_truncated_and_max_stays_an_upper_bound():
    long_low = "a" * 40
    long_high = "z" * 50
    doc = stats_of(pa.table({"s": [long_low, long_high, "m"]}))
    assert doc["minValues"]["s"] == "a" * STRING_PREFIX_LENGTH
    assert doc["maxValues"]["s"] == "z" * STRING_PREFIX_LENGTH + MAX_STRING_TIE_BREAKER
    assert doc["maxValues"]["s"] >= long_high
    exact = "q" * STRING_PREFIX_LENGTH
    doc = stats_of(pa.table({"s": [exact]}))
    assert doc["maxValues"]["s"] == exact  # not cut: no tie-breaker


def test_tie_breaker_runs_are_kept_before_cutting():
    value = "x" * STRING_PREFIX_LENGTH + MAX_STRING_TIE_BREAKER * 2 + "a"
    bound = truncate_max_string(value)
    assert bound >= value
    assert bound == "x" * STRING_PREFIX_LENGTH + MAX_STRING_TIE_BREAKER * 3
    only_breakers = "x" * STRING_PREFIX_LENGTH + MAX_STRING_TIE_BREAKER * 3
    assert truncate_max_string(only_breakers) == only_breakers


@given(st.lists(st.text(min_size=0, max_size=60), min_size=1, max_size=8))
@settings(max_examples=200, deadline=None)
def test_string_bounds_bracket_every_value_in_utf8_order(values):
    doc = stats_of(pa.table({"s": pa.array(values, pa.string())}))
    lo = doc["minValues"]["s"].encode()
    hi = doc["maxValues"]["s"].encode()
    for v in values:
        assert lo <= v.encode() <= hi


def test_nan_float_column_gets_no_bounds_but_a_null_count():
    doc = stats_of(pa.table({"f": [1.0, float("nan"), None], "g": [float("inf"), 1.0, 2.0]}))
    assert "f" not in doc["minValues"] and "f" not in doc["maxValues"]
    assert doc["nullCount"]["f"] == 1
    assert "g" not in doc["maxValues"]  # infinity is not JSON: left out, never written as null


def test_nested_structs_lists_and_maps():
    table = pa.table(
        {
            "s": pa.array([{"a": 1, "b": {"c": "x"}}, None, {"a": None, "b": {"c": "y"}}]),
            "l": pa.array([[1, 2], None, []]),
            "m": pa.array([[("k", 1)], None, None], pa.map_(pa.string(), pa.int64())),
        }
    )
    doc = stats_of(table)
    assert doc["minValues"] == {"s": {"a": 1, "b": {"c": "x"}}}
    assert doc["maxValues"] == {"s": {"a": 1, "b": {"c": "y"}}}
    # a null parent makes its fields null
    assert doc["nullCount"] == {"s": {"a": 2, "b": {"c": 1}}, "l": 1, "m": 2}


def test_all_null_and_empty_columns_have_no_bounds():
    doc = stats_of(pa.table({"x": pa.array([None, None], pa.int64())}))
    assert doc["minValues"] == {} and doc["nullCount"] == {"x": 2}
    doc = stats_of(pa.table({"x": pa.array([], pa.int64())}))
    assert doc == {"numRecords": 0, "minValues": {}, "maxValues": {}, "nullCount": {"x": 0}}


def test_num_indexed_cols_counts_leaves_and_stats_columns_override():
    table = pa.table({"a": [1], "s": pa.array([{"x": 1, "y": 2}]), "b": [3]})
    assert [p for p, _ in stats_leaf_paths(table.schema, None, 2)] == [("a",), ("s", "x")]
    doc = stats_of(table, num_indexed_cols=2)
    assert doc["nullCount"] == {"a": 0, "s": {"x": 0}}
    assert stats_of(table, num_indexed_cols=0)["nullCount"] == {}
    assert stats_of(table, num_indexed_cols=-1)["nullCount"] == {"a": 0, "s": {"x": 0, "y": 0}, "b": 0}
    doc = stats_of(table, stats_columns=["B", "s.y"])
    assert doc["minValues"] == {"s": {"y": 2}, "b": 3}


def _mixed_table() -> pa.Table:
    """Every kind of column, with a NaN, nulls, long strings and an all-null stretch."""
    n = 40
    return pa.table({
        "i": pa.array([None if k % 7 == 0 else (k * 37) % 101 - 50 for k in range(n)], pa.int32()),
        "f": pa.array([float("nan") if k == 33 else k / 3 for k in range(n)]),
        "g": pa.array([None if k < 20 else -k / 2 for k in range(n)]),
        "s": [None if k % 5 == 0 else ("z" * 40 if k == 17 else f"s{k:03d}") for k in range(n)],
        "d": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=(k * 13) % 50) for k in range(n)]),
        "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=(k * 17) % 90) for k in range(n)],
                       pa.timestamp("us", "UTC")),
        "m": pa.array([Decimal(k * 7 % 23) / 4 for k in range(n)], pa.decimal128(8, 2)),
        "b": [k % 2 == 0 for k in range(n)],
        "st": pa.array([{"x": k if k % 3 else None} for k in range(n)], pa.struct([("x", pa.int64())])),
        "l": pa.array([[k] if k % 4 else None for k in range(n)], pa.list_(pa.int64())),
    })


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=40), max_size=6))
def test_stats_accumulated_chunk_by_chunk_equal_one_pass(cuts):
    """A streamed file folds each row group into FileStats: any cut gives the one-pass JSON."""
    table = _mixed_table()
    bounds = [0, *sorted(cuts), table.num_rows]
    stats = FileStats(table.schema)
    for start, end in zip(bounds, bounds[1:]):
        stats.add(table.slice(start, end - start))
    assert stats.to_json() == compute_stats(table)
    whole = orjson.loads(stats.to_json())
    assert "f" not in whole["minValues"] and whole["nullCount"]["g"] == 20  # the NaN in one chunk wins
    assert whole["maxValues"]["s"] == "z" * 32 + MAX_STRING_TIE_BREAKER


def test_footer_stats_match_computed_stats_without_float_and_timestamp_bounds(tmp_path):
    """Row groups of a Parquet footer combine into the stats compute_stats gives for its rows."""
    import pyarrow.parquet as pq

    table = _mixed_table().drop_columns(["st", "l"])
    table = table.set_column(0, "i", pa.array([None] * 10 + table["i"].to_pylist()[10:], pa.int32()))
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, row_group_size=10)  # 4 row groups, the first all-null in "i"
    footer = orjson.loads(stats_from_parquet_footer(pq.read_metadata(path), table.schema))
    computed = stats_of(table)
    assert footer["numRecords"] == 40 and footer["nullCount"] == computed["nullCount"]
    unbounded = {"f", "g", "ts"}  # floats (a footer does not tell NaN apart) and timestamps
    assert footer["minValues"] == {k: v for k, v in computed["minValues"].items() if k not in unbounded}
    assert footer["maxValues"] == {k: v for k, v in computed["maxValues"].items() if k not in unbounded}

    no_stats = tmp_path / "bare.parquet"
    pq.write_table(table, no_stats, write_statistics=False)
    bare = orjson.loads(stats_from_parquet_footer(pq.read_metadata(no_stats), table.schema))
    assert bare == {"numRecords": 40, "minValues": {}, "maxValues": {}, "nullCount": {}}


def test_dictionary_columns_are_decoded():
    table = pa.table({"s": pa.array(["b", "a", "b"]).dictionary_encode()})
    doc = stats_of(table)
    assert (doc["minValues"]["s"], doc["maxValues"]["s"]) == ("a", "b")


def test_large_table_is_columnar():
    n = 1_000_000
    table = pa.table({"id": pa.array(np.arange(n)), "s": pa.array(np.arange(n).astype(str))})
    doc = stats_of(table)
    assert doc["minValues"] == {"id": 0, "s": "0"} and doc["maxValues"] == {"id": n - 1, "s": "999999"}


# --------------------------------------------------------------------------------------------
# parse_stats
# --------------------------------------------------------------------------------------------

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("small", pa.int16()),
        ("name", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("us")),
        ("d", pa.date32()),
        ("price", pa.decimal128(10, 2)),
        ("f", pa.float32()),
        ("flag", pa.bool_()),
        ("s", pa.struct([("a", pa.int32()), ("b", pa.string())])),
    ]
)


def sample_table() -> pa.Table:
    ts = dt.datetime(2024, 5, 1, 8, 0, 0, 250500, tzinfo=UTC)
    return pa.table(
        {
            "id": [1, 9, None],
            "small": pa.array([-3, 4, 5], pa.int16()),
            "name": ["x" * 40, "b", None],
            "ts": pa.array([ts, ts + dt.timedelta(days=1), None], pa.timestamp("us", tz="UTC")),
            "ntz": pa.array([ts.replace(tzinfo=None)] * 3, pa.timestamp("us")),
            "d": pa.array([dt.date(2024, 1, 1), dt.date(2024, 2, 1), None]),
            "price": pa.array([Decimal("9.99"), Decimal("0.01"), None], pa.decimal128(10, 2)),
            "f": pa.array([0.5, -1.5, None], pa.float32()),
            "flag": [True, None, False],
            "s": pa.array([{"a": 1, "b": "q"}, {"a": 2, "b": None}, None]),
        },
        schema=SCHEMA,
    )


def test_parse_stats_round_trip():
    text = compute_stats(sample_table())
    parsed = parse_stats(pa.array([text, None]), SCHEMA)
    row = parsed[0].as_py()
    assert row["numRecords"] == 3
    mins, maxs, nulls = row["minValues"], row["maxValues"], row["nullCount"]
    assert mins["id"] == 1 and maxs["id"] == 9
    assert mins["name"] == "b" and maxs["name"] == "x" * 32 + MAX_STRING_TIE_BREAKER
    assert mins["ts"] == dt.datetime(2024, 5, 1, 8, 0, 0, 250000, tzinfo=UTC)
    assert mins["ntz"] == dt.datetime(2024, 5, 1, 8, 0, 0, 250000)
    assert mins["d"] == dt.date(2024, 1, 1) and maxs["d"] == dt.date(2024, 2, 1)
    assert mins["price"] == Decimal("0.01") and maxs["price"] == Decimal("9.99")
    assert mins["f"] == -1.5
    assert mins["s"] == {"a": 1, "b": "q"}
    assert "flag" not in mins  # booleans have no bounds
    assert nulls == {"id": 1, "small": 0, "name": 1, "ts": 1, "ntz": 0, "d": 1, "price": 1, "f": 1,
                     "flag": 1, "s": {"a": 1, "b": 2}}
    assert parsed[1].as_py() == {"numRecords": None, "minValues": None, "maxValues": None,
                                 "nullCount": None, "tightBounds": None}
    assert parsed.type.field("minValues").type.field("ts").type == pa.timestamp("us", tz="UTC")


def test_parse_stats_tolerates_bad_entries_without_losing_good_ones():
    good = compute_stats(sample_table())
    wrong_type = '{"numRecords": 1, "minValues": {"id": "not a number"}}'
    out_of_range = '{"numRecords": 1, "minValues": {"small": 100000}}'
    values = [good, "", "not json", wrong_type, good, out_of_range, "   ", good]
    parsed = parse_stats(pa.array(values), SCHEMA)
    records = pc.struct_field(parsed, [0]).to_pylist()
    assert records == [3, None, None, None, 3, None, None, 3]


def test_parse_stats_foreign_formats():
    # zone offsets (Spark writes the session zone), a zone-less tz timestamp, pretty-printed JSON,
    # NaN bounds, extra fields, tightBounds
    docs = [
        '{"numRecords":2,"minValues":{"ts":"2024-01-01T01:00:00.000+01:00"},"tightBounds":false}',
        '{"numRecords":2,"minValues":{"ts":"2024-01-01 00:00:00"},"extra":{"x":1}}',
        '{\n  "numRecords": 2,\n  "maxValues": {"f": NaN, "id": 4}\n}',
        '{"numRecords":3,"minValues":{"f":"-Infinity","name":"NaN"},"maxValues":{"f": "NaN","id":5}}',
    ]
    parsed = parse_stats(pa.array(docs), SCHEMA).to_pylist()
    midnight = dt.datetime(2024, 1, 1, tzinfo=UTC)
    assert parsed[0]["minValues"]["ts"] == midnight and parsed[0]["tightBounds"] is False
    assert parsed[1]["minValues"]["ts"] == midnight
    assert parsed[2]["numRecords"] == 2
    assert parsed[2]["maxValues"]["f"] is None and parsed[2]["maxValues"]["id"] == 4
    # Spark quotes non-finite floats; a NaN bound is unknown, and a string "NaN" stays a string
    assert parsed[3]["minValues"]["f"] == float("-inf") and parsed[3]["maxValues"]["f"] is None
    assert parsed[3]["maxValues"]["id"] == 5


def test_parse_stats_uses_column_mapping_physical_names():
    meta = {b"delta.columnMapping.physicalName": orjson.dumps("col-5f2a")}
    schema = pa.schema([pa.field("id", pa.int64(), metadata=meta)])
    parsed = parse_stats(pa.array(['{"numRecords":1,"minValues":{"col-5f2a":7}}']), schema)
    assert parsed[0].as_py()["minValues"] == {"id": 7}


def test_parse_stats_chunked_and_empty_inputs():
    text = compute_stats(sample_table())
    chunked = pa.chunked_array([[text], [None, text]])
    assert len(parse_stats(chunked, SCHEMA)) == 3
    assert len(parse_stats(pa.chunked_array([], pa.string()), SCHEMA)) == 0


def test_parse_timestamps_formats():
    strings = pa.array(["2024-01-01", "2024-01-01 10:00:00.5", "2024-01-01T10:00:00Z", "2024-01-01T12:00:00+02:00", None])
    got = parse_timestamps(strings, pa.timestamp("us", tz="UTC")).to_pylist()
    assert got == [
        dt.datetime(2024, 1, 1, tzinfo=UTC),
        dt.datetime(2024, 1, 1, 10, 0, 0, 500000, tzinfo=UTC),
        dt.datetime(2024, 1, 1, 10, tzinfo=UTC),
        dt.datetime(2024, 1, 1, 10, tzinfo=UTC),
        None,
    ]
    naive = parse_timestamps(pa.array(["2024-01-01T10:00:00Z"]), pa.timestamp("us")).to_pylist()
    assert naive == [dt.datetime(2024, 1, 1, 10)]
    with pytest.raises(pa.ArrowInvalid):
        parse_timestamps(pa.array(["yesterday"]), pa.timestamp("us", tz="UTC"))


def test_stats_layout_follows_physical_names_of_schemas_that_compare_equal():
    """pa.Schema equality ignores field metadata, where column mapping keeps physical names: the
    cached stats layout must still follow each schema's own names."""
    from deltatx.txnlog.stats import stats_schema

    plain = pa.schema([("id", pa.int64())])
    mapped = pa.schema([pa.field("id", pa.int64(), metadata={"delta.columnMapping.physicalName": "col-7"})])
    assert plain == mapped
    assert stats_schema(plain, for_json=True).field("minValues").type.field(0).name == "id"
    assert stats_schema(mapped, for_json=True).field("minValues").type.field(0).name == "col-7"
    assert stats_schema(mapped).field("minValues").type.field(0).name == "id"


@pytest.mark.parametrize("n_files", [2, 40])  # the few-strings path (orjson) and Arrow's JSON reader
def test_columns_without_bounds_alone_parse_to_one_row_per_file(n_files, tmp_path):
    """Bool, binary and variant columns have null counts but no min/max: parsing the stats for
    them alone gives empty bound structs — one per file, not an array of length 0 (``WHERE flag
    IS NULL`` over such a column failed with "Mismatching child array lengths")."""
    import deltatx

    schema = pa.schema([("flag", pa.bool_()), ("blob", pa.binary())])
    stats = pa.array([orjson.dumps({"numRecords": 2, "minValues": {}, "maxValues": {},
                                    "nullCount": {"flag": i % 2, "blob": 0}}).decode() for i in range(n_files)])
    parsed = parse_stats(stats, schema)
    assert len(parsed) == n_files
    assert parsed.field("nullCount").field("flag").to_pylist() == [i % 2 for i in range(n_files)]
    assert len(parsed.field("minValues")) == n_files

    t = deltatx.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("flag", pa.bool_())]))
    for i in range(n_files if n_files < 10 else 12):
        t.append(pa.table({"id": [i], "flag": [None if i % 3 == 0 else True]}, schema=t.schema))
    assert sorted(t.to_arrow(where="flag IS NULL")["id"].to_pylist()) == [i for i in range(len(t.files())) if i % 3 == 0]
    t.delete("flag IS NULL")
    assert t.to_arrow(where="flag IS NULL").num_rows == 0
