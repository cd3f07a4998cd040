"""DESCRIBE HISTORY: commitInfo per version, newest first, reading only what is asked for."""

from __future__ import annotations

import os

import pytest
from txnlog_logs import LogWriter, add_row

from deltatx.errors import TableNotFoundError
from deltatx.txnlog.checkpoint import write_checkpoint
from deltatx.txnlog.history import read_history
from deltatx.txnlog.snapshot import load_snapshot
from deltatx.txnlog.store import commit_name


def test_history_newest_first_with_version_and_timestamp(local_log: LogWriter) -> None:
    local_log.create()
    for i in range(3):
        local_log.commit(adds=[add_row(f"f{i}.parquet")],
                         info={"operation": "WRITE", "timestamp": 1, "operationParameters": {"n": str(i)}})
    for version, ms in enumerate([5_000, 6_000, 5_500, 7_000]):
        path = local_log.log_path(commit_name(version))
        os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))
    history = read_history(local_log.store)
    assert [h["version"] for h in history] == [3, 2, 1, 0]
    assert [h["timestamp"] for h in history] == [7_000, 6_001, 6_000, 5_000]  # monotonic, not the writer clock
    assert history[0]["operation"] == "WRITE" and history[0]["operationParameters"] == {"n": "2"}
    assert history[-1]["operation"] == "CREATE TABLE"


def test_history_limit_reads_only_the_newest_commits(local_log: LogWriter) -> None:
    local_log.create()
    for i in range(20):
        local_log.commit(adds=[add_row(f"f{i}.parquet")])
    store = local_log.store
    store.reads.clear()
    history = read_history(store, limit=3)
    assert [h["version"] for h in history] == [20, 19, 18]
    assert sorted(store.reads) == [commit_name(v) for v in (18, 19, 20)]


def _cleaned_up(log: LogWriter, checkpoint: int) -> None:
    """Versions 0..4, a checkpoint at ``checkpoint``, the commit files of 0 and 1 deleted."""
    log.create()
    for i in range(4):
        log.commit(adds=[add_row(f"f{i}.parquet")])
    write_checkpoint(log.store, load_snapshot(log.store, version=checkpoint))
    for v in (0, 1):
        log.store.delete_log_file(commit_name(v))


def test_history_after_log_cleanup_starts_at_the_checkpoint(log: LogWriter) -> None:
    _cleaned_up(log, checkpoint=2)
    assert [h["version"] for h in read_history(log.store)] == [4, 3, 2]


def test_history_lists_commit_files_older_than_the_oldest_checkpoint(log: LogWriter) -> None:
    """As Delta's DESCRIBE HISTORY (from the earliest delta file) and deltalake's: a commit file a
    cleanup kept before the checkpoint is listed, though time travel cannot rebuild its version;
    a file before a gap in the versions is not part of this history."""
    _cleaned_up(log, checkpoint=3)
    assert [h["version"] for h in read_history(log.store)] == [4, 3, 2]
    log.store.delete_log_file(commit_name(3))  # 2.json is now cut off by a gap
    assert [h["version"] for h in read_history(log.store)] == [4]


def test_history_uses_in_commit_timestamps(log: LogWriter) -> None:
    log.create()
    log.commit(adds=[add_row("a.parquet")], info={"operation": "WRITE", "inCommitTimestamp": 42})
    assert read_history(log.store, limit=1)[0]["timestamp"] == 42


def test_history_of_missing_table(store) -> None:
    with pytest.raises(TableNotFoundError):
        read_history(store)


@pytest.mark.parametrize("bad", ["garbage", "2024-13-45", float("nan"), float("inf")])
def test_unparseable_timestamp_is_a_time_travel_error(bad) -> None:
    from deltatx.errors import TimeTravelError
    from deltatx.txnlog.history import to_timestamp_ms

    with pytest.raises(TimeTravelError):
        to_timestamp_ms(bad)
    with pytest.raises(ValueError):  # TimeTravelError stays a ValueError for older callers
        to_timestamp_ms(bad)


def test_timestamps_that_parse_still_do() -> None:
    from deltatx.txnlog.history import to_timestamp_ms

    assert to_timestamp_ms("1970-01-01T00:00:01Z") == 1000
    assert to_timestamp_ms(1234.9) == 1234


def test_non_integer_ict_enablement_version_is_an_invalid_property() -> None:
    from deltatx.errors import InvalidPropertyError
    from deltatx.txnlog.history import ICT_ENABLED, ICT_ENABLEMENT_VERSION, ict_enablement_version

    assert ict_enablement_version({ICT_ENABLED: "true", ICT_ENABLEMENT_VERSION: "3"}) == 3
    assert ict_enablement_version({ICT_ENABLED: "true"}) == 0
    assert ict_enablement_version({ICT_ENABLED: "false", ICT_ENABLEMENT_VERSION: "x"}) is None
    with pytest.raises(InvalidPropertyError, match="inCommitTimestampEnablementVersion"):
        ict_enablement_version({ICT_ENABLED: "true", ICT_ENABLEMENT_VERSION: "three"})
