"""Typed constants: SQL literals cast to column types.

Owns where predicate text becomes typed values: a literal in a predicate (``d = '2024-01-01'``
against a date column, ``part = 3`` against int32). The ``partitionValues`` strings of ``add``
actions are parsed by :func:`deltatx.txnlog.partition_values.parse_partition_values` (the one inverse of
``serialize_partition_value``), re-exported here.
"""

from __future__ import annotations

import datetime as _dt
import re
from decimal import Decimal
from typing import Any

import pyarrow as pa

from ..errors import PredicateError
from .model import Literal

_NUMERIC = (int, float, Decimal)


def integer_range(t: pa.DataType) -> tuple[int, int]:
    """The smallest and largest value of an Arrow integer type."""
    bits = t.bit_width
    if pa.types.is_signed_integer(t):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def plain_type(t: pa.DataType) -> pa.DataType:
    """Storage variants folded to the type values are compared as."""
    if pa.types.is_dictionary(t):
        return plain_type(t.value_type)
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    return t


#: the DECIMAL an integer type widens to (Spark's DecimalType.forType)
_INTEGER_DECIMALS = {8: 3, 16: 5, 32: 10, 64: 20}
MAX_DECIMAL_PRECISION = 38


def bounded_decimal(precision: int, scale: int) -> pa.Decimal128Type:
    """Spark's ``DecimalType.adjustPrecisionScale``: a result wider than 38 digits keeps its
    integer digits and gives up fraction digits, down to min(scale, 6) of them."""
    if precision <= MAX_DECIMAL_PRECISION:
        return pa.decimal128(max(precision, 1), scale)
    integer_digits = precision - scale
    scale = max(MAX_DECIMAL_PRECISION - integer_digits, min(scale, 6))
    return pa.decimal128(MAX_DECIMAL_PRECISION, scale)


def decimal_of(t: pa.DataType, literal: Any = None) -> pa.Decimal128Type | None:
    """``t`` as the DECIMAL Spark widens it to in decimal arithmetic and comparisons (None when
    it is not exact numeric). An integer constant takes only the digits it has (Spark's
    ``DecimalType.fromLiteral``): ``dec(10,2) / 3`` is ``decimal(14,6)``, not ``(21,13)``."""
    if pa.types.is_decimal(t):
        return t  # type: ignore[return-value]
    if pa.types.is_integer(t):
        if type(literal) is int:
            return pa.decimal128(max(len(str(abs(literal))), 1), 0)
        return pa.decimal128(_INTEGER_DECIMALS[t.bit_width], 0)
    return None


