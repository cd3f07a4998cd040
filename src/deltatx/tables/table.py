"""The public ``Table`` facade and ``create_table``.

Thin on purpose: every write is a one-transaction shortcut over :class:`Transaction`
(``table.append(x)`` == ``with table.transaction() as tx: tx.append(x)``), every read is the
snapshot's files pruned by the predicate, then Parquet. The facade keeps the latest snapshot
and refreshes it incrementally (only new commits are read).
"""

from __future__ import annotations

import time
import uuid
import warnings
from typing import Any

import pyarrow as pa

from ..errors import (ConcurrentModificationException, DeltaTxError, InvalidPropertyError, PostCommitHookWarning,
                      LocationNotEmptyError, SchemaMismatchError,
                      TableAlreadyExistsError)
from ..txnlog.actions import Metadata, encode_commit
from ..txnlog.checkpoint import checkpoint_interval, write_checkpoint
from ..txnlog.checkpoint_protection import check_checkpoint_allowed
from ..txnlog import column_mapping, row_tracking
from ..txnlog.features import check_path_access, check_writable, required_protocol
from ..txnlog.history import ict_enablement_version, read_history, to_timestamp_ms
from ..txnlog.in_commit_timestamps import stamp_creation
from ..txnlog.schema import normalize_schema, schema_from_json, schema_to_json
from ..txnlog.snapshot import Snapshot, load_snapshot
from ..txnlog.snapshot_cache import SNAPSHOTS
from ..txnlog.store import LogStore, VersionExistsError, open_store
from . import iceberg_compat
from . import properties as props
from .defaults import validate_defaults
from .transaction import ENGINE_INFO, CommitResult, Transaction


#: how many commits past its own a handle that committed behind reads by name, at most, when it
#: catches up for a checkpoint (then it lists the log)
CATCH_UP_BY_NAME = 32



def _checkpoint_due(snapshot: Snapshot, version: int) -> bool:
    """Is ``version`` (committed) due a checkpoint? A bad ``delta.checkpointInterval`` in the log
    skips it with a warning: the commit stands, and failing now would invite a retry that
    writes the data twice."""
    try:
        return version % checkpoint_interval(snapshot.properties) == 0
    except InvalidPropertyError as exc:
        warnings.warn(f"version {version} is committed but not checkpointed: {exc}", PostCommitHookWarning,
                      stacklevel=4)
        return False


def _auto_compacts(snapshot: Snapshot, version: int) -> bool:
    try:
        return props.flag(snapshot.properties, props.AUTO_COMPACT, False)
    except InvalidPropertyError as exc:
        warnings.warn(f"version {version} is committed; no auto-compaction: {exc}", PostCommitHookWarning,
                      stacklevel=4)
        return False

