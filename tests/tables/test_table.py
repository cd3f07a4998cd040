"""The Table facade end to end: create, append, overwrite (replaceWhere), time travel, history,
properties, idempotent writes, schema evolution, transactions, and bad input."""

from __future__ import annotations

import os
from datetime import datetime, timezone

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import deltatx
from deltatx import errors

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("value", pa.float64()), ("name", pa.string())])


def rows(start: int, n: int, part: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {"id": ids, "part": [part] * n, "value": [i * 0.5 for i in ids], "name": [f"n{i}" for i in ids]},
        schema=SCHEMA,
    )


def sorted_ids(table: pa.Table) -> list[int]:
    return sorted(table["id"].to_pylist())


def log_lines(uri: str, version: int) -> list[dict]:
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        return [orjson.loads(line) for line in fh.read().splitlines() if line.strip()]


def test_create_append_read(any_uri):
    t = deltatx.create_table(any_uri, SCHEMA, partition_by=["part"], name="events", description="d")
    assert t.version == 0
    assert t.partition_columns == ["part"]
    assert t.schema.names == SCHEMA.names
    assert t.metadata.name == "events"
    r1 = t.append(rows(0, 10, 1))
    r2 = t.append(rows(10, 5, 2))
    assert (r1.version, r2.version) == (1, 2)
    assert r1.operation == "WRITE" and r1.attempts == 1
    assert r1.metrics["numOutputRows"] == 10
    data = t.to_arrow()
    assert sorted_ids(data) == list(range(15))
    assert data.schema == deltatx.Table(any_uri).schema
    assert t.files().num_rows == 2
    assert set(t.files().column_names) >= {"path", "partitionValues", "size", "stats"}
    assert sorted_ids(t.to_arrow(where="part = 2")) == list(range(10, 15))
    assert t.to_arrow(where="part = 1 AND id > 7", columns=["id"]).column_names == ["id"]


