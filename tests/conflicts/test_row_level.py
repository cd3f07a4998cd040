"""The row-level rules of the checker (conflicts/row_level.py) and the row-tracking rebase (#5, #7,
#8), each as a pure unit test: hand-built transactions, winners and loaded bitmaps, no I/O."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from conflict_builders import S, WS, PROTOCOL, file_row, metadata, predicate, remove_row, winner
from pyroaring import BitMap64

from deltatx.conflicts import ReadSet, TransactionInfo, check_commit
from deltatx.conflicts.row_level import FileRows, RowLevelState, WinnerRows, dv_unique_id, load_request
from deltatx.errors import ConcurrentAppendException, ConcurrentDeleteDeleteException, ConcurrentDeleteReadException
from deltatx.isolation import IsolationLevel
from deltatx.txnlog import row_tracking
from deltatx.txnlog.actions import FILE_SCHEMA, REMOVE_SCHEMA, DomainMetadata, Protocol, file_actions_table

F = "f.parquet"
RT_PROTOCOL = Protocol(3, 7, ("deletionVectors",), ("deletionVectors", "domainMetadata", "rowTracking"))


def dv(name: str, cardinality: int) -> dict:
    return {"storageType": "u", "pathOrInlineDv": name.ljust(20, "0"), "offset": 1, "sizeInBytes": 40,
            "cardinality": cardinality}


def add(path: str, descriptor: dict | None = None, **extra) -> dict:
    row = file_row(path, None, range(0, 100))
    row["deletionVector"] = descriptor
    row.update(extra)
    return row


def rm(path: str, descriptor: dict | None = None, data_change: bool = True, **extra) -> dict:
    row = remove_row(path, None, data_change=data_change)
    row["deletionVector"] = descriptor
    row.update(extra)
    return row


def table(rows, schema) -> pa.Table:
    return file_actions_table(list(rows), schema)


def dml(changed: list[int], read: list[int] | None = None, level: IsolationLevel = WS,
        base: dict | None = None, base_rows: list[int] = (), row_ids: bool = True, **kw) -> TransactionInfo:
    """A DML that changed ``changed`` rows of F (DV from ``base`` to base ∪ changed)."""
    positions = np.array([p for p in range(100) if p not in base_rows], dtype=np.int64)
    fr = FileRows(path=F, base_dv=base, base_deleted=BitMap64(base_rows), num_records=100,
                  changed=BitMap64(changed), read=BitMap64(changed + list(read or [])),
                  row_positions=positions if row_ids else None, row_ids=positions + 1000 if row_ids else None)
    mine = dv("mine", len(base_rows) + len(changed))
    return TransactionInfo(
        read_version=5, read_set=ReadSet(predicates=(predicate("id = 1"),), files=frozenset({F})),
        read_metadata=metadata(partitioned=False), read_protocol=kw.pop("protocol", PROTOCOL),
        adds=table([add(F, mine)] if changed else [], FILE_SCHEMA),
        removes=table([rm(F, base)] if changed else [], REMOVE_SCHEMA),
        isolation_level=level, operation="DELETE", row_level=RowLevelState(files={F: fr}), **kw)


def dv_winner(deleted: list[int], base: dict | None = None, version: int = 6):
    new = dv(f"w{version}", len(deleted))
    won = winner(version, "DELETE", add_rows=[add(F, new)], remove_rows=[rm(F, base)])
    return won, WinnerRows(bitmaps={(F, dv_unique_id(new)): BitMap64(deleted)})


def test_different_rows_of_one_file_rebase_onto_the_union():
    won, loaded = dv_winner([7])
    rebased = check_commit(dml([3]), won, loaded)
    assert rebased.removes.column("deletionVector")[0].as_py()["pathOrInlineDv"].startswith("w6")
    assert set(rebased.row_level.pending[F]) == {3, 7}
    assert rebased.row_level.resolved_for(6) == frozenset({F})
    # the next winner is compared with what this one left
    assert set(rebased.row_level.files[F].base_deleted) == {7}


def test_the_same_row_is_a_delete_delete_conflict_naming_file_and_row_id():
    won, loaded = dv_winner([3, 9])
    with pytest.raises(ConcurrentDeleteDeleteException, match="row id 1003") as info:
        check_commit(dml([3]), won, loaded)
    assert F in info.value.conflict and info.value.version == 6


@pytest.mark.parametrize("level, conflicts", [(S, True), (WS, False)])
def test_a_read_row_deleted_by_the_winner_conflicts_only_under_serializable(level, conflicts):
    won, loaded = dv_winner([40])
    txn = dml([3], read=[40], level=level)
    if conflicts:
        with pytest.raises(ConcurrentDeleteReadException, match="row id 1040"):
            check_commit(txn, won, loaded)
    else:
        assert set(check_commit(txn, won, loaded).row_level.pending[F]) == {3, 40}


def test_a_winner_that_removed_another_dv_of_the_file_is_left_to_the_file_level():
    won, loaded = dv_winner([7], base=dv("other", 1))
    with pytest.raises(ConcurrentDeleteReadException, match="removed a file this DELETE read"):
        check_commit(dml([3]), won, loaded)


def test_a_union_that_deletes_every_row_removes_the_file():
    won, loaded = dv_winner(list(range(1, 100)))
    rebased = check_commit(dml([0]), won, loaded)
    assert rebased.adds.num_rows == 0 and rebased.removes.num_rows == 1
    assert F not in rebased.row_level.pending


def test_read_only_file_touched_by_the_winner_is_settled_without_conflict():
    won, loaded = dv_winner([7])
    rebased = check_commit(dml([], read=[], level=S), won, loaded)
    assert rebased.row_level.resolved_for(6) == frozenset({F})


def test_dml_follows_its_rows_into_a_concurrent_compaction_by_row_id():
    new_file = file_row("g.parquet", None, range(0, 100), data_change=False)
    won = winner(6, "OPTIMIZE", add_rows=[new_file], remove_rows=[rm(F, None, data_change=False)])
    # the compaction wrote F's rows in reverse order: row id 1003 now sits at position 96
    loaded = WinnerRows(row_ids={"g.parquet": np.arange(1099, 999, -1, dtype=np.int64)})
    txn = dml([3])
    request = load_request(txn.row_level, won, txn.adds)
    assert request.row_id_files.column("path").to_pylist() == ["g.parquet"]
    rebased = check_commit(txn, won, loaded)
    assert rebased.removes.column("path").to_pylist() == ["g.parquet"]
    assert rebased.adds.column("path").to_pylist() == ["g.parquet"]
    assert set(rebased.row_level.pending["g.parquet"]) == {96}


def test_rows_missing_from_the_compaction_fall_back_to_the_file_level_conflict():
    won = winner(6, "OPTIMIZE", add_rows=[file_row("g.parquet", None, range(0, 99), data_change=False)],
                 remove_rows=[rm(F, None, data_change=False)])
    loaded = WinnerRows(row_ids={"g.parquet": np.arange(1004, 1100, dtype=np.int64)})
    with pytest.raises(ConcurrentDeleteReadException, match="removed a file"):
        check_commit(dml([3]), won, loaded)


def test_without_row_ids_a_concurrent_compaction_still_conflicts():
    won = winner(6, "OPTIMIZE", add_rows=[file_row("g.parquet", None, range(0, 100), data_change=False)],
                 remove_rows=[rm(F, None, data_change=False)])
    with pytest.raises(ConcurrentDeleteReadException, match="removed a file"):
        check_commit(dml([3], row_ids=False), won, WinnerRows(row_ids={"g.parquet": np.arange(100)}))


def test_a_compaction_carries_the_winners_deletes_into_its_new_file():
    positions = np.arange(100, dtype=np.int64)
    source = FileRows(path=F, base_dv=None, base_deleted=BitMap64(), num_records=100, read=BitMap64(range(100)),
                      row_positions=positions, row_ids=positions + 1000)
    optimize = TransactionInfo(
        read_version=5, read_set=ReadSet(files=frozenset({F})), read_metadata=metadata(partitioned=False),
        read_protocol=PROTOCOL, adds=table([file_row("g.parquet", None, range(0, 100), data_change=False)], FILE_SCHEMA),
        removes=table([rm(F, None, data_change=False)], REMOVE_SCHEMA), isolation_level=IsolationLevel.SNAPSHOT_ISOLATION,
        operation="OPTIMIZE",
        row_level=RowLevelState(compacted={F: source}, compaction_outputs=("g.parquet",)))
    won, loaded = dv_winner([5, 6])
    loaded = WinnerRows(bitmaps=loaded.bitmaps, row_ids={"g.parquet": positions[::-1] + 1000})
    rebased = check_commit(optimize, won, loaded)
    assert set(rebased.row_level.pending["g.parquet"]) == {93, 94}
    assert rebased.removes.column("deletionVector")[0].as_py()["pathOrInlineDv"].startswith("w6")


def test_winner_compaction_adds_are_not_candidates_on_row_level_tables():
    """Serializable DML vs a concurrent OPTIMIZE of files it did not read: no ConcurrentAppend."""
    won = winner(6, "OPTIMIZE", add_rows=[file_row("g.parquet", None, range(0, 100), data_change=False)],
                 remove_rows=[rm("other.parquet", None, data_change=False)])
    assert check_commit(dml([3], level=S), won).adds.num_rows == 1


def test_a_winner_that_brought_rows_back_is_left_to_the_file_level():
    """RESTORE re-added F with a smaller DV (rows 40 and 41 live again): a rebase onto the union
    with our base would delete them again, so the file level decides — and under Serializable the
    re-add is a candidate with new rows."""
    base = dv("base", 3)
    restored = dv("w6", 1)
    won = winner(6, "RESTORE", add_rows=[add(F, restored)], remove_rows=[rm(F, base)])
    loaded = WinnerRows(bitmaps={(F, dv_unique_id(restored)): BitMap64([39])})
    for level in (WS, S):
        txn = dml([3], base=base, base_rows=[39, 40, 41], level=level)
        with pytest.raises((ConcurrentAppendException, ConcurrentDeleteReadException)):
            check_commit(txn, won, loaded)


def test_a_compaction_is_not_rebased_over_rows_a_winner_brought_back():
    positions = np.array([p for p in range(100) if p not in (39, 40)], dtype=np.int64)
    base = dv("base", 2)
    source = FileRows(path=F, base_dv=base, base_deleted=BitMap64([39, 40]), num_records=100,
                      read=BitMap64(positions.tolist()), row_positions=positions, row_ids=positions + 1000)
    optimize = TransactionInfo(
        read_version=5, read_set=ReadSet(files=frozenset({F})), read_metadata=metadata(partitioned=False),
        read_protocol=PROTOCOL, adds=table([file_row("g.parquet", None, range(0, 98), data_change=False)], FILE_SCHEMA),
        removes=table([rm(F, base, data_change=False)], REMOVE_SCHEMA), isolation_level=IsolationLevel.SNAPSHOT_ISOLATION,
        operation="OPTIMIZE", row_level=RowLevelState(compacted={F: source}, compaction_outputs=("g.parquet",)))
    restored = dv("w6", 1)
    won = winner(6, "RESTORE", add_rows=[add(F, restored)], remove_rows=[rm(F, base)])
    loaded = WinnerRows(bitmaps={(F, dv_unique_id(restored)): BitMap64([39])},
                        row_ids={"g.parquet": positions + 1000})
    with pytest.raises(ConcurrentDeleteReadException, match="removed a file"):
        check_commit(optimize, won, loaded)


@pytest.mark.parametrize("level", [S, WS])
def test_a_dv_re_add_brings_new_rows_only_when_its_dv_shrank(level):
    """A re-add with a larger DV deletes rows; with a smaller one (RESTORE) it brings rows back,
    which a read predicate may match (Delta's added-files check, #10)."""
    other = "other.parquet"
    grown, shrunk, before = dv("grown", 5), dv("shrunk", 1), dv("before", 3)
    txn = dml([3], level=level)
    txn = txn.replace(read_set=ReadSet(predicates=(predicate("id >= 0"),), files=frozenset({F})))
    check_commit(txn, winner(6, "DELETE", add_rows=[add(other, grown)], remove_rows=[rm(other, before)]))
    restore = winner(6, "RESTORE", add_rows=[add(other, shrunk)], remove_rows=[rm(other, before)])
    with pytest.raises(ConcurrentAppendException, match="RESTORE"):
        check_commit(txn, restore)


@pytest.mark.parametrize("readds", [1, 3, 12])
@pytest.mark.parametrize("new_files", [0, 2, 40])
def test_the_adds_that_bring_rows_keep_their_rows_whatever_the_mix(readds, new_files):
    """The winner adds the conflict check looks at, interleaved in log order: DV updates (a
    re-add with a larger DV: no new rows), RESTOREs of a file's DV (smaller: new rows),
    compaction outputs (dataChange=false: none) and new files (all). Few and many of each:
    the answer is the same rows, in order, whichever way they are cut out."""
    from deltatx.conflicts.checker import _new_rows_only

    adds, removes, expected = [], [], []
    for i in range(max(readds, new_files)):
        if i < readds:
            path = f"dv{i}.parquet"
            shrinks = i % 3 == 2
            removes.append(rm(path, dv(f"old{i}", 3)))
            adds.append(add(path, dv(f"new{i}", 1 if shrinks else 5)))
            if shrinks:
                expected.append(path)
        if i < new_files:
            compacted = i % 4 == 1
            # dataChange missing (null) reads as true, as Delta reads it
            flag = False if compacted else (None if i % 4 == 3 else True)
            adds.append(add(f"n{i}.parquet", dataChange=flag))
            if not compacted:
                expected.append(f"n{i}.parquet")
    adds_table = table(adds, FILE_SCHEMA)
    kept = _new_rows_only(adds_table, table(removes, REMOVE_SCHEMA))
    assert kept.column("path").to_pylist() == expected
    assert kept.schema == adds_table.schema
    assert _new_rows_only(adds_table, table([], REMOVE_SCHEMA)).column("path").to_pylist() == [
        r["path"] for r in adds if r.get("dataChange") is not False]


@pytest.mark.parametrize("size", [1, 3, 8, 9, 40])
def test_the_first_candidate_that_may_match_is_found_whatever_the_mask_size(size):
    """A null (no statistics) may match and counts as a hit; few and many candidates agree."""
    from deltatx.conflicts.checker import _first_true

    assert _first_true(pa.array([False] * size, pa.bool_())) is None
    for hit in (True, None):
        for at in {0, size // 2, size - 1}:
            values = [False] * size
            values[at] = hit
            assert _first_true(pa.array(values, pa.bool_())) == at
            chunked = pa.chunked_array([pa.array(values[:at], pa.bool_()), pa.array(values[at:], pa.bool_())])
            assert _first_true(chunked) == at


@pytest.mark.parametrize("winner_is_backfill", [True, False])
@pytest.mark.parametrize("level", [S, WS])
def test_the_added_files_check_skips_a_row_tracking_backfill_on_either_side(level, winner_is_backfill):
    """Delta's #10 is skipped when either side is a backfill: it re-adds files to give them ids."""
    backfilled = add("b.parquet", baseRowId=0, defaultRowCommitVersion=6, dataChange=False)
    txn = TransactionInfo(
        read_version=5, read_set=ReadSet(predicates=(predicate("id >= 0"),)), read_metadata=metadata(partitioned=False),
        read_protocol=RT_PROTOCOL, adds=table([add("mine.parquet")], FILE_SCHEMA), removes=table([], REMOVE_SCHEMA),
        isolation_level=level, operation="DELETE" if winner_is_backfill else row_tracking.BACKFILL_OPERATION)
    won = winner(6, row_tracking.BACKFILL_OPERATION if winner_is_backfill else "UPDATE",
                 add_rows=[backfilled], domains=[row_tracking.watermark_domain(99)])
    check_commit(txn, won)  # no ConcurrentAppendException
    plain = winner(6, "UPDATE", add_rows=[add("u.parquet")])
    if winner_is_backfill:
        with pytest.raises(ConcurrentAppendException):
            check_commit(txn, plain)


def test_rows_of_a_winners_new_file_decide_the_added_files_check_exactly():
    """The winner's new file spans ids 1..10 (its stats), so id = 5 may match it; the committer
    loads its rows (added_rows_request says which files and columns) and the check, still
    pure, finds no row id = 5 selects."""
    from deltatx.conflicts.checker import added_rows_request

    txn = dml([3], level=WS)
    txn = txn.replace(read_set=ReadSet(predicates=(predicate("id = 5"),), files=frozenset({F})))
    won = winner(6, "UPDATE", add_rows=[file_row("n.parquet", None, range(1, 11))],
                 remove_rows=[rm("other.parquet")])
    request = added_rows_request(txn, won)
    assert request.files.column("path").to_pylist() == ["n.parquet"] and request.columns == ("id",)
    updated = WinnerRows(added_rows={"n.parquet": pa.table({"id": pa.array([1, 10], pa.int64())})})
    check_commit(txn, won, updated)  # no conflict: rows 1 and 10 are not id 5
    moved = WinnerRows(added_rows={"n.parquet": pa.table({"id": pa.array([1, 5], pa.int64())})})
    with pytest.raises(ConcurrentAppendException):
        check_commit(txn, won, moved)
    with pytest.raises(ConcurrentAppendException):  # nothing loaded: the statistics decide
        check_commit(txn, won)


def test_added_rows_are_not_requested_where_statistics_decide_or_without_row_level():
    from deltatx.conflicts.checker import added_rows_request

    txn = dml([3], level=WS).replace(read_set=ReadSet(predicates=(predicate("id = 50"),), files=frozenset({F})))
    outside = winner(6, "UPDATE", add_rows=[file_row("n.parquet", None, range(1, 11))], remove_rows=[rm("o.parquet")])
    assert added_rows_request(txn, outside) is None  # stats rule the file out
    inside = winner(6, "UPDATE", add_rows=[file_row("n.parquet", None, range(40, 60))], remove_rows=[rm("o.parquet")])
    assert added_rows_request(txn, inside) is not None
    assert added_rows_request(txn.replace(row_level=None), inside) is None  # file level: Delta's rule


# --------------------------------------------------------------------------- row tracking #5, #7, #8


def tracked(adds_rows, hwm: int = 99, read_hwm: int = 99) -> TransactionInfo:
    return TransactionInfo(
        read_version=5, read_set=ReadSet(), read_metadata=metadata(partitioned=False), read_protocol=RT_PROTOCOL,
        adds=table(adds_rows, FILE_SCHEMA), removes=table([], REMOVE_SCHEMA),
        domains=(row_tracking.watermark_domain(hwm),), read_row_id_high_watermark=read_hwm)


def test_fresh_row_ids_move_above_the_winners_watermark_and_versions_past_it():
    txn = tracked([add("new.parquet", baseRowId=100, defaultRowCommitVersion=6),
                   add("kept.parquet", baseRowId=10, defaultRowCommitVersion=2)], hwm=199)
    won = winner(6, "WRITE", add_rows=[add("theirs.parquet", baseRowId=100, defaultRowCommitVersion=6)],
                 domains=[row_tracking.watermark_domain(149)], blind=True)
    rebased = check_commit(txn, won)
    got = {r["path"]: (r["baseRowId"], r["defaultRowCommitVersion"]) for r in rebased.adds.to_pylist()}
    assert got == {"new.parquet": (150, 7), "kept.parquet": (10, 2)}
    assert row_tracking.high_watermark(rebased.domains) == 249


def test_a_winning_backfill_gives_its_ids_to_the_files_we_rewrite():
    txn = tracked([add(F, dv("mine", 1))], hwm=-1, read_hwm=-1)
    txn = txn.replace(removes=table([rm(F)], REMOVE_SCHEMA), domains=())
    won = winner(6, row_tracking.BACKFILL_OPERATION,
                 add_rows=[add(F, baseRowId=0, defaultRowCommitVersion=6, dataChange=False)],
                 domains=[row_tracking.watermark_domain(99)])
    rebased = check_commit(txn, won)
    assert rebased.adds.column("baseRowId").to_pylist() == [0]
    assert rebased.removes.column("baseRowId").to_pylist() == [0]


def test_a_watermark_left_without_fresh_files_never_falls_below_the_winners():
    """The transaction's fresh files were dropped (a compaction whose rows a concurrent one moved)
    but its watermark domain stayed: against a winner that gave out more ids it must rise to the
    winner's, or the commit would take the table's watermark back (found by the soak)."""
    nothing_left = tracked([], hwm=302, read_hwm=201)
    won = winner(7, "WRITE", add_rows=[add("theirs.parquet", baseRowId=202, defaultRowCommitVersion=7)],
                 domains=[row_tracking.watermark_domain(401)], blind=True)
    rebased = check_commit(nothing_left, won)
    assert row_tracking.high_watermark(rebased.domains) == 401
    assert rebased.read_row_id_high_watermark == 401
    only_dv_readds = tracked([add(F, dv("mine", 1), baseRowId=10, defaultRowCommitVersion=2)], hwm=302, read_hwm=201)
    assert row_tracking.high_watermark(check_commit(only_dv_readds, won).domains) == 401
    # a higher watermark of its own stays (ids it gave out that were dropped leave a gap: harmless)
    assert row_tracking.high_watermark(check_commit(tracked([], hwm=500, read_hwm=201), won).domains) == 500


def test_a_winners_file_adopted_later_keeps_its_ids():
    """With nothing added yet, the transaction still learns the winner's watermark: a file of that
    winner that a later row-level rebase adopts (its ids at or below it) is not given new ids by
    the next winner's rebase."""
    rebased = check_commit(tracked([], hwm=-1, read_hwm=99).replace(domains=()),
                           winner(6, "OPTIMIZE", add_rows=[], domains=[row_tracking.watermark_domain(200)]))
    assert rebased.read_row_id_high_watermark == 200
    adopted = rebased.replace(adds=table([add("compacted.parquet", dv("mine", 1), baseRowId=150,
                                              defaultRowCommitVersion=6)], FILE_SCHEMA))
    again = check_commit(adopted, winner(7, "WRITE", add_rows=[add("more.parquet", baseRowId=201)],
                                         domains=[row_tracking.watermark_domain(260)], blind=True))
    assert again.adds.column("baseRowId").to_pylist() == [150]
    assert row_tracking.high_watermark(again.domains) == row_tracking.NO_WATERMARK


def test_watermark_domain_is_never_a_domain_conflict():
    txn = tracked([add("new.parquet", baseRowId=100, defaultRowCommitVersion=6)])
    won = winner(6, "WRITE", add_rows=[], domains=[DomainMetadata(row_tracking.ROW_TRACKING_DOMAIN,
                                                                  '{"rowIdHighWaterMark":120}')])
    assert row_tracking.high_watermark(check_commit(txn, won).domains) == 220


def test_rows_of_two_files_compacted_into_one_are_followed_into_one_re_add():
    """Found by the stress harness: each followed file appended the winner's file again."""
    g = "g.parquet"
    positions = np.arange(100, dtype=np.int64)
    files = {}
    for name, offset in (("f1.parquet", 1000), ("f2.parquet", 2000)):
        files[name] = FileRows(path=name, base_dv=None, base_deleted=BitMap64(), num_records=100,
                               changed=BitMap64([3]), read=BitMap64([3]), row_positions=positions,
                               row_ids=positions + offset)
    txn = TransactionInfo(
        read_version=5, read_set=ReadSet(predicates=(predicate("id = 1"),), files=frozenset(files)),
        read_metadata=metadata(partitioned=False), read_protocol=PROTOCOL,
        adds=table([add(n, dv(n[:2], 1)) for n in files], FILE_SCHEMA),
        removes=table([rm(n) for n in files], REMOVE_SCHEMA), operation="UPDATE",
        row_level=RowLevelState(files=files))
    won = winner(6, "OPTIMIZE", add_rows=[file_row(g, None, range(0, 200), data_change=False)],
                 remove_rows=[rm(n, None, data_change=False) for n in files])
    compacted_ids = np.concatenate([positions + 1000, positions + 2000])
    rebased = check_commit(txn, won, WinnerRows(row_ids={g: compacted_ids}))
    assert rebased.adds.column("path").to_pylist() == [g]
    assert rebased.removes.column("path").to_pylist() == [g]
    assert set(rebased.row_level.pending[g]) == {3, 103}


def _compaction_winner(new_dv: dict | None = None) -> tuple:
    """OPTIMIZE rewrote F into g.parquet (rows in reverse order), g maybe with a DV of its own."""
    new_file = file_row("g.parquet", None, range(0, 100), data_change=False)
    new_file["deletionVector"] = new_dv
    won = winner(6, "OPTIMIZE", add_rows=[new_file], remove_rows=[rm(F, None, data_change=False)])
    return won, np.arange(1099, 999, -1, dtype=np.int64)


def test_rows_read_under_serializable_are_followed_into_a_compaction():
    """A later winner that deletes a read row in the compaction's file must still be seen."""
    won, ids = _compaction_winner()
    txn = dml([], read=[3], level=S)
    assert load_request(txn.row_level, won, txn.adds).row_id_files.column("path").to_pylist() == ["g.parquet"]
    rebased = check_commit(txn, won, WinnerRows(row_ids={"g.parquet": ids}))
    followed = rebased.row_level.files["g.parquet"]
    assert set(followed.read) == {96} and not followed.changed
    assert rebased.adds.num_rows == 0 and rebased.removes.num_rows == 0  # a read adds no action
    g_dv = dv("w7", 1)
    later = winner(7, "DELETE", add_rows=[add("g.parquet", g_dv)], remove_rows=[rm("g.parquet", None)])
    with pytest.raises(ConcurrentDeleteReadException, match="row id 1003"):
        check_commit(rebased, later, WinnerRows(bitmaps={("g.parquet", dv_unique_id(g_dv)): BitMap64([96])}))


def test_under_write_serializable_reads_are_not_followed():
    won, ids = _compaction_winner()
    rebased = check_commit(dml([], read=[3], level=WS), won, WinnerRows(row_ids={"g.parquet": ids}))
    assert "g.parquet" not in rebased.row_level.files and rebased.row_level.resolved_for(6) == frozenset({F})


def test_rows_are_followed_into_a_compaction_output_that_has_a_dv():
    """The compaction was itself rebased over a DML: its output carries that DML's DV."""
    g_dv = dv("g", 1)
    won, ids = _compaction_winner(g_dv)
    txn = dml([3])
    request = load_request(txn.row_level, won, txn.adds)
    assert ("g.parquet", g_dv) in request.dvs
    loaded = WinnerRows(bitmaps={("g.parquet", dv_unique_id(g_dv)): BitMap64([10])}, row_ids={"g.parquet": ids})
    rebased = check_commit(txn, won, loaded)
    assert set(rebased.row_level.pending["g.parquet"]) == {10, 96}  # the winner's DV and ours
    assert rebased.removes.column("deletionVector").to_pylist() == [g_dv]  # the remove names its DV


def test_a_followed_row_the_compaction_output_deletes_is_left_to_the_file_level():
    g_dv = dv("g", 1)
    won, ids = _compaction_winner(g_dv)
    loaded = WinnerRows(bitmaps={("g.parquet", dv_unique_id(g_dv)): BitMap64([96])}, row_ids={"g.parquet": ids})
    with pytest.raises(ConcurrentDeleteReadException, match="removed a file"):
        check_commit(dml([3]), won, loaded)
