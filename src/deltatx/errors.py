"""Every exception a deltatx user can hit, in one place.

Why one module: callers write ``except deltatx.errors.X`` and should not need to know which
layer raised it. Each class says what went wrong *and* what the user can do about it; the
concurrency classes mirror Delta's names (``io.delta.exceptions.*``) so that code and runbooks
written for Delta carry over.

Hierarchy::

    DeltaTxError
    ├── TableNotFoundError, TableAlreadyExistsError
    ├── InvalidTableError
    │   ├── CorruptLogError            (bad JSON line, missing required field, version gap)
    │   ├── CorruptCheckpointError
    │   └── CorruptDeletionVectorError (a DV that does not decode or does not add up)
    │       └── MissingDeletionVectorError (its DV file is gone; also a FileNotFoundError)
    ├── UnsupportedFeatureError        (reader or writer feature we do not implement)
    ├── InvalidPropertyError           (bad table property value)
    ├── SchemaMismatchError            (append/overwrite data does not fit the table)
    │   └── TypeChangeError            (a column type change type widening does not allow)
    │   └── ColumnMappingError         (rename/drop without column mapping, a refused mode change)
    ├── PredicateError                 (SQL predicate we cannot parse or evaluate)
    ├── DataFileNotFoundError          (a file the log references is gone)
    ├── ReplaceWhereViolationError     (overwrite rows outside the replaceWhere predicate)
    ├── MergeCardinalityError          (several source rows match one target row)
    ├── UnsafeStorageError             (store without put-if-absent, no single-writer opt-in)
    ├── TimeTravelError                (version/timestamp outside the log)
    ├── VacuumRetentionError
    ├── AppendOnlyError
    ├── ProtectedHistoryError          (checkpointProtection forbids a checkpoint of an old version)
    ├── ClusteringError                (CLUSTER BY a table or columns that cannot be clustered)
    │   └── ZOrderError                (OPTIMIZE ZORDER BY on a clustered table or bad columns)
    ├── UnsupportedOperationError      (a Delta API call deltatx does not implement)
    ├── TransactionFailedError         (a statement failed after staging part of its changes)
    ├── InvalidArgumentError, ArgumentTypeError (also ValueError / TypeError, as delta-spark)
    ├── ProtocolDowngradeError         (upgradeTableProtocol to a lower version)
    ├── LocationNotEmptyError          (create a table over files that are not a table)
    ├── StreamingSourceError           (a streaming read cannot continue: log gone, bad offset)
    │   ├── StreamDataChangedError     (a commit removed data; skipChangeCommits / ignoreDeletes)
    │   └── StreamSchemaChangedError   (a commit changed the schema incompatibly; restart)
    ├── ChangeDataFeedError            (change feed range unreadable: feed off, out of range)
    ├── ConstraintViolationError       (rows break a CHECK constraint, invariant or generated column)
    ├── InvalidConstraintError         (bad constraint name/expression, duplicate, unknown on drop)
    ├── IdentityColumnError            (bad identity spec, explicit value for ALWAYS, overflow)
    └── ConcurrentModificationException
        ├── ConcurrentWriteException
        ├── ConcurrentAppendException
        ├── ConcurrentDeleteReadException
        ├── ConcurrentDeleteDeleteException
        ├── MetadataChangedException
        ├── ConcurrentTransactionException
        ├── ProtocolChangedException
        └── CommitRetriesExceededError
"""

from __future__ import annotations

from typing import Any


class DeltaTxError(Exception):
    """Base class of every error deltatx raises on purpose."""


class TableNotFoundError(DeltaTxError, FileNotFoundError):
    """The URI holds no Delta table (no ``_delta_log`` with a commit)."""


class TableAlreadyExistsError(DeltaTxError, FileExistsError):
    """``create_table`` found a table where it was asked to create one."""


class InvalidTableError(DeltaTxError):
    """The log exists but cannot be turned into a consistent snapshot."""


class CorruptLogError(InvalidTableError):
    """A commit file is unreadable: bad JSON, a missing required field, or a gap in versions."""

    def __init__(self, message: str, *, version: int | None = None, line: int | None = None):
        super().__init__(message)
        self.version = version
        self.line = line


