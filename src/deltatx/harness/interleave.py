"""Interleavings: drive two or more transactions through named phases in an exact global order.

Each transaction runs in its own thread, but only one thread runs at a time. A phases observer
(:mod:`deltatx.phases`) parks a thread whenever it reaches the phase its next scheduled step
names; the scheduler then releases the thread of the next step and waits until that thread
parks again (or finishes). An :class:`Interleaving` is the list of steps ``(txn, phase)``
meaning "``txn`` runs until it *reaches* ``phase``". So::

    A.begin  B.begin  A.attempt_commit  B.attempt_commit  A.published  B.resolve_conflict

pins both snapshots, then A wins the put-if-absent race and B loses it — every time.

Rules that keep a schedule total:

- phases a transaction reaches but that are not its next scheduled step do not stop it;
- if it reaches a phase scheduled *later* for it, the steps in between are ``skipped``;
- if it finishes first, its remaining steps are ``skipped`` (a txn that never conflicts has no
  ``resolve_conflict``); after the last step the transactions finish one at a time, in order.

Nothing sleeps: waits are condition variables with a timeout, and a transaction that does not get
to its step in time raises :class:`InterleavingTimeout` instead of hanging.
:func:`all_orders` enumerates every interleaving of per-transaction phase lists and
:func:`random_orders` draws them reproducibly from a seed (``Interleaving.seed``).
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from .. import phases
from ..tables.table import Table
from .errors import HarnessError, InterleavingTimeout
from .history import COMMITTED, NOOP, OpRecord, execute
from .ops import Operation

#: the transaction phases an interleaving usually orders
DEFAULT_PHASES: tuple[str, ...] = (
    "begin", "read", "data_files_written", "attempt_commit", "resolve_conflict", "published",
)

Step = tuple[str, str]
TxnBody = Callable[[Table], Any]


def _parse_step(step: str | Sequence[str]) -> Step:
    if isinstance(step, str):
        txn, sep, phase = step.rpartition(".")
        if not sep or not txn:
            raise HarnessError(f"an interleaving step is 'txn.phase', got {step!r}")
        return txn, phase
    txn, phase = step
    return str(txn), str(phase)


@dataclass(frozen=True)
class Interleaving:
    """A global order of ``(txn, phase)`` steps; ``seed`` is set when it was drawn at random."""

    steps: tuple[Step, ...]
    seed: int | None = None

    @classmethod
    def of(cls, steps: "Interleaving | str | Sequence[str | Sequence[str]]") -> "Interleaving":
        """From an Interleaving, ``"A.begin B.begin ..."``, or a list of ``"A.begin"`` / tuples."""
        if isinstance(steps, Interleaving):
            return steps
        if isinstance(steps, str):
            steps = steps.split()
        return cls(tuple(_parse_step(s) for s in steps))

    @classmethod
    def random(cls, phases_by_txn: Mapping[str, Sequence[str]], seed: int) -> "Interleaving":
        """A uniformly random merge of the per-transaction phase lists, reproducible from ``seed``."""
        rng = random.Random(f"deltatx-interleaving:{seed}")
        remaining = {t: list(ps) for t, ps in phases_by_txn.items()}
        steps: list[Step] = []
        while any(remaining.values()):
            names = [t for t, ps in remaining.items() if ps]
            txn = rng.choices(names, [len(remaining[t]) for t in names])[0]
            steps.append((txn, remaining[txn].pop(0)))
        return cls(tuple(steps), seed)

    def phases_of(self, txn: str) -> list[str]:
        return [p for t, p in self.steps if t == txn]

    def __str__(self) -> str:
        text = " ".join(f"{t}.{p}" for t, p in self.steps)
        return f"{text} (seed {self.seed})" if self.seed is not None else text


def all_orders(phases_by_txn: Mapping[str, Sequence[str]]) -> Iterator[Interleaving]:
    """Every interleaving that keeps each transaction's own phases in order (multinomial count)."""
    names = list(phases_by_txn)
    lists = [list(phases_by_txn[n]) for n in names]

    def merge(pos: list[int], acc: list[Step]) -> Iterator[tuple[Step, ...]]:
        if all(p == len(lst) for p, lst in zip(pos, lists)):
            yield tuple(acc)
            return
        for i, lst in enumerate(lists):
            if pos[i] < len(lst):
                acc.append((names[i], lst[pos[i]]))
                pos[i] += 1
                yield from merge(pos, acc)
                pos[i] -= 1
                acc.pop()

    for steps in merge([0] * len(lists), []):
        yield Interleaving(steps)


