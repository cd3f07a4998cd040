"""Names of data files: Hive partition folders, add-action path URIs, partition value strings.

Owns the three string encodings a data file's identity goes through, so that every other module
agrees on them byte for byte:

1. **Partition folder** (``a=1/b=x%3Ay``): Hive-style escaping, the character set Spark and Delta
   escape in directory names, so other engines find the same layout they would have written.
   A null partition value lives in ``__HIVE_DEFAULT_PARTITION__``.
2. **add.path**: PROTOCOL.md says the path is an RFC 2396 URI, so the (already Hive-escaped)
   relative path is percent-encoded once more: ``%3A`` in a folder name becomes ``%253A``.
   :func:`decode_path` undoes exactly that, and :func:`data_file_path` maps a decoded path,
   relative or absolute (``file:/…``, ``file:///…``, ``s3://…``), to the store's filesystem.
3. **partitionValues** strings: the protocol's serialization per type (numbers ``toString``,
   ``YYYY-MM-DD`` dates, ``true``/``false``, UTC timestamps, plain decimals, binary as one
   character per byte). The empty string means null. The one inverse is
   ``reader.parse_partition_value`` / ``reader.parse_partition_values`` (columnar), used by the
   reader and by ``deltatx.expr`` (pruning, ``partition_values_table``) alike.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import struct
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

import pyarrow as pa

from ..errors import SchemaMismatchError

if TYPE_CHECKING:
    from ..txnlog.store import LogStore

#: folder name of a null (or empty-string) partition value, as Hive and Spark name it
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

_HIVE_ESCAPED = frozenset(
    [chr(c) for c in range(0x00, 0x20)]
    + ['"', "#", "%", "'", "*", "/", ":", "=", "?", "\\", "\x7f", "{", "[", "]", "^"]
)

# RFC 2396 path characters that need no escaping (unreserved marks plus the pchar punctuation);
# ':' is left out on purpose so that a relative path can never be mistaken for a scheme.
_URI_SAFE = "/-_.!~*'(),;$&+=@"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")


# --------------------------------------------------------------------------------------------
# Partition folders
# --------------------------------------------------------------------------------------------


def escape_partition_value(v: str | None) -> str:
    """Hive-escape one path segment (a partition column name or value); null -> default folder."""
    if v is None or v == "":
        return HIVE_DEFAULT_PARTITION
    if not any(ch in _HIVE_ESCAPED for ch in v):
        return v
    return "".join(f"%{ord(ch):02X}" if ch in _HIVE_ESCAPED else ch for ch in v)


def unescape_partition_value(v: str) -> str | None:
    """Inverse of :func:`escape_partition_value` (``%XX`` with two hex digits only)."""
    if v == HIVE_DEFAULT_PARTITION:
        return None
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), v)


def partition_dir(partition_columns: list[str], values: dict[str, str | None]) -> str:
    """``col=value/…`` for the serialized partition ``values`` of one file ('' for no partitions)."""
    return "/".join(
        f"{escape_partition_value(col)}={escape_partition_value(values.get(col))}" for col in partition_columns
    )


# --------------------------------------------------------------------------------------------
# add.path URIs
# --------------------------------------------------------------------------------------------


def encode_path(relative: str) -> str:
    """Percent-encode a relative file path into the URI form ``add.path`` requires."""
    return quote(relative, safe=_URI_SAFE)


def decode_path(add_path: str) -> str:
    """The path an ``add.path`` URI names (relative, or absolute with its scheme kept)."""
    return unquote(add_path) if "%" in add_path else add_path


def data_file_path(store: "LogStore", decoded: str) -> str:
    """Where (in ``store.arrow_fs``) the file named by a *decoded* add path lives.

    String surgery rather than ``urlparse``: a decoded path may legitimately contain ``#`` or
    ``?``, which a URI parser would take for a fragment or a query.
    """
    m = _SCHEME.match(decoded)
    if m is None or len(m.group(1)) == 1:  # relative, or a Windows drive letter
        return store.data_path(decoded)
    scheme = m.group(1).lower()
    rest = decoded[m.end():]
    if scheme in ("file", "local"):
        if rest.startswith("//"):
            rest = rest[2:]
            if not rest.startswith("/"):  # file://host/path: drop the host
                rest = rest[rest.find("/"):] if "/" in rest else "/"
        return rest
    if scheme in ("s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss", "az"):
        return rest[2:] if rest.startswith("//") else rest
    if scheme == "memory":
        return "/" + rest.lstrip("/")
    return store.data_path(decoded)


# --------------------------------------------------------------------------------------------
# partitionValues strings
# --------------------------------------------------------------------------------------------


def serialize_partition_value(value: Any, arrow_type: pa.DataType) -> str | None:
    """A partition value as PROTOCOL.md writes it in ``partitionValues``; None stays None.

    The empty string also becomes None: Delta cannot tell '' from null in a partition value.
    """
    if isinstance(value, pa.Scalar):
        value = value.as_py()
    if value is None:
        return None
    t = arrow_type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        s = str(value)
        return s if s != "" else None
    if pa.types.is_boolean(t):
        return "true" if value else "false"
    if pa.types.is_integer(t):
        return str(int(value))
    if pa.types.is_floating(t):
        return _java_float_string(float(value), single=t.bit_width <= 32)
    if pa.types.is_decimal(t):
        return format(decimal.Decimal(value), "f")
    if pa.types.is_date(t):
        if isinstance(value, dt.datetime):
            value = value.date()
        return value.isoformat()
    if pa.types.is_timestamp(t):
        return _timestamp_string(value, aware=t.tz is not None)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t):
        return bytes(value).decode("latin-1") or None
    raise SchemaMismatchError(
        f"a column of type {t} cannot be a partition column; partition by a string, number, "
        f"boolean, date, timestamp, decimal or binary column"
    )


def _timestamp_string(value: Any, *, aware: bool) -> str:
    if not isinstance(value, dt.datetime):
        raise SchemaMismatchError(f"partition value {value!r} is not a timestamp")
    if aware and value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc)
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")


def _java_float_string(v: float, *, single: bool) -> str:
    """Java's ``Double.toString`` / ``Float.toString`` shape: ``1.0``, ``1.0E10``, ``NaN``."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    digits = _shortest_float32(v) if single else repr(v)
    d = decimal.Decimal(digits)
    if v == 0.0:
        return "-0.0" if math.copysign(1.0, v) < 0 else "0.0"
    if 1e-3 <= abs(v) < 1e7:
        text = format(d, "f")
        return text if "." in text else text + ".0"
    sign, digs, exp = d.normalize().as_tuple()
    mantissa = "".join(map(str, digs))
    exponent = exp + len(mantissa) - 1
    frac = mantissa[1:] or "0"
    return f"{'-' if sign else ''}{mantissa[0]}.{frac}E{exponent}"


def _shortest_float32(v: float) -> str:
    target = struct.unpack("f", struct.pack("f", v))[0]
    for precision in range(1, 10):
        text = f"{target:.{precision}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == target:
            return text
    return repr(target)
