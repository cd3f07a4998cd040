"""Column names as Delta has them: case-preserving but case-insensitive, unique up to case, and
(without column mapping) free of Parquet's special characters; a table is never created over
someone's files.

Every refusal is typed and leaves nothing behind: no ``_delta_log`` at create, no new version
and no data file for a write or ALTER.
"""

from __future__ import annotations

import os

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltatx
from deltatx.errors import LocationNotEmptyError, SchemaMismatchError
from deltatx.tables.convert import convert_to_delta

MAPPED = {"delta.columnMapping.mode": "name"}


def _data_files(uri: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), uri) for d, _, fs in os.walk(uri) for f in fs
                  if "_delta_log" not in d)


def _unchanged(uri: str, version: int, files: list[str]) -> None:
    """A refused write or ALTER committed nothing and wrote no data file."""
    assert deltatx.Table(uri).version == version
    assert _data_files(uri) == files


# --------------------------------------------------------------------------------------------
# Writes match the table's columns case-insensitively and store the table's spelling
# --------------------------------------------------------------------------------------------


def test_schema_merge_matches_columns_case_insensitively(table_uri):
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("v", pa.int64())]))
    table.append(pa.table({"id": [1], "v": [1]}))
    table.append(pa.table({"ID": [2], "V": [2], "New": [3]}), schema_mode="merge")
    assert table.schema.names == ["id", "v", "New"]  # matched: the table's case; new: its own
    assert sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": 1, "New": None}, {"id": 2, "v": 2, "New": 3}]
    assert table.to_arrow(where="id = 2").num_rows == 1
    assert deltalake.DeltaTable(table_uri).to_pyarrow_table().num_rows == 2  # other readers too


def test_schema_merge_matches_nested_fields_case_insensitively(table_uri):
    struct = pa.struct([("a", pa.int64())])
    table = deltatx.create_table(table_uri, pa.schema([("st", struct), ("l", pa.list_(struct))]))
    data_struct = pa.struct([("A", pa.int64()), ("B", pa.int64())])
    table.append(pa.table({"ST": pa.array([{"A": 7, "B": 8}], data_struct),
                           "l": pa.array([[{"A": 1, "B": 2}]], pa.list_(data_struct))}), schema_mode="merge")
    assert table.schema.field("st").type == pa.struct([("a", pa.int64()), ("B", pa.int64())])
    assert table.schema.field("l").type.value_type == pa.struct([("a", pa.int64()), ("B", pa.int64())])
    assert table.to_arrow().to_pylist() == [{"st": {"a": 7, "B": 8}, "l": [{"a": 1, "B": 2}]}]


def test_plain_writes_match_columns_case_insensitively(table_uri):
    schema = pa.schema([("id", pa.int64()), ("st", pa.struct([("a", pa.int64())]))])
    table = deltatx.create_table(table_uri, schema)
    table.append(pa.table({"ID": [1], "St": pa.array([{"A": 10}])}))  # no schema_mode: nothing to add
    assert table.schema == deltatx.Table(table_uri).schema and table.version == 1
    assert table.to_arrow().to_pylist() == [{"id": 1, "st": {"a": 10}}]  # the nested value kept, not null
    table.overwrite(pa.table({"Id": [2]}))
    table.overwrite(pa.table({"iD": [2], "ST": pa.array([{"A": 5}])}), where="id = 2")
    assert table.to_arrow().to_pylist() == [{"id": 2, "st": {"a": 5}}]
    assert table.schema.names == ["id", "st"]


def test_two_data_columns_naming_one_table_column_are_refused(table_uri):
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("st", pa.struct([("a", pa.int64())]))]))
    table.append(pa.table({"id": [1]}))
    files = _data_files(table_uri)
    for schema_mode in (None, "merge"):
        with pytest.raises(SchemaMismatchError, match="'id' and 'ID', which both name the table's column 'id'"):
            table.append(pa.table({"id": [2], "ID": [3]}), schema_mode=schema_mode)
        with pytest.raises(SchemaMismatchError, match="'st.a' and 'st.A'"):
            table.append(pa.table({"st": pa.array([{"a": 1, "A": 2}])}), schema_mode=schema_mode)
    with pytest.raises(SchemaMismatchError, match="both name"):
        table.overwrite(pa.table({"ID": [2], "Id": [3]}))
    _unchanged(table_uri, 1, files)


