"""Merge-on-read DML on deletion-vector tables, and row tracking through every rewrite."""

from __future__ import annotations

import json
import os

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from tablefiles import data_files

import deltatx
from deltatx.errors import InvalidPropertyError, SchemaMismatchError

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("v", pa.int64())])
DV = {"delta.enableDeletionVectors": "true"}
RT = {"delta.enableRowTracking": "true"}
ROWS = ["id", "v", "_metadata.row_id", "_metadata.row_commit_version"]


def make(uri: str, props: dict[str, str], files: int = 2, rows: int = 50, partitioned: bool = False) -> deltatx.Table:
    table = deltatx.create_table(uri, SCHEMA, partition_by=["part"] if partitioned else None, properties=props)
    for k in range(files):
        ids = list(range(k * rows, (k + 1) * rows))
        table.append(pa.table({"id": ids, "part": [f"p{i % 2}" for i in ids], "v": [0] * rows}, schema=SCHEMA))
    return deltatx.Table(uri)


def commit_lines(uri: str, version: int) -> list[dict]:
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "rb") as fh:
        return [orjson.loads(line) for line in fh.read().splitlines() if line.strip()]


def by_id(table: pa.Table) -> dict[int, dict]:
    return {r["id"]: r for r in table.to_pylist()}


def test_create_with_dvs_and_row_tracking_names_the_features(table_uri):
    table = make(table_uri, {**DV, **RT}, files=1)
    assert "deletionVectors" in table.protocol.reader_features
    assert {"deletionVectors", "rowTracking", "domainMetadata"} <= set(table.protocol.writer_features)
    props = table.properties
    assert props["delta.rowTracking.materializedRowIdColumnName"].startswith("_row-id-col-")
    assert props["delta.rowTracking.materializedRowCommitVersionColumnName"].startswith("_row-commit-version-col-")


def test_delete_marks_rows_in_a_dv_and_rewrites_nothing(table_uri):
    table = make(table_uri, DV)
    before = data_files(table_uri)
    result = table.delete("id = 3 OR id = 60")
    assert data_files(table_uri) == before  # no data file written
    assert result.metrics["numDeletedRows"] == 2 and result.metrics["numDeletionVectorsAdded"] == 2
    lines = commit_lines(table_uri, result.version)
    removes = [line["remove"] for line in lines if "remove" in line]
    adds = [line["add"] for line in lines if "add" in line]
    assert sorted(r["path"] for r in removes) == sorted(a["path"] for a in adds)  # remove+add of the same path
    for add in adds:
        stats = json.loads(add["stats"])
        assert stats["tightBounds"] is False and stats["numRecords"] == 50
        assert add["deletionVector"]["cardinality"] == 1
    assert sorted(deltatx.Table(table_uri).to_arrow().column("id").to_pylist()) == \
        [i for i in range(100) if i not in (3, 60)]


def test_a_dv_delete_keeps_decimal_bounds_exact(table_uri):
    """The re-add's stats are the old ones with tightBounds false, byte for byte: a DECIMAL bound
    read as a float and written back would move inside the data and skip matching files."""
    from decimal import Decimal

    schema = pa.schema([("id", pa.int64()), ("d", pa.decimal128(38, 10))])
    t = deltatx.create_table(table_uri, schema, properties={"delta.enableDeletionVectors": "true"})
    low, high = Decimal("12345678.0123456789"), Decimal("99999999.0000000001")
    t.append(pa.table({"id": [1, 2, 3], "d": [low, high, Decimal("20000000")]}, schema=schema))
    t.delete(where="id = 3")
    stats = t.files()["stats"][0].as_py()
    assert '"tightBounds":false' in stats
    assert "12345678.0123456789" in stats and "99999999.0000000001" in stats
    assert t.to_arrow(where="d = 12345678.0123456789")["id"].to_pylist() == [1]
    assert t.to_arrow(where="d > 99999999")["id"].to_pylist() == [2]


