"""partitionValues: PROTOCOL.md's string per partition value, written and read back.

Why in txnlog: the strings are part of the log (``add.partitionValues``, a checkpoint's
``partitionValues_parsed``), so the log's own code (typed checkpoints) and the data path (the
reader, the writers, pruning) share one codec; io builds on it, never the other way round.

The serialization per type: numbers ``toString`` (Java's text for floats), ``YYYY-MM-DD``
dates, ``true``/``false``, UTC timestamps with 4-digit years, plain decimals, binary as the
text its bytes spell in UTF-8 (:func:`serialize_binary`); the empty string means null. The
one inverse is :func:`parse_partition_value` / :func:`parse_partition_values` (columnar); the
string-level parsers it delegates to accept the other spellings found in the wild
(:func:`parse_timestamp_string`, :func:`parse_date_string`, :func:`parse_binary_string`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import struct
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidTableError, SchemaMismatchError
from .stats import _physical_name


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


# --------------------------------------------------------------------------------------------
# Partition values: strings -> typed values
# --------------------------------------------------------------------------------------------


def parse_partition_value(s: str | None, arrow_type: pa.DataType, column: str | None = None) -> Any:
    """The typed value of one ``partitionValues`` string (inverse of ``serialize_partition_value``)."""
    if s is None or s == "":
        return None
    t = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
    try:
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
            return s
        if pa.types.is_boolean(t):
            low = s.strip().lower()
            if low not in ("true", "false"):
                raise ValueError("not true/false")
            return low == "true"
        if pa.types.is_integer(t):
            return int(s)
        if pa.types.is_floating(t):
            return float(s)
        if pa.types.is_decimal(t):
            return decimal.Decimal(s)
        if pa.types.is_date(t):
            return parse_date_string(s)
        if pa.types.is_timestamp(t):
            return parse_timestamp_string(s, aware=t.tz is not None)
        if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t):
            return parse_binary_string(s)
    except (ValueError, ArithmeticError) as exc:
        where = f"partition column {column!r}: value" if column is not None else "partition value"
        raise InvalidTableError(
            f"{where} {s!r} is not a valid {t} ({exc}); the log's partitionValues do not "
            f"match the table schema"
        ) from None
    raise InvalidTableError(f"partition column type {t} is not supported")


def parse_partition_values(
    strings: pa.Array | pa.ChunkedArray, arrow_type: pa.DataType, column: str | None = None
) -> pa.Array:
    """A column of ``partitionValues`` strings as ``arrow_type`` (``""`` and null -> NULL).

    Each distinct string is parsed once (:func:`parse_partition_value`); a bad one raises
    :class:`InvalidTableError` naming ``column`` and the value.
    """
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks() if strings.num_chunks else pa.array([], pa.string())
    strings = pc.if_else(pc.equal(strings, ""), pa.scalar(None, pa.string()), strings)
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return strings.cast(arrow_type)
    encoded = pc.dictionary_encode(strings)
    distinct = encoded.dictionary
    typed = None
    if pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_boolean(arrow_type) \
            or pa.types.is_decimal(arrow_type) or pa.types.is_date(arrow_type):
        try:
            typed = pc.cast(distinct, arrow_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            typed = None
    if typed is None:
        typed = pa.array(
            [parse_partition_value(s, arrow_type, column) for s in distinct.to_pylist()], type=arrow_type
        )
    return typed.take(encoded.indices)


def partition_column(files: pa.Table, field: pa.Field) -> pa.Array:
    """The typed values of partition column ``field``, one per file (row of ``files``).

    Values are looked up under the column-mapping physical name, then (logs written without
    column mapping) under the name; a missing ``partitionValues`` column means all null.
    """
    if "partitionValues" not in files.column_names:
        return pa.nulls(files.num_rows, field.type)
    pv = files.column("partitionValues")
    physical = _physical_name(field)
    strings = pc.map_lookup(pv, pa.scalar(physical), "first")
    if physical != field.name:
        strings = pc.coalesce(strings, pc.map_lookup(pv, pa.scalar(field.name), "first"))
    return parse_partition_values(strings, field.type, field.name)


def partition_values_table(files: pa.Table, schema: pa.Schema, partition_columns: Sequence[str]) -> pa.Table:
    """One typed column per partition column, one row per file (columnar, no per-file objects).

    Partition columns are matched to ``schema`` case-insensitively (ones it lacks are left out);
    the output uses the schema's fields.
    """
    by_lower = {f.name.lower(): f for f in reversed(schema)}
    fields = [schema.field(c) if c in schema.names else by_lower[c.lower()]
              for c in partition_columns if c in schema.names or c.lower() in by_lower]
    return pa.table([partition_column(files, f) for f in fields], schema=pa.schema(fields))
