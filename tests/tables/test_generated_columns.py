"""Generated columns: computed when the data leaves them out, checked when it gives them
(``(value <=> expression) IS TRUE``), recomputed by UPDATE and MERGE when their inputs change."""

from __future__ import annotations

import datetime as dt

import orjson
import pyarrow as pa
import pytest
from tablefiles import data_files

import deltatx
from deltatx.errors import ConstraintViolationError, InvalidConstraintError, TableNotFoundError

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64()), ("twice", pa.int64()),
                    ("ts", pa.timestamp("us", tz="UTC")), ("day", pa.date32())])
GENERATED = {"twice": "v * 2", "day": "CAST(ts AS DATE)"}


def ts(day: int, hour: int = 12) -> dt.datetime:
    return dt.datetime(2024, 1, day, hour, tzinfo=dt.timezone.utc)


def data(ids: list[int], days: list[int] | None = None, **extra) -> pa.Table:
    cols = {"id": pa.array(ids, pa.int64()), "v": pa.array(ids, pa.int64()),
            "ts": pa.array([ts(d) for d in (days or [1] * len(ids))], pa.timestamp("us", tz="UTC"))}
    for name, values in extra.items():
        cols[name] = pa.array(values, SCHEMA.field(name).type)
    return pa.table(cols)


def make(uri: str, dv: bool = False, partitioned: bool = True) -> deltatx.Table:
    props = {"delta.enableDeletionVectors": "true"} if dv else {}
    t = deltatx.create_table(uri, SCHEMA, partition_by=["day"] if partitioned else None, properties=props,
                             generated_columns=GENERATED)
    t.append(data([1, 2, 3], [1, 1, 2]))
    return t


def table_rows(uri: str) -> dict[int, dict]:
    return {r["id"]: r for r in deltatx.Table(uri).to_arrow().to_pylist()}


def assert_consistent(uri: str) -> None:
    for r in table_rows(uri).values():
        assert r["twice"] == (None if r["v"] is None else r["v"] * 2)
        assert r["day"] == (None if r["ts"] is None else r["ts"].date())


def test_definition_is_stored_as_delta_field_metadata(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, generated_columns=GENERATED)
    assert "generatedColumns" in t.protocol.writer_features
    fields = {f["name"]: f for f in orjson.loads(t.metadata.schema_string)["fields"]}
    assert fields["twice"]["metadata"] == {"delta.generationExpression": "v * 2"}
    assert fields["day"]["metadata"] == {"delta.generationExpression": "CAST(ts AS DATE)"}
    assert fields["v"]["metadata"] == {}


def test_append_computes_missing_generated_columns(table_uri):
    t = make(table_uri)
    rows = table_rows(table_uri)
    assert rows[1]["twice"] == 2 and rows[3]["day"] == dt.date(2024, 1, 2)
    assert sorted(t.files()["partitionValues"].to_pylist(), key=str) == sorted(
        [[("day", "2024-01-01")], [("day", "2024-01-02")]], key=str)
    assert_consistent(table_uri)


def test_given_values_must_equal_the_expression(table_uri):
    t = make(table_uri)
    t.append(data([4], [3], twice=[8], day=[dt.date(2024, 1, 3)]))  # right values: accepted
    t.append(data([5], [3], twice=[10]))  # one given, one computed
    before_version, before_files = t.version, data_files(table_uri)
    with pytest.raises(ConstraintViolationError) as info:
        t.append(data([6, 7], [3, 3], twice=[12, 15]))
    err = info.value
    assert err.constraint == "twice" and err.num_violations == 1 and err.row["id"] == 7
    assert "generated column" in str(err) and "v * 2" in err.expression
    # the generation rule is <=>, never NULL: the message names a mismatch, not a false-or-null test
    assert "differs from what its expression computes" in str(err) and "false or null" not in str(err)
    with pytest.raises(ConstraintViolationError, match="generated column 'twice'"):
        t.append(data([8], [3], twice=[None]))  # NULL <=> 16 is false
    assert deltatx.Table(table_uri).version == before_version and data_files(table_uri) == before_files
    assert_consistent(table_uri)


def test_null_inputs_give_null_and_null_is_accepted_for_them(table_uri):
    t = make(table_uri)
    t.append(pa.table({"id": [9], "v": pa.array([None], pa.int64()), "twice": pa.array([None], pa.int64()),
                       "ts": pa.array([ts(4)], pa.timestamp("us", tz="UTC"))}))
    assert table_rows(table_uri)[9]["twice"] is None


