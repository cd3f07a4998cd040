"""Partition folder escaping, add-path URIs and partition value strings (deltatx.io.paths)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltatx.errors import InvalidTableError, SchemaMismatchError
from deltatx.io.paths import (
    HIVE_DEFAULT_PARTITION,
    data_file_path,
    decode_path,
    encode_path,
    escape_partition_value,
    partition_dir,
    unescape_partition_value,
)
from deltatx.txnlog.partition_values import parse_partition_value, parse_partition_values, serialize_partition_value
from deltatx.txnlog.store import open_store

WEIRD_VALUES = [
    "plain",
    "with space",
    "a/b",
    "k=v",
    "12:30:00",
    "100%",
    "%3A already escaped",
    "ünïcödé ✓ 日本",
    "tab\tnew\nline",
    "quote\"apos'star*",
    "q?h#b\\{[]}^",
    "\x7f\x01",
    " ",
]


@pytest.mark.parametrize(
    "value, escaped",
    [
        ("plain", "plain"),
        ("with space", "with space"),
        ("a/b", "a%2Fb"),
        ("k=v", "k%3Dv"),
        ("12:30", "12%3A30"),
        ("100%", "100%25"),
        ("ü✓", "ü✓"),
        ("a\nb", "a%0Ab"),
        ('"#\'*?\\', "%22%23%27%2A%3F%5C"),
        ("{[]}^", "%7B%5B%5D}%5E"),
        ("\x7f", "%7F"),
    ],
)
def test_escape_partition_value_matches_hive(value, escaped):
    assert escape_partition_value(value) == escaped


def test_null_and_empty_string_go_to_the_hive_default_folder():
    assert escape_partition_value(None) == HIVE_DEFAULT_PARTITION
    assert escape_partition_value("") == HIVE_DEFAULT_PARTITION
    assert unescape_partition_value(HIVE_DEFAULT_PARTITION) is None


@pytest.mark.parametrize("value", WEIRD_VALUES)
def test_escape_round_trips_weird_values(value):
    escaped = escape_partition_value(value)
    assert "/" not in escaped and "=" not in escaped
    assert unescape_partition_value(escaped) == value


@given(st.text(min_size=1).filter(lambda s: s != HIVE_DEFAULT_PARTITION))
def test_escape_round_trips_any_text(value):
    assert unescape_partition_value(escape_partition_value(value)) == value


def test_partition_dir_joins_escaped_columns_in_order():
    assert partition_dir(["a", "b"], {"a": "1", "b": "x:y"}) == "a=1/b=x%3Ay"
    assert partition_dir(["b", "a"], {"a": None, "b": "z"}) == f"b=z/a={HIVE_DEFAULT_PARTITION}"
    assert partition_dir([], {}) == ""


def test_encode_path_escapes_the_hive_escapes_again():
    rel = "p=x%3Ay/part-00000-abc-c000.snappy.parquet"
    assert encode_path(rel) == "p=x%253Ay/part-00000-abc-c000.snappy.parquet"
    assert encode_path("a=with space/f.parquet") == "a=with%20space/f.parquet"
    assert encode_path("a=ü/f.parquet") == "a=%C3%BC/f.parquet"


@pytest.mark.parametrize("value", WEIRD_VALUES)
def test_encode_decode_round_trip(value):
    rel = f"{partition_dir(['p'], {'p': value})}/part-00000-x-c000.snappy.parquet"
    encoded = encode_path(rel)
    assert " " not in encoded and "\n" not in encoded
    assert decode_path(encoded) == rel


def test_decode_path_keeps_absolute_uris():
    assert decode_path("s3://bucket/t/p=a%253Ab/f.parquet") == "s3://bucket/t/p=a%3Ab/f.parquet"
    assert decode_path("file:///tmp/t/a%20b/f.parquet") == "file:///tmp/t/a b/f.parquet"
    assert decode_path("plain/f.parquet") == "plain/f.parquet"


def test_data_file_path_resolves_relative_and_absolute(tmp_path):
    store = open_store(str(tmp_path / "t"))
    root = store.arrow_root
    assert data_file_path(store, "p=1/f.parquet") == f"{root}/p=1/f.parquet"
    assert data_file_path(store, "file:///data/x#1/f.parquet") == "/data/x#1/f.parquet"
    assert data_file_path(store, "file:/data/f.parquet") == "/data/f.parquet"
    assert data_file_path(store, "file://localhost/data/f.parquet") == "/data/f.parquet"
    assert data_file_path(store, "s3a://bucket/key/f?.parquet") == "bucket/key/f?.parquet"


# --------------------------------------------------------------------------------------------
# partitionValues strings
# --------------------------------------------------------------------------------------------

UTC = dt.timezone.utc


@pytest.mark.parametrize(
    "value, arrow_type, expected",
    [
        (5, pa.int32(), "5"),
        (-9_000_000_000, pa.int64(), "-9000000000"),
        (True, pa.bool_(), "true"),
        (False, pa.bool_(), "false"),
        (1.0, pa.float64(), "1.0"),
        (0.001, pa.float64(), "0.001"),
        (1e7, pa.float64(), "1.0E7"),
        (1.5e-5, pa.float64(), "1.5E-5"),
        (-2.5e20, pa.float64(), "-2.5E20"),
        (float("nan"), pa.float64(), "NaN"),
        (float("-inf"), pa.float64(), "-Infinity"),
        (0.1, pa.float32(), "0.1"),
        (Decimal("1.50"), pa.decimal128(5, 2), "1.50"),
        (Decimal("1E+3"), pa.decimal128(10, 0), "1000"),
        (dt.date(2024, 2, 29), pa.date32(), "2024-02-29"),
        (dt.datetime(2024, 1, 2, 3, 4, 5, 6), pa.timestamp("us"), "2024-01-02 03:04:05.000006"),
        (
            dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            pa.timestamp("us", tz="UTC"),
            "2024-01-02 01:04:05.000000",
        ),
        ("x/y", pa.string(), "x/y"),
        ("", pa.string(), None),
        (None, pa.int32(), None),
        (b"\x01\x02", pa.binary(), "\x01\x02"),
        ("é".encode(), pa.binary(), "é"),  # the UTF-8 text, as Spark/deltalake/DuckDB read it
        (b"\x01\x02\xff", pa.binary(), "\\u0001\\u0002\\u00ff"),  # not UTF-8: escaped form
        (dt.datetime(999, 12, 31), pa.timestamp("us"), "0999-12-31 00:00:00.000000"),
        (dt.datetime(1, 1, 1, tzinfo=UTC), pa.timestamp("us", tz="UTC"), "0001-01-01 00:00:00.000000"),
    ],
)
def test_serialize_partition_value(value, arrow_type, expected):
    assert serialize_partition_value(value, arrow_type) == expected


def test_serialize_accepts_arrow_scalars():
    assert serialize_partition_value(pa.scalar(7, pa.int16()), pa.int16()) == "7"
    assert serialize_partition_value(pa.scalar(None, pa.string()), pa.string()) is None


@pytest.mark.parametrize(
    "value, arrow_type",
    [
        (5, pa.int8()),
        (-(2**63), pa.int64()),
        (True, pa.bool_()),
        (3.25, pa.float64()),
        (1e300, pa.float64()),
        (Decimal("-12.345"), pa.decimal128(10, 3)),
        (dt.date(1, 1, 1), pa.date32()),
        (dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC), pa.timestamp("us", tz="UTC")),
        (dt.datetime(1999, 12, 31, 23, 59, 59), pa.timestamp("us")),
        ("ü:/=%", pa.string()),
        (bytes(range(256)), pa.binary()),
        ("é€😀".encode(), pa.binary()),
        (b"\\u0041", pa.binary()),  # UTF-8 text that looks like the escaped form
        (dt.datetime(999, 12, 31, 23, 59, 59, 5, tzinfo=UTC), pa.timestamp("us", tz="UTC")),
        (dt.datetime(12, 3, 4), pa.timestamp("us")),
        (dt.date(999, 1, 2), pa.date32()),
    ],
)
def test_serialize_parse_round_trip(value, arrow_type):
    assert parse_partition_value(serialize_partition_value(value, arrow_type), arrow_type) == value


def test_parse_accepts_iso_timestamps_and_the_escaped_binary_spelling():
    ts = pa.timestamp("us", tz="UTC")
    assert parse_partition_value("2024-01-02T03:04:05.5Z", ts) == dt.datetime(2024, 1, 2, 3, 4, 5, 500000, tzinfo=UTC)
    assert parse_partition_value("2024-01-02 03:04:05", ts) == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert parse_partition_value("2024-01-02T05:04:05+02:00", pa.timestamp("us")) == dt.datetime(2024, 1, 2, 3, 4, 5)
    assert parse_partition_value("\\u0001\\u00FF", pa.binary()) == b"\x01\xff"
    assert parse_partition_value("", pa.int32()) is None


def test_unsupported_partition_type_is_a_schema_error():
    with pytest.raises(SchemaMismatchError, match="cannot be a partition column"):
        serialize_partition_value([1, 2], pa.list_(pa.int32()))


def test_parse_accepts_unpadded_years_deltatx_wrote_before():
    """glibc's strftime('%Y') wrote '999-12-31 …'; such logs must stay readable."""
    assert parse_partition_value("999-12-31 00:00:00.000000", pa.timestamp("us", tz="UTC")) == dt.datetime(
        999, 12, 31, tzinfo=UTC)
    assert parse_partition_value("1-01-01 00:00:00.000000", pa.timestamp("us")) == dt.datetime(1, 1, 1)
    assert parse_partition_value("999-12-31", pa.date32()) == dt.date(999, 12, 31)
    with pytest.raises(InvalidTableError):
        parse_partition_value("999-13-31 00:00:00", pa.timestamp("us"))


def test_unpadded_partition_values_parse_columnar():
    strings = pa.array(["999-12-31", "2024-01-01", None])
    assert parse_partition_values(strings, pa.date32()).to_pylist() == [dt.date(999, 12, 31), dt.date(2024, 1, 1), None]
    ts = parse_partition_values(pa.array(["99-01-02 03:04:05.000006"]), pa.timestamp("us"))
    assert ts.to_pylist() == [dt.datetime(99, 1, 2, 3, 4, 5, 6)]


def test_binary_partition_strings_are_read_as_utf8_bytes():
    """What Spark (Cast string -> binary), deltalake and DuckDB read for the same string."""
    assert parse_partition_value("é", pa.binary()) == b"\xc3\xa9"
    assert parse_partition_value("\u00ff", pa.binary()) == "ÿ".encode()
    assert parse_partition_value("\\u0001\\u00FF", pa.binary()) == b"\x01\xff"
