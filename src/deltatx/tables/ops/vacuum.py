"""VACUUM: delete data files no version within the retention period needs.

::

    listing of the table root (minus hidden entries)        ─┐
    valid = live adds ∪ tombstones removed after the cutoff  ─┼─► delete listed − valid
            (their data files and deletion vector files)     │
    cutoff = now − retention; only files older than cutoff   ─┘   whose mtime < cutoff

What is *hidden* follows Delta: a path component starting with ``_`` or ``.`` is skipped
(``_delta_log``, ``.crc`` and temp files, other tools' folders), except partition folders
(``_p=1`` when ``_p`` is a partition column) and ``_change_data`` / ``_delta_index``; on a UniForm
table (Iceberg enabled) a folder named ``metadata``, where the Iceberg metadata lives. Files that
were never committed (a writer crashed before its commit) are just unreferenced files: they go
once older than the retention, like any other orphan — the retention is what keeps a running
writer's not-yet-committed files safe.

The retention defaults to ``delta.deletedFileRetentionDuration`` (1 week); a shorter one is refused
unless ``enforce_retention_duration=False``, because it can delete files that concurrent readers,
writers or time travel still need.

Like delta-rs, and Delta on local, HDFS, Azure and GCS storage by default, a VACUUM that deletes
(not a dry run) is recorded in the log — on every store here, where every commit is a
put-if-absent (Delta leaves it off on S3, where its commits historically were not): a
``VACUUM START`` commit (the retention asked for, the files and bytes about to go) before any
file is deleted, and a ``VACUUM END`` commit (``COMPLETED`` or ``FAILED``, the files deleted)
after. Both hold only ``commitInfo``: they change no data, so they never conflict with anyone
(snapshot isolation), and ``history()`` shows who vacuumed what, when. This module plans the
VACUUM from a snapshot and deletes; the table facade commits the two records around it.

Empty folders (a partition whose files are all gone) are removed too, as Delta's VACUUM removes
them: only visible ones, on stores with real folders (local disk; on an object store a folder is
a key prefix that goes with its last object), and only those older than the cutoff, so a folder a
running writer has just made for its first file is left alone. ``numVacuumedDirectories`` in the
``VACUUM END`` record counts the folders VACUUM looked at, the table root included, as Delta's does.

Change data files (``_change_data/``) are not in the snapshot: those that a commit inside the
retention period references are kept (the change feed of those versions reads them), the others
go once older than the retention, like Delta's.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import CorruptDeletionVectorError, VacuumRetentionError
from ...io.deletion_vectors import dv_file_relative_path
from ...io.paths import data_file_path, decode_path, escape_partition_value
from ...txnlog.features import check_writable
from .. import properties as props

if TYPE_CHECKING:
    from ...txnlog.snapshot import Snapshot
    from ...txnlog.store import LogStore

#: folders starting with "_" that Delta still vacuums
_VACUUMED_UNDERSCORE_DIRS = ("_change_data", "_delta_index")

_DELETE_BATCH = 1000

_UNIVERSAL_FORMATS = "delta.universalFormat.enabledFormats"

_MS_PER_HOUR = 3600 * 1000


def _span_ms(hours: float) -> float:
    """``hours`` in milliseconds; a finite retention too long for a float (1e308 hours) is as
    long as the longest one a long holds, not infinity (which int() refuses)."""
    span = hours * _MS_PER_HOUR
    return span if math.isfinite(span) else float(2 ** 63)


#: the earliest cutoff VACUUM computes (int64 ms; a longer retention keeps every file)
_OLDEST_MS = -(2 ** 62)


@dataclass(frozen=True)
class VacuumPlan:
    """What a VACUUM of one snapshot deletes, and what its START/END records say about it."""

    #: paths relative to the table root, sorted
    paths: list[str]
    #: their bytes, as listed
    size_bytes: int
    #: the retention asked for (None: the table's) and the table's, in hours
    retention_hours: float | None
    table_retention_hours: float
    retention_check: bool
    #: visible folders older than the cutoff (removed after the files when empty), deepest first
    folders: tuple[str, ...] = ()
    #: visible folders listed, the root included (Delta's ``numVacuumedDirectories``)
    folders_listed: int = 1

    def start_record(self) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """Delta's ``VACUUM START`` (operation, parameters, metrics)."""
        parameters: dict[str, Any] = {"retentionCheckEnabled": self.retention_check}
        if self.retention_hours is not None:
            parameters["specifiedRetentionMillis"] = _millis(self.retention_hours)
        parameters["defaultRetentionMillis"] = _millis(self.table_retention_hours)
        return "VACUUM START", parameters, {"numFilesToDelete": len(self.paths),
                                            "sizeOfDataToDelete": self.size_bytes}

    def end_record(self, deleted: int, completed: bool) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """Delta's ``VACUUM END`` (operation, parameters, metrics)."""
        return "VACUUM END", {"status": "COMPLETED" if completed else "FAILED"}, \
            {"numDeletedFiles": deleted, "numVacuumedDirectories": self.folders_listed}


