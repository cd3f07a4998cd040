"""Table properties: which keys deltatx understands, their defaults, and validation.

Why validate at ``create_table``/``set_properties``: a bad value found later (at the next commit,
or worse, by another engine) is an error far from its cause. Unknown ``delta.*`` keys are passed
through (other engines may understand them); known keys must parse.
"""

from __future__ import annotations

from ..errors import InvalidPropertyError
from ..isolation import validate_isolation_property
from ..txnlog import column_mapping
from ..txnlog.checkpoint import interval_ms

CHECKPOINT_INTERVAL = "delta.checkpointInterval"
APPEND_ONLY = "delta.appendOnly"
DELETED_FILE_RETENTION = "delta.deletedFileRetentionDuration"
LOG_RETENTION = "delta.logRetentionDuration"
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

def parse_interval_hours(value: str, key: str = "interval") -> float:
    """``"interval 7 days"`` → 168.0 (the log layer owns the parsing; months/years are refused)."""
    return interval_ms(value, key) / 3_600_000


def _bool(key: str, value: str) -> None:
    if value.strip().lower() not in ("true", "false"):
        raise InvalidPropertyError(f"{key}={value!r} must be 'true' or 'false'")


def _positive_int(key: str, value: str) -> None:
    try:
        ok = int(value) > 0
    except ValueError:
        ok = False
    if not ok:
        raise InvalidPropertyError(f"{key}={value!r} must be a positive integer")


def _internal(key: str, value: str) -> None:
    raise InvalidPropertyError(f"{key} is kept by deltatx itself (it tracks the largest column id ever assigned) "
                               f"and cannot be set")


def _int_at_least(minimum: int):
    def check(key: str, value: str) -> None:
        try:
            ok = int(value) >= minimum
        except ValueError:
            ok = False
        if not ok:
            raise InvalidPropertyError(f"{key}={value!r} must be an integer ≥ {minimum}")

    return check


def _stats_columns(key: str, value: str) -> None:
    if value.count("`") % 2:
        raise InvalidPropertyError(f"{key}={value!r}: unbalanced backtick")


_VALIDATORS = {
    "delta.isolationLevel": lambda k, v: validate_isolation_property(v),
    CHECKPOINT_INTERVAL: _positive_int,
    APPEND_ONLY: _bool,
    AUTO_COMPACT: _bool,
    USE_STATS: _bool,
    DV_INLINE_MAX_BYTES: _int_at_least(0),
    AUTO_COMPACT_MIN_FILES: _positive_int,
    NUM_INDEXED_COLS: _int_at_least(-1),
    STATS_COLUMNS: _stats_columns,
    TARGET_FILE_SIZE: _positive_int,
    DELETED_FILE_RETENTION: lambda k, v: parse_interval_hours(v, k),
    LOG_RETENTION: lambda k, v: parse_interval_hours(v, k),
    "delta.checkpointRetentionDuration": lambda k, v: parse_interval_hours(v, k),
    "delta.setTransactionRetentionDuration": lambda k, v: parse_interval_hours(v, k),
    ENABLE_CHANGE_DATA_FEED: _bool,
    "delta.enableDeletionVectors": _bool,
    "delta.enableRowTracking": _bool,
    "delta.enableInCommitTimestamps": _bool,
    "delta.enableTypeWidening": _bool,
    column_mapping.MODE: column_mapping.validate_mode,
    column_mapping.MAX_COLUMN_ID: _internal,
}


def validate_properties(properties: dict[str, object]) -> dict[str, str]:
    """Stringify and validate; returns the properties as Delta stores them (all strings)."""
    out: dict[str, str] = {}
    for key, value in properties.items():
        if not isinstance(key, str) or not key:
            raise InvalidPropertyError(f"property names must be non-empty strings, got {key!r}")
        if isinstance(value, bool):
            value = "true" if value else "false"
        value = str(value)
        validator = _VALIDATORS.get(key)
        if validator is not None:
            validator(key, value)
        if validator is _bool:
            value = value.strip().lower()  # stored canonically: "true" / "false"
        out[key] = value
    return out


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
    v = properties.get(key)
    return default if v is None else int(v)


def stats_columns(properties: dict[str, str]) -> list[str] | None:
    """``delta.dataSkippingStatsColumns``: the columns that get statistics (comma-separated,
    dotted for nested fields, backticks quoting a name); when set it replaces
    ``delta.dataSkippingNumIndexedCols``, as in Spark and delta-rs. None when unset or empty."""
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
    names = [n for n in names if n]
    return names or None


def dv_inline_max_bytes(properties: dict[str, str]) -> int:
    """How big a deletion vector may be and still be stored inline in the log."""
    from ..io.deletion_vector_writer import INLINE_MAX_BYTES

    return int_property(properties, DV_INLINE_MAX_BYTES, INLINE_MAX_BYTES)


def deleted_file_retention_hours(properties: dict[str, str]) -> float:
    """``delta.deletedFileRetentionDuration`` in hours; the log layer owns the rule and default."""
    from ..txnlog.checkpoint import deleted_file_retention_ms

    return deleted_file_retention_ms(properties) / 3_600_000


FEATURE_PREFIX = "delta.feature."


def stored_configuration(config: dict[str, str]) -> dict[str, str]:
    """``config`` without ``delta.feature.<name>`` keys.

    Those keys ask for a protocol feature; once the protocol lists it they have done their job,
    and Delta does not keep them in metaData.configuration. Keeping them would turn a pure
    protocol upgrade into a metadata change that fails every concurrent writer.
    """
    return {k: v for k, v in config.items() if not k.startswith(FEATURE_PREFIX)}

