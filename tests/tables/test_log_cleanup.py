"""Metadata cleanup on real tables: ``Table.cleanup_metadata()`` and the cleanup after each
checkpoint (tables/ops/log_cleanup.py over txnlog/log_cleanup.py's plan).

Log files are made old with ``os.utime`` (no sleeping); on S3 and in memory, where file times
cannot be set, the cleanup is run as of a later ``now``.
"""

from __future__ import annotations

import os
import time
import warnings

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import (ConcurrentModificationException, DeltaTxError, InvalidPropertyError, LogCleanupWarning,
                            PostCommitHookWarning, TimeTravelError)
from deltatx.tables.ops.log_cleanup import PACING, cleanup_log
from deltatx.txnlog.snapshot_cache import SNAPSHOTS
from deltatx.txnlog.checkpoint import checkpoint_name as checkpoint_name_of
from deltatx.txnlog.store import commit_name

SCHEMA = pa.schema([("id", pa.int64())])
DAY = 86400


@pytest.fixture(autouse=True)
def _fresh_process_state():
    """Each test starts as a new process would: no cached snapshot, no cleanup pacing."""
    SNAPSHOTS.clear()
    PACING.clear()
    yield
    SNAPSHOTS.clear()
    PACING.clear()


def _log(uri: str) -> list[str]:
    return sorted(os.listdir(os.path.join(uri, "_delta_log")))


def _age(uri: str, through: int, days: float = 40) -> None:
    """Make the log files of versions ≤ ``through`` ``days`` old (a second apart, in version order)."""
    base = time.time() - days * DAY
    folder = os.path.join(uri, "_delta_log")
    for name in os.listdir(folder):
        if name[:20].isdigit() and int(name[:20]) <= through:
            t = base + int(name[:20])
            os.utime(os.path.join(folder, name), (t, t))


def _table(uri: str, versions: int, interval: int = 5, **properties: str) -> deltatx.Table:
    """Versions 0..``versions`` (one row each after 0), a checkpoint every ``interval`` versions."""
    t = deltatx.create_table(uri, SCHEMA, properties={"delta.checkpointInterval": str(interval), **properties})
    for i in range(1, versions + 1):
        t.append(pa.table({"id": [i]}))
    return t


def _ids(t: deltatx.Table) -> list[int]:
    return sorted(t.to_arrow()["id"].to_pylist())


# ------------------------------------------------------------------------------ cleanup_metadata()

def test_expired_files_go_and_the_table_reads_as_before(table_uri):
    t = _table(table_uri, 12)
    _age(table_uri, 11)
    before = _ids(t)
    deleted = t.cleanup_metadata()
    assert deleted == sorted([commit_name(v) for v in range(10)] + [checkpoint_name_of(5)])
    assert _log(table_uri) == sorted([commit_name(v) for v in (10, 11, 12)] + [checkpoint_name_of(10),
                                                                              "_last_checkpoint"])
    SNAPSHOTS.clear()
    fresh = deltatx.Table(table_uri)
    assert fresh.version == 12 and _ids(fresh) == before
    assert _ids(deltatx.Table(table_uri, version=10)) == list(range(1, 11))
    with pytest.raises(TimeTravelError, match="version 9 .* earliest version that can be rebuilt is 10"):
        deltatx.Table(table_uri, version=9)
    assert [h["version"] for h in fresh.history()] == [12, 11, 10]
    assert t.cleanup_metadata() == []  # nothing more is expired


def test_a_dry_run_names_what_would_go_and_deletes_nothing(table_uri):
    t = _table(table_uri, 12)
    _age(table_uri, 11)
    files = _log(table_uri)
    assert t.cleanup_metadata(dry_run=True) == sorted([commit_name(v) for v in range(10)] + [checkpoint_name_of(5)])
    assert _log(table_uri) == files


def test_nothing_goes_from_a_young_log_or_one_without_a_checkpoint(table_uri, tmp_path):
    t = _table(table_uri, 12)
    assert t.cleanup_metadata() == []  # every file is from today
    other = str(tmp_path / "no_checkpoint")
    u = _table(other, 4, interval=100)
    _age(other, 4)
    assert u.cleanup_metadata() == [] and len(_log(other)) == 5


