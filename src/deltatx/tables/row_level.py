"""The transaction side of row-level concurrency: record rows, load a winner's, write rebased DVs.

The conflict checker is pure (:mod:`deltatx.conflicts.row_level`), so everything with I/O lives
here, around it::

    DML reads a file ──► RowLevelRecorder.record(file, changed/read positions, row ids)
    commit lost ──► for each winner:
                       load_winner_rows(store, load_request(...))   (decode DVs, read row-id columns)
                       check_commit(info, winner, loaded)             (pure: raise or rebase)
                    ──► write_pending_dvs(...)                        (the rebased bitmaps, one DV file)
"""

from __future__ import annotations

import re

from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap64

from ..conflicts.row_level import FileRows, LoadRequest, RowLevelState, WinnerRows, dv_unique_id
from ..io.deletion_vector_writer import DeletionVectorFile, load_bitmap
from ..io.paths import data_file_path, decode_path
from ..io.reader import pre_buffers, read_files
from ..io.row_metadata import MaterializedColumns
from ..txnlog.actions import DELETION_VECTOR
from ..txnlog.row_tracking import physical_record_count, physical_records

if TYPE_CHECKING:
    from ..conflicts.checker import AddedRowsRequest
    from ..txnlog.store import LogStore


class RowLevelRecorder:
    """What a transaction's DML did to each file, row by row (mutable while it stages)."""

    def __init__(self) -> None:
        self.files: dict[str, FileRows] = {}
        self.compacted: dict[str, FileRows] = {}
        self.compaction_outputs: list[str] = []
        #: records that changed rows: a statement that failed after one cannot be committed around
        #: (the rebase onto a winner's DV would carry its changed rows; Transaction.run_statement)
        self.changes_recorded = 0

    def record(self, file: Mapping[str, Any], base_deleted: BitMap64, *,
               changed: np.ndarray | BitMap64 | None = None, read: np.ndarray | BitMap64 | None = None,
               row_positions: np.ndarray | None = None, row_ids: np.ndarray | None = None,
               compaction: bool = False) -> None:
        """Note that this transaction read ``file`` (an add row as a dict) and changed/read rows.

        A file recorded twice in one transaction (two statements) accumulates its rows and keeps
        the DV it was first read with: that is the committed state the commit replaces.
        ``changed``/``read`` may also come as bitmaps (rows recorded elsewhere, e.g. by a Spark
        task, arrive serialized as bitmaps: no detour through a list of positions).
        """
        path = file["path"]
        into = self.compacted if compaction else self.files
        changed_bm = _bitmap(changed)
        if changed_bm or compaction:
            self.changes_recorded += 1
        read_bm = _bitmap(read)
        read_bm |= changed_bm
        previous = into.get(path)
        if previous is not None:
            changed_bm |= previous.changed
            read_bm |= previous.read
            if row_positions is None:
                row_positions, row_ids = previous.row_positions, previous.row_ids
            elif previous.row_positions is not None:
                row_positions, row_ids = _merge_ids(previous.row_positions, previous.row_ids,
                                                    row_positions, row_ids)
            base_dv, base_deleted = previous.base_dv, previous.base_deleted
        else:
            base_dv = file.get("deletionVector")
        n = physical_record_count(path, file.get("stats"))
        into[path] = FileRows(path=path, base_dv=base_dv, base_deleted=base_deleted, num_records=n,
                              changed=changed_bm, read=read_bm, row_positions=row_positions, row_ids=row_ids)

    def note_compaction_output(self, paths: list[str]) -> None:
        self.compaction_outputs.extend(paths)

    def state(self) -> RowLevelState:
        return RowLevelState(files=dict(self.files), compacted=dict(self.compacted),
                             compaction_outputs=tuple(self.compaction_outputs))


def _bitmap(positions: np.ndarray | BitMap64 | None) -> BitMap64:
    if isinstance(positions, BitMap64):
        return BitMap64(positions)  # a copy: the caller's bitmap is not accumulated into
    return BitMap64(positions.tolist()) if positions is not None and len(positions) else BitMap64()


