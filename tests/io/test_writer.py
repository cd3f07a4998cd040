"""Writing data files (deltatx.io.writer and the file_sink, partitioned_write and
streamed_write modules behind it): layout, add actions, stats, splitting, cleanup."""

from __future__ import annotations

import datetime as dt
import os
import threading
from decimal import Decimal

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from tablefiles import data_files

import deltatx.io.file_sink as file_sink_module
from deltatx.errors import DataFileNotFoundError, SchemaMismatchError
from deltatx.io import WriteOptions, decode_path, read_files, write_data_files
from deltatx.io.paths import HIVE_DEFAULT_PARTITION, data_file_path
from deltatx.txnlog.actions import FILE_SCHEMA
from deltatx.txnlog.store import open_store

WEIRD = ["with space", "a/b", "k=v", "12:30", "100%", "ü✓", "new\nline", "", None]


def _sorted(table: pa.Table, key: str = "id") -> pa.Table:
    return table.sort_by(key)


def _table(n: int, parts: int = 3) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "part": pa.array([i % parts for i in range(n)], pa.int32()),
            "value": pa.array([i * 0.5 for i in range(n)], pa.float64()),
            "name": pa.array([f"name-{i % 17}" for i in range(n)], pa.string()),
        }
    )


def test_unpartitioned_write_reads_back_identically(any_uri):
    store = open_store(any_uri)
    data = _table(5_000)
    adds = write_data_files(store, data, data.schema, [])
    assert adds.schema.equals(FILE_SCHEMA)
    assert adds.num_rows >= 1
    assert all(p.startswith("part-") and p.endswith("-c000.snappy.parquet") for p in adds["path"].to_pylist())
    back = read_files(store, adds, data.schema, [])
    assert _sorted(back).equals(data)


def test_partitioned_write_layout_values_and_read_back(table_uri):
    store = open_store(table_uri)
    data = pa.table({"id": pa.array(range(len(WEIRD) * 4), pa.int64()), "p": WEIRD * 4})
    adds = write_data_files(store, data, data.schema, ["p"])

    # "" and null are the same partition for Delta: both null, both in the default folder
    values = [dict(pv)["p"] for pv in adds["partitionValues"].to_pylist()]
    assert sorted(v for v in values if v is not None) == sorted(v for v in WEIRD if v)
    assert values.count(None) == 2
    for path, pv in zip(adds["path"].to_pylist(), adds["partitionValues"].to_pylist()):
        relative = decode_path(path)
        folder = relative.rsplit("/", 1)[0]
        if dict(pv)["p"] is None:
            assert folder == f"p={HIVE_DEFAULT_PARTITION}"
        assert folder.count("/") == 0  # '/' in a value is escaped, so one folder level
        full = data_file_path(store, relative)
        assert os.path.exists(full)
        assert pq.read_schema(full).names == ["id"]  # partition column not stored in the file
        assert os.path.getsize(full) == adds["size"].to_pylist()[adds["path"].to_pylist().index(path)]

    back = read_files(store, adds, data.schema, ["p"])
    expected = data.set_column(1, "p", pc.if_else(pc.equal(data["p"], ""), None, data["p"]))
    assert _sorted(back).equals(expected)


def test_every_add_has_stats_and_metadata(table_uri):
    store = open_store(table_uri)
    data = _table(3_000, parts=4)
    adds = write_data_files(store, data, data.schema, ["part"], data_change=False)
    assert adds["dataChange"].to_pylist() == [False] * adds.num_rows
    assert adds["modificationTime"].null_count == 0
    total = 0
    for stats, pv in zip(adds["stats"].to_pylist(), adds["partitionValues"].to_pylist()):
        doc = orjson.loads(stats)
        total += doc["numRecords"]
        assert set(doc["minValues"]) == {"id", "value", "name"}  # no partition column
        assert "part" not in doc["nullCount"]
        part = int(dict(pv)["part"])
        assert doc["minValues"]["id"] % 4 == part
    assert total == data.num_rows


