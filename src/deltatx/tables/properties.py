"""Table properties: which keys deltatx understands, their defaults, and validation.

Why validate at ``create_table``/``set_properties``: a bad value found later (at the next commit,
or worse, by another engine) is an error far from its cause. Known keys must parse; an unknown
``delta.*`` key is refused, as Delta (``DELTA_UNKNOWN_CONFIGURATION``), deltalake and Kernel refuse
it: ``delta.enableDeletionVector`` stored quietly would leave the user believing a feature is on.
Keys outside ``delta.*`` are the user's own and are kept as given. Keys the log already holds are
never re-checked here (another engine's table opens and writes as it is).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Callable

from ..errors import ArgumentTypeError, InvalidArgumentError, InvalidPropertyError
from ..isolation import validate_isolation_property
import difflib

from ..txnlog import column_mapping, row_tracking
from ..txnlog.checkpoint import interval_ms
from ..txnlog.checkpoint_protection import PROTECTED_BEFORE
from ..txnlog.log_cleanup import ENABLE_EXPIRED_LOG_CLEANUP, LOG_RETENTION
from ..txnlog.in_commit_timestamps import ENABLEMENT_TIMESTAMP, ENABLEMENT_VERSION

if TYPE_CHECKING:
    from ..txnlog.actions import Protocol

CHECKPOINT_INTERVAL = "delta.checkpointInterval"
APPEND_ONLY = "delta.appendOnly"
DELETED_FILE_RETENTION = "delta.deletedFileRetentionDuration"
AUTO_COMPACT = "delta.autoOptimize.autoCompact"
AUTO_COMPACT_MIN_FILES = "deltatx.autoCompact.minNumFiles"
USE_STATS = "deltatx.conflictDetection.useStats"
NUM_INDEXED_COLS = "delta.dataSkippingNumIndexedCols"
STATS_COLUMNS = "delta.dataSkippingStatsColumns"
TARGET_FILE_SIZE = "delta.targetFileSize"
ENABLE_DELETION_VECTORS = "delta.enableDeletionVectors"
ENABLE_ROW_TRACKING = "delta.enableRowTracking"
ENABLE_CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
#: bitmaps up to this many bytes are stored inline in the log (io.deletion_vector_writer)
DV_INLINE_MAX_BYTES = "deltatx.deletionVectors.inlineMaxBytes"
#: set as properties these upgrade the protocol (as Delta's SET TBLPROPERTIES does); never stored
MIN_READER_VERSION = "delta.minReaderVersion"
MIN_WRITER_VERSION = "delta.minWriterVersion"
#: ``delta.feature.<name>=supported`` asks for a table feature (never stored either)
FEATURE_PREFIX = "delta.feature."


def parse_interval_hours(value: str, key: str = "interval") -> float:
    """``"interval 7 days"`` → 168.0 (the log layer owns the parsing; months/years are refused)."""
    return interval_ms(value, key) / 3_600_000


def _bool(key: str, value: str) -> None:
    if value.strip().lower() not in ("true", "false"):
        raise InvalidPropertyError(f"{key}={value!r} must be 'true' or 'false'")


#: an integer as Delta (Java's parseInt/parseLong) reads one: no spaces, underscores or other digits
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _int_between(minimum: int, maximum: int, what: str) -> Callable[[str, str], None]:
    """A validator of an integer property: Delta parses these as a Java int (or long, for sizes),
    so ' 5', '5_000' or a value past the type's range are refused, not read as Python would."""
    def check(key: str, value: str) -> None:
        if _INTEGER.fullmatch(value) is None or not minimum <= int(value) <= maximum:
            raise InvalidPropertyError(f"{key}={value!r} must be {what}")

    return check


_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
_positive_int = _int_between(1, _INT_MAX, f"a positive integer (at most {_INT_MAX})")
_positive_long = _int_between(1, _LONG_MAX, "a positive integer (a number of bytes)")


def _internal(key: str, value: str) -> None:
    raise InvalidPropertyError(f"{key} is kept by deltatx itself (it tracks the largest column id ever assigned) "
                               f"and cannot be set")


def _int_at_least(minimum: int) -> Callable[[str, str], None]:
    return _int_between(minimum, _INT_MAX, f"an integer ≥ {minimum} (at most {_INT_MAX})")


