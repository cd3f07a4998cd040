"""Binding: resolve an expression's columns against a schema and type its literals.

Owns name resolution (case-insensitive like Spark; the result uses the schema's spelling) and
literal typing, so that ``part = 3`` compares int32 with int32, ``d = '2024-01-01'`` compares
dates, and pruning can put literals next to statistics of the column's own type. Unknown columns
and type errors surface here, early, as :class:`~deltatx.errors.PredicateError` naming the column
and listing the available ones.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from decimal import Decimal
from typing import Mapping

import pyarrow as pa

from ..errors import ArgumentTypeError, PredicateError
from ..txnlog.actions import empty_table
from .model import And, Arithmetic, Case, Column, Comparison, Expr, Func, In, Literal, Or
from .rows import cast_constant, evaluate
from .values import common_type, convert_literal, decimal_of, integer_range, is_number, number_text, plain_type

#: functions whose arguments (or, for ``if``, whose last two) share one type
_SAME_TYPE_ARGS = {"coalesce": 0, "greatest": 0, "least": 0, "if": 1}


def find_field(fields: list[pa.Field], name: str, where: str) -> pa.Field | None:
    for f in fields:
        if f.name == name:
            return f
    low = name.lower()
    hits = [f for f in fields if f.name.lower() == low]
    if len(hits) > 1:
        raise PredicateError(
            f"column {name!r} is ambiguous in {where}: {', '.join(f.name for f in hits)} differ only in case"
        )
    return hits[0] if hits else None


def _resolve_path(top: pa.Field, path: tuple[str, ...], shown: str) -> tuple[str, ...]:
    out = []
    t = top.type
    for part in path:
        if not pa.types.is_struct(t):
            raise PredicateError(f"column {shown}: {top.name} has no field {part!r} (type {t})")
        f = find_field(list(t), part, shown)
        if f is None:
            names = ", ".join(x.name for x in t)
            raise PredicateError(f"column {shown}: no field {part!r} in {top.name}; fields: {names}")
        out.append(f.name)
        t = f.type
    return tuple(out)


#: (op, column type, literal type) -> the comparison's type (see ``_Binder._shape_type``)
_COMPARISON_TYPES: dict[tuple[str, pa.DataType, pa.DataType], pa.DataType] = {}


class _Binder:
    def __init__(self, schema: pa.Schema, aliases: Mapping[str, pa.Schema] | None):
        self.schema = schema
        self.aliases = dict(aliases or {})
        if not self.aliases and len(set(schema.names)) == len(schema.names):
            self.empty = empty_table(schema)  # built once per schema object (txnlog/actions.py)
            return
        fields = list(schema)
        for alias, s in self.aliases.items():
            fields += [pa.field(f"{alias}.{f.name}", f.type) for f in s]
        self.empty = pa.schema(_unique(fields)).empty_table()

    def available(self) -> str:
        names = list(self.schema.names)
        for alias, s in self.aliases.items():
            names += [f"{alias}.{n}" for n in s.names]
        return ", ".join(names) or "(none)"

    def resolve(self, c: Column, root: Expr) -> Column:
        if c.qualifier is not None:
            alias = _find_alias(self.aliases, c.qualifier)
            if alias is not None:
                return self._in_schema(self.aliases[alias], c, alias, root)
            struct = find_field(list(self.schema), c.qualifier, str(c))
            if struct is not None and pa.types.is_struct(struct.type):
                nested = Column(struct.name, None, (c.name, *c.path))
                return Column(struct.name, None, _resolve_path(struct, nested.path, str(c)))
            if c.qualifier.lower() == "_metadata":
                raise PredicateError(
                    f"{c} in {root} is a metadata column: a read's where= (Table.to_arrow, "
                    f"Transaction.read) can filter on _metadata.row_index, file_path, row_id and "
                    f"row_commit_version, but DELETE, UPDATE, MERGE, replaceWhere, OPTIMIZE and "
                    f"constraint conditions name table columns only. Available columns: {self.available()}"
                )
            known = f"; known aliases: {', '.join(self.aliases)}" if self.aliases else ""
            raise PredicateError(
                f"column {c} in {root} is qualified by {c.qualifier!r}, which is neither a table alias "
                f"nor a struct column{known}. Available columns: {self.available()}"
            )
        f = find_field(list(self.schema), c.name, str(root))
        if f is not None:
            return Column(f.name, None, _resolve_path(f, c.path, str(c)))
        hits = []
        for alias, s in self.aliases.items():
            g = find_field(list(s), c.name, str(root))
            if g is not None:
                hits.append((alias, g))
        if len(hits) == 1:
            alias, g = hits[0]
            return Column(g.name, alias, _resolve_path(g, c.path, str(c)))
        if len(hits) > 1:
            raise PredicateError(
                f"column {c} in {root} is ambiguous: it exists in {', '.join(a for a, _ in hits)}; "
                f"qualify it (e.g. {hits[0][0]}.{c.name})"
            )
        raise PredicateError(f"unknown column {c.name!r} in {root}; available columns: {self.available()}")

    def _in_schema(self, s: pa.Schema, c: Column, alias: str, root: Expr) -> Column:
        f = find_field(list(s), c.name, str(root))
        if f is None:
            raise PredicateError(
                f"unknown column {c} in {root}; columns of {alias}: {', '.join(s.names) or '(none)'}"
            )
        return Column(f.name, alias, _resolve_path(f, c.path, str(c)))

    def type_of(self, e: Expr) -> pa.DataType:
        known = self._shape_type(e)
        return known if known is not None else plain_type(evaluate(e, self.empty).type)

    def _shape_type(self, e: Expr) -> pa.DataType | None:
        """The type of a plain column, and of ``column op literal``, without running kernels on
        the empty table: a point change binds ``id = 42`` once per statement. A comparison's type
        (and whether its kernels fit at all) depends on its operand types only, so it is
        evaluated once per (op, column type, literal type) and remembered; a comparison that
        fails to type is never remembered and fails again through :func:`evaluate`."""
        if isinstance(e, Column):
            if e.qualifier is not None or e.path:
                return None
            i = self.empty.schema.get_field_index(e.name)
            return plain_type(self.empty.schema.field(i).type) if i >= 0 else None
        if isinstance(e, Comparison) and isinstance(e.left, Column) and isinstance(e.right, Literal):
            left = self._shape_type(e.left)
            if left is None:
                return None
            key = (e.op, left, e.right.arrow_type)
            known = _COMPARISON_TYPES.get(key)
            if known is None:
                known = plain_type(evaluate(e, self.empty).type)
                if len(_COMPARISON_TYPES) < 1024:
                    _COMPARISON_TYPES[key] = known
            return known
        return None

    def coerce(self, e: Expr) -> Expr:
        if isinstance(e, Comparison):
            left, right = e.left, e.right
            if isinstance(right, Literal) and not isinstance(left, Literal):
                right = _compared_literals([right], self.type_of(left), str(e))[0]
            elif isinstance(left, Literal) and not isinstance(right, Literal):
                left = _compared_literals([left], self.type_of(right), str(e))[0]
            return Comparison(e.op, left, right)
        if isinstance(e, In) and not isinstance(e.operand, Literal):
            t = self.type_of(e.operand)
            literals = [v for v in e.values if isinstance(v, Literal)]
            typed = iter(_compared_literals(literals, t, str(e)))
            values = tuple(next(typed) if isinstance(v, Literal) else v for v in e.values)
            return In(e.operand, values, e.negated)
        if isinstance(e, Arithmetic):
            return self._coerce_arithmetic(e)
        if isinstance(e, Func) and e.name in _SAME_TYPE_ARGS:
            start = _SAME_TYPE_ARGS[e.name]
            args = list(e.args)
            args[start:] = self._unify(args[start:], str(e))
            return Func(e.name, tuple(args))
        if isinstance(e, Case):
            values = [v for _, v in e.whens] + ([e.default] if e.default is not None else [])
            unified = self._unify(values, str(e))
            whens = tuple((c, unified[i]) for i, (c, _) in enumerate(e.whens))
            return Case(whens, unified[len(e.whens)] if e.default is not None else None)
        return e

    def _coerce_arithmetic(self, e: Arithmetic) -> Expr:
        left, right = e.left, e.right
        for lit_side, other in ((right, left), (left, right)):
            if isinstance(lit_side, Literal) and not isinstance(other, Literal):
                t = self.type_of(other)
                if isinstance(lit_side.value, Decimal) and pa.types.is_floating(t):
                    new = Literal(float(lit_side.value), pa.float64())
                elif lit_side.value is None or isinstance(lit_side.value, str) or pa.types.is_floating(t):
                    new = convert_literal(lit_side, t, context=str(e))
                elif _is_int(lit_side) and pa.types.is_integer(t) and lit_side.type is None:
                    # Spark: an integer literal is INT when it fits, so int + 1 stays int and
                    # tinyint * 1000 widens to int instead of overflowing
                    fits = -(2**31) <= lit_side.value < 2**31
                    new = Literal(lit_side.value, pa.int32()) if fits else lit_side
                else:
                    new = lit_side
                if lit_side is right:
                    right = new
                else:
                    left = new
        return Arithmetic(e.op, left, right)

    def _unify(self, items: list[Expr], context: str) -> list[Expr]:
        typed = [x for x in items if not isinstance(x, Literal)]
        if not typed:
            return items
        t = self.type_of(typed[0])
        return [self._unified_literal(x, t, context) if isinstance(x, Literal) else x for x in items]

    @staticmethod
    def _unified_literal(x: Literal, t: pa.DataType, context: str) -> Literal:
        """A constant among values of type ``t`` (coalesce, CASE): a number in Spark's common type
        when ``t`` cannot hold it exactly (``coalesce(dec, 100000000)``: DECIMAL, not BIGINT),
        anything else in ``t`` when it converts, else unchanged."""
        if x.value is not None and is_number(x.arrow_type) and is_number(plain_type(t)):
            return _compared_literals([x], t, context)[0]
        return convert_literal(x, t, context=context, strict=False)


def _compared_literals(literals: list[Literal], t: pa.DataType, context: str) -> list[Literal]:
    """Constants compared with (or listed IN against) a value of type ``t``, typed for it.

    In ``t`` itself when every one converts exactly (``part = 3`` on int32: pruning compares
    them with the column's own statistics), a string parsed as ``t`` (``d = '2024-01-01'``).
    Otherwise all in Spark's common type of ``t`` and the constants (values.common_type), and
    the evaluator casts the other side to it: ``tinyint IN (5, 1000)`` as INT, ``dec(10,2) IN
    (1.50, 1.499)`` as decimal(11,3), a FLOAT column with ``0.1`` as DOUBLE, ``dec(38,10) >
    4.00000000001`` as decimal(38,10) (bounded, the constant rounded as Spark rounds it), and a
    STRING with numbers as BIGINT or DOUBLE (``s = 5`` reads ``s`` as a number)."""
    t = plain_type(t)
    if pa.types.is_decimal(t):
        typed = [_text_against_decimal(v, t, context) for v in literals]
        if any(isinstance(v.value, str) and pa.types.is_float64(w.arrow_type) for v, w in zip(literals, typed)):
            # text that is no value of the column: Spark compares the two as DOUBLE, every
            # constant of the list too (never back in the DECIMAL: 20 digits are no double)
            return [w if w.value is None or pa.types.is_float64(w.arrow_type) else cast_constant(w, pa.float64(), context)
                    for w in typed]
        literals = typed
    numbers = [v for v in literals if v.value is not None and is_number(v.arrow_type)]
    if not (numbers and pa.types.is_string(t)):
        exact = [convert_literal(v, t, context=context) for v in literals]
        if all(v.value is None or v.arrow_type.equals(t) for v in exact):
            return exact
    target: pa.DataType | None = t
    for v in literals:
        if v.value is None or isinstance(v.value, str) or target is None:
            continue
        kind = v.arrow_type
        if pa.types.is_decimal(target) and pa.types.is_integer(kind):
            kind = decimal_of(kind, v.value)  # Spark: an integer constant has its own digits
        target = common_type(target, kind)
    if target is None:  # no common type Spark would use: Arrow decides (or refuses)
        return [convert_literal(v, t, context=context) for v in literals]
    return [convert_literal(v, target, context=context) if isinstance(v.value, str) or v.value is None
            else cast_constant(v, target, context) for v in literals]


def _text_against_decimal(lit: Literal, t: pa.DataType, context: str) -> Literal:
    """A string compared with a DECIMAL of type ``t``: as ``t`` when it is exactly a value of
    ``t``, otherwise as a DOUBLE, the type Spark compares a DECIMAL and a STRING in
    (``d = '1.005'`` on DECIMAL(5,2) is FALSE, ``d > '1.005'`` compares as numbers); text that is
    no number raises as Spark's cast does."""
    if not isinstance(lit.value, str):
        return lit
    try:
        as_double = float(number_text(lit.value, pa.float64()))
    except ValueError:
        raise PredicateError(f"cannot read {lit.value!r} as a number to compare with {t} in {context}") from None
    try:
        return convert_literal(lit, t, context=context)
    except PredicateError:
        return Literal(as_double, pa.float64())


def _is_int(lit: Literal) -> bool:
    return isinstance(lit.value, int) and not isinstance(lit.value, bool)


def _unique(fields: list[pa.Field]) -> list[pa.Field]:
    seen: set[str] = set()
    out = []
    for f in fields:
        if f.name not in seen:
            seen.add(f.name)
            out.append(f)
    return out


_POINT_OPS = frozenset(("=", "!=", "<", "<=", ">", ">="))


def _bind_point(expr: Expr, schema: pa.Schema) -> Expr | None:
    """The bound form of a point or range condition — comparisons of an integer column with an
    integer constant its type holds, under AND / OR — built directly; None for anything else.

    The general binder gives the same expression (the column in the schema's spelling, the
    constant typed as the column: an exact conversion) after two tree walks, literal typing
    and a type check, which a point change would pay on every statement."""
    if isinstance(expr, (And, Or)):
        left = _bind_point(expr.left, schema)
        right = _bind_point(expr.right, schema) if left is not None else None
        return None if right is None else type(expr)(left, right)
    if not isinstance(expr, Comparison) or expr.op not in _POINT_OPS:
        return None
    column, constant = expr.left, expr.right
    if isinstance(column, Literal):
        column, constant = constant, column
    if not isinstance(column, Column) or column.qualifier is not None or column.path:
        return None
    if not isinstance(constant, Literal) or constant.type is not None or type(constant.value) is not int:
        return None
    i = schema.get_field_index(column.name)  # -1 when absent or when two fields share the name
    if i < 0 or any(n != column.name and n.lower() == column.name.lower() for n in schema.names):
        return None  # the general path resolves case and reports ambiguity
    t = schema.field(i).type
    if not pa.types.is_integer(t):
        return None
    low, high = integer_range(t)
    if not (low <= constant.value <= high and -(1 << 63) <= constant.value < (1 << 63)):
        return None
    typed = Literal(constant.value, t)
    bound_column = Column(column.name)
    if expr.left is column:
        return Comparison(expr.op, bound_column, typed)
    return Comparison(expr.op, typed, bound_column)


def _find_alias(aliases: Mapping[str, pa.Schema], qualifier: str) -> str | None:
    if qualifier in aliases:
        return qualifier
    hits = [a for a in aliases if a.lower() == qualifier.lower()]
    return hits[0] if len(hits) == 1 else None


#: expressions this process bound lately, by id: (the bound expression, its schema, is it a
#: condition). Binding is idempotent, and a DML binds its predicate, then its scan and the file
#: pruning bind the result again (and the conflict checker once per winner): a bound expression
#: handed back with the same schema is returned at once. Entries hold their expressions, so an
#: id cannot be reused while its entry exists.
_RECENTLY_BOUND: OrderedDict[int, tuple[Expr, pa.Schema, bool]] = OrderedDict()
_RECENT_ENTRIES = 64
_RECENT_LOCK = threading.Lock()


def is_bound(expr: Expr, schema: pa.Schema) -> bool:
    """Did this process bind ``expr`` (this very object) against ``schema`` lately?"""
    return _already_bound(expr, schema, condition=False)


def _already_bound(expr: Expr, schema: pa.Schema, condition: bool) -> bool:
    with _RECENT_LOCK:
        entry = _RECENTLY_BOUND.get(id(expr))
    return (entry is not None and entry[0] is expr and (entry[2] or not condition)
            and (entry[1] is schema or entry[1].equals(schema, check_metadata=True)))


def _remember_bound(bound: Expr, schema: pa.Schema, condition: bool) -> None:
    with _RECENT_LOCK:
        _RECENTLY_BOUND[id(bound)] = (bound, schema, condition)
        _RECENTLY_BOUND.move_to_end(id(bound))
        while len(_RECENTLY_BOUND) > _RECENT_ENTRIES:
            _RECENTLY_BOUND.popitem(last=False)


def bind(expr: Expr, schema: pa.Schema, *, aliases: Mapping[str, pa.Schema] | None = None) -> Expr:
    """Resolve ``expr``'s columns in ``schema`` and type its literals; check it type-checks.

    ``aliases`` (MERGE) maps a table alias to its schema: ``t.id`` resolves in ``aliases["t"]`` and
    stays qualified; an unqualified name not in ``schema`` is looked up in the aliases and gets the
    alias of the one that has it. Idempotent: binding a bound expression changes nothing.
    """
    if aliases is None and _already_bound(expr, schema, condition=False):
        return expr
    return _bind_typed(expr, schema, aliases)[0]


def _bind_typed(expr: Expr, schema: pa.Schema, aliases: Mapping[str, pa.Schema] | None) -> tuple[Expr, pa.DataType]:
    """:func:`bind`'s work, and the bound expression's result type (its type check)."""
    binder = _Binder(schema, aliases)
    resolved = expr.transform(lambda n: binder.resolve(n, expr) if isinstance(n, Column) else n)
    bound = resolved.transform(binder.coerce)
    kind = binder.type_of(bound)  # raises PredicateError naming the expression if kernels do not fit
    if aliases is None:
        _remember_bound(bound, schema, condition=False)
    return bound, kind


def bind_predicate(expr: Expr, schema: pa.Schema, *, aliases: Mapping[str, pa.Schema] | None = None) -> Expr:
    """:func:`bind`, and require a boolean result (a WHERE/ON/replaceWhere condition)."""
    if not isinstance(expr, Expr):  # where=42: callers pass SQL text through parse_predicate, Exprs as is
        raise ArgumentTypeError(f"a condition must be SQL text (or a deltatx Expr), got {type(expr).__name__} "
                                f"{expr!r}")
    if aliases is None and _already_bound(expr, schema, condition=True):
        return expr
    if aliases is None:
        point = _bind_point(expr, schema)
        if point is not None:
            _remember_bound(point, schema, condition=True)
            return point
    if aliases is None and _already_bound(expr, schema, condition=False):
        bound, t = expr, _Binder(schema, aliases).type_of(expr)
    else:
        bound, t = _bind_typed(expr, schema, aliases)
    if not (pa.types.is_boolean(t) or pa.types.is_null(t)):
        raise PredicateError(f"{expr} is not a condition: it evaluates to {t}, not boolean")
    if aliases is None:
        _remember_bound(bound, schema, condition=True)
    return bound
