"""VACUUM on real local tables: dry run vs real run, the retention check, recent tombstones,
orphans of failed writes, hidden entries, and the protocol check.

File ages are set with ``os.utime`` (no sleeping): a file is "old" when its mtime is in the past.
"""

from __future__ import annotations

import os
import time

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tablefiles import age_files, data_files

import deltatx
from deltatx import errors

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32())])
HOUR = 3600


def rows(ids: list[int], part: int) -> pa.Table:
    return pa.table({"id": ids, "part": [part] * len(ids)}, schema=SCHEMA)




def age(uri: str, relative: list[str] | set[str], hours: float) -> None:
    age_files(uri, hours, relative)


def live_paths(t: deltatx.Table) -> set[str]:
    return set(t.files()["path"].to_pylist())


@pytest.fixture
def rewritten(table_uri):
    """A table whose first two files were replaced by an overwrite (their tombstones are fresh)."""
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    t.append(rows([1, 2], 1))
    t.append(rows([3], 2))
    old = live_paths(t)
    t.overwrite(rows([10, 11], 1))
    return t, old


def test_dry_run_lists_and_real_run_deletes(rewritten, table_uri):
    t, old = rewritten
    age(table_uri, data_files(table_uri), 10)
    listed = t.vacuum(retention_hours=0, dry_run=True, enforce_retention_duration=False)
    assert set(listed) == old
    assert listed == sorted(listed)
    assert old <= data_files(table_uri), "a dry run deletes nothing"

    deleted = t.vacuum(retention_hours=0, enforce_retention_duration=False)
    assert deleted == listed
    assert data_files(table_uri) == live_paths(t)
    assert sorted(t.to_arrow()["id"].to_pylist()) == [10, 11]
    assert t.vacuum(retention_hours=0, enforce_retention_duration=False) == []


def test_recent_tombstones_keep_old_files(rewritten, table_uri):
    """A file written long ago but removed a moment ago is still needed for time travel."""
    t, old = rewritten
    age(table_uri, data_files(table_uri), 100)
    assert t.vacuum(retention_hours=1, enforce_retention_duration=False) == []
    assert old <= data_files(table_uri)
    assert sorted(deltatx.Table(table_uri, version=2).to_arrow()["id"].to_pylist()) == [1, 2, 3]


def test_young_unreferenced_files_are_kept(rewritten, table_uri):
    t, old = rewritten
    assert t.vacuum(retention_hours=1, enforce_retention_duration=False) == []
    assert old <= data_files(table_uri)


def test_retention_shorter_than_table_setting_is_refused(rewritten, table_uri):
    t, old = rewritten
    with pytest.raises(errors.VacuumRetentionError, match="enforce_retention_duration=False"):
        t.vacuum(retention_hours=1)
    with pytest.raises(errors.VacuumRetentionError):
        t.vacuum(retention_hours=-1, enforce_retention_duration=False)
    age(table_uri, old, 200)
    assert t.vacuum(dry_run=True) == [], "tombstones are younger than the default week"


def test_table_retention_property_is_the_default(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, properties={"delta.deletedFileRetentionDuration": "interval 1 hours"})
    t.append(rows([1], 0))
    first = live_paths(t)
    t.overwrite(rows([2], 0))
    age(table_uri, data_files(table_uri), 5)
    assert t.vacuum(dry_run=True) == [], "the tombstone is younger than 1 hour"
    # a retention ≥ the table's is accepted without the override
    assert t.vacuum(retention_hours=2, dry_run=True) == []
    orphan = "part-99999-orphan-c000.snappy.parquet"
    pq.write_table(pa.table({"id": [5]}), os.path.join(table_uri, orphan))
    age(table_uri, [orphan], 5)
    assert t.vacuum() == [orphan]
    assert first <= data_files(table_uri)


