"""One SQL expression evaluated by both back ends a test holds to the same answer: the eager
evaluator (``evaluate``) and the lazy Arrow expression a dataset scan runs (``to_arrow``),
bound against the table's schema. Shared by the CAST and TRY_CAST tests."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as ds

from deltatx.expr import bind, bind_predicate, evaluate, matches, parse_expression, parse_predicate, to_arrow, to_arrow_filter


def eager(sql: str, table: pa.Table) -> pa.Array | pa.ChunkedArray:
    """``sql`` evaluated eagerly over ``table``."""
    return evaluate(bind(parse_expression(sql), table.schema), table)


def lazy(sql: str, table: pa.Table) -> pa.Array | pa.ChunkedArray:
    """``sql`` as a lazy expression, computed by a dataset scan as a projected column."""
    e = bind(parse_expression(sql), table.schema)
    return ds.dataset(table).to_table(columns={"x": to_arrow(e, table.schema)}).column("x")


def where(table: pa.Table, sql: str) -> list[int]:
    """The ``id`` of the rows predicate ``sql`` selects eagerly; the lazy filter must agree."""
    bound = bind_predicate(parse_predicate(sql), table.schema)
    selected = table.filter(matches(bound, table))["id"].to_pylist()
    assert table.filter(to_arrow_filter(bound, table.schema))["id"].to_pylist() == selected, sql
    return selected
