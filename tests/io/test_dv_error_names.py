"""A deletion vector that does not add up names where it is, not only the data file it belongs to.

Issue #10 §6: a missing or corrupt DV file raises CorruptDeletionVectorError naming it. The DV
file (``deletion_vector_<uuid>.bin``, relative to the table root) is what is broken and what an
operator restores; one DV file holds every DV a commit wrote, so the DV's offset says which one.
The message says both, plus the data file; the exception carries them as ``dv_path``,
``dv_offset`` and ``data_path``. An inline DV (bytes in the log) is named as inline.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any, Callable

import pyarrow as pa
import pytest

import deltatx
from tablefiles import flip_byte
from deltatx.errors import CorruptDeletionVectorError, MissingDeletionVectorError
from deltatx.io.deletion_vectors import dv_file_relative_path
from deltatx.txnlog.snapshot_cache import SNAPSHOTS

SCHEMA = pa.schema([("id", pa.int64())])
STORED = {"delta.enableDeletionVectors": "true", "deltatx.deletionVectors.inlineMaxBytes": "0"}


def _make(uri: str, files: int = 1, properties: dict[str, str] = STORED) -> None:
    """``files`` files of 100 rows, then one DELETE giving each a DV (in one DV file when stored)."""
    table = deltatx.create_table(uri, SCHEMA, properties=properties)
    for f in range(files):
        table.append(pa.table({"id": list(range(100 * f, 100 * f + 100))}, schema=SCHEMA))
    table.delete("id % 2 = 0")


def _last_commit(uri: str) -> str:
    log = os.path.join(uri, "_delta_log")
    return os.path.join(log, sorted(n for n in os.listdir(log) if n.endswith(".json"))[-1])


def _dvs(uri: str) -> list[tuple[str, dict[str, Any]]]:
    """(data file, DV descriptor) of the last commit's adds, in log order."""
    with open(_last_commit(uri)) as fh:
        adds = [json.loads(line)["add"] for line in fh if '"add"' in line]
    return [(a["path"], a["deletionVector"]) for a in adds if a.get("deletionVector")]


def _edit_dv(uri: str, index: int, change: Callable[[dict[str, Any]], None]) -> None:
    """Change the ``index``-th DV descriptor of the last commit in place."""
    path = _last_commit(uri)
    with open(path) as fh:
        actions = [json.loads(line) for line in fh if line.strip()]
    seen = 0
    for action in actions:
        if "add" in action and action["add"].get("deletionVector"):
            if seen == index:
                change(action["add"]["deletionVector"])
            seen += 1
    with open(path, "w") as fh:
        fh.write("\n".join(json.dumps(a) for a in actions) + "\n")
    SNAPSHOTS.clear()


def _flip(path: str, at: int) -> None:
    flip_byte(path, at, 0x01)


def _truncate(path: str, at: int) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(at)


def _payload_end(dv: dict[str, Any]) -> int:
    """Offset just past a stored DV's bytes (before its CRC)."""
    return int(dv["offset"]) + 4 + int(dv["sizeInBytes"])


CORRUPTIONS: dict[str, tuple[Callable[[str, dict[str, Any]], None], str]] = {
    # (how, given the table and the DV's descriptor; what the message says went wrong)
    "flipped byte": (lambda uri, dv: _flip(os.path.join(uri, dv_file_relative_path(dv["pathOrInlineDv"])),
                                           _payload_end(dv) - 1), "checksum"),
    "truncated": (lambda uri, dv: _truncate(os.path.join(uri, dv_file_relative_path(dv["pathOrInlineDv"])),
                                            _payload_end(dv) + 2), "truncated"),
    "wrong offset": (lambda uri, dv: _edit_dv(uri, 0, lambda d: d.__setitem__("offset", d["offset"] + 3)),
                     "cannot be read"),
    "wrong sizeInBytes": (lambda uri, dv: _edit_dv(uri, 0, lambda d: d.__setitem__("sizeInBytes", 12)),
                          "the file says"),
    "wrong cardinality": (lambda uri, dv: _edit_dv(uri, 0, lambda d: d.__setitem__("cardinality", 7)),
                          "descriptor says 7"),
}


def _names_the_dv_file(error: CorruptDeletionVectorError, data_file: str, relative: str, offset: int) -> None:
    message = str(error)
    assert f"{relative!r}" in message and f"offset {offset}" in message, message
    assert os.path.basename(data_file) in message, message  # still names the data file
    assert error.dv_path == relative and error.dv_offset == offset and not error.dv_inline
    assert error.data_path is not None and error.data_path.endswith(os.path.basename(data_file))


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_a_corrupt_dv_file_is_named_with_its_offset(table_uri, corruption):
    _make(table_uri)
    [(data_file, dv)] = _dvs(table_uri)
    assert dv["storageType"] == "u"
    relative = dv_file_relative_path(dv["pathOrInlineDv"])
    how, what = CORRUPTIONS[corruption]
    how(table_uri, dv)
    offset = int(_dvs(table_uri)[0][1]["offset"])  # the one the log says, wrong or not
    with pytest.raises(CorruptDeletionVectorError, match=what) as info:
        deltatx.Table(table_uri).to_arrow()
    _names_the_dv_file(info.value, data_file, relative, offset)


