"""Which rows of a few decoded row groups a point or range predicate selects, in numpy.

A merge-on-read DELETE or UPDATE of one row reads the 128k-row group that holds it and asks
which positions match. :func:`deltatx.expr.rows.matches` answers for any predicate, but lowers
the expression, type-checks it and runs several Arrow kernels each time: a quarter of a
millisecond for ``id = 42``, as long as decoding the group. For the shape of a point or range
change — AND / OR of comparisons and IN lists between an integer column and integer literals
(the subset :mod:`.pruning_few` plans from statistics) — this module compares the column's
values straight away and returns the positions; anything else returns None and the general
evaluator decides.

Same answers as ``matches``: a comparison with NULL is not TRUE, and without NOT in the subset
"is TRUE" of an AND / OR is the AND / OR of its sides' "is TRUE". A property test holds the two
to identical positions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .model import FLIPPED, And, Column, Comparison, Expr, In, Literal, Or
from .values import integer_range

#: IN lists longer than this go to the general evaluator (np.isin sorts them; Arrow hashes)
_MAX_IN_VALUES = 64

_NUMPY_OPS = {
    "=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
}


class _Outside(Exception):
    """The predicate (or a column's type) is outside this module's subset."""


def matching_positions(bound: Expr, table: pa.Table) -> np.ndarray | None:
    """Positions (int64, ascending) of the rows of ``table`` where ``bound`` is TRUE, or None
    when the predicate is outside the subset (the caller evaluates it in general)."""
    columns: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    try:
        mask = _mask(bound, table, columns)
    except _Outside:
        return None
    return np.flatnonzero(mask).astype(np.int64, copy=False)


def _mask(e: Expr, table: pa.Table, columns: dict[str, Any]) -> np.ndarray:
    if isinstance(e, (And, Or)):
        left = _mask(e.left, table, columns)
        right = _mask(e.right, table, columns)
        return (left & right) if isinstance(e, And) else (left | right)
    if isinstance(e, Comparison):
        column, literal, op = e.left, e.right, e.op
        if isinstance(literal, Column) and isinstance(column, Literal):
            column, literal, op = literal, column, FLIPPED[op]
        if op not in _NUMPY_OPS:
            raise _Outside
        values, valid = _values(column, table, columns)
        answer = _NUMPY_OPS[op](values, _integer(literal, values.dtype))
    elif isinstance(e, In):
        if e.negated or not e.values or len(e.values) > _MAX_IN_VALUES:
            raise _Outside
        values, valid = _values(e.operand, table, columns)
        wanted = np.array([_integer(v, values.dtype) for v in e.values], dtype=values.dtype)
        answer = np.isin(values, wanted)
    else:
        raise _Outside
    return answer if valid is None else answer & valid  # NULL compares to nothing as TRUE


def _values(column: Expr, table: pa.Table, columns: dict[str, Any]) -> tuple[np.ndarray, np.ndarray | None]:
    """(values, validity or None when no value is null) of an integer column of ``table``."""
    if not isinstance(column, Column) or column.qualifier is not None or column.path:
        raise _Outside
    found = columns.get(column.name)
    if found is not None:
        return found
    if column.name not in table.column_names:
        raise _Outside
    array = table.column(column.name)
    if not pa.types.is_integer(array.type):
        raise _Outside
    if array.null_count:
        valid = pc.is_valid(array).to_numpy(zero_copy_only=False)
        array = pc.fill_null(array, 0)
    else:
        valid = None
    values = array.to_numpy() if isinstance(array, pa.ChunkedArray) else array.to_numpy(zero_copy_only=False)
    found = columns[column.name] = (values, valid)
    return found


def _integer(literal: Expr, dtype: np.dtype) -> Any:
    """An integer literal as a value of the column's type; one outside its range (or any other
    literal) is left to the general evaluator."""
    if not isinstance(literal, Literal) or type(literal.value) is not int:
        raise _Outside
    if literal.type is not None and not pa.types.is_integer(literal.type):
        raise _Outside
    low, high = integer_range(pa.from_numpy_dtype(dtype))
    if not low <= literal.value <= high:
        raise _Outside
    return dtype.type(literal.value)
