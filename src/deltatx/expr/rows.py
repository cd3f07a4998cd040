"""Row-level evaluation: an :class:`~deltatx.expr.model.Expr` as Arrow compute.

Owns SQL semantics over rows. One lowering serves two back ends: :func:`to_arrow` builds a lazy
``pyarrow.compute.Expression`` (for ``Table.filter`` and datasets), :func:`evaluate` computes values
eagerly over a table (UPDATE ``SET`` values, MERGE conditions, partition-value evaluation in
pruning). Semantics are SQL's three-valued logic: comparisons with NULL are NULL, ``AND``/``OR`` are
Kleene, ``IN`` with a NULL in the list is NULL when nothing matches; a WHERE keeps only TRUE rows
(:func:`matches`), and DELETE keeps ``NOT coalesce(pred, false)`` (:func:`rows_to_keep`).

Arithmetic follows Spark's ANSI mode where Arrow can: ``+ - *`` raise on overflow, ``/`` is
floating-point division (exact DECIMAL division when a side is DECIMAL, with Spark's result
type), ``%`` takes the sign of the dividend, ``DIV`` is integral division as BIGINT, and a zero
divisor of a non-NULL dividend fails (DIVIDE_BY_ZERO) except inside a branch Spark may skip, where
it gives NULL (:func:`_refuse_zero_divisor`). DECIMAL ``+ - * %`` have Spark's result types (:func:`decimal_result_type`:
an integer constant counts with its own digits), bounded at 38 digits as Spark bounds them. ``round``
of a float rounds its shortest decimal text (:mod:`~deltatx.expr.float_round`). Operands of different
types meet in Spark's common type (:func:`~deltatx.expr.values.common_type`): a BIGINT with a
DOUBLE is cast to DOUBLE even where that rounds, a STRING compared with a number is read as one
(``'05' = 5``; text that is no number fails, as ANSI's CAST_INVALID_INPUT). Every conversion,
implicit or a written CAST, is :func:`_spark_cast` (constants too: :func:`cast_constant`);
``TRY_CAST`` is the same conversion with NULL for each value it fails on (:func:`_try_cast_values`;
in a lazy expression, a Python scalar function Arrow calls on each batch: :func:`_try_cast_udf`).
Float comparisons follow Spark, not IEEE: NaN equals NaN and is larger than every other value,
and -0.0 equals 0.0 (``IN`` too). A lazy form sees column types only through the ``schema`` it
is given. (Scans apply float filters after reading, not in Arrow's Parquet scan: io/reader.py.)
A dictionary-encoded column (or a large or view string) is read as its values, of the plain
type (:func:`~deltatx.expr.values.plain_type`: Arrow's string kernels have no dictionary or view
kernels), in the lazy form too when its ``schema`` says so.
A column qualified as ``t.id`` that is still qualified when evaluated names the flat column
``"t.id"`` (the convention for a joined table of aliased inputs).
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
import re
import threading
import zoneinfo
from decimal import Decimal
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import PredicateError
from .float_round import float_round_function
from .sqltext import type_sql
from .values import (MAX_DECIMAL_PRECISION, SPARK_INTEGER_TRIM, _scalar_value, bounded_decimal, common_type,
                     decimal_of, integer_range, is_number, plain_type, spark_trim_for)
from .model import (
    And,
    Arithmetic,
    Case,
    Cast,
    Column,
    Comparison,
    Expr,
    Func,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
)

_COMPARE = {
    "=": "equal",
    "!=": "not_equal",
    "<": "less",
    "<=": "less_equal",
    ">": "greater",
    ">=": "greater_equal",
}
_ARITH = {"+": "add_checked", "-": "subtract_checked", "*": "multiply_checked"}
_NULL_BOOL = pa.scalar(None, pa.bool_())


class _Backend:
    """How leaves and calls are built: lazily (Expression) or eagerly (arrays)."""

    #: how many branches Spark might not evaluate the part being lowered sits in (see
    #: :func:`_guarded`): a zero divisor fails only outside them (:func:`_refuse_zero_divisor`)
    guarded = 0

    def column(self, c: Column) -> Any:
        raise NotImplementedError

    def float_type(self, e: Expr, lowered: Any) -> pa.DataType | None:
        """The floating-point type of ``e`` (lowered to ``lowered``), None when not floating."""
        t = self.type_of(e, lowered)
        return t if t is not None and pa.types.is_floating(t) else None

    def type_of(self, e: Expr, lowered: Any) -> pa.DataType | None:
        """The Arrow type of ``e`` (lowered to ``lowered``), None when it cannot be known."""
        raise NotImplementedError

    def scalar(self, value: pa.Scalar) -> Any:
        raise NotImplementedError

    def call(self, name: str, args: Sequence[Any], options: pc.FunctionOptions | None = None) -> Any:
        raise NotImplementedError

    def try_cast(self, operand: Any, raw: pa.DataType, to: pa.DataType) -> Any:
        """TRY_CAST of ``operand``, lowered, whose type is ``raw`` (as stored: not plain)."""
        raise NotImplementedError


def flat_name(c: Column) -> str:
    """The table column a (possibly qualified) column reference reads."""
    return c.ref


class _Lazy(_Backend):
    def __init__(self, schema: pa.Schema | None = None):
        self.schema = schema  # column types, for float comparisons between columns
        self._no_rows: pa.Table | None = None

    def column(self, c: Column) -> Any:
        ref = pc.field(flat_name(c), *c.path) if c.path else pc.field(flat_name(c))
        stored = self._stored_type(c)
        if stored is not None and not stored.equals(plain_type(stored)):  # as the eager form reads it
            return self.call("cast", [ref], pc.CastOptions(plain_type(stored)))
        return ref

    def _stored_type(self, c: Column) -> pa.DataType | None:
        """The type of column ``c`` as the rows hold it (None: no schema, or no such column)."""
        if self.schema is None:
            return None
        i = self.schema.get_field_index(flat_name(c))  # -1 when absent or when two fields share the name
        if i < 0:
            return None
        t = self.schema.field(i).type
        for part in c.path:
            if not pa.types.is_struct(t) or t.get_field_index(part) < 0:
                return None
            t = t.field(t.get_field_index(part)).type
        return t

    def type_of(self, e: Expr, lowered: Any) -> pa.DataType | None:
        if isinstance(e, Literal):
            return None if e.value is None else e.arrow_type
        if self.schema is None and e.columns():
            return None  # a lazy expression has no types of its own
        if self._no_rows is None:
            self._no_rows = (self.schema if self.schema is not None else pa.schema([])).empty_table()
        try:  # the evaluator's own answer, over no rows
            return evaluate(e, self._no_rows).type
        except PredicateError:
            return None

    def scalar(self, value: pa.Scalar) -> Any:
        return pc.scalar(value)

    def call(self, name: str, args: Sequence[Any], options: pc.FunctionOptions | None = None) -> Any:
        return pc.Expression._call(name, list(args), options)

    def try_cast(self, operand: Any, raw: pa.DataType, to: pa.DataType) -> Any:
        # no such cast for these types: refused here, as the eager form refuses it, not in the scan
        _spark_cast(_Eager(_NO_ROWS), pa.array([], raw), plain_type(raw), to)
        return self.call(_try_cast_udf(raw, to), [operand])


#: Arrow type ids of the storage variants :func:`~deltatx.expr.values.plain_type` folds (any
#: dictionary, large and view strings and binaries): a column read on every evaluation is tested
#: by one integer, not by building its plain type and comparing
_STORAGE_VARIANTS = frozenset(t.id for t in (pa.dictionary(pa.int32(), pa.string()), pa.large_string(),
                                             pa.string_view(), pa.large_binary(), pa.binary_view()))


class _Eager(_Backend):
    def __init__(self, table: pa.Table):
        self.table = table
        self._lower_names: dict[str, str] | None = None

    def column(self, c: Column) -> Any:
        name = flat_name(c)
        if name not in self.table.column_names:
            raise PredicateError(
                f"unknown column {c} in expression; available columns: "
                f"{', '.join(self.table.column_names) or '(none)'}"
            )
        arr = self.table.column(name)
        for part in c.path:
            t = arr.type
            if not pa.types.is_struct(t) or t.get_field_index(part) < 0:
                raise PredicateError(f"column {c}: {part!r} is not a field of {t}")
            arr = pc.struct_field(arr, [t.get_field_index(part)])
        t = arr.type
        if t.id in _STORAGE_VARIANTS:
            # a dictionary (or a large or view string) is how the values are stored, not what SQL
            # sees: string kernels (LIKE, upper, CAST's text parsing) have no kernels for those
            # (Arrow 26), so the values are read as the plain type
            arr = arr.cast(plain_type(t))
        return arr

    def scalar(self, value: pa.Scalar) -> Any:
        return value

    def call(self, name: str, args: Sequence[Any], options: pc.FunctionOptions | None = None) -> Any:
        return pc.call_function(name, list(args), options)

    def try_cast(self, operand: Any, raw: pa.DataType, to: pa.DataType) -> Any:
        return _try_cast_values(operand, plain_type(raw), to)

    def type_of(self, e: Expr, lowered: Any) -> pa.DataType | None:
        return getattr(lowered, "type", None)


# --------------------------------------------------------------------------------------------
# Functions
# --------------------------------------------------------------------------------------------


def _literal_arg(fn: str, args: tuple[Expr, ...], i: int, kind: type | tuple[type, ...]) -> Any:
    arg = args[i]
    if not isinstance(arg, Literal) or not isinstance(arg.value, kind) or isinstance(arg.value, bool) and kind is int:
        raise PredicateError(f"{fn}(): argument {i + 1} must be a constant, got {arg}")
    return arg.value


def _substring(b: _Backend, low: list[Any], raw: tuple[Expr, ...]) -> Any:
    pos = _literal_arg("substring", raw, 1, int)
    length = _literal_arg("substring", raw, 2, int) if len(raw) > 2 else None
    start = pos - 1 if pos > 0 else pos  # Spark: 1-based, 0 behaves like 1, negative from the end
    if length is not None and length <= 0:
        return b.call("utf8_slice_codeunits", [low[0]], pc.SliceOptions(0, 0))
    stop = None if length is None else start + length
    if stop is not None and start < 0 and stop >= 0:
        stop = None
    return b.call("utf8_slice_codeunits", [low[0]], pc.SliceOptions(start, stop))


def _pattern_fn(kernel: str) -> Callable[[_Backend, list[Any], tuple[Expr, ...]], Any]:
    def lower(b: _Backend, low: list[Any], raw: tuple[Expr, ...]) -> Any:
        if isinstance(raw[1], Literal) and raw[1].value is None:
            return b.scalar(_NULL_BOOL)  # startswith(x, NULL) is NULL
        pattern = _literal_arg(kernel, raw, 1, str)
        return b.call(kernel, [low[0]], pc.MatchSubstringOptions(pattern))

    return lower


def _as_int32(kernel: str) -> Callable[[_Backend, list[Any], tuple[Expr, ...]], Any]:
    def lower(b: _Backend, low: list[Any], raw: tuple[Expr, ...]) -> Any:
        return b.call("cast", [b.call(kernel, low)], pc.CastOptions(pa.int32()))

    return lower


def _simple(kernel: str, options: pc.FunctionOptions | None = None):
    return lambda b, low, raw: b.call(kernel, low, options)


def _concat(b: _Backend, low: list[Any], raw: tuple[Expr, ...]) -> Any:
    """Spark's concat: every argument cast to STRING as CAST does (``1.0`` -> ``'1.0'``)."""
    strings = [_spark_cast(b, a, _known_type(b, e, a), pa.string()) for a, e in zip(low, raw)]
    return b.call("binary_join_element_wise", [*strings, b.scalar(pa.scalar(""))])


