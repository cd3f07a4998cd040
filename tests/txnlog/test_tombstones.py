"""Tombstones fold lazily (txnlog/tombstones.py): folding many steps at once must give exactly
the rows, in the order, that reconciling after every commit gives — whatever the commits touch."""

from __future__ import annotations

import pickle

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

import deltatx
from deltatx.txnlog import replay, tombstones
from deltatx.txnlog.actions import FILE_SCHEMA, REMOVE_SCHEMA, file_actions_table
from deltatx.txnlog.tombstones import Tombstones

PATHS = ["a", "b", "c", "d"]
DVS = [None, "x", "y"]


def _dv(location: str | None) -> dict | None:
    if location is None:
        return None
    return {"storageType": "u", "pathOrInlineDv": location.ljust(20, "0"), "offset": 1, "sizeInBytes": 10,
            "cardinality": 1}


def _actions(kind: str, refs: list[tuple[str, str | None]], stamp: int) -> pa.Table:
    if kind == "add":
        rows = [{"path": p, "partitionValues": {}, "size": 1, "modificationTime": stamp, "dataChange": True,
                 "deletionVector": _dv(d)} for p, d in refs]
        return file_actions_table(rows, FILE_SCHEMA)
    rows = [{"path": p, "deletionTimestamp": stamp, "dataChange": True, "deletionVector": _dv(d)} for p, d in refs]
    return file_actions_table(rows, REMOVE_SCHEMA)


ref = st.tuples(st.sampled_from(PATHS), st.sampled_from(DVS))
commit = st.tuples(st.lists(ref, max_size=3), st.lists(ref, max_size=3))


def _step(files: pa.Table, state: Tombstones, adds: list, removes: list, stamp: int) -> tuple[pa.Table, Tombstones]:
    add_table, remove_table = _actions("add", adds, stamp), _actions("remove", removes, stamp)
    add_pos = list(range(len(removes), len(removes) + len(adds)))
    return replay.reconcile(files, state, add_table, add_pos, remove_table, list(range(len(removes))))


def _rows(table: pa.Table) -> list[tuple]:
    return [(r["path"], (r["deletionVector"] or {}).get("pathOrInlineDv"), r["deletionTimestamp"])
            for r in table.select(["path", "deletionVector", "deletionTimestamp"]).to_pylist()]


@settings(max_examples=150, deadline=None)
@given(st.lists(commit, min_size=1, max_size=12), st.integers(0, 3))
def test_folding_at_the_end_equals_folding_after_every_commit(commits, base_rows):
    base = _actions("remove", [(PATHS[i], None) for i in range(base_rows)], 0)
    files = FILE_SCHEMA.empty_table()
    lazy = eager = Tombstones.of(base)
    eager_files = files
    for stamp, (adds, removes) in enumerate(commits, start=1):
        files, lazy = _step(files, lazy, adds, removes, stamp)
        eager_files, eager = _step(eager_files, eager, adds, removes, stamp)
        eager.table  # noqa: B018 - folded after each commit, as replay did before
    assert _rows(lazy.table) == _rows(eager.table)
    assert lazy.pending == 0
    assert replay.file_keys(files).to_pylist() == replay.file_keys(eager_files).to_pylist()


def test_a_chain_stays_bounded_and_a_commit_touching_nothing_adds_no_step():
    state = Tombstones.of(REMOVE_SCHEMA.empty_table())
    files = FILE_SCHEMA.empty_table()
    assert _step(files, state, [], [], 1)[1] is state
    for stamp in range(1, 3 * tombstones.MAX_PENDING):
        files, state = _step(files, state, [(f"f{stamp}", None)], [(f"f{stamp - 1}", None)], stamp)
        assert state.pending <= tombstones.MAX_PENDING
    assert state.rows_bound() >= state.table.num_rows == 3 * tombstones.MAX_PENDING - 1  # f0 .. f190, each removed once


def test_pickled_tombstones_arrive_folded():
    files, state = _step(FILE_SCHEMA.empty_table(), Tombstones.of(REMOVE_SCHEMA.empty_table()), [], [("a", "x")], 1)
    assert state.pending == 1
    copy = pickle.loads(pickle.dumps(state))
    assert copy.pending == 0 and _rows(copy.table) == _rows(state.table) == [("a", "x".ljust(20, "0"), 1)]


def test_point_deletes_leave_tombstones_unfolded_until_vacuum_reads_them(tmp_path):
    """What the laziness is for: a DELETE on a DV table re-adds its file, and nothing on the write
    path reads tombstones; VACUUM (and checkpoints) still see every one."""
    uri = str(tmp_path / "t")
    table = deltatx.create_table(uri, pa.schema([("id", pa.int64())]), properties={
        "delta.enableDeletionVectors": "true", "delta.checkpointInterval": "1000"})
    table.append(pa.table({"id": pa.array(range(100), pa.int64())}))
    for i in range(5):
        table.delete(where=f"id = {i}")
    state = table.snapshot.tombstone_state
    assert state.pending == 6  # the append and the five deletes, none folded
    assert table.snapshot.tombstones.num_rows == 5  # one per replaced DV (the first had none)
    assert state.pending == 0
    reloaded = deltatx.Table(uri).snapshot.tombstones
    assert _rows(reloaded) == _rows(table.snapshot.tombstones)


