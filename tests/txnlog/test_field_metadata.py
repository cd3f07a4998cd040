"""Column metadata given through pyarrow (always bytes) becomes Delta's ``StructField.metadata``.

deltatx's own schemas hold each Delta value JSON-encoded, so bytes that parse as JSON are that
value and other bytes are the text itself (a plain comment used to be dropped without a word).
Keys Delta defines as text keep the text even when it parses as JSON: Delta Spark reads
``comment`` and ``delta.invariants`` with ``getString``, and PROTOCOL.md's invariant is a string
holding JSON (it used to be written as a nested object, and a comment "2024" as a number).
Arrow's and Parquet's own keys (extension types, field ids) are not the column's.
"""

from __future__ import annotations

import orjson
import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import ConstraintViolationError, InvalidTableError
from deltatx.txnlog.schema import field_from_delta, field_to_delta

INVARIANT = '{"expression": {"expression": "w < 100"}}'


def _logged_fields(uri: str) -> dict[str, dict]:
    with open(f"{uri}/_delta_log/{0:020d}.json", "rb") as f:
        for line in f:
            action = orjson.loads(line)
            if "metaData" in action:
                schema = orjson.loads(action["metaData"]["schemaString"])
                return {field["name"]: field["metadata"] for field in schema["fields"]}
    raise AssertionError("no metaData in version 0")


def test_user_metadata_is_kept_with_delta_types(tmp_path):
    uri = str(tmp_path / "t")
    schema = pa.schema([
        pa.field("w", pa.int64(), metadata={"delta.invariants": INVARIANT, "comment": "2024"}),
        pa.field("x", pa.int64(), metadata={"comment": "user id", "my.list": "[1, 2]", "my.count": "123",
                                            "ARROW:extension:name": "x.y", "PARQUET:field_id": "7"}),
    ])
    table = deltatx.create_table(uri, schema)
    logged = _logged_fields(uri)
    assert logged["w"] == {"delta.invariants": INVARIANT, "comment": "2024"}
    assert logged["x"] == {"comment": "user id", "my.list": [1, 2], "my.count": 123}
    with pytest.raises(ConstraintViolationError):  # the invariant is enforced from its text form
        table.append(pa.table({"w": [100], "x": [1]}))
    table.append(pa.table({"w": [99], "x": [1]}))
    assert deltatx.Table(uri).to_arrow().num_rows == 1


@pytest.mark.parametrize("value", ["42", "true", "user id", '{"a": 1}', "[1]", "", "é"])
def test_delta_values_round_trip_through_arrow(value):
    for key in ("comment", "delta.invariants", "CURRENT_DEFAULT", "some.other"):
        field = {"name": "c", "type": "long", "nullable": True, "metadata": {key: value}}
        assert field_to_delta(field_from_delta(field)) == field
    numbers = {"name": "c", "type": "long", "nullable": True,
               "metadata": {"delta.columnMapping.id": 3, "delta.identity.start": -1, "delta.typeChanges": [{"a": 1}]}}
    assert field_to_delta(field_from_delta(numbers)) == numbers


def test_an_invariant_that_is_not_protocol_form_is_refused_naming_the_form(tmp_path):
    schema = pa.schema([pa.field("x", pa.int64(), metadata={"delta.invariants": "x > 0"})])
    with pytest.raises(InvalidTableError, match='expression.*<SQL>'):
        deltatx.create_table(str(tmp_path / "t"), schema)
