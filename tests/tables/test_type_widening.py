"""Type widening: alter_column_type takes exactly the protocol's widenings, records them in
``delta.typeChanges``, and old data files read (and prune) as the wider type."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

import orjson
import pyarrow as pa
import pytest
from tablefiles import data_files

import deltatx
from deltatx.errors import MetadataChangedException, TypeChangeError, UnsupportedFeatureError
from deltatx.txnlog.actions import Protocol
from deltatx.txnlog.schema import schema_to_json

WIDEN = {"delta.enableTypeWidening": "true"}


def log_schema(uri: str, version: int) -> dict:
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        for line in fh.read().splitlines():
            action = orjson.loads(line)
            if "metaData" in action:
                return orjson.loads(action["metaData"]["schemaString"])
    raise AssertionError(f"commit {version} has no metaData")


def field_json(uri: str, version: int, name: str) -> dict:
    return next(f for f in log_schema(uri, version)["fields"] if f["name"] == name)


def make(uri: str, column_type: pa.DataType, old_values: list, **kwargs) -> deltatx.Table:
    schema = pa.schema([("id", pa.int64()), ("c", column_type)])
    table = deltatx.create_table(uri, schema, properties=WIDEN, **kwargs)
    table.append(pa.table({"id": list(range(len(old_values))), "c": old_values}, schema=schema))
    return table


# (old type, old values, new type, values the new type can take that the old could not)
WIDENINGS = [
    (pa.int8(), [-128, 127, None], pa.int16(), [32767]),
    (pa.int8(), [-128, 127], pa.int32(), [2**31 - 1]),
    (pa.int8(), [5], pa.int64(), [2**62]),
    (pa.int16(), [-32768, 32767], pa.int32(), [2**31 - 1]),
    (pa.int16(), [7], pa.int64(), [2**40]),
    (pa.int32(), [-(2**31), 2**31 - 1, None], pa.int64(), [2**62]),
    (pa.float32(), [1.5, -2.25, None], pa.float64(), [1e300]),
    (pa.int8(), [-3], pa.float64(), [0.5]),
    (pa.int16(), [300], pa.float64(), [0.25]),
    (pa.int32(), [2**31 - 1], pa.float64(), [1e300]),
    (pa.date32(), [dt.date(2024, 1, 31), None], pa.timestamp("us"), [dt.datetime(2024, 2, 1, 12, 30)]),
    (pa.decimal128(5, 2), [Decimal("123.45"), None], pa.decimal128(7, 2), [Decimal("12345.67")]),
    (pa.decimal128(5, 2), [Decimal("-123.45")], pa.decimal128(10, 4), [Decimal("123456.7891")]),
    (pa.int32(), [2**31 - 1, -5], pa.decimal128(10, 0), [Decimal("9999999999")]),
    (pa.int8(), [-128], pa.decimal128(12, 2), [Decimal("1.25")]),
    (pa.int16(), [-32768], pa.decimal128(11, 1), [Decimal("0.5")]),
    (pa.int64(), [2**63 - 1, -(2**63)], pa.decimal128(20, 0), [Decimal("99999999999999999999")]),
    (pa.int64(), [42], pa.decimal128(25, 3), [Decimal("0.125")]),
]


@pytest.mark.parametrize(("old", "values", "new", "wider"), WIDENINGS,
                         ids=[f"{o}->{n}" for o, _, n, _ in WIDENINGS])
def test_allowed_widening_reads_old_files_as_the_new_type(table_uri, old, values, new, wider):
    table = make(table_uri, old, values)
    result = table.alter_column_type("c", new)
    assert result.operation == "CHANGE COLUMN" and result.version == 2
    assert table.schema.field("c").type == new
    recorded = field_json(table_uri, 2, "c")["metadata"]["delta.typeChanges"]
    assert recorded == [{"fromType": _delta(old), "toType": _delta(new)}]
    table.append(pa.table({"id": [100], "c": pa.array(wider, new)}))
    got = deltatx.Table(table_uri).to_arrow().sort_by("id")
    assert got.schema.field("c").type == new
    assert got.column("c").to_pylist() == pa.array(values, old).cast(new).to_pylist() + wider
    # the old values are exact in the new type (the point of a widening)
    assert [v for v in got.column("c").to_pylist()[: len(values)]] == [
        None if v is None else _as_new(v, new) for v in values
    ]


def _delta(t: pa.DataType) -> str:
    from deltatx.txnlog.schema import type_to_delta

    return type_to_delta(t)


def _as_new(v, new: pa.DataType):
    if pa.types.is_timestamp(new):
        return dt.datetime(v.year, v.month, v.day)
    if pa.types.is_floating(new):
        return float(v)
    if pa.types.is_decimal(new):
        return Decimal(v).quantize(Decimal(1).scaleb(-new.scale))
    return v


def test_a_chain_of_widenings_is_recorded_in_order(table_uri):
    table = make(table_uri, pa.int8(), [1, -1])
    table.alter_column_type("c", "short")
    table.alter_column_type("c", pa.int32())
    table.alter_column_type("c", "LONG")
    assert field_json(table_uri, 4, "c")["metadata"]["delta.typeChanges"] == [
        {"fromType": "byte", "toType": "short"}, {"fromType": "short", "toType": "integer"},
        {"fromType": "integer", "toType": "long"},
    ]
    assert deltatx.Table(table_uri).to_arrow().sort_by("id").column("c").to_pylist() == [1, -1]
    assert table.alter_column_type("c", pa.int64()).version == 4  # already long: nothing committed


REFUSED = [
    (pa.int64(), pa.int32()),  # narrowing
    (pa.int64(), pa.float64()),  # long -> double loses precision
    (pa.int32(), pa.float32()),
    (pa.float64(), pa.float32()),
    (pa.string(), pa.int64()),
    (pa.int32(), pa.string()),
    (pa.timestamp("us"), pa.date32()),
    (pa.date32(), pa.timestamp("us", tz="UTC")),  # only to timestamp without zone
    (pa.decimal128(5, 2), pa.decimal128(6, 4)),  # scale up more than precision
    (pa.decimal128(5, 2), pa.decimal128(5, 1)),  # scale down
    (pa.decimal128(30, 2), pa.decimal128(38, 11)),  # scale up by 9, precision by 8
    (pa.int32(), pa.decimal128(9, 0)),  # too few digits for every int
    (pa.int64(), pa.decimal128(19, 0)),
    (pa.int32(), pa.decimal128(11, 2)),  # k2 > k1
    (pa.bool_(), pa.int32()),
]


@pytest.mark.parametrize(("old", "new"), REFUSED, ids=[f"{o}->{n}" for o, n in REFUSED])
def test_other_changes_are_refused_and_nothing_is_written(table_uri, old, new):
    schema = pa.schema([("id", pa.int64()), ("c", old)])
    table = deltatx.create_table(table_uri, schema, properties=WIDEN)
    before = data_files(table_uri)
    with pytest.raises(TypeChangeError, match="cannot change column 'c'"):
        table.alter_column_type("c", new)
    assert deltatx.Table(table_uri).version == 0 and data_files(table_uri) == before
    assert deltatx.Table(table_uri).schema.field("c").type == old


def test_a_table_without_the_property_refuses_and_writes_nothing(table_uri):
    table = deltatx.create_table(table_uri, pa.schema([("c", pa.int32())]))
    table.append(pa.table({"c": pa.array([1], pa.int32())}))
    before = data_files(table_uri)
    with pytest.raises(TypeChangeError, match="delta.enableTypeWidening=true"):
        table.alter_column_type("c", pa.int64())
    assert deltatx.Table(table_uri).version == 1 and data_files(table_uri) == before
    assert "typeWidening" not in (deltatx.Table(table_uri).protocol.writer_features or ())


@pytest.mark.parametrize(("column", "new", "match"), [
    ("missing", pa.int64(), "does not exist"),
    ("s.missing", pa.int64(), "does not exist"),
    ("s", pa.int64(), "primitive types only"),
    ("c", pa.list_(pa.int64()), "primitive types only"),
    ("c", "not a type", "not a Delta type name"),
    ("c", "decimal(39,0)", "not a Delta type name"),  # above the maximum precision
    ("", pa.int64(), "non-empty"),
])
def test_bad_arguments_are_typed_errors(table_uri, column, new, match):
    schema = pa.schema([("c", pa.int32()), ("s", pa.struct([("a", pa.int32())]))])
    table = deltatx.create_table(table_uri, schema, properties=WIDEN)
    with pytest.raises(TypeChangeError, match=match):
        table.alter_column_type(column, new)
    assert deltatx.Table(table_uri).version == 0


def test_nested_fields_array_elements_and_map_values(table_uri):
    schema = pa.schema([
        ("s", pa.struct([("a", pa.int32()), ("b", pa.string())])),
        ("arr", pa.list_(pa.int16())),
        ("m", pa.map_(pa.string(), pa.float32())),
    ])
    table = deltatx.create_table(table_uri, schema, properties=WIDEN)
    table.append(pa.table({"s": [{"a": 1, "b": "x"}], "arr": [[1, 2]], "m": [[("k", 1.5)]]}, schema=schema))
    table.alter_column_type("s.a", pa.int64())
    table.alter_column_type("arr.element", pa.int32())
    table.alter_column_type("m.value", pa.float64())
    fields = {f["name"]: f for f in log_schema(table_uri, 4)["fields"]}
    nested_a = fields["s"]["type"]["fields"][0]
    assert nested_a["metadata"]["delta.typeChanges"] == [{"fromType": "integer", "toType": "long"}]
    assert "delta.typeChanges" not in fields["s"]["metadata"]  # the nearest struct field holds it
    assert fields["arr"]["metadata"]["delta.typeChanges"] == [
        {"fromType": "short", "toType": "integer", "fieldPath": "element"}]
    assert fields["m"]["metadata"]["delta.typeChanges"] == [
        {"fromType": "float", "toType": "double", "fieldPath": "value"}]
    got = deltatx.Table(table_uri).to_arrow()
    assert got.schema.field("s").type.field("a").type == pa.int64()
    assert got.to_pylist() == [{"s": {"a": 1, "b": "x"}, "arr": [1, 2], "m": [("k", 1.5)]}]


def test_partition_columns_widen_and_still_prune(table_uri):
    schema = pa.schema([("id", pa.int64()), ("p", pa.int32()), ("day", pa.date32())])
    table = deltatx.create_table(table_uri, schema, partition_by=["p", "day"], properties=WIDEN)
    table.append(pa.table({"id": [1, 2], "p": [1, 2], "day": [dt.date(2024, 1, 1), dt.date(2024, 1, 2)]}, schema=schema))
    table.alter_column_type("p", pa.int64())
    table.alter_column_type("day", pa.timestamp("us"))
    table.append(pa.table({"id": [3], "p": [2**40], "day": [dt.datetime(2024, 1, 2, 6)]}))
    table = deltatx.Table(table_uri)
    got = table.to_arrow().sort_by("id").to_pylist()
    assert got == [
        {"id": 1, "p": 1, "day": dt.datetime(2024, 1, 1)},
        {"id": 2, "p": 2, "day": dt.datetime(2024, 1, 2)},
        {"id": 3, "p": 2**40, "day": dt.datetime(2024, 1, 2, 6)},
    ]
    _, files = table.transaction().scan("p = 2")
    assert files.num_rows == 1
    _, files = table.transaction().scan("day >= TIMESTAMP_NTZ '2024-01-02 00:00:00'")
    assert files.num_rows == 2
    assert [r["id"] for r in table.to_arrow(where="day < TIMESTAMP_NTZ '2024-01-02 00:00:00'").to_pylist()] == [1]


@pytest.mark.parametrize(("old", "old_values", "new", "predicate", "new_value"), [
    (pa.int32(), [1, 5], pa.int64(), "c > 100", 2**40),
    (pa.float32(), [1.5, 2.5], pa.float64(), "c > 100", 1e100),
    (pa.int32(), [1, 5], pa.decimal128(12, 2), "c > 100", Decimal("1000.50")),
    (pa.date32(), [dt.date(2024, 1, 1), dt.date(2024, 1, 5)], pa.timestamp("us"),
     "c > TIMESTAMP_NTZ '2024-06-01 00:00:00'", dt.datetime(2025, 1, 1)),
])
def test_stats_of_old_files_still_prune(table_uri, old, old_values, new, predicate, new_value):
    table = make(table_uri, old, old_values)
    table.alter_column_type("c", new)
    table.append(pa.table({"id": [9], "c": pa.array([new_value], new)}))
    table = deltatx.Table(table_uri)
    assert table.files().num_rows == 2
    _, files = table.transaction().scan(predicate)
    assert files.num_rows == 1, "the old file's statistics must exclude it"
    assert table.to_arrow(where=predicate).column("id").to_pylist() == [9]
    table.checkpoint()  # and the same after a checkpoint (stats re-read from Parquet)
    _, files = deltatx.Table(table_uri).transaction().scan(predicate)
    assert files.num_rows == 1


def test_a_concurrent_writer_with_the_old_schema_fails_and_leaves_nothing(table_uri):
    table = make(table_uri, pa.int32(), [1])
    writer = deltatx.Table(table_uri).transaction()
    writer.append(pa.table({"id": [2], "c": pa.array([2], pa.int32())}))
    table.alter_column_type("c", pa.int64())
    before_commit = data_files(table_uri)
    with pytest.raises(MetadataChangedException):
        writer.commit()
    assert deltatx.Table(table_uri).version == 2
    assert len(data_files(table_uri)) == len(before_commit) - 1  # its file was deleted


def _hand_built(uri: str, feature: str, changes: list[dict]) -> None:
    """A table as another engine leaves it: column c is long now, its first file an int file."""
    import pyarrow.parquet as pq

    from deltatx.txnlog.actions import Metadata, encode_commit, file_actions_table, FILE_SCHEMA
    from deltatx.txnlog.store import open_store

    os.makedirs(uri)
    pq.write_table(pa.table({"c": pa.array([1, 2], pa.int32())}), os.path.join(uri, "old.parquet"))
    schema = pa.schema([pa.field("c", pa.int64(), metadata={"delta.typeChanges": orjson.dumps(changes)})])
    store = open_store(uri)
    add = {"path": "old.parquet", "partitionValues": {}, "size": os.path.getsize(os.path.join(uri, "old.parquet")),
           "modificationTime": 1, "dataChange": True, "stats": '{"numRecords":2,"minValues":{"c":1},"maxValues":{"c":2}}'}
    store.put_commit(0, encode_commit(
        {"timestamp": 1, "operation": "CREATE TABLE"},
        protocol=Protocol(3, 7, (feature,), (feature,)),
        metadata=Metadata(id="t", schema_string=schema_to_json(schema), configuration=dict(WIDEN)),
        adds=file_actions_table([add], FILE_SCHEMA)))


@pytest.mark.parametrize("feature", ["typeWidening", "typeWidening-preview"])
def test_tables_of_other_writers_are_read_and_written(table_uri, feature):
    # older Delta previews also wrote a tableVersion into each change: ignored, as unknown fields are
    _hand_built(table_uri, feature, [{"fromType": "integer", "toType": "long", "tableVersion": 1}])
    table = deltatx.Table(table_uri)
    assert table.to_arrow().column("c").to_pylist() == [1, 2]
    table.append(pa.table({"c": [2**40]}))
    table.alter_column_type("c", pa.decimal128(25, 0))
    assert (deltatx.Table(table_uri).protocol.writer_features or ()) == (feature,)  # no second name added
    assert sorted(deltatx.Table(table_uri).to_arrow().column("c").to_pylist()) == [1, 2, 2**40]


def test_an_unsupported_recorded_change_is_refused_on_read(table_uri):
    _hand_built(table_uri, "typeWidening", [{"fromType": "string", "toType": "long"}])
    with pytest.raises(UnsupportedFeatureError, match="'string' -> 'long'") as info:
        deltatx.Table(table_uri)
    assert info.value.kind == "reader" and info.value.feature == "typeWidening"


def test_enabled_later_and_used_inside_one_transaction(table_uri):
    table = deltatx.create_table(table_uri, pa.schema([("c", pa.int16())]))
    table.append(pa.table({"c": pa.array([7], pa.int16())}))
    assert table.protocol == Protocol(1, 2)
    table.set_properties(WIDEN)  # the protocol moves to table features with typeWidening
    assert table.protocol.reader_features == ("typeWidening",)
    with table.transaction() as tx:  # widen and write the wider values in one commit
        tx.alter_column_type("c", pa.int64())
        tx.append(pa.table({"c": [2**50]}))
    assert table.version == 3 and table.history(1)[0]["operation"] == "TRANSACTION"
    assert sorted(deltatx.Table(table_uri).to_arrow().column("c").to_pylist()) == [7, 2**50]


def test_a_column_mapped_table_widens_too(table_uri):
    """Physical names and field ids stay; the old file's column (by physical name) reads widened
    and its statistics (keyed by physical name) still prune."""
    schema = pa.schema([("id", pa.int64()), ("c", pa.int32())])
    table = deltatx.create_table(table_uri, schema, properties={**WIDEN, "delta.columnMapping.mode": "name"})
    table.append(pa.table({"id": [1], "c": pa.array([5], pa.int32())}))
    before = table.schema.field("c").metadata
    table.alter_column_type("c", pa.int64())
    table = deltatx.Table(table_uri)
    after = table.schema.field("c").metadata
    assert {k: v for k, v in after.items() if k != b"delta.typeChanges"} == dict(before)
    table.append(pa.table({"id": [2], "c": [2**40]}))
    assert deltatx.Table(table_uri).to_arrow().sort_by("id").column("c").to_pylist() == [5, 2**40]
    _, files = deltatx.Table(table_uri).transaction().scan("c > 100")
    assert files.num_rows == 1


def test_schema_evolution_widens_what_delta_widens_by_itself(table_uri):
    """With type widening on, an append with ``schema_mode="merge"`` and a MERGE with schema
    evolution widen a column (or nested field, array element, map value) the data holds in a
    wider type, recording ``delta.typeChanges``, as Delta's INSERT/MERGE schema evolution does.
    Integer → decimal/double is not applied by itself (Delta makes it explicit): the cast decides."""
    schema = pa.schema([("id", pa.int32()), ("f", pa.float32()), ("s", pa.struct([("d", pa.date32())])),
                        ("l", pa.list_(pa.int16())), ("n", pa.int32())])
    t = deltatx.create_table(table_uri, schema, properties=WIDEN)
    t.append(pa.table({"id": [1], "f": [1.5], "s": [{"d": dt.date(2024, 1, 1)}], "l": [[1]], "n": [1]}, schema=schema))
    t.append(pa.table({"id": pa.array([2**40], pa.int64()), "f": pa.array([0.1], pa.float64()),
                       "s": pa.array([{"d": dt.datetime(2024, 1, 2, 3)}], pa.struct([("d", pa.timestamp("us"))])),
                       "l": pa.array([[70000]], pa.list_(pa.int32())), "n": pa.array([2], pa.int32())}),
             schema_mode="merge")
    fields = {f["name"]: f for f in log_schema(table_uri, 2)["fields"]}
    assert fields["id"]["type"] == "long"
    assert fields["id"]["metadata"]["delta.typeChanges"] == [{"fromType": "integer", "toType": "long"}]
    assert fields["f"]["metadata"]["delta.typeChanges"] == [{"fromType": "float", "toType": "double"}]
    assert fields["s"]["type"]["fields"][0]["metadata"]["delta.typeChanges"] == [
        {"fromType": "date", "toType": "timestamp_ntz"}]
    assert fields["l"]["metadata"]["delta.typeChanges"] == [
        {"fromType": "short", "toType": "integer", "fieldPath": "element"}]
    assert "timestampNtz" in deltatx.Table(table_uri).protocol.writer_features
    rows = sorted(deltatx.Table(table_uri).to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == [1, 2**40] and rows[1]["f"] == 0.1 and rows[1]["l"] == [70000]
    assert rows[0]["s"] == {"d": dt.datetime(2024, 1, 1)}
    version = t.version
    with pytest.raises(deltatx.errors.SchemaMismatchError, match="truncated"):
        t.append(pa.table({"id": pa.array([3], pa.int64()), "n": pa.array([2.5])}), schema_mode="merge")
    assert deltatx.Table(table_uri).version == version
    with pytest.raises(deltatx.errors.SchemaMismatchError):  # no schema evolution: no widening
        t.append(pa.table({"id": pa.array([3], pa.int64()), "n": pa.array([2**40], pa.int64())}))
    t.merge(pa.table({"id": pa.array([1], pa.int64()), "n": pa.array([2**40], pa.int64())}),
            on="t.id = s.id").with_schema_evolution().when_matched_update_all().execute()
    table = deltatx.Table(table_uri)
    assert table.schema.field("n").type == pa.int64()
    assert table.to_arrow(where="id = 1")["n"].to_pylist() == [2**40]


# ---- columns that CHECK constraints and generated columns read keep their type (as in Delta)
DEPENDENT_SCHEMA = pa.schema([("a", pa.int32()), ("c", pa.int32()), ("g", pa.int32())])


def _dependent_table(uri: str) -> deltatx.Table:
    t = deltatx.create_table(uri, DEPENDENT_SCHEMA, properties=WIDEN, generated_columns={"g": "a + 1"})
    t.add_constraint("c_positive", "c > 0")
    t.append(pa.table({"a": pa.array([1], pa.int32()), "c": pa.array([1], pa.int32())}))
    return t


@pytest.mark.parametrize("column, error_class", [("a", "DELTA_GENERATED_COLUMNS_DEPENDENT_COLUMN_CHANGE"),
                                                 ("c", "DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE")])
def test_a_column_an_expression_reads_cannot_be_widened(table_uri, column, error_class):
    t = _dependent_table(table_uri)
    before = t.version
    with pytest.raises(TypeChangeError, match=error_class):
        t.alter_column_type(column, pa.int64())
    assert deltatx.Table(table_uri).version == before
    assert deltatx.Table(table_uri).schema.field(column).type == pa.int32()


@pytest.mark.parametrize("how", ["append", "merge"])
@pytest.mark.parametrize("column, error_class", [("a", "DELTA_GENERATED_COLUMNS_DATA_TYPE_MISMATCH"),
                                                 ("c", "DELTA_CONSTRAINT_DATA_TYPE_MISMATCH"),
                                                 ("g", "DELTA_GENERATED_COLUMNS_DATA_TYPE_MISMATCH")])
def test_schema_evolution_does_not_widen_what_an_expression_reads(table_uri, how, column, error_class):
    t = _dependent_table(table_uri)
    before = t.version
    values = {"a": pa.array([2], pa.int32()), "c": pa.array([2], pa.int32()), "g": pa.array([3], pa.int32())}
    values[column] = pa.array([3 if column == "g" else 2], pa.int64())  # int -> bigint: widened elsewhere
    rows = pa.table(values)
    with pytest.raises(TypeChangeError, match=error_class):
        if how == "append":
            t.append(rows, schema_mode="merge")
        else:
            (t.merge(rows, on="t.a = s.a", source_alias="s", target_alias="t")
             .when_not_matched_insert_all().with_schema_evolution().execute())
    assert deltatx.Table(table_uri).version == before


def test_columns_no_expression_reads_still_widen(table_uri):
    t = deltatx.create_table(table_uri, pa.schema([("a", pa.int32()), ("free", pa.int32())]), properties=WIDEN)
    t.add_constraint("a_positive", "a > 0")
    t.alter_column_type("free", pa.int64())
    t.append(pa.table({"a": pa.array([1], pa.int32()), "free": pa.array([2**40], pa.int64())}))
    assert deltatx.Table(table_uri).to_arrow()["free"].to_pylist() == [2**40]
