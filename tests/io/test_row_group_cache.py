"""The decoded row-group cache: same rows as a plain read, bounded, keyed by the file's content."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltatx
from deltatx.io import row_group_cache
from deltatx.io.row_group_cache import ROW_GROUPS, RowGroupCache, local_key, logged_key

DV_PROPS = {"delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true"}


def _file(path, rows: int = 4_000, group: int = 1_000) -> str:
    ids = np.arange(rows, dtype=np.int64)
    pq.write_table(pa.table({"id": ids, "v": ids * 2, "s": [f"r{i}" for i in range(rows)]}), path,
                   row_group_size=group)
    return str(path)


def test_a_cached_read_returns_what_arrow_reads(tmp_path):
    path = _file(tmp_path / "f.parquet")
    cache = RowGroupCache(max_bytes=1 << 24)
    key = local_key(path)
    with pq.ParquetFile(path) as pf:
        expected = pf.read_row_groups([2], columns=["id", "s"])
        first = cache.read_row_groups(pf, key, [2], ["id", "s"])  # read once: not kept yet
        cache.read_row_groups(pf, key, [2], ["id", "s"])  # twice: still not
        assert cache.nbytes == 0
        second = cache.read_row_groups(pf, key, [2], ["id", "s"])  # the third read keeps it
        again = cache.read_row_groups(pf, key, [2], ["s", "id"])  # another order: served from the cache
        mixed = cache.read_row_groups(pf, key, [2], ["v", "id"])  # one column new, one cached
        two = cache.read_row_groups(pf, key, [1, 3], ["id"])
    assert first.equals(expected) and second.equals(expected)
    assert again.equals(expected.select(["s", "id"]))
    assert mixed.equals(pq.read_table(path).slice(2_000, 1_000).select(["v", "id"]))
    assert two.column("id").to_pylist() == list(range(1_000, 2_000)) + list(range(3_000, 4_000))
    # per group read: [2] miss (counted) x2, miss (kept), hit, partial miss; [1], [3]
    assert (cache.hits, cache.misses) == (1, 6)


def test_kept_columns_live_outside_arrows_default_pool(tmp_path):
    """A kept group is a copy in the cache's own pool: left in the default pool (mimalloc) it would
    pin pages among the reads' short-lived buffers, and later reads would stall on fresh pages."""
    path = _file(tmp_path / "f.parquet")
    cache = RowGroupCache(max_bytes=1 << 24)
    key = local_key(path)
    pool = row_group_cache._cache_pool()
    assert pool.backend_name != pa.default_memory_pool().backend_name
    with pq.ParquetFile(path) as pf:
        for _ in range(row_group_cache.KEEP_ON_READ - 1):
            cache.read_row_groups(pf, key, [1], ["id", "s"])
        before = pool.bytes_allocated()
        cache.read_row_groups(pf, key, [1], ["id", "s"])  # this read keeps it
        assert pool.bytes_allocated() - before >= cache.nbytes > 0
        served = cache.read_row_groups(pf, key, [1], ["id", "s"])
    assert cache.hits == 1
    assert served.equals(pq.read_table(path).slice(1_000, 1_000).select(["id", "s"]))
    del served
    cache.clear()
    assert pool.bytes_allocated() <= before  # dropped entries give their memory back


def test_a_group_read_once_or_twice_is_not_kept(tmp_path):
    """Point reads of groups that are not hot (P10: each DELETE another group, each group at most
    twice) keep no memory: keeping copies the group into fresh pages, two decodes' worth in a
    VM; a group read a third time is kept."""
    path = _file(tmp_path / "f.parquet")
    cache = RowGroupCache(max_bytes=1 << 24)
    key = local_key(path)
    with pq.ParquetFile(path) as pf:
        for g in list(range(4)) * 2:
            cache.read_row_groups(pf, key, [g], ["id"])
        assert cache.nbytes == 0 and cache.misses == 8
        cache.read_row_groups(pf, key, [1], ["id"])
        assert cache.nbytes > 0 and cache.hits == 0
        assert cache.read_row_groups(pf, key, [1], ["id"]).column("id").to_pylist() == list(range(1_000, 2_000))
        assert cache.hits == 1
        cache.read_row_groups(pf, local_key(_file(tmp_path / "g.parquet")), [1], ["id"])  # another file
        assert cache.misses == 10 and cache.hits == 1


