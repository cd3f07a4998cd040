"""The explicit read-modify-write transaction, and the commit/rebase/retry loop.

::

    tx = table.transaction()            pins the table's snapshot (read version)
    tx.read(where)                      rows as of that snapshot; records predicate + files read
    tx.append / delete / update / ...   writes data files, stages actions (nothing visible yet)
    tx.commit()                         put-if-absent of readVersion+1; on losing, for each winning
                                        commit oldest first: idempotency (txnId) → check_commit
                                        (pure) → rebase; back off with jitter; retry at the next version

The operations (``tables/ops``) only stage; this module owns the read set, the staged actions and
the loop. It contains no SQL and no Parquet details.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .. import __version__, phases
from ..conflicts import ReadSet, TransactionInfo, check_commit
from ..conflicts.commuting import commutes_with_plain_commits, is_plain
from ..conflicts.checker import added_rows_request
from ..conflicts.row_level import load_request
from ..errors import (CommitRetriesExceededError, ConcurrentAppendException, ConcurrentModificationException,
                      DeltaTxError, TransactionFailedError)
from ..expr import Expr
from ..isolation import effective_isolation_level, table_isolation_level
from ..txnlog.actions import (
    FILE_SCHEMA,
    REMOVE_SCHEMA,
    CommitActions,
    DomainMetadata,
    Metadata,
    Protocol,
    Txn,
    empty_table,
    encode_commit,
    removes_for,
    parse_commit,
)
from ..txnlog import column_mapping, row_tracking
from ..txnlog.features import (check_catalog_still_manages, check_path_access, check_writable, required_protocol,
                               writer_features)
from ..txnlog.replay import only_rows, without_paths
from ..txnlog.in_commit_timestamps import CommitClock
from ..txnlog.log_cleanup import may_be_cleaned_after
from ..txnlog.snapshot import Snapshot
from ..txnlog.store import VersionExistsError
from . import iceberg_compat
from . import properties as props
from .identity import rebase_identity
from .row_level import RowLevelRecorder, load_added_rows, load_winner_rows, with_tight_bounds, write_pending_dvs

if TYPE_CHECKING:
    from .ops.change_feed import ChangeRecorder
    from .table import Table

ENGINE_INFO = f"deltatx/{__version__}"
#: Attempts before CommitRetriesExceededError. A writer only retries while every winner it read
#: left its commit valid (a real conflict raises at once), so giving up early only fails a commit
#: that would have gone in: Delta's own limit is 10,000,000. Eight blind appenders on S3 were
#: measured needing up to 91 attempts for one commit (each attempt reads the winners, ~50 ms).
DEFAULT_MAX_ATTEMPTS = 10_000
#: Losing a race already moves us to the newest version (we read every winner), so the next
#: attempt needs no wait. Only a writer that keeps losing backs off — exponentially, with full
#: jitter, capped low: a long sleep hands the table to the others and starves this writer.
FREE_RETRIES = 3
#: operations whose commits carry the row-tracking ``preserved`` tag whatever they add
_DML_OPERATIONS = frozenset({"DELETE", "UPDATE", "MERGE"})
BACKOFF_BASE_S = 0.001
BACKOFF_CAP_S = 0.1


def _commit_own_sizes(metrics: dict[str, Any], adds: pa.Table, removes: pa.Table) -> None:
    """A transaction of several operations reports the byte and file-size metrics of the commit
    itself, as it does the file counts: a file one operation wrote and the next rewrote is in
    neither, and a size distribution does not add up across operations."""
    from .ops.dml_metrics import file_size_distribution, total_size

    for key, files in (("numAddedBytes", adds), ("numRemovedBytes", removes)):
        if key in metrics:
            metrics[key] = total_size(files)
    if "minFileSize" in metrics:
        metrics.update(file_size_distribution(adds["size"]))


def backoff_s(attempts: int) -> float:
    """The longest pause before attempt ``attempts + 1``: doubling from BACKOFF_BASE_S after the
    free retries, capped at BACKOFF_CAP_S (the exponent is capped first: 2.0 ** 1100 overflows)."""
    return min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2.0 ** min(max(attempts - FREE_RETRIES - 1, 0), 30))


@dataclass
class CommitResult:
    """What one commit did. ``skipped`` is true for an idempotent write already applied."""

    version: int
    operation: str
    attempts: int = 1
    metrics: dict[str, Any] = field(default_factory=dict)
    read_version: int = -1
    isolation_level: str | None = None
    txn_id: str | None = None
    skipped: bool = False
    conflicts_resolved: int = 0


@dataclass
class _StagedOp:
    name: str
    parameters: dict[str, Any]
    metrics: dict[str, Any]
    changes_data: bool = True
    #: committed even with no action staged: the commit records the operation itself (Delta's
    #: VACUUM START / VACUUM END hold only their commitInfo)
    recorded_alone: bool = False


def _encode_parameter(v: Any) -> str:
    return v if isinstance(v, str) else orjson.dumps(v).decode()


T = TypeVar("T")


def _statement(method: Callable[..., T]) -> Callable[..., T]:
    """A public staging method of :class:`Transaction`, run as one statement (see
    :meth:`Transaction.run_statement`)."""
    @functools.wraps(method)
    def run(self: "Transaction", *args: Any, **kwargs: Any) -> T:
        return self.run_statement(lambda: method(self, *args, **kwargs))

    return run


class CommitsOnExit:
    """``with`` a transaction: commit when the block ends normally, abort when it raises.

    Shared by the single-table :class:`Transaction` and the catalog's multi-table transaction;
    both provide ``commit()``, ``abort()`` and ``_state``."""

    _state: str

    def commit(self) -> Any:  # pragma: no cover - provided by the subclass
        raise NotImplementedError

    def abort(self) -> None:  # pragma: no cover - provided by the subclass
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
            return None
        if self._state == "open" and getattr(self, "_committed_by", None) is None:
            self.commit()  # a member of a catalog transaction commits with it, not on its own
        return None


def _cleaned_past(read_version: int, version: int, log_starts: int | None) -> ConcurrentModificationException:
    where = "" if log_starts is None else f", the log goes on at version {log_starts}"
    return ConcurrentModificationException(
        f"the table moved past version {read_version}, which this transaction read, and metadata cleanup has "
        f"removed the commits after it (commit {version} is gone{where}): they cannot be checked for conflicts; "
        f"nothing was committed. Start the transaction again from the latest version")


class Transaction(CommitsOnExit):
    """A read-modify-write transaction pinned at one snapshot.

    Use as a context manager to commit on success and to clean up on an exception::

        with table.transaction() as tx:
            rows = tx.read(where="part = 1")
            tx.delete(where="part = 1 AND id < 10")
    """

    def __init__(self, table: "Table", snapshot: Snapshot, *, max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                 user_metadata: str | None = None):
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            from ..errors import InvalidArgumentError

            raise InvalidArgumentError(f"max_attempts must be a positive integer, got {max_attempts!r}")
        check_writable(snapshot.protocol, snapshot.metadata)
        check_path_access(snapshot.protocol, table._store, table.uri)
        if snapshot.version >= 0:
            check_catalog_still_manages(snapshot.protocol, table._store, table.uri)
        iceberg_compat.validate(snapshot.metadata, snapshot.protocol)  # O(1) unless Iceberg-compatible
        self.table = table
        self.snapshot = snapshot
        self.read_version = snapshot.version
        self.max_attempts = max_attempts
        self.user_metadata = user_metadata
        self.txn_id = str(uuid.uuid4())
        self._predicates: list[Expr] = []
        self._read_paths: list[pa.Array] = []
        self._whole_table = False
        self._app_ids: set[str] = set()
        self._adds: list[pa.Table] = []
        self._removes: list[pa.Table] = []
        self._metadata: Metadata | None = None
        self._schema: pa.Schema | None = None  # parsed schema of the staged metadata
        self._protocol: Protocol | None = None
        self._txns: dict[str, Txn] = {}
        self._domains: dict[str, DomainMetadata] = {}  # staged domainMetadata, by domain
        self._ops: list[_StagedOp] = []
        # the table as this transaction sees it (own writes included): the snapshot's files, then
        # the staged drops (paths) and adds, applied when next read (see ``_files``)
        self._files_seen = snapshot.files
        self._files_staged: list[tuple[str, Any]] = []
        self._written: set[str] = set()  # add paths of the data files this transaction wrote
        self._dv_files: list[str] = []  # deletion-vector files it wrote (relative to the root)
        self._durable: set[str] = set()  # files of those made durable for a commit already
        self.row_level = RowLevelRecorder()  # files changed or read row by row (DV tables)
        self.changes: ChangeRecorder | None = None  # rows DML changed, for the change data feed
        self._cdc: list[pa.Table] = []  # cdc actions of the change data files written at commit
        self._must_exist: list[str] = []  # files named but not written here (see require_at_commit)
        self._removed_without_feed = False  # committed rows changed while the change feed was off
        self._identity = None  # identity.IdentityAllocator once it hands out identity values
        self._state = "open"
        self._may_have_landed = False  # once true, an error must not delete this txn's data files
        self._clock: CommitClock | None = None  # in-commit timestamps across commit attempts
        self._committed_by: str | None = None  # "catalog transaction <id>" when one commits this
        self._compaction: str | None = None  # "OPTIMIZE" / "REORG" once staged: nothing else may join
        self._failed: str | None = None  # a statement that failed after staging (see run_statement)
        phases.reached("begin", txn_id=self.txn_id, version=self.read_version, table=table.uri)

    # ------------------------------------------------------------------ what the txn sees
    @property
    def metadata(self) -> Metadata:
        return self._metadata or self.snapshot.metadata

    @property
    def protocol(self) -> Protocol:
        return self._protocol or self.snapshot.protocol

    @property
    def schema(self) -> pa.Schema:
        """The snapshot's (cached) schema, unless this transaction staged a new one (parsed once)."""
        return self._schema if self._schema is not None else self.snapshot.schema

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata.partition_columns)

    @property
    def column_mapping(self) -> "column_mapping.ColumnMapping | None":
        """How the table's columns are named in its files (None: by their names)."""
        return column_mapping.of(self.metadata)

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.metadata.configuration)

    @property
    def store(self):
        return self.table._store

    @property
    def domains(self) -> dict[str, DomainMetadata]:
        """Metadata domains as this transaction sees them (the snapshot's, then its own staged)."""
        return {**self.snapshot.domains, **self._domains} if self._domains else self.snapshot.domains

    def current_files(self) -> pa.Table:
        """Active files as this transaction sees them (snapshot − staged removes + staged adds)."""
        return self._files

    @property
    def _files(self) -> pa.Table:
        """Staged changes are applied when the files are next read, not as they are staged: a
        point DELETE stages remove + re-add of one file and commits without reading them again,
        and cutting a path out of the table's files costs more than its DV."""
        if self._files_staged:
            files = self._files_seen
            for kind, change in self._files_staged:
                files = without_paths(files, change) if kind == "drop" else pa.concat_tables([files, change])
            self._files_seen, self._files_staged = files, []
        return self._files_seen

    # ------------------------------------------------------------------ reads (recorded)
    def record_read(self, predicate: Expr | None, files: pa.Table) -> None:
        """Record that the txn depends on ``files`` found with ``predicate`` (None = whole table)."""
        self._ensure_open()
        if predicate is None:
            self._whole_table = True
        else:
            self._predicates.append(predicate)
        if files.num_rows:
            self._read_paths.append(files["path"].combine_chunks() if isinstance(files["path"], pa.ChunkedArray) else files["path"])
        phases.reached("read", txn_id=self.txn_id, version=self.read_version,
                       predicate=None if predicate is None else str(predicate))

    def scan(self, where: str | Expr | None = None) -> tuple[Expr | None, pa.Table]:
        """Bind ``where`` and prune the txn's files by partition values and stats (recorded)."""
        from ..expr import bind_predicate, files_matching, parse_predicate

        pred: Expr | None = None
        files = self._files
        if where is not None:
            pred = bind_predicate(parse_predicate(where) if isinstance(where, str) else where, self.schema)
            if files.num_rows:
                mask = files_matching(pred, files, self.schema, self.partition_columns, use_stats=True)
                files = only_rows(files, mask)
        self.record_read(pred, files)
        return pred, files

    def read(self, where: str | None = None, columns: list[str] | None = None) -> pa.Table:
        """Rows as of the pinned snapshot (plus this txn's own writes); records the read.

        On a deletion-vector table the rows read are recorded too (by file and position): under
        Serializable a concurrent DELETE of one of them is a conflict, of any other row not.

        ``where`` may name ``_metadata.*`` columns, as :meth:`Table.to_arrow`'s; the read
        predicate recorded for conflict detection is then its conjuncts on table columns (a
        superset of the rows read; the whole table when there are none).
        """
        from ..expr import parse_predicate, to_arrow
        from ..io.reader import read_files
        from ..io.row_metadata import (FILE_PATH, ROW_ID, ROW_INDEX, MaterializedColumns, check_row_tracking_columns,
                                       mentions_metadata, metadata_filter)
        from .ops.merge_on_read import record_reads_by_file, tracks_rows, uses_deletion_vectors

        supported = row_tracking.is_supported(self.protocol)
        check_row_tracking_columns(columns, supported, self.table.uri)
        meta = metadata_filter(parse_predicate(where) if isinstance(where, str) else where, self.schema) \
            if where is not None and mentions_metadata(where) else None
        if meta is None:
            pred, files = self.scan(where)
            row_filter = to_arrow(pred, self.schema) if pred is not None else None
        else:
            check_row_tracking_columns(meta.columns, supported, self.table.uri)
            files = meta.narrow(self.scan(meta.table_part)[1])
            pred, row_filter = meta.predicate, to_arrow(meta.predicate, meta.schema)
        materialized = MaterializedColumns.from_configuration(self.properties)
        mapping = self.column_mapping
        if not uses_deletion_vectors(self) or not files.num_rows:
            return read_files(self.store, files, self.schema, self.partition_columns, columns=columns,
                              filter=row_filter, prune=pred, materialized=materialized, column_mapping=mapping)
        wanted = list(columns) if columns is not None else self.schema.names
        extra = [c for c in (ROW_INDEX, FILE_PATH) + ((ROW_ID,) if tracks_rows(self) else ()) if c not in wanted]
        rows = read_files(self.store, files, self.schema, self.partition_columns, columns=wanted + extra,
                          filter=row_filter, prune=pred, materialized=materialized, column_mapping=mapping)
        record_reads_by_file(self, files, rows)
        return rows.drop_columns(extra) if extra else rows

    def app_version(self, app_id: str) -> int | None:
        """The last committed version of ``app_id`` (records the dependency, like Delta's txnVersion)."""
        self._ensure_open()
        self._app_ids.add(app_id)
        staged = self._txns.get(app_id)
        if staged is not None:
            return staged.version
        txn = self.snapshot.live_app_txns().get(app_id)
        return txn.version if txn is not None else None

    # ------------------------------------------------------------------ staging
    def stage_adds(self, adds: pa.Table, *, written: bool = True) -> None:
        """Stage add actions. ``written=False`` for re-adds of committed files (a deletion-vector
        update): those files are not this transaction's to delete on abort."""
        self._ensure_open()
        if adds.num_rows:
            adds = adds.select(FILE_SCHEMA.names)
            if not adds.schema.equals(FILE_SCHEMA):  # a cast per column costs even when a no-op
                adds = adds.cast(FILE_SCHEMA)
            if written:
                self._written.update(adds.column("path").to_pylist())
                if "deletionVectors" in writer_features(self.protocol):
                    adds = with_tight_bounds(adds)  # Delta's new files say their bounds are tight
            self._adds.append(adds)
            if not written:  # a re-added file replaces the row this transaction saw for it
                self._files_staged.append(("drop", adds["path"]))
            self._files_staged.append(("add", adds))
            phases.reached("data_files_written", txn_id=self.txn_id, version=self.read_version,
                           files=adds)

    def stage_removes(self, files: pa.Table, data_change: bool = True, *, keep_own_files: bool = False) -> None:
        """Remove files (rows of current_files()). Files this txn added itself are just dropped;
        their data files are deleted unless ``keep_own_files`` (the caller re-adds the same paths
        with a deletion vector, e.g. a DELETE of rows this transaction appended).

        Raises :class:`AppendOnlyError` when the table is append-only and committed files would
        be removed with ``dataChange=true``: operations stage their removes before writing new
        data files, so a refused DELETE/UPDATE/MERGE/OVERWRITE writes nothing.
        """
        self._ensure_open()
        if not files.num_rows:
            return
        paths = files["path"]
        own = self._own_added_paths()
        mine_mask = pc.is_in(paths, value_set=own["path"]) if own is not None and own.num_rows else None
        theirs = files.filter(pc.invert(mine_mask)) if mine_mask is not None else files
        if data_change and theirs.num_rows and not self._removed_without_feed \
                and not props.flag(self.properties, props.ENABLE_CHANGE_DATA_FEED, False):
            self._removed_without_feed = True  # see ops.change_feed.stage_change_files
        if data_change and theirs.num_rows and props.flag(self.properties, props.APPEND_ONLY, False):
            from ..errors import AppendOnlyError

            raise AppendOnlyError(
                f"table {self.table.uri!r} has delta.appendOnly=true; the operation would remove data "
                f"({theirs.num_rows} file(s)). Set delta.appendOnly=false to allow it."
            )
        if mine_mask is not None:
            mine = files.filter(mine_mask)
            if mine.num_rows:
                # Staged adds go: new files are deleted; a re-add of a committed file (a DV update)
                # just disappears, its committed version's remove being staged already.
                self._adds = [a.filter(pc.invert(pc.is_in(a["path"], value_set=mine["path"]))) for a in self._adds]
                written = [p for p in mine["path"].to_pylist() if p in self._written and not keep_own_files]
                if written:
                    self._written.difference_update(written)
                    self.store.delete_files(_decoded(pa.array(written, pa.string())))
            files = theirs
        if files.num_rows:
            self._removes.append(removes_for(files, int(time.time() * 1000), data_change))
        self._files_staged.append(("drop", paths))

    def _own_added_paths(self) -> pa.Table | None:
        return pa.concat_tables(self._adds) if self._adds else None

    def require_at_commit(self, relative_paths: list[str]) -> None:
        """Files this commit names but did not write (RESTORE's re-adds, their DV files) that must
        still exist when it is put: checked before every attempt, so a VACUUM that deleted them
        since they were staged fails the commit instead of leaving a table no engine reads."""
        self._must_exist.extend(relative_paths)

    def check_required_files(self) -> None:
        """Raise DataFileNotFoundError if a file :meth:`require_at_commit` named is gone (called
        right before each attempt to commit, by this transaction and by a catalog transaction)."""
        if not self._must_exist:
            return
        from ..errors import DataFileNotFoundError
        from ..io.paths import missing_files

        gone = missing_files(self.store, self._must_exist)
        if gone:
            more = f" (and {len(gone) - 1} more)" if len(gone) > 1 else ""
            raise DataFileNotFoundError(
                f"{gone[0]!r}{more}, which this {self._operation()[0]} commit re-adds, was deleted (by a "
                f"concurrent VACUUM?) after it was staged: nothing was committed")

    @property
    def removed_without_feed(self) -> bool:
        """Did a row-changing operation of this transaction (DELETE, UPDATE, MERGE, an overwrite)
        change committed rows while the change data feed was off (so it recorded no change rows)?
        RESTORE and REPLACE write no change rows in Delta either: readers take their adds and
        removes, which say exactly what they changed."""
        if not self._removed_without_feed:
            return False
        whole_file = ("RESTORE", "CREATE OR REPLACE TABLE", "REPLACE TABLE", "CREATE TABLE")
        return any(op.name not in whole_file for op in self._ops)

    def staged_change_files(self) -> pa.Table | None:
        """The ``cdc`` actions staged so far (None: none)."""
        return pa.concat_tables(self._cdc) if self._cdc else None

    def replace_change_files(self, cdc: pa.Table) -> None:
        """Replace the staged ``cdc`` actions (a rebase rewrote the files they name)."""
        self._cdc = [cdc] if cdc.num_rows else []

    def stage_cdc(self, cdc: pa.Table) -> None:
        """Stage ``cdc`` actions (change data files this transaction wrote; deleted on abort)."""
        self._ensure_open()
        if cdc.num_rows:
            self._cdc.append(cdc)

    def staged_file_actions(self) -> tuple[pa.Table, pa.Table]:
        """(adds, removes) staged so far, as they would be committed."""
        return self._staged_adds(), self._staged_removes()

    def note_dv_file(self, relative: str | None) -> None:
        """A deletion-vector file this transaction wrote (deleted if it never commits)."""
        if relative:
            self._dv_files.append(relative)

    def stage_metadata(self, metadata: Metadata, *, keep_column_ids: bool = False) -> None:
        """Stage a new ``metaData``. Column mapping's rules are applied here, for every caller:
        new columns get ids and physical names, refused mode changes raise
        (``keep_column_ids``: RESTORE brings back the table's own older columns as they were)."""
        self._ensure_open()
        metadata = column_mapping.prepare_metadata(self.metadata, metadata, keep_known=keep_column_ids)
        if metadata != self.snapshot.metadata:
            from ..txnlog.schema import schema_from_json

            self._schema = schema_from_json(metadata.schema_string)
            self._metadata = metadata
            # a new column may need a feature (timestamp_ntz, variant): Delta upgrades the protocol
            # with the schema change, never below what the table has
            needed = required_protocol(dict(metadata.configuration), self._schema, current=self.protocol)
            if needed != self.protocol:
                self._protocol = needed
        else:
            self._metadata = self._schema = None
        self._check_table_rules()

    def stage_protocol(self, protocol: Protocol) -> None:
        self._ensure_open()
        self._protocol = protocol if protocol != self.snapshot.protocol else None
        self._check_table_rules()

    def _check_table_rules(self) -> None:
        """Rules some features put on every metadata/protocol change (O(1) while they are off)."""
        iceberg_compat.validate(self.metadata, self.protocol, previous=self.snapshot.metadata, schema=self._schema,
                                existing_files=self.snapshot.files.num_rows)
        if self._metadata is not None:  # a new schema or properties: the feed's and row ids' names stay free
            from .ops.change_feed import check_reserved_columns

            configuration = dict(self._metadata.configuration)
            check_reserved_columns(self.schema, configuration)
            row_tracking.check_rules(self.schema, configuration)

    def stage_domain(self, domain: DomainMetadata, *, system: bool = False) -> None:
        """Stage a ``domainMetadata`` action (the last one staged per domain wins).

        Domains named ``delta.*`` are the system's (PROTOCOL.md: writers must not let users
        change them; ``delta.rowTracking`` keeps row ids unique): only deltatx's own operations
        stage them (``system=True``). A table without the ``domainMetadata`` feature gets it in
        the same commit (writer version 7)."""
        self._ensure_open()
        if domain.domain.startswith("delta.") and not system:
            from ..errors import InvalidArgumentError

            raise InvalidArgumentError(f"domain {domain.domain!r} is a system domain (delta.*), kept by Delta "
                                       f"itself; name your own domain otherwise")
        if "domainMetadata" not in writer_features(self.protocol):
            config = {**self.metadata.configuration, "delta.feature.domainMetadata": "supported"}
            self.stage_protocol(required_protocol(config, self.schema, self.protocol))
        self._domains[domain.domain] = domain

    def stage_txn(self, app_id: str, version: int) -> None:
        self._ensure_open()
        self._txns[app_id] = Txn(app_id, int(version), int(time.time() * 1000))

    def note_operation(self, name: str, parameters: dict[str, Any] | None = None,
                       metrics: dict[str, Any] | None = None, *, changes_data: bool = True,
                       recorded_alone: bool = False) -> None:
        """Name the operation the commit records; ``recorded_alone`` commits it even when nothing
        else is staged (an empty transaction otherwise commits nothing, as Delta's do)."""
        self._ops.append(_StagedOp(name, dict(parameters or {}), dict(metrics or {}), changes_data, recorded_alone))

    # ------------------------------------------------------------------ operations (staging only)
    @_statement
    def append(self, data: Any, schema_mode: str | None = None, app_id: str | None = None,
               app_version: int | None = None) -> "CommitResult | None":
        self._ensure_open()  # before any file is written
        self._refuse_after_compaction("append")
        from .ops.write import stage_append

        return stage_append(self, data, schema_mode=schema_mode, app_id=app_id, app_version=app_version)

    @_statement
    def overwrite(self, data: Any, where: str | None = None, schema_mode: str | None = None,
                  partition_overwrite_mode: str | None = None) -> None:
        self._refuse_after_compaction("overwrite")
        from .ops.write import stage_overwrite

        stage_overwrite(self, data, where=where, schema_mode=schema_mode,
                        partition_overwrite_mode=partition_overwrite_mode)

    @_statement
    def delete(self, where: str | None = None) -> dict[str, Any]:
        self._refuse_after_compaction("delete")
        from .ops.delete import stage_delete

        return stage_delete(self, where)

    @_statement
    def update(self, where: str | None = None, set: dict[str, str] | None = None) -> dict[str, Any]:
        self._refuse_after_compaction("update")
        from .ops.update import stage_update

        return stage_update(self, where, set or {})

    def merge(self, source: Any, on: str, source_alias: str = "s", target_alias: str = "t"):
        self._refuse_after_compaction("merge")
        from .ops.merge import MergeBuilder

        return MergeBuilder(self, source, on, source_alias=source_alias, target_alias=target_alias)

    @_statement
    def optimize(self, where: str | None = None, target_size: int | None = None,
                 zorder_by: list[str] | None = None, full: bool = False, *, auto: bool = False) -> dict[str, Any]:
        """OPTIMIZE: bin-packing; on a clustered table, incremental clustering (``full`` re-clusters
        every file); with ``zorder_by``, Delta's OPTIMIZE ZORDER BY (unclustered tables only).
        ``auto`` records a bin-packing as the auto compaction it is (Delta's ``auto: true``)."""
        from ..catalog.maintenance import check_maintenance

        check_maintenance(self.store, "OPTIMIZE")  # a catalog-managed table: only where the catalog allows
        self._start_compaction("OPTIMIZE")
        from .ops.clustering import is_clustered_table, stage_cluster
        from .ops.optimize import stage_optimize
        from .ops.zorder import stage_zorder

        if zorder_by is not None:
            if full:
                from ..errors import ZOrderError

                raise ZOrderError("full=True re-clusters a clustered table; it does not go with zorder_by")
            return stage_zorder(self, zorder_by, where=where, target_size=target_size)
        if is_clustered_table(self):
            return stage_cluster(self, where=where, target_size=target_size, full=full)
        if full:
            from ..errors import ClusteringError

            raise ClusteringError("optimize(full=True) re-clusters a clustered table; this table is not clustered")
        return stage_optimize(self, where=where, target_size=target_size, auto=auto)

    @_statement
    def cluster_by(self, columns: list[str] | None) -> dict[str, Any]:
        """ALTER TABLE CLUSTER BY: set the clustering columns (None or [] = CLUSTER BY NONE).

        Upgrades the protocol to the ``clustering`` feature when the table lacks it."""
        from .ops.clustering import stage_cluster_by

        return stage_cluster_by(self, columns)

    @_statement
    def reorg(self, where: str | None = None, purge: bool = True) -> dict[str, Any]:
        """Delta's ``REORG TABLE ... APPLY (PURGE)``: rewrite every file that has a deletion
        vector (optionally only in the partitions ``where`` selects), so deleted rows are gone
        from storage too."""
        from ..catalog.maintenance import check_maintenance
        from .ops.optimize import stage_optimize

        if not purge:
            raise ValueError("reorg() only supports purge=True (REORG ... APPLY (PURGE))")
        check_maintenance(self.store, "REORG")  # a data layout change: only where a catalog allows
        self._start_compaction("REORG")
        return stage_optimize(self, where=where, purge_only=True)

    def _start_compaction(self, name: str) -> None:
        """OPTIMIZE and REORG run in a transaction of their own, as in Delta: they commit with
        ``dataChange=false``, which every concurrent writer's check relies on (a compaction
        changes no row), so neither may carry this transaction's own changes nor be followed by
        them."""
        from ..errors import UnsupportedOperationError

        if self.has_changes() and self._compaction is None:
            raise UnsupportedOperationError(
                f"{name} runs in a transaction of its own: this transaction has staged changes already "
                f"({', '.join(op.name for op in self._ops) or 'actions'}); commit them first")
        self._compaction = self._compaction or name

    def _refuse_after_compaction(self, operation: str) -> None:
        if self._compaction is not None:
            from ..errors import UnsupportedOperationError

            raise UnsupportedOperationError(
                f"{self._compaction} runs in a transaction of its own: {operation} cannot join it; "
                f"commit the {self._compaction} first, then {operation} in a new transaction")

    @_statement
    def alter_column_type(self, column: str, new_type: Any) -> dict[str, Any]:
        """Widen ``column`` to ``new_type`` (type widening; metadata only, old files read widened)."""
        from .ops.alter_type import stage_alter_column_type

        return stage_alter_column_type(self, column, new_type)

    @_statement
    def add_columns(self, fields: pa.Field | list[pa.Field]) -> dict[str, Any]:
        from .ops.columns import stage_add_columns

        return stage_add_columns(self, fields)

    @_statement
    def set_column_default(self, column: str, sql: str | None) -> dict[str, Any]:
        from .ops.columns import stage_set_column_default

        return stage_set_column_default(self, column, sql)

    @_statement
    def rename_column(self, old: str, new: str) -> dict[str, Any]:
        from .ops.columns import stage_rename_column

        return stage_rename_column(self, old, new)

    @_statement
    def drop_column(self, name: str | list[str]) -> dict[str, Any]:
        from .ops.columns import stage_drop_columns

        return stage_drop_columns(self, name)

    @_statement
    def set_properties(self, properties: dict[str, Any]) -> None:
        from .ops.properties import stage_set_properties

        stage_set_properties(self, properties)

    @_statement
    def unset_properties(self, keys: str | list[str], if_exists: bool = False) -> None:
        """ALTER TABLE UNSET TBLPROPERTIES [IF EXISTS] (keys)."""
        from .ops.properties import stage_unset_properties

        stage_unset_properties(self, keys, if_exists=if_exists)

    @_statement
    def add_constraint(self, name: str, sql: str) -> None:
        """ALTER TABLE ADD CONSTRAINT name CHECK (sql): every existing row is checked first."""
        from .ops.constraints import stage_add_constraint

        stage_add_constraint(self, name, sql)

    @_statement
    def drop_constraint(self, name: str, if_exists: bool = False) -> None:
        """ALTER TABLE DROP CONSTRAINT [IF EXISTS] name."""
        from .ops.constraints import stage_drop_constraint

        stage_drop_constraint(self, name, if_exists=if_exists)

    @_statement
    def restore(self, version: int | None = None, timestamp: Any = None) -> dict[str, Any]:
        """Bring the table back to ``version`` (or the one current at ``timestamp``)."""
        from ..txnlog.history import to_timestamp_ms
        from .ops.restore import stage_restore

        ts = to_timestamp_ms(timestamp) if timestamp is not None else None
        return stage_restore(self, version=version, timestamp_ms=ts)

    # ------------------------------------------------------------------ commit
    def stage_before_commit(self) -> None:
        """What is staged only once the transaction is complete: the change data files of
        every DML on a change-data-feed table (one set for the whole transaction). Called by
        :meth:`commit`, and by a catalog transaction for each of its tables."""
        if self.changes is not None or self._removed_without_feed:  # only DML on a feed table records changes
            from .ops.change_feed import stage_change_files

            stage_change_files(self)

    def note_change_files(self, count: int) -> None:
        """The change data files the commit carries, in the metrics of the DML that changed rows
        (Delta's names: MERGE ``numTargetChangeFilesAdded``, DELETE/UPDATE ``numAddedChangeFiles``)."""
        names = {"MERGE": "numTargetChangeFilesAdded", "DELETE": "numAddedChangeFiles",
                 "UPDATE": "numAddedChangeFiles"}
        for op in reversed(self._ops):
            if op.name in names:
                op.metrics[names[op.name]] = count
                return

    def is_own_file(self, path: str) -> bool:
        """Did this transaction write the data file ``path`` (an add path), not yet committed?"""
        return path in self._written

    def reads_anything(self) -> bool:
        """Has this transaction recorded a read (a predicate, files, the whole table, an app id)?"""
        return bool(self._predicates or self._read_paths or self._whole_table or self._app_ids)

    def has_changes(self) -> bool:
        return bool(self._adds or self._removes or self._metadata or self._protocol or self._txns or self._domains
                    or any(op.recorded_alone for op in self._ops))

    def _staged_adds(self) -> pa.Table:
        adds = [a for a in self._adds if a.num_rows]
        return pa.concat_tables(adds) if adds else empty_table(FILE_SCHEMA)

    def _staged_removes(self) -> pa.Table:
        return pa.concat_tables(self._removes) if self._removes else empty_table(REMOVE_SCHEMA)

    def _operation(self) -> tuple[str, dict[str, Any], dict[str, Any], bool]:
        if not self._ops:
            return "WRITE", {}, {}, True
        if len(self._ops) == 1:
            op = self._ops[0]
            return op.name, op.parameters, op.metrics, op.changes_data
        metrics: dict[str, Any] = {}
        for op in self._ops:
            for k, v in op.metrics.items():
                metrics[k] = metrics.get(k, 0) + v if isinstance(v, (int, float)) else v
        params = {"operations": [op.name for op in self._ops]}
        return "TRANSACTION", params, metrics, any(op.changes_data for op in self._ops)

    @property
    def read_set(self) -> ReadSet:
        """What this transaction has read so far: predicates, files, whole table, app ids."""
        read_paths = (
            frozenset(pc.unique(pa.chunked_array(self._read_paths, pa.string())).to_pylist())
            if self._read_paths else frozenset()
        )
        return ReadSet(predicates=tuple(self._predicates), files=read_paths,
                       whole_table=self._whole_table, app_ids=frozenset(self._app_ids))

    def _transaction_info(self) -> TransactionInfo:
        adds, removes = self._staged_adds(), self._staged_removes()
        read_set = self.read_set
        reads_nothing = not read_set.predicates and not read_set.files and not read_set.whole_table
        only_adds = removes.num_rows == 0
        blind = only_adds and reads_nothing and adds.num_rows > 0
        name, _, _, changes_data = self._operation()
        has_non_file = bool(self._metadata or self._protocol or self._txns or self._domains)
        # the level of the metadata this commit leaves (Delta reads it off the transaction's
        # metadata): a commit that fixes a bad delta.isolationLevel is not refused by the bad value
        level = effective_isolation_level(
            table_isolation_level(self.properties),
            adds=adds, removes=removes, has_non_file_actions=has_non_file, changes_data=changes_data,
        )
        read_hwm = row_tracking.high_watermark(self.snapshot.domains)
        domains: tuple = tuple(self._domains.values())
        protocol = self._protocol
        if row_tracking.assigns_ids(self.protocol, self.properties):
            adds, hwm = row_tracking.assign_row_ids(adds, read_hwm, read_hwm, self.read_version + 1)
            if hwm is not None:
                domains += (row_tracking.watermark_domain(hwm),)
                if "domainMetadata" not in writer_features(self.protocol):
                    # rowTracking listed without the domainMetadata it requires (deltalake's
                    # add_feature leaves it out): the watermark's domain needs it, in this commit
                    config = {**self.metadata.configuration, "delta.feature.domainMetadata": "supported"}
                    protocol = required_protocol(config, self.schema, self.protocol)
        uses_dvs = props.flag(self.properties, props.ENABLE_DELETION_VECTORS, False)
        row_level = self.row_level.state() if uses_dvs or self.row_level.files or self.row_level.compacted else None
        return TransactionInfo(
            read_version=self.read_version,
            read_set=read_set,
            read_metadata=self.snapshot.metadata,
            read_protocol=self.snapshot.protocol,
            adds=adds,
            removes=removes,
            metadata=self._metadata,
            protocol=protocol,
            domains=domains,
            txns=tuple(self._txns.values()),
            isolation_level=level,
            is_blind_append=blind,
            use_stats=props.flag(self.snapshot.properties, props.USE_STATS, True),
            operation=name,
            txn_id=self.txn_id,
            row_level=row_level,
            read_row_id_high_watermark=read_hwm,
        )

    def _commit_info(self, info: TransactionInfo) -> dict[str, Any]:
        name, params, metrics, _ = self._operation()
        if name == "TRANSACTION":  # several operations: the file counts are the commit's own (a
            # file one operation wrote and the next rewrote is in neither), not a sum over them
            metrics = {**metrics, "numAddedFiles": info.adds.num_rows, "numRemovedFiles": info.removes.num_rows}
            metrics.pop("numFiles", None)
            _commit_own_sizes(metrics, info.adds, info.removes)
        elif name == row_tracking.BACKFILL_OPERATION:  # a lost race may have dropped re-adds (checker's
            # ``backfill`` rule): count the files this commit gives ids, not the ones it staged
            params = {**params, "numFiles": info.adds.num_rows}
            metrics = {**metrics, "numSuccessfullyBackfilledFiles": info.adds.num_rows}
        ci: dict[str, Any] = {
            "timestamp": int(time.time() * 1000),
            "operation": name,
            "operationParameters": {k: _encode_parameter(v) for k, v in params.items()},
        }
        if self.read_version >= 0:
            ci["readVersion"] = self.read_version
        ci["isolationLevel"] = info.isolation_level.value
        ci["isBlindAppend"] = info.is_blind_append
        ci["operationMetrics"] = {k: str(v) for k, v in metrics.items()}
        if self.user_metadata is not None:
            ci["userMetadata"] = self.user_metadata
        ci["engineInfo"] = ENGINE_INFO
        ci["txnId"] = self.txn_id
        if info.adds.num_rows or any(op.name in _DML_OPERATIONS for op in self._ops):
            # a DML tags its commit even when it only removes files, as Delta's commands do
            # (RowTracking.addPreservedRowTrackingTagIfNotSet);
            # the snapshot this transaction read (a rebase moves info.read_* onto the winners')
            preserved = row_tracking.preserved_tag(self.snapshot.protocol, self.snapshot.metadata.configuration,
                                                   info.protocol or info.read_protocol)
            if preserved is not None:
                ci["tags"] = {row_tracking.PRESERVED_TAG: preserved}
        return ci

    def commit(self) -> CommitResult:
        """Commit the staged actions as one new version (see the module docstring)."""
        self._ensure_open()
        if self._committed_by is not None:
            raise DeltaTxError(
                f"this transaction of {self.table.uri!r} is part of {self._committed_by} and commits with "
                f"it, all tables or none: leave its `with` block or call its commit()")
        try:
            self.stage_before_commit()
            result = self._commit()
        except BaseException:
            if not self._may_have_landed:  # a committed version's files must never be deleted
                self._abort_files()
            self._state = "failed"
            raise
        self._state = "committed"
        return result

    def _winner_info(self, version: int) -> dict[str, Any]:
        """The commitInfo of the commit that took ``version`` ({} when it cannot be read)."""
        try:
            return dict(parse_commit(self.store.read_commit(version), version).commit_info or {})
        except Exception:  # only a message depends on it
            return {}

    def _landed_at(self, version: int) -> int | bool | None:
        """The version our commit landed at, looking from ``version`` on; False when it did not
        land; None when storage cannot tell us right now.

        Why on from ``version``: a catalog may ratify a blind append after plain winners, at a
        later version than the one offered (catalog/store.py), and a lost response hides which."""
        while True:
            try:
                raw = self.store.read_commit(version)
            except FileNotFoundError:
                return False
            except Exception:
                return None
            try:
                if parse_commit(raw, version).txn_id == self.txn_id:
                    return version
            except DeltaTxError:
                pass  # someone else's (corrupt) commit holds the version
            version += 1

    def _commit(self) -> CommitResult:
        info = self._transaction_info()
        name, _, metrics, _ = self._operation()
        if not self.has_changes():
            # Nothing to write: Delta skips recording empty commits.
            self._state = "committed"
            return CommitResult(version=self.read_version, operation=name, attempts=0, metrics=metrics,
                                read_version=self.read_version, isolation_level=info.isolation_level.value,
                                txn_id=self.txn_id)
        if info.removes.num_rows and props.flag(self.properties, props.APPEND_ONLY, False) \
                and pc.any(pc.fill_null(info.removes["dataChange"], True)).as_py():
            # Backstop: stage_removes refuses these first (before data files are written), unless
            # this transaction itself turned delta.appendOnly on after staging its removes.
            from ..errors import AppendOnlyError

            raise AppendOnlyError(
                f"table {self.table.uri!r} has delta.appendOnly=true; {name} would remove data. "
                f"Set delta.appendOnly=false to allow it."
            )
        store = self.store
        version = self.read_version + 1
        attempts = 0
        resolved = 0
        unread = 0  # winners a catalog ratified this commit after without our reading them
        winners: list[CommitActions] = []
        prepared = None
        prepared_for: TransactionInfo | None = None
        clock = self._clock = CommitClock(store, self.snapshot)
        self._check_not_cleaned_past(version)
        # The files written while staging are made durable before the first look at the next
        # version, not between that look and the put: an fsync there (~1–3 ms) widens the window
        # in which another writer takes the version (DV files a rebase writes are made durable
        # when the bytes that name them are encoded).
        self._make_files_durable(info)
        try:
            while True:
                attempts += 1
                stale = prepared is None or prepared_for is not info or clock.stale
                # A version already taken is lost before encoding: bytes that cannot win are
                # wasted work (with many writers, most of a commit's encodings were).
                if not (stale and store.version_taken(version)):
                    if stale:
                        # The bytes name no version: re-encode only when a rebase changed the
                        # actions (or moved the in-commit timestamp). The old bytes are closed
                        # after the new ones are prepared: a catalog's commit lock passes from
                        # one to the other.
                        previous = prepared
                        info, commit_info, payload = self._encode(info, version)
                        prepared = store.prepare_commit(payload, plain=is_plain(info),
                                                        commutes=commutes_with_plain_commits(info))
                        prepared_for = info
                        if previous is not None:
                            previous.close()
                    self.check_required_files()
                    phases.reached("attempt_commit", txn_id=self.txn_id, version=version, attempt=attempts)
                    # from here an interruption (KeyboardInterrupt, a publishing error after a
                    # catalog ratified) may hide a landed commit, whose data files must stay
                    self._may_have_landed = True
                    try:
                        landed = prepared.put(version)
                        if landed is not None and landed != version:
                            # ratified after winners that were all plain (a catalog's word): the
                            # checker passes this commit unchanged against them, unread
                            unread = landed - version
                            resolved += unread
                            version = landed
                        break
                    except VersionExistsError:
                        self._may_have_landed = False
                    except Exception:
                        # The put may have landed before the error (a lost response): look first.
                        landed = self._landed_at(version)
                        if landed is not None and landed is not False:
                            # later than offered: ratified after winners it never read, counted
                            # as the ratified-later path above counts them
                            unread = landed - version
                            resolved += unread
                            version = landed
                            break
                        if landed is False:
                            self._may_have_landed = False
                        raise  # landed None: unknown, the files stay (VACUUM can clean up)
                phases.reached("resolve_conflict", txn_id=self.txn_id, version=version, attempt=attempts)
                if attempts >= self.max_attempts:
                    winner = self._winner_info(version)
                    raise CommitRetriesExceededError(
                        f"gave up after {attempts} attempts to commit {name}; the table kept moving.",
                        version=version,
                        operation=winner.get("operation"),  # the winner's, as for every conflict
                        commit_info=winner,
                    )
                info, latest, own, checked = self._rebase_onto_winners(info, version, winners)
                resolved += checked
                if own is not None:
                    # Our own commit landed but the response was lost: it is done.
                    return self._finish(latest, attempts, info, winners, own=own, resolved=resolved)
                version = latest
                if attempts > FREE_RETRIES:
                    time.sleep(random.uniform(0, backoff_s(attempts)))
        finally:
            if prepared is not None:
                prepared.close()
        phases.reached("published", txn_id=self.txn_id, version=version, attempt=attempts)
        self._drop_unreferenced(info.adds)
        own = CommitActions(
            version=version, commit_info=commit_info, protocol=info.protocol, metadata=info.metadata,
            txns=list(info.txns), domains=list(info.domains),
        )
        own._adds, own._removes = info.adds, info.removes
        return self._finish(version, attempts, info, winners, own=own, resolved=resolved, unread=unread)

    def _check_not_cleaned_past(self, version: int) -> None:
        """Refuse to commit ``version`` when the table has moved past it and metadata cleanup has
        removed the commits in between: a put-if-absent of a removed version would succeed, and
        the commit would sit under the table's checkpoint, never read — a lost write. Checked,
        with one listing, only for a snapshot last seen as the latest before a cleanup's horizon
        (txnlog/log_cleanup.py, ``may_be_cleaned_after``): commits after a version seen since
        are too young for any cleanup. A catalog-managed table needs none: its database refuses
        a ratified version, and a winner whose bytes are gone fails the rebase."""
        snapshot = self.snapshot
        if (self.read_version < 0 or getattr(self.store, "catalog_managed", False)
                or not may_be_cleaned_after(snapshot.observed_ms, snapshot.properties)):
            return
        now = int(time.time() * 1000)
        listing = self.store.list_log(version)
        if listing and not any(f.kind == "commit" and f.version == version for f in listing):
            raise _cleaned_past(self.read_version, version, min(f.version for f in listing))
        if not listing:
            snapshot.seen_latest(now)

    def _encode(self, info: TransactionInfo, version: int | None = None
                ) -> tuple[TransactionInfo, dict[str, Any], bytes]:
        """The commit bytes for ``info`` (after writing the DVs a rebase left pending), with the
        in-commit timestamp of an attempt at ``version`` when in-commit timestamps are on.

        Shared by the single-table loop and the catalog's multi-table commit (whose catalog
        stamps the timestamps itself)."""
        info = self._write_rebased_dvs(info)
        self._make_files_durable(info)
        commit_info = self._commit_info(info)
        if version is not None and self._clock is not None:
            commit_info, metadata = self._clock.stamp(commit_info, version, info.read_metadata, info.metadata)
            if metadata is not info.metadata:
                info = info.replace(metadata=metadata)
        payload = encode_commit(
            commit_info,
            protocol=info.protocol,
            metadata=info.metadata,
            txns=info.txns,
            domains=info.domains,
            removes=info.removes,
            adds=info.adds,
            cdc=pa.concat_tables(self._cdc) if self._cdc else None,
        )
        return info, commit_info, payload

    def _rebase_onto_winners(self, info: TransactionInfo, version: int, winners: list[CommitActions]
                             ) -> tuple[TransactionInfo, int, CommitActions | None, int]:
        """Read every winner from ``version`` on, oldest first; check (pure) and rebase against each.

        Returns (rebased info, the next free version, our own commit if a lost response hid that
        it landed, how many winners were checked). Appends the winners to ``winners``. Raises the
        conflict checker's ConcurrentModificationException subclasses. Shared by the single-table
        loop and the catalog's multi-table commit (each table against its own winners)."""
        store = self.store
        latest = version
        checked = 0
        while True:
            try:
                raw = store.read_commit(latest)
            except FileNotFoundError:
                if not checked:
                    # the version this commit lost to (it is taken) has no file: metadata cleanup
                    # removed it since, with those after it. Putting it again would succeed under
                    # the table's checkpoint, unseen — and its winners cannot be checked
                    raise _cleaned_past(self.read_version, latest, None) from None
                # identity values move above the marks of the winners just adopted
                return rebase_identity(self, info), latest, None, checked
            winner = parse_commit(raw, latest)
            if winner.txn_id == self.txn_id:
                return info, latest, winner, checked
            if winner.protocol is not None:  # a winner that made the table catalog-managed, or released it
                check_path_access(winner.protocol, store, self.table.uri)
                check_catalog_still_manages(winner.protocol, store, self.table.uri)
            loaded = load_winner_rows(store, load_request(info.row_level, winner, info.adds, info.removes),
                                      self.properties)
            try:
                checked_info = check_commit(info, winner, loaded)
            except ConcurrentAppendException:
                # the winner's new files' statistics say they may hold rows this transaction's
                # predicates select: on a row-level table their rows decide (read only now, when
                # the statistics alone would fail the commit)
                added = added_rows_request(info, winner)
                if added is None:
                    raise
                loaded = dataclasses.replace(loaded, added_rows=load_added_rows(
                    store, added, self.snapshot.schema, list(info.read_metadata.partition_columns),
                    self.column_mapping))
                checked_info = check_commit(info, winner, loaded)
            info = checked_info
            if self._clock is not None:
                self._clock.observe(winner)
            winners.append(winner)
            checked += 1
            latest += 1

    def _make_files_durable(self, info: TransactionInfo) -> None:
        """The files this transaction wrote that the commit names (data, DVs, change data) reach
        stable storage before the commit can: see ``LogStore.make_files_durable``. Once per file,
        however many times a rebase re-encodes the commit."""
        wanted = [p for p in info.adds.column("path").to_pylist() if p in self._written] if self._written else []
        if self._cdc:
            wanted += pa.concat_tables(self._cdc).column("path").to_pylist()
        fresh = _decoded(pa.array(wanted, pa.string())) if wanted else []
        fresh += self._dv_files
        fresh = [p for p in fresh if p not in self._durable]
        if fresh:
            self.store.make_files_durable(fresh)
            self._durable.update(fresh)

    def _drop_unreferenced(self, adds: pa.Table) -> None:
        """After the commit landed: delete what this transaction wrote that a rebase dropped (a
        compaction output whose rows were moved already, a superseded DV file). Best effort."""
        from ..io.deletion_vectors import dv_file_relative_path

        committed = set(adds.column("path").to_pylist())
        stale = sorted(self._written - committed)
        used = {dv_file_relative_path(d["pathOrInlineDv"]) for d in adds.column("deletionVector").to_pylist()
                if d is not None and d["storageType"] == "u"}
        stale_dvs = [f for f in self._dv_files if f not in used]
        try:
            if stale:
                self.store.delete_files(_decoded(pa.array(stale, pa.string())))
            if stale_dvs:
                self.store.delete_files(stale_dvs)
        except OSError:
            pass  # an orphan is harmless: VACUUM removes it after the retention period

    def _write_rebased_dvs(self, info: TransactionInfo) -> TransactionInfo:
        """Write the DVs a row-level rebase left as bitmaps; the commit then names them."""
        if info.row_level is None or not info.row_level.pending:
            return info
        adds, state, written = write_pending_dvs(self.store, info.adds, info.row_level,
                                                 props.dv_inline_max_bytes(self.properties))
        self.note_dv_file(written)
        return info.replace(adds=adds, row_level=state)

    def _finish(self, version: int, attempts: int, info: TransactionInfo, winners: list[CommitActions],
                own: CommitActions, resolved: int, unread: int = 0) -> CommitResult:
        name, _, metrics, _ = self._operation()
        if self.read_version + len(winners) == version - 1:
            self.table._after_commit(self.snapshot.apply(*winners, own))
        elif unread:  # landed after plain winners it never read: the table catches up when next asked
            self.table._after_commit_behind(self.snapshot.apply(*winners), version)
        else:  # winners we did not read (lost-response path): read what is there
            self.table._after_commit(self.snapshot.apply(*winners).refresh(self.store))
        return CommitResult(version=version, operation=name, attempts=attempts, metrics=metrics,
                            read_version=self.read_version, isolation_level=info.isolation_level.value,
                            txn_id=self.txn_id, conflicts_resolved=resolved)

    # ------------------------------------------------------------------ lifecycle
    def abort(self) -> None:
        """Drop everything staged and delete the data files this transaction wrote."""
        if self._state == "open":
            self._abort_files()
            self._state = "aborted"

    def _abort_files(self) -> None:
        """Delete what this transaction wrote: its new data files and DV files, never a re-added
        committed file."""
        if self._written:
            self.store.delete_files(_decoded(pa.array(sorted(self._written), pa.string())))
        if self._dv_files:
            self.store.delete_files(list(self._dv_files))
        if self._cdc:
            self.store.delete_files(_decoded(pa.concat_tables(self._cdc)["path"]))

    def _ensure_open(self) -> None:
        if self._state != "open":
            raise DeltaTxError(f"this transaction is {self._state}; start a new one with table.transaction()")
        if self._failed is not None:
            self.abort()
            raise TransactionFailedError(
                f"a statement of this transaction failed after staging part of its changes ({self._failed}); "
                f"the transaction cannot commit without the rest of that statement, so it was aborted and "
                f"committed nothing (its new files are deleted). Run it again in a new transaction")

    # ------------------------------------------------------------------ statements
    def run_statement(self, stage: Callable[[], T]) -> T:
        """Run one statement (DELETE, MERGE, ALTER...) of this transaction: all of it or none.

        A statement stages in steps (a DELETE's removes, then its rewritten rows, whose
        constraint check may refuse them), so one that fails may leave part of its changes
        staged. A caller who catches that error inside ``with table.transaction()`` would
        otherwise commit the removes without the rows that replace them. A failure that staged
        nothing leaves the transaction as it was (a misspelt predicate can be retried); one that
        staged something marks it failed: using or committing it again aborts it
        (:class:`TransactionFailedError`), as a failed statement aborts an SQL transaction."""
        self._ensure_open()
        before = self._staged_marker()
        try:
            return stage()
        except BaseException as exc:
            if self._state == "open" and self._staged_marker() != before:
                self._failed = f"{type(exc).__name__}: {exc}"
            raise

    def _staged_marker(self) -> tuple:
        """What changes whenever anything is staged (compared before and after a statement)."""
        changes = self.changes
        return (len(self._adds), len(self._removes), len(self._files_staged), len(self._ops), len(self._written),
                len(self._dv_files), len(self._cdc), len(self._must_exist), id(self._metadata), id(self._protocol),
                len(self._domains), len(self._txns), self._removed_without_feed, self._compaction,
                id(changes), len(changes.rows) if changes is not None else 0, self.row_level.changes_recorded,
                len(self.row_level.compaction_outputs))


def _decoded(paths: pa.Array | pa.ChunkedArray) -> list[str]:
    from ..io.paths import decode_path

    return [decode_path(p) for p in paths.to_pylist()]
