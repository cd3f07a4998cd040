"""``deltatx changes URI --from V [--to V]``: the change data feed as a rich table or JSON, and
one-line errors with exit code 2 for bad input (nothing is written either way)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from tablefiles import data_files
from test_cli import run_error

import deltatx
from deltatx.cli import EXIT_OK, EXIT_USAGE, main

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("name", pa.string())])


@pytest.fixture
def table(table_uri) -> deltatx.Table:
    """v0 create (feed on), v1 append ids 1..3, v2 delete id 2, v3 update id 3."""
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"],
                             properties={"delta.enableChangeDataFeed": "true"})
    t.append(pa.table({"id": [1, 2, 3], "part": [1, 1, 2], "name": ["a", "b", "c"]}, schema=SCHEMA))
    t.delete("id = 2")
    t.update("id = 3", {"name": "'C'"})
    return t


def test_changes_json(capsys, table):
    assert main(["changes", table.uri, "--from", "2", "--json"]) == EXIT_OK
    records = json.loads(capsys.readouterr().out)
    got = sorted((r["_commit_version"], r["_change_type"], r["id"], r["name"]) for r in records)
    assert got == [(2, "delete", 2, "b"), (3, "update_postimage", 3, "C"), (3, "update_preimage", 3, "c")]
    assert all(r["_commit_timestamp"].endswith("Z") for r in records)


def test_changes_to_bounds_the_range(capsys, table):
    assert main(["changes", table.uri, "--from", "1", "--to", "1", "--json"]) == EXIT_OK
    records = json.loads(capsys.readouterr().out)
    assert sorted(r["id"] for r in records) == [1, 2, 3]
    assert {r["_change_type"] for r in records} == {"insert"}


def test_changes_human_table(capsys, table):
    assert main(["changes", table.uri, "--from", "2", "--limit", "1"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "versions 2..3: 3 row(s)" in " ".join(out.split())
    assert "_change_type" in out and "(2 more row(s)" in out


@pytest.mark.parametrize("argv, expected", [
    (["--from", "9"], "ChangeDataFeedError"),
    (["--from", "2", "--to", "1"], "ChangeDataFeedError"),
    (["--from", "1", "--where", "nope = 1"], "PredicateError"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(capsys, table, argv, expected):
    before = data_files(table.uri)
    err = run_error(capsys, "changes", table.uri, *argv)
    assert expected in err
    assert deltatx.Table(table.uri).version == 3 and data_files(table.uri) == before


def test_feed_off_names_the_version(capsys, table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(pa.table({"id": [1], "part": [1], "name": ["a"]}, schema=SCHEMA))
    err = run_error(capsys, "changes", table_uri, "--from", "0")
    assert "ChangeDataFeedError" in err and "version 0" in err


def test_usage_errors(capsys, table):
    assert main(["changes", table.uri]) == EXIT_USAGE  # --from is required
    assert main(["changes", table.uri, "--from", "-1"]) == EXIT_USAGE
    assert main(["changes", table.uri, "--from", "x"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--from" in err