def _merge_ids(p1: np.ndarray, i1: np.ndarray | None, p2: np.ndarray, i2: np.ndarray | None):
    if i1 is None or i2 is None:
        return None, None
    positions = np.concatenate([p1, p2])
    ids = np.concatenate([i1, i2])
    order = np.unique(positions, return_index=True)[1]
    return positions[order], ids[order]


# --------------------------------------------------------------------------------------------
# Loading what the checker needs for one winner
# --------------------------------------------------------------------------------------------


def load_winner_rows(store: "LogStore", request: LoadRequest | None, configuration: dict[str, str]) -> WinnerRows:
    """Decode the winner's DVs and read row-id columns the row-level check asked for."""
    if request is None:
        return WinnerRows()
    bitmaps = {(path, dv_unique_id(d)): load_bitmap(store, dict(d), path) for path, d in request.dvs}
    row_ids: dict[str, np.ndarray] = {}
    files = request.row_id_files
    if files is not None and files.num_rows:
        materialized = MaterializedColumns.from_configuration(configuration)
        for i in range(files.num_rows):
            row = files.slice(i, 1)
            row_ids[row.column("path")[0].as_py()] = file_row_ids(store, row, materialized)
    return WinnerRows(bitmaps=bitmaps, row_ids=row_ids)


def load_added_rows(store: "LogStore", request: "AddedRowsRequest | None", schema: pa.Schema,
                    partition_columns: list[str], column_mapping: Any = None) -> dict[str, pa.Table]:
    """The rows of the winner adds the added-files check asked for (conflicts.checker.
    added_rows_request), the predicates' columns only, deletion vectors applied, by path."""
    if request is None:
        return {}
    columns = list(request.columns) or None
    files = request.files
    return {files.column("path")[i].as_py(): read_files(store, files.slice(i, 1), schema, partition_columns,
                                                         columns=columns, column_mapping=column_mapping)
            for i in range(files.num_rows)}


def file_row_ids(store: "LogStore", file: pa.Table, materialized: MaterializedColumns) -> np.ndarray:
    """The row id of every physical row of one data file (materialized column, else baseRowId + i)."""
    path = file.column("path")[0].as_py()
    location = data_file_path(store, decode_path(path))
    base = file.column("baseRowId")[0].as_py()
    with pq.ParquetFile(location, filesystem=store.arrow_fs, pre_buffer=pre_buffers(store.arrow_fs)) as pf:
        n = pf.metadata.num_rows
        column = materialized.row_id
        stored = pf.read(columns=[column]).column(0) if column and column in pf.schema_arrow.names else None
    default = np.arange(n, dtype=np.int64) + (base if base is not None else 0)
    if stored is None:
        return default
    values = pc.fill_null(stored, -1).to_numpy().astype(np.int64)
    return np.where(values >= 0, values, default) if stored.null_count else values


# --------------------------------------------------------------------------------------------
# Writing the rebased DVs
# --------------------------------------------------------------------------------------------


_TIGHT_BOUNDS = re.compile(r'"tightBounds"\s*:\s*true')


def loose_stats(stats: str | None) -> str | None:
    """The same stats with ``tightBounds: false``: min/max may now bound deleted rows too.

    Edited as text, not parsed and dumped again: a JSON parser reads a DECIMAL bound such as
    12345678.0123456789 as a binary float, and writing that back moves the bound inside the
    data (a min rounded up, a max rounded down), so readers would skip files holding matches.
    Only the top-level key is edited: a column may be named ``tightBounds`` too."""
    if not stats:
        return stats
    doc = orjson.loads(stats)
    if not isinstance(doc, dict) or doc.get("tightBounds") is False:
        return stats
    if "tightBounds" not in doc:
        body = stats.lstrip()[1:].lstrip()
        return '{"tightBounds":false}' if body.startswith("}") else '{"tightBounds":false,' + body
    for found in _TIGHT_BOUNDS.finditer(stats):
        if _depth_at(stats, found.start()) == 1:
            return stats[:found.start()] + '"tightBounds":false' + stats[found.end():]
    return stats  # not reached for valid stats JSON


