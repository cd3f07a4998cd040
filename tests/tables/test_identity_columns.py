"""Identity columns: definition, assignment (start + k*step beyond the high-water mark), the
high-water mark in the same commit, GENERATED ALWAYS vs BY DEFAULT, overflow — and concurrent
inserts, which deltatx serialises: the loser moves its values above the winner's."""

from __future__ import annotations

import multiprocessing
import os

import orjson
import pyarrow as pa
import pytest
from tablefiles import data_files

import deltatx
from deltatx.errors import IdentityColumnError, MetadataChangedException, TableNotFoundError
from deltatx.harness import run_interleaving
from deltatx.txnlog.identity import identity_specs

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("part", pa.int32())])


def names(*values: str, part: int = 0) -> pa.Table:
    return pa.table({"name": list(values), "part": pa.array([part] * len(values), pa.int32())})


def make(uri: str, always: bool = True, start: int = 1, step: int = 1, **kwargs) -> deltatx.Table:
    return deltatx.create_table(uri, SCHEMA, identity_columns={"id": {"start": start, "step": step, "always": always}},
                                **kwargs)


def ids(uri: str) -> list[int]:
    return sorted(deltatx.Table(uri).to_arrow()["id"].to_pylist())


def mark(uri: str) -> int | None:
    return identity_specs(deltatx.Table(uri).metadata.schema_string)[0].high_water_mark


class Unchanged:
    def __init__(self, uri: str):
        self.uri, self.version, self.files = uri, deltatx.Table(uri).version, data_files(uri)

    def check(self) -> None:
        assert deltatx.Table(self.uri).version == self.version
        assert data_files(self.uri) == self.files


# --------------------------------------------------------------------------------------------
# Definition
# --------------------------------------------------------------------------------------------


def test_definition_is_delta_field_metadata(table_uri):
    t = make(table_uri, start=10, step=5)
    assert "identityColumns" in t.protocol.writer_features
    field = orjson.loads(t.metadata.schema_string)["fields"][0]
    assert field["metadata"] == {"delta.identity.start": 10, "delta.identity.step": 5,
                                 "delta.identity.allowExplicitInsert": False}
    assert mark(table_uri) is None


@pytest.mark.parametrize("spec, message", [
    ({"id": {"step": 0}}, "cannot be 0"),
    ({"name": {}}, "must be BIGINT"),
    ({"nope": {}}, "not in the schema"),
    ({"id": {"start": "x"}}, "must be a long"),
    ({"id": {"start": 2**63}}, "does not fit"),
    ({"id": {"always": "yes"}}, "True or False"),
    ({"id": {"stride": 2}}, "unknown option"),
    ({"part": {}}, "must be BIGINT"),
])
def test_bad_definitions_create_nothing(table_uri, spec, message):
    with pytest.raises(IdentityColumnError, match=message):
        deltatx.create_table(table_uri, SCHEMA, identity_columns=spec)
    with pytest.raises(TableNotFoundError):
        deltatx.Table(table_uri)


def test_identity_column_cannot_be_a_partition_column(table_uri):
    schema = pa.schema([("id", pa.int64()), ("v", pa.int64())])
    with pytest.raises(IdentityColumnError, match="partition"):
        deltatx.create_table(table_uri, schema, partition_by=["id"], identity_columns={"id": {}})
    with pytest.raises(TableNotFoundError):
        deltatx.Table(table_uri)


# --------------------------------------------------------------------------------------------
# Assignment
# --------------------------------------------------------------------------------------------


def test_values_follow_start_and_step_and_the_mark_moves_in_the_same_commit(table_uri):
    t = make(table_uri, start=100, step=10)
    result = t.append(names("a", "b", "c"))
    assert ids(table_uri) == [100, 110, 120] and mark(table_uri) == 120
    commit = t.store.read_commit(result.version).decode()
    assert '"metaData"' in commit and "highWaterMark" in commit
    t.append(names("d"))
    assert ids(table_uri) == [100, 110, 120, 130] and mark(table_uri) == 130


def test_negative_step_counts_down(table_uri):
    make(table_uri, start=-1, step=-2).append(names("a", "b", "c"))
    assert ids(table_uri) == [-5, -3, -1] and mark(table_uri) == -5