def test_commit_json_shape(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    t.append(rows(0, 3, 7))
    v0 = log_lines(table_uri, 0)
    assert list(v0[0]) == ["commitInfo"]
    kinds = [next(iter(a)) for a in v0]
    assert kinds == ["commitInfo", "protocol", "metaData"]
    v1 = log_lines(table_uri, 1)
    assert list(v1[0]) == ["commitInfo"]
    ci = v1[0]["commitInfo"]
    for key in ("timestamp", "operation", "operationParameters", "readVersion", "isolationLevel",
                "isBlindAppend", "txnId", "operationMetrics", "engineInfo"):
        assert key in ci, key
    assert ci["isBlindAppend"] is True
    assert ci["readVersion"] == 0
    assert ci["isolationLevel"] == "WriteSerializable"
    assert all(isinstance(v, str) for v in ci["operationParameters"].values())
    add = v1[1]["add"]
    assert add["partitionValues"] == {"part": "7"}
    stats = orjson.loads(add["stats"])
    assert stats["numRecords"] == 3 and stats["minValues"]["id"] == 0 and stats["maxValues"]["id"] == 2
    assert not any("metaData" in a for a in v1), "metaData is written only when it changes"


def test_pandas_and_reader_input(memory_uri):
    t = deltatx.create_table(memory_uri, SCHEMA)
    t.append(rows(0, 3, 1).to_pandas())
    t.append(rows(3, 3, 1).to_reader())
    t.append(pd.DataFrame({"id": [6], "part": [1], "value": [1.0], "name": ["x"]}))
    assert sorted_ids(t.to_arrow()) == list(range(7))


def test_overwrite_all_and_replace_where(any_uri):
    t = deltatx.create_table(any_uri, SCHEMA, partition_by=["part"])
    t.append(rows(0, 10, 1))
    t.append(rows(10, 10, 2))
    r = t.overwrite(rows(100, 3, 2), where="part = 2")
    assert r.metrics["numRemovedFiles"] == 1
    assert sorted_ids(t.to_arrow()) == list(range(10)) + [100, 101, 102]
    with pytest.raises(errors.ReplaceWhereViolationError):
        t.overwrite(rows(200, 3, 3), where="part = 2")
    assert t.version == 3, "a rejected overwrite commits nothing"
    t.overwrite(rows(500, 2, 5))
    assert sorted_ids(t.to_arrow()) == [500, 501]


def test_replace_where_on_data_column_rewrites_only_matching_rows(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(rows(0, 20, 1))
    t.overwrite(rows(5, 3, 1).set_column(2, "value", pa.array([-1.0] * 3)), where="id >= 5 AND id < 8")
    data = t.to_arrow().sort_by("id")
    assert data["id"].to_pylist() == list(range(20))
    assert data.filter(pc.field("value") < 0)["id"].to_pylist() == [5, 6, 7]


def test_time_travel_and_history(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(rows(0, 5, 1))
    t.append(rows(5, 5, 1))
    t.delete(where="id < 3")
    assert sorted_ids(deltatx.Table(table_uri, version=1).to_arrow()) == list(range(5))
    assert sorted_ids(deltatx.Table(table_uri, version=2).to_arrow()) == list(range(10))
    assert sorted_ids(t.to_arrow()) == list(range(3, 10))
    hist = t.history()
    assert [h["version"] for h in hist] == [3, 2, 1, 0]
    assert [h["operation"] for h in hist] == ["DELETE", "WRITE", "WRITE", "CREATE TABLE"]
    assert [h["version"] for h in t.history(limit=2)] == [3, 2]
    ts = hist[1]["timestamp"]
    as_of = deltatx.Table(table_uri, timestamp=datetime.fromtimestamp(ts / 1000, tz=timezone.utc))
    assert as_of.version >= 2
    with pytest.raises(errors.TimeTravelError):
        deltatx.Table(table_uri, version=99)
    with pytest.raises(errors.TimeTravelError):
        deltatx.Table(table_uri, timestamp="1990-01-01T00:00:00Z")
    with pytest.raises(errors.DeltaTxError):
        deltatx.Table(table_uri, version=1).append(rows(0, 1, 1))


def test_delete_and_update(any_uri):
    t = deltatx.create_table(any_uri, SCHEMA, partition_by=["part"])
    t.append(rows(0, 10, 1))
    t.append(rows(10, 10, 2))
    r = t.delete(where="part = 1 AND id >= 5")
    assert r.metrics["numDeletedRows"] == 5
    assert sorted_ids(t.to_arrow()) == list(range(5)) + list(range(10, 20))
    r = t.update(where="id >= 15", set={"value": "value * 2", "name": "'big'"})
    assert r.metrics["numUpdatedRows"] == 5
    data = t.to_arrow(where="id >= 15").sort_by("id")
    assert data["name"].to_pylist() == ["big"] * 5
    assert data["value"].to_pylist() == [i * 1.0 for i in range(15, 20)]
    r = t.delete(where="part = 2")  # partition-only: whole files go without reading them
    assert r.metrics["numDeletedRows"] == 10
    assert sorted_ids(t.to_arrow()) == list(range(5))


def test_update_moves_rows_between_partitions(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    t.append(rows(0, 4, 1))
    t.update(where="id < 2", set={"part": "9"})
    assert sorted_ids(t.to_arrow(where="part = 9")) == [0, 1]
    assert sorted_ids(t.to_arrow(where="part = 1")) == [2, 3]


def test_idempotent_append(memory_uri):
    t = deltatx.create_table(memory_uri, SCHEMA)
    r1 = t.append(rows(0, 2, 1), app_id="job", app_version=1)
    r2 = t.append(rows(0, 2, 1), app_id="job", app_version=1)
    r3 = t.append(rows(2, 2, 1), app_id="job", app_version=0)
    r4 = t.append(rows(4, 2, 1), app_id="job", app_version=2)
    assert not r1.skipped and r2.skipped and r3.skipped and not r4.skipped
    assert t.version == 2
    assert sorted_ids(t.to_arrow()) == [0, 1, 4, 5]
    assert t.snapshot.app_txns["job"].version == 2


def test_schema_merge_and_mismatch(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(rows(0, 2, 1))
    wider = rows(2, 2, 1).append_column("extra", pa.array(["a", "b"]))
    with pytest.raises(errors.SchemaMismatchError):
        t.append(wider)
    assert t.version == 1
    t.append(wider, schema_mode="merge")
    assert t.schema.names == SCHEMA.names + ["extra"]
    data = t.to_arrow().sort_by("id")
    assert data["extra"].to_pylist() == [None, None, "a", "b"]
    with pytest.raises(errors.SchemaMismatchError):
        t.append(pa.table({"id": ["not", "ints"]}))
    assert len(os.listdir(os.path.join(table_uri, "_delta_log"))) == 3, "nothing written on a bad append"


def test_invalid_properties_rejected(table_uri):
    with pytest.raises(errors.InvalidPropertyError):
        deltatx.create_table(table_uri, SCHEMA, properties={"delta.isolationLevel": "Snapshot"})
    assert not os.path.exists(os.path.join(table_uri, "_delta_log", f"{0:020d}.json"))
    t = deltatx.create_table(table_uri, SCHEMA, properties={"delta.checkpointInterval": "5"})
    with pytest.raises(errors.InvalidPropertyError):
        t.set_properties({"delta.checkpointInterval": "zero"})
    with pytest.raises(errors.InvalidPropertyError):
        t.set_properties({"delta.deletedFileRetentionDuration": "interval 1 month"})
    assert t.version == 0
    t.set_properties({"delta.isolationLevel": "Serializable"})
    assert t.refresh().isolation_level is deltatx.IsolationLevel.SERIALIZABLE


def test_create_existing_and_missing(table_uri):
    deltatx.create_table(table_uri, SCHEMA)
    with pytest.raises(errors.TableAlreadyExistsError):
        deltatx.create_table(table_uri, SCHEMA)
    assert deltatx.create_table(table_uri, SCHEMA, exist_ok=True).version == 0
    with pytest.raises(errors.TableNotFoundError):
        deltatx.Table(table_uri + "-nothing-here")
    with pytest.raises(errors.SchemaMismatchError):
        deltatx.create_table(table_uri + "2", SCHEMA, partition_by=["nope"])


def test_checkpoint_every_interval_and_reopen(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, properties={"delta.checkpointInterval": "3"})
    for i in range(7):
        t.append(rows(i * 2, 2, 1))
    log = os.listdir(os.path.join(table_uri, "_delta_log"))
    assert f"{3:020d}.checkpoint.parquet" in log and f"{6:020d}.checkpoint.parquet" in log
    assert "_last_checkpoint" in log
    assert sorted_ids(deltatx.Table(table_uri).to_arrow()) == list(range(14))


def test_transaction_context_manager_commits_and_aborts(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    with t.transaction() as tx:
        tx.append(rows(0, 3, 1))
        tx.append(rows(3, 3, 1))
        assert sorted_ids(tx.read()) == list(range(6)), "a transaction sees its own writes"
        tx.delete(where="id = 0")
    assert t.version == 1
    assert sorted_ids(t.to_arrow()) == list(range(1, 6))
    before = set(os.listdir(table_uri))
    with pytest.raises(RuntimeError):
        with t.transaction() as tx:
            tx.append(rows(100, 3, 1))
            raise RuntimeError("boom")
    assert t.version == 1
    assert set(os.listdir(table_uri)) == before, "an aborted transaction leaves no data files"
    assert deltatx.Table(table_uri).version == 1


def test_lost_race_append_retries(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    tx = t.transaction()
    tx.append(rows(0, 2, 1))
    deltatx.Table(table_uri).append(rows(10, 2, 1))  # wins version 1
    r = tx.commit()
    assert r.version == 2 and r.attempts == 2
    assert sorted_ids(deltatx.Table(table_uri).to_arrow()) == [0, 1, 10, 11]


def test_refresh_sees_other_writers(memory_uri):
    a = deltatx.create_table(memory_uri, SCHEMA)
    b = deltatx.Table(memory_uri)
    b.append(rows(0, 2, 1))
    assert a.version == 0
    assert a.refresh().version == 1
    assert sorted_ids(a.to_arrow()) == [0, 1]


def test_unsafe_store_refuses_commit_unless_single_writer():
    import fsspec
    from fsspec.implementations.memory import MemoryFileSystem

    class PlainStore(MemoryFileSystem):  # a filesystem deltatx knows no put-if-absent for
        protocol = "plainstore"

    fsspec.register_implementation("plainstore", PlainStore, clobber=True)
    with pytest.raises(errors.UnsafeStorageError, match="single_writer"):
        deltatx.create_table("plainstore://bucket/t1", SCHEMA)
    t = deltatx.create_table("plainstore://bucket/t2", SCHEMA, storage_options={"single_writer": True})
    t.append(rows(0, 2, 1))
    assert sorted_ids(deltatx.Table("plainstore://bucket/t2").to_arrow()) == [0, 1]


def test_one_shot_writes_start_at_the_latest_version(tmp_path):
    """A long-lived Table object sees another writer's metadata change before it appends."""
    uri = str(tmp_path / "fresh")
    schema = pa.schema([("id", pa.int64())])
    mine = deltatx.create_table(uri, schema)
    deltatx.Table(uri).set_properties({"delta.appendOnly": "true"})
    result = mine.append(pa.table({"id": [1]}))  # would be MetadataChangedException from version 0
    assert result.read_version == 1 and result.version == 2 and result.attempts == 1


def test_feature_opt_in_upgrades_the_protocol_without_a_metadata_change(tmp_path):
    uri = str(tmp_path / "feature")
    t = deltatx.create_table(uri, pa.schema([("id", pa.int64())]))
    tx = t.transaction()
    tx.append(pa.table({"id": [1]}))
    deltatx.Table(uri).set_properties({"delta.feature.domainMetadata": "supported"})
    result = tx.commit()  # a protocol-only upgrade is adopted by a concurrent blind append
    upgraded = deltatx.Table(uri)
    assert result.version == 2
    assert "domainMetadata" in (upgraded.protocol.writer_features or ())
    assert not any(k.startswith("delta.feature.") for k in upgraded.properties)


def test_a_failed_checkpoint_only_warns_and_the_commit_keeps_its_files(tmp_path, monkeypatch):
    import deltatx.tables.table as table_module
    from deltatx.errors import PostCommitHookWarning

    uri = str(tmp_path / "hook")
    t = deltatx.create_table(uri, pa.schema([("id", pa.int64())]), properties={"delta.checkpointInterval": "1"})

    def broken(store, snapshot):
        raise OSError("disk full while writing the checkpoint")

    monkeypatch.setattr(table_module, "write_checkpoint", broken)
    with pytest.warns(PostCommitHookWarning, match="version 1 is committed"):
        result = t.append(pa.table({"id": [1, 2]}))
    assert result.version == 1
    reopened = deltatx.Table(uri)
    assert reopened.version == 1 and reopened.to_arrow()["id"].to_pylist() == [1, 2]
