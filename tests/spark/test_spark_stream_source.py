"""spark.readStream.format("deltatx"): Delta's streaming source semantics, exactly once across restarts.

Source tables are written with the core API (no Spark job); every query runs with
``trigger(availableNow=True)`` (or ``processAllAvailable()``), so no test sleeps. A
``foreachBatch`` sink records what each micro-batch delivered, to check how batches are cut; the
deltatx sink is used where rows must land exactly once in a table.
"""

from __future__ import annotations

import collections
import os

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import InvalidPropertyError, StreamDataChangedError, StreamSchemaChangedError, TimeTravelError
from deltatx.spark.stream_source import stream_read_spec
from deltatx.spark.unwrap import typed_error
from deltatx.txnlog.stream_plan import ChangePolicy

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string())])


def rows(ids, part: str = "a") -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "part": [part] * len(ids)}, schema=SCHEMA)


def source_table(uri: str, commits: int, per_commit: int = 2, **properties) -> deltatx.Table:
    """Version 0 creates; versions 1..commits each append one file of ids v*10 .. v*10+per_commit-1."""
    table = deltatx.create_table(uri, SCHEMA, properties=properties or None)
    for v in range(1, commits + 1):
        table.append(rows(range(10 * v, 10 * v + per_commit)))
    return table


class Batches:
    """A foreachBatch sink that records (batch id, sorted ids) of every micro-batch it sees."""

    def __init__(self):
        self.seen: list[tuple[int, list[int]]] = []

    def __call__(self, df, batch_id: int) -> None:
        self.seen.append((batch_id, sorted(r["id"] for r in df.select("id").collect())))

    def ids(self) -> list[int]:
        return sorted(i for _, ids in self.seen for i in ids)


def stream(spark, uri: str, **options):
    reader = spark.readStream.format("deltatx")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load(uri)


