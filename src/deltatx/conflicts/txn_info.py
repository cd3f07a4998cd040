"""What a transaction read and what it wants to write: the input of the conflict checker.

Owns two value types, both immutable so that a rebase is a new value and never a mutation:

- :class:`ReadSet` — what the transaction depended on: the bound predicates it scanned with, the
  paths of the files it read, whether it read the whole table, and the application ids
  (``txn.appId``) it looked up.
- :class:`TransactionInfo` — the read set plus the staged actions (columnar adds/removes and the
  few non-file actions), the read-time metadata/protocol the predicates were bound against, and
  the *effective* isolation level of this commit (after the snapshot-isolation downgrade).

The transaction layer builds these; :func:`deltatx.conflicts.checker.check_commit` consumes one
and returns the rebased one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..isolation import IsolationLevel
from ..txnlog.actions import DomainMetadata, Metadata, Protocol, Txn
from ..txnlog.identity import is_high_water_mark_change

if TYPE_CHECKING:  # the expression model is only needed for annotations here
    from ..expr import Expr
    from .row_level import RowLevelState


@dataclass(frozen=True)
class ReadSet:
    """Everything a transaction's outcome depends on besides its own writes.

    ``predicates`` are *full* bound predicates (partition and data columns); the checker derives
    the partition-only part itself when it works at partition granularity. ``whole_table`` is a
    read with no usable predicate (any concurrent add or remove conflicts with it).
    """

    predicates: tuple["Expr", ...] = ()
    files: frozenset[str] = frozenset()
    whole_table: bool = False
    app_ids: frozenset[str] = frozenset()

    @property
    def depends_on_files(self) -> bool:
        """True if the transaction read table data (so it cannot be a blind append)."""
        return bool(self.predicates) or bool(self.files) or self.whole_table

    @cached_property
    def files_array(self) -> pa.Array:
        """``files`` as an arrow string array, built once, for vectorised path matching."""
        return pa.array(list(self.files), type=pa.string())


def is_blind_append(read_set: ReadSet, removes: pa.Table) -> bool:
    """Delta's rule: a commit is a blind append if its only file actions are adds and it read nothing.

    Non-file actions (metaData, txn, domains) do not matter: an INSERT with schema evolution is
    still a blind append (it will fail on a concurrent metadata change, not on concurrent adds).
    """
    return removes.num_rows == 0 and not read_set.depends_on_files


@dataclass(frozen=True, eq=False)
class TransactionInfo:
    """The current transaction as the conflict checker sees it (immutable; rebase = replace)."""

    read_version: int
    read_set: ReadSet
    read_metadata: Metadata
    read_protocol: Protocol
    adds: pa.Table
    removes: pa.Table
    metadata: Metadata | None = None
    protocol: Protocol | None = None
    domains: tuple[DomainMetadata, ...] = ()
    txns: tuple[Txn, ...] = ()
    isolation_level: IsolationLevel = IsolationLevel.WRITE_SERIALIZABLE
    is_blind_append: bool = False
    use_stats: bool = True
    operation: str = "WRITE"
    txn_id: str = ""
    #: files read or changed through deletion vectors, row by row (None: file-level only)
    row_level: "RowLevelState | None" = None
    #: the row-tracking high-water mark of the read snapshot (-1: none); ids above it are ours
    read_row_id_high_watermark: int = -1

    def __post_init__(self) -> None:
        if self.is_blind_append and not is_blind_append(self.read_set, self.removes):
            raise ValueError(
                "TransactionInfo.is_blind_append=True but the transaction read data or removes "
                "files; compute the flag with deltatx.conflicts.is_blind_append(read_set, removes)"
            )
        object.__setattr__(self, "isolation_level", IsolationLevel(self.isolation_level))

    @property
    def changes_metadata(self) -> bool:
        """True if this transaction commits a new ``metaData`` action that changes the table's
        shape or properties. Moving identity high-water marks (any insert into an identity table)
        does not count: it changes what no concurrent append could have relied on."""
        return self.metadata is not None and not is_high_water_mark_change(self.read_metadata, self.metadata)

    @property
    def app_ids_used(self) -> frozenset[str]:
        """App ids this transaction depends on: looked up, or written in its own ``txn`` actions."""
        own = frozenset(t.app_id for t in self.txns)
        return self.read_set.app_ids | own if own else self.read_set.app_ids

    def replace(self, **changes: Any) -> "TransactionInfo":
        """A copy with some fields changed (how the checker rebases).

        Copies the field values instead of calling ``dataclasses.replace`` (~10 µs: it walks the
        fields and runs ``__init__``): every checked winner replaces it a few times. The checks
        of ``__post_init__`` rerun when a field they read changes."""
        return fast_replace(self, changes, _REVALIDATED)


#: the fields ``TransactionInfo.__post_init__`` reads: a replace that changes one reruns it
_REVALIDATED = frozenset({"is_blind_append", "read_set", "removes", "isolation_level"})


def fast_replace(obj: Any, changes: dict[str, Any], revalidated: frozenset[str] = frozenset()) -> Any:
    """``dataclasses.replace(obj, **changes)`` for a frozen dataclass without slots or cached
    properties, by copying its ``__dict__``; ``__post_init__`` reruns only when ``changes``
    touches a field in ``revalidated``. Unknown field names raise TypeError, as replace does."""
    names = _field_names(type(obj))
    unknown = changes.keys() - names
    if unknown:
        raise TypeError(f"{type(obj).__name__}.replace() got unexpected field(s) {sorted(unknown)}")
    new = object.__new__(type(obj))
    state = new.__dict__
    state.update(obj.__dict__)
    state.update(changes)
    if not revalidated.isdisjoint(changes):
        new.__post_init__()
    return new


_FIELD_NAMES: dict[type, frozenset[str]] = {}


def _field_names(cls: type) -> frozenset[str]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return names
