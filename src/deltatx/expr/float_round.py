"""Spark's ROUND and BROUND of DOUBLE and FLOAT values, columnar.

Spark rounds a DOUBLE ``d`` to ``n`` places as ``BigDecimal.valueOf(d).setScale(n, mode).doubleValue()``:
the decimal it rounds is ``Double.toString(d)``, the shortest text that reads back as ``d``, not the
binary value itself. So ``round(1.005, 2)`` is 1.01 (the double nearest 1.005 is 1.00499999999999989...,
which rounds to 1.0 as Arrow's ``round`` does it), ``round(0.285, 2)`` is 0.29, ``round(-1.005, 2)``
is -1.01; NaN and the infinities come back as they are, and a result of zero is 0.0 (a BigDecimal has
no -0). A FLOAT is widened to DOUBLE first (``round(1.005f, 2)`` rounds 1.0049999952316284 and is 1.0)
and the decimal result is read back as the nearest FLOAT.

Why the binary rounding is right almost everywhere: the shortest text and the binary value are within
half a unit in the last place of each other, and the product ``x * 10^n`` carries one rounding of the
same size. Rounding both gives the same whole number unless a half-way point ``t = (k + 1/2) * 10^-n``
lies within those few units of the product, which is tested for each value, columnar. Near such a
point the answer is still exact and columnar: where a double's rounding interval is narrow at that
scale, ``t`` is the shortest text of exactly one double (the one nearest ``t``, which rounds as a tie),
and any other double is on the side of ``t`` it compares to that one. Only values near a tie whose
interval is wide (``|x| * 10^n`` above 2^48), and places beyond 10^22 (no exact power of ten), are
rounded from their text with Python's ``decimal`` module, once per distinct value. Values with every
digit of their shortest text above the rounding place come back unchanged, values below half a unit
of it become 0.0.

Both back ends of the row evaluator (lazy dataset expressions and eager arrays) call the same Arrow
scalar function (:func:`float_round_function`), so they cannot disagree.
"""

from __future__ import annotations

import threading
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Context, Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: the largest power of ten a double holds exactly (so ``k / 10^n`` rounds once, as Java's own
#: ``BigDecimal.doubleValue`` fast path computes it)
_EXACT_POWERS = 22
#: how close (relative to the scaled value) to a half-way point a value is decided by the tie test
#: rather than by its binary rounding: a few units in the last place, generously (a further value
#: costs a comparison, or the exact path)
_TIE_SLACK = 1e-15
#: below this a double's rounding interval, at the scale rounded to, is narrower than 1/10 (its unit
#: in the last place at most 1/16): a tie point in it is then its only decimal of that many digits, so
#: the shortest text of the double nearest a tie point is the tie point itself; near a tie and above
#: this, values go to the exact path
_NARROW_INTERVALS = 2.0**48
#: a context wide enough that quantizing a value of at most ~18 digits never rounds or traps
_EXACT = Context(prec=100, Emin=-999999, Emax=999999)


def _power_of_ten(exponent: int) -> float:
    """10^exponent as a float, inf above the double range and 0.0 below it (used for bounds only)."""
    if exponent > 308:
        return float("inf")
    if exponent < -330:
        return 0.0
    return float(Decimal(1).scaleb(exponent))


def _exact_round(value: float, digits: int, half_even: bool) -> Decimal:
    """Spark's rounding of one double, exactly: its shortest text (Python's repr is the same shortest
    round-trip digits as Java's Double.toString) rounded to ``digits`` places."""
    shortest = Decimal(repr(value))
    return shortest.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_EVEN if half_even else ROUND_HALF_UP,
                             context=_EXACT)


def _nearest_float32(value: Decimal) -> np.float32:
    """The FLOAT nearest ``value`` (ties to even), as Java's BigDecimal.floatValue gives it: through
    the double first could round twice."""
    guess = np.float32(float(value))
    if not np.isfinite(guess):
        return guess
    target = Fraction(value)
    candidates = (np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf)))
    return min(candidates, key=lambda c: (abs(Fraction(float(c)) - target), int(c.view(np.uint32)) & 1))


def _float32_double_rounding(doubles: np.ndarray) -> np.ndarray:
    """TRUE where a double lies exactly half-way between two FLOATs: there, reading the double back
    as a FLOAT may not be the FLOAT nearest the decimal the double was rounded from."""
    with np.errstate(over="ignore", invalid="ignore"):
        single = doubles.astype(np.float32)
        back = single.astype(np.float64)
        gap = doubles - back
        toward = np.where(gap > 0, np.float32(np.inf), np.float32(-np.inf)).astype(np.float32)
        other = np.nextafter(single, toward).astype(np.float64)
        return (gap != 0) & np.isfinite(back) & (gap == other - doubles)


