"""OPTIMIZE ZORDER BY (Delta's multi-dimensional clustering of an unclustered table).

Every file of each selected partition (``where=`` names partitions, as in OPTIMIZE) is read, its
rows sorted along the Z-order curve over the ``zorder_by`` columns and cut into files of about the
target size (:class:`.layout.Layout`), so min/max statistics on any of those columns skip most
files. Like Delta, it rewrites the selected files whatever their size (a Z-order is a layout of
the whole partition, not a compaction of small files) and leaves ``clusteringProvider`` unset;
the run is recorded in the files' ``ZCUBE_*`` tags and in ``commitInfo.operationParameters.zOrderBy``.

Refused with :class:`~deltatx.errors.ZOrderError`, before anything is written: a clustered table
(its layout is liquid clustering's, see :mod:`.clustering`), a partition column (files are
already separated by it), a column that does not exist or gets no min/max statistics.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ...errors import ZOrderError
from ...txnlog import column_mapping
from ...txnlog.clustering import is_clustered, join_path
from .clustering import column_names, resolve_columns
from .layout import Layout
from .optimize import partition_codes, files_in_partitions, rewrite_metrics, stage_rewrite, target_file_size

if TYPE_CHECKING:
    from ..transaction import Transaction


def plan_zorder(files: pa.Table, partition_keys: list[str]) -> pa.Table:
    """Every file, with ``bin`` = its partition (one Z-ordered run per partition); ``partition_keys``
    are the ``partitionValues`` keys (physical names under column mapping)."""
    codes = partition_codes(files, partition_keys).astype(np.int64)
    return files.append_column("bin", pa.array(codes, pa.int64()))


def stage_zorder(tx: "Transaction", zorder_by: Any, where: str | None = None,
                 target_size: int | None = None) -> dict[str, Any]:
    """Rewrite the files of the partitions ``where`` selects in Z-order over ``zorder_by``."""
    started = time.perf_counter()
    if is_clustered(tx.protocol):
        raise ZOrderError(
            "OPTIMIZE ZORDER BY is not allowed on a clustered table: run optimize() to cluster it by its "
            "clustering columns, or change them with cluster_by([...]) (Delta: DELTA_CLUSTERING_WITH_ZORDER_BY)"
        )
    names = column_names(zorder_by, ZOrderError)
    if not names:
        raise ZOrderError("zorder_by needs at least one column")
    paths = resolve_columns(tx.schema, tx.properties, tx.partition_columns, names, "ZORDER BY", ZOrderError)
    target = target_file_size(tx.properties, target_size)
    pred, files = files_in_partitions(tx, where)
    planned = plan_zorder(files, column_mapping.partition_keys(tx.metadata, tx.schema))
    logical = [join_path(p) for p in paths]
    layout = Layout(columns=tuple(paths), curve="zorder", target_size=target, provider=None,
                    recorded_columns=Layout.columns_json(logical))
    compacted, adds = stage_rewrite(tx, planned, pred, layout)
    metrics = rewrite_metrics(tx, planned, compacted, adds, files.num_rows, started)
    params = {"predicate": [str(pred)] if pred is not None else [], "zOrderBy": logical, "clusterBy": [],
              "auto": False, "targetSize": target}
    tx.note_operation("OPTIMIZE", params, metrics, changes_data=False)
    return metrics
