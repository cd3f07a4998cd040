"""The plain-Python data skipping of a few files agrees with the columnar path, answer for answer."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from integer_predicates import integer_predicates

from deltatx.expr import bind, parse_predicate
from deltatx.expr import pruning
from deltatx.expr.pruning_few import MAX_FILES, files_matching_few
from deltatx.txnlog.actions import FILE_SCHEMA

SCHEMA = pa.schema([("i", pa.int64()), ("b", pa.int8()), ("u", pa.uint16()), ("s", pa.string()), ("p", pa.int32())])
PARTITIONS = ["p"]
INT_COLUMNS = {"i": (-(1 << 63), (1 << 63) - 1), "b": (-128, 127), "u": (0, 65535)}


def files_table(stats: list[str | None]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"path": f"f{k}.parquet", "size": 1, "modificationTime": 0, "dataChange": True, "stats": s,
          "partitionValues": [("p", "1")]} for k, s in enumerate(stats)],
        schema=FILE_SCHEMA,
    )


def columnar(expr, files: pa.Table, monkeypatch) -> list[bool]:
    with monkeypatch.context() as m:
        m.setattr(pruning, "MAX_FEW_FILES", -1)
        return pruning.files_matching(expr, files, SCHEMA, PARTITIONS).to_pylist()


values = st.one_of(st.integers(-300, 300), st.sampled_from([-(1 << 63), (1 << 63) - 1, 70000, -129, 128]))


@st.composite
def stats_strings(draw):
    """A file's stats JSON: bounds present, missing, of the wrong JSON type, or absent entirely."""
    kind = draw(st.sampled_from(["full", "full", "full", "partial", "none", "empty", "garbage", "typed"]))
    if kind == "none":
        return None
    if kind == "empty":
        return ""
    if kind == "garbage":
        return "{not json"
    mins, maxs = {}, {}
    for name in INT_COLUMNS:
        lo, hi = sorted([draw(values), draw(values)])
        if kind != "partial" or draw(st.booleans()):
            mins[name] = lo
        if kind != "partial" or draw(st.booleans()):
            maxs[name] = hi
    if kind == "typed":  # a bound in the wrong JSON type: unknown, as the columnar parser reads it
        mins["i"] = str(mins.get("i", 0))
    return orjson.dumps({"numRecords": 3, "minValues": mins, "maxValues": maxs}).decode()


def predicates():
    return integer_predicates(sorted(INT_COLUMNS), values)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stats=st.lists(stats_strings(), min_size=1, max_size=MAX_FILES), predicate=predicates())
def test_few_files_answer_exactly_as_the_columnar_path(stats, predicate, monkeypatch_session):
    files = files_table(stats)
    bound = bind(predicate, SCHEMA)
    few = files_matching_few(bound, files, SCHEMA, PARTITIONS)
    if few is None:  # a literal the binder could not keep an integer (e.g. out of the column's range)
        return
    assert few == columnar(predicate, files, monkeypatch_session), str(predicate)


@pytest.fixture(scope="module")
def monkeypatch_session():
    with pytest.MonkeyPatch.context() as m:
        yield m


@pytest.mark.parametrize("sql", [
    "s = 'a'",            # a string column: truncated bounds, left to the columnar path
    "p = 1",              # a partition column: decided exactly on partition values
    "i = 1 AND s = 'a'",  # any leaf outside the subset declines the whole predicate
    "NOT (i = 1)",
    "i IS NULL",
    "i NOT IN (1, 2)",
    "i + 1 = 2",
])
def test_predicates_outside_the_subset_are_left_to_the_columnar_path(sql):
    files = files_table([orjson.dumps({"minValues": {"i": 1}, "maxValues": {"i": 2}}).decode()])
    assert files_matching_few(bind(parse_predicate(sql), SCHEMA), files, SCHEMA, PARTITIONS) is None


def test_more_files_than_the_limit_are_left_to_the_columnar_path():
    files = files_table([None] * (MAX_FILES + 1))
    assert files_matching_few(bind(parse_predicate("i = 1"), SCHEMA), files, SCHEMA, PARTITIONS) is None


def test_a_point_predicate_keeps_only_the_file_whose_bounds_hold_the_value():
    stats = [orjson.dumps({"minValues": {"i": lo}, "maxValues": {"i": hi}}).decode() for lo, hi in [(0, 9), (10, 19), (5, 5)]]
    files = files_table(stats + [None])
    assert pruning.files_matching(parse_predicate("i = 5"), files, SCHEMA, PARTITIONS).to_pylist() == [True, False, True, True]
    assert pruning.files_matching(parse_predicate("i != 5"), files, SCHEMA, PARTITIONS).to_pylist() == [True, True, False, True]
    assert pruning.files_matching(parse_predicate("i IN (12, 30)"), files, SCHEMA, PARTITIONS).to_pylist() == [False, True, False, True]


def test_column_mapped_stats_are_read_by_physical_name():
    mapped = pa.schema([pa.field("i", pa.int64(), metadata={"delta.columnMapping.physicalName": "col-1"})])
    files = files_table([orjson.dumps({"minValues": {"col-1": 0}, "maxValues": {"col-1": 9}}).decode(),
                         orjson.dumps({"minValues": {"i": 0}, "maxValues": {"i": 9}}).decode()])
    bound = bind(parse_predicate("i = 20"), mapped)
    # the second file's bounds are under the logical name, which a mapped table does not use: unknown
    assert files_matching_few(bound, files, mapped, []) == [False, True]
    assert pruning.files_matching(parse_predicate("i = 20"), files, mapped, []).to_pylist() == [False, True]
