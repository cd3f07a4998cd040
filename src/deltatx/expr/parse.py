"""SQL text -> :mod:`deltatx.expr.model`, through sqlglot's Spark dialect.

Owns the mapping from sqlglot's AST to our model, node type by node type. Anything not mapped is
refused with a :class:`~deltatx.errors.PredicateError` that names the construct and quotes the
fragment ("unsupported SQL in predicate: subquery (SELECT ...)"), because a predicate we do not
fully understand must never silently select the wrong rows.

Constant folding done here: negative numbers, ``DATE '...'``/``TIMESTAMP '...'`` and other casts
of constants become typed literals; ``BETWEEN`` becomes two comparisons; ``x NOT IN``/``IS NOT
NULL`` become the negated node forms.
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..errors import PredicateError
from .model import (
    FALSE,
    TRUE,
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
from .rows import FUNCTIONS, cast_constant
from .values import convert_literal

_COMPARISONS: dict[type, str] = {
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.NullSafeEQ: "<=>",
}
_ARITHMETIC: dict[type, str] = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%",
                                exp.IntDiv: "DIV"}

# sqlglot function node -> our function name (arguments in sqlglot's order: this, expressions)
_FUNCTION_NODES: dict[type, str] = {
    exp.Upper: "upper",
    exp.Lower: "lower",
    exp.Length: "length",
    exp.Abs: "abs",
    exp.Year: "year",
    exp.Month: "month",
    exp.Day: "day",
    exp.Coalesce: "coalesce",
    exp.Greatest: "greatest",
    exp.Least: "least",
    exp.StartsWith: "startswith",
    exp.EndsWith: "endswith",
    exp.Contains: "contains",
    exp.Round: "round",
    exp.Negative: "negative",
}
_OPTIONAL = {"hour": "Hour", "minute": "Minute", "second": "Second", "isnan": "IsNan"}
for _name, _cls in _OPTIONAL.items():
    if hasattr(exp, _cls):
        _FUNCTION_NODES[getattr(exp, _cls)] = _name

_UNSUPPORTED_NAMES: dict[type, str] = {
    exp.Subquery: "subquery",
    exp.Select: "subquery",
    exp.Exists: "EXISTS subquery",
    exp.Placeholder: "parameter placeholder",
    exp.Interval: "INTERVAL",
    exp.Window: "window function",
    exp.AggFunc: "aggregate function",
    exp.RegexpLike: "RLIKE / REGEXP",
}

_SQL_TYPES: dict[str, pa.DataType] = {
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "TEXT": pa.string(),
    "VARCHAR": pa.string(),
    "CHAR": pa.string(),
    "NCHAR": pa.string(),
    "NVARCHAR": pa.string(),
    "BOOLEAN": pa.bool_(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "TIMESTAMPTZ": pa.timestamp("us", tz="UTC"),
    "TIMESTAMPLTZ": pa.timestamp("us", tz="UTC"),
    "TIMESTAMPNTZ": pa.timestamp("us"),
    "DATETIME": pa.timestamp("us"),
    "BINARY": pa.binary(),
    "VARBINARY": pa.binary(),
}


def _fragment(node: exp.Expression) -> str:
    try:
        text = node.sql(dialect="spark")
    except Exception:  # sqlglot cannot always print what it parsed; the class name will do
        text = type(node).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def _unsupported(node: exp.Expression, what: str | None = None) -> PredicateError:
    if what is None:
        for cls, name in _UNSUPPORTED_NAMES.items():
            if isinstance(node, cls):
                what = name
                break
        else:
            what = type(node).__name__
    return PredicateError(f"unsupported SQL in predicate: {what} ({_fragment(node)})")


def arrow_type_from_sql(dt: exp.DataType) -> pa.DataType:
    """A sqlglot data type as Arrow (Spark's type names; DECIMAL defaults to (10,0))."""
    name = dt.this.name
    if name == "DECIMAL":
        params = [int(p.this.this) if isinstance(p, exp.DataTypeParam) else int(p.this) for p in dt.expressions]
        precision = params[0] if params else 10
        scale = params[1] if len(params) > 1 else 0
        return pa.decimal128(precision, scale)
    if name in _SQL_TYPES:
        return _SQL_TYPES[name]
    raise PredicateError(f"unsupported SQL in predicate: type {_fragment(dt)} in CAST")


def _number(text: str) -> Any:
    lowered = text.lower()
    try:
        if "e" in lowered:
            return float(text)
        if "." in text:
            return Decimal(text)
        value = int(text)
    except (ValueError, InvalidOperation):
        raise PredicateError(f"unsupported SQL in predicate: number literal {text!r}") from None
    if -2**63 <= value < 2**63:
        return value
    # past BIGINT: Spark reads an integer literal as DECIMAL(38, 0), and none has more digits
    if len(text.lstrip("+-")) > 38:
        raise PredicateError(f"number literal {text!r} has more than 38 digits: it fits no SQL type")
    return Decimal(text)


def _column(node: exp.Column) -> Column:
    parts = [p.name for p in node.parts]
    if len(parts) == 1:
        return Column(parts[0])
    return Column(parts[1], qualifier=parts[0], path=tuple(parts[2:]))


def _negate(e: Expr) -> Expr:
    if isinstance(e, In):
        return In(e.operand, e.values, negated=not e.negated)
    if isinstance(e, IsNull):
        return IsNull(e.operand, negated=not e.negated)
    if isinstance(e, Like):
        return Like(e.operand, e.pattern, negated=not e.negated, case_insensitive=e.case_insensitive)
    return Not(e)


def _convert(node: exp.Expression) -> Expr:
    out = _convert_node(node)
    # sqlglot marks some negated forms (x NOT LIKE ..) with a flag instead of a Not node
    if node.args.get("negate") is True and not isinstance(node, exp.Escape):
        return _negate(out)
    return out


def _convert_node(node: exp.Expression) -> Expr:  # noqa: C901 - one branch per SQL construct
    if isinstance(node, exp.Paren):
        return _convert(node.this)
    if isinstance(node, exp.Column):
        return _column(node)
    if isinstance(node, exp.Dot):
        base = _convert(node.this)
        if not isinstance(base, Column):
            raise _unsupported(node, "field access on a non-column")
        if base.qualifier is None:
            return Column(base.name, path=base.path + (node.name,))
        return Column(base.name, qualifier=base.qualifier, path=base.path + (node.name,))
    if isinstance(node, exp.Literal):
        return Literal(node.this if node.is_string else _number(node.this))
    if isinstance(node, exp.Boolean):
        return TRUE if node.this else FALSE
    if isinstance(node, exp.Null):
        return Literal(None)
    if isinstance(node, exp.HexString):
        try:
            return Literal(bytes.fromhex(node.this))
        except ValueError:
            raise _unsupported(node, "hex literal") from None
    if isinstance(node, exp.Neg):
        typed = node.this
        if (isinstance(typed, exp.Cast) and isinstance(typed.this, exp.Literal) and not typed.this.is_string
                and typed.args.get("safe") is not True):
            # a suffixed literal (``9223372036854775808L`` is CAST(... AS BIGINT)): Spark's grammar
            # reads the sign as part of it, so -9223372036854775808L is BIGINT's smallest value
            # (a TRY_CAST is no literal: -TRY_CAST(128 AS TINYINT) is -(NULL))
            negated = typed.copy()
            negated.set("this", exp.Literal.number("-" + typed.this.name))
            return _convert(negated)
        inner = _convert(node.this)
        if isinstance(inner, Literal) and isinstance(inner.value, (int, float, Decimal)) and not isinstance(inner.value, bool):
            # Decimal's unary minus rounds to the context's 28 digits; copy_negate is exact
            value = inner.value.copy_negate() if isinstance(inner.value, Decimal) else -inner.value
            if isinstance(value, Decimal) and inner.type is None and value == -(2**63) and value.as_tuple().exponent == 0:
                return Literal(-(2**63))  # 9223372036854775808 is past BIGINT, its negation is not
            return Literal(value, inner.type)
        return Func("negative", (inner,))
    if isinstance(node, exp.And):
        return And(_convert(node.this), _convert(node.expression))
    if isinstance(node, exp.Or):
        return Or(_convert(node.this), _convert(node.expression))
    if isinstance(node, exp.Not):
        return _negate(_convert(node.this))
    if type(node) in _COMPARISONS:
        return Comparison(_COMPARISONS[type(node)], _convert(node.this), _convert(node.expression))
    if isinstance(node, exp.NullSafeNEQ):
        return Not(Comparison("<=>", _convert(node.this), _convert(node.expression)))
    if type(node) in _ARITHMETIC:
        return Arithmetic(_ARITHMETIC[type(node)], _convert(node.this), _convert(node.expression))
    if isinstance(node, exp.DPipe):
        return _convert_pipe(node)
    if isinstance(node, exp.Between):
        operand = _convert(node.this)
        return And(
            Comparison(">=", operand, _convert(node.args["low"])),
            Comparison("<=", operand, _convert(node.args["high"])),
        )
    if isinstance(node, exp.In):
        if node.args.get("query") is not None:
            raise _unsupported(node, "subquery")
        if node.args.get("unnest") is not None or node.args.get("field") is not None:
            raise _unsupported(node)
        if not node.expressions:  # Spark's parser refuses it (INVALID_SQL_SYNTAX.EMPTY_IN_PREDICATE)
            raise PredicateError(f"an IN list needs at least one value: {_fragment(node)} is not SQL Spark "
                                 f"accepts (EMPTY_IN_PREDICATE); for a condition that is never true write FALSE")
        return In(_convert(node.this), tuple(_convert(v) for v in node.expressions))
    if isinstance(node, exp.Is):
        return _convert_is(node)
    if isinstance(node, exp.Escape):
        return _convert_like(node.this, escape=node.expression)
    if isinstance(node, (exp.Like, exp.ILike)):
        return _convert_like(node)
    if isinstance(node, (exp.Cast, exp.TryCast)):
        return _convert_cast(node)
    if isinstance(node, exp.Case):
        return _convert_case(node)
    if isinstance(node, exp.If):
        return Func("if", (_convert(node.this), _convert(node.args["true"]), _convert_or_null(node.args.get("false"))))
    if isinstance(node, exp.TsOrDsToDate):  # to_date(x), and sqlglot's wrapper of year(x)'s argument
        if node.args.get("format"):
            raise _unsupported(node, "to_date with a format (CAST text in ISO form, or parse it before)")
        if isinstance(node.parent, (exp.Year, exp.Month, exp.Day)):
            return _convert(node.this)  # year(ts) reads the timestamp itself (generated columns match it)
        return Cast(_convert(node.this), pa.date32())
    if isinstance(node, exp.ConcatWs):  # before Concat: sqlglot's ConcatWs is a kind of Concat
        if len(node.expressions) < 2:
            raise _unsupported(node, "concat_ws without a separator and a value")
        return Func("concat_ws", tuple(_convert(a) for a in node.expressions))
    if isinstance(node, exp.Concat):
        return Func("concat", tuple(_convert(a) for a in node.expressions))
    if isinstance(node, exp.Trim):
        return _convert_trim(node)
    if isinstance(node, exp.Substring):
        args = [node.this, node.args.get("start"), node.args.get("length")]
        return Func("substring", tuple(_convert(a) for a in args if a is not None))
    if type(node) in _FUNCTION_NODES:
        args = [node.this] if node.this is not None and isinstance(node.this, exp.Expression) else []
        args += [a for a in node.expressions]
        for key in ("expression", "decimals"):
            extra = node.args.get(key)
            if isinstance(extra, exp.Expression):
                args.append(extra)
        return Func(_FUNCTION_NODES[type(node)], tuple(_convert(a) for a in args))
    if isinstance(node, exp.Anonymous):
        name = str(node.this).lower()
        aliases = {"substr": "substring", "nvl": "coalesce", "ifnull": "coalesce", "char_length": "length"}
        name = aliases.get(name, name)
        if name not in FUNCTIONS:
            raise _unsupported(node, f"function {name}() (supported: {', '.join(sorted(FUNCTIONS))})")
        return Func(name, tuple(_convert(a) for a in node.expressions))
    if isinstance(node, exp.Func) and not isinstance(node, tuple(_UNSUPPORTED_NAMES)):
        name = node.sql_name().lower() if hasattr(node, "sql_name") else type(node).__name__.lower()
        raise _unsupported(node, f"function {name}() (supported: {', '.join(sorted(FUNCTIONS))})")
    raise _unsupported(node)


def _convert_pipe(node: exp.DPipe) -> Expr:
    """``a || b``: Spark's string concatenation, ``concat(a, b)`` (NULL when either side is).

    Spark's grammar gives ``||`` the precedence of ``+`` and ``-``, all read left to right, where
    sqlglot binds it looser: ``a || b + c`` reaches here as ``a || (b + c)``, which Spark reads as
    ``(a || b) + c``. A ``+``/``-`` chain written without parentheses on the right is therefore
    regrouped before it is converted (``a || b * c`` needs nothing: ``*`` binds tighter in both)."""
    right = node.expression
    if isinstance(right, (exp.Add, exp.Sub)):
        regrouped = right.copy()
        spine = regrouped
        while isinstance(spine.this, (exp.Add, exp.Sub, exp.DPipe)):
            spine = spine.this
        spine.set("this", exp.DPipe(this=node.this.copy(), expression=spine.this))
        return _convert(regrouped)
    operands: list[exp.Expression] = [right]
    left = node.this
    while isinstance(left, exp.DPipe) and not isinstance(left.expression, (exp.Add, exp.Sub)):
        operands.append(left.expression)
        left = left.this
    operands.append(left)
    return Func("concat", tuple(_convert(a) for a in reversed(operands)))


def _convert_or_null(node: exp.Expression | None) -> Expr:
    return Literal(None) if node is None else _convert(node)


def _convert_is(node: exp.Is) -> Expr:
    operand = _convert(node.this)
    target = node.expression
    if isinstance(target, exp.Null):
        return IsNull(operand)
    if isinstance(target, exp.Boolean):
        # x IS TRUE: TRUE only when x is TRUE, never NULL
        base: Expr = operand if target.this else Not(operand)
        return Func("coalesce", (base, FALSE))
    raise _unsupported(node, "IS with something other than NULL/TRUE/FALSE")


def _convert_like(node: exp.Expression, escape: exp.Expression | None = None) -> Expr:
    if not isinstance(node, (exp.Like, exp.ILike)):
        raise _unsupported(node, "ESCAPE outside LIKE")
    pattern = node.expression
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise _unsupported(node, "LIKE with a non-constant pattern")
    text = pattern.this
    if escape is not None:
        if not (isinstance(escape, exp.Literal) and escape.is_string and len(escape.this) == 1):
            raise _unsupported(node, "LIKE ESCAPE that is not a single character")
    _check_escapes(text, escape.this if escape is not None else "\\", _fragment(node))
    if escape is not None:
        text = _reescape(text, escape.this)
    out = Like(_convert(node.this), text, case_insensitive=isinstance(node, exp.ILike))
    return _negate(out) if escape is not None and node.args.get("negate") is True else out


def _check_escapes(pattern: str, escape: str, where: str) -> None:
    """Spark's rule for a LIKE pattern: the escape character may precede only ``_``, ``%`` or
    itself, and may not end the pattern (anything else fails, rather than match nothing)."""
    i = 0
    while i < len(pattern):
        if pattern[i] == escape:
            if i + 1 == len(pattern):
                raise PredicateError(f"the LIKE pattern {pattern!r} ends with the escape character {escape!r} "
                                     f"(in {where})")
            if pattern[i + 1] not in ("_", "%", escape):
                raise PredicateError(f"the LIKE pattern {pattern!r} has the escape character {escape!r} before "
                                     f"{pattern[i + 1]!r}; it may only precede '_', '%' or itself (in {where})")
            i += 2
            continue
        i += 1


def _reescape(pattern: str, escape: str) -> str:
    """Rewrite a pattern using ``escape`` into the backslash-escaped form Arrow understands."""
    if escape == "\\":
        return pattern
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape and i + 1 < len(pattern):
            out.append("\\" + pattern[i + 1])
            i += 2
            continue
        out.append("\\\\" if ch == "\\" else ch)
        i += 1
    return "".join(out)


def _convert_trim(node: exp.Trim) -> Expr:
    if node.expression is not None:
        raise _unsupported(node, "TRIM with explicit characters")
    position = str(node.args.get("position") or "").upper()
    name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "trim")
    return Func(name, (_convert(node.this),))


