"""The point reader (io/point_read.py) finds exactly the live rows the general reader finds, or
declines; DELETEs through it leave the same table a copy-on-write DELETE leaves."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from integer_predicates import integer_predicates

import deltatx
from deltatx.errors import CorruptDeletionVectorError, DataFileNotFoundError
from deltatx.expr import bind_predicate, parse_predicate, to_arrow
from deltatx.io.point_read import live_matching_positions
from deltatx.io.reader import read_files
from deltatx.io.row_metadata import ROW_INDEX

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int32()), ("s", pa.string())])


def general_positions(table: deltatx.Table, pred) -> list[list[int]]:
    """Per file of the table: the positions the general reader returns for ``pred``."""
    snap = table._snapshot
    files = snap.files
    return [read_files(table.store, files.slice(i, 1), snap.schema, snap.partition_columns, columns=[ROW_INDEX],
                       filter=to_arrow(pred, snap.schema), prune=pred).column(ROW_INDEX).to_pylist()
            for i in range(files.num_rows)]


def point_positions(table: deltatx.Table, pred) -> list[list[int] | None]:
    files = table._snapshot.files
    out = []
    for row in files.to_pylist():
        found = live_matching_positions(table.store, row["path"], row["size"], row["modificationTime"],
                                        row["deletionVector"], pred, table._snapshot.schema)
        out.append(None if found is None else found.tolist())
    return out


def build(uri: str, ids: list[int | None], ks: list[int | None], deletes: list[str]) -> deltatx.Table:
    """Two files (the rows' halves), then ``deletes`` marking rows in their DVs."""
    table = deltatx.create_table(uri, SCHEMA, properties={"delta.enableDeletionVectors": "true"})
    rows = pa.table({"id": pa.array(ids, pa.int64()), "k": pa.array(ks, pa.int32()),
                     "s": pa.array([f"v{i}" for i in range(len(ids))])}, schema=SCHEMA)
    table.append(rows[: len(ids) // 2])
    table.append(rows[len(ids) // 2:])
    for where in deletes:
        table.delete(where=where)
    return deltatx.Table(uri)


values = st.one_of(st.none(), st.integers(-20, 20))
small = st.integers(-25, 25)


def predicates():
    return integer_predicates(["id", "k"], small)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ids=st.lists(values, min_size=2, max_size=30), data=st.data())
def test_the_point_reader_finds_what_the_general_reader_finds(tmp_path_factory, ids, data):
    ks = data.draw(st.lists(values, min_size=len(ids), max_size=len(ids)))
    deletes = [f"id = {data.draw(small)}" for _ in range(data.draw(st.integers(0, 3)))]
    table = build(str(tmp_path_factory.mktemp("pr")), ids, ks, deletes)
    pred = bind_predicate(data.draw(predicates()), SCHEMA)
    expected = general_positions(table, pred)
    found = point_positions(table, pred)
    assert all(f is not None for f in found)  # integer columns of the table's own types: answered
    assert found == expected


def test_several_row_groups_and_a_dv_from_earlier_deletes(tmp_path):
    """Files of several row groups: the footer picks the groups, positions count the whole file,
    and rows an earlier DELETE marked are not found again."""
    uri = str(tmp_path / "t")
    table = deltatx.create_table(uri, SCHEMA, properties={"delta.enableDeletionVectors": "true"})
    n = 300_000  # the writer's row groups hold 128k rows: three groups
    ids = np.arange(n, dtype=np.int64)
    table.append(pa.table({"id": ids, "k": (ids % 7).astype(np.int32), "s": pa.array(["x"] * n)}, schema=SCHEMA))
    assert pq.ParquetFile(os.path.join(uri, table.files()["path"][0].as_py())).metadata.num_row_groups == 3
    table.delete(where="id = 200000 OR id = 5")
    table = deltatx.Table(uri)
    for where in ("id = 200000", "id = 200001", "id >= 131070 AND id < 131075", "id IN (5, 6, 299999)", "id > 10000000"):
        pred = bind_predicate(parse_predicate(where), SCHEMA)
        assert point_positions(table, pred) == general_positions(table, pred), where
    assert point_positions(table, bind_predicate(parse_predicate("id = 200001"), SCHEMA)) == [[200001]]


def test_it_declines_what_needs_the_general_reader(tmp_path):
    uri = str(tmp_path / "t")
    table = build(uri, [1, 2, 3, 4], [1, 2, 3, 4], [])
    for where in ("s = 'v1'", "id + 1 = 3", "id IS NULL"):
        assert point_positions(table, bind_predicate(parse_predicate(where), SCHEMA)) == [None, None], where
    # a file written with a narrower type than the table's now (type widening): the general path converts
    other = str(tmp_path / "w")
    wide = pa.schema([("id", pa.int64())])
    t2 = deltatx.create_table(other, wide, properties={"delta.enableDeletionVectors": "true"})
    t2.append(pa.table({"id": [1, 2, 3]}, schema=wide))
    path = os.path.join(other, t2.files()["path"][0].as_py())
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int32())}), path)
    row = t2.files().to_pylist()[0]
    assert live_matching_positions(t2.store, row["path"], None, None, None,
                                   bind_predicate(parse_predicate("id = 2"), wide), wide) is None


