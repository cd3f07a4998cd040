"""``commitInfo.tags["delta.rowTracking.preserved"]``: "true" only when every row the commit
rewrote had an id to carry — row tracking enabled in the snapshot the transaction read (Delta's
``addPreservedRowTrackingTagIfNotSet(txn.snapshot)``). A commit rebased onto a winner that
enabled row tracking assigned fresh ids: "false", as Delta tags it."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa

import deltatx

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


def _tags(uri: str, version: int) -> dict | None:
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        for line in fh:
            action = orjson.loads(line)
            if "commitInfo" in action:
                return action["commitInfo"].get("tags")
    return None


def _rows(n: int) -> pa.Table:
    return pa.table({"id": list(range(n)), "v": [0] * n}, schema=SCHEMA)


def test_enabled_row_tracking_tags_a_rewrite_preserved(tmp_path):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA, properties={"delta.enableRowTracking": "true"})
    t.append(_rows(3))
    result = t.update("id = 1", {"v": "5"})
    assert _tags(uri, result.version) == {"delta.rowTracking.preserved": "true"}


def test_a_rewrite_rebased_onto_the_enabling_commits_is_not_preserved(tmp_path):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA)
    t.append(_rows(5))
    loser = deltatx.Table(uri).transaction()
    loser.delete("id = 1")  # copy-on-write: its rows get ids only when the commit lands
    deltatx.Table(uri).set_properties({"delta.enableRowTracking": "true"})
    result = loser.commit()
    assert _tags(uri, result.version) == {"delta.rowTracking.preserved": "false"}


def test_supported_but_not_enabled_is_not_tagged_preserved(tmp_path):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA, properties={"delta.feature.rowTracking": "supported"})
    t.append(_rows(3))
    result = t.update("id = 1", {"v": "5"})
    assert (_tags(uri, result.version) or {}).get("delta.rowTracking.preserved") != "true"


def test_a_delete_that_only_removes_files_is_tagged_as_delta_tags_every_dml(tmp_path):
    """Delta's DELETE, UPDATE and MERGE tag their commits whatever they add: a DELETE of whole
    files (by partition, or every row of a file) too."""
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA, properties={"delta.enableRowTracking": "true"})
    t.append(_rows(3))
    result = t.delete()
    assert result.metrics["numRemovedFiles"] == 1
    assert _tags(uri, result.version) == {"delta.rowTracking.preserved": "true"}
