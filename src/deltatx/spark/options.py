"""Spark data source options -> the typed settings of one deltatx read or write, and schema mapping.

Why a module of its own: Spark hands every option to the Python source as a string under a
lower-cased key (``replaceWhere`` arrives as ``replacewhere``), and the writer, the streaming sink
and the reader all need the same parsing and the same actionable errors. The names follow Delta's
DataFrame options; table properties (``delta.*`` and ``deltatx.*``) get their canonical
camel-case spelling back so the log holds ``delta.isolationLevel``, not ``delta.isolationlevel``.

Schemas: a Delta ``schemaString`` *is* Spark's JSON schema format, so Spark <-> table schemas go
through that JSON (exact type names, decimals, timestamp vs timestamp_ntz) rather than through a
second type table.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

import pyarrow as pa

from ..errors import InvalidPropertyError, UnsupportedOperationError
from ..tables import properties as props
from ..txnlog.schema import each_field, schema_from_json, schema_to_json
from . import conf as session_conf

#: table properties whose canonical spelling is restored from Spark's lower-cased option keys
KNOWN_TABLE_PROPERTIES = (
    "delta.isolationLevel",
    props.CHECKPOINT_INTERVAL,
    props.APPEND_ONLY,
    props.DELETED_FILE_RETENTION,
    props.LOG_RETENTION,
    props.AUTO_COMPACT,
    props.AUTO_COMPACT_MIN_FILES,
    props.USE_STATS,
    props.NUM_INDEXED_COLS,
    props.TARGET_FILE_SIZE,
    "delta.checkpointRetentionDuration",
    "delta.enableChangeDataFeed",
    "delta.enableDeletionVectors",
    "delta.enableRowTracking",
    "delta.columnMapping.mode",
    "delta.dataSkippingStatsColumns",
    "delta.minReaderVersion",
    "delta.minWriterVersion",
)
_CANONICAL = {name.lower(): name for name in KNOWN_TABLE_PROPERTIES}

#: option prefix for storage options (``storage.aws_region`` -> storage_options["aws_region"])
STORAGE_PREFIX = "storage."
#: internal option: where the driver-side commit reports its outcome for deltatx.spark.write()
REPORT_OPTION = "_deltatx_report"
#: internal option: the version a read was pinned to when Spark asked for its schema (load())
PINNED_VERSION_OPTION = "_deltatx_pinned_version"
#: internal option: the write must create the table (modes error / ignore of deltatx.spark.write)
CREATE_ONLY_OPTION = "_deltatx_create_only"

_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def flag(options: Mapping[str, str], name: str, default: bool = False) -> bool:
    value = options.get(name.lower())
    if value is None:
        return default
    low = value.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise InvalidPropertyError(f"option {name}={value!r} must be 'true' or 'false'")


def int_option(options: Mapping[str, str], name: str, default: int | None = None, minimum: int = 0) -> int | None:
    value = options.get(name.lower())
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value.strip())
    except ValueError:
        number = None
    if number is None or number < minimum:
        raise InvalidPropertyError(f"option {name}={value!r} must be an integer >= {minimum}")
    return number


def table_uri(options: Mapping[str, str]) -> str:
    uri = options.get("path")
    if not uri:
        raise InvalidPropertyError(
            "no table location: pass it as .save(uri) / .load(uri) / .start(uri), "
            "or as the 'path' option (OPTIONS (path '...') in SQL)"
        )
    return uri


def storage_options(options: Mapping[str, str]) -> dict[str, str]:
    return {k[len(STORAGE_PREFIX):]: v for k, v in options.items() if k.startswith(STORAGE_PREFIX)}


def table_properties(options: Mapping[str, str]) -> dict[str, str]:
    """``delta.*`` / ``deltatx.*`` options, with their canonical key spelling, for a table created here."""
    out: dict[str, str] = {}
    for key, value in options.items():
        if key.startswith("delta.") or key.startswith("deltatx."):
            out[_CANONICAL.get(key.lower(), _feature_key(key))] = value
    return props.validate_properties(out)


def _feature_key(key: str) -> str:
    """``delta.feature.<name>`` with the feature's own spelling: Spark lower-cases option keys,
    and feature names are case-sensitive in the protocol (``deletionvectors`` is no feature)."""
    from ..txnlog.features import SUPPORTED_READER_FEATURES, SUPPORTED_WRITER_FEATURES

    prefix = props.FEATURE_PREFIX
    if not key.lower().startswith(prefix):
        return key
    name = key[len(prefix):]
    known = {f.lower(): f for f in SUPPORTED_READER_FEATURES | SUPPORTED_WRITER_FEATURES}
    return prefix + known.get(name.lower(), name)


def column_list(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    text = value.strip()
    if text.startswith("["):  # Delta's internal form: a JSON list
        try:
            names = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidPropertyError(f"column list {value!r} is not valid JSON: {exc}") from None
    else:
        names = [n.strip().strip("`") for n in text.split(",")]
    names = [n for n in names if n]
    if len(set(names)) != len(names):
        raise InvalidPropertyError(f"column list {value!r} names a column twice")
    return tuple(names)


# --------------------------------------------------------------------------------------------
# Writes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WriteSpec:
    """Everything a write needs, parsed once on the driver when the write is planned."""

    uri: str
    mode: str  # "append" | "overwrite"
    storage_options: dict[str, str] = field(default_factory=dict)
    replace_where: str | None = None
    partition_by: tuple[str, ...] | None = None
    merge_schema: bool = False
    overwrite_schema: bool = False
    txn_app_id: str | None = None
    txn_version: int | None = None
    user_metadata: str | None = None
    table_properties: dict[str, str] = field(default_factory=dict)
    max_records_per_file: int | None = None
    report_path: str | None = None
    create_only: bool = False  # refuse (TableAlreadyExistsError) when the table exists at planning
    #: partitionOverwriteMode=dynamic (option, else session conf) on an overwrite without
    #: replaceWhere: replace only the partitions the data writes to (if the table is partitioned)
    dynamic_partition_overwrite: bool = False


#: Delta write options deltatx does not implement and whose silent omission would change what the
#: write does (which rows it replaces, what the commit tells readers): refused, never ignored.
#: The value says when the option is harmless (None: never).
_UNSUPPORTED_WRITE_OPTIONS: dict[str, str | None] = {
    "replaceon": None,  # INSERT ... REPLACE ON: without it the write would replace the whole table
    "replaceusing": None,
    "usenullintolerantequalitywithdpo": None,
    "targetalias": None,  # an alias for replaceWhere: the predicate would bind differently
    "datachange": "true",  # dataChange=false (rearrange-only): readers would see new data
    "writepartitioncolumns": "false",  # partition values inside the files
    "compression": "snappy",  # deltatx writes Snappy Parquet; another codec would be silently lost
}


def _max_records_per_file(o: Mapping[str, str]) -> int | None:
    """``maxRecordsPerFile``: Spark's 0 or a negative number means no limit."""
    number = int_option(o, "maxRecordsPerFile", minimum=-(2 ** 63))
    return number if number is not None and number > 0 else None


