"""Executor side of Spark-distributed DML: run a core operation over one task's share of the table.

Owns what runs inside a Spark task for :mod:`deltatx.spark.dml` and nothing the driver decides.
The rule it follows: *the executor runs the core's own code*. DELETE, UPDATE and MERGE already
exist as staging functions over a :class:`~deltatx.tables.transaction.Transaction`
(``stage_delete``, ``stage_update``, the MERGE executor); a task hands them a
:class:`TaskTransaction` — the few members those functions use, over the task's files only —
and collects what they stage. Row semantics (SQL NULL rules, SET typing, the MERGE clause order
and cardinality check, NOT MATCHED BY SOURCE) are therefore the core's by construction, not a
second implementation that could drift. (MERGE reuses the core's executor class
``merge_rows.MergeExecutor`` through its public steps: ``_TaskMerge`` only observes its join,
``match_pairs``. The tests compare every operation with the core's on the same files.)

::

    spark.range(n, numPartitions=p)          ids = indexes of the job's files (or source slices)
      └─ mapInArrow(DmlTask)                 one call per task, on an executor
            TaskTransaction(files[ids])      stand-in transaction: no log, no commit
            core stage_* / MERGE executor    reads the files, evaluates, writes new files
            ─► one result row                removed paths, add actions (Arrow IPC), metrics,
                                             MERGE: source rows for which ON held
            written files ─► JobFiles        a manifest, so that the driver can delete them
                                             if the job fails (see job_files.py)

A task that fails deletes the files it already wrote and re-raises; a deltatx error crosses
Spark's Python-exception text as a marked JSON payload (:func:`encode_error`) that the driver
turns back into the typed exception.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from .. import errors
from ..errors import DeltaTxError
from ..expr import Expr, bind, parse_predicate
from ..io.paths import decode_path
from ..tables.ops.merge import MergePlan
from ..tables.ops.merge_rows import MergeExecutor
from ..txnlog.store import open_store
from .ipc import to_ipc
from .job_files import JobFiles

#: what each task returns: one row per task
RESULT_SCHEMA = pa.schema([
    ("removed", pa.list_(pa.string())),          # add-action paths of the files the task removed
    ("adds", pa.binary()),                       # Arrow IPC stream of the add actions it wrote
    ("metrics", pa.map_(pa.string(), pa.int64())),
    ("matched_source", pa.list_(pa.int64())),    # MERGE: source rows for which ON held somewhere
])
#: the same, as the DDL string mapInArrow wants
RESULT_DDL = "removed array<string>, adds binary, metrics map<string,bigint>, matched_source array<bigint>"

DELETE, UPDATE, MERGE_TARGET, MERGE_INSERT = "delete", "update", "merge_target", "merge_insert"

_ERROR_START, _ERROR_END = "<<deltatx-error:", ":deltatx-error>>"
_ERROR_RE = re.compile(re.escape(_ERROR_START) + r"(.*?)" + re.escape(_ERROR_END), re.S)


# --------------------------------------------------------------------------------------------
# Typed errors across Spark's exception text
# --------------------------------------------------------------------------------------------


class RemoteDeltaTxError(RuntimeError):
    """A deltatx error raised in a task, carried to the driver as text (see :func:`decode_error`)."""


def encode_error(exc: DeltaTxError) -> RemoteDeltaTxError:
    """Wrap ``exc`` so that its class, message and simple attributes survive Spark's error text."""
    attrs = {k: v for k, v in vars(exc).items() if isinstance(v, (str, int, float, bool, type(None)))}
    payload = json.dumps({"cls": type(exc).__name__, "message": str(exc), "attrs": attrs})
    return RemoteDeltaTxError(f"{_ERROR_START}{payload}{_ERROR_END}")


def decode_error(exc: BaseException) -> DeltaTxError | None:
    """The typed deltatx error a failed Spark job carried, or None when it carried none."""
    found = _ERROR_RE.findall(str(exc))
    if not found:
        return None
    try:
        payload = json.loads(found[-1])
    except ValueError:
        return None
    cls = getattr(errors, str(payload.get("cls")), None)
    if not (isinstance(cls, type) and issubclass(cls, DeltaTxError)):
        cls = DeltaTxError
    err = cls.__new__(cls)  # custom __init__s take keyword attributes: set them directly
    Exception.__init__(err, payload.get("message", ""))
    err.__dict__.update(payload.get("attrs") or {})
    return err


# --------------------------------------------------------------------------------------------
# The stand-in transaction
# --------------------------------------------------------------------------------------------


