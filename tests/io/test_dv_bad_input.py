"""Bad deletion vectors stop reads and writes with a typed error naming the file, and a refused
write leaves nothing behind: no new version, no new data or DV file."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

import deltatx
from tablefiles import flip_byte
from deltatx.errors import CorruptDeletionVectorError, MissingDeletionVectorError

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


def _table(uri: str) -> str:
    """One 6000-row file whose DV (every 3rd row: too big to inline) lives in a ``u`` file; returns that file's name."""
    table = deltatx.create_table(uri, SCHEMA, properties={"delta.enableDeletionVectors": "true"})
    table.append(pa.table({"id": list(range(6000)), "v": [0] * 6000}, schema=SCHEMA))
    deltatx.Table(uri).delete("id % 3 = 0")
    [name] = [n for n in os.listdir(uri) if n.startswith("deletion_vector_")]
    return name


def _listing(uri: str) -> list[str]:
    out = []
    for root, _, files in os.walk(uri):
        out += [os.path.relpath(os.path.join(root, f), uri) for f in files]
    return sorted(out)


WRITES = {
    "delete": lambda t: t.delete("id = 1"),
    "update": lambda t: t.update("id = 2", set={"v": "5"}),
    "merge": lambda t: t.merge(pa.table({"id": [4], "v": [9]}), on="t.id = s.id")
    .when_matched_update({"v": "s.v"}).execute(),
    "optimize": lambda t: t.reorg(purge=True),
}


_flip_byte = flip_byte


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_corrupt_dv_file_refuses_the_write_and_writes_nothing(table_uri, write):
    dv = _table(table_uri)
    _flip_byte(os.path.join(table_uri, dv), 20)  # inside the bitmap: the CRC no longer matches
    table = deltatx.Table(table_uri)
    before, version = _listing(table_uri), table.version
    with pytest.raises(CorruptDeletionVectorError, match="checksum") as info:
        WRITES[write](table)
    assert os.path.basename(dv) in str(info.value) and info.value.dv_path == dv
    assert deltatx.Table(table_uri).version == version
    assert _listing(table_uri) == before


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_missing_dv_file_refuses_the_write_and_writes_nothing(table_uri, write):
    dv = _table(table_uri)
    os.remove(os.path.join(table_uri, dv))
    table = deltatx.Table(table_uri)
    before, version = _listing(table_uri), table.version
    with pytest.raises(MissingDeletionVectorError, match=dv.split(".")[0]) as info:
        WRITES[write](table)
    assert isinstance(info.value, CorruptDeletionVectorError) and isinstance(info.value, FileNotFoundError)
    assert deltatx.Table(table_uri).version == version
    assert _listing(table_uri) == before


def _rewrite_last_commit_dv(uri: str, change) -> None:
    log = os.path.join(uri, "_delta_log")
    last = sorted(n for n in os.listdir(log) if n.endswith(".json"))[-1]
    path = os.path.join(log, last)
    lines = [json.loads(line) for line in open(path) if line.strip()]
    for line in lines:
        if "add" in line and "deletionVector" in line["add"]:
            change(line["add"]["deletionVector"])
    with open(path, "w") as fh:
        fh.write("\n".join(json.dumps(line) for line in lines) + "\n")


@pytest.mark.parametrize("field, value, message", [
    ("cardinality", 7, "holds 2000 rows, its descriptor says 7"),
    ("sizeInBytes", 12, "the file says"),
    ("storageType", "x", "unknown storageType"),
])
def test_a_descriptor_that_disagrees_with_its_dv_is_refused(table_uri, field, value, message):
    _table(table_uri)
    _rewrite_last_commit_dv(table_uri, lambda dv: dv.__setitem__(field, value))
    table = deltatx.Table(table_uri)
    with pytest.raises(CorruptDeletionVectorError, match=message):
        table.to_arrow()
    before, version = _listing(table_uri), table.version
    with pytest.raises(CorruptDeletionVectorError):
        table.delete("id = 1")
    assert deltatx.Table(table_uri).version == version and _listing(table_uri) == before


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_corrupt_inline_dv_refuses_the_write_every_time_and_writes_nothing(table_uri, write):
    """Inline DVs are decoded once per process (io/deletion_vectors.py); a bad one is never kept,
    so a second attempt is refused the same way, naming the data file."""
    table = deltatx.create_table(table_uri, SCHEMA, properties={"delta.enableDeletionVectors": "true"})
    table.append(pa.table({"id": list(range(100)), "v": [0] * 100}, schema=SCHEMA))
    table.delete("id = 50")  # a one-row DV: inline
    assert table.files().column("deletionVector")[0].as_py()["storageType"] == "i"
    _rewrite_last_commit_dv(table_uri, lambda dv: dv.__setitem__("pathOrInlineDv", "~" * len(dv["pathOrInlineDv"])))
    table = deltatx.Table(table_uri)
    [data_file] = table.files().column("path").to_pylist()
    before, version = _listing(table_uri), table.version
    for _ in range(2):
        with pytest.raises(CorruptDeletionVectorError, match=data_file.split("-c000")[0]):
            WRITES[write](table)
        assert deltatx.Table(table_uri).version == version
        assert _listing(table_uri) == before


