"""RESTORE by version and by timestamp: data, metadata, the commit it writes, and a restore
whose files VACUUM already deleted."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pytest
from tablefiles import age_files

import deltatx
from deltatx import errors

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32())])


def rows(ids: list[int], part: int) -> pa.Table:
    return pa.table({"id": ids, "part": [part] * len(ids)}, schema=SCHEMA)


def ids(t: deltatx.Table) -> list[int]:
    return sorted(t.to_arrow()["id"].to_pylist())


def commit_actions(uri: str, version: int) -> list[dict]:
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        return [orjson.loads(line) for line in fh.read().splitlines() if line.strip()]


@pytest.fixture
def history(table_uri):
    """v1: parts 1+2, v2: more in part 2, v3: delete part 1, v4: update ids of part 2."""
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    t.append(pa.concat_tables([rows([1, 2], 1), rows([3], 2)]))
    t.append(rows([4, 5], 2))
    t.delete("part = 1")
    t.update("part = 2", {"id": "id * 10"})
    assert ids(t) == [30, 40, 50]
    return t


def test_restore_by_version(history, table_uri):
    t = history
    before = t.version
    result = t.restore(version=1)
    assert result.version == before + 1
    assert result.operation == "RESTORE"
    assert ids(t) == [1, 2, 3]
    assert ids(deltatx.Table(table_uri)) == [1, 2, 3]
    assert set(t.files()["path"].to_pylist()) == set(deltatx.Table(table_uri, version=1).files()["path"].to_pylist())
    m = result.metrics
    assert m["numRestoredFiles"] == 2 and m["numOfFilesAfterRestore"] == 2
    assert m["numRemovedFiles"] == 1, "the file the update wrote"
    assert m["tableSizeAfterRestore"] == sum(t.files()["size"].to_pylist())

    actions = commit_actions(table_uri, result.version)
    info = actions[0]["commitInfo"]
    assert info["operation"] == "RESTORE"
    assert orjson.loads(info["operationParameters"]["version"]) == 1
    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    assert adds and removes
    assert all(a["dataChange"] for a in adds) and all(r["dataChange"] for r in removes)
    # time travel to the versions in between still works
    assert ids(deltatx.Table(table_uri, version=3)) == [3, 4, 5]


def test_restore_by_timestamp(history, table_uri):
    t = history
    ts = deltatx.Table(table_uri, version=2).snapshot.timestamp_ms
    result = t.restore(timestamp=ts)
    assert ids(t) == [1, 2, 3, 4, 5]
    info = commit_actions(table_uri, result.version)[0]["commitInfo"]
    assert orjson.loads(info["operationParameters"]["timestamp"]) == ts
    assert orjson.loads(info["operationParameters"]["version"]) == 2


def test_restore_brings_back_metadata(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(rows([1], 0))
    t.set_properties({"delta.appendOnly": "false", "custom.key": "x"})
    wide = pa.table({"id": pa.array([2], pa.int64()), "part": pa.array([0], pa.int32()), "extra": ["e"]})
    t.append(wide, schema_mode="merge")
    assert "extra" in t.schema.names
    t.restore(version=1)
    assert t.schema.names == ["id", "part"]
    assert "custom.key" not in t.properties
    assert ids(t) == [1]
    assert t.to_arrow().column_names == ["id", "part"]


def test_restore_current_version_is_refused(history, table_uri):
    """Delta and deltalake require the version to restore to be older than the latest."""
    t = history
    before = t.version
    with pytest.raises(errors.TimeTravelError, match="current version"):
        t.restore(version=before)
    assert deltatx.Table(table_uri).version == before, "nothing was committed"
    assert t.history(limit=1)[0]["operation"] == "UPDATE"


def test_restore_after_vacuum_raises_typed_error(history, table_uri):
    t = history
    age_files(table_uri, 30 * 24)
    deleted = t.vacuum(retention_hours=0, enforce_retention_duration=False)
    assert deleted
    before = t.version
    with pytest.raises(errors.DataFileNotFoundError, match="VACUUM"):
        t.restore(version=1)
    assert deltatx.Table(table_uri).version == before, "nothing was committed"
    assert ids(t) == [30, 40, 50]


def test_restore_bad_arguments(history):
    t = history
    with pytest.raises(errors.TimeTravelError):
        t.restore()
    with pytest.raises(errors.TimeTravelError):
        t.restore(version=t.version + 5)
    with pytest.raises(errors.TimeTravelError):
        t.restore(version=1, timestamp=123)


def test_restore_in_a_transaction_conflicts_with_concurrent_delete(history, table_uri):
    from deltatx.tables.ops.restore import stage_restore

    t = history
    tx = t.transaction()
    stage_restore(tx, version=1)
    deltatx.Table(table_uri).delete("id = 30")
    with pytest.raises(errors.ConcurrentModificationException):
        tx.commit()


def test_restore_inside_a_transaction_with_other_writes(history, table_uri):
    """Restore is a transaction operation too: staged with an append, committed as one version."""
    t = history
    before = t.version
    with t.transaction() as tx:
        tx.restore(version=1)
        tx.append(rows([99], 1))
    assert t.version == before + 1
    assert ids(deltatx.Table(table_uri)) == [1, 2, 3, 99]
    info = commit_actions(table_uri, before + 1)[0]["commitInfo"]
    assert info["operation"] == "TRANSACTION"


def test_restore_inside_a_transaction_needs_one_target(history):
    tx = history.transaction()
    with pytest.raises(errors.TimeTravelError):
        tx.restore()
    tx.abort()


def test_restore_undoes_a_deletion_vector_on_the_same_path(table_uri):
    """A file re-added with a DV has the same path as before: RESTORE must still see them as
    different logical files (path + DV id), remove the DV one and re-add the plain one."""
    from dvtables import add_deletion_vectors

    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(rows(list(range(10)), 0))  # v1: one file
    path = t.files()["path"].to_pylist()[0]
    add_deletion_vectors(table_uri, {path: [1, 3, 8]})  # v2
    t = deltatx.Table(table_uri)
    assert t.version == 2 and len(ids(t)) == 7

    result = t.restore(version=1)
    assert result.version == 3
    assert ids(deltatx.Table(table_uri)) == list(range(10))
    actions = commit_actions(table_uri, 3)
    removes = [a["remove"] for a in actions if "remove" in a]
    adds = [a["add"] for a in actions if "add" in a]
    assert [r["path"] for r in removes] == [path] and removes[0]["deletionVector"]["cardinality"] == 3
    assert [a["path"] for a in adds] == [path] and adds[0].get("deletionVector") is None
    assert result.metrics["numRestoredFiles"] == 1 and result.metrics["numRemovedFiles"] == 1


@pytest.mark.parametrize("version", ["1", 1.0, True])
def test_restore_version_must_be_an_integer(table_uri, version):
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(rows([1], 0))
    with pytest.raises(errors.TimeTravelError, match="integer"):
        t.restore(version=version)
    assert deltatx.Table(table_uri).version == 1


@pytest.mark.parametrize("how", ["conflict", "abort"])
def test_a_restore_that_does_not_commit_deletes_none_of_the_tables_files(table_uri, how):
    """RESTORE re-adds files of an older version: they are the table's (current ones too, on a
    deletion-vector table), never the transaction's own to clean up when it fails."""
    t = deltatx.create_table(table_uri, SCHEMA, properties={"delta.enableDeletionVectors": "true"})
    t.append(rows([1, 2, 3, 4], 0))
    t.delete("id = 1")
    files = {name for name in os.listdir(table_uri) if name.endswith(".parquet")}
    tx = deltatx.Table(table_uri).transaction()
    tx.restore(version=1)
    if how == "conflict":
        deltatx.Table(table_uri).delete("id = 2")
        with pytest.raises(errors.ConcurrentModificationException):
            tx.commit()
    else:
        tx.abort()
    assert files <= {name for name in os.listdir(table_uri) if name.endswith(".parquet")}
    assert ids(deltatx.Table(table_uri)) == ([3, 4] if how == "conflict" else [2, 3, 4])
    assert sorted(deltatx.Table(table_uri, version=1).to_arrow()["id"].to_pylist()) == [1, 2, 3, 4]


