"""MERGE on real tables: every clause kind, clause order, cardinality, pruning, the commit it
writes, conflicts between MERGEs, and bad input. Expected results are computed in plain Python."""

from __future__ import annotations

import os

import orjson
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import deltatx
from deltatx import errors

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("value", pa.float64()), ("name", pa.string())])


def target_rows(n_parts: int = 3, per_part: int = 10) -> pa.Table:
    ids = list(range(n_parts * per_part))
    return pa.table(
        {"id": ids, "part": [i // per_part for i in ids], "value": [float(i) for i in ids],
         "name": [f"t{i}" for i in ids]},
        schema=SCHEMA,
    )


def by_id(t: pa.Table) -> dict[int, dict]:
    return {r["id"]: r for r in t.to_pylist()}


def commit_info(uri: str, version: int) -> dict:
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        for line in fh.read().splitlines():
            action = orjson.loads(line)
            if "commitInfo" in action:
                return action["commitInfo"]
    raise AssertionError("no commitInfo")


@pytest.fixture
def table(table_uri) -> deltatx.Table:
    t = deltatx.create_table(table_uri, SCHEMA, partition_by=["part"])
    t.append(target_rows())  # one file per part: ids 0-9 in part 0, 10-19 in part 1, 20-29 in part 2
    return t


def test_upsert(table, table_uri):
    source = pa.table({"id": [5, 15, 100], "part": [0, 1, 0], "value": [-5.0, -15.0, -100.0],
                       "name": ["s5", "s15", "s100"]})
    expected = by_id(target_rows())
    for r in source.to_pylist():
        expected[r["id"]] = dict(r)
    result = (table.merge(source, on="t.id = s.id")
              .when_matched_update_all()
              .when_not_matched_insert_all()
              .execute())
    assert result.operation == "MERGE"
    assert by_id(table.to_arrow()) == expected
    assert by_id(deltatx.Table(table_uri).to_arrow()) == expected
    m = result.metrics
    assert (m["numTargetRowsUpdated"], m["numTargetRowsInserted"], m["numTargetRowsDeleted"]) == (2, 1, 0)
    assert m["numSourceRows"] == 3
    assert m["numTargetRowsCopied"] == 18, "the rest of the two rewritten files"
    assert m["numTargetFilesRemoved"] == 2
    assert m["numTargetFilesAdded"] >= 2
    assert m["numOutputRows"] == 18 + 2 + 1
    assert table.to_arrow(where="part = 2").num_rows == 10

    info = commit_info(table_uri, result.version)
    assert info["operation"] == "MERGE"
    params = info["operationParameters"]
    assert orjson.loads(params["predicate"]) == ["t.id = s.id"]
    assert orjson.loads(params["matchedPredicates"]) == [{"actionType": "update"}]
    assert orjson.loads(params["notMatchedPredicates"]) == [{"actionType": "insert"}]
    assert info["operationMetrics"]["numTargetRowsUpdated"] == "2"
    assert info["isBlindAppend"] is False


def test_clause_order_conditions_and_expressions(table):
    source = pa.table({"id": [1, 2, 3, 50, 51], "delta": [10.0, 20.0, 30.0, 1.0, 2.0], "kind": ["u", "d", "u", "i", "x"]})
    (table.merge(source, on="t.id = s.id")
     .when_matched_delete(condition="s.kind = 'd'")
     .when_matched_update(set={"value": "t.value + s.delta", "name": "concat(t.name, '!')"}, condition="s.id < 3")
     .when_matched_update(set={"value": "0"})
     .when_not_matched_insert(values={"id": "s.id", "part": "9", "value": "s.delta * 2"}, condition="s.kind = 'i'")
     .execute())
    expected = by_id(target_rows())
    del expected[2]
    expected[1].update(value=11.0, name="t1!")
    expected[3].update(value=0.0)
    expected[50] = {"id": 50, "part": 9, "value": 2.0, "name": None}
    assert by_id(table.to_arrow()) == expected


def test_delete_only_and_insert_only(table):
    r = table.merge(pa.table({"id": [3, 4, 99]}), on="t.id = s.id").when_matched_delete().execute()
    assert r.metrics["numTargetRowsDeleted"] == 2
    assert sorted(by_id(table.to_arrow())) == [i for i in range(30) if i not in (3, 4)]

    before = set(table.files()["path"].to_pylist())
    source = pa.table({"id": [0, 200], "part": [0, 0], "value": [1.0, 2.0], "name": ["a", "b"]})
    r = table.merge(source, on="t.id = s.id").when_not_matched_insert_all().execute()
    assert r.metrics["numTargetRowsInserted"] == 1
    assert r.metrics["numTargetFilesRemoved"] == 0
    assert before <= set(table.files()["path"].to_pylist()), "an insert-only MERGE removes no file"
    assert by_id(table.to_arrow())[200]["name"] == "b"
    assert by_id(table.to_arrow())[0]["name"] == "t0"


def test_not_matched_by_source(table):
    source = pa.table({"id": list(range(0, 10))})
    r = (table.merge(source, on="t.id = s.id")
         .when_not_matched_by_source_update(set={"name": "'gone'"}, condition="t.part = 1")
         .when_not_matched_by_source_delete()
         .execute())
    out = by_id(table.to_arrow())
    assert sorted(out) == list(range(20))
    assert all(out[i]["name"] == "gone" for i in range(10, 20))
    assert all(out[i]["name"] == f"t{i}" for i in range(10))
    m = r.metrics
    assert m["numTargetRowsNotMatchedBySourceUpdated"] == 10
    assert m["numTargetRowsNotMatchedBySourceDeleted"] == 10
    assert m["numTargetRowsDeleted"] == 10 and m["numTargetRowsUpdated"] == 10


def test_not_matched_by_source_with_conditions_prunes(table):
    """The "sync one partition" MERGE reads only that partition's files."""
    source = pa.table({"id": [10, 11], "part": pa.array([1, 1], pa.int32()), "value": [1.0, 1.0],
                       "name": ["a", "b"]})
    r = (table.merge(source, on="t.id = s.id AND t.part = 1")
         .when_matched_update_all()
         .when_not_matched_by_source_delete(condition="t.part = 1")
         .execute())
    assert r.metrics["numTargetFilesAfterSkipping"] == 1
    assert r.metrics["numTargetRowsDeleted"] == 8 and r.metrics["numTargetRowsUpdated"] == 2
    out = by_id(table.to_arrow())
    assert sorted(out) == list(range(10)) + [10, 11] + list(range(20, 30))
    assert out[10]["name"] == "a"


def test_cardinality_error_counts_every_on_match_as_delta_does(table, table_uri):
    dupes = pa.table({"id": [1, 1, 7], "value": [1.0, 2.0, 3.0]})
    with pytest.raises(errors.MergeCardinalityError, match="more than one source row"):
        table.merge(dupes, on="t.id = s.id").when_matched_update(set={"value": "s.value"}).execute()
    assert deltatx.Table(table_uri).version == 1
    # Delta counts the pairs ON makes, not those a clause condition keeps: a condition that happens
    # to pick one pair today does not make the source unambiguous
    for condition in ("s.id = 7", "s.value > 1.5"):
        with pytest.raises(errors.MergeCardinalityError):
            table.merge(dupes, on="t.id = s.id").when_matched_update(set={"value": "s.value"},
                                                                    condition=condition).execute()
    # NOT MATCHED BY SOURCE clauses alone still run the check (not an insert-only MERGE)
    with pytest.raises(errors.MergeCardinalityError):
        table.merge(dupes, on="t.id = s.id").when_not_matched_by_source_delete().execute()
    assert deltatx.Table(table_uri).version == 1
    table.merge(dupes.slice(2), on="t.id = s.id").when_matched_update(set={"value": "s.value"},
                                                                      condition="s.id = 7").execute()
    assert by_id(table.to_arrow())[7]["value"] == 3.0
    # a lone unconditional delete tolerates duplicates (Delta's exception)
    table.merge(dupes, on="t.id = s.id").when_matched_delete().execute()
    assert 1 not in by_id(table.to_arrow()) and 7 not in by_id(table.to_arrow())
    # duplicates that only feed inserts are fine too
    r = table.merge(pa.table({"id": [500, 500]}), on="t.id = s.id").when_not_matched_insert(
        values={"id": "s.id", "part": "0"}).execute()
    assert r.metrics["numTargetRowsInserted"] == 2


def test_pruning_by_partition_literal_and_key_stats(table):
    source = pa.table({"id": [12, 13], "value": [0.0, 0.0]})
    r = (table.merge(source, on="t.id = s.id AND t.part = 1")
         .when_matched_update(set={"value": "s.value"}).execute())
    assert r.metrics["numTargetFilesAfterSkipping"] == 1
    assert r.metrics["numTargetFilesBeforeSkipping"] == 3
    # no partition in ON: the source keys' IN list still prunes by min/max stats
    r = table.merge(pa.table({"id": [25, 26]}), on="t.id = s.id").when_matched_delete().execute()
    assert r.metrics["numTargetFilesAfterSkipping"] == 1
    assert r.metrics["numTargetFilesRemoved"] == 1
    # a wide key range (more keys than the IN-list limit) prunes by range
    from deltatx.tables.ops import merge_rows as merge_module

    wide = pa.table({"id": list(range(1000, 1000 + merge_module.IN_LIST_MAX + 5))})
    r = table.merge(wide, on="t.id = s.id").when_matched_delete().execute()
    assert r.metrics["numTargetFilesAfterSkipping"] == 0


def test_source_only_and_residual_conditions(table):
    source = pa.table({"id": [1, 2, 3], "op": ["keep", "skip", "keep"], "min_value": [0.0, 0.0, 5.0]})
    r = (table.merge(source, on="t.id = s.id AND s.op = 'keep' AND t.value >= s.min_value")
         .when_matched_update(set={"name": "'hit'"})
         .when_not_matched_insert(values={"id": "s.id + 1000", "part": "5"})
         .execute())
    out = by_id(table.to_arrow())
    assert out[1]["name"] == "hit" and out[2]["name"] == "t2" and out[3]["name"] == "t3"
    assert {1002, 1003} <= set(out) and 1001 not in out
    assert r.metrics["numTargetRowsUpdated"] == 1 and r.metrics["numTargetRowsInserted"] == 2


def test_non_equi_join_and_null_keys(table):
    source = pa.table({"lo": [5, None], "hi": [6, 8]})
    (table.merge(source, on="t.id >= s.lo AND t.id <= s.hi")
     .when_matched_update(set={"name": "'range'"}).execute())
    out = by_id(table.to_arrow())
    assert [i for i in out if out[i]["name"] == "range"] == [5, 6]

    nulls = pa.table({"id": pa.array([None, 4], pa.int64()), "part": [0, 0]})
    r = (table.merge(nulls, on="t.id = s.id")
         .when_matched_update(set={"name": "'four'"})
         .when_not_matched_insert_all().execute())
    assert r.metrics["numTargetRowsInserted"] == 1, "a NULL key never matches: inserted"
    assert by_id(table.to_arrow())[4]["name"] == "four"


def test_update_moves_row_to_other_partition_and_type_casts(table):
    source = pa.table({"id": pa.array([1], pa.int32()), "new_part": pa.array([2], pa.int64())})
    table.merge(source, on="t.id = s.id").when_matched_update(set={"part": "s.new_part"}).execute()
    assert table.to_arrow(where="part = 2 AND id = 1").num_rows == 1
    assert table.to_arrow(where="part = 0").num_rows == 9


def test_pandas_source_and_custom_aliases(table):
    df = pd.DataFrame({"id": [1, 31], "part": [0, 0], "value": [9.0, 9.0], "name": ["x", "y"]})
    (table.merge(df, on="target.id = src.id", source_alias="src", target_alias="target")
     .when_matched_update(set={"target.value": "src.value"})
     .when_not_matched_insert_all().execute())
    out = by_id(table.to_arrow())
    assert out[1]["value"] == 9.0 and out[1]["name"] == "t1"
    assert out[31] == {"id": 31, "part": 0, "value": 9.0, "name": "y"}


def test_star_clauses_pair_columns_by_name(table):
    """Source columns match case-insensitively; a missing one is kept (update) or NULL (insert)."""
    source = pa.table({"ID": [1, 77], "Part": pa.array([0, 0], pa.int32()), "VALUE": [-1.0, -77.0]})
    (table.merge(source, on="t.id = s.ID").when_matched_update_all().when_not_matched_insert_all().execute())
    out = by_id(table.to_arrow())
    assert out[1] == {"id": 1, "part": 0, "value": -1.0, "name": "t1"}
    assert out[77] == {"id": 77, "part": 0, "value": -77.0, "name": None}


def test_merge_in_a_transaction_returns_metrics(table, table_uri):
    with table.transaction() as tx:
        metrics = (tx.merge(pa.table({"id": [1]}), on="t.id = s.id")
                   .when_matched_update(set={"value": "100"}).execute())
        assert metrics["numTargetRowsUpdated"] == 1
        tx.delete("id = 2")
    fresh = deltatx.Table(table_uri)
    assert by_id(fresh.to_arrow())[1]["value"] == 100.0 and 2 not in by_id(fresh.to_arrow())
    assert fresh.history(limit=1)[0]["operation"] == "TRANSACTION"


def test_merges_into_disjoint_partitions_do_not_conflict(table, table_uri):
    tx = table.transaction()
    src0 = pa.table({"id": [1], "part": pa.array([0], pa.int32())})
    tx.merge(src0, on="t.part = s.part AND t.id = s.id").when_matched_update(set={"name": "'a'"}).execute()
    other = deltatx.Table(table_uri)
    src2 = pa.table({"id": [21, 99], "part": pa.array([2, 2], pa.int32())})
    (other.merge(src2, on="t.part = s.part AND t.id = s.id")
     .when_matched_update(set={"name": "'b'"}).when_not_matched_insert_all().execute())
    result = tx.commit()
    assert result.conflicts_resolved == 1
    out = by_id(deltatx.Table(table_uri).to_arrow())
    assert out[1]["name"] == "a" and out[21]["name"] == "b" and 99 in out


def test_merges_into_the_same_partition_conflict(table, table_uri):
    tx = table.transaction()
    tx.merge(pa.table({"id": [1]}), on="t.id = s.id AND t.part = 0").when_matched_delete().execute()
    deltatx.Table(table_uri).merge(
        pa.table({"id": [2]}), on="t.id = s.id AND t.part = 0").when_matched_delete().execute()
    with pytest.raises(errors.ConcurrentModificationException):
        tx.commit()


def test_bad_input(table):
    src = pa.table({"id": [1]})
    with pytest.raises(ValueError):
        table.merge(src, on="t.id = s.id").execute()
    with pytest.raises(errors.PredicateError, match="only the last"):
        (table.merge(src, on="t.id = s.id").when_matched_delete()
         .when_matched_update(set={"value": "1"}).execute())
    with pytest.raises(errors.PredicateError):
        table.merge(src, on="t.id = s.nope").when_matched_delete().execute()
    with pytest.raises(errors.PredicateError):
        table.merge(src, on="id = id").when_matched_delete().execute()
    with pytest.raises(errors.PredicateError):
        table.merge(src, on="t.id = s.id").when_matched_update(set={"nope": "1"}).execute()
    with pytest.raises(errors.PredicateError):
        table.merge(src, on="t.id = s.id").when_not_matched_insert(values={"id": "t.id"}).execute()
    with pytest.raises(errors.SchemaMismatchError):
        table.merge(src, on="t.id = s.id").when_matched_update(set={"value": "'abc'"}).execute()
    with pytest.raises(errors.PredicateError):
        table.merge(src, on="t.id = s.id", source_alias="t").when_matched_delete().execute()
    builder = table.merge(src, on="t.id = s.id").when_matched_delete()
    builder.execute()
    with pytest.raises(errors.DeltaTxError, match="already executed"):
        builder.execute()


def test_empty_source_is_a_no_op(table):
    before = table.version
    empty = pa.table({"id": pa.array([], pa.int64())})
    r = table.merge(empty, on="t.id = s.id").when_matched_delete().when_not_matched_insert_all().execute()
    assert r.version == before
    assert table.to_arrow().num_rows == 30


def test_unpartitioned_target_larger_merge(tmp_path):
    schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])
    t = deltatx.create_table(str(tmp_path / "flat"), schema)
    for chunk in range(4):
        ks = list(range(chunk * 1000, (chunk + 1) * 1000))
        t.append(pa.table({"k": ks, "v": ks}, schema=schema))
    source_keys = list(range(500, 4500, 7))
    source = pa.table({"k": source_keys, "v": [-k for k in source_keys]}, schema=schema)
    (t.merge(source, on="t.k = s.k").when_matched_update(set={"v": "s.v"})
     .when_not_matched_insert_all().execute())
    expected = {k: k for k in range(4000)}
    expected.update({k: -k for k in source_keys})
    got = {r["k"]: r["v"] for r in t.to_arrow().to_pylist()}
    assert got == expected