def test_a_missing_file_and_a_bad_dv_are_named(tmp_path):
    uri = str(tmp_path / "t")
    table = build(uri, [1, 2, 3, 4], [1, 2, 3, 4], ["id = 1"])
    pred = bind_predicate(parse_predicate("id = 2"), SCHEMA)
    rows = table.files().to_pylist()
    with_dv = next(r for r in rows if r["deletionVector"] is not None)
    bad = dict(with_dv["deletionVector"], cardinality=with_dv["deletionVector"]["cardinality"] + 1)
    with pytest.raises(CorruptDeletionVectorError, match="descriptor says"):
        live_matching_positions(table.store, with_dv["path"], with_dv["size"], with_dv["modificationTime"], bad,
                                pred, SCHEMA)
    os.remove(os.path.join(uri, with_dv["path"]))
    with pytest.raises(DataFileNotFoundError, match="missing"):
        live_matching_positions(table.store, with_dv["path"], with_dv["size"], with_dv["modificationTime"],
                                with_dv["deletionVector"], pred, SCHEMA)


@pytest.mark.parametrize("where", ["id = 3", "id = 3 OR id = 11", "id >= 2 AND id < 9", "k IN (1, 4)", "id = 99"])
def test_dv_deletes_leave_what_copy_on_write_deletes_leave(tmp_path, where):
    ids = list(range(12))
    ks = [i % 5 for i in ids]
    rows = pa.table({"id": pa.array(ids, pa.int64()), "k": pa.array(ks, pa.int32()),
                     "s": pa.array([f"v{i}" for i in ids])}, schema=SCHEMA)
    results = {}
    for dv in ("true", "false"):
        t = deltatx.create_table(str(tmp_path / dv), SCHEMA, properties={"delta.enableDeletionVectors": dv})
        t.append(rows.slice(0, 6))
        t.append(rows.slice(6))
        t.delete(where="id = 4")
        metrics = t.delete(where=where).metrics
        results[dv] = (sorted(deltatx.Table(str(tmp_path / dv)).to_arrow()["id"].to_pylist()), metrics["numDeletedRows"])
    assert results["true"] == results["false"]


def test_a_delete_whose_file_is_gone_fails_typed_and_commits_nothing(tmp_path):
    """Through the point reader, a DELETE of a row in a missing data file raises
    DataFileNotFoundError as the general reader does (a bad DV's refusal is tested above), and
    the table keeps its version with no commit file left behind."""
    uri = str(tmp_path / "t")
    table = build(uri, list(range(8)), list(range(8)), ["id = 1"])
    version = table.version
    with_dv = next(r for r in table.files().to_pylist() if r["deletionVector"] is not None)
    os.remove(os.path.join(uri, with_dv["path"]))
    with pytest.raises(DataFileNotFoundError, match="missing"):
        table.delete(where="id = 2")
    assert deltatx.Table(uri).version == version
    assert not any(n.startswith(".commit.") for n in os.listdir(os.path.join(uri, "_delta_log")))