def _concat_ws(b: _Backend, low: list[Any], raw: tuple[Expr, ...]) -> Any:
    """Spark's concat_ws(sep, ...): the values (cast to STRING) joined by ``sep`` (a constant or a
    column), NULL values skipped (all NULL: ''); NULL where the separator is.

    Arrow's join with ``null_handling="skip"`` drops a row whose values are all NULL from its
    output (Arrow 26: the result is shorter than the input), so such a row's first value is
    made '' first: it joins to '' and keeps its place."""
    separator = _spark_cast(b, low[0], _known_type(b, raw[0], low[0]), pa.string())
    strings = [_spark_cast(b, a, _known_type(b, e, a), pa.string()) for a, e in zip(low[1:], raw[1:])]
    if not strings:
        return b.call("if_else", [b.call("is_null", [separator]), b.scalar(pa.scalar(None, pa.string())),
                                  b.scalar(pa.scalar(""))])
    all_null = b.call("is_null", [strings[0]])
    for value in strings[1:]:
        all_null = b.call("and", [all_null, b.call("is_null", [value])])
    strings[0] = b.call("if_else", [all_null, b.scalar(pa.scalar("")), strings[0]])
    return b.call("binary_join_element_wise", [*strings, separator], pc.JoinOptions(null_handling="skip"))


def _isnan(b: _Backend, low: list[Any], raw: tuple[Expr, ...]) -> Any:
    """Spark's isnan is never NULL: ``isnan(NULL)`` is false (so ``NOT isnan(x)`` holds for it)."""
    t = _known_type(b, raw[0], low[0])
    if t is not None and not pa.types.is_floating(t):
        return b.scalar(pa.scalar(False))
    return b.call("coalesce", [b.call("is_nan", [low[0]]), b.scalar(pa.scalar(False))])


def _extreme(kernel: str) -> Callable[[_Backend, list[Any], tuple[Expr, ...]], Any]:
    """greatest/least skipping NULLs. Arrow's element-wise max/min pass over NaN; to Spark NaN
    is above every number, so greatest() with a NaN argument is NaN (least() already agrees)."""
    opts = pc.ElementWiseAggregateOptions(skip_nulls=True)

    def lower(b: _Backend, low: list[Any], raw: tuple[Expr, ...]) -> Any:
        out = b.call(kernel, low, opts)
        if kernel == "min_element_wise":
            return out
        floats = [(a, t) for a, e in zip(low, raw) if (t := b.float_type(e, a)) is not None]
        if not floats:
            return out
        false = b.scalar(pa.scalar(False))
        nan = None
        for a, _ in floats:
            one = b.call("coalesce", [b.call("is_nan", [a]), false])
            nan = one if nan is None else b.call("or", [nan, one])
        return b.call("if_else", [nan, b.scalar(pa.scalar(float("nan"), floats[0][1])), out])

    return lower


def _full_case(name: str, kernel: str, python: Callable[[str], str]) -> str:
    """Register a scalar function mapping case as Java's String.toUpperCase/toLowerCase do
    (full mapping: 'ß' -> 'SS'). Arrow's kernels map one code point to one, which is Java's
    answer for ASCII: they run first, and only non-ASCII values go through Python (its
    str.upper/lower are the full mapping), once per distinct value."""
    udf = f"deltatx_{name}"

    def run(ctx: Any, values: Any) -> Any:
        if isinstance(values, pa.Scalar):
            return pa.scalar(None if not values.is_valid else python(values.as_py()), pa.string())
        out = pc.call_function(kernel, [values])
        other = pc.invert(pc.fill_null(pc.string_is_ascii(values), True))
        if not pc.any(other).as_py():
            return out
        picked = values.filter(other).to_pylist()
        mapped: dict[str, str] = {}
        result = [mapped.setdefault(v, python(v)) if v not in mapped else mapped[v] for v in picked]
        return pc.replace_with_mask(out, other, pa.array(result, pa.string()))

    try:
        pc.register_scalar_function(run, udf, {"summary": f"Spark's {name}()", "description": run.__doc__ or name},
                                    {"text": pa.string()}, pa.string())
    except pa.ArrowKeyError:  # registered by an earlier import of this module
        pass
    return udf


def _case_fn(udf: str) -> Callable[[_Backend, list[Any], tuple[Expr, ...]], Any]:
    def lower(b: _Backend, low: list[Any], raw: tuple[Expr, ...]) -> Any:
        t = _known_type(b, raw[0], low[0])
        arg = low[0] if t is None or pa.types.is_string(t) else b.call("cast", [low[0]], pc.CastOptions(pa.string()))
        return b.call(udf, [arg])

    return lower


def _if(b: _Backend, low: list[Any], raw: tuple[Expr, ...]) -> Any:
    return _choose(b, [(low[0], low[1])], low[2])


def _choose(b: _Backend, branches: list[tuple[Any, Any]], otherwise: Any) -> Any:
    """IF / CASE WHEN as nested ``if_else``: a NULL condition takes the next branch (Spark), and
    an untyped NULL branch takes the other branches' type (``if_else`` casts to a common type,
    where ``case_when`` wants them equal: ``if(c, 1, NULL)``)."""
    out = otherwise
    for cond, value in reversed(branches):
        out = b.call("if_else", [b.call("coalesce", [cond, b.scalar(pa.scalar(False))]), value, out])
    return out


def _rounding(half_even: bool) -> Callable[[_Backend, list[Any], tuple[Expr, ...]], Any]:
    """Spark's ROUND (half up) or BROUND (``half_even``) to a constant number of places.

    DOUBLE and FLOAT values round their shortest decimal text, as Spark's BigDecimal does
    (:mod:`~deltatx.expr.float_round`: ``round(1.005, 2)`` is 1.01, where rounding the binary value
    gives 1.0); DECIMAL and integer values are exact already, and Arrow rounds them as Spark does."""
    name = "bround" if half_even else "round"
    mode = "half_to_even" if half_even else "half_towards_infinity"

    def lower(b: _Backend, low: list[Any], raw: tuple[Expr, ...]) -> Any:
        digits = _literal_arg(name, raw, 1, int) if len(raw) > 1 else 0
        if not -(2**31) <= digits < 2**31:
            raise PredicateError(f"{name}(): the number of places must be an INT, got {digits}")
        operand = low[0]
        t = _known_type(b, raw[0], operand)
        if t is not None and (pa.types.is_float64(t) or pa.types.is_float32(t)):
            return b.call(float_round_function(t, half_even), [operand, b.scalar(pa.scalar(digits, pa.int32()))])
        if t is not None and pa.types.is_decimal(t):  # Spark's result has one more integer digit
            operand = _with_carry_digit(b, operand, t)
        return b.call("round", [operand], pc.RoundOptions(digits, mode))

    return lower


def _with_carry_digit(b: _Backend, operand: Any, t: pa.DataType) -> Any:
    """DECIMAL ``operand`` (type ``t``) with room for one more digit, so that rounding up (99.99 to
    100.0) fits: Arrow's round of a value that no longer fits its type gives 0 without an error
    (Arrow 26 reports only the last such row). A cast to a narrower type then checks the result."""
    wider = (pa.decimal128 if t.precision < 38 else pa.decimal256)(min(t.precision + 1, 76), t.scale)
    return b.call("cast", [operand], pc.CastOptions(wider))


#: name -> (min args, max args, lowering)
FUNCTIONS: dict[str, tuple[int, int, Callable[[_Backend, list[Any], tuple[Expr, ...]], Any]]] = {
    "upper": (1, 1, _case_fn(_full_case("upper", "utf8_upper", str.upper))),
    "lower": (1, 1, _case_fn(_full_case("lower", "utf8_lower", str.lower))),
    "length": (1, 1, _simple("utf8_length")),
    "trim": (1, 1, _simple("utf8_trim", pc.TrimOptions(" "))),
    "ltrim": (1, 1, _simple("utf8_ltrim", pc.TrimOptions(" "))),
    "rtrim": (1, 1, _simple("utf8_rtrim", pc.TrimOptions(" "))),
    "concat": (1, 255, _concat),
    "concat_ws": (1, 255, _concat_ws),
    "coalesce": (1, 255, _simple("coalesce")),
    "abs": (1, 1, _simple("abs_checked")),
    "negative": (1, 1, _simple("negate_checked")),
    "year": (1, 1, _as_int32("year")),
    "month": (1, 1, _as_int32("month")),
    "day": (1, 1, _as_int32("day")),
    "hour": (1, 1, _as_int32("hour")),
    "minute": (1, 1, _as_int32("minute")),
    "second": (1, 1, _as_int32("second")),
    "substring": (2, 3, _substring),
    "startswith": (2, 2, _pattern_fn("starts_with")),
    "endswith": (2, 2, _pattern_fn("ends_with")),
    "contains": (2, 2, _pattern_fn("match_substring")),
    "if": (3, 3, _if),
    "greatest": (1, 255, _extreme("max_element_wise")),
    "least": (1, 255, _extreme("min_element_wise")),
    "round": (1, 2, _rounding(half_even=False)),
    "bround": (1, 2, _rounding(half_even=True)),
    "isnan": (1, 1, _isnan),
}


# --------------------------------------------------------------------------------------------
# Lowering
# --------------------------------------------------------------------------------------------


def _is_untyped_null(e: Expr) -> bool:
    return isinstance(e, Literal) and e.value is None and e.type is None


def _lower(e: Expr, b: _Backend, boolean: bool = False) -> Any:
    if isinstance(e, Column):
        return b.column(e)
    if isinstance(e, Literal):
        if _is_untyped_null(e):
            return b.scalar(_NULL_BOOL if boolean else pa.scalar(None))
        return b.scalar(e.to_scalar())
    if isinstance(e, Comparison):
        return _lower_comparison(e, b)
    if isinstance(e, And):
        left = _lower(e.left, b, True)
        with _guarded(b):  # Spark skips it once the left side decides
            return b.call("and_kleene", [left, _lower(e.right, b, True)])
    if isinstance(e, Or):
        left = _lower(e.left, b, True)
        with _guarded(b):
            return b.call("or_kleene", [left, _lower(e.right, b, True)])
    if isinstance(e, Not):
        return b.call("invert", [_lower(e.operand, b, True)])
    if isinstance(e, In):
        out = _lower_in(e, b)
        return b.call("invert", [out]) if e.negated else out
    if isinstance(e, IsNull):
        return b.call("is_valid" if e.negated else "is_null", [_lower(e.operand, b)])
    if isinstance(e, Like):
        opts = pc.MatchSubstringOptions(e.pattern, ignore_case=e.case_insensitive)
        out = b.call("match_like", [_lower(e.operand, b)], opts)
        return b.call("invert", [out]) if e.negated else out
    if isinstance(e, Arithmetic):
        return _lower_arithmetic(e, b)
    if isinstance(e, Func):
        spec = FUNCTIONS.get(e.name)
        if spec is None:
            raise PredicateError(
                f"unsupported function {e.name}(); supported: {', '.join(sorted(FUNCTIONS))}"
            )
        lo, hi, lower = spec
        if not lo <= len(e.args) <= hi:
            raise PredicateError(f"{e.name}() takes {lo}..{hi} arguments, got {len(e.args)}")
        args = [_lower(e.args[0], b, e.name == "if")] if e.args else []
        with _guarded(b) if e.name in _LAZY_ARGUMENTS else nullcontext():  # evaluated only when needed
            args += [_lower(a, b) for a in e.args[1:]]
        return lower(b, args, e.args)
    if isinstance(e, Cast):
        return _lower_cast(e, b)
    if isinstance(e, Case):
        if not e.whens:
            return _lower(e.default, b) if e.default is not None else b.scalar(pa.scalar(None))
        first = _lower(e.whens[0][0], b, True)  # the only part Spark always evaluates
        with _guarded(b):
            branches = [(first if i == 0 else _lower(c, b, True), _lower(v, b)) for i, (c, v) in enumerate(e.whens)]
            otherwise = _lower(e.default, b) if e.default is not None else b.scalar(pa.scalar(None))
        return _choose(b, branches, otherwise)
    raise PredicateError(f"cannot evaluate expression node {type(e).__name__}: {e}")


def _lower_cast(e: Cast, b: _Backend) -> Any:
    if e.try_ and isinstance(e.operand, Literal):  # a constant: folded (NULL when it fails)
        return _lower(cast_constant(e.operand, e.to, try_=True), b)
    operand = _lower(e.operand, b)
    raw = b.type_of(e.operand, operand)
    source = None if raw is None else plain_type(raw)
    if not e.try_ or source is not None and (source.equals(e.to) or pa.types.is_null(source)):
        return _spark_cast(b, operand, source, e.to)  # (a NULL, or a value of the type: no failure)
    if raw is None:
        raise PredicateError(f"{e}: the type of {e.operand} is not known here (a lazy expression "
                             f"needs the table's schema for TRY_CAST)")
    return b.try_cast(operand, raw, e.to)


