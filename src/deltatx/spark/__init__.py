"""deltatx as a Spark format: ``df.write.format("deltatx")``, ``spark.read.format("deltatx")``, streams.

delta-spark's table API by the same names is :class:`DeltaTable` (``from deltatx.spark import
DeltaTable``; :mod:`deltatx.spark.delta_table`): ``forPath``, ``delete``/``update``/``merge`` as
Spark jobs, ``history``, ``detail``, ``optimize``, ``vacuum``, ``restoreTo*``, ``convertToDelta``
and the ``create``/``replace`` builders.

Importing this module registers the ``deltatx`` format on the active SparkSession, if there is
one; :func:`register` does it for any session. No JVM jars: the format is a Python data source
(executors write and read Parquet through deltatx, the driver commits through the core
transaction, so conflicts, retries and isolation levels are the core's).

Writing (options follow Delta's names; Spark lower-cases option keys, any spelling works)::

    df.write.format("deltatx").mode("append").save(uri)
    df.write.format("deltatx").mode("overwrite").option("replaceWhere", "date = '2024-01-01'").save(uri)
    df.write.format("deltatx").option("partitionBy", "date").save(uri)   # NOT .partitionBy(): Spark
                                                                          # rejects it for Python sources
    df.write.format("deltatx").option("mergeSchema", "true").option("txnAppId", "job-1") \\
        .option("txnVersion", "7").option("userMetadata", "nightly").save(uri)
    df.write.format("deltatx").option("delta.isolationLevel", "Serializable").save(new_uri)

Always give a mode: Spark's default (ErrorIfExists) and Ignore are refused for Python sources
with UNSUPPORTED_DATA_SOURCE_SAVE_MODE, and Spark offers no hook to change that (pyspark 4.3:
``DataSource.writer(schema, overwrite: bool)`` only learns append/overwrite; the JVM side,
``PythonDataSourceV2``, implements ``TableProvider`` but not ``SupportsCatalogOptions``, and its
table declares ``BATCH_WRITE``, so ``DataFrameWriter.save`` raises for those modes before the
source is asked). :func:`write` offers ``error``/``ignore``; ``DeltaTable.create(spark)`` (delta-spark's
API, :mod:`deltatx.spark.delta_table`) creates a table explicitly.
Write options: ``replaceWhere``, ``partitionOverwriteMode`` (``dynamic``: an overwrite replaces
only the partitions the data writes to), ``partitionBy`` (comma-separated), ``mergeSchema``,
``overwriteSchema``, ``txnAppId`` + ``txnVersion`` (idempotent: skipped when already applied),
``userMetadata``, ``maxRecordsPerFile``, ``delta.*``/``deltatx.*`` table properties (used when the
write creates the table), ``storage.<key>`` storage options. Delta options deltatx does not
implement and that would change the write (``replaceOn``, ``replaceUsing``, ``dataChange=false``,
``targetAlias``, ...) are refused with ``UnsupportedOperationError``. The session confs
``spark.sql.sources.partitionOverwriteMode``, ``spark.databricks.delta.schema.autoMerge.enabled``
and ``spark.databricks.delta.commitInfo.userMetadata`` apply as in delta-spark (an option wins
over them; see :mod:`deltatx.spark.conf`). Spark only offers the modes append
and overwrite to Python sources; :func:`write` adds ``error`` and ``ignore``.

Conflicts: ``df.write...save()`` fails with Spark's ``AnalysisException`` whose message names the
deltatx exception class and the winning version. :func:`write` raises the typed exception itself
(``ConcurrentAppendException`` etc., with ``.version``) and returns the ``CommitResult``. Writing
from several Python threads works; :func:`write` and :func:`read` make the session active in the
calling thread before they use the format (without that Spark cannot find the format from a new
thread; Spark's own Parquet reader and writer are asked through the session itself).

Reading::

    spark.read.format("deltatx").load(uri)                       # latest version
    spark.read.format("deltatx").option("versionAsOf", 3).load(uri)
    spark.read.format("deltatx").option("timestampAsOf", "2024-05-01T00:00:00Z").load(uri)
    spark.read.format("deltatx").option("columns", "id,value").load(uri)   # read fewer columns
    deltatx.spark.read(spark, uri, version=3)    # Spark's own Parquet reader when it can (below)

A DataFrame (or view) reads the version current at ``load()`` in all its queries: load again to
see later commits. Spark never prunes the columns of a Python source, so ``count()`` reads every
column unless the ``columns`` option (or ``.schema(...)``) names fewer.

``.option("filterPushdown", "true")`` prunes files by partition values and min/max stats from the
query's filters. It is off by default: Spark 4.3 reuses the read planned for one filtered query
of a DataFrame in its later queries that push no filter, which would return too few rows (see
``deltatx.spark.reader``). Use it with a fresh ``load()`` per query.

:func:`read` plans the snapshot in deltatx and, for tables on local files, lets Spark's own
Parquet reader read its files (column pruning, vectorized decoding, no Python workers); see
:mod:`deltatx.spark.native`. :func:`write` likewise lets Spark's Parquet writer write the files
of a plain append/overwrite and commits them through deltatx (:mod:`deltatx.spark.native_write`).
Other tables and writes go through the format; ``engine=`` chooses explicitly. (:func:`register` switches on
``spark.sql.python.filterPushdown.enabled``, without which Spark fails such reads.)

SQL users::

    CREATE TEMPORARY VIEW events USING deltatx OPTIONS (path '/data/events');
    SELECT count(*) FROM events WHERE date = '2024-01-01';
    -- CREATE OR REPLACE the view to see commits made after it was created

(``CREATE TABLE ... USING deltatx`` / ``saveAsTable`` do not work: Spark does not pass a
catalog table's location to Python sources.)

Streaming (exactly-once: each micro-batch is one commit with txn (query id, batch id))::

    df.writeStream.format("deltatx").option("checkpointLocation", ckpt).start(uri)

Streaming reads (Delta's streaming source: the table as the query starts, then each commit's
appended files; options startingVersion/startingTimestamp, maxFilesPerTrigger/maxBytesPerTrigger,
skipChangeCommits/ignoreDeletes; see :mod:`deltatx.spark.stream_source`)::

    spark.readStream.format("deltatx").option("maxFilesPerTrigger", 100).load(uri)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from ..errors import (
    DeltaTxError,
    NativeUnavailableError,
    ProtocolChangedException,
    SparkUnavailableError,
    TableAlreadyExistsError,
)

try:
    import pyspark  # noqa: F401
except ImportError as _exc:  # pragma: no cover - depends on the install
    raise SparkUnavailableError(
        "deltatx.spark needs pyspark: install deltatx with the spark extra: pip install 'deltatx[spark]'"
    ) from _exc

from ..tables.transaction import CommitResult
from .commit import read_report
from .conf import install_writer_hook, session_options
from .options import REPORT_OPTION
from .source import FORMAT_NAME, DeltaTxDataSource
from .unwrap import typed_error

__all__ = ["FORMAT_NAME", "DeltaTxDataSource", "register", "write", "read", "activate", "typed_error"]

#: modes of deltatx.spark.write that only create a table (Spark's ErrorIfExists and Ignore)
CREATE_ONLY_MODES = ("error", "errorifexists", "default", "ignore")

#: how deltatx.spark.read/write move rows: Spark's own Parquet reader/writer, or the format
ENGINES = ("auto", "parquet", "format")

#: read options the native (Spark Parquet) path honours; any other option selects the deltatx format
_NATIVE_OPTIONS = {"columns"}

#: the SQL conf a reader with filter pushdown needs (Spark fails reads of such sources without it)
FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def _session(spark: Any = None) -> Any:
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is None:
        raise DeltaTxError("no active SparkSession: create one first, or pass it: deltatx.spark.register(spark)")
    return active


def activate(spark: Any) -> None:
    """Make ``spark`` the active session of the calling thread (needed in threads, gotcha 7)."""
    jvm = getattr(spark, "_jvm", None)
    jsession = getattr(spark, "_jsparkSession", None)
    if jvm is not None and jsession is not None:
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(jsession)


def register(spark: Any = None) -> Any:
    """Register the ``deltatx`` format on ``spark`` (default: the active session); returns it."""
    spark = _session(spark)
    spark.dataSource.register(DeltaTxDataSource)
    spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    install_writer_hook()
    return spark


def _option_key(name: str) -> str:
    """Python keyword spelling -> option key: ``replace_where`` -> ``replacewhere`` (Spark is case-blind)."""
    return name if "." in name else name.replace("_", "")


def _option_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def write(df: Any, uri: str, mode: str = "append", engine: str = "auto", **options: Any) -> CommitResult | None:
    """Write ``df`` to the deltatx table at ``uri``; typed errors, and the commit's result.

    ``mode``: ``append`` | ``overwrite`` | ``error`` (``errorifexists``, ``default``: Spark's
    default mode) | ``ignore``. ``error`` and ``ignore`` may only create the table: the write is
    planned as a creation and commits version 0 exclusively, so a table that exists — already, or
    created concurrently before the commit — makes ``error`` raise ``TableAlreadyExistsError``
    and ``ignore`` return None, with nothing written either way. (``df.write.format("deltatx")``
    cannot offer these modes: Spark refuses every mode but append and overwrite for Python data
    sources before the source is asked, see the module docstring.)

    ``options`` are the write options (``replaceWhere=``, ``partitionBy=["date"]``,
    ``mergeSchema=True``, ``txnAppId=``/``txnVersion=``, ``userMetadata=``; snake_case spellings
    work too; dotted table properties via ``**{"delta.isolationLevel": "Serializable"}``). Returns
    the ``CommitResult`` (``skipped=True`` for an idempotent write already applied), or None for
    ``ignore`` on an existing table. Raises the deltatx exception of the failure (e.g.
    ``ConcurrentAppendException`` with ``.version`` = the winning commit) instead of Spark's
    generic error.

    ``engine``: ``"auto"`` (default) lets Spark's own Parquet writer write the files when the
    write allows it (local table, no replaceWhere; see :mod:`deltatx.spark.native_write`) and
    commits them through deltatx, otherwise uses ``format("deltatx")``; ``"parquet"`` insists
    (``NativeUnavailableError`` says why not); ``"format"`` always uses the format. Both plan the
    write (and capture its read version) before the job runs, and commit once.
    """
    if engine not in ENGINES:
        raise DeltaTxError(f"engine must be one of {ENGINES}, not {engine!r}")
    mode = mode.lower()
    raw = {_option_key(k): _option_value(v) for k, v in options.items()}
    raw.update(session_options(df.sparkSession))  # delta-spark's session confs; options still win
    if mode not in CREATE_ONLY_MODES:
        if mode not in ("append", "overwrite"):
            raise DeltaTxError(f"mode must be append, overwrite, error, errorifexists or ignore, not {mode!r}")
        return _write(df, uri, mode, engine, raw)
    from ..txnlog.store import open_store
    from .options import CREATE_ONLY_OPTION, lower_keys, storage_options

    try:
        if open_store(uri, storage_options(lower_keys(raw))).table_exists():  # the cheap answer first
            raise TableAlreadyExistsError(f"a Delta table already exists at {uri!r} (mode {mode!r})")
        return _write(df, uri, "append", engine, {**raw, CREATE_ONLY_OPTION: "true"})
    except (TableAlreadyExistsError, ProtocolChangedException) as exc:
        # ProtocolChangedException: a planned creation lost the race to create version 0
        if mode == "ignore":
            return None
        if isinstance(exc, TableAlreadyExistsError):
            raise
        raise TableAlreadyExistsError(f"a Delta table was created at {uri!r} while this write (mode {mode!r}) "
                                      f"ran; nothing was written") from exc


def _write(df: Any, uri: str, mode: str, engine: str, raw: dict[str, str]) -> CommitResult | None:
    """An append or overwrite with string options: Spark's Parquet writer, or the format."""
    if engine != "format":
        from .native_write import native_write, unavailable_reason
        from .options import spark_schema_to_arrow
        from .writer import plan_write

        plan = plan_write({**raw, "path": uri}, df.schema, mode == "overwrite")
        reason = unavailable_reason(plan, spark_schema_to_arrow(df.schema))
        if reason is None:
            return native_write(df, plan)
        if engine == "parquet":
            raise NativeUnavailableError(f"Spark's Parquet writer cannot do this write directly: {reason}")
    # a Python source is found through the calling thread's active session; the native path names
    # its session itself and skips this Py4J round trip (P8 times whole writes)
    activate(df.sparkSession)
    report_dir = tempfile.mkdtemp(prefix="deltatx-spark-write-")
    report_path = os.path.join(report_dir, "outcome.pickle")
    try:
        writer = df.write.format(FORMAT_NAME).mode(mode)
        for key, value in raw.items():
            writer = writer.option(key, value)
        writer = writer.option(REPORT_OPTION, report_path)
        try:
            writer.save(uri)
        except Exception as exc:
            outcome = read_report(report_path)
            typed = outcome if isinstance(outcome, BaseException) else typed_error(exc)
            if typed is None:
                raise
            raise typed from exc
        outcome = read_report(report_path)
        return outcome if isinstance(outcome, CommitResult) else None
    finally:
        shutil.rmtree(report_dir, ignore_errors=True)


