"""Transaction, history and metrics details a QA pass found: a finished transaction writes no
file, a checkpoint of an old version never points readers back, history timestamps follow the
rule time travel follows, RESTORE refuses a timestamp after the last commit, and MERGE reports
Delta's metric names for deletion vectors and change files."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import DeltaTxError, InvalidArgumentError, TimeTravelError

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


def _rows(ids):
    return pa.table({"id": ids, "v": [i * 10 for i in ids]}, schema=SCHEMA)


def _parquet(uri: str) -> list[str]:
    return sorted(f for f in os.listdir(uri) if f.endswith(".parquet"))


@pytest.mark.parametrize("end", ["commit", "abort"])
def test_a_finished_transaction_writes_no_file(tmp_path, end):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA)
    tx = t.transaction()
    tx.append(_rows([1]))
    getattr(tx, end)()
    before = _parquet(uri)
    with pytest.raises(DeltaTxError, match="start a new one"):
        tx.append(_rows([2]))
    assert _parquet(uri) == before


def test_max_attempts_must_be_a_positive_integer(tmp_path):
    t = deltatx.create_table(str(tmp_path / "t"), SCHEMA)
    for bad in (0, -1, "3", True):
        with pytest.raises(InvalidArgumentError, match="max_attempts"):
            t.transaction(max_attempts=bad)


def test_a_checkpoint_of_an_old_version_never_points_readers_back(tmp_path):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA)
    for i in range(5):
        t.append(_rows([i]))
    t.checkpoint()  # version 5
    deltatx.Table(uri, version=1).checkpoint()
    with open(os.path.join(uri, "_delta_log", "_last_checkpoint"), "rb") as fh:
        assert orjson.loads(fh.read())["version"] == 5
    assert os.path.exists(os.path.join(uri, "_delta_log", f"{1:020d}.checkpoint.parquet"))
    assert deltatx.Table(uri).version == 5


def test_history_timestamps_travel_back_to_their_version_after_ict_is_turned_off(tmp_path):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA, properties={"delta.enableInCommitTimestamps": "true"})
    t.append(_rows([1]))
    t.set_properties({"delta.enableInCommitTimestamps": "false"})
    t.append(_rows([2]))
    log = os.path.join(uri, "_delta_log")
    for name in os.listdir(log):  # copied elsewhere a day later: file times move, ICTs do not
        if name.endswith(".json"):
            st = os.stat(os.path.join(log, name))
            os.utime(os.path.join(log, name), (st.st_atime + 86400, st.st_mtime + 86400))
    history = deltatx.Table(uri).history()
    assert [h["timestamp"] for h in history] == sorted((h["timestamp"] for h in history), reverse=True)
    for h in history:
        assert deltatx.Table(uri, timestamp=h["timestamp"]).version == h["version"]


def test_restore_refuses_a_timestamp_after_the_last_commit(tmp_path):
    t = deltatx.create_table(str(tmp_path / "t"), SCHEMA)
    t.append(_rows([1]))
    with pytest.raises(TimeTravelError, match="after the latest version"):
        t.restore(timestamp="2099-01-01T00:00:00Z")
    assert t.refresh().version == 1


def test_time_travel_refuses_a_timestamp_after_the_last_commit(tmp_path):
    """As Delta's reads (DELTA_TIMESTAMP_GREATER_THAN_COMMIT): the version at a later time is not
    known yet, a commit may still land before it. The last commit's own time is fine."""
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA)
    t.append(_rows([1]))
    last = t.history(1)[0]["timestamp"]
    assert deltatx.Table(uri, timestamp=last).version == 1
    with pytest.raises(TimeTravelError, match=r"cannot time travel: the provided timestamp \(2099-01-01T00:00:00"):
        deltatx.Table(uri, timestamp="2099-01-01T00:00:00Z")
    with pytest.raises(TimeTravelError, match="after the latest version"):
        deltatx.Table(uri, timestamp=last + 1)


def test_merge_on_a_dv_and_change_feed_table_reports_deltas_metric_names(tmp_path):
    t = deltatx.create_table(str(tmp_path / "t"), SCHEMA, properties={
        "delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"})
    t.append(_rows([1, 2]))
    t.append(_rows([3]))
    source = pa.table({"id": [1, 3], "v": [0, 0]}, schema=SCHEMA)
    metrics = t.merge(source, on="t.id = s.id").when_matched_delete().execute().metrics
    assert metrics["numTargetRowsDeleted"] == 2
    assert metrics["numTargetDeletionVectorsAdded"] == 1 and "numDeletionVectorsAdded" not in metrics
    assert metrics["numTargetFilesRemoved"] == 1 and metrics["numTargetBytesRemoved"] > 0  # file of id 3
    committed = t.history(1)[0]["operationMetrics"]
    assert committed["numTargetChangeFilesAdded"] == "1"
    assert committed["numTargetDeletionVectorsAdded"] == "1"


def test_a_multi_operation_commit_counts_its_own_files(tmp_path):
    """An append and an UPDATE of the appended row: one file reaches the commit, none is
    removed (the first written file was replaced inside the transaction)."""
    t = deltatx.create_table(str(tmp_path / "t"), SCHEMA)
    with t.transaction() as tx:
        tx.append(_rows([1]))
        tx.update(where="id = 1", set={"v": "0"})
    h = t.history(1)[0]
    assert h["operation"] == "TRANSACTION"
    assert h["operationMetrics"]["numAddedFiles"] == "1" and h["operationMetrics"]["numRemovedFiles"] == "0"
    assert "numFiles" not in h["operationMetrics"]


def test_conflict_messages_name_the_winner_and_what_it_changed(tmp_path):
    """Every conflict names the winning commit's operation (a retry limit named the loser's own)
    and, where both sides changed the protocol or the metadata, what the winner changed."""
    from deltatx.errors import CommitRetriesExceededError, MetadataChangedException, ProtocolChangedException

    schema = pa.schema([("id", pa.int64())])
    t = deltatx.create_table(str(tmp_path / "t"), schema)
    t.append(pa.table({"id": [1, 2]}))
    loser = t.transaction(max_attempts=1)
    loser.delete(where="id = 1")
    deltatx.Table(t.uri).append(pa.table({"id": [3]}))
    with pytest.raises(CommitRetriesExceededError) as info:
        loser.commit()
    assert info.value.operation == "WRITE" and "version 2 (WRITE)" in str(info.value)

    a, b = t.transaction(), t.transaction()
    a.add_columns(pa.field("x", pa.string()))
    b.set_properties({"delta.appendOnly": "true"})
    b.commit()
    with pytest.raises(MetadataChangedException, match="delta.appendOnly set to 'true'"):
        a.commit()

    a, b = deltatx.Table(t.uri).transaction(), deltatx.Table(t.uri).transaction()
    a.set_properties({"delta.enableDeletionVectors": "true"})
    b.set_properties({"delta.enableChangeDataFeed": "true"})
    b.commit()
    with pytest.raises(ProtocolChangedException, match="changeDataFeed") as info:
        a.commit()
    assert "changeDataFeed" in (info.value.conflict or "")