def test_a_shared_dv_file_names_the_offset_of_the_broken_dv(table_uri):
    """Two DVs of one commit share a file; the second one's bytes are damaged: the error names
    the file and the second DV's offset, and the data file that DV belongs to."""
    _make(table_uri, files=2)
    (_, first), (data_file, second) = _dvs(table_uri)
    relative = dv_file_relative_path(second["pathOrInlineDv"])
    assert relative == dv_file_relative_path(first["pathOrInlineDv"])
    assert int(second["offset"]) != int(first["offset"])
    _flip(os.path.join(table_uri, relative), _payload_end(second) - 1)
    with pytest.raises(CorruptDeletionVectorError, match="checksum") as info:
        deltatx.Table(table_uri).to_arrow()
    _names_the_dv_file(info.value, data_file, relative, int(second["offset"]))


def test_a_prefixed_dv_file_is_named_by_its_path_from_the_table_root(table_uri):
    """A ``u`` descriptor may put a random prefix (a folder) before the UUID."""
    _make(table_uri)
    [(data_file, dv)] = _dvs(table_uri)
    name = dv_file_relative_path(dv["pathOrInlineDv"])
    os.makedirs(os.path.join(table_uri, "ab"))
    shutil.move(os.path.join(table_uri, name), os.path.join(table_uri, "ab", name))
    _edit_dv(table_uri, 0, lambda d: d.__setitem__("pathOrInlineDv", "ab" + d["pathOrInlineDv"]))
    _flip(os.path.join(table_uri, "ab", name), _payload_end(dv) - 1)
    with pytest.raises(CorruptDeletionVectorError, match="checksum") as info:
        deltatx.Table(table_uri).to_arrow()
    _names_the_dv_file(info.value, data_file, f"ab/{name}", int(dv["offset"]))


def test_a_write_that_meets_a_corrupt_dv_file_names_it(table_uri):
    """A DELETE extending the broken DV reads it first: the same error, naming the DV file."""
    _make(table_uri)
    [(data_file, dv)] = _dvs(table_uri)
    relative = dv_file_relative_path(dv["pathOrInlineDv"])
    _flip(os.path.join(table_uri, relative), _payload_end(dv) - 1)
    with pytest.raises(CorruptDeletionVectorError, match="checksum") as info:
        deltatx.Table(table_uri).delete("id = 1")
    _names_the_dv_file(info.value, data_file, relative, int(dv["offset"]))


def test_a_missing_dv_file_carries_its_path(table_uri):
    _make(table_uri)
    [(data_file, dv)] = _dvs(table_uri)
    relative = dv_file_relative_path(dv["pathOrInlineDv"])
    os.remove(os.path.join(table_uri, relative))
    with pytest.raises(MissingDeletionVectorError) as info:
        deltatx.Table(table_uri).to_arrow()
    assert relative in str(info.value)
    assert info.value.dv_path == relative and info.value.dv_offset == int(dv["offset"])
    assert info.value.data_path.endswith(os.path.basename(data_file))


def test_a_corrupt_inline_dv_is_named_as_inline(table_uri):
    _make(table_uri, properties={"delta.enableDeletionVectors": "true"})
    [(data_file, dv)] = _dvs(table_uri)
    assert dv["storageType"] == "i"
    _edit_dv(table_uri, 0, lambda d: d.__setitem__("cardinality", 7))
    with pytest.raises(CorruptDeletionVectorError, match="descriptor says 7") as info:
        deltatx.Table(table_uri).to_arrow()
    assert "inline" in str(info.value) and os.path.basename(data_file) in str(info.value)
    assert info.value.dv_inline and info.value.dv_path is None and info.value.dv_offset is None


def test_a_descriptor_that_names_no_file_says_so():
    """A ``u`` path that is not Z85 names no DV file: the message quotes it instead."""
    from deltatx.io.deletion_vectors import deleted_rows

    bad = {"storageType": "u", "pathOrInlineDv": "~" * 20, "offset": 1, "sizeInBytes": 10, "cardinality": 1}
    with pytest.raises(CorruptDeletionVectorError, match="names no file") as info:
        deleted_rows(None, bad, "part-x.parquet")
    assert "~" * 20 in str(info.value) and "part-x.parquet" in str(info.value)
    assert info.value.dv_path is None and not info.value.dv_inline
