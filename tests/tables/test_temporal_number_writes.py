"""A DATE or a TIMESTAMP is not stored into a number column (nor a number into them).

Spark 4.3's INSERT refuses each (checked with a local SparkSession, a parquet table, ANSI store
assignment): ``[INCOMPATIBLE_DATA_FOR_TABLE.CANNOT_SAFELY_CAST] Cannot safely cast `n` "DATE"
to "INT"``, and the same for TIMESTAMP to INT or BIGINT. Arrow's cast would store the days or
microseconds since 1970; the write is refused with the typed schema error instead, before any
file is written.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import SchemaMismatchError

UTC = dt.timezone.utc
SCHEMA = pa.schema([("id", pa.int64()), ("n", pa.int32()), ("b", pa.int64()), ("x", pa.float64())])


@pytest.mark.parametrize("column, values", [
    ("n", pa.array([dt.date(1970, 1, 2)], pa.date32())),
    ("b", pa.array([dt.date(2024, 1, 2)], pa.date32())),
    ("n", pa.array([dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)], pa.timestamp("us", "UTC"))),
    ("b", pa.array([dt.datetime(2024, 1, 2, tzinfo=UTC)], pa.timestamp("us", "UTC"))),
    ("b", pa.array([dt.datetime(2024, 1, 2)], pa.timestamp("us"))),
    ("x", pa.array([dt.date(2024, 1, 2)], pa.date32())),
], ids=["date-into-int", "date-into-bigint", "timestamp-into-int", "timestamp-into-bigint",
        "timestamp-ntz-into-bigint", "date-into-double"])
def test_a_date_or_timestamp_is_not_appended_into_a_number_column(table_uri, column, values):
    table = deltatx.create_table(table_uri, SCHEMA)
    with pytest.raises(SchemaMismatchError, match=repr(column)):
        table.append(pa.table({"id": pa.array([1], pa.int64()), column: values}))
    assert deltatx.Table(table_uri).to_arrow().num_rows == 0  # nothing was written
    assert deltatx.Table(table_uri).version == 0


def test_a_date_column_is_not_set_into_a_number_column(table_uri):
    """UPDATE SET n = d: Spark's CAST has no DATE to INT (DATATYPE_MISMATCH); the row keeps its value."""
    schema = pa.schema([("id", pa.int64()), ("n", pa.int32()), ("d", pa.date32())])
    table = deltatx.create_table(table_uri, schema)
    table.append(pa.table({"id": [1], "n": pa.array([7], pa.int32()), "d": [dt.date(1970, 1, 2)]}, schema=schema))
    with pytest.raises(SchemaMismatchError):
        deltatx.Table(table_uri).update(set={"n": "d"})
    assert deltatx.Table(table_uri).to_arrow()["n"].to_pylist() == [7]


def test_numbers_and_dates_still_go_where_they_fit(table_uri):
    schema = pa.schema([("id", pa.int64()), ("n", pa.int64()), ("d", pa.date32()),
                        ("ts", pa.timestamp("us", "UTC"))])
    table = deltatx.create_table(table_uri, schema)
    table.append(pa.table({"id": pa.array([1], pa.int64()), "n": pa.array([5], pa.int32()),
                           "d": pa.array([dt.date(2024, 1, 2)], pa.date32()),
                           "ts": pa.array([dt.date(2024, 1, 2)], pa.date32())}))  # a DATE into a TIMESTAMP: midnight
    assert deltatx.Table(table_uri).to_arrow().to_pylist() == [
        {"id": 1, "n": 5, "d": dt.date(2024, 1, 2), "ts": dt.datetime(2024, 1, 2, tzinfo=UTC)}]
