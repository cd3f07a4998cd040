"""Micro-measurement: checking one winning commit that added 10,000 files (target ≤ 10 ms).

Measures ``deltatx.conflicts.check_commit`` alone — the winner is parsed and its ``adds`` table
built before timing, as the committer has it in hand when it checks. Two shapes:

- partitioned by ``part`` (100 partitions), read predicate ``part = 7 AND id < 100`` with stats;
- unpartitioned, read predicate ``id < 100`` with stats (every file's stats must be consulted).

In both, no added file matches (the worst case: every file is examined); for the partitioned
shape also ``use_stats=False`` (partition rule only) with ``part = 100 AND id < 100``. Run::

    PYTHONPATH=src .venv/bin/python benchmarks/conflict_check_micro.py
"""

from __future__ import annotations

import statistics
import time

import pyarrow as pa

from deltatx.conflicts import ReadSet, TransactionInfo, check_commit
from deltatx.expr import STATS_CACHE, bind, parse_predicate
from deltatx.isolation import IsolationLevel
from deltatx.txnlog.actions import CommitActions, Metadata, Protocol, empty_files, empty_removes
from deltatx.txnlog.schema import schema_to_json
from deltatx.txnlog.stats import compute_stats

N_FILES = 10_000
SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.string()), ("part", pa.int32())])


def winner_adds(partitioned: bool) -> list[dict]:
    rows = []
    for i in range(N_FILES):
        lo = 1_000 + i * 10
        stats = compute_stats(pa.table({"id": pa.array(range(lo, lo + 10), pa.int64()),
                                        "value": pa.array([f"v{j}" for j in range(10)])}))
        part = i % 100 if partitioned else None
        rows.append({
            "path": f"part={part}/f{i}.parquet" if partitioned else f"f{i}.parquet",
            "partitionValues": {"part": str(part)} if partitioned else {},
            "size": 1000, "modificationTime": 0, "dataChange": True, "stats": stats,
        })
    return rows


def loser(partitioned: bool, use_stats: bool, sql: str) -> TransactionInfo:
    md = Metadata(id="t", schema_string=schema_to_json(SCHEMA), partition_columns=("part",) if partitioned else ())
    return TransactionInfo(
        read_version=0,
        read_set=ReadSet(predicates=(bind(parse_predicate(sql), SCHEMA),), files=frozenset({"x.parquet"})),
        read_metadata=md,
        read_protocol=Protocol(1, 2),
        adds=empty_files(),
        removes=empty_removes(),
        isolation_level=IsolationLevel.SERIALIZABLE,
        use_stats=use_stats,
        operation="DELETE",
    )


def measure(name: str, txn: TransactionInfo, winner: CommitActions, repeat: int = 30) -> float:
    """Median of ``repeat`` checks, each *cold*: the stats cache is cleared first, because the
    committer checks a given winner once. (A warm check is also shown for reference.)"""
    check_commit(txn, winner)  # warm-up (schema cache, kernels)
    cold, warm = [], []
    for _ in range(repeat):
        STATS_CACHE.clear()
        t0 = time.perf_counter()
        check_commit(txn, winner)
        cold.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        check_commit(txn, winner)
        warm.append((time.perf_counter() - t0) * 1000)
    median = statistics.median(cold)
    print(f"{name:<58} cold median {median:7.2f} ms (min {min(cold):6.2f})   warm {statistics.median(warm):6.2f} ms")
    return median


def main() -> None:
    results = {}
    for partitioned in (True, False):
        winner = CommitActions(version=1, commit_info={"operation": "MERGE", "isBlindAppend": False},
                               add_rows=winner_adds(partitioned))
        t0 = time.perf_counter()
        _ = winner.adds
        build_ms = (time.perf_counter() - t0) * 1000
        shape = "partitioned" if partitioned else "unpartitioned"
        print(f"[{shape}] building the winner's adds table from parsed JSON: {build_ms:.1f} ms (not timed below)")
        sql = "part = 7 AND id < 100" if partitioned else "id < 100"
        results[(shape, True)] = measure(f"{shape}, stats, '{sql}'", loser(partitioned, True, sql), winner)
        if partitioned:
            other = "part = 100 AND id < 100"  # no file in partition 100
            results[(shape, False)] = measure(f"{shape}, partition rule only, '{other}'",
                                              loser(partitioned, False, other), winner)
    worst = max(results.values())
    print(f"worst median: {worst:.2f} ms (target ≤ 10 ms) -> {'OK' if worst <= 10 else 'OVER TARGET'}")


if __name__ == "__main__":
    main()
