"""UPDATE / MERGE SET values stored into a column of another numeric type: Spark's ANSI store
assignment (its CAST), not only Arrow's safe cast."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import SchemaMismatchError

SCHEMA = pa.schema([("id", pa.int64()), ("i", pa.int32()), ("d", pa.decimal128(5, 2))])


@pytest.fixture
def table(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA)
    t.append(pa.table({"id": [1, 2], "i": pa.array([1, 2], pa.int32()), "d": [Decimal("1.00"), Decimal("2.00")]},
                      schema=SCHEMA))
    return t


def values(t: deltatx.Table) -> dict[int, tuple]:
    return {r["id"]: (r["i"], r["d"]) for r in deltatx.Table(t.uri).to_arrow().to_pylist()}


def test_fractions_truncate_into_integers_and_decimals_round_half_up(table):
    table.update(where="id = 1", set={"i": "7.9", "d": "1.235"})
    table.update(where="id = 2", set={"i": "-7.9", "d": "-1.235"})
    assert values(table) == {1: (7, Decimal("1.24")), 2: (-7, Decimal("-1.24"))}
    source = pa.table({"id": [1], "x": [3.99]})
    table.merge(source, on="t.id = s.id").when_matched_update({"i": "s.x", "d": "s.x * 1.0005"}).execute()
    assert values(table)[1] == (3, Decimal("3.99"))


def test_floats_and_text_round_half_up_from_their_digits_as_spark_does(table, tmp_path):
    """Spark casts a double to DECIMAL through Double.toString and a STRING through BigDecimal,
    then rounds half up: 1.005 (binary just below it) is 1.01, '2.675' is 2.68; Arrow's cast
    would give 1.00 for the first and refuse the second."""
    source = pa.table({"id": [1, 2], "x": [1.005, -2.675], "txt": ["2.675", " -1.005 "]})
    table.merge(source, on="t.id = s.id").when_matched_update({"d": "s.x"}).execute()
    assert {k: v[1] for k, v in values(table).items()} == {1: Decimal("1.01"), 2: Decimal("-2.68")}
    table.merge(source, on="t.id = s.id").when_matched_update({"d": "s.txt"}).execute()
    assert {k: v[1] for k, v in values(table).items()} == {1: Decimal("2.68"), 2: Decimal("-1.01")}
    table.update(where="id = 1", set={"d": "CAST('0.125' AS DECIMAL(4, 2))"})
    table.update(where="id = 2", set={"d": "CAST(CAST(1.005 AS DOUBLE) AS DECIMAL(4, 2))"})
    assert {k: v[1] for k, v in values(table).items()} == {1: Decimal("0.13"), 2: Decimal("1.01")}
    assert deltatx.Table(table.uri).to_arrow(where="d = CAST('1.005' AS DECIMAL(4, 2))").num_rows == 1
    wide = deltatx.create_table(str(tmp_path / "wide"), pa.schema([("d", pa.decimal128(38, 0)), ("e", pa.decimal128(6, 2))]))
    wide.append(pa.table({"d": [1e23], "e": [1.005]}))  # an append converts as Spark's INSERT does
    assert wide.to_arrow().to_pylist() == [{"d": Decimal("100000000000000000000000"), "e": Decimal("1.01")}]
    big = deltatx.create_table(str(tmp_path / "big"), pa.schema([("d", pa.decimal128(18, 2))]))
    big.append(pa.table({"d": [12345678901.2345, 10000000000.1 + 0.2]}))  # printed as 1.23...e+10
    assert big.to_arrow()["d"].to_pylist() == [Decimal("12345678901.23"), Decimal("10000000000.30")]


@pytest.mark.parametrize("assignment", [{"i": "1e20"}, {"d": "12345.6"}, {"i": "'abc'"}])
def test_values_out_of_range_or_not_numbers_are_refused(table, assignment):
    with pytest.raises(SchemaMismatchError, match="cannot be converted"):
        table.update(where="id = 1", set=assignment)
    assert deltatx.Table(table.uri).version == 1


@pytest.mark.parametrize("dv", [False, True], ids=["copy_on_write", "deletion_vectors"])
def test_decimals_rounded_up_past_their_digits_are_never_zero(tmp_path, dv):
    """Rounding 99999999.99 to one place needs one more integer digit: Arrow's round of a value
    that no longer fits its type gave 0 (silently, unless it was the batch's last row). Spark
    rounds with a carry digit: the value is right where it fits and an error where it does not."""
    from deltatx.errors import PredicateError

    schema = pa.schema([("id", pa.int64()), ("d", pa.decimal128(10, 2)), ("r", pa.decimal128(10, 1)),
                        ("big", pa.decimal128(38, 10)), ("e", pa.decimal128(38, 0))])
    t = deltatx.create_table(str(tmp_path / "t"), schema, properties={"delta.enableDeletionVectors": str(dv).lower()})
    t.append(pa.table({"id": [0, 1], "d": [Decimal("99999999.99"), Decimal("1.25")], "r": [None, None],
                       "big": [Decimal("9" * 28 + "." + "9" * 10), Decimal("1.5")], "e": [None, None]}, schema=schema))
    t.update(set={"r": "round(d, 1)", "e": "CAST(big AS DECIMAL(38,0))"})
    rows = {r["id"]: r for r in deltatx.Table(t.uri).to_arrow().to_pylist()}
    assert rows[0]["r"] == Decimal("100000000.0") and rows[1]["r"] == Decimal("1.3")
    assert rows[0]["e"] == Decimal(10**28) and rows[1]["e"] == Decimal(2)
    assert t.to_arrow(where="round(d, -1) = 100000000")["id"].to_pylist() == [0]
    version = t.version
    with pytest.raises((PredicateError, SchemaMismatchError)):
        t.update(set={"r": "CAST(d AS DECIMAL(3,1))"})  # 100000000.0 does not fit DECIMAL(3,1)
    with pytest.raises((PredicateError, SchemaMismatchError)):
        t.update(where="id = 1", set={"d": "99999999.995"})  # rounds to 100000000.00: 11 digits
    with pytest.raises(PredicateError):
        t.to_arrow(where="CAST(d AS DECIMAL(3,1)) = 0")
    assert deltatx.Table(t.uri).version == version


@pytest.mark.parametrize("dv", [False, True], ids=["copy_on_write", "deletion_vectors"])
def test_set_values_are_computed_for_the_updated_rows_only(tmp_path, dv):
    """Spark's UPDATE is If(condition, value, column): a value that would fail on a row the
    UPDATE does not touch fails nothing."""
    schema = pa.schema([("id", pa.int64()), ("s", pa.string()), ("i", pa.int32())])
    t = deltatx.create_table(str(tmp_path / "t"), schema, properties={"delta.enableDeletionVectors": str(dv).lower()})
    t.append(pa.table({"id": [1, 2], "s": ["7", "not a number"], "i": [0, 0]}, schema=schema))
    t.update(where="id = 1", set={"i": "CAST(s AS INT)"})
    assert sorted(deltatx.Table(t.uri).to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "s": "7", "i": 7}, {"id": 2, "s": "not a number", "i": 0}]


def test_rows_where_the_predicate_is_null_keep_their_values(tmp_path):
    schema = pa.schema([("id", pa.int64()), ("x", pa.int64()), ("y", pa.int64())])
    t = deltatx.create_table(str(tmp_path / "t"), schema)
    t.append(pa.table({"id": [1, 2, 3], "x": [5, None, 0], "y": [1, 2, 3]}, schema=schema))
    t.update(where="x > 1", set={"y": "y * 10"})
    assert sorted(deltatx.Table(t.uri).to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "x": 5, "y": 10}, {"id": 2, "x": None, "y": 2}, {"id": 3, "x": 0, "y": 3}]


def test_numbers_are_no_dates_or_timestamps(tmp_path):
    """A number appended or SET into a DATE or TIMESTAMP column was stored as raw days or
    microseconds; Spark's INSERT refuses it, and its CAST takes no number as a DATE."""
    from deltatx.errors import SchemaMismatchError as Mismatch

    schema = pa.schema([("id", pa.int32()), ("d", pa.date32()), ("ts", pa.timestamp("us", tz="UTC"))])
    t = deltatx.create_table(str(tmp_path / "t"), schema)
    for data in [{"id": pa.array([1], pa.int32()), "d": pa.array([5], pa.int32())},
                 {"id": pa.array([1], pa.int32()), "ts": pa.array([5], pa.int64())}]:
        with pytest.raises(Mismatch):
            t.append(pa.table(data))
    t.append(pa.table({"id": pa.array([1], pa.int32())}))
    with pytest.raises(Mismatch):
        t.update(set={"d": "id"})