def test_a_winners_corrupt_dv_refuses_the_losers_commit_and_cleans_up(table_uri):
    """The DVs a row-level rebase needs are loaded before the checker; a bad one stops the commit."""
    table = deltatx.create_table(table_uri, SCHEMA, properties={"delta.enableDeletionVectors": "true"})
    table.append(pa.table({"id": list(range(6000)), "v": [0] * 6000}, schema=SCHEMA))
    loser = deltatx.Table(table_uri).transaction()
    loser.update("id = 1", set={"v": "1"})  # writes one new data file (the updated row)
    deltatx.Table(table_uri).delete("id % 3 = 0")  # the winner: a DV in a file
    [dv] = [n for n in os.listdir(table_uri) if n.startswith("deletion_vector_")]
    _flip_byte(os.path.join(table_uri, dv), 20)
    before = _listing(table_uri)
    with pytest.raises(CorruptDeletionVectorError):
        loser.commit()
    assert deltatx.Table(table_uri).version == 2
    after = _listing(table_uri)
    assert set(after) <= set(before) and len(before) - len(after) >= 1  # the loser's data file is gone


def test_inline_dvs_decode_once_read_only_and_a_bad_one_still_names_its_file():
    """Inline DVs (the descriptor holds the bitmap) are decoded once per process and shared
    read-only; a bad inline DV is refused every time, naming the data file, never cached."""
    import numpy as np
    from dvtables import portable_bitmap, z85_encode

    from deltatx.io.deletion_vectors import _inline_rows, deleted_rows

    payload = portable_bitmap([3, 5, 8])
    descriptor = {"storageType": "i", "pathOrInlineDv": z85_encode(payload), "offset": None,
                  "sizeInBytes": len(payload), "cardinality": 3}
    first = deleted_rows(None, descriptor, "part-a.parquet")
    again = deleted_rows(None, dict(descriptor), "part-b.parquet")
    assert first is again and first.tolist() == [3, 5, 8]
    with pytest.raises(ValueError):
        first[0] = 1  # shared: callers cannot change it
    assert _inline_rows.cache_info().hits >= 1
    bad = dict(descriptor, pathOrInlineDv="~" * len(descriptor["pathOrInlineDv"]))
    for name in ("part-c.parquet", "part-d.parquet"):
        with pytest.raises(CorruptDeletionVectorError, match=name):
            deleted_rows(None, bad, name)
    with pytest.raises(CorruptDeletionVectorError, match="descriptor says 4"):
        deleted_rows(None, dict(descriptor, cardinality=4), "part-e.parquet")
    assert np.array_equal(deleted_rows(None, descriptor, "part-a.parquet"), [3, 5, 8])


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_dv_path_that_is_not_z85_refuses_vacuum_naming_the_data_file_and_deletes_nothing(table_uri, dry_run):
    """A 'u' descriptor whose path does not decode: VACUUM cannot tell which DV file it protects."""
    from deltatx.txnlog.snapshot_cache import SNAPSHOTS

    _table(table_uri)
    log = os.path.join(table_uri, "_delta_log", f"{2:020d}.json")
    with open(log) as fh:
        actions = [json.loads(line) for line in fh]
    data_file = None
    for action in actions:
        if "add" in action and action["add"].get("deletionVector"):
            action["add"]["deletionVector"]["pathOrInlineDv"] = "~" * 20  # '~' is not a Z85 character
            data_file = action["add"]["path"]
    with open(log, "w") as fh:
        fh.write("\n".join(json.dumps(a) for a in actions) + "\n")
    SNAPSHOTS.clear()
    before = _listing(table_uri)
    with pytest.raises(CorruptDeletionVectorError, match=f"deletion vector of '{data_file}' names no valid file"):
        deltatx.Table(table_uri).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=dry_run)
    assert _listing(table_uri) == before and deltatx.Table(table_uri).version == 2
