"""CHECK constraints and column invariants: adding, dropping, and enforcement on every write path.

A refused call always shows the typed error *and* that nothing was written: the version is
unchanged and the table directory holds exactly the files it held before.
"""

from __future__ import annotations

import orjson
import pyarrow as pa
import pytest
from tablefiles import data_files

import deltatx
from deltatx.errors import (
    ConcurrentAppendException,
    ConstraintViolationError,
    InvalidConstraintError,
    MetadataChangedException,
)
from deltatx.txnlog.actions import Protocol

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("v", pa.int64())])


def rows(ids: list[int], v: list[int | None] | None = None, part: int = 0) -> pa.Table:
    return pa.table({"id": ids, "part": [part] * len(ids), "v": v if v is not None else ids}, schema=SCHEMA)


def make(uri: str, dv: bool = False, partitioned: bool = False) -> deltatx.Table:
    props = {"delta.enableDeletionVectors": "true"} if dv else {}
    t = deltatx.create_table(uri, SCHEMA, partition_by=["part"] if partitioned else None, properties=props)
    t.append(rows([1, 2, 3]))
    t.append(rows([4, 5], part=1))
    return t


class Unchanged:
    """Asserts, after a refused call, that the table's version and files did not move."""

    def __init__(self, uri: str):
        self.uri = uri
        self.version = deltatx.Table(uri).version
        self.files = data_files(uri)
        self.rows = sorted(deltatx.Table(uri).to_arrow().to_pylist(), key=lambda r: r["id"])

    def check(self) -> None:
        t = deltatx.Table(self.uri)
        assert t.version == self.version
        assert data_files(self.uri) == self.files
        assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"]) == self.rows


# --------------------------------------------------------------------------------------------
# ADD / DROP CONSTRAINT
# --------------------------------------------------------------------------------------------


def test_add_constraint_stores_it_as_delta_does_and_upgrades_the_protocol(table_uri):
    t = make(table_uri)
    assert t.protocol == Protocol(1, 2)
    result = t.add_constraint("V_Positive", "v > 0")
    assert t.properties["delta.constraints.v_positive"] == "v > 0"
    assert "checkConstraints" in (t.protocol.writer_features or ())
    info = t.history(1)[0]
    assert info["operation"] == "ADD CONSTRAINT" and result.version == t.version
    assert info["operationParameters"]["name"] == "v_positive"


def test_legacy_writer_3_needs_no_upgrade(table_uri):
    t = make(table_uri)
    with t.transaction() as tx:
        tx.stage_protocol(Protocol(1, 3))
    t.add_constraint("p", "v > 0")
    assert t.protocol == Protocol(1, 3)


def test_add_constraint_refuses_when_existing_rows_violate(table_uri):
    t = make(table_uri)
    t.append(rows([6, 7], v=[None, -7]))  # a NULL violates as much as a FALSE
    before = Unchanged(table_uri)
    with pytest.raises(ConstraintViolationError) as info:
        t.add_constraint("v_positive", "v > 0")
    err = info.value
    assert err.num_violations == 2 and err.constraint == "v_positive" and err.expression == "v > 0"
    assert "2 of 7 existing row(s)" in str(err)
    before.check()
    assert "delta.constraints.v_positive" not in deltatx.Table(table_uri).properties


@pytest.mark.parametrize("name, sql, error", [
    ("bad name", "v > 0", InvalidConstraintError),
    ("1st", "v > 0", InvalidConstraintError),
    ("ok", "", InvalidConstraintError),
    ("ok", "v +", InvalidConstraintError),
    ("ok", "nope > 1", InvalidConstraintError),
    ("ok", "v + 1", InvalidConstraintError),  # not a condition
])
def test_bad_constraints_are_refused_and_nothing_is_written(table_uri, name, sql, error):
    t = make(table_uri)
    before = Unchanged(table_uri)
    with pytest.raises(error):
        t.add_constraint(name, sql)
    before.check()


def test_a_name_is_taken_once_whatever_its_case(table_uri):
    t = make(table_uri)
    t.add_constraint("pos", "v > 0")
    before = Unchanged(table_uri)
    with pytest.raises(InvalidConstraintError, match="already has"):
        t.add_constraint("POS", "v > -1")
    before.check()


