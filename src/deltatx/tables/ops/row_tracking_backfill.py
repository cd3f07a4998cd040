"""Turning row tracking on for a table that already has rows: Delta's three commits.

1. ``UPGRADE PROTOCOL`` — the protocol lists ``rowTracking`` (and ``domainMetadata``): from this
   version on every writer assigns ids to the files it adds, so no new file escapes the backfill;
2. ``ROW TRACKING BACKFILL`` — every file still without a ``baseRowId`` is re-added unchanged
   (``dataChange=false``, same path and DV); the transaction hands out their ids above the
   watermark like for any add. A concurrent writer that removes or re-adds one of these files
   copies the ids the backfill gave it; a backfill that loses the race to one drops its re-adds
   of the paths the winner removed or added, whose files have ids already (the checker's #5);
3. ``SET TBLPROPERTIES`` — ``delta.enableRowTracking=true`` with the generated materialized column
   names: readers may now rely on every row having an id.

Ids need every backfilled file's row count. It comes from the ``numRecords`` statistic, or — for a
file whose ``add`` has none (written without stats, or by a writer that dropped them) — from its
Parquet footer, which the backfill's re-add then carries in its stats. Both are checked by
:func:`needs_backfill`, before commit 1: a file whose count cannot be had refuses the enablement
with nothing committed, instead of leaving a table upgraded to a protocol other writers (deltalake)
cannot write, with row tracking still off.

The backfill cannot join a transaction (:func:`refuse_without_backfill`): inside one, the property
is refused while files the commit leaves have no ids, as Delta has no single-commit enablement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...errors import CorruptDataFileError, DataFileNotFoundError
from ...expr import FALSE
from ...io.paths import data_file_path, decode_path
from ...txnlog import row_tracking
from ...txnlog.features import required_protocol
from ...txnlog.replay import without_paths
from ...txnlog.stats import record_counts

if TYPE_CHECKING:
    from ..transaction import Transaction


def needs_backfill(tx: "Transaction", properties: dict[str, object]) -> bool:
    """Does this property change turn row tracking on over files that have no ids yet?

    When it does, every such file's row count is made sure of first (:func:`with_record_counts`
    raises naming the file that has none): this runs on the probe transaction, before the
    protocol upgrade commits, so a refused enablement leaves the table as it was.
    """
    turning_on = str(properties.get(row_tracking.ENABLE_ROW_TRACKING, "false")).strip().lower() == "true"
    if not turning_on or row_tracking.is_enabled(tx.properties):
        return False
    files = tx.current_files()
    needed = not row_tracking.is_supported(tx.protocol) or files["baseRowId"].null_count > 0
    if needed and files.num_rows:
        with_record_counts(tx, files.filter(pc.is_null(files["baseRowId"])))
    return needed


def refuse_while_suspended(tx: "Transaction", configuration: dict[str, str]) -> None:
    """Delta's ``DELTA_ROW_TRACKING_ILLEGAL_PROPERTY_COMBINATION``: row tracking cannot be turned on
    while ``delta.rowTrackingSuspended=true``. Writers of a suspended table assign no ids, so the
    backfill would give its files none and readers would rely on ids the rows lack. Unsuspending
    in the same change is not enough either: the backfill commits before the property change, on
    the still suspended table. Checked before the protocol upgrade commits (on Table.set_properties'
    probe), so nothing is committed."""
    if not row_tracking.is_enabled(configuration) or row_tracking.is_enabled(tx.properties):
        return  # not turning it on (or it is on already, set by another engine)
    if not (row_tracking.is_suspended(configuration) or row_tracking.is_suspended(tx.properties)):
        return
    from ...errors import InvalidPropertyError

    raise InvalidPropertyError(
        f"{row_tracking.ENABLE_ROW_TRACKING}=true cannot be set while {row_tracking.ROW_TRACKING_SUSPENDED}=true "
        f"(writers of a suspended table assign no row ids): set {row_tracking.ROW_TRACKING_SUSPENDED}=false "
        f"first, in a commit of its own; nothing was committed")


def refuse_without_backfill(tx: "Transaction", configuration: dict[str, str]) -> None:
    """Refuse to turn row tracking on in one commit while some file would be left without ids.

    The backfill is a commit of its own, after the protocol upgrade and before the property
    (:meth:`Table.set_properties` runs all three): only then is every file a concurrent writer
    adds sure to get ids too, and its re-adds (``dataChange=false``, the files as committed) do
    not mix with a transaction's own removes and re-adds of the same paths. So inside a
    transaction the property is accepted only when every file it leaves has ids or is one the
    commit adds itself (they get ids as it commits, the protocol it stages listing the feature);
    otherwise :class:`UnsupportedOperationError`, like OPTIMIZE joining a transaction, before
    anything is staged. ``configuration`` is the table's configuration the change would leave."""
    if not row_tracking.is_enabled(configuration) or row_tracking.is_enabled(tx.properties):
        return
    files = tx.current_files()
    if not files.num_rows or not files["baseRowId"].null_count:
        return
    missing = files.filter(pc.is_null(files["baseRowId"]))
    own, _ = tx.staged_file_actions()
    if own.num_rows:
        missing = without_paths(missing, own["path"])
    if not missing.num_rows:
        return
    from ...errors import UnsupportedOperationError

    first = missing["path"][0].as_py()
    more = f" and {missing.num_rows - 1} more" if missing.num_rows > 1 else ""
    raise UnsupportedOperationError(
        f"turning row tracking on ({row_tracking.ENABLE_ROW_TRACKING}=true) cannot join a transaction "
        f"while files have no row ids ({first!r}{more}): it runs in commits of its own (protocol "
        f"upgrade, a backfill giving those files ids, then the property); call "
        f"Table.set_properties({{{row_tracking.ENABLE_ROW_TRACKING!r}: 'true'}}) outside the transaction. "
        f"Nothing was staged")