def common_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type Spark compares ``a`` with ``b`` in (ANSI type coercion), or None where Arrow's
    own promotion already agrees (or there is none).

    Numbers: integers widen to the wider integer; a floating type with anything but FLOAT is
    DOUBLE (ANSI mode skips FLOAT when it widens: an INT 16777217 is no FLOAT 16777216.0); two
    DECIMALs (or DECIMAL and an integer) take the wider DECIMAL, bounded at 38 digits as Spark
    bounds it. A STRING with a number is read as a number: BIGINT for an integer, DOUBLE
    otherwise (``'05' = 5`` is TRUE). A DATE with a timestamp is that timestamp type (midnight
    of the date), and TIMESTAMP_NTZ with TIMESTAMP is TIMESTAMP (the session zone, UTC)."""
    a, b = plain_type(a), plain_type(b)
    if a.equals(b):
        return a
    temporal = _common_temporal(a, b)
    if temporal is not None:
        return temporal
    numeric_a, numeric_b = is_number(a), is_number(b)
    if pa.types.is_string(a) and numeric_b or pa.types.is_string(b) and numeric_a:
        number = b if numeric_b else a
        return pa.int64() if pa.types.is_integer(number) else pa.float64()
    if not (numeric_a and numeric_b):
        return None
    if pa.types.is_floating(a) or pa.types.is_floating(b):
        return pa.float32() if pa.types.is_float32(a) and pa.types.is_float32(b) else pa.float64()
    if pa.types.is_decimal(a) or pa.types.is_decimal(b):
        da, db = decimal_of(a), decimal_of(b)
        if da is None or db is None or pa.types.is_decimal256(a) or pa.types.is_decimal256(b):
            return None
        scale = max(da.scale, db.scale)
        return bounded_decimal(max(da.precision - da.scale, db.precision - db.scale) + scale, scale)
    if pa.types.is_unsigned_integer(a) or pa.types.is_unsigned_integer(b):
        return None  # not a Spark type: Arrow's promotion
    return a if a.bit_width >= b.bit_width else b


def _common_temporal(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    if pa.types.is_date(a) and pa.types.is_timestamp(b):
        return b
    if pa.types.is_timestamp(a) and pa.types.is_date(b):
        return a
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b) and (a.tz is None) != (b.tz is None):
        zoned = a if a.tz is not None else b
        unit = a.unit if _UNIT_RANK[a.unit] >= _UNIT_RANK[b.unit] else b.unit
        return pa.timestamp(unit, tz=zoned.tz)
    return None


_UNIT_RANK = {"s": 0, "ms": 1, "us": 2, "ns": 3}


def is_number(t: pa.DataType) -> bool:
    """An integer, floating point or decimal type (what Spark coerces among numbers)."""
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _scalar_value(s: pa.Scalar) -> Any:
    if pa.types.is_timestamp(s.type) and s.type.unit == "ns":
        return s.cast(pa.int64()).as_py()  # keep full precision; Literal pairs it with its type
    try:
        return s.as_py()
    except (OverflowError, ValueError):
        if not pa.types.is_timestamp(s.type):
            raise
        # past Python's years 1..9999 (CAST(9223372036854 AS TIMESTAMP) is in year 294247): the
        # stored count, which Literal pairs with its type as it does nanoseconds
        return s.cast(pa.int64()).as_py()


def _from_string(text: str, target: pa.DataType) -> pa.Scalar:
    if pa.types.is_timestamp(target):
        # the row-level CAST itself, so that a constant reads as a column of the same text does
        # (a zone after the time: its instant for a TIMESTAMP, dropped for a TIMESTAMP_NTZ, and
        # refused where Spark knows no such zone); imported here because rows imports this module
        from .rows import cast_values

        try:
            return cast_values(pa.array([text], pa.string()), target)[0]
        except PredicateError as exc:
            raise ValueError(str(exc)) from None
    if pa.types.is_date(target):
        return pa.scalar(parse_date_text(text), type=target)
    if pa.types.is_boolean(target):
        lowered = text.strip(SPARK_INTEGER_TRIM).lower()
        if lowered not in SPARK_TRUE and lowered not in SPARK_FALSE:
            raise pa.ArrowInvalid(f"{text!r} is not a boolean")
        return pa.scalar(lowered in SPARK_TRUE)
    if pa.types.is_decimal(target):
        return pa.scalar(Decimal(number_text(text, target)), type=target)
    if pa.types.is_binary(target):
        return pa.scalar(text.encode(), type=target)
    return pa.array([number_text(text, target) if is_number(target) else text]).cast(target)[0]


#: what Spark trims around text read as a number: its integer and boolean casts drop the ASCII
#: bytes Java calls whitespace or control (DEL included); its floating and DECIMAL casts use
#: Java's ``String.trim``, which keeps DEL
SPARK_INTEGER_TRIM = "".join(chr(c) for c in range(0x21)) + "\x7f"
SPARK_FRACTION_TRIM = "".join(chr(c) for c in range(0x21))
_HEXADECIMAL = re.compile(r"^[+-]?0[xX]")
_PLUS = re.compile(r"^\+(?=[0-9.])")
#: Spark's words for booleans read from text (any case)
SPARK_TRUE, SPARK_FALSE = frozenset({"t", "true", "y", "yes", "1"}), frozenset({"f", "false", "n", "no", "0"})


def spark_trim_for(target: pa.DataType) -> str:
    """The characters Spark trims around text it reads as ``target`` (a number or boolean)."""
    return SPARK_FRACTION_TRIM if pa.types.is_floating(target) or pa.types.is_decimal(target) else SPARK_INTEGER_TRIM


def number_text(text: str, target: pa.DataType) -> str:
    """``text`` trimmed as Spark trims a number read as ``target``, a leading '+' dropped;
    ValueError for the forms Python or Arrow read and Spark does not: ``1_000``, ``0x10`` as an
    integer, and digits other than ASCII ones except into a DECIMAL (Java's BigDecimal reads them)."""
    trimmed = text.strip(spark_trim_for(target))
    if ("_" in trimmed or pa.types.is_integer(target) and _HEXADECIMAL.match(trimmed)
            or not pa.types.is_decimal(target) and not trimmed.isascii()):
        raise ValueError(f"{text!r} is no number Spark reads as {target}")
    return _PLUS.sub("", trimmed, count=1)


#: Spark's DATE text: yyyy, yyyy-[m]m, yyyy-[m]m-[d]d, optionally followed by ' ' or 'T' and anything
_DATE_TEXT = re.compile(r"^(\d{4})(?:-(\d{1,2})(?:-(\d{1,2})(?:[ T].*)?)?)?$", re.DOTALL)


def parse_date_text(text: str) -> _dt.date:
    """A date string as Spark's CAST reads it (``'2024'``, ``'2024-1-2'``, ``'2024-01-02 10:00'``);
    ValueError when it is none."""
    m = _DATE_TEXT.match(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a date")
    year, month, day = int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1)
    return _dt.date(year, month, day)  # ValueError for a month or day that does not exist


def _lossless(value: Any, source: pa.DataType, target: pa.DataType) -> pa.Scalar | None:
    """``value`` as ``target`` if that keeps it exactly, else None."""
    if isinstance(value, _dt.datetime) and pa.types.is_date(target):
        midnight = value.hour == value.minute == value.second == value.microsecond == 0
        return pa.scalar(value.date(), type=target) if midnight else None
    if type(value) is int and pa.types.is_integer(target) and pa.types.is_integer(source):
        try:  # an integer into an integer type is exact or out of range: no cast round trip
            return pa.scalar(value, type=target)
        except (OverflowError, pa.ArrowInvalid):
            return None
    if isinstance(value, (int, Decimal)) and not isinstance(value, bool) and pa.types.is_decimal(target):
        try:
            s = pa.scalar(Decimal(value), type=target)
        except (pa.ArrowInvalid, ValueError, ArithmeticError):
            return None
        return s if s.as_py() == Decimal(value) else None
    try:
        s = pa.scalar(value, type=source).cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
        return None
    if isinstance(value, _NUMERIC) and not isinstance(value, bool):
        back = s.as_py()
        if isinstance(back, _NUMERIC) and back != value:
            return None
    return s


def convert_literal(lit: Literal, target: pa.DataType, *, context: str = "", strict: bool = True) -> Literal:
    """``lit`` typed as ``target``.

    A string is parsed as the target type (``'2024-01-01'`` -> date); failing to parse raises
    :class:`PredicateError` (``strict``) or returns ``lit`` unchanged. Other values convert only
    when no information is lost (``3`` -> int32 yes, ``3.5`` -> int32 no: ``lit`` is kept and the
    comparison happens in the wider type).
    """
    target = plain_type(target)
    if pa.types.is_null(target) or pa.types.is_nested(target):
        return lit
    if lit.value is None:
        return Literal(None, target)
    if lit.type is not None and lit.type.equals(target):
        return lit
    source = lit.arrow_type
    if isinstance(lit.value, str) and not pa.types.is_string(target):
        try:
            return Literal(_scalar_value(_from_string(lit.value, target)), target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError, ArithmeticError):
            if not strict:
                return lit
            where = f" in {context}" if context else ""
            raise PredicateError(f"cannot read {lit} as {target}{where}") from None
    converted = _lossless(lit.value, source, target)
    if converted is None:
        return lit
    return Literal(_scalar_value(converted), target)