def test_values_are_unique_across_writes_of_one_transaction(table_uri):
    t = make(table_uri, partition_by=["part"])
    with t.transaction() as tx:
        tx.append(names("a", "b", part=1))
        tx.append(names("c", part=2))
        tx.merge(pa.table({"name": ["d", "a"]}), on="t.name = s.name").when_not_matched_insert_all().execute()
    assert ids(table_uri) == [1, 2, 3, 4] and mark(table_uri) == 4


def test_a_large_stream_gets_a_contiguous_run(table_uri):
    t = make(table_uri)
    batches = names(*(f"n{i}" for i in range(30_000))).to_batches(max_chunksize=7_000)
    t.append(pa.RecordBatchReader.from_batches(batches[0].schema, batches))
    assert ids(table_uri) == list(range(1, 30_001)) and mark(table_uri) == 30_000


def test_generated_always_refuses_explicit_values(table_uri):
    t = make(table_uri)
    t.append(names("a"))
    before = Unchanged(table_uri)
    explicit = pa.table({"id": [7], "name": ["x"], "part": pa.array([0], pa.int32())})
    for write in (lambda: t.append(explicit), lambda: t.overwrite(explicit),
                  lambda: t.merge(explicit, on="t.name = s.name").when_not_matched_insert_all().execute(),
                  lambda: t.merge(explicit, on="t.name = s.name").when_not_matched_insert({"id": "s.id"}).execute()):
        with pytest.raises(IdentityColumnError, match="GENERATED ALWAYS"):
            write()
    before.check()


def test_by_default_accepts_explicit_values_without_moving_the_mark(table_uri):
    t = make(table_uri, always=False)
    t.append(names("a", "b"))
    t.append(pa.table({"id": [1000], "name": ["x"], "part": pa.array([0], pa.int32())}))
    assert mark(table_uri) == 2
    t.append(names("c"))
    assert ids(table_uri) == [1, 2, 3, 1000]


def test_identity_values_are_never_updated(table_uri):
    t = make(table_uri, always=False)
    t.append(names("a", "b"))
    before = Unchanged(table_uri)
    with pytest.raises(IdentityColumnError, match="cannot be updated"):
        t.update("name = 'a'", set={"id": "id + 100"})
    with pytest.raises(IdentityColumnError, match="cannot be updated"):
        t.merge(pa.table({"name": ["a"], "id": [5]}), on="t.name = s.name").when_matched_update({"id": "s.id"}).execute()
    before.check()
    # UPDATE SET * keeps the target's identity values
    t.merge(pa.table({"name": ["a"], "id": [5], "part": pa.array([9], pa.int32())}), on="t.name = s.name") \
        .when_matched_update_all().execute()
    assert {r["name"]: (r["id"], r["part"]) for r in t.to_arrow().to_pylist()} == {"a": (1, 9), "b": (2, 0)}


def test_overflow_is_detected_before_anything_is_written(table_uri):
    t = make(table_uri, start=2**63 - 3, step=1)
    t.append(names("a", "b"))
    before = Unchanged(table_uri)
    with pytest.raises(IdentityColumnError, match="overflows"):
        t.append(names("c", "d"))
    before.check()
    t.append(names("c"))
    assert ids(table_uri)[-1] == 2**63 - 1


def test_overwrite_continues_after_the_mark(table_uri):
    t = make(table_uri)
    t.append(names("a", "b", "c"))
    t.overwrite(names("x", "y"))
    assert ids(table_uri) == [4, 5] and mark(table_uri) == 5


def test_an_aborted_write_hands_out_nothing(table_uri):
    t = make(table_uri)
    tx = t.transaction()
    tx.append(names("a", "b"))
    tx.abort()
    t.append(names("c"))
    assert ids(table_uri) == [1]


def test_restore_keeps_the_high_water_mark(table_uri):
    """Values handed out after the restored version are never handed out again (as Delta)."""
    t = make(table_uri)
    t.append(names("a"))
    t.append(names("b", "c"))
    t.restore(version=1)
    assert ids(table_uri) == [1] and mark(table_uri) == 3
    t.append(names("d"))
    assert ids(table_uri) == [1, 4]


