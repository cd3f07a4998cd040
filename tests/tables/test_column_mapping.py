"""Column mapping (``delta.columnMapping.mode`` = name | id): physical names in files, stats and
partition values; rename/drop/add columns as metadata-only commits; every write path; refusals."""

from __future__ import annotations

import glob
import os

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tablefiles import data_files

import deltatx
from deltatx.errors import (
    ColumnMappingError,
    ConcurrentAppendException,
    InvalidPropertyError,
    MetadataChangedException,
    PredicateError,
    SchemaMismatchError,
)
from deltatx.txnlog import column_mapping as cm

SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("part", pa.string()),
    ("s", pa.struct([("x", pa.int64()), ("y", pa.string())])),
    ("l", pa.list_(pa.field("element", pa.struct([("a", pa.int32())])))),
])
MODES = ["name", "id"]


def rows(start: int, n: int, part: str | None = None) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({
        "id": ids,
        "part": [part or f"p{i % 2}" for i in ids],
        "s": [None if i % 5 == 4 else {"x": i * 10, "y": f"y{i}"} for i in ids],
        "l": [[{"a": i}] for i in ids],
    }, schema=SCHEMA)


def make(uri: str, mode: str, partitioned: bool = True, **props: str) -> deltatx.Table:
    table = deltatx.create_table(uri, SCHEMA, partition_by=["part"] if partitioned else None,
                                 properties={"delta.columnMapping.mode": mode, **props})
    table.append(rows(0, 10))
    table.append(rows(10, 10))
    return table


def by_id(table: pa.Table) -> dict[int, dict]:
    return {r["id"]: r for r in table.to_pylist()}


def log_lines(uri: str, version: int) -> list[dict]:
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        return [orjson.loads(line) for line in fh.read().splitlines() if line.strip()]


def schema_doc(table: deltatx.Table) -> dict:
    return orjson.loads(table.metadata.schema_string)


def all_fields(fields: list[dict]):
    """Every struct field of a Delta schema doc, nested (also inside arrays and maps) included."""
    for f in fields:
        yield f
        t = f["type"]
        while isinstance(t, dict) and t.get("type") in ("array", "map"):
            t = t.get("elementType") or t.get("valueType")
        if isinstance(t, dict) and t.get("type") == "struct":
            yield from all_fields(t["fields"])


def parquet_files(uri: str) -> list[str]:
    return sorted(glob.glob(os.path.join(uri, "**", "*.parquet"), recursive=True))


# --------------------------------------------------------------------------------------------
# Create, write, read
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_create_gives_every_field_an_id_and_physical_name(table_uri, mode):
    table = deltatx.create_table(table_uri, SCHEMA, properties={"delta.columnMapping.mode": mode})
    fields = list(all_fields(schema_doc(table)["fields"]))
    assert [f["name"] for f in fields] == ["id", "part", "s", "x", "y", "l", "a"]
    ids = [f["metadata"][cm.COLUMN_ID] for f in fields]
    assert ids == list(range(1, 8))  # schema order, nested fields (in arrays too) included
    names = [f["metadata"][cm.PHYSICAL_NAME] for f in fields]
    assert all(n.startswith("col-") for n in names) and len(set(names)) == 7
    assert table.properties[cm.MAX_COLUMN_ID] == "7"
    assert table.protocol.min_reader_version == 3 and table.protocol.min_writer_version == 7
    assert "columnMapping" in table.protocol.reader_features
    assert "columnMapping" in table.protocol.writer_features


@pytest.mark.parametrize("mode", MODES)
def test_files_stats_and_partition_values_use_physical_names(table_uri, mode):
    table = make(table_uri, mode)
    doc = schema_doc(table)
    physical = {f["name"]: f["metadata"][cm.PHYSICAL_NAME] for f in all_fields(doc["fields"])}
    ids = {f["name"]: f["metadata"][cm.COLUMN_ID] for f in all_fields(doc["fields"])}
    add = next(line["add"] for line in log_lines(table_uri, 1) if "add" in line)
    assert set(add["partitionValues"]) == {physical["part"]}
    stats = orjson.loads(add["stats"])
    assert set(stats["minValues"]) == {physical["id"], physical["s"]}
    assert set(stats["minValues"][physical["s"]]) == {physical["x"], physical["y"]}
    assert set(stats["nullCount"]) == {physical["id"], physical["s"], physical["l"]}
    file_schema = pq.read_schema(parquet_files(table_uri)[0])
    assert file_schema.names == [physical["id"], physical["s"], physical["l"]]
    assert [int(f.metadata[b"PARQUET:field_id"]) for f in file_schema] == [ids["id"], ids["s"], ids["l"]]
    struct = file_schema.field(physical["s"]).type
    assert [f.name for f in struct] == [physical["x"], physical["y"]]
    assert [int(f.metadata[b"PARQUET:field_id"]) for f in struct] == [ids["x"], ids["y"]]
    # rows come back under their logical names, without the column-mapping bookkeeping
    out = table.to_arrow()
    assert out.schema.names == SCHEMA.names
    assert all(not f.metadata for f in out.schema)
    assert by_id(out) == by_id(pa.concat_tables([rows(0, 10), rows(10, 10)]))