def _convert_cast(node: exp.Cast) -> Expr:
    """CAST, or TRY_CAST: sqlglot's Spark dialect reads both as ``exp.TryCast`` and marks only
    TRY_CAST ``safe``."""
    target = arrow_type_from_sql(node.args["to"])
    operand = _convert(node.this)
    try_ = node.args.get("safe") is True
    if isinstance(operand, Literal):  # folded by the row-level CAST itself (a string: parsed)
        # (a NULL of a type goes to cast_constant, which refuses a cast its type does not have)
        untyped_null = operand.value is None and operand.type is None
        if untyped_null or isinstance(operand.value, str) and not pa.types.is_decimal(target):
            try:
                return convert_literal(operand, target, context=_fragment(node))
            except PredicateError:
                if not try_:
                    raise
                return Literal(None, target)  # TRY_CAST: text that does not read as the type is NULL
        return cast_constant(operand, target, context=_fragment(node), try_=try_)
    return Cast(operand, target, try_=try_)


def _convert_case(node: exp.Case) -> Expr:
    subject = node.this
    whens = []
    for branch in node.args.get("ifs") or []:
        cond = _convert(branch.this)
        if subject is not None:
            cond = Comparison("=", _convert(subject), cond)
        whens.append((cond, _convert(branch.args["true"])))
    default = node.args.get("default")
    return Case(tuple(whens), _convert(default) if default is not None else None)