def test_a_mark_off_the_grid_yields_values_on_it(table_uri):
    """Another engine may leave a mark that is not start + k*step: values stay on the grid."""
    from deltatx.txnlog.identity import next_value

    assert next_value(1, 10, 15) == 21 and next_value(1, 10, None) == 1 and next_value(1, 10, -5) == 1
    assert next_value(-1, -10, -15) == -21 and next_value(-1, -10, 3) == -1


# --------------------------------------------------------------------------------------------
# Concurrency: both inserts commit, values never collide
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dv", [False, True], ids=["plain", "deletion_vectors_row_tracking"])
def test_the_loser_moves_its_values_above_the_winners(table_uri, dv):
    props = {"delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true"} if dv else {}
    t = make(table_uri, properties=props, partition_by=["part"])
    t.append(names("seed"))
    seed_files = data_files(table_uri)
    a, b = deltatx.Table(table_uri).transaction(), deltatx.Table(table_uri).transaction()
    a.append(names("a1", "a2", part=1))
    a_files = data_files(table_uri) - seed_files
    b.append(names("b1", "b2", "b3", part=2))
    b_files = data_files(table_uri) - seed_files - a_files
    a.commit()
    result = b.commit()
    assert result.conflicts_resolved == 1
    got = {r["name"]: r["id"] for r in deltatx.Table(table_uri).to_arrow().to_pylist()}
    assert got == {"seed": 1, "a1": 2, "a2": 3, "b1": 4, "b2": 5, "b3": 6}
    assert mark(table_uri) == 6
    # the loser's first files were rewritten and the stale ones deleted once it committed
    live = set(deltatx.Table(table_uri).files()["path"].to_pylist())
    assert b_files and b_files.isdisjoint(live), "B's files held 2..4 and were rewritten"
    assert data_files(table_uri) == live, "no stale file is left behind"
    if dv:
        row_ids = deltatx.Table(table_uri).to_arrow(columns=["id", "_metadata.row_id"])
        assert len(set(row_ids["_metadata.row_id"].to_pylist())) == 6
    stats = [orjson.loads(s) for s in deltatx.Table(table_uri).files()["stats"].to_pylist()]
    assert sorted((s["minValues"]["id"], s["maxValues"]["id"]) for s in stats) == [(1, 1), (2, 3), (4, 6)]


@pytest.mark.parametrize("dv", [False, True], ids=["copy_on_write", "deletion_vectors"])
@pytest.mark.parametrize("change", ["update", "delete"])
def test_values_the_transaction_rewrote_itself_move_too(table_uri, dv, change):
    """Appended rows that an UPDATE or DELETE of the same transaction rewrote live in files the
    append did not write: the rebase must move their values as well, or they collide."""
    t = make(table_uri, properties={"delta.enableDeletionVectors": "true"} if dv else {})
    tx = t.transaction()
    tx.append(names("a", "b", "c"))
    if change == "update":
        tx.update(where="name = 'a'", set={"name": "'a2'"})
    else:
        tx.delete("name = 'a'")
    deltatx.Table(table_uri).append(names("x", "y", "z"))
    assert tx.commit().conflicts_resolved == 1
    got = {r["name"]: r["id"] for r in deltatx.Table(table_uri).to_arrow().to_pylist()}
    assert len(set(got.values())) == len(got), got
    assert {got["x"], got["y"], got["z"]} == {1, 2, 3}
    assert min(v for k, v in got.items() if k not in "xyz") > 3
    assert mark(table_uri) >= max(got.values())


