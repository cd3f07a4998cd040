"""Predicates and expressions: parse SQL, bind to a schema, evaluate on rows, prune files.

The layer every operation uses to understand a condition. ``parse_predicate("part = 3 AND id >
10")`` gives an immutable :class:`Expr`; :func:`bind` resolves it against a table schema;
:func:`to_arrow`/:func:`evaluate` run it over rows with SQL semantics; :func:`files_matching` tells,
per file of the log, whether the file may hold a matching row (scan pruning and conflict checks);
:func:`partition_predicate` is Delta's partition-only part of a read predicate.
"""

from .bind import bind, bind_predicate
from .model import (
    FALSE,
    NULL,
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
from .trees import (
    and_all,
    col,
    conjuncts,
    disjuncts,
    lit,
    map_columns,
    or_all,
    partition_predicate,
    qualifiers,
    qualify,
    references_only,
    strip_alias,
)
from .parse import parse_expression, parse_predicate
from .pruning import STATS_CACHE, files_matching
from .rows import (
    FUNCTIONS,
    evaluate,
    filter_table,
    matches,
    result_type,
    rows_to_keep,
    to_arrow,
    to_arrow_filter,
    to_arrow_keep,
)
from .values import convert_literal

__all__ = [
    "FALSE", "NULL", "TRUE", "FUNCTIONS", "STATS_CACHE",
    "And", "Arithmetic", "Case", "Cast", "Column", "Comparison", "Expr", "Func", "In", "IsNull",
    "Like", "Literal", "Not", "Or",
    "and_all", "bind", "bind_predicate", "col", "conjuncts", "convert_literal", "disjuncts",
    "evaluate", "files_matching", "filter_table", "lit", "map_columns", "matches", "or_all",
    "parse_expression", "parse_predicate", "partition_predicate",
    "qualifiers", "qualify", "references_only", "result_type",
    "rows_to_keep", "strip_alias", "to_arrow", "to_arrow_filter", "to_arrow_keep",
]