def test_the_retention_is_the_table_s(table_uri):
    t = _table(table_uri, 12, **{"delta.logRetentionDuration": "interval 60 days"})
    _age(table_uri, 11, days=40)
    assert t.cleanup_metadata() == []
    _age(table_uri, 11, days=70)
    assert len(t.cleanup_metadata()) == 11


def test_only_the_log_s_own_kinds_of_files_go(table_uri):
    t = _table(table_uri, 12)
    folder = os.path.join(table_uri, "_delta_log")
    extra = {f"{3:020d}.crc": b"{}", f"{10:020d}.crc": b"{}",
             f"{1:020d}.{4:020d}.compacted.json": b"", f"{11:020d}.{12:020d}.compacted.json": b"",
             ".00000000000000000002.json.tmp": b"", "notes.txt": b"mine"}
    for name, data in extra.items():
        with open(os.path.join(folder, name), "wb") as fh:
            fh.write(data)
    for sub in ("_staged_commits", "_sidecars"):
        os.makedirs(os.path.join(folder, sub))
        with open(os.path.join(folder, sub, f"{1:020d}.x.json"), "wb") as fh:
            fh.write(b"{}")
    _age(table_uri, 11)
    old = time.time() - 40 * DAY
    for name in (".00000000000000000002.json.tmp", "notes.txt", "_last_checkpoint"):
        os.utime(os.path.join(folder, name), (old, old))
    deleted = t.cleanup_metadata()
    assert f"{3:020d}.crc" in deleted and f"{1:020d}.{4:020d}.compacted.json" in deleted
    left = set(_log(table_uri))
    assert {f"{10:020d}.crc", f"{11:020d}.{12:020d}.compacted.json", ".00000000000000000002.json.tmp",
            "notes.txt", "_last_checkpoint", "_staged_commits", "_sidecars"} <= left
    assert os.listdir(os.path.join(folder, "_staged_commits")) and os.listdir(os.path.join(folder, "_sidecars"))


def test_a_time_travel_handle_is_refused(table_uri):
    _table(table_uri, 12)
    _age(table_uri, 11)
    files = _log(table_uri)
    with pytest.raises(DeltaTxError, match="time travel; metadata cleanup needs the latest version"):
        deltatx.Table(table_uri, version=11).cleanup_metadata()
    assert _log(table_uri) == files


def test_a_gap_in_the_kept_log_deletes_nothing_and_says_why(table_uri):
    t = _table(table_uri, 15)  # checkpoints 5, 10, 15: the table reads from 15 across a gap at 12
    os.unlink(os.path.join(table_uri, "_delta_log", commit_name(12)))
    _age(table_uri, 13)  # the cutoff commit is 13: the boundary would be checkpoint 10
    files = _log(table_uri)
    SNAPSHOTS.clear()
    t = deltatx.Table(table_uri)
    assert t.version == 15
    with pytest.warns(LogCleanupWarning, match="commit 12 is missing from the log after checkpoint 10"):
        assert t.cleanup_metadata() == []
    assert _log(table_uri) == files
    PACING.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the cleanup after a checkpoint says nothing
        for i in range(16, 21):
            t.append(pa.table({"id": [i]}))
    assert set(files) <= set(_log(table_uri))


def test_a_handle_on_a_table_that_lost_a_commit_deletes_nothing(table_uri):
    t = _table(table_uri, 12)  # this handle keeps version 12 from its own commits
    os.unlink(os.path.join(table_uri, "_delta_log", commit_name(11)))
    _age(table_uri, 10)
    files = _log(table_uri)
    with pytest.warns(LogCleanupWarning, match="commit 11 is missing"):
        assert t.cleanup_metadata() == []
    assert _log(table_uri) == files


def test_an_unreadable_checkpoint_is_not_kept_as_the_only_start(table_uri):
    t = _table(table_uri, 12)
    _age(table_uri, 11)
    path = os.path.join(table_uri, "_delta_log", checkpoint_name_of(10))
    with open(path, "r+b") as fh:
        fh.truncate(40)  # no Parquet footer: readers fall back to checkpoint 5 and the commits
    _age(table_uri, 11)
    files = _log(table_uri)
    SNAPSHOTS.clear()
    t = deltatx.Table(table_uri)
    with pytest.warns(LogCleanupWarning, match="checkpoint 10, the one that would be kept, is unreadable"):
        assert t.cleanup_metadata() == []
    assert _log(table_uri) == files
    assert _ids(deltatx.Table(table_uri)) == list(range(1, 13))