class CorruptCheckpointError(InvalidTableError):
    """A checkpoint is unreadable and no older state can replace it."""


class CorruptDeletionVectorError(InvalidTableError):
    """A deletion vector cannot be decoded, or its size, checksum or cardinality do not match.

    Reading on would return rows the table has deleted, so the read stops. The message and the
    attributes say where the DV is, so the broken file can be found (and restored) without
    decoding the log: ``data_path`` is the data file whose rows it deletes; ``dv_path`` the DV
    file it is stored in (relative to the table root, or the absolute path of a ``p``
    descriptor), None for a DV inline in the log (``dv_inline``) or a descriptor that names no
    file; ``dv_offset`` where in that file it starts (DV files are shared by the DVs one commit
    wrote). All None when the raiser did not know them.
    """

    def __init__(self, message: str, *, data_path: str | None = None, dv_path: str | None = None,
                 dv_offset: int | None = None, dv_inline: bool = False):
        super().__init__(message)
        self.data_path = data_path
        self.dv_path = dv_path
        self.dv_offset = dv_offset
        self.dv_inline = dv_inline


class MissingDeletionVectorError(CorruptDeletionVectorError, FileNotFoundError):
    """A data file's deletion vector file is missing: the rows it deletes cannot be known.

    A :class:`CorruptDeletionVectorError` (the table cannot be read correctly) that is also a
    ``FileNotFoundError``, so code catching either sees it.
    """


class UnsupportedFeatureError(DeltaTxError):
    """The table needs a reader or writer feature deltatx does not implement."""

    def __init__(self, message: str, *, feature: str, kind: str):
        super().__init__(message)
        self.feature = feature
        self.kind = kind  # "reader" or "writer"


class InvalidPropertyError(DeltaTxError, ValueError):
    """A table property has a value deltatx (or Delta) does not accept."""


class SchemaMismatchError(DeltaTxError, ValueError):
    """Data written to a table does not match its schema."""


class MalformedVariantError(SchemaMismatchError):
    """A value written to a ``variant`` column is not the Variant binary encoding (or a JSON text
    given to ``parse_json`` is not JSON); nothing is written."""


class TypeChangeError(SchemaMismatchError):
    """``alter_column_type`` asked for a change Delta's type widening does not allow, or the table
    has not enabled it (``delta.enableTypeWidening``)."""


class ColumnMappingError(SchemaMismatchError):
    """A column operation needs column mapping, or a ``delta.columnMapping.mode`` change Delta refuses."""


class PredicateError(DeltaTxError, ValueError):
    """A SQL predicate or expression could not be parsed or bound to the table's columns."""


class DataFileNotFoundError(DeltaTxError, FileNotFoundError):
    """A data file referenced by the log is missing from storage."""


class CorruptDataFileError(InvalidTableError):
    """A data file referenced by the log is not a readable Parquet file (truncated, overwritten)."""


class ReplaceWhereViolationError(DeltaTxError, ValueError):
    """``overwrite(where=...)`` was given rows that do not satisfy the predicate."""


class MergeCardinalityError(DeltaTxError):
    """A MERGE found several source rows matching the same target row."""


class UnsafeStorageError(DeltaTxError):
    """The storage cannot do put-if-absent and single-writer mode was not chosen."""


class TimeTravelError(DeltaTxError, ValueError):
    """The requested version or timestamp is not in the table's retained history."""


class VacuumRetentionError(DeltaTxError, ValueError):
    """VACUUM was asked for a retention shorter than the table's without an explicit override."""


class AppendOnlyError(DeltaTxError):
    """The table has ``delta.appendOnly=true`` and the operation would remove data."""


class ProtectedHistoryError(DeltaTxError):
    """The table's ``checkpointProtection`` forbids touching its history before
    ``delta.requireCheckpointProtectionBeforeVersion`` (e.g. a checkpoint of an older version)."""


