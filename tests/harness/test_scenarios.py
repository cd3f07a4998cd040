"""Scenarios: the built-in seed matrix passes, users can write their own, and a scenario fails
when the rule it states is broken."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

import deltatx
from deltatx import errors
from deltatx.harness import (
    Append,
    Delete,
    Optimize,
    Scenario,
    Update,
    builtin_scenarios,
    run_scenario,
    seed_matrix,
)
from deltatx.harness import faults
from deltatx.harness.scenarios import matrix_setup, rows

BUILTIN = builtin_scenarios()


@pytest.mark.parametrize("scenario", BUILTIN, ids=[s.name for s in BUILTIN])
def test_builtin_scenario(scenario):
    run_scenario(scenario).assert_ok()


def test_seed_matrix_has_every_cell_with_the_seed_rules():
    cells = {s.name: s for s in seed_matrix()}
    assert len(cells) == 2 * 5 * 5 * 2
    # the three rules of the seed's table that differ between the levels and operations
    ws = cells["WriteSerializable: DELETE vs concurrent INSERT (same partition)"]
    s = cells["Serializable: DELETE vs concurrent INSERT (same partition)"]
    assert ws.expect is None and ws.equivalent_to == "transaction-first"
    assert s.expect is errors.ConcurrentAppendException
    assert cells["Serializable: INSERT vs concurrent UPDATE (same partition)"].expect is None
    assert cells["WriteSerializable: OPTIMIZE vs concurrent MERGE (same partition)"].expect is \
        errors.ConcurrentDeleteReadException
    assert cells["Serializable: OPTIMIZE vs concurrent INSERT (same partition)"].expect is None
    assert all(c.expect is None for n, c in cells.items() if "other partition" in n)


def test_user_scenario_with_operations_and_callables(tmp_path):
    """A user's own case, on a local path, mixing harness operations and plain callables."""

    def read_then_bump(tx):
        seen = tx.read(where="part = 2")
        tx.update("part = 2", set={"value": f"value + {seen.num_rows}"})

    scenario = Scenario(
        name="update of part 2 vs a concurrent delete in part 1",
        setup=matrix_setup(),
        reads=["part = 2"],
        concurrent=[lambda table: table.delete(where="part = 1 AND id < 103")],
        transaction=[read_then_bump],
        expect=None,
        equivalent_to="concurrent-first",
    )
    result = run_scenario(scenario, uri=str(tmp_path / "t"))
    result.assert_ok()
    assert result.outcome == "committed" and result.version == 6
    values = deltatx.Table(str(tmp_path / "t")).to_arrow(where="part = 2")["value"].to_pylist()
    assert values == [10] * 10


def test_scenario_reports_a_wrong_expectation():
    scenario = Scenario(
        name="claims a conflict that the rules do not give",
        setup=matrix_setup(),
        concurrent=[Append(rows([500], 2))],
        transaction=[Delete("part = 1 AND id < 102")],
        expect=errors.ConcurrentAppendException,
    )
    result = run_scenario(scenario)
    assert not result.ok and result.outcome == "committed"
    with pytest.raises(AssertionError, match="expected ConcurrentAppendException, got committed"):
        result.assert_ok()


def test_scenario_state_check_catches_a_commit_path_that_ignores_conflicts():
    """With the conflict check disabled, the Serializable UPDATE-vs-UPDATE cell must fail."""
    cell = next(s for s in seed_matrix(["Serializable"]) if s.name.startswith(
        "Serializable: UPDATE vs concurrent UPDATE (same"))
    with faults.ignore_conflicts():
        result = run_scenario(cell)
    assert not result.ok
    assert "expected ConcurrentAppendException, got committed" in result.problems[0]


def test_scenario_catches_a_lost_update_through_its_serial_state_check():
    """Expecting success with an equivalent serial order: a lost update shows in the rows."""
    scenario = Scenario(
        name="two increments of the same rows, the second must see the first",
        setup=matrix_setup(),
        concurrent=[Update("part = 1", {"value": "value + 1"})],
        transaction=[Update("part = 1", {"value": "value + 10"})],
        expect=None, equivalent_to="concurrent-first", isolation="WriteSerializable",
    )
    assert run_scenario(scenario).outcome == "ConcurrentAppendException"
    with faults.ignore_conflicts():
        result = run_scenario(scenario)
    assert result.outcome == "committed"
    assert any("not the concurrent-first serial result" in p for p in result.problems), result.problems


def test_equivalent_to_must_name_an_order():
    with pytest.raises(ValueError, match="equivalent_to"):
        Scenario(name="x", transaction=[], equivalent_to="whatever")


def test_optimize_of_a_partition_with_one_file_commits_nothing():
    uri = f"memory://harness-optimize/{uuid.uuid4().hex}"
    t = deltatx.create_table(uri, pa.schema([("id", pa.int64()), ("part", pa.int32())]), partition_by=["part"])
    t.append(pa.table({"id": [1, 2], "part": pa.array([1, 2], pa.int32())}))
    result = t.optimize(where="part = 1")
    assert result.version == 1 and result.attempts == 0
    assert t.files().num_rows == 2


def test_harness_optimize_of_one_file_is_a_noop():
    result = run_scenario(Scenario(name="optimize one file", setup=[Append(rows([1], 1))],
                                   transaction=[Optimize("part = 1")], equivalent_to="transaction-first"))
    result.assert_ok()
    assert result.version == 1  # nothing to commit: the read version
