"""Operations the harness runs, records and replays: one vocabulary for scenarios, interleavings,
stress workloads and the serial-replay checkers.

Why a vocabulary instead of arbitrary callables: a history is only checkable if every committed
operation can be *run again* on a fresh table and its *observed result* compared. Each
:class:`Operation` therefore

- stages itself on an open :class:`deltatx.Transaction` (``stage(tx) -> observed``), reading
  through the transaction so that its read set is recorded exactly as a user's would be;
- returns what it observed (ids deleted / updated / matched, balances read) as plain JSON;
- serializes to a dict (``to_dict`` / :func:`operation_from_dict`) so that worker processes can
  write it to a history file and the checker can rebuild it.

Observations use a *key* column (``id`` by default): a table without it is observed by row
counts only. Users add their own kinds with :func:`register_operation`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa

from ..errors import DeltaTxError

if TYPE_CHECKING:
    from ..tables.table import Table
    from ..tables.transaction import CommitResult, Transaction

_REGISTRY: dict[str, type["Operation"]] = {}


def register_operation(cls: type["Operation"]) -> type["Operation"]:
    """Class decorator: make ``cls`` rebuildable from its ``to_dict()`` (by ``cls.kind``)."""
    _REGISTRY[cls.kind] = cls
    return cls


def operation_from_dict(data: dict[str, Any]) -> "Operation":
    """Rebuild an operation recorded with ``to_dict()``."""
    kind = data.get("kind")
    cls = _REGISTRY.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise DeltaTxError(f"unknown harness operation kind {kind!r}; known: {sorted(_REGISTRY)}")
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


def rows_to_columns(rows: Any) -> dict[str, list]:
    """A pyarrow Table / dict of columns → JSON-able dict of columns."""
    if isinstance(rows, pa.Table):
        return rows.to_pydict()
    if isinstance(rows, dict):
        return {k: list(v) for k, v in rows.items()}
    raise TypeError(f"rows must be a pyarrow.Table or a dict of columns, not {type(rows).__name__}")


def _as_table(columns: dict[str, list], schema: pa.Schema) -> pa.Table:
    fields_ = [schema.field(name) for name in columns if name in schema.names]
    return pa.Table.from_pydict({f.name: columns[f.name] for f in fields_}, schema=pa.schema(fields_))


def _sql_literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _ids_where(tx: "Transaction", where: str | None, key: str) -> list | None:
    """Sorted key values of the rows matching ``where`` as ``tx`` sees them (recorded as a read);
    None when the table has no ``key`` column."""
    if key not in tx.schema.names:
        return None
    rows = tx.read(where=where, columns=[key])
    return sorted(rows[key].to_pylist())


@dataclass
class Operation:
    """Base class. Subclasses are dataclasses with JSON-able fields and a ``kind``."""

    kind: ClassVar[str] = "operation"
    #: an operation that only adds rows and reads nothing (Delta's blind append)
    blind: ClassVar[bool] = False

    def stage(self, tx: "Transaction") -> dict[str, Any]:
        """Stage on ``tx`` (reads recorded, files written, nothing committed); return observations."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}

    def commit(self, table: "Table") -> tuple["CommitResult", dict[str, Any]]:
        """Run as one transaction of its own on ``table`` (refreshed first)."""
        table.refresh()
        tx = table.transaction()
        try:
            observed = self.stage(tx)
            return tx.commit(), observed
        except BaseException:
            tx.abort()
            raise

    # What the operation did to rows, from its observations (used by the row-presence checker).
    def inserted_keys(self, observed: dict[str, Any]) -> list:
        return []

    def removed_keys(self, observed: dict[str, Any]) -> list:
        return []

    def describe(self) -> str:
        return self.kind


