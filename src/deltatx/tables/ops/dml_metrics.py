"""Delta's operation metrics for DELETE, UPDATE, MERGE and OPTIMIZE: the keys Delta's
``commitInfo.operationMetrics`` always carries (``DeltaOperationMetrics``), present at zero when
nothing of the kind happened, so a reader of the history finds the same keys whichever engine
wrote it. deltatx may report more (``numFilesRead``, MERGE's skipping counts, delta-rs' OPTIMIZE
counts); it never leaves one of Delta's out."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_DV_KEYS = ("numDeletionVectorsAdded", "numDeletionVectorsRemoved", "numDeletionVectorsUpdated")

#: DeltaOperationMetrics.DELETE / UPDATE / MERGE (the counters; the timings are set where measured)
DELETE_KEYS = ("numAddedFiles", "numRemovedFiles", *_DV_KEYS, "numAddedChangeFiles", "numDeletedRows",
               "numCopiedRows", "numRemovedBytes", "numAddedBytes", "scanTimeMs", "rewriteTimeMs")
UPDATE_KEYS = ("numAddedFiles", "numRemovedFiles", "numAddedChangeFiles", *_DV_KEYS, "numUpdatedRows",
               "numCopiedRows", "numRemovedBytes", "numAddedBytes", "scanTimeMs", "rewriteTimeMs")
MERGE_KEYS = ("numTargetChangeFilesAdded", "numTargetDeletionVectorsAdded", "numTargetDeletionVectorsRemoved",
              "numTargetDeletionVectorsUpdated", "scanTimeMs", "rewriteTimeMs",
              "materializeSourceTimeMs")  # deltatx reads the source once, as given: 0


def with_delta_keys(metrics: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """``metrics`` with every key of ``keys`` present (0 when this operation did not set it)."""
    for key in keys:
        metrics.setdefault(key, 0)
    return metrics


def total_size(files: pa.Table | None) -> int:
    """Bytes of the files (add or remove rows)."""
    if files is None or not files.num_rows:
        return 0
    return int(pc.sum(files["size"]).as_py() or 0)


def with_deletion_vectors(files: pa.Table | None) -> int:
    """How many of the files carry a DV: rewritten or removed whole, each DV is removed too
    (Delta counts them under ``numDeletionVectorsRemoved``)."""
    if files is None or not files.num_rows:
        return 0
    return int(pc.sum(pc.is_valid(files["deletionVector"])).as_py() or 0)


def file_size_distribution(sizes: pa.Array | pa.ChunkedArray) -> dict[str, int]:
    """OPTIMIZE's ``minFileSize``, ``p25FileSize``, ``p50FileSize``, ``p75FileSize`` and
    ``maxFileSize`` of the files it wrote (nearest rank; 0 when it wrote none)."""
    values = np.sort(np.asarray(pc.fill_null(sizes, 0).to_numpy(zero_copy_only=False), dtype=np.int64)) \
        if len(sizes) else np.empty(0, np.int64)
    if not len(values):
        return {"minFileSize": 0, "p25FileSize": 0, "p50FileSize": 0, "p75FileSize": 0, "maxFileSize": 0}

    def rank(q: float) -> int:
        return int(values[min(len(values) - 1, max(0, int(np.ceil(q * len(values))) - 1))])

    return {"minFileSize": int(values[0]), "p25FileSize": rank(0.25), "p50FileSize": rank(0.5),
            "p75FileSize": rank(0.75), "maxFileSize": int(values[-1])}
