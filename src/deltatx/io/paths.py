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
   ``YYYY-MM-DD`` dates, ``true``/``false``, UTC timestamps with 4-digit years, plain decimals,
   binary as the text its bytes spell in UTF-8, see :func:`serialize_binary`). The empty string
   means null. The one inverse is ``reader.parse_partition_value`` /
   ``reader.parse_partition_values`` (columnar), used by the reader and by ``deltatx.expr``
   (pruning, ``partition_values_table``) alike; the string-level parsers it delegates to for the
   types with more than one spelling in the wild (:func:`parse_timestamp_string`,
   :func:`parse_date_string`, :func:`parse_binary_string`) live here, next to their writers.
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


def missing_files(store: "LogStore", decoded: list[str]) -> list[str]:
    """Those of ``decoded`` (decoded add paths: relative to the table root, or absolute) whose
    file is gone, in one batched stat call."""
    if not decoded:
        return []
    gone = absent(store.arrow_fs, [data_file_path(store, p) for p in decoded])
    return [decoded[i] for i in gone]


def absent(filesystem: Any, locations: list[str]) -> list[int]:
    """Indexes of the ``locations`` (full paths on ``filesystem``) no file is at: one batched stat."""
    import pyarrow.fs as pafs

    infos = filesystem.get_file_info(locations) if locations else []
    return [i for i, info in enumerate(infos) if info.type == pafs.FileType.NotFound]


def first_and_more(names: list[str]) -> str:
    """``'a'`` or ``'a' and 3 more``: how an error names the files it found (never empty)."""
    return f"{names[0]!r}" + (f" and {len(names) - 1} more" if len(names) > 1 else "")


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
        return serialize_binary(bytes(value)) or None
    raise SchemaMismatchError(
        f"a column of type {t} cannot be a partition column; partition by a string, number, "
        f"boolean, date, timestamp, decimal or binary column"
    )


def _timestamp_string(value: Any, *, aware: bool) -> str:
    """``YYYY-MM-DD HH:MM:SS.ffffff`` (UTC for zoned types), always with a 4-digit year.

    Not ``strftime``: glibc's ``%Y`` does not zero-pad years before 1000 (``999-12-31 …``), a
    spelling Java's and Rust's parsers (and ``datetime.fromisoformat``) refuse.
    """
    if not isinstance(value, dt.datetime):
        raise SchemaMismatchError(f"partition value {value!r} is not a timestamp")
    if aware and value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc)
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d} "
        f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}"
    )


#: a partition string that is nothing but ``\uXXXX`` escapes, taken as one byte per escape
_ESCAPED_BINARY = re.compile(r"^(?:\\u[0-9A-Fa-f]{4})+$")


def serialize_binary(value: bytes) -> str:
    r"""A binary partition value as its ``partitionValues`` string.

    Decision (PROTOCOL.md only says "a string of escaped binary values", e.g. ``"\u0001\u0002"``,
    which is ambiguous above 0x7F): the bytes are decoded as UTF-8, because that is what every
    peer does both ways. Spark derives the value with ``Cast(binary -> string)``
    (``UTF8String.fromBytes``) and reads it back with the reverse cast (the string's UTF-8 bytes);
    delta-kernel (Java ``new String(bytes, UTF_8)``, Rust ``from_utf8_lossy``), deltalake and
    DuckDB do the same. So ``"é".encode()`` is written as ``"é"`` and every engine reads the same
    two bytes back. deltatx wrote one character per byte (latin-1) before; such values of bytes
    >= 0x80 now read as the peers always read them (see :func:`parse_binary_string`).

    Bytes that are not valid UTF-8 have no faithful spelling for the peers (Spark and the kernels
    would substitute U+FFFD, losing the value). deltatx writes those — and valid UTF-8 whose text
    happens to be only ``\uXXXX`` escapes, which would otherwise read back decoded — as the
    protocol's escaped form, one ``\u00XX`` per byte, so that deltatx at least reads back the
    exact bytes; other engines read the escape text.
    """
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and not _ESCAPED_BINARY.match(text):
        return text
    return "".join(f"\\u{b:04x}" for b in value)


def parse_binary_string(s: str) -> bytes:
    r"""The bytes of a binary ``partitionValues`` string (inverse of :func:`serialize_binary`).

    Its UTF-8 bytes, as Spark, delta-kernel, deltalake and DuckDB read it; a string made only of
    ``\uXXXX`` escapes (the protocol's example spelling, and what deltatx writes for bytes that
    are not UTF-8) is one byte per escape.
    """
    if _ESCAPED_BINARY.match(s):
        return bytes(int(s[i + 2:i + 6], 16) for i in range(0, len(s), 6))
    return s.encode("utf-8", "surrogatepass")


_LOOSE_DATE = re.compile(r"^(\d{1,4})-(\d{1,2})-(\d{1,2})")


def _padded_date_prefix(s: str) -> str | None:
    """``YYYY-MM-DD`` from a date with an unpadded year/month/day (``999-1-2``), else None."""
    m = _LOOSE_DATE.match(s)
    if m is None:
        return None
    year, month, day = (int(g) for g in m.groups())
    return f"{year:04d}-{month:02d}-{day:02d}" + s[m.end():].rstrip()


def parse_date_string(s: str) -> dt.date:
    """A date ``partitionValues`` string; an unpadded year (``999-12-31``) is accepted too."""
    text = s.strip()
    try:
        return dt.date.fromisoformat(text[:10])
    except ValueError:
        padded = _padded_date_prefix(text)
        if padded is None:
            raise
        return dt.date.fromisoformat(padded[:10])


def parse_timestamp_string(s: str, *, aware: bool) -> dt.datetime:
    """A timestamp ``partitionValues`` string as a datetime (UTC-aware when ``aware``).

    Accepts the protocol's ``YYYY-MM-DD HH:MM:SS[.ffffff]``, ISO-8601 with ``T`` and a zone, and
    the unpadded years (``999-12-31 00:00:00.000000``) deltatx wrote through glibc's ``strftime``
    before it wrote 4 digits — logs holding them must stay readable. A text without a zone is UTC
    (zoned types) or wall time (timestamp_ntz).
    """
    text = s.strip()
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        padded = _padded_date_prefix(text)
        if padded is None:
            raise
        value = dt.datetime.fromisoformat(padded)
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc)
        return value if aware else value.replace(tzinfo=None)
    return value.replace(tzinfo=dt.timezone.utc) if aware else value


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