def test_a_by_default_rebase_never_moves_a_committed_explicit_value(table_uri):
    """BY DEFAULT: a committed row given id 5 explicitly sits inside the run this transaction
    generated (1..6), and its own UPDATE copied that row into a file with its new rows. Which 5
    is whose cannot be told apart, so the commit fails instead of changing the committed id."""
    t = make(table_uri, always=False)
    t.append(pa.table({"id": [5], "name": ["explicit"], "part": pa.array([0], pa.int32())}, schema=SCHEMA))
    before = data_files(table_uri)
    tx = deltatx.Table(table_uri).transaction()
    tx.append(names(*"abcdef"))
    tx.update(where="name = 'explicit'", set={"name": "'explicit2'"})
    deltatx.Table(table_uri).append(names("x"))
    with pytest.raises(IdentityColumnError, match="committed values"):
        tx.commit()
    got = {r["name"]: r["id"] for r in deltatx.Table(table_uri).to_arrow().to_pylist()}
    assert got == {"explicit": 5, "x": 1} and deltatx.Table(table_uri).version == 2
    assert data_files(table_uri) == set(deltatx.Table(table_uri).files()["path"].to_pylist()) | before


def test_a_rebase_that_would_overflow_fails_and_leaves_nothing(table_uri):
    make(table_uri, start=2**63 - 4)
    a, b = deltatx.Table(table_uri).transaction(), deltatx.Table(table_uri).transaction()
    a.append(names("a1", "a2"))  # M-3, M-2 (M = 2**63 - 1)
    b.append(names("b1", "b2", "b3"))  # M-3..M-1, would have to move to M-1..M+1
    a.commit()
    version = deltatx.Table(table_uri).version
    with pytest.raises(IdentityColumnError, match="overflows"):
        b.commit()
    assert deltatx.Table(table_uri).version == version
    assert data_files(table_uri) == set(deltatx.Table(table_uri).files()["path"].to_pylist()), "B's files are gone"
    assert ids(table_uri) == [2**63 - 4, 2**63 - 3]


def test_identity_insert_vs_concurrent_delete_and_property_change(table_uri):
    t = make(table_uri)
    t.append(names("a", "b"))
    writer = deltatx.Table(table_uri).transaction()
    writer.append(names("c"))
    deltatx.Table(table_uri).delete("name = 'a'")
    deltatx.Table(table_uri).append(names("d"))
    writer.commit()
    assert ids(table_uri) == [2, 3, 4] and mark(table_uri) == 4
    # a real metadata change (not just marks) still conflicts
    writer = deltatx.Table(table_uri).transaction()
    writer.append(names("e"))
    deltatx.Table(table_uri).set_properties({"delta.appendOnly": "false"})
    with pytest.raises(MetadataChangedException):
        writer.commit()


@pytest.mark.parametrize("dv", [False, True], ids=["copy_on_write", "deletion_vectors"])
def test_concurrent_merges_with_inserts_both_commit(table_uri, dv):
    """Each MERGE updates a row and inserts one; the loser's inserted rows (in files of their own)
    move above the winner's values, its updated rows keep theirs."""
    t = make(table_uri, partition_by=["part"], properties={"delta.enableDeletionVectors": "true"} if dv else {})
    t.append(names("p", part=2))
    t.append(names("q", part=3))
    a, b = deltatx.Table(table_uri).transaction(), deltatx.Table(table_uri).transaction()
    for tx, part, new in ((a, 2, "x"), (b, 3, "y")):
        source = pa.table({"name": ["p" if part == 2 else "q", new], "part": pa.array([part, part], pa.int32())})
        (tx.merge(source, on=f"t.name = s.name AND t.part = {part}")
         .when_matched_update({"name": "concat(s.name, '!')"}).when_not_matched_insert_all().execute())
    a.commit()
    assert b.commit().conflicts_resolved == 1
    got = {r["name"]: r["id"] for r in deltatx.Table(table_uri).to_arrow().to_pylist()}
    assert got == {"p!": 1, "q!": 2, "x": 3, "y": 4} and mark(table_uri) == 4


RACE = "A.begin B.begin A.attempt_commit B.attempt_commit A.published B.resolve_conflict B.published"


def test_racing_threads_in_a_fixed_interleaving(table_uri):
    make(table_uri).append(names("seed"))
    result = run_interleaving(table_uri, {
        "A": lambda table: table.append(names("a1", "a2")),
        "B": lambda table: table.append(names("b1", "b2")),
    }, RACE)
    assert not result.errors, result.errors
    assert result.results["B"].conflicts_resolved == 1
    got = {r["name"]: r["id"] for r in deltatx.Table(table_uri).to_arrow().to_pylist()}
    assert got == {"seed": 1, "a1": 2, "a2": 3, "b1": 4, "b2": 5}


