"""A snapshot's tombstones (the remove actions replay still holds), reconciled on first use.

Why lazy: every commit that touches a file must drop that file's older tombstones and add its
own, but only VACUUM, RESTORE, a checkpoint and the reliability checkers read tombstones. A
point DELETE on a deletion-vector table re-adds its file with a new DV, and dropping the keys
from the tombstones was ~7% of its latency. So each new snapshot records the step — the logical
file keys its commits touched and the removes that won — and the steps are folded together, in
one pass over the older table, when someone asks for :attr:`Tombstones.table`.

Folding n steps at once gives the same rows in the same order as n reconciliations, because
dropping keys distributes over concatenation::

    T_n = drop(T_0, U_1 ∪ … ∪ U_n) + Σ_j drop(R_j, U_{j+1} ∪ … ∪ U_n)

and a step's removes are among the keys it touched, so R_j keeps exactly the rows whose key no
later step touched: the last step touching each key is found once (a group-by), not by joining
every later step's keys for every step — one OPTIMIZE of 100k files in a chain would otherwise be
copied and scanned once per earlier step.

Threads may share a snapshot: a value's pending step is one attribute, cleared only after its
table is set, so the size walks need no lock, and a per-value lock keeps two threads from
folding the same value twice (one table's fold never waits on another's).

A chain never grows past :data:`MAX_PENDING` steps: the step that would pass it folds first, so
a table whose checkpoints are off keeps a bounded amount of history.
"""

from __future__ import annotations

import threading
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: steps kept unfolded; the next one folds the chain (one pass, amortized over them)
MAX_PENDING = 64

#: (the value before, the logical-file keys the step touched, the removes that won)
_Step = tuple["Tombstones", pa.Array, pa.Table]


class Tombstones:
    """Immutable: :meth:`then` returns a new value, and :attr:`table` is computed once."""

    __slots__ = ("_table", "_step", "_depth", "_lock")

    def __init__(self, table: pa.Table | None, step: _Step | None = None) -> None:
        self._table = table
        self._step = step
        self._depth = 0 if step is None else step[0]._depth + 1
        self._lock = threading.Lock()

    @classmethod
    def of(cls, table: pa.Table) -> "Tombstones":
        """Tombstones already reconciled (a checkpoint's, an empty table's)."""
        return cls(table)

    def then(self, touched: pa.Array | pa.ChunkedArray, removes: pa.Table) -> "Tombstones":
        """The tombstones after a commit that touched the logical files ``touched`` (their
        keys, unique) and whose winning removes are ``removes``."""
        if not len(touched):
            return self
        if isinstance(touched, pa.ChunkedArray):
            touched = touched.combine_chunks()
        step = Tombstones(None, (self, touched, removes))
        if step._depth >= MAX_PENDING:
            step.table  # noqa: B018 - fold now: the chain stays bounded
        return step

    @property
    def pending(self) -> int:
        """Steps not folded yet (0 once :attr:`table` was read)."""
        return 0 if self._table is not None else self._depth

    @property
    def table(self) -> pa.Table:
        """The reconciled remove actions (``REMOVE_SCHEMA``), newest reference per logical file."""
        folded = self._table
        if folded is not None:
            return folded
        with self._lock:
            if self._table is None:
                self._table = self._fold()
                self._step = None  # after the table: a walker that finds no step finds the table
                self._depth = 0
            return self._table

    def _walk(self) -> tuple[list[_Step], pa.Table]:
        """The pending steps, oldest first, and the folded table they start from."""
        steps: list[_Step] = []
        node = self
        while True:
            step = node._step
            if step is None:
                table = node._table
                assert table is not None
                steps.reverse()
                return steps, table
            steps.append(step)
            node = step[0]

    def rows_bound(self) -> int:
        """At least as many rows as :attr:`table` has, without folding (a cache's size estimate)."""
        steps, base = self._walk()
        return base.num_rows + sum(removes.num_rows for _, _, removes in steps)

    def bytes_bound(self) -> int:
        """Roughly the bytes the value holds: the base table and each pending step's keys and
        removes (what a cache must count until the chain folds)."""
        steps, base = self._walk()
        return base.get_total_buffer_size() + sum(
            touched.get_total_buffer_size() + removes.get_total_buffer_size() for _, touched, removes in steps)

    def _fold(self) -> pa.Table:
        from .replay import compact, drop_keys, file_keys  # replay builds the steps: imported when folding

        steps, base = self._walk()
        if len(steps) == 1:
            _, touched, removes = steps[0]
            return compact(pa.concat_tables([drop_keys(base, touched), removes]))
        touched_all = pa.concat_arrays([touched for _, touched, _ in steps])
        parts = [drop_keys(base, touched_all)]
        if any(removes.num_rows for _, _, removes in steps):
            step_of = np.repeat(np.arange(len(steps), dtype=np.int64), [len(touched) for _, touched, _ in steps])
            last = (pa.table({"key": touched_all, "step": step_of})
                    .group_by("key", use_threads=False).aggregate([("step", "max")]))
            for j, (_, _, removes) in enumerate(steps):
                if not removes.num_rows:
                    continue
                at = pc.index_in(file_keys(removes), value_set=last.column("key"))
                final = pc.take(last.column("step_max"), at)
                keep = pc.fill_null(pc.equal(final, j), True)  # a key no step touched cannot occur: kept
                parts.append(removes if pc.all(keep).as_py() else removes.filter(keep))
        return compact(pa.concat_tables(parts))

    def __reduce__(self) -> tuple[Callable[[pa.Table], "Tombstones"], tuple[pa.Table]]:
        # pickled folded: a Spark task or another process gets the table, not the chain
        return (Tombstones.of, (self.table,))
