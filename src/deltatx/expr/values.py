"""Typed constants: SQL literals cast to column types, and partition-value strings parsed.

Owns the two places where text becomes typed values outside the data files: a literal in a
predicate (``d = '2024-01-01'`` against a date column, ``part = 3`` against int32) and the
``partitionValues`` strings of ``add`` actions (PROTOCOL.md "Partition Value Serialization":
``""`` or a missing key is NULL, dates ``YYYY-MM-DD``, timestamps ``YYYY-MM-DD HH:MM:SS[.f]`` or
ISO-8601 with ``Z``, booleans ``true``/``false``, numbers as Java prints them).
"""

from __future__ import annotations

import datetime as _dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidTableError, PredicateError
from ..txnlog.stats import parse_timestamps
from .model import Literal

_NUMERIC = (int, float, Decimal)


def plain_type(t: pa.DataType) -> pa.DataType:
    """Storage variants folded to the type values are compared as."""
    if pa.types.is_dictionary(t):
        return plain_type(t.value_type)
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    return t


def _scalar_value(s: pa.Scalar) -> Any:
    if pa.types.is_timestamp(s.type) and s.type.unit == "ns":
        return s.cast(pa.int64()).as_py()  # keep full precision; Literal pairs it with its type
    return s.as_py()


def _from_string(text: str, target: pa.DataType) -> pa.Scalar:
    if pa.types.is_timestamp(target):
        return parse_timestamps(pa.array([text]), target)[0]
    if pa.types.is_date(target):
        return pa.array([text.strip()[:10]]).cast(target)[0]
    if pa.types.is_boolean(target):
        lowered = text.strip().lower()
        if lowered not in ("true", "false"):
            raise pa.ArrowInvalid(f"{text!r} is not a boolean")
        return pa.scalar(lowered == "true")
    if pa.types.is_decimal(target):
        return pa.scalar(Decimal(text.strip()), type=target)
    if pa.types.is_binary(target):
        return pa.scalar(text.encode(), type=target)
    return pa.array([text.strip() if not pa.types.is_string(target) else text]).cast(target)[0]


def _lossless(value: Any, source: pa.DataType, target: pa.DataType) -> pa.Scalar | None:
    """``value`` as ``target`` if that keeps it exactly, else None."""
    if isinstance(value, _dt.datetime) and pa.types.is_date(target):
        midnight = value.hour == value.minute == value.second == value.microsecond == 0
        return pa.scalar(value.date(), type=target) if midnight else None
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


# --------------------------------------------------------------------------------------------
# Partition values
# --------------------------------------------------------------------------------------------


def _parse_partition_strings(strings: pa.Array, t: pa.DataType) -> pa.Array:
    if pa.types.is_string(t):
        return strings
    if pa.types.is_binary(t):
        return pc.cast(strings, t)
    if pa.types.is_timestamp(t):
        return parse_timestamps(strings, t)
    if pa.types.is_date(t):
        return pc.cast(pc.utf8_slice_codeunits(pc.utf8_trim_whitespace(strings), 0, 10), t)
    if pa.types.is_boolean(t):
        return pc.cast(pc.utf8_lower(pc.utf8_trim_whitespace(strings)), t)
    return pc.cast(pc.utf8_trim_whitespace(strings), t)


def parse_partition_values(strings: pa.Array | pa.ChunkedArray, t: pa.DataType, column: str) -> pa.Array:
    """Serialized partition values -> typed values (``""`` and null -> NULL).

    Raises :class:`InvalidTableError` naming the column and a bad value if some cannot be read.
    """
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks() if strings.num_chunks else pa.array([], pa.string())
    t = plain_type(t)
    nulled = pc.if_else(pc.equal(strings, ""), pa.scalar(None, pa.string()), strings)
    try:
        out = _parse_partition_strings(nulled, t)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        bad = "?"
        for value in pc.unique(nulled).to_pylist():  # error path: find one offender to name
            if value is None:
                continue
            try:
                _parse_partition_strings(pa.array([value], pa.string()), t)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                bad = value
                break
        raise InvalidTableError(
            f"partition column {column!r}: value {bad!r} in the log cannot be read as {t} ({exc})"
        ) from None
    return out if out.type.equals(t) else pc.cast(out, t)