@register_operation
@dataclass
class Append(Operation):
    """A blind append of ``rows`` (dict of columns); with ``app_id`` an idempotent one."""

    kind: ClassVar[str] = "append"
    blind: ClassVar[bool] = True
    rows: dict[str, list] = field(default_factory=dict)
    app_id: str | None = None
    app_version: int | None = None
    key: str = "id"

    def __post_init__(self) -> None:
        self.rows = rows_to_columns(self.rows)

    def stage(self, tx: "Transaction") -> dict[str, Any]:
        staged = tx.append(_as_table(self.rows, tx.schema), app_id=self.app_id, app_version=self.app_version)
        return {"skipped": True} if staged is False else {}

    def inserted_keys(self, observed: dict[str, Any]) -> list:
        return [] if observed.get("skipped") else list(self.rows.get(self.key, []))

    def describe(self) -> str:
        n = len(next(iter(self.rows.values()), []))
        return f"append {n} rows" + (f" (app {self.app_id} v{self.app_version})" if self.app_id else "")


@register_operation
@dataclass
class Read(Operation):
    """Read rows matching ``where`` in the transaction (a read-only step, recorded in the read set)."""

    kind: ClassVar[str] = "read"
    where: str | None = None
    key: str = "id"

    def stage(self, tx: "Transaction") -> dict[str, Any]:
        ids = _ids_where(tx, self.where, self.key)
        if ids is None:
            return {"rows": tx.read(where=self.where).num_rows}
        return {"ids": ids}

    def describe(self) -> str:
        return f"read where {self.where}"


@register_operation
@dataclass
class Delete(Operation):
    """DELETE WHERE ``where``; observes the keys it deleted."""

    kind: ClassVar[str] = "delete"
    where: str | None = None
    key: str = "id"

    def stage(self, tx: "Transaction") -> dict[str, Any]:
        ids = _ids_where(tx, self.where, self.key)
        metrics = tx.delete(self.where)
        if ids is None:
            return {"rows": int(metrics.get("numDeletedRows", 0))}
        return {"deleted": ids}

    def removed_keys(self, observed: dict[str, Any]) -> list:
        return list(observed.get("deleted", []))

    def describe(self) -> str:
        return f"delete where {self.where}"


@register_operation
@dataclass
class Update(Operation):
    """UPDATE SET ``set`` WHERE ``where``; observes the keys it updated."""

    kind: ClassVar[str] = "update"
    where: str | None = None
    set: dict[str, str] = field(default_factory=dict)
    key: str = "id"

    def stage(self, tx: "Transaction") -> dict[str, Any]:
        ids = _ids_where(tx, self.where, self.key)
        metrics = tx.update(self.where, set=self.set)
        if ids is None:
            return {"rows": int(metrics.get("numUpdatedRows", 0))}
        return {"updated": ids}

    def describe(self) -> str:
        return f"update {self.set} where {self.where}"