class ClusteringError(DeltaTxError, ValueError):
    """Liquid clustering was asked for something Delta does not allow: clustering a partitioned
    table, more than four clustering columns, a column that does not exist or gets no min/max
    statistics, or a ``where=`` on a clustered table's OPTIMIZE."""


class ZOrderError(ClusteringError):
    """``OPTIMIZE ZORDER BY`` was refused: the table is clustered (use ``optimize()``), or a column
    is a partition column, does not exist, or gets no min/max statistics."""


class ChangeDataFeedError(DeltaTxError, ValueError):
    """The change feed cannot be read for the requested range: the feed was off for a version
    (``version`` names it), the range starts after the latest version or before the retained
    log, or the bounds are invalid."""

    def __init__(self, message: str, *, version: int | None = None):
        super().__init__(message)
        self.version = version


class StreamingSourceError(DeltaTxError):
    """A streaming read of a table cannot go on from where it is (``version``: the commit at fault).

    Like Delta's streaming source, the stream fails rather than skip or repeat rows silently; the
    message says which option or restart resolves it.
    """

    def __init__(self, message: str, *, version: int | None = None):
        super().__init__(message)
        self.version = version


class StreamDataChangedError(StreamingSourceError):
    """A commit the stream reached removed data (DELETE, UPDATE, MERGE, overwrite): an append-only
    stream cannot express that. Delta's DELTA_SOURCE_TABLE_IGNORE_CHANGES / _IGNORE_DELETE."""


class StreamSchemaChangedError(StreamingSourceError):
    """A commit the stream reached changed the schema in a way the running query cannot read
    (Delta's DELTA_SCHEMA_CHANGED_WITH_VERSION); restart the query to pick up the new schema."""


class ConstraintViolationError(DeltaTxError, ValueError):
    """Rows break a rule the table imposes on every row: a CHECK constraint, a column invariant,
    or a generated column's ``(value <=> expression) IS TRUE``.

    Attributes say what to fix: ``constraint`` (its name; ``invariant(col)`` /
    ``generated(col)`` for column rules), ``expression`` (SQL), ``num_violations`` and
    ``row`` (one violating row as a dict). Nothing was written.
    """

    def __init__(self, message: str, *, constraint: str, expression: str, num_violations: int,
                 row: dict[str, Any] | None = None):
        super().__init__(message)
        self.constraint = constraint
        self.expression = expression
        self.num_violations = num_violations
        self.row = row

    def __reduce__(self):  # keep attributes across pickling (multiprocessing, Spark)
        return (_rebuild_violation, (str(self), self.constraint, self.expression, self.num_violations, self.row))


def _rebuild_violation(message, constraint, expression, num_violations, row):
    return ConstraintViolationError(message, constraint=constraint, expression=expression,
                                    num_violations=num_violations, row=row)


class InvalidConstraintError(DeltaTxError, ValueError):
    """``add_constraint``/``drop_constraint`` (or a generated column definition) was refused:
    a bad name, a name already taken or unknown, an expression that is not a condition."""


class IdentityColumnError(DeltaTxError, ValueError):
    """An identity column was misused: a bad definition (step 0, not BIGINT, partition column),
    an explicit value for a GENERATED ALWAYS column, an UPDATE of it, or value overflow."""


# --------------------------------------------------------------------------------------------
# Concurrency: the loser of a commit race that cannot be rebased safely.
# --------------------------------------------------------------------------------------------


class ConcurrentModificationException(DeltaTxError):
    """A concurrent commit made this transaction's commit unsafe.

    Attributes carry what a user needs to decide what to do: the winning ``version``, the
    winner's ``operation`` and full ``commit_info``, and the ``conflict`` (a partition hint such
    as ``part=3`` or a file path) when one is known.
    """

    #: short advice appended to every message of the class
    advice = "Retry the operation on the latest version of the table."

    def __init__(
        self,
        summary: str,
        *,
        version: int | None = None,
        operation: str | None = None,
        commit_info: dict[str, Any] | None = None,
        conflict: str | None = None,
    ):
        self.summary = summary
        self.version = version
        self.operation = operation
        self.commit_info = commit_info or {}
        self.conflict = conflict
        super().__init__(self._message())

    def _message(self) -> str:
        parts = [f"{type(self).__name__}: {self.summary}"]
        if self.version is not None:
            op = f" ({self.operation})" if self.operation else ""
            parts.append(f"Conflicting commit: version {self.version}{op}.")
        if self.conflict:
            parts.append(f"Conflict at: {self.conflict}.")
        parts.append(self.advice)
        return " ".join(parts)

    def __reduce__(self):  # keep attributes across pickling (multiprocessing, Spark)
        return (
            _rebuild_concurrent,
            (type(self), self.summary, self.version, self.operation, self.commit_info, self.conflict),
        )


