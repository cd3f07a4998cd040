"""MERGE ... with_schema_evolution(): source columns the target lacks join the table, through * clauses
and through explicit assignments that name them."""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import MetadataChangedException, PredicateError

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("v", pa.float64())])


def _table(uri: str) -> deltatx.Table:
    table = deltatx.create_table(uri, SCHEMA, partition_by=["part"])
    table.append(pa.table({"id": [1, 2, 3], "part": [0, 0, 1], "v": [1.0, 2.0, 3.0]}, schema=SCHEMA))
    return table


def _source() -> pa.Table:
    return pa.table({"id": [2, 4], "part": pa.array([0, 1], pa.int32()), "v": [20.0, 40.0],
                     "tag": ["upd", "ins"], "score": pa.array([7, 9], pa.int16())})


def _rows(uri: str) -> dict[int, dict]:
    return {r["id"]: r for r in deltatx.Table(uri).to_arrow().to_pylist()}


def test_star_clauses_add_the_new_columns(table_uri):
    table = _table(table_uri)
    result = (table.merge(_source(), on="t.id = s.id").with_schema_evolution()
              .when_matched_update_all().when_not_matched_insert_all().execute())
    evolved = deltatx.Table(table_uri)
    assert evolved.schema.names == ["id", "part", "v", "tag", "score"]
    assert evolved.schema.field("score").type == pa.int16() and evolved.schema.field("tag").nullable
    assert evolved.partition_columns == ["part"]
    rows = _rows(table_uri)
    assert rows[2] == {"id": 2, "part": 0, "v": 20.0, "tag": "upd", "score": 7}  # updated: carries them
    assert rows[4] == {"id": 4, "part": 1, "v": 40.0, "tag": "ins", "score": 9}  # inserted: carries them
    assert rows[1]["tag"] is None and rows[3]["score"] is None                  # untouched: null
    assert result.metrics["numTargetRowsUpdated"] == 1 and result.metrics["numTargetRowsInserted"] == 1
    # the files written before the change still read, with nulls for the new columns
    assert evolved.to_arrow(where="tag IS NULL", columns=["id"])["id"].to_pylist() in ([1, 3], [3, 1])


def test_without_evolution_or_new_names_the_schema_stays(table_uri):
    table = _table(table_uri)
    table.merge(_source(), on="t.id = s.id").when_matched_update_all().when_not_matched_insert_all().execute()
    assert deltatx.Table(table_uri).schema.names == ["id", "part", "v"]  # extra source columns ignored

    (table.merge(_source(), on="t.id = s.id").with_schema_evolution()
     .when_matched_update(set={"v": "s.v + 1"}).execute())
    assert deltatx.Table(table_uri).schema.names == ["id", "part", "v"]  # SET of existing columns only
    with pytest.raises(PredicateError, match="unknown column 'tag'"):  # no evolution: nothing to add it
        table.merge(_source(), on="t.id = s.id").when_matched_update(set={"tag": "s.tag"}).execute()
    with pytest.raises(PredicateError, match="unknown column 'nope'"):  # the source has no such column
        (table.merge(_source(), on="t.id = s.id").with_schema_evolution()
         .when_matched_update(set={"nope": "s.tag"}).execute())
    assert deltatx.Table(table_uri).schema.names == ["id", "part", "v"]


def test_explicit_assignments_add_the_columns_they_name(table_uri):
    """Delta's MergeIntoSchemaEvolutionSuite: an UPDATE SET / INSERT VALUES key the target lacks
    joins the table as the source's column of that name (its type), whatever expression sets it;
    each clause adds only the columns it names, in the source's order."""
    table = _table(table_uri)
    (table.merge(_source(), on="t.id = s.id").with_schema_evolution()
     .when_matched_update(set={"t.score": "s.score"})
     .when_not_matched_insert(values={"id": "s.id", "part": "s.part", "tag": "concat(s.tag, '!')"})
     .execute())
    evolved = deltatx.Table(table_uri)
    assert evolved.schema.names == ["id", "part", "v", "tag", "score"]  # the source's order
    assert evolved.schema.field("score").type == pa.int16() and evolved.schema.field("tag").type == pa.string()
    rows = _rows(table_uri)
    assert rows[2] == {"id": 2, "part": 0, "v": 2.0, "tag": None, "score": 7}   # the UPDATE set score only
    assert rows[4] == {"id": 4, "part": 1, "v": None, "tag": "ins!", "score": None}  # the INSERT set tag only
    assert rows[1]["tag"] is None and rows[1]["score"] is None


def test_a_new_column_may_be_set_from_another_source_column(table_uri):
    table = _table(table_uri)
    (table.merge(_source(), on="t.id = s.id").with_schema_evolution()
     .when_matched_update(set={"score": "s.id * 100"}).execute())
    evolved = deltatx.Table(table_uri)
    assert evolved.schema.names == ["id", "part", "v", "score"]  # tag is not named: not added
    assert evolved.schema.field("score").type == pa.int16()     # the source's score type
    assert _rows(table_uri)[2]["score"] == 200


def test_a_concurrent_writer_of_the_old_schema_fails(table_uri):
    table = _table(table_uri)
    with table.transaction() as tx:  # reads version 1, the old schema
        tx.append(pa.table({"id": [9], "part": pa.array([1], pa.int32()), "v": [9.0]}, schema=SCHEMA))
        (table.merge(_source(), on="t.id = s.id").with_schema_evolution()
         .when_not_matched_insert_all().execute())  # commits version 2 with a wider schema
        with pytest.raises(MetadataChangedException) as info:
            tx.commit()
    assert info.value.version == 2
    assert 9 not in _rows(table_uri)


def test_transaction_merge_evolves_too(table_uri):
    table = _table(table_uri)
    with table.transaction() as tx:
        tx.merge(_source(), on="t.id = s.id").with_schema_evolution().when_not_matched_insert_all().execute()
    assert deltatx.Table(table_uri).schema.names == ["id", "part", "v", "tag", "score"]
    assert _rows(table_uri)[4]["tag"] == "ins"
