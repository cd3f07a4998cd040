"""Division by zero in DML, as Spark 4 with ANSI on: the statement fails and commits nothing."""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx


def test_a_zero_divisor_fails_the_update_as_in_spark_ansi(table_uri):
    """Spark 4 (ANSI) fails ``SET v = v / 0``; deltatx wrote NULL and committed. A guarded
    division (CASE) still gives NULL for the rows the guard leaves out."""
    from deltatx.errors import PredicateError

    t = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("v", pa.int64()), ("d", pa.int64())]))
    t.append(pa.table({"id": [1, 2], "v": [10, 20], "d": [2, 0]}))
    before = t.version
    for sql in ("CAST(v / d AS BIGINT)", "v % d", "v DIV d"):
        with pytest.raises(PredicateError, match="_BY_ZERO"):
            t.update(set={"v": sql})
    with pytest.raises(PredicateError, match="DIVIDE_BY_ZERO"):
        t.delete(where="v / d > 1")
    assert deltatx.Table(table_uri).version == before
    t.update(set={"v": "CASE WHEN d <> 0 THEN v DIV d END"})
    assert deltatx.Table(table_uri).to_arrow().sort_by("id")["v"].to_pylist() == [5, None]


def test_a_text_divisor_is_read_as_a_number_as_before(table_uri):
    t = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("v", pa.int64()), ("s", pa.string())]))
    t.append(pa.table({"id": [1, 2], "v": [10, 20], "s": ["2", "5"]}))
    t.update(set={"v": "CAST(v / s AS BIGINT)"})
    assert deltatx.Table(table_uri).to_arrow().sort_by("id")["v"].to_pylist() == [5, 4]