def _rebuild_concurrent(cls, summary, version, operation, commit_info, conflict):
    return cls(summary, version=version, operation=operation, commit_info=commit_info, conflict=conflict)


class ConcurrentWriteException(ConcurrentModificationException):
    """A concurrent transaction wrote data this one depends on (generic form)."""


class ConcurrentAppendException(ConcurrentModificationException):
    """Files were added to a partition (or table) this transaction read."""

    advice = (
        "Files were added by a concurrent transaction to data this transaction read. Make the "
        "operation's predicate name the partitions it touches (e.g. \"part = 3 AND ...\") so that "
        "disjoint jobs do not conflict, then retry."
    )


class ConcurrentDeleteReadException(ConcurrentModificationException):
    """A file this transaction read was removed by a concurrent commit."""

    advice = (
        "A concurrent transaction removed a file this transaction read, or on a table with deletion "
        "vectors deleted rows of it this transaction read (a DELETE, UPDATE, MERGE or OPTIMIZE). Retry "
        "on the latest version; disjoint predicates avoid this."
    )


class ConcurrentDeleteDeleteException(ConcurrentModificationException):
    """A file this transaction removes was already removed by a concurrent commit."""

    advice = (
        "A concurrent transaction removed the same file (or, on a deletion-vector table, the same "
        "row) this transaction removes. Retry on the latest version; disjoint predicates avoid this."
    )


class MetadataChangedException(ConcurrentModificationException):
    """The table's metadata (schema, partitioning, properties) changed concurrently."""

    advice = "The table's metadata changed concurrently. Re-read the table and retry."


class ConcurrentTransactionException(ConcurrentModificationException):
    """A concurrent commit updated an application transaction id (or domain) this one uses."""

    advice = (
        "Another writer committed with the same application id (txnAppId) or metadata domain. "
        "Never run two instances of the same streaming query or job at once."
    )


class ProtocolChangedException(ConcurrentModificationException):
    """The table's protocol changed concurrently (upgrade, or a concurrent create)."""

    advice = "The table's protocol changed concurrently. Re-read the table and retry."


class CommitRetriesExceededError(ConcurrentModificationException):
    """The commit lost the race more times than the configured retry limit allows."""

    advice = "Raise the retry limit (table.transaction(max_attempts=...)) or reduce contention, then retry."


class SparkUnavailableError(DeltaTxError):
    """PySpark or a Java runtime it needs is not installed (``deltatx.spark`` only)."""


class NativeUnavailableError(DeltaTxError):
    """``engine="parquet"`` was asked of ``deltatx.spark.read/write`` for a table or write that
    Spark's own Parquet reader/writer cannot handle as is; the message says why."""


class UnsupportedOperationError(DeltaTxError, NotImplementedError):
    """A call of Delta's API that deltatx does not implement (e.g. catalog table names: deltatx
    tables are path tables); the message says what to use instead."""


class TransactionFailedError(DeltaTxError):
    """A statement of an explicit transaction failed after it had staged part of its changes (a
    DELETE's removes before the constraint check of its rewritten rows refused them): what it
    staged cannot be told apart from the earlier statements' changes, so the transaction can no
    longer commit. It is aborted (its new files deleted) when it is committed or used again."""


class InvalidArgumentError(DeltaTxError, ValueError):
    """An argument with a bad value (delta-spark raises ValueError for these, so does this)."""


class ArgumentTypeError(DeltaTxError, TypeError):
    """An argument of the wrong type (delta-spark raises TypeError for these, so does this)."""


