"""A corrupt ``schemaString`` is a typed InvalidTableError, never a KeyError/AttributeError/ValueError."""

from __future__ import annotations

import pytest
from txnlog_logs import LogWriter, table_metadata

from deltatx.errors import InvalidTableError
from deltatx.txnlog.actions import Protocol
from deltatx.txnlog.schema import schema_from_json
from deltatx.txnlog.snapshot import load_snapshot

CORRUPT = [
    "[1]",
    '{"type": "struct"}',
    '{"type": "struct", "fields": [{"name": "a", "nullable": true}]}',
    '{"type": "struct", "fields": [{"name": "a", "type": "decimal(50,2)"}]}',
    '{"type": "struct", "fields": [{"name": "a", "type": {"type": "array"}}]}',
    '{"type": "struct", "fields": [{"name": "a", "type": {"type": "map", "keyType": "string"}}]}',
    '{"type": "struct", "fields": 7}',
    '{"type": "struct", "fields": ["a"]}',
]


@pytest.mark.parametrize("schema_string", CORRUPT)
def test_corrupt_schema_string_is_invalid_table(schema_string: str) -> None:
    with pytest.raises(InvalidTableError, match="schemaString"):
        schema_from_json(schema_string)


@pytest.mark.parametrize("schema_string", CORRUPT[:5])
def test_table_with_corrupt_schema_string_fails_typed(log: LogWriter, schema_string: str) -> None:
    metadata = table_metadata().replace(schema_string=schema_string)
    log.commit(protocol=Protocol(1, 2), metadata=metadata, info={"timestamp": 1, "operation": "CREATE TABLE"})
    with pytest.raises(InvalidTableError, match="schemaString"):
        load_snapshot(log.store).schema


def test_valid_schema_string_still_parses() -> None:
    schema = schema_from_json(
        '{"type": "struct", "fields": [{"name": "d", "type": "decimal(10,2)", "nullable": false, "metadata": {}},'
        ' {"name": "l", "type": {"type": "array", "elementType": "long", "containsNull": true}}]}'
    )
    assert schema.names == ["d", "l"] and not schema.field("d").nullable
