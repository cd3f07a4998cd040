"""The streaming source's planning on the log alone: offsets, units, admission, commit checks, start.

Each test builds a small table with the core API and walks the stream the way Spark does:
``latest_offset`` from the previous end, then ``files_between`` the two offsets.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import (
    StreamDataChangedError,
    StreamingSourceError,
    StreamSchemaChangedError,
    TimeTravelError,
)
from deltatx.txnlog.stream_plan import (
    BASE_INDEX,
    UNRESOLVED_VERSION,
    Admission,
    ChangePolicy,
    StreamOffset,
    StreamPlanner,
    StreamStart,
    first_batch_start,
    readable_as,
    resolve_start,
)

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string())])


def rows(ids, part: str = "a") -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "part": [part] * len(ids)}, schema=SCHEMA)


def make_table(uri: str, batches: int = 3, partitioned: bool = False, **properties) -> deltatx.Table:
    """Version 0 creates the table; versions 1..batches each append one file with ids [10*v, 10*v+1]."""
    table = deltatx.create_table(uri, SCHEMA, partition_by=["part"] if partitioned else None,
                                 properties=properties or None)
    for v in range(1, batches + 1):
        table.append(rows([10 * v, 10 * v + 1]))
    return deltatx.Table(uri)


def planner_for(table: deltatx.Table, **policy) -> StreamPlanner:
    return StreamPlanner(table.store, table.metadata.id, table.schema, table.metadata, ChangePolicy(**policy))


def snapshot_start(table: deltatx.Table) -> StreamOffset:
    return StreamOffset(table.metadata.id, table.version, BASE_INDEX, True)


def commits_from(table: deltatx.Table, version: int) -> StreamOffset:
    return StreamOffset(table.metadata.id, version, BASE_INDEX, False)


def drain(planner: StreamPlanner, start: StreamOffset, limit: Admission | None,
          last_version: int | None = None) -> tuple[list[list[tuple[int, int]]], StreamOffset]:
    """Every batch from ``start`` until no progress: the (version, index) units of each, and the end."""
    batches = []
    while True:
        end = planner.latest_offset(start, limit, last_version)
        if end == start:
            return batches, end
        units = planner.files_between(start, end)
        batches.append(list(zip(units["version"].to_pylist(), units["index"].to_pylist())))
        start = end


def ids_of(planner: StreamPlanner, start: StreamOffset, end: StreamOffset) -> list[int]:
    """The ids in the files between two offsets (reads the Parquet files, no deletion vectors)."""
    import pyarrow.parquet as pq

    files = planner.files_between(start, end)
    out: list[int] = []
    for path in files["path"].to_pylist():
        out += pq.read_table(os.path.join(planner.store.root, path), columns=["id"])["id"].to_pylist()
    return out


# --------------------------------------------------------------------------------------------
# Offsets
# --------------------------------------------------------------------------------------------


def test_offset_json_is_deltas_and_round_trips():
    first = StreamOffset("tid", 7, 2, True, started_at=StreamStart(7, True))
    assert first.to_json() == {"sourceVersion": 1, "reservoirId": "tid", "reservoirVersion": 7, "index": 2,
                               "isStartingVersion": True,
                               "startingFrom": {"reservoirVersion": 7, "isStartingVersion": True}}
    assert StreamOffset.from_json(first.to_json()) == first
    later = StreamOffset("tid", 9, BASE_INDEX, False)
    assert "startingFrom" not in later.to_json()
    assert StreamOffset.from_json(later.to_json()) == later


def test_unreadable_offsets_are_refused():
    with pytest.raises(StreamingSourceError, match="new checkpoint location"):
        StreamOffset.from_json({"offset": 3})
    with pytest.raises(StreamingSourceError, match="sourceVersion 3"):
        StreamOffset.from_json({"sourceVersion": 3, "reservoirId": "t", "reservoirVersion": 1, "index": -1,
                                "isStartingVersion": False})
    with pytest.raises(StreamingSourceError, match="does not say where the stream started"):
        first_batch_start(StreamOffset("t", 3, 0, True))


def test_first_batch_start_comes_from_the_end_offset():
    end = StreamOffset("t", 5, 0, False, started_at=StreamStart(4, True))
    assert first_batch_start(end) == StreamOffset("t", 4, BASE_INDEX, True)
    unresolved = StreamOffset("t", UNRESOLVED_VERSION, BASE_INDEX, True)
    assert unresolved.unresolved and not end.unresolved


def test_offset_of_another_table_is_refused(table_uri):
    table = make_table(table_uri, batches=1)
    planner = planner_for(table)
    with pytest.raises(StreamingSourceError, match="re-created"):
        planner.check_offset(StreamOffset("some-other-id", 1, BASE_INDEX, False))
    planner.check_offset(snapshot_start(table))


def test_offsets_moving_backwards_are_refused(table_uri):
    table = make_table(table_uri, batches=2)
    planner = planner_for(table)
    with pytest.raises(StreamingSourceError, match="backwards"):
        planner.files_between(commits_from(table, 2), commits_from(table, 1))
    with pytest.raises(StreamingSourceError, match="backwards"):
        planner.files_between(commits_from(table, 1), StreamOffset(table.metadata.id, 2, 0, True))


# --------------------------------------------------------------------------------------------
# The unit sequence
# --------------------------------------------------------------------------------------------


def test_initial_snapshot_in_modification_time_then_path_order(table_uri):
    table = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    table.append(rows([1], "a"))
    table.append(pa.concat_tables([rows([i], p) for i, p in enumerate("edcba")]))  # five files, one commit
    planner = planner_for(table)
    start = snapshot_start(table)
    end = planner.latest_offset(start, None)
    # the snapshot's last file taken: the next unit is commit 3's (a restart never reads the
    # delivered snapshot again, nor checks its schema)
    assert end == StreamOffset(table.metadata.id, 3, BASE_INDEX, False)
    listed = planner.files_between(start, end)
    assert listed["version"].to_pylist() == [2] * 6 and listed["index"].to_pylist() == list(range(6))
    files = table.snapshot.files
    expected = sorted(zip(files["modificationTime"].to_pylist(), files["path"].to_pylist()))
    assert list(zip(listed["modificationTime"].to_pylist(), listed["path"].to_pylist())) == expected
    # the same order on every planning (a restart splits the snapshot the same way)
    again = planner_for(deltatx.Table(table_uri)).files_between(start, StreamOffset(table.metadata.id, 2, 2, True))
    assert again["path"].to_pylist() == listed["path"].to_pylist()[:3]


def test_snapshot_then_each_commit_once_with_max_files(table_uri):
    table = make_table(table_uri, batches=3)
    planner = planner_for(table)
    start = snapshot_start(table)
    batches, end = drain(planner, start, Admission(max_files=2))
    assert batches == [[(3, 0), (3, 1)], [(3, 2)]]
    assert end == StreamOffset(table.metadata.id, 4, BASE_INDEX, False)

    table.append(rows([40]))  # version 4, one file
    table.append(pa.concat_tables([rows([50]), rows([51], "b")]))  # version 5
    more, end = drain(planner, end, Admission(max_files=2))
    assert more == [[(4, 0), (5, 0)]]  # a batch may span commits
    assert end == StreamOffset(table.metadata.id, 6, BASE_INDEX, False)  # last file of 5 taken: next is 6
    assert sorted(ids_of(planner, start, end)) == [10, 11, 20, 21, 30, 31, 40, 50, 51]


def test_a_commit_larger_than_the_limit_is_split_by_index(table_uri):
    table = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    table.append(pa.concat_tables([rows([1], p) for p in "abcde"]))  # version 1: five files
    planner = planner_for(table)
    batches, end = drain(planner, commits_from(table, 1), Admission(max_files=2))
    assert batches == [[(1, 0), (1, 1)], [(1, 2), (1, 3)], [(1, 4)]]
    assert end == StreamOffset(table.metadata.id, 2, BASE_INDEX, False)


def test_max_bytes_is_a_soft_limit(table_uri):
    table = make_table(table_uri, batches=4)
    planner = planner_for(table)
    size = table.snapshot.files["size"].to_pylist()[0]
    # one byte: the first file still goes (progress), the budget is then spent
    batches, _ = drain(planner, commits_from(table, 1), Admission(max_bytes=1))
    assert batches == [[(1, 0)], [(2, 0)], [(3, 0)], [(4, 0)]]
    # a bit more than one file: the second file crosses the limit and is taken too
    batches, _ = drain(planner, commits_from(table, 1), Admission(max_bytes=size + 1))
    assert batches == [[(1, 0), (2, 0)], [(3, 0), (4, 0)]]
    # both limits: whichever is reached first
    batches, _ = drain(planner, commits_from(table, 1), Admission(max_files=1, max_bytes=10 * size))
    assert len(batches) == 4


def test_default_admission_is_1000_files_unless_only_bytes_are_limited():
    assert Admission.from_options(None, None) == Admission(1000, None)
    assert Admission.from_options(None, 64) == Admission(None, 64)
    assert Admission.from_options(5, None) == Admission(5, None)


def test_commits_without_data_move_the_offset(table_uri):
    table = make_table(table_uri, batches=1)
    table.set_properties({"delta.appendOnly": "false"})  # version 2: metadata only
    planner = planner_for(table)
    end = planner.latest_offset(commits_from(table, 2), None)
    assert end == StreamOffset(table.metadata.id, 2, BASE_INDEX, False)  # nothing after commit 2's start yet
    end = planner.latest_offset(commits_from(table, 1), None)
    assert end == StreamOffset(table.metadata.id, 2, BASE_INDEX, False)  # last file of 1 -> base of 2
    table.append(rows([30]))
    end2 = planner.latest_offset(end, None)
    assert end2 == StreamOffset(table.metadata.id, 4, BASE_INDEX, False)
    assert planner.files_between(end, end2)["version"].to_pylist() == [3]


def test_available_now_bound_stops_at_the_last_version(table_uri):
    table = make_table(table_uri, batches=3)
    planner = planner_for(table)
    batches, end = drain(planner, commits_from(table, 1), None, last_version=2)
    assert batches == [[(1, 0), (2, 0)]]
    assert end == StreamOffset(table.metadata.id, 3, BASE_INDEX, False)


def test_missing_commit_the_stream_still_needs_fails_it(table_uri):
    table = make_table(table_uri, batches=3)
    table.checkpoint()  # the table stays loadable without its early commits
    os.remove(os.path.join(table_uri, "_delta_log", f"{2:020d}.json"))
    planner = planner_for(deltatx.Table(table_uri))
    with pytest.raises(StreamingSourceError, match="version 2 .* no longer in the log") as info:
        planner.latest_offset(commits_from(table, 2), None)
    assert info.value.version == 2


# --------------------------------------------------------------------------------------------
# Commits that remove data
# --------------------------------------------------------------------------------------------


def test_delete_only_commit_fails_unless_deletes_are_ignored(table_uri):
    table = make_table(table_uri, batches=2, partitioned=True)
    table.append(rows([7], "b"))  # version 3
    table.delete("part = 'b'")  # version 4: removes a whole file, adds none
    table.append(rows([8]))  # version 5
    start = commits_from(table, 3)
    with pytest.raises(StreamDataChangedError, match=r"DELTA_SOURCE_IGNORE_DELETE.*version 4") as info:
        planner_for(table).latest_offset(start, None)
    assert info.value.version == 4
    assert "ignoreDeletes" in str(info.value) and "skipChangeCommits" in str(info.value)

    for policy in ({"ignore_deletes": True}, {"skip_change_commits": True}, {"ignore_changes": True}):
        planner = planner_for(table, **policy)
        batches, end = drain(planner, start, None)
        assert batches == [[(3, 0), (5, 0)]], policy
        assert end == StreamOffset(table.metadata.id, 6, BASE_INDEX, False)


def test_update_fails_even_with_ignore_deletes(table_uri):
    table = make_table(table_uri, batches=2)
    table.update("id = 10", {"id": "100"})  # version 3: rewrites a file (remove + add)
    table.append(rows([40]))  # version 4
    start = commits_from(table, 1)
    for policy in ({}, {"ignore_deletes": True}):
        with pytest.raises(StreamDataChangedError, match="DELTA_SOURCE_TABLE_IGNORE_CHANGES") as info:
            planner_for(table, **policy).latest_offset(start, None)
        assert info.value.version == 3 and "skipChangeCommits=true" in str(info.value)

    skip = planner_for(table, skip_change_commits=True)
    _, end = drain(skip, start, None)
    assert sorted(ids_of(skip, start, end)) == [10, 11, 20, 21, 40]  # the update's rewrite skipped

    changes = planner_for(table, ignore_changes=True)
    _, end = drain(changes, start, None)
    assert sorted(ids_of(changes, start, end)) == [10, 11, 11, 20, 21, 40, 100]  # rewritten file again


def test_delete_with_deletion_vectors_is_a_change(table_uri):
    table = make_table(table_uri, batches=1, **{"delta.enableDeletionVectors": "true"})
    table.delete("id = 10")  # remove + re-add of the same file with a DV
    with pytest.raises(StreamDataChangedError, match="IGNORE_CHANGES"):
        planner_for(deltatx.Table(table_uri)).latest_offset(commits_from(table, 1), None)


def test_optimize_delivers_nothing_and_does_not_fail(table_uri):
    table = make_table(table_uri, batches=3)
    table.optimize()  # version 4: dataChange=false removes and adds
    table.append(rows([40]))
    planner = planner_for(deltatx.Table(table_uri))
    batches, _ = drain(planner, commits_from(table, 1), None)
    assert [u for b in batches for u in b] == [(1, 0), (2, 0), (3, 0), (5, 0)]


# --------------------------------------------------------------------------------------------
# Schema changes
# --------------------------------------------------------------------------------------------


def test_added_column_fails_the_stream_naming_the_version(table_uri):
    table = make_table(table_uri, batches=1)
    planner = planner_for(table)  # analysed with (id, part)
    wider = pa.table({"id": pa.array([5], pa.int64()), "part": ["a"], "extra": ["x"]})
    table.append(wider, schema_mode="merge")  # version 2 adds a column
    # the batch ends before the change: version 1 is delivered first
    before = planner.latest_offset(commits_from(table, 1), None)
    assert before == commits_from(table, 2)
    assert planner.files_between(commits_from(table, 1), before)["version"].to_pylist() == [1]
    with pytest.raises(StreamSchemaChangedError, match=r"DELTA_SCHEMA_CHANGED_WITH_VERSION.*version 2") as info:
        planner.latest_offset(before, None)
    assert info.value.version == 2 and "Restart the query" in str(info.value)

    # a stream restarted on the new schema reads old and new commits
    fresh = planner_for(deltatx.Table(table_uri))
    batches, _ = drain(fresh, commits_from(table, 1), None)
    assert batches == [[(1, 0), (2, 0)]]
    # a stream reading some columns only does not care about others
    projected = StreamPlanner(table.store, table.metadata.id, pa.schema([("id", pa.int64())]), table.metadata,
                              projected=True)
    assert drain(projected, commits_from(table, 1), None)[0] == [[(1, 0), (2, 0)]]


def whole_and_projected_planners(table: deltatx.Table) -> list[StreamPlanner]:
    """A stream of every column, and one reading ``part`` only (a projection hides other columns)."""
    return [planner_for(table), StreamPlanner(table.store, table.metadata.id, pa.schema([table.schema.field("part")]),
                                              table.metadata, projected=True)]


def replace_part_column(table: deltatx.Table, change: str) -> None:
    """Rename ``part`` (one commit), or drop it and add it again (two), then append a row."""
    if change == "rename":
        table.rename_column("part", "p2")
        table.append(pa.table({"id": pa.array([5], pa.int64()), "p2": ["x"]}))
    else:
        table.drop_column("part")
        table.add_columns(pa.field("part", pa.string()))
        table.append(pa.table({"id": pa.array([5], pa.int64()), "part": ["x"]}))


@pytest.mark.parametrize("change", ["drop_and_add", "rename"])
def test_column_mapping_renames_and_re_added_columns_fail_the_stream(table_uri, change):
    """Names alone cannot tell a column dropped and added again (the stream would read the new
    column's files under the old physical name: NULLs), nor a rename a projection hides;
    delta-spark fails the stream on both."""
    table = make_table(table_uri, batches=1, **{"delta.columnMapping.mode": "name"})
    planners = whole_and_projected_planners(table)
    replace_part_column(table, change)
    for planner in planners:
        before = planner.latest_offset(commits_from(table, 1), None)  # version 1, before the change
        with pytest.raises(StreamSchemaChangedError, match="column mapping"):
            planner.latest_offset(before, None)


def test_read_compatibility_rules():
    read = pa.schema([pa.field("id", pa.int64(), False), pa.field("name", pa.string())])
    assert readable_as(read, read)
    assert readable_as(pa.schema([pa.field("id", pa.int64(), False)]), read)  # missing column: nulls
    assert not readable_as(read.append(pa.field("new", pa.int32())), read)  # new column: restart
    narrower = pa.schema([pa.field("id", pa.int32(), False), read.field("name")])
    assert readable_as(narrower, read)  # older data of a widened column: read with the wider type
    assert not readable_as(read, narrower)  # a running stream meeting the widened type: restart
    assert not readable_as(pa.schema([pa.field("id", pa.string(), False), read.field("name")]), read)  # type
    assert not readable_as(pa.schema([pa.field("id", pa.int64(), True), read.field("name")]), read)  # nulls
    assert readable_as(read, pa.schema([pa.field("id", pa.int64(), True), read.field("name")]))
    assert not readable_as(pa.schema([pa.field("ID", pa.int64(), False), read.field("name")]), read)  # case
    nested_read = pa.schema([pa.field("s", pa.struct([pa.field("a", pa.int64())]))])
    nested_wider = pa.schema([pa.field("s", pa.struct([pa.field("a", pa.int64()), pa.field("b", pa.int64())]))])
    assert not readable_as(nested_wider, nested_read)
    lists = pa.schema([pa.field("l", pa.list_(pa.field("element", pa.int64(), False)))])
    nullable_lists = pa.schema([pa.field("l", pa.list_(pa.field("element", pa.int64(), True)))])
    assert readable_as(lists, nullable_lists) and not readable_as(nullable_lists, lists)


# --------------------------------------------------------------------------------------------
# Where a new stream starts
# --------------------------------------------------------------------------------------------


def _set_commit_times(uri: str, seconds_by_version: dict[int, int]) -> None:
    for version, seconds in seconds_by_version.items():
        os.utime(os.path.join(uri, "_delta_log", f"{version:020d}.json"), (seconds, seconds))


def test_resolve_start_snapshot_version_and_latest(table_uri):
    table = make_table(table_uri, batches=3)
    latest = (table.version, table.properties)
    assert resolve_start(table.store, *latest) == StreamStart(3, True)
    assert resolve_start(table.store, *latest, 1) == StreamStart(1, False)
    assert resolve_start(table.store, *latest, "latest") == StreamStart(4, False)
    for bad in (4, -1):
        with pytest.raises(TimeTravelError, match="startingVersion"):
            resolve_start(table.store, *latest, bad)
    with pytest.raises(TimeTravelError, match="not both"):
        resolve_start(table.store, *latest, 1, 1000)


def test_resolve_start_from_timestamp(table_uri):
    table = make_table(table_uri, batches=3)
    _set_commit_times(table_uri, {0: 1000, 1: 2000, 2: 3000, 3: 4000})
    latest = (3, deltatx.Table(table_uri).properties)
    assert resolve_start(table.store, *latest, starting_timestamp_ms=3_000_000) == StreamStart(2, False)  # exact
    assert resolve_start(table.store, *latest, starting_timestamp_ms=2_500_000) == StreamStart(2, False)  # next
    assert resolve_start(table.store, *latest, starting_timestamp_ms=5) == StreamStart(0, False)  # earliest
    with pytest.raises(TimeTravelError, match="after the latest commit"):
        resolve_start(table.store, *latest, starting_timestamp_ms=4_000_001)


def test_a_stream_restarted_after_a_widening_reads_the_older_versions_with_the_wider_type(table_uri):
    """A widened column's older files are read with the wider type, as every reader does, so a
    stream restarted after ``ALTER COLUMN … TYPE BIGINT`` goes on from where it stopped (here,
    within its initial snapshot) instead of failing at the snapshot's version; a stream still
    reading the narrower type fails at the widening."""
    schema = pa.schema([("id", pa.int32())])
    table = deltatx.create_table(table_uri, schema, properties={"delta.enableTypeWidening": "true"})
    table.append(pa.table({"id": pa.array([1], pa.int32())}))
    table.append(pa.table({"id": pa.array([2], pa.int32())}))
    before = deltatx.Table(table_uri)
    narrow = StreamPlanner(before.store, before.metadata.id, before.schema, before.metadata)
    first = narrow.latest_offset(snapshot_start(before), Admission(max_files=1))
    assert first == StreamOffset(before.metadata.id, 2, 0, True)
    table.alter_column_type("id", pa.int64())  # version 3
    table.append(pa.table({"id": pa.array([2**40], pa.int64())}))  # version 4
    with pytest.raises(StreamSchemaChangedError) as failed:
        drain(narrow, first, None)
    assert failed.value.version == 3

    wide = deltatx.Table(table_uri)
    restarted = StreamPlanner(wide.store, wide.metadata.id, wide.schema, wide.metadata)
    batches, _ = drain(restarted, first, None)
    assert batches == [[(2, 1), (4, 0)]]


@pytest.mark.parametrize("change", ["drop_and_add", "rename"])
def test_column_mapping_turned_on_under_a_running_stream_then_a_column_replaced(table_uri, change):
    """The stream was analysed before the table had column mapping (no ids to compare). Turning
    it on gives each column its name as physical name; a column re-added since has another, a
    renamed one keeps the old. Before, the re-added column's new values came as NULLs, and a
    projection hid a rename (NULLs too)."""
    table = make_table(table_uri, batches=1)
    planners = whole_and_projected_planners(table)
    table.set_properties({"delta.columnMapping.mode": "name"})  # version 2: names stay physical
    replace_part_column(table, change)
    changed_at = 3  # the rename, or the drop
    for planner in planners:
        before = planner.latest_offset(commits_from(table, 1), None)
        assert before == commits_from(table, changed_at)  # mapping turned on: readable as is
        with pytest.raises(StreamSchemaChangedError, match="column mapping") as info:
            planner.latest_offset(before, None)
        assert info.value.version == changed_at


def test_a_stream_restarted_after_its_snapshot_and_a_rename_reads_on(table_uri):
    """The offset moves past a fully delivered snapshot, so a restart (analysed with the renamed
    schema) never checks the snapshot's old schema again. Before, every restart failed at the
    snapshot's version and the later commits were never delivered."""
    table = make_table(table_uri, batches=1, **{"delta.columnMapping.mode": "name"})
    first = planner_for(table)
    end = first.latest_offset(snapshot_start(table), None)
    assert end == commits_from(table, 2)
    table.rename_column("part", "p2")  # version 2
    table.append(pa.table({"id": pa.array([5], pa.int64()), "p2": ["x"]}))  # version 3
    with pytest.raises(StreamSchemaChangedError):
        first.latest_offset(end, None)
    restarted = planner_for(deltatx.Table(table_uri))
    batches, _ = drain(restarted, end, None)
    assert batches == [[(3, 0)]]


def test_a_dropped_column_fails_the_stream_and_a_later_added_one_does_not(table_uri):
    """A stream reading a column dropped under it would deliver NULLs from then on; Delta fails
    it (column mapping: the only tables that drop columns). A stream started from a version
    before a column was added reads that column as NULLs in the older commits: no drop."""
    table = make_table(table_uri, batches=1, **{"delta.columnMapping.mode": "name"})
    planner = planner_for(table)
    projected = StreamPlanner(table.store, table.metadata.id, pa.schema([table.schema.field("id")]),
                              table.metadata, projected=True)
    table.drop_column("part")  # version 2
    table.append(pa.table({"id": pa.array([5], pa.int64())}))
    before = planner.latest_offset(commits_from(table, 1), None)
    assert before == commits_from(table, 2)
    with pytest.raises(StreamSchemaChangedError, match="dropped") as info:
        planner.latest_offset(before, None)
    assert info.value.version == 2
    assert drain(projected, commits_from(table, 1), None)[0] == [[(1, 0), (3, 0)]]  # reads id only

    table.add_columns(pa.field("note", pa.string()))  # version 4
    table.set_properties({"delta.appendOnly": "false"})  # version 5: a metaData action after it
    table.append(pa.table({"id": pa.array([6], pa.int64()), "note": ["n"]}))
    latest = deltatx.Table(table_uri)
    from_start = StreamPlanner(latest.store, latest.metadata.id, latest.schema, latest.metadata)
    # from version 2: its metaData lacks "note" (an id above its maxColumnId): not a drop
    assert drain(from_start, commits_from(table, 2), None)[0] == [[(3, 0), (6, 0)]]
