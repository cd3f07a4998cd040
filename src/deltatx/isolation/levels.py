"""Isolation levels: the ``delta.isolationLevel`` table property and the per-commit downgrade.

Owns two decisions and nothing else (no I/O, no conflict checks):

1. *Which level a table asks for.* deltatx follows Databricks' semantics, not OSS Delta's:
   ``WriteSerializable`` is the default and the table may be set to ``Serializable`` or
   ``WriteSerializable``. (OSS Delta only accepts ``Serializable`` as a setting; a table written by
   deltatx with ``WriteSerializable`` is still read correctly by every engine, because the level
   only affects how *writers* resolve conflicts.) ``SnapshotIsolation`` is never a table setting.

2. *Which level one commit actually uses.* A commit that changes no data (OPTIMIZE with
   ``dataChange=false``, an empty commit) is downgraded to ``SnapshotIsolation``, so it never fails
   on files added concurrently; it still fails if a file it rewrites was removed concurrently.

The level a commit used is what ``commitInfo.isolationLevel`` records and what the conflict checker
(:mod:`deltatx.conflicts.checker`) receives as ``TransactionInfo.isolation_level``.
"""

from __future__ import annotations

import enum
from typing import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidPropertyError

ISOLATION_LEVEL_PROPERTY = "delta.isolationLevel"


class IsolationLevel(str, enum.Enum):
    """The three levels Delta's conflict checker knows; the value is the spelling in the log."""

    SERIALIZABLE = "Serializable"
    WRITE_SERIALIZABLE = "WriteSerializable"
    SNAPSHOT_ISOLATION = "SnapshotIsolation"

    def __str__(self) -> str:
        return self.value


#: the level of a table that does not set ``delta.isolationLevel``
DEFAULT_ISOLATION_LEVEL = IsolationLevel.WRITE_SERIALIZABLE

#: the levels a user may set on a table (SnapshotIsolation is only ever a per-commit downgrade)
TABLE_ISOLATION_LEVELS: tuple[IsolationLevel, ...] = (
    IsolationLevel.SERIALIZABLE,
    IsolationLevel.WRITE_SERIALIZABLE,
)


def validate_isolation_property(value: str) -> None:
    """Raise :class:`InvalidPropertyError` unless ``value`` is a level a table may be set to.

    The spelling must be exact (``Serializable`` / ``WriteSerializable``), as in Delta: other
    engines compare the stored string verbatim.
    """
    allowed = {level.value for level in TABLE_ISOLATION_LEVELS}
    if value in allowed:
        return
    if value == IsolationLevel.SNAPSHOT_ISOLATION.value:
        raise InvalidPropertyError(
            f"{ISOLATION_LEVEL_PROPERTY}='SnapshotIsolation' cannot be set on a table: it is only "
            f"applied automatically to commits that change no data (e.g. OPTIMIZE). "
            f"Use 'Serializable' or 'WriteSerializable'."
        )
    hint = ""
    for level in allowed:
        if isinstance(value, str) and value.strip().lower() == level.lower():
            hint = f" (did you mean '{level}'? the value is case-sensitive)"
    raise InvalidPropertyError(
        f"{ISOLATION_LEVEL_PROPERTY}={value!r} is not a valid isolation level{hint}; "
        f"use 'Serializable' or 'WriteSerializable' (the default)."
    )


def table_isolation_level(properties: Mapping[str, str]) -> IsolationLevel:
    """The level a table's properties ask for; ``WriteSerializable`` when unset."""
    value = properties.get(ISOLATION_LEVEL_PROPERTY)
    if value is None:
        return DEFAULT_ISOLATION_LEVEL
    validate_isolation_property(value)
    return IsolationLevel(value)


def _any_data_change(files: pa.Table) -> bool:
    """True if any file action says ``dataChange=true``; a missing flag counts as a change."""
    if files.num_rows == 0:
        return False
    flags = files.column("dataChange")
    return bool(pc.any(pc.fill_null(flags, True)).as_py())


def effective_isolation_level(
    table_level: IsolationLevel,
    *,
    adds: pa.Table,
    removes: pa.Table,
    has_non_file_actions: bool,
    changes_data: bool,
) -> IsolationLevel:
    """The level one commit runs at: ``table_level``, or ``SnapshotIsolation`` if it may downgrade.

    A commit downgrades when all of these hold:

    - it carries no non-file action (metaData, protocol, txn, or a domainMetadata other than
      Delta's own ``delta.rowTracking`` watermark — the caller decides ``has_non_file_actions``);
    - no add or remove has ``dataChange=true``;
    - if the table level is ``WriteSerializable``: the operation itself does not change data
      (``changes_data`` is the operation's nature, e.g. False for OPTIMIZE, True for DELETE even
      when it happened to match no rows).

    So OPTIMIZE runs at SnapshotIsolation; a metadata-only commit does not.

    An *empty* commit (no actions at all) always runs at SnapshotIsolation, even for an operation
    that would change data (a DELETE that matched nothing): a commit that writes nothing can be
    serialized before every concurrent commit, so no check on added files is needed. (Delta keeps
    such a WriteSerializable DELETE at WriteSerializable; the outcome differs only by a spurious
    conflict.)
    """
    table_level = IsolationLevel(table_level)
    if table_level is IsolationLevel.SNAPSHOT_ISOLATION:
        return table_level
    if has_non_file_actions:
        return table_level
    if adds.num_rows == 0 and removes.num_rows == 0:
        return IsolationLevel.SNAPSHOT_ISOLATION
    if _any_data_change(adds) or _any_data_change(removes):
        return table_level
    if table_level is IsolationLevel.WRITE_SERIALIZABLE and changes_data:
        return table_level
    return IsolationLevel.SNAPSHOT_ISOLATION
