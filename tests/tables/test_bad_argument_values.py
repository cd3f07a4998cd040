"""Wrong argument values are deltatx's typed errors (also ValueError / TypeError, as delta-spark
raises them), never a bare Python exception from deep inside, and nothing is written."""

from __future__ import annotations

import math
import os

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    PredicateError,
    TableNotFoundError,
    VacuumRetentionError,
)

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.float64())])
ROWS = pa.table({"id": [3], "v": [1.0]}, schema=SCHEMA)


@pytest.fixture
def table(table_uri) -> deltatx.Table:
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(pa.table({"id": [1, 2], "v": [1.0, 2.0]}, schema=SCHEMA))
    return t


def _listing(uri: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), uri) for d, _, fs in os.walk(uri) for f in fs)


CALLS = {
    "schema_mode": (InvalidArgumentError, lambda t: t.append(ROWS, schema_mode="bogus")),
    "app_id alone": (InvalidArgumentError, lambda t: t.append(ROWS, app_id="x")),
    "update set={}": (InvalidArgumentError, lambda t: t.update(where="id = 1", set={})),
    "update set=list": (ArgumentTypeError, lambda t: t.update(where="id = 1", set=[("v", "1")])),
    "merge set={}": (InvalidArgumentError, lambda t: t.merge(ROWS, on="t.id = s.id").when_matched_update(set={})),
    "merge no clause": (InvalidArgumentError, lambda t: t.merge(ROWS, on="t.id = s.id").execute()),
    "set_properties list": (ArgumentTypeError, lambda t: t.set_properties([("a", "b")])),
    "vacuum 'x'": (VacuumRetentionError, lambda t: t.vacuum(retention_hours="x")),
    "vacuum inf": (VacuumRetentionError, lambda t: t.vacuum(retention_hours=math.inf, dry_run=True)),
    "vacuum nan": (VacuumRetentionError, lambda t: t.vacuum(retention_hours=math.nan, dry_run=True)),
    "history -1": (InvalidArgumentError, lambda t: t.history(limit=-1)),
    "history 'x'": (InvalidArgumentError, lambda t: t.history(limit="x")),
    "literal past 38 digits": (PredicateError, lambda t: t.to_arrow(where="id = " + "9" * 39)),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_bad_argument_value_is_a_typed_error_and_writes_nothing(table, table_uri, name):
    error, call = CALLS[name]
    before = _listing(table_uri)
    with pytest.raises(error):
        call(table)
    assert _listing(table_uri) == before and deltatx.Table(table_uri).version == 1


def test_an_integer_literal_past_bigint_is_a_decimal_as_in_spark(table):
    """Spark reads 99999999999999999999999 as DECIMAL(23, 0): it compares, it does not overflow."""
    assert table.to_arrow(where="id = 99999999999999999999999").num_rows == 0
    assert table.to_arrow(where="id < 99999999999999999999999").num_rows == 2
    assert table.to_arrow(where="id > -99999999999999999999999").num_rows == 2


def test_a_uri_no_backend_knows_or_a_file_is_a_typed_error(table_uri, table):
    with pytest.raises(InvalidArgumentError, match="foo://"):
        deltatx.Table("foo://x")
    with pytest.raises(TableNotFoundError):
        deltatx.Table(os.path.join(table_uri, "_delta_log", f"{0:020d}.json"))


@pytest.mark.parametrize("uri", ["s3://bucket/events#2024", "s3://bucket/events?x=1", "file:///tmp/a#b",
                                 "memory://t#1", "s3://bucket/events#"])
def test_a_uri_with_a_fragment_or_query_is_refused(uri):
    """'#...' / '?...' name no location: s3://b/t#1 and s3://b/t#2 were silently one table."""
    from deltatx.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="fragment or query"):
        deltatx.Table(uri)
    with pytest.raises(InvalidArgumentError, match="fragment or query"):
        deltatx.create_table(uri, pa.schema([("id", pa.int64())]))