def test_orphans_of_failed_writes_are_removed_once_old(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    t.append(rows([1, 2, 3], 1))
    # a writer that crashed before its commit left data files behind
    os.makedirs(os.path.join(table_uri, "part=1"), exist_ok=True)
    os.makedirs(os.path.join(table_uri, "part=7"), exist_ok=True)
    stale = ["part=1/part-00000-crashed-c000.snappy.parquet", "part=7/part-00000-crashed-c000.snappy.parquet"]
    fresh = "part=1/part-00001-running-c000.snappy.parquet"
    for rel in stale + [fresh]:
        pq.write_table(pa.table({"id": [0]}), os.path.join(table_uri, rel))
    age(table_uri, stale, 200)
    age(table_uri, live_paths(t), 200)
    deleted = t.vacuum()
    assert deleted == sorted(stale)
    remaining = data_files(table_uri)
    assert fresh in remaining and not (set(stale) & remaining)
    assert live_paths(t) <= remaining
    assert sorted(t.to_arrow()["id"].to_pylist()) == [1, 2, 3]


def test_hidden_entries_are_never_touched(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    t.append(rows([1], 1))
    hidden = ["_tmp/stale.parquet", ".hidden.parquet", "part=1/.part-0.crc", "part=1/_SUCCESS"]
    vacuumed = ["_change_data/cdc-00000.snappy.parquet"]
    for rel in hidden + vacuumed:
        os.makedirs(os.path.dirname(os.path.join(table_uri, rel)), exist_ok=True)
        with open(os.path.join(table_uri, rel), "wb") as fh:
            fh.write(b"x")
    age(table_uri, hidden + vacuumed, 1000)
    assert t.vacuum() == vacuumed
    assert set(hidden) <= data_files(table_uri)
    assert os.listdir(os.path.join(table_uri, "_delta_log")), "the log is never vacuumed"


def test_a_uniform_tables_iceberg_metadata_is_never_vacuumed(table_uri):
    """With Iceberg in delta.universalFormat.enabledFormats, ``metadata/`` holds the Iceberg
    metadata written beside the data; Delta's VACUUM skips that folder (not on other tables)."""
    t = deltatx.create_table(table_uri, SCHEMA, properties={
        "delta.columnMapping.mode": "name", "delta.enableIcebergCompatV2": "true",
        "delta.universalFormat.enabledFormats": "iceberg"})
    t.append(rows([1], 1))
    iceberg = ["metadata/v1.metadata.json", "metadata/snap-1-1-abc.avro", "metadata/version-hint.text"]
    for rel in iceberg + ["orphan.parquet"]:
        os.makedirs(os.path.dirname(os.path.join(table_uri, rel)), exist_ok=True)
        with open(os.path.join(table_uri, rel), "wb") as fh:
            fh.write(b"x")
    age(table_uri, iceberg + ["orphan.parquet"], 1000)
    assert t.vacuum(dry_run=True) == ["orphan.parquet"]
    t.set_properties({"delta.universalFormat.enabledFormats": ""})
    assert t.vacuum(dry_run=True) == sorted(iceberg + ["orphan.parquet"])


def test_a_live_file_named_by_an_absolute_path_is_kept(table_uri):
    """An add path may be an absolute path without a scheme (an RFC 2396 URI reference): VACUUM
    must match it to the listed file, as Delta relativizes it, or it deletes live data."""
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(rows([1, 2], 1))
    log = os.path.join(table_uri, "_delta_log", f"{1:020d}.json")
    lines = [orjson.loads(line) for line in open(log, "rb").read().splitlines()]
    for action in lines:
        if "add" in action:
            action["add"]["path"] = os.path.join(os.path.abspath(table_uri), action["add"]["path"])
    with open(log, "wb") as fh:
        fh.write(b"\n".join(orjson.dumps(a) for a in lines) + b"\n")
    age(table_uri, data_files(table_uri), 1000)
    t = deltatx.Table(table_uri)
    assert t.vacuum(dry_run=True) == []
    t.vacuum()
    assert sorted(t.to_arrow()["id"].to_pylist()) == [1, 2]


@pytest.mark.parametrize("opened_through_link", [True, False])
def test_an_absolute_path_through_a_symlink_matches_the_listed_file(tmp_path, opened_through_link):
    """The add names the file by one spelling of the root, the table is opened by another (a
    symlink): it is the same live file, which VACUUM must keep."""
    real = tmp_path / "real"
    link = tmp_path / "link"
    t = deltatx.create_table(str(real), SCHEMA)
    t.append(rows([1, 2], 1))
    os.symlink(real, link)
    named_by = link if not opened_through_link else real
    log = os.path.join(real, "_delta_log", f"{1:020d}.json")
    lines = [orjson.loads(line) for line in open(log, "rb").read().splitlines()]
    for action in lines:
        if "add" in action:
            action["add"]["path"] = os.path.join(str(named_by), action["add"]["path"])
    with open(log, "wb") as fh:
        fh.write(b"\n".join(orjson.dumps(a) for a in lines) + b"\n")
    age(str(real), data_files(str(real)), 1000)
    t = deltatx.Table(str(link if opened_through_link else real))
    assert t.vacuum(dry_run=True) == []
    t.vacuum()
    assert sorted(t.to_arrow()["id"].to_pylist()) == [1, 2]


def test_underscore_partition_folders_are_vacuumed(table_uri):
    schema = pa.schema([("id", pa.int64()), ("_p", pa.string())])
    t = deltatx.create_table(table_uri, schema, partition_by=["_p"])
    t.append(pa.table({"id": [1], "_p": ["a"]}, schema=schema))
    first = live_paths(t)
    t.overwrite(pa.table({"id": [2], "_p": ["a"]}, schema=schema))
    age(table_uri, data_files(table_uri), 10)
    assert set(t.vacuum(retention_hours=0, enforce_retention_duration=False)) == first
    assert [r["id"] for r in t.to_arrow().to_pylist()] == [2]


def test_vacuum_refuses_unsupported_writer_features(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(rows([1], 0))
    protocol = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["someFutureFeature"]}}
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "UPGRADE PROTOCOL"}}
    with open(os.path.join(table_uri, "_delta_log", f"{2:020d}.json"), "wb") as fh:
        fh.write(orjson.dumps(info) + b"\n" + orjson.dumps(protocol) + b"\n")
    t.refresh()
    with pytest.raises(errors.UnsupportedFeatureError):
        t.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True)


