"""Interleavings: exact, reproducible orders of named phases across transaction threads."""

from __future__ import annotations

import math
import threading
import uuid

import pyarrow as pa
import pytest

import deltatx
from deltatx.harness import (
    Append,
    Delete,
    HarnessError,
    Interleaving,
    InterleavingTimeout,
    Update,
    all_orders,
    check_history,
    random_orders,
    run_interleaving,
)
from deltatx.harness.workloads import prepare_table


def new_table(level: str = "WriteSerializable") -> tuple[str, list]:
    uri = f"memory://harness-interleave/{uuid.uuid4().hex}"
    return uri, prepare_table(uri, "mixed", level)


RACE = "A.begin B.begin A.attempt_commit B.attempt_commit A.published B.resolve_conflict B.published"


def test_commit_race_runs_in_the_scheduled_order_every_time():
    traces = []
    for _ in range(2):
        uri, _ = new_table()
        result = run_interleaving(uri, {"A": Append({"id": [9001], "part": [1], "value": [1]}),
                                        "B": Append({"id": [9002], "part": [1], "value": [2]})}, RACE)
        assert result.outcomes == {"A": "committed", "B": "committed"}
        assert result.records["A"].version == 2 and result.records["B"].version == 3
        assert result.records["B"].attempts == 2, "B lost the race for version 2 once"
        assert result.reached == list(Interleaving.of(RACE).steps)
        assert result.skipped == []
        traces.append(result.trace)
    assert traces[0] == traces[1]
    phases_of_b = [p for t, p in traces[0] if t == "B"]
    assert phases_of_b == ["begin", "data_files_written", "attempt_commit", "resolve_conflict",
                           "attempt_commit", "published"]


def test_a_step_that_never_happens_is_skipped():
    uri, _ = new_table()
    order = "A.begin B.begin B.attempt_commit B.published A.resolve_conflict A.published"
    result = run_interleaving(uri, {"A": Append({"id": [1], "part": [0], "value": [0]}),
                                    "B": Append({"id": [2], "part": [0], "value": [0]})}, order)
    # A pinned its snapshot before B committed, so A's first put loses and it resolves.
    assert result.outcomes == {"A": "committed", "B": "committed"}
    assert ("A", "resolve_conflict") in result.reached
    order = "A.begin A.attempt_commit A.resolve_conflict A.published B.begin B.published"
    result = run_interleaving(uri, {"A": Append({"id": [3], "part": [0], "value": [0]}),
                                    "B": Append({"id": [4], "part": [0], "value": [0]})}, order)
    assert result.skipped == [("A", "resolve_conflict")], "A ran alone: it never lost a race"
    assert result.records["A"].version < result.records["B"].version


@pytest.mark.parametrize("level", ["Serializable", "WriteSerializable"])
def test_delete_vs_blind_append_in_every_order(level):
    """The seed's example, in all 20 orders of three phases each: the outcome follows the order
    (Serializable conflicts exactly when the append commits while the DELETE is open) and every
    history passes the checkers."""
    phases = ["begin", "attempt_commit", "published"]
    orders = list(all_orders({"D": phases, "A": phases}))
    assert len(orders) == math.comb(6, 3)
    outcomes = set()
    for order in orders:
        uri, setup = new_table(level)
        result = run_interleaving(uri, {"D": Delete("part = 1 AND value < 50"),
                                        "A": Append({"id": [7000], "part": [1], "value": [3]})}, order)
        pos = {step: i for i, step in enumerate(order.steps)}
        concurrent = pos[("D", "begin")] < pos[("A", "published")] < pos[("D", "published")]
        expected = "ConcurrentAppendException" if concurrent and level == "Serializable" else "committed"
        assert result.outcome("D") == expected, str(order)
        assert result.outcome("A") == "committed"
        outcomes.add(result.outcome("D"))
        assert check_history(setup + list(result.records.values()), uri) == [], str(order)
    assert len(outcomes) == (2 if level == "Serializable" else 1)


def test_three_transactions_get_versions_in_publish_order():
    uri, _ = new_table()
    ops = {n: Append({"id": [i], "part": [i % 4], "value": [i]}) for i, n in enumerate("ABC", start=100)}
    order = ("A.begin B.begin C.begin C.attempt_commit B.attempt_commit A.attempt_commit "
             "C.published B.published A.published")
    result = run_interleaving(uri, ops, order)
    assert [result.records[n].version for n in "CBA"] == [2, 3, 4]


def test_random_orders_are_reproducible_from_their_seed():
    phases = {"A": ["begin", "read", "attempt_commit", "published"], "B": ["begin", "attempt_commit", "published"]}
    first, again = random_orders(phases, 5, seed=42), random_orders(phases, 5, seed=42)
    assert first == again
    assert [o.seed for o in first] == [42, 43, 44, 45, 46]
    assert Interleaving.random(phases, 44) == first[2]
    assert len({o.steps for o in random_orders(phases, 30, seed=0)}) > 5
    for o in first:  # each keeps every transaction's own phase order
        assert o.phases_of("A") == phases["A"] and o.phases_of("B") == phases["B"]
    assert "(seed 42)" in str(first[0])


def test_random_read_modify_write_orders_keep_the_history_serializable():
    phases = {"A": ["begin", "read", "attempt_commit", "published"],
              "B": ["begin", "read", "attempt_commit", "published"]}
    for order in random_orders(phases, 6, seed=7):
        uri, setup = new_table("Serializable")
        result = run_interleaving(uri, {"A": Update("part = 2 AND value >= 0", {"value": "value + 1"}),
                                        "B": Update("part = 2 AND value >= 0", {"value": "value * 2"})}, order)
        assert sorted(result.outcomes.values()) in (["ConcurrentAppendException", "committed"],
                                                    ["committed", "committed"]), str(order)
        assert check_history(setup + list(result.records.values()), uri) == [], str(order)


def test_plain_callables_are_transactions_too():
    """A reader pinned at its begin does not see a row committed before it reads (snapshot)."""
    uri, _ = new_table()

    def reader(table):
        tx = table.transaction()
        n = tx.read(where="part = 3").num_rows
        tx.abort()
        return n

    def writer(table):
        return table.append(pa.table({"id": [5000], "part": pa.array([3], pa.int32()), "value": [0]})).version

    result = run_interleaving(uri, {"R": reader, "W": writer}, "R.begin W.begin W.published R.read")
    assert result.results == {"W": 2, "R": 10}
    assert result.outcome("R") == "returned"
    assert deltatx.Table(uri).to_arrow(where="part = 3").num_rows == 11


def test_a_blocked_transaction_times_out_instead_of_hanging():
    uri, _ = new_table()
    release = threading.Event()
    try:
        with pytest.raises(InterleavingTimeout, match="A last reached phase 'start'"):
            run_interleaving(uri, {"A": lambda table: release.wait(30),
                                   "B": Append({"id": [1], "part": [0], "value": [0]})},
                             "A.begin B.begin", timeout_s=0.3)
    finally:
        release.set()


def test_bad_steps_are_refused():
    uri, _ = new_table()
    op = {"A": Append({"id": [1], "part": [0], "value": [0]})}
    with pytest.raises(HarnessError, match="names no transaction"):
        run_interleaving(uri, op, "B.begin")
    with pytest.raises(HarnessError, match="unknown phase"):
        run_interleaving(uri, op, "A.commit")
    with pytest.raises(HarnessError, match="txn.phase"):
        Interleaving.of(["begin"])