def test_many_partitions_use_one_folder_each(table_uri):
    store = open_store(table_uri)
    data = _table(30_000, parts=300)
    adds = write_data_files(store, data, data.schema, ["part"])
    assert adds.num_rows == 300
    assert len({p.rsplit("/", 1)[0] for p in adds["path"].to_pylist()}) == 300
    back = read_files(store, adds, data.schema, ["part"])
    assert _sorted(back).equals(data)


@pytest.mark.parametrize(
    "column",
    [
        pa.array([dt.date(2024, 1, 1 + i % 3) for i in range(60)], pa.date32()),
        pa.array([dt.datetime(2024, 1, 1, i % 4, tzinfo=dt.timezone.utc) for i in range(60)], pa.timestamp("us", "UTC")),
        pa.array([dt.datetime(2024, 1, 1, 0, 0, i % 2) for i in range(60)], pa.timestamp("us")),
        pa.array([i % 2 == 0 if i % 5 else None for i in range(60)], pa.bool_()),
        pa.array([Decimal(i % 3) / 4 for i in range(60)], pa.decimal128(6, 2)),
        pa.array([(i % 3) * 1.5 if i % 7 else None for i in range(60)], pa.float64()),
        pa.array([bytes([i % 3, 255]) for i in range(60)], pa.binary()),
    ],
    ids=["date", "timestamp_utc", "timestamp_ntz", "bool", "decimal", "float", "binary"],
)
def test_typed_partition_columns_round_trip(table_uri, column):
    store = open_store(table_uri)
    data = pa.table({"id": pa.array(range(60), pa.int64()), "p": column})
    adds = write_data_files(store, data, data.schema, ["p"])
    back = read_files(store, adds, data.schema, ["p"])
    assert _sorted(back).equals(data)


def test_two_partition_columns_with_nulls(table_uri):
    store = open_store(table_uri)
    n = 400
    data = pa.table(
        {
            "a": pa.array([None if i % 9 == 0 else i % 3 for i in range(n)], pa.int64()),
            "b": pa.array([None if i % 5 == 0 else f"v{i % 4}" for i in range(n)]),
            "id": pa.array(range(n), pa.int64()),
        }
    )
    adds = write_data_files(store, data, data.schema, ["a", "b"])
    assert all(p.count("/") == 2 for p in adds["path"].to_pylist())
    assert _sorted(read_files(store, adds, data.schema, ["a", "b"])).equals(data)


def test_record_batch_reader_is_streamed_in_chunks(table_uri):
    store = open_store(table_uri)
    data = _table(10_000)
    reader = pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=700))
    options = WriteOptions(target_file_rows=2_500, row_group_rows=1_000)
    adds = write_data_files(store, reader, data.schema, ["part"], options)
    rows = [orjson.loads(s)["numRecords"] for s in adds["stats"].to_pylist()]
    assert max(rows) <= 2_500 and sum(rows) == 10_000
    assert _sorted(read_files(store, adds, data.schema, ["part"])).equals(data)


def test_files_are_cut_at_target_rows(table_uri):
    store = open_store(table_uri)
    data = _table(10_000, parts=1)
    adds = write_data_files(store, data, data.schema, [], WriteOptions(target_file_rows=3_000, row_group_rows=1_000,
                                                                      spread_min_rows=1_000))
    rows = sorted(orjson.loads(s)["numRecords"] for s in adds["stats"].to_pylist())
    assert rows == [2_500, 2_500, 2_500, 2_500]


