"""DELETE, UPDATE, MERGE and OPTIMIZE report Delta's operation metrics (DeltaOperationMetrics):
every key present, DVs counted as Delta counts them, and new files of a table that supports
deletion vectors say their bounds are tight. Expected values are those of delta-spark's own
suites (DeletionVectorsSuite "Metrics when deleting with DV", "INSERT + DELETE + MERGE + UPDATE
with DVs")."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pytest

import deltatx

SCHEMA = pa.schema([("id", pa.int64())])
DV = {"delta.enableDeletionVectors": "true"}

DELETE_KEYS = {"numAddedFiles", "numRemovedFiles", "numDeletionVectorsAdded", "numDeletionVectorsRemoved",
               "numDeletionVectorsUpdated", "numAddedChangeFiles", "numDeletedRows", "numCopiedRows",
               "executionTimeMs", "scanTimeMs", "rewriteTimeMs", "numRemovedBytes", "numAddedBytes"}
UPDATE_KEYS = (DELETE_KEYS - {"numDeletedRows"}) | {"numUpdatedRows"}
MERGE_KEYS = {"numSourceRows", "numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsMatchedUpdated",
              "numTargetRowsNotMatchedBySourceUpdated", "numTargetRowsDeleted", "numTargetRowsMatchedDeleted",
              "numTargetRowsNotMatchedBySourceDeleted", "numTargetRowsCopied", "numTargetBytesAdded",
              "numTargetBytesRemoved", "numOutputRows", "numTargetFilesAdded", "numTargetFilesRemoved",
              "numTargetChangeFilesAdded", "executionTimeMs", "scanTimeMs", "rewriteTimeMs",
              "numTargetDeletionVectorsAdded", "numTargetDeletionVectorsRemoved", "numTargetDeletionVectorsUpdated",
              "materializeSourceTimeMs"}
OPTIMIZE_KEYS = {"numAddedFiles", "numRemovedFiles", "numAddedBytes", "numRemovedBytes", "minFileSize",
                 "p25FileSize", "p50FileSize", "p75FileSize", "maxFileSize", "numDeletionVectorsRemoved"}
DV_COUNTS = ("numDeletedRows", "numRemovedFiles", "numDeletionVectorsAdded", "numDeletionVectorsRemoved",
             "numDeletionVectorsUpdated")


def _two_files(uri: str, properties: dict | None = None) -> deltatx.Table:
    table = deltatx.create_table(uri, SCHEMA, properties=properties)
    table.append(pa.table({"id": list(range(0, 5))}, schema=SCHEMA))
    table.append(pa.table({"id": list(range(5, 10))}, schema=SCHEMA))
    return table


def _committed(table: deltatx.Table) -> dict[str, int]:
    return {k: int(v) for k, v in table.history(1)[0]["operationMetrics"].items()}


def _new_file_stats(uri: str, version: int) -> list[dict]:
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        adds = [orjson.loads(line).get("add") for line in fh]
    return [orjson.loads(a["stats"]) for a in adds if a is not None]


def test_dv_counts_follow_deltas_deleting_with_dv_suite(tmp_path):
    table = _two_files(str(tmp_path / "t"), DV)
    expected = {"id >= 4": (6, 1, 1, 0, 0),        # a new DV, and a file removed whole
                "id = 3": (1, 0, 1, 1, 1),         # an updated DV is also one added and one removed
                "id IN (0, 1, 2)": (3, 1, 0, 1, 0)}  # the file with the DV removed whole
    for where, counts in expected.items():
        result = table.delete(where)
        committed = _committed(table)
        assert tuple(committed[k] for k in DV_COUNTS) == counts, where
        assert tuple(result.metrics[k] for k in DV_COUNTS) == counts, where
        assert DELETE_KEYS <= committed.keys()


@pytest.mark.parametrize("properties", [None, DV], ids=["copy-on-write", "deletion-vectors"])
def test_delete_and_update_carry_every_key_delta_records(tmp_path, properties):
    table = _two_files(str(tmp_path / "t"), properties)
    table.update("id = 7", {"id": "70"})
    updated = _committed(table)
    assert UPDATE_KEYS <= updated.keys()
    assert updated["numUpdatedRows"] == 1 and updated["numAddedBytes"] > 0
    assert updated["numAddedChangeFiles"] == 0  # no change data feed: still reported, as 0
    table.delete("id = 1")
    deleted = _committed(table)
    assert DELETE_KEYS <= deleted.keys()
    if properties is None:  # the file is rewritten: its bytes leave, the copy's arrive
        assert deleted["numRemovedBytes"] > 0 and deleted["numAddedBytes"] > 0 and deleted["numCopiedRows"] == 4
    else:  # only a DV: no data file leaves or arrives
        assert (deleted["numRemovedBytes"], deleted["numAddedBytes"]) == (0, 0)


def test_rewriting_a_file_that_had_a_dv_counts_the_dv_removed(tmp_path):
    """Turned off, DVs stop; the next copy-on-write rewrite of a file drops its DV, and a DELETE
    of a whole partition removes the DVs of its files: both counted as removed DVs."""
    uri = str(tmp_path / "t")
    table = _two_files(uri, DV)
    table.delete("id = 0")  # first file gets a DV
    table.set_properties({"delta.enableDeletionVectors": "false"})
    table.delete("id = 1")  # rewritten without its DV
    assert _committed(table)["numDeletionVectorsRemoved"] == 1
    table.delete()  # every file, by metadata
    whole = _committed(table)
    assert DELETE_KEYS <= whole.keys() and whole["numRemovedFiles"] == 2 and whole["numDeletionVectorsRemoved"] == 0


def test_merge_carries_every_key_delta_records(tmp_path):
    table = _two_files(str(tmp_path / "t"), DV)
    source = pa.table({"id": [1, 2, 20]}, schema=SCHEMA)
    (table.merge(source, on="t.id = s.id").when_matched_update(set={"id": "s.id + 100"})
     .when_not_matched_insert_all().execute())
    merged = _committed(table)
    assert MERGE_KEYS <= merged.keys()
    assert (merged["numTargetRowsUpdated"], merged["numTargetRowsInserted"]) == (2, 1)
    assert merged["numTargetDeletionVectorsAdded"] == 1 and merged["numTargetChangeFilesAdded"] == 0


def test_optimize_reports_the_size_distribution_of_the_files_it_wrote(tmp_path):
    table = _two_files(str(tmp_path / "t"))
    table.append(pa.table({"id": [10]}, schema=SCHEMA))
    result = table.optimize()
    committed = _committed(table)
    assert OPTIMIZE_KEYS <= committed.keys()
    size = int(table.files()["size"][0].as_py())
    assert [committed[k] for k in ("minFileSize", "p25FileSize", "p50FileSize", "p75FileSize", "maxFileSize")] \
        == [size] * 5
    assert result.metrics["numAddedFiles"] == 1


def test_new_files_of_a_dv_table_say_their_bounds_are_tight(tmp_path):
    uri = str(tmp_path / "t")
    table = _two_files(uri, DV)
    assert all(s["tightBounds"] is True for s in _new_file_stats(uri, 1))
    result = table.update("id = 3", {"id": "30"})  # a DV on the old file, a new file for the row
    flags = sorted(s["tightBounds"] for s in _new_file_stats(uri, result.version))
    assert flags == [False, True]
    plain = _two_files(str(tmp_path / "plain"))  # no DV support: no flag, as Delta writes them
    assert all("tightBounds" not in s for s in _new_file_stats(plain.uri, 1))


def test_a_transaction_of_several_operations_reports_its_own_bytes_and_sizes(tmp_path):
    """Summed over operations, a file one UPDATE wrote and the next rewrote would count twice; the
    commit's own adds and removes decide, as for the file counts."""
    table = _two_files(str(tmp_path / "t"))
    with table.transaction() as tx:
        tx.update("id = 1", {"id": "100"})
        tx.update("id = 100", {"id": "1000"})
    committed = _committed(table)
    with open(os.path.join(table.uri, "_delta_log", f"{table.version:020d}.json"), "rb") as fh:
        actions = [orjson.loads(line) for line in fh]
    added = [a["add"]["size"] for a in actions if "add" in a]
    removed = [a["remove"]["size"] for a in actions if "remove" in a]
    assert (committed["numAddedFiles"], committed["numRemovedFiles"]) == (len(added), len(removed)) == (1, 1)
    assert (committed["numAddedBytes"], committed["numRemovedBytes"]) == (sum(added), sum(removed))