def _known_type(b: _Backend, e: Expr, lowered: Any) -> pa.DataType | None:
    t = b.type_of(e, lowered)
    return None if t is None else plain_type(t)


def _no_cast(source: pa.DataType, to: pa.DataType) -> str | None:
    """What Spark (ANSI mode) has no cast for, from ``source`` to ``to`` (its DATATYPE_MISMATCH
    when it analyses the query, before any value is read), or None.

    A DATE or a TIMESTAMP_NTZ is no number to Spark, and no number or boolean is one of them
    (Arrow would read days or microseconds); a BOOLEAN and a TIMESTAMP have no cast either way
    with ANSI mode on. (A TIMESTAMP and a number do: seconds, :func:`_timestamp_to_number`.)"""
    if _local_time(source) and _number_or_boolean(to):
        return f"{type_sql(source)} to a number or a boolean"
    if _number_or_boolean(source) and _local_time(to):
        return f"a number or a boolean to {type_sql(to)}"
    if (pa.types.is_boolean(source) and pa.types.is_timestamp(to)
            or pa.types.is_timestamp(source) and pa.types.is_boolean(to)):
        return "a BOOLEAN to a TIMESTAMP or back with ANSI mode on"
    return None


def _number_or_boolean(t: pa.DataType) -> bool:
    return is_number(t) or pa.types.is_boolean(t)


def _local_time(t: pa.DataType) -> bool:
    """A DATE or a TIMESTAMP_NTZ: a calendar value without a zone, no count of anything to Spark."""
    return pa.types.is_date(t) or pa.types.is_timestamp(t) and t.tz is None


def _refuse_missing_cast(source: pa.DataType, to: pa.DataType) -> None:
    """Raise Spark's DATATYPE_MISMATCH where it has no cast from ``source`` to ``to`` (:func:`_no_cast`)."""
    refused = _no_cast(source, to)
    if refused is not None:
        raise PredicateError(f"cannot cast {type_sql(source)} to {type_sql(to)}: Spark has no cast from "
                             f"{refused} (DATATYPE_MISMATCH), for CAST and TRY_CAST alike")


def _spark_cast(b: _Backend, operand: Any, source: pa.DataType | None, to: pa.DataType) -> Any:
    """Spark's CAST (ANSI) of a lowered value of type ``source`` (None: unknown) to ``to``.

    A fraction cast to an integer is truncated toward zero (1.9 -> 1, -1.9 -> -1) and a value
    out of the integer's range fails; the fraction goes first, so that Arrow's checked cast
    still catches the overflow (its own truncating cast would wrap silently). A DECIMAL cast to
    fewer fraction digits rounds half away from zero, and fails when it does not fit. An
    integer or DECIMAL cast to a floating type rounds to the nearest value (Arrow's safe cast
    refuses a BIGINT above 2^53; its DECIMAL cast is not the nearest, so DECIMAL goes through
    text). A STRING read as a number (or a boolean) has the ASCII spaces and control characters
    around it (:func:`~deltatx.expr.values.spark_trim_for`) and a leading '+' dropped; text that
    is no number fails, hexadecimal included. To STRING, floats and timestamps print as Spark
    prints them (:func:`_float_text`, :func:`_timestamp_text`). A timestamp cast to a date
    drops its time. Text read as a timestamp may end in a zone after its seconds, as Java names
    zones (:func:`_text_to_timestamp`): a TIMESTAMP_NTZ keeps the local time and drops it.
    A TIMESTAMP and a number convert as seconds since 1970-01-01 UTC
    (:func:`_timestamp_to_number`, :func:`_number_to_timestamp`). The casts Spark does not
    have are refused whatever the value (:func:`_no_cast`: a DATE and a number, a
    TIMESTAMP_NTZ and a number, ...), where Arrow would give days or microseconds. An eager
    dictionary-encoded (or large or view string) ``operand`` is cast as its values, of the
    plain type ``source``."""
    stored = getattr(operand, "type", None)
    if stored is not None and stored.id in _STORAGE_VARIANTS:
        operand = b.call("cast", [operand], pc.CastOptions(plain_type(stored)))
    if source is not None and source.equals(to):
        return operand
    if source is not None:
        _refuse_missing_cast(source, to)
    if source is None:  # unknown here: truncate in the cast (an overflow then wraps)
        if pa.types.is_integer(to):
            opts = pc.CastOptions(to, allow_float_truncate=True, allow_decimal_truncate=True)
        else:
            opts = pc.CastOptions(to, allow_time_truncate=True)
        return b.call("cast", [operand], opts)
    if pa.types.is_string(to):
        if pa.types.is_floating(source):
            return _float_text(b, operand)
        if pa.types.is_timestamp(source):
            return _timestamp_text(b, operand, source)
    if pa.types.is_string(source) and pa.types.is_date(to):
        return b.call("cast", [_iso_date_text(b, operand)], pc.CastOptions(to))
    if pa.types.is_string(source) and pa.types.is_timestamp(to):
        return _text_to_timestamp(b, operand, to)
    if pa.types.is_timestamp(source) and is_number(to):
        return _timestamp_to_number(b, operand, source, to)
    if is_number(source) and pa.types.is_timestamp(to):
        return _number_to_timestamp(b, operand, source, to)
    if pa.types.is_decimal(source) and pa.types.is_boolean(to):  # Arrow has no such cast: not zero is true
        return b.call("not_equal", [operand, b.scalar(pa.scalar(Decimal(0), source))])
    if pa.types.is_boolean(source) and pa.types.is_decimal(to):  # 1 or 0, which DECIMAL(1,1) cannot hold
        return _spark_cast(b, b.call("cast", [operand], pc.CastOptions(pa.int8())), pa.int8(), to)
    if pa.types.is_string(source) and pa.types.is_boolean(to):
        # Spark's words, any case: t/true/y/yes/1 and f/false/n/no/0; other text fails the cast
        operand = b.call("utf8_lower", [b.call("utf8_trim", [operand], pc.TrimOptions(SPARK_INTEGER_TRIM))])
        operand = b.call("replace_substring_regex", [operand], pc.ReplaceSubstringOptions(r"^(t|y|yes)$", "true"))
        operand = b.call("replace_substring_regex", [operand], pc.ReplaceSubstringOptions(r"^(f|n|no)$", "false"))
    if pa.types.is_string(source) and is_number(to):
        # Spark trims the ASCII spaces and control characters around a number, nothing else
        # (a no-break space stays, and the text is no number)
        operand = b.call("utf8_trim", [operand], pc.TrimOptions(spark_trim_for(to)))
        if not pa.types.is_boolean(to):
            operand = b.call("replace_substring_regex", [operand],
                             pc.ReplaceSubstringOptions(r"^\+([0-9.])", r"\1", max_replacements=1))
        if pa.types.is_integer(to):  # Arrow reads 0x10 as 16; Spark reads no hexadecimal
            operand = b.call("replace_substring_regex", [operand],
                             pc.ReplaceSubstringOptions(r"^([+-]?)0[xX]", r"\1x", max_replacements=1))
    if pa.types.is_integer(to):
        if pa.types.is_floating(source):
            operand = b.call("trunc", [operand])
        elif pa.types.is_decimal(source):
            operand = b.call("round", [operand], pc.RoundOptions(0, "towards_zero"))
    elif pa.types.is_floating(to) and pa.types.is_decimal(source):
        # through the exact digits: Arrow's DECIMAL -> floating cast scales in floating point
        # (0.3 became 0.30000000000000004, so `f = 0.3` matched no row), its text parse rounds
        # correctly, as Java's BigDecimal.doubleValue does for Spark
        return b.call("cast", [b.call("cast", [operand], pc.CastOptions(pa.string()))], pc.CastOptions(to))
    elif pa.types.is_floating(to) and pa.types.is_integer(source):
        return b.call("cast", [operand], pc.CastOptions.unsafe(to))
    elif pa.types.is_decimal(to) and pa.types.is_floating(source):
        return _float_to_decimal(b, operand, source, to)
    elif pa.types.is_decimal(to) and pa.types.is_string(source):
        operand = _decimal_text_half_up(b, operand, to)
    elif pa.types.is_decimal(to) and pa.types.is_decimal(source) and to.scale < source.scale:
        operand = b.call("round", [_with_carry_digit(b, operand, source)],
                         pc.RoundOptions(to.scale, "half_towards_infinity"))
    elif pa.types.is_decimal(to) and pa.types.is_integer(source):
        # Arrow wants room for every value of the integer type (20 digits); the value check
        # happens in the DECIMAL to DECIMAL cast after
        room = (pa.decimal128 if 20 + to.scale <= 38 else pa.decimal256)(min(20 + to.scale, 76), to.scale)
        operand = b.call("cast", [operand], pc.CastOptions(room))
    return b.call("cast", [operand], pc.CastOptions(to, allow_time_truncate=True))


def _decimal_text_half_up(b: _Backend, text: Any, to: pa.DecimalType) -> Any:
    """Decimal text at ``to``'s scale, rounded half up, as Spark's CAST of a STRING does
    (Java's BigDecimal, then HALF_UP: '1.005' -> 1.01 in DECIMAL(5,2)), where Arrow's cast
    refuses any digit beyond the scale. Half up looks only at the first dropped digit, so the
    text is cut one digit past the scale, read exactly, and rounded; the caller's cast to ``to``
    then checks that it fits. (Text in exponent form is read as it is: beyond one extra digit
    it is refused.)"""
    keep = to.scale + 1
    text = b.call("replace_substring_regex", [text], pc.ReplaceSubstringOptions(
        rf"^(-?[0-9]*\.[0-9]{{{keep}}})[0-9]+$", r"\1", max_replacements=1))
    finer = (pa.decimal128 if to.precision < 38 else pa.decimal256)(min(to.precision + 1, 76), keep)
    value = b.call("cast", [text], pc.CastOptions(finer))
    return b.call("round", [_with_carry_digit(b, value, finer)], pc.RoundOptions(to.scale, "half_towards_infinity"))


def _float_to_decimal(b: _Backend, operand: Any, source: pa.DataType, to: pa.DecimalType) -> Any:
    """Spark's CAST of a float to DECIMAL: the double's shortest text (Java's Double.toString,
    a FLOAT widened to double first) rounded half up, so 1.005 gives 1.01 and 1e23 gives
    100000000000000000000000, not the binary values just below them.

    Columnar: Arrow's cast to text finds the shortest digits. Rounding that text and rounding
    the binary value half up can differ only where the text ends within one digit past the
    scale (a shorter text between the value and a longer one would be the shortest), or where
    it is a whole number in exponent form: those rows are read from their text, every other
    row keeps the binary rounding (NaN and infinities fail the cast there). Exponent text is read
    only from 1e16 on, where every double is a whole number (Arrow prints 1e10 and up that way,
    with fraction digits below 1e16)."""
    if not pa.types.is_float64(source):
        operand = b.call("cast", [operand], pc.CastOptions(pa.float64()))
    text = b.call("cast", [operand], pc.CastOptions(pa.string()))
    short = b.call("match_substring_regex", [text], pc.MatchSubstringOptions(
        rf"^-?(?:[0-9]+(?:\.[0-9]{{0,{to.scale + 1}}})?|[0-9](?:\.[0-9]+)?e\+(?:1[6-9]|[2-9][0-9]|[0-9]{{3}}))$"))
    from_text = b.call("cast", [_decimal_text_half_up(
        b, b.call("if_else", [short, text, b.scalar(pa.scalar("0"))]), to)], pc.CastOptions(to))
    rounded = b.call("round", [b.call("if_else", [short, b.scalar(pa.scalar(0.0)), operand])],
                     pc.RoundOptions(to.scale, "half_towards_infinity"))
    return b.call("if_else", [short, from_text, b.call("cast", [rounded], pc.CastOptions(to))])


