"""``reorg(where=...)`` and ``optimize(where=...)`` take partition predicates only (Delta's rule);
the refusal names the command that was called: REORG shares OPTIMIZE's file selection and used to
be refused as "OPTIMIZE where=", naming a command the user did not run."""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import PredicateError

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])


def _table(uri: str) -> deltatx.Table:
    table = deltatx.create_table(uri, SCHEMA, partition_by=["p"], properties={"delta.enableDeletionVectors": "true"})
    table.append(pa.table({"id": list(range(20)), "p": ["a", "b"] * 10}, schema=SCHEMA))
    table.delete("id IN (0, 1)")
    return table


@pytest.mark.parametrize("command", ["REORG", "OPTIMIZE"])
def test_a_data_column_where_is_refused_naming_the_command(table_uri, command):
    table = _table(table_uri)
    version = table.version
    run = (lambda: table.reorg(where="id > 5", purge=True)) if command == "REORG" else \
        (lambda: table.optimize(where="id > 5"))
    with pytest.raises(PredicateError) as info:
        run()
    # Delta's wording (delta-spark's test_optimize_w_partition_filter looks for it), then the command
    assert str(info.value).startswith("Predicate references non-partition column 'id'. "
                                      "Only the partition columns may be referenced: [p]. ")
    other = "OPTIMIZE" if command == "REORG" else "REORG"
    assert f"{command} where=" in str(info.value) and other not in str(info.value)
    assert deltatx.Table(table_uri).version == version


def test_a_partition_where_still_selects_for_reorg(table_uri):
    table = _table(table_uri)
    result = table.reorg(where="p = 'a'", purge=True)
    assert result.operation == "REORG"
    rows = sorted(deltatx.Table(table_uri).to_arrow(columns=["id"]).column(0).to_pylist())
    assert rows == list(range(2, 20))