def test_two_million_rows_use_row_groups_of_the_configured_size(table_uri):
    """Row groups of 128k rows (DuckDB's ~122k, Spark's 128 MB for narrow rows): a point lookup
    reads one group of a large file, and a small write still lands in one file."""
    store = open_store(table_uri)
    n = 2_000_000
    data = pa.table({"id": pa.array(range(n), pa.int64()), "v": pc.multiply(pa.array(range(n), pa.int64()), 3)})
    adds = write_data_files(store, data, data.schema, [])
    row_groups = []
    for path in adds["path"].to_pylist():
        meta = pq.ParquetFile(data_file_path(store, decode_path(path))).metadata
        row_groups.extend(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
    assert sum(row_groups) == n and len(adds) == 2  # two workers, one file each
    assert max(row_groups) == WriteOptions().row_group_rows == 128 * 1024
    assert sorted(row_groups)[0] >= 1_000_000 - 7 * 128 * 1024  # only each file's last group is short


def test_empty_input_writes_nothing(table_uri):
    store = open_store(table_uri)
    data = _table(0)
    adds = write_data_files(store, data, data.schema, ["part"])
    assert adds.num_rows == 0 and adds.schema.equals(FILE_SCHEMA)
    assert data_files(store.root) == set()


def test_partitioning_errors_are_schema_errors(table_uri):
    store = open_store(table_uri)
    data = _table(10)
    with pytest.raises(SchemaMismatchError, match="not in the schema"):
        write_data_files(store, data, data.schema, ["nope"])
    only = pa.table({"p": [1, 2]})
    with pytest.raises(SchemaMismatchError, match="every column is a partition column"):
        write_data_files(store, only, only.schema, ["p"])


def test_failure_midway_deletes_every_written_file(table_uri, monkeypatch):
    store = open_store(table_uri)
    data = _table(20_000, parts=20)
    calls = {"n": 0}
    lock = threading.Lock()
    real = file_sink_module.compute_stats

    def failing_stats(*args, **kwargs):
        with lock:
            calls["n"] += 1
            if calls["n"] == 7:
                raise RuntimeError("disk on fire")
        return real(*args, **kwargs)

    monkeypatch.setattr(file_sink_module, "compute_stats", failing_stats)
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_data_files(store, data, data.schema, ["part"], WriteOptions(max_workers=3))
    assert calls["n"] >= 7
    assert data_files(store.root) == set()


@pytest.mark.parametrize("partition_columns, rows, batch, per_file", [
    (["part"], 6_000, 1_000, 1_000),   # partitioned: chunk by chunk
    ([], 60_000, 10_000, 20_000),      # unpartitioned: streamed files, row group by row group
], ids=["partitioned", "unpartitioned"])
def test_failure_in_a_stream_deletes_every_file_it_wrote(table_uri, partition_columns, rows, batch, per_file):
    store = open_store(table_uri)
    data = _table(rows)

    def batches():
        yield from data.to_batches(max_chunksize=batch)[:5]
        raise ValueError("source broke")

    reader = pa.RecordBatchReader.from_batches(data.schema, batches())
    with pytest.raises(ValueError, match="source broke"):
        write_data_files(store, reader, data.schema, partition_columns, WriteOptions(target_file_rows=per_file))
    assert data_files(store.root) == set()


def test_failing_parquet_write_cleans_up_partial_files(table_uri, monkeypatch):
    store = open_store(table_uri)
    data = _table(9_000, parts=3)
    real = file_sink_module.pq.write_table
    calls = {"n": 0}
    lock = threading.Lock()

    def flaky_write(table, where, **kwargs):
        if table.num_rows:  # data files only
            with lock:
                calls["n"] += 1
                n = calls["n"]
            if n == 2:  # the first file is complete; this one is half written
                where.write(b"PAR1 half a file")
                raise OSError("write failed")
        return real(table, where, **kwargs)

    monkeypatch.setattr(file_sink_module.pq, "write_table", flaky_write)
    with pytest.raises(OSError, match="write failed"):
        write_data_files(store, data, data.schema, ["part"], WriteOptions(max_workers=1))
    assert calls["n"] >= 2
    assert data_files(store.root) == set()


def test_partitioned_round_trip_in_memory(memory_uri):
    store = open_store(memory_uri)
    data = pa.table({"id": pa.array(range(50), pa.int64()), "p": [WEIRD[i % len(WEIRD)] or "x" for i in range(50)]})
    adds = write_data_files(store, data, data.schema, ["p"])
    assert adds.num_rows == len({v or "x" for v in WEIRD})
    assert _sorted(read_files(store, adds, data.schema, ["p"])).equals(data)


@pytest.mark.s3
def test_partitioned_round_trip_on_s3(s3_bucket):
    prefix, options = s3_bucket
    store = open_store(f"{prefix}/t", options)
    data = _table(2_000, parts=3).set_column(1, "part", pa.array([f"a/{i % 3}:" for i in range(2_000)]))
    adds = write_data_files(store, data, data.schema, ["part"])
    assert adds.num_rows == 3
    back = read_files(store, adds, data.schema, ["part"])
    assert _sorted(back).equals(data)
    store.delete_files([decode_path(p) for p in adds["path"].to_pylist()[:1]])
    with pytest.raises(DataFileNotFoundError):
        read_files(store, adds, data.schema, ["part"])


def test_input_checks(table_uri):
    store = open_store(table_uri)
    schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    with pytest.raises(SchemaMismatchError, match="pyarrow Table or RecordBatchReader"):
        write_data_files(store, [{"id": 1}], schema, [])
    with pytest.raises(SchemaMismatchError, match="lacks columns"):
        write_data_files(store, pa.table({"id": [1]}), schema, [])
    with pytest.raises(SchemaMismatchError, match="does not fit"):
        write_data_files(store, pa.table({"id": ["x"], "s": ["y"]}), schema, [])
    batch = pa.record_batch({"s": ["a", "b"], "id": pa.array([1, 2], pa.int64())})  # columns reordered
    adds = write_data_files(store, batch, schema, [], WriteOptions(compression="zstd"))
    assert adds["path"].to_pylist()[0].endswith("-c000.zstd.parquet")
    assert read_files(store, adds, schema, []).sort_by("id").to_pydict() == {"id": [1, 2], "s": ["a", "b"]}


def test_unpartitioned_stream_is_encoded_while_it_arrives(table_uri):
    """Unpartitioned streams: files cut at the target, several row groups each, exact stats."""
    store = open_store(table_uri)
    data = _table(300_000)
    reader = pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=10_000))
    adds = write_data_files(store, reader, data.schema, [], WriteOptions(target_file_rows=200_000))
    stats = [orjson.loads(s) for s in adds["stats"].to_pylist()]
    assert sorted(s["numRecords"] for s in stats) == [100_000, 200_000]
    assert {s["minValues"]["id"] for s in stats} == {0, 200_000}
    assert {s["maxValues"]["id"] for s in stats} == {199_999, 299_999}
    first = [p for p in adds["path"].to_pylist()]
    groups = [pq.ParquetFile(os.path.join(table_uri, decode_path(p))).metadata.num_row_groups for p in first]
    assert max(groups) > 1, "row groups are written as the rows arrive"
    assert _sorted(read_files(store, adds, data.schema, [])).equals(data)