#: Spark's DATE text (as expr.values.parse_date_text reads a literal): yyyy[-m[-d]], then ' ' or
#: 'T' and anything
_DATE_TEXT = r"^\s*(?P<y>[0-9]{4})(?:-(?P<m>[0-9]{1,2})(?:-(?P<d>[0-9]{1,2})(?:[ T].*)?)?)?\s*$"


def _iso_date_text(b: _Backend, operand: Any) -> Any:
    """Text in Spark's date forms ('2024', '2024-1-2', '2024-01-02 10:00') as 'yyyy-mm-dd';
    text in none of them is left as it is, for the cast to refuse."""
    parts = b.call("extract_regex", [operand], pc.ExtractRegexOptions(_DATE_TEXT))

    def part(name: str) -> Any:
        value = b.call("struct_field", [parts], pc.StructFieldOptions([name]))
        if name == "y":
            return value
        value = b.call("coalesce", [b.call("if_else", [b.call("equal", [value, b.scalar(pa.scalar(""))]),
                                                       b.scalar(pa.scalar(None, pa.string())), value]),
                                    b.scalar(pa.scalar("1"))])
        return b.call("utf8_lpad", [value], pc.PadOptions(2, "0"))

    iso = b.call("binary_join_element_wise", [part("y"), part("m"), part("d"), b.scalar(pa.scalar("-"))])
    return b.call("coalesce", [iso, operand])


#: units of a timestamp in one second
_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}
_INT64_MIN, _INT64_MAX = integer_range(pa.int64())


def _timestamp_to_number(b: _Backend, operand: Any, source: pa.TimestampType, to: pa.DataType) -> Any:
    """Spark's CAST of a TIMESTAMP to a number: seconds since 1970-01-01 00:00:00 UTC (Arrow's
    cast gives the stored microseconds). An integer type takes the whole seconds rounded down
    (``23:59:59.9`` on 1969-12-31 is -1), and fails where they do not fit it (TRY_CAST: NULL);
    DOUBLE and FLOAT divide the microseconds as doubles (then rounded to FLOAT); a DECIMAL takes
    the exact seconds and rounds them half up to its scale."""
    per_second = _PER_SECOND[source.unit]
    units = b.call("cast", [operand], pc.CastOptions(pa.int64()))
    if pa.types.is_floating(to):
        as_double = b.call("cast", [units], pc.CastOptions.unsafe(pa.float64()))
        seconds = b.call("divide", [as_double, b.scalar(pa.scalar(float(per_second)))])
        return _spark_cast(b, seconds, pa.float64(), to)
    if pa.types.is_decimal(to):
        digits = len(str(per_second)) - 1
        unit_type = pa.decimal128(max(digits, 1), digits)  # one unit in seconds: 0.000001 for microseconds
        exact_type = pa.decimal128(20 + unit_type.precision + 1, digits)  # Arrow's product: p1 + p2 + 1 digits
        whole = b.call("cast", [units], pc.CastOptions(pa.decimal128(20, 0)))
        unit = b.scalar(pa.scalar(Decimal(1).scaleb(-digits), unit_type))
        return _spark_cast(b, b.call("multiply", [whole, unit]), exact_type, to)
    step = b.scalar(pa.scalar(per_second, pa.int64()))
    truncated = b.call("divide", [units, step])  # toward zero: one less where a negative value had a fraction
    below = b.call("less", [b.call("subtract", [units, b.call("multiply", [truncated, step])]),
                            b.scalar(pa.scalar(0, pa.int64()))])
    seconds = b.call("if_else", [below, b.call("subtract", [truncated, b.scalar(pa.scalar(1, pa.int64()))]), truncated])
    return _spark_cast(b, seconds, pa.int64(), to)


def _number_to_timestamp(b: _Backend, operand: Any, source: pa.DataType, to: pa.TimestampType) -> Any:
    """Spark's CAST of a number to TIMESTAMP: seconds since 1970-01-01 00:00:00 UTC, kept to the
    microsecond (Arrow's cast would read microseconds, and has none from a float or DECIMAL).

    Each kind of number is Spark's own conversion: an integer's microseconds saturate at
    BIGINT's range (Java's ``TimeUnit.SECONDS.toMicros``: no error); a float (a FLOAT as its
    double) is multiplied by 10^6 as a double and truncated toward zero, NaN, an infinity or a
    product beyond BIGINT's range failing (TRY_CAST: NULL), 2^63 itself saturating as Java's
    conversion to long does; a DECIMAL's exact microseconds, truncated toward zero, keep their
    low 64 bits (``BigDecimal.longValue``: a value beyond the range wraps, without an error)."""
    if pa.types.is_integer(source):
        whole = operand if pa.types.is_int64(source) else b.call("cast", [operand], pc.CastOptions(pa.int64()))
        limit = _INT64_MAX // 10**6
        scaled = b.call("multiply", [whole, b.scalar(pa.scalar(10**6, pa.int64()))])  # wraps where replaced below
        micros = b.call("if_else", [b.call("greater", [whole, b.scalar(pa.scalar(limit, pa.int64()))]),
                                    b.scalar(pa.scalar(_INT64_MAX, pa.int64())),
                                    b.call("if_else", [b.call("less", [whole, b.scalar(pa.scalar(-limit, pa.int64()))]),
                                                       b.scalar(pa.scalar(_INT64_MIN, pa.int64())), scaled])])
    elif pa.types.is_floating(source):
        value = operand if pa.types.is_float64(source) else b.call("cast", [operand], pc.CastOptions(pa.float64()))
        product = b.call("trunc", [b.call("multiply", [value, b.scalar(pa.scalar(1e6))])])
        top = b.call("equal", [product, b.scalar(pa.scalar(2.0**63))])
        fits = b.call("cast", [b.call("if_else", [top, b.scalar(pa.scalar(0.0)), product])],
                      pc.CastOptions(pa.int64()))  # fails on NaN, an infinity, beyond the range
        micros = b.call("if_else", [top, b.scalar(pa.scalar(_INT64_MAX, pa.int64())), fits])
    else:
        wide = pa.decimal256(source.precision, source.scale)
        scaled = b.call("multiply", [b.call("cast", [operand], pc.CastOptions(wide)),
                                     b.scalar(pa.scalar(Decimal(10**6), pa.decimal256(7, 0)))])
        whole = b.call("round", [scaled], pc.RoundOptions(0, "towards_zero"))
        micros = b.call("cast", [whole], pc.CastOptions(pa.int64(), allow_int_overflow=True,
                                                        allow_decimal_truncate=True))
    stamp = b.call("cast", [micros], pc.CastOptions(pa.timestamp("us", to.tz)))
    return stamp if to.unit == "us" else b.call("cast", [stamp], pc.CastOptions(to))


#: Spark's timestamp text with a zone: a date, ' ' or 'T', a time with its seconds and any
#: fraction (``local``), then the zone (``zone``: Spark reads one only after the seconds, and a
#: bare '.' after them may stand before it)
_TIME_THEN_ZONE = (r"^(?P<local>[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?)\.?"
                   r"(?P<zone>[^0-9].*)$")
#: Java's ZoneId.SHORT_IDS, which Spark's zone reader (``getZoneId``) hands to ``ZoneId.of``
_SHORT_ZONE_IDS = {
    "EST": "-05:00", "HST": "-10:00", "MST": "-07:00", "ACT": "Australia/Darwin", "AET": "Australia/Sydney",
    "AGT": "America/Argentina/Buenos_Aires", "ART": "Africa/Cairo", "AST": "America/Anchorage",
    "BET": "America/Sao_Paulo", "BST": "Asia/Dhaka", "CAT": "Africa/Harare", "CNT": "America/St_Johns",
    "CST": "America/Chicago", "CTT": "Asia/Shanghai", "EAT": "Africa/Addis_Ababa", "ECT": "Europe/Paris",
    "IET": "America/Indiana/Indianapolis", "IST": "Asia/Kolkata", "JST": "Asia/Tokyo", "MIT": "Pacific/Apia",
    "NET": "Asia/Yerevan", "NST": "Pacific/Auckland", "PLT": "Asia/Karachi", "PNT": "America/Phoenix",
    "PRT": "America/Puerto_Rico", "PST": "America/Los_Angeles", "SST": "Pacific/Guadalcanal",
    "VST": "Asia/Ho_Chi_Minh",
}
#: names the system's zone files have and Java's zone database does not (Spark 4.3 refuses them)
_NOT_JAVA_ZONES = frozenset({"Factory", "localtime", "posixrules", "ROC"})
#: Java's ZoneOffset.of forms after the sign: hh, hhmm, hhmmss, hh:mm, hh:mm:ss
_OFFSET_ID = re.compile(r"([+-])([0-9]{2})(?:([0-9]{2})([0-9]{2})?|:([0-9]{2})(?::([0-9]{2}))?)?")
_REGION_ID = re.compile(r"[A-Za-z][A-Za-z0-9~/._+-]+")
_LOCAL_FIELDS = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})")
#: what Java's String.trim drops around the zone text: every character up to the space
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))


def _offset_seconds(text: str) -> int | None:
    """Java's ``ZoneOffset.of``: 'Z', or a sign and one of +h, +hh, +hhmm, +hh:mm, +hhmmss,
    +hh:mm:ss, of at most 18 hours; the offset in seconds east of UTC, None for other text."""
    if text == "Z":
        return 0
    if len(text) == 2 and text[1:].isdigit() and text[1:].isascii():
        text = f"{text[0]}0{text[1]}"
    m = _OFFSET_ID.fullmatch(text)
    if m is None:
        return None
    hours = int(m.group(2))
    minutes = int(m.group(3) or m.group(5) or 0)
    seconds = int(m.group(4) or m.group(6) or 0)
    total = hours * 3600 + minutes * 60 + seconds
    if hours > 18 or minutes > 59 or seconds > 59 or total > 18 * 3600:
        return None
    return -total if m.group(1) == "-" else total


@functools.lru_cache(maxsize=1)
def _zone_names() -> frozenset[str]:
    """The region names the system's zone database has (read once, when a region is first named)."""
    return frozenset(zoneinfo.available_timezones()) - _NOT_JAVA_ZONES


@functools.lru_cache(maxsize=256)
def _java_zone(text: str) -> int | _dt.tzinfo | None:
    """The zone Spark reads from the text after a timestamp's seconds (its ``getZoneId``): a
    fixed offset in seconds, a region's rules, or None where Java's ``ZoneId.of`` has none.

    Spark first writes +h:mm as +0h:mm and +hh:m as +hh:0m; Java then maps its short ids (PST,
    ECT, ...), reads an offset ('Z', '+02', '+0200', '+02:00:30', ...), a prefix with one ('UTC',
    'GMT+2', 'UT-01:30'), or a region of its database by its exact name ('Europe/Paris', 'CET';
    'utc' and 'europe/paris' are none)."""
    name = text.strip(_JAVA_TRIM)
    name = re.sub(r"([+-])([0-9]):", r"\g<1>0\2:", name, count=1)
    name = re.sub(r"([+-])([0-9]{2}):([0-9])$", r"\1\2:0\3", name, count=1)
    name = _SHORT_ZONE_IDS.get(name, name)
    if len(name) <= 1 or name[0] in "+-":
        return _offset_seconds(name)
    prefix = next((p for p in ("UTC", "GMT", "UT") if name.startswith(p)), None)
    if prefix is not None and (len(name) == len(prefix) or name[len(prefix)] in "+-"):
        return 0 if len(name) == len(prefix) else _offset_seconds(name[len(prefix):])
    if _REGION_ID.fullmatch(name) is None or name not in _zone_names():
        return None
    return zoneinfo.ZoneInfo(name)


def _region_offset(zone: _dt.tzinfo, local: str) -> int | None:
    """Seconds east of UTC of region ``zone`` at the local time ``local`` begins with, as Java
    resolves it: in a gap the offset before it (02:30 on a spring-forward night is 03:30),
    in an overlap the earlier one (Python's ``fold=0`` is the same choice). None where
    ``local`` is no date and time (the cast refuses it)."""
    m = _LOCAL_FIELDS.match(local)
    try:
        when = _dt.datetime(*(int(g) for g in m.groups())) if m is not None else None
    except ValueError:
        return None
    offset = None if when is None else zone.utcoffset(when)
    return None if offset is None else int(offset.total_seconds())