def with_record_counts(tx: "Transaction", files: pa.Table) -> pa.Table:
    """``files`` with a ``numRecords`` in every ``stats``: the ones lacking it get the row count of
    their Parquet footer (physical rows, as ``numRecords`` counts them: a DV does not lower it).

    Delta's backfill can count any file; deltatx used to refuse a file without the statistic
    after the protocol upgrade had committed. Only the files lacking it are opened (footer only).
    Raises :class:`DataFileNotFoundError` / :class:`CorruptDataFileError` naming the file.
    """
    if not files.num_rows:
        return files
    counts = record_counts(files["stats"])
    if not counts.null_count:
        return files
    missing = pc.indices_nonzero(pc.is_null(counts)).to_pylist()
    stats = files["stats"].to_pylist()
    paths = files["path"]
    for i in missing:  # the few files without the statistic: one footer each
        path = paths[i].as_py()
        stats[i] = _stats_with_count(stats[i], _footer_rows(tx, path))
    return files.set_column(files.schema.get_field_index("stats"), files.schema.field("stats"),
                            pa.array(stats, pa.string()))


def _footer_rows(tx: "Transaction", path: str) -> int:
    store = tx.store
    location = data_file_path(store, decode_path(path))
    try:
        with store.arrow_fs.open_input_file(location) as handle:
            return pq.read_metadata(handle).num_rows
    except FileNotFoundError:
        raise DataFileNotFoundError(
            f"cannot enable row tracking on {tx.table.uri!r}: data file {path!r} has no numRecords "
            f"statistic and is missing, so its rows cannot be counted; nothing was committed"
        ) from None
    except (OSError, pa.ArrowException) as exc:
        raise CorruptDataFileError(
            f"cannot enable row tracking on {tx.table.uri!r}: data file {path!r} has no numRecords "
            f"statistic and its Parquet footer is unreadable ({exc}); nothing was committed"
        ) from None


def _stats_with_count(stats: str | None, rows: int) -> str:
    """A stats JSON with ``numRecords`` set (the other statistics kept when it parses)."""
    try:
        doc = orjson.loads(stats) if stats else {}
    except orjson.JSONDecodeError:
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    return orjson.dumps({"numRecords": rows, **{k: v for k, v in doc.items() if k != "numRecords"}}).decode()


def stage_support(tx: "Transaction") -> None:
    """Commit 1: list the feature (no property yet)."""
    protocol = required_protocol({"delta.feature.rowTracking": "supported"}, tx.schema, tx.protocol)
    tx.stage_protocol(protocol)
    tx.note_operation("UPGRADE PROTOCOL", {"newProtocol": protocol.to_json()}, {}, changes_data=False)


def stage_backfill(tx: "Transaction") -> None:
    """Commit 2: re-add every file without ids so the commit assigns them."""
    files = tx.current_files()
    missing = files.filter(pc.is_null(files["baseRowId"])) if files.num_rows else files
    missing = with_record_counts(tx, missing)  # the re-adds carry counts their stats lacked
    if missing.num_rows:
        missing = missing.set_column(missing.schema.get_field_index("dataChange"), "dataChange",
                                     pa.array([False] * missing.num_rows, pa.bool_()))
        tx.record_read(FALSE, missing)  # it depends on the files it re-adds (by path), nothing else
        tx.stage_adds(missing, written=False)
    tx.note_operation(row_tracking.BACKFILL_OPERATION, {"numFiles": missing.num_rows},
                      {"numSuccessfullyBackfilledFiles": missing.num_rows}, changes_data=False)
