"""Isolation levels: the delta.isolationLevel property and the snapshot-isolation downgrade."""

from __future__ import annotations

import pyarrow as pa
import pytest

from deltatx.errors import InvalidPropertyError
from deltatx.isolation import (
    ISOLATION_LEVEL_PROPERTY,
    IsolationLevel,
    effective_isolation_level,
    table_isolation_level,
    validate_isolation_property,
)
from deltatx.txnlog.actions import FILE_SCHEMA, REMOVE_SCHEMA

S = IsolationLevel.SERIALIZABLE
WS = IsolationLevel.WRITE_SERIALIZABLE
SI = IsolationLevel.SNAPSHOT_ISOLATION


@pytest.mark.parametrize(
    "properties, expected",
    [
        ({}, WS),
        ({"other": "x"}, WS),
        ({ISOLATION_LEVEL_PROPERTY: "Serializable"}, S),
        ({ISOLATION_LEVEL_PROPERTY: "WriteSerializable"}, WS),
    ],
)
def test_table_level(properties, expected):
    assert table_isolation_level(properties) is expected


@pytest.mark.parametrize(
    "value, message",
    [
        ("serializable", "did you mean 'Serializable'"),
        ("WRITESERIALIZABLE", "did you mean 'WriteSerializable'"),
        ("SnapshotIsolation", "only applied automatically"),
        ("ReadCommitted", "not a valid isolation level"),
        ("", "not a valid isolation level"),
    ],
)
def test_invalid_level_is_refused_with_advice(value, message):
    with pytest.raises(InvalidPropertyError, match=message):
        validate_isolation_property(value)
    with pytest.raises(InvalidPropertyError):
        table_isolation_level({ISOLATION_LEVEL_PROPERTY: value})


def test_level_values_are_the_log_spellings():
    assert [level.value for level in IsolationLevel] == ["Serializable", "WriteSerializable", "SnapshotIsolation"]
    assert IsolationLevel("WriteSerializable") == "WriteSerializable"


def files(schema: pa.Schema, *data_change: bool | None) -> pa.Table:
    rows = [{"path": f"f{i}.parquet", "partitionValues": {}, "size": 1, "modificationTime": 1,
             "dataChange": dc} for i, dc in enumerate(data_change)]
    return pa.Table.from_pylist([{n: r.get(n) for n in schema.names} for r in rows], schema=schema)


def adds(*dc):
    return files(FILE_SCHEMA, *dc)


def removes(*dc):
    return files(REMOVE_SCHEMA, *dc)


DOWNGRADE_CASES = [
    # name, table level, adds, removes, non-file actions, op changes data, expected
    ("optimize S", S, adds(False), removes(False, False), False, False, SI),
    ("optimize WS", WS, adds(False), removes(False), False, False, SI),
    ("no-data-change rewrite by a data op, S", S, adds(False), removes(False), False, True, SI),
    ("no-data-change rewrite by a data op, WS", WS, adds(False), removes(False), False, True, WS),
    ("append S", S, adds(True), removes(), False, True, S),
    ("append WS", WS, adds(True), removes(), False, True, WS),
    ("delete WS", WS, adds(), removes(True), False, True, WS),
    ("one data-changing file among many", WS, adds(False, True), removes(False), False, False, WS),
    ("missing dataChange counts as a change", WS, adds(None), removes(), False, False, WS),
    ("metadata-only S", S, adds(), removes(), True, False, S),
    ("metadata-only WS", WS, adds(), removes(), True, False, WS),
    ("optimize with a txn action", WS, adds(False), removes(False), True, False, WS),
    ("empty commit S", S, adds(), removes(), False, True, SI),
    ("empty commit WS", WS, adds(), removes(), False, True, SI),
]


@pytest.mark.parametrize("name, level, a, r, non_file, changes, expected", DOWNGRADE_CASES,
                         ids=[c[0] for c in DOWNGRADE_CASES])
def test_downgrade(name, level, a, r, non_file, changes, expected):
    got = effective_isolation_level(level, adds=a, removes=r, has_non_file_actions=non_file, changes_data=changes)
    assert got is expected


def test_accepts_level_strings():
    got = effective_isolation_level("Serializable", adds=adds(True), removes=removes(),
                                    has_non_file_actions=False, changes_data=True)
    assert got is S