def test_three_writers_race_for_the_same_version(table_uri):
    make(table_uri)
    order = ("A.begin B.begin C.begin A.attempt_commit B.attempt_commit C.attempt_commit A.published "
             "B.resolve_conflict B.published C.resolve_conflict C.published")
    result = run_interleaving(table_uri, {
        name: (lambda n: lambda table: table.append(names(*(f"{n}{i}" for i in range(3)))))(name)
        for name in "ABC"
    }, order)
    assert not result.errors, result.errors
    assert ids(table_uri) == list(range(1, 10)) and mark(table_uri) == 9


def _append_many(uri: str, who: int, count: int, barrier) -> None:
    barrier.wait()
    table = deltatx.Table(uri)
    for i in range(count):
        table.append(names(*(f"p{who}-{i}-{k}" for k in range(3))))


def test_concurrent_processes_never_collide(table_uri):
    make(table_uri)
    workers, rounds = 3, 4
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(workers)
    procs = [ctx.Process(target=_append_many, args=(table_uri, w, rounds, barrier)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    total = workers * rounds * 3
    assert ids(table_uri) == list(range(1, total + 1))
    assert mark(table_uri) == total
    assert os.path.isdir(table_uri)


@pytest.mark.parametrize("dv", [False, True])
def test_a_rebase_moves_the_change_feed_with_the_rows(table_uri, dv):
    """The loser's inserted row moves above the winner's ids; its change data file must say the
    same id, or the feed reports an id another row holds (PROTOCOL.md: a version's cdc files are
    all its readers read)."""
    from deltalake import DeltaTable

    schema = pa.schema([("id", pa.int64()), ("k", pa.int64()), ("v", pa.int64())])
    properties = {"delta.enableChangeDataFeed": "true"}
    if dv:
        properties["delta.enableDeletionVectors"] = "true"
    t = deltatx.create_table(table_uri, schema, identity_columns={"id": {"start": 1, "step": 1, "always": True}},
                             properties=properties)
    t.append(pa.table({"k": [1, 2], "v": [0, 0]}))  # ids 1, 2
    loser = deltatx.Table(table_uri).transaction()
    (loser.merge(pa.table({"k": [1, 30], "v": [9, 9]}), on="t.k = s.k")
          .when_matched_update(set={"v": "s.v"})
          .when_not_matched_insert(values={"k": "s.k", "v": "s.v"}).execute())  # k=30 takes id 3
    deltatx.Table(table_uri).append(pa.table({"k": [20, 21], "v": [2, 2]}))  # the winner takes 3, 4
    result = loser.commit()
    rows = {r["k"]: r["id"] for r in deltatx.Table(table_uri).to_arrow().to_pylist()}
    assert rows == {1: 1, 2: 2, 20: 3, 21: 4, 30: 5}
    feed = deltatx.Table(table_uri).changes(result.version, result.version).to_pylist()
    assert sorted((r["id"], r["k"], r["_change_type"]) for r in feed) == [
        (1, 1, "update_postimage"), (1, 1, "update_preimage"), (5, 30, "insert")]
    theirs = DeltaTable(table_uri).load_cdf(starting_version=result.version, ending_version=result.version)
    assert sorted((r["id"], r["k"], r["_change_type"]) for r in pa.table(theirs.read_all()).to_pylist()) == [
        (1, 1, "update_postimage"), (1, 1, "update_preimage"), (5, 30, "insert")]
    change_files = {os.path.relpath(os.path.join(d, f), table_uri)
                    for d, _, fs in os.walk(os.path.join(table_uri, "_change_data")) for f in fs}
    committed = set()
    for v in range(result.version + 1):
        with open(os.path.join(table_uri, "_delta_log", f"{v:020d}.json"), "rb") as fh:
            committed |= {orjson.loads(line)["cdc"]["path"] for line in fh if line.startswith(b'{"cdc"')}
    assert change_files == committed, "the rewritten change files replace the old ones"
