"""Stress workloads: the table each one needs and the seeded stream of operations per writer.

Three workloads, all on tables partitioned by ``part``:

``mixed``   rows ``(id, part, value)``; append / delete / update / merge / optimize /
            set_properties in fixed proportions. Every inserted row gets a globally unique
            ``id`` (writer, sequence number, row), so the checkers can follow each row.
``bank``    accounts ``(id, part, balance)``; read-modify-write transfers between two accounts.
            The total balance never changes in any serial execution.
``append``  blind appends only: never a conflict, at any isolation level.

A writer's operations depend only on (seed, writer index, sequence number) and on which of its
own earlier operations committed, so a run's *workload* is reproducible from its seed (the
interleaving across processes is not; that is what the interleaving harness is for).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa

from .. import create_table
from ..errors import DeltaTxError
from ..isolation import validate_isolation_property
from .errors import HarnessError
from .history import COMMITTED, OpRecord, execute
from .ops import Append, Delete, Merge, Operation, Optimize, SetProperties, Transfer, Update

WORKLOADS = ("mixed", "bank", "append")

MIXED_SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("value", pa.int64())])
BANK_SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("balance", pa.int64())])

MIXED_PARTITIONS = 4
SETUP_ROWS_PER_PARTITION = 10
BANK_ACCOUNTS = 16
BANK_PARTITIONS = 8
BANK_OPENING_BALANCE = 100

#: relative frequency of each operation in the mixed workload
MIXED_WEIGHTS: dict[str, int] = {
    "append": 40, "delete": 12, "update": 18, "merge": 15, "optimize": 12, "set_properties": 3,
}

def row_id(writer: int, seq: int, i: int) -> int:
    """Unique id of row ``i`` written by ``writer`` in its operation ``seq`` (setup rows are < 1e9)."""
    return (writer + 1) * 1_000_000_000 + seq * 1_000 + i


@dataclass
class Workload:
    """A table layout, its initial rows, and a factory of per-writer operation generators."""

    name: str
    schema: pa.Schema
    partition_by: list[str]
    setup: Callable[[], list[Operation]]
    generator: Callable[[int, int], "OpGenerator"]
    check_bank: bool = False


class OpGenerator:
    """Per-writer stream of operations; ``observe`` feeds back how each one ended."""

    def __init__(self, writer: int, seed: int):
        self.writer = writer
        self.rng = random.Random(f"deltatx-stress:{seed}:{writer}")

    def next(self, seq: int) -> Operation:
        raise NotImplementedError

    def observe(self, record: OpRecord) -> None:
        """Called after each operation with its record."""


class AppendGenerator(OpGenerator):
    partitions = MIXED_PARTITIONS

    def _rows(self, seq: int, part: int, n: int, offset: int = 0) -> dict[str, list]:
        return {"id": [row_id(self.writer, seq, offset + i) for i in range(n)], "part": [part] * n,
                "value": [self.rng.randrange(100) for _ in range(n)]}

    def next(self, seq: int) -> Operation:
        part = self.rng.randrange(self.partitions)
        return Append(self._rows(seq, part, self.rng.randint(1, 5)))


class MixedGenerator(AppendGenerator):
    def __init__(self, writer: int, seed: int):
        super().__init__(writer, seed)
        # ids this writer committed, per partition, each once (an ordered set: a MERGE source
        # that repeats an id would rightly fail Delta's cardinality check)
        self.own_ids: dict[int, dict[int, None]] = {p: {} for p in range(self.partitions)}
        self.kinds = list(MIXED_WEIGHTS)
        self.weights = [MIXED_WEIGHTS[k] for k in self.kinds]

    def next(self, seq: int) -> Operation:
        kind = self.rng.choices(self.kinds, self.weights)[0]
        p = self.rng.randrange(self.partitions)
        if kind == "append":
            return Append(self._rows(seq, p, self.rng.randint(1, 5)))
        if kind == "delete":
            return Delete(f"part = {p} AND value < {self.rng.randint(1, 15)}")
        if kind == "update":
            return Update(f"part = {p} AND value >= {self.rng.randint(60, 99)}", {"value": "value - 40"})
        if kind == "merge":
            mine = list(self.own_ids[p])
            existing = self.rng.sample(mine, min(2, len(mine)))
            fresh = [row_id(self.writer, seq, 500 + i) for i in range(self.rng.randint(1, 2))]
            ids = existing + fresh
            rows = {"id": ids, "part": [p] * len(ids), "value": [self.rng.randrange(100) for _ in ids]}
            return Merge(rows, match={"part": p})
        if kind == "optimize":
            return Optimize(f"part = {p}")
        return SetProperties({"deltatx.stress.marker": f"w{self.writer}-{seq}"})

    def observe(self, record: OpRecord) -> None:
        if record.outcome == COMMITTED:
            rows = record.op.get("rows") or {}
            by_id = dict(zip(rows.get("id", []), rows.get("part", [])))
            for key in record.rows_written:
                if key in by_id:
                    self.own_ids[by_id[key]][key] = None


class BankGenerator(OpGenerator):
    def next(self, seq: int) -> Operation:
        a, b = self.rng.sample(range(BANK_ACCOUNTS), 2)
        return Transfer(a, b, self.rng.randint(1, 40))


def _mixed_setup() -> list[Operation]:
    ids = list(range(MIXED_PARTITIONS * SETUP_ROWS_PER_PARTITION))
    rng = random.Random("deltatx-stress-setup")
    return [Append({"id": ids, "part": [i // SETUP_ROWS_PER_PARTITION for i in ids],
                    "value": [rng.randrange(100) for _ in ids]})]


def _bank_setup() -> list[Operation]:
    ids = list(range(BANK_ACCOUNTS))
    return [Append({"id": ids, "part": [i % BANK_PARTITIONS for i in ids],
                    "balance": [BANK_OPENING_BALANCE] * len(ids)})]


WORKLOAD_DEFINITIONS: dict[str, Workload] = {
    "mixed": Workload("mixed", MIXED_SCHEMA, ["part"], _mixed_setup, MixedGenerator),
    "bank": Workload("bank", BANK_SCHEMA, ["part"], _bank_setup, BankGenerator, check_bank=True),
    "append": Workload("append", MIXED_SCHEMA, ["part"], _mixed_setup, AppendGenerator),
}


def get_workload(name: str) -> Workload:
    try:
        return WORKLOAD_DEFINITIONS[name]
    except KeyError:
        raise HarnessError(f"unknown workload {name!r}; choose one of {', '.join(WORKLOADS)}") from None


def prepare_table(uri: str, workload: str, isolation: str, storage_options: dict[str, Any] | None = None,
                  properties: dict[str, Any] | None = None) -> list[OpRecord]:
    """Create the workload's table at ``uri`` (which must hold none) and commit its initial rows.

    Returns the setup records (writer ``"setup"``); version 0 is the CREATE TABLE.
    """
    spec = get_workload(workload)
    try:
        validate_isolation_property(isolation)
    except DeltaTxError as exc:
        raise HarnessError(str(exc)) from None
    table = create_table(uri, spec.schema, partition_by=spec.partition_by, storage_options=storage_options,
                         properties={"delta.isolationLevel": isolation, **(properties or {})})
    records = []
    for seq, op in enumerate(spec.setup()):
        record = execute(table, op, writer="setup", seq=seq)
        if record.outcome != COMMITTED:
            raise DeltaTxError(f"could not commit the {workload} workload's initial rows: {record.message}")
        records.append(record)
    return records


@dataclass
class WriterSpec:
    """Everything a stress worker process needs (picklable)."""

    index: int
    uri: str
    workload: str
    ops: int | None
    duration_s: float | None
    seed: int
    storage_options: dict[str, Any] = field(default_factory=dict)
    history_path: str = ""
    worker_init: str | None = None
    barrier_timeout_s: float = 120.0

    @property
    def name(self) -> str:
        return f"w{self.index}"