class ProtocolDowngradeError(DeltaTxError, ValueError):
    """``upgradeTableProtocol`` asked for a lower reader or writer version than the table has."""


class LocationNotEmptyError(DeltaTxError, FileExistsError):
    """A table was to be created where files already are but no Delta table is: VACUUM would
    later delete those files as unreferenced. Convert them instead (``convertToDelta``)."""


class PostCommitHookWarning(UserWarning):
    """A commit succeeded but a hook after it (checkpoint, log cleanup, auto-compaction) failed."""


class LogCleanupWarning(UserWarning):
    """Metadata cleanup deleted nothing although log files are expired: it could not show them
    safe to delete (a gap in the commits it would keep, an unreadable checkpoint); says why."""


# --------------------------------------------------------------------------------------------
# Catalog-managed tables (deltatx.catalog)
# --------------------------------------------------------------------------------------------


class StorageUnavailableError(DeltaTxError, ConnectionError):
    """The object store did not answer: its endpoint refused or dropped the connection, or sent
    nothing back in time, after the client's retries (txnlog/s3_client.py)."""


class BucketNotFoundError(TableNotFoundError):
    """The object-store bucket a table's URI names does not exist (no table can be there)."""


class CatalogError(DeltaTxError):
    """Base class of the catalog's errors."""


class CatalogURLError(CatalogError, ValueError):
    """The catalog URL is malformed, names an unknown backend, or cannot be reached."""


class CatalogUnavailableError(CatalogError):
    """The catalog's database could not complete a call: its connection was lost (a server
    restart, a failover, a terminated session) or its transaction kept being rolled back
    (deadlocks, serialization failures) past :data:`deltatx.catalog.db.TRANSIENT_ATTEMPTS`.

    ``committed`` says what happened to the call's writes: False, nothing was written (calling
    again is safe; the next call reconnects); None, unknown — the connection was lost while the
    COMMIT was in flight, so look (e.g. at the table's latest version) before doing it again."""

    def __init__(self, message: str, committed: bool | None = False):
        super().__init__(message)
        self.committed = committed


class CatalogTableNotFoundError(CatalogError, KeyError):
    """No table of that name is registered in the catalog."""

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0]) if self.args else ""


class CatalogTableExistsError(CatalogError, FileExistsError):
    """A table of that name (or at that location) is registered already."""


class InvalidTableNameError(CatalogError, InvalidArgumentError):
    """A catalog table name that is empty, longer than 255 characters, has whitespace around it,
    or holds a control character (NUL included), a line or paragraph separator or an unpaired
    surrogate. Refused before the catalog's database is asked: SQLite would store such a name
    and PostgreSQL refuse it (NUL), so the two backends would disagree; a name is a key people
    type and read in one-line messages, never a path."""


class CatalogTableOwnedError(CatalogTableExistsError):
    """The table is catalog-managed by another catalog (or by one that did not say which): adopting
    it would give it two commit coordinators, each ratifying its own version N."""


class CatalogManagedPropertyError(CatalogError, InvalidPropertyError):
    """A commit (or a create) would break what catalog management requires of the table's
    properties: in-commit timestamps on, the ``catalogManaged`` feature, the managing catalog's
    identity."""


class CatalogManagedTableError(CatalogError):
    """A catalog-managed table was opened or written by path: its commits must go through the
    catalog (PROTOCOL.md, catalogManaged), so path access is refused."""


class CatalogLogAheadError(CatalogError):
    """The table's ``_delta_log`` holds published commits past the catalog's latest ratified
    version: the catalog lost ratifications (its database restored from an older backup) or a
    client wrote the log behind the catalog's back. Writing would ratify those versions again
    and overwrite their published files, which a writer must never do; readers see the catalog's
    latest version, as PROTOCOL.md has them."""

    def __init__(self, message: str, *, catalog_latest: int, published_through: int):
        super().__init__(message)
        self.catalog_latest = catalog_latest
        self.published_through = published_through


class CatalogMaintenanceError(CatalogError):
    """Maintenance (VACUUM, OPTIMIZE, log cleanup) that the catalog does not allow right now."""
