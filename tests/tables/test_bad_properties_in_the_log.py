"""Property values in the log that ``set_properties`` would refuse (another engine wrote them,
or a hand edit): a write never acts on a guess, and a committed write never reports failure."""

from __future__ import annotations

import os
import warnings

import orjson
import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import InvalidPropertyError, PostCommitHookWarning
from deltatx.txnlog.snapshot_cache import SNAPSHOTS

SCHEMA = pa.schema([("id", pa.int64())])


def _with_property(uri: str, key: str, value: str) -> deltatx.Table:
    deltatx.create_table(uri, SCHEMA).append(pa.table({"id": [1, 2]}, schema=SCHEMA))
    path = os.path.join(uri, "_delta_log", f"{0:020d}.json")
    with open(path, "rb") as fh:
        actions = [orjson.loads(line) for line in fh.read().splitlines()]
    for action in actions:
        if "metaData" in action:
            action["metaData"]["configuration"][key] = value
    with open(path, "wb") as fh:
        fh.write(b"\n".join(orjson.dumps(a) for a in actions) + b"\n")
    SNAPSHOTS.clear()  # as another process would open it
    return deltatx.Table(uri)


def _log(uri: str) -> list[str]:
    return sorted(os.listdir(os.path.join(uri, "_delta_log")))


@pytest.mark.parametrize("key", ["delta.enableDeletionVectors", "delta.appendOnly", "delta.enableChangeDataFeed"])
def test_a_bad_boolean_is_refused_before_anything_is_written(tmp_path, key):
    uri = str(tmp_path / "t")
    t = _with_property(uri, key, "maybe")
    assert t.to_arrow().num_rows == 2  # reads do not depend on it
    before, files = _log(uri), sorted(os.listdir(uri))
    with pytest.raises(InvalidPropertyError, match=f"{key}='maybe'"):
        t.delete(where="id = 1")
    assert _log(uri) == before and sorted(os.listdir(uri)) == files
    t.set_properties({key: "false"})  # the way out
    t.delete(where="id = 1")
    assert deltatx.Table(uri).to_arrow()["id"].to_pylist() == [2]


def test_a_bad_checkpoint_interval_warns_after_the_commit_instead_of_failing_it(tmp_path):
    """The commit has landed when the checkpoint is due: raising then would invite a retry that
    appends the rows twice."""
    uri = str(tmp_path / "t")
    t = _with_property(uri, "delta.checkpointInterval", "-1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = t.append(pa.table({"id": [3]}, schema=SCHEMA))
    assert result.version == 2
    assert any(issubclass(w.category, PostCommitHookWarning) and "not checkpointed" in str(w.message)
               for w in caught)
    assert sorted(deltatx.Table(uri).to_arrow()["id"].to_pylist()) == [1, 2, 3]


def test_a_bad_isolation_level_in_the_log_is_fixed_by_set_properties(tmp_path):
    """The way out the refusal names must work: the commit that fixes the value runs at the
    level it sets, not at the bad one it replaces."""
    uri = str(tmp_path / "t")
    t = _with_property(uri, "delta.isolationLevel", "serializable")
    before = _log(uri)
    with pytest.raises(InvalidPropertyError, match="case-sensitive"):
        t.delete(where="id = 1")
    assert _log(uri) == before
    result = t.set_properties({"delta.isolationLevel": "Serializable"})
    assert result.isolation_level == "Serializable"
    SNAPSHOTS.clear()
    fixed = deltatx.Table(uri)
    assert fixed.properties["delta.isolationLevel"] == "Serializable"
    fixed.delete(where="id = 1")
    assert deltatx.Table(uri).to_arrow()["id"].to_pylist() == [2]