@pytest.mark.parametrize("mode", MODES)
def test_predicates_prune_by_physical_stats_and_partitions(table_uri, mode):
    table = make(table_uri, mode)
    with table.transaction() as tx:
        _, files = tx.scan("id >= 10")
        assert files.num_rows == 2  # the second append's two partition files only
        _, files = tx.scan("part = 'p0' AND s.x < 50")
        assert files.num_rows == 1
    assert sorted(table.to_arrow("s.x >= 150 AND part = 'p1'")["id"].to_pylist()) == [15, 17]  # 19: s is null
    assert table.to_arrow("id = 3", columns=["s"]).to_pylist() == [{"s": {"x": 30, "y": "y3"}}]


def test_id_mode_resolves_columns_by_field_id(table_uri):
    table = make(table_uri, "id", partitioned=False)
    path = parquet_files(table_uri)[0]
    stored = pq.read_table(path)
    # the same columns under other names (nested too): only the field ids still say what they are
    struct = stored.schema.field(2).type
    renamed_struct = pa.struct([struct.field(i).with_name(f"other_{i}") for i in range(struct.num_fields)])
    fields = [stored.schema.field(3).with_name("ww"), stored.schema.field(0).with_name("zz"),
              stored.schema.field(2).with_type(renamed_struct).with_name("yy"), stored.schema.field(1).with_name("xx")]
    columns = [stored.column(3), stored.column(0),
               pa.chunked_array([c.view(renamed_struct) for c in stored.column(2).chunks]), stored.column(1)]
    pq.write_table(pa.Table.from_arrays(columns, schema=pa.schema(fields)), path)
    assert by_id(table.to_arrow()) == by_id(pa.concat_tables([rows(0, 10), rows(10, 10)]))
    assert table.to_arrow("s.x = 30")["id"].to_pylist() == [3]
    # a file without field ids: its columns are unknown in id mode (PROTOCOL.md: nulls)
    pq.write_table(pa.Table.from_arrays(columns, schema=pa.schema([f.remove_metadata() for f in fields])), path)
    out = table.to_arrow()
    assert out.num_rows == 20 and out["id"].null_count == 10


def test_name_mode_ignores_field_ids(table_uri):
    table = make(table_uri, "name", partitioned=False)
    path = parquet_files(table_uri)[0]
    stored = pq.read_table(path)
    pq.write_table(stored.rename_columns(["zz", "yy", "xx", "ww"]), path)  # same field ids, other names
    out = table.to_arrow()
    assert out.num_rows == 20 and out["id"].null_count == 10  # names decide, so that file reads null


# --------------------------------------------------------------------------------------------
# Schema changes
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_rename_then_old_files_read_under_the_new_name(table_uri, mode):
    table = make(table_uri, mode)
    before = data_files(table_uri)
    result = table.rename_column("id", "ident")
    assert data_files(table_uri) == before  # metadata only
    assert result.operation == "RENAME COLUMN"
    commit = log_lines(table_uri, result.version)
    assert [k for line in commit for k in line] == ["commitInfo", "metaData"]
    assert commit[0]["commitInfo"]["operationParameters"] == {"oldColumnPath": "id", "newColumnPath": "ident"}
    out = table.to_arrow()
    assert out.schema.names == ["ident", "part", "s", "l"]
    assert sorted(out["ident"].to_pylist()) == list(range(20))
    with table.transaction() as tx:
        assert tx.scan("ident >= 10")[1].num_rows == 2  # stats still prune under the new name
    assert table.to_arrow("ident = 7")["s"].to_pylist() == [{"x": 70, "y": "y7"}]
    with pytest.raises(PredicateError):
        table.to_arrow("id = 7")
    table.append(rows(20, 2).rename_columns(["ident", "part", "s", "l"]))
    assert sorted(table.to_arrow()["ident"].to_pylist()) == list(range(22))