def round_like_spark(values: np.ndarray, digits: int, half_even: bool, single: bool) -> np.ndarray:
    """Spark's ROUND (``half_even``: BROUND) of ``values`` to ``digits`` places (negative: left of
    the point). ``values`` are doubles (a FLOAT column widened); ``single`` gives the result as
    FLOAT. NaN and infinities are returned unchanged."""
    x = values.astype(np.float64)
    out = x.copy()
    finite = np.isfinite(x)
    magnitude = np.abs(x)
    unchanged = finite & (magnitude >= _power_of_ten(17 - digits))  # no digit of the text below the place
    zero = finite & (magnitude < 0.4 * _power_of_ten(-digits))  # below half a unit of the place
    rest = finite & ~unchanged & ~zero
    if -_EXACT_POWERS <= digits <= _EXACT_POWERS:
        power = float(10 ** abs(digits))
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = np.abs(x * power if digits >= 0 else x / power)
            below = np.floor(scaled)
            near_tie = np.abs(scaled - below - 0.5) <= scaled * _TIE_SLACK
            whole = np.abs(np.rint(scaled)) if half_even else np.floor(scaled + 0.5)
            # Near a tie the decision is exact, columnar, where the rounding intervals are narrow:
            # the tie point t = (below + 1/2) * 10^-digits is then the shortest text of the one
            # double nearest it, which rounds as a tie; every other double lies on one side of t,
            # the side its shortest text is on, and compares so with that nearest double.
            twice_up = 2 * below + 1  # exact: below 2^48
            tie = twice_up / (2 * power) if digits >= 0 else twice_up * (power / 2)  # one rounding: the nearest double
            up = (magnitude > tie) | ((magnitude == tie) & ((below % 2 == 1) if half_even else True))
            whole = np.where(near_tie, below + up, whole)
            signed = np.copysign(whole, x)
            binary = signed / power if digits >= 0 else signed * power
        out[rest] = binary[rest]
        exact = rest & near_tie & (scaled >= _NARROW_INTERVALS)
    else:  # 10^digits is no exact double: every value in between is rounded from its text
        exact = rest
    out[zero] = 0.0
    if single:
        result = out.astype(np.float32)
        exact = exact | (rest & _float32_double_rounding(out))
    else:
        result = out
    if exact.any():
        distinct, where = np.unique(x[exact], return_inverse=True)
        rounded = [_exact_round(float(v), digits, half_even) for v in distinct]
        fixed = (np.array([_nearest_float32(r) for r in rounded], np.float32) if single
                 else np.array([float(r) for r in rounded], np.float64))
        result[exact] = fixed[where.reshape(-1)]
    result[result == 0] = 0  # -0.0 is 0.0: a BigDecimal has no negative zero
    return result


def _round_batch(half_even: bool, single: bool) -> Any:
    def run(ctx: Any, values: Any, digits: Any) -> Any:
        places = digits.as_py() if isinstance(digits, pa.Scalar) else digits[0].as_py()
        scalar = isinstance(values, pa.Scalar)
        array = pa.array([values.as_py()], values.type) if scalar else values
        nulls = array.is_null().to_numpy(zero_copy_only=False)
        numbers = array.to_numpy(zero_copy_only=False)
        rounded = round_like_spark(numbers, places, half_even, single)
        out = pa.array(rounded, pa.float32() if single else pa.float64(), mask=nulls if nulls.any() else None)
        return out[0] if scalar else out

    return run


_REGISTERED: dict[tuple[pa.DataType, bool], str] = {}
_LOCK = threading.Lock()


def float_round_function(value_type: pa.DataType, half_even: bool) -> str:
    """The name of the Arrow scalar function ``(values, digits: int32) -> values`` computing Spark's
    ROUND (``half_even``: BROUND) of a FLOAT or DOUBLE column, registered once per type and mode
    (Arrow matches a function's argument types exactly)."""
    key = (value_type, half_even)
    with _LOCK:
        name = _REGISTERED.get(key)
        if name is not None:
            return name
        single = pa.types.is_float32(value_type)
        name = f"deltatx_{'bround' if half_even else 'round'}_{'float' if single else 'double'}"
        doc = {"summary": f"Spark's {'BROUND' if half_even else 'ROUND'} of a {'FLOAT' if single else 'DOUBLE'}",
               "description": "the value's shortest decimal text rounded to the given places, read back"}
        try:
            pc.register_scalar_function(_round_batch(half_even, single), name, doc,
                                                {"values": value_type, "digits": pa.int32()}, value_type)
        except pa.ArrowKeyError:  # registered by an earlier import of this module: the same function
            pass
        _REGISTERED[key] = name
        return name