def test_time_travel_table_cannot_vacuum(rewritten, table_uri):
    t, _ = rewritten
    with pytest.raises(errors.DeltaTxError, match="latest version"):
        deltatx.Table(table_uri, version=1).vacuum()


def test_vacuum_in_memory_store(memory_uri, monkeypatch):
    from deltatx.tables.ops import vacuum as vacuum_module

    t = deltatx.create_table(memory_uri, SCHEMA)
    t.append(rows([1], 0))
    first = live_paths(t)
    t.overwrite(rows([2], 0))
    assert t.vacuum(retention_hours=1, enforce_retention_duration=False) == []
    real_now = vacuum_module.now_ms
    monkeypatch.setattr(vacuum_module, "now_ms", lambda: real_now() + 2 * HOUR * 1000)
    assert t.vacuum(retention_hours=1, enforce_retention_duration=False) == sorted(first)
    assert [r["id"] for r in t.to_arrow().to_pylist()] == [2]


# --------------------------------------------------------------------------------------------
# The log records a VACUUM, as Delta and delta-rs do
# --------------------------------------------------------------------------------------------


def test_a_vacuum_is_recorded_as_vacuum_start_and_vacuum_end_commits(rewritten, table_uri):
    t, old = rewritten
    age(table_uri, data_files(table_uri), 10)
    sizes = sum(os.path.getsize(os.path.join(table_uri, p)) for p in old)
    before = t.version
    t.vacuum(retention_hours=0, dry_run=True, enforce_retention_duration=False)
    assert deltatx.Table(table_uri).version == before, "a dry run records nothing"

    t.vacuum(retention_hours=0, enforce_retention_duration=False)
    assert t.version == before + 2
    end, start = t.history(limit=2)
    assert (start["version"], start["operation"]) == (before + 1, "VACUUM START")
    assert start["operationParameters"] == {"retentionCheckEnabled": "false", "specifiedRetentionMillis": "0",
                                            "defaultRetentionMillis": str(7 * 24 * HOUR * 1000)}
    assert start["operationMetrics"] == {"numFilesToDelete": str(len(old)), "sizeOfDataToDelete": str(sizes)}
    assert (end["version"], end["operation"]) == (before + 2, "VACUUM END")
    assert end["operationParameters"] == {"status": "COMPLETED"}
    # Delta counts the folders it looked at, the root included: part=1, part=2 and the root
    assert end["operationMetrics"] == {"numDeletedFiles": str(len(old)), "numVacuumedDirectories": "3"}
    assert start["isBlindAppend"] is False and start["isolationLevel"] == "SnapshotIsolation"
    raw = [orjson.loads(line) for line in
           open(os.path.join(table_uri, "_delta_log", f"{before + 1:020d}.json"), "rb").read().splitlines()]
    assert [list(action) for action in raw] == [["commitInfo"]], "the record holds its commitInfo only"

    from deltalake import DeltaTable

    ops = [h["operation"] for h in DeltaTable(table_uri).history(2)]
    assert ops == ["VACUUM END", "VACUUM START"]  # another client reads the records
    assert sorted(t.to_arrow()["id"].to_pylist()) == [10, 11]


def test_the_table_retention_is_recorded_without_a_specified_one(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, properties={"delta.deletedFileRetentionDuration": "interval 2 hours"})
    t.append(rows([1], 1))
    t.vacuum()
    start = t.history(limit=2)[1]
    assert start["operationParameters"] == {"retentionCheckEnabled": "true", "defaultRetentionMillis": str(2 * HOUR * 1000)}
    assert start["operationMetrics"] == {"numFilesToDelete": "0", "sizeOfDataToDelete": "0"}