@pytest.mark.parametrize("mode", MODES)
def test_rename_nested_field_and_partition_column(table_uri, mode):
    table = make(table_uri, mode)
    table.rename_column("s.x", "xx")
    table.rename_column("part", "bucket")
    assert table.partition_columns == ["bucket"]
    out = table.to_arrow("bucket = 'p1' AND s.xx > 100")
    assert sorted(out["id"].to_pylist()) == [11, 13, 15, 17]  # 19: s is null
    assert out.schema.field("s").type == pa.struct([("xx", pa.int64()), ("y", pa.string())])
    table.append(pa.table({"id": [50], "bucket": ["p9"], "s": [{"xx": 1, "y": "n"}]}))
    assert table.to_arrow("bucket = 'p9'").to_pylist() == [{"id": 50, "bucket": "p9", "s": {"xx": 1, "y": "n"},
                                                             "l": None}]
    with table.transaction() as tx:
        assert tx.scan("bucket = 'p0'")[1].num_rows == 2  # partition values found by physical name


@pytest.mark.parametrize("mode", MODES)
def test_drop_then_add_same_name_does_not_resurrect(table_uri, mode):
    table = make(table_uri, mode)
    old = {f["name"]: f["metadata"] for f in schema_doc(table)["fields"]}
    before = data_files(table_uri)
    table.drop_column("id")
    assert data_files(table_uri) == before
    assert table.schema.names == ["part", "s", "l"]
    assert table.to_arrow().num_rows == 20
    table.add_columns(pa.field("id", pa.int64()))
    new = {f["name"]: f["metadata"] for f in schema_doc(table)["fields"]}
    assert new["id"][cm.PHYSICAL_NAME] != old["id"][cm.PHYSICAL_NAME]
    assert new["id"][cm.COLUMN_ID] == 8 and table.properties[cm.MAX_COLUMN_ID] == "8"
    out = table.to_arrow()
    assert out["id"].null_count == 20  # the old values stay in old files, unread
    assert table.to_arrow("id IS NOT NULL").num_rows == 0
    table.append(pa.table({"part": ["p0"], "id": [99]}))
    assert table.to_arrow("id IS NOT NULL")["id"].to_pylist() == [99]


@pytest.mark.parametrize("mode", MODES)
def test_drop_nested_field_and_several_columns(table_uri, mode):
    table = make(table_uri, mode)
    table.drop_column("s.y")
    assert table.to_arrow("id = 2")["s"].to_pylist() == [{"x": 20}]
    table.drop_column(["l", "s"])
    assert table.schema.names == ["id", "part"]
    assert sorted(table.to_arrow()["id"].to_pylist()) == list(range(20))
    assert table.properties[cm.MAX_COLUMN_ID] == "7"  # dropping never lowers it


def test_add_columns_works_without_column_mapping(table_uri):
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1, 2]}))
    result = table.add_columns([pa.field("name", pa.string()), pa.field("at", pa.timestamp("us"))])
    assert result.operation == "ADD COLUMNS"
    assert table.schema.names == ["id", "name", "at"]
    assert "timestampNtz" in table.protocol.writer_features  # the new column's type needs it
    assert cm.MODE not in table.properties and cm.PHYSICAL_NAME not in table.metadata.schema_string
    table.append(pa.table({"id": [3], "name": ["c"]}))
    assert sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "name": None, "at": None}, {"id": 2, "name": None, "at": None}, {"id": 3, "name": "c", "at": None}]


def test_add_columns_in_a_transaction_with_a_write(table_uri):
    table = make(table_uri, "name")
    with table.transaction() as tx:
        tx.add_columns(pa.field("extra", pa.string()))
        tx.append(pa.table({"id": [100], "part": ["p0"], "extra": ["e"]}))
    assert table.to_arrow("extra IS NOT NULL").to_pylist() == [
        {"id": 100, "part": "p0", "s": None, "l": None, "extra": "e"}]
    physical = {f["name"]: f["metadata"][cm.PHYSICAL_NAME] for f in schema_doc(table)["fields"]}
    newest = [line["add"] for line in log_lines(table_uri, table.version) if "add" in line]
    assert physical["extra"] in orjson.loads(newest[0]["stats"])["minValues"]