# --------------------------------------------------------------------------------------------
# Randomized: the same MERGE against a plain-Python model
# --------------------------------------------------------------------------------------------

KV = pa.schema([("k", pa.int64()), ("p", pa.int32()), ("v", pa.int64())])


def python_merge(target: dict[int, dict], source: dict[int, int]) -> dict[int, dict]:
    """ON t.k = s.k; matched: delete if s.v < 0, else update v = t.v + s.v when s.v is even;
    not matched: insert when s.v > 2; not matched by source: delete when t.v > 90."""
    out = {}
    for k, row in target.items():
        if k in source:
            sv = source[k]
            if sv < 0:
                continue
            out[k] = dict(row, v=row["v"] + sv) if sv % 2 == 0 else row
        elif row["v"] > 90:
            continue
        else:
            out[k] = row
    for k, sv in source.items():
        if k not in target and sv > 2:
            out[k] = {"k": k, "p": 0, "v": sv}
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    target_keys=st.lists(st.integers(0, 60), unique=True, max_size=40),
    source=st.dictionaries(st.integers(0, 80), st.integers(-5, 10), max_size=30),
    files=st.integers(1, 4),
)
def test_random_merges_match_the_python_model(tmp_path_factory, target_keys, source, files):
    uri = str(tmp_path_factory.mktemp("rand") / "t")
    t = deltatx.create_table(uri, KV, partition_by=["p"])
    target = {k: {"k": k, "p": k % 3, "v": (k * 7) % 100} for k in target_keys}
    rows = list(target.values())
    for i in range(files):  # several files per partition, so pruning and partial rewrites happen
        chunk = rows[i::files]
        if chunk:
            t.append(pa.Table.from_pylist(chunk, schema=KV))
    src = pa.table({"k": pa.array(list(source), pa.int64()), "v": pa.array(list(source.values()), pa.int64())})
    (t.merge(src, on="t.k = s.k")
     .when_matched_delete(condition="s.v < 0")
     .when_matched_update(set={"v": "t.v + s.v"}, condition="s.v % 2 = 0")
     .when_not_matched_insert(values={"k": "s.k", "p": "0", "v": "s.v"}, condition="s.v > 2")
     .when_not_matched_by_source_delete(condition="t.v > 90")
     .execute())
    assert by_key(deltatx.Table(uri).to_arrow()) == python_merge(target, source)