def test_merge_evolution_and_star_clauses_match_case_insensitively(table_uri):
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("st", pa.struct([("a", pa.int64())]))]))
    table.append(pa.table({"id": [1], "st": pa.array([{"a": 1}])}))
    source = pa.table({"ID": [1, 2], "ST": pa.array([{"A": 10, "b": 1}, {"A": 20, "b": 2}])})
    (table.merge(source, on="t.id = s.id").with_schema_evolution()
     .when_matched_update_all().when_not_matched_insert_all().execute())
    assert table.schema.names == ["id", "st"]
    assert table.schema.field("st").type == pa.struct([("a", pa.int64()), ("b", pa.int64())])
    assert sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "st": {"a": 10, "b": 1}}, {"id": 2, "st": {"a": 20, "b": 2}}]

    files = _data_files(table_uri)
    twice = pa.table({"id": [1], "ID": [5]})
    with pytest.raises(SchemaMismatchError, match="both name the table's column 'id'"):
        table.merge(twice, on="t.id = s.id").when_matched_update_all().execute()
    _unchanged(table_uri, 2, files)


# --------------------------------------------------------------------------------------------
# create_table refuses schemas Delta refuses, before writing anything
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("schema, partition_by, match", [
    (pa.schema([("id", pa.int64()), ("id", pa.int64())]), None, "duplicate column"),
    (pa.schema([("a", pa.int64()), ("A", pa.int64())]), None, "'a' and 'A'"),
    (pa.schema([("st", pa.struct([("x", pa.int64()), ("X", pa.int64())]))]), None, "'st.x' and 'st.X'"),
    (pa.schema([("l", pa.list_(pa.struct([("x", pa.int64()), ("X", pa.int64())])))]), None, "'l.element.x'"),
    (pa.schema([]), None, "at least one column"),
    (pa.schema([("id", pa.int64()), ("v", pa.int64()), ("p", pa.string())]), ["p", "p"], "more than once"),
    (pa.schema([("id", pa.int64()), ("", pa.int64())]), None, "empty column name"),
    (pa.schema([("st", pa.struct([("", pa.int64())]))]), None, "empty column name in 'st'"),
], ids=["duplicate", "case", "nested-case", "list-element-case", "empty-schema", "partition-twice",
        "empty-name", "nested-empty-name"])
def test_create_table_refuses_bad_schemas(table_uri, schema, partition_by, match):
    with pytest.raises(SchemaMismatchError, match=match):
        deltatx.create_table(table_uri, schema, partition_by=partition_by)
    assert not os.path.exists(table_uri)


@pytest.mark.parametrize("char", list(" ,;{}()\n\t="))
def test_parquet_special_characters_need_column_mapping(tmp_path, char):
    """delta-spark SchemaUtils.checkSchemaFieldNames: exactly ' ,;{}()\\n\\t=' (nested too)."""
    name = f"a{char}b"
    for schema in (pa.schema([("id", pa.int64()), (name, pa.int64())]),
                   pa.schema([("st", pa.struct([(name, pa.int64())]))])):
        uri = str(tmp_path / "plain")
        with pytest.raises(SchemaMismatchError, match="invalid character.*column mapping"):
            deltatx.create_table(uri, schema)
        assert not os.path.exists(uri)
    mapped = deltatx.create_table(str(tmp_path / "mapped"), pa.schema([("id", pa.int64()), (name, pa.int64())]),
                                  properties=MAPPED)
    mapped.append(pa.table({"id": [1], name: [2]}))
    assert mapped.to_arrow().to_pylist() == [{"id": 1, name: 2}]


@pytest.mark.parametrize("name", ["a.b", "a-b", "a/b", "é", "a`b", "a:b", "a'b"])
def test_other_characters_are_allowed_without_column_mapping(table_uri, name):
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), (name, pa.int64())]))
    table.append(pa.table({"id": [1], name: [2]}))
    assert table.to_arrow().to_pylist() == [{"id": 1, name: 2}]


def test_replace_table_checks_the_new_schema_too(table_uri):
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]))
    from deltatx.tables.ops.replace_table import stage_replace_table

    for bad in (pa.schema([("a", pa.int64()), ("A", pa.int64())]), pa.schema([("a b", pa.int64())])):
        tx = table.transaction()
        with pytest.raises(SchemaMismatchError):
            stage_replace_table(tx, bad)
        tx.abort()
    assert deltatx.Table(table_uri).version == 0


# --------------------------------------------------------------------------------------------
# Names added later (add_columns, schema merge, MERGE evolution, rename) follow the same rules
# --------------------------------------------------------------------------------------------