def test_tight_bounds_is_added_at_the_top_level_only(tmp_path):
    """A column named tightBounds (in the bounds) does not count as the flag."""
    uri = str(tmp_path / "t")
    schema = pa.schema([("tightBounds", pa.int64())])
    table = deltatx.create_table(uri, schema, properties=DV)
    table.append(pa.table({"tightBounds": [1, 2]}, schema=schema))
    (stats,) = _new_file_stats(uri, 1)
    assert stats["tightBounds"] is True and stats["minValues"] == {"tightBounds": 1}


def test_a_transaction_of_dml_on_a_row_tracking_table_is_tagged(tmp_path):
    uri = str(tmp_path / "t")
    table = deltatx.create_table(uri, SCHEMA, properties={"delta.enableRowTracking": "true"})
    table.append(pa.table({"id": [1, 2]}, schema=SCHEMA))
    table.append(pa.table({"id": [3]}, schema=SCHEMA))
    with table.transaction() as tx:  # two DELETEs: the commit is a TRANSACTION that adds nothing
        tx.delete("id = 3")
        tx.delete("id <= 2")
    with open(os.path.join(uri, "_delta_log", f"{table.version:020d}.json"), "rb") as fh:
        info = next(orjson.loads(line)["commitInfo"] for line in fh if b"commitInfo" in line)
    assert info["tags"] == {"delta.rowTracking.preserved": "true"}