def test_an_incomplete_multi_part_checkpoint_is_passed_over(table_uri):
    t = _table(table_uri, 12)
    folder = os.path.join(table_uri, "_delta_log")
    os.unlink(os.path.join(folder, checkpoint_name_of(10)))
    with open(os.path.join(folder, f"{10:020d}.checkpoint.{1:010d}.{2:010d}.parquet"), "wb") as fh:
        fh.write(b"PAR1")  # part 1 of 2; part 2 never written
    _age(table_uri, 11)
    SNAPSHOTS.clear()
    deleted = deltatx.Table(table_uri).cleanup_metadata()
    assert deleted == [commit_name(v) for v in range(5)]  # back to checkpoint 5
    assert _ids(deltatx.Table(table_uri)) == list(range(1, 13))


def test_a_bad_retention_in_the_log_is_refused_by_the_explicit_call(table_uri):
    t = _table(table_uri, 12)
    with t.transaction() as tx:  # as another engine could have written it
        config = {**tx.metadata.configuration, "delta.logRetentionDuration": "a while"}
        tx.stage_metadata(tx.metadata.replace(configuration=config))
    _age(table_uri, 12)
    files = _log(table_uri)
    with pytest.raises(InvalidPropertyError, match="logRetentionDuration"):
        t.cleanup_metadata()
    assert _log(table_uri) == files


# ------------------------------------------------------------------------------ stores

def test_memory_tables_are_cleaned_up_as_of_a_later_now(memory_uri):
    t = _table(memory_uri, 12)
    result = cleanup_log(t.store, t.snapshot, now_ms=int((time.time() + 40 * DAY) * 1000))
    # every commit expired: the newest checkpoint (10) is the one kept
    assert result.deleted == sorted([commit_name(v) for v in range(10)] + [checkpoint_name_of(5)])
    SNAPSHOTS.clear()
    assert deltatx.Table(memory_uri).version == 12 and _ids(deltatx.Table(memory_uri)) == list(range(1, 13))


def test_s3_tables_are_cleaned_up_as_of_a_later_now(s3_bucket):
    prefix, options = s3_bucket
    uri = f"{prefix}/t"
    t = deltatx.create_table(uri, SCHEMA, properties={"delta.checkpointInterval": "5"}, storage_options=options)
    for i in range(1, 13):
        t.append(pa.table({"id": [i]}))
    t.store.write_log_file(f"{3:020d}.crc", b"{}")
    result = cleanup_log(t.store, t.snapshot, now_ms=int((time.time() + 40 * DAY) * 1000))
    assert f"{3:020d}.crc" in result.deleted and commit_name(9) in result.deleted
    assert commit_name(10) not in result.deleted and checkpoint_name_of(10) not in result.deleted
    SNAPSHOTS.clear()
    fresh = deltatx.Table(uri, storage_options=options)
    assert fresh.version == 12 and _ids(fresh) == list(range(1, 13))
    with pytest.raises(TimeTravelError):
        deltatx.Table(uri, version=4, storage_options=options)


# ------------------------------------------------------------------------------ after a checkpoint

def test_each_checkpoint_cleans_up_what_expired(table_uri):
    t = _table(table_uri, 12)
    _age(table_uri, 11)
    PACING.clear()  # as in a process that has not looked at this table since the files aged
    for i in range(13, 16):
        t.append(pa.table({"id": [i]}))  # 15 is checkpointed, then cleaned up to checkpoint 10
    assert _log(table_uri)[0] == checkpoint_name_of(10)
    assert commit_name(9) not in _log(table_uri) and commit_name(10) in _log(table_uri)
    SNAPSHOTS.clear()
    assert _ids(deltatx.Table(table_uri)) == list(range(1, 16))


