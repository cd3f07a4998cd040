"""The layout of rewritten files: rows ordered along a space-filling curve, cut to a target size.

Liquid clustering and ``OPTIMIZE ZORDER BY`` share the rewrite machinery of OPTIMIZE
(:func:`.optimize.stage_rewrite`: read a bin of files, write it back with ``dataChange=false``,
keeping row ids and purging deletion vectors). A :class:`Layout` is what they add to it:

- :meth:`Layout.arrange` sorts the bin's rows along the curve over the clustering columns
  (:mod:`deltatx.io.curves`), so each contiguous run of rows is a compact region of that space;
- :meth:`Layout.write_options` cuts the sorted rows into files of about ``target_size`` bytes
  (rows per file estimated from the input files' bytes per row), in order, so every file's
  min/max statistics are as tight as its region;
- :meth:`Layout.mark` tags the new files as Delta does: ``clusteringProvider`` (liquid
  clustering only) and the ``ZCUBE_*`` tags naming the run, its columns and its curve.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ...io.curves import curve_order
from ...io.writer import WriteOptions
from ...txnlog.actions import FILE_SCHEMA

#: Delta's add-file tags of a clustering / Z-order run (``AddFile.Tags``)
ZCUBE_ID = "ZCUBE_ID"
ZCUBE_ZORDER_BY = "ZCUBE_ZORDER_BY"
ZCUBE_ZORDER_CURVE = "ZCUBE_ZORDER_CURVE"

_HUGE = 1 << 62


def column_at(data: pa.Table, path: Sequence[str]) -> pa.ChunkedArray:
    """The values of a (possibly nested) column of ``data``."""
    values = data.column(path[0])
    for part in path[1:]:
        values = pc.struct_field(values, part)
    return values


def physical_rows(files: pa.Table) -> int | None:
    """Total ``numRecords`` of the files, or None when a file has no such statistic."""
    found = pc.struct_field(pc.extract_regex(pc.fill_null(files["stats"], ""), r'"numRecords":(?P<n>\d+)'), "n")
    if found.null_count:
        return None
    return int(pc.sum(pc.cast(found, pa.int64())).as_py() or 0)


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

    def arrange(self, data: pa.Table) -> pa.Table:
        """The rows in curve order (stable: ties keep their read order)."""
        if data.num_rows < 2:
            return data
        order = curve_order([column_at(data, p) for p in self.columns], self.curve)
        return data.take(pa.array(order, pa.int64()))

    def write_options(self, options: WriteOptions, files: pa.Table) -> WriteOptions:
        """``options`` cutting about ``target_size`` bytes per file, in row order.

        Rows per file come from the input files (Parquet bytes per row, so the estimate is in
        the unit the target is in); without row counts the writer's in-memory estimate is used.
        ``spread_min_rows`` is raised to the cut so a small rewrite is never split further.
        """
        rows = physical_rows(files) if files.num_rows else None
        total = int(pc.sum(files["size"]).as_py() or 0) if files.num_rows else 0
        if not rows or not total:
            return dataclasses.replace(options, target_file_rows=_HUGE, target_file_bytes=self.target_size,
                                       max_workers=2)
        rows_per_file = max(1, int(self.target_size * rows / total))
        return dataclasses.replace(options, target_file_rows=rows_per_file, target_file_bytes=_HUGE,
                                   spread_min_rows=rows_per_file, max_workers=2)

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