def random_orders(phases_by_txn: Mapping[str, Sequence[str]], count: int, seed: int = 0) -> list[Interleaving]:
    """``count`` random interleavings drawn with seeds ``seed, seed+1, ...`` (each reproducible)."""
    return [Interleaving.random(phases_by_txn, seed + i) for i in range(count)]


@dataclass
class InterleavingResult:
    """What happened: steps reached (in order) and skipped, every phase passed, and each txn's end."""

    interleaving: Interleaving
    reached: list[Step] = field(default_factory=list)
    skipped: list[Step] = field(default_factory=list)
    trace: list[Step] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, BaseException] = field(default_factory=dict)

    @property
    def records(self) -> dict[str, OpRecord]:
        """The history records of the transactions given as harness Operations."""
        return {n: r for n, r in self.results.items() if isinstance(r, OpRecord)}

    def outcome(self, txn: str) -> str:
        """``committed`` / ``noop`` / an exception class name / ``returned`` (plain callables)."""
        if txn in self.errors:
            return type(self.errors[txn]).__name__
        result = self.results.get(txn)
        if isinstance(result, OpRecord):
            return result.outcome if result.outcome in (COMMITTED, NOOP) else str(result.error)
        return "returned"

    @property
    def outcomes(self) -> dict[str, str]:
        names = dict.fromkeys([*self.results, *self.errors])
        return {n: self.outcome(n) for n in names}


class _Scheduler:
    """Lets exactly one transaction thread run at a time, from step to step."""

    def __init__(self, names: list[str], interleaving: Interleaving, timeout_s: float):
        self.names = names
        self.steps = list(interleaving.steps)
        self.timeout_s = timeout_s
        self.cond = threading.Condition()
        self.status = ["pending"] * len(self.steps)
        self.own = {n: [i for i, (t, _) in enumerate(self.steps) if t == n] for n in names}
        self.next_own = dict.fromkeys(names, 0)
        self.parked = dict.fromkeys(names, False)
        self.finished = dict.fromkeys(names, False)
        self.releases = dict.fromkeys(names, 0)
        self.thread_names: dict[int, str] = {}
        self.trace: list[Step] = []
        self.reached: list[Step] = []
        self.abandoned = False

    # ---- in the transaction threads ---------------------------------------------------------
    def observe(self, phase: str, **_ctx: Any) -> None:
        name = self.thread_names.get(threading.get_ident())
        if name is None:
            return
        with self.cond:
            self.trace.append((name, phase))
            if self.abandoned:
                return
            own, k = self.own[name], self.next_own[name]
            match = next((m for m in range(k, len(own)) if self.steps[own[m]][1] == phase), None)
            if match is None:
                return  # not scheduled (any more): keep running
            for s in own[k:match]:
                self.status[s] = "skipped"
            self.status[own[match]] = "reached"
            self.reached.append(self.steps[own[match]])
            self.next_own[name] = match + 1
            self._park(name)

    def start(self, name: str) -> None:
        with self.cond:
            self.thread_names[threading.get_ident()] = name
            self._park(name)

    def finish(self, name: str) -> None:
        with self.cond:
            self.finished[name] = True
            self.parked[name] = False
            for s in self.own[name][self.next_own[name]:]:
                self.status[s] = "skipped"
            self.next_own[name] = len(self.own[name])
            self.cond.notify_all()

    def _park(self, name: str) -> None:
        token = self.releases[name]
        self.parked[name] = True
        self.cond.notify_all()
        self.cond.wait_for(lambda: self.releases[name] > token or self.abandoned)
        self.parked[name] = False

    # ---- in the caller's thread -------------------------------------------------------------
    def drive(self) -> None:
        for i, (name, phase) in enumerate(self.steps):
            with self.cond:
                if self.status[i] != "pending":
                    continue
                self._release_and_wait(name, f"step {i + 1} ({name}.{phase})")
        for name in self.names:
            with self.cond:
                while not self.finished[name]:
                    self._release_and_wait(name, f"{name} finishing")

    def _release_and_wait(self, name: str, what: str) -> None:
        self._wait_for(lambda: self.parked[name] or self.finished[name], name, f"{what}: {name} to start")
        if self.finished[name]:
            return
        self.releases[name] += 1
        self.parked[name] = False
        self.cond.notify_all()
        self._wait_for(lambda: self.parked[name] or self.finished[name], name, what)

    def _wait_for(self, predicate: Callable[[], bool], name: str, what: str) -> None:
        if not self.cond.wait_for(predicate, timeout=self.timeout_s):
            last = next((p for t, p in reversed(self.trace) if t == name), "start")
            raise InterleavingTimeout(
                f"waited {self.timeout_s}s for {what}; {name} last reached phase {last!r}. A deadlock, or a "
                f"transaction blocked outside the scheduled phases. Phases so far: {self.trace}"
            )

    def abandon(self) -> None:
        with self.cond:
            self.abandoned = True
            self.cond.notify_all()


