"""In-commit timestamps: every commit carries a strictly increasing ``inCommitTimestamp`` in its first
action; enabling later records where the feature starts; history and time travel use them."""

from __future__ import annotations

import os
import time

import orjson
import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import InvalidPropertyError
from deltatx.txnlog.in_commit_timestamps import ENABLEMENT_TIMESTAMP, ENABLEMENT_VERSION
from deltatx.txnlog.snapshot import load_snapshot
from deltatx.txnlog.store import commit_name

SCHEMA = pa.schema([("id", pa.int64())])
ICT = {"delta.enableInCommitTimestamps": "true"}


class Clock:
    """A wall clock the test moves by hand (epoch ms); replaces ``time.time``."""

    def __init__(self, now_ms: int):
        self.now_ms = now_ms

    def __call__(self) -> float:
        return self.now_ms / 1000


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock(1_800_000_000_000)
    monkeypatch.setattr(time, "time", c)
    return c


def lines(uri: str, version: int) -> list[dict]:
    with open(os.path.join(uri, "_delta_log", commit_name(version)), "rb") as fh:
        return [orjson.loads(line) for line in fh.read().splitlines() if line.strip()]


def ict(uri: str, version: int) -> int:
    first = lines(uri, version)[0]
    assert list(first) == ["commitInfo"], "commitInfo must be the first action"
    return first["commitInfo"]["inCommitTimestamp"]


def set_mtime(uri: str, version: int, ms: int) -> None:
    os.utime(os.path.join(uri, "_delta_log", commit_name(version)), ns=(ms * 1_000_000, ms * 1_000_000))


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": list(ids)}, schema=SCHEMA)


def test_created_with_ict_every_commit_has_it_first_and_increasing(table_uri, clock):
    table = deltatx.create_table(table_uri, SCHEMA, properties=ICT)
    assert "inCommitTimestamp" in table.protocol.writer_features
    assert table.protocol.min_writer_version == 7 and table.protocol.min_reader_version == 1
    assert ict(table_uri, 0) == clock.now_ms
    assert ENABLEMENT_VERSION not in table.properties  # no commits before it: nothing to record
    clock.now_ms += 50
    table.append(rows(1))
    assert ict(table_uri, 1) == clock.now_ms
    clock.now_ms -= 10_000  # the writer's clock goes back: the timestamp still moves forward
    table.delete("id = 1")
    assert ict(table_uri, 2) == ict(table_uri, 1) + 1
    clock.now_ms -= 10_000
    table.append(rows(2))
    assert ict(table_uri, 3) == ict(table_uri, 2) + 1
    assert table.snapshot.timestamp_ms == ict(table_uri, 3)
    assert [h["timestamp"] for h in table.history()] == [ict(table_uri, v) for v in (3, 2, 1, 0)]


def test_enabling_later_records_version_and_timestamp(table_uri, clock):
    table = deltatx.create_table(table_uri, SCHEMA)
    table.append(rows(1))
    assert "inCommitTimestamp" not in lines(table_uri, 1)[0]["commitInfo"]
    # the previous commit file looks newer than the writer's clock: the enabling timestamp must
    # still be later than it (requirement 5)
    set_mtime(table_uri, 1, clock.now_ms + 60_000)
    result = table.set_properties({"delta.enableInCommitTimestamps": True})
    assert result.version == 2
    enabled_at = ict(table_uri, 2)
    assert enabled_at == clock.now_ms + 60_001
    metadata = next(line["metaData"] for line in lines(table_uri, 2) if "metaData" in line)
    assert metadata["configuration"][ENABLEMENT_VERSION] == "2"
    assert metadata["configuration"][ENABLEMENT_TIMESTAMP] == str(enabled_at)
    protocol = next(line["protocol"] for line in lines(table_uri, 2) if "protocol" in line)
    assert "inCommitTimestamp" in protocol["writerFeatures"]
    table.append(rows(2))
    assert ict(table_uri, 3) == enabled_at + 1
    # a fresh load agrees: the snapshot's commit timestamp is the in-commit one
    assert load_snapshot(table.store).timestamp_ms == ict(table_uri, 3)


