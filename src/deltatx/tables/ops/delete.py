"""DELETE: remove the rows matching a predicate, copy-on-write (see rewrite.py)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ...expr import bind_predicate, parse_predicate
from .dml_metrics import DELETE_KEYS, with_delta_keys
from .rewrite import remove_matching_rows

if TYPE_CHECKING:
    from ..transaction import Transaction


def stage_delete(tx: "Transaction", where: str | None) -> dict[str, Any]:
    started = time.perf_counter()
    pred = bind_predicate(parse_predicate(where), tx.schema) if where is not None else None
    metrics = with_delta_keys(remove_matching_rows(tx, pred), DELETE_KEYS)
    metrics["executionTimeMs"] = int((time.perf_counter() - started) * 1000)
    params = {"predicate": [str(pred)] if pred is not None else []}
    tx.note_operation("DELETE", params, metrics)
    return metrics
