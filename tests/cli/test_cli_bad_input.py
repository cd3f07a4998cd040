"""Bad input reaches the CLI as one line on stderr and exit code 2, never a traceback: a data
file of another type, a bad property or deletion vector left in the log, bad option values."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltatx
from deltatx.cli import EXIT_USAGE, main
from deltatx.txnlog.snapshot_cache import SNAPSHOTS

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.float64())])


def _table(uri: str, **kwargs) -> deltatx.Table:
    t = deltatx.create_table(uri, SCHEMA, **kwargs)
    t.append(pa.table({"id": [1, 2], "v": [1.0, 2.0]}, schema=SCHEMA))
    t.append(pa.table({"id": [3], "v": [3.0]}, schema=SCHEMA))
    return t


def _edit_log(uri: str, version: int, edit) -> None:
    path = os.path.join(uri, "_delta_log", f"{version:020d}.json")
    with open(path) as fh:
        actions = [json.loads(line) for line in fh]
    for action in actions:
        edit(action)
    with open(path, "w") as fh:
        fh.write("\n".join(json.dumps(a) for a in actions) + "\n")
    SNAPSHOTS.clear()


def _one_line_error(capsys, argv: list[str], expected: str) -> None:
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert expected in err, err


def test_optimize_over_a_data_file_of_another_type(table_uri, capsys):
    _table(table_uri)
    with open(os.path.join(table_uri, "_delta_log", f"{1:020d}.json")) as fh:
        path = next(json.loads(line)["add"]["path"] for line in fh if '"add"' in line)
    pq.write_table(pa.table({"id": [1.5, 2.0], "v": [1.0, 2.0]}), os.path.join(table_uri, path))
    SNAPSHOTS.clear()
    _one_line_error(capsys, ["optimize", table_uri], f"SchemaMismatchError: column 'id' of data file")
    assert deltatx.Table(table_uri).version == 2


def test_optimize_with_a_bad_integer_property_in_the_log(table_uri, capsys):
    _table(table_uri)

    def edit(action):
        if "metaData" in action:
            action["metaData"]["configuration"]["delta.targetFileSize"] = "big"

    _edit_log(table_uri, 0, edit)
    _one_line_error(capsys, ["optimize", table_uri], "InvalidPropertyError: the table's delta.targetFileSize='big'")


def test_describe_a_table_whose_partition_column_is_not_in_the_schema(table_uri, capsys):
    _table(table_uri)

    def edit(action):
        if "metaData" in action:
            action["metaData"]["partitionColumns"] = ["nope"]

    _edit_log(table_uri, 0, edit)
    _one_line_error(capsys, ["describe", table_uri], "InvalidTableError")


def test_vacuum_with_a_bad_dv_path_or_retention(table_uri, capsys):
    t = deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]),
                             properties={"delta.enableDeletionVectors": "true"})
    t.append(pa.table({"id": list(range(6000))}))
    deltatx.Table(table_uri).delete("id % 3 = 0")
    _one_line_error(capsys, ["vacuum", table_uri, "--retention-hours", "inf", "--dry-run"], "VacuumRetentionError")

    def edit(action):
        if "add" in action and action["add"].get("deletionVector"):
            action["add"]["deletionVector"]["pathOrInlineDv"] = "~" * 20

    _edit_log(table_uri, 2, edit)
    _one_line_error(capsys, ["vacuum", table_uri, "--dry-run", "--retention-hours", "0", "--no-enforce-retention"],
                    "CorruptDeletionVectorError")


def test_changes_where_a_literal_past_bigint(table_uri, capsys):
    _table(table_uri, properties={"delta.enableChangeDataFeed": "true"})
    assert main(["changes", table_uri, "--from", "0", "--where", "id = 99999999999999999999999"]) == 0
    _one_line_error(capsys, ["changes", table_uri, "--from", "0", "--where", "id = " + "9" * 39], "PredicateError")


def test_describe_shows_a_bad_isolation_level_and_properties_set_fixes_it(table_uri, capsys):
    """describe is what a user runs to find what is wrong: it shows the bad value and the way out,
    and the way out it names works."""
    _table(table_uri)

    def edit(action):
        if "metaData" in action:
            action["metaData"]["configuration"]["delta.isolationLevel"] = "serializable"

    _edit_log(table_uri, 0, edit)
    assert main(["describe", table_uri, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["isolation_level"]
    assert shown.startswith("invalid:") and "--set delta.isolationLevel=" in shown
    assert main(["properties", table_uri, "--set", "delta.isolationLevel=Serializable"]) == 0
    capsys.readouterr()
    SNAPSHOTS.clear()
    assert deltatx.Table(table_uri).isolation_level.value == "Serializable"


def test_out_of_range_numbers_are_usage_errors_not_tracebacks(tmp_path, capsys):
    uri = str(tmp_path / "t")
    _table(uri)
    assert main(["vacuum", uri, "--retention-hours", "1e308", "--dry-run"]) == 0  # keeps everything
    capsys.readouterr()
    _one_line_error(capsys, ["optimize", uri, "--target-size", str(2 ** 63)], "below 2^63")
    for argv in (["stress", str(tmp_path / "s"), "--duration", "inf"],
                 ["stress", str(tmp_path / "s"), "--duration", "0"]):
        assert main(argv) == EXIT_USAGE  # argparse's usage error
        err = capsys.readouterr().err
        assert "seconds > 0" in err and "Traceback" not in err, err
    assert deltatx.Table(uri).version == 2
    with pytest.raises(deltatx.errors.InvalidPropertyError, match="below 2"):
        deltatx.Table(uri).optimize(target_size=2 ** 63)


def test_bank2_refuses_an_explicit_isolation_level(tmp_path, capsys):
    argv = ["stress", str(tmp_path / "bank"), "--workload", "bank2", "--catalog",
            f"sqlite:///{tmp_path}/catalog.db", "--isolation", "WriteSerializable"]
    assert main(argv) == EXIT_USAGE
    assert "does not take --isolation" in capsys.readouterr().err
    assert not (tmp_path / "bank").exists()


def test_a_conflict_exits_3_naming_its_class_once(tmp_path, capsys, monkeypatch):
    from deltatx.errors import ConcurrentAppendException
    import deltatx.cli as cli

    uri = str(tmp_path / "t")
    _table(uri)

    def lose(args):
        raise ConcurrentAppendException("files were added", version=7, operation="WRITE")

    monkeypatch.setitem(cli.COMMANDS, "optimize", lose)
    assert main(["optimize", uri]) == cli.EXIT_CONFLICT == 3
    err = capsys.readouterr().err
    assert err.count("ConcurrentAppendException") == 1 and "version 7" in err


def test_version_flag(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"deltatx {deltatx.__version__}"


def test_values_with_control_characters_cannot_drive_the_terminal(tmp_path, capsys):
    """A value holding ESC would start a terminal escape sequence in the human tables: shown as
    ``\\x1b`` instead (``--json`` keeps the value as it is)."""
    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    t = deltatx.create_table(uri, schema, properties={"delta.enableChangeDataFeed": "true"})
    t.append(pa.table({"id": [1], "name": ["\x1b[31mred\x07"]}, schema=schema))
    t.delete("name = '\x1b[31mred\x07'")
    for argv in (["changes", uri, "--from", "1", "--to", "99"], ["history", uri]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out, argv
        if argv[0] == "changes":
            assert "\\x1b" in out and "\\x07" in out and "1..2:" in out  # written out; the range as read
    assert main(["changes", uri, "--from", "1", "--json"]) == 0
    assert "\\u001b[31mred\\u0007" in capsys.readouterr().out