_ZONE_SPLIT_TYPE = pa.struct([("local", pa.string()), ("offset", pa.int64())])


def _split_zones(ctx: Any, text: pa.Array) -> pa.Array:
    """Timestamp text split into its local part and its zone's offset in seconds east of UTC
    (0 where it names no zone). Text whose zone Java does not know is kept whole, offset 0:
    the cast of the local part then refuses it (Arrow reads no zone there).

    An Arrow scalar function (:data:`_ZONE_SPLIT`), so that a lazy expression computes it as a
    kernel. Columnar but for the zones: each distinct zone is read once, and only text naming
    a region is resolved value by value (its offset depends on the date)."""
    scalar = isinstance(text, pa.Scalar)
    values = pa.array([text.as_py()], pa.string()) if scalar else text
    parts = pc.extract_regex(values, _TIME_THEN_ZONE)
    zone, local = pc.struct_field(parts, "zone"), pc.struct_field(parts, "local")
    if len(values) == 0 or zone.null_count == len(values):
        out = pa.StructArray.from_arrays([values, pa.repeat(pa.scalar(0, pa.int64()), len(values))],
                                         fields=list(_ZONE_SPLIT_TYPE))
        return out[0] if scalar else out
    encoded = pc.dictionary_encode(zone)
    zones = [_java_zone(z) for z in encoded.dictionary.to_pylist()]
    offset = pa.array([z if isinstance(z, int) else None for z in zones], pa.int64()).take(encoded.indices)
    region_kinds = pa.array([isinstance(z, _dt.tzinfo) for z in zones])
    regions = pc.fill_null(region_kinds.take(encoded.indices), False)
    if pc.any(regions).as_py():
        rows = np.flatnonzero(regions.to_numpy(zero_copy_only=False))
        seen: dict[tuple[int, str], int | None] = {}  # (zone, local time to the second): one lookup each
        found = []
        for i, t in zip(encoded.indices.take(rows).to_pylist(), local.take(rows).to_pylist()):
            key = (i, t[:19])
            if key not in seen:
                seen[key] = _region_offset(zones[i], key[1])
            found.append(seen[key])
        offset = pc.replace_with_mask(offset, regions, pa.array(found, pa.int64()))
    known = pc.is_valid(offset)
    out = pa.StructArray.from_arrays([pc.if_else(known, local, values), pc.fill_null(offset, 0)],
                                     fields=list(_ZONE_SPLIT_TYPE))
    return out[0] if scalar else out


_ZONE_SPLIT = "deltatx_timestamp_zone"
try:
    pc.register_scalar_function(
        _split_zones, _ZONE_SPLIT,
        {"summary": "Spark's timestamp text: its local part and its zone's offset",
         "description": "struct<local: string, offset: int64 seconds east of UTC>"},
        {"text": pa.string()}, _ZONE_SPLIT_TYPE)
except pa.ArrowKeyError:  # registered by an earlier import of this module
    pass


def _text_to_timestamp(b: _Backend, operand: Any, to: pa.TimestampType) -> Any:
    """Spark's CAST of text to a timestamp. Whitespace around it is trimmed; a zone may follow
    the seconds (:func:`_split_zones`: 'Z', '+02:00', ' +2', ' UTC', 'GMT+2', 'Europe/Paris',
    with or without a space before it; an offset beyond 18 hours or a name Java does not know
    fails). A TIMESTAMP takes the instant: the local time less the zone's offset, text without
    a zone being in the session time zone (UTC for deltatx); a TIMESTAMP_NTZ keeps the local
    date and time and drops the zone. A zone after a time without seconds or after a bare date
    fails, as in Spark."""
    split = b.call(_ZONE_SPLIT, [b.call("utf8_trim_whitespace", [operand])])
    local = b.call("struct_field", [split], pc.StructFieldOptions(["local"]))
    naive = b.call("cast", [local], pc.CastOptions(pa.timestamp(to.unit)))
    if to.tz is None:
        return naive
    offset = b.call("struct_field", [split], pc.StructFieldOptions(["offset"]))
    units = b.call("multiply", [offset, b.scalar(pa.scalar(_PER_SECOND[to.unit], pa.int64()))])
    shift = b.call("cast", [units], pc.CastOptions(pa.duration(to.unit)))
    return b.call("cast", [b.call("subtract_checked", [naive, shift])], pc.CastOptions(to))


#: Arrow's shortest text of a float: sign, integer digits, fraction digits, exponent
_ARROW_FLOAT = r"^(?P<sign>-?)(?P<whole>[0-9]+)(?:\.(?P<frac>[0-9]*))?(?:e(?P<exp>[-+][0-9]+))?$"


def _float_text(b: _Backend, operand: Any) -> Any:
    """Java's Double.toString / Float.toString, which Spark's CAST AS STRING uses: the shortest
    digits that read back (Arrow's cast finds them), printed plain with at least one fraction
    digit when 1e-3 <= |x| < 1e7 (``1.0``, ``0.001``), else as ``d.dddE<n>`` (``1.0E20``,
    ``1.0E-4``); ``NaN``, ``Infinity``, ``-0.0``. Columnar: string kernels, no Python per row."""
    arrow = b.call("cast", [operand], pc.CastOptions(pa.string()))
    parts = b.call("extract_regex", [arrow], pc.ExtractRegexOptions(_ARROW_FLOAT))

    def part(name: str) -> Any:
        return b.call("struct_field", [parts], pc.StructFieldOptions([name]))

    def text(value: str) -> Any:
        return b.scalar(pa.scalar(value))

    def join(*pieces: Any) -> Any:
        return b.call("binary_join_element_wise", [*pieces, text("")])

    def number(value: int) -> Any:
        return b.scalar(pa.scalar(value, pa.int32()))

    sign, whole, frac = part("sign"), part("whole"), part("frac")
    exp_text = b.call("replace_substring", [part("exp")], pc.ReplaceSubstringOptions("+", ""))
    exp_text = b.call("if_else", [b.call("equal", [exp_text, text("")]), text("0"), exp_text])
    exponent = b.call("cast", [exp_text], pc.CastOptions(pa.int32()))
    big = b.call("not_equal", [whole, text("0")])  # a nonzero integer part: |x| >= 1
    frac_digits = b.call("utf8_ltrim", [frac], pc.TrimOptions("0"))
    zeros = b.call("subtract", [b.call("utf8_length", [frac]), b.call("utf8_length", [frac_digits])])
    power = b.call("if_else", [
        big,
        b.call("add", [b.call("subtract", [b.call("utf8_length", [whole]), number(1)]), exponent]),
        b.call("subtract", [exponent, b.call("add", [zeros, number(1)])]),
    ])
    digits = b.call("utf8_rtrim", [b.call("if_else", [big, join(whole, frac), frac_digits])], pc.TrimOptions("0"))
    head = b.call("utf8_slice_codeunits", [digits], pc.SliceOptions(0, 1))
    tail = b.call("utf8_slice_codeunits", [digits], pc.SliceOptions(1))
    tail = b.call("if_else", [b.call("equal", [tail, text("")]), text("0"), tail])
    scientific = join(sign, head, text("."), tail, text("E"), b.call("cast", [power], pc.CastOptions(pa.string())))
    # Arrow prints 1e-6 <= |x| < 1e21 plain, so Java's plain range is Arrow's text (+ ".0")
    plain = b.call("if_else", [b.call("match_substring", [arrow], pc.MatchSubstringOptions(".")), arrow,
                               join(arrow, text(".0"))])
    in_plain = b.call("and", [b.call("greater_equal", [power, number(-3)]), b.call("less", [power, number(7)])])
    out = b.call("if_else", [b.call("equal", [digits, text("")]), join(sign, text("0.0")),
                             b.call("if_else", [in_plain, plain, scientific])])
    special = b.scalar(pa.scalar(None, pa.string()))
    for arrow_text, java in (("-inf", "-Infinity"), ("inf", "Infinity"), ("nan", "NaN")):
        special = b.call("if_else", [b.call("equal", [arrow, text(arrow_text)]), text(java), special])
    return b.call("coalesce", [out, special])


def _timestamp_text(b: _Backend, operand: Any, source: pa.TimestampType) -> Any:
    """Spark's text of a timestamp: ``yyyy-MM-dd HH:mm:ss`` and the fraction without trailing
    zeros (none when zero), no zone suffix, in the session time zone deltatx uses (UTC)."""
    if source.tz is not None and source.tz not in ("UTC", "+00:00", "Z"):
        operand = b.call("cast", [operand], pc.CastOptions(pa.timestamp(source.unit, "UTC")))
    out = b.call("strftime", [operand], pc.StrftimeOptions("%Y-%m-%d %H:%M:%S", locale="C"))
    if source.unit == "s":
        return out
    return b.call("replace_substring_regex", [out], pc.ReplaceSubstringOptions(r"\.?0+$", ""))


def cast_constant(value: Literal, to: pa.DataType, context: str = "", *, try_: bool = False) -> Literal:
    """``CAST(value AS to)`` folded into a constant: the row-level CAST (:func:`_spark_cast`)
    applied to the one value, so a constant and a column convert alike (``CAST(2.5 AS INT)`` is
    2, ``CAST(300 AS TINYINT)`` fails). With ``try_``, ``TRY_CAST``: NULL where CAST fails on the
    value (a cast the types do not have still fails)."""
    to = plain_type(to)
    if value.value is None:
        if value.type is not None:  # a NULL of a type: refused where the type has no such cast
            _refuse_missing_cast(plain_type(value.type), to)
        return Literal(None, to)
    try:
        if try_:
            out = _try_cast_values(value.to_scalar(), value.arrow_type, to)
        else:
            out = _spark_cast(_Eager(_NO_ROWS), value.to_scalar(), value.arrow_type, to)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError) as exc:
        where = f" in {context}" if context else ""
        raise PredicateError(f"cannot cast {value} to {to}{where}: {exc}") from None
    return Literal(_scalar_value(out), to)