def tight_stats(stats: str | None) -> str | None:
    """The stats of a new file of a table that supports deletion vectors, with
    ``"tightBounds":true`` first, as Delta writes them (its readers take a missing flag as
    unknown). Stats that say either already are kept as they are."""
    if not stats:
        return stats
    if '"tightBounds"' in stats:  # the key, or a column or value of that name: only the top level counts
        try:
            doc = orjson.loads(stats)
        except orjson.JSONDecodeError:
            return stats
        if not isinstance(doc, dict) or "tightBounds" in doc:
            return stats
    body = stats.lstrip()[1:].lstrip()
    return '{"tightBounds":true}' if body.startswith("}") else '{"tightBounds":true,' + body


def with_tight_bounds(adds: pa.Table) -> pa.Table:
    """``adds`` (new files, no DV yet) with :func:`tight_stats` applied."""
    stats = adds.column("stats").to_pylist()
    tight = [tight_stats(s) for s in stats]
    if tight == stats:
        return adds
    return adds.set_column(adds.schema.get_field_index("stats"), "stats", pa.array(tight, pa.string()))


def _depth_at(text: str, end: int) -> int:
    """Object/array nesting depth of JSON ``text`` at offset ``end`` (strings skipped)."""
    depth, in_string, escaped = 0, False, False
    for ch in text[:end]:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return depth


def with_deletion_vectors(adds: pa.Table, descriptors: Mapping[str, dict[str, Any]]) -> pa.Table:
    """``adds`` whose rows named in ``descriptors`` carry that DV and loose stats (few rows)."""
    paths = adds.column("path").to_pylist()
    hit = [p in descriptors for p in paths]
    if not any(hit):
        return adds
    dvs = adds.column("deletionVector").to_pylist()
    stats = adds.column("stats").to_pylist()
    new_dvs = [descriptors[p] if h else d for p, h, d in zip(paths, hit, dvs)]
    new_stats = [loose_stats(s) if h else s for h, s in zip(hit, stats)]
    adds = adds.set_column(adds.schema.get_field_index("deletionVector"), "deletionVector",
                           pa.array(new_dvs, DELETION_VECTOR))
    return adds.set_column(adds.schema.get_field_index("stats"), "stats", pa.array(new_stats, pa.string()))


def write_pending_dvs(store: "LogStore", adds: pa.Table, state: RowLevelState | None, inline_max_bytes: int
                      ) -> tuple[pa.Table, RowLevelState | None, str | None]:
    """Write the bitmaps the checker rebased (one DV file) and attach them to their adds.

    ``pending`` holds the *whole* DV each add must carry (a later rebase unions into it), so
    only the bitmaps that changed since the last write are written again.
    """
    if state is None or not state.pending:
        return adds, state, None
    paths = adds.column("path").to_pylist()
    pending_rows = [i for i, path in enumerate(paths) if path in state.pending]
    if not pending_rows:  # every add a bitmap was for is gone already (dropped by an earlier write)
        return adds, state, None
    counts = dict(zip([paths[i] for i in pending_rows],
                      physical_records(adds.select(["path", "stats"]).take(pending_rows)).tolist()))
    changed = {path: bitmap for path, bitmap in state.pending.items()
               if path in counts and state.written.get(path) != bitmap}
    if not changed:
        return adds, state, None
    # a file whose every row is now deleted is not added at all (e.g. a compaction's output whose
    # source rows a concurrent compaction already moved)
    empty = [path for path, bitmap in changed.items() if len(bitmap) >= counts[path]]
    if empty:
        adds = adds.filter(pc.invert(pc.is_in(adds["path"], value_set=pa.array(sorted(empty), pa.string()))))
    out = DeletionVectorFile(store, inline_max_bytes)
    descriptors = {path: out.add(bitmap) for path, bitmap in sorted(changed.items()) if path not in empty}
    out.write()
    written = {**state.written, **{path: bitmap.copy() for path, bitmap in changed.items()}}
    return with_deletion_vectors(adds, descriptors), state.replace(written=written), out.written
