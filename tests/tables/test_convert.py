"""CONVERT TO DELTA (tables/convert.py): a Parquet folder becomes a table in one commit, files in
place, stats from the footers, partition values typed by the partition schema; every refusal
leaves the folder exactly as it was (no log, no file touched)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltatx
from deltatx.errors import SchemaMismatchError, TableAlreadyExistsError, TableNotFoundError
from deltatx.io.paths import decode_path
from deltatx.tables.convert import convert_to_delta, is_hidden_path

DATA = pa.table({"key": ["a", "b", "c", "d"], "value": [1, 2, 3, 4],
                 "day": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 1), dt.date(2024, 1, 2), None])})


def folder_state(path: Path) -> dict[str, int]:
    return {str(p.relative_to(path)): p.stat().st_mtime_ns for p in path.rglob("*") if p.is_file()}


def partitioned_folder(path: Path) -> Path:
    pq.write_to_dataset(DATA, str(path), partition_cols=["day"])
    (path / "_SUCCESS").write_text("")
    (path / "_temporary").mkdir()
    (path / "_temporary" / "junk.parquet").write_text("not parquet")
    (path / ".part.crc").write_text("x")
    return path


def test_convert_partitioned_folder(tmp_path):
    path = partitioned_folder(tmp_path / "p")
    parquet_before = {p for p in folder_state(path) if p.endswith(".parquet") and not p.startswith("_")}
    table = convert_to_delta(str(path), pa.schema([("day", pa.date32())]))
    assert table.version == 0 and table.partition_columns == ["day"]
    assert table.schema.names == ["key", "value", "day"] and table.schema.field("day").type == pa.date32()
    assert all(f.nullable for f in table.schema)
    rows = sorted(table.to_arrow().to_pylist(), key=lambda r: r["key"])
    assert rows == sorted(DATA.to_pylist(), key=lambda r: r["key"])
    files = table.files()
    assert {decode_path(p) for p in files.column("path").to_pylist()} == parquet_before
    values = sorted(dict(v).get("day") or "" for v in files.column("partitionValues").to_pylist())
    assert values == ["", "2024-01-01", "2024-01-02"]  # the Hive default folder is a null value
    stats = [json.loads(s) for s in files.column("stats").to_pylist()]
    assert sum(s["numRecords"] for s in stats) == 4
    assert all("key" in s["minValues"] and "value" in s["maxValues"] for s in stats)
    info = table.history()[0]
    assert info["operation"] == "CONVERT"
    assert info["operationParameters"] == {"numFiles": "3", "partitionedBy": '["day"]', "collectStats": "true",
                                           "sourceFormat": "parquet"}


def test_convert_unpartitioned_folder_with_several_files_and_widening_nulls(tmp_path):
    path = tmp_path / "u"
    path.mkdir()
    pq.write_table(pa.table({"id": [1, 2], "name": ["x", "y"]}), path / "part-0.parquet")
    pq.write_table(pa.table({"id": [3], "name": pa.nulls(1, pa.string())}), path / "part-1.parquet")
    table = convert_to_delta(str(path))
    assert table.partition_columns == [] and sorted(table.to_arrow().column("id").to_pylist()) == [1, 2, 3]
    deltatx.Table(str(path)).append(pa.table({"id": [4], "name": ["z"]}))  # an ordinary table from now on
    assert deltatx.Table(str(path)).to_arrow().num_rows == 4


def test_int96_timestamps_are_timestamps_not_ntz(tmp_path):
    path = tmp_path / "ts"
    path.mkdir()
    ts = pa.array([dt.datetime(2024, 1, 1, 12, 0)], pa.timestamp("ns"))
    pq.write_table(pa.table({"ts": ts}), path / "part-0.parquet", use_deprecated_int96_timestamps=True)
    table = convert_to_delta(str(path))
    assert table.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert table.to_arrow().column("ts").to_pylist()[0].replace(tzinfo=None) == dt.datetime(2024, 1, 1, 12, 0)


@pytest.mark.parametrize("partition_schema, match", [
    (None, "Expecting 0 partition column"),
    (pa.schema([("other", pa.date32())]), "Expecting 1 partition column"),
    (pa.schema([("day", pa.int32())]), "is not a int32"),
])
def test_partition_mismatch_is_refused_and_writes_nothing(tmp_path, partition_schema, match):
    path = partitioned_folder(tmp_path / "p")
    before = folder_state(path)
    with pytest.raises(SchemaMismatchError, match=match):
        convert_to_delta(str(path), partition_schema)
    assert folder_state(path) == before and not (path / "_delta_log").exists()


def test_other_refusals_write_nothing(tmp_path):
    with pytest.raises(TableNotFoundError):
        convert_to_delta(str(tmp_path / "missing"))
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "_SUCCESS").write_text("")
    with pytest.raises(SchemaMismatchError, match="no Parquet files"):
        convert_to_delta(str(empty))
    assert not (empty / "_delta_log").exists()

    mixed = tmp_path / "mixed"
    mixed.mkdir()
    pq.write_table(pa.table({"id": [1]}), mixed / "a.parquet")
    pq.write_table(pa.table({"id": ["one"]}), mixed / "b.parquet")
    before = folder_state(mixed)
    with pytest.raises(SchemaMismatchError, match="incompatible schemas"):
        convert_to_delta(str(mixed))
    (mixed / "notes.txt").write_text("not parquet")
    with pytest.raises(SchemaMismatchError):
        convert_to_delta(str(mixed))
    assert not (mixed / "_delta_log").exists() and set(folder_state(mixed)) == set(before) | {"notes.txt"}


def test_an_existing_table_is_not_converted_again(tmp_path):
    path = partitioned_folder(tmp_path / "p")
    convert_to_delta(str(path), pa.schema([("day", pa.date32())]))
    with pytest.raises(TableAlreadyExistsError):
        convert_to_delta(str(path), pa.schema([("day", pa.date32())]))
    assert deltatx.Table(str(path)).version == 0


def test_hidden_paths():
    assert is_hidden_path("_SUCCESS") and is_hidden_path(".x.crc") and is_hidden_path("_temporary/0/a.parquet")
    assert is_hidden_path("p=1/.a.parquet.crc")
    assert not is_hidden_path("_p=1/a.parquet") and not is_hidden_path("a/b.parquet")