def test_not_null_generated_column_may_be_left_out(table_uri):
    schema = pa.schema([pa.field("v", pa.int64()), pa.field("g", pa.int64(), nullable=False)])
    t = deltatx.create_table(table_uri, schema, generated_columns={"g": "coalesce(v, 0) + 1"})
    t.append(pa.table({"v": pa.array([1, None], pa.int64())}))
    assert sorted(t.to_arrow()["g"].to_pylist()) == [1, 2]


def test_overwrite_and_replace_where_on_a_generated_partition(table_uri):
    t = make(table_uri)
    t.overwrite(data([10, 11], [2, 2]), where="day = '2024-01-02'")  # the data has no day column
    assert sorted(table_rows(table_uri)) == [1, 2, 10, 11]
    t.overwrite(data([12], [5]))
    assert list(table_rows(table_uri)) == [12]
    assert_consistent(table_uri)
    version, files = t.version, data_files(table_uri)
    with pytest.raises(ConstraintViolationError):
        t.overwrite(data([13], [5], twice=[0]), where="day = '2024-01-05'")
    assert deltatx.Table(table_uri).version == version and data_files(table_uri) == files


@pytest.mark.parametrize("dv", [False, True], ids=["copy_on_write", "deletion_vectors"])
def test_update_recomputes_generated_columns(table_uri, dv):
    t = make(table_uri, dv=dv, partitioned=not dv)
    t.update("id = 1", set={"v": "v + 10"})
    t.update("id = 2", set={"ts": "CAST('2024-01-07 08:00:00' AS TIMESTAMP)"})  # moves partition
    rows = table_rows(table_uri)
    assert rows[1]["twice"] == 22 and rows[2]["day"] == dt.date(2024, 1, 7)
    assert_consistent(table_uri)
    t.update("id = 3", set={"v": "5", "twice": "10"})  # explicit and right: fine
    version, files = t.version, data_files(table_uri)
    with pytest.raises(ConstraintViolationError, match="twice"):
        t.update("id = 3", set={"twice": "7"})
    assert deltatx.Table(table_uri).version == version and data_files(table_uri) == files


@pytest.mark.parametrize("dv", [False, True], ids=["copy_on_write", "deletion_vectors"])
def test_merge_recomputes_updated_and_inserted_rows(table_uri, dv):
    t = make(table_uri, dv=dv, partitioned=not dv)
    source = pa.table({"id": pa.array([1, 20], pa.int64()), "v": pa.array([100, 200], pa.int64()),
                       "ts": pa.array([ts(9), ts(10)], pa.timestamp("us", tz="UTC"))})
    (t.merge(source, on="t.id = s.id").when_matched_update({"v": "s.v", "ts": "s.ts"})
     .when_not_matched_insert({"id": "s.id", "v": "s.v"}).execute())
    rows = table_rows(table_uri)
    assert rows[1]["twice"] == 200 and rows[1]["day"] == dt.date(2024, 1, 9)
    assert rows[20]["twice"] == 400 and rows[20]["ts"] is None and rows[20]["day"] is None
    assert_consistent(table_uri)
    (t.merge(source.set_column(1, "v", pa.array([7, 8], pa.int64())), on="t.id = s.id")
     .when_matched_update_all().when_not_matched_insert_all().execute())
    assert table_rows(table_uri)[20]["twice"] == 16
    assert_consistent(table_uri)


def test_merge_with_a_wrong_explicit_value_writes_nothing(table_uri):
    t = make(table_uri)
    version, files = t.version, data_files(table_uri)
    with pytest.raises(ConstraintViolationError, match="twice"):
        (t.merge(data([30]), on="t.id = s.id")
         .when_not_matched_insert({"id": "s.id", "v": "s.v", "ts": "s.ts", "twice": "s.v * 3"}).execute())
    assert deltatx.Table(table_uri).version == version and data_files(table_uri) == files


@pytest.mark.parametrize("generated, message", [
    ({"nope": "v * 2"}, "not in the schema"),
    ({"twice": "v *"}, "cannot parse"),
    ({"twice": "missing * 2"}, "unknown column"),
    ({"twice": "v * 2", "id": "twice + 1"}, "reads generated column"),
    ({"twice": "upper(CAST(v AS STRING))"}, "gives string"),
    ({"twice": "1 + 1"}, "reads no column"),
    ({"twice": 3}, "needs a SQL expression"),
])
def test_bad_definitions_create_nothing(table_uri, generated, message):
    with pytest.raises(InvalidConstraintError, match=message):
        deltatx.create_table(table_uri, SCHEMA, generated_columns=generated)
    with pytest.raises(TableNotFoundError):
        deltatx.Table(table_uri)