def test_many_groups_and_unknown_files_bypass_the_cache(tmp_path):
    path = _file(tmp_path / "f.parquet")
    cache = RowGroupCache(max_bytes=1 << 24)
    with pq.ParquetFile(path) as pf:
        assert cache.read_row_groups(pf, local_key(path), [0, 1, 2], ["id"]).num_rows == 3_000
        assert cache.read_row_groups(pf, None, [0], ["id"]).num_rows == 1_000
    assert cache.nbytes == 0 and cache.misses == 0


def test_the_budget_evicts_least_recently_used_and_skips_huge_groups(tmp_path):
    path = _file(tmp_path / "f.parquet")
    with pq.ParquetFile(path) as pf:
        one_group = pf.read_row_group(0, columns=["id"]).nbytes
        cache = RowGroupCache(max_bytes=one_group * 4)  # room for four single-column groups
        key = local_key(path)
        for g in list(range(4)) * 3:  # each read three times: kept on the third read
            cache.read_row_groups(pf, key, [g], ["id"])
        assert cache.nbytes <= cache.max_bytes
        cache.read_row_groups(pf, key, [0], ["id", "v"])  # two columns of one group: > a quarter
        assert cache.misses == 13
        cache.read_row_groups(pf, key, [3], ["id"])
        assert cache.hits == 1  # group 3 still there
        small = RowGroupCache(max_bytes=one_group)  # a group above a quarter of the budget is not kept
        for _ in range(3):
            small.read_row_groups(pf, key, [0], ["id"])
        assert small.nbytes == 0


def test_a_file_replaced_in_place_is_a_different_key(tmp_path):
    path = _file(tmp_path / "f.parquet")
    before = local_key(path)
    os.remove(path)
    _file(tmp_path / "f.parquet", rows=3_000)
    assert local_key(path) != before
    assert local_key(str(tmp_path / "missing.parquet")) is None
    assert logged_key("s3://b/f.parquet", 10, 20) == ("s3://b/f.parquet", 10, 20)
    assert logged_key("s3://b/f.parquet", None, 20) is None


def test_configure_bounds_and_turns_off(tmp_path):
    saved = ROW_GROUPS.max_bytes
    try:
        with pytest.raises(ValueError):
            row_group_cache.configure(-1)
        row_group_cache.configure(0)
        assert not ROW_GROUPS.enabled and ROW_GROUPS.nbytes == 0
        row_group_cache.configure(1 << 20)
        assert ROW_GROUPS.enabled and ROW_GROUPS.max_bytes == 1 << 20
    finally:
        row_group_cache.configure(saved)


def _point_updates(uri: str) -> deltatx.Table:
    ids = np.arange(300_000, dtype=np.int64)
    t = deltatx.create_table(uri, pa.schema([("id", pa.int64()), ("v", pa.int64())]), properties=DV_PROPS)
    t.append(pa.table({"id": ids, "v": np.zeros(300_000, dtype=np.int64)}))
    return t


def test_repeated_point_updates_hit_the_cache_and_change_the_right_rows(tmp_path):
    t = _point_updates(str(tmp_path / "t"))
    ROW_GROUPS.clear()
    for k in (5, 6, 7, 5):  # one row group; the second update of 5 sees the first one's DV
        t.update(where=f"id = {k}", set={"v": "v + 1"})
    assert ROW_GROUPS.hits >= 1  # kept on its third read
    got = dict(zip(*t.to_arrow(where="id < 9", columns=["id", "v"]).sort_by("id").columns))
    assert {int(k.as_py()): v.as_py() for k, v in got.items()} == {0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 2, 6: 1, 7: 1, 8: 0}
    assert t.to_arrow().num_rows == 300_000
    deltatx.Table(str(tmp_path / "t")).delete("id = 6")  # another handle, same process: same files
    assert deltatx.Table(str(tmp_path / "t")).to_arrow(where="id = 6").num_rows == 0


def test_a_deleted_data_file_still_raises_with_the_cache_warm(tmp_path):
    t = _point_updates(str(tmp_path / "t"))
    t.update(where="id = 1", set={"v": "v + 1"})
    big = max(t.files().column("path").to_pylist(), key=lambda p: os.path.getsize(tmp_path / "t" / p))
    os.remove(tmp_path / "t" / big)
    before = sorted(os.listdir(tmp_path / "t" / "_delta_log"))
    with pytest.raises(deltatx.errors.DataFileNotFoundError):
        t.update(where="id = 2", set={"v": "v + 1"})
    assert sorted(os.listdir(tmp_path / "t" / "_delta_log")) == before  # nothing committed
    assert deltatx.Table(str(tmp_path / "t")).version == t.version


