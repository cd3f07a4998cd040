"""The expression model: small immutable trees for predicates and value expressions.

Owns the vocabulary every other layer speaks (DELETE/UPDATE/MERGE conditions, replaceWhere, scan
filters, conflict detection): nodes are frozen dataclasses, so they hash, compare and can be used as
dict keys; ``str()`` gives SQL text (Spark dialect) that :func:`deltatx.expr.parse_expression`
reads back. Nothing here knows about Arrow compute or files: see ``rows`` and ``pruning``.

Columns may carry a ``qualifier`` (``t.id`` in a MERGE condition) and a nested ``path``
(``s.a`` -> ``Column("s", path=("a",))`` once bound to a schema with a struct ``s``).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Callable, Iterable

import pyarrow as pa

from .sqltext import literal_sql, quote_identifier, string_sql, type_sql

COMPARISON_OPS = ("=", "!=", "<", "<=", ">", ">=", "<=>")
ARITHMETIC_OPS = ("+", "-", "*", "/", "%", "DIV")

#: ``a op b`` == ``b FLIPPED[op] a``
FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<=", "<=>": "<=>"}
#: ``NOT (a op b)`` == ``a NEGATED[op] b`` whenever ``a op b`` is not NULL (and no NaN involved)
NEGATED = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}

_PRECEDENCE = {"OR": 1, "AND": 2, "NOT": 3, "CMP": 4, "+": 5, "-": 5, "*": 6, "/": 6, "%": 6, "DIV": 6, "ATOM": 9}


class Expr:
    """Base of every node. Subclasses are frozen dataclasses."""

    def columns(self) -> frozenset[str]:
        """Names of the top-level columns referenced (``t.id`` for a column qualified by ``t``)."""
        out: set[str] = set()
        for node in self.walk():
            if isinstance(node, Column):
                out.add(node.ref)
        return frozenset(out)

    def children(self) -> tuple["Expr", ...]:
        return ()

    def with_children(self, children: tuple["Expr", ...]) -> "Expr":
        return self

    def walk(self) -> Iterable["Expr"]:
        """This node and all below it, depth first."""
        yield self
        for child in self.children():
            yield from child.walk()

    def transform(self, fn: Callable[["Expr"], "Expr"]) -> "Expr":
        """Rebuild bottom-up, applying ``fn`` to every node after its children."""
        kids = self.children()
        node = self.with_children(tuple(k.transform(fn) for k in kids)) if kids else self
        return fn(node)

    # SQL text -------------------------------------------------------------------------------
    def _prec(self) -> int:
        return _PRECEDENCE["ATOM"]

    def _sql(self) -> str:  # pragma: no cover - every node overrides
        raise NotImplementedError

    def __str__(self) -> str:
        return self._sql()


def _wrap(child: Expr, parent_prec: int, strict: bool = False) -> str:
    p = child._prec()
    if p < parent_prec or (strict and p == parent_prec):
        return f"({child._sql()})"
    return child._sql()


def _as_expr(value: Any) -> Expr:
    return value if isinstance(value, Expr) else Literal(value)


# --------------------------------------------------------------------------------------------
# Leaves
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column(Expr):
    """A column reference; ``path`` walks into struct fields, ``qualifier`` is a table alias."""

    name: str
    qualifier: str | None = None
    path: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        """The top-level name, qualified (``t.id``) when a qualifier is set."""
        return f"{self.qualifier}.{self.name}" if self.qualifier else self.name

    def _sql(self) -> str:
        parts = ([self.qualifier] if self.qualifier else []) + [self.name, *self.path]
        return ".".join(quote_identifier(p) for p in parts)


def _literal_key(value: Any) -> Any:
    # 1 == True == 1.0 in Python; literals of different kinds must not compare equal
    return (type(value).__name__, value)


def infer_literal_type(value: Any) -> pa.DataType:
    """The Arrow type of an untyped Python literal."""
    if value is None:
        return pa.null()
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        if -(1 << 63) <= value < (1 << 63):
            return pa.int64()
        digits = len(str(abs(value)))  # Spark: an integer beyond BIGINT is a DECIMAL(n, 0) literal
        if digits > 38:
            raise TypeError(f"integer literal {value} has more than 38 digits")
        return pa.decimal128(digits, 0)
    if isinstance(value, float):
        return pa.float64()
    if isinstance(value, Decimal):
        return pa.scalar(value).type
    if isinstance(value, str):
        return pa.string()
    if isinstance(value, bytes):
        return pa.binary()
    if isinstance(value, _dt.datetime):
        return pa.timestamp("us", tz="UTC" if value.tzinfo is not None else None)
    if isinstance(value, _dt.date):
        return pa.date32()
    raise TypeError(f"unsupported literal value {value!r} ({type(value).__name__})")


@dataclass(frozen=True, eq=False)
class Literal(Expr):
    """A constant. ``type`` None means inferred from the Python value (int -> int64, ...)."""

    value: Any
    type: pa.DataType | None = None

    def __post_init__(self) -> None:
        inferred = infer_literal_type(self.value)  # also rejects unsupported values early
        if self.type is not None and self.value is not None and self.type.equals(inferred):
            object.__setattr__(self, "type", None)  # the type is what the value says: keep one form

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Literal):
            return NotImplemented
        return _literal_key(self.value) == _literal_key(other.value) and (
            self.type == other.type if self.type is not None and other.type is not None
            else self.type is other.type
        )

    def __hash__(self) -> int:
        return hash((_literal_key(self.value), str(self.type)))

    @property
    def arrow_type(self) -> pa.DataType:
        return self.type if self.type is not None else infer_literal_type(self.value)

    def to_scalar(self) -> pa.Scalar:
        return pa.scalar(self.value, type=self.arrow_type)

    def _sql(self) -> str:
        return literal_sql(self.value, self.type)


TRUE = Literal(True)
FALSE = Literal(False)
NULL = Literal(None)


# --------------------------------------------------------------------------------------------
# Predicates
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison(Expr):
    """``left op right`` with op in ``= != < <= > >= <=>`` (``<=>`` is null-safe equality)."""

    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        op = {"==": "=", "<>": "!="}.get(self.op, self.op)
        if op not in COMPARISON_OPS:
            raise ValueError(f"unknown comparison operator {self.op!r}")
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "left", _as_expr(self.left))
        object.__setattr__(self, "right", _as_expr(self.right))

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return replace(self, left=children[0], right=children[1])

    def _prec(self) -> int:
        return _PRECEDENCE["CMP"]

    def _sql(self) -> str:
        p = self._prec()
        return f"{_wrap(self.left, p, strict=True)} {self.op} {_wrap(self.right, p, strict=True)}"


@dataclass(frozen=True)
class _Connective(Expr):
    """AND / OR: the same shape, told apart by ``_keyword``."""

    left: Expr
    right: Expr
    _keyword = ""

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return type(self)(children[0], children[1])

    def _prec(self) -> int:
        return _PRECEDENCE[self._keyword]

    def _sql(self) -> str:
        p = self._prec()
        return f"{_wrap(self.left, p)} {self._keyword} {_wrap(self.right, p, strict=True)}"


@dataclass(frozen=True)
class And(_Connective):
    _keyword = "AND"


@dataclass(frozen=True)
class Or(_Connective):
    _keyword = "OR"


@dataclass(frozen=True)
class _Unary(Expr):
    """A node whose one child is ``operand`` (NOT, IS NULL, LIKE, CAST): the tree plumbing once."""

    operand: Expr

    def __post_init__(self) -> None:
        object.__setattr__(self, "operand", _as_expr(self.operand))

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return replace(self, operand=children[0])


@dataclass(frozen=True)
class Not(_Unary):
    def _prec(self) -> int:
        return _PRECEDENCE["NOT"]

    def _sql(self) -> str:
        return f"NOT {_wrap(self.operand, _PRECEDENCE['ATOM'])}"


@dataclass(frozen=True)
class In(Expr):
    """``operand [NOT] IN (values...)`` with SQL NULL semantics."""

    operand: Expr
    values: tuple[Expr, ...]
    negated: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "operand", _as_expr(self.operand))
        object.__setattr__(self, "values", tuple(_as_expr(v) for v in self.values))

    def children(self) -> tuple[Expr, ...]:
        return (self.operand, *self.values)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return replace(self, operand=children[0], values=tuple(children[1:]))

    def _prec(self) -> int:
        return _PRECEDENCE["CMP"]

    def _sql(self) -> str:
        items = ", ".join(v._sql() for v in self.values)
        kw = "NOT IN" if self.negated else "IN"
        return f"{_wrap(self.operand, self._prec(), strict=True)} {kw} ({items})"


@dataclass(frozen=True)
class IsNull(_Unary):
    negated: bool = False

    def _prec(self) -> int:
        return _PRECEDENCE["CMP"]

    def _sql(self) -> str:
        kw = "IS NOT NULL" if self.negated else "IS NULL"
        return f"{_wrap(self.operand, self._prec(), strict=True)} {kw}"


@dataclass(frozen=True)
class Like(_Unary):
    """``operand [NOT] LIKE|ILIKE pattern``; ``%`` any run, ``_`` one char, ``\\`` escapes."""

    pattern: str
    negated: bool = False
    case_insensitive: bool = False

    def _prec(self) -> int:
        return _PRECEDENCE["CMP"]

    def like_prefix(self) -> str | None:
        """The literal prefix when the pattern is ``prefix%`` (case-sensitive, no other wildcard)."""
        if self.case_insensitive:
            return None
        out: list[str] = []
        i = 0
        pat = self.pattern
        while i < len(pat):
            ch = pat[i]
            if ch == "\\" and i + 1 < len(pat):
                out.append(pat[i + 1])
                i += 2
                continue
            if ch == "_":
                return None
            if ch == "%":
                return "".join(out) if set(pat[i:]) == {"%"} else None
            out.append(ch)
            i += 1
        return None  # no trailing %: an exact match, not a prefix

    def _sql(self) -> str:
        kw = ("NOT " if self.negated else "") + ("ILIKE" if self.case_insensitive else "LIKE")
        return f"{_wrap(self.operand, self._prec(), strict=True)} {kw} {string_sql(self.pattern)}"


# --------------------------------------------------------------------------------------------
# Value expressions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arithmetic(Expr):
    """``left op right`` with op in ``+ - * / % DIV`` (``/`` is floating-point division, ``DIV``
    Spark's integral division: a BIGINT truncated toward zero)."""

    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        if isinstance(self.op, str) and self.op.upper() == "DIV":  # a keyword: any case, as SQL spells it
            object.__setattr__(self, "op", "DIV")
        if self.op not in ARITHMETIC_OPS:
            raise ValueError(f"unknown arithmetic operator {self.op!r}")
        object.__setattr__(self, "left", _as_expr(self.left))
        object.__setattr__(self, "right", _as_expr(self.right))

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return replace(self, left=children[0], right=children[1])

    def _prec(self) -> int:
        return _PRECEDENCE[self.op]

    def _sql(self) -> str:
        p = self._prec()
        return f"{_wrap(self.left, p)} {self.op} {_wrap(self.right, p, strict=True)}"


@dataclass(frozen=True)
class Func(Expr):
    """A named function call; the supported names are ``rows.FUNCTIONS``."""

    name: str
    args: tuple[Expr, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.name.lower())
        object.__setattr__(self, "args", tuple(_as_expr(a) for a in self.args))

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return replace(self, args=tuple(children))

    def _prec(self) -> int:
        return 7 if self.name == "negative" else _PRECEDENCE["ATOM"]

    def _sql(self) -> str:
        if self.name == "negative" and len(self.args) == 1:
            return f"-{_wrap(self.args[0], _PRECEDENCE['ATOM'])}"
        return f"{self.name}({', '.join(a._sql() for a in self.args)})"


@dataclass(frozen=True)
class Cast(_Unary):
    """``CAST(operand AS to)``; with ``try_``, ``TRY_CAST(operand AS to)``: the same value where
    CAST succeeds, NULL for each value where it fails."""

    to: pa.DataType
    try_: bool = False

    def _sql(self) -> str:
        keyword = "TRY_CAST" if self.try_ else "CAST"
        return f"{keyword}({self.operand._sql()} AS {type_sql(self.to)})"


@dataclass(frozen=True)
class Case(Expr):
    """``CASE WHEN c1 THEN v1 ... [ELSE default] END`` (a NULL condition counts as false)."""

    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "whens", tuple((_as_expr(c), _as_expr(v)) for c, v in self.whens)
        )
        if self.default is not None:
            object.__setattr__(self, "default", _as_expr(self.default))

    def children(self) -> tuple[Expr, ...]:
        flat = [e for pair in self.whens for e in pair]
        return tuple(flat) + ((self.default,) if self.default is not None else ())

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        n = len(self.whens)
        whens = tuple((children[2 * i], children[2 * i + 1]) for i in range(n))
        default = children[2 * n] if self.default is not None else None
        return Case(whens, default)

    def _sql(self) -> str:
        parts = ["CASE"]
        for cond, value in self.whens:
            parts.append(f"WHEN {cond._sql()} THEN {value._sql()}")
        if self.default is not None:
            parts.append(f"ELSE {self.default._sql()}")
        parts.append("END")
        return " ".join(parts)