def test_restore_whose_deletion_vector_file_was_vacuumed_commits_nothing(table_uri):
    """The old version's DV lives in a file VACUUM removed: committing the re-add would leave a
    latest version no engine reads, so RESTORE fails typed, as for a missing data file."""
    t = deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]), properties={
        "delta.enableDeletionVectors": "true", "deltatx.deletionVectors.inlineMaxBytes": "0"})
    t.append(pa.table({"id": list(range(100))}))
    t.delete(where="id < 5")    # v2: DV file A
    t.delete(where="id < 10")   # v3: DV file B replaces A
    age_files(table_uri, 30 * 24)
    t.vacuum(retention_hours=0, enforce_retention_duration=False)
    before = t.version
    with pytest.raises(errors.DataFileNotFoundError, match="deletion_vector_.*VACUUM"):
        t.restore(version=2)
    latest = deltatx.Table(table_uri)
    assert latest.version == before, "nothing was committed"
    assert sorted(latest.to_arrow()["id"].to_pylist()) == list(range(10, 100))


def test_restore_brings_back_the_clustering_columns(table_uri):
    """Delta's RESTORE rewrites the delta.clustering domain with the restored version's columns."""
    schema = pa.schema([("id", pa.int64()), ("v", pa.int64())])
    t = deltatx.create_table(table_uri, schema, cluster_by=["id"])
    t.append(pa.table({"id": [1, 2], "v": [3, 4]}, schema=schema))   # v1: clustered by id
    t.cluster_by(["v"])
    t.append(pa.table({"id": [5], "v": [6]}, schema=schema))
    t.restore(version=1)
    assert deltatx.Table(table_uri).clustering_columns == ["id"]
    t.cluster_by(["v"])
    t.restore(version=0)
    assert deltatx.Table(table_uri).clustering_columns == ["id"]


