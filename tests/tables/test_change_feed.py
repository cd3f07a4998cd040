"""Change data feed: what DELETE/UPDATE/MERGE write under ``_change_data/`` (copy-on-write and
deletion vectors), what ``Table.changes()`` returns per version, its bounds and errors, and
VACUUM of change files.

Expected feeds are written out by hand as (change type, version, id, value) tuples.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
import pytest
from tablefiles import age_files, data_files

import deltatx
from deltatx.errors import ChangeDataFeedError, ConcurrentModificationException, PredicateError, SchemaMismatchError
from deltatx.tables.ops import change_feed
from deltatx.tables.ops import vacuum as vacuum_module

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("value", pa.float64())])
CDF = {"delta.enableChangeDataFeed": "true"}
CDF_DV = {**CDF, "delta.enableDeletionVectors": "true"}


def rows(ids: list[int], part: str, value: float | None = None) -> pa.Table:
    return pa.table({"id": ids, "part": [part] * len(ids),
                     "value": [float(i) if value is None else value for i in ids]}, schema=SCHEMA)


def feed(table: deltatx.Table, **kwargs: Any) -> list[tuple]:
    """(change type, version, id, value) of every change row, sorted."""
    out = table.changes(**kwargs)
    return sorted(zip(out["_change_type"].to_pylist(), out["_commit_version"].to_pylist(),
                      out["id"].to_pylist(), out["value"].to_pylist()))


def commit_actions(uri: str, version: int) -> dict[str, list[dict]]:
    actions: dict[str, list[dict]] = {}
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json")) as f:
        for line in f:
            (kind, body), = json.loads(line).items()
            actions.setdefault(kind, []).append(body)
    return actions


def change_files(uri: str) -> set[str]:
    return {p for p in data_files(uri) if p.startswith("_change_data/")}


@pytest.fixture(params=[CDF, CDF_DV], ids=["copy-on-write", "deletion-vectors"])
def table(request, table_uri) -> deltatx.Table:
    """v0 create (partitioned by part, feed on), v1 ids 1..4 in a, v2 ids 5..8 in b."""
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"], properties=request.param)
    t.append(rows([1, 2, 3, 4], "a"))
    t.append(rows([5, 6, 7, 8], "b"))
    return t


# ----------------------------------------------------------------------------------- protocol
def test_enabling_at_create_lists_the_writer_feature(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, properties=CDF)
    assert "changeDataFeed" in t.protocol.writer_features
    assert t.protocol.min_writer_version == 7


def test_enabling_later_upgrades_the_protocol_and_starts_the_feed(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(rows([1, 2], "a"))
    t.delete("id = 1")  # v2: feed off, no change files
    assert not change_files(table_uri)
    result = t.set_properties(CDF)  # v3
    assert "changeDataFeed" in (t.protocol.writer_features or ())
    t.update("id = 2", {"value": "20.0"})  # v4
    assert feed(t, starting_version=result.version) == [
        ("update_postimage", 4, 2, 20.0), ("update_preimage", 4, 2, 2.0)]
    with pytest.raises(ChangeDataFeedError) as info:
        t.changes(starting_version=1)
    assert info.value.version == 1 and "version 1" in str(info.value)


def test_feed_turned_off_inside_the_range_names_that_version(table):
    table.set_properties({"delta.enableChangeDataFeed": "false"})  # v3
    table.set_properties(CDF)  # v4
    with pytest.raises(ChangeDataFeedError) as info:
        table.changes(starting_version=1, ending_version=4)
    assert info.value.version == 3
    assert feed(table, starting_version=4) == []


# ----------------------------------------------------------------------------------- writes
def test_append_writes_no_change_files_and_reads_as_inserts(table):
    assert not change_files(table.uri)
    assert "cdc" not in commit_actions(table.uri, 1)
    assert feed(table, starting_version=1, ending_version=1) == [("insert", 1, i, float(i)) for i in (1, 2, 3, 4)]


def test_delete_writes_change_rows_under_change_data(table):
    before = data_files(table.uri)
    table.delete("id = 2 OR id = 6")  # v3: rows inside files of both partitions
    actions = commit_actions(table.uri, 3)
    cdc = actions["cdc"]
    assert sorted(c["partitionValues"]["part"] for c in cdc) == ["a", "b"]
    for c in cdc:
        assert c["dataChange"] is False
        assert c["path"].startswith(f"_change_data/part={c['partitionValues']['part']}/")
        assert os.path.getsize(os.path.join(table.uri, c["path"])) == c["size"]
    assert {c["path"] for c in cdc} == change_files(table.uri) - change_files_in(before)
    assert feed(table, starting_version=3) == [("delete", 3, 2, 2.0), ("delete", 3, 6, 6.0)]


def change_files_in(paths: set[str]) -> set[str]:
    return {p for p in paths if p.startswith("_change_data/")}


def test_update_writes_pre_and_post_images(table):
    table.update("id >= 4 AND id <= 5", {"value": "value * 10"})
    assert feed(table, starting_version=3) == [
        ("update_postimage", 3, 4, 40.0), ("update_postimage", 3, 5, 50.0),
        ("update_preimage", 3, 4, 4.0), ("update_preimage", 3, 5, 5.0)]


def test_update_moving_a_row_to_another_partition(table):
    table.update("id = 1", {"part": "'b'"})
    out = table.changes(starting_version=3)
    got = sorted(zip(out["_change_type"].to_pylist(), out["id"].to_pylist(), out["part"].to_pylist()))
    assert got == [("update_postimage", 1, "b"), ("update_preimage", 1, "a")]


def test_merge_records_updates_deletes_and_inserts(table):
    source = pa.table({"id": [2, 3, 9], "part": ["a", "a", "b"], "value": [20.0, -1.0, 90.0]}, schema=SCHEMA)
    (table.merge(source, "t.id = s.id")
     .when_matched_delete("s.value < 0")
     .when_matched_update_all()
     .when_not_matched_insert_all()
     .when_not_matched_by_source_update({"value": "t.value + 100"}, condition="t.id = 8")
     .execute())
    assert "cdc" in commit_actions(table.uri, 3)
    assert feed(table, starting_version=3) == [
        ("delete", 3, 3, 3.0),
        ("insert", 3, 9, 90.0),
        ("update_postimage", 3, 2, 20.0), ("update_postimage", 3, 8, 108.0),
        ("update_preimage", 3, 2, 2.0), ("update_preimage", 3, 8, 8.0)]
    assert sorted(table.to_arrow()["id"].to_pylist()) == [1, 2, 4, 5, 6, 7, 8, 9]


def test_insert_only_merge_writes_no_change_files(table):
    source = pa.table({"id": [1, 10], "part": ["a", "b"], "value": [0.0, 10.0]}, schema=SCHEMA)
    table.merge(source, "t.id = s.id").when_not_matched_insert_all().execute()
    assert "cdc" not in commit_actions(table.uri, 3)
    assert feed(table, starting_version=3) == [("insert", 3, 10, 10.0)]


def test_delete_of_whole_partitions_skips_change_files_and_reads_removes(table):
    table.delete("id = 1")  # v3 (a DV on the deletion-vector table)
    table.delete("part = 'a'")  # v4: whole files go, no change files
    assert "cdc" not in commit_actions(table.uri, 4)
    # the row deleted at v3 is not deleted again at v4: the removed file's DV is applied
    assert feed(table, starting_version=4) == [("delete", 4, i, float(i)) for i in (2, 3, 4)]


def test_optimize_and_reorg_produce_no_change_rows(table):
    table.append(rows([9, 10], "a"))  # v3: a second file in partition a
    table.delete("id = 9")  # v4
    assert table.optimize().version == 5  # compacts partition a
    table.delete("id = 1")  # v6
    table.reorg()  # v7 on the deletion-vector table: rewrites the file with a DV
    for version in range(5, table.version + 1):
        if version != 6:
            assert "cdc" not in commit_actions(table.uri, version)
    assert feed(table, starting_version=5) == [("delete", 6, 1, 1.0)]


def test_row_tracking_table_change_rows_have_only_table_columns(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, properties={**CDF_DV, "delta.enableRowTracking": "true"})
    t.append(rows([1, 2, 3], "a"))
    t.update("id = 2", {"value": "0.0"})
    out = t.changes(starting_version=2)
    assert out.column_names == SCHEMA.names + ["_change_type", "_commit_version", "_commit_timestamp"]
    assert sorted(zip(out["_change_type"].to_pylist(), out["value"].to_pylist())) == [
        ("update_postimage", 0.0), ("update_preimage", 2.0)]


def test_merge_with_schema_evolution(table):
    source = pa.table({"id": [1], "part": ["a"], "value": [1.5], "extra": ["x"]})
    table.merge(source, "t.id = s.id").with_schema_evolution().when_matched_update_all().execute()
    out = table.changes(starting_version=3)
    assert sorted(zip(out["_change_type"].to_pylist(), out["extra"].to_pylist())) == [
        ("update_postimage", "x"), ("update_preimage", None)]
    before = table.changes(starting_version=1, ending_version=1)  # read with the schema at its end
    assert "extra" not in before.column_names and before.num_rows == 4
    everything = table.changes(starting_version=1)  # older files read with the newer schema
    assert everything.filter(pa.compute.equal(everything["_commit_version"], 1))["extra"].null_count == 4


# ----------------------------------------------------------------------------------- transactions
def test_append_and_update_in_one_transaction(table):
    with table.transaction() as tx:
        tx.append(rows([20], "b"))
        tx.update("id = 1", {"value": "-1.0"})
    assert "cdc" in commit_actions(table.uri, 3)  # the reader ignores the adds: the insert is a change row
    assert feed(table, starting_version=3) == [
        ("insert", 3, 20, 20.0), ("update_postimage", 3, 1, -1.0), ("update_preimage", 3, 1, 1.0)]


def test_replace_where_rewriting_part_of_the_files(table):
    table.overwrite(rows([1, 2], "a", value=0.0), where="part = 'a' AND id <= 2")
    assert feed(table, starting_version=3) == [
        ("delete", 3, 1, 1.0), ("delete", 3, 2, 2.0), ("insert", 3, 1, 0.0), ("insert", 3, 2, 0.0)]


def test_replace_where_of_a_whole_partition(table):
    table.overwrite(rows([1], "a", value=0.0), where="part = 'a'")
    assert "cdc" not in commit_actions(table.uri, 3)
    assert feed(table, starting_version=3) == [("delete", 3, i, float(i)) for i in (1, 2, 3, 4)] + [
        ("insert", 3, 1, 0.0)]


def test_a_lost_commit_deletes_its_change_files(table):
    tx = table.transaction()
    tx.delete("id = 1")
    deltatx.Table(table.uri).delete("id = 1")  # the winner: v3
    winner_files = change_files(table.uri)
    with pytest.raises(ConcurrentModificationException):
        tx.commit()
    assert deltatx.Table(table.uri).version == 3
    assert change_files(table.uri) == winner_files


def test_deletion_vector_pair_without_change_files_reads_only_the_new_bits(table_uri, monkeypatch):
    """A writer that skipped change files for a DV update: remove(path, oldDV) + add(path, newDV)
    means only the rows newly marked are deleted (not the whole file deleted and re-inserted)."""
    t = deltatx.create_table(table_uri, SCHEMA, properties=CDF_DV)
    t.append(rows([1, 2, 3, 4], "a"))
    t.delete("id = 1")  # v2 with change files: DV {0}
    monkeypatch.setattr(change_feed, "enabled", lambda tx: False)
    t.delete("id = 3")  # v3: DV {0, 2}, no change files
    assert "cdc" not in commit_actions(table_uri, 3)
    assert feed(t, starting_version=2) == [("delete", 2, 1, 1.0), ("delete", 3, 3, 3.0)]


# ----------------------------------------------------------------------------------- reads
def test_change_columns_types_and_commit_timestamps(table):
    table.delete("id = 5")
    out = table.changes()
    assert out.schema.field("_change_type").type == pa.string()
    assert out.schema.field("_commit_version").type == pa.int64()
    assert out.schema.field("_commit_timestamp").type == pa.timestamp("ms")
    assert sorted(out["_commit_version"].to_pylist()) == [1] * 4 + [2] * 4 + [3]
    history = {h["version"]: h["timestamp"] for h in table.history()}
    stamps = out["_commit_timestamp"].cast(pa.int64()).to_pylist()
    assert stamps == [history[v] for v in out["_commit_version"].to_pylist()]


def test_columns_and_where(table):
    table.update("id = 1", {"value": "100.0"})
    out = table.changes(columns=["id"], where="_change_type = 'update_postimage' OR id = 8")
    assert out.column_names == ["id", "_change_type", "_commit_version", "_commit_timestamp"]
    assert sorted(zip(out["id"].to_pylist(), out["_change_type"].to_pylist())) == [
        (1, "update_postimage"), (8, "insert")]
    pushed = table.changes(columns=["value", "_commit_version"], where="part = 'a' AND value > 50")
    assert pushed.column_names == ["value", "_commit_version"]
    assert pushed.to_pylist() == [{"value": 100.0, "_commit_version": 3}]


def test_timestamps_resolve_like_delta(table):
    table.delete("id = 1")  # v3
    table.delete("id = 5")  # v4
    ts = {h["version"]: h["timestamp"] for h in table.history()}
    assert {v for _, v, _, _ in feed(table, starting_timestamp=ts[3], ending_timestamp=ts[3])} == {3}
    # a start between two commits is the next one; an end between two commits the previous one
    assert {v for _, v, _, _ in feed(table, starting_timestamp=ts[2] + 1, ending_timestamp=ts[4] - 1)} == {3}
    assert feed(table, starting_timestamp=ts[3] + 1) == [("delete", 4, 5, 5.0)]
    with pytest.raises(ChangeDataFeedError, match="after the latest commit"):
        table.changes(starting_timestamp=ts[4] + 1)


def test_ending_version_past_the_latest_reads_to_the_latest(table):
    assert {v for _, v, _, _ in feed(table, starting_version=2, ending_version=99)} == {2}


@pytest.mark.parametrize("kwargs, match", [
    ({"starting_version": 3}, "after the latest version 2"),
    ({"starting_version": -1}, "≥ 0"),
    ({"starting_version": "1"}, "integer"),
    ({"starting_version": 2, "ending_version": 1}, "before starting_version"),
    ({"starting_version": 1, "starting_timestamp": 0}, "not both"),
])
def test_bad_bounds_are_typed_errors_and_write_nothing(table, kwargs, match):
    files = data_files(table.uri)
    with pytest.raises(ChangeDataFeedError, match=match):
        table.changes(**kwargs)
    assert deltatx.Table(table.uri).version == 2 and data_files(table.uri) == files


def test_bad_columns_and_where_are_typed_errors(table):
    with pytest.raises(SchemaMismatchError, match="nope"):
        table.changes(columns=["nope"])
    with pytest.raises(PredicateError):
        table.changes(where="nope = 1")


def test_pinned_table_reads_up_to_its_version(table):
    table.delete("id = 1")
    old = deltatx.Table(table.uri, version=2)
    assert {v for _, v, _, _ in feed(old)} == {1, 2}


# ----------------------------------------------------------------------------------- vacuum
def test_vacuum_keeps_change_files_of_retained_commits_and_drops_older_ones(table, monkeypatch):
    table.set_properties({"delta.deletedFileRetentionDuration": "interval 1 day"})  # v3
    table.delete("id = 2")  # v4
    cdc = change_files(table.uri)
    assert len(cdc) == 1
    age_files(table.uri, 48)  # every file looks old; the commits are recent
    table.vacuum()
    assert change_files(table.uri) == cdc  # v4 is inside the retention: its change file stays
    assert feed(table, starting_version=4) == [("delete", 4, 2, 2.0)]
    now = vacuum_module.now_ms()
    monkeypatch.setattr(vacuum_module, "now_ms", lambda: now + 3 * 24 * 3600 * 1000)
    deleted = table.vacuum()
    assert cdc <= set(deleted) and not change_files(table.uri)


def test_feed_enabled_concurrently_fails_an_in_flight_dml_that_wrote_no_change_files(table_uri):
    from deltatx.errors import MetadataChangedException, ProtocolChangedException

    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(rows([1, 2], "a"))
    tx = t.transaction()
    tx.delete("id = 1")  # no change files: the feed is off at its read version
    deltatx.Table(table_uri).set_properties(CDF)  # v2: the feed goes on
    files = data_files(table_uri)
    with pytest.raises((MetadataChangedException, ProtocolChangedException)):
        tx.commit()
    assert deltatx.Table(table_uri).version == 2
    assert {p for p in data_files(table_uri) if p not in files} == set()


def test_in_memory_table(memory_uri):
    t = deltatx.create_table(memory_uri, SCHEMA, partition_by=["part"], properties=CDF)
    t.append(rows([1, 2], "a"))
    t.update("id = 2", {"value": "0.0"})
    t.delete("part = 'a'")
    assert feed(t, starting_version=1) == [
        ("delete", 3, 1, 1.0), ("delete", 3, 2, 0.0), ("insert", 1, 1, 1.0), ("insert", 1, 2, 2.0),
        ("update_postimage", 2, 2, 0.0), ("update_preimage", 2, 2, 2.0)]


@pytest.mark.parametrize("dvs", [False, True])
@pytest.mark.parametrize("dml", ["delete", "update", "merge"])
def test_rows_a_transaction_appended_and_then_changed_are_inserts(tmp_path, dvs, dml):
    """One transaction appends 4 and 5, then changes 4 (or 1, committed before) and deletes 5:
    4 and 5 were never committed, so the feed has the commit's end state of them as inserts
    (an update of row 4 from a version where it did not exist would be wrong)."""
    schema = pa.schema([("id", pa.int64()), ("v", pa.int64())])
    t = deltatx.create_table(str(tmp_path / "t"), schema, properties={
        "delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": str(dvs).lower()})
    t.append(pa.table({"id": [1, 2], "v": [1, 2]}, schema=schema))
    with t.transaction() as tx:
        tx.append(pa.table({"id": [4, 5], "v": [4, 5]}, schema=schema))
        if dml == "delete":
            tx.delete(where="id = 5 OR id = 2")
        elif dml == "update":
            tx.update(where="id = 4 OR id = 1", set={"v": "v * 10"})
        else:
            source = pa.table({"id": [1, 4, 5], "v": [10, 40, 0]}, schema=schema)
            tx.merge(source, on="t.id = s.id").when_matched_delete("s.v = 0").when_matched_update_all().execute()
    got = sorted((r["_change_type"], r["id"], r["v"]) for r in t.changes(starting_version=2).to_pylist())
    expected = {
        "delete": [("delete", 2, 2), ("insert", 4, 4)],
        "update": [("insert", 4, 40), ("insert", 5, 5), ("update_postimage", 1, 10), ("update_preimage", 1, 1)],
        "merge": [("insert", 4, 40), ("update_postimage", 1, 10), ("update_preimage", 1, 1)],
    }[dml]
    assert got == expected
    table = sorted((r["id"], r["v"]) for r in t.to_arrow().to_pylist())
    inserted = sorted((i, v) for kind, i, v in got if kind == "insert")
    assert set(inserted) <= set(table)


MULTI = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64())])


def _upsert(tx, ids: list[int], values: list[int]) -> None:
    source = pa.table({"id": ids, "p": ["a"] * len(ids), "v": values}, schema=MULTI)
    tx.merge(source, on="t.id = s.id").when_matched_update({"v": "s.v"}).when_not_matched_insert_all().execute()


TWICE = {
    "two_deletes": (lambda tx: (tx.delete("id = 1"), tx.delete("id > 1")),
                    [("delete", 1, 1), ("delete", 2, 2), ("delete", 3, 3)]),
    "update_then_delete": (lambda tx: (tx.update(where="id = 1", set={"v": "10"}), tx.delete("id = 1")),
                           [("delete", 1, 1)]),
    "update_twice": (lambda tx: (tx.update(where="id = 1", set={"v": "10"}), tx.update(where="id = 1", set={"v": "20"})),
                     [("update_postimage", 1, 20), ("update_preimage", 1, 1)]),
    "delete_then_overwrite": (lambda tx: (tx.delete("id = 1"), tx.overwrite(pa.table({"id": [9], "p": ["a"], "v": [9]},
                                                                                     schema=MULTI))),
                              [("delete", 1, 1), ("delete", 2, 2), ("delete", 3, 3), ("insert", 9, 9)]),
    "upsert_then_delete": (lambda tx: (_upsert(tx, [1, 4], [10, 40]), tx.delete("id = 1")),
                           [("delete", 1, 1), ("insert", 4, 40)]),
    "update_then_upsert": (lambda tx: (tx.update(where="id = 1", set={"v": "10"}), _upsert(tx, [1, 5], [11, 50])),
                           [("insert", 5, 50), ("update_postimage", 1, 11), ("update_preimage", 1, 1)]),
    "update_then_partition_delete": (lambda tx: (tx.update(where="id = 2", set={"v": "20"}), tx.delete("p = 'b'")),
                                     [("delete", 2, 2), ("delete", 3, 3)]),
}


@pytest.mark.parametrize("dvs", [False, True], ids=["copy_on_write", "deletion_vectors"])
@pytest.mark.parametrize("case", sorted(TWICE))
def test_rows_one_transaction_changes_twice_appear_once_in_their_final_form(tmp_path, dvs, case):
    """A commit's change files are read instead of its adds and removes, so they must hold its
    net change: a committed row updated then deleted is a delete of its committed form, rows the
    first DML only copied are deleted when the second removes them, and so on."""
    t = deltatx.create_table(str(tmp_path / "t"), MULTI, partition_by=["p"], properties={
        "delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": str(dvs).lower()})
    t.append(pa.table({"id": [1, 2, 3], "p": ["a", "b", "b"], "v": [1, 2, 3]}, schema=MULTI))
    ops, expected = TWICE[case]
    with t.transaction() as tx:
        ops(tx)
    got = sorted((r["_change_type"], r["id"], r["v"]) for r in t.changes(starting_version=2).to_pylist())
    assert got == expected


@pytest.mark.parametrize("seed", range(24))
def test_a_multi_operation_feed_replays_the_commit_exactly(tmp_path, seed):
    """Random 2–3 operation transactions: the rows before, minus the feed's deletes and
    pre-images, plus its inserts and post-images, are the rows after; every delete and pre-image
    is a row that was there; pre- and post-images pair up."""
    import collections
    import random

    rnd = random.Random(seed)
    props = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": str(seed % 2 == 0).lower()}
    t = deltatx.create_table(str(tmp_path / "t"), MULTI, partition_by=["p"] if seed % 3 else None, properties=props)
    t.append(pa.table({"id": list(range(1, 9)), "p": list("aabbaabb"), "v": list(range(1, 9))}, schema=MULTI))

    def key(r: dict) -> tuple:
        return r["id"], r["p"], r["v"]

    before = collections.Counter(key(r) for r in t.to_arrow().to_pylist())
    with t.transaction() as tx:
        for step in range(rnd.randrange(2, 4)):
            i, choice = rnd.randrange(1, 9), rnd.randrange(6)
            if choice == 0:
                tx.delete(f"id = {i}")
            elif choice == 1:
                tx.update(where=f"id <= {i}", set={"v": f"v + {rnd.randrange(1, 5)}"})
            elif choice == 2:
                ids = sorted({rnd.randrange(1, 12), rnd.randrange(1, 12)})
                _upsert(tx, ids, [100 + step] * len(ids))
            elif choice == 3:
                tx.append(pa.table({"id": [100 + step], "p": [rnd.choice("ab")], "v": [step]}, schema=MULTI))
            elif choice == 4:
                tx.delete(f"p = '{rnd.choice('ab')}'")
            else:
                tx.overwrite(pa.table({"id": [i], "p": ["b"], "v": [500]}, schema=MULTI), where="p = 'b'")
    after = collections.Counter(key(r) for r in deltatx.Table(t.uri).to_arrow().to_pylist())
    changes = t.changes(starting_version=2).to_pylist()
    gone = collections.Counter(key(r) for r in changes if r["_change_type"] in ("delete", "update_preimage"))
    came = collections.Counter(key(r) for r in changes if r["_change_type"] in ("insert", "update_postimage"))
    assert all(gone[k] <= before[k] for k in gone)
    assert before - gone + came == after
    kinds = collections.Counter(r["_change_type"] for r in changes)
    assert kinds["update_preimage"] == kinds["update_postimage"]


@pytest.mark.parametrize("name", ["_change_type", "_commit_version", "_Commit_Timestamp"])
def test_the_feeds_column_names_are_reserved(tmp_path, name):
    """Delta refuses them on a table with the feed on (at create, when turning it on, when a
    column is added): its change rows could not carry both, and the feed became unreadable."""
    from deltatx.errors import SchemaMismatchError

    on = {"delta.enableChangeDataFeed": "true"}
    clashing = pa.schema([("id", pa.int64()), (name, pa.string())])
    with pytest.raises(SchemaMismatchError, match="reserves"):
        deltatx.create_table(str(tmp_path / "a"), clashing, properties=on)
    t = deltatx.create_table(str(tmp_path / "b"), clashing)  # allowed while the feed is off
    with pytest.raises(SchemaMismatchError, match="reserves"):
        t.set_properties(on)
    t = deltatx.create_table(str(tmp_path / "c"), pa.schema([("id", pa.int64())]), properties=on)
    with pytest.raises(SchemaMismatchError, match="reserves"):
        t.add_columns(pa.field(name, pa.string()))
    with pytest.raises(SchemaMismatchError, match="reserves"):
        t.append(pa.table({"id": [1], name: ["x"]}), schema_mode="merge")
    assert deltatx.Table(str(tmp_path / "c")).version == 0


def test_turning_the_feed_on_after_a_dml_in_the_same_transaction_is_refused(tmp_path):
    """The DML ran with the feed off and recorded nothing: committed, the rewrite would read as
    every row of its file deleted and inserted again. The other order records the change."""
    from deltatx.errors import ChangeDataFeedError

    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, pa.schema([("id", pa.int64()), ("v", pa.int64())]))
    t.append(pa.table({"id": [1, 2, 3], "v": [1, 2, 3]}))
    tx = t.transaction()
    tx.update("id = 1", {"v": "10"})
    tx.set_properties({"delta.enableChangeDataFeed": "true"})
    with pytest.raises(ChangeDataFeedError, match="turn the feed on first"):
        tx.commit()
    assert deltatx.Table(uri).version == 1
    with t.transaction() as tx:
        tx.set_properties({"delta.enableChangeDataFeed": "true"})
        tx.update("id = 1", {"v": "10"})
    feed = deltatx.Table(uri).changes(2, 2).to_pylist()
    assert sorted((r["_change_type"], r["id"], r["v"]) for r in feed) == [
        ("update_postimage", 1, 10), ("update_preimage", 1, 1)]


@pytest.mark.parametrize("value", [None, "bogus"])
def test_a_change_file_without_a_valid_change_type_is_corrupt(tmp_path, value):
    """PROTOCOL.md requires _change_type in every change data file; a row without one (or with a
    kind the protocol does not define) is a corrupt file, not a row of unknown kind."""
    import glob

    import pyarrow.parquet as pq

    from deltatx.errors import CorruptDataFileError

    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, pa.schema([("id", pa.int64()), ("v", pa.int64())]), properties=CDF)
    t.append(pa.table({"id": [1, 2], "v": [1, 2]}))
    t.update("id = 1", {"v": "10"})
    [path] = glob.glob(f"{uri}/_change_data/*.parquet")
    rows = pq.read_table(path)
    kinds = pa.array([value] * rows.num_rows, pa.string())
    pq.write_table(rows.set_column(rows.schema.get_field_index("_change_type"), "_change_type", kinds), path)
    with pytest.raises(CorruptDataFileError, match="_change_type"):
        deltatx.Table(uri).changes(2, 2)
    with pytest.raises(TypeError):  # ArgumentTypeError: a typed error that is also a TypeError
        deltatx.Table(uri).changes(starting_timestamp=object())


def test_restore_and_replace_that_turn_the_feed_back_on_commit(tmp_path):
    """They change whole files, as Delta's do, and write no change rows: readers take their adds
    and removes. Turning the feed on with them is no DML that recorded nothing."""
    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64())])
    t = deltatx.create_table(uri, schema, properties=CDF)
    t.append(pa.table({"id": [1, 2]}))                       # v1, feed on
    t.set_properties({"delta.enableChangeDataFeed": "false"})
    t.append(pa.table({"id": [3]}))
    result = t.restore(version=1)
    assert sorted(deltatx.Table(uri).to_arrow()["id"].to_pylist()) == [1, 2]
    assert deltatx.Table(uri).properties["delta.enableChangeDataFeed"] == "true"
    assert result.version == 4