def test_enable_name_mode_on_existing_table_rewrites_nothing(table_uri):
    table = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    table.append(rows(0, 10))
    before = data_files(table_uri)
    table.set_properties({"delta.columnMapping.mode": "name"})
    assert data_files(table_uri) == before
    fields = list(all_fields(schema_doc(table)["fields"]))
    assert all(f["metadata"][cm.PHYSICAL_NAME] == f["name"] for f in fields)  # the current names
    assert [f["metadata"][cm.COLUMN_ID] for f in fields] == list(range(1, 8))
    assert table.properties[cm.MAX_COLUMN_ID] == "7"
    assert "columnMapping" in table.protocol.reader_features
    table.rename_column("id", "ident")
    table.add_columns(pa.field("id", pa.int64()))  # a new column: not the old file column "id"
    out = table.to_arrow()
    assert sorted(out["ident"].to_pylist()) == list(range(10)) and out["id"].null_count == 10
    table.append(pa.table({"ident": [10], "part": ["p0"], "id": [1]}))
    assert table.to_arrow("ident = 10")["id"].to_pylist() == [1]


# --------------------------------------------------------------------------------------------
# Every write path
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_overwrite_and_replace_where(table_uri, mode):
    table = make(table_uri, mode)
    table.rename_column("part", "bucket")
    new = rows(100, 4, part="p0").rename_columns(["id", "bucket", "s", "l"])
    table.overwrite(new, where="bucket = 'p0'")
    assert sorted(table.to_arrow("bucket = 'p0'")["id"].to_pylist()) == [100, 101, 102, 103]
    assert sorted(table.to_arrow("bucket = 'p1'")["id"].to_pylist()) == list(range(1, 20, 2))
    table.overwrite(new)
    assert sorted(table.to_arrow()["id"].to_pylist()) == [100, 101, 102, 103]


@pytest.mark.parametrize("mode", MODES)
def test_delete_update_merge_copy_on_write(table_uri, mode):
    table = make(table_uri, mode)
    table.rename_column("s", "st")
    table.delete("id < 5 OR st.x = 150")
    table.update("id = 6", {"part": "'p9'", "id": "60"})
    source = pa.table({"id": [7, 200], "p": ["pm", "pn"]})
    (table.merge(source, on="t.id = s.id")
     .when_matched_update({"part": "s.p"})
     .when_not_matched_insert({"id": "s.id", "part": "s.p"})
     .execute())
    got = by_id(table.to_arrow())
    assert sorted(got) == [i for i in range(5, 20) if i not in (6, 15)] + [60, 200]
    assert got[60] == {"id": 60, "part": "p9", "st": {"x": 60, "y": "y6"}, "l": [{"a": 6}]}
    assert got[7] == {"id": 7, "part": "pm", "st": {"x": 70, "y": "y7"}, "l": [{"a": 7}]}
    assert got[200] == {"id": 200, "part": "pn", "st": None, "l": None}
    assert got[8] == {"id": 8, "part": "p0", "st": {"x": 80, "y": "y8"}, "l": [{"a": 8}]}


@pytest.mark.parametrize("mode", MODES)
def test_deletion_vector_delete_and_update(table_uri, mode):
    table = make(table_uri, mode, **{"delta.enableDeletionVectors": "true"})
    table.rename_column("id", "ident")
    before = data_files(table_uri)
    result = table.delete("ident IN (3, 12)")
    assert result.metrics["numDeletionVectorsAdded"] == 2
    assert {f for f in data_files(table_uri) if f.endswith(".parquet")} == before  # rows marked, not rewritten
    table.update("ident = 4", {"ident": "40"})
    out = by_id(table.to_arrow().rename_columns(["id", "part", "s", "l"]))
    assert sorted(out) == [i for i in range(20) if i not in (3, 4, 12)] + [40]
    assert out[40] == {"id": 40, "part": "p0", "s": None, "l": [{"a": 4}]}
    with table.transaction() as tx:
        assert sorted(tx.read("ident >= 10 AND part = 'p0'", columns=["ident"])["ident"].to_pylist()) == [
            10, 14, 16, 18, 40]


