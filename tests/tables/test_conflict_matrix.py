"""The isolation-level / write-conflict matrix (shared/seeds/003), end to end.

Each cell: begin a transaction ("current") and stage its operation, let another writer commit
("winner"), then commit the current one — no sleeps, the order is fixed by the test. We check the
exact exception class (or success) and the final data, which must equal running the two
operations one at a time in an order the isolation level allows.
"""

from __future__ import annotations

import uuid
from typing import Callable

import pyarrow as pa
import pytest

import deltatx
from deltatx import errors

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("value", pa.int64())])


def rows(ids, part: int, value: int = 0) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "part": [part] * len(ids), "value": [value] * len(ids)}, schema=SCHEMA)


def new_table(level: str, use_stats: bool = True) -> str:
    uri = f"memory://matrix/{uuid.uuid4().hex}"
    t = deltatx.create_table(uri, SCHEMA, partition_by=["part"], properties={
        "delta.isolationLevel": level, "deltatx.conflictDetection.useStats": str(use_stats).lower()})
    for part in (1, 2):
        # two small files per partition so OPTIMIZE has something to compact
        t.append(rows(range(part * 100, part * 100 + 5), part))
        t.append(rows(range(part * 100 + 5, part * 100 + 10), part))
    return uri


# Operations: each stages onto a transaction. Inserted ids overlap the DELETE/UPDATE ranges, so file
# statistics cannot prove them disjoint: the partition decides, as in Databricks' matrix.
OPS: dict[str, Callable[[deltatx.Transaction, int], object]] = {
    "INSERT": lambda tx, p: tx.append(rows(range(p * 100, p * 100 + 3), p, value=7)),
    "DELETE": lambda tx, p: tx.delete(where=f"part = {p} AND id < {p * 100 + 3}"),
    "UPDATE": lambda tx, p: tx.update(where=f"part = {p} AND id >= {p * 100 + 5}", set={"value": "value + 1"}),
    "MERGE": lambda tx, p: tx.merge(rows([p * 100 + 1, p * 100 + 50], p, value=9), on=f"t.id = s.id AND t.part = {p}")
    .when_matched_update_all().when_not_matched_insert_all().execute(),
    "OPTIMIZE": lambda tx, p: tx.optimize(where=f"part = {p}"),
}

KIND = {"INSERT": "INSERT", "DELETE": "DML", "UPDATE": "DML", "MERGE": "DML", "OPTIMIZE": "OPTIMIZE"}
OK = None


def expected(current: str, winner: str, level: str, same_partition: bool):
    """(exception class or None, serial order of the final state) for one cell, as Delta decides
    with partition-level detection (stats off; the stats refinement is tested separately)."""
    c, w = KIND[current], KIND[winner]
    if not same_partition or c == "INSERT":
        return OK, "winner-first"  # disjoint partitions, or a blind append
    if c == "OPTIMIZE":  # snapshot isolation: only removed-file checks apply
        return (OK, "winner-first") if w == "INSERT" else (errors.ConcurrentDeleteReadException, None)
    # current is UPDATE/DELETE/MERGE and read the partition
    if w == "INSERT" and level == "WriteSerializable":
        return OK, "current-first"  # the blind INSERT is serialized after the current txn
    return errors.ConcurrentAppendException, None  # the winner added files to the partition read


def final_ids(uri: str) -> list[tuple[int, int, int]]:
    t = deltatx.Table(uri).to_arrow().sort_by([("id", "ascending"), ("value", "ascending")])
    return list(zip(t["id"].to_pylist(), t["part"].to_pylist(), t["value"].to_pylist()))


def serial(level: str, *ops: tuple[str, int]) -> list[tuple[int, int, int]]:
    """The final rows after running ``ops`` one at a time on a fresh copy of the setup."""
    uri = new_table(level, use_stats=False)
    for name, part in ops:
        t = deltatx.Table(uri)
        with t.transaction() as tx:
            OPS[name](tx, part)
    return final_ids(uri)


CELLS = [
    (level, current, winner, same)
    for level in ("Serializable", "WriteSerializable")
    for current in OPS
    for winner in OPS
    for same in (True, False)
]


@pytest.mark.parametrize("level,current,winner,same", CELLS,
                         ids=[f"{l[:5]}-{c}-vs-{w}-{'same' if s else 'other'}" for l, c, w, s in CELLS])
