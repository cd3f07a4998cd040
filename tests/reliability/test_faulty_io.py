"""R3, storage faults: a single writer runs a mixed workload through ``FaultyFileSystem``
(random OSErrors on reads and writes, before or after their effect). Every operation must
either succeed or raise a DeltaTxError / OSError; afterwards, reopened without faults, the table
must hold every acknowledged commit exactly once at its version, at most the failed operations
whose commit landed before the error was reported, and rows equal to the model of the ops in
the log — at every version.
"""

from __future__ import annotations

import uuid

import fsspec
import pytest

import deltatx
from crash_helpers import SCHEMA, TABLE_PROPERTIES, apply_model, plan_workload, run_op
from deltatx.errors import DeltaTxError
from deltatx.txnlog.store import MemoryLogStore
from faulty_fs import FaultyFileSystem, InjectedIOError

SEEDS = range(8)


def rows_of(table: "deltatx.Table") -> list[tuple]:
    t = table.to_arrow()
    return sorted(zip(t["id"].to_pylist(), t["part"].to_pylist(), t["payload"].to_pylist()))


def run_faulty_workload(seed: int, read_rate: float, write_rate: float, scope: str = "all", n_ops: int = 16):
    memory = fsspec.filesystem("memory")
    root = f"/deltatx-faulty/{uuid.uuid4().hex}"
    uri = f"memory://{root}"
    deltatx.create_table(uri, SCHEMA, partition_by=["part"], properties=TABLE_PROPERTIES)
    faulty = FaultyFileSystem(memory, seed=seed, read_rate=read_rate, write_rate=write_rate, scope=scope)
    store = MemoryLogStore(uri, faulty, root)
    plan = plan_workload(seed, n_ops=n_ops)
    acks: dict[int, dict] = {}
    failed: dict[int, BaseException] = {}
    table = None
    for op in plan:
        try:
            table = deltatx.Table(uri, _store=store) if table is None else table.refresh()
            acks[op["i"]] = run_op(table, op)
        except (DeltaTxError, OSError) as exc:  # anything else fails the test
            failed[op["i"]] = exc
            table = None
    faulty.enabled = False
    return uri, plan, acks, failed, faulty


def verify(uri: str, plan: list[dict], acks: dict[int, dict], failed: dict[int, BaseException]) -> None:
    table = deltatx.Table(uri)  # plain memory store: no faults
    history = sorted(table.history(), key=lambda h: h["version"])
    assert [h["version"] for h in history] == list(range(table.version + 1))
    log_ops = {h["version"]: int(h["userMetadata"][3:]) for h in history[1:]}
    order = list(log_ops.values())
    assert order == sorted(set(order)), f"an op was committed twice or out of order: {order}"
    for i, ack in acks.items():
        if ack["committed"]:
            assert log_ops.get(ack["version"]) == i, f"acknowledged op {i} is not at version {ack['version']}"
        else:
            assert i not in order
    unexplained = [i for i in order if i not in acks and i not in failed]
    assert not unexplained, unexplained
    by_index = {op["i"]: op for op in plan}
    state: dict = {}
    for version in range(1, table.version + 1):
        state = apply_model(state, by_index[log_ops[version]])
        got = rows_of(deltatx.Table(uri, version=version))
        assert got == sorted(state.values()), f"version {version} rows differ from the model"


def check_seed(seed: int, **faults) -> None:
    uri, plan, acks, failed, faulty = run_faulty_workload(seed, **faults)
    assert faulty.injected, "no fault was injected: the test proves nothing"
    verify(uri, plan, acks, failed)  # run_faulty_workload lets only DeltaTxError / OSError through


@pytest.mark.parametrize("seed", SEEDS)
def test_read_faults_give_errors_never_corruption(seed):
    check_seed(seed, read_rate=0.05, write_rate=0.0)


@pytest.mark.parametrize("seed", SEEDS)
def test_data_file_faults_give_errors_never_corruption(seed):
    check_seed(seed, read_rate=0.15, write_rate=0.2, scope="data")


@pytest.mark.filterwarnings("ignore::deltatx.errors.PostCommitHookWarning")  # a failed checkpoint only warns
def test_log_write_faults_give_errors_never_corruption():
    """Also the lost response: the commit landed, the writer got an OSError (it must keep its files)."""
    for seed in SEEDS:
        check_seed(seed, read_rate=0.04, write_rate=0.04, scope="log")


def test_faults_are_reproducible_from_the_seed():
    runs = [run_faulty_workload(3, read_rate=0.05, write_rate=0.05, scope="data") for _ in range(2)]
    assert sorted(runs[0][2]) == sorted(runs[1][2])  # the same ops succeeded
    assert [(k, w) for k, _, w in runs[0][4].injected] == [(k, w) for k, _, w in runs[1][4].injected]


def test_the_wrapper_injects_before_and_after_the_effect():
    memory = fsspec.filesystem("memory")
    root = f"/deltatx-faulty/{uuid.uuid4().hex}"
    fs = FaultyFileSystem(memory, seed=1, read_rate=0.0, write_rate=1.0)
    outcomes = []
    for i in range(12):
        path = f"{root}/f{i}"
        with pytest.raises(InjectedIOError):
            fs.pipe_file(path, b"x")
        outcomes.append(memory.exists(path))
    assert True in outcomes and False in outcomes  # some writes landed despite the error
