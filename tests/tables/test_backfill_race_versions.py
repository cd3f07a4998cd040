"""A deletion-vector DML that loses the race to a row-tracking backfill keeps the backfill's
``defaultRowCommitVersion`` on the file it re-adds, not only its ``baseRowId``.

PROTOCOL.md (Writer Requirements for Row Tracking): a recommitted ``add`` (and its ``remove``)
carries the ``baseRowId`` and ``defaultRowCommitVersion`` of the last committed ``add`` of the
same path. When a DELETE or UPDATE read the table before ``set_properties`` turned row tracking on
(UPGRADE PROTOCOL, ROW TRACKING BACKFILL, SET TBLPROPERTIES) and commits afterwards, that last add
is the backfill's, so the rows the DML did not change keep the backfill's version as their
``_metadata.row_commit_version``. The checker used to bump the copied version (rule #8 after #5,
as Delta's checker orders them), so every untouched row reported the DML's version.

Rows the DML rewrote (UPDATE's new file) get the DML's version, and, since the DML read no ids,
a fresh id above the watermark: Delta's behaviour too (the commit is tagged not preserved).

Deterministic: the loser is a transaction staged before ``set_properties`` (or, for a read
between the upgrade and the backfill, staged by a :mod:`deltatx.phases` observer), committed
after it; no threads, no sleeps.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import orjson
import pyarrow as pa
import pytest

import deltatx
from deltatx.txnlog import row_tracking
from backfill_races import enable_with_dml_staged_after_upgrade

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])
RT = {"delta.enableRowTracking": "true"}
COLUMNS = ["id", "v", "_metadata.row_id", "_metadata.row_commit_version"]

DML: dict[str, Callable[[Any], Any]] = {  # row 4 is in the second file (rows 3-5)
    "DELETE": lambda tx: tx.delete("id = 4"),
    "UPDATE": lambda tx: tx.update("id = 4", set={"v": "v + 100"}),
}


def make(uri: str) -> int:
    """Three files of three rows on a DV table, written before row tracking; returns the version."""
    table = deltatx.create_table(uri, SCHEMA, properties={"delta.enableDeletionVectors": "true"})
    for start in (0, 3, 6):
        table.append(pa.table({"id": list(range(start, start + 3)), "v": [0] * 3}, schema=SCHEMA))
    return table.version


def rows(uri: str) -> dict[int, tuple[int, int, int]]:
    """id -> (v, row id, row commit version) of every live row."""
    got = deltatx.Table(uri).to_arrow(columns=COLUMNS).to_pylist()
    return {r["id"]: (r["v"], r["_metadata.row_id"], r["_metadata.row_commit_version"]) for r in got}


def file_actions(uri: str, version: int) -> tuple[dict, list[dict], list[dict]]:
    """(commitInfo, adds, removes) of one commit, straight from the log."""
    info: dict = {}
    adds: list[dict] = []
    removes: list[dict] = []
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        for line in fh:
            action = orjson.loads(line)
            info = action.get("commitInfo", info)
            adds += [action["add"]] if "add" in action else []
            removes += [action["remove"]] if "remove" in action else []
    return info, adds, removes


def enable_with_loser(uri: str, v0: int, dml: str, read: str) -> Any:
    """Run ``set_properties(RT)`` with a DML staged ``read`` it; returns the staged transaction."""
    if read == "before the upgrade":
        tx = deltatx.Table(uri).transaction()
        DML[dml](tx)
        deltatx.Table(uri).set_properties(RT)
        return tx
    return enable_with_dml_staged_after_upgrade(uri, v0, DML[dml])


@pytest.mark.parametrize("read", ["before the upgrade", "after the upgrade"])
@pytest.mark.parametrize("dml", sorted(DML))
def test_a_dv_dml_that_loses_to_the_backfill_keeps_its_versions(table_uri, dml, read):
    v0 = make(table_uri)
    loser = enable_with_loser(table_uri, v0, dml, read)
    backfill = v0 + 2
    info, backfilled, _ = file_actions(table_uri, backfill)
    assert info["operation"] == row_tracking.BACKFILL_OPERATION
    given = {a["path"]: (a["baseRowId"], a["defaultRowCommitVersion"]) for a in backfilled}
    assert {version for _, version in given.values()} == {backfill}
    before = rows(table_uri)

    version = loser.commit().version
    assert version == v0 + 4

    # the DV re-add and its remove carry the backfill's baseRowId and defaultRowCommitVersion
    _, adds, removes = file_actions(table_uri, version)
    re_added = [a for a in adds if a.get("deletionVector")]
    assert len(re_added) == 1 and len(removes) == 1
    assert re_added[0]["path"] == removes[0]["path"]
    for action in (re_added[0], removes[0]):
        assert (action["baseRowId"], action["defaultRowCommitVersion"]) == given[action["path"]]

    after = rows(table_uri)
    untouched = [i for i in range(9) if i != 4]
    for i in untouched:  # the re-added file's other rows and the files the DML did not touch
        assert after[i] == before[i], (i, before[i], after[i])
        assert after[i][2] == backfill
    if dml == "DELETE":
        assert 4 not in after
    else:
        v, row_id, commit_version = after[4]
        assert v == 100 and commit_version == version
        # it read no ids, so its rewritten row gets a fresh one, as Delta gives it
        assert row_id > max(before[i][1] for i in before)
        # not preserved: Delta writes "false"; no tag means the same to readers
        assert info_tag(table_uri, version) in (None, "false")


def info_tag(uri: str, version: int) -> str | None:
    info, _, _ = file_actions(uri, version)
    return (info.get("tags") or {}).get(row_tracking.PRESERVED_TAG)


def test_a_later_winner_does_not_bump_the_copied_version(table_uri):
    """After the backfill another writer commits before the DML: the copied version (older than
    any later winner) stays, while the DML's own new file moves past every winner."""
    v0 = make(table_uri)
    tx = deltatx.Table(table_uri).transaction()
    DML["UPDATE"](tx)
    deltatx.Table(table_uri).set_properties(RT)
    backfill = v0 + 2
    deltatx.Table(table_uri).append(pa.table({"id": [50], "v": [0]}, schema=SCHEMA))
    before = rows(table_uri)
    version = tx.commit().version
    after = rows(table_uri)
    assert version == v0 + 5
    for i in (3, 5):
        assert after[i] == before[i] and after[i][2] == backfill
    assert after[50] == before[50]
    assert after[4][2] == version
    ids = [r[1] for r in after.values()]
    assert len(set(ids)) == len(ids)