def test_drop_constraint(table_uri):
    t = make(table_uri)
    t.add_constraint("pos", "v > 0")
    t.drop_constraint("POS")
    assert not any(k.startswith("delta.constraints.") for k in t.properties)
    assert t.history(1)[0]["operation"] == "DROP CONSTRAINT"
    t.append(rows([9], v=[-9]))  # no longer enforced
    before = Unchanged(table_uri)
    with pytest.raises(InvalidConstraintError, match="no CHECK constraint 'pos'"):
        t.drop_constraint("pos")
    before.check()
    assert t.drop_constraint("pos", if_exists=True).version == before.version  # nothing to commit


def test_constraints_are_not_set_as_properties(table_uri):
    t = make(table_uri)
    before = Unchanged(table_uri)
    with pytest.raises(InvalidConstraintError, match="add_constraint"):
        t.set_properties({"delta.constraints.pos": "v > 0"})
    before.check()


def test_create_table_with_constraint_properties(table_uri):
    t = deltatx.create_table(table_uri, SCHEMA, properties={"delta.constraints.Pos": "v > 0"})
    assert t.properties == {"delta.constraints.pos": "v > 0"}
    with pytest.raises(ConstraintViolationError):
        t.append(rows([1], v=[0]))


def test_create_table_with_a_bad_constraint_creates_nothing(table_uri):
    with pytest.raises(InvalidConstraintError):
        deltatx.create_table(table_uri, SCHEMA, properties={"delta.constraints.pos": "missing > 0"})
    with pytest.raises(deltatx.errors.TableNotFoundError):
        deltatx.Table(table_uri)


def test_add_constraint_inside_a_transaction_checks_rows_staged_before_it(table_uri):
    t = make(table_uri)
    before = Unchanged(table_uri)
    with pytest.raises(ConstraintViolationError):
        with t.transaction() as tx:
            tx.append(rows([8], v=[-8]))
            tx.add_constraint("pos", "v > 0")
    before.check()


# --------------------------------------------------------------------------------------------
# Enforcement on every write path
# --------------------------------------------------------------------------------------------

WRITES = {
    "append": lambda t: t.append(rows([10, 11], v=[10, -11])),
    "append_null": lambda t: t.append(rows([10], v=[None])),
    "overwrite": lambda t: t.overwrite(rows([10, 11], v=[10, -11])),
    "replace_where": lambda t: t.overwrite(rows([10, 11], v=[10, -11], part=1), where="part = 1"),
    "update": lambda t: t.update("id = 2", set={"v": "v - 100"}),
    "update_all": lambda t: t.update(set={"v": "v - 3"}),
    "merge_update": lambda t: t.merge(rows([2], v=[-2]), on="t.id = s.id").when_matched_update_all().execute(),
    "merge_insert": lambda t: t.merge(rows([20], v=[-20]), on="t.id = s.id").when_not_matched_insert_all().execute(),
    "merge_both": lambda t: t.merge(rows([2, 20], v=[2, -20]), on="t.id = s.id")
    .when_matched_update({"v": "s.v * 10"}).when_not_matched_insert_all().execute(),
}


@pytest.mark.parametrize("dv", [False, True], ids=["copy_on_write", "deletion_vectors"])
@pytest.mark.parametrize("op", list(WRITES))
def test_every_write_path_enforces_constraints(table_uri, op, dv):
    t = make(table_uri, dv=dv, partitioned=True)
    t.add_constraint("v_positive", "v > 0")
    before = Unchanged(table_uri)
    with pytest.raises(ConstraintViolationError) as info:
        WRITES[op](deltatx.Table(table_uri))
    err = info.value
    assert err.constraint == "v_positive" and err.expression == "v > 0" and err.num_violations >= 1
    assert err.row is not None and (err.row["v"] is None or err.row["v"] <= 0)
    assert "v_positive" in str(err) and "v > 0" in str(err)
    before.check()


@pytest.mark.parametrize("dv", [False, True], ids=["copy_on_write", "deletion_vectors"])
def test_rows_that_satisfy_constraints_are_written(table_uri, dv):
    t = make(table_uri, dv=dv)
    t.add_constraint("v_positive", "v > 0")
    t.add_constraint("small", "v < 1000 AND id IS NOT NULL")
    t.append(rows([10], v=[10]))
    t.update("id = 2", set={"v": "v + 100"})
    t.merge(rows([3, 30], v=[33, 30]), on="t.id = s.id").when_matched_update_all().when_not_matched_insert_all().execute()
    got = {r["id"]: r["v"] for r in t.to_arrow().to_pylist()}
    assert got == {1: 1, 2: 102, 3: 33, 4: 4, 5: 5, 10: 10, 30: 30}


