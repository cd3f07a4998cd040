"""Reading data files (deltatx.io.reader): typing, evolution, filters, errors, interop."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from dvtables import portable_bitmap, z85_encode

from deltatx.errors import (
    DataFileNotFoundError,
    InvalidTableError,
    PredicateError,
    SchemaMismatchError,
)
from deltatx.io import (
    iter_batches,
    parse_partition_value,
    partition_values_table,
    read_files,
    write_data_files,
)
from deltatx.txnlog.actions import FILE_SCHEMA, file_actions_table
from deltatx.txnlog.store import open_store

UTC = dt.timezone.utc


def _adds(rows: list[dict]) -> pa.Table:
    """Hand-made add rows (path, partitionValues, ...), the rest filled in."""
    full = [{"size": 1, "modificationTime": 0, "dataChange": True, "partitionValues": {}, **r} for r in rows]
    return file_actions_table(full, FILE_SCHEMA)


def _write_parquet(root: str, relative: str, table: pa.Table) -> None:
    path = os.path.join(root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path)


def test_empty_file_list_gives_an_empty_table_with_the_schema(table_uri):
    schema = pa.schema([("a", pa.int64()), ("p", pa.string())])
    store = open_store(table_uri)
    out = read_files(store, FILE_SCHEMA.empty_table(), schema, ["p"])
    assert out.num_rows == 0 and out.schema.equals(schema)
    assert list(iter_batches(store, FILE_SCHEMA.empty_table(), schema, ["p"])) == []


def test_schema_evolution_fills_missing_columns_and_casts_types(table_uri):
    store = open_store(table_uri)
    root = store.root
    # an "old" file: no column c, b as large_string, timestamps in ns (µs-exact)
    _write_parquet(root, "old.parquet", pa.table({
        "a": pa.array([1, 2], pa.int64()),
        "b": pa.array(["x", "y"], pa.large_string()),
        "t": pa.array([1_000, 2_000], pa.timestamp("ns")),
    }))
    _write_parquet(root, "new.parquet", pa.table({
        "a": pa.array([3], pa.int64()),
        "b": pa.array(["z"]),
        "t": pa.array([3], pa.timestamp("us", "UTC")),
        "c": pa.array([1.5]),
    }))
    schema = pa.schema([("a", pa.int64()), ("b", pa.string()), ("t", pa.timestamp("us", "UTC")), ("c", pa.float64())])
    files = _adds([{"path": "old.parquet"}, {"path": "new.parquet"}])
    out = read_files(store, files, schema, [])
    assert out.schema.equals(schema)
    assert out.sort_by("a").to_pydict() == {
        "a": [1, 2, 3],
        "b": ["x", "y", "z"],
        "t": [dt.datetime(1970, 1, 1, 0, 0, 0, us, tzinfo=UTC) for us in (1, 2, 3)],
        "c": [None, None, 1.5],
    }
    assert read_files(store, files, schema, [], columns=["c", "a"]).column_names == ["c", "a"]


def test_nanosecond_timestamps_are_truncated_to_microseconds(table_uri):
    store = open_store(table_uri)
    _write_parquet(store.root, "ns.parquet", pa.table({"t": pa.array([1_999, 5_000_001], pa.timestamp("ns"))}))
    schema = pa.schema([("t", pa.timestamp("us", "UTC"))])
    files = _adds([{"path": "ns.parquet"}])
    out = read_files(store, files, schema, [])
    assert out.schema.equals(schema)
    assert out["t"].cast(pa.int64()).to_pylist() == [1, 5_000]
    streamed = pa.Table.from_batches(list(iter_batches(store, files, schema, [])), schema)
    assert streamed.equals(out)


def test_partition_columns_come_from_partition_values(table_uri):
    store = open_store(table_uri)
    _write_parquet(store.root, "p=1/a.parquet", pa.table({"id": [1, 2]}))
    _write_parquet(store.root, "p=__HIVE_DEFAULT_PARTITION__/b.parquet", pa.table({"id": [3]}))
    _write_parquet(store.root, "c.parquet", pa.table({"id": [4]}))
    files = _adds([
        {"path": "p=1/a.parquet", "partitionValues": {"p": "1", "d": "2024-05-06"}},
        {"path": "p=__HIVE_DEFAULT_PARTITION__/b.parquet", "partitionValues": {"p": None, "d": ""}},
        {"path": "c.parquet", "partitionValues": {}},  # missing keys read as null too
    ])
    schema = pa.schema([("id", pa.int64()), ("p", pa.int32()), ("d", pa.date32())])
    out = read_files(store, files, schema, ["p", "d"]).sort_by("id")
    assert out.to_pydict() == {"id": [1, 2, 3, 4], "p": [1, 1, None, None], "d": [dt.date(2024, 5, 6)] * 2 + [None, None]}


def test_filters_on_partition_and_data_columns(table_uri):
    store = open_store(table_uri)
    data = pa.table({"id": pa.array(range(100), pa.int64()), "part": pa.array([i % 4 for i in range(100)], pa.int32())})
    adds = write_data_files(store, data, data.schema, ["part"])
    out = read_files(store, adds, data.schema, ["part"], filter=(pc.field("part") == 2) & (pc.field("id") < 50))
    assert sorted(out["id"].to_pylist()) == [i for i in range(50) if i % 4 == 2]
    assert set(out["part"].to_pylist()) == {2}
    only_id = read_files(store, adds, data.schema, ["part"], columns=["id"], filter=pc.field("part").is_null())
    assert only_id.num_rows == 0 and only_id.column_names == ["id"]


def test_iter_batches_streams_the_same_rows(table_uri):
    store = open_store(table_uri)
    data = pa.table({"id": pa.array(range(5_000), pa.int64()), "p": [f"v{i % 3}" for i in range(5_000)]})
    adds = write_data_files(store, data, data.schema, ["p"])
    batches = list(iter_batches(store, adds, data.schema, ["p"], columns=["p", "id"]))
    assert all(b.schema.names == ["p", "id"] for b in batches)
    assert pa.Table.from_batches(batches).sort_by("id").equals(data.select(["p", "id"]))


def test_missing_file_raises_data_file_not_found_naming_it(table_uri):
    store = open_store(table_uri)
    _write_parquet(store.root, "here.parquet", pa.table({"a": [1]}))
    files = _adds([{"path": "here.parquet"}, {"path": "gone%20away.parquet"}])
    schema = pa.schema([("a", pa.int64())])
    with pytest.raises(DataFileNotFoundError, match="gone away.parquet"):
        read_files(store, files, schema, [])
    with pytest.raises(DataFileNotFoundError, match="gone away.parquet"):
        list(iter_batches(store, files, schema, []))


def test_missing_file_in_memory_store(memory_uri):
    store = open_store(memory_uri)
    files = _adds([{"path": "nope.parquet"}])
    with pytest.raises(DataFileNotFoundError, match="nope.parquet"):
        read_files(store, files, pa.schema([("a", pa.int64())]), [])


def test_deletion_vectors_drop_rows_in_both_read_paths(table_uri):
    """Files with a DV are read whole, their deleted positions dropped, then filtered."""
    store = open_store(table_uri)
    schema = pa.schema([("a", pa.int64()), ("p", pa.string())])
    _write_parquet(table_uri, "p=x/plain.parquet", pa.table({"a": [0, 1, 2]}))
    _write_parquet(table_uri, "p=y/dv.parquet", pa.table({"a": [10, 11, 12, 13]}))
    dv = portable_bitmap([0, 2])
    files = _adds([
        {"path": "p=x/plain.parquet", "partitionValues": {"p": "x"}},
        {"path": "p=y/dv.parquet", "partitionValues": {"p": "y"},
         "deletionVector": {"storageType": "i", "pathOrInlineDv": z85_encode(dv), "sizeInBytes": len(dv),
                            "cardinality": 2}},
    ])
    table = read_files(store, files, schema, ["p"])
    assert sorted(zip(table["a"].to_pylist(), table["p"].to_pylist())) == [
        (0, "x"), (1, "x"), (2, "x"), (11, "y"), (13, "y")]
    batches = list(iter_batches(store, files, schema, ["p"], filter=pc.field("a") > 1))
    assert sorted(pa.Table.from_batches(batches)["a"].to_pylist()) == [2, 11, 13]


def _inline_dv(rows: list[int]) -> dict:
    dv = portable_bitmap(rows)
    return {"storageType": "i", "pathOrInlineDv": z85_encode(dv), "sizeInBytes": len(dv), "cardinality": len(rows)}


def test_per_file_reads_do_not_wrap_values_that_do_not_fit(table_uri):
    """Only timestamps are cast unsafely: 2**40 read as int32 is an error, not 0."""
    store = open_store(table_uri)
    _write_parquet(table_uri, "big.parquet", pa.table({"a": pa.array([2**40, 1], pa.int64())}))
    schema = pa.schema([("a", pa.int32())])
    with_dv = _adds([{"path": "big.parquet", "deletionVector": _inline_dv([1])}])
    with pytest.raises(SchemaMismatchError, match="big.parquet"):
        read_files(store, with_dv, schema, [])
    with pytest.raises(SchemaMismatchError, match="big.parquet"):
        list(iter_batches(store, with_dv, schema, []))
    # the slow path (taken because of ns timestamps) checks the other columns too
    _write_parquet(table_uri, "ns.parquet", pa.table({"t": pa.array([1_999], pa.timestamp("ns")),
                                                      "a": pa.array([2**40], pa.int64())}))
    schema = pa.schema([("t", pa.timestamp("us")), ("a", pa.int32())])
    with pytest.raises(SchemaMismatchError, match="ns.parquet"):
        read_files(store, _adds([{"path": "ns.parquet"}]), schema, [])


def test_per_file_reads_read_only_the_needed_columns(table_uri, monkeypatch):
    store = open_store(table_uri)
    _write_parquet(table_uri, "p=y/dv.parquet", pa.table({"a": [10, 11, 12, 13], "b": ["w", "x", "y", "z"],
                                                          "c": [0.5, 1.5, 2.5, 3.5]}))
    schema = pa.schema([("a", pa.int64()), ("b", pa.string()), ("c", pa.float64()), ("p", pa.string())])
    files = _adds([{"path": "p=y/dv.parquet", "partitionValues": {"p": "y"}, "deletionVector": _inline_dv([0, 2])}])
    requested: list = []
    real = pq.ParquetFile.read

    def spy(self, columns=None, **kw):
        requested.append(columns)
        return real(self, columns=columns, **kw)

    monkeypatch.setattr(pq.ParquetFile, "read", spy)
    out = read_files(store, files, schema, ["p"], columns=["p", "b"])
    assert out.to_pydict() == {"p": ["y", "y"], "b": ["x", "z"]}
    assert requested == [["b"]]  # the partition column comes from the log, never the file
    out = read_files(store, files, schema, ["p"], columns=["b"], filter=pc.field("c") > 2)
    assert out.to_pydict() == {"b": ["z"]}  # a filter's columns are read too; positions unchanged
    assert sorted(read_files(store, files, schema, ["p"], columns=["p"])["p"].to_pylist()) == ["y", "y"]


def test_absolute_file_uri_paths_are_read(tmp_path):
    store = open_store(str(tmp_path / "t"))
    elsewhere = tmp_path / "elsewhere dir"
    elsewhere.mkdir()
    pq.write_table(pa.table({"a": [7]}), str(elsewhere / "f.parquet"))
    files = _adds([{"path": "file://" + str(elsewhere / "f.parquet").replace(" ", "%20")}])
    assert read_files(store, files, pa.schema([("a", pa.int64())]), [])["a"].to_pylist() == [7]


def test_unknown_requested_column_is_a_schema_error(table_uri):
    store = open_store(table_uri)
    with pytest.raises(SchemaMismatchError, match="nope"):
        read_files(store, _adds([{"path": "x.parquet"}]), pa.schema([("a", pa.int64())]), [], columns=["nope"])


# --------------------------------------------------------------------------------------------
# partition_values_table / parse_partition_value
# --------------------------------------------------------------------------------------------


def test_partition_values_table_is_typed_per_column():
    files = _adds([
        {"path": "1", "partitionValues": {"i": "1", "ts": "2024-01-02 03:04:05.000006", "dec": "1.50", "b": "true", "s": "x"}},
        {"path": "2", "partitionValues": {"i": "", "ts": "2024-01-02T03:04:05Z", "dec": "-2", "b": "false", "s": ""}},
        {"path": "3", "partitionValues": {"i": "1", "ts": None, "f": "NaN"}},
    ])
    schema = pa.schema([
        ("i", pa.int64()), ("ts", pa.timestamp("us", "UTC")), ("dec", pa.decimal128(5, 2)),
        ("b", pa.bool_()), ("s", pa.string()), ("f", pa.float64()), ("data", pa.int64()),
    ])
    out = partition_values_table(files, schema, ["i", "ts", "dec", "b", "s", "f"])
    assert out.schema.equals(pa.schema([schema.field(n) for n in ["i", "ts", "dec", "b", "s", "f"]]))
    rows = out.to_pylist()
    assert rows[0] == {"i": 1, "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC), "dec": Decimal("1.50"),
                       "b": True, "s": "x", "f": None}
    assert rows[1]["i"] is None and rows[1]["s"] is None and rows[1]["dec"] == Decimal("-2.00")
    assert rows[1]["ts"] == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert rows[2]["ts"] is None and rows[2]["f"] != rows[2]["f"]  # NaN


def test_bad_partition_value_is_an_invalid_table_error():
    with pytest.raises(InvalidTableError, match="not a valid"):
        parse_partition_value("twelve", pa.int32())
    files = _adds([{"path": "1", "partitionValues": {"d": "not-a-date"}}])
    with pytest.raises(InvalidTableError, match="not-a-date"):
        partition_values_table(files, pa.schema([("d", pa.date32())]), ["d"])


# --------------------------------------------------------------------------------------------
# Interop: files another Delta writer produced
# --------------------------------------------------------------------------------------------


def test_reads_a_partitioned_table_written_by_deltalake(tmp_path):
    import deltalake

    uri = str(tmp_path / "dl")
    data = pa.table({
        "id": pa.array(range(8), pa.int64()),
        "p": ["a b", "x/y=z:%", None, "ü", "a b", "x/y=z:%", None, "ü"],
    })
    deltalake.write_deltalake(uri, data, partition_by=["p"])
    log = os.path.join(uri, "_delta_log", "00000000000000000000.json")
    with open(log, "rb") as fh:
        adds = [orjson.loads(line)["add"] for line in fh if b'"add"' in line]
    files = file_actions_table(adds, FILE_SCHEMA)
    out = read_files(open_store(uri), files, data.schema, ["p"])
    assert out.sort_by("id").equals(data)


def test_read_errors_are_named(table_uri):
    store = open_store(table_uri)
    _write_parquet(store.root, "ok.parquet", pa.table({"a": pa.array([1])}))
    _write_parquet(store.root, "s.parquet", pa.table({"a": pa.array([{"x": 1}])}))
    schema = pa.schema([("a", pa.int64())])
    with pytest.raises(PredicateError, match="nope"):
        read_files(store, _adds([{"path": "ok.parquet"}]), schema, [], filter=pc.field("nope") == 1)
    with pytest.raises(SchemaMismatchError, match="'a' of data file .*s.parquet.* is struct"):
        read_files(store, _adds([{"path": "s.parquet"}]), schema, [])


def test_not_null_columns_read_back_with_their_flag(table_uri):
    store = open_store(table_uri)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("p", pa.string())])
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["a", "b"]}, schema=schema)
    adds = write_data_files(store, data, schema, ["p"])
    out = read_files(store, adds, schema, ["p"])
    assert out.schema.equals(schema) and out.sort_by("id").equals(data)
    # a file from before a NOT NULL column existed still reads (nulls kept, flag relaxed)
    wide = pa.schema([*schema, pa.field("n", pa.int32(), nullable=False)])
    old = read_files(store, adds, wide, ["p"])
    assert old["n"].null_count == 2


def test_true_positions_skip_nulls_across_chunks_and_past_the_kept_range():
    import numpy as np

    from deltatx.io import reader

    assert reader._true_positions(pa.array([True, None, False, True])).tolist() == [0, 3]
    assert reader._true_positions(pa.chunked_array([[False, True], [None, True, True]])).tolist() == [1, 3, 4]
    assert reader._true_positions(pa.chunked_array([], pa.bool_())).tolist() == []
    mask = np.zeros(300_000, dtype=bool)
    mask[[0, 131_071, 299_999]] = True
    assert reader._true_positions(pa.array(mask)).tolist() == [0, 131_071, 299_999]
    big = np.zeros(reader._COUNTING_MAX + 3, dtype=bool)
    big[-1] = True
    assert reader._true_positions(pa.array(big)).tolist() == [reader._COUNTING_MAX + 2]
    assert reader._true_positions(pa.array(big)).dtype == np.int64


def test_deleted_among_tests_each_position_against_a_sorted_dv():
    import numpy as np

    from deltatx.io import reader

    deleted = np.array([2, 7, 9, 1_000_000], dtype=np.uint64)
    positions = np.array([0, 2, 8, 9, 1_000_000, 2_000_000], dtype=np.uint64)
    assert reader._deleted_among(positions, deleted).tolist() == [False, True, False, True, True, False]
    assert reader._deleted_among(positions, np.empty(0, np.uint64)).tolist() == [False] * 6
    assert reader._deleted_among(np.empty(0, np.uint64), deleted).tolist() == []


# --------------------------------------------------------------------------------------------
# File column types: another type is refused, other encodings of the same type are read
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("column", [
    pa.array([True, False]),
    pa.array(["7", "8"]),
    pa.array([1_000, 2_000], pa.timestamp("us")),
    pa.array([1.5, 2.0]),
    pa.array([[1], [2]]),
], ids=["bool", "string", "timestamp", "double", "list"])
def test_a_file_column_of_another_type_is_refused_on_every_read_path(table_uri, column):
    """Arrow would cast these (True -> 1, '7' -> 7, a timestamp to its integer): Delta refuses."""
    store = open_store(table_uri)
    _write_parquet(table_uri, "ok.parquet", pa.table({"id": pa.array([5], pa.int64()), "v": [5.0]}))
    _write_parquet(table_uri, "bad.parquet", pa.table({"id": column, "v": [1.0, 2.0]}))
    schema = pa.schema([("id", pa.int64()), ("v", pa.float64())])
    files = _adds([{"path": "ok.parquet"}, {"path": "bad.parquet"}])
    with_dv = _adds([{"path": "ok.parquet"}, {"path": "bad.parquet", "deletionVector": _inline_dv([1])}])
    named = r"'id' of data file .*bad.parquet.* cannot be read as the table's int64"
    for kwargs in ({}, {"filter": pc.field("id") >= 0}, {"filter": pc.field("v") > 0}, {"columns": ["id"]}):
        for adds in (files, with_dv):
            with pytest.raises(SchemaMismatchError, match=named):
                read_files(store, adds, schema, [], **kwargs)
            with pytest.raises(SchemaMismatchError, match=named):
                list(iter_batches(store, adds, schema, [], **kwargs))
    # a column the read does not need is not checked (nor read)
    assert read_files(store, files, schema, [], columns=["v"])["v"].to_pylist() == [5.0, 1.0, 2.0]


def test_other_encodings_of_the_same_type_and_widenings_are_read(table_uri):
    """What other engines legitimately write: narrower or unsigned integers, float for double,
    any timestamp unit and INT96, smaller decimals, dictionary / large strings, binary strings;
    and the changes type widening allows (integer -> double/decimal, date -> timestamp_ntz)."""
    store = open_store(table_uri)
    file = pa.table({
        "i8": pa.array([1], pa.int8()), "u32": pa.array([4_000_000_000], pa.uint32()),
        "f": pa.array([1.5], pa.float32()), "i2d": pa.array([3], pa.int32()),
        "ms": pa.array([1_000], pa.timestamp("ms", "UTC")), "ns": pa.array([1_000_000], pa.timestamp("ns")),
        "dec": pa.array([Decimal("1.25")], pa.decimal128(5, 2)), "i2dec": pa.array([7], pa.int64()),
        "dict": pa.array(["x"]).dictionary_encode(), "large": pa.array(["y"], pa.large_string()),
        "bin": pa.array([b"z"]), "day": pa.array([dt.date(2024, 1, 2)]),
        "nested": pa.array([{"a": 1, "l": [1, 2]}], pa.struct([("a", pa.int32()), ("l", pa.list_(pa.int16()))])),
    })
    _write_parquet(table_uri, "enc.parquet", file)
    pq.write_table(pa.table({"t": pa.array([dt.datetime(2024, 1, 2, 3)], pa.timestamp("us"))}),
                   os.path.join(table_uri, "int96.parquet"), use_deprecated_int96_timestamps=True)
    schema = pa.schema([
        ("i8", pa.int64()), ("u32", pa.int64()), ("f", pa.float64()), ("i2d", pa.float64()),
        ("ms", pa.timestamp("us", "UTC")), ("ns", pa.timestamp("us", "UTC")), ("dec", pa.decimal128(10, 3)),
        ("i2dec", pa.decimal128(20, 0)), ("dict", pa.string()), ("large", pa.string()), ("bin", pa.string()),
        ("day", pa.timestamp("us")),
        ("nested", pa.struct([("a", pa.int64()), ("l", pa.list_(pa.int64()))])),
        ("t", pa.timestamp("us", "UTC")),
    ])
    files = _adds([{"path": "enc.parquet"}, {"path": "int96.parquet"}])
    out = read_files(store, files, schema, [])
    assert out.schema.equals(schema)
    row = out.to_pylist()[0]
    assert row["i8"] == 1 and row["u32"] == 4_000_000_000 and row["f"] == 1.5 and row["i2d"] == 3.0
    assert row["dec"] == Decimal("1.250") and row["i2dec"] == Decimal(7)
    assert (row["dict"], row["large"], row["bin"]) == ("x", "y", "z")
    assert row["day"] == dt.datetime(2024, 1, 2) and row["nested"] == {"a": 1, "l": [1, 2]}
    assert out.to_pylist()[1]["t"] == dt.datetime(2024, 1, 2, 3, tzinfo=UTC)
    # the per-file path (deletion vectors) reads them the same
    with_dv = _adds([{"path": "enc.parquet", "deletionVector": _inline_dv([])}, {"path": "int96.parquet"}])
    assert read_files(store, with_dv, schema, []).sort_by("i8").equals(out.sort_by("i8"))


@pytest.mark.parametrize("table_type,column", [
    (pa.int64(), pa.array([2**64 - 1], pa.uint64())),
    (pa.int32(), pa.array([2**40], pa.int64())),
    (pa.decimal128(4, 2), pa.array([Decimal("123.4")], pa.decimal128(6, 1))),
], ids=["uint64", "int64-in-int", "decimal-digits"])
def test_a_value_or_type_that_does_not_fit_names_the_file(table_uri, table_type, column):
    """A value a checked cast cannot convert, or a type with more digits than the table's: the
    error names the file, with or without a filter (not a PredicateError, not Arrow's own)."""
    store = open_store(table_uri)
    _write_parquet(table_uri, "big.parquet", pa.table({"a": column}))
    schema = pa.schema([("a", table_type)])
    files = _adds([{"path": "big.parquet"}])
    for kwargs in ({}, {"filter": pc.is_valid(pc.field("a"))}):
        with pytest.raises(SchemaMismatchError, match="big.parquet"):
            read_files(store, files, schema, [], **kwargs)
        with pytest.raises(SchemaMismatchError, match="big.parquet"):
            list(iter_batches(store, files, schema, [], **kwargs))