def test_matrix_cell(level, current, winner, same):
    uri = new_table(level, use_stats=False)
    cur_part, win_part = 1, (1 if same else 2)
    table = deltatx.Table(uri)
    tx = table.transaction()
    OPS[current](tx, cur_part)
    other = deltatx.Table(uri)
    with other.transaction() as wtx:
        OPS[winner](wtx, win_part)
    exc, order = expected(current, winner, level, same)
    if exc is not None:
        with pytest.raises(exc) as info:
            tx.commit()
        assert info.value.version == 5, "the message names the winning version"
        assert info.value.operation is not None
        assert final_ids(uri) == serial(level, (winner, win_part)), "only the winner's effect is visible"
    else:
        result = tx.commit()
        assert result.version == 6
        if order == "winner-first":
            assert final_ids(uri) == serial(level, (winner, win_part), (current, cur_part))
        else:
            assert final_ids(uri) == serial(level, (current, cur_part), (winner, win_part))


@pytest.mark.parametrize("level", ["Serializable", "WriteSerializable"])
def test_seed_example_long_delete_vs_insert_of_deleted_data(level):
    """txn1 (long DELETE) starts, txn2 INSERTs rows txn1 deletes and commits first, then txn1."""
    uri = new_table(level)
    txn1 = deltatx.Table(uri).transaction()
    txn1.delete(where="part = 1 AND id < 103")
    deltatx.Table(uri).append(rows([100, 101], 1, value=42))  # txn2: data txn1 would delete
    if level == "Serializable":
        with pytest.raises(errors.ConcurrentAppendException):
            txn1.commit()
        ids = [r for r in final_ids(uri) if r[2] == 42]
        assert len(ids) == 2
    else:
        txn1.commit()
        # readers see txn2's rows although history says txn1 (the DELETE) came after
        assert [r for r in final_ids(uri) if r[2] == 42] == [(100, 1, 42), (101, 1, 42)]
        ops = [h["operation"] for h in deltatx.Table(uri).history(limit=2)]
        assert ops == ["DELETE", "WRITE"]


def test_stats_make_disjoint_deletes_on_unpartitioned_table_succeed():
    for use_stats, expect_conflict in ((True, False), (False, True)):
        uri = f"memory://matrix/{uuid.uuid4().hex}"
        t = deltatx.create_table(uri, SCHEMA, properties={
            "deltatx.conflictDetection.useStats": str(use_stats).lower()})
        t.append(rows(range(0, 100), 0))
        t.append(rows(range(1000, 1100), 0))
        tx = deltatx.Table(uri).transaction()
        tx.delete(where="id < 10")
        deltatx.Table(uri).delete(where="id >= 1090")
        if expect_conflict:
            with pytest.raises(errors.ConcurrentAppendException):
                tx.commit()
        else:
            tx.commit()
            ids = [r[0] for r in final_ids(uri)]
            assert ids == list(range(10, 100)) + list(range(1000, 1090))


def test_metadata_change_fails_concurrent_writers_including_blind_appends():
    uri = new_table("WriteSerializable")
    tx = deltatx.Table(uri).transaction()
    tx.append(rows([1], 1))
    deltatx.Table(uri).set_properties({"delta.isolationLevel": "Serializable"})
    with pytest.raises(errors.MetadataChangedException):
        tx.commit()


def test_concurrent_idempotent_writers_same_app_id():
    uri = new_table("WriteSerializable")
    tx = deltatx.Table(uri).transaction()
    tx.append(rows([1], 1), app_id="stream-7", app_version=1)
    deltatx.Table(uri).append(rows([2], 1), app_id="stream-7", app_version=1)
    with pytest.raises(errors.ConcurrentTransactionException):
        tx.commit()


def test_lost_response_is_recognised_by_txn_id(monkeypatch):
    """The commit lands but put-if-absent reports a loss: the retry finds its own txnId and stops."""
    from deltatx.txnlog import store as store_mod

    uri = new_table("WriteSerializable")
    t = deltatx.Table(uri)
    tx = t.transaction()
    tx.append(rows([5000], 1))
    original = store_mod.MemoryLogStore._put_if_absent
    calls = {"n": 0}

    def lose_response(self, name, data, version):
        original(self, name, data, version)
        calls["n"] += 1
        raise store_mod.VersionExistsError(version)

    monkeypatch.setattr(store_mod.MemoryLogStore, "_put_if_absent", lose_response)
    result = tx.commit()
    monkeypatch.undo()
    assert calls["n"] == 1 and result.version == 5
    assert [r[0] for r in final_ids(uri)].count(5000) == 1
    assert deltatx.Table(uri).version == 5