def test_a_violation_in_a_late_batch_leaves_no_file(table_uri):
    """A stream is written while it is read: the batches before the bad one are on storage when
    the violation is found; they are deleted and nothing is committed."""
    t = make(table_uri)
    t.add_constraint("v_positive", "v > 0")
    before = Unchanged(table_uri)
    good = rows(list(range(100, 50_100)))
    bad = rows([1], v=[-1])
    reader = pa.RecordBatchReader.from_batches(SCHEMA, [*good.to_batches(max_chunksize=10_000), *bad.to_batches()])
    with pytest.raises(ConstraintViolationError, match="1 of 1 row"):
        t.append(reader)
    before.check()


def test_which_constraint_is_named_when_several_exist(table_uri):
    t = make(table_uri)
    t.add_constraint("a_pos", "v > 0")
    t.add_constraint("b_small", "v < 100")
    with pytest.raises(ConstraintViolationError) as info:
        t.append(rows([50, 51, 52], v=[500, 7, 600]))
    assert info.value.constraint == "b_small" and info.value.num_violations == 2
    assert info.value.row == {"id": 50, "part": 0, "v": 500}


def test_constraint_added_by_another_transaction_fails_a_concurrent_writer(table_uri):
    t = make(table_uri)
    writer = deltatx.Table(table_uri).transaction()
    writer.append(rows([40], v=[-40]))
    t.add_constraint("v_positive", "v > 0")
    with pytest.raises(MetadataChangedException):
        writer.commit()
    assert sorted(deltatx.Table(table_uri).to_arrow()["id"].to_pylist()) == [1, 2, 3, 4, 5]


def test_add_constraint_conflicts_with_a_concurrent_append(table_uri):
    """ADD CONSTRAINT read the whole table: rows appended meanwhile were never checked."""
    t = make(table_uri)
    adding = deltatx.Table(table_uri).transaction()
    adding.add_constraint("v_positive", "v > 0")
    t.append(rows([40], v=[-40]))
    with pytest.raises(ConcurrentAppendException):
        adding.commit()
    assert "delta.constraints.v_positive" not in deltatx.Table(table_uri).properties


# --------------------------------------------------------------------------------------------
# Column invariants (legacy delta.invariants)
# --------------------------------------------------------------------------------------------


def invariant_schema(sql: str) -> pa.Schema:
    doc = orjson.dumps({"expression": {"expression": sql}}).decode()
    return pa.schema([pa.field("id", pa.int64()),
                      pa.field("x", pa.int32(), metadata={"delta.invariants": orjson.dumps(doc)})])


def test_invariants_are_enforced(table_uri):
    t = deltatx.create_table(table_uri, invariant_schema("x > 3"))
    assert t.protocol == Protocol(1, 2)  # writer 2 implies invariants
    t.append(pa.table({"id": [1], "x": pa.array([4], pa.int32())}))
    before = Unchanged(table_uri)
    for bad in ([3], [None]):
        with pytest.raises(ConstraintViolationError) as info:
            t.append(pa.table({"id": [2], "x": pa.array(bad, pa.int32())}))
        assert info.value.constraint == "x" and info.value.expression == "x > 3"
        assert "invariant" in str(info.value)
    with pytest.raises(ConstraintViolationError):
        t.update(set={"x": "x - 1"})
    before.check()


def test_invariants_on_nested_fields(table_uri):
    doc = orjson.dumps({"expression": {"expression": "s.a > 0"}}).decode()
    inner = pa.struct([pa.field("a", pa.int64(), metadata={"delta.invariants": orjson.dumps(doc)})])
    t = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("s", inner)]))
    t.append(pa.table({"id": [1], "s": [{"a": 1}]}, schema=t.schema))
    with pytest.raises(ConstraintViolationError, match="s.a"):
        t.append(pa.table({"id": [2], "s": [{"a": -1}]}, schema=t.schema))
    assert t.to_arrow().num_rows == 1


def test_tables_without_rules_pay_nothing_per_row(table_uri, monkeypatch):
    """The rules check runs only when a table has rules: a plain append never evaluates one."""
    from deltatx.tables import constraints

    calls = []
    monkeypatch.setattr(constraints, "check_rows", lambda *a, **k: calls.append(1))
    t = make(table_uri)
    t.update("id = 1", set={"v": "v + 1"})
    assert calls == []
    assert constraints.rules_for(t.schema, t.properties, t.protocol) is None