def run_interleaving(uri: str, transactions: Mapping[str, Operation | TxnBody],
                     interleaving: Interleaving | str | Sequence[str | Sequence[str]], *,
                     storage_options: dict[str, Any] | None = None, timeout_s: float = 10.0) -> InterleavingResult:
    """Run each transaction in its own thread on its own ``Table(uri)``, in ``interleaving``'s order.

    A transaction is a harness :class:`Operation` (run as one recorded transaction: its
    :class:`OpRecord` is the result) or any ``fn(table)``, whose return value or exception is
    kept. The table must exist; each thread opens it when first released.
    """
    order = Interleaving.of(interleaving)
    names = list(transactions)
    for txn, phase in order.steps:
        if txn not in transactions:
            raise HarnessError(f"interleaving step {txn}.{phase} names no transaction; have {names}")
        if phase not in phases.PHASES:
            raise HarnessError(f"unknown phase {phase!r} in step {txn}.{phase}; phases: {', '.join(phases.PHASES)}")
    scheduler = _Scheduler(names, order, timeout_s)
    result = InterleavingResult(order)

    def body(name: str, txn: Operation | TxnBody) -> None:
        scheduler.start(name)
        try:
            table = Table(uri, storage_options=storage_options)
            if isinstance(txn, Operation):
                result.results[name] = execute(table, txn, writer=name)
            else:
                result.results[name] = txn(table)
        except BaseException as exc:  # kept for the caller to inspect
            result.errors[name] = exc
        finally:
            scheduler.finish(name)

    threads = [threading.Thread(target=body, args=(n, transactions[n]), name=f"deltatx-interleave-{n}", daemon=True)
               for n in names]
    with phases.observe(scheduler.observe):
        for t in threads:
            t.start()
        try:
            scheduler.drive()
        finally:
            scheduler.abandon()
            for t in threads:
                t.join(timeout=timeout_s)
    stuck = [t.name for t in threads if t.is_alive()]
    if stuck:
        raise InterleavingTimeout(f"transaction threads {stuck} did not finish within {timeout_s}s")
    result.reached = list(scheduler.reached)
    result.skipped = [s for s, st in zip(order.steps, scheduler.status) if st == "skipped"]
    result.trace = list(scheduler.trace)
    return result