def _parse(sql: str, what: str) -> exp.Expression:
    if not isinstance(sql, str) or not sql.strip():
        raise PredicateError(f"empty {what}: give SQL text such as \"id > 10\"")
    try:
        statements = sqlglot.parse(sql, read="spark")
    except SqlglotError as exc:
        details = getattr(exc, "errors", None) or []
        reason = "; ".join(
            f"{d.get('description')} (line {d.get('line')}, column {d.get('col')})" for d in details
        ) or str(exc)
        raise PredicateError(f"cannot parse {what} {sql!r}: {reason}") from None
    statements = [s for s in statements if s is not None]
    if len(statements) != 1:
        raise PredicateError(f"cannot parse {what} {sql!r}: expected one expression, got {len(statements)}")
    node = statements[0]
    if isinstance(node, (exp.Select, exp.Union, exp.Insert, exp.Delete, exp.Update, exp.Merge, exp.Create, exp.Drop)):
        raise PredicateError(f"unsupported SQL in {what}: a {node.key.upper()} statement ({_fragment(node)}); give only the condition")
    if isinstance(node, exp.Command):
        raise PredicateError(f"cannot parse {what} {sql!r}: it reads as a SQL command, not an expression")
    if isinstance(node, exp.Alias):
        raise _unsupported(node, "alias (AS)")
    return node


