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


@pytest.mark.parametrize("value,message", [
    ("nope", "not in the table's schema"),
    ("p", "partition column"),
    ("flag", "no statistics to skip"),
    ("s.nope", "not in the table's schema"),
    ("c, C", "listed twice"),
    ("s, s.x", "listed twice"),
])
def test_a_list_delta_refuses_is_refused_at_create_and_set(tmp_path, value, message):
    """Delta's validateDeltaStatsColumns: columns of the schema, not partition columns, of types
    statistics order (numbers, dates, timestamps, strings; a struct's leaves), each once."""
    schema = pa.schema([("id", pa.int64()), ("c", pa.int64()), ("flag", pa.bool_()), ("p", pa.string()),
                        ("s", pa.struct([("x", pa.int64())]))])
    with pytest.raises(InvalidPropertyError, match=message):
        deltatx.create_table(str(tmp_path / "new"), schema, partition_by=["p"],
                             properties={"delta.dataSkippingStatsColumns": value})
    assert not (tmp_path / "new" / "_delta_log").exists()
    t = deltatx.create_table(str(tmp_path / "t"), schema, partition_by=["p"])
    with pytest.raises(InvalidPropertyError, match=message):
        t.set_properties({"delta.dataSkippingStatsColumns": value})
    assert deltatx.Table(str(tmp_path / "t")).version == 0


def test_the_list_follows_renames_and_drops(tmp_path):
    """Delta's RENAME/DROP COLUMN rewrite the list: new files keep statistics for the renamed
    column, and a later column that takes the old name gets none."""
    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("x", pa.int64()), ("s", pa.struct([("a", pa.int64()), ("b", pa.int64())]))])
    t = deltatx.create_table(uri, schema, properties={"delta.columnMapping.mode": "name",
                                                      "delta.dataSkippingStatsColumns": "x,s.a"})
    t.rename_column("x", "y")
    t.rename_column("s", "t")
    assert t.properties["delta.dataSkippingStatsColumns"] == "y,t.a"
    t.add_columns(pa.field("x", pa.int64()))
    t.append(pa.table({"id": [1], "y": [5], "t": [{"a": 1, "b": 2}], "x": [7]},
                      schema=t.schema))
    [keys] = _stats_keys(uri, t.version)
    physical = orjson.loads(t.metadata.schema_string)["fields"]
    name_of = {f["metadata"]["delta.columnMapping.physicalName"]: f["name"] for f in physical}
    assert sorted(name_of[k] for k in keys) == ["t", "y"]
    assert t.to_arrow(where="y = 5")["id"].to_pylist() == [1]
    t.drop_column("y")
    assert t.properties["delta.dataSkippingStatsColumns"] == "t.a"
    t.drop_column("t")
    assert t.properties["delta.dataSkippingStatsColumns"] == ""


def test_an_empty_list_means_no_column_statistics(tmp_path):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, DATA.schema, properties={"delta.dataSkippingStatsColumns": ""})
    t.append(DATA)
    assert _stats_keys(uri, 1) == [[]]
    assert t.to_arrow(where="c > 15")["id"].to_pylist() == [2]


def test_clustering_on_a_column_the_list_leaves_out_names_the_list(tmp_path):
    from deltatx.errors import ClusteringError

    with pytest.raises(ClusteringError, match="dataSkippingStatsColumns lists only c"):
        deltatx.create_table(str(tmp_path / "t"), DATA.schema, cluster_by=["id"],
                             properties={"delta.dataSkippingStatsColumns": "c"})
