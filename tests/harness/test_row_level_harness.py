"""The harness on merge-on-read tables: the row-level matrix is in the built-in scenarios and can
fail, the ``row_ids`` checker passes real histories and catches broken ones, and a stress run on
a deletion-vector + row-tracking table passes every checker."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

import deltatx
from deltatx import errors
from deltatx.conflicts import checker as checker_module
from deltatx.harness import builtin_scenarios, run_scenario, run_stress
from deltatx.harness import faults
from deltatx.harness.row_ids import check_row_ids
from deltatx.harness.row_level_matrix import ROW_LEVEL_PROPERTIES, row_level_matrix
from deltatx.harness.stress import ROW_LEVEL_PROPERTIES as STRESS_PROPERTIES

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


def test_the_row_level_matrix_is_built_in_with_its_rules():
    names = {s.name for s in builtin_scenarios()}
    cells = {s.name: s for s in row_level_matrix()}
    assert set(cells) <= names and len(cells) == 2 * 2 * (3 * 3 * 2 + 3 * 2 + 3 + 2 + 2)
    assert STRESS_PROPERTIES == ROW_LEVEL_PROPERTIES
    other = cells["row-level WriteSerializable unpartitioned: UPDATE vs concurrent DELETE of another row of the same file"]
    same = cells["row-level Serializable partitioned: MERGE vs concurrent UPDATE of the same row"]
    assert other.expect is None and other.equivalent_to == "concurrent-first"
    assert same.expect is errors.ConcurrentDeleteDeleteException
    assert cells["row-level WriteSerializable unpartitioned: DELETE vs concurrent blind INSERT matching its "
                 "predicate"].expect is None
    assert cells["row-level Serializable unpartitioned: DELETE vs concurrent blind INSERT matching its "
                 "predicate"].expect is errors.ConcurrentAppendException
    for name in ("OPTIMIZE vs concurrent OPTIMIZE of the same files", "OPTIMIZE vs concurrent blind INSERT",
                 "blind INSERT vs concurrent OPTIMIZE"):
        cell = cells[f"row-level Serializable partitioned: {name}"]
        assert cell.expect is None and cell.equivalent_to == "concurrent-first"


def test_a_row_level_scenario_fails_when_rows_are_compared_by_file(monkeypatch):
    """Without the row-level check, two DELETEs of different rows of one file conflict (Delta OSS):
    the scenario that states they commit must then report a problem."""
    scenario = next(s for s in row_level_matrix() if "DELETE vs concurrent DELETE of another row" in s.name)
    assert run_scenario(scenario).ok
    checks = [(n, (lambda txn, winner, loaded=None: txn) if n == "row_level" else c) for n, c in checker_module.CHECKS]
    monkeypatch.setattr(checker_module, "CHECKS", checks)
    result = run_scenario(scenario)
    assert not result.ok and result.outcome in ("ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException")


def _table(uri: str) -> deltatx.Table:
    table = deltatx.create_table(uri, SCHEMA, properties=ROW_LEVEL_PROPERTIES)
    table.append(pa.table({"id": list(range(20)), "v": [0] * 20}, schema=SCHEMA))
    table.append(pa.table({"id": list(range(20, 30)), "v": [0] * 10}, schema=SCHEMA))
    return deltatx.Table(uri)


def test_row_ids_checker_passes_updates_merges_compactions_and_purges(table_uri):
    table = _table(table_uri)
    table.update("id = 3", set={"v": "1"})
    table.delete("id = 4")
    table.merge(pa.table({"id": [5, 99], "v": [7, 7]}), on="t.id = s.id").when_matched_update_all() \
        .when_not_matched_insert_all().execute()
    table.optimize()
    table.delete("id = 6")
    table.reorg(purge=True)
    assert check_row_ids(table_uri) == []


def test_row_ids_checker_catches_ids_reused_by_a_broken_writer(table_uri):
    with faults.reuse_row_ids():
        _table(table_uri)  # the second append starts at id 0 again
    found = check_row_ids(table_uri)
    assert any(a.message.startswith("collide") for a in found), found
    assert all(a.checker == "row_ids" for a in found)


def test_row_ids_checker_catches_a_rewrite_that_loses_ids(table_uri):
    table = _table(table_uri)
    with faults.forget_row_ids():
        table.update("id = 3", set={"v": "1"})  # the new row takes a fresh id: its identity changed
    found = check_row_ids(table_uri)
    assert any(a.message.startswith("changed: the row with id=3") for a in found), found


def test_row_ids_checker_catches_an_id_given_to_another_row(table_uri):
    """A hand-written commit re-adds a file under another baseRowId: ids move and get reused."""
    table = _table(table_uri)
    log = os.path.join(table_uri, "_delta_log")
    version = table.version + 1
    first = table.files().sort_by("baseRowId").to_pylist()[1]  # ids 20..29
    add = {k: v for k, v in first.items() if v is not None}
    add["partitionValues"] = dict(add["partitionValues"])
    add["baseRowId"] = 5
    remove = {"path": first["path"], "deletionTimestamp": 1, "dataChange": False}
    with open(os.path.join(log, f"{version:020d}.json"), "w") as fh:
        fh.write(json.dumps({"commitInfo": {"operation": "BROKEN"}}) + "\n")
        fh.write(json.dumps({"remove": remove}) + "\n")
        fh.write(json.dumps({"add": add}) + "\n")
    messages = [a.message for a in check_row_ids(table_uri)]
    assert any(m.startswith("collide") for m in messages)
    assert any(m.startswith("changed") for m in messages)
    assert any(m.startswith("reused") for m in messages)


def test_row_ids_checker_names_the_commit_that_takes_the_watermark_back(table_uri):
    """A hand-written commit lowers rowIdHighWaterMark (what the soak's compaction did): the
    checker names that commit, and the collision the next append causes."""
    table = _table(table_uri)
    log = os.path.join(table_uri, "_delta_log")
    version = table.version + 1
    domain = {"domain": "delta.rowTracking", "configuration": json.dumps({"rowIdHighWaterMark": 5}), "removed": False}
    with open(os.path.join(log, f"{version:020d}.json"), "w") as fh:
        fh.write(json.dumps({"commitInfo": {"operation": "BROKEN"}}) + "\n")
        fh.write(json.dumps({"domainMetadata": domain}) + "\n")
    deltatx.Table(table_uri).append(pa.table({"id": [500], "v": [0]}))
    found = [(a.message, a.version) for a in check_row_ids(table_uri)]
    assert any(m.startswith("watermark: the row-id high watermark went from") and v == version for m, v in found), found
    assert any(m.startswith("watermark: row id") and v == version for m, v in found), found
    assert any(m.startswith("collide: row id 6") and v == version + 1 for m, v in found), found


@pytest.mark.parametrize("isolation", ["Serializable", "WriteSerializable"])
def test_stress_on_a_row_level_table_passes_every_checker(tmp_path, isolation):
    report = run_stress(str(tmp_path / "t"), processes=3, ops=12, workload="mixed", isolation=isolation, seed=7,
                        properties=STRESS_PROPERTIES)
    assert report.ok, json.dumps(report.to_dict(), indent=1)[:4000]
    table = deltatx.Table(str(tmp_path / "t"))
    assert table.properties["delta.enableDeletionVectors"] == "true"
    assert table.files()["baseRowId"].null_count == 0
    assert report.commits > 0


def test_stress_row_ids_checker_catches_a_writer_that_reuses_ids(tmp_path):
    report = run_stress(str(tmp_path / "t"), processes=2, ops=4, workload="append", seed=3,
                        properties=STRESS_PROPERTIES, worker_init="deltatx.harness.faults:install_reuse_row_ids")
    assert not report.ok
    assert any(a.checker == "row_ids" for a in report.anomalies)


def test_a_broken_log_of_a_row_tracking_table_is_reported_not_raised(tmp_path):
    """The row-id checker replays every version; a commit missing below a checkpoint made it
    raise CorruptLogError out of check_history (the CLI exited 2 with no report, where it exits 1
    naming the anomalies)."""
    import glob

    from deltatx.harness import check_history

    uri = str(tmp_path / "t")
    run = run_stress(uri, processes=2, ops=6, workload="append", history_dir=str(tmp_path / "h"), check=False,
                     properties=STRESS_PROPERTIES)
    deltatx.Table(uri).checkpoint()
    os.remove(sorted(glob.glob(f"{uri}/_delta_log/*.json"))[3])
    anomalies = check_history(run.history, uri, isolation="WriteSerializable")
    checkers = {a.checker for a in anomalies}
    assert "no_lost_commit" in checkers and "row_ids" in checkers
    assert any("version 3 is missing" in a.message for a in anomalies)
