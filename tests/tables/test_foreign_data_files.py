"""A data file another writer put in a table with a column type the table's cannot hold: every
read path and every rewrite refuses it, naming the file and column, and nothing is committed
(Arrow would otherwise convert True to 1 or '7' to 7 and OPTIMIZE would commit the result)."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltatx
from deltatx.errors import SchemaMismatchError
from deltatx.txnlog.snapshot_cache import SNAPSHOTS

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.float64())])


def _table_with_foreign_file(uri: str, column: pa.Array) -> tuple[deltatx.Table, str]:
    """A table of two commits whose first data file is replaced by a file with ``id`` = ``column``."""
    t = deltatx.create_table(uri, SCHEMA)
    t.append(pa.table({"id": [1, 2], "v": [1.0, 2.0]}, schema=SCHEMA))
    t.append(pa.table({"id": [3], "v": [3.0]}, schema=SCHEMA))
    with open(os.path.join(uri, "_delta_log", f"{1:020d}.json"), "rb") as fh:
        path = next(orjson.loads(line)["add"]["path"] for line in fh if b'"add"' in line)
    pq.write_table(pa.table({"id": column, "v": [1.0, 2.0]}), os.path.join(uri, path))
    SNAPSHOTS.clear()  # as another process would open it
    return deltatx.Table(uri), path


def _files(uri: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), uri) for d, _, fs in os.walk(uri) for f in fs)


@pytest.mark.parametrize("column", [
    pa.array([True, False]),
    pa.array(["7", "8"]),
    pa.array([1_000, 2_000], pa.timestamp("us")),
    pa.array([1.5, 2.0]),
    pa.array([2**64 - 1, 1], pa.uint64()),
], ids=["bool", "string", "timestamp", "double", "uint64-too-big"])
def test_every_read_and_rewrite_refuses_the_file_and_commits_nothing(tmp_path, column):
    uri = str(tmp_path / "t")
    t, path = _table_with_foreign_file(uri, column)
    before = _files(uri)
    named = f"'id' of data file .*{path}"
    operations = {
        "to_arrow": lambda: t.to_arrow(),
        "to_arrow(where)": lambda: t.to_arrow(where="v > 0"),
        "delete": lambda: t.delete(where="v = 1.0"),
        "update": lambda: t.update(where="v = 1.0", set={"v": "9.0"}),
        "merge": lambda: t.merge(pa.table({"id": [1], "v": [5.0]}, schema=SCHEMA), on="t.id = s.id")
                          .when_matched_update_all().when_not_matched_insert_all().execute(),
        "optimize": lambda: t.optimize(),
    }
    for name, operation in operations.items():
        with pytest.raises(SchemaMismatchError, match=named):
            operation()
        SNAPSHOTS.clear()
        assert deltatx.Table(uri).version == 2, name
        assert _files(uri) == before, name


@pytest.mark.parametrize("mode", ["name", "id"])
def test_a_value_the_table_type_cannot_hold_is_a_schema_mismatch_under_column_mapping(tmp_path, mode):
    """A file whose INT column holds a BIGINT value too large for it, in a column-mapped table: in
    ``id`` mode (columns matched by field id) Arrow's raw ArrowInvalid escaped the read."""
    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("v", pa.int32())])
    t = deltatx.create_table(uri, schema, properties={"delta.columnMapping.mode": mode})
    t.append(pa.table({"id": [1], "v": pa.array([10], pa.int32())}))
    with open(os.path.join(uri, "_delta_log", f"{1:020d}.json"), "rb") as fh:
        path = next(orjson.loads(line)["add"]["path"] for line in fh if b'"add"' in line)
    written = pq.read_schema(os.path.join(uri, path))
    wide = pa.schema([written.field(0), written.field(1).with_type(pa.int64())])
    pq.write_table(pa.table([pa.array([1]), pa.array([2**40])], schema=wide), os.path.join(uri, path))
    SNAPSHOTS.clear()
    with pytest.raises(SchemaMismatchError, match="cannot be read as int32"):
        deltatx.Table(uri).to_arrow()