def test_a_second_delete_unions_the_dv_and_names_the_old_one_in_the_remove(table_uri):
    table = make(table_uri, DV, files=1)
    first = table.delete("id = 1")
    old = [a["add"]["deletionVector"] for a in commit_lines(table_uri, first.version) if "add" in a][0]
    second = deltatx.Table(table_uri).delete("id = 2")
    lines = commit_lines(table_uri, second.version)
    remove = [a["remove"] for a in lines if "remove" in a][0]
    add = [a["add"] for a in lines if "add" in a][0]
    assert remove["deletionVector"] == old
    assert add["deletionVector"]["cardinality"] == 2
    assert second.metrics["numDeletionVectorsUpdated"] == 1
    # Delta counts an updated DV as removed and added too (DeletionVectorsSuite)
    assert (second.metrics["numDeletionVectorsAdded"], second.metrics["numDeletionVectorsRemoved"]) == (1, 1)


def test_a_file_whose_rows_are_all_deleted_is_removed_outright(table_uri):
    table = make(table_uri, DV)
    result = table.delete("id < 50")
    lines = commit_lines(table_uri, result.version)
    assert [line for line in lines if "add" in line] == []
    assert len([line for line in lines if "remove" in line]) == 1
    assert deltatx.Table(table_uri).files().num_rows == 1


def test_several_dvs_of_one_commit_share_one_file(table_uri):
    table = make(table_uri, DV, files=3, rows=2000)
    result = table.delete("id % 3 = 0")  # big bitmaps (667 scattered rows each): stored in a file, not inline
    adds = [line["add"] for line in commit_lines(table_uri, result.version) if "add" in line]
    dvs = [a["deletionVector"] for a in adds]
    assert {d["storageType"] for d in dvs} == {"u"}
    assert len({d["pathOrInlineDv"] for d in dvs}) == 1 and len({d["offset"] for d in dvs}) == 3
    assert len([n for n in os.listdir(table_uri) if n.startswith("deletion_vector_")]) == 1
    assert sorted(deltatx.Table(table_uri).to_arrow().column("id").to_pylist()) == \
        [i for i in range(6000) if i % 3]


def test_update_and_merge_write_only_the_changed_rows(table_uri):
    table = make(table_uri, DV)
    result = table.update("id = 7", set={"v": "v + 5"})
    assert result.metrics["numUpdatedRows"] == 1 and result.metrics["numCopiedRows"] == 0
    new = [line["add"] for line in commit_lines(table_uri, result.version)
           if "add" in line and "deletionVector" not in line["add"]]
    assert len(new) == 1 and json.loads(new[0]["stats"])["numRecords"] == 1
    source = pa.table({"id": [8, 9, 500], "v": [1, -1, 2]})
    (deltatx.Table(table_uri).merge(source, on="t.id = s.id")
        .when_matched_delete("s.v < 0").when_matched_update({"v": "s.v"})
        .when_not_matched_insert({"id": "s.id", "v": "s.v", "part": "'p9'"}).execute())
    rows = by_id(deltatx.Table(table_uri).to_arrow())
    assert rows[7]["v"] == 5 and rows[8]["v"] == 1 and 9 not in rows and rows[500]["v"] == 2
    assert len(rows) == 100


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_row_ids_are_stable_through_update_merge_optimize_and_purge(table_uri, partitioned):
    table = make(table_uri, {**DV, **RT}, files=3, rows=20, partitioned=partitioned)
    start = by_id(table.to_arrow(columns=ROWS))
    assert sorted(r["_metadata.row_id"] for r in start.values()) == list(range(60))
    updated = table.update("id = 5", set={"v": "1"})
    (deltatx.Table(table_uri).merge(pa.table({"id": [6, 1000], "v": [2, 3]}), on="t.id = s.id")
        .when_matched_update({"v": "s.v"}).when_not_matched_insert({"id": "s.id", "v": "s.v", "part": "'p0'"})
        .execute())
    deltatx.Table(table_uri).delete("id = 7")
    deltatx.Table(table_uri).optimize()
    deltatx.Table(table_uri).delete("id = 8")
    deltatx.Table(table_uri).reorg(purge=True)
    final = by_id(deltatx.Table(table_uri).to_arrow(columns=ROWS))
    assert deltatx.Table(table_uri).files()["deletionVector"].null_count == deltatx.Table(table_uri).files().num_rows
    for i, row in start.items():
        if i in (7, 8):
            assert i not in final
            continue
        assert final[i]["_metadata.row_id"] == row["_metadata.row_id"]  # never changes for a survivor
    ids = [r["_metadata.row_id"] for r in final.values()]
    assert len(ids) == len(set(ids)) and final[1000]["_metadata.row_id"] >= 60
    assert final[5]["_metadata.row_commit_version"] == updated.version  # changed rows: the version that changed them
    assert final[0]["_metadata.row_commit_version"] == start[0]["_metadata.row_commit_version"]


