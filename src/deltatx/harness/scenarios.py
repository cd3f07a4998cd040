"""Scenarios: declarative concurrency cases with an expected outcome, and the built-in matrix.

A :class:`Scenario` says, in this order::

    setup        commits made before the transaction begins
    reads        what the transaction reads (predicates) right after it begins
    concurrent   commits by other writers while it is open (each its own transaction)
    transaction  the transaction's own actions (staged on its pinned snapshot)
    expect       None (it commits) or the exception class its commit must raise

under ``isolation`` (the table's ``delta.isolationLevel``). :func:`run_scenario` runs it on
``memory://`` (default) or a local path and also checks the *state*: after a failed commit only
the setup and concurrent commits are visible; after a successful one, with ``equivalent_to`` set,
the table equals running the operations one at a time in that order on a fresh table.

Steps are harness :class:`~deltatx.harness.ops.Operation` objects, or plain callables
(``fn(table)`` for setup/concurrent commits, ``fn(tx)`` for the transaction's actions), so users
write their own cases in a few lines::

    Scenario("my case", setup=[Append(rows)], concurrent=[Delete("part = 1")],
             transaction=[Update("part = 1", {"value": "value + 1"})],
             expect=errors.ConcurrentAppendException)

:func:`builtin_scenarios` is the isolation-level / write-conflict matrix (shared seed 003:
INSERT, UPDATE/DELETE/MERGE, OPTIMIZE against each other, same and different partitions, both
levels), the seed's worked examples, and the row-level matrix on deletion-vector tables
(:mod:`.row_level_matrix`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa

from .. import errors
from ..tables.table import Table, create_table
from ..tables.transaction import Transaction
from .ops import Append, Delete, Merge, Operation, Optimize, Read, SetProperties, Update
from .serial import describe_difference, sorted_rows

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("value", pa.int64())])

TableStep = Operation | Callable[[Table], Any]
TxnStep = Operation | Callable[[Transaction], Any]
CONCURRENT_FIRST = "concurrent-first"
TRANSACTION_FIRST = "transaction-first"


@dataclass
class Scenario:
    """One concurrency case (see the module docstring)."""

    name: str
    transaction: Sequence[TxnStep]
    concurrent: Sequence[TableStep] = ()
    reads: Sequence[str | None | Operation] = ()
    setup: Sequence[TableStep] = ()
    expect: type[BaseException] | None = None
    isolation: str = "WriteSerializable"
    equivalent_to: str | None = None
    schema: pa.Schema = SCHEMA
    partition_by: Sequence[str] = ("part",)
    properties: Mapping[str, str] = field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        if self.equivalent_to not in (None, CONCURRENT_FIRST, TRANSACTION_FIRST):
            raise ValueError(f"equivalent_to must be {CONCURRENT_FIRST!r}, {TRANSACTION_FIRST!r} or None")

    @property
    def expected_outcome(self) -> str:
        return "commits" if self.expect is None else self.expect.__name__


@dataclass
class ScenarioResult:
    scenario: Scenario
    outcome: str  # "committed" or the exception class name
    error: BaseException | None = None
    version: int | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def assert_ok(self) -> None:
        """Raise AssertionError describing every problem (for pytest)."""
        if self.problems:
            raise AssertionError(f"scenario {self.scenario.name!r}: " + "; ".join(self.problems))


def _commit_step(table: Table, step: TableStep) -> None:
    table.refresh()
    if isinstance(step, Operation):
        step.commit(table)
    else:
        step(table)


def _stage_step(tx: Transaction, step: TxnStep) -> None:
    if isinstance(step, Operation):
        step.stage(tx)
    else:
        step(tx)


def _new_table(scenario: Scenario, uri: str, storage_options: dict[str, Any] | None) -> Table:
    props = {"delta.isolationLevel": scenario.isolation, **dict(scenario.properties)}
    return create_table(uri, scenario.schema, partition_by=list(scenario.partition_by), properties=props,
                        storage_options=storage_options)


def _serial_rows(scenario: Scenario, order: Sequence[str]) -> pa.Table:
    """Rows after setup and then the given groups run one at a time on a fresh memory table."""
    table = _new_table(scenario, f"memory://deltatx-scenario-serial/{uuid.uuid4().hex}", None)
    for step in scenario.setup:
        _commit_step(table, step)
    for group in order:
        if group == "concurrent":
            for step in scenario.concurrent:
                _commit_step(table, step)
        else:
            table.refresh()
            with table.transaction() as tx:
                for r in scenario.reads:
                    _stage_step(tx, r if isinstance(r, Operation) else Read(r))
                for step in scenario.transaction:
                    _stage_step(tx, step)
    return sorted_rows(table.refresh().to_arrow())


def run_scenario(scenario: Scenario, uri: str | None = None,
                 storage_options: dict[str, Any] | None = None) -> ScenarioResult:
    """Run ``scenario`` on a fresh table at ``uri`` (default: a new ``memory://`` location)."""
    uri = uri or f"memory://deltatx-scenarios/{uuid.uuid4().hex}"
    table = _new_table(scenario, uri, storage_options)
    for step in scenario.setup:
        _commit_step(table, step)
    mine = Table(uri, storage_options=storage_options)
    tx = mine.transaction()
    for r in scenario.reads:
        _stage_step(tx, r if isinstance(r, Operation) else Read(r))
    for step in scenario.concurrent:
        _commit_step(Table(uri, storage_options=storage_options), step)
    result = ScenarioResult(scenario, outcome="committed")
    try:
        for step in scenario.transaction:
            _stage_step(tx, step)
        commit = tx.commit()
        result.version = commit.version
    except Exception as exc:
        tx.abort()
        result.outcome, result.error = type(exc).__name__, exc
    expect = scenario.expect
    if expect is None and result.error is not None:
        result.problems.append(f"expected the commit to succeed, it raised {result.outcome}: {result.error}")
    elif expect is not None and not isinstance(result.error, expect):
        result.problems.append(f"expected {expect.__name__}, got {result.outcome}")
    actual = sorted_rows(Table(uri, storage_options=storage_options).to_arrow())
    if result.error is not None:
        want = _serial_rows(scenario, ["concurrent"])
        if not actual.equals(want):
            result.problems.append("a failed commit left visible effects: " + describe_difference(actual, want))
    elif scenario.equivalent_to is not None:
        order = (["concurrent", "transaction"] if scenario.equivalent_to == CONCURRENT_FIRST
                 else ["transaction", "concurrent"])
        want = _serial_rows(scenario, order)
        if not actual.equals(want):
            result.problems.append(f"the table is not the {scenario.equivalent_to} serial result: "
                                   + describe_difference(actual, want))
    return result


def run_scenarios(scenarios: Sequence[Scenario], **kwargs: Any) -> list[ScenarioResult]:
    return [run_scenario(s, **kwargs) for s in scenarios]


# --------------------------------------------------------------------------------------------
# The built-in matrix (shared/seeds/003): INSERT, UPDATE / DELETE / MERGE, OPTIMIZE
# --------------------------------------------------------------------------------------------


def rows(ids: Sequence[int], part: int, value: int = 0) -> dict[str, list]:
    ids = list(ids)
    return {"id": ids, "part": [part] * len(ids), "value": [value] * len(ids)}


def matrix_setup() -> list[Operation]:
    """Two small files in each of partitions 1 and 2 (so OPTIMIZE has something to compact)."""
    return [Append(rows(range(p * 100 + k * 5, p * 100 + k * 5 + 5), p)) for p in (1, 2) for k in (0, 1)]


def matrix_operation(kind: str, part: int) -> Operation:
    """The matrix's operations on one partition. Inserted ids overlap the DELETE / UPDATE ranges,
    so statistics cannot separate them: the partition decides, as in the seed's matrix."""
    base = part * 100
    if kind == "INSERT":
        return Append(rows(range(base, base + 3), part, value=7))
    if kind == "DELETE":
        return Delete(f"part = {part} AND id < {base + 3}")
    if kind == "UPDATE":
        return Update(f"part = {part} AND id >= {base + 5}", {"value": "value + 1"})
    if kind == "MERGE":
        return Merge(rows([base + 1, base + 50], part, value=9), match={"part": part})
    if kind == "OPTIMIZE":
        return Optimize(f"part = {part}")
    raise ValueError(f"unknown matrix operation {kind!r}")


MATRIX_KINDS = ("INSERT", "DELETE", "UPDATE", "MERGE", "OPTIMIZE")
_CLASS = {"INSERT": "INSERT", "DELETE": "DML", "UPDATE": "DML", "MERGE": "DML", "OPTIMIZE": "OPTIMIZE"}


def matrix_expectation(current: str, winner: str, level: str, same_partition: bool
                       ) -> tuple[type[BaseException] | None, str | None]:
    """(exception or None, equivalent serial order) for the transaction ``current`` committing
    after ``winner``, with partition-level conflict detection — the seed's table:

    - INSERT (a blind append) never conflicts; disjoint partitions never conflict;
    - UPDATE/DELETE/MERGE vs a concurrent INSERT in its partition: Serializable conflicts,
      WriteSerializable commits and the INSERT is serialized after it;
    - UPDATE/DELETE/MERGE vs UPDATE/DELETE/MERGE/OPTIMIZE in its partition conflicts at both levels
      (the winner added files where it read: ConcurrentAppendException);
    - OPTIMIZE vs INSERT never conflicts; OPTIMIZE vs a rewrite of its files conflicts
      (ConcurrentDeleteReadException).
    """
    c, w = _CLASS[current], _CLASS[winner]
    if not same_partition or c == "INSERT":
        return None, CONCURRENT_FIRST
    if c == "OPTIMIZE":
        return (None, CONCURRENT_FIRST) if w == "INSERT" else (errors.ConcurrentDeleteReadException, None)
    if w == "INSERT" and level == "WriteSerializable":
        return None, TRANSACTION_FIRST
    return errors.ConcurrentAppendException, None


def seed_matrix(levels: Sequence[str] = ("Serializable", "WriteSerializable")) -> list[Scenario]:
    """Every cell of the matrix: levels × transaction op × concurrent op × same/other partition."""
    out = []
    for level in levels:
        for current in MATRIX_KINDS:
            for winner in MATRIX_KINDS:
                for same in (True, False):
                    exc, order = matrix_expectation(current, winner, level, same)
                    out.append(Scenario(
                        name=f"{level}: {current} vs concurrent {winner} ({'same' if same else 'other'} partition)",
                        setup=matrix_setup(),
                        concurrent=[matrix_operation(winner, 1 if same else 2)],
                        transaction=[matrix_operation(current, 1)],
                        expect=exc, equivalent_to=order, isolation=level,
                        properties={"deltatx.conflictDetection.useStats": "false"},
                    ))
    return out


def seed_examples() -> list[Scenario]:
    """The seed's worked examples and the rules stated beside the matrix."""
    out = []
    for level in ("Serializable", "WriteSerializable"):
        out.append(Scenario(
            name=f"{level}: long DELETE vs concurrent INSERT of rows it would delete",
            description="txn1 (DELETE) starts, txn2 inserts data txn1 deletes and commits first. Serializable: "
                        "txn1 fails. WriteSerializable: txn1 commits and readers see txn2's rows.",
            setup=matrix_setup(), concurrent=[Append(rows([100, 101], 1, value=42))],
            transaction=[Delete("part = 1 AND id < 103")], isolation=level,
            expect=errors.ConcurrentAppendException if level == "Serializable" else None,
            equivalent_to=None if level == "Serializable" else TRANSACTION_FIRST,
        ))
        out.append(Scenario(
            name=f"{level}: a metadata change fails a concurrent blind INSERT",
            setup=matrix_setup(), concurrent=[SetProperties({"deltatx.example": "1"})],
            transaction=[Append(rows([1], 1))], isolation=level, expect=errors.MetadataChangedException,
        ))
        out.append(Scenario(
            name=f"{level}: two writers with the same application id",
            setup=matrix_setup(), concurrent=[Append(rows([2], 1), app_id="stream-7", app_version=1)],
            transaction=[Append(rows([1], 1), app_id="stream-7", app_version=1)], isolation=level,
            expect=errors.ConcurrentTransactionException,
        ))
        out.append(Scenario(
            name=f"{level}: partitioning separates UPDATE and DELETE on different dates",
            setup=matrix_setup(), concurrent=[Delete("part = 2 AND id < 203")],
            transaction=[Update("part = 1", {"value": "value + 1"})], isolation=level,
            equivalent_to=CONCURRENT_FIRST,
        ))
        out.append(Scenario(
            name=f"{level}: a read of the partition, then a concurrent DELETE there",
            setup=matrix_setup(), reads=["part = 1"], concurrent=[Delete("part = 1 AND id = 104")],
            transaction=[Append(rows([150], 1))], isolation=level, expect=errors.ConcurrentAppendException,
            properties={"deltatx.conflictDetection.useStats": "false"},
        ))
    return out


def builtin_scenarios() -> list[Scenario]:
    """The seed matrix, the seed's examples and the row-level matrix (deletion-vector tables):
    what users can run to verify deltatx's rules."""
    from .row_level_matrix import row_level_matrix

    return seed_matrix() + seed_examples() + row_level_matrix()
