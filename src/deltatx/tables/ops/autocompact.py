"""Auto-compaction after a commit (``delta.autoOptimize.autoCompact=true``).

Like Hive's compactor thresholds: when a partition holds more small files than
``deltatx.autoCompact.minNumFiles`` (default 50), compact it with an OPTIMIZE commit. Failures
of the compaction never fail the user's write: it was already committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import properties as props

if TYPE_CHECKING:
    from ...txnlog.snapshot import Snapshot


@dataclass(frozen=True)
class AutoCompaction:
    """An OPTIMIZE that is due: of the partitions matching ``where`` (None: the whole table)."""

    where: list[str] | None


def auto_compaction_due(snap: "Snapshot") -> AutoCompaction | None:
    """What to compact after a commit reached ``snap``; None when nothing is due (or it is off).

    Decided from the snapshot alone; the table runs the OPTIMIZE as its own transaction."""
    if not props.flag(snap.properties, props.AUTO_COMPACT, False):
        return None
    from ...txnlog.clustering import is_clustered
    from .optimize import partitions_needing_compaction

    min_files = props.int_property(snap.properties, props.AUTO_COMPACT_MIN_FILES, 50)
    predicates = partitions_needing_compaction(snap, min_files)
    if predicates is None:
        return None
    if is_clustered(snap.protocol):
        return AutoCompaction(None)  # a clustered table has no partitions: it clusters (incrementally) instead
    return AutoCompaction(predicates)
