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

A chain never grows past :data:`MAX_PENDING` steps: the step that would pass it folds first, so
a table whose checkpoints are off keeps a bounded amount of history.
"""

from __future__ import annotations

import threading
from typing import Callable

import pyarrow as pa

#: steps kept unfolded; the next one folds the chain (one pass, amortized over them)
MAX_PENDING = 64

#: folding clears a chain that another thread may be walking (a snapshot shared by threads):
#: walks and folds take this lock; reading a folded table does not
_CHAIN_LOCK = threading.Lock()


class Tombstones:
    """Immutable: :meth:`then` returns a new value, and :attr:`table` is computed once."""

    __slots__ = ("_table", "_parent", "_touched", "_removes", "_depth")

    def __init__(self, table: pa.Table | None, parent: "Tombstones | None" = None,
                 touched: pa.Array | None = None, removes: pa.Table | None = None) -> None:
        self._table = table
        self._parent = parent
        self._touched = touched
        self._removes = removes
        self._depth = 0 if parent is None else parent._depth + 1

    @classmethod
    def of(cls, table: pa.Table) -> "Tombstones":
        """Tombstones already reconciled (a checkpoint's, an empty table's)."""
        return cls(table)

    def then(self, touched: pa.Array, removes: pa.Table) -> "Tombstones":
        """The tombstones after a commit that touched the logical files ``touched`` (their
        keys, unique) and whose winning removes are ``removes``."""
        if not len(touched):
            return self
        step = Tombstones(None, self, touched, removes)
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
        with _CHAIN_LOCK:
            if self._table is None:
                self._table = self._fold()
                self._parent = self._touched = self._removes = None  # the chain behind is no longer needed
                self._depth = 0
            return self._table

    def rows_bound(self) -> int:
        """At least as many rows as :attr:`table` has, without folding (a cache's size estimate)."""
        with _CHAIN_LOCK:
            node, rows = self, 0
            while node._table is None:
                rows += node._removes.num_rows  # type: ignore[union-attr]
                node = node._parent  # type: ignore[assignment]
            return rows + node._table.num_rows

    def bytes_bound(self) -> int:
        """Roughly the bytes :attr:`table` holds (buffers of the base and of each step), unfolded."""
        with _CHAIN_LOCK:
            node, size = self, 0
            while node._table is None:
                size += node._removes.get_total_buffer_size()  # type: ignore[union-attr]
                node = node._parent  # type: ignore[assignment]
            return size + node._table.get_total_buffer_size()

    def _fold(self) -> pa.Table:
        steps: list[Tombstones] = []
        node = self
        while node._table is None:
            steps.append(node)
            node = node._parent  # type: ignore[assignment]
        steps.reverse()  # oldest first
        base = node._table
        from .replay import compact, drop_keys  # replay builds the steps: imported when folding
        if len(steps) == 1:
            only = steps[0]
            return compact(pa.concat_tables([drop_keys(base, only._touched), only._removes]))
        # keys touched by each step and every later one, newest first: what each older part loses
        later: list[pa.Array | None] = [None] * len(steps)
        seen: pa.Array | None = None
        for i in range(len(steps) - 1, -1, -1):
            later[i] = seen
            touched = steps[i]._touched
            seen = touched if seen is None else pa.concat_arrays([seen, touched])
        assert seen is not None
        parts = [drop_keys(base, seen)]
        for step, after in zip(steps, later):
            removes = step._removes
            parts.append(removes if after is None or not removes.num_rows else drop_keys(removes, after))
        return compact(pa.concat_tables(parts))

    def __reduce__(self) -> tuple[Callable[[pa.Table], "Tombstones"], tuple[pa.Table]]:
        # pickled folded: a Spark task or another process gets the table, not the chain
        return (Tombstones.of, (self.table,))