def test_no_matching_group_reads_nothing(tmp_path):
    """The file's stats may match while none of its row groups does (ids 0–999 and 5000–5999,
    predicate id = 3000): the point change reads no group, changes nothing, raises nothing."""
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, pa.schema([("id", pa.int64()), ("v", pa.int64())]), properties=DV_PROPS)
    ids = np.concatenate([np.arange(1_000), np.arange(5_000, 6_000)]).astype(np.int64)
    path = tmp_path / "t" / "gap.parquet"
    pq.write_table(pa.table({"id": ids, "v": np.zeros(2_000, dtype=np.int64)}), path, row_group_size=1_000)
    from deltatx.txnlog.stats import stats_from_parquet_footer

    stats = stats_from_parquet_footer(pq.read_metadata(path), t.schema, None, 32)
    from deltatx.txnlog.actions import FILE_SCHEMA, file_actions_table

    with t.transaction() as tx:
        tx.stage_adds(file_actions_table([{"path": "gap.parquet", "partitionValues": {}, "size": os.path.getsize(path),
                                           "modificationTime": 0, "dataChange": True, "stats": stats}], FILE_SCHEMA))
    with pq.ParquetFile(path) as pf:
        assert RowGroupCache().read_row_groups(pf, local_key(str(path)), [], ["id"]).num_rows == 0
    assert t.update(where="id = 3000", set={"v": "v + 1"}).metrics["numUpdatedRows"] == 0
    assert t.delete("id = 3000").metrics["numDeletedRows"] == 0
    assert t.to_arrow().num_rows == 2_000


def test_footers_are_kept_within_an_eighth_of_the_budget(tmp_path):
    paths = [_file(tmp_path / f"f{i}.parquet", rows=2_000) for i in range(6)]
    size = pq.read_metadata(paths[0]).serialized_size
    cache = RowGroupCache(max_bytes=size * 8 * 3)  # room for three footers
    for p in paths:
        cache.keep_footer(local_key(p), pq.read_metadata(p))
    assert [cache.footer(local_key(p)) is not None for p in paths] == [False] * 3 + [True] * 3
    assert cache.footer(local_key(paths[5])).num_rows == 2_000
    cache.resize(size * 8)  # room for one: the least recently used go
    assert [cache.footer(local_key(p)) is not None for p in paths[3:]] == [False, False, True]
    cache.resize(0)
    assert cache.footer(local_key(paths[5])) is None


def test_row_group_bounds_are_gathered_once_per_file_and_columns(tmp_path, monkeypatch):
    """A point change finds its row group from the footer's min/max; the second change of the
    same file reuses them, a replaced file or a cleared cache gathers them again."""
    from deltatx.io import reader

    t = _point_updates(str(tmp_path / "t"))
    ROW_GROUPS.clear()
    gathered: list[tuple[str, ...]] = []
    real = reader._footer_bounds

    def counting(metadata, names):
        gathered.append(names)
        return real(metadata, names)

    monkeypatch.setattr(reader, "_footer_bounds", counting)
    t.delete("id = 10")
    t.delete("id = 150000")  # another row group of the same file: the same bounds
    assert gathered == [("id",)]
    (path,) = [p for p in t.files().column("path").to_pylist()]
    bounds = ROW_GROUPS.bounds(local_key(str(tmp_path / "t" / path)), ("id",))
    assert [b["minValues"]["id"] for b in bounds] == [0, 131072, 262144]
    ROW_GROUPS.clear()
    t.delete("id = 11")
    assert gathered == [("id",), ("id",)]
    assert sorted(set(range(9, 13)) - set(t.to_arrow(where="id < 13 AND id > 8")["id"].to_pylist())) == [10, 11]


def test_bounds_are_bounded_and_go_with_the_cache():
    cache = RowGroupCache(max_bytes=1 << 20)
    for i in range(row_group_cache.MAX_BOUNDS + 5):
        cache.keep_bounds(("f", i), ("id",), [{"minValues": {"id": i}, "maxValues": {"id": i}}])
    assert cache.bounds(("f", 0), ("id",)) is None
    assert cache.bounds(("f", row_group_cache.MAX_BOUNDS + 4), ("id",))[0]["minValues"] == {"id": row_group_cache.MAX_BOUNDS + 4}
    assert cache.bounds(("f", row_group_cache.MAX_BOUNDS + 4), ("v",)) is None
    assert cache.bounds(None, ("id",)) is None
    cache.resize(0)
    assert cache.bounds(("f", row_group_cache.MAX_BOUNDS + 4), ("id",)) is None