@pytest.mark.parametrize("mode", MODES)
def test_clustering_and_zorder_on_a_mapped_table(tmp_path, mode):
    clustered = make(str(tmp_path / "c"), mode, partitioned=False)
    clustered.cluster_by(["s.x"])
    physical = {f["name"]: f["metadata"][cm.PHYSICAL_NAME] for f in all_fields(schema_doc(clustered)["fields"])}
    domain = orjson.loads(clustered.snapshot.domains["delta.clustering"].configuration)
    assert domain == {"clusteringColumns": [[physical["s"], physical["x"]]]}  # physical names, as PROTOCOL.md says
    clustered.rename_column("s.x", "sx")
    assert clustered.clustering_columns == ["s.sx"]
    clustered.optimize()
    assert sorted(clustered.to_arrow()["id"].to_pylist()) == list(range(20))
    zordered = make(str(tmp_path / "z"), mode)
    result = zordered.optimize(zorder_by=["id"])
    assert result.metrics["numRemovedFiles"] == 4 and result.metrics["numAddedFiles"] == 2  # one run per partition
    assert sorted(zordered.to_arrow("part = 'p1'")["id"].to_pylist()) == list(range(1, 20, 2))


def test_row_ids_survive_rewrites_of_a_mapped_table(table_uri):
    table = make(table_uri, "name", **{"delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true"})
    ids_before = {r["id"]: r["_metadata.row_id"] for r in table.to_arrow(columns=["id", "_metadata.row_id"]).to_pylist()}
    table.rename_column("id", "ident")
    table.update("ident = 4", {"ident": "40"})
    table.optimize()
    after = table.to_arrow(columns=["ident", "_metadata.row_id"]).to_pylist()
    assert {r["ident"]: r["_metadata.row_id"] for r in after} == {
        (40 if i == 4 else i): row_id for i, row_id in ids_before.items()}


@pytest.mark.parametrize("mode", MODES)
def test_optimize_keeps_partitions_apart(table_uri, mode):
    table = make(table_uri, mode)
    table.append(rows(20, 10))
    result = table.optimize()
    assert result.metrics["numRemovedFiles"] == 6 and result.metrics["numAddedFiles"] == 2
    physical = {f["name"]: f["metadata"][cm.PHYSICAL_NAME] for f in schema_doc(table)["fields"]}
    values = sorted(dict(pv)[physical["part"]] for pv in table.files()["partitionValues"].to_pylist())
    assert values == ["p0", "p1"]
    assert by_id(table.to_arrow()) == by_id(pa.concat_tables([rows(0, 10), rows(10, 10), rows(20, 10)]))


@pytest.mark.parametrize("mode", MODES)
def test_schema_merge_assigns_ids_to_new_columns(table_uri, mode):
    table = make(table_uri, mode)
    table.append(pa.table({"id": [50], "part": ["p0"], "extra": [1.5]}), schema_mode="merge")
    field = next(f for f in schema_doc(table)["fields"] if f["name"] == "extra")
    assert field["metadata"][cm.COLUMN_ID] == 8 and field["metadata"][cm.PHYSICAL_NAME].startswith("col-")
    assert table.to_arrow("extra > 1")["id"].to_pylist() == [50]
    source = pa.table({"id": [60], "part": ["p1"], "more": ["m"]})
    (table.merge(source, on="t.id = s.id").with_schema_evolution().when_not_matched_insert_all().execute())
    more = next(f for f in schema_doc(table)["fields"] if f["name"] == "more")
    assert more["metadata"][cm.COLUMN_ID] == 9 and table.properties[cm.MAX_COLUMN_ID] == "9"
    assert table.to_arrow("more = 'm'")["id"].to_pylist() == [60]


@pytest.mark.parametrize("mode", MODES)
def test_restore_before_a_drop_brings_the_column_back(table_uri, mode):
    table = make(table_uri, mode)
    version = table.version
    table.drop_column("s")
    table.add_columns(pa.field("z", pa.int32()))
    table.restore(version)
    assert table.schema.names == SCHEMA.names
    assert by_id(table.to_arrow())[3]["s"] == {"x": 30, "y": "y3"}  # its own physical name again
    assert table.properties[cm.MAX_COLUMN_ID] == "8"  # never lowered: id 8 stays used
    table.add_columns(pa.field("w", pa.int32()))
    assert next(f for f in schema_doc(table)["fields"] if f["name"] == "w")["metadata"][cm.COLUMN_ID] == 9


def test_restore_across_enabling_keeps_each_versions_names(table_uri):
    table = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    table.append(rows(0, 4))
    plain = table.version
    table.set_properties({"delta.columnMapping.mode": "name"})
    table.rename_column("id", "ident")
    table.append(rows(4, 2).rename_columns(["ident", "part", "s", "l"]))
    table.restore(plain)  # RESTORE brings back that version's definition, unmapped names and all
    assert cm.MODE not in table.properties and table.schema.names == SCHEMA.names
    assert sorted(table.to_arrow()["id"].to_pylist()) == [0, 1, 2, 3]


