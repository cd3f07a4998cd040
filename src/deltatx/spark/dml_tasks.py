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

Merge-on-read (``delta.enableDeletionVectors``): the same core code marks changed rows in
deletion vectors, so a task also returns what only the driver's transaction can hold — the
re-adds of the files it marked (same path, new DV; committed files, never the task's to delete),
the DV files it wrote (deleted with its data files if the job or the commit fails), and the rows
it read and changed in every file (:func:`row_level_table`), which the driver records into its
``Transaction.row_level`` (:func:`record_row_level`) so that a concurrent writer of other rows
of the same file is resolved row by row, exactly as for the core's own DML.

Change data feed (``delta.enableChangeDataFeed``): the core code records the rows it changed
into the task's ``changes`` (as into a Transaction's); the task writes them as its own
``_change_data/`` files with the core's writer (:func:`~deltatx.tables.ops.change_feed.
write_change_files`) and returns their ``cdc`` actions, which the driver stages in its one commit.
They are deleted with the task's data files when the job or the commit fails. A MERGE's insert
tasks cannot see whether the target tasks changed rows, so the driver tells them
(``cdc_inserts``): once the commit has change files its inserts must be in them too.

A task that fails deletes the files it already wrote and re-raises; a deltatx error crosses
Spark's Python-exception text as a marked JSON payload (:func:`encode_error`) that the driver
turns back into the typed exception.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import pyarrow as pa
from pyroaring import BitMap64

from .. import errors
from ..errors import DeltaTxError
from ..expr import Expr, bind, parse_predicate
from ..io.paths import decode_path
from ..tables.ops import change_feed
from ..tables.ops.change_feed import ChangeRecorder, write_change_files
from ..tables.ops.merge import MergePlan
from ..tables.ops.merge_rows import MergeExecutor
from ..tables.row_level import RowLevelRecorder
from ..txnlog import column_mapping
from ..txnlog.actions import Protocol
from ..txnlog.store import LogStore, open_store
from .ipc import to_ipc
from .job_files import JobFiles

if TYPE_CHECKING:
    from ..tables.transaction import Transaction

#: what each task returns: one row per task
RESULT_SCHEMA = pa.schema([
    ("removed", pa.list_(pa.string())),          # add-action paths of the files the task removed
    ("adds", pa.binary()),                       # Arrow IPC stream of the add actions it wrote
    ("readds", pa.binary()),                     # Arrow IPC: committed files re-added with a new DV
    ("dv_files", pa.list_(pa.string())),         # deletion-vector files it wrote (relative paths)
    ("row_level", pa.binary()),                  # Arrow IPC of ROW_LEVEL_SCHEMA: rows read/changed
    ("metrics", pa.map_(pa.string(), pa.int64())),
    ("matched_source", pa.list_(pa.int64())),    # MERGE: source rows for which ON held somewhere
    ("cdc", pa.binary()),                        # Arrow IPC of the cdc actions of its change files
])
#: the same, as the DDL string mapInArrow wants
RESULT_DDL = ("removed array<string>, adds binary, readds binary, dv_files array<string>, row_level binary, "
              "metrics map<string,bigint>, matched_source array<bigint>, cdc binary")

#: one row per file a merge-on-read task read: its ``FileRows`` (conflicts.row_level) less what
#: the driver knows from the add action itself (DV descriptor, row count); bitmaps as pyroaring's
#: portable serialization
ROW_LEVEL_SCHEMA = pa.schema([
    ("path", pa.string()),
    ("base_deleted", pa.binary()),               # rows the file's DV deleted when the task read it
    ("changed", pa.binary()),                    # positions the task deleted or updated
    ("read", pa.binary()),                       # positions it read (the changed ones included)
    ("row_positions", pa.list_(pa.int64())),     # row-tracking tables: positions read, sorted ...
    ("row_ids", pa.list_(pa.int64())),           # ... and the row id at each (null otherwise)
])

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

    Nothing is committed here: the driver's real transaction recorded the read (predicate and
    candidate files) when it planned the job, and commits once for all tasks. What the core
    stages — removes, new files, re-adds of files given a DV, DV files, the rows read per file
    (``row_level``, the core's own recorder) — is kept for the task's result.
    """

    def __init__(self, store: Any, schema: pa.Schema, partition_columns: list[str],
                 properties: dict[str, str], protocol: Protocol, files: pa.Table):
        self.store = store
        self.schema = schema
        self.partition_columns = list(partition_columns)
        self.properties = dict(properties)
        self.protocol = protocol
        self.files = files
        self.adds: list[pa.Table] = []
        self.readds: list[pa.Table] = []
        self.removed: list[str] = []
        self.dv_files: list[str] = []
        self.row_level = RowLevelRecorder()
        self.metrics: dict[str, Any] = {}
        self.changes: ChangeRecorder | None = None  # change-feed rows the core code recorded
        self.cdc: pa.Table | None = None  # cdc actions of the change files written from them

    @functools.cached_property
    def column_mapping(self) -> "column_mapping.ColumnMapping | None":
        """How the table's columns are named in its files, as the core's Transaction says."""
        return column_mapping.for_schema(self.properties, self.schema)

    def current_files(self) -> pa.Table:
        return self.files

    def scan(self, where: str | Expr | None = None) -> tuple[Expr | None, pa.Table]:
        """The task's files: the driver already pruned them with this very predicate."""
        if isinstance(where, str):
            where = bind(parse_predicate(where), self.schema)
        return where, self.files

    def stage_adds(self, adds: pa.Table, *, written: bool = True) -> None:
        """``written=False``: re-adds of committed files (a new DV), never deleted by the task."""
        if adds.num_rows:
            (self.adds if written else self.readds).append(adds)

    def stage_removes(self, files: pa.Table, data_change: bool = True, *, keep_own_files: bool = False) -> None:
        self.removed.extend(files.column("path").to_pylist())

    def note_operation(self, name: str, parameters: dict[str, Any] | None = None,
                       metrics: dict[str, Any] | None = None, *, changes_data: bool = True) -> None:
        self.metrics = dict(metrics or {})

    def note_dv_file(self, relative: str | None) -> None:
        if relative:
            self.dv_files.append(relative)

    def is_own_file(self, path: str) -> bool:
        """A task rewrites committed files only (its own outputs are never its input)."""
        return False

    def write_change_files(self) -> None:
        """Write the recorded change rows as this task's ``_change_data/`` files (core writer)."""
        if self.changes is not None and self.changes.rows:
            self.cdc = write_change_files(self.store, self.schema, self.partition_columns, self.changes.rows,
                                          self.column_mapping)

    def written_paths(self) -> list[str]:
        """Decoded relative paths of every data, DV and change data file this task wrote."""
        tables = self.adds + ([self.cdc] if self.cdc is not None else [])
        return [decode_path(p) for a in tables for p in a.column("path").to_pylist()] + self.dv_files

    def delete_written(self) -> None:
        paths = self.written_paths()
        if paths:
            self.store.delete_files(paths)
        self.adds, self.dv_files, self.cdc = [], [], None


def row_level_table(recorder: RowLevelRecorder) -> pa.Table | None:
    """The files a task read row by row (merge-on-read), as ROW_LEVEL_SCHEMA rows; None if none."""
    files = list(recorder.files.values())
    if not files:
        return None

    def ids(values: np.ndarray | None) -> np.ndarray | None:
        return None if values is None else np.asarray(values, dtype=np.int64)

    return pa.table({
        "path": pa.array([f.path for f in files], pa.string()),
        "base_deleted": pa.array([f.base_deleted.serialize() for f in files], pa.binary()),
        "changed": pa.array([f.changed.serialize() for f in files], pa.binary()),
        "read": pa.array([f.read.serialize() for f in files], pa.binary()),
        "row_positions": pa.array([ids(f.row_positions) for f in files], pa.list_(pa.int64())),
        "row_ids": pa.array([ids(f.row_ids) for f in files], pa.list_(pa.int64())),
    }, schema=ROW_LEVEL_SCHEMA)


def record_row_level(tx: "Transaction", files: pa.Table, rows: pa.Table) -> None:
    """Driver: record the tasks' ROW_LEVEL_SCHEMA rows into ``tx.row_level`` (the core's
    recorder), each against its add action in ``files`` (its base DV and row count)."""
    if not rows.num_rows:
        return
    index = {p: i for i, p in enumerate(files.column("path").to_pylist())}
    rows = rows.combine_chunks()
    base, changed, read = (rows.column(c).to_pylist() for c in ("base_deleted", "changed", "read"))
    positions, ids = rows.column("row_positions").chunk(0), rows.column("row_ids").chunk(0)
    for i, path in enumerate(rows.column("path").to_pylist()):
        tracked = positions[i].is_valid and ids[i].is_valid
        tx.row_level.record(
            files.slice(index[path], 1).to_pylist()[0], BitMap64.deserialize(base[i]),
            changed=BitMap64.deserialize(changed[i]), read=BitMap64.deserialize(read[i]),
            row_positions=positions[i].values.to_numpy() if tracked else None,
            row_ids=ids[i].values.to_numpy() if tracked else None)


class _TaskMerge(MergeExecutor):
    """The core MERGE executor, also remembering the source rows for which ON held.

    Not-matched inserts need the source rows that matched no target row in *any* task; the core
    keeps them local to ``run()``, so they are captured where the join produces them.
    """

    matched_source: np.ndarray = np.empty(0, np.int64)
    inserted: pa.Table | None = None  # the rows its not-matched clauses inserted

    def _inserts(self, ps: np.ndarray) -> pa.Table | None:
        self.inserted = super()._inserts(ps)
        return self.inserted

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
    protocol: Protocol
    files: pa.Table
    job_files: JobFiles | None = None  # where the task names the files it wrote
    where: str | None = None
    assignments: dict[str, str] = field(default_factory=dict)
    plan: MergePlan | None = None
    rows_per_task: int = 0
    cdc_inserts: bool = False  # MERGE_INSERT: record the inserted rows as change rows

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ids = [b.column(0).to_numpy() for b in batches if b.num_rows]
        if not ids:
            return
        index = np.concatenate(ids).astype(np.int64)
        store = open_store(self.uri, self.storage_options)
        running = self.job_files.begin(store) if self.job_files is not None else None
        if self.job_files is not None and running is None:
            return  # the driver gave up on this job before this task started: write nothing
        try:
            result = self._work(store, index)
        finally:
            if running is not None:
                self.job_files.end(store, running)
        if result is not None:
            yield result

    def _work(self, store: LogStore, index: np.ndarray) -> pa.RecordBatch | None:
        """Run the task and name what it wrote; None when the job closed meanwhile (its files
        are deleted then)."""
        files = self.files.take(pa.array(index)) if self.kind != MERGE_INSERT else self.files
        tx = TaskTransaction(store, self.schema, self.partition_columns, self.properties, self.protocol, files)
        try:
            matched = self._run(tx, index)
            tx.write_change_files()
            row_level = row_level_table(tx.row_level)
            result = pa.record_batch([
                pa.array([tx.removed], RESULT_SCHEMA.field("removed").type),
                pa.array([to_ipc(pa.concat_tables(tx.adds)) if tx.adds else None], pa.binary()),
                pa.array([to_ipc(pa.concat_tables(tx.readds)) if tx.readds else None], pa.binary()),
                pa.array([tx.dv_files], RESULT_SCHEMA.field("dv_files").type),
                pa.array([to_ipc(row_level) if row_level is not None else None], pa.binary()),
                pa.array([[(k, int(v)) for k, v in tx.metrics.items() if isinstance(v, int)]],
                         RESULT_SCHEMA.field("metrics").type),
                pa.array([matched.tolist()], RESULT_SCHEMA.field("matched_source").type),
                pa.array([to_ipc(tx.cdc) if tx.cdc is not None else None], pa.binary()),
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
            return None
        return result

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
            merge = _TaskMerge(tx, replace(plan, source=source))
            merge.run()
            if self.cdc_inserts:  # the target tasks wrote change files: the inserts join them
                change_feed.record_changes(tx, merge.inserted, change_feed.INSERT)
        else:
            raise ValueError(f"unknown DML task kind {self.kind!r}")
        return np.empty(0, np.int64)