class Table:
    """A Delta table at a URI: latest version by default, or pinned by ``version``/``timestamp``.

    A table opened at a past version or timestamp is read-only (time travel); open it without
    them to write.
    """

    def __init__(self, uri: str, version: int | None = None, timestamp: Any = None,
                 storage_options: dict[str, Any] | None = None, *, _store: LogStore | None = None,
                 _snapshot: Snapshot | None = None):
        self.uri = str(uri)
        self.storage_options = dict(storage_options or {})
        self._store = _store or open_store(self.uri, self.storage_options)
        self._pinned = version is not None or timestamp is not None
        #: this handle's own commit at a version its snapshot has not caught up with (see
        #: _after_commit_behind); the snapshot catches up on first use
        self._behind_to: int | None = None
        if _snapshot is not None:
            self._snapshot = _snapshot
        elif not self._pinned:
            self._snapshot = SNAPSHOTS.latest(self._store)  # a catch-up when this process saw it lately
        else:
            self._snapshot = load_snapshot(
                self._store, version=version,
                timestamp_ms=to_timestamp_ms(timestamp) if timestamp is not None else None,
            )
        check_path_access(self._snapshot.protocol, self._store, self.uri)

    # ------------------------------------------------------------------ state
    @property
    def _snapshot(self) -> Snapshot:
        if self._behind_to is not None:  # read-your-writes: catch up with our own commit first
            self._snap, self._behind_to = self._snap.catch_up(self._store), None
            SNAPSHOTS.remember(self._store, self._snap)
        return self._snap

    @_snapshot.setter
    def _snapshot(self, snapshot: Snapshot) -> None:
        self._snap, self._behind_to = snapshot, None

    @property
    def store(self) -> LogStore:
        """Where the table lives (its log and data files), e.g. to hand file paths to another engine."""
        return self._store

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def version(self) -> int:
        return self._snapshot.version

    @property
    def schema(self) -> pa.Schema:
        return self._snapshot.schema

    @property
    def partition_columns(self) -> list[str]:
        return list(self._snapshot.partition_columns)

    @property
    def properties(self) -> dict[str, str]:
        return dict(self._snapshot.properties)

    @property
    def metadata(self) -> Metadata:
        return self._snapshot.metadata

    @property
    def protocol(self):
        return self._snapshot.protocol

    @property
    def isolation_level(self):
        from ..isolation import table_isolation_level

        return table_isolation_level(self._snapshot.properties)

    def files(self) -> pa.Table:
        """Active files (add actions) as a pyarrow Table with Delta's column names."""
        return self._snapshot.files

    def refresh(self) -> "Table":
        """Catch up with commits made since this object last looked (reads only those)."""
        if not self._pinned:
            latest = self._snapshot.refresh(self._store)
            # registered with a catalog since this handle was opened by path: its commits are the
            # catalog's to tell now (a published file past them was never ratified)
            check_path_access(latest.protocol, self._store, self.uri)
            self._snapshot = latest
            SNAPSHOTS.remember(self._store, self._snapshot)
        return self

    def _after_commit_behind(self, base: Snapshot, version: int) -> None:
        """Our commit landed at ``version`` after plain commits we never read (a catalog ratified
        it past them: conflicts/commuting.py). Reading them now would cost what the catalog
        spared, so the snapshot stays at ``base`` and catches up when next used — at once only
        when ``version`` is due a checkpoint. ``base``'s protocol and metadata are the latest
        (plain commits change neither), so the post-commit hooks can decide from it."""
        self._snap, self._behind_to = base, version
        due = _checkpoint_due(base, version)
        if due or _auto_compacts(base, version):
            # caught up to ``version`` or beyond, reading the commits by name (every one up to
            # ours is published); the checkpoint is of the version reached
            caught_up = base.catch_up(self._store, limit=max(CATCH_UP_BY_NAME, version - base.version + 1))
            self._after_commit(caught_up, checkpoint=due)

    def _after_commit(self, snapshot: Snapshot, checkpoint: bool | None = None) -> None:
        """Post-commit hooks. The commit is durable already: a hook that fails must not fail it
        (a checkpoint is an optimisation, auto-compaction a courtesy), so failures only warn."""
        self._snapshot = snapshot
        SNAPSHOTS.remember(self._store, snapshot)  # the next fresh Table(uri) starts here
        if checkpoint is None:
            checkpoint = snapshot.version > 0 and _checkpoint_due(snapshot, snapshot.version)
        if checkpoint:
            try:
                write_checkpoint(self._store, snapshot)
            except Exception as exc:  # readers fall back to older checkpoints and JSON
                warnings.warn(f"version {snapshot.version} is committed but its checkpoint could not be "
                              f"written ({type(exc).__name__}: {exc}); the next checkpoint will cover it",
                              PostCommitHookWarning, stacklevel=3)
            else:
                self._cleanup_after_checkpoint(snapshot)
        from .ops.autocompact import auto_compaction_due

        try:
            due = auto_compaction_due(snapshot)
            if due is not None:
                self._run(None, lambda tx: tx.optimize(where=due.where, auto=True))
        except ConcurrentModificationException:
            pass  # someone else changed those files; the next commit will try again
        except Exception as exc:
            warnings.warn(f"version {snapshot.version} is committed; auto-compaction after it failed "
                          f"({type(exc).__name__}: {exc})", PostCommitHookWarning, stacklevel=3)

    def _cleanup_after_checkpoint(self, snapshot: Snapshot) -> None:
        """Metadata cleanup after a checkpoint this handle wrote, as Delta's (unless
        ``delta.enableExpiredLogCleanup=false``; on a catalog-managed table only where the catalog
        allows maintenance, else skipped without a word): expired log files go
        (tables/ops/log_cleanup.py). One listing at most, none while nothing can have expired.
        A failure only warns: the commit and its checkpoint stand."""
        from ..catalog.maintenance import check_maintenance
        from ..errors import CatalogMaintenanceError
        from .ops.log_cleanup import cleanup_after_checkpoint

        def permitted() -> bool:
            try:
                check_maintenance(self._store, "METADATA CLEANUP")
            except CatalogMaintenanceError:
                return False
            return True

        try:
            if props.flag(snapshot.properties, props.ENABLE_EXPIRED_LOG_CLEANUP, True):
                cleanup_after_checkpoint(self._store, snapshot, permitted)
        except Exception as exc:
            warnings.warn(f"version {snapshot.version} is committed and checkpointed; cleaning up expired log "
                          f"files after it failed ({type(exc).__name__}: {exc})", PostCommitHookWarning, stacklevel=4)

    # ------------------------------------------------------------------ reads
    def to_arrow(self, where: str | None = None, columns: list[str] | None = None) -> pa.Table:
        """Rows of this version, pruned by partition values and file stats, then filtered.

        ``where`` may name the ``_metadata.*`` columns ``columns`` accepts (as Spark's WHERE
        does); they filter without being returned unless ``columns`` asks for them."""
        from ..expr import bind_predicate, files_matching, parse_predicate, to_arrow
        from ..io.reader import read_files
        from ..io.row_metadata import (MaterializedColumns, check_row_tracking_columns, mentions_metadata,
                                       metadata_filter)

        snap = self._snapshot
        if isinstance(columns, str):  # one column named on its own, not its characters
            columns = [columns]
        supported = row_tracking.is_supported(snap.protocol)
        check_row_tracking_columns(columns, supported, self.uri)
        files = snap.files
        row_filter = pred = None
        if where is not None:
            parsed = parse_predicate(where)
            meta = metadata_filter(parsed, snap.schema) if mentions_metadata(where) else None
            if meta is None:
                pred = bind_predicate(parsed, snap.schema)
                if files.num_rows:
                    files = files.filter(files_matching(pred, files, snap.schema, snap.partition_columns))
                row_filter = to_arrow(pred, snap.schema)
            else:  # no stats for metadata columns: only the rest prunes (file_path exactly, by path)
                check_row_tracking_columns(meta.columns, supported, self.uri)
                pred = meta.predicate
                if files.num_rows and meta.table_part is not None:
                    files = files.filter(files_matching(meta.table_part, files, snap.schema, snap.partition_columns))
                files = meta.narrow(files)
                row_filter = to_arrow(pred, meta.schema)
        return read_files(self._store, files, snap.schema, snap.partition_columns, columns=columns,
                          filter=row_filter, prune=pred,
                          materialized=MaterializedColumns.from_configuration(snap.properties),
                          column_mapping=column_mapping.of(snap.metadata))

    def to_pandas(self, where: str | None = None, columns: list[str] | None = None):
        return self.to_arrow(where, columns).to_pandas()

    def changes(self, starting_version: int | None = None, ending_version: int | None = None,
                starting_timestamp: Any = None, ending_timestamp: Any = None,
                columns: list[str] | None = None, where: str | None = None) -> pa.Table:
        """The change data feed of versions ``starting_version..ending_version`` (inclusive;
        from 0 to the latest by default, or bounded by commit timestamps): one row per changed
        row, with ``_change_type``, ``_commit_version`` and ``_commit_timestamp`` (see
        txnlog/change_feed.py). Raises ChangeDataFeedError when the feed was off in the range."""
        from ..io.change_feed import read_changes
        from ..txnlog.change_feed import plan_changes

        snap = self.refresh()._snapshot
        plan = plan_changes(self._store, snap, starting_version, ending_version, starting_timestamp,
                            ending_timestamp)
        return read_changes(self._store, plan, columns=columns, where=where)

    def history(self, limit: int | None = None) -> list[dict[str, Any]]:
        """commitInfo of each retained version, newest first (like DESCRIBE HISTORY)."""
        return read_history(self._store, limit=limit, ict_from=ict_enablement_version(self._snapshot.properties))

    # ------------------------------------------------------------------ writes
    def transaction(self, *, max_attempts: int | None = None, user_metadata: str | None = None,
                    read_version: int | None = None) -> Transaction:
        """A read-modify-write transaction pinned at this table's current version.

        ``read_version`` pins an older version instead: a distributed write (Spark) plans against
        the version it saw when the job started and commits later, so the conflict check must
        cover every commit since then, not only those since the driver last looked.
        """
        if self._pinned:
            raise DeltaTxError(
                f"this Table was opened at version {self.version} for time travel and is read-only; "
                f"open {self._latest_handle_hint()} without version/timestamp to write"
            )
        kwargs: dict[str, Any] = {"user_metadata": user_metadata}
        if max_attempts is not None:
            kwargs["max_attempts"] = max_attempts
        snapshot = self._snapshot
        if read_version is not None and read_version != snapshot.version:
            if read_version > snapshot.version:
                snapshot = self.refresh()._snapshot
            if read_version != snapshot.version:
                snapshot = load_snapshot(self._store, version=read_version)
        return Transaction(self, snapshot, **kwargs)

    def _latest_handle_hint(self) -> str:
        """How to open this table at its latest version: a catalog table through its catalog."""
        if getattr(self._store, "catalog_managed", False):
            return "it through its catalog (cat.table(name))"
        return f"deltatx.Table({self.uri!r})"

    def _latest_transaction(self, user_metadata: str | None) -> Transaction:
        """One operation = one transaction, started at the latest version like Delta's commands.

        Catching up reads the next commits by name — usually one failed open — and lists the log
        only when far behind (an explicit ``transaction()`` stays pinned where it is).
        """
        if not self._pinned:
            self._snapshot = self._snapshot.catch_up(self._store)
        return self.transaction(user_metadata=user_metadata)

    def _run(self, user_metadata: str | None, stage) -> CommitResult:
        tx = self._latest_transaction(user_metadata)
        try:
            stage(tx)
            return tx.commit()
        except BaseException:
            tx.abort()
            raise

    def append(self, data: Any, schema_mode: str | None = None, app_id: str | None = None,
               app_version: int | None = None, user_metadata: str | None = None) -> CommitResult:
        """Add rows. With (app_id, app_version) the write is idempotent: a repeated or older
        version of the same app is skipped and reported with ``skipped=True``."""
        as_is = self._may_append_as_is(data)
        while True:
            tx = Transaction(self, self._snap, user_metadata=user_metadata) if as_is \
                else self._latest_transaction(user_metadata)
            try:
                staged = tx.append(data, schema_mode=schema_mode, app_id=app_id, app_version=app_version)
                if staged is False:
                    tx.abort()
                    return CommitResult(version=self.version, operation="WRITE", attempts=0, skipped=True,
                                        read_version=self.version, txn_id=tx.txn_id)
                return tx.commit()
            except ConcurrentModificationException:
                tx.abort()
                if not as_is:
                    raise
            except BaseException:
                tx.abort()
                raise
            # It started from this handle's snapshot, which the table may have moved past: what it
            # conflicted with may predate the snapshot an append that caught up first would have
            # read. Start over from the latest version; a conflict then is real.
            as_is = False

    def _may_append_as_is(self, data: Any) -> bool:
        """Append from this handle's snapshot without catching up first? Where the store orders
        commits itself and ratifies a commuting append after plain winners unread (a catalog:
        conflicts/commuting.py), catching up would read exactly what the catalog spares; the
        offer tells whether anything else happened since. Only for data that can be read twice
        (the append starts over from the latest version when it met something else)."""
        return (getattr(self._store, "ratifies_commuting", False) and not self._pinned
                and isinstance(data, (pa.Table, pa.RecordBatch)))

    def overwrite(self, data: Any, where: str | None = None, schema_mode: str | None = None,
                  user_metadata: str | None = None, partition_overwrite_mode: str | None = None) -> CommitResult:
        """Replace the table's rows, only those matching ``where`` (replaceWhere), or with
        ``partition_overwrite_mode="dynamic"`` only the partitions ``data`` writes into (Delta's
        partitionOverwriteMode=dynamic)."""
        return self._run(user_metadata, lambda tx: tx.overwrite(
            data, where=where, schema_mode=schema_mode, partition_overwrite_mode=partition_overwrite_mode))

    def delete(self, where: str | None = None, user_metadata: str | None = None) -> CommitResult:
        return self._run(user_metadata, lambda tx: tx.delete(where))

    def update(self, where: str | None = None, set: dict[str, str] | None = None,
               user_metadata: str | None = None) -> CommitResult:
        return self._run(user_metadata, lambda tx: tx.update(where, set))

    def merge(self, source: Any, on: str, source_alias: str = "s", target_alias: str = "t"):
        """A MERGE builder; ``.execute()`` commits it as one transaction."""
        from .ops.merge import MergeBuilder

        return MergeBuilder(None, source, on, source_alias=source_alias, target_alias=target_alias, table=self)

    def optimize(self, where: str | None = None, target_size: int | None = None,
                 zorder_by: list[str] | None = None, full: bool = False) -> CommitResult:
        """Compact small files; cluster a clustered table (incrementally, or every file with
        ``full``); or, with ``zorder_by``, OPTIMIZE ZORDER BY an unclustered table."""
        return self._run(None, lambda tx: tx.optimize(where=where, target_size=target_size,
                                                      zorder_by=zorder_by, full=full))

    def cluster_by(self, columns: list[str] | None) -> CommitResult:
        """ALTER TABLE CLUSTER BY (columns); ``None`` is CLUSTER BY NONE."""
        return self._run(None, lambda tx: tx.cluster_by(columns))

    @property
    def clustering_columns(self) -> list[str] | None:
        """The clustering columns ([] after CLUSTER BY NONE); None when the table is not clustered."""
        from .ops.clustering import clustering_columns

        return clustering_columns(self._snapshot)

    def reorg(self, where: str | None = None, purge: bool = True) -> CommitResult:
        """``REORG TABLE ... APPLY (PURGE)``: rewrite the files that have deletion vectors."""
        return self._run(None, lambda tx: tx.reorg(where=where, purge=purge))

    def set_properties(self, properties: dict[str, Any]) -> CommitResult:
        """SET TBLPROPERTIES. Turning row tracking on over existing files runs Delta's protocol
        upgrade and backfill commits first (ops/row_tracking_backfill.py)."""
        from .ops import row_tracking_backfill as backfill
        from .ops.properties import stage_set_properties

        properties = props.validate_properties(properties)  # first: the backfill probe reads them too
        probe = self._latest_transaction(None)
        try:
            needed = backfill.needs_backfill(probe, properties)
            if needed:  # the backfill commits first: every other setting must be valid before it
                stage_set_properties(probe, properties, backfill_first=True)
        finally:
            probe.abort()
        if needed:
            if not row_tracking.is_supported(self.protocol):
                self._run(None, backfill.stage_support)
            self._run(None, backfill.stage_backfill)
        return self._run(None, lambda tx: tx.set_properties(properties))

    def unset_properties(self, keys: str | list[str], if_exists: bool = False) -> CommitResult:
        """UNSET TBLPROPERTIES: remove keys from the table's configuration (an unknown ``delta.*``
        key an older writer left included). A missing key raises InvalidPropertyError unless
        ``if_exists``; nothing to remove commits nothing (``attempts == 0``)."""
        return self._run(None, lambda tx: tx.unset_properties(keys, if_exists=if_exists))

    def alter_column_type(self, column: str, new_type: Any) -> CommitResult:
        """ALTER COLUMN ... TYPE: widen a column (``delta.enableTypeWidening=true`` needed). Only
        the protocol's widenings are accepted; old data files are read as the wider type."""
        return self._run(None, lambda tx: tx.alter_column_type(column, new_type))

    def add_constraint(self, name: str, sql: str) -> CommitResult:
        """Add a CHECK constraint (``delta.constraints.<name>``) after checking every existing
        row; raises ConstraintViolationError (nothing committed) if some row breaks it."""
        return self._run(None, lambda tx: tx.add_constraint(name, sql))

    def drop_constraint(self, name: str, if_exists: bool = False) -> CommitResult:
        return self._run(None, lambda tx: tx.drop_constraint(name, if_exists=if_exists))

    def add_columns(self, fields: pa.Field | list[pa.Field]) -> CommitResult:
        """ALTER TABLE ADD COLUMNS: new nullable columns at the end (old rows read them as null)."""
        return self._run(None, lambda tx: tx.add_columns(fields))

    def set_column_default(self, column: str, sql: str | None) -> CommitResult:
        """ALTER TABLE ALTER COLUMN SET DEFAULT ``sql`` (a constant SQL expression; None: DROP
        DEFAULT). A column cannot be added with a default (PROTOCOL.md): add it, then set one."""
        return self._run(None, lambda tx: tx.set_column_default(column, sql))

    def rename_column(self, old: str, new: str) -> CommitResult:
        """ALTER TABLE RENAME COLUMN (``a.b`` names a struct field); needs column mapping."""
        return self._run(None, lambda tx: tx.rename_column(old, new))

    def drop_column(self, name: str | list[str]) -> CommitResult:
        """ALTER TABLE DROP COLUMN(S) (``a.b`` names a struct field); needs column mapping."""
        return self._run(None, lambda tx: tx.drop_column(name))

    def vacuum(self, retention_hours: float | None = None, dry_run: bool = False,
               enforce_retention_duration: bool = True, record: bool = True) -> list[str]:
        """Delete (or with ``dry_run`` only list) unreferenced files older than the retention;
        returns their paths relative to the table root, sorted (tables/ops/vacuum.py).

        A VACUUM that deletes is recorded as Delta and delta-rs record it: a ``VACUUM START``
        commit before the first file goes, a ``VACUUM END`` commit after (status ``FAILED``, and
        the error raised, if deleting failed). Both change no data, so they never conflict.
        ``record=False`` deletes without them (delta-spark's
        ``spark.databricks.delta.vacuum.logging.enabled=false``)."""
        from ..catalog.maintenance import check_maintenance
        from .ops.vacuum import delete_planned, plan_vacuum

        check_maintenance(self._store, "VACUUM")  # a catalog-managed table: only where the catalog allows
        if self._pinned:
            raise DeltaTxError(
                f"this Table was opened at version {self.version} for time travel; VACUUM needs the latest "
                f"version: open {self._latest_handle_hint()} without version/timestamp"
            )
        plan = plan_vacuum(self._store, self.refresh().snapshot, retention_hours, enforce_retention_duration)
        if dry_run:
            return plan.paths
        if not record:
            return delete_planned(self._store, plan)
        self._record(*plan.start_record())
        try:
            deleted = delete_planned(self._store, plan)
        except BaseException:
            try:
                self._record(*plan.end_record(0, completed=False))
            except Exception:  # the deletion's error is the one to raise
                pass
            raise
        self._record(*plan.end_record(len(deleted), completed=True))
        return deleted

    def cleanup_metadata(self, dry_run: bool = False) -> list[str]:
        """Delete expired ``_delta_log`` files (PROTOCOL.md "Metadata Cleanup", deltalake's
        ``cleanup_metadata``); returns their names relative to ``_delta_log``, sorted (with
        ``dry_run``, what would go, deleting nothing).

        Expired: older than ``delta.logRetentionDuration`` (default ``interval 30 days``; the
        cutoff is midnight UTC of that day, by commit file times made non-decreasing), and before
        the newest complete checkpoint at or before the newest expired commit — that checkpoint,
        its commit and every later version stay, so the table and every version from that
        checkpoint on read as before; older versions no longer do (TimeTravelError). Commits,
        checkpoints, version checksums and log compaction files go; ``_last_checkpoint``,
        ``_staged_commits/`` and ``_sidecars/`` never do. Runs whatever
        ``delta.enableExpiredLogCleanup`` says (that property switches the cleanup after each
        checkpoint, which deltatx does by itself). Deletes nothing when the commits from that
        checkpoint on have a gap or the checkpoint does not read: a ``LogCleanupWarning`` says
        why. On a catalog-managed table only where the catalog allows maintenance
        (CatalogMaintenanceError otherwise), and only published versions it verified."""
        from ..catalog.maintenance import check_maintenance
        from ..errors import LogCleanupWarning
        from .ops.log_cleanup import cleanup_log

        check_maintenance(self._store, "METADATA CLEANUP")  # a catalog-managed table: only where the catalog allows
        if self._pinned:
            raise DeltaTxError(
                f"this Table was opened at version {self.version} for time travel; metadata cleanup needs the "
                f"latest version: open {self._latest_handle_hint()} without version/timestamp"
            )
        snapshot = self.refresh().snapshot
        check_writable(snapshot.protocol, snapshot.metadata)  # a writer's operation: its features must be known
        result = cleanup_log(self._store, snapshot, dry_run=dry_run)
        if result.plan.blocked is not None:
            warnings.warn(f"metadata cleanup of {self.uri!r}: {result.plan.blocked}", LogCleanupWarning, stacklevel=2)
        return result.deleted

    def _record(self, operation: str, parameters: dict[str, Any], metrics: dict[str, Any]) -> CommitResult:
        """Commit an operation that changes nothing but the history (a commitInfo alone)."""
        return self._run(None, lambda tx: tx.note_operation(operation, parameters, metrics, changes_data=False,
                                                            recorded_alone=True))

    def restore(self, version: int | None = None, timestamp: Any = None) -> CommitResult:
        return self._run(None, lambda tx: tx.restore(version=version, timestamp=timestamp))

    def checkpoint(self) -> None:
        """Write a checkpoint of this Table's version now (refused for a version the table's
        checkpointProtection guards)."""
        latest = load_snapshot(self._store) if self._pinned else self._snapshot.catch_up(self._store)
        check_checkpoint_allowed(latest.protocol, latest.properties, self._snapshot.version)
        write_checkpoint(self._store, self._snapshot)

    def __repr__(self) -> str:
        return f"deltatx.Table({self.uri!r}, version={self.version})"


