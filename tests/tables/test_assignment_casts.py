"""UPDATE / MERGE SET values stored into a column of another numeric type: Spark's ANSI store
assignment (its CAST), not only Arrow's safe cast."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import SchemaMismatchError

SCHEMA = pa.schema([("id", pa.int64()), ("i", pa.int32()), ("d", pa.decimal128(5, 2))])


@pytest.fixture
def table(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(pa.table({"id": [1, 2], "i": pa.array([1, 2], pa.int32()), "d": [Decimal("1.00"), Decimal("2.00")]},
                      schema=SCHEMA))
    return t


def values(t: deltatx.Table) -> dict[int, tuple]:
    return {r["id"]: (r["i"], r["d"]) for r in deltatx.Table(t.uri).to_arrow().to_pylist()}


def test_fractions_truncate_into_integers_and_decimals_round_half_up(table):
    table.update(where="id = 1", set={"i": "7.9", "d": "1.235"})
    table.update(where="id = 2", set={"i": "-7.9", "d": "-1.235"})
    assert values(table) == {1: (7, Decimal("1.24")), 2: (-7, Decimal("-1.24"))}
    source = pa.table({"id": [1], "x": [3.99]})
    table.merge(source, on="t.id = s.id").when_matched_update({"i": "s.x", "d": "s.x * 1.0005"}).execute()
    assert values(table)[1] == (3, Decimal("3.99"))


@pytest.mark.parametrize("assignment", [{"i": "1e20"}, {"d": "12345.6"}, {"i": "'abc'"}])
def test_values_out_of_range_or_not_numbers_are_refused(table, assignment):
    with pytest.raises(SchemaMismatchError, match="cannot be converted"):
        table.update(where="id = 1", set=assignment)
    assert deltatx.Table(table.uri).version == 1
