"""Merge-on-read: DELETE/UPDATE/MERGE mark changed rows in deletion vectors instead of rewriting.

With ``delta.enableDeletionVectors=true`` a file holding changed rows is not rewritten: its
changed row positions join its deletion vector and the commit carries ``remove(path, oldDV)`` +
``add(path, newDV)`` (same stats, ``tightBounds: false``); the new versions of updated rows go to
new files. A file whose every row is deleted is removed outright. Every file the operation read
is recorded row by row (:class:`~deltatx.tables.row_level.RowLevelRecorder`), so a concurrent
change to other rows of the same file is not a conflict.

On row-tracking tables, rewritten rows keep their ids: reads carry ``_metadata.row_id`` and
``_metadata.row_commit_version`` along, and :func:`physical` turns them into the table's
materialized columns (the commit version is cleared for changed rows: they take the new file's
``defaultRowCommitVersion``, the version that changed them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from ...io.deletion_vector_writer import DeletionVectorFile, load_bitmap
from ...io.row_metadata import FILE_PATH, ROW_COMMIT_VERSION, ROW_ID, ROW_INDEX, MaterializedColumns
from ...txnlog import row_tracking
from ...txnlog.actions import DELETION_VECTOR, deletion_vector_unique_id
from ...txnlog.features import writer_features
from .. import properties as props
from ..row_level import loose_stats

if TYPE_CHECKING:
    from ..transaction import Transaction


def uses_deletion_vectors(tx: "Transaction") -> bool:
    """DML writes DVs: the property is on and the protocol lists the feature."""
    return props.flag(tx.properties, props.ENABLE_DELETION_VECTORS, False) and \
        "deletionVectors" in writer_features(tx.protocol)


def tracks_rows(tx: "Transaction") -> bool:
    return row_tracking.assigns_ids(tx.protocol, tx.properties)


def materialized(tx: "Transaction") -> MaterializedColumns:
    return MaterializedColumns.from_configuration(tx.properties)


def row_columns(tx: "Transaction", merge_on_read: bool) -> list[str]:
    """The ``_metadata.*`` columns a rewriting read needs: positions for DVs, ids to preserve."""
    cols = [ROW_INDEX] if merge_on_read else []
    if tracks_rows(tx):
        cols += [ROW_ID, ROW_COMMIT_VERSION]
    return cols


def mark_changed(rows: pa.Table, changed: pa.Array | pa.ChunkedArray | None = None) -> pa.Table:
    """Clear the row-commit version of changed rows (all rows when ``changed`` is None): the
    rewrite that carries them is the commit that changed them."""
    if ROW_COMMIT_VERSION not in rows.column_names:
        return rows
    i = rows.schema.get_field_index(ROW_COMMIT_VERSION)
    column = rows.column(i)
    if changed is None:
        cleared = pa.nulls(rows.num_rows, pa.int64())
    else:
        cleared = pc.if_else(changed, pa.scalar(None, pa.int64()), column)
    return rows.set_column(i, rows.schema.field(i), cleared)


def physical(tx: "Transaction", rows: pa.Table) -> tuple[pa.Table, pa.Schema, tuple[str, ...]]:
    """Rows as written to a data file: ``_metadata.row_id``/``row_commit_version`` renamed to the
    materialized columns (kept only on row-tracking tables), other metadata columns dropped.
    Returns (rows, file schema, the materialized column names)."""
    schema = tx.schema
    extra = [c for c in rows.column_names if c.startswith("_metadata.")]
    if not extra:
        return rows, schema, ()
    names = materialized(tx)
    keep = {ROW_ID: names.row_id, ROW_COMMIT_VERSION: names.row_commit_version} if tracks_rows(tx) else {}
    columns = [rows.column(f.name) for f in schema]
    fields = list(schema)
    added: list[str] = []
    for meta, physical_name in keep.items():
        if physical_name and meta in rows.column_names:
            columns.append(rows.column(meta))
            fields.append(pa.field(physical_name, pa.int64(), nullable=True))
            added.append(physical_name)
    out_schema = pa.schema(fields, metadata=schema.metadata)
    return pa.Table.from_arrays(columns, schema=out_schema), out_schema, tuple(added)


def _record(tx: "Transaction", file: dict[str, Any], rows: pa.Table, changed: np.ndarray | None,
            read: np.ndarray | None) -> None:
    """Record one file as read: ``rows`` are the rows of it this transaction read (with
    ``_metadata.row_index``, and ``_metadata.row_id`` on row-tracking tables)."""
    positions = rows.column(ROW_INDEX).to_numpy() if ROW_INDEX in rows.column_names else None
    ids = rows.column(ROW_ID) if ROW_ID in rows.column_names else None
    row_ids = ids.to_numpy(zero_copy_only=False) if ids is not None and ids.null_count == 0 else None
    if row_ids is not None and positions is not None and len(positions) > 1 and (np.diff(positions) < 0).any():
        order = np.argsort(positions, kind="stable")
        positions, row_ids = positions[order], row_ids[order]
    base = load_bitmap(tx.store, file["deletionVector"], file["path"])
    tx.row_level.record(file, base, changed=changed, read=read,
                        row_positions=positions if row_ids is not None else None, row_ids=row_ids)


def record_read(tx: "Transaction", files: pa.Table, index: int, rows: pa.Table,
                changed: np.ndarray | None = None, read: np.ndarray | None = None) -> None:
    """Record file ``index`` of ``files`` as read (``rows`` = the rows of it a DML read)."""
    _record(tx, _file_row(files, index), rows, changed, read)


#: the add columns recording a read needs (a whole add row as Python costs ~3x more)
_RECORDED = ("path", "deletionVector", "stats")


def _file_row(files: pa.Table, index: int) -> dict[str, Any]:
    """File ``index`` of ``files`` as the dict :func:`_record` needs."""
    return {name: files.column(name)[index].as_py() for name in _RECORDED}


def record_reads_by_file(tx: "Transaction", files: pa.Table, rows: pa.Table) -> None:
    """Record every file of ``files`` as read, with the positions of its rows in ``rows``
    (which carries ``_metadata.file_path`` and ``_metadata.row_index``)."""
    paths = rows.column(FILE_PATH)
    for i, path in enumerate(files.column("path").to_pylist()):
        mine = rows.filter(pc.equal(paths, path)) if rows.num_rows else rows
        _record(tx, _file_row(files, i), mine, None, mine.column(ROW_INDEX).to_numpy())


def _base_deleted(tx: "Transaction", descriptor: dict[str, Any] | None, path: str) -> BitMap64:
    """The rows a file's current DV deletes: from what this transaction recorded when it read the
    file (the same DV), else decoded again."""
    known = tx.row_level.files.get(path)
    if known is not None and deletion_vector_unique_id(known.base_dv) == deletion_vector_unique_id(descriptor):
        return known.base_deleted
    return load_bitmap(tx.store, descriptor, path)


def stage_changed_rows(tx: "Transaction", files: pa.Table, changed: list[np.ndarray]) -> dict[str, int]:
    """Mark ``changed[i]`` (physical positions) deleted in file ``i`` of ``files``: stage
    remove(old DV) + add(new DV), or a plain remove when no row is left. One DV file for all."""
    out = DeletionVectorFile(tx.store, props.dv_inline_max_bytes(tx.properties))
    readd: list[int] = []
    descriptors: list[dict[str, Any]] = []
    metrics = {"numDeletionVectorsAdded": 0, "numDeletionVectorsUpdated": 0, "numDeletionVectorsRemoved": 0,
               "numRemovedFiles": 0, "numRemovedBytes": 0}
    counts = row_tracking.physical_records(files)
    for i in range(files.num_rows):
        descriptor = files.column("deletionVector")[i].as_py()
        path = files.column("path")[i].as_py()
        bitmap = _base_deleted(tx, descriptor, path) | BitMap64(changed[i].tolist())
        if len(bitmap) >= counts[i]:
            metrics["numRemovedFiles"] += 1
            metrics["numRemovedBytes"] += int(files.column("size")[i].as_py() or 0)
            metrics["numDeletionVectorsRemoved"] += descriptor is not None
            continue
        readd.append(i)
        descriptors.append(out.add(bitmap))
        # Delta's counting: an updated DV is a removed one plus an added one, and is counted
        # under all three (DeletionVectorsSuite, "Metrics when deleting with DV")
        metrics["numDeletionVectorsAdded"] += 1
        if descriptor is not None:
            metrics["numDeletionVectorsUpdated"] += 1
            metrics["numDeletionVectorsRemoved"] += 1
    out.write()
    tx.note_dv_file(out.written)
    if readd:
        gone = np.ones(files.num_rows, dtype=bool)
        gone[readd] = False
        if gone.any():
            tx.stage_removes(files.filter(pa.array(gone)))
        adds = files if readd == list(range(files.num_rows)) else files.take(pa.array(readd, pa.int64()))
        tx.stage_removes(adds, keep_own_files=True)  # re-added below: a file of this txn stays
        adds = adds.set_column(adds.schema.get_field_index("deletionVector"), "deletionVector",
                               pa.array(descriptors, DELETION_VECTOR))
        adds = adds.set_column(adds.schema.get_field_index("stats"), "stats",
                               pa.array([loose_stats(s) for s in adds.column("stats").to_pylist()], pa.string()))
        adds = adds.set_column(adds.schema.get_field_index("dataChange"), "dataChange",
                               pa.array([True] * adds.num_rows, pa.bool_()))
        tx.stage_adds(adds, written=False)
    else:
        tx.stage_removes(files)
    return metrics


def drop_metadata(rows: pa.Table) -> pa.Table:
    extra = [c for c in rows.column_names if c in (ROW_INDEX, FILE_PATH)]
    return rows.drop_columns(extra) if extra else rows
