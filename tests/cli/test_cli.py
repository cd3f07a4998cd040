"""The ``deltatx`` command line, called in-process through ``main([...])`` (plus one run of the
installed console script): outputs, ``--json`` documents and exit codes, including the one-line
errors for a bad URI, a missing table and a bad property value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from tablefiles import age_files, data_files

import deltatx
from deltatx.cli import EXIT_ANOMALY, EXIT_OK, EXIT_USAGE, main
from deltatx.errors import CorruptDataFileError, InvalidArgumentError

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("name", pa.string())])
REPO = Path(__file__).resolve().parents[2]


def rows(ids: list[int], part: int) -> pa.Table:
    return pa.table({"id": ids, "part": [part] * len(ids), "name": [f"n{i}" for i in ids]}, schema=SCHEMA)


@pytest.fixture
def table(table_uri) -> deltatx.Table:
    """Versions 0..3: create (partitioned, one property), then three one-file appends."""
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"], properties={"delta.appendOnly": "false"})
    t.append(rows([1, 2], 1))
    t.append(rows([3], 1))
    t.append(rows([4, 5, 6], 2))
    return t


def run_json(capsys, *argv: str) -> object:
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    return json.loads(out)


def run_error(capsys, *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE, (out, err)
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err


# ----------------------------------------------------------------------------------- history
def test_history_json_newest_first_with_limit(capsys, table):
    history = run_json(capsys, "history", table.uri)
    assert [h["version"] for h in history] == [3, 2, 1, 0]
    assert [h["operation"] for h in history] == ["WRITE", "WRITE", "WRITE", "CREATE TABLE"]
    limited = run_json(capsys, "history", table.uri, "--limit", "2")
    assert [h["version"] for h in limited] == [3, 2]


def test_history_human_table(capsys, table):
    assert main(["history", table.uri]) == EXIT_OK
    out = capsys.readouterr().out
    assert "CREATE TABLE" in out and out.count("WRITE") == 3
    assert "mode=Append" in out and "numOutputRows=3" in out


def test_history_rejects_a_non_positive_limit(capsys, table):
    assert main(["history", table.uri, "--limit", "0"]) == EXIT_USAGE
    assert "positive integer" in capsys.readouterr().err


# ----------------------------------------------------------------------------------- describe
def test_describe_json(capsys, table):
    info = run_json(capsys, "describe", table.uri)
    assert info["version"] == 3
    assert info["partition_columns"] == ["part"]
    assert [f["name"] for f in info["schema"]] == ["id", "part", "name"]
    assert info["schema"][0]["type"] == "int64"
    assert info["properties"] == {"delta.appendOnly": "false"}
    assert info["isolation_level"] == "WriteSerializable"
    files = table.refresh().files()
    assert info["num_files"] == files.num_rows == 3
    assert info["size_bytes"] == sum(files["size"].to_pylist()) > 0
    assert info["protocol"] == {"minReaderVersion": 1, "minWriterVersion": 2}


def test_describe_human(capsys, table):
    assert main(["describe", table.uri]) == EXIT_OK
    out = capsys.readouterr().out
    for text in ("isolation level", "WriteSerializable", "partitioned by", "reader 1, writer 2",
                 "delta.appendOnly", "Schema", "int64", "string"):
        assert text in out, text


def test_describe_on_memory_table_with_storage_option(capsys, memory_uri):
    deltatx.create_table(memory_uri, SCHEMA).append(rows([1], 1))
    info = run_json(capsys, "describe", memory_uri, "--storage-option", "fsync=false")
    assert info["version"] == 1 and info["num_files"] == 1


# ----------------------------------------------------------------------------------- properties
def test_properties_show_and_set(capsys, table):
    shown = run_json(capsys, "properties", table.uri)
    assert shown == {"version": 3, "committed": False, "properties": {"delta.appendOnly": "false"}}
    changed = run_json(capsys, "properties", table.uri, "--set", "delta.checkpointInterval=5",
                       "--set", "delta.isolationLevel=Serializable")
    assert changed["committed"] is True and changed["version"] == 4
    assert changed["properties"]["delta.checkpointInterval"] == "5"
    reopened = deltatx.Table(table.uri)
    assert reopened.version == 4 and reopened.properties["delta.isolationLevel"] == "Serializable"
    assert str(reopened.isolation_level) == "Serializable"
    assert main(["properties", table.uri]) == EXIT_OK
    assert "delta.checkpointInterval" in capsys.readouterr().out


def test_properties_bad_value_is_one_line_exit_2_and_commits_nothing(capsys, table):
    err = run_error(capsys, "properties", table.uri, "--set", "delta.isolationLevel=serializable")
    assert "InvalidPropertyError" in err and "did you mean 'Serializable'" in err
    assert deltatx.Table(table.uri).version == 3


def test_properties_malformed_set_argument(capsys, table):
    assert main(["properties", table.uri, "--set", "no-equals-sign"]) == EXIT_USAGE
    assert "KEY=VALUE" in capsys.readouterr().err
    assert deltatx.Table(table.uri).version == 3


def test_properties_unset_removes_keys_in_one_commit(capsys, table):
    run_json(capsys, "properties", table.uri, "--set", "user.a=1", "--set", "user.b=2")
    changed = run_json(capsys, "properties", table.uri, "--unset", "user.a", "--unset", "DELTA.APPENDONLY")
    assert changed == {"version": 5, "committed": True, "properties": {"user.b": "2"}}
    assert deltatx.Table(table.uri).history(1)[0]["operation"] == "UNSET TBLPROPERTIES"


def test_properties_unset_a_missing_key_fails_unless_if_exists(capsys, table):
    err = run_error(capsys, "properties", table.uri, "--unset", "user.missing")
    assert "InvalidPropertyError" in err and "'user.missing'" in err and "pass --if-exists" in err
    assert deltatx.Table(table.uri).version == 3
    skipped = run_json(capsys, "properties", table.uri, "--unset", "user.missing", "--if-exists")
    assert skipped == {"version": 3, "committed": False, "properties": {"delta.appendOnly": "false"}}
    assert main(["properties", table.uri, "--unset", "user.missing", "--if-exists"]) == EXIT_OK
    assert "nothing changed" in capsys.readouterr().out
    removed = run_json(capsys, "properties", table.uri, "--unset", "user.missing", "--unset", "delta.appendOnly",
                       "--if-exists")
    assert removed == {"version": 4, "committed": True, "properties": {}}


@pytest.mark.parametrize("argv, message", [
    (["--set", "user.a=1", "--unset", "user.b"], "--set and --unset cannot be combined"),
    (["--if-exists"], "--if-exists only goes with --unset"),
    (["--set", "user.a=1", "--if-exists"], "--if-exists only goes with --unset"),
])
def test_properties_conflicting_options_are_usage_errors(capsys, table, argv, message):
    err = run_error(capsys, "properties", table.uri, *argv)
    assert message in err
    assert deltatx.Table(table.uri).version == 3


def test_properties_unset_a_refused_key_is_one_line_exit_2(capsys, table):
    err = run_error(capsys, "properties", table.uri, "--unset", "delta.minWriterVersion")
    assert "InvalidPropertyError" in err and "never downgrades the protocol" in err
    assert main(["properties", table.uri, "--unset", ""]) == EXIT_USAGE
    assert "property name" in capsys.readouterr().err
    assert deltatx.Table(table.uri).version == 3


# ----------------------------------------------------------------------------------- optimize
def test_optimize_compacts_small_files(capsys, table):
    result = run_json(capsys, "optimize", table.uri, "--where", "part = 1")
    assert result["committed"] is True and result["version"] == 4
    assert result["metrics"]["numRemovedFiles"] == 2 and result["metrics"]["numAddedFiles"] == 1
    reopened = deltatx.Table(table.uri)
    assert reopened.files().num_rows == 2
    assert sorted(reopened.to_arrow()["id"].to_pylist()) == [1, 2, 3, 4, 5, 6]


def test_optimize_with_nothing_to_compact(capsys, table):
    assert main(["optimize", table.uri, "--where", "part = 2"]) == EXIT_OK  # one file: nothing to do
    assert "no (nothing to compact)" in capsys.readouterr().out
    assert deltatx.Table(table.uri).version == 3


def test_optimize_bad_predicate(capsys, table):
    err = run_error(capsys, "optimize", table.uri, "--where", "no_such_column = 1")
    assert "PredicateError" in err
    assert deltatx.Table(table.uri).version == 3


# ----------------------------------------------------------------------------------- vacuum
def test_vacuum_dry_run_then_real(capsys, monkeypatch, table):
    table.overwrite(rows([9], 1), where="part = 1")  # tombstones the two part=1 files
    age_files(table.uri, 2)
    # VACUUM's clock, a minute ahead: the fresh tombstones are certainly older than a 0-hour retention
    monkeypatch.setattr("deltatx.tables.ops.vacuum.now_ms", lambda: time.time() * 1000 + 60_000)
    dry = run_json(capsys, "vacuum", table.uri, "--retention-hours", "0", "--dry-run", "--no-enforce-retention")
    assert dry["dry_run"] is True and dry["num_files"] == 2
    assert all(Path(table.uri, f).exists() for f in dry["files"])
    assert main(["vacuum", table.uri, "--retention-hours", "0", "--no-enforce-retention"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "deleted 2 file(s)" in out
    assert not any(Path(table.uri, f).exists() for f in dry["files"])
    assert sorted(deltatx.Table(table.uri).to_arrow()["id"].to_pylist()) == [4, 5, 6, 9]


def test_vacuum_short_retention_is_refused_without_override(capsys, table):
    table.overwrite(rows([9], 1), where="part = 1")  # files a 0-hour VACUUM would delete
    age_files(table.uri, 2)
    before = data_files(table.uri)
    err = run_error(capsys, "vacuum", table.uri, "--retention-hours", "0")
    assert "VacuumRetentionError" in err
    assert data_files(table.uri) == before


# ----------------------------------------------------------------------------------- cleanup-metadata
def test_cleanup_metadata_dry_run_then_real(capsys, table):
    table.checkpoint()  # version 3: the checkpoint kept
    table.append(rows([7], 2))  # 4
    log = Path(table.uri, "_delta_log")
    old = time.time() - 40 * 86400
    for f in log.iterdir():
        if f.name[:20].isdigit() and int(f.name[:20]) <= 3:
            os.utime(f, (old, old))
    dry = run_json(capsys, "cleanup-metadata", table.uri, "--dry-run")
    assert dry == {"dry_run": True, "num_files": 3, "files": [f"{v:020d}.json" for v in range(3)], "blocked": None}
    assert all((log / f).exists() for f in dry["files"])
    assert main(["cleanup-metadata", table.uri]) == EXIT_OK
    assert "deleted 3 log file(s)" in capsys.readouterr().out
    assert not any((log / f).exists() for f in dry["files"])
    assert sorted(deltatx.Table(table.uri).to_arrow()["id"].to_pylist()) == [1, 2, 3, 4, 5, 6, 7]


def test_cleanup_metadata_that_cannot_delete_safely_exits_1_and_says_why(capsys, table):
    """Expired files, but a commit after the kept checkpoint is missing: nothing goes, the reason
    is printed (and in --json), and the exit code tells a script (EXIT_ANOMALY)."""
    table.checkpoint()  # version 3
    table.append(rows([7], 2))  # 4
    table.append(rows([8], 2))  # 5
    log = Path(table.uri, "_delta_log")
    old = time.time() - 40 * 86400
    for f in log.iterdir():
        if f.name[:20].isdigit() and int(f.name[:20]) <= 3:
            os.utime(f, (old, old))
    (log / f"{4:020d}.json").rename(log.parent / "moved-away.json")  # a gap after the checkpoint
    before = sorted(p.name for p in log.iterdir())
    assert main(["cleanup-metadata", table.uri, "--json"]) == EXIT_ANOMALY
    result = json.loads(capsys.readouterr().out)
    assert result["num_files"] == 0 and "commit 4 is missing" in result["blocked"]
    assert main(["cleanup-metadata", table.uri]) == EXIT_ANOMALY
    assert "nothing could be deleted: " in capsys.readouterr().out
    assert sorted(p.name for p in log.iterdir()) == before


# ----------------------------------------------------------------------------------- checkpoint
def test_checkpoint(capsys, table):
    result = run_json(capsys, "checkpoint", table.uri)
    assert result == {"version": 3, "checkpoint": "00000000000000000003.checkpoint.parquet"}
    log = Path(table.uri, "_delta_log")
    assert (log / result["checkpoint"]).exists() and (log / "_last_checkpoint").exists()
    assert main(["checkpoint", table.uri]) == EXIT_OK
    assert "checkpoint written at version 3" in capsys.readouterr().out


# ----------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("command", ["history", "describe", "properties", "optimize", "vacuum", "checkpoint"])
def test_missing_table_is_one_line_exit_2(capsys, tmp_path, command):
    err = run_error(capsys, command, str(tmp_path / "nothing-here"))
    assert "TableNotFoundError" in err and "no Delta table" in err


def test_bad_uri_is_one_line_exit_2(capsys, tmp_path):
    err = run_error(capsys, "describe", "nosuchscheme://bucket/table")
    assert "cannot open 'nosuchscheme://bucket/table'" in err and "nosuchscheme" in err
    a_file = tmp_path / "plain-file"
    a_file.write_text("not a directory")
    err = run_error(capsys, "history", str(a_file / "table"))
    assert "TableNotFoundError: no Delta table at" in err  # a path under a file holds no table
    err = run_error(capsys, "stress", "nosuchscheme://bucket/table", "--processes", "1", "--ops", "1")
    assert "cannot open 'nosuchscheme://bucket/table'" in err  # exit 2, not the anomaly code


def test_corrupt_log_is_one_line_exit_2(capsys, table):
    Path(table.uri, "_delta_log", "00000000000000000004.json").write_bytes(b'{"add": {"path": \n')
    err = run_error(capsys, "describe", table.uri)
    assert "CorruptLogError" in err and "commit 4" in err


def test_usage_errors(capsys):
    assert main([]) == EXIT_USAGE
    assert main(["frobnicate", "x"]) == EXIT_USAGE
    assert main(["stress", "x", "--workload", "nope"]) == EXIT_USAGE
    assert main(["stress", "x", "--isolation", "SnapshotIsolation"]) == EXIT_USAGE
    assert "invalid choice" in capsys.readouterr().err
    assert main(["--help"]) == EXIT_OK
    assert "history" in capsys.readouterr().out


# ----------------------------------------------------------------------------------- stress
class _Anomaly:
    checker, message = "no_lost_commit", "commit 7 is missing"


class _Report:
    def __init__(self, anomalies: list) -> None:
        self.anomalies = anomalies
        self.ok = not anomalies
        self.commits, self.commits_per_s, self.attempts = 12, 34.5, 15
        self.conflicts_by_class = {"ConcurrentAppendException": 3}

    def to_dict(self) -> dict:
        return {"ok": self.ok, "commits": self.commits, "attempts": self.attempts,
                "conflicts_by_class": self.conflicts_by_class,
                "anomalies": [{"checker": a.checker, "message": a.message} for a in self.anomalies]}


def _fake_harness(monkeypatch, anomalies: list) -> list[dict]:
    """Replace run_stress with a recorder (the real one is exercised below): checks the wiring."""
    import deltatx.harness as harness

    calls: list[dict] = []

    def fake_run_stress(uri, **kwargs):
        calls.append({"uri": uri, **kwargs})
        if kwargs["progress"] is not None:
            kwargs["progress"](1, 2)
            kwargs["progress"](2, 2)
        return _Report(anomalies)

    monkeypatch.setattr(harness, "run_stress", fake_run_stress)
    return calls


def test_stress_row_level_flag_creates_a_dv_and_row_tracking_table(capsys, monkeypatch, tmp_path):
    from deltatx.harness.stress import ROW_LEVEL_PROPERTIES

    calls = _fake_harness(monkeypatch, [])
    assert main(["stress", str(tmp_path / "t"), "--ops", "2", "--row-level"]) == EXIT_OK
    assert calls[0]["properties"] == ROW_LEVEL_PROPERTIES


def test_stress_arguments_and_report(capsys, monkeypatch, tmp_path):
    calls = _fake_harness(monkeypatch, [])
    code = main(["stress", str(tmp_path / "t"), "--processes", "3", "--ops", "7", "--workload", "bank",
                 "--isolation", "Serializable", "--duration", "1.5", "--seed", "9",
                 "--storage-option", "fsync=false"])
    out = capsys.readouterr().out
    assert code == EXIT_OK
    assert calls == [{"uri": str(tmp_path / "t"), "processes": 3, "ops": 7, "workload": "bank",
                      "isolation": "Serializable", "duration_s": 1.5, "storage_options": {"fsync": "false"},
                      "seed": 9, "progress": calls[0]["progress"], "properties": None}]
    assert callable(calls[0]["progress"])
    assert "34.5" in out and "ConcurrentAppendException" in out and "OK" in out


def test_stress_exits_non_zero_on_anomaly(capsys, monkeypatch, tmp_path):
    _fake_harness(monkeypatch, [_Anomaly()])
    assert main(["stress", str(tmp_path / "t"), "--json"]) == EXIT_ANOMALY
    report = json.loads(capsys.readouterr().out)
    assert report["anomalies"] == [{"checker": "no_lost_commit", "message": "commit 7 is missing"}]
    assert main(["stress", str(tmp_path / "t")]) == EXIT_ANOMALY
    out = capsys.readouterr().out
    assert "ANOMALIES FOUND" in out and "commit 7 is missing" in out


def test_stress_real_run_small(capsys, tmp_path):
    code = main(["stress", str(tmp_path / "t"), "--processes", "2", "--ops", "5", "--workload", "append",
                 "--json"])
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert code == EXIT_OK, (report, err)
    assert report["commits"] >= 10


# ----------------------------------------------------------------------------------- console script
def test_installed_console_script(table):
    script = Path(sys.executable).parent / "deltatx"  # installed beside this interpreter by `make install`
    assert script.exists(), f"the deltatx console script is not installed next to {sys.executable}"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    ok = subprocess.run([str(script), "describe", table.uri, "--json"], capture_output=True, text=True,
                        env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["version"] == 3
    missing = subprocess.run([str(script), "history", table.uri + "-missing"], capture_output=True, text=True,
                             env=env, timeout=120)
    assert missing.returncode == 2
    assert missing.stderr.startswith("deltatx history: error: TableNotFoundError") and "Traceback" not in missing.stderr


@pytest.mark.s3
def test_describe_and_history_on_s3_with_storage_options(capsys, s3_bucket):
    prefix, options = s3_bucket
    uri = f"{prefix}/cli"
    deltatx.create_table(uri, SCHEMA, partition_by=["part"], storage_options=options).append(rows([1, 2], 1))
    flags = ["--storage-option", f"endpoint_url={options['endpoint_url']}", "--storage-option", "key=testing",
             "--storage-option", "secret=testing", "--storage-option", "region=us-east-1"]
    info = run_json(capsys, "describe", uri, *flags)
    assert info["version"] == 1 and info["num_files"] == 1 and info["partition_columns"] == ["part"]
    assert [h["operation"] for h in run_json(capsys, "history", uri, *flags)] == ["WRITE", "CREATE TABLE"]


@pytest.mark.s3
def test_an_unknown_s3_storage_option_is_one_line_exit_2(capsys, s3_bucket):
    """s3fs would take the option and fail at the first request with a TypeError from botocore."""
    prefix, options = s3_bucket
    uri = f"{prefix}/cli"
    deltatx.create_table(uri, SCHEMA, partition_by=["part"], storage_options=options)
    err = run_error(capsys, "describe", uri, "--storage-option", f"endpoint_url={options['endpoint_url']}",
                    "--storage-option", "regoin=us-east-1")
    assert "InvalidArgumentError" in err and "'regoin'" in err and "did you mean 'region'" in err
    with pytest.raises(InvalidArgumentError, match="unknown S3 storage option"):
        deltatx.Table(uri, storage_options={**options, "bogus": "1"})
    assert deltatx.Table(uri, storage_options={**options, "aws_allow_http": "true"}).version == 0
    # deltalake's spelling, upper-case as its users write it, opens the same table
    rs_style = {"AWS_ENDPOINT": options["endpoint_url"], "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    assert deltatx.Table(uri, storage_options=rs_style).version == 0


@pytest.mark.parametrize("word, durable", [("on", True), ("YES", True), ("1", True), ("off", False), ("0", False)])
def test_the_fsync_option_reads_the_usual_words(tmp_path, word, durable):
    from deltatx.txnlog.store import open_store

    assert open_store(str(tmp_path / "t"), {"fsync": word}).fsync is durable


def test_an_fsync_option_that_is_neither_on_nor_off_is_refused(tmp_path):
    with pytest.raises(InvalidArgumentError, match="fsync='maybe' must be true or false"):
        deltatx.create_table(str(tmp_path / "t"), SCHEMA, storage_options={"fsync": "maybe"})
    assert not (tmp_path / "t").exists()


def test_a_data_file_that_is_not_parquet_is_one_line_exit_2(capsys, table):
    for name in data_files(table.uri):
        Path(table.uri, name).write_bytes(b"garbage")
    err = run_error(capsys, "optimize", table.uri)
    assert "CorruptDataFileError" in err and "not a readable Parquet file" in err
    with pytest.raises(CorruptDataFileError, match="not a readable Parquet file"):
        deltatx.Table(table.uri).to_arrow()


def test_bank2_refuses_the_options_it_does_not_use(capsys, tmp_path):
    for extra in (["--duration", "1"], ["--row-level"], ["--isolation", "Serializable"]):
        err = run_error(capsys, "stress", str(tmp_path / "bank"), "--workload", "bank2",
                        "--catalog", f"sqlite:///{tmp_path}/c.db", *extra)
        assert f"does not take {extra[0]}" in err
    assert not os.path.exists(tmp_path / "bank")


def test_history_is_not_cropped_when_piped(capsys, table):
    table.optimize()
    assert main(["history", table.uri]) == EXIT_OK
    out = capsys.readouterr().out
    metrics = table.history(1)[0]["operationMetrics"]
    assert f"numAddedBytes={metrics['numAddedBytes']}" in out and f"numRemovedBytes={metrics['numRemovedBytes']}" in out


def test_an_object_store_client_error_is_a_storage_error_exit_2(capsys, monkeypatch, table):
    """botocore's errors (no credentials, an endpoint that does not answer) are not OSError."""
    from botocore.exceptions import NoCredentialsError

    import deltatx.cli as cli

    def fail(args):
        raise NoCredentialsError()

    monkeypatch.setitem(cli.COMMANDS, "history", fail)
    err = run_error(capsys, "history", table.uri)
    assert "storage error: NoCredentialsError" in err