def test_generated_column_on_a_writer_3_table_is_only_metadata(table_uri):
    """PROTOCOL.md: generated columns bind from writer 4 (or the named feature) on."""
    from deltatx.tables.constraints import rules_for
    from deltatx.txnlog.actions import Protocol

    t = deltatx.create_table(table_uri, SCHEMA, generated_columns=GENERATED)
    assert rules_for(t.schema, t.properties, Protocol(1, 3)) is None
    assert rules_for(t.schema, t.properties, Protocol(1, 4)).generated


@pytest.mark.parametrize("dv", [False, True])
def test_a_generated_column_over_a_struct_field_follows_every_write(tmp_path, dv):
    """g = st.a * 10: INSERT clauses compute it from the new struct, UPDATE / MERGE UPDATE
    recompute it when the struct or the field changes (MERGE INSERT failed with a raw kernel
    error; UPDATEs kept the old g and then failed the generated-column check)."""
    uri = str(tmp_path / "t")
    st = pa.struct([("a", pa.int64()), ("b", pa.int64())])
    schema = pa.schema([("id", pa.int64()), ("st", st), ("st2", st), ("g", pa.int64())])
    t = deltatx.create_table(uri, schema, generated_columns={"g": "st.a * 10"},
                             properties={"delta.enableDeletionVectors": "true"} if dv else None)
    t.append(pa.table({"id": [1], "st": pa.array([{"a": 1, "b": 0}], st), "st2": pa.array([{"a": 4, "b": 4}], st)}))
    source = pa.table({"id": [1, 2], "st": pa.array([{"a": 5, "b": 5}, {"a": 3, "b": 3}], st),
                       "st2": pa.array([None, None], st)})
    t.merge(source, on="t.id = s.id").when_matched_update(set={"st": "s.st"}) \
        .when_not_matched_insert(values={"id": "s.id", "st": "s.st"}).execute()
    assert _rows(t) == {1: 50, 2: 30}
    t.update("id = 1", {"st": "st2"})
    assert _rows(t) == {1: 40, 2: 30}
    from deltatx.errors import PredicateError

    t.update("id = 2", {"st.a": "7"})  # a field set alone: g follows it
    assert _rows(t) == {1: 40, 2: 70}
    t.merge(source.slice(0, 1), on="t.id = s.id").when_matched_update_all().execute()
    assert _rows(t) == {1: 50, 2: 70}
    # a struct chosen by an expression: g follows the chosen struct's field
    t.merge(source, on="t.id = s.id").when_matched_update(set={"st": "if(s.id = 2, s.st, t.st2)"}).execute()
    assert _rows(t) == {1: None, 2: 30}  # UPDATE SET * above made st2 of id 1 NULL
    t.merge(source, on="t.id = s.id").when_matched_update(set={"st": "coalesce(s.st2, s.st)"}).execute()
    assert _rows(t) == {1: 50, 2: 30}
    t.update("id = 1", {"st": "CASE WHEN id = 1 THEN NULL ELSE st END"})
    assert _rows(t) == {1: None, 2: 30}


def test_generated_columns_over_struct_parts_never_go_stale(tmp_path):
    """Where deltatx cannot derive a generated column's new value it refuses the statement
    instead of keeping the old value: g reads a struct whose fields change in part."""
    from deltatx.errors import PredicateError

    inner = pa.struct([("x", pa.int64()), ("y", pa.int64())])
    st = pa.struct([("a", pa.int64()), ("inner", inner)])
    schema = pa.schema([("id", pa.int64()), ("st", st), ("g", pa.int64()), ("n", pa.bool_())])
    t = deltatx.create_table(str(tmp_path / "t"), schema, generated_columns={"g": "st.inner.y", "n": "st IS NULL"})
    t.append(pa.table({"id": [1], "st": pa.array([{"a": 1, "inner": {"x": 1, "y": 2}}], st)}))
    for assignment in ({"st.a": "5"}, {"st.inner.x": "5"}):
        with pytest.raises(PredicateError):
            t.update("id = 1", assignment)
    t.update("id = 1", {"st": "CASE WHEN id = 1 THEN NULL ELSE st END"})
    assert t.to_arrow(columns=["g", "n"]).to_pylist() == [{"g": None, "n": True}]
    assert t.version == 2


def _rows(t: deltatx.Table) -> dict[int, int]:
    return {r["id"]: r["g"] for r in t.to_arrow(columns=["id", "g"]).to_pylist()}