def test_row_ids_of_an_appended_file_follow_base_row_id_and_the_watermark(table_uri):
    table = make(table_uri, RT, files=2, rows=10)
    files = table.files().sort_by("baseRowId")
    assert files["baseRowId"].to_pylist() == [0, 10]
    assert files["defaultRowCommitVersion"].to_pylist() == [1, 2]
    assert json.loads(table.snapshot.domains["delta.rowTracking"].configuration) == {"rowIdHighWaterMark": 19}


def test_enabling_row_tracking_later_backfills_every_file(table_uri):
    table = make(table_uri, {}, files=3, rows=10)
    table.set_properties(RT)
    table = deltatx.Table(table_uri)
    operations = [h["operation"] for h in table.history()][:3]
    assert operations == ["SET TBLPROPERTIES", "ROW TRACKING BACKFILL", "UPGRADE PROTOCOL"]
    assert table.files()["baseRowId"].null_count == 0
    ids = by_id(table.to_arrow(columns=ROWS))
    assert sorted(r["_metadata.row_id"] for r in ids.values()) == list(range(30))
    table.update("id = 4", set={"v": "9"})
    assert by_id(deltatx.Table(table_uri).to_arrow(columns=ROWS))[4]["_metadata.row_id"] == ids[4]["_metadata.row_id"]


def test_turning_dvs_on_later_upgrades_and_off_again_stops_new_dvs(table_uri):
    table = make(table_uri, {}, files=1)
    table.set_properties(DV)
    assert "deletionVectors" in deltatx.Table(table_uri).protocol.reader_features
    deltatx.Table(table_uri).delete("id = 1")
    assert deltatx.Table(table_uri).files()["deletionVector"].null_count == 0
    deltatx.Table(table_uri).set_properties({"delta.enableDeletionVectors": "false"})
    before = data_files(table_uri)
    deltatx.Table(table_uri).delete("id = 2")  # copy-on-write again: the file is rewritten, its DV purged
    assert data_files(table_uri) != before
    assert deltatx.Table(table_uri).files()["deletionVector"].null_count == 1
    assert sorted(deltatx.Table(table_uri).to_arrow().column("id").to_pylist()) == [0] + list(range(3, 50))


def test_bad_property_value_is_refused_and_nothing_is_written(table_uri):
    table = make(table_uri, {}, files=1)
    with pytest.raises(InvalidPropertyError):
        table.set_properties({"delta.enableDeletionVectors": "maybe"})
    assert deltatx.Table(table_uri).version == 1


