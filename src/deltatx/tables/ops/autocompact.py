"""Auto-compaction after a commit (``delta.autoOptimize.autoCompact=true``).

Like Hive's compactor thresholds: when a partition holds more small files than
``deltatx.autoCompact.minNumFiles`` (default 50), compact it with an OPTIMIZE commit. Failures
of the compaction never fail the user's write: it was already committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import properties as props

if TYPE_CHECKING:
    from ..table import Table


def maybe_auto_compact(table: "Table") -> None:
    snap = table.snapshot
    if not props.flag(snap.properties, props.AUTO_COMPACT, False):
        return
    from .optimize import partitions_needing_compaction

    min_files = props.int_property(snap.properties, props.AUTO_COMPACT_MIN_FILES, 50)
    predicates = partitions_needing_compaction(snap, min_files)
    if predicates is None:
        return
    from ...errors import ConcurrentModificationException

    from ...txnlog.clustering import is_clustered

    if is_clustered(snap.protocol):
        predicates = None  # a clustered table has no partitions: it clusters (incrementally) instead
    try:
        table._run(None, lambda tx: tx.optimize(where=predicates))
    except ConcurrentModificationException:
        pass  # someone else changed those files; the next commit will try again