def cast_values(values: pa.Array | pa.ChunkedArray, to: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """Spark's CAST of ``values`` (MERGE join keys meeting in their common type)."""
    try:
        return _spark_cast(_Eager(_NO_ROWS), values, plain_type(values.type), to)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise PredicateError(f"cannot cast {values.type} values to {to}: {exc}") from None


_NO_ROWS = pa.table({})

#: what a CAST raises for a value it cannot convert (text that is no number or date, a value out
#: of the target's range); any other error is the types' (there is no such cast), and TRY_CAST
#: raises it as CAST does
_VALUE_ERRORS = (pa.ArrowInvalid, OverflowError)


def _try_cast_values(values: Any, source: pa.DataType, to: pa.DataType) -> Any:
    """Spark's TRY_CAST of eager ``values`` (array, chunked array or scalar) of type ``source``
    (plain): :func:`_spark_cast`'s result where it succeeds, NULL for each value it fails on.

    The values are cast at once; only when that fails does the conversion run again on a
    backend whose ``cast`` kernel lets single values fail (:class:`_ValueFailures`), and the
    rows where one did are NULL. Text is converted once per distinct value then ('n/a' in many
    rows: once)."""
    try:
        return _spark_cast(_Eager(_NO_ROWS), values, source, to)
    except _VALUE_ERRORS:
        pass
    scalar = isinstance(values, pa.Scalar)
    array = pa.repeat(values, 1) if scalar else values
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    _spark_cast(_Eager(_NO_ROWS), array.slice(0, 0), source, to)  # fails with no value: the types', raised
    if pa.types.is_dictionary(array.type):
        distinct, indices = array.dictionary, array.indices
    elif pa.types.is_string(source) or pa.types.is_binary(source):  # text repeats ('n/a', '')
        encoded = pc.dictionary_encode(array)
        distinct, indices = encoded.dictionary, encoded.indices
    else:
        distinct, indices = array, None
    b = _ValueFailures(len(distinct))
    out = _spark_cast(b, distinct, source, to)
    if b.failed is not None:
        out = pc.if_else(b.failed, pa.scalar(None, out.type), out)
    if indices is not None:
        out = out.take(indices)
    return out[0] if scalar else out


class _ValueFailures(_Eager):
    """The eager backend of a TRY_CAST over ``rows`` values: a ``cast`` kernel that fails on some
    of them casts the others, NULL in place of those, and remembers their rows (``failed``).

    Every kernel of a conversion works value by value, so a value's steps are the same alone
    or among others: CAST fails on a value exactly when one of its kernels fails on it, and a
    value none fails on comes out as CAST gives it. The failed rows are NULL in the end
    whatever the steps after the cast make of their NULL (an ``if_else`` choosing another
    branch, a ``coalesce``). The failing values are found by halves (a few bad values among many
    cost a few casts more), one cast kernel per attempt; numbers certainly out of an integer or
    DECIMAL type's range without one (:func:`_certainly_outside`). (The ``cast`` kernel is the
    only one of :func:`_spark_cast`'s that fails on a value; another one failing fails all.)"""

    def __init__(self, rows: int):
        super().__init__(_NO_ROWS)
        self.rows = rows
        self.failed: pa.Array | None = None  # boolean over the rows: TRUE where a cast failed

    def call(self, name: str, args: Sequence[Any], options: pc.FunctionOptions | None = None) -> Any:
        try:
            return pc.call_function(name, list(args), options)
        except _VALUE_ERRORS:
            values = args[0]
            if name != "cast" or not isinstance(values, pa.Array) or len(values) != self.rows:
                raise  # not a cast of the rows' values (a constant's): it fails as CAST does
        target = pc.call_function(name, [values.slice(0, 0)], options).type  # (CastOptions does not tell)
        certain = _certainly_outside(values, target)
        if certain is not None:  # a dense overflow (BIGINT to TINYINT): found without a cast per value
            values = pc.if_else(certain, pa.scalar(None, values.type), values)
        positions: list[int] = []
        _failing_positions(values, options, 0, positions)
        failed = np.zeros(self.rows, dtype=bool)
        failed[positions] = True
        mask = pa.array(failed) if certain is None else pc.or_(certain, pa.array(failed))
        self.failed = mask if self.failed is None else pc.or_(self.failed, mask)
        return pc.call_function(name, [pc.if_else(mask, pa.scalar(None, values.type), values)], options)


def _certainly_outside(values: pa.Array, to: pa.DataType) -> pa.Array | None:
    """For a cast of numbers to an integer or DECIMAL type: TRUE where a value is certainly out
    of its range (NaN included), FALSE where it may fit (the cast tells); None for other casts."""
    source = values.type
    if not (pa.types.is_integer(source) or pa.types.is_floating(source) or pa.types.is_decimal(source)):
        return None
    if pa.types.is_integer(to):
        low, high = integer_range(to)
    elif pa.types.is_decimal(to):  # |v| >= 10^(p - s) fits no DECIMAL(p, s), rounded or not
        high = 10 ** (to.precision - to.scale)
        low = -high
    else:
        return None
    try:
        if pa.types.is_floating(source):  # compared as doubles, the bounds rounded outwards
            values = values.cast(pa.float64())
            low_f, high_f = float(low), float(high)
            if Decimal(low_f) > low:
                low_f = math.nextafter(low_f, -math.inf)
            if Decimal(high_f) < high:
                high_f = math.nextafter(high_f, math.inf)
            low_s, high_s = pa.scalar(low_f), pa.scalar(high_f)
            nan = pc.is_nan(values)
        elif pa.types.is_decimal(source):
            bound = pa.decimal256(max(len(str(abs(low))), len(str(high))), 0)
            low_s, high_s = pa.scalar(Decimal(low), bound), pa.scalar(Decimal(high), bound)
            nan = None
        else:
            if not -(1 << 63) <= low or not high < (1 << 63):
                return None
            low_s, high_s = pa.scalar(low, pa.int64()), pa.scalar(high, pa.int64())
            nan = None
        if pa.types.is_integer(to):
            outside = pc.or_(pc.less(values, low_s), pc.greater(values, high_s))
        else:
            outside = pc.or_(pc.less_equal(values, low_s), pc.greater_equal(values, high_s))
        if nan is not None:
            outside = pc.or_(outside, nan)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):  # no such comparison: the casts tell
        return None
    return pc.fill_null(outside, False)


def _failing_positions(values: pa.Array, options: pc.FunctionOptions | None, start: int, out: list[int]) -> None:
    """Add to ``out`` the positions (from ``start``) of the values the cast fails on."""
    try:
        pc.call_function("cast", [values], options)
        return
    except _VALUE_ERRORS:
        if len(values) == 1:
            out.append(start)
            return
    half = len(values) // 2
    _failing_positions(values.slice(0, half), options, start, out)
    _failing_positions(values.slice(half), options, start + half, out)


_TRY_CAST_UDFS: dict[tuple[pa.DataType, pa.DataType], str] = {}
_TRY_CAST_LOCK = threading.Lock()


def _try_cast_udf(raw: pa.DataType, to: pa.DataType) -> str:
    """The name of a scalar function, registered with Arrow once per (``raw``, ``to``), that
    applies :func:`_try_cast_values` to a batch: a lazy expression (a dataset scan's filter) calls
    it as it calls a kernel. Arrow matches a function's argument type exactly, hence one function
    per input type as the rows hold it."""
    key = (raw, to)
    with _TRY_CAST_LOCK:
        name = _TRY_CAST_UDFS.get(key)
        if name is not None:
            return name
        name = f"deltatx_try_cast({raw} -> {to})"
        source = plain_type(raw)

        def run(ctx: Any, values: Any) -> Any:
            out = _try_cast_values(values, source, to)
            return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out

        doc = {"summary": f"Spark's TRY_CAST from {raw} to {to}",
               "description": "CAST's value, NULL for each value CAST fails on"}
        try:
            pc.register_scalar_function(run, name, doc, {"value": raw}, to)
        except pa.ArrowKeyError:  # registered by an earlier import of this module: the same cast
            pass
        _TRY_CAST_UDFS[key] = name
        return name


def _promote(b: _Backend, e_left: Expr, left: Any, e_right: Expr, right: Any) -> tuple[Any, Any]:
    """Both sides cast to Spark's common type where it is not Arrow's (see the module doc)."""
    lt, rt = _known_type(b, e_left, left), _known_type(b, e_right, right)
    if lt is None or rt is None or lt.equals(rt):
        return left, right
    t = common_type(lt, rt)
    if t is None:
        return left, right
    return _spark_cast(b, left, lt, t), _spark_cast(b, right, rt, t)


def _lower_comparison(e: Comparison, b: _Backend) -> Any:
    if e.op == "<=>":
        left, right = _lower(e.left, b), _lower(e.right, b)
        both_null = b.call("and", [b.call("is_null", [left]), b.call("is_null", [right])])
        if _is_untyped_null(e.left) or _is_untyped_null(e.right):
            return both_null
        left, right = _promote(b, e.left, left, e.right, right)
        if b.float_type(e.left, left) or b.float_type(e.right, right):
            same = _float_comparison("=", left, right, b, e.left, e.right)
        else:
            same = b.call("equal", [left, right])
        equal = b.call("coalesce", [same, b.scalar(pa.scalar(False))])
        return b.call("or", [equal, both_null])
    if _is_untyped_null(e.left) or _is_untyped_null(e.right):
        return b.scalar(_NULL_BOOL)
    left, right = _promote(b, e.left, _lower(e.left, b), e.right, _lower(e.right, b))
    if b.float_type(e.left, left) or b.float_type(e.right, right):
        return _float_comparison(e.op, left, right, b, e.left, e.right)
    return b.call(_COMPARE[e.op], [left, right])


def _float_comparison(op: str, left: Any, right: Any, b: _Backend, e_left: Expr, e_right: Expr) -> Any:
    """Spark's float comparison: NaN = NaN, NaN above every other number (IEEE says false for
    every comparison with NaN but ``!=``). NULL on either side stays NULL (Kleene logic).

    Against a number constant (a CHECK constraint's ``value >= 0``, most WHERE clauses) IEEE is
    already right except where NaN sits above the constant: one ``is_nan`` for ``>``/``>=``,
    nothing more for the other operators."""
    ieee = b.call(_COMPARE[op], [left, right])
    if _number_constant(e_right):  # x op c
        return b.call("or_kleene", [ieee, b.call("is_nan", [left])]) if op in (">", ">=") else ieee
    if _number_constant(e_left):  # c op x
        return b.call("or_kleene", [ieee, b.call("is_nan", [right])]) if op in ("<", "<=") else ieee
    nan_l, nan_r = b.call("is_nan", [left]), b.call("is_nan", [right])
    if op == "=":
        return b.call("or_kleene", [ieee, b.call("and_kleene", [nan_l, nan_r])])
    if op == "!=":
        return b.call("and_kleene", [ieee, b.call("invert", [b.call("and_kleene", [nan_l, nan_r])])])
    if op == "<":
        return b.call("or_kleene", [ieee, b.call("and_kleene", [b.call("invert", [nan_l]), nan_r])])
    if op == "<=":
        return b.call("or_kleene", [ieee, b.call("and_kleene", [nan_r, b.call("is_valid", [left])])])
    if op == ">":
        return b.call("or_kleene", [ieee, b.call("and_kleene", [nan_l, b.call("invert", [nan_r])])])
    return b.call("or_kleene", [ieee, b.call("and_kleene", [nan_l, b.call("is_valid", [right])])])  # >=


def _number_constant(e: Expr) -> bool:
    """A non-NULL, non-NaN constant."""
    return isinstance(e, Literal) and e.value is not None and not (isinstance(e.value, float) and e.value != e.value)


def _value_set(values: list[Literal]) -> pa.Array:
    """The constants of an IN list as one array, of their common type (binding gives them one)."""
    types = list(dict.fromkeys(v.arrow_type for v in values))  # in order: a set's order varies by process
    if len(types) == 1:
        return pa.array([v.value for v in values], type=types[0])
    t: pa.DataType | None = types[0]
    for other in types[1:]:
        t = common_type(t, other) if t is not None else None
    if t is None:  # not Spark types (unsigned integers): Arrow infers one
        try:
            return pa.array([v.value for v in values])
        except (OverflowError, pa.ArrowInvalid):
            # integers no Arrow integer type holds together (a negative one and one above
            # 2^63): as DECIMAL(38, 0), which holds each exactly
            if all(type(v.value) is int and abs(v.value) < 10 ** 38 for v in values):
                return pa.array([Decimal(v.value) for v in values], type=pa.decimal128(38, 0))
            raise PredicateError(f"the values of an IN list ({', '.join(str(v) for v in values)}) "
                                 f"have no common type") from None
    return pa.array([cast_constant(v, t).value for v in values], type=t)


def _lower_in(e: In, b: _Backend) -> Any:
    if not e.values:
        return b.scalar(pa.scalar(False))
    operand = _lower(e.operand, b)
    if all(isinstance(v, Literal) for v in e.values):
        present = [v for v in e.values if v.value is not None]  # type: ignore[union-attr]
        has_null = len(present) < len(e.values)
        if not present:
            return b.scalar(_NULL_BOOL)
        values = _value_set(present)
        operand_type = _known_type(b, e.operand, operand)
        t = common_type(operand_type, values.type) if operand_type is not None else None
        if t is not None:  # Spark compares in the common type: a FLOAT column with 0.1 as DOUBLE
            operand = _spark_cast(b, operand, operand_type, t)
            values = cast_values(values, t)
        float_type = values.type if pa.types.is_floating(values.type) else b.float_type(e.operand, operand)
        if float_type is not None:
            # -0.0 is 0.0 to Spark, not to a hash lookup: both sides get "+ 0"; NaN finds NaN
            zero = pa.scalar(0, float_type)
            operand = b.call("add", [operand, b.scalar(zero)])
            values = pc.add(values.cast(float_type), zero)
        opts = pc.SetLookupOptions(values, skip_nulls=True)  # type: ignore[arg-type]
        found = b.call("is_in", [operand], opts)
        if has_null:  # no match but a NULL in the list: unknown
            found = b.call("if_else", [found, b.scalar(pa.scalar(True)), b.scalar(_NULL_BOOL)])
        return b.call("if_else", [b.call("is_null", [operand]), b.scalar(_NULL_BOOL), found])
    out = None
    for v in e.values:
        eq = _lower_comparison(Comparison("=", e.operand, v), b)
        out = eq if out is None else b.call("or_kleene", [out, eq])
    return out