def test_optimize_purges_heavily_deleted_files_and_vacuum_drops_unused_dv_files(table_uri, monkeypatch):
    from deltatx.tables.ops import vacuum as vacuum_module

    table = make(table_uri, DV, files=1, rows=3000)
    table.delete("id % 2 = 0")  # half the rows, scattered: too big to inline, a DV file
    [dv_file] = [n for n in os.listdir(table_uri) if n.startswith("deletion_vector_")]
    result = deltatx.Table(table_uri).optimize()  # one file alone, but its DV deletes > 5 % of it
    assert result.metrics["numDeletionVectorsRemoved"] == 1
    assert result.metrics["numDeletionVectorRowsRemoved"] == 1500  # the DV's cardinality, as Delta counts
    assert deltatx.Table(table_uri).files()["deletionVector"].null_count == 1
    monkeypatch.setattr(vacuum_module, "now_ms", lambda: 4_000_000_000_000)
    deleted = deltatx.Table(table_uri).vacuum(retention_hours=0, enforce_retention_duration=False)
    assert dv_file in deleted and not os.path.exists(os.path.join(table_uri, dv_file))
    assert sorted(deltatx.Table(table_uri).to_arrow().column("id").to_pylist()) == list(range(1, 3000, 2))


def test_reorg_purge_rewrites_exactly_the_files_with_dvs(table_uri):
    table = make(table_uri, DV, files=3)
    table.delete("id = 1")
    result = deltatx.Table(table_uri).reorg(purge=True)
    assert result.operation == "REORG" and result.metrics["numRemovedFiles"] == 1
    files = deltatx.Table(table_uri).files()
    assert files.num_rows == 3 and files["deletionVector"].null_count == 3
    assert deltatx.Table(table_uri).to_arrow().num_rows == 149
    with pytest.raises(ValueError):
        deltatx.Table(table_uri).reorg(purge=False)


def test_transaction_reads_see_its_own_dv_deletes(table_uri):
    table = make(table_uri, DV, files=1)
    with table.transaction() as tx:
        tx.delete("id = 1")
        assert 1 not in tx.read().column("id").to_pylist()
        tx.delete("id = 2")  # a second DV change of the same file in one transaction
    rows = deltatx.Table(table_uri).to_arrow().column("id").to_pylist()
    assert 1 not in rows and 2 not in rows and len(rows) == 48
    adds = [line["add"] for line in commit_lines(table_uri, 2) if "add" in line]
    assert len(adds) == 1 and adds[0]["deletionVector"]["cardinality"] == 2
    assert os.path.exists(os.path.join(table_uri, adds[0]["path"]))  # the committed file is never deleted


def test_an_aborted_dv_delete_leaves_nothing_behind(table_uri):
    table = make(table_uri, DV, files=1, rows=300)
    before = sorted(os.listdir(table_uri))
    tx = table.transaction()
    tx.delete("id % 2 = 0")
    tx.abort()
    assert sorted(os.listdir(table_uri)) == before and deltatx.Table(table_uri).version == 1
    assert deltatx.Table(table_uri).to_arrow().num_rows == 300


def test_metadata_columns_need_no_row_tracking_for_positions(table_uri):
    table = make(table_uri, DV, files=1, rows=5)
    table.delete("id = 2")
    rows = deltatx.Table(table_uri).to_arrow(columns=["id", "_metadata.row_index"])
    assert rows.column("_metadata.row_index").to_pylist() == [0, 1, 3, 4]
    assert pc.all(pc.equal(rows.column("id"), rows.column("_metadata.row_index"))).as_py()
    # no row tracking: no row ids to give (Spark's _metadata has no such field then)
    for column in ("_metadata.row_id", "_metadata.row_commit_version"):
        with pytest.raises(SchemaMismatchError, match="needs row tracking"):
            deltatx.Table(table_uri).to_arrow(columns=["id", column])
        with pytest.raises(SchemaMismatchError, match="needs row tracking"):
            deltatx.Table(table_uri).transaction().read(columns=["id", column])