def _refuse_unsupported(o: Mapping[str, str]) -> None:
    for key, harmless in _UNSUPPORTED_WRITE_OPTIONS.items():
        value = o.get(key)
        if value is None or (harmless is not None and value.strip().lower() == harmless):
            continue
        raise UnsupportedOperationError(
            f"write option {key}={value!r} is not supported by deltatx; ignoring it would change what "
            f"the write replaces or records, so the write is refused (drop the option)"
        )


def _session(o: Mapping[str, str], conf: str) -> str | None:
    """The session's value of ``conf`` copied into the options by the driver (deltatx.spark.conf)."""
    return o.get(session_conf.session_key(conf))


def _dynamic_partition_overwrite(o: Mapping[str, str], mode: str, replace_where: str | None) -> bool:
    """Delta's choice of dynamic partition overwrite (DeltaOptions.isDynamicPartitionOverwriteMode
    and WriteIntoDelta): the option wins over the session conf; a replaceWhere wins over the
    session conf but clashes with the option; only an overwrite uses it."""
    in_options = "partitionoverwritemode" in o
    value = o["partitionoverwritemode"] if in_options else _session(o, session_conf.PARTITION_OVERWRITE_MODE)
    if value is None:
        return False
    low = value.strip().lower()
    if low not in ("static", "dynamic"):
        raise InvalidPropertyError(f"option partitionOverwriteMode={value!r} must be 'STATIC' or 'DYNAMIC'")
    dynamic = low == "dynamic"
    enabled = _session(o, session_conf.DYNAMIC_PARTITION_OVERWRITE_ENABLED)
    if dynamic and enabled is not None and enabled.strip().lower() == "false":
        raise InvalidPropertyError(
            f"dynamic partition overwrite is requested (write option or session conf), but it is disabled "
            f"by {session_conf.DYNAMIC_PARTITION_OVERWRITE_ENABLED}=false"
        )
    if mode != "overwrite":
        return False
    if replace_where is not None:
        if in_options and dynamic:
            raise InvalidPropertyError(
                "A 'replaceWhere' expression and 'partitionOverwriteMode'='dynamic' cannot both be set in "
                "the DataFrameWriter options"
            )
        return False  # the query's own predicate wins over the session's mode, as in Delta
    return dynamic


