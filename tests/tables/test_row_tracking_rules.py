"""Rules row tracking puts on every later schema and configuration (PROTOCOL.md "Row Tracking"):

- the hidden columns that keep rewritten rows' ids and commit versions keep their names to
  themselves: a user column named like one of them (added, merged in by an append or a MERGE,
  renamed to it) is refused, as Delta refuses it (DELTA_ADDING_COLUMN_WITH_INTERNAL_NAME_FAILED).
  Accepted, its values were read as row ids, and three rows shared one id;
- ``delta.enableRowTracking`` and ``delta.rowTrackingSuspended`` are never both true (Delta's
  DELTA_ROW_TRACKING_ILLEGAL_PROPERTY_COMBINATION, in either order). Accepted, the next append's
  rows had no id on a table whose readers rely on every row having one.

Each refusal commits nothing.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import InvalidPropertyError, SchemaMismatchError

SCHEMA = pa.schema([("id", pa.int64())])
ON = {"delta.enableRowTracking": "true", "delta.enableDeletionVectors": "true"}
ROW_ID = "delta.rowTracking.materializedRowIdColumnName"
COMMIT_VERSION = "delta.rowTracking.materializedRowCommitVersionColumnName"


@pytest.fixture
def table(tmp_path) -> deltatx.Table:
    t = deltatx.create_table(str(tmp_path / "t"), SCHEMA, properties=ON)
    t.append(pa.table({"id": list(range(10))}))
    return t


def _ids_unique(t: deltatx.Table) -> None:
    rows = deltatx.Table(t.uri).to_arrow(columns=["id", "_metadata.row_id"])
    ids = rows["_metadata.row_id"].to_pylist()
    assert None not in ids and len(set(ids)) == len(ids)


def _mapped(tmp_path) -> deltatx.Table:
    t = deltatx.create_table(str(tmp_path / "m"), pa.schema([("id", pa.int64()), ("x", pa.int64())]),
                             properties={**ON, "delta.columnMapping.mode": "name"})
    t.append(pa.table({"id": [1], "x": [2]}))
    return t


@pytest.mark.parametrize("hidden", [ROW_ID, COMMIT_VERSION])
@pytest.mark.parametrize("how", ["add_columns", "append merge", "merge evolution", "overwrite"])
def test_a_column_named_like_a_hidden_row_tracking_column_is_refused(table, hidden, how):
    name = table.properties[hidden]
    rows = pa.table({"id": [100, 101], name: [3, 3]})
    before = table.version
    with pytest.raises(SchemaMismatchError, match="DELTA_ADDING_COLUMN_WITH_INTERNAL_NAME_FAILED"):
        if how == "add_columns":
            table.add_columns([pa.field(name, pa.int64())])
        elif how == "append merge":
            table.append(rows, schema_mode="merge")
        elif how == "merge evolution":
            (table.merge(rows, on="t.id = s.id", source_alias="s", target_alias="t")
             .when_not_matched_insert_all().with_schema_evolution().execute())
        else:
            table.overwrite(rows, schema_mode="merge")
    assert deltatx.Table(table.uri).version == before
    _ids_unique(table)


def test_renaming_a_column_to_a_hidden_name_is_refused(tmp_path):
    t = _mapped(tmp_path)
    before = t.version
    with pytest.raises(SchemaMismatchError, match="reserved for the hidden column"):
        t.rename_column("x", t.properties[ROW_ID])
    assert deltatx.Table(t.uri).version == before


def test_a_table_cannot_be_created_with_a_column_named_like_its_hidden_column(tmp_path):
    with pytest.raises(SchemaMismatchError, match="reserved"):
        deltatx.create_table(str(tmp_path / "c"), pa.schema([("id", pa.int64()), ("_rid", pa.int64())]),
                             properties={**ON, ROW_ID: "_rid"})


def test_suspending_row_tracking_while_it_is_on_is_refused(table):
    before = table.version
    with pytest.raises(InvalidPropertyError, match="cannot be set together"):
        table.set_properties({"delta.rowTrackingSuspended": "true"})
    with pytest.raises(InvalidPropertyError, match="cannot be set together"):
        with deltatx.Table(table.uri).transaction() as tx:
            tx.set_properties({"delta.rowTrackingSuspended": "true"})
    assert deltatx.Table(table.uri).version == before
    table.append(pa.table({"id": [10]}))
    _ids_unique(table)
    # turning row tracking off first, then suspending it, is the documented way
    table.set_properties({"delta.enableRowTracking": "false"})
    table.set_properties({"delta.rowTrackingSuspended": "true"})
    assert table.properties["delta.rowTrackingSuspended"] == "true"


def test_a_table_cannot_be_created_enabled_and_suspended(tmp_path):
    with pytest.raises(InvalidPropertyError, match="cannot be set together"):
        deltatx.create_table(str(tmp_path / "s"), SCHEMA,
                             properties={"delta.enableRowTracking": "true", "delta.rowTrackingSuspended": "true"})
    assert not (tmp_path / "s" / "_delta_log").exists() or not any((tmp_path / "s" / "_delta_log").iterdir())