def read(spark: Any, uri: str, version: int | None = None, timestamp: Any = None, engine: str = "auto",
         **options: Any) -> Any:
    """The table at ``uri`` (optionally at a version or timestamp) as a DataFrame.

    ``engine``:

    - ``"auto"`` (default): Spark's own Parquet reader over the snapshot's files when the table
      allows it (local files; see :mod:`deltatx.spark.native`) and only ``columns`` is given;
      otherwise the ``deltatx`` format. Native reads prune columns and run vectorized: the P8
      benchmark measures both.
    - ``"parquet"``: insist on the native reader (``NativeUnavailableError`` says why not).
    - ``"format"``: always ``spark.read.format("deltatx")``.

    Both read one consistent snapshot, pinned now. ``options`` are the format's read options
    (``filterPushdown=True``, ``columns=["id"]``, ``maxPartitionBytes``, ``minPartitions``,
    ``openCostInBytes``, ``storage.<key>``). Errors found while resolving the table
    (``TableNotFoundError``, ``TimeTravelError``) are raised typed.
    """
    if engine not in ENGINES:
        raise DeltaTxError(f"engine must be one of {ENGINES}, not {engine!r}")
    raw = {_option_key(k): _option_value(v) for k, v in options.items()}
    if version is not None:
        raw["versionAsOf"] = str(int(version))
    if timestamp is not None:
        raw["timestampAsOf"] = timestamp.isoformat() if hasattr(timestamp, "isoformat") else str(timestamp)
    if engine != "format" and (engine == "parquet" or set(options) <= _NATIVE_OPTIONS):
        from .native import native_dataframe
        from .options import read_spec
        from .reader import open_table

        spec = read_spec({"path": uri, **raw})
        try:
            return native_dataframe(spark, open_table(spec), spec.columns)
        except NativeUnavailableError:
            if engine == "parquet":
                raise
    activate(spark)  # as for writes: only the format needs the session active in this thread
    reader = spark.read.format(FORMAT_NAME)
    for key, value in raw.items():
        reader = reader.option(key, value)
    try:
        return reader.load(uri)
    except Exception as exc:  # e.g. TableNotFoundError, TimeTravelError from the schema lookup
        typed = typed_error(exc)
        if typed is None:
            raise
        raise typed from exc


def _register_on_import() -> None:
    from pyspark.sql import SparkSession

    install_writer_hook()  # session confs reach df.write.format("deltatx") (see deltatx.spark.conf)

    active = SparkSession.getActiveSession()
    if active is not None:
        register(active)


_register_on_import()

# ---- Spark-distributed DML lives in dml.py (written separately); exported here once it exists ----
try:
    from .dml import SparkTable  # noqa: F401

    __all__.append("SparkTable")
except ModuleNotFoundError as _missing:
    if _missing.name != f"{__name__}.dml":
        raise

# ---- delta-spark's DeltaTable API by the same names (delta_table.py and its builders) ----
from .delta_builder import DeltaTableBuilder, IdentityGenerator  # noqa: E402
from .delta_merge import DeltaMergeBuilder  # noqa: E402
from .delta_optimize import DeltaOptimizeBuilder  # noqa: E402
from .delta_table import DeltaTable  # noqa: E402

__all__ += ["DeltaTable", "DeltaTableBuilder", "DeltaMergeBuilder", "DeltaOptimizeBuilder", "IdentityGenerator"]
