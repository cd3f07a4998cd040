"""delta-spark's ``DeltaTable`` API by the same names, on deltatx: ``from deltatx.spark import DeltaTable``.

Code written for ``delta.tables.DeltaTable`` runs unchanged on path tables::

    dt = DeltaTable.forPath(spark, "/data/events")
    dt.delete("day < '2024-01-01'")
    dt.update(col("status") == "clck", {"status": lit("click")})
    (dt.alias("t").merge(updates.alias("s"), "t.id = s.id")
       .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    dt.history(1).select("operation", "operationMetrics").show()
    dt.optimize().where("day = '2024-01-01'").executeCompaction()

Where the work is done:

- DELETE / UPDATE / MERGE are :class:`~deltatx.spark.dml.SparkTable` (executors rewrite files,
  the driver commits once through the core transaction): this class only checks arguments as
  delta-spark does and turns Columns into SQL text (:mod:`deltatx.spark.delta_args`).
- ``toDF()`` is :func:`deltatx.spark.read` (Spark's own Parquet reader where it can).
- history, detail, vacuum, OPTIMIZE, RESTORE, protocol upgrades, CONVERT TO DELTA and
  CREATE / REPLACE are core operations on the driver; their results come back as delta-spark's
  DataFrames (:mod:`deltatx.spark.delta_frames`).

Not supported, each with :class:`UnsupportedOperationError`: catalog names (``forName`` other
than ``delta.`<path>```, ``tableName``), Hadoop configuration maps (pass ``storage_options=``),
``generate`` (symlink manifests), ``clone*``, ``dropFeatureSupport``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import deque
from typing import Any

from ..errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    TableAlreadyExistsError,
    TimeTravelError,
    UnsupportedOperationError,
)
from ..tables.convert import convert_to_delta
from ..tables.ops.upgrade_protocol import stage_upgrade_protocol
from ..tables.table import Table
from ..txnlog.store import open_store
from .conf import USER_METADATA, session_value
from .delta_args import (
    ColumnScope,
    check_condition,
    check_mapping,
    check_str,
    dataframe_alias,
    unaliased_column,
    unaliased_sql,
)
from .delta_builder import CREATE, CREATE_IF_NOT_EXISTS, CREATE_OR_REPLACE, REPLACE, DeltaTableBuilder, path_identifier
from .delta_frames import delete_frame, detail_frame, history_frame, restore_frame, update_frame
from .delta_merge import DeltaMergeBuilder
from .delta_optimize import DeltaOptimizeBuilder
from .dml import SparkTable
from .spark_errors import raises_spark_errors

#: delta-spark's switch for the VACUUM retention check (``false`` allows short retentions)
RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
#: delta-spark's switch for VACUUM START / VACUUM END commits (on unless set to false here: every
#: deltatx commit is a put-if-absent, so it is safe on every store)
VACUUM_LOGGING_CONF = "spark.databricks.delta.vacuum.logging.enabled"

#: MERGE aliases for a side the user did not alias (its columns are then named unqualified)
#: toDF() results kept per table for resolving Columns bound to them
_KEPT_FRAMES = 8
_DEFAULT_SOURCE_ALIASES, _DEFAULT_TARGET_ALIASES = ("source", "src"), ("target", "tgt")


def _merge_aliases(source_alias: str | None, target_alias: str | None) -> tuple[str, str]:
    """The user's aliases, and for a side without one a default that differs from the other side's."""
    if source_alias is None:
        taken = (target_alias or "").lower()
        source_alias = next(a for a in _DEFAULT_SOURCE_ALIASES if a != taken)
    if target_alias is None:
        target_alias = next(a for a in _DEFAULT_TARGET_ALIASES if a != source_alias.lower())
    return source_alias, target_alias


def _active_session(spark: Any) -> Any:
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is None:
        raise InvalidArgumentError("no active SparkSession: create one, or pass it")
    return active


@raises_spark_errors
class DeltaTable:
    """A Delta table at a path, with delta-spark's methods (see the module docstring).

    Like the :class:`SparkTable` it wraps, one DeltaTable serves one thread at a time; threads
    of one driver each open their own (``DeltaTable.forPath``).
    """

    def __init__(self, spark: Any, spark_table: SparkTable, alias: str | None = None,
                 frames: "deque[Any] | None" = None):
        self._spark = spark
        self._spark_table = spark_table
        self._alias = alias
        #: the DataFrames toDF() returned lately (shared with this table's aliases): Columns bound
        #: to them (``dt.toDF().id == updates.id``) are resolved against them, as in delta-spark
        self._frames: deque[Any] = deque(maxlen=_KEPT_FRAMES) if frames is None else frames

    def __repr__(self) -> str:
        return f"deltatx.spark.DeltaTable({self._spark_table.uri!r})"

    # ------------------------------------------------------------------ opening
    @classmethod
    def forPath(cls, sparkSession: Any, path: str, hadoopConf: dict[str, str] | None = None, *,  # noqa: N802,N803
                storage_options: dict[str, Any] | None = None) -> "DeltaTable":
        """The table at ``path`` (``TableNotFoundError`` if there is none).

        ``hadoopConf`` (Hadoop filesystem settings) has no meaning here: object-store settings
        are deltatx's ``storage_options=`` (e.g. ``{"aws_region": ...}``).
        """
        if hadoopConf:
            raise UnsupportedOperationError(
                f"hadoopConf {sorted(hadoopConf)} is Hadoop filesystem configuration, which deltatx does not "
                f"use; pass object-store settings as storage_options={{...}}"
            )
        check_str(path, "Path")
        return cls(sparkSession, SparkTable(sparkSession, path, storage_options))

    @classmethod
    def forName(cls, sparkSession: Any, tableOrViewName: str) -> "DeltaTable":  # noqa: N802,N803
        """Only ``delta.`<path>```: deltatx tables have no catalog names."""
        check_str(tableOrViewName, "Table name")
        path = path_identifier(tableOrViewName, "delta")
        if path is None:
            raise UnsupportedOperationError(
                f"forName({tableOrViewName!r}): deltatx tables are path tables without a catalog; use "
                f"DeltaTable.forPath(spark, '<path>') or forName(spark, 'delta.`<path>`')"
            )
        return cls.forPath(sparkSession, path)

    @classmethod
    def isDeltaTable(cls, sparkSession: Any, identifier: str) -> bool:  # noqa: N802,N803
        """Whether ``identifier`` (a path) is the root of a Delta table."""
        check_str(identifier, "Path")
        return open_store(identifier).table_exists()

    @classmethod
    def convertToDelta(cls, sparkSession: Any, identifier: str, partitionSchema: Any = None,  # noqa: N802,N803
                       collectStats: bool = True) -> "DeltaTable":  # noqa: N803
        """Make the Parquet folder ``parquet.`<path>``` a Delta table in place (one commit, files kept).

        ``partitionSchema`` (a DDL string ``"day date, hour int"`` or a StructType) names the
        ``col=value`` folders. A folder that already is a Delta table is left as it is, with a
        warning, and returned (delta-spark's behaviour).

        ``collectStats`` (delta-spark 3.x) is accepted and checked, but both values do the same:
        delta-spark's ``collectStats=False`` skips a Spark job that reads every file for
        statistics, while deltatx takes the statistics from the Parquet footers it reads anyway
        for the schema, so there is nothing to save; stats only make later reads skip files.
        """
        import warnings

        if type(collectStats) is not bool:
            raise ArgumentTypeError(f"collectStats must be bool. Found {collectStats} with type {type(collectStats)}")
        check_str(identifier, "Identifier")
        path = path_identifier(identifier, "parquet")
        if path is None:
            delta_path = path_identifier(identifier, "delta")
            if delta_path is not None and open_store(delta_path).table_exists():
                path = delta_path
            else:
                raise UnsupportedOperationError(
                    f"CONVERT TO DELTA only supports Parquet folders named as parquet.`<path>`, not {identifier!r}"
                )
        try:
            convert_to_delta(path, _partition_schema(partitionSchema))
        except TableAlreadyExistsError:
            warnings.warn(f"The table you are trying to convert is already a delta table: {path}", UserWarning,
                          stacklevel=2)
        return cls.forPath(sparkSession, path)

    @classmethod
    def create(cls, sparkSession: Any = None) -> DeltaTableBuilder:
        """A builder that creates a table, failing if one exists (SQL ``CREATE TABLE``)."""
        return DeltaTableBuilder(_active_session(sparkSession), CREATE)

    @classmethod
    def createIfNotExists(cls, sparkSession: Any = None) -> DeltaTableBuilder:  # noqa: N802,N803
        """A builder that creates a table unless one exists (then it is left untouched)."""
        return DeltaTableBuilder(_active_session(sparkSession), CREATE_IF_NOT_EXISTS)

    @classmethod
    def replace(cls, sparkSession: Any = None) -> DeltaTableBuilder:  # noqa: N803
        """A builder that replaces an existing table (``TableNotFoundError`` if there is none)."""
        return DeltaTableBuilder(_active_session(sparkSession), REPLACE)

    @classmethod
    def createOrReplace(cls, sparkSession: Any = None) -> DeltaTableBuilder:  # noqa: N802,N803
        """A builder that replaces the table, or creates it."""
        return DeltaTableBuilder(_active_session(sparkSession), CREATE_OR_REPLACE)

    # ------------------------------------------------------------------ state
    @property
    def table(self) -> Table:
        """The core :class:`deltatx.Table` (latest version as of the last call)."""
        return self._spark_table.table

    def _latest(self) -> Table:
        return self._spark_table.table.refresh()

    def toDF(self) -> Any:  # noqa: N802
        """The table's latest version as a DataFrame (aliased if this DeltaTable is)."""
        from . import read

        options = {f"storage.{k}": v for k, v in self._spark_table.storage_options.items()}
        df = read(self._spark, self._spark_table.uri, **options)
        df = df.alias(self._alias) if self._alias else df
        self._frames.append(df)
        return df

    def alias(self, aliasName: str) -> "DeltaTable":  # noqa: N803
        """This table under an alias (for ``toDF()`` and the conditions of DELETE/UPDATE/MERGE)."""
        return DeltaTable(self._spark, self._spark_table, check_str(aliasName, "Alias"), self._frames)

    def history(self, limit: int | None = None) -> Any:
        """DESCRIBE HISTORY, newest first: delta-spark's columns, null where deltatx has no value."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise InvalidArgumentError(f"limit needs to be an int but got '{type(limit)}'.")
        return history_frame(self._spark, self._latest().history(limit))

    def detail(self) -> Any:
        """DESCRIBE DETAIL: one row (format, id, location, sizes, properties, protocol, ...)."""
        return detail_frame(self._spark, self._latest())

    # ------------------------------------------------------------------ DML (Spark jobs)
    def _scope(self) -> ColumnScope:
        return ColumnScope(self._spark, self._latest().schema, self._alias, table_frames=self._frames)

    def _condition_sql(self, condition: Any, scope: ColumnScope) -> str | None:
        if condition is None:
            return None
        return unaliased_sql(scope.sql(condition), self._alias)

    def _user_metadata(self) -> str | None:
        """delta-spark tags every commit of a session with this conf's value (when set)."""
        return session_value(self._spark, USER_METADATA)

    def delete(self, condition: Any = None) -> Any:
        """Delete the rows where ``condition`` (SQL string or Column) holds; every row without one."""
        from . import activate

        condition = check_condition(condition)
        activate(self._spark)
        sql = self._condition_sql(condition, self._scope())
        return delete_frame(self._spark, self._spark_table.delete(sql, user_metadata=self._user_metadata()))

    def update(self, condition: Any = None, set: Any = None) -> Any:  # noqa: A002
        """Set columns (``{"col": "SQL" or Column}``) on the rows where ``condition`` holds."""
        from . import activate

        mapping = check_mapping(set, "'set'")
        condition = check_condition(condition)
        activate(self._spark)
        scope = self._scope()
        assignments = {unaliased_column(k, self._alias): unaliased_sql(scope.sql(v), self._alias)
                       for k, v in mapping.items()}
        sql = self._condition_sql(condition, scope)
        return update_frame(self._spark, self._spark_table.update(sql, assignments,
                                                                  user_metadata=self._user_metadata()))

    def merge(self, source: Any, condition: Any) -> DeltaMergeBuilder:
        """MERGE ``source`` (a DataFrame, optionally ``.alias()``-ed) into this table ON ``condition``."""
        from pyspark.sql import DataFrame

        if source is None:
            raise InvalidArgumentError("'source' in merge cannot be None")
        if not isinstance(source, DataFrame):
            raise ArgumentTypeError(f"Type of 'source' in merge must be DataFrame, not {type(source)}.")
        if condition is None:
            raise InvalidArgumentError("'condition' in merge cannot be None")
        condition = check_condition(condition)
        source_alias, target_alias = _merge_aliases(dataframe_alias(source), self._alias)
        scope = ColumnScope(self._spark, self._latest().schema, target_alias, source, source_alias,
                            table_frames=self._frames)
        builder = self._spark_table.merge(source, scope.sql(condition), source_alias=source_alias,
                                          target_alias=target_alias)
        return DeltaMergeBuilder(self._spark, builder, scope)

    # ------------------------------------------------------------------ maintenance (driver)
    def vacuum(self, retentionHours: float | None = None) -> Any:  # noqa: N803
        """Delete files no version within the retention needs; an empty DataFrame, as delta-spark.

        A retention below ``delta.deletedFileRetentionDuration`` is refused unless the session
        sets ``spark.databricks.delta.retentionDurationCheck.enabled=false``.
        """
        from pyspark.sql.types import StructType

        if retentionHours is not None and (isinstance(retentionHours, bool)
                                           or not isinstance(retentionHours, (int, float))):
            raise InvalidArgumentError(f"retentionHours needs to be a number but got '{type(retentionHours)}'.")
        check = str(self._spark.conf.get(RETENTION_CHECK_CONF, "true")).strip().lower() != "false"
        record = str(self._spark.conf.get(VACUUM_LOGGING_CONF, "true")).strip().lower() != "false"
        self._latest().vacuum(retention_hours=float(retentionHours) if retentionHours is not None else None,
                              enforce_retention_duration=check, record=record)
        return self._spark.createDataFrame([], StructType([]))

    def optimize(self) -> DeltaOptimizeBuilder:
        """An OPTIMIZE builder: ``.where(partition filter)`` then ``.executeCompaction()``."""
        return DeltaOptimizeBuilder(self._spark, self._latest(), user_metadata=self._user_metadata())

    def restoreToVersion(self, version: int) -> Any:  # noqa: N802
        """Restore the table to ``version`` (one new commit); delta-spark's metrics DataFrame."""
        if isinstance(version, bool) or not isinstance(version, int):
            raise InvalidArgumentError(f"version needs to be an int but got '{type(version)}'.")
        return restore_frame(self._spark, self._latest()._run(
            self._user_metadata(), lambda tx: tx.restore(version=version)))

    def restoreToTimestamp(self, timestamp: str) -> Any:  # noqa: N802
        """Restore to the version current at ``timestamp`` (``yyyy-MM-dd[ HH:mm:ss[.ffffff]]``, in the
        session time zone unless it carries an offset)."""
        if not isinstance(timestamp, str):
            raise InvalidArgumentError(f"timestamp needs to be a string but got '{type(timestamp)}'.")
        when = _session_timestamp(self._spark, timestamp)
        # refuses a timestamp after the last commit; Table.restore as one transaction, tagged
        return restore_frame(self._spark, self._latest()._run(
            self._user_metadata(), lambda tx: tx.restore(timestamp=when)))

    def upgradeTableProtocol(self, readerVersion: int, writerVersion: int) -> None:  # noqa: N802,N803
        """Raise the protocol to (readerVersion, writerVersion); lowering it is refused."""
        table = self._latest()
        tx = table.transaction(user_metadata=self._user_metadata())
        try:
            stage_upgrade_protocol(tx, readerVersion, writerVersion)
            tx.commit()
        except BaseException:
            tx.abort()
            raise

    def addFeatureSupport(self, featureName: str) -> None:  # noqa: N802,N803
        """List table feature ``featureName`` in the protocol (``delta.feature.<name> = supported``)."""
        check_str(featureName, "Feature name")
        self._latest().set_properties({f"delta.feature.{featureName}": "supported"})

    # ------------------------------------------------------------------ not supported
    def generate(self, mode: str) -> None:
        raise UnsupportedOperationError(f"generate({mode!r}): deltatx writes no symlink manifests")

    def dropFeatureSupport(self, featureName: str, truncateHistory: bool | None = None) -> None:  # noqa: N802,N803
        raise UnsupportedOperationError("dropFeatureSupport: deltatx does not drop table features")

    def clone(self, *args: Any, **kwargs: Any) -> "DeltaTable":
        raise UnsupportedOperationError("clone: deltatx does not clone tables (shallow clones need catalog tables)")

    def cloneAtVersion(self, *args: Any, **kwargs: Any) -> "DeltaTable":  # noqa: N802
        raise UnsupportedOperationError("cloneAtVersion: deltatx does not clone tables")

    def cloneAtTimestamp(self, *args: Any, **kwargs: Any) -> "DeltaTable":  # noqa: N802
        raise UnsupportedOperationError("cloneAtTimestamp: deltatx does not clone tables")


def _partition_schema(value: Any) -> Any:
    """``convertToDelta``'s partitionSchema (DDL string or StructType) as an Arrow schema."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    from .options import spark_schema_to_arrow

    if value is None:
        return None
    if isinstance(value, str):
        parsed = _parse_datatype_string(value)
        value = parsed if isinstance(parsed, StructType) else None
    if not isinstance(value, StructType):
        raise ArgumentTypeError(f"partitionSchema must be a DDL string ('day date, hour int') or a StructType, "
                          f"got {value!r}")
    return spark_schema_to_arrow(value)


_OFFSET = re.compile(r"^(?:UTC|GMT)?([+-])(\d{1,2}):?(\d{2})?$")


def _session_timezone(spark: Any) -> dt.tzinfo:
    name = str(spark.conf.get("spark.sql.session.timeZone", "UTC")).strip()
    m = _OFFSET.match(name)
    if m:
        minutes = int(m.group(2)) * 60 + int(m.group(3) or 0)
        return dt.timezone(dt.timedelta(minutes=minutes if m.group(1) == "+" else -minutes))
    if name.upper() in ("UTC", "Z", "GMT"):
        return dt.timezone.utc
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def _session_timestamp(spark: Any, text: str) -> dt.datetime:
    """``yyyy-MM-dd[ HH:mm:ss[.f]]`` as Spark casts it: in the session time zone unless it has an offset."""
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise TimeTravelError(f"The provided timestamp ('{text}') cannot be converted to a valid timestamp.") \
            from None
    return when if when.tzinfo is not None else when.replace(tzinfo=_session_timezone(spark))