def _lower_arithmetic(e: Arithmetic, b: _Backend) -> Any:
    left, right = _lower(e.left, b), _lower(e.right, b)
    probe = _refuse_zero_divisor(b, e, left, right) if e.op in ("DIV", "/", "%") else None
    result = _arithmetic(e, b, left, right)
    # lazily, the probe (which fails on a zero divisor) is evaluated with the result
    # (NULL where the probe is: only where the divisor is, and the result with it)
    return result if probe is None else b.call("if_else", [b.call("is_valid", [probe]), result, b.scalar(pa.scalar(None))])


def _arithmetic(e: Arithmetic, b: _Backend, left: Any, right: Any) -> Any:
    lt, rt = _known_type(b, e.left, left), _known_type(b, e.right, right)
    null = b.scalar(pa.scalar(None))
    if e.op == "DIV":
        return _integral_divide(b, e, left, lt, right, rt)
    if e.op == "/":
        if lt is not None and rt is not None and (pa.types.is_decimal(lt) or pa.types.is_decimal(rt)):
            dl, dr = decimal_of(lt, _int_value(e.left)), decimal_of(rt, _int_value(e.right))
            if dl is not None and dr is not None:
                return _decimal_divide(b, left, lt, dl, right, rt, dr)
        left, right = _spark_cast(b, left, lt, pa.float64()), _spark_cast(b, right, rt, pa.float64())
        zero = b.call("equal", [right, b.scalar(pa.scalar(0.0))])
        return b.call("divide", [left, b.call("if_else", [zero, null, right])])
    exact = _spark_decimals(e, lt, rt)
    if exact is not None:
        return _decimal_arithmetic(b, e.op, left, lt, exact[0], right, rt, exact[1])
    if lt is not None and rt is not None and (pa.types.is_floating(lt) or pa.types.is_floating(rt)):
        left, right = _promote(b, e.left, left, e.right, right)  # BIGINT * DOUBLE: as DOUBLE, rounding
    if e.op in _ARITH:
        return b.call(_ARITH[e.op], [left, right])
    # '%': Java's remainder, with the sign of the dividend. Arrow's modulo takes the divisor's
    # sign (floored); where the signs differ and it is not 0 the two differ by the divisor.
    # (No abs(): |-2^63| does not exist, so BIGINT's smallest value would wrap.)
    zero = b.call("equal", [right, b.scalar(pa.scalar(0))])
    divisor = b.call("if_else", [zero, null, right])
    if lt is not None and rt is not None and (pa.types.is_floating(lt) or pa.types.is_floating(rt)):
        # Floats: the remainder of the magnitudes (exact, as C's fmod), with the dividend's sign.
        # Shifting a floored remainder by the divisor instead rounds: -1.7e-19 % 1 came out 0.0
        # (Java: -1.7e-19), and -3.0 % Infinity NaN (Java: -3.0).
        magnitude = b.call("modulo", [b.call("abs", [left]), b.call("abs", [divisor])])
        negative = b.call("less", [left, b.scalar(pa.scalar(0.0))])
        return b.call("if_else", [negative, b.call("negate", [magnitude]), magnitude])
    floored = b.call("modulo", [left, divisor])
    zero_value = b.scalar(pa.scalar(0))
    signs_differ = b.call("xor", [b.call("less", [left, zero_value]), b.call("less", [divisor, zero_value])])
    fix = b.call("and", [b.call("not_equal", [floored, zero_value]), signs_differ])
    return b.call("if_else", [fix, b.call("subtract", [floored, divisor]), floored])


#: functions whose arguments after the first Spark evaluates only when the first does not decide
_LAZY_ARGUMENTS = frozenset(("if", "coalesce", "nvl", "ifnull"))


@contextmanager
def _guarded(b: _Backend) -> Iterator[None]:
    """Lower what is inside as a part Spark may not evaluate for a row (a CASE branch, IF's
    values, COALESCE's fallbacks, the right side of AND/OR)."""
    b.guarded += 1
    try:
        yield
    finally:
        b.guarded -= 1


def _refuse_zero_divisor(b: _Backend, e: Arithmetic, dividend: Any, divisor: Any) -> Any:
    """Spark 4's ANSI mode: ``/``, ``%`` and ``DIV`` of a non-NULL dividend by zero fail
    (DIVIDE_BY_ZERO, REMAINDER_BY_ZERO) — an UPDATE ``SET v = v / 0`` must not write NULL.

    Except where Spark might not evaluate the division for that row (:func:`_guarded`): deltatx
    computes every branch for every row (Arrow), so failing there would also fail the usual guard
    ``CASE WHEN b <> 0 THEN a / b END``; such a division gives NULL for a zero divisor. Eagerly the
    rows are looked at now; lazily the expression carries a probe that fails when evaluated."""
    if b.guarded or _is_untyped_null(e.left) or _is_untyped_null(e.right):
        return None
    t = _known_type(b, e.right, divisor)
    if t is not None and not is_number(t):  # text read as a number: the division's own cast decides
        return None
    zero = pa.scalar(0) if t is None else pa.scalar(Decimal(0), t) if pa.types.is_decimal(t) else pa.scalar(0, t)
    bad = b.call("and_kleene", [b.call("is_valid", [dividend]), b.call("equal", [divisor, b.scalar(zero)])])
    kind = "REMAINDER_BY_ZERO" if e.op == "%" else "DIVIDE_BY_ZERO"
    if isinstance(b, _Eager):
        found = pc.any(bad).as_py() if isinstance(bad, (pa.Array, pa.ChunkedArray)) else bad.as_py()
        if found:
            raise PredicateError(f"[{kind}] {e}: division by zero (Spark 4, ANSI mode); guard it "
                                 f"(CASE WHEN divisor <> 0 THEN ... END) or make the divisor NULL")
        return None
    one = b.scalar(pa.scalar(1, pa.int8()))
    return b.call("divide_checked", [one, b.call("if_else", [bad, b.scalar(pa.scalar(0, pa.int8())), one])])


def _integral_divide(b: _Backend, e: Arithmetic, left: Any, lt: pa.DataType | None,
                     right: Any, rt: pa.DataType | None) -> Any:
    """Spark's ``a DIV b``: the quotient truncated toward zero, as BIGINT; a zero ``b`` fails as
    for ``/`` and ``%`` (:func:`_refuse_zero_divisor`; NULL inside a guarded branch). Overflow
    fails: BIGINT's smallest value DIV -1, and a DECIMAL quotient beyond BIGINT.

    Integers divide as BIGINT. A DECIMAL with a DECIMAL or an integer (an integer constant with
    its own digits) divides exactly. Floats are cast to BIGINT first, as Spark's implicit cast
    does (``7.9D DIV 2`` is ``7 DIV 2``; NaN and values beyond BIGINT fail), a DECIMAL meeting a
    float being read as DOUBLE first. Text is refused: CAST it."""
    bigint = pa.int64()
    if _is_untyped_null(e.left) or _is_untyped_null(e.right):
        return b.scalar(pa.scalar(None, bigint))
    for side, t in ((e.left, lt), (e.right, rt)):
        if t is not None and not (is_number(t) or pa.types.is_null(t)):
            raise PredicateError(f"{e}: DIV divides numbers, and {side} is {type_sql(t)}; CAST it to a number")
    if lt is not None and rt is not None and (pa.types.is_decimal(lt) or pa.types.is_decimal(rt)):
        dl, dr = decimal_of(lt, _int_value(e.left)), decimal_of(rt, _int_value(e.right))
        if dl is not None and dr is not None:
            return _decimal_integral_divide(b, e, _spark_cast(b, left, lt, dl), dl, _spark_cast(b, right, rt, dr), dr)
    if lt is not None and rt is not None and (pa.types.is_floating(lt) or pa.types.is_floating(rt)):
        if pa.types.is_decimal(lt):
            left, lt = _spark_cast(b, left, lt, pa.float64()), pa.float64()
        if pa.types.is_decimal(rt):
            right, rt = _spark_cast(b, right, rt, pa.float64()), pa.float64()
    dividend, divisor = _spark_cast(b, left, lt, bigint), _spark_cast(b, right, rt, bigint)
    zero = b.call("equal", [divisor, b.scalar(pa.scalar(0, bigint))])
    divisor = b.call("if_else", [zero, b.scalar(pa.scalar(None, bigint)), divisor])
    return b.call("divide_checked", [dividend, divisor])  # truncates toward zero; MIN DIV -1 fails


def _decimal_integral_divide(b: _Backend, e: Arithmetic, left: Any, dl: pa.Decimal128Type,
                             right: Any, dr: pa.Decimal128Type) -> Any:
    """DIV of two DECIMALs (of types ``dl``, ``dr``): Arrow's DECIMAL256 quotient is truncated at
    its scale (at least 4 digits), so truncating it again to a whole number is the exact quotient
    truncated; the cast to BIGINT fails where it does not fit."""
    scale = max(4, dl.scale + dr.precision - dr.scale + 1)  # Arrow's quotient scale
    if dl.precision - dl.scale + dr.scale + scale > _MAX_WIDE_PRECISION:
        raise PredicateError(f"{e}: DECIMAL({dl.precision},{dl.scale}) DIV DECIMAL({dr.precision},{dr.scale}) "
                             f"needs more than {_MAX_WIDE_PRECISION} digits to divide exactly: CAST an operand "
                             f"to fewer digits")
    divisor_type = pa.decimal256(dr.precision, dr.scale)
    divisor = _as_wide(b, right, dr)
    zero = b.call("equal", [divisor, b.scalar(pa.scalar(Decimal(0), divisor_type))])
    divisor = b.call("if_else", [zero, b.scalar(pa.scalar(None, divisor_type)), divisor])
    quotient = b.call("divide", [_as_wide(b, left, dl), divisor])
    whole = b.call("round", [quotient], pc.RoundOptions(0, "towards_zero"))
    return b.call("cast", [whole], pc.CastOptions(pa.int64()))


def _int_value(e: Expr) -> int | None:
    return e.value if isinstance(e, Literal) and type(e.value) is int else None


def _spark_decimals(e: Arithmetic, lt: pa.DataType | None,
                    rt: pa.DataType | None) -> tuple[pa.Decimal128Type, pa.Decimal128Type] | None:
    """The DECIMAL types Spark computes ``e`` (``+ - * %``) in, or None where it is no DECIMAL
    arithmetic: a DECIMAL with a DECIMAL or an integer. An integer column takes the digits its type
    can hold (INT as DECIMAL(10,0), BIGINT as DECIMAL(20,0)), an integer constant only its own
    (``2`` as DECIMAL(1,0): ``dec * 2`` on DECIMAL(10,2) is DECIMAL(12,2)). Arrow's own widening
    gives every integer 19 digits or more, so its result types were not Spark's."""
    if lt is None or rt is None or not (pa.types.is_decimal128(lt) or pa.types.is_decimal128(rt)):
        return None
    if pa.types.is_decimal256(lt) or pa.types.is_decimal256(rt):  # not a Spark type: Arrow's rules
        return None
    dl, dr = decimal_of(lt, _int_value(e.left)), decimal_of(rt, _int_value(e.right))
    return None if dl is None or dr is None else (dl, dr)


def decimal_result_type(op: str, left: pa.Decimal128Type, right: pa.Decimal128Type) -> tuple[int, int]:
    """Spark's (DecimalPrecision) precision and scale of ``left op right``, before it bounds them
    at 38 digits (:func:`~deltatx.expr.values.bounded_decimal`): ``+``/``-`` keep the larger
    scale and one more integer digit than the wider side; ``*`` adds the precisions (and one) and
    the scales; ``%`` keeps the larger scale and the narrower side's integer digits."""
    p1, s1, p2, s2 = left.precision, left.scale, right.precision, right.scale
    if op in ("+", "-"):
        scale = max(s1, s2)
        return max(p1 - s1, p2 - s2) + scale + 1, scale
    if op == "*":
        return p1 + p2 + 1, s1 + s2
    if op == "%":
        scale = max(s1, s2)
        return min(p1 - s1, p2 - s2) + scale, scale
    raise ValueError(f"no DECIMAL result type for {op!r}")