@pytest.mark.parametrize("props", [DV, {**DV, **RT}], ids=["dv", "dv+row-tracking"])
def test_dml_on_rows_this_transaction_appended_keeps_its_file(table_uri, props):
    """A DELETE/UPDATE of rows the same transaction appended marks them in a DV of that new file:
    the file stays on disk and the commit's add names it with the DV (it used to be deleted)."""
    table = make(table_uri, props, files=1, rows=10)
    with table.transaction() as tx:
        tx.append(pa.table({"id": [100, 101, 102], "part": ["p0"] * 3, "v": [0] * 3}, schema=SCHEMA))
        tx.delete(where="id = 101")
        tx.update(where="id = 102", set={"v": "v + 5"})
    after = deltatx.Table(table_uri)
    rows = by_id(after.to_arrow())
    assert sorted(rows) == list(range(10)) + [100, 102] and rows[102]["v"] == 5
    assert all(os.path.exists(os.path.join(table_uri, p)) for p in after.files()["path"].to_pylist())
    added = [line["add"] for line in commit_lines(table_uri, after.version) if "add" in line]
    assert sum(a.get("deletionVector") is not None for a in added) == 1


def test_an_aborted_transaction_deletes_its_appended_file_after_a_dv_delete(table_uri):
    table = make(table_uri, DV, files=1, rows=10)
    before = set(data_files(table_uri))
    tx = table.transaction()
    tx.append(pa.table({"id": [100, 101], "part": ["p0"] * 2, "v": [0] * 2}, schema=SCHEMA))
    tx.delete(where="id = 101")
    tx.abort()
    assert set(data_files(table_uri)) == before


def _dv_storage(uri: str, version: int) -> list[str]:
    return [line["add"]["deletionVector"]["storageType"] for line in commit_lines(uri, version)
            if "add" in line and line["add"].get("deletionVector")]


def test_small_dvs_are_inline_up_to_one_kib_by_default(table_uri):
    table = make(table_uri, DV, files=1, rows=3000)
    first = table.delete("id % 10 = 0")  # 300 scattered rows: ~600 bytes
    assert _dv_storage(table_uri, first.version) == ["i"]
    assert not [n for n in os.listdir(table_uri) if n.startswith("deletion_vector_")]
    second = deltatx.Table(table_uri).delete("id % 10 = 1")  # 600 rows in the union: over 1 KiB
    assert _dv_storage(table_uri, second.version) == ["u"]
    assert sorted(deltatx.Table(table_uri).to_arrow().column("id").to_pylist()) == \
        [i for i in range(3000) if i % 10 not in (0, 1)]


@pytest.mark.parametrize("limit, storage", [("0", "u"), ("64", "u"), ("4096", "i")])
def test_the_inline_limit_is_a_table_property(table_uri, limit, storage):
    table = make(table_uri, {**DV, "deltatx.deletionVectors.inlineMaxBytes": limit}, files=1, rows=3000)
    result = table.delete("id % 5 = 0")  # 600 scattered rows: ~1.2 KB
    assert _dv_storage(table_uri, result.version) == [storage]
    assert deltatx.Table(table_uri).to_arrow().num_rows == 2400


@pytest.mark.parametrize("bad", ["-1", "lots", "1.5"])
def test_a_bad_inline_limit_is_refused_and_writes_nothing(table_uri, bad):
    table = make(table_uri, DV, files=1)
    version = table.version
    with pytest.raises(InvalidPropertyError, match="inlineMaxBytes"):
        table.set_properties({"deltatx.deletionVectors.inlineMaxBytes": bad})
    assert deltatx.Table(table_uri).version == version