def plan_vacuum(store: "LogStore", snapshot: "Snapshot", retention_hours: float | None = None,
                enforce_retention_duration: bool = True) -> VacuumPlan:
    """The unreferenced files of ``snapshot``'s table older than the retention (nothing is deleted).

    Raises VacuumRetentionError for a negative retention, or one shorter than the table's while
    ``enforce_retention_duration``; UnsupportedFeatureError when the protocol is not writable.
    """
    check_writable(snapshot.protocol, snapshot.metadata)
    table_retention = props.deleted_file_retention_hours(snapshot.properties)
    try:
        hours = table_retention if retention_hours is None else float(retention_hours)
    except (TypeError, ValueError):
        hours = math.nan
    if not (math.isfinite(hours) and hours >= 0):  # NaN or infinity would reach int() as hours -> ms
        raise VacuumRetentionError(f"retention_hours must be a finite number of hours ≥ 0, got {retention_hours!r}")
    if enforce_retention_duration and hours < table_retention:
        raise VacuumRetentionError(
            f"VACUUM retention of {hours:g} hour(s) is shorter than the table's "
            f"{props.DELETED_FILE_RETENTION} ({table_retention:g} hours). Files removed more recently "
            f"may still be read by concurrent readers, writers or time travel, and uncommitted files of "
            f"running writers could be deleted. If you are sure, pass enforce_retention_duration=False, "
            f"or lower {props.DELETED_FILE_RETENTION} with set_properties()."
        )
    # a retention past the int64 range of ms keeps everything (the cutoff precedes every file)
    cutoff_ms = max(int(now_ms() - _span_ms(hours)), _OLDEST_MS)
    folders, folders_listed = _old_visible_folders(store, snapshot, cutoff_ms)
    planned = partial(VacuumPlan, retention_hours=None if retention_hours is None else hours,
                      table_retention_hours=table_retention, retention_check=enforce_retention_duration,
                      folders=folders, folders_listed=folders_listed)

    listing = store.list_files_recursive()
    if not listing:
        return planned([], 0)
    paths = pa.array([entry[0] for entry in listing], pa.string())
    sizes = pa.array([entry[1] for entry in listing], pa.int64())
    mtimes = pa.array([entry[2] for entry in listing], pa.int64())
    visible = _visible(paths, snapshot.partition_columns, _iceberg_enabled(snapshot.properties))
    candidates = pc.and_(visible, pc.less(mtimes, cutoff_ms))
    paths, sizes = paths.filter(candidates), sizes.filter(candidates)
    if not len(paths):
        return planned([], 0)

    tombstones = snapshot.tombstones
    recent = tombstones.filter(pc.greater_equal(pc.fill_null(tombstones["deletionTimestamp"], 0), cutoff_ms)) \
        if tombstones.num_rows else tombstones
    valid = pa.concat_arrays([
        relative_paths(store, snapshot.files["path"]),
        relative_paths(store, recent["path"]),
        deletion_vector_paths(store, snapshot.files),
        deletion_vector_paths(store, recent),
    ])
    change_data = pc.starts_with(paths, "_change_data/")
    if pc.any(change_data).as_py():  # change files of versions inside the retention period stay
        from ...txnlog.change_feed import change_files_since

        kept = change_files_since(store, snapshot, cutoff_ms)
        if kept:
            valid = pa.concat_arrays([valid, relative_paths(store, pa.array(kept, pa.string()))])
    doomed = pc.invert(pc.is_in(paths, value_set=valid))
    return planned(sorted(paths.filter(doomed).to_pylist()), int(pc.sum(sizes.filter(doomed)).as_py() or 0))


def _millis(hours: float) -> int:
    """Hours as ms for the log (a long, as Delta writes it: a longer retention is written as the
    longest one)."""
    return min(int(_span_ms(hours)), 2 ** 63 - 1)


def delete_planned(store: "LogStore", plan: VacuumPlan) -> list[str]:
    """Delete the plan's files (in parallel batches), then its folders left empty (deepest
    first, so a partition folder emptied of sub-partitions goes too); returns the files' paths."""
    if plan.paths:
        _delete(store, plan.paths)
    for folder in plan.folders:
        store.remove_empty_folder(folder)
    return plan.paths


def _old_visible_folders(store: "LogStore", snapshot: "Snapshot", cutoff_ms: int) -> tuple[tuple[str, ...], int]:
    """The visible folders older than ``cutoff_ms``, deepest first, and how many visible folders
    there are (plus the root)."""
    listing = store.list_folders_recursive()
    if not listing:
        return (), 1
    paths = pa.array([path for path, _ in listing], pa.string())
    visible = _visible(paths, snapshot.partition_columns, _iceberg_enabled(snapshot.properties)).to_pylist()
    shown = [(path, mtime) for (path, mtime), keep in zip(listing, visible) if keep]
    old = sorted((path for path, mtime in shown if mtime < cutoff_ms), key=lambda p: (-p.count("/"), p))
    return tuple(old), len(shown) + 1


