"""Time travel on a log whose old commits were cleaned up (by another tool, or by hand).

- A version whose commit after its newest checkpoint is gone cannot be rebuilt: that is a
  TimeTravelError naming what can be, not CorruptLogError ("the log has a gap"), which is kept
  for the latest version.
- A timestamp is judged after the last commit on the same timeline its version is found on (the
  commits that can be rebuilt): with file times that go down across the rebuildable boundary (a
  copied log), a timestamp after every rebuildable commit travelled to the latest version.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import CorruptLogError, TimeTravelError
from deltatx.txnlog.snapshot_cache import SNAPSHOTS

SCHEMA = pa.schema([("id", pa.int64())])


def _commit(uri: str, version: int) -> str:
    return os.path.join(uri, "_delta_log", f"{version:020d}.json")


def _table_with_checkpoints(uri: str, versions: int, checkpoints: tuple[int, ...]) -> None:
    t = deltatx.create_table(uri, SCHEMA, properties={"delta.checkpointInterval": "1000"})
    for i in range(1, versions + 1):
        t.append(pa.table({"id": [i]}))
        if i in checkpoints:
            t.checkpoint()


def test_a_version_past_a_cleaned_up_commit_is_a_time_travel_error(tmp_path):
    uri = str(tmp_path / "t")
    _table_with_checkpoints(uri, 5, (2, 4))
    for v in range(4):
        os.unlink(_commit(uri, v))
    SNAPSHOTS.clear()
    with pytest.raises(TimeTravelError, match=r"version 3 .* commit 3, after checkpoint 2, was cleaned up; version 2 "
                                              r"and the versions from 4 on can be"):
        deltatx.Table(uri, version=3)
    assert sorted(deltatx.Table(uri, version=2).to_arrow()["id"].to_pylist()) == [1, 2]
    assert sorted(deltatx.Table(uri, version=4).to_arrow()["id"].to_pylist()) == [1, 2, 3, 4]
    assert deltatx.Table(uri).version == 5


def test_a_gap_before_the_latest_version_is_still_corruption(tmp_path):
    uri = str(tmp_path / "t")
    _table_with_checkpoints(uri, 4, (2,))
    os.unlink(_commit(uri, 3))
    SNAPSHOTS.clear()
    with pytest.raises(CorruptLogError, match="commit 3 is missing"):
        deltatx.Table(uri)


def test_a_timestamp_after_the_last_rebuildable_commit_is_refused_on_that_timeline(tmp_path):
    uri = str(tmp_path / "t")
    _table_with_checkpoints(uri, 7, (5,))
    for v in range(3):
        os.unlink(_commit(uri, v))
    base = 1_750_000_000  # seconds; versions 3 and 4 (before the checkpoint) carry later file times
    for version, offset in {3: 50, 4: 60, 5: 1, 6: 2, 7: 3}.items():
        os.utime(_commit(uri, version), (base + offset, base + offset))
    SNAPSHOTS.clear()
    assert deltatx.Table(uri, timestamp=(base + 2.5) * 1000).version == 6
    for late in (base + 10, base + 60.001):
        with pytest.raises(TimeTravelError, match="DELTA_TIMESTAMP_GREATER_THAN_COMMIT"):
            deltatx.Table(uri, timestamp=int(late * 1000))