# ------------------------------------------------------------------ content printed as it is


def test_square_brackets_in_table_content_are_printed_as_they_are(capsys, table_uri):
    """The human output printed predicates, values and properties through rich markup: ``[/]``
    crashed ``history`` and ``changes`` with a traceback, ``[red]alert`` showed as ``alert``."""
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    t = deltatx.create_table(table_uri, schema, properties={"delta.enableChangeDataFeed": "true"})
    t.append(pa.table({"id": [1, 2], "v": ["[/]", "[bold]x[/bold]"]}, schema=schema))
    t.delete("v = '[/]'")
    assert main(["properties", table_uri, "--set", "user.note=[red]alert"]) == EXIT_OK
    assert "[red]alert" in capsys.readouterr().out
    assert main(["history", table_uri]) == EXIT_OK
    assert "[/]" in capsys.readouterr().out.replace("\n", "")
    assert main(["changes", table_uri, "--from", "1"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "[bold]x[/bold]" in out and "[/]" in out


def test_properties_set_says_whether_it_committed(capsys, table):
    before = table.version
    assert run_json(capsys, "properties", table.uri, "--set", "delta.appendOnly=false")["committed"] is False
    assert main(["properties", table.uri, "--set", "delta.appendOnly=false"]) == EXIT_OK
    assert "nothing changed" in capsys.readouterr().out
    assert deltatx.Table(table.uri).version == before
    assert run_json(capsys, "properties", table.uri, "--set", "user.x=1")["committed"] is True


def test_json_output_is_strict_json(capsys, table_uri):
    """NaN, infinities and binary values as Spark's to_json writes them (strings, base64)."""
    schema = pa.schema([("id", pa.int64()), ("f", pa.float64()), ("b", pa.binary())])
    t = deltatx.create_table(table_uri, schema, properties={"delta.enableChangeDataFeed": "true"})
    t.append(pa.table({"id": [1, 2, 3], "f": [float("nan"), float("inf"), -float("inf")],
                       "b": [b"\x00\xff", None, b""]}, schema=schema))
    assert main(["changes", table_uri, "--from", "1", "--json"]) == EXIT_OK
    text = capsys.readouterr().out
    doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    rows_out = sorted(doc["rows"] if isinstance(doc, dict) else doc, key=lambda r: r["id"])
    assert [r["f"] for r in rows_out] == ["NaN", "Infinity", "-Infinity"]
    assert [r["b"] for r in rows_out] == ["AP8=", None, ""]


def test_vacuum_retention_refusal_names_the_command_line_flags(capsys, table):
    err = run_error(capsys, "vacuum", table.uri, "--retention-hours", "1")
    assert "--no-enforce-retention" in err and "enforce_retention_duration" not in err


def test_a_catalog_file_that_is_no_database_is_a_catalog_url_error(capsys, tmp_path):
    bogus = tmp_path / "notadb.txt"
    bogus.write_text("hello, not a database")
    with pytest.raises(deltatx.errors.CatalogURLError, match="cannot be opened as a SQLite database"):
        deltatx.Catalog(f"sqlite:///{bogus}")
    with pytest.raises(deltatx.errors.CatalogURLError, match="is a directory"):
        deltatx.Catalog(f"sqlite:///{tmp_path}")
    err = run_error(capsys, "stress", str(tmp_path / "t"), "--workload", "bank2", "--catalog", f"sqlite:///{bogus}",
                    "--ops", "1", "--processes", "1")
    assert "CatalogURLError" in err


@pytest.mark.parametrize("command", ["stress", "history", "describe"])
def test_an_empty_location_is_a_usage_error_not_the_working_directory(capsys, tmp_path, monkeypatch, command):
    """``deltatx stress ""`` made a table in the current directory."""
    monkeypatch.chdir(tmp_path)
    assert main([command, ""]) == EXIT_USAGE
    assert "the table location is empty" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []
