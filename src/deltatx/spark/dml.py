"""Spark-distributed DELETE, UPDATE and MERGE: executors rewrite files, the driver commits once.

Owns the driver side of DML on Spark (``SparkTable``); what runs in a task is
:mod:`deltatx.spark.dml_tasks`. The result is exactly one commit through the core
:class:`~deltatx.tables.transaction.Transaction`, so conflicts, retries and isolation levels are
the core's::

    SparkTable.delete("day = '2024-01-01' AND id < 10")
      driver   refresh; tx = table.transaction(read_version=v)     the snapshot the job plans on
               tx.scan(predicate): prune by partition values and   records the read predicate
               min/max stats                                        and the files read
      Spark    spark.range(#candidates).mapInArrow(DmlTask)        one task per file (or a few)
               each task: read its files, evaluate, write the kept / updated rows as new files
               (the core's stage_delete / stage_update / MERGE executor on a stand-in txn)
      driver   stage removes + adds, note_operation("DELETE", same parameters and metrics as
               the core), tx.commit()  ─► conflict check against every commit after v

A DELETE with no condition, or one on partition columns only, removes whole files without
reading them: it needs no job and runs the core operation on the driver as is.

Merge-on-read. On a table with ``delta.enableDeletionVectors=true`` the tasks run the core's
merge-on-read path: each marks the changed rows of its files in new deletion vectors (one DV
file per task) and writes only the updated rows as new files. The driver stages what they
return as the core would have staged it — remove(path, old DV), then the re-add(path, new DV)
of a committed file (``written=False``), the new files, the DV files (``note_dv_file``: deleted
if the commit fails) — and records every file's rows (base DV, changed and read positions, row
ids) into ``tx.row_level``, so the commit resolves a concurrent writer of other rows of the same
file row by row. On row-tracking tables the tasks read ``_metadata.row_id`` along, so rewritten
rows keep their ids (the core's ``physical``), and the commit assigns ids to the new files.

Change data feed. On a table with ``delta.enableChangeDataFeed=true`` the core code in each task
records the rows it changed and the task writes them as its own ``_change_data/`` files; the
driver stages the returned ``cdc`` actions in the one commit (deleted if it fails), so the feed
holds what the core's own DELETE / UPDATE / MERGE would have written.

MERGE. The source DataFrame is collected once as Arrow (one Spark job) and shipped to the tasks
inside the task closure, which PySpark broadcasts when it is large: the source must fit in the
driver's and each executor's memory, as with a broadcast join. The target, which is what grows,
is never collected: its candidate files (pruned by the core's rule — target-only conjuncts of ON
and the source's join-key values as an IN list or a range) are read and rewritten by the tasks.

- The cardinality check (a target row matched by several source rows -> MergeCardinalityError)
  and WHEN NOT MATCHED BY SOURCE are decided per target row, so per file: each task sees whole
  files and the whole source, and runs the core MERGE executor on them.
- WHEN NOT MATCHED inserts need the source rows that matched *no* target row in *any* file. Each
  target task returns the ids (positions in the collected source) of the source rows for which
  ON held in its files; the driver takes their union — exact, because every target file that
  can hold a match is in exactly one task — and a second job writes the unmatched rows, cut in
  slices, through the core's insert logic. An insert-only MERGE still reads the ON columns of
  the candidate files (as the core does) but removes none.

Failures. Nothing is committed unless every job succeeded. A task that fails deletes what it
wrote; the files of the job's other tasks — finished, still running, or duplicate attempts — are
found through a manifest protocol on the table's storage (:mod:`deltatx.spark.job_files`) and
deleted by the driver or by the task itself; staged files are deleted by the transaction when
the commit fails. Only a task killed between writing data and naming it leaves files that no
commit references, for VACUUM. A deltatx error raised in a task reaches the caller as its own
type (e.g. MergeCardinalityError), not as Spark's generic PythonException.

Paths must be readable and writable by the executors (local disk shared with them, or object
storage); ``memory://`` tables live in the driver process only and cannot be used here.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import DeltaTxError, IdentityColumnError, InvalidPropertyError
from ..expr import bind, parse_predicate
from ..tables.constraints import rules_for
from ..tables.identity import check_no_update
from ..tables.ops.dml_metrics import DELETE_KEYS, UPDATE_KEYS, with_delta_keys
from ..tables.ops.merge import MergeBuilder, as_source_table, evolve_schema, inserts_assign_identity, plan_merge
from ..tables.ops.merge_on_read import tracks_rows, uses_deletion_vectors
from ..tables.ops.merge_rows import MergeExecutor
from ..tables.ops.rewrite import is_partition_only
from ..tables.ops.update import bind_assignments
from ..tables.table import Table
from ..tables.transaction import CommitResult, Transaction
from ..txnlog.actions import CDC_SCHEMA, FILE_SCHEMA
from ..txnlog.store import MemoryLogStore
from .conf import TXN_APP_ID, TXN_VERSION, session_value
from .job_files import JobFiles
from .dml_tasks import (
    DELETE,
    MERGE_INSERT,
    MERGE_TARGET,
    RESULT_DDL,
    ROW_LEVEL_SCHEMA,
    UPDATE,
    DmlTask,
    decode_error,
    record_row_level,
)
from .ipc import from_ipc

#: default cap on tasks per job, per core of the cluster; several files share a task above it
TASKS_PER_CORE = 4
#: unmatched source rows written by one MERGE insert task (at most)
INSERT_ROWS_PER_TASK = 1_000_000

_DELETE_METRICS = ("numRemovedFiles", "numAddedFiles", "numCopiedRows", "numFilesRead", "numDeletedRows")
_UPDATE_METRICS = ("numRemovedFiles", "numAddedFiles", "numCopiedRows", "numFilesRead", "numUpdatedRows")
#: MERGE metrics the driver knows better than any one task (the rest are sums over tasks)
_MERGE_DRIVER_METRICS = frozenset({"numSourceRows", "numTargetFilesBeforeSkipping", "numTargetFilesAfterSkipping",
                                   "scanTimeMs", "rewriteTimeMs", "executionTimeMs"})


#: add-action columns a task needs: to read a file (path, partition values, deletion vector check)
#: and to report it removed (path, size)
_TASK_FILE_COLUMNS = ("path", "partitionValues", "size", "deletionVector")
#: ... on a row-tracking table also what the default row ids and commit versions are computed from
_ROW_TRACKING_COLUMNS = ("baseRowId", "defaultRowCommitVersion")


@dataclass
class JobOutcome:
    """What the tasks of one job did, gathered on the driver (columnar)."""

    removed: pa.Array          # add paths of the files the tasks removed
    metrics: dict[str, int]    # summed over tasks
    matched_source: np.ndarray  # MERGE: union of the source rows for which ON held
    readds: pa.Table           # merge-on-read: committed files re-added with their new DV
    row_level: pa.Table        # merge-on-read: the rows read and changed per file (ROW_LEVEL_SCHEMA)
    cdc: pa.Table              # change data feed: cdc actions of the change files the tasks wrote


class SparkTable:
    """DELETE / UPDATE / MERGE on a deltatx table, with the file work done by Spark tasks.

    ::

        t = SparkTable(spark, "/data/events")
        t.delete("day = '2024-01-01' AND id < 10")
        t.update("id = 3", set={"value": "value * 2"})
        t.merge(updates_df, on="t.id = s.id").when_matched_update_all().when_not_matched_insert_all().execute()

    Each call returns the core's :class:`CommitResult`. ``max_tasks`` caps the tasks of one job
    (default: TASKS_PER_CORE x Spark's default parallelism). One SparkTable serves one thread at
    a time; concurrent jobs (threads of one driver) use one SparkTable each.
    """

    def __init__(self, spark: Any, uri: str, storage_options: dict[str, Any] | None = None, *,
                 max_tasks: int | None = None):
        if max_tasks is not None and max_tasks < 1:
            raise ValueError(f"max_tasks must be at least 1, got {max_tasks}")
        self.spark = spark
        self.uri = str(uri)
        self.storage_options = dict(storage_options or {})
        self.table = Table(self.uri, storage_options=self.storage_options)
        if isinstance(self.table._store, MemoryLogStore):
            raise DeltaTxError(
                f"{self.uri!r} is an in-memory table: Spark executors run in other processes and cannot "
                f"see it. Use a local path shared with the executors or object storage (s3://...)."
            )
        self.max_tasks = max_tasks

    def __repr__(self) -> str:
        return f"deltatx.spark.SparkTable({self.uri!r})"

    # ------------------------------------------------------------------ operations
    def delete(self, condition: str | None = None, *, user_metadata: str | None = None) -> CommitResult:
        """Delete the rows where ``condition`` is TRUE (every row when None)."""
        started = time.perf_counter()
        tx = self._begin(user_metadata)
        try:
            skipped = self._already_applied(tx, "DELETE")
            if skipped is not None:
                return skipped
            pred = bind(parse_predicate(condition), tx.schema) if condition is not None else None
            if pred is None or is_partition_only(pred, tx.partition_columns):
                tx.delete(condition)  # whole files go unread: the core operation, on the driver
                return tx.commit()
            _, files = tx.scan(pred)
            metrics = dict.fromkeys(_DELETE_METRICS, 0)
            if files.num_rows:
                outcome = self._run_job(tx, self._task(DELETE, tx, files, where=condition),
                                        files.num_rows, f"deltatx DELETE {self.uri}")
                self._stage_changes(tx, files, outcome)
                _add_metrics(metrics, outcome.metrics)
            metrics["numFilesRead"] = files.num_rows
            metrics["executionTimeMs"] = _ms_since(started)
            with_delta_keys(metrics, DELETE_KEYS)
            tx.note_operation("DELETE", {"predicate": [str(pred)]}, metrics)
            return tx.commit()
        except BaseException:
            tx.abort()
            raise

    def update(self, condition: str | None = None, set: dict[str, str] | None = None, *,  # noqa: A002
               user_metadata: str | None = None) -> CommitResult:
        """Set columns to SQL expressions (``{"v": "v * 2"}``) on the rows where ``condition`` holds."""
        if not set:
            raise ValueError("update() needs set={'column': 'sql expression', ...}")
        started = time.perf_counter()
        tx = self._begin(user_metadata)
        try:
            skipped = self._already_applied(tx, "UPDATE")
            if skipped is not None:
                return skipped
            pred = bind(parse_predicate(condition), tx.schema) if condition is not None else None
            assigned = bind_assignments(set, tx.schema)  # bad columns / expressions fail here, before any job
            rules = rules_for(tx.schema, tx.properties, tx.protocol)
            if rules is not None:
                check_no_update(rules.identity, frozenset(assigned), "UPDATE")
            _, files = tx.scan(pred)
            metrics = dict.fromkeys(_UPDATE_METRICS, 0)
            if files.num_rows:
                outcome = self._run_job(tx, self._task(UPDATE, tx, files, where=condition, assignments=dict(set)),
                                        files.num_rows, f"deltatx UPDATE {self.uri}")
                self._stage_changes(tx, files, outcome)
                _add_metrics(metrics, outcome.metrics)
            metrics["numFilesRead"] = files.num_rows
            metrics["executionTimeMs"] = _ms_since(started)
            with_delta_keys(metrics, UPDATE_KEYS)
            tx.note_operation("UPDATE", {"predicate": [str(pred)] if pred is not None else []}, metrics)
            return tx.commit()
        except BaseException:
            tx.abort()
            raise

    def merge(self, source: Any, on: str, source_alias: str = "s", target_alias: str = "t", *,
              user_metadata: str | None = None) -> "SparkMergeBuilder":
        """A MERGE builder (the core's clauses); ``.execute()`` runs it on Spark and commits."""
        return SparkMergeBuilder(self, source, on, source_alias=source_alias, target_alias=target_alias,
                                 user_metadata=user_metadata)

    # ------------------------------------------------------------------ MERGE
    def _merge(self, source: Any, on: str, clauses: list, source_alias: str, target_alias: str,
               schema_evolution: bool = False, user_metadata: str | None = None) -> CommitResult:
        started = time.perf_counter()
        tx = self._begin(user_metadata)
        try:
            skipped = self._already_applied(tx, "MERGE")
            if skipped is not None:
                return skipped
            source = _as_arrow(source)
            if schema_evolution:  # staged first: tasks read and write with the widened schema
                source = as_source_table(source)
                evolve_schema(tx, source, clauses, target_alias)
            rules = rules_for(tx.schema, tx.properties, tx.protocol)
            plan = plan_merge(tx.schema, source, on, clauses,
                              source_alias=source_alias, target_alias=target_alias, rules=rules)
            unassignable = inserts_assign_identity(plan, rules)
            if unassignable:
                raise IdentityColumnError(
                    f"a Spark MERGE cannot assign identity column(s) {unassignable} to inserted rows: its tasks "
                    f"cannot agree on values. Run the MERGE with deltatx.Table.merge")
            planner = MergeExecutor(tx, plan)  # the core's planning: eligible source rows, candidate files
            files = planner.candidate_files(planner.eligible_source())  # tx.scan(): records the read
            metrics = dict(planner.metrics)
            matched = np.zeros(plan.source.num_rows, dtype=bool)
            target_changes = False  # the target tasks wrote change files (change data feed)
            if files is not None and files.num_rows:
                task = self._task(MERGE_TARGET, tx, files, plan=replace(plan, not_matched=[]))
                outcome = self._run_job(tx, task, files.num_rows, f"deltatx MERGE {self.uri} (target files)")
                self._stage_changes(tx, files, outcome)
                _add_metrics(metrics, outcome.metrics, skip=_MERGE_DRIVER_METRICS)
                matched[outcome.matched_source] = True
                target_changes = outcome.cdc.num_rows > 0
            metrics["numTargetFilesAfterSkipping"] = files.num_rows if files is not None else 0
            scanned = time.perf_counter()
            if plan.not_matched and not matched.all():
                unmatched = plan.source.filter(pa.array(~matched))
                tasks = min(self._task_cap(), math.ceil(unmatched.num_rows / INSERT_ROWS_PER_TASK))
                insert_plan = replace(plan, source=unmatched, matched=[], by_source=[])
                task = self._task(MERGE_INSERT, tx, FILE_SCHEMA.empty_table(), plan=insert_plan,
                                  rows_per_task=math.ceil(unmatched.num_rows / tasks), cdc_inserts=target_changes)
                outcome = self._run_job(tx, task, tasks, f"deltatx MERGE {self.uri} (inserts)")
                _add_metrics(metrics, outcome.metrics, skip=_MERGE_DRIVER_METRICS)
            now = time.perf_counter()
            metrics["scanTimeMs"] = int((scanned - started) * 1000)
            metrics["rewriteTimeMs"] = int((now - scanned) * 1000)
            metrics["executionTimeMs"] = int((now - started) * 1000)
            tx.note_operation("MERGE", planner.parameters(), metrics)
            return tx.commit()
        except BaseException:
            tx.abort()
            raise

    # ------------------------------------------------------------------ plumbing
    def _already_applied(self, tx: Transaction, operation: str) -> CommitResult | None:
        """delta-spark's idempotent DML: with ``spark.databricks.delta.write.txnAppId`` and
        ``…txnVersion`` set on the session, a DML whose (appId, version) the table has committed
        already is skipped (the replay of a ``foreachBatch`` after a failure); otherwise its
        ``txn`` action joins the commit. Returns the skipped result, or None to go on."""
        app_id = session_value(self.spark, TXN_APP_ID)
        raw_version = session_value(self.spark, TXN_VERSION)
        if app_id is None and raw_version is None:
            return None
        if not app_id or raw_version is None or not raw_version.strip().isdigit():
            raise InvalidPropertyError(
                f"{TXN_APP_ID} and {TXN_VERSION} go together, the version a non-negative integer "
                f"(got {app_id!r}, {raw_version!r}): set both for an idempotent write, or neither")
        version = int(raw_version)
        last = tx.app_version(app_id)
        if last is not None and version <= last:
            tx.abort()
            return CommitResult(version=tx.read_version, operation=operation, attempts=0, skipped=True,
                                read_version=tx.read_version, txn_id=tx.txn_id)
        tx.stage_txn(app_id, version)
        return None

    def _begin(self, user_metadata: str | None) -> Transaction:
        """A transaction pinned at the latest version: the one the job plans and reads on."""
        self.table.refresh()
        return self.table.transaction(read_version=self.table.version, user_metadata=user_metadata)

    def _task(self, kind: str, tx: Transaction, files: pa.Table, **kwargs: Any) -> DmlTask:
        """A task over ``files``, carrying only the add-action columns tasks use (see _task_columns)."""
        return DmlTask(kind=kind, uri=self.uri, storage_options=self.storage_options, schema=tx.schema,
                       partition_columns=tx.partition_columns, properties=tx.properties, protocol=tx.protocol,
                       files=files.select(_task_columns(tx)), **kwargs)

    def _task_cap(self) -> int:
        if self.max_tasks is not None:
            return self.max_tasks
        return max(1, self.spark.sparkContext.defaultParallelism * TASKS_PER_CORE)

    def _run_job(self, tx: Transaction, task: DmlTask, n_ids: int, description: str) -> JobOutcome:
        """Run ``task`` over ids 0..n_ids-1 and stage the files it wrote into ``tx``.

        Ids are spread evenly over ``min(n_ids, cap)`` tasks (contiguous ranges). Whatever
        happens, every file a task wrote that the transaction does not stage is deleted
        (:class:`JobFiles`); a deltatx error from a task is re-raised as its own type.
        """
        sc = self.spark.sparkContext
        store = tx.store
        job = JobFiles.open(store)
        task = replace(task, job_files=job)
        partitions = max(1, min(n_ids, self._task_cap()))
        previous_description = sc.getLocalProperty("spark.job.description")
        sc.setJobDescription(description)
        try:
            results = self.spark.range(0, n_ids, 1, partitions).mapInArrow(task, RESULT_DDL).toArrow()
            adds = _tables(results.column("adds"), FILE_SCHEMA)  # one IPC stream per task
            tx.stage_adds(adds)  # from here on, tx.abort() deletes them ...
            dv_files = pc.list_flatten(results.column("dv_files")).to_pylist() if results.num_rows else []
            for dv_file in dv_files:  # ... and these, if the commit never lands
                tx.note_dv_file(dv_file)
            outcome = _outcome(results)
            tx.stage_cdc(outcome.cdc)  # change data files: deleted by tx.abort() too
            keep = _decoded(adds.column("path")) + dv_files + _decoded(outcome.cdc.column("path"))
            job.close(store, keep=keep)  # deletes unused duplicate attempts
            return outcome
        except BaseException as exc:
            try:
                job.close(store)
            except Exception as cleanup_error:  # keep the job's error; say what could not be cleaned
                exc.add_note(f"deltatx: could not delete the failed job's files ({cleanup_error!r}); "
                             f"VACUUM removes them")
            typed = decode_error(exc) if isinstance(exc, Exception) else None
            if typed is not None:
                raise typed from exc
            raise
        finally:
            sc.setJobDescription(previous_description)

    @staticmethod
    def _stage_changes(tx: Transaction, files: pa.Table, outcome: JobOutcome) -> None:
        """Stage what the tasks did to ``files`` (the driver's add rows, stats included) in the
        core's order: removes (naming the DV each file had), then the re-adds with their new DV —
        after the removes, or staging a remove would take the re-add for one of this transaction's
        own files — then the rows read per file, for the row-level conflict check."""
        if len(outcome.removed):
            tx.stage_removes(files.filter(pc.is_in(files.column("path"), value_set=outcome.removed)))
        tx.stage_adds(outcome.readds, written=False)
        record_row_level(tx, files, outcome.row_level)


class SparkMergeBuilder(MergeBuilder):
    """The core's MERGE builder (same ``when_*`` clauses); ``execute()`` runs on Spark, commits once."""

    def __init__(self, spark_table: SparkTable, source: Any, on: str, source_alias: str = "s",
                 target_alias: str = "t", *, user_metadata: str | None = None):
        super().__init__(None, source, on, source_alias=source_alias, target_alias=target_alias,
                         table=spark_table.table)
        self._spark_table = spark_table
        #: the commit's userMetadata (DeltaTable sets it from the session conf at execute())
        self.user_metadata = user_metadata

    def execute(self) -> CommitResult:
        if self._executed:
            raise DeltaTxError("this MERGE was already executed; build a new one with merge(...)")
        self._executed = True
        return self._spark_table._merge(self._source, self._on, self._clauses, self._source_alias,
                                        self._target_alias, schema_evolution=self._schema_evolution,
                                        user_metadata=self.user_metadata)


def _as_arrow(source: Any) -> Any:
    """A Spark DataFrame's rows as one Arrow table (one job); anything else as the core takes it."""
    to_arrow = getattr(source, "toArrow", None)
    return to_arrow() if callable(to_arrow) and hasattr(source, "sparkSession") else source


def _task_columns(tx: Transaction) -> list[str]:
    """The add-action columns a task needs. Merge-on-read re-adds files as they are (every
    column; the stats also give each file's row count); reading row ids needs the columns they
    default from. Otherwise the stats, the bulk of an add row, stay on the driver."""
    if uses_deletion_vectors(tx):
        return FILE_SCHEMA.names
    return list(_TASK_FILE_COLUMNS) + (list(_ROW_TRACKING_COLUMNS) if tracks_rows(tx) else [])


def _tables(blobs: pa.ChunkedArray, schema: pa.Schema) -> pa.Table:
    """The Arrow IPC streams of one result column (one per task, None when empty), as one table."""
    tables = [from_ipc(b) for b in blobs.to_pylist() if b is not None]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _outcome(results: pa.Table) -> JobOutcome:
    removed = pc.list_flatten(results.column("removed")).combine_chunks() if results.num_rows else pa.array([], pa.string())
    metrics: dict[str, int] = {}
    for row in results.column("metrics").to_pylist():  # one row per task
        for key, value in row or []:
            metrics[key] = metrics.get(key, 0) + int(value)
    matched = pc.list_flatten(results.column("matched_source")) if results.num_rows else pa.array([], pa.int64())
    matched_rows = np.asarray(matched.to_numpy(zero_copy_only=False), dtype=np.int64) if len(matched) else np.empty(0, np.int64)
    return JobOutcome(removed=removed, metrics=metrics, matched_source=matched_rows,
                      readds=_tables(results.column("readds"), FILE_SCHEMA),
                      row_level=_tables(results.column("row_level"), ROW_LEVEL_SCHEMA),
                      cdc=_tables(results.column("cdc"), CDC_SCHEMA))


def _decoded(paths: pa.ChunkedArray | pa.Array) -> list[str]:
    from ..io.paths import decode_path

    return [decode_path(p) for p in paths.to_pylist()]


def _add_metrics(into: dict[str, Any], more: dict[str, int], skip: frozenset[str] = frozenset()) -> None:
    for key, value in more.items():
        if key in skip or key == "executionTimeMs":
            continue
        into[key] = into.get(key, 0) + value


def _ms_since(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