@pytest.mark.parametrize("mode", MODES)
def test_replace_table_starts_a_new_definition(table_uri, mode):
    from deltatx.tables.ops.replace_table import stage_replace_table

    table = make(table_uri, mode)
    with table.transaction() as tx:  # the table, emptied, without column mapping
        stage_replace_table(tx, pa.schema([("k", pa.int64())]))
    table = deltatx.Table(table_uri)
    assert cm.MODE not in table.properties and cm.PHYSICAL_NAME not in table.metadata.schema_string
    table.append(pa.table({"k": [1]}))
    assert table.to_arrow()["k"].to_pylist() == [1]
    assert pq.read_schema(os.path.join(table_uri, table.files()["path"][0].as_py())).names == ["k"]
    with table.transaction() as tx:  # and mapped again: fresh ids and names
        stage_replace_table(tx, SCHEMA, properties={"delta.columnMapping.mode": mode})
    table = deltatx.Table(table_uri)
    assert table.properties[cm.MAX_COLUMN_ID] == "7"
    table.append(rows(0, 3))
    assert sorted(table.to_arrow()["id"].to_pylist()) == [0, 1, 2]


def test_checkpoint_and_reload(table_uri):
    table = make(table_uri, "name")
    table.rename_column("id", "ident")
    table.checkpoint()
    fresh = deltatx.Table(table_uri)
    assert sorted(fresh.to_arrow()["ident"].to_pylist()) == list(range(20))


# --------------------------------------------------------------------------------------------
# Refusals: typed, and nothing written
# --------------------------------------------------------------------------------------------


def assert_unchanged(table_uri: str, version: int, files: set[str]) -> None:
    assert deltatx.Table(table_uri).version == version
    assert data_files(table_uri) == files


def test_rename_and_drop_need_column_mapping(table_uri):
    table = deltatx.create_table(table_uri, SCHEMA)
    table.append(rows(0, 4))
    version, files = table.version, data_files(table_uri)
    with pytest.raises(ColumnMappingError, match="delta.columnMapping.mode"):
        table.rename_column("id", "ident")
    with pytest.raises(ColumnMappingError, match="delta.columnMapping.mode"):
        table.drop_column("s")
    assert_unchanged(table_uri, version, files)


@pytest.mark.parametrize("start, change", [
    ("id", "name"), ("name", "none"), ("id", "none"), ("name", "id"), ("none", "id"),
])
def test_refused_mode_changes(table_uri, start, change):
    table = deltatx.create_table(table_uri, SCHEMA, properties={"delta.columnMapping.mode": start})
    table.append(rows(0, 4))
    version, files = table.version, data_files(table_uri)
    with pytest.raises(ColumnMappingError, match=f"from '{start}' to '{change}'"):
        table.set_properties({"delta.columnMapping.mode": change})
    assert_unchanged(table_uri, version, files)


def test_bad_mode_and_internal_max_id_are_refused(table_uri):
    with pytest.raises(InvalidPropertyError, match="must be one of"):
        deltatx.create_table(table_uri, SCHEMA, properties={"delta.columnMapping.mode": "position"})
    assert not os.path.exists(table_uri)
    table = make(table_uri, "name")
    version, files = table.version, data_files(table_uri)
    with pytest.raises(InvalidPropertyError, match="maxColumnId"):
        table.set_properties({"delta.columnMapping.maxColumnId": "1"})
    with pytest.raises(InvalidPropertyError, match="must be one of"):
        table.set_properties({"delta.columnMapping.mode": "names"})
    assert_unchanged(table_uri, version, files)


