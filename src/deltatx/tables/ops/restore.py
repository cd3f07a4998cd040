"""RESTORE: make the table's live state equal to an older version's, as one new commit.

Nothing is rewritten: the difference between the two file sets is staged, columnar, by logical
file key (path plus deletion-vector unique id, so a file re-added with a DV differs from the
same path without one)::

    old = load_snapshot(version | timestamp)        current = the transaction's files
    remove  current − old   (dataChange=true)
    re-add  old − current   (dataChange=true; their data files must still exist)
    metaData of the old version when it differs (schema, partitioning, properties)

The protocol is never downgraded (Delta keeps the newer protocol). Catalog ownership is not
restored: a catalog-managed table keeps its current ``deltatx.catalogId`` and in-commit-timestamp
properties, and a table released from its catalog restored to a version from its catalog era
gets neither back (:mod:`deltatx.catalog.rules`), so it stays a path table other engines write.
A re-added file that VACUUM already deleted — its data file or the file holding its deletion
vector — makes the restore fail with :class:`DataFileNotFoundError` before anything is
committed: committed, it would leave a latest version no engine can read. A clustered table
gets the old version's clustering columns back (none when that version was not clustered), as
Delta's RESTORE rewrites the ``delta.clustering`` domain; other domains (the row-id high-water
mark above all) stay as they are. Restoring the current version is refused, as in Delta (there
is nothing to commit). The whole current table is the read: a concurrent change to any file
conflicts.
"""

from __future__ import annotations

import numbers
import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import DataFileNotFoundError, TimeTravelError
from ...io.paths import decode_path, first_and_more, missing_files
from ...txnlog import row_tracking
from ...txnlog.clustering import clustering_domain, clustering_paths, is_clustered
from ...txnlog.features import CATALOG_MANAGED
from ...txnlog.replay import file_keys
from ...txnlog.snapshot import load_snapshot

from ..identity import keep_high_water_marks
from .dml_metrics import total_size
from .vacuum import deletion_vector_paths

if TYPE_CHECKING:
    from ..transaction import Transaction


def restored_files(tx: "Transaction", files: pa.Table) -> list[str]:
    """Decoded paths of every file a re-add of ``files`` names: its data files, and the files
    holding their deletion vectors (inline ones have none)."""
    data = [decode_path(p) for p in files["path"].to_pylist()] if files.num_rows else []
    return data + sorted(set(deletion_vector_paths(tx.store, files).to_pylist()))


def refuse_missing(tx: "Transaction", version: int, needed: list[str]) -> None:
    """DataFileNotFoundError, nothing committed, when one of the ``needed`` files is gone."""
    missing = missing_files(tx.store, needed)
    if missing:
        raise DataFileNotFoundError(
            f"cannot restore {tx.table.uri!r} to version {version}: file {first_and_more(missing)} of that version "
            f"no longer exist(s), probably removed by VACUUM; the restored table could not be read. Restore a "
            f"newer version whose files are still retained."
        )


def _restored_clustering(tx: "Transaction", old_domains: dict[str, Any], old_protocol: Any) -> None:
    """Stage the ``delta.clustering`` domain of the restored version when the table has one now:
    the old version's columns, or none when it was not clustered (Delta's RESTORE does the same)."""
    if clustering_paths(tx.domains) is None:
        return
    old = clustering_paths(old_domains) if is_clustered(old_protocol) else None
    restored = clustering_domain(old or [])
    if tx.domains.get(restored.domain) != restored:
        tx.stage_domain(restored, system=True)


def _last_row_ids(adds: pa.Table, tombstones: pa.Table) -> pa.Table:
    """A re-added file keeps the row ids of the last add of its path (PROTOCOL.md, Row Tracking:
    recommitted adds carry the ``baseRowId`` / ``defaultRowCommitVersion`` of the last committed
    add with the same path). The remove that took the file out carries them; the old version's
    add may predate them (a file written before row tracking, backfilled later)."""
    if not tombstones.num_rows:
        return adds
    wanted = pc.is_in(tombstones["path"], value_set=adds["path"].combine_chunks())
    last = {r["path"]: r for r in tombstones.filter(wanted).select(
        ["path", "baseRowId", "defaultRowCommitVersion"]).to_pylist() if r["baseRowId"] is not None}
    if not last:
        return adds
    paths = adds["path"].to_pylist()
    columns = {}
    for name in ("baseRowId", "defaultRowCommitVersion"):
        current = adds[name].to_pylist()
        columns[name] = pa.array([last[p][name] if p in last else c for p, c in zip(paths, current)], pa.int64())
        adds = adds.set_column(adds.schema.get_field_index(name), name, columns[name])
    return adds