def test_a_failed_deletion_is_recorded_as_failed_and_raised(rewritten, table_uri, monkeypatch):
    t, old = rewritten
    age(table_uri, data_files(table_uri), 10)

    def broken(relative):
        raise PermissionError("read-only bucket")

    monkeypatch.setattr(t._store, "delete_files", broken)
    with pytest.raises(PermissionError, match="read-only bucket"):
        t.vacuum(retention_hours=0, enforce_retention_duration=False)
    end = deltatx.Table(table_uri).history(limit=1)[0]
    assert end["operation"] == "VACUUM END" and end["operationParameters"] == {"status": "FAILED"}
    assert old <= data_files(table_uri)


def test_a_vacuum_record_never_conflicts_with_a_concurrent_write(rewritten, table_uri):
    """The records change no data: a writer that committed meanwhile is rebased over, not refused."""
    t, old = rewritten
    age(table_uri, data_files(table_uri), 10)
    tx = deltatx.Table(table_uri).transaction()  # reads the version before the VACUUM
    t.vacuum(retention_hours=0, enforce_retention_duration=False)
    tx.delete(where="id = 10")  # its files are written after the VACUUM (retention 0 spares nothing)
    result = tx.commit()
    assert result.version == t.version + 1
    assert sorted(deltatx.Table(table_uri).to_arrow()["id"].to_pylist()) == [11]


def test_record_false_deletes_without_the_records(rewritten, table_uri):
    t, old = rewritten
    age(table_uri, data_files(table_uri), 10)
    before = t.version
    assert set(t.vacuum(retention_hours=0, enforce_retention_duration=False, record=False)) == old
    assert deltatx.Table(table_uri).version == before and data_files(table_uri) == live_paths(t)


def _set_mtime(path: str, hours_ago: float) -> None:
    when = time.time() - hours_ago * HOUR
    os.utime(path, (when, when))


def test_empty_partition_folders_are_removed_once_old(table_uri, monkeypatch):
    """Delta's VACUUM removes empty folders; a young one (a writer may be about to fill it), a
    hidden one and one that still holds a file stay."""
    from deltatx.tables.ops import vacuum

    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    t.append(pa.concat_tables([rows([1], 1), rows([2], 2)]))
    t.delete("part = 2")
    os.makedirs(os.path.join(table_uri, "_tool", "inner"))    # hidden
    os.makedirs(os.path.join(table_uri, "part=4", "sub=1"))   # empty, nested
    later = time.time() + 10 * 24 * HOUR  # VACUUM runs 10 days on: the tombstone is old then
    monkeypatch.setattr(vacuum, "now_ms", lambda: later * 1000)
    os.makedirs(os.path.join(table_uri, "part=3"))            # empty, made just before that VACUUM
    os.utime(os.path.join(table_uri, "part=3"), (later, later))

    t.vacuum()
    assert not os.path.exists(os.path.join(table_uri, "part=2")), "emptied by this VACUUM and old"
    assert not os.path.exists(os.path.join(table_uri, "part=4")), "empty below, removed deepest first"
    assert os.path.isdir(os.path.join(table_uri, "part=1")), "holds the live file"
    assert os.path.isdir(os.path.join(table_uri, "part=3")), "young"
    assert os.path.isdir(os.path.join(table_uri, "_tool", "inner")), "hidden"
    assert os.path.isdir(os.path.join(table_uri, "_delta_log"))
    assert t.to_arrow()["id"].to_pylist() == [1]
    end = t.history(limit=1)[0]
    assert end["operationMetrics"]["numVacuumedDirectories"] == "6"  # part=1..4, part=4/sub=1, root

    t.append(rows([5], 2))  # the partition's folder comes back with its next file
    assert sorted(t.to_arrow()["id"].to_pylist()) == [1, 5]


def test_a_dry_run_removes_no_folder(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    t.append(rows([1], 1))
    os.makedirs(os.path.join(table_uri, "part=9"))
    _set_mtime(os.path.join(table_uri, "part=9"), 10 * 24)
    assert t.vacuum(dry_run=True) == []
    assert os.path.isdir(os.path.join(table_uri, "part=9"))


@pytest.mark.parametrize("hours", [1e15, 1e300, 1e308])
def test_a_retention_beyond_the_clock_keeps_everything(rewritten, table_uri, hours):
    """A finite retention longer than int64 ms can say keeps every file (no raw Arrow error),
    and the records write the longest retention a long holds."""
    t, old = rewritten
    age(table_uri, data_files(table_uri), 10 * 24)
    assert t.vacuum(retention_hours=hours, dry_run=True) == []
    assert t.vacuum(retention_hours=hours) == []
    start = t.history(limit=2)[1]
    assert start["operationParameters"]["specifiedRetentionMillis"] == str(2 ** 63 - 1)
    assert all(os.path.exists(os.path.join(table_uri, p)) for p in old)