@functools.lru_cache(maxsize=1024)
def _parsed(sql: str, what: str) -> Expr:
    """Parsing is pure and the model is immutable: a repeated statement (the same DELETE in a
    loop, a predicate re-parsed by several layers) is parsed by sqlglot once."""
    point = _point_comparison(sql, what)
    return point if point is not None else _convert(_parse(sql, what))


#: ``name op integer``: the shape of a point change (``id = 42``), issued in a loop with a new
#: number each time. Leading zeros and 19+ digits are left to sqlglot.
_POINT = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=|==|!=|<>|<=|>=|<|>)\s*(-?)(0|[1-9][0-9]{0,17})\s*")


def _point_comparison(sql: str, what: str) -> Expr | None:
    """``column op integer`` without a sqlglot parse per number: the same text with the number
    replaced by ``0`` is parsed (once, cached) and its literal swapped for this one. The template
    must come back as exactly Comparison(column, 0), or sqlglot decides: a keyword in the name
    position (``null = 1``, ``true = 1``) reads as something else. A property test holds this path
    to sqlglot's answer."""
    m = _POINT.fullmatch(sql)
    if m is None or m.group(4) == "0":
        return None
    try:
        template = _parsed(f"{m.group(1)} {m.group(2)} 0", what)
    except PredicateError:  # raised again by sqlglot's parse, quoting the caller's text
        return None
    if not (isinstance(template, Comparison) and isinstance(template.left, Column)
            and isinstance(template.right, Literal) and template.right == Literal(0)):
        return None
    value = int(m.group(4))
    return Comparison(template.op, template.left, Literal(-value if m.group(3) else value))


def parse_expression(sql: str) -> Expr:
    """Parse a value expression such as ``value * 2``, ``'x'`` or ``upper(name)``."""
    return _parsed(sql, "expression") if isinstance(sql, str) else _convert(_parse(sql, "expression"))


def parse_predicate(sql: str) -> Expr:
    """Parse a boolean condition such as ``part = 3 AND id > 10`` (Spark SQL syntax)."""
    if isinstance(sql, str):
        return _parsed(sql, "predicate")
    if not isinstance(sql, exp.Expression):
        from ..errors import ArgumentTypeError

        raise ArgumentTypeError(f"a condition must be SQL text, got {type(sql).__name__} {sql!r}")
    return _convert(_parse(sql, "predicate"))