def test_added_columns_follow_the_same_rules(table_uri):
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("st", pa.struct([("a", pa.int64())]))]))
    table.append(pa.table({"id": [1]}))
    files = _data_files(table_uri)
    with pytest.raises(SchemaMismatchError, match="invalid character"):
        table.add_columns(pa.field("a b", pa.int64()))
    with pytest.raises(SchemaMismatchError, match="'n.x' and 'n.X'"):
        table.add_columns(pa.field("n", pa.struct([("x", pa.int64()), ("X", pa.int64())])))
    with pytest.raises(SchemaMismatchError, match="invalid character"):
        table.append(pa.table({"id": [2], "c;d": [5]}), schema_mode="merge")
    with pytest.raises(SchemaMismatchError, match="'x' and 'X'"):  # two new columns equal up to case
        table.append(pa.table({"id": [2], "x": [1], "X": [2]}), schema_mode="merge")
    with pytest.raises(SchemaMismatchError, match="invalid character.*'st.b c'"):
        table.append(pa.table({"st": pa.array([{"a": 1, "b c": 2}])}), schema_mode="merge")
    with pytest.raises(SchemaMismatchError, match="invalid character"):
        (table.merge(pa.table({"id": [1], "q=r": [1]}), on="t.id = s.id").with_schema_evolution()
         .when_matched_update_all().execute())
    _unchanged(table_uri, 1, files)


def test_column_mapping_allows_the_characters_in_added_and_renamed_columns(table_uri):
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("st", pa.struct([("a", pa.int64())]))]),
                                 properties=MAPPED)
    table.add_columns(pa.field("a b", pa.int64()))
    table.append(pa.table({"id": [1], "c;d": [5]}), schema_mode="merge")
    table.rename_column("id", "the id")
    assert table.schema.names == ["the id", "st", "a b", "c;d"]
    assert table.to_arrow().to_pylist() == [{"the id": 1, "st": None, "a b": None, "c;d": 5}]
    version = table.version
    with pytest.raises(SchemaMismatchError):  # not a name equal up to case to a sibling
        table.rename_column("c;d", "A B")
    with pytest.raises(SchemaMismatchError):
        table.rename_column("st.a", "")
    assert deltatx.Table(table_uri).version == version


def test_a_table_written_before_the_checks_can_still_be_altered(table_uri):
    """A change must not add a bad name; names an older writer left are kept (not repaired)."""
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64())]))
    log = os.path.join(table_uri, "_delta_log", f"{0:020d}.json")
    with open(log) as f:
        text = f.read()
    legacy = text.replace('{\\"name\\":\\"id\\",', '{\\"name\\":\\"a b\\",\\"type\\":\\"long\\",\\"nullable\\":true,'
                                                 '\\"metadata\\":{}},{\\"name\\":\\"id\\",')
    assert legacy != text
    with open(log, "w") as f:
        f.write(legacy)
    table = deltatx.Table(table_uri)
    assert table.schema.names == ["a b", "id"]
    table.add_columns(pa.field("v", pa.int64()))
    table.append(pa.table({"id": [1], "w": [2]}), schema_mode="merge")
    assert deltatx.Table(table_uri).schema.names == ["a b", "id", "v", "w"]
    with pytest.raises(SchemaMismatchError, match="'c d'"):
        table.add_columns(pa.field("c d", pa.int64()))


# --------------------------------------------------------------------------------------------
# No table over someone's files
# --------------------------------------------------------------------------------------------


def test_create_table_refuses_a_folder_of_files(tmp_path):
    uri = str(tmp_path / "data")
    os.makedirs(os.path.join(uri, "year=2023"))
    pq.write_table(pa.table({"id": [1, 2, 3]}), os.path.join(uri, "year=2023", "precious.parquet"))
    with pytest.raises(LocationNotEmptyError, match="not empty .*precious.parquet"):
        deltatx.create_table(uri, pa.schema([("id", pa.int64())]))
    assert not os.path.exists(os.path.join(uri, "_delta_log"))
    assert _data_files(uri) == ["year=2023/precious.parquet"]
    # adopting them on purpose still works
    convert_to_delta(uri, partition_schema=pa.schema([("year", pa.int32())]))
    assert deltatx.Table(uri).to_arrow().num_rows == 3


def test_create_table_accepts_an_empty_folder_or_empty_log(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert deltatx.create_table(str(empty), pa.schema([("id", pa.int64())])).version == 0
    with_log = tmp_path / "with_log"
    (with_log / "_delta_log").mkdir(parents=True)
    (with_log / "_SUCCESS").write_bytes(b"")  # hidden files are not table data: VACUUM keeps them
    assert deltatx.create_table(str(with_log), pa.schema([("id", pa.int64())])).version == 0
    # exist_ok over an existing table (whose folder holds data files) returns it
    table = deltatx.Table(str(empty))
    table.append(pa.table({"id": [1]}))
    assert deltatx.create_table(str(empty), pa.schema([("id", pa.int64())]), exist_ok=True).version == 1


def test_create_table_refuses_files_in_memory_stores_too(memory_uri):
    import fsspec

    fs = fsspec.filesystem("memory")
    path = memory_uri.split("://", 1)[1]
    fs.pipe(f"{path}/part-0.parquet", b"not a table")
    with pytest.raises(LocationNotEmptyError):
        deltatx.create_table(memory_uri, pa.schema([("id", pa.int64())]))
    assert not fs.exists(f"{path}/_delta_log")