def _one_of(*allowed: str) -> Callable[[str, str], None]:
    def check(key: str, value: str) -> None:
        if value.strip().lower() not in allowed:
            raise InvalidPropertyError(f"{key}={value!r} must be one of {', '.join(allowed)}")

    return check


def _feature_status(key: str, value: str) -> None:
    """``delta.feature.<name>`` only ever adds a feature: Delta accepts 'supported' (and the
    deprecated 'enabled'); dropping a feature is a command of its own, not a property."""
    if value.strip().lower() not in ("supported", "enabled"):
        raise InvalidPropertyError(f"{key}={value!r} must be 'supported' (a table feature cannot be "
                                   f"switched off by a property)")


def _stats_columns(key: str, value: str) -> None:
    if value.count("`") % 2:
        raise InvalidPropertyError(f"{key}={value!r}: unbalanced backtick")


_VALIDATORS = {
    "delta.isolationLevel": lambda k, v: validate_isolation_property(v),
    CHECKPOINT_INTERVAL: _positive_int,
    APPEND_ONLY: _bool,
    AUTO_COMPACT: _bool,
    USE_STATS: _bool,
    DV_INLINE_MAX_BYTES: _int_between(0, _LONG_MAX, "an integer ≥ 0 (a number of bytes)"),
    AUTO_COMPACT_MIN_FILES: _positive_int,
    NUM_INDEXED_COLS: _int_at_least(-1),
    STATS_COLUMNS: _stats_columns,
    TARGET_FILE_SIZE: _positive_long,
    DELETED_FILE_RETENTION: lambda k, v: parse_interval_hours(v, k),
    LOG_RETENTION: lambda k, v: parse_interval_hours(v, k),
    ENABLE_EXPIRED_LOG_CLEANUP: _bool,
    "delta.checkpointRetentionDuration": lambda k, v: parse_interval_hours(v, k),
    "delta.setTransactionRetentionDuration": lambda k, v: parse_interval_hours(v, k),
    ENABLE_CHANGE_DATA_FEED: _bool,
    "delta.enableDeletionVectors": _bool,
    "delta.enableRowTracking": _bool,
    "delta.enableInCommitTimestamps": _bool,
    # set by the writer that turns in-commit timestamps on (txnlog/in_commit_timestamps.py);
    # a value that is no version / timestamp would make every later open of the table fail
    "delta.inCommitTimestampEnablementVersion": _int_between(0, _LONG_MAX, "a table version (an integer ≥ 0)"),
    "delta.inCommitTimestampEnablementTimestamp": _int_between(
        -_LONG_MAX - 1, _LONG_MAX, "a timestamp in milliseconds since the epoch (an integer)"),
    "delta.enableTypeWidening": _bool,
    "delta.enableIcebergCompatV1": _bool,
    "delta.enableIcebergCompatV2": _bool,
    "delta.checkpointPolicy": _one_of("classic", "v2"),  # stored lower-cased: see _LOWER_CASED
    MIN_READER_VERSION: _int_between(1, 3, "a reader protocol version: an integer from 1 to 3"),
    MIN_WRITER_VERSION: _int_between(1, 7, "a writer protocol version: an integer from 1 to 7"),
    column_mapping.MODE: column_mapping.validate_mode,
    column_mapping.MAX_COLUMN_ID: _internal,
    # Delta's own settings that deltatx does not act on, validated as Delta validates them: a
    # bad value stored here would fail every Spark job that reads the table's configuration
    "delta.randomizeFilePrefixes": _bool,
    "delta.randomPrefixLength": _positive_int,
    "delta.compatibility.symlinkFormatManifest.enabled": _bool,
    "delta.autoOptimize.optimizeWrite": _bool,
    "delta.tuneFileSizesForRewrites": _bool,
    "delta.checkpoint.writeStatsAsJson": _bool,
    "delta.checkpoint.writeStatsAsStruct": _bool,
    "delta.enableFullRetentionRollback": _bool,
    "delta.checkpoint.partSize": _positive_long,
}

