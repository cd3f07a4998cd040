"""P15 — two-table transfers per second: 4 OS processes, each transfer one catalog transaction
that debits an account in one table and credits one in the other (SQLite and PostgreSQL).

Why: no other Python Delta client can commit two tables atomically; this measures what it costs.
Accounts are partitioned one per partition, so two transfers conflict only when they share an
account (then the loser is retried by the benchmark, up to ``MAX_OP_ATTEMPTS``). Checks: the total
over both tables is unchanged and every committed transfer is one catalog commit of both tables.
deltalake has no multi-table transaction, so this benchmark has no peer column (like P9).
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa

import deltatx
from deltatx.errors import ConcurrentModificationException

from .common import BenchResult, scratch_dir
from .procs import MAX_OP_ATTEMPTS, OpCounter, combine, run_workers

ID = "P15"
TITLE = "two-table transfers through a catalog (processes)"
TABLES = ("checking", "savings")
SCHEMA = pa.schema([("balance", pa.int64()), ("account", pa.int64())])
ACCOUNTS = 64
OPENING = 1_000


def _balance(tx: Any, account: int) -> int:
    return int(tx.read(where=f"account = {account}", columns=["balance"])["balance"][0].as_py())


def transfer_worker(index: int, barrier, url: str, n: int) -> dict[str, Any]:
    catalog = deltatx.Catalog(url)
    rng = random.Random(f"p15:{index}")
    plan = [(rng.randrange(ACCOUNTS), rng.randrange(ACCOUNTS), rng.randint(1, 10), rng.random() < 0.5)
             for _ in range(n)]
    counter = OpCounter(index)
    barrier.wait()
    counter.begin()
    for src_acct, dst_acct, amount, forward in plan:
        src_name, dst_name = TABLES if forward else TABLES[::-1]
        for attempt in range(MAX_OP_ATTEMPTS):
            try:
                with catalog.transaction() as ctx:
                    src, dst = ctx.table(src_name), ctx.table(dst_name)
                    a, b = _balance(src, src_acct), _balance(dst, dst_acct)
                    src.update(f"account = {src_acct}", set={"balance": str(a - amount)})
                    dst.update(f"account = {dst_acct}", set={"balance": str(b + amount)})
                counter.commits += 1
                break
            except ConcurrentModificationException as exc:
                counter.conflicts[type(exc).__name__] += 1
            except Exception as exc:
                counter.failure(exc)
                break
        else:
            counter.failure(RuntimeError(f"transfer gave up after {MAX_OP_ATTEMPTS} conflicts"))
    counter.finish()
    catalog.close()
    return counter.report()


def _setup(url: str, root: str) -> None:
    with deltatx.Catalog(url) as cat:
        for name in TABLES:
            cat.create_table(name, f"{root}/{name}", SCHEMA, partition_by=["account"])
        rows = pa.table({"balance": [OPENING] * ACCOUNTS, "account": list(range(ACCOUNTS))}, schema=SCHEMA)
        with cat.transaction() as tx:
            for name in TABLES:
                tx.table(name).append(rows)


def run(quick: bool = False) -> BenchResult:
    from deltatx.harness import pgserver

    processes, n = (2, 5) if quick else (4, 50)
    server = pgserver.start()
    try:
        with scratch_dir("p15") as root:
            urls = {"sqlite": f"sqlite:///{root}/catalog.db", "postgresql": server.new_database()}
            runs = {}
            for backend, url in urls.items():
                _setup(url, str(root / backend))
                runs[backend] = combine(run_workers(transfer_worker, processes, (url, n)))
            result = BenchResult(
                id=ID, title=TITLE, metric="transfers per second (SQLite coordinator)", unit="transfers/s",
                higher_is_better=True, deltatx=runs["sqlite"]["commits_per_s"], deltalake=None,
                target="no target in the issue: transfers/s reported; total unchanged, 0 failures",
                quick=quick,
                parameters={"processes": processes, "transfers_per_process": n, "accounts_per_table": ACCOUNTS,
                            "tables": list(TABLES), "partitioned_by": "account", "benchmark_retries": MAX_OP_ATTEMPTS},
                details=runs,
                deltalake_baseline_notes="no peer: deltalake has no transaction across tables",
            )
            for backend, url in urls.items():
                with deltatx.Catalog(url) as cat:
                    snap = cat.snapshot()
                    total = sum(sum(snap.table(t).to_arrow()["balance"].to_pylist()) for t in TABLES)
                    result.check(f"{backend} total over both tables", 2 * ACCOUNTS * OPENING, total)
                    result.check(f"{backend} versions (1 funding + commits, each table)",
                                 {t: 1 + runs[backend]["commits"] for t in TABLES}, snap.versions)
                result.check(f"{backend} failures", 0, runs[backend]["failures"])
    finally:
        pgserver.stop(server)
    result.criterion("no failures", all(r["failures"] == 0 for r in runs.values()),
                     ", ".join(f"{k}: {r['failures']}" for k, r in runs.items()))
    return result