def by_key(table: pa.Table) -> dict[int, dict]:
    return {r["k"]: r for r in table.to_pylist()}


def test_update_spanning_many_files_keeps_every_other_row(tmp_path):
    """Updated string and float values land at the right rows of every file (per-file scatter)."""
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
    t = deltatx.create_table(str(tmp_path / "many"), schema)
    for f in range(4):  # four files of 50 rows
        ids = list(range(f * 50, f * 50 + 50))
        t.append(pa.table({"id": ids, "name": [f"n{i}" for i in ids], "score": [float(i) for i in ids]},
                          schema=schema))
    src_ids = list(range(3, 200, 7))
    source = pa.table({"id": src_ids, "name": [None if i % 2 else f"new{i}" for i in src_ids],
                       "score": [i * 10.0 for i in src_ids]}, schema=schema)
    t.merge(source, on="t.id = s.id").when_matched_update_all().execute()
    got = {r["id"]: (r["name"], r["score"]) for r in t.to_arrow().to_pylist()}
    assert len(got) == 200
    for i in range(200):
        if i in set(src_ids):
            assert got[i] == (None if i % 2 else f"new{i}", i * 10.0)
        else:
            assert got[i] == (f"n{i}", float(i))


@pytest.mark.parametrize("dv", [False, True], ids=["copy_on_write", "deletion_vectors"])
def test_a_clause_condition_is_evaluated_on_the_rows_left_to_it(tmp_path, dv):
    """Clauses are tried in order, as Spark's CASE: a later clause's condition that would fail on
    a row an earlier clause took ('bad' cast to INT) fails nothing."""
    schema = pa.schema([("id", pa.int64()), ("i", pa.int32())])
    t = deltatx.create_table(str(tmp_path / "t"), schema, properties={"delta.enableDeletionVectors": str(dv).lower()})
    t.append(pa.table({"id": [1, 2], "i": [0, 0]}, schema=schema))
    source = pa.table({"id": [1, 2, 8, 9], "s": ["bad", "5", "bad", "6"]})
    t.merge(source, on="t.id = s.id") \
        .when_matched_update(set={"i": "-1"}, condition="s.s = 'bad'") \
        .when_matched_update(set={"i": "s.s"}, condition="CAST(s.s AS INT) > 0") \
        .when_not_matched_insert(values={"id": "s.id", "i": "-1"}, condition="s.s = 'bad'") \
        .when_not_matched_insert(values={"id": "s.id", "i": "s.s"}, condition="CAST(s.s AS INT) > 0").execute()
    assert sorted(deltatx.Table(t.uri).to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "i": -1}, {"id": 2, "i": 5}, {"id": 8, "i": -1}, {"id": 9, "i": 6}]


