"""delta-spark's session confs, carried into the writes and DML of ``deltatx.spark``.

Why a module of its own: delta-spark reads several SQL confs of the *session* at write time
(``spark.sql.sources.partitionOverwriteMode``, ``spark.databricks.delta.schema.autoMerge.enabled``,
``spark.databricks.delta.commitInfo.userMetadata``), and ignoring them is not harmless — a
session set to dynamic partition overwrite would get a whole-table overwrite. But a Python data
source is planned in a Python worker that sees only the write's options, never the session's
confs (Spark 4.3 sends the planner worker a hand-picked set of confs, and ``PythonDataSourceV2``
does not implement ``SessionConfigSupport``). So the driver, which has the session, copies the
confs that are set into the write's options under :data:`SESSION_PREFIX` keys:

- :func:`deltatx.spark.write` does it itself;
- ``df.write.format("deltatx").save(...)`` does it through :func:`install_writer_hook`, a thin
  wrapper of pyspark's classic ``DataFrameWriter.format``/``save`` (installed when
  ``deltatx.spark`` is imported) that adds the options only when the format is ``deltatx``.

The planner (:func:`deltatx.spark.options.write_spec`) then applies Delta's precedence: a write
option wins over the session conf of the same meaning. The DeltaTable API runs on the driver and
reads the session directly (:func:`session_value`).
"""

from __future__ import annotations

import functools
from typing import Any

#: INSERT OVERWRITE / df.write overwrite: STATIC (whole table) or DYNAMIC (the written partitions)
PARTITION_OVERWRITE_MODE = "spark.sql.sources.partitionOverwriteMode"
#: delta-spark's switch that lets dynamic partition overwrite be used at all (default true)
DYNAMIC_PARTITION_OVERWRITE_ENABLED = "spark.databricks.delta.dynamicPartitionOverwrite.enabled"
#: schema evolution for appends (as mergeSchema=true) and MERGE (as withSchemaEvolution)
AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"
#: userMetadata of every commit the session makes, unless the write's own option says otherwise
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"

#: idempotent writes and DML by SQL conf (delta-spark 2.3+): a repeated (appId, version) is skipped
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"

#: the confs a write needs, in the order they are read
WRITE_CONFS = (PARTITION_OVERWRITE_MODE, DYNAMIC_PARTITION_OVERWRITE_ENABLED, AUTO_MERGE, USER_METADATA,
               TXN_APP_ID, TXN_VERSION)

#: option key prefix of a session conf copied into a write (Spark lower-cases option keys)
SESSION_PREFIX = "_deltatx_conf."


def session_key(conf: str) -> str:
    """The (lower-cased) option key under which the session's value of ``conf`` travels."""
    return (SESSION_PREFIX + conf).lower()


def session_value(spark: Any, conf: str) -> str | None:
    """The session's value of ``conf``, or None when it is not set (nor has a default)."""
    try:
        value = spark.conf.get(conf, None)
    except Exception:  # a session that cannot answer (stopped): as if unset
        return None
    return None if value is None else str(value)


def session_flag(spark: Any, conf: str, default: bool = False) -> bool:
    value = session_value(spark, conf)
    if value is None:
        return default
    return value.strip().lower() == "true"


def session_options(spark: Any, confs: tuple[str, ...] = WRITE_CONFS) -> dict[str, str]:
    """The write-relevant confs set on ``spark``, as options of a deltatx write."""
    out: dict[str, str] = {}
    for conf in confs:
        value = session_value(spark, conf)
        if value is not None:
            out[session_key(conf)] = value
    return out


_HOOK_ATTRIBUTE = "_deltatx_session_hook"


def install_writer_hook() -> None:
    """Make ``df.write.format("deltatx")...save()`` carry the session's write confs (idempotent).

    Only pyspark's classic ``DataFrameWriter`` is wrapped (Spark Connect sessions are not
    supported by deltatx.spark). The wrapper remembers the format a writer was given and, when
    it is ``deltatx``, adds :func:`session_options` right before ``save`` — after the user's
    options, under keys of its own, so nothing the user set is overwritten.
    """
    from pyspark.sql.readwriter import DataFrameWriter
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    _wrap_writer(DataFrameWriter, "save", WRITE_CONFS)
    # streams too: Delta's sink takes the session's autoMerge (DeltaSink's canMergeSchema) and
    # userMetadata confs (each micro-batch is idempotent by query id and batch id already)
    _wrap_writer(DataStreamWriter, "start", STREAM_CONFS)


def _wrap_writer(cls: Any, terminal: str, confs: tuple[str, ...]) -> None:
    """Wrap ``cls.format`` (remember the format) and ``cls.<terminal>`` (``save`` / ``start``:
    add the session's ``confs`` as options when the format is deltatx). Idempotent."""
    if getattr(cls, _HOOK_ATTRIBUTE, False):
        return
    original_format = getattr(cls, "format")
    original_terminal = getattr(cls, terminal)

    @functools.wraps(original_format)
    def format(self: Any, source: str) -> Any:  # noqa: A001 - pyspark's name
        self._deltatx_format = str(source).lower()
        return original_format(self, source)

    @functools.wraps(original_terminal)
    def finish(self: Any, path: str | None = None, format: str | None = None, *args: Any,  # noqa: A002
               **kwargs: Any) -> Any:
        from .source import FORMAT_NAME

        if format is not None:
            self.format(format)
            format = None
        if getattr(self, "_deltatx_format", None) == FORMAT_NAME:
            session = getattr(self, "_spark", None)
            if session is not None:
                for key, value in session_options(session, confs).items():
                    self._jwrite = self._jwrite.option(key, value)
        return original_terminal(self, path, format, *args, **kwargs)

    setattr(cls, "format", format)
    setattr(cls, terminal, finish)
    setattr(cls, _HOOK_ATTRIBUTE, True)


#: the confs a streaming write takes (each micro-batch is idempotent by its own query id and batch id)
STREAM_CONFS = (AUTO_MERGE, USER_METADATA)