@pytest.mark.parametrize("call, error, message", [
    (lambda t: t.drop_column("part"), SchemaMismatchError, "partition column"),
    (lambda t: t.drop_column("nope"), SchemaMismatchError, "does not exist"),
    (lambda t: t.drop_column(["id", "s", "l"]), SchemaMismatchError, "every data column"),
    (lambda t: t.drop_column(["s.x", "s.y"]), SchemaMismatchError, "only field"),
    (lambda t: t.rename_column("id", "PART"), SchemaMismatchError, "exists"),
    (lambda t: t.rename_column("s.q", "r"), SchemaMismatchError, "does not exist"),
    (lambda t: t.rename_column("id.q", "r"), SchemaMismatchError, "not a struct"),
    (lambda t: t.rename_column("id", ""), SchemaMismatchError, "non-empty"),
    (lambda t: t.add_columns(pa.field("n", pa.int64(), nullable=False)), SchemaMismatchError, "NOT NULL"),
    (lambda t: t.add_columns(pa.field("ID", pa.int64())), SchemaMismatchError, "already exists"),
    (lambda t: t.add_columns([]), SchemaMismatchError, "non-empty list"),
    (lambda t: t.add_columns("x"), SchemaMismatchError, "pyarrow.Field"),
    (lambda t: t.add_columns(pa.field("u", pa.uint64())), SchemaMismatchError, "no Delta equivalent"),
])
def test_bad_column_operations_are_refused(table_uri, call, error, message):
    table = make(table_uri, "name")
    version, files = table.version, data_files(table_uri)
    with pytest.raises(error, match=message):
        call(table)
    assert_unchanged(table_uri, version, files)


def test_column_copied_from_another_mapped_table_gets_fresh_ids(tmp_path):
    first = make(str(tmp_path / "a"), "id")
    second = deltatx.create_table(str(tmp_path / "b"), pa.schema([("k", pa.int64())]),
                                  properties={"delta.columnMapping.mode": "id"})
    second.add_columns(first.schema.field("s"))  # carries first's ids and physical names
    s = next(f for f in schema_doc(second)["fields"] if f["name"] == "s")
    assert s["metadata"][cm.COLUMN_ID] == 2
    assert [f["metadata"][cm.COLUMN_ID] for f in s["type"]["fields"]] == [3, 4]


# --------------------------------------------------------------------------------------------
# Conflicts
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("change", [
    lambda t: t.rename_column("id", "ident"),
    lambda t: t.drop_column("s"),
    lambda t: t.add_columns(pa.field("n", pa.int64())),
])
def test_column_change_fails_concurrent_writers(table_uri, change):
    table = make(table_uri, "name")
    writer = deltatx.Table(table_uri).transaction()
    writer.append(rows(100, 2))
    reader = deltatx.Table(table_uri).transaction()
    reader.read("id = 1")
    reader.delete("id = 1")
    change(table)
    for tx in (writer, reader):
        with pytest.raises(MetadataChangedException):
            tx.commit()
    assert sorted(deltatx.Table(table_uri).to_arrow().column(0).to_pylist()) == list(range(20))


def test_conflict_checks_read_partition_values_by_physical_name(table_uri):
    table = make(table_uri, "name", **{"delta.isolationLevel": "Serializable"})
    table.rename_column("part", "bucket")
    deleting = deltatx.Table(table_uri).transaction()
    deleting.delete("bucket = 'p0'")
    other = rows(100, 2, part="p1").rename_columns(["id", "bucket", "s", "l"])
    deltatx.Table(table_uri).append(other)  # another partition: no conflict
    deleting.commit()
    deleting = deltatx.Table(table_uri).transaction()
    deleting.delete("bucket = 'p1' AND id > 100")
    deltatx.Table(table_uri).append(rows(200, 1, part="p1").rename_columns(["id", "bucket", "s", "l"]))
    with pytest.raises(ConcurrentAppendException):  # the appended file may hold rows it deletes
        deleting.commit()
    assert sorted(deltatx.Table(table_uri).to_arrow()["id"].to_pylist()) == list(range(1, 20, 2)) + [100, 101, 200]


def test_off_tables_pay_one_lookup():
    md = deltatx.txnlog.actions.Metadata(id="x", schema_string="not json", configuration={})
    assert cm.of(md) is None  # the schema is not even parsed
    assert cm.prepare_metadata(md, md) is md


def test_a_conflict_on_a_column_mapped_partition_names_its_value(table_uri):
    """partitionValues are keyed by physical names there: the hint looks the value up by them."""
    schema = pa.schema([("id", pa.int64()), ("part", pa.string())])
    t = deltatx.create_table(table_uri, schema, partition_by=["part"], properties={
        "delta.columnMapping.mode": "name", "delta.isolationLevel": "Serializable"})
    t.append(pa.table({"id": [1], "part": ["a"]}, schema=schema))
    tx = deltatx.Table(table_uri).transaction()
    tx.read(where="part = 'a'")
    tx.append(pa.table({"id": [9], "part": ["a"]}, schema=schema))
    deltatx.Table(table_uri).append(pa.table({"id": [2], "part": ["a"]}, schema=schema))
    with pytest.raises(deltatx.errors.ConcurrentAppendException, match="partition part=a") as info:
        tx.commit()
    assert info.value.conflict == "part=a"