def now_ms() -> float:
    """The clock VACUUM measures file ages against (one place, so tests can move it)."""
    return time.time() * 1000


def relative_paths(store: "LogStore", add_paths: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Paths (relative to the table root, decoded) of add/remove ``path`` values.

    Plain relative paths (the common case) pass through untouched; only URI-encoded or absolute
    ones (with a scheme, or a bare ``/path``) are decoded one by one.
    """
    arr = add_paths.combine_chunks() if isinstance(add_paths, pa.ChunkedArray) else add_paths
    arr = arr.cast(pa.string())
    if not len(arr):
        return arr
    needs_work = pc.match_substring_regex(arr, r"%|^/|^[A-Za-z][A-Za-z0-9+.\-]+:")
    if not pc.any(needs_work).as_py():
        return arr
    prefix = store.root.rstrip("/") + "/"
    real_prefix = _real_root(store)
    out = arr.to_pylist()
    for i in pc.indices_nonzero(needs_work).to_pylist():
        decoded = decode_path(out[i])
        full = data_file_path(store, decoded)
        if full.startswith(prefix):
            out[i] = full[len(prefix):]
        elif real_prefix is not None and os.path.realpath(full).startswith(real_prefix):
            # the table was opened through a symlink (or the writer named it through one): the
            # same file, so it must match its listing entry, or VACUUM would take a live file
            out[i] = os.path.realpath(full)[len(real_prefix):]
        else:
            out[i] = decoded
    return pa.array(out, pa.string())


def _real_root(store: "LogStore") -> str | None:
    """The local table root with symlinks resolved, ending in "/"; None off local disk."""
    from ...txnlog.store import LocalLogStore

    if not isinstance(store, LocalLogStore):
        return None
    return os.path.realpath(store.root).rstrip("/") + "/"


def deletion_vector_paths(store: "LogStore", actions: pa.Table) -> pa.Array:
    """Paths (relative to the table root) of the DV files the actions' deletion vectors are in.

    A ``u`` descriptor whose path does not decode is CorruptDeletionVectorError naming the data
    file, as a read reports it: VACUUM cannot know which DV file it protects, so it deletes nothing.
    """
    if "deletionVector" not in actions.column_names or not actions.num_rows:
        return pa.array([], pa.string())
    column = actions.column("deletionVector")
    has = pc.is_valid(column)
    present = column.filter(has)
    if not len(present):
        return pa.array([], pa.string())
    data_files = actions.column("path").filter(has).to_pylist()
    out = []
    for dv, data_file in zip(present.to_pylist(), data_files):
        if dv["storageType"] == "u":
            try:
                out.append(dv_file_relative_path(dv["pathOrInlineDv"]))
            except (ValueError, TypeError) as exc:
                raise CorruptDeletionVectorError(
                    f"the deletion vector of {data_file!r} names no valid file ({exc}); nothing was vacuumed: "
                    f"VACUUM cannot tell which deletion vector file is still needed") from exc
        elif dv["storageType"] == "p":
            out.append(dv["pathOrInlineDv"])
    return relative_paths(store, pa.array(out, pa.string())) if out else pa.array([], pa.string())


def _visible(paths: pa.Array, partition_columns: list[str], iceberg_metadata_hidden: bool = False) -> pa.Array:
    """False for paths with a hidden component (Delta's rule, see the module docstring); with
    ``iceberg_metadata_hidden`` (UniForm), also for files under a folder named ``metadata``."""
    pattern = r"(^|/)([._]|metadata/)" if iceberg_metadata_hidden else r"(^|/)[._]"
    maybe_hidden = pc.match_substring_regex(paths, pattern)
    if not pc.any(maybe_hidden).as_py():
        return pc.invert(maybe_hidden)
    allowed = tuple(_VACUUMED_UNDERSCORE_DIRS) + tuple(f"{escape_partition_value(c)}=" for c in partition_columns)
    visible = pc.invert(maybe_hidden).to_pylist()
    for i in pc.indices_nonzero(maybe_hidden).to_pylist():
        *folders, name = paths[i].as_py().split("/")
        hidden = any(p[:1] in "._" and not p.startswith(allowed) for p in (*folders, name) if p)
        visible[i] = not (hidden or (iceberg_metadata_hidden and "metadata" in folders))
    return pa.array(visible, pa.bool_())


def _iceberg_enabled(properties: dict[str, str]) -> bool:
    """UniForm: Iceberg metadata is written beside the data, in ``metadata/``, which Delta's
    VACUUM never touches (``delta.universalFormat.enabledFormats`` names ``iceberg``)."""
    formats = properties.get(_UNIVERSAL_FORMATS, "")
    return "iceberg" in {f.strip().lower() for f in formats.split(",")}


def _delete(store: "LogStore", relative: list[str]) -> None:
    batches = [relative[i:i + _DELETE_BATCH] for i in range(0, len(relative), _DELETE_BATCH)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(store.delete_files, batches))