@register_operation
@dataclass
class Merge(Operation):
    """MERGE ``rows`` ON ``t.key = s.key`` (AND ``t.col = value`` for each ``match`` entry).

    ``when_matched`` is ``"update"`` (UPDATE SET *), ``"delete"`` or None; ``when_not_matched``
    is ``"insert"`` (INSERT *) or None. Observes which source keys matched and were inserted.
    """

    kind: ClassVar[str] = "merge"
    rows: dict[str, list] = field(default_factory=dict)
    key: str = "id"
    match: dict[str, Any] = field(default_factory=dict)
    when_matched: str | None = "update"
    when_not_matched: str | None = "insert"

    def __post_init__(self) -> None:
        self.rows = rows_to_columns(self.rows)
        if self.when_matched not in (None, "update", "delete"):
            raise ValueError(f"when_matched must be 'update', 'delete' or None, not {self.when_matched!r}")
        if self.when_not_matched not in (None, "insert"):
            raise ValueError(f"when_not_matched must be 'insert' or None, not {self.when_not_matched!r}")

    def on(self) -> str:
        parts = [f"t.{self.key} = s.{self.key}"]
        parts += [f"t.{col} = {_sql_literal(v)}" for col, v in self.match.items()]
        return " AND ".join(parts)

    def _observe_where(self) -> str:
        keys = sorted(set(self.rows.get(self.key, [])))
        parts = [f"{col} = {_sql_literal(v)}" for col, v in self.match.items()]
        parts.append(f"{self.key} IN ({', '.join(_sql_literal(k) for k in keys)})" if keys else "false")
        return " AND ".join(parts)

    def stage(self, tx: "Transaction") -> dict[str, Any]:
        source = _as_table(self.rows, tx.schema)
        matched = _ids_where(tx, self._observe_where(), self.key)
        builder = tx.merge(source, on=self.on())
        if self.when_matched == "update":
            builder = builder.when_matched_update_all()
        elif self.when_matched == "delete":
            builder = builder.when_matched_delete()
        if self.when_not_matched == "insert":
            builder = builder.when_not_matched_insert_all()
        metrics = builder.execute()
        if matched is None:
            return {k: int(metrics.get(k, 0)) for k in
                    ("numTargetRowsUpdated", "numTargetRowsDeleted", "numTargetRowsInserted")}
        source_keys = sorted(set(self.rows.get(self.key, [])))
        inserted = [k for k in source_keys if k not in set(matched)] if self.when_not_matched else []
        return {"matched": matched, "inserted": inserted}

    def inserted_keys(self, observed: dict[str, Any]) -> list:
        return list(observed.get("inserted", []))

    def removed_keys(self, observed: dict[str, Any]) -> list:
        return list(observed.get("matched", [])) if self.when_matched == "delete" else []

    def describe(self) -> str:
        n = len(self.rows.get(self.key, []))
        return f"merge {n} rows on {self.on()}"


@register_operation
@dataclass
class Optimize(Operation):
    """OPTIMIZE (compaction; rows unchanged) of the files matching ``where``."""

    kind: ClassVar[str] = "optimize"
    where: str | None = None

    def stage(self, tx: "Transaction") -> dict[str, Any]:
        tx.optimize(where=self.where)
        return {}

    def describe(self) -> str:
        return f"optimize where {self.where}"


@register_operation
@dataclass
class SetProperties(Operation):
    """ALTER TABLE SET TBLPROPERTIES (a metadata change: fails every concurrent writer)."""

    kind: ClassVar[str] = "set_properties"
    properties: dict[str, str] = field(default_factory=dict)

    def stage(self, tx: "Transaction") -> dict[str, Any]:
        tx.set_properties(dict(self.properties))
        return {}

    def describe(self) -> str:
        return f"set properties {self.properties}"


@register_operation
@dataclass
class Transfer(Operation):
    """Bank transfer, read-modify-write: read both balances, move ``min(amount, balance)``.

    The new balances are literals computed from what the transaction read, so a lost update
    (a conflict the commit path failed to detect) changes the bank's total.
    """

    kind: ClassVar[str] = "transfer"
    source: int = 0
    target: int = 1
    amount: int = 1
    key: str = "id"
    column: str = "balance"

    def stage(self, tx: "Transaction") -> dict[str, Any]:
        if self.source == self.target:
            raise ValueError("a transfer needs two different accounts")
        rows = tx.read(where=f"{self.key} IN ({self.source}, {self.target})", columns=[self.key, self.column])
        balances = dict(zip(rows[self.key].to_pylist(), rows[self.column].to_pylist()))
        if len(balances) != 2 or rows.num_rows != 2:
            raise DeltaTxError(f"transfer {self.source}->{self.target}: expected one row per account, "
                               f"found {rows.num_rows}")
        moved = max(0, min(self.amount, balances[self.source]))
        if moved:
            tx.update(f"{self.key} = {self.source}", set={self.column: str(balances[self.source] - moved)})
            tx.update(f"{self.key} = {self.target}", set={self.column: str(balances[self.target] + moved)})
        return {"balances": [balances[self.source], balances[self.target]], "moved": moved}

    def describe(self) -> str:
        return f"transfer {self.amount} from {self.source} to {self.target}"
