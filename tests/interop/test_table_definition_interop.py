"""deltatx ↔ deltalake for the table-definition operations of the DeltaTable API: CONVERT TO
DELTA, REPLACE TABLE and protocol upgrades, both directions (deltalake reads and writes what
deltatx made; deltatx converts, replaces and upgrades what deltalake wrote).

deltalake is read through ``pyarrow.table(dt.scan())`` only (see interop_helpers).
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

import deltatx
from deltatx.errors import TableAlreadyExistsError
from deltatx.tables.convert import convert_to_delta
from deltatx.tables.ops.replace_table import stage_replace_table
from deltatx.tables.ops.upgrade_protocol import stage_upgrade_protocol
from interop_helpers import read_deltalake

DATA = pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"], "day": [dt.date(2024, 1, 1), dt.date(2024, 1, 2),
                                                                    dt.date(2024, 1, 2)]})
NEW = pa.schema([("key", pa.string()), ("n", pa.int64())])


def _sorted(table: pa.Table, key: str) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: r[key])


def _commit(table: deltatx.Table, stage) -> None:
    tx = table.transaction()
    try:
        stage(tx)
        tx.commit()
    except BaseException:
        tx.abort()
        raise


def test_deltalake_reads_and_appends_to_a_converted_folder(tmp_path):
    path = str(tmp_path / "p")
    pq.write_to_dataset(DATA, path, partition_cols=["day"])
    convert_to_delta(path, pa.schema([("day", pa.date32())]))
    assert _sorted(read_deltalake(path), "id") == _sorted(DATA, "id")
    write_deltalake(path, pa.table({"id": [4], "name": ["d"], "day": [dt.date(2024, 1, 3)]}), mode="append")
    assert sorted(deltatx.Table(path).to_arrow().column("id").to_pylist()) == [1, 2, 3, 4]


def test_a_deltalake_table_is_not_converted_again(tmp_path):
    path = str(tmp_path / "rs")
    write_deltalake(path, DATA)
    with pytest.raises(TableAlreadyExistsError):
        convert_to_delta(path)
    assert DeltaTable(path).version() == 0


def test_replace_a_deltalake_table_then_both_write(tmp_path):
    path = str(tmp_path / "rs")
    write_deltalake(path, DATA, partition_by=["day"])
    _commit(deltatx.Table(path), lambda tx: stage_replace_table(tx, NEW, description="replaced"))
    rs = DeltaTable(path)
    assert rs.metadata().partition_columns == [] and rs.metadata().description == "replaced"
    assert [f.name for f in rs.schema().fields] == ["key", "n"]
    assert read_deltalake(path).num_rows == 0
    write_deltalake(path, pa.table({"key": ["x"], "n": [1]}, schema=NEW), mode="append")
    deltatx.Table(path).append(pa.table({"key": ["y"], "n": [2]}, schema=NEW))
    assert _sorted(read_deltalake(path), "key") == [{"key": "x", "n": 1}, {"key": "y", "n": 2}]


def test_upgrade_a_deltalake_table_to_named_features(tmp_path):
    path = str(tmp_path / "rs")
    write_deltalake(path, DATA)
    _commit(deltatx.Table(path), lambda tx: stage_upgrade_protocol(tx, 3, 7))
    protocol = DeltaTable(path).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (3, 7)
    assert set(protocol.writer_features) >= {"appendOnly", "invariants"}
    write_deltalake(path, pa.table({"id": [4], "name": ["d"], "day": [dt.date(2024, 1, 3)]}), mode="append")
    assert sorted(deltatx.Table(path).to_arrow().column("id").to_pylist()) == [1, 2, 3, 4]
    assert read_deltalake(path).num_rows == 4
