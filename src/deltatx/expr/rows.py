"""Row-level evaluation: an :class:`~deltatx.expr.model.Expr` as Arrow compute.

Owns SQL semantics over rows. One lowering serves two back ends: :func:`to_arrow` builds a lazy
``pyarrow.compute.Expression`` (for ``Table.filter`` and datasets), :func:`evaluate` computes values
eagerly over a table (UPDATE ``SET`` values, MERGE conditions, partition-value evaluation in
pruning). Semantics are SQL's three-valued logic: comparisons with NULL are NULL, ``AND``/``OR`` are
Kleene, ``IN`` with a NULL in the list is NULL when nothing matches; a WHERE keeps only TRUE rows
(:func:`matches`), and DELETE keeps ``NOT coalesce(pred, false)`` (:func:`rows_to_keep`).

Arithmetic follows Spark's ANSI mode where Arrow can: ``+ - *`` raise on overflow, ``/`` is
floating-point division, ``%`` takes the sign of the dividend, and a zero divisor gives NULL.
Float comparisons follow Spark, not IEEE: NaN equals NaN and is larger than every other value,
and -0.0 equals 0.0 (``IN`` too). A lazy form sees column types only through the ``schema`` it
is given. (Scans apply float filters after reading, not in Arrow's Parquet scan: io/reader.py.)
A column qualified as ``t.id`` that is still qualified when evaluated names the flat column
``"t.id"`` (the convention for a joined table of aliased inputs).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import PredicateError
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


def flat_name(c: Column) -> str:
    """The table column a (possibly qualified) column reference reads."""
    return c.ref


class _Lazy(_Backend):
    def __init__(self, schema: pa.Schema | None = None):
        self.schema = schema  # column types, for float comparisons between columns
        self._no_rows: pa.Table | None = None

    def column(self, c: Column) -> Any:
        return pc.field(flat_name(c), *c.path) if c.path else pc.field(flat_name(c))

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
        return arr

    def scalar(self, value: pa.Scalar) -> Any:
        return value

    def call(self, name: str, args: Sequence[Any], options: pc.FunctionOptions | None = None) -> Any:
        return pc.call_function(name, list(args), options)

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
    strings = [b.call("cast", [a], pc.CastOptions(pa.string())) for a in low]
    return b.call("binary_join_element_wise", [*strings, b.scalar(pa.scalar(""))])


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


def _round(b: _Backend, low: list[Any], raw: tuple[Expr, ...]) -> Any:
    digits = _literal_arg("round", raw, 1, int) if len(raw) > 1 else 0
    return b.call("round", [low[0]], pc.RoundOptions(digits, "half_towards_infinity"))


#: name -> (min args, max args, lowering)
FUNCTIONS: dict[str, tuple[int, int, Callable[[_Backend, list[Any], tuple[Expr, ...]], Any]]] = {
    "upper": (1, 1, _simple("utf8_upper")),
    "lower": (1, 1, _simple("utf8_lower")),
    "length": (1, 1, _simple("utf8_length")),
    "trim": (1, 1, _simple("utf8_trim", pc.TrimOptions(" "))),
    "ltrim": (1, 1, _simple("utf8_ltrim", pc.TrimOptions(" "))),
    "rtrim": (1, 1, _simple("utf8_rtrim", pc.TrimOptions(" "))),
    "concat": (1, 255, _concat),
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
    "greatest": (1, 255, _simple("max_element_wise", pc.ElementWiseAggregateOptions(skip_nulls=True))),
    "least": (1, 255, _simple("min_element_wise", pc.ElementWiseAggregateOptions(skip_nulls=True))),
    "round": (1, 2, _round),
    "isnan": (1, 1, _simple("is_nan")),
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
        return b.call("and_kleene", [_lower(e.left, b, True), _lower(e.right, b, True)])
    if isinstance(e, Or):
        return b.call("or_kleene", [_lower(e.left, b, True), _lower(e.right, b, True)])
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
        return lower(b, [_lower(a, b, e.name == "if" and i == 0) for i, a in enumerate(e.args)], e.args)
    if isinstance(e, Cast):
        return _lower_cast(e, b)
    if isinstance(e, Case):
        if not e.whens:
            return _lower(e.default, b) if e.default is not None else b.scalar(pa.scalar(None))
        branches = [(_lower(c, b, True), _lower(v, b)) for c, v in e.whens]
        otherwise = _lower(e.default, b) if e.default is not None else b.scalar(pa.scalar(None))
        return _choose(b, branches, otherwise)
    raise PredicateError(f"cannot evaluate expression node {type(e).__name__}: {e}")


def _lower_cast(e: Cast, b: _Backend) -> Any:
    """Spark's CAST: a fraction cast to an integer is truncated toward zero (1.9 -> 1, -1.9 -> -1),
    a value out of the integer's range fails (ANSI mode, Spark 4's default), a timestamp cast to a
    date drops its time. The fraction goes first, so that Arrow's checked cast still catches the
    overflow; Arrow's own truncating cast would wrap it silently. Decimal to decimal keeps
    Arrow's check: Spark rounds there, which truncation would not match."""
    operand = _lower(e.operand, b)
    if pa.types.is_integer(e.to):
        source = b.type_of(e.operand, operand)
        if source is not None and pa.types.is_floating(source):
            operand = b.call("trunc", [operand])
        elif source is not None and pa.types.is_decimal(source):
            operand = b.call("round", [operand], pc.RoundOptions(0, "towards_zero"))
        elif source is None:  # unknown here: truncate in the cast (an overflow then wraps)
            return b.call("cast", [operand], pc.CastOptions(e.to, allow_float_truncate=True,
                                                            allow_decimal_truncate=True))
    return b.call("cast", [operand], pc.CastOptions(e.to, allow_time_truncate=True))


def _lower_comparison(e: Comparison, b: _Backend) -> Any:
    if e.op == "<=>":
        left, right = _lower(e.left, b), _lower(e.right, b)
        both_null = b.call("and", [b.call("is_null", [left]), b.call("is_null", [right])])
        if _is_untyped_null(e.left) or _is_untyped_null(e.right):
            return both_null
        if b.float_type(e.left, left) or b.float_type(e.right, right):
            same = _float_comparison("=", left, right, b, e.left, e.right)
        else:
            same = b.call("equal", [left, right])
        equal = b.call("coalesce", [same, b.scalar(pa.scalar(False))])
        return b.call("or", [equal, both_null])
    if _is_untyped_null(e.left) or _is_untyped_null(e.right):
        return b.scalar(_NULL_BOOL)
    left, right = _lower(e.left, b), _lower(e.right, b)
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
    types = {v.arrow_type for v in values}
    if len(types) == 1:
        return pa.array([v.value for v in values], type=types.pop())
    return pa.array([v.value for v in values])


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
        float_type = b.float_type(e.operand, operand)
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
    if e.op in _ARITH:
        return b.call(_ARITH[e.op], [left, right])
    null = b.scalar(pa.scalar(None))
    if e.op == "/":
        f64 = pc.CastOptions(pa.float64())
        left, right = b.call("cast", [left], f64), b.call("cast", [right], f64)
        zero = b.call("equal", [right, b.scalar(pa.scalar(0.0))])
        return b.call("divide", [left, b.call("if_else", [zero, null, right])])
    # '%': Java/Spark remainder, sign of the dividend
    zero = b.call("equal", [right, b.scalar(pa.scalar(0))])
    divisor = b.call("if_else", [zero, null, right])
    magnitude = b.call("modulo", [b.call("abs", [left]), b.call("abs", [divisor])])
    return b.call("multiply", [b.call("sign", [left]), magnitude])


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