def write_spec(raw_options: Mapping[str, str], overwrite: bool) -> WriteSpec:
    """Parse (and check the consistency of) the options of ``df.write.format("deltatx")``."""
    o = lower_keys(raw_options)
    _refuse_unsupported(o)
    mode = "overwrite" if overwrite else "append"
    replace_where = o.get("replacewhere") or None
    if replace_where is not None and mode != "overwrite":
        raise InvalidPropertyError(
            "option replaceWhere only applies to mode('overwrite'); drop it or switch the mode"
        )
    # the write's option wins over the session's autoMerge conf (DeltaOptions.canMergeSchema)
    merge_schema = flag(o, "mergeSchema") if "mergeschema" in o else flag(
        o, session_conf.session_key(session_conf.AUTO_MERGE))
    overwrite_schema = flag(o, "overwriteSchema")
    if overwrite_schema and mode != "overwrite":
        raise InvalidPropertyError("option overwriteSchema only applies to mode('overwrite')")
    if overwrite_schema and replace_where is not None:
        raise InvalidPropertyError("overwriteSchema cannot be combined with replaceWhere (Delta forbids it too)")
    app_id = o.get("txnappid") or None
    app_version = int_option(o, "txnVersion")
    if app_id is None and app_version is None:  # else the session's (delta-spark's SQL confs)
        app_id = _session(o, session_conf.TXN_APP_ID) or None
        app_version = int_option(o, session_conf.session_key(session_conf.TXN_VERSION))
    if (app_id is None) != (app_version is None):
        raise InvalidPropertyError(
            "options txnAppId and txnVersion go together: set both for an idempotent write, or neither"
        )
    partition_by = column_list(o.get("partitionby") or o.get("__partition_columns"))
    return WriteSpec(
        uri=table_uri(o),
        mode=mode,
        storage_options=storage_options(o),
        replace_where=replace_where,
        partition_by=partition_by,
        merge_schema=merge_schema,
        overwrite_schema=overwrite_schema,
        txn_app_id=app_id,
        txn_version=app_version,
        user_metadata=o["usermetadata"] if "usermetadata" in o else _session(o, session_conf.USER_METADATA),
        table_properties=table_properties(o),
        max_records_per_file=_max_records_per_file(o),
        report_path=o.get(REPORT_OPTION),
        create_only=flag(o, CREATE_ONLY_OPTION),
        dynamic_partition_overwrite=_dynamic_partition_overwrite(o, mode, replace_where),
    )


# --------------------------------------------------------------------------------------------
# Reads
# --------------------------------------------------------------------------------------------