def test_one_transaction_sees_its_own_staged_files_after_every_step(table_uri):
    """Staged adds and removes reach ``current_files()`` in the order they were staged (they are
    applied lazily, when the files are next read)."""
    table = make(table_uri, DV, files=1, rows=10)
    committed = table.files()["path"].to_pylist()
    with table.transaction() as tx:
        tx.append(pa.table({"id": [100, 101, 102], "part": ["p0"] * 3, "v": [0] * 3}, schema=SCHEMA))
        own = [p for p in tx.current_files()["path"].to_pylist() if p not in committed]
        assert len(own) == 1
        tx.delete("id = 101 OR id = 3")  # a DV on the committed file and on this txn's own file
        files = tx.current_files()
        assert sorted(files["path"].to_pylist()) == sorted(committed + own)  # each path once
        assert files["deletionVector"].null_count == 0
        assert sorted(tx.read()["id"].to_pylist()) == [0, 1, 2, 4, 5, 6, 7, 8, 9, 100, 102]
        tx.delete("id >= 100")  # every row of its own file: the file goes
        assert tx.current_files()["path"].to_pylist() == committed
        tx.append(pa.table({"id": [200], "part": ["p1"], "v": [0]}, schema=SCHEMA))
        assert tx.current_files().num_rows == 2
    after = deltatx.Table(table_uri)
    assert sorted(after.to_arrow()["id"].to_pylist()) == [0, 1, 2, 4, 5, 6, 7, 8, 9, 200]
    assert after.files().num_rows == 2


def test_loose_stats_edits_only_the_top_level_key():
    """A column may be named tightBounds: its bounds stay as they are, the file's flag turns false."""
    from deltatx.tables.row_level import loose_stats

    column_named_so = '{"numRecords":3,"minValues":{"tightBounds":false},"maxValues":{"tightBounds":true}}'
    flagged = column_named_so[:-1] + ',"tightBounds":true}'
    for stats in (column_named_so, flagged):
        out = orjson.loads(loose_stats(stats))
        assert out["tightBounds"] is False
        assert out["minValues"] == {"tightBounds": False} and out["maxValues"] == {"tightBounds": True}
    assert loose_stats('{"tightBounds":false,"numRecords":1}') == '{"tightBounds":false,"numRecords":1}'


@pytest.mark.parametrize("case", ["fresh", "all deleted", "where matches no file"])
def test_reorg_purge_with_nothing_to_purge_commits_nothing(tmp_path, case):
    """As OPTIMIZE with nothing to do: a no-op (was a raw TypeError)."""
    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    t = deltatx.create_table(uri, schema, partition_by=["p"], properties={"delta.enableDeletionVectors": "true"})
    if case != "fresh":
        t.append(pa.table({"id": [1, 2], "p": ["a", "a"]}, schema=schema))
    if case == "all deleted":
        t.delete("id > 0")
    before = t.version
    result = t.reorg(purge=True, where="p = 'b'") if case == "where matches no file" else t.reorg(purge=True)
    assert result.metrics["numRemovedFiles"] == 0 and result.metrics["numAddedFiles"] == 0
    assert deltatx.Table(uri).version == before


@pytest.mark.parametrize("predicate", ["TRUE", "1 = 1", "NOT FALSE", "TRUE AND TRUE", "id > 10 OR TRUE"])
def test_a_predicate_without_columns_selects_every_row(table_uri, predicate):
    """A predicate naming no column read no column of a deletion-vector file, and a table of no
    columns has no rows: DELETE deleted nothing and replaceWhere kept the old rows (an append)."""
    from duckdb_delta import read_duckdb

    t = make(table_uri, {**DV, **RT})
    assert t.to_arrow(where=predicate, columns=["_metadata.row_id"]).num_rows == 100
    assert t.delete(where=predicate).metrics["numDeletedRows"] == 100
    assert deltatx.Table(table_uri).to_arrow().num_rows == 0
    t.append(pa.table({"id": [1, 2], "part": ["a", "b"], "v": [0, 0]}, schema=SCHEMA))
    t.overwrite(pa.table({"id": [10], "part": ["a"], "v": [1]}, schema=SCHEMA), where=predicate)
    assert deltatx.Table(table_uri).to_arrow(columns=["id"]).to_pylist() == [{"id": 10}]
    assert read_duckdb(table_uri)["id"].to_pylist() == [10]
    assert t.delete(where="FALSE").metrics.get("numDeletedRows", 0) == 0
