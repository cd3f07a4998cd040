"""P9 — cost of one conflict check against a winner that added 10k files.

A DELETE (``part = 9 AND id < 500``, WriteSerializable, stats-based detection) lost the race to a
MERGE (not a blind append) that added 10,000 files across the 10 partitions of ``part``, every
one with min/max stats whose id range starts at 1,000: partition values rule out 90% of the adds
and stats the rest, so the checker must look at every add and finds no conflict — the worst
case. The timed call is ``deltatx.conflicts.check_commit(txn, winner)`` with the winner's adds
already columnar. Also reported: the same check when the winner's adds must first be built from
its parsed JSON rows, parse + check from the commit's bytes, a data-column-only predicate, and
a case that does conflict. No peer exposes this step: absolute target ≤ 10 ms.
"""

from __future__ import annotations

import uuid

import pyarrow as pa

from deltatx.conflicts import ReadSet, TransactionInfo, check_commit
from deltatx.errors import ConcurrentAppendException
from deltatx.expr import bind, parse_predicate
from deltatx.isolation import IsolationLevel
from deltatx.txnlog.actions import FILE_SCHEMA, CommitActions, Metadata, Protocol, encode_commit, parse_commit, removes_for
from deltatx.txnlog.schema import schema_to_json

from .common import BenchResult, median, now
from .logbuilder import add_actions
from .workloads import WIDE_SCHEMA

ID = "P9"
TITLE = "conflict check vs a 10k-file winner"
TARGET_MS = 10.0
PREDICATE = "part = 9 AND id < 500"


def _winner_bytes(adds: pa.Table) -> bytes:
    info = {"timestamp": 1_700_000_000_000, "operation": "MERGE", "operationParameters": {},
            "readVersion": 0, "isBlindAppend": False, "txnId": str(uuid.uuid4())}
    return encode_commit(info, adds=adds)


def _transaction(metadata: Metadata, predicate: str, read_files: pa.Table, use_stats: bool = True) -> TransactionInfo:
    bound = bind(parse_predicate(predicate), WIDE_SCHEMA)
    paths = frozenset(read_files.column("path").to_pylist())
    return TransactionInfo(
        read_version=0,
        read_set=ReadSet(predicates=(bound,), files=paths),
        read_metadata=metadata,
        read_protocol=Protocol(1, 2),
        adds=FILE_SCHEMA.empty_table(),
        removes=removes_for(read_files, 1_700_000_000_000),
        isolation_level=IsolationLevel.WRITE_SERIALIZABLE,
        is_blind_append=False,
        use_stats=use_stats,
        operation="DELETE",
        txn_id=str(uuid.uuid4()),
    )


def _time_ms(fn, reps: int) -> list[float]:
    samples = []
    for _ in range(reps):
        start = now()
        fn()
        samples.append((now() - start) * 1000)
    return samples


def _conflicts(txn: TransactionInfo, winner: CommitActions) -> bool:
    try:
        check_commit(txn, winner)
    except ConcurrentAppendException:
        return True
    return False


def run(quick: bool = False) -> BenchResult:
    n_adds = 500 if quick else 10_000
    reps = 5 if quick else 30
    metadata = Metadata(id=str(uuid.uuid4()), schema_string=schema_to_json(WIDE_SCHEMA),
                        partition_columns=("part",), configuration={}, created_time=1_700_000_000_000)
    # the winner: n_adds files holding ids ≥ 1000, so that "id < 500" excludes every one by stats
    adds = add_actions(2, n_adds, 1, partitioned=True, now_ms=1_700_000_000_000, id_start=1000,
                       path_prefix="winner-")
    raw = _winner_bytes(adds)
    # the loser read (and removes) 10 files that existed at its read version
    read_files = add_actions(1, 10, 1, partitioned=True, now_ms=1_700_000_000_000, path_prefix="read-")
    txn = _transaction(metadata, PREDICATE, read_files)

    winner = parse_commit(raw, 1)
    winner.adds  # materialize once: the primary measurement is the checker alone
    check_commit(txn, winner)  # warm caches (schema parse, predicate compile)
    columnar = _time_ms(lambda: check_commit(txn, winner), reps)

    def fresh_then_check() -> float:
        w = parse_commit(raw, 1)
        start = now()
        check_commit(txn, w)
        return (now() - start) * 1000

    with_materialize = [fresh_then_check() for _ in range(max(3, reps // 5))]
    parse_and_check = _time_ms(lambda: check_commit(txn, parse_commit(raw, 1)), max(3, reps // 5))
    data_only_txn = _transaction(metadata, "id < 500", read_files)
    data_only = _time_ms(lambda: check_commit(data_only_txn, winner), reps)
    partition_only_txn = _transaction(metadata, PREDICATE, read_files, use_stats=False)
    conflicting_txn = _transaction(metadata, "part = 9 AND id < 5000000", read_files)

    result = BenchResult(
        id=ID, title=TITLE, metric="median check_commit time", unit="ms",
        deltatx=median(columnar), deltalake=None, target=f"≤ {TARGET_MS:g} ms (absolute; no peer)", quick=quick,
        parameters={"winner_adds": n_adds, "partitions": 10, "predicate": PREDICATE,
                    "isolation": "WriteSerializable", "use_stats": True, "repetitions": reps},
        details={
            "check_commit, adds columnar (median ms)": median(columnar),
            "check_commit incl. building adds from parsed rows (median ms)": median(with_materialize),
            "parse_commit + check_commit from bytes (median ms)": median(parse_and_check),
            "data-column predicate 'id < 500' (median ms)": median(data_only),
            "winner commit size (bytes)": len(raw),
        },
    )
    result.check("winner adds", n_adds, winner.adds.num_rows)
    result.check("no conflict (partition + stats rule out every add)", False, _conflicts(txn, winner))
    result.check("no conflict (data-column predicate, stats)", False, _conflicts(data_only_txn, winner))
    result.check("conflict without stats (partition 9 has adds)", True, _conflicts(partition_only_txn, winner))
    result.check("conflict when the predicate may match", True, _conflicts(conflicting_txn, winner))
    result.criterion("check time", result.deltatx <= TARGET_MS,
                     f"{result.deltatx:.2f} ms (target ≤ {TARGET_MS:g} ms)")
    return result