#: Delta's other table properties: deltatx does not act on them and has no stricter rule for their
#: values than Delta's, but they are real keys (Delta's DeltaConfigs, Databricks' documented ones,
#: and those a feature's writer keeps), so a table may carry and a user may set them
_OTHER_DELTA_KEYS = (
    "delta.ignoreProtocolDefaults", "delta.sampleRetentionDuration",
    "delta.dropFeatureTruncateHistory.retentionDuration", "delta.autoOptimize",
    "delta.enableChangeDataCapture", "delta.universalFormat.enabledFormats", "delta.enableIcebergCompatV3",
    "delta.enableIcebergWriterCompatV1", "delta.enableIcebergWriterCompatV3",
    "delta.enableInCommitTimestamps-preview", "delta.inCommitTimestampEnablementVersion-preview",
    "delta.inCommitTimestampEnablementTimestamp-preview",  # Delta 3.2's names, in its tables' logs
    "delta.parquet.format.version", "delta.rowTrackingSuspended", "delta.enableVariantShredding",
    "delta.coordinatedCommits.commitCoordinator-preview", "delta.coordinatedCommits.commitCoordinatorConf-preview",
    "delta.coordinatedCommits.tableConf-preview", "delta.parquet.compression.codec", "delta.timeUntilArchived",
    row_tracking.MATERIALIZED_ROW_ID, row_tracking.MATERIALIZED_ROW_COMMIT_VERSION, PROTECTED_BEFORE,
)

#: ``delta.*`` key prefixes whose rest is free: CHECK constraints (set by add_constraint, see
#: ops/properties.py), table features (validated by ``_feature_status``) and UniForm's settings
_FREE_DELTA_PREFIXES = ("delta.constraints.", "delta.feature.", "delta.universalformat.config.")

#: the keys deltatx knows, by lower case: Delta matches ``delta.*`` keys case-insensitively and
#: stores the canonical spelling, so 'delta.appendonly' must not be kept as an inert other key
_CANONICAL = {key.lower(): key for key in (*_VALIDATORS, *_OTHER_DELTA_KEYS) if key.startswith("delta.")}

#: values Delta reads by their exact lower-case name, case-sensitively (stored so, whatever the
#: user's spelling: 'V2' kept as given would be refused by Spark)
_LOWER_CASED = frozenset({"delta.checkpointPolicy"})

#: keys a feature's own writer keeps, with why: set by a user they would change what the writer
#: recorded (every row id, where in-commit timestamps start, which history is protected). Setting
#: one to the value it already has is a no-op, so a copied configuration still applies.
WRITER_KEPT = {
    row_tracking.MATERIALIZED_ROW_ID: "it names the hidden column where rows keep their ids: another name "
                                      "would change the id of every row that has one materialized",
    row_tracking.MATERIALIZED_ROW_COMMIT_VERSION: "it names the hidden column where rows keep their commit "
                                                  "versions: another name would change every row's",
    ENABLEMENT_VERSION: "it records where in-commit timestamps start; set delta.enableInCommitTimestamps=true "
                        "instead",
    ENABLEMENT_TIMESTAMP: "it records where in-commit timestamps start; set delta.enableInCommitTimestamps=true "
                          "instead",
    PROTECTED_BEFORE: "it is the boundary of the history DROP FEATURE protects (checkpointProtection)",
}


def refuse_writer_kept(new: Mapping[str, str], current: Mapping[str, str]) -> None:
    """Raise InvalidPropertyError for a key of :data:`WRITER_KEPT` that ``new`` would change."""
    for key, why in WRITER_KEPT.items():
        if key in new and new[key] != current.get(key):
            raise InvalidPropertyError(f"{key} is kept by the writer and cannot be set: {why}; nothing was committed")


#: ``delta.*`` key prefixes UNSET TBLPROPERTIES refuses, with what to do instead: a constraint
#: unset as a property would leave rows unchecked without DROP CONSTRAINT's record; a feature is a
#: protocol entry (the configuration never keeps delta.feature.* keys), not a setting to take away
_UNSET_REFUSED_PREFIXES = {
    "delta.constraints.": "a CHECK constraint is dropped with drop_constraint(name), not unset as a property",
    FEATURE_PREFIX: "a table feature cannot be removed by unsetting a property (deltatx cannot drop table "
                    "features; Delta does it with ALTER TABLE ... DROP FEATURE)",
}