def test_history_and_time_travel_across_enablement(table_uri, clock):
    """Before the enablement version the file times count, from it on the in-commit timestamps —
    even when the later files' modification times say something else."""
    table = deltatx.create_table(table_uri, SCHEMA)
    table.append(rows(1))
    for version, ms in ((0, 1_000_000), (1, 2_000_000)):
        set_mtime(table_uri, version, ms)
    clock.now_ms = 5_000_000
    table.set_properties({"delta.enableInCommitTimestamps": "true"})  # v2 at ICT 5_000_000
    clock.now_ms = 6_000_000
    table.append(rows(2))  # v3
    for version in (2, 3):  # the file times of ICT commits are meaningless (e.g. a copied log)
        set_mtime(table_uri, version, 1_500_000)
    history = {h["version"]: h["timestamp"] for h in deltatx.Table(table_uri).history()}
    assert history == {0: 1_000_000, 1: 2_000_000, 2: 5_000_000, 3: 6_000_000}
    expected = {999_999: None, 1_000_000: 0, 1_999_999: 0, 2_000_000: 1, 4_999_999: 1, 5_000_000: 2,
                5_999_999: 2, 6_000_000: 3, 9_000_000: None}  # after the last commit: refused, as Delta
    for ts, version in expected.items():
        if version is None:
            with pytest.raises(deltatx.errors.TimeTravelError):
                deltatx.Table(table_uri, timestamp=ts)
        else:
            assert deltatx.Table(table_uri, timestamp=ts).version == version, ts
    assert sorted(deltatx.Table(table_uri, timestamp=5_500_000).to_arrow()["id"].to_pylist()) == [1]


def test_a_rebased_commit_follows_the_winner(table_uri, clock):
    table = deltatx.create_table(table_uri, SCHEMA, properties=ICT)
    loser = deltatx.Table(table_uri).transaction()
    loser.append(rows(1))
    clock.now_ms += 1_000
    deltatx.Table(table_uri).append(rows(2))  # v1 wins at now + 1000
    clock.now_ms -= 5_000  # the loser tries later, but on a slower clock
    result = loser.commit()
    assert result.version == 2 and result.attempts == 2
    assert ict(table_uri, 2) == ict(table_uri, 1) + 1
    assert deltatx.Table(table_uri).snapshot.timestamp_ms == ict(table_uri, 2)


def test_enabling_commit_that_loses_the_race_records_its_final_version(table_uri, clock):
    table = deltatx.create_table(table_uri, SCHEMA)
    enabling = deltatx.Table(table_uri).transaction()
    enabling.set_properties(ICT)
    deltatx.Table(table_uri).append(rows(1))  # v1: a blind append, no conflict with a property change
    set_mtime(table_uri, 1, clock.now_ms + 10_000)
    assert enabling.commit().version == 2
    config = deltatx.Table(table_uri).properties
    assert config[ENABLEMENT_VERSION] == "2"
    assert config[ENABLEMENT_TIMESTAMP] == str(ict(table_uri, 2))
    assert ict(table_uri, 2) == clock.now_ms + 10_001
    assert table.refresh().version == 2


def test_a_winner_enabling_ict_makes_the_rebased_commit_stamp_too(table_uri, clock):
    deltatx.create_table(table_uri, SCHEMA)
    appender = deltatx.Table(table_uri).transaction()
    appender.append(rows(1))
    deltatx.Table(table_uri).set_properties(ICT)  # v1 enables (an allowed concurrent change)
    assert appender.commit().version == 2
    assert ict(table_uri, 2) == ict(table_uri, 1) + 1  # the clock stood still: winner + 1


def test_bad_enable_value_is_refused_and_writes_nothing(table_uri):
    table = deltatx.create_table(table_uri, SCHEMA)
    with pytest.raises(InvalidPropertyError, match="delta.enableInCommitTimestamps"):
        table.set_properties({"delta.enableInCommitTimestamps": "sometimes"})
    assert deltatx.Table(table_uri).version == 0
    assert sorted(os.listdir(os.path.join(table_uri, "_delta_log"))) == [commit_name(0)]
    with pytest.raises(InvalidPropertyError):
        deltatx.create_table(table_uri + "2", SCHEMA, properties={"delta.enableInCommitTimestamps": "yes"})
    assert not os.path.exists(table_uri + "2")


def test_checkpointed_table_keeps_the_in_commit_timestamp(table_uri, clock):
    table = deltatx.create_table(table_uri, SCHEMA, properties=ICT)
    clock.now_ms += 7
    table.append(rows(1))
    table.checkpoint()
    set_mtime(table_uri, 1, 1)  # the file time must not matter
    assert load_snapshot(table.store).timestamp_ms == ict(table_uri, 1)
