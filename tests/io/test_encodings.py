"""Per-column Parquet encodings (io/encodings.py): which columns get a dictionary, which are
delta-encoded, and that files written with them read back the same rows through the data path."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import deltatx
from deltatx.io import encodings
from deltatx.io.encodings import DELTA, SAMPLE_ROWS

N = SAMPLE_ROWS * 3
RNG = np.random.default_rng(7)


def _columns() -> dict[str, pa.Array]:
    ids = np.arange(N, dtype=np.int64)
    return {
        "id": pa.array(ids),
        "random64": pa.array(RNG.integers(-2**62, 2**62, N)),
        "code": pa.array(RNG.choice([200, 404, 500], N)),
        "ts": pa.array(ids * 1_000_000 + 1_700_000_000_000_000, pa.timestamp("us", tz="UTC")),
        "day": pa.array(ids // 3, pa.int32()).cast(pa.date32()),
        "i32": pa.array(ids % 40_000, pa.int32()),
        "u32": pa.array(ids.astype(np.uint32) + np.uint32(4_000_000_000 - N)),
        "u64": pa.array(ids.astype(np.uint64)),
        "name": pa.array([f"n{i}" for i in range(N)]),
        "x": pa.array(RNG.random(N)),
        "nested": pa.array([{"a": int(i)} for i in ids]),
        "flag": pa.array(ids % 2 == 0),
        "holes": pa.array([None if i % 5 == 0 else i for i in range(N)], pa.int64()),
        "extremes": pa.array(np.where(ids % 2 == 0, np.iinfo(np.int64).min, np.iinfo(np.int64).max)),
    }


def test_sorted_integers_dates_and_times_are_delta_encoded_the_rest_as_before():
    chosen = encodings.choose(pa.table(_columns()))
    assert chosen.column_encoding == {name: DELTA for name in ("id", "ts", "day", "i32", "u32", "holes")}
    # low-cardinality columns keep their dictionary; so do nested leaves and booleans
    assert sorted(chosen.use_dictionary) == ["code", "extremes", "flag", "nested.a"]
    # near-unique columns whose neighbours are far apart (random, floats, strings, uint64) get
    # neither: PLAIN, as Arrow falls back to anyway
    for plain in ("random64", "name", "x", "u64"):
        assert plain not in chosen.column_encoding and plain not in chosen.use_dictionary


def test_sorted_dates_with_repeats_prefer_delta_to_a_dictionary_and_status_codes_do_not():
    days = pa.array(np.arange(N) // 2, pa.int32()).cast(pa.date32())  # ~8k distinct: a dictionary would do
    codes = pa.array(RNG.choice([200, 404, 500], N))
    chosen = encodings.choose(pa.table({"day": days, "code": codes}))
    assert chosen.column_encoding == {"day": DELTA}
    assert chosen.use_dictionary == ["code"]


def test_small_files_and_dictionary_only_files_keep_arrows_defaults():
    assert encodings.choose(pa.table({"id": pa.array(range(SAMPLE_ROWS - 1), pa.int64())})) is encodings.DEFAULT
    assert encodings.choose(pa.table({"code": pa.array(np.arange(N) % 7)})) is encodings.DEFAULT
    assert encodings.DEFAULT.writer_args() == {"use_dictionary": True}


def test_a_file_written_with_the_choice_reads_back_equal(tmp_path):
    table = pa.table(_columns())
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, row_group_size=SAMPLE_ROWS, **encodings.choose(table).writer_args())
    assert pq.read_table(path).equals(table)
    group = pq.ParquetFile(path).metadata.row_group(1)
    used = {group.column(i).path_in_schema: group.column(i).encodings for i in range(group.num_columns)}
    assert DELTA in used["id"] and "PLAIN" not in used["id"]
    assert "RLE_DICTIONARY" in used["code"]
    assert DELTA not in used["random64"]


def _file_encodings(table: deltatx.Table) -> list[dict[str, tuple[str, ...]]]:
    out = []
    for path in table.files()["path"].to_pylist():
        meta = pq.ParquetFile(f"{table.uri}/{path}").metadata
        group = meta.row_group(0)
        out.append({group.column(i).path_in_schema: group.column(i).encodings for i in range(group.num_columns)})
    return out


@pytest.mark.parametrize("streamed", [False, True], ids=["table", "stream"])
def test_tables_write_sorted_ids_delta_encoded_and_dml_reads_them(table_uri, streamed):
    rows = pa.table({"id": pa.array(np.arange(N), pa.int64()),
                     "at": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
                                     + dt.timedelta(seconds=int(i)) for i in range(N)], pa.timestamp("us", "UTC")),
                     "v": pa.array(RNG.random(N))})
    table = deltatx.create_table(table_uri, rows.schema, properties={"delta.enableDeletionVectors": "true"})
    table.append(rows.to_reader(max_chunksize=5000) if streamed else rows)
    for used in _file_encodings(table):
        assert DELTA in used["id"] and DELTA in used["at"] and DELTA not in used["v"]
    table.delete(where=f"id = {N // 2}")
    table.update(where="id = 7", set={"v": "-1.0"})
    back = table.to_arrow().sort_by("id")
    assert back.num_rows == N - 1
    assert not pc.any(pc.equal(back["id"], N // 2)).as_py()
    assert back.filter(pc.equal(back["id"], 7))["v"].to_pylist() == [-1.0]
    expected = rows.filter(pc.not_equal(rows["id"], N // 2))
    assert back["at"].equals(expected["at"])
