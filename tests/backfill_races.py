"""Shared by the row-tracking backfill race tests: enabling row tracking on a table with data
runs three commits (UPGRADE PROTOCOL, ROW TRACKING BACKFILL, SET TBLPROPERTIES); a DML staged
right after the first one reads a table whose protocol lists rowTracking but whose files have no
ids yet, and commits after the backfill."""

from __future__ import annotations

from typing import Any, Callable

import deltatx
from deltatx import phases

RT = {"delta.enableRowTracking": "true"}


def enable_with_dml_staged_after_upgrade(uri: str, v0: int, stage: Callable[[Any], Any]) -> Any:
    """Enable row tracking on the table at ``uri`` (at version ``v0``), staging ``stage(tx)`` in a
    transaction opened as soon as the upgrade commit (``v0 + 1``) is published; returns that
    transaction, uncommitted."""
    staged: list[Any] = []

    def open_dml(phase: str, **context: Any) -> None:
        if phase == "published" and context.get("version") == v0 + 1 and not staged:
            tx = deltatx.Table(uri).transaction()
            stage(tx)
            staged.append(tx)

    with phases.observe(open_dml):
        deltatx.Table(uri).set_properties(RT)
    return staged[0]
