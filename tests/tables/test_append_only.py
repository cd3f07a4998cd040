"""delta.appendOnly=true: every operation that removes data fails with AppendOnlyError before
it writes a data file; appends, insert-only MERGE and OPTIMIZE (dataChange=false) still work."""

from __future__ import annotations

import pyarrow as pa
import pytest
from tablefiles import data_files

import deltatx
from deltatx import errors

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("v", pa.int64())])


def rows(ids: list[int], part: int = 0) -> pa.Table:
    return pa.table({"id": ids, "part": [part] * len(ids), "v": ids}, schema=SCHEMA)


@pytest.fixture
def append_only(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"], properties={"delta.appendOnly": " TRUE "})
    t.append(rows([1, 2, 3], 0))
    t.append(rows([4, 5], 1))
    return t


REMOVING = {
    "delete": lambda t: t.delete("id = 2"),
    "delete_partition": lambda t: t.delete("part = 1"),
    "delete_all": lambda t: t.delete(),
    "update": lambda t: t.update("id = 2", {"v": "100"}),
    "overwrite": lambda t: t.overwrite(rows([9])),
    "replace_where": lambda t: t.overwrite(rows([9], 1), where="part = 1"),
    "merge_update": lambda t: t.merge(rows([2, 7]), on="t.id = s.id")
    .when_matched_update(set={"v": "s.v * 10"}).when_not_matched_insert_all().execute(),
    "merge_delete": lambda t: t.merge(rows([2]), on="t.id = s.id").when_matched_delete().execute(),
}


@pytest.mark.parametrize("op", list(REMOVING))
def test_removing_data_fails_before_writing_files(append_only, table_uri, op, monkeypatch):
    from deltatx.tables.ops import rewrite

    written = []
    real = rewrite.write_data_files
    monkeypatch.setattr(rewrite, "write_data_files", lambda *a, **k: written.append(1) or real(*a, **k))
    before_files, before_version = data_files(table_uri), append_only.version
    with pytest.raises(errors.AppendOnlyError, match="appendOnly"):
        REMOVING[op](append_only)
    assert not written  # refused before any data file was written (not written, then cleaned up)
    reopened = deltatx.Table(table_uri)
    assert reopened.version == before_version
    assert data_files(table_uri) == before_files
    assert sorted(reopened.to_arrow()["id"].to_pylist()) == [1, 2, 3, 4, 5]


def test_appends_insert_only_merge_and_optimize_are_allowed(append_only, table_uri):
    append_only.append(rows([6]))
    append_only.merge(rows([2, 7]), on="t.id = s.id").when_not_matched_insert_all().execute()
    append_only.optimize()  # dataChange=false removes are not data removal
    assert sorted(deltatx.Table(table_uri).to_arrow()["id"].to_pylist()) == [1, 2, 3, 4, 5, 6, 7]


def test_a_merge_whose_update_matches_nothing_is_allowed(append_only, table_uri):
    append_only.merge(rows([8]), on="t.id = s.id").when_matched_update(set={"v": "0"}) \
        .when_not_matched_insert_all().execute()
    assert sorted(deltatx.Table(table_uri).to_arrow()["id"].to_pylist()) == [1, 2, 3, 4, 5, 8]


def test_turning_append_only_off_allows_deletes(append_only, table_uri):
    append_only.set_properties({"delta.appendOnly": False})
    append_only.delete("id = 2")
    assert sorted(deltatx.Table(table_uri).to_arrow()["id"].to_pylist()) == [1, 3, 4, 5]


def test_boolean_properties_are_stored_canonically(append_only):
    assert append_only.metadata.configuration["delta.appendOnly"] == "true"
