"""A commit's few actions take Python paths through replay and row tracking (a dozen Arrow kernels
cost more than a handful of rows); these hold them to the columnar paths' answers."""

from __future__ import annotations

import pyarrow as pa

from deltatx.txnlog import replay, row_tracking
from deltatx.txnlog.actions import FILE_SCHEMA, REMOVE_SCHEMA, file_actions_table
from deltatx.txnlog.tombstones import Tombstones


def _dv(location: str, offset: int | None = None) -> dict:
    return {"storageType": "u", "pathOrInlineDv": location, "offset": offset, "sizeInBytes": 10, "cardinality": 1}


def _files(rows: list[tuple[str, dict | None]], copies: int = 1) -> pa.Table:
    actions = [{"path": path, "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True,
                "deletionVector": dv, "defaultRowCommitVersion": i % 3}
               for _ in range(copies) for i, (path, dv) in enumerate(rows)]
    return file_actions_table(actions, FILE_SCHEMA)


def _key(path: str, dv: dict | None) -> str:
    return replay.file_keys(_files([(path, dv)]))[0].as_py()


def _by_kernels(table: pa.Table, touched: pa.Array) -> list[str]:
    keep = pa.compute.invert(pa.compute.is_in(replay.file_keys(table), value_set=touched))
    return replay.file_keys(table.filter(keep)).to_pylist()


def test_drop_keys_matches_path_and_dv_exactly_on_small_and_large_tables():
    rows = [("a", None), ("a", _dv("x")), ("a", _dv("x", 7)), ("b", _dv("y")), ("c", None), ("b", None)]
    touched_sets = [
        [_key("a", _dv("x"))],                      # one DV of a path shared by three rows
        [_key("a", None), _key("b", _dv("y"))],     # a bare path and a DV key
        [_key("a", _dv("x", 7)), _key("z", None)],  # the same location at an offset; an unknown file
        [_key("q", None)],                          # nothing matches: the same table comes back
    ]
    for copies in (1, 12):  # 6 rows (Python path) and 72 rows (kernels after the path prefilter)
        table = _files(rows, copies)
        for touched in touched_sets:
            keys = pa.array(touched, pa.string())
            got = replay.drop_keys(table, keys)
            assert replay.file_keys(got).to_pylist() == _by_kernels(table, keys)
        assert replay.drop_keys(table, pa.array([_key("q", None)], pa.string())) is table
        many = pa.array([_key("a", _dv("x"))] + [_key(f"n{i}", None) for i in range(40)], pa.string())
        assert replay.file_keys(replay.drop_keys(table, many)).to_pylist() == _by_kernels(table, many)


def test_without_paths_small_and_large_agree_and_accept_a_set():
    table = _files([(f"p{i}", None) for i in range(40)])
    gone = ["p1", "p7", "p39", "nope"]
    expected = [f"p{i}" for i in range(40) if f"p{i}" not in gone]
    assert replay.without_paths(table, pa.array(gone)).column("path").to_pylist() == expected
    assert replay.without_paths(table, frozenset(gone)).column("path").to_pylist() == expected
    small = table.slice(0, 8)
    assert replay.without_paths(small, frozenset(gone)).column("path").to_pylist() == ["p0", "p2", "p3", "p4", "p5", "p6"]
    assert replay.without_paths(small, pa.array(gone)).column("path").to_pylist() == ["p0", "p2", "p3", "p4", "p5", "p6"]
    assert replay.without_paths(small, frozenset()) is small
    assert replay.without_paths(small, frozenset({"nope"})) is small


def test_bump_commit_versions_few_and_many_agree():
    for n in (5, 40):  # below and above the few-adds threshold
        adds = _files([(f"p{i}", None) for i in range(n)])
        versions = pa.array([None if i % 4 == 0 else i % 3 for i in range(n)], pa.int64())
        adds = adds.set_column(adds.schema.get_field_index("defaultRowCommitVersion"), "defaultRowCommitVersion", versions)
        bumped = row_tracking.bump_commit_versions(adds, 2)
        assert bumped["defaultRowCommitVersion"].to_pylist() == [3 if v == 2 else v for v in versions.to_pylist()]
        assert row_tracking.bump_commit_versions(adds, 9) is adds


def test_only_rows_is_filter_on_small_and_large_tables():
    masks = lambda n: [  # noqa: E731 - a table of cases
        [True] * n, [False] * n, [i == 2 for i in range(n)], [i % 2 == 0 for i in range(n)],
        [None if i == 1 else i == 3 for i in range(n)],
    ]
    for copies in (1, 12):  # 6 rows (slices) and 72 rows (a filter)
        table = _files([("a", None), ("b", _dv("x")), ("c", None), ("d", None), ("e", _dv("y")), ("f", None)], copies)
        for values in masks(table.num_rows):
            mask = pa.array(values, pa.bool_())
            got = replay.only_rows(table, mask)
            assert got.equals(table.filter(mask)), values
        if copies == 1:  # every row kept: the same table, nothing copied
            assert replay.only_rows(table, pa.array([True] * table.num_rows)) is table


def test_a_commit_whose_file_tables_were_built_applies_as_one_that_was_not():
    from deltatx.txnlog.actions import parse_commit

    base = _files([("a", None), ("b", None)])
    lines = [
        b'{"commitInfo":{"operation":"DELETE"}}',
        b'{"remove":{"path":"a","deletionTimestamp":5,"dataChange":true}}',
        b'{"add":{"path":"a","partitionValues":{},"size":1,"modificationTime":0,"dataChange":true,'
        b'"deletionVector":{"storageType":"u","pathOrInlineDv":"vBn[lx{q8@P<9BNH/isA","offset":1,'
        b'"sizeInBytes":36,"cardinality":1}}}',
        b'{"add":{"path":"c","partitionValues":{},"size":2,"modificationTime":0,"dataChange":true}}',
    ]
    results = []
    for build_first in (False, True):
        commit = parse_commit(b"\n".join(lines), 1)
        if build_first:  # what a conflict check does to a winner before the snapshot applies it
            assert commit.adds.num_rows == 2 and commit.removes.num_rows == 1
        tail = replay.FileTail()
        tail.add_commit(commit)
        files, tombstones = tail.apply(base, Tombstones.of(file_actions_table([], REMOVE_SCHEMA)))
        results.append((sorted(replay.file_keys(files).to_pylist()), tombstones.table.column("path").to_pylist()))
    assert results[0] == results[1]
    assert len(results[0][0]) == 3 and results[0][1] == ["a"]