def keys_to_unset(keys: object) -> list[str]:
    """The keys UNSET TBLPROPERTIES is given, as Delta names them: a known ``delta.*`` key in its
    canonical spelling, any other key as given; each once, in order. Raises InvalidPropertyError
    (ArgumentTypeError for a non-string) for a key no unset may remove: the writer's own, the
    protocol versions (unsetting never downgrades the protocol), constraints and features."""
    given = [keys] if isinstance(keys, str) else keys
    if not isinstance(given, (list, tuple)):
        raise ArgumentTypeError(f"keys must be a property name or a list of them, got {type(keys).__name__}")
    if not given:
        raise InvalidPropertyError("name at least one property to unset")
    out: list[str] = []
    for key in given:
        if not isinstance(key, str):
            raise ArgumentTypeError(f"property names must be strings, got {key!r}")
        if not key:
            raise InvalidPropertyError("property names must be non-empty strings, got ''")
        key = _CANONICAL.get(key.lower(), key)
        _refuse_unset(key)
        if key not in out:
            out.append(key)
    return out


def _refuse_unset(key: str) -> None:
    """Raise InvalidPropertyError for a (canonically spelled) key UNSET must leave alone, saying
    why, whether or not the table has it: the answer does not depend on the table."""
    lowered = key.lower()
    why = WRITER_KEPT.get(key)
    if why is not None:
        raise InvalidPropertyError(f"{key} is kept by the writer and cannot be unset: {why}; nothing was committed")
    if key == column_mapping.MAX_COLUMN_ID:
        raise InvalidPropertyError(f"{key} is kept by deltatx itself (it tracks the largest column id ever "
                                   f"assigned, so no id is ever reused) and cannot be unset; nothing was committed")
    if key in (MIN_READER_VERSION, MIN_WRITER_VERSION):
        raise InvalidPropertyError(f"{key} cannot be unset: it is the table's protocol, not a stored property, and "
                                   f"unsetting a property never downgrades the protocol; nothing was committed")
    for prefix, instead in _UNSET_REFUSED_PREFIXES.items():
        if lowered.startswith(prefix):
            raise InvalidPropertyError(f"{key} cannot be unset: {instead}; nothing was committed")


def matching_keys(key: str, configuration: Mapping[str, str]) -> list[str]:
    """The keys of ``configuration`` that ``key`` names: a ``delta.*`` key matches whatever case
    the table stores it in (Delta matches them case-insensitively; another engine may have stored
    a spelling of its own), any other key only exactly."""
    if not key.lower().startswith("delta."):
        return [key] if key in configuration else []
    return [k for k in configuration if k.lower() == key.lower()]


def _refuse_unknown_delta_key(key: str) -> None:
    """Delta's rule for a ``delta.*`` key it does not know: refuse it, naming the closest known one."""
    lowered = key.lower()
    if not lowered.startswith("delta.") or lowered in _CANONICAL or lowered.startswith(_FREE_DELTA_PREFIXES):
        return
    close = difflib.get_close_matches(lowered, list(_CANONICAL), n=1, cutoff=0.75)
    hint = f" (did you mean {_CANONICAL[close[0]]!r}?)" if close else ""
    raise InvalidPropertyError(
        f"unknown table property {key!r}{hint}: Delta refuses delta.* keys it does not know, and so does "
        f"deltatx; a property of your own needs a name outside delta.*")


def validate_properties(properties: Mapping[str, object]) -> dict[str, str]:
    """Stringify and validate; returns the properties as Delta stores them (all strings)."""
    if not isinstance(properties, Mapping):
        raise ArgumentTypeError(f"properties must be a dict of name -> value, got {type(properties).__name__}")
    out: dict[str, str] = {}
    for key, value in properties.items():
        if not isinstance(key, str) or not key:
            raise InvalidPropertyError(f"property names must be non-empty strings, got {key!r}")
        _refuse_unknown_delta_key(key)
        key = _CANONICAL.get(key.lower(), key)
        if key in out:
            raise InvalidPropertyError(f"property {key} is given twice (property names are matched case-insensitively)")
        if value is None:  # str() would store the text 'None'
            raise InvalidPropertyError(
                f"property {key} has no value (None): Delta's property values are strings, such as "
                f"'true' / 'false'")
        if isinstance(value, bool):
            value = "true" if value else "false"
        value = str(value)
        validator = _VALIDATORS.get(key)
        if validator is None and key.startswith(FEATURE_PREFIX):
            validator = _feature_status
        if validator is not None:
            validator(key, value)
        if validator is _bool or key in _LOWER_CASED:
            value = value.strip().lower()  # stored canonically: "true" / "false", "v2"
        out[key] = value
    return out


