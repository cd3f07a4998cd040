"""Typed constants: SQL literals cast to column types.

Owns where predicate text becomes typed values: a literal in a predicate (``d = '2024-01-01'``
against a date column, ``part = 3`` against int32). The ``partitionValues`` strings of ``add``
actions are parsed by :func:`deltatx.io.reader.parse_partition_values` (the one inverse of
``serialize_partition_value``), re-exported here.
"""

from __future__ import annotations

import datetime as _dt
from decimal import Decimal
from typing import Any

import pyarrow as pa

from ..errors import PredicateError
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