def test_the_cleanup_after_a_checkpoint_can_be_switched_off(table_uri):
    t = _table(table_uri, 12, **{"delta.enableExpiredLogCleanup": "false"})
    _age(table_uri, 11)
    for i in range(13, 16):
        t.append(pa.table({"id": [i]}))
    assert commit_name(0) in _log(table_uri)
    assert len(t.cleanup_metadata()) == 11  # the explicit call still cleans up


def test_the_cleanup_after_a_checkpoint_lists_the_log_once_at_most_and_not_while_nothing_can_expire(table_uri):
    t = _table(table_uri, 4)
    listings = []
    real = t.store.list_log

    def counting(start_version=0, *, extra=False):
        if extra:
            listings.append(start_version)
        return real(start_version, extra=extra)

    t.store.list_log = counting
    for i in range(5, 31):  # checkpoints at 5, 10, ..., 30
        t.append(pa.table({"id": [i]}))
    assert listings == [0]  # the first checkpoint's look; the log stays too young after it
    assert t.version == 30


def test_a_failing_cleanup_only_warns_and_the_commit_stands(table_uri):
    t = _table(table_uri, 12)
    _age(table_uri, 11)

    def broken(name):
        raise OSError("disk says no")

    t.store.delete_log_file = broken
    PACING.clear()
    with pytest.warns(PostCommitHookWarning, match="cleaning up expired log files after it failed .*disk says no"):
        for i in range(13, 16):
            t.append(pa.table({"id": [i]}))
    assert t.version == 15 and commit_name(15) in _log(table_uri) and checkpoint_name_of(15) in _log(table_uri)


def test_a_bad_retention_in_the_log_only_warns_after_a_checkpoint(table_uri):
    t = _table(table_uri, 3)
    with t.transaction() as tx:
        config = {**tx.metadata.configuration, "delta.logRetentionDuration": "a while"}
        tx.stage_metadata(tx.metadata.replace(configuration=config))
    with pytest.warns(PostCommitHookWarning, match="logRetentionDuration"):
        t.append(pa.table({"id": [5]}))  # version 5: checkpointed
    assert t.version == 5


# ------------------------------------------------------------------------------ old handles

def _cleaned_past(uri: str) -> deltatx.Table:
    """A handle whose snapshot (version 3, last seen as the latest 41 days ago) the table has
    moved past since, with the commits after it cleaned up."""
    _table(uri, 3, interval=5)
    _age(uri, 3)
    SNAPSHOTS.clear()
    stale = deltatx.Table(uri)
    assert stale.version == 3
    other = deltatx.Table(uri)
    for i in range(4, 13):
        other.append(pa.table({"id": [i]}))
    _age(uri, 11)
    assert commit_name(4) in other.cleanup_metadata()
    # opened 41 days ago and idle since (set last: a fresh handle shares the cached snapshot, and
    # the other handle's first commit saw version 3 as the latest, which was true then)
    stale.snapshot.seen_latest(int(time.time() * 1000) - 41 * 86_400_000)
    return stale


def test_an_old_handle_writes_after_the_cleaned_up_versions_not_into_them(table_uri):
    stale = _cleaned_past(table_uri)
    result = stale.append(pa.table({"id": [100]}))
    assert result.version == 13
    assert commit_name(4) not in _log(table_uri)  # no commit under the table's checkpoint
    SNAPSHOTS.clear()
    assert _ids(deltatx.Table(table_uri)) == list(range(1, 13)) + [100]


def test_an_old_explicit_transaction_is_refused_not_lost(table_uri):
    stale = _cleaned_past(table_uri)
    with pytest.raises(ConcurrentModificationException, match="metadata cleanup has removed the commits after it"):
        with stale.transaction() as tx:
            tx.append(pa.table({"id": [100]}))
    assert commit_name(4) not in _log(table_uri)
    SNAPSHOTS.clear()
    assert deltatx.Table(table_uri).version == 12


def test_a_handle_seen_current_today_reads_by_name_and_lists_nothing_more(table_uri, monkeypatch):
    """Commits after a version seen as the latest since today's midnight UTC are too young for any
    cleanup (the cutoff never passes that midnight): such a handle commits with no listing, even
    when its version was committed long ago."""
    _table(table_uri, 3, interval=100)
    _age(table_uri, 3)
    SNAPSHOTS.clear()
    t = deltatx.Table(table_uri)
    listings = []
    real = t.store.list_log
    monkeypatch.setattr(t.store, "list_log", lambda *a, **k: listings.append(a) or real(*a, **k))
    assert t.append(pa.table({"id": [9]})).version == 4
    assert t.append(pa.table({"id": [10]})).version == 5
    assert listings == []


