"""Statistics and partition values other engines must read as deltatx means them, and back.

* A float file holding only -0.0 (or 0.0) is bounded [-0.0, +0.0], Parquet's rule and what
  deltalake writes: DuckDB's delta_scan (delta-kernel) no longer skips it for ``f = 0.0``.
* NaN: deltatx writes no float bounds for a file holding one; deltalake leaves NaN out of them.
* Timestamp partition values before year 1000 are written with 4-digit years; deltatx reads the
  unpadded ones it wrote before.
* Binary partition values are the UTF-8 text of their bytes, both ways (deltalake, DuckDB).
* A deltalake checkpoint with ``delta.checkpoint.writeStatsAsJson=false`` keeps stats only in
  ``add.stats_parsed``: deltatx reads them, keeps them in its own next checkpoint, and enabling row
  tracking uses them (or Parquet footers); a refused enablement commits nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

import deltatx
from deltatx import errors
from interop_helpers import read_deltalake, read_duckdb

UTC = dt.timezone.utc
FLOATS = pa.schema([("id", pa.int64()), ("f", pa.float64())])
IDS = pa.schema([("id", pa.int64())])
NO_JSON_STATS = {"delta.checkpoint.writeStatsAsJson": "false", "delta.checkpoint.writeStatsAsStruct": "true"}


def _adds(uri: str, version: int) -> list[dict]:
    with open(f"{uri}/_delta_log/{version:020d}.json") as fh:
        return [json.loads(line)["add"] for line in fh if '"add"' in line]


def _ids(uri: str, where: str) -> list[int]:
    table = read_duckdb(uri, f"SELECT id FROM delta_scan(?) WHERE {where}")
    return sorted(table.column("id").to_pylist())


# --------------------------------------------------------------------------------------------
# Float bounds: signed zeros, NaN
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("zero", [-0.0, 0.0])
def test_a_zero_only_float_file_is_bounded_minus_zero_to_plus_zero(table_uri, zero):
    t = deltatx.create_table(table_uri, FLOATS)
    t.append(pa.table({"id": [0], "f": [zero]}, schema=FLOATS))
    t.append(pa.table({"id": [1], "f": [-zero]}, schema=FLOATS))
    for version in (1, 2):
        stats = json.loads(_adds(table_uri, version)[0]["stats"])
        low, high = stats["minValues"]["f"], stats["maxValues"]["f"]
        assert (low, str(low), high, str(high)) == (0.0, "-0.0", 0.0, "0.0")
    for where in ("f = 0.0", "f >= 0", "f <= 0", "f = -0.0"):
        assert _ids(table_uri, where) == [0, 1], where
        assert sorted(deltatx.Table(table_uri).to_arrow(where=where)["id"].to_pylist()) == [0, 1], where


def test_signed_zero_bounds_of_mixed_files_match_deltalake(table_uri, tmp_path):
    peer = str(tmp_path / "peer")
    t = deltatx.create_table(table_uri, FLOATS)
    for values in ([-3.0, -0.0], [0.0, -0.0, 2.0]):
        data = pa.table({"id": list(range(len(values))), "f": values}, schema=FLOATS)
        t.append(data)
        write_deltalake(peer, data, mode="append")
    for version in (1, 2):
        ours = json.loads(_adds(table_uri, version)[0]["stats"])
        theirs = json.loads(_adds(peer, version - 1)[0]["stats"])
        for key in ("minValues", "maxValues"):
            assert str(ours[key]["f"]) == str(theirs[key]["f"]), (version, key)


def test_a_float_file_holding_nan_gets_no_bounds_and_is_never_skipped(table_uri):
    """Spark's order puts NaN above every number (its max would be NaN); deltalake leaves NaN
    out of the bounds. No bounds is right for every reader: ``f > 5`` still finds the NaN row,
    which is TRUE for NaN in Spark's (and deltatx's) order."""
    t = deltatx.create_table(table_uri, FLOATS)
    t.append(pa.table({"id": [0, 1], "f": [1.0, float("nan")]}, schema=FLOATS))
    stats = json.loads(_adds(table_uri, 1)[0]["stats"])
    assert "f" not in stats["minValues"] and "f" not in stats["maxValues"]
    assert stats["minValues"]["id"] == 0
    assert deltatx.Table(table_uri).to_arrow(where="f > 5")["id"].to_pylist() == [1]
    # (DuckDB is left out: it misses the NaN row even reading the Parquet file alone, whose footer
    # statistics leave NaN out too)


# --------------------------------------------------------------------------------------------
# Partition values
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ts_type", [pa.timestamp("us", tz="UTC"), pa.timestamp("us")])
def test_timestamp_partitions_before_year_1000_have_4_digit_years(table_uri, ts_type):
    schema = pa.schema([("id", pa.int64()), ("ts", ts_type)])
    tz = UTC if ts_type.tz else None
    values = [dt.datetime(999, 12, 31, tzinfo=tz), dt.datetime(1, 1, 1, 0, 0, 0, 7, tzinfo=tz),
              dt.datetime(2024, 1, 1, tzinfo=tz)]
    t = deltatx.create_table(table_uri, schema, partition_by=["ts"])
    t.append(pa.table({"id": [1, 2, 3], "ts": values}, schema=schema))
    written = sorted(a["partitionValues"]["ts"] for a in _adds(table_uri, 1))
    assert written == ["0001-01-01 00:00:00.000007", "0999-12-31 00:00:00.000000", "2024-01-01 00:00:00.000000"]
    expected = sorted(zip([1, 2, 3], values))
    got = deltatx.Table(table_uri).to_arrow().sort_by("id")
    assert list(zip(got["id"].to_pylist(), got["ts"].to_pylist())) == expected
    theirs = read_deltalake(table_uri).sort_by("id")
    assert theirs["ts"].cast(ts_type).to_pylist() == [v for _, v in expected]


def test_unpadded_timestamp_partition_values_in_the_log_stay_readable(table_uri):
    """What deltatx wrote before (glibc strftime %Y): '999-12-31 00:00:00.000000'."""
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))])
    t = deltatx.create_table(table_uri, schema, partition_by=["ts"])
    t.append(pa.table({"id": [1], "ts": [dt.datetime(999, 12, 31, tzinfo=UTC)]}, schema=schema))
    log = f"{table_uri}/_delta_log/{1:020d}.json"
    with open(log) as fh:
        text = fh.read()
    assert "0999-12-31 00:00:00.000000" in text
    with open(log, "w") as fh:
        fh.write(text.replace("0999-12-31 00:00:00.000000", "999-12-31 00:00:00.000000"))
    got = deltatx.Table(table_uri).to_arrow()
    assert got.to_pylist() == [{"id": 1, "ts": dt.datetime(999, 12, 31, tzinfo=UTC)}]
    assert deltatx.Table(table_uri).to_arrow(where="ts < '1000-01-01'")["id"].to_pylist() == [1]


def test_binary_partition_values_agree_with_deltalake_and_duckdb(table_uri):
    schema = pa.schema([("id", pa.int64()), ("key", pa.binary())])
    keys = ["é".encode(), "日本".encode(), b"plain", b"\x01"]
    t = deltatx.create_table(table_uri, schema, partition_by=["key"])
    t.append(pa.table({"id": [1, 2, 3, 4], "key": keys}, schema=schema))
    written = sorted(a["partitionValues"]["key"] for a in _adds(table_uri, 1))
    assert written == sorted(k.decode() for k in keys)
    expected = list(zip([1, 2, 3, 4], keys))
    for got in (deltatx.Table(table_uri).to_arrow(), read_deltalake(table_uri), read_duckdb(table_uri)):
        assert sorted(zip(got["id"].to_pylist(), got["key"].to_pylist())) == expected
    hit = read_duckdb(table_uri, "SELECT id FROM delta_scan(?) WHERE key = '\\xC3\\xA9'::BLOB")
    assert hit["id"].to_pylist() == [1]


def test_binary_partition_values_written_by_deltalake_read_as_their_bytes(tmp_path):
    """deltalake 1.x writes the protocol's escaped spelling literally (``\\u00C3\\u00A9``, one
    escape per byte), though its own reader (and DuckDB's) then takes the escape text as the
    bytes; deltatx reads the bytes the writer meant."""
    uri = str(tmp_path / "peer")
    schema = pa.schema([("id", pa.int64()), ("key", pa.binary())])
    keys = ["é".encode(), b"ab"]
    write_deltalake(uri, pa.table({"id": [1, 2], "key": keys}, schema=schema), partition_by=["key"])
    got = deltatx.Table(uri).to_arrow().sort_by("id")
    assert got["key"].to_pylist() == keys


def test_binary_partition_values_that_are_not_utf8_round_trip_in_deltatx(table_uri):
    schema = pa.schema([("id", pa.int64()), ("key", pa.binary())])
    keys = [b"\x00\xff", b"\xc3", b"\\u0041"]
    t = deltatx.create_table(table_uri, schema, partition_by=["key"])
    t.append(pa.table({"id": [1, 2, 3], "key": keys}, schema=schema))
    got = deltatx.Table(table_uri).to_arrow().sort_by("id")
    assert got["key"].to_pylist() == keys


# --------------------------------------------------------------------------------------------
# Checkpoints whose stats live only in add.stats_parsed
# --------------------------------------------------------------------------------------------


def _struct_stats_table(uri: str) -> None:
    """Two deltalake files, checkpoint at version 1 with stats only in stats_parsed, commit 0 gone."""
    write_deltalake(uri, pa.table({"id": range(10)}, schema=IDS), configuration=NO_JSON_STATS)
    write_deltalake(uri, pa.table({"id": range(100, 110)}, schema=IDS), mode="append")
    DeltaTable(uri).create_checkpoint()
    add = pq.read_table(f"{uri}/_delta_log/{1:020d}.checkpoint.parquet").schema.field("add").type
    assert add.get_field_index("stats") < 0 and add.get_field_index("stats_parsed") >= 0
    os.remove(f"{uri}/_delta_log/{0:020d}.json")


def test_stats_parsed_are_read_and_kept_in_deltatx_checkpoints(tmp_path):
    uri = str(tmp_path / "peer")
    _struct_stats_table(uri)
    t = deltatx.Table(uri)
    stats = sorted((json.loads(s) for s in t.files()["stats"].to_pylist()), key=lambda d: d["minValues"]["id"])
    assert [(d["numRecords"], d["minValues"], d["maxValues"], d["nullCount"]) for d in stats] == [
        (10, {"id": 0}, {"id": 9}, {"id": 0}), (10, {"id": 100}, {"id": 109}, {"id": 0})]
    assert t.to_arrow(where="id >= 100").num_rows == 10
    t.append(pa.table({"id": [500]}, schema=IDS))
    t.checkpoint()
    os.remove(f"{uri}/_delta_log/{1:020d}.checkpoint.parquet")
    adds = [a for a in pq.read_table(f"{uri}/_delta_log/{2:020d}.checkpoint.parquet").column("add").to_pylist() if a]
    # the table's settings hold for deltatx's checkpoint too: typed stats, no JSON
    assert all("stats" not in a for a in adds)
    assert sorted(a["stats_parsed"]["numRecords"] for a in adds) == [1, 10, 10]
    assert deltatx.Table(uri).to_arrow(where="id >= 500").num_rows == 1
    counts = pa.table(DeltaTable(uri).get_add_actions(flatten=True)).column("num_records").to_pylist()
    assert sorted(counts) == [1, 10, 10]


def test_enabling_row_tracking_uses_stats_parsed(tmp_path):
    uri = str(tmp_path / "peer")
    _struct_stats_table(uri)
    deltatx.Table(uri).set_properties({"delta.enableRowTracking": "true"})
    files = deltatx.Table(uri).files().sort_by("baseRowId")
    assert files["baseRowId"].to_pylist() == [0, 10]
    ids = deltatx.Table(uri).to_arrow(columns=["id", "_metadata.row_id"])
    assert sorted(ids["_metadata.row_id"].to_pylist()) == list(range(20))


def _strip_json_stats(uri: str) -> None:
    for name in sorted(os.listdir(f"{uri}/_delta_log")):
        if name.endswith(".json"):
            path = f"{uri}/_delta_log/{name}"
            with open(path) as fh:
                actions = [json.loads(line) for line in fh]
            for action in actions:
                if "add" in action:
                    action["add"].pop("stats", None)
            with open(path, "w") as fh:
                fh.write("".join(json.dumps(a) + "\n" for a in actions))


def test_enabling_row_tracking_counts_rows_of_files_without_stats(tmp_path):
    uri = str(tmp_path / "peer")
    write_deltalake(uri, pa.table({"id": range(10)}, schema=IDS))
    write_deltalake(uri, pa.table({"id": range(100, 105)}, schema=IDS), mode="append")
    _strip_json_stats(uri)
    deltatx.Table(uri).set_properties({"delta.enableRowTracking": "true"})
    t = deltatx.Table(uri)
    assert t.properties["delta.enableRowTracking"] == "true"
    assert sorted(json.loads(s)["numRecords"] for s in t.files()["stats"].to_pylist()) == [5, 10]
    rows = t.to_arrow(columns=["id", "_metadata.row_id"])
    assert sorted(rows["_metadata.row_id"].to_pylist()) == list(range(15))


def test_a_refused_row_tracking_enablement_commits_nothing(tmp_path):
    uri = str(tmp_path / "peer")
    write_deltalake(uri, pa.table({"id": range(10)}, schema=IDS))
    write_deltalake(uri, pa.table({"id": range(100, 105)}, schema=IDS), mode="append")
    _strip_json_stats(uri)
    victim = _adds(uri, 1)[0]["path"]
    os.remove(f"{uri}/{victim}")
    before = deltatx.Table(uri)
    with pytest.raises(errors.DataFileNotFoundError, match="nothing was committed"):
        before.set_properties({"delta.enableRowTracking": "true"})
    after = deltatx.Table(uri)
    assert after.version == before.version == 1
    assert after.protocol == before.protocol
    assert "rowTracking" not in (DeltaTable(uri).protocol().writer_features or [])
