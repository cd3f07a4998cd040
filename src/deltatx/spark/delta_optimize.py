"""delta-spark's ``DeltaOptimizeBuilder``: ``dt.optimize().where(...).executeCompaction()``.

Runs the core's OPTIMIZE (``Table.optimize``) on the driver: compaction reads and writes whole
files with pyarrow, so it needs no Spark job. ``where`` may only name partition columns (Delta's
rule; the core refuses others with ``PredicateError``); several ``where`` calls are ANDed. The
result is delta-spark's DataFrame: the table path and an ``OptimizeMetrics`` struct, the added
and removed file sizes read from the commit's own actions.

Z-order (``executeZOrderBy``) is the core's ``Table.optimize(zorder_by=[...])`` (tables/ops/zorder.py).
"""

from __future__ import annotations

import time
from typing import Any

from ..tables.table import Table
from ..tables.transaction import CommitResult
from ..txnlog.actions import parse_commit
from .delta_args import check_str, column_names
from .delta_frames import optimize_frame
from .spark_errors import raises_spark_errors


@raises_spark_errors
class DeltaOptimizeBuilder:
    """Scope (``where``) and run (``executeCompaction`` / ``executeZOrderBy``) one OPTIMIZE."""

    def __init__(self, spark: Any, table: Table, *, user_metadata: str | None = None):
        self._spark = spark
        self._table = table
        self._filters: list[str] = []
        self._user_metadata = user_metadata  # the session's commitInfo.userMetadata conf

    def where(self, partitionFilter: str) -> "DeltaOptimizeBuilder":  # noqa: N803 - delta-spark's name
        """Only optimize the partitions ``partitionFilter`` (SQL on partition columns) selects."""
        self._filters.append(check_str(partitionFilter, "Partition filter"))
        return self

    def _where(self) -> str | None:
        if not self._filters:
            return None
        return " AND ".join(f"({f})" for f in self._filters) if len(self._filters) > 1 else self._filters[0]

    def executeCompaction(self) -> Any:  # noqa: N802
        """Bin-pack small files; delta-spark's (path, metrics) DataFrame."""
        return self._run(lambda tx: tx.optimize(where=self._where()), zorder=False)

    def executeZOrderBy(self, *cols: Any) -> Any:  # noqa: N802
        """Rewrite the selected files clustered along a Z-order curve of ``cols``."""
        names = column_names(cols, "Z-order column")
        return self._run(lambda tx: tx.optimize(where=self._where(), zorder_by=names), zorder=True)

    def _run(self, optimize: Any, *, zorder: bool) -> Any:
        started = int(time.time() * 1000)
        # Table.optimize's one transaction, with the session's userMetadata on its commit
        result: CommitResult = self._table._run(self._user_metadata, optimize)
        ended = int(time.time() * 1000)
        adds = removes = None
        if result.attempts:  # a commit happened: its actions hold the file sizes
            actions = parse_commit(self._table.store.read_commit(result.version), result.version)
            adds, removes = actions.adds, actions.removes
        return optimize_frame(self._spark, self._table.uri, result, adds, removes, started, ended, zorder=zorder)