class TaskTransaction:
    """The members of ``Transaction`` the core DML functions use, over one task's files.

    Nothing is recorded or committed here: the driver's real transaction recorded the read
    (predicate and candidate files) when it planned the job, and commits once for all tasks.
    """

    def __init__(self, store: Any, schema: pa.Schema, partition_columns: list[str],
                 properties: dict[str, str], files: pa.Table):
        self.store = store
        self.schema = schema
        self.partition_columns = list(partition_columns)
        self.properties = dict(properties)
        self.files = files
        self.adds: list[pa.Table] = []
        self.removed: list[str] = []
        self.metrics: dict[str, Any] = {}

    def current_files(self) -> pa.Table:
        return self.files

    def scan(self, where: str | Expr | None = None) -> tuple[Expr | None, pa.Table]:
        """The task's files: the driver already pruned them with this very predicate."""
        if isinstance(where, str):
            where = bind(parse_predicate(where), self.schema)
        return where, self.files

    def stage_adds(self, adds: pa.Table) -> None:
        if adds.num_rows:
            self.adds.append(adds)

    def stage_removes(self, files: pa.Table, data_change: bool = True) -> None:
        self.removed.extend(files.column("path").to_pylist())

    def note_operation(self, name: str, parameters: dict[str, Any] | None = None,
                       metrics: dict[str, Any] | None = None, *, changes_data: bool = True) -> None:
        self.metrics = dict(metrics or {})

    def written_paths(self) -> list[str]:
        """Decoded relative paths of every data file this task wrote."""
        return [decode_path(p) for a in self.adds for p in a.column("path").to_pylist()]

    def delete_written(self) -> None:
        paths = self.written_paths()
        if paths:
            self.store.delete_files(paths)
        self.adds = []


class _TaskMerge(MergeExecutor):
    """The core MERGE executor, also remembering the source rows for which ON held.

    Not-matched inserts need the source rows that matched no target row in *any* task; the core
    keeps them local to ``run()``, so they are captured where the join produces them.
    """

    matched_source: np.ndarray = np.empty(0, np.int64)

    def match_pairs(self, target: pa.Table, eligible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pt, ps = super().match_pairs(target, eligible)
        self.matched_source = np.unique(ps)
        return pt, ps


# --------------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------------


@dataclass
class DmlTask:
    """One distributed DML step; called by mapInArrow once per task with the task's ids.

    ``kind`` is DELETE / UPDATE (ids index ``files``), MERGE_TARGET (ids index ``files``; the
    plan's source is whole) or MERGE_INSERT (ids index slices of ``plan.source`` of
    ``rows_per_task`` rows, the source rows that matched nothing).
    """

    kind: str
    uri: str
    storage_options: dict[str, Any]
    schema: pa.Schema
    partition_columns: list[str]
    properties: dict[str, str]
    files: pa.Table
    job_files: JobFiles | None = None  # where the task names the files it wrote
    where: str | None = None
    assignments: dict[str, str] = field(default_factory=dict)
    plan: MergePlan | None = None
    rows_per_task: int = 0

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ids = [b.column(0).to_numpy() for b in batches if b.num_rows]
        if not ids:
            return
        index = np.concatenate(ids).astype(np.int64)
        store = open_store(self.uri, self.storage_options)
        files = self.files.take(pa.array(index)) if self.kind != MERGE_INSERT else self.files
        tx = TaskTransaction(store, self.schema, self.partition_columns, self.properties, files)
        try:
            matched = self._run(tx, index)
            result = pa.record_batch([
                pa.array([tx.removed], RESULT_SCHEMA.field("removed").type),
                pa.array([to_ipc(pa.concat_tables(tx.adds)) if tx.adds else None], pa.binary()),
                pa.array([[(k, int(v)) for k, v in tx.metrics.items() if isinstance(v, int)]],
                         RESULT_SCHEMA.field("metrics").type),
                pa.array([matched.tolist()], RESULT_SCHEMA.field("matched_source").type),
            ], schema=RESULT_SCHEMA)
        except DeltaTxError as exc:
            tx.delete_written()
            raise encode_error(exc) from None
        except BaseException:
            tx.delete_written()
            raise
        try:
            still_open = self.job_files is None or self.job_files.record(store, tx.written_paths())
        except BaseException:
            tx.delete_written()
            raise
        if not still_open:  # the driver gave up on this job (another task failed): leave nothing
            tx.delete_written()
            return
        yield result

    def _run(self, tx: TaskTransaction, index: np.ndarray) -> np.ndarray:
        from ..tables.ops.delete import stage_delete
        from ..tables.ops.update import stage_update

        if self.kind == DELETE:
            stage_delete(tx, self.where)
        elif self.kind == UPDATE:
            stage_update(tx, self.where, self.assignments)
        elif self.kind == MERGE_TARGET:
            merge = _TaskMerge(tx, self.plan)
            merge.run()
            return merge.matched_source
        elif self.kind == MERGE_INSERT:
            plan = self.plan
            rows = np.concatenate([np.arange(i * self.rows_per_task, (i + 1) * self.rows_per_task) for i in index])
            rows = rows[rows < plan.source.num_rows]
            source = plan.source.take(pa.array(rows, pa.int64()))
            _TaskMerge(tx, replace(plan, source=source)).run()
        else:
            raise ValueError(f"unknown DML task kind {self.kind!r}")
        return np.empty(0, np.int64)