#: Arrow's widest DECIMAL
_MAX_WIDE_PRECISION = 76


def _decimal_arithmetic(b: _Backend, op: str, left: Any, lt: pa.DataType, dl: pa.Decimal128Type,
                        right: Any, rt: pa.DataType, dr: pa.Decimal128Type) -> Any:
    """Spark's DECIMAL ``+ - * %`` of ``left`` (type ``lt``, computed as ``dl``) and ``right``:
    the result type of :func:`decimal_result_type`, bounded at 38 digits as Spark bounds it with
    precision loss allowed (fraction digits given up, down to 6, and the exact result rounded half
    up to them); a result that does not fit its type fails (ANSI). A zero divisor of ``%`` gives
    NULL, as for the other types.

    The operands are first cast to the DECIMALs Spark computes in (an integer to ``dl``/``dr``):
    Arrow's result types for ``+ - *`` are then Spark's exact ones, and a result wider than 38
    digits is computed exactly in DECIMAL256 and rounded to the bounded type."""
    precision, scale = decimal_result_type(op, dl, dr)
    result = bounded_decimal(precision, scale)
    left, right = _spark_cast(b, left, lt, dl), _spark_cast(b, right, rt, dr)
    if op == "%":
        return _decimal_remainder(b, left, dl, right, dr, result)
    if precision <= MAX_DECIMAL_PRECISION:
        return b.call("cast", [b.call(_ARITH[op], [left, right])], pc.CastOptions(result))
    if op == "*" and precision > _MAX_WIDE_PRECISION:
        exact = _full_width_product(b, left, dl, right, dr, result)
    elif op == "*":  # the product has at most p1 + p2 digits: the declared one more is room for rounding up
        exact = b.call("multiply", [_as_wide(b, left, dl), _as_wide(b, right, dr)])
    else:  # a sum may use every declared digit: one more for rounding up
        if precision + 1 > _MAX_WIDE_PRECISION:
            raise PredicateError(f"DECIMAL({dl.precision},{dl.scale}) {op} DECIMAL({dr.precision},{dr.scale}) "
                                 f"needs {precision} digits before Spark bounds it at 38; deltatx computes at "
                                 f"most {_MAX_WIDE_PRECISION - 1} exactly: CAST an operand to fewer digits")
        exact = b.call(_ARITH[op], [_as_wide(b, left, dl), _as_wide(b, right, dr)])
        exact = b.call("cast", [exact], pc.CastOptions(pa.decimal256(precision + 1, scale)))
    rounded = b.call("round", [exact], pc.RoundOptions(result.scale, "half_towards_infinity"))
    return b.call("cast", [rounded], pc.CastOptions(result))  # fails where the value does not fit


def _as_wide(b: _Backend, value: Any, t: pa.Decimal128Type, precision: int | None = None) -> Any:
    """``value`` (a DECIMAL of type ``t``) as DECIMAL256, of ``precision`` digits (``t``'s by default)."""
    return b.call("cast", [value], pc.CastOptions(pa.decimal256(precision or t.precision, t.scale)))


def _full_width_product(b: _Backend, left: Any, dl: pa.Decimal128Type, right: Any, dr: pa.Decimal128Type,
                        result: pa.Decimal128Type) -> Any:
    """The exact product of two DECIMAL(38, s) values as DECIMAL256(76, s1 + s2), for rounding to
    ``result``. Arrow declares a product p1 + p2 + 1 digits wide, one more than DECIMAL256 has:
    a row where one side has at most 37 digits is multiplied with that side declared so (the
    product then has at most 75 digits, and room to round up). A row where both sides have 38
    digits is at least 10^(74 - s1 - s2), more than ``result`` holds (the scales where it would not
    are refused here): it gets a value the final cast refuses, so that it fails as Spark's overflow
    does (ANSI)."""
    product_scale = dl.scale + dr.scale
    if 74 - product_scale < MAX_DECIMAL_PRECISION - result.scale:
        raise PredicateError(f"DECIMAL({dl.precision},{dl.scale}) * DECIMAL({dr.precision},{dr.scale}) needs 77 "
                             f"digits before Spark bounds it at 38; deltatx computes at most 76 exactly: CAST an "
                             f"operand to fewer digits")

    def narrow(value: Any, t: pa.Decimal128Type) -> Any:
        """TRUE where ``value`` has at most 37 digits."""
        bound = pa.scalar(Decimal(10) ** (MAX_DECIMAL_PRECISION - 1 - t.scale), t)
        return b.call("less", [b.call("abs", [value]), b.scalar(bound)])

    def narrowed(value: Any, t: pa.Decimal128Type, keep: Any) -> Any:
        """``value`` declared with 37 digits, 0 where ``keep`` is not TRUE (it would not fit)."""
        zero = b.scalar(pa.scalar(Decimal(0), t))
        return _as_wide(b, b.call("if_else", [keep, value, zero]), t, MAX_DECIMAL_PRECISION - 1)

    right_narrow, left_narrow = narrow(right, dr), narrow(left, dl)
    by_narrow_right = b.call("multiply", [_as_wide(b, left, dl), narrowed(right, dr, right_narrow)])
    by_narrow_left = b.call("multiply", [narrowed(left, dl, left_narrow), _as_wide(b, right, dr)])
    product_type = pa.decimal256(_MAX_WIDE_PRECISION, product_scale)
    too_wide = b.scalar(pa.scalar(Decimal(10) ** (_MAX_WIDE_PRECISION - 1 - product_scale), product_type))
    return b.call("if_else", [right_narrow, by_narrow_right,
                              b.call("if_else", [left_narrow, by_narrow_left, too_wide])])


def _decimal_remainder(b: _Backend, left: Any, dl: pa.Decimal128Type, right: Any, dr: pa.Decimal128Type,
                       result: pa.Decimal128Type) -> Any:
    """Spark's DECIMAL ``%``: the exact remainder with the sign of the dividend (Java's
    BigDecimal.remainder), NULL for a zero divisor, of type ``result``. Both sides meet at the
    larger scale first; Arrow's remainder is floored (the divisor's sign), so where it is not 0 and
    the signs differ it is moved back by the divisor. The remainder is smaller than both sides, so
    it fits ``result``."""
    scale = max(dl.scale, dr.scale)
    digits = max(dl.precision - dl.scale, dr.precision - dr.scale) + scale
    # (one digit of room: moving the floored remainder back by the divisor passes through it)
    common = (pa.decimal128 if digits < MAX_DECIMAL_PRECISION else pa.decimal256)(digits, scale)
    left = b.call("cast", [left], pc.CastOptions(common))
    right = b.call("cast", [right], pc.CastOptions(common))
    zero = b.scalar(pa.scalar(Decimal(0), common))
    divisor = b.call("if_else", [b.call("equal", [right, zero]), b.scalar(pa.scalar(None, common)), right])
    floored = b.call("cast", [b.call("modulo", [left, divisor])], pc.CastOptions(common))
    signs_differ = b.call("xor", [b.call("less", [left, zero]), b.call("less", [divisor, zero])])
    fix = b.call("and", [b.call("not_equal", [floored, zero]), signs_differ])
    moved = b.call("cast", [b.call("subtract", [floored, divisor])], pc.CastOptions(common))
    return b.call("cast", [b.call("if_else", [fix, moved, floored])], pc.CastOptions(result))


def _decimal_divide(b: _Backend, left: Any, lt: pa.DataType, dl: pa.Decimal128Type,
                    right: Any, rt: pa.DataType, dr: pa.Decimal128Type) -> Any:
    """Spark's exact DECIMAL division: result scale max(6, s1 + p2 + 1), precision
    p1 - s1 + s2 + scale, bounded at 38 digits (:func:`~deltatx.expr.values.bounded_decimal`),
    rounded half away from zero (``99.99 / 3`` is 33.330000). Arrow truncates its quotient, so
    it divides in DECIMAL256 with more fraction digits than the result keeps, and the one
    rounding happens after (truncating further digits cannot move a half-way rounding)."""
    scale = max(6, dl.scale + dr.precision + 1)
    result = bounded_decimal(dl.precision - dl.scale + dr.scale + scale, scale)
    dividend_scale = max(dl.scale, result.scale + dr.scale)
    wide = pc.CastOptions(pa.decimal256(dl.precision - dl.scale + dividend_scale, dividend_scale))
    dividend = b.call("cast", [_spark_cast(b, left, lt, dl)], wide)
    divisor_type = pa.decimal256(dr.precision, dr.scale)
    divisor = b.call("cast", [_spark_cast(b, right, rt, dr)], pc.CastOptions(divisor_type))
    zero = b.call("equal", [divisor, b.scalar(pa.scalar(0, divisor_type))])
    divisor = b.call("if_else", [zero, b.scalar(pa.scalar(None, divisor_type)), divisor])
    quotient = b.call("divide", [dividend, divisor])
    rounded = b.call("round", [quotient], pc.RoundOptions(result.scale, "half_towards_infinity"))
    return b.call("cast", [rounded], pc.CastOptions(result))


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def to_arrow(expr: Expr, schema: pa.Schema | None = None) -> pc.Expression:
    """``expr`` as a lazy Arrow expression (SQL semantics; NULL where SQL gives NULL).

    ``schema`` gives the columns' types, which a lazy expression cannot see: a comparison of two
    float columns gets Spark's NaN semantics only with it (one with a float constant always does)."""
    try:
        out = _lower(expr, _Lazy(schema))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise PredicateError(f"cannot translate {expr} to Arrow: {exc}") from None
    return out if isinstance(out, pc.Expression) else pc.scalar(out)


def to_arrow_filter(expr: Expr, schema: pa.Schema | None = None) -> pc.Expression:
    """A filter keeping rows where ``expr`` is TRUE (NULL -> dropped), for datasets/Table.filter."""
    return pc.Expression._call("coalesce", [to_arrow(expr, schema), pc.scalar(False)])


def to_arrow_keep(expr: Expr, schema: pa.Schema | None = None) -> pc.Expression:
    """DELETE's complement as a filter: keep rows where ``NOT coalesce(expr, false)``."""
    return pc.Expression._call("invert", [to_arrow_filter(expr, schema)])


def evaluate(expr: Expr, table: pa.Table) -> pa.Array | pa.ChunkedArray:
    """Values of ``expr`` for each row of ``table`` (constants are repeated to the row count)."""
    try:
        out = _lower(expr, _Eager(table))
    except PredicateError:
        raise
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise PredicateError(f"cannot evaluate {expr}: {exc}") from None
    if isinstance(out, pa.Scalar):
        return pa.repeat(out, table.num_rows)
    return out


def _require_boolean(expr: Expr, values: pa.Array | pa.ChunkedArray) -> None:
    if not pa.types.is_boolean(values.type) and not pa.types.is_null(values.type):
        raise PredicateError(f"predicate {expr} is of type {values.type}, not boolean")


def matches(expr: Expr, table: pa.Table) -> pa.ChunkedArray | pa.Array:
    """Boolean mask, no nulls: TRUE where ``expr`` is TRUE (a WHERE clause's rows)."""
    values = evaluate(expr, table)
    _require_boolean(expr, values)
    if pa.types.is_null(values.type):
        return pa.repeat(pa.scalar(False), table.num_rows)
    return pc.fill_null(values, False)


def rows_to_keep(expr: Expr, table: pa.Table) -> pa.ChunkedArray | pa.Array:
    """DELETE's mask: TRUE for rows that stay, i.e. ``NOT coalesce(expr, false)``."""
    return pc.invert(matches(expr, table))


def filter_table(table: pa.Table, expr: Expr) -> pa.Table:
    """The rows of ``table`` where ``expr`` is TRUE."""
    return table.filter(matches(expr, table))


def result_type(expr: Expr, schema: pa.Schema) -> pa.DataType:
    """The Arrow type ``expr`` evaluates to over a table of ``schema``."""
    return evaluate(expr, schema.empty_table()).type