DEFAULT_MAX_PARTITION_BYTES = 128 * 1024 * 1024
DEFAULT_OPEN_COST_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ReadSpec:
    """A read: which table and version, which columns, and how files are cut into partitions."""

    uri: str
    storage_options: dict[str, str] = field(default_factory=dict)
    version: int | None = None
    timestamp: str | None = None
    columns: tuple[str, ...] | None = None
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES
    open_cost_bytes: int = DEFAULT_OPEN_COST_BYTES
    min_partitions: int = 2
    filter_pushdown: bool = False
    row_tracking: bool = False  # add the ``_metadata`` struct (row_id, row_commit_version)


def read_spec(raw_options: Mapping[str, str]) -> ReadSpec:
    o = lower_keys(raw_options)
    version = int_option(o, "versionAsOf")
    timestamp = o.get("timestampasof") or None
    if version is not None and timestamp is not None:
        raise InvalidPropertyError("pass versionAsOf or timestampAsOf, not both")
    pinned = int_option(o, PINNED_VERSION_OPTION)
    if pinned is not None:  # load() resolved the version (or timestamp) already: every scan reads it
        version, timestamp = pinned, None
    return ReadSpec(
        uri=table_uri(o),
        storage_options=storage_options(o),
        version=version,
        timestamp=timestamp,
        columns=column_list(o.get("columns")),
        max_partition_bytes=int_option(o, "maxPartitionBytes", DEFAULT_MAX_PARTITION_BYTES, minimum=1),
        open_cost_bytes=int_option(o, "openCostInBytes", DEFAULT_OPEN_COST_BYTES, minimum=0),
        min_partitions=int_option(o, "minPartitions", max(1, os.cpu_count() or 1), minimum=1),
        filter_pushdown=flag(o, "filterPushdown", False),
        row_tracking=flag(o, "readRowTracking", False),
    )


# --------------------------------------------------------------------------------------------
# Schemas
# --------------------------------------------------------------------------------------------


def spark_schema_to_arrow(struct: Any) -> pa.Schema:
    """A Spark StructType as the table's canonical arrow schema (via Delta's schemaString)."""
    return schema_from_json(struct.json())


def arrow_schema_to_spark(schema: pa.Schema) -> Any:
    from pyspark.sql.types import StructType

    return StructType.fromJson(json.loads(schema_to_json(schema)))


#: field metadata the log keeps for writers that a DataFrame's schema leaves out, as delta-spark
#: removes it from the relation it reads (generation expressions, identity state, type-widening
#: history); user metadata such as ``comment`` stays. Column mapping's ids and physical names stay
#: too: a stream analysed with this schema tells a renamed or re-added column by them
#: (txnlog/stream_plan.py), as delta-spark's streaming source keeps them for the same check.
_WRITER_ONLY_METADATA = ("delta.generationExpression", "delta.identity.", "delta.typeChanges")


def read_schema_to_spark(schema: pa.Schema) -> Any:
    """The Spark schema of a read (``spark.read``, ``toDF()``, the change feed): the table's
    columns without the writer-only field metadata (:data:`_WRITER_ONLY_METADATA`)."""
    fields = each_field(_without_writer_metadata)(list(schema))
    return arrow_schema_to_spark(pa.schema(fields, metadata=schema.metadata))


def _without_writer_metadata(f: pa.Field) -> pa.Field:
    """``f`` without the :data:`_WRITER_ONLY_METADATA` keys of its own metadata."""
    if not f.metadata:
        return f
    kept = {k: v for k, v in f.metadata.items() if not k.decode(errors="replace").startswith(_WRITER_ONLY_METADATA)}
    return f if len(kept) == len(f.metadata) else f.with_metadata(kept)


def as_nullable(schema: pa.Schema) -> pa.Schema:
    """Every column nullable: what a table created from a DataFrame gets (as in Delta)."""
    return pa.schema([f.with_nullable(True) for f in schema], metadata=schema.metadata)