def test_threads_sharing_a_snapshot_fold_it_once_and_agree():
    """A snapshot shared by threads: one folds while others size or read it; all see the same rows."""
    import threading

    files, state = FILE_SCHEMA.empty_table(), Tombstones.of(REMOVE_SCHEMA.empty_table())
    for stamp in range(1, 40):
        files, state = _step(files, state, [(f"f{stamp}", None)], [(f"f{stamp - 1}", None)], stamp)
    start = threading.Barrier(8)
    seen: list[object] = []

    def reader(i: int) -> None:
        start.wait()
        for _ in range(50):
            bound = state.rows_bound()
            rows = state.table.num_rows
            seen.append((rows, bound >= rows))
        seen.append(_rows(state.table))

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tables = [s for s in seen if isinstance(s, list)]
    assert len(tables) == 8 and all(t == tables[0] for t in tables) and len(tables[0]) == 39
    assert all(ok for s in seen if isinstance(s, tuple) for ok in [s[1]]) and state.pending == 0


def _many_adds(prefix: str, n: int) -> pa.Table:
    rows = [{"path": f"{prefix}-{i:06d}.parquet", "partitionValues": {}, "size": 1, "modificationTime": 1,
             "dataChange": True} for i in range(n)]
    return file_actions_table(rows, FILE_SCHEMA)


_FOLD_PEAK = """
import pyarrow as pa
from deltatx.txnlog import replay
from deltatx.txnlog.actions import FILE_SCHEMA, REMOVE_SCHEMA, file_actions_table
from deltatx.txnlog.tombstones import Tombstones

def adds(prefix, n):
    return file_actions_table([{"path": f"{prefix}-{i:06d}.parquet", "partitionValues": {}, "size": 1,
                                "modificationTime": 1, "dataChange": True} for i in range(n)], FILE_SCHEMA)

none = REMOVE_SCHEMA.empty_table()
files, state = FILE_SCHEMA.empty_table(), Tombstones.of(none)
for c in range(30):
    files, state = replay.reconcile(files, state, adds(f"s{c}", 1), [0], none, [])
big = adds("big", 30_000)
files, state = replay.reconcile(files, state, big, range(30_000), none, [])
gone = file_actions_table([{"path": p, "deletionTimestamp": 5, "dataChange": True}
                           for p in big.column("path").to_pylist()], REMOVE_SCHEMA)
files, state = replay.reconcile(files, state, adds("out", 1), [30_000], gone, list(range(30_000)))
for c in range(30):
    files, state = replay.reconcile(files, state, adds(f"t{c}", 1), [0], none, [])
pool = pa.default_memory_pool()
before, peak_before = pool.bytes_allocated(), pool.max_memory()
table = state.table
assert peak_before - before < 8 * table.nbytes  # the peak so far does not hide the fold's
print(table.num_rows, table.nbytes, pool.max_memory() - before)
"""


def test_a_compaction_in_a_long_chain_folds_in_one_pass():
    """An OPTIMIZE-sized step among small ones: the fold finds each key's last step once, so its
    memory stays near the result's (joining every later step's keys for every step took ~9x
    the result here, and ~20x with 100k files). Measured in a fresh process: the pool's peak."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _FOLD_PEAK], capture_output=True, text=True, check=True)
    rows, size, peak = map(int, out.stdout.split())
    assert rows == 30_000
    assert peak < 4 * size, f"the fold peaked at {peak / 2**20:.1f} MB for a {size / 2**20:.1f} MB result"


def test_pending_keys_count_in_the_cache_size():
    """A reader that refreshes and never checkpoints holds up to MAX_PENDING steps of keys:
    the snapshot cache's estimate counts them."""
    files, state = FILE_SCHEMA.empty_table(), Tombstones.of(REMOVE_SCHEMA.empty_table())
    keys_bytes = 0
    for c in range(20):
        adds = _many_adds(f"part-{c:03d}-0f3c2b1a-9d8e-4c7b-a6f5-e4d3c2b1a0f9", 2_000)
        keys_bytes += replay.file_keys(adds).combine_chunks().get_total_buffer_size()
        files, state = replay.reconcile(files, state, adds, range(adds.num_rows), REMOVE_SCHEMA.empty_table(), [])
    assert state.pending == 20 and state.rows_bound() == 0
    assert state.bytes_bound() >= keys_bytes


def test_one_tables_fold_never_waits_on_anothers(monkeypatch):
    """Folds lock per value: while one chain folds (held inside drop_keys here), another table's
    size walk and fold, and a size walk of the folding chain itself, all go through."""
    import threading

    def chain(prefix: str) -> Tombstones:
        files, state = FILE_SCHEMA.empty_table(), Tombstones.of(REMOVE_SCHEMA.empty_table())
        for stamp in range(1, 5):
            files, state = _step(files, state, [(f"{prefix}{stamp}", None)], [(f"{prefix}{stamp - 1}", None)], stamp)
        return state

    folding, other = chain("a"), chain("b")
    inside, release = threading.Event(), threading.Event()
    real = replay.drop_keys

    def held(table, keys):
        if keys.to_pylist()[0].startswith("a") and not release.is_set():
            inside.set()
            release.wait()
        return real(table, keys)

    monkeypatch.setattr(replay, "drop_keys", held)
    worker = threading.Thread(target=lambda: folding.table)
    worker.start()
    answers: list[int] = []
    probe = threading.Thread(target=lambda: answers.extend(
        [other.rows_bound(), other.table.num_rows, folding.rows_bound()]), daemon=True)
    try:
        assert inside.wait(30)
        probe.start()
        probe.join(10)  # a lock shared across tables would hold the probe until the release
        assert not probe.is_alive() and answers == [4, 4, 4]
    finally:
        release.set()
        worker.join()
        probe.join(10) if probe.is_alive() else None
    assert [r[0] for r in _rows(folding.table)] == ["a0", "a1", "a2", "a3"]