def test_restore_to_before_clustering_leaves_no_clustering_columns(table_uri):
    schema = pa.schema([("id", pa.int64()), ("v", pa.int64())])
    t = deltatx.create_table(table_uri, schema)
    t.append(pa.table({"id": [1], "v": [2]}, schema=schema))   # v1: not clustered
    t.cluster_by(["v"])
    t.append(pa.table({"id": [5], "v": [6]}, schema=schema))
    result = t.restore(version=1)
    assert deltatx.Table(table_uri).clustering_columns == []
    domains = [a["domainMetadata"] for a in commit_actions(table_uri, result.version) if "domainMetadata" in a]
    assert [d["domain"] for d in domains] == ["delta.clustering"]
    assert orjson.loads(domains[0]["configuration"]) == {"clusteringColumns": []}


@pytest.mark.parametrize("dv", [False, True])
def test_a_restore_whose_files_a_concurrent_vacuum_deleted_commits_nothing(table_uri, dv):
    """Staged while the files existed, committed after a VACUUM (retention check off) deleted
    them: the commit would name missing files, so it fails and the table stays readable."""
    properties = {"delta.enableDeletionVectors": "true", "deltatx.deletionVectors.inlineMaxBytes": "0"} if dv else {}
    t = deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]), properties=properties)
    t.append(pa.table({"id": [1, 2, 3]}))
    t.delete("id = 1")   # v2 (with dv: a DV file)
    t.delete("id = 2")   # v3 replaces the v2 file (or its DV)
    tx = deltatx.Table(table_uri).transaction()
    tx.restore(version=2)
    deltatx.Table(table_uri).vacuum(retention_hours=0, enforce_retention_duration=False)
    before = deltatx.Table(table_uri).version
    with pytest.raises(errors.DataFileNotFoundError, match="nothing was committed"):
        tx.commit()
    latest = deltatx.Table(table_uri)
    assert latest.version == before
    assert ids(latest) == [3]


def test_a_restore_to_a_state_equal_to_the_current_one_still_commits(table_uri):
    """v3 restores v1 (metadata differs); restoring v1 again changes no file and no metadata, yet
    Delta's RESTORE writes its commit all the same. Before, nothing was committed and the
    result named version 3, another call's commit."""
    t = deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": [1, 2]}))
    t.set_properties({"delta.appendOnly": "false"})
    assert t.restore(version=1).version == 3
    again = t.restore(version=1)
    assert again.version == 4 and again.attempts == 1
    assert [h["operation"] for h in t.history()][:2] == ["RESTORE", "RESTORE"]
    assert t.to_arrow().sort_by("id")["id"].to_pylist() == [1, 2]