def test_insert_and_update_keys_may_be_backquoted(tmp_path):
    """delta-spark's ``whenNotMatchedInsert(values={"`my col`": ...})``: a backquoted key names
    the column (with column mapping, names may hold spaces); before, INSERT refused it."""
    schema = pa.schema([("id", pa.int64()), ("my col", pa.int64()), ("x", pa.int64())])
    t = deltatx.create_table(str(tmp_path / "t"), schema, properties={"delta.columnMapping.mode": "name"})
    t.append(pa.table({"id": [1], "my col": [10], "x": [0]}, schema=schema))
    source = pa.table({"id": [1, 2], "v": [11, 22]})
    (t.merge(source, "t.id = s.id").when_matched_update(set={"`my col`": "s.v"})
     .when_not_matched_insert(values={"`id`": "s.id", "`my col`": "s.v", "t.`x`": "s.v + 1"}).execute())
    assert t.to_arrow().sort_by("id").to_pylist() == [{"id": 1, "my col": 11, "x": 0}, {"id": 2, "my col": 22, "x": 23}]
    with pytest.raises(errors.PredicateError, match="unknown column .`nope`."):
        t.merge(source, "t.id = s.id").when_not_matched_insert(values={"id": "s.id", "`nope`": "s.v"}).execute()
    assert t.version == 2


