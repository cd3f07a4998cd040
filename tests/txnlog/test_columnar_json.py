"""Columnar parsing of add/remove lines (Arrow's JSON reader) agrees with the line-by-line parser.

Replay joins the raw file lines of many commits into one Arrow read; any surprise falls back to
the dict parser, which must still name the bad version and line.
"""

from __future__ import annotations

import orjson
import pyarrow as pa
import pytest

from deltatx.errors import CorruptLogError
from deltatx.txnlog.actions import _parse_commit_dicts, parse_commit
from deltatx.txnlog.jsonfiles import NotColumnar, file_lines_table
from deltatx.txnlog.schema import schema_to_json
from deltatx.txnlog.snapshot import load_snapshot
from deltatx.txnlog.store import open_store

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("day", pa.string())])


def _add(i: int, **extra) -> dict:
    body = {"path": f"part={i % 3}/f{i}.parquet", "partitionValues": {"part": str(i % 3), "day": None},
            "size": 100 + i, "modificationTime": 1_700_000_000_000 + i, "dataChange": True,
            "stats": orjson.dumps({"numRecords": i}).decode()}
    body.update(extra)
    return {"add": body}


def _lines(actions: list[dict]) -> bytes:
    return b"\n".join(orjson.dumps(a) for a in actions) + b"\n"


def _first_commit() -> bytes:
    return _lines([
        {"commitInfo": {"operation": "CREATE TABLE", "timestamp": 1}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}},
                      "schemaString": schema_to_json(SCHEMA), "partitionColumns": ["part", "day"],
                      "configuration": {}, "createdTime": 1}},
    ])


def _varied_adds(n: int) -> list[dict]:
    out = []
    for i in range(n):
        extra = {}
        if i % 5 == 0:
            extra["tags"] = {"INSERTION_TIME": str(i), "note": None}
        if i % 7 == 0:
            extra["deletionVector"] = {"storageType": "u", "pathOrInlineDv": f"dv{i}", "offset": 1,
                                       "sizeInBytes": 40, "cardinality": 2}
        if i % 11 == 0:
            extra["futureField"] = {"x": i}
        out.append(_add(i, **extra))
    return out


def test_columnar_matches_dict_parser_on_maps_dvs_and_unknown_fields():
    data = _lines([{"commitInfo": {"operation": "WRITE"}}] + _varied_adds(200)
                  + [{"remove": {"path": "old.parquet", "dataChange": True, "deletionTimestamp": 5}}])
    fast = parse_commit(data, 3)
    slow = _parse_commit_dicts(data, 3)
    assert fast.adds.to_pylist() == slow.adds.to_pylist()
    assert fast.removes.to_pylist() == slow.removes.to_pylist()
    row = fast.adds.to_pylist()[0]
    assert dict(row["partitionValues"]) == {"part": "0", "day": None}
    assert dict(row["tags"]) == {"INSERTION_TIME": "0", "note": None}
    assert fast.adds.to_pylist()[1]["tags"] is None


def test_missing_map_key_reads_as_null_and_empty_map_stays_empty():
    lines = [_add(i) for i in range(100)]
    lines[10]["add"]["partitionValues"] = {"part": "1"}  # "day" missing on this line only
    blob = b"\n".join(orjson.dumps(a) for a in lines)
    table = file_lines_table(blob, "add")
    assert dict(table["partitionValues"][10].as_py()) == {"part": "1", "day": None}
    unpartitioned = b"\n".join(orjson.dumps({"add": {**a["add"], "partitionValues": {}}}) for a in lines)
    assert file_lines_table(unpartitioned, "add")["partitionValues"].to_pylist()[0] == []


@pytest.mark.parametrize("damage", [
    lambda a: a["add"].__setitem__("size", "12"),              # wrong type
    lambda a: a["add"].pop("modificationTime"),                # required field missing
    lambda a: a["add"]["partitionValues"].__setitem__("part", 3),  # map value not a string
])
def test_columnar_refuses_bad_lines(damage):
    lines = [_add(i) for i in range(100)]
    damage(lines[42])
    with pytest.raises(NotColumnar):
        file_lines_table(b"\n".join(orjson.dumps(a) for a in lines), "add")


def _write_log(uri: str, commits: list[bytes]) -> None:
    store = open_store(uri)
    for version, data in enumerate(commits):
        store.put_commit(version, data)


def test_replay_of_many_small_commits_is_columnar_and_exact(tmp_path):
    uri = str(tmp_path / "t")
    adds = _varied_adds(300)
    commits = [_first_commit()] + [_lines([{"commitInfo": {"operation": "WRITE"}}, a]) for a in adds]
    # a remove of an earlier file and a re-add of the same path later: newest wins
    commits.append(_lines([{"remove": {"path": adds[4]["add"]["path"], "dataChange": True,
                                       "deletionTimestamp": 9}}]))
    commits.append(_lines([_add(4, size=999)]))
    _write_log(uri, commits)
    snap = load_snapshot(open_store(uri))
    assert snap.version == len(commits) - 1
    assert snap.files.num_rows == 300
    by_path = {r["path"]: r for r in snap.files.to_pylist()}
    assert by_path[adds[4]["add"]["path"]]["size"] == 999
    assert dict(by_path[adds[5]["add"]["path"]]["tags"]) == {"INSERTION_TIME": "5", "note": None}
    assert snap.tombstones.num_rows == 0  # the path was re-added after its remove


def test_replay_names_the_bad_commit_and_line(tmp_path):
    uri = str(tmp_path / "t")
    adds = [_add(i) for i in range(150)]
    adds[120]["add"]["size"] = "big"
    commits = [_first_commit()] + [_lines([{"commitInfo": {"operation": "WRITE"}}, a]) for a in adds]
    _write_log(uri, commits)
    with pytest.raises(CorruptLogError) as info:
        load_snapshot(open_store(uri))
    assert info.value.version == 121 and info.value.line == 2
    assert "size" in str(info.value)


def test_unknown_field_with_changing_type_falls_back_without_error(tmp_path):
    uri = str(tmp_path / "t")
    adds = [_add(i, futureField=(i if i % 2 else "text")) for i in range(100)]
    commits = [_first_commit()] + [_lines([{"commitInfo": {"operation": "WRITE"}}, a]) for a in adds]
    _write_log(uri, commits)
    assert load_snapshot(open_store(uri)).files.num_rows == 100