def test_a_handle_seen_current_before_today_lists_once_then_not_again(table_uri, monkeypatch):
    """Seen as the latest before today's midnight UTC — whatever the retention its snapshot
    knows, for another client may have shortened it — the handle lists the log once before it
    commits; the commit then counts as seen now."""
    _table(table_uri, 3, interval=100)
    t = deltatx.Table(table_uri)
    t.snapshot.seen_latest(int(time.time() * 1000) - 2 * 86_400_000)
    listings = []
    real = t.store.list_log
    monkeypatch.setattr(t.store, "list_log", lambda *a, **k: listings.append(a) or real(*a, **k))
    assert t.append(pa.table({"id": [9]})).version == 4
    assert len(listings) == 1
    assert t.append(pa.table({"id": [10]})).version == 5
    assert len(listings) == 1


def test_a_retention_shortened_by_another_writer_cannot_make_an_idle_handle_lose_its_write(table_uri):
    """The idle handle knows 30 days; another writer sets 1 day and cleans up. The handle was
    last seen current two days ago, so it lists before committing and lands after the cleanup."""
    _table(table_uri, 3, interval=5)
    _age(table_uri, 3, days=3)
    SNAPSHOTS.clear()
    stale = deltatx.Table(table_uri)
    other = deltatx.Table(table_uri)
    for i in range(4, 10):
        other.append(pa.table({"id": [i]}))
    other.set_properties({"delta.logRetentionDuration": "interval 1 days"})
    for i in range(10, 12):
        other.append(pa.table({"id": [i]}))
    _age(table_uri, other.version, days=2)
    assert commit_name(4) in other.cleanup_metadata()
    stale.snapshot.seen_latest(int(time.time() * 1000) - 3 * 86_400_000)  # idle since three days ago
    result = stale.append(pa.table({"id": [100]}))
    assert result.version == other.version + 1
    assert commit_name(4) not in _log(table_uri)
    SNAPSHOTS.clear()
    assert 100 in _ids(deltatx.Table(table_uri))


def test_a_cleanup_between_losing_a_version_and_reading_its_winner_fails_the_commit_typed(table_uri):
    """The version this commit lost to has no file any more (a cleanup ran in between): the
    rebase cannot check the winners and must not put that version again — a typed conflict,
    nothing written."""
    from deltatx import phases

    _table(table_uri, 3, interval=5)
    tx = deltatx.Table(table_uri).transaction()
    tx.delete("id = 1")
    other = deltatx.Table(table_uri)
    other.append(pa.table({"id": [50]}))  # takes version 4

    def clean(phase, **_):
        path = os.path.join(table_uri, "_delta_log", commit_name(4))
        if phase == "resolve_conflict" and os.path.exists(path):
            os.remove(path)  # as a cleanup would (it removes versions 0..3 too; the rebase reads 4 first)

    with phases.observe(clean):
        with pytest.raises(ConcurrentModificationException, match="commit 4 is gone"):
            tx.commit()
    assert commit_name(4) not in _log(table_uri)


def test_a_checkpoint_whose_protocol_rows_are_all_null_is_not_kept_as_the_only_start(table_uri):
    """Columns named protocol and metaData are not enough: a checkpoint with no protocol row does
    not read (readers fall back to checkpoint 5), so nothing goes and the table still reads."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    _table(table_uri, 12)
    path = os.path.join(table_uri, "_delta_log", checkpoint_name_of(10))
    rows = pq.read_table(path)
    pq.write_table(rows.filter(pc.invert(pc.is_valid(rows["protocol"]))), path)
    _age(table_uri, 11)
    files = _log(table_uri)
    SNAPSHOTS.clear()
    with pytest.warns(LogCleanupWarning, match="holds no protocol or no metaData"):
        assert deltatx.Table(table_uri).cleanup_metadata() == []
    assert _log(table_uri) == files
    assert _ids(deltatx.Table(table_uri)) == list(range(1, 13))