def stage_restore(tx: "Transaction", version: int | None = None, timestamp_ms: int | None = None) -> dict[str, Any]:
    """Stage the actions that bring the table back to ``version`` (or the one at ``timestamp_ms``)."""
    if (version is None) == (timestamp_ms is None):
        raise TimeTravelError("restore needs exactly one of version= or timestamp=")
    if version is not None and (isinstance(version, bool) or not isinstance(version, numbers.Integral)):
        raise TimeTravelError(f"restore version must be an integer, got {version!r} ({type(version).__name__})")
    version = int(version) if version is not None else None
    started = time.perf_counter()
    if version is not None and version > tx.read_version:
        raise TimeTravelError(
            f"cannot restore to version {version}: the table's latest version is {tx.read_version}"
        )
    old = load_snapshot(tx.store, version=version, timestamp_ms=timestamp_ms)  # refuses one after the last commit
    if old.version == tx.read_version:  # Delta: the version to restore must be older than the latest
        raise TimeTravelError(
            f"cannot restore {tx.table.uri!r} to version {old.version}: it is the table's current version; "
            f"restore an older version"
        )
    _, current = tx.scan(None)  # RESTORE depends on the whole current table

    old_files = old.files
    old_keys, current_keys = file_keys(old_files), file_keys(current)
    in_old = pc.is_in(current_keys, value_set=old_keys.combine_chunks()) if current.num_rows else None
    to_remove = current.filter(pc.invert(in_old)) if in_old is not None else current
    if current.num_rows and old_files.num_rows:
        in_current = pc.is_in(old_keys, value_set=current_keys.combine_chunks())
        to_add = old_files.filter(pc.invert(in_current))
    else:
        to_add = old_files

    needed = restored_files(tx, to_add)
    refuse_missing(tx, old.version, needed)

    if to_add.num_rows:
        n = to_add.num_rows
        to_add = to_add.set_column(
            to_add.schema.get_field_index("dataChange"), "dataChange", pa.array([True] * n, pa.bool_())
        )
        if row_tracking.is_supported(tx.protocol):
            to_add = _last_row_ids(to_add, tx.snapshot.tombstones)
    tx.stage_removes(to_remove, data_change=True)
    tx.stage_adds(to_add, written=False)  # files of an older version: the table's, never ours to delete
    if needed:  # a VACUUM may delete them before the commit lands: checked again then
        tx.require_at_commit(needed)
    restored = keep_high_water_marks(old.metadata, tx.metadata)
    keep = getattr(tx.store, "restored_metadata", None)  # a catalog keeps what managing the table requires
    if keep is None and CATALOG_MANAGED in (old.protocol.writer_features or ()):
        # a path table released from its catalog, back to a version from its catalog era: the
        # catalog's identity and its in-commit-timestamp requirement do not come back with it
        from ...catalog.rules import released_restored_metadata

        keep = released_restored_metadata
    if keep is not None:
        restored = keep(tx.metadata, restored)
    if restored != tx.metadata:  # a column dropped since comes back with its own data
        tx.stage_metadata(restored, keep_column_ids=True)
    _restored_clustering(tx, old.domains, old.protocol)

    kept = current.num_rows - to_remove.num_rows
    metrics = {
        "numRestoredFiles": to_add.num_rows,
        "numRemovedFiles": to_remove.num_rows,
        "restoredFilesSize": total_size(to_add),
        "removedFilesSize": total_size(to_remove),
        "numOfFilesAfterRestore": kept + to_add.num_rows,
        "tableSizeAfterRestore": total_size(current) - total_size(to_remove) + total_size(to_add),
        "executionTimeMs": int((time.perf_counter() - started) * 1000),
    }
    params: dict[str, Any] = {"version": old.version} if version is not None else {"timestamp": timestamp_ms}
    if version is None:
        params["version"] = old.version
    # committed even when the two states already agree (files and metadata): Delta's RESTORE
    # always writes its commit, so the history shows it and the result names a new version
    tx.note_operation("RESTORE", params, metrics, recorded_alone=True)
    return metrics