def test_unpartitioned_stream_shorter_than_the_sample_and_small_files(table_uri):
    store = open_store(table_uri)
    data = _table(1_000)
    reader = pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=64))
    adds = write_data_files(store, reader, data.schema, [], WriteOptions(target_file_rows=300))
    assert sorted(orjson.loads(s)["numRecords"] for s in adds["stats"].to_pylist()) == [250, 250, 250, 250]
    assert _sorted(read_files(store, adds, data.schema, [])).equals(data)


def test_a_small_local_file_is_encoded_in_memory_with_the_same_bytes(table_uri, monkeypatch):
    """Small files reach a local disk in one write (io/file_sink.py, DataFileSink._parquet_bytes); what lands is
    byte for byte what the streamed writer produces, and the add's size is the file's."""
    store = open_store(table_uri)
    data = _table(300)
    buffered = write_data_files(store, data, data.schema, [])
    monkeypatch.setattr(file_sink_module, "BUFFERED_FILE_BYTES", -1)  # every file streamed
    streamed = write_data_files(store, data, data.schema, [])
    assert buffered.num_rows == streamed.num_rows == 1

    def file_bytes(adds: pa.Table) -> bytes:
        with open(data_file_path(store, decode_path(adds["path"][0].as_py())), "rb") as fh:
            return fh.read()

    assert file_bytes(buffered) == file_bytes(streamed)
    assert buffered["size"][0].as_py() == len(file_bytes(buffered))
    assert read_files(store, buffered, data.schema, []).equals(data)


def test_a_missing_nested_folder_is_made_and_an_existing_one_left_alone(table_uri):
    from deltatx.txnlog.store import _ensure_folder

    nested = os.path.join(table_uri, "a=1", "b=2")
    _ensure_folder(nested)
    _ensure_folder(nested)  # there already: nothing to do
    assert os.path.isdir(nested)