def create_table(uri: str, schema: pa.Schema, partition_by: list[str] | str | None = None,
                 properties: dict[str, Any] | None = None, name: str | None = None,
                 description: str | None = None, storage_options: dict[str, Any] | None = None,
                 exist_ok: bool = False, cluster_by: list[str] | None = None,
                 generated_columns: dict[str, str] | None = None,
                 identity_columns: dict[str, dict[str, Any]] | None = None, *,
                 _store: LogStore | None = None) -> Table:
    """Create an empty Delta table (version 0: commitInfo, protocol, metaData).

    ``cluster_by`` makes it a clustered table (liquid clustering; not with ``partition_by``).
    ``generated_columns`` maps a column to its SQL generation expression; ``identity_columns``
    maps a BIGINT column to ``{"start": 1, "step": 1, "always": True}`` (``always=False``: BY
    DEFAULT, explicit values allowed). CHECK constraints may be given as
    ``delta.constraints.<name>`` properties (the table is empty, nothing to check)."""
    store = _store or open_store(str(uri), storage_options)  # _store: the catalog's commit path
    if isinstance(partition_by, str):
        partition_by = [partition_by]
    partition_by = list(partition_by or [])
    if not isinstance(schema, pa.Schema):
        raise SchemaMismatchError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
    from .ops.replace_table import check_table_schema

    schema = normalize_schema(schema)
    config = row_tracking.with_materialized_names(props.validate_properties(properties or {}))
    check_table_schema(schema, partition_by, config)  # before anything is written
    if store.table_exists():
        if exist_ok:
            return Table(str(uri), storage_options=storage_options, _store=store)
        raise TableAlreadyExistsError(f"a Delta table already exists at {uri!r}")
    check_location_empty(store, str(uri))
    requested = config
    if generated_columns or identity_columns or any(k.startswith("delta.constraints.") for k in config):
        from .column_rules import define_column_rules

        schema, config = define_column_rules(schema, config, partition_by, generated_columns, identity_columns)
    else:  # rules a schema carries already (a Spark builder's generatedAlwaysAs): bound now, not at a write
        from .constraints import rules_for

        rules_for(schema, config)
    validate_defaults(schema)  # with the generated and identity columns just defined
    domains: tuple = ()
    clustered_by: list[str] | None = None
    if cluster_by is None:
        from .ops.clustering import refuse_feature_property

        refuse_feature_property(requested)
    else:
        from .ops.clustering import creation_clustering

        config, domain, clustered_by = creation_clustering(schema, partition_by, config, cluster_by)
        domains = (domain,)
    metadata = Metadata(
        id=Metadata.new_id(), schema_string=schema_to_json(schema), partition_columns=tuple(partition_by),
        configuration=props.stored_configuration(config), name=name, description=description,
        created_time=int(time.time() * 1000),
    )
    metadata = column_mapping.prepare_metadata(None, metadata)  # ids and physical names, if mapped
    if cluster_by is not None and column_mapping.of(metadata) is not None:
        # the domain names the clustering columns by the physical names just assigned
        _, domain, _ = creation_clustering(schema_from_json(metadata.schema_string), partition_by, config, cluster_by)
        domains = (domain,)
    protocol = required_protocol(config, schema, props.requested_protocol(config, None))
    check_writable(protocol, metadata)
    iceberg_compat.validate(metadata, protocol, schema=schema)
    from ..isolation import table_isolation_level

    commit_info = {
        "timestamp": int(time.time() * 1000),
        "operation": "CREATE TABLE",
        "operationParameters": {
            "partitionBy": schema_partition_json(partition_by),
            "description": description or "",
            "isManaged": "false",
            "properties": schema_partition_json(requested),
            **({"clusterBy": schema_partition_json(clustered_by)} if clustered_by is not None else {}),
        },
        "isolationLevel": table_isolation_level(config).value,
        "isBlindAppend": True,
        "operationMetrics": {},
        "engineInfo": ENGINE_INFO,
        "txnId": str(uuid.uuid4()),
    }
    stamp_creation(commit_info, config)
    try:
        store.put_commit(0, encode_commit(commit_info, protocol=protocol, metadata=metadata, domains=domains))
    except VersionExistsError:
        if exist_ok:
            return Table(str(uri), storage_options=storage_options, _store=store)
        raise TableAlreadyExistsError(f"a Delta table was created concurrently at {uri!r}") from None
    return Table(str(uri), storage_options=storage_options, _store=store)


def check_location_empty(store: LogStore, uri: str) -> None:
    """Refuse to create a table where files already are (and no table is): the new table would
    not list them, so VACUUM would later delete them as unreferenced files — a user's data.
    Delta refuses this too (DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION). Hidden files (``_x``,
    ``.x``: an empty ``_delta_log``, ``_SUCCESS``, ``.crc``) are not table data and VACUUM leaves
    them alone, so they do not count. A folder of Parquet files becomes a table with
    ``convert_to_delta``, which adds them instead."""
    from .convert import is_hidden_path

    if store.location_is_file():
        raise LocationNotEmptyError(f"Cannot create table delta.`{uri}`: the location is a file, not a folder")
    present = [path for path, _, _ in store.list_files_recursive() if not is_hidden_path(path)]
    if present:
        raise LocationNotEmptyError(
            f"Cannot create table delta.`{uri}`: the location is not empty ({len(present)} file(s), "
            f"e.g. {present[0]!r}) and also not a Delta table; VACUUM would delete those files. Use "
            f"convert_to_delta() (DeltaTable.convertToDelta()) for a Parquet folder, or an empty location")


def schema_partition_json(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()