def run_to_batches(spark, uri: str, checkpoint: str, sink: Batches, **options):
    """One availableNow run of the stream into ``sink``; returns the finished query."""
    query = (stream(spark, uri, **options).writeStream.foreachBatch(sink)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    try:
        query.awaitTermination()
    except Exception:  # the failure stays on the query for the test to unwrap
        pass
    return query


def run_to_table(spark, uri: str, checkpoint: str, sink_uri: str, **options):
    query = (stream(spark, uri, **options).writeStream.format("deltatx")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start(sink_uri))
    query.awaitTermination()
    assert query.exception() is None
    return query


def failure(query):
    assert query.exception() is not None, "the query should have failed"
    return typed_error(query.exception())


def offsets_written(checkpoint: str) -> list[str]:
    path = os.path.join(checkpoint, "offsets")
    return sorted(n for n in os.listdir(path) if not n.startswith(".")) if os.path.isdir(path) else []


# --------------------------------------------------------------------------------------------
# Exactly once
# --------------------------------------------------------------------------------------------


def test_every_row_exactly_once_across_restarts_into_a_deltatx_sink(spark, tmp_path):
    uri, checkpoint, sink = str(tmp_path / "src"), str(tmp_path / "ckpt"), str(tmp_path / "sink")
    table = source_table(uri, commits=3)
    run_to_table(spark, uri, checkpoint, sink, maxFilesPerTrigger=2)
    assert sorted(deltatx.Table(sink).to_arrow()["id"].to_pylist()) == [10, 11, 20, 21, 30, 31]
    first_run_versions = deltatx.Table(sink).version

    table.append(rows([40, 41]))
    table.append(rows([50]))
    run_to_table(spark, uri, checkpoint, sink, maxFilesPerTrigger=2)
    ids = deltatx.Table(sink).to_arrow()["id"].to_pylist()
    assert collections.Counter(ids) == collections.Counter([10, 11, 20, 21, 30, 31, 40, 41, 50])
    assert deltatx.Table(sink).version > first_run_versions

    before = deltatx.Table(sink).version
    run_to_table(spark, uri, checkpoint, sink, maxFilesPerTrigger=2)  # nothing new: nothing delivered
    assert deltatx.Table(sink).version == before
    assert sorted(deltatx.Table(sink).to_arrow()["id"].to_pylist()) == sorted(ids)


def test_a_replayed_first_batch_reads_the_same_snapshot(spark, tmp_path):
    """Spark re-asks the source for its initial offset when it replays batch 0 after a crash; the
    table has moved on by then, yet the replay must deliver the same rows (and the new commit
    only once, afterwards)."""
    uri, checkpoint = str(tmp_path / "src"), str(tmp_path / "ckpt")
    table = source_table(uri, commits=2)
    sink = Batches()
    run_to_batches(spark, uri, checkpoint, sink)
    assert sink.seen == [(0, [10, 11, 20, 21])]

    # the crash: batch 0's offsets are logged but its commit is not
    for name in ("0", ".0.crc"):
        os.remove(os.path.join(checkpoint, "commits", name))
    table.append(rows([30]))
    replay = Batches()
    query = run_to_batches(spark, uri, checkpoint, replay)
    assert query.exception() is None
    assert replay.seen == [(0, [10, 11, 20, 21]), (1, [30])]


# --------------------------------------------------------------------------------------------
# Batches: snapshot, then commits; limits
# --------------------------------------------------------------------------------------------


def test_snapshot_then_commits_cut_by_max_files_and_max_bytes(spark, tmp_path):
    uri = str(tmp_path / "src")
    table = source_table(uri, commits=5)
    by_files = Batches()
    run_to_batches(spark, uri, str(tmp_path / "c1"), by_files, maxFilesPerTrigger=2)
    assert [ids for _, ids in by_files.seen] == [[10, 11, 20, 21], [30, 31, 40, 41], [50, 51]]

    by_bytes = Batches()  # one byte: a soft limit, so one file per batch
    run_to_batches(spark, uri, str(tmp_path / "c2"), by_bytes, maxBytesPerTrigger="1")
    assert [ids for _, ids in by_bytes.seen] == [[10, 11], [20, 21], [30, 31], [40, 41], [50, 51]]

    table.append(rows([60]))
    table.append(rows([70]))
    run_to_batches(spark, uri, str(tmp_path / "c1"), by_files, maxFilesPerTrigger=2)
    assert by_files.seen[3:] == [(3, [60, 70])]
    assert by_files.ids() == sorted([10 * v + i for v in range(1, 6) for i in (0, 1)] + [60, 70])


def test_starting_version_and_starting_timestamp_skip_the_snapshot(spark, tmp_path):
    uri = str(tmp_path / "src")
    source_table(uri, commits=4)
    from_version = Batches()
    run_to_batches(spark, uri, str(tmp_path / "c1"), from_version, startingVersion=3)
    assert from_version.ids() == [30, 31, 40, 41]

    for version, seconds in {0: 1000, 1: 2000, 2: 3000, 3: 4000, 4: 5000}.items():
        path = os.path.join(uri, "_delta_log", f"{version:020d}.json")
        os.utime(path, (seconds, seconds))
    from_time = Batches()  # 1970-01-01T00:55:00Z = 3300 s: the first commit at or after it is version 3
    run_to_batches(spark, uri, str(tmp_path / "c2"), from_time, startingTimestamp="1970-01-01T00:55:00Z")
    assert from_time.ids() == [30, 31, 40, 41]


def test_starting_version_latest_delivers_only_new_commits(spark, tmp_path):
    uri = str(tmp_path / "src")
    table = source_table(uri, commits=2)
    sink = Batches()
    query = (stream(spark, uri, startingVersion="latest").writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        query.processAllAvailable()
        assert sink.ids() == []
        table.append(rows([30, 31]))
        query.processAllAvailable()
        assert sink.ids() == [30, 31]
    finally:
        query.stop()


def test_initial_snapshot_applies_deletion_vectors(spark, tmp_path):
    uri = str(tmp_path / "src")
    table = source_table(uri, commits=2, **{"delta.enableDeletionVectors": "true"})
    table.delete("id = 11 OR id = 20")
    assert table.snapshot.files["deletionVector"].null_count < table.snapshot.num_files  # DVs, not rewrites
    sink = Batches()
    run_to_batches(spark, uri, str(tmp_path / "ckpt"), sink)
    assert sink.ids() == [10, 21]


def test_reads_a_table_written_by_deltalake(spark, tmp_path):
    from deltalake import write_deltalake

    uri = str(tmp_path / "src")
    write_deltalake(uri, rows([1, 2]))
    sink = Batches()
    checkpoint = str(tmp_path / "ckpt")
    run_to_batches(spark, uri, checkpoint, sink)
    write_deltalake(uri, rows([3]), mode="append")
    run_to_batches(spark, uri, checkpoint, sink)
    assert sink.seen == [(0, [1, 2]), (1, [3])]


# --------------------------------------------------------------------------------------------
# Commits that remove data, schema changes
# --------------------------------------------------------------------------------------------


def test_update_fails_the_stream_until_skip_change_commits(spark, tmp_path):
    uri, checkpoint = str(tmp_path / "src"), str(tmp_path / "ckpt")
    table = source_table(uri, commits=1)
    sink = Batches()
    run_to_batches(spark, uri, checkpoint, sink)
    table.update("id = 10", {"id": "100"})  # version 2
    table.append(rows([30]))  # version 3

    query = run_to_batches(spark, uri, checkpoint, sink)
    error = failure(query)
    assert isinstance(error, StreamDataChangedError) and error.version == 2
    assert "skipChangeCommits" in str(error)
    assert sink.ids() == [10, 11] and offsets_written(checkpoint) == ["0"]  # nothing past the update

    query = run_to_batches(spark, uri, checkpoint, sink, skipChangeCommits="true")
    assert query.exception() is None
    assert sink.ids() == [10, 11, 30]  # the update's rewritten file is not delivered


def test_partition_delete_passes_with_ignore_deletes(spark, tmp_path):
    uri, checkpoint = str(tmp_path / "src"), str(tmp_path / "ckpt")
    table = deltatx.create_table(uri, SCHEMA, partition_by=["part"])
    table.append(pa.concat_tables([rows([1], "a"), rows([2], "b")]))
    sink = Batches()
    run_to_batches(spark, uri, checkpoint, sink)
    table.delete("part = 'b'")  # whole files only
    table.append(rows([3], "a"))
    error = failure(run_to_batches(spark, uri, checkpoint, sink))
    assert isinstance(error, StreamDataChangedError) and "ignoreDeletes" in str(error)
    assert run_to_batches(spark, uri, checkpoint, sink, ignoreDeletes="true").exception() is None
    assert sink.ids() == [1, 2, 3]


def test_schema_change_fails_the_running_stream_and_a_restart_reads_on(spark, tmp_path):
    uri, checkpoint = str(tmp_path / "src"), str(tmp_path / "ckpt")
    table = source_table(uri, commits=1)
    seen: list[dict] = []

    def collect(df, _):
        seen.extend(r.asDict() for r in df.collect())

    running = stream(spark, uri).writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint).start()
    try:
        running.processAllAvailable()
        assert sorted(r["id"] for r in seen) == [10, 11]
        wider = pa.table({"id": pa.array([20], pa.int64()), "part": ["a"], "note": ["new"]})
        table.append(wider, schema_mode="merge")  # version 2 adds a column
        with pytest.raises(Exception):
            running.processAllAvailable()
    finally:
        running.stop()
    error = failure(running)
    assert isinstance(error, StreamSchemaChangedError) and error.version == 2
    assert "Restart the query" in str(error) and len(seen) == 2

    seen.clear()
    restarted = (stream(spark, uri).writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
    restarted.awaitTermination()
    assert seen == [{"id": 20, "part": "a", "note": "new"}]


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------


def test_stream_options_parse_like_deltas():
    spec = stream_read_spec({"path": "/t", "startingVersion": "5", "maxFilesPerTrigger": "7",
                             "maxBytesPerTrigger": "64m", "skipChangeCommits": "true", "IGNOREDELETES": "true"})
    assert spec.starting_version == 5 and spec.starting_timestamp_ms is None
    assert (spec.max_files, spec.max_bytes) == (7, 64 << 20)
    assert spec.policy == ChangePolicy(skip_change_commits=True, ignore_deletes=True)
    assert stream_read_spec({"path": "/t", "startingVersion": "LATEST"}).starting_version == "latest"
    assert stream_read_spec({"path": "/t", "startingTimestamp": "2024-01-02"}).starting_timestamp_ms == 1704153600000
    assert stream_read_spec({"path": "/t", "startingTimestamp": "1704153600000"}).starting_timestamp_ms == 1704153600000
    assert stream_read_spec({"path": "/t"}).admission().max_files == 1000


@pytest.mark.parametrize("options, error, match", [
    ({"startingVersion": "abc"}, InvalidPropertyError, "startingVersion"),
    ({"startingVersion": "1", "startingTimestamp": "2024-01-01"}, InvalidPropertyError, "not both"),
    ({"maxFilesPerTrigger": "0"}, InvalidPropertyError, "maxFilesPerTrigger"),
    ({"maxBytesPerTrigger": "lots"}, InvalidPropertyError, "maxBytesPerTrigger"),
    ({"versionAsOf": "1"}, InvalidPropertyError, "startingVersion"),
    ({"readChangeFeed": "perhaps"}, InvalidPropertyError, "readChangeFeed"),
    ({"skipChangeCommits": "maybe"}, InvalidPropertyError, "skipChangeCommits"),
    ({"startingTimestamp": "yesterday"}, TimeTravelError, "ISO 8601"),
])
def test_bad_stream_options_are_refused(options, error, match):
    with pytest.raises(error, match=match):
        stream_read_spec({"path": "/t", **options})


def test_refused_stream_writes_nothing(spark, tmp_path):
    uri, checkpoint, sink = str(tmp_path / "src"), str(tmp_path / "ckpt"), str(tmp_path / "sink")
    source_table(uri, commits=1)
    for options in ({"startingVersion": "abc"}, {"startingVersion": "9"}):
        query = (stream(spark, uri, **options).writeStream.format("deltatx")
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start(sink))
        with pytest.raises(Exception):
            query.awaitTermination()
        error = failure(query)
        assert isinstance(error, (InvalidPropertyError, TimeTravelError)) and "startingVersion" in str(error)
        assert not os.path.exists(sink) and offsets_written(checkpoint) == []


def test_a_timestamp_older_than_every_commit_file_starts_at_the_earliest_one(spark, tmp_path):
    """Delta's getStartingVersionFromTimestamp: the earliest commit *file* in the log, even when
    its version cannot be rebuilt (no checkpoint there) — a stream reads commits, not snapshots."""
    uri = str(tmp_path / "t")
    table = source_table(uri, commits=5)
    table.checkpoint()  # at v5, the only one
    for version in range(3):  # what a cleanup without a checkpoint at the earliest version leaves
        os.remove(os.path.join(uri, "_delta_log", f"{version:020d}.json"))
    sink = Batches()
    query = run_to_batches(spark, uri, str(tmp_path / "c"), sink, startingTimestamp="2000-01-01T00:00:00Z")
    assert query.exception() is None
    assert sink.ids() == [30, 31, 40, 41, 50, 51]  # versions 3..5, as startingVersion=3 gives