def requested_protocol(config: dict[str, str], current: "Protocol | None") -> "Protocol | None":
    """``current`` raised to the ``delta.minReaderVersion`` / ``delta.minWriterVersion`` that
    ``config`` asks for (validated already), as Delta's SET TBLPROPERTIES / CREATE TABLE do; a
    version at or below the table's changes nothing. ``current`` itself when neither is asked."""
    reader, writer = config.get(MIN_READER_VERSION), config.get(MIN_WRITER_VERSION)
    if reader is None and writer is None:
        return current
    from ..txnlog.actions import Protocol
    from .ops.upgrade_protocol import upgraded_protocol

    base = current or Protocol(1, 2)
    want_reader = max(int(reader) if reader is not None else 1, base.min_reader_version)
    want_writer = max(int(writer) if writer is not None else 1, base.min_writer_version)
    try:
        return upgraded_protocol(base, want_reader, want_writer)
    except InvalidArgumentError as exc:  # reader 3 without writer 7
        raise InvalidPropertyError(f"{MIN_READER_VERSION}={reader!r}, {MIN_WRITER_VERSION}={writer!r}: {exc}") from None


def flag(properties: dict[str, str], key: str, default: bool) -> bool:
    """A boolean table property. A value other than true/false (written by another engine, or
    by hand) is refused, as ``set_properties`` refuses it, before a write acts on a guess."""
    v = properties.get(key)
    if v is None:
        return default
    v = v.strip().lower()
    if v == "true":
        return True
    if v == "false":
        return False
    raise InvalidPropertyError(f"the table's {key}={properties[key]!r} must be 'true' or 'false'; fix it with "
                               f"set_properties({{{key!r}: 'true'}}) or 'false'")


def int_property(properties: dict[str, str], key: str, default: int) -> int:
    """An integer table property. A value ``set_properties`` would refuse (another engine or a
    hand edit left it in the log) raises InvalidPropertyError naming it, before a write acts on it."""
    v = properties.get(key)
    if v is None:
        return default
    try:
        _VALIDATORS.get(key, _int_between(-_LONG_MAX - 1, _LONG_MAX, "an integer"))(key, v)
    except InvalidPropertyError as exc:
        raise InvalidPropertyError(f"the table's {exc}; fix it with set_properties({{{key!r}: ...}})") from None
    return int(v)


def stats_columns(properties: dict[str, str]) -> list[str] | None:
    """``delta.dataSkippingStatsColumns``: the columns that get statistics (comma-separated,
    dotted for nested fields, backticks quoting a name); when set it replaces
    ``delta.dataSkippingNumIndexedCols``, as in Spark and delta-rs. None when unset; empty (no
    column gets statistics, only numRecords) when set to an empty list, as in Delta."""
    raw = properties.get(STATS_COLUMNS)
    if raw is None:
        return None
    names, cur, quoted = [], [], False
    for ch in raw:
        if ch == "`":
            quoted = not quoted
        if ch == "," and not quoted:
            names.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    names.append("".join(cur).strip())
    return [n for n in names if n]


def dv_inline_max_bytes(properties: dict[str, str]) -> int:
    """How big a deletion vector may be and still be stored inline in the log."""
    from ..io.deletion_vector_writer import INLINE_MAX_BYTES

    return int_property(properties, DV_INLINE_MAX_BYTES, INLINE_MAX_BYTES)


def deleted_file_retention_hours(properties: dict[str, str]) -> float:
    """``delta.deletedFileRetentionDuration`` in hours; the log layer owns the rule and default."""
    from ..txnlog.checkpoint import deleted_file_retention_ms

    return deleted_file_retention_ms(properties) / 3_600_000


def stored_configuration(config: dict[str, str]) -> dict[str, str]:
    """``config`` without ``delta.feature.<name>``, ``delta.minReaderVersion`` and
    ``delta.minWriterVersion`` keys.

    Those keys ask for a protocol feature or version; once the protocol has it they have done
    their job, and Delta does not keep them in metaData.configuration. Keeping them would turn a
    pure protocol upgrade into a metadata change that fails every concurrent writer.
    """
    return {k: v for k, v in config.items()
            if not k.startswith(FEATURE_PREFIX) and k not in (MIN_READER_VERSION, MIN_WRITER_VERSION)}

