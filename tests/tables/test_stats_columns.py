"""``delta.dataSkippingStatsColumns``: when set, only the named columns get statistics (it
replaces ``delta.dataSkippingNumIndexedCols``, as in Spark and delta-rs), on every path that
writes data files, column-mapped tables included; reads still prune on what is there."""

from __future__ import annotations

import glob

import orjson
import pyarrow as pa
import pytest
from deltalake import write_deltalake

import deltatx
from deltatx.errors import InvalidPropertyError

DATA = pa.table({"id": pa.array([1, 2], pa.int64()), "a": ["x", "y"], "c": pa.array([10, 20], pa.int64()),
                 "s": pa.array([{"x": 1, "y": "p"}, {"x": 2, "y": "q"}])})


def _stats_keys(uri: str, version: int) -> list[list[str]]:
    out = []
    with open(f"{uri}/_delta_log/{version:020d}.json", "rb") as fh:
        for line in fh:
            action = orjson.loads(line)
            if "add" in action and action["add"].get("stats"):
                out.append(sorted(orjson.loads(action["add"]["stats"]).get("minValues", {})))
    return out


def test_only_the_named_columns_get_statistics(tmp_path):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, DATA.schema, properties={"delta.dataSkippingStatsColumns": "c, s.y"})
    t.append(DATA)
    [keys] = _stats_keys(uri, 1)
    assert keys == ["c", "s"]
    t.update(where="id = 1", set={"c": "c + 1"})  # a rewrite follows the property too
    assert all(k == ["c", "s"] for k in _stats_keys(uri, 2))
    assert t.to_arrow(where="c > 15")["id"].to_pylist() == [2]
    assert t.to_arrow(where="a = 'x'")["id"].to_pylist() == [1]  # no stats for a: read, not pruned


def test_a_table_deltalake_created_with_the_property(tmp_path):
    uri = str(tmp_path / "t")
    write_deltalake(uri, DATA.drop_columns(["s"]), configuration={"delta.dataSkippingStatsColumns": "c"})
    deltatx.Table(uri).append(DATA.drop_columns(["s"]))
    assert _stats_keys(uri, 0) == _stats_keys(uri, 1) == [["c"]]


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapped_tables_name_logical_columns(tmp_path, mode):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, DATA.schema, properties={"delta.columnMapping.mode": mode,
                                                           "delta.dataSkippingStatsColumns": "c"})
    t.append(DATA)
    physical = t.metadata.schema_string  # the physical name of c is in the schema's metadata
    [keys] = _stats_keys(uri, 1)
    assert len(keys) == 1 and keys[0].startswith("col-") and keys[0] in physical
    assert t.to_arrow(where="c < 15")["id"].to_pylist() == [1]


def test_set_later_applies_to_new_files_and_bad_values_are_refused(tmp_path):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, DATA.schema)
    t.set_properties({"delta.dataSkippingStatsColumns": "id"})
    t.append(DATA)
    assert _stats_keys(uri, 2) == [["id"]]
    with pytest.raises(InvalidPropertyError, match="backtick"):
        t.set_properties({"delta.dataSkippingStatsColumns": "`a"})
    assert len(glob.glob(f"{uri}/_delta_log/*.json")) == 3