@pytest.mark.parametrize("action", ["rename", "drop"])
@pytest.mark.parametrize("dependent", ["constraint", "generated", "nested generated"])
def test_a_column_an_expression_reads_cannot_be_renamed_or_dropped(tmp_path, action, dependent):
    """Delta's checkDependentExpressions: the CHECK constraint or generation expression names the
    column, so every later write would fail (in deltalake too). Refused, nothing committed."""
    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("v", pa.int64()), ("st", pa.struct([("a", pa.int64()), ("b", pa.int64())]))])
    generated = {"g": "v * 2"} if dependent == "generated" else {"g": "st.a * 10"} if dependent == "nested generated" else None
    if generated:
        schema = schema.append(pa.field("g", pa.int64()))
    t = deltatx.create_table(uri, schema, properties={"delta.columnMapping.mode": "name"}, generated_columns=generated)
    if dependent == "constraint":
        t.add_constraint("vpos", "v >= 0")
    column = "st" if dependent == "nested generated" else "v"
    before = t.version
    with pytest.raises(SchemaMismatchError, match=f"cannot {action} column"):
        t.rename_column(column, "w") if action == "rename" else t.drop_column(column)
    assert deltatx.Table(uri).version == before
    if dependent == "nested generated":
        t.drop_column("st.b")  # a field the expression does not read
        with pytest.raises(SchemaMismatchError, match=f"cannot {action} column 'st.a'"):
            t.rename_column("st.a", "z") if action == "rename" else t.drop_column("st.a")
    t.drop_column("id")  # unrelated columns still go
    rows = {"v": [1], "st": [{"a": 1}] if dependent == "nested generated" else [{"a": 1, "b": 2}]}
    t.append(pa.table(rows))


@pytest.mark.parametrize("mode", MODES)
def test_rename_and_drop_fields_inside_arrays_and_maps(table_uri, mode):
    """``arr.element.x`` names field ``x`` of the structs in array ``arr``, ``m.value.q`` field ``q``
    of map ``m``'s values (Spark's ALTER TABLE names). Renamed fields keep their values in old
    files, dropped ones are gone, and DuckDB reads the result alike."""
    from duckdb_delta import read_duckdb

    schema = pa.schema([("id", pa.int32()), ("arr", pa.list_(pa.struct([("x", pa.int32()), ("y", pa.int32())]))),
                        ("m", pa.map_(pa.string(), pa.struct([("p", pa.int32()), ("q", pa.int32())])))])
    t = deltatx.create_table(table_uri, schema, properties={cm.MODE: mode})
    t.append(pa.table({"id": [1], "arr": [[{"x": 1, "y": 2}]], "m": [[("k", {"p": 3, "q": 4})]]}, schema=schema))
    t.rename_column("arr.element.x", "xx")
    t.drop_column("m.value.q")
    t.rename_column("M.Value.p", "pp")  # names match case-insensitively, steps too
    after = deltatx.Table(table_uri)
    assert after.schema.field("arr").type.value_type.names == ["xx", "y"]
    expected = [{"id": 1, "arr": [{"xx": 1, "y": 2}], "m": [("k", {"pp": 3})]}]
    assert after.to_arrow().to_pylist() == expected
    after.append(pa.table({"id": [2], "arr": [[{"xx": 5, "y": 6}]], "m": [[("j", {"pp": 7})]]}, schema=after.schema))
    rows = sorted(deltatx.Table(table_uri).to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows == expected + [{"id": 2, "arr": [{"xx": 5, "y": 6}], "m": [("j", {"pp": 7})]}]
    duck = sorted(read_duckdb(table_uri).to_pylist(), key=lambda r: r["id"])
    assert [r["arr"] for r in duck] == [r["arr"] for r in rows]
    for bad, match in [("arr.element", "not a field"), ("arr.x", "name its element"), ("m.key.q", "not a struct"),
                       ("arr.element.nope", "does not exist")]:
        with pytest.raises(SchemaMismatchError, match=match):
            t.rename_column(bad, "z")
    with pytest.raises(SchemaMismatchError, match="only field"):
        t.drop_column("m.value.pp")
