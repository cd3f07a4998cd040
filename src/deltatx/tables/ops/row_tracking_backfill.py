"""Turning row tracking on for a table that already has rows: Delta's three commits.

1. ``UPGRADE PROTOCOL`` — the protocol lists ``rowTracking`` (and ``domainMetadata``): from this
   version on every writer assigns ids to the files it adds, so no new file escapes the backfill;
2. ``ROW TRACKING BACKFILL`` — every file still without a ``baseRowId`` is re-added unchanged
   (``dataChange=false``, same path and DV); the transaction hands out their ids above the
   watermark like for any add. A concurrent writer that removes or re-adds one of these files
   copies the ids the backfill gave it (the checker's rule #5);
3. ``SET TBLPROPERTIES`` — ``delta.enableRowTracking=true`` with the generated materialized column
   names: readers may now rely on every row having an id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from ...expr import FALSE
from ...txnlog import row_tracking
from ...txnlog.features import required_protocol

if TYPE_CHECKING:
    from ..transaction import Transaction


def needs_backfill(tx: "Transaction", properties: dict[str, object]) -> bool:
    """Does this property change turn row tracking on over files that have no ids yet?"""
    turning_on = str(properties.get(row_tracking.ENABLE_ROW_TRACKING, "false")).strip().lower() == "true"
    if not turning_on or row_tracking.is_enabled(tx.properties):
        return False
    return not row_tracking.is_supported(tx.protocol) or tx.current_files()["baseRowId"].null_count > 0


def stage_support(tx: "Transaction") -> None:
    """Commit 1: list the feature (no property yet)."""
    protocol = required_protocol({"delta.feature.rowTracking": "supported"}, tx.schema, tx.protocol)
    tx.stage_protocol(protocol)
    tx.note_operation("UPGRADE PROTOCOL", {"newProtocol": protocol.to_json()}, {}, changes_data=False)


def stage_backfill(tx: "Transaction") -> None:
    """Commit 2: re-add every file without ids so the commit assigns them."""
    files = tx.current_files()
    missing = files.filter(pc.is_null(files["baseRowId"])) if files.num_rows else files
    if missing.num_rows:
        missing = missing.set_column(missing.schema.get_field_index("dataChange"), "dataChange",
                                     pa.array([False] * missing.num_rows, pa.bool_()))
        tx.record_read(FALSE, missing)  # it depends on the files it re-adds (by path), nothing else
        tx.stage_adds(missing, written=False)
    tx.note_operation(row_tracking.BACKFILL_OPERATION, {"numFiles": missing.num_rows},
                      {"numSuccessfullyBackfilledFiles": missing.num_rows}, changes_data=False)
