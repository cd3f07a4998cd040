"""The layout of rewritten files: rows ordered along a space-filling curve, cut to a target size.

Liquid clustering and ``OPTIMIZE ZORDER BY`` share the rewrite machinery of OPTIMIZE
(:func:`.optimize.stage_rewrite`: read a bin of files, write it back with ``dataChange=false``,
keeping row ids and purging deletion vectors). A :class:`Layout` is what they add to it:

- :meth:`Layout.arrange` sorts the bin's rows along the curve over the clustering columns
  (:mod:`deltatx.io.curves`), so each contiguous run of rows is a compact region of that space,
  and picks where to cut files of about ``target_size`` bytes (rows per file estimated from the
  input files' bytes per row): each cut slides a little to the border of the coarsest cell of the
  curve's grid nearby, so neighbouring files tile the space rather than overlap;
- :meth:`Layout.write` writes each slice as one file, so every file's min/max statistics are as
  tight as its region;
- :meth:`Layout.mark` tags the new files as Delta does: ``clusteringProvider`` (liquid
  clustering only) and the ``ZCUBE_*`` tags naming the run, its columns and its curve.
"""

from __future__ import annotations

import dataclasses
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ...io.curves import curve_sort, cut_points
from ...io.paths import decode_path
from ...io.writer import WriteOptions, write_data_files
from ...txnlog.actions import FILE_SCHEMA
from ...txnlog.stats import record_counts

if TYPE_CHECKING:
    from ...txnlog.store import LogStore

#: Delta's add-file tags of a clustering / Z-order run (``AddFile.Tags``)
ZCUBE_ID = "ZCUBE_ID"
ZCUBE_ZORDER_BY = "ZCUBE_ZORDER_BY"
ZCUBE_ZORDER_CURVE = "ZCUBE_ZORDER_CURVE"

_HUGE = 1 << 62
#: files of one run encoded at once
_PARALLEL_FILES = 2


def column_at(data: pa.Table, path: Sequence[str]) -> pa.ChunkedArray:
    """The values of a (possibly nested) column of ``data``."""
    values = data.column(path[0])
    for part in path[1:]:
        values = pc.struct_field(values, part)
    return values


def physical_rows(files: pa.Table) -> int | None:
    """Total ``numRecords`` of the files, or None when a file has no such statistic."""
    found = record_counts(files["stats"])
    if found.null_count:
        return None
    return int(pc.sum(found).as_py() or 0)


@dataclass(frozen=True)
class Layout:
    """How one clustering / Z-order run orders rows and cuts and tags the files it writes."""

    #: logical column paths of the rows read (the curve's dimensions, in order)
    columns: tuple[tuple[str, ...], ...]
    #: ``"hilbert"`` (liquid clustering) or ``"zorder"`` (OPTIMIZE ZORDER BY)
    curve: str
    target_size: int
    #: ``add.clusteringProvider`` of the new files (None: leave it unset)
    provider: str | None
    #: the column list recorded in ``ZCUBE_ZORDER_BY`` (JSON); compared on later runs
    recorded_columns: str
    run_id: str = dataclasses.field(default_factory=lambda: str(uuid.uuid4()))

    @staticmethod
    def columns_json(names: Sequence[str]) -> str:
        return orjson.dumps(list(names)).decode()

    def rows_per_file(self, files: pa.Table, data: pa.Table) -> int:
        """Rows per file for about ``target_size`` bytes: the input files' Parquet bytes per row
        (the unit the target is in), or the in-memory size when a file lacks ``numRecords``."""
        rows = physical_rows(files) if files.num_rows else None
        total = int(pc.sum(files["size"]).as_py() or 0) if files.num_rows else 0
        if rows and total:
            return max(1, int(self.target_size * rows / total))
        return max(1, int(self.target_size * data.num_rows / max(data.nbytes, 1)))

    def arrange(self, data: pa.Table, files: pa.Table) -> tuple[pa.Table, list[int]]:
        """The rows in curve order (stable) and the row offsets where files are cut."""
        if data.num_rows < 2:
            return data, [0, data.num_rows]
        order, levels = curve_sort([column_at(data, p) for p in self.columns], self.curve)
        return data.take(pa.array(order, pa.int64())), cut_points(levels, self.rows_per_file(files, data))

    def write(self, store: "LogStore", data: pa.Table, cuts: list[int], schema: pa.Schema,
              partition_columns: list[str], options: WriteOptions) -> pa.Table:
        """Write each slice ``cuts`` delimits as one file (``options`` must not cut further);
        tagged add actions. On failure the slices already written are deleted."""
        pieces = [data.slice(a, b - a) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
        one_file = dataclasses.replace(options, target_file_rows=_HUGE, target_file_bytes=_HUGE, max_workers=1)

        def write(piece: pa.Table) -> pa.Table:
            return write_data_files(store, piece, schema, partition_columns, one_file, data_change=False)

        with ThreadPoolExecutor(max_workers=_PARALLEL_FILES) as pool:
            futures = [pool.submit(write, p) for p in pieces]
        failed = next((f.exception() for f in futures if f.exception() is not None), None)
        if failed is not None:
            for f in futures:
                if f.exception() is None:
                    store.delete_files([decode_path(p) for p in f.result()["path"].to_pylist()])
            raise failed
        written = [f.result() for f in futures]
        return self.mark(pa.concat_tables(written) if written else FILE_SCHEMA.empty_table())

    def mark(self, adds: pa.Table) -> pa.Table:
        """The add actions tagged with this run (and the clustering provider, if any)."""
        n = adds.num_rows
        if not n:
            return adds
        tags = {ZCUBE_ID: self.run_id, ZCUBE_ZORDER_BY: self.recorded_columns, ZCUBE_ZORDER_CURVE: self.curve}
        tag_type = FILE_SCHEMA.field("tags").type
        adds = adds.set_column(adds.schema.get_field_index("tags"), "tags",
                               pa.array([list(tags.items())] * n, tag_type))
        if self.provider is not None:
            adds = adds.set_column(adds.schema.get_field_index("clusteringProvider"), "clusteringProvider",
                                   pa.array(np.full(n, self.provider, dtype=object), pa.string()))
        return adds