def test_an_insert_key_naming_a_column_with_a_backquote_in_its_name(tmp_path):
    """A column named a`b (column mapping): the key as it is names it, as in UPDATE."""
    schema = pa.schema([("id", pa.int64()), ("a`b", pa.int64())])
    t = deltatx.create_table(str(tmp_path / "t"), schema, properties={"delta.columnMapping.mode": "name"})
    t.merge(pa.table({"id": [2], "v": [20]}), "t.id = s.id").when_not_matched_insert(
        values={"id": "s.id", "a`b": "s.v"}).execute()
    assert t.to_arrow().to_pylist() == [{"id": 2, "a`b": 20}]


def test_dml_with_text_no_number_spark_reads_raises_and_writes_nothing(tmp_path):
    """``'0x10'`` and ``'1_6'`` are no numbers to Spark (Arrow and Python read both as 16): a
    DELETE or UPDATE with them raises PredicateError and commits nothing."""
    t = deltatx.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("d", pa.float64())]))
    t.append(pa.table({"id": [16, 5], "d": [16.0, 5.0]}))
    with pytest.raises(errors.PredicateError, match="0x10"):
        t.delete("id = '0x10'")
    with pytest.raises(errors.PredicateError, match="1_6"):
        t.update("d = '1_6'", set={"d": "0"})
    assert t.version == 1 and sorted(t.to_arrow()["id"].to_pylist()) == [5, 16]
