"""R2 crash injection: a child process dies (``os._exit(137)``, no cleanup at all — the same as
``kill -9`` for the table) the Nth time it reaches a named phase of the write/commit/checkpoint
path; the parent then proves the table survived.

Shared by ``tests/reliability/test_crash.py`` (every phase once) and ``benchmarks/soak.py``
(1,000 random points)::

    plan_workload(seed)          deterministic ops: append, delete, update, overwrite, optimize,
                                 set_properties, checkpoint (checkpointInterval=3 adds more)
    census(plan)                 how often each phase is reached by the whole plan (no crash)
    run_crash_point(root, plan, phase, nth)
        parent: create the table (version 0), start the child (spawn)
        child:  for each op: ack "intent i", run it as one transaction (userMetadata "op-i"),
                ack "done i, version v"; the observer exits the process at (phase, nth)
        parent: verify_after_crash → CrashOutcome (raises CrashCheckFailed on any violation)

What the parent checks after every crash: the table opens; the log holds exactly the
acknowledged commits at their acknowledged versions, in order, plus at most the one in-flight
operation as the newest version; every version's rows equal a reference model of the
operations the log holds (so acknowledged rows are intact and uncommitted rows invisible);
VACUUM (retention 0, enforcement off) deletes every orphan data file and leaves exactly the
referenced ones; and a fresh writer commits the next version.

Acks are written with one unbuffered ``write`` per line, so the kernel has them even though
``os._exit`` skips every Python buffer.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import orjson
import pyarrow as pa
from tablefiles import data_files as _data_files

CRASH_EXIT_CODE = 137
CRASH_PHASES: tuple[str, ...] = (
    "data_files_written",
    "attempt_commit",
    "commit_temp_written",
    "commit_linked",
    "published",
    "checkpoint_written",
    "last_checkpoint_written",
)
#: phases at which the in-flight write's data files exist but its commit cannot have landed
PRE_COMMIT_PHASES = ("data_files_written", "attempt_commit", "commit_temp_written")

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("payload", pa.string())])
TABLE_PROPERTIES = {"delta.checkpointInterval": "3"}
OP_KINDS: tuple[str, ...] = ("append", "delete", "update", "overwrite", "optimize", "properties", "checkpoint")
CHILD_TIMEOUT_S = 120


class CrashCheckFailed(AssertionError):
    """The table broke a durability promise after a crash; the message says which."""


# --------------------------------------------------------------------------------------------
# The workload and its reference model
# --------------------------------------------------------------------------------------------

Row = tuple[int, int, str]  # (id, part, payload)


def plan_workload(seed: int, n_ops: int = 12) -> list[dict[str, Any]]:
    """Deterministic operations (JSON-ready dicts); ids are unique per op (op i uses i*1000+).

    Two appends, then every kind once in a seeded order, then seeded random kinds.
    """
    rng = random.Random(seed)
    ops: list[dict[str, Any]] = []
    appended: list[tuple[int, int]] = []  # [lo, hi) id ranges written so far
    every_kind = list(OP_KINDS)
    rng.shuffle(every_kind)
    kinds = ["append", "append"] + every_kind
    kinds += [rng.choice(OP_KINDS + ("append", "append")) for _ in range(n_ops - len(kinds))]
    for i, kind in enumerate(kinds[:n_ops]):
        base = (i + 1) * 1000
        if kind == "append":
            n = rng.randint(1, 6)
            ops.append({"i": i, "kind": kind, "ids": list(range(base, base + n)), "part": rng.randint(0, 2)})
            appended.append((base, base + n))
        elif kind == "delete":
            lo, hi = rng.choice(appended)
            cut = rng.randint(lo, hi)
            ops.append({"i": i, "kind": kind, "where": f"id >= {lo} AND id < {cut + 1}"})
        elif kind == "update":
            ops.append({"i": i, "kind": kind, "where": f"part = {rng.randint(0, 2)}", "payload": f"u{i}"})
        elif kind == "overwrite":
            n = rng.randint(1, 3)
            ops.append({"i": i, "kind": kind, "part": rng.randint(0, 2), "ids": list(range(base, base + n))})
            appended.append((base, base + n))
        else:
            ops.append({"i": i, "kind": kind})
    return ops


def op_rows(op: dict[str, Any]) -> pa.Table:
    ids = op["ids"]
    return pa.table({"id": ids, "part": [op["part"]] * len(ids), "payload": [f"p{x}" for x in ids]},
                    schema=SCHEMA)


def _matches(where: str, row: Row) -> bool:
    """The two predicate shapes plan_workload emits, evaluated in Python (the reference)."""
    if where.startswith("part = "):
        return row[1] == int(where.split("=")[1])
    lo = int(where.split(">=")[1].split("AND")[0])
    hi = int(where.split("<")[1])
    return lo <= row[0] < hi


def apply_model(state: dict[int, Row], op: dict[str, Any]) -> dict[int, Row]:
    """The reference semantics of one committed op: id → row."""
    state = dict(state)
    kind = op["kind"]
    if kind == "append":
        for x in op["ids"]:
            state[x] = (x, op["part"], f"p{x}")
    elif kind == "delete":
        state = {k: r for k, r in state.items() if not _matches(op["where"], r)}
    elif kind == "update":
        state = {k: ((r[0], r[1], op["payload"]) if _matches(op["where"], r) else r) for k, r in state.items()}
    elif kind == "overwrite":
        state = {k: r for k, r in state.items() if r[1] != op["part"]}
        for x in op["ids"]:
            state[x] = (x, op["part"], f"p{x}")
    return state


def run_op(table, op: dict[str, Any]) -> dict[str, Any]:
    """Run one op as one transaction tagged ``op-i``; returns the ack fields."""
    kind = op["kind"]
    if kind == "checkpoint":
        table.checkpoint()
        return {"committed": False, "version": table.version}
    tx = table.transaction(user_metadata=f"op-{op['i']}")
    try:
        if kind == "append":
            tx.append(op_rows(op))
        elif kind == "delete":
            tx.delete(op["where"])
        elif kind == "update":
            tx.update(op["where"], set={"payload": f"'{op['payload']}'"})
        elif kind == "overwrite":
            tx.overwrite(op_rows(op), where=f"part = {op['part']}")
        elif kind == "optimize":
            tx.optimize()
        elif kind == "properties":
            tx.set_properties({"deltatx.crashTest.lastOp": str(op["i"])})
        result = tx.commit()
    except BaseException:
        tx.abort()
        raise
    return {"committed": result.attempts > 0, "version": result.version}


# --------------------------------------------------------------------------------------------
# The child
# --------------------------------------------------------------------------------------------


def child_main(uri: str, plan: list[dict[str, Any]], phase: str | None, nth: int, ack_path: str) -> None:
    """Run the plan; die with CRASH_EXIT_CODE the ``nth`` time ``phase`` is reached."""
    import deltatx
    from deltatx import phases

    fd = os.open(ack_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def ack(record: dict[str, Any]) -> None:
        os.write(fd, orjson.dumps(record) + b"\n")

    seen = 0

    def observer(reached: str, **context: Any) -> None:
        nonlocal seen
        if reached == phase:
            seen += 1
            if seen == nth:
                ack({"crash": reached, "nth": nth, "version": context.get("version")})
                os._exit(CRASH_EXIT_CODE)

    phases.install(observer)
    table = deltatx.Table(uri)
    for op in plan:
        ack({"intent": op["i"]})
        done = run_op(table, op)
        ack({"done": op["i"], **done})
    ack({"finished": True})
    os.close(fd)


def census(root: Path, plan: list[dict[str, Any]]) -> dict[str, int]:
    """How many times the whole plan reaches each phase (run in this process, on a scratch table)."""
    import deltatx
    from deltatx import phases

    uri = str(root / "census")
    shutil.rmtree(uri, ignore_errors=True)
    deltatx.create_table(uri, SCHEMA, partition_by=["part"], properties=TABLE_PROPERTIES)
    counts = {p: 0 for p in CRASH_PHASES}

    def count(reached: str, **_: Any) -> None:
        if reached in counts:
            counts[reached] += 1

    table = deltatx.Table(uri)
    with phases.observe(count):
        for op in plan:
            run_op(table, op)
    shutil.rmtree(uri, ignore_errors=True)
    return counts


# --------------------------------------------------------------------------------------------
# The parent's checks
# --------------------------------------------------------------------------------------------


@dataclass
class CrashOutcome:
    phase: str
    nth: int
    crashed: bool
    table_version: int
    acked_commits: int
    in_flight_committed: bool
    orphans_vacuumed: int
    elapsed_s: float = 0.0


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise CrashCheckFailed(message)


def read_acks(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _rows(table: pa.Table) -> list[Row]:
    return sorted(zip(table["id"].to_pylist(), table["part"].to_pylist(), table["payload"].to_pylist()))




@contextlib.contextmanager
def vacuum_clock_ahead(seconds: float = 60.0) -> Iterator[None]:
    """Move VACUUM's clock ahead so tombstones written a moment ago count as older than 0 hours."""
    from deltatx.tables.ops import vacuum as vacuum_module

    original = vacuum_module.now_ms
    vacuum_module.now_ms = lambda: time.time() * 1000 + seconds * 1000
    try:
        yield
    finally:
        vacuum_module.now_ms = original


def verify_after_crash(uri: str, plan: list[dict[str, Any]], acks: list[dict[str, Any]], phase: str, nth: int,
                       crashed: bool) -> CrashOutcome:
    import deltatx
    from deltatx.io.paths import decode_path
    from deltatx.txnlog.actions import parse_commit

    table = deltatx.Table(uri)  # 1. the table opens
    done = {a["done"]: a for a in acks if "done" in a}
    intents = [a["intent"] for a in acks if "intent" in a]
    in_flight = intents[-1] if intents and intents[-1] not in done else None
    _check((in_flight is not None) == crashed,
           f"{phase}#{nth}: crashed={crashed} but the acks end with {acks[-2:]}")

    # 2. the log holds the acknowledged commits, in order, plus at most the in-flight one
    history = sorted(table.history(), key=lambda h: h["version"])
    _check([h["version"] for h in history] == list(range(table.version + 1)),
           f"versions are not contiguous from 0: {[h['version'] for h in history]}")
    log_ops: dict[int, int] = {}
    for h in history[1:]:
        tag = h.get("userMetadata") or ""
        _check(tag.startswith("op-"), f"version {h['version']} has no op tag: {h}")
        log_ops[h["version"]] = int(tag[3:])
    order = list(log_ops.values())
    _check(order == sorted(set(order)), f"ops in the log are duplicated or out of order: {order}")
    for i, a in done.items():
        if a["committed"]:
            _check(log_ops.get(a["version"]) == i,
                   f"acknowledged op {i} (version {a['version']}) is not in the log at that version: {log_ops}")
        else:
            _check(i not in order, f"op {i} was acknowledged as a no-op but is in the log")
    extra = [i for i in order if i not in done or not done[i]["committed"]]
    _check(extra in ([], [in_flight]), f"unacknowledged ops in the log: {extra} (in flight: {in_flight})")
    in_flight_committed = bool(extra)
    if in_flight_committed:
        _check(order[-1] == in_flight, "the in-flight op is not the newest version")

    # 3. every version's rows equal the reference model of the ops the log holds
    state: dict[int, Row] = {}
    expected: dict[int, list[Row]] = {0: []}
    by_index = {op["i"]: op for op in plan}
    for version in range(1, table.version + 1):
        state = apply_model(state, by_index[log_ops[version]])
        expected[version] = sorted(state.values())
    for version, rows in expected.items():
        got = _rows(deltatx.Table(uri, version=version).to_arrow()) if version != table.version \
            else _rows(table.to_arrow())
        _check(got == rows, f"version {version}: rows differ from the model\n got {got}\nwant {rows}")

    # 4. VACUUM removes exactly the unreferenced files
    ever_referenced: set[str] = set()
    for version in range(table.version + 1):
        commit = parse_commit(table._store.read_commit(version), version)
        ever_referenced.update(decode_path(p) for p in commit.adds["path"].to_pylist())
    on_disk = _data_files(uri)
    orphans = on_disk - ever_referenced
    if crashed and phase in PRE_COMMIT_PHASES and not in_flight_committed \
            and by_index[in_flight]["kind"] in ("append", "overwrite"):
        _check(bool(orphans), f"crash at {phase}#{nth} in op {in_flight} left no orphan data file")
    workload_version = table.version
    with vacuum_clock_ahead():
        deleted = set(table.vacuum(retention_hours=0, enforce_retention_duration=False))
    _check(table.version == workload_version + 2
           and [h["operation"] for h in table.history(limit=2)] == ["VACUUM END", "VACUUM START"],
           "VACUUM is not recorded as its VACUUM START and VACUUM END commits")
    live = {decode_path(p) for p in table.files()["path"].to_pylist()}
    _check(orphans <= deleted, f"VACUUM kept orphan files {sorted(orphans - deleted)}")
    _check(not (deleted & live), f"VACUUM deleted referenced files {sorted(deleted & live)}")
    _check(_data_files(uri) == live, f"after VACUUM the files on disk {sorted(_data_files(uri))} "
                                     f"are not the live files {sorted(live)}")
    _check(_rows(deltatx.Table(uri).to_arrow()) == expected[workload_version], "rows changed after VACUUM")

    # 5. a fresh writer commits the next version
    fresh = {"i": len(plan) + 1, "kind": "append", "ids": [999_999], "part": 1}
    writer = deltatx.Table(uri)
    result = writer.append(op_rows(fresh), user_metadata=f"op-{fresh['i']}")
    _check(result.version == table.version + 1, f"fresh writer committed {result.version}, "
                                                 f"expected {table.version + 1}")
    _check(_rows(deltatx.Table(uri).to_arrow()) == sorted(apply_model(state, fresh).values()),
           "the fresh writer's commit is not readable")
    return CrashOutcome(phase=phase, nth=nth, crashed=crashed, table_version=workload_version,
                        acked_commits=sum(1 for a in done.values() if a["committed"]),
                        in_flight_committed=in_flight_committed, orphans_vacuumed=len(orphans))


# --------------------------------------------------------------------------------------------
# One crash point, end to end
# --------------------------------------------------------------------------------------------


def launch_child(work: Path, plan: list[dict[str, Any]], phase: str, nth: int,
                 start_method: str = "spawn") -> tuple[str, list[dict[str, Any]], bool]:
    """Create the table in ``work``, run the child to its crash (or the plan's end).

    Returns (uri, acks without the crash record, crashed).
    """
    import deltatx

    uri, ack_path = str(work / "table"), work / "acks.jsonl"
    deltatx.create_table(uri, SCHEMA, partition_by=["part"], properties=TABLE_PROPERTIES)
    ctx = multiprocessing.get_context(start_method)
    child = ctx.Process(target=child_main, args=(uri, plan, phase, nth, str(ack_path)))
    child.start()
    child.join(CHILD_TIMEOUT_S)
    if child.is_alive():
        child.kill()
        child.join()
        raise CrashCheckFailed(f"child at {phase}#{nth} did not finish in {CHILD_TIMEOUT_S} s")
    acks = read_acks(ack_path)
    crashed = child.exitcode == CRASH_EXIT_CODE
    _check(crashed or (child.exitcode == 0 and bool(acks) and bool(acks[-1].get("finished"))),
           f"child at {phase}#{nth} exited with {child.exitcode}; acks: {acks[-3:]}")
    if crashed:
        _check(acks[-1].get("crash") == phase, f"child exited {CRASH_EXIT_CODE} without crashing at {phase}")
        acks = acks[:-1]
    return uri, acks, crashed


def run_crash_point(root: Path, plan: list[dict[str, Any]], phase: str, nth: int,
                    start_method: str = "spawn") -> CrashOutcome:
    """Crash a child at (phase, nth) on a fresh table under ``root`` and verify; cleans up on success."""
    started = time.perf_counter()
    work = Path(root) / f"crash-{phase}-{nth}-{os.getpid()}-{time.monotonic_ns()}"
    work.mkdir(parents=True)
    uri, acks, crashed = launch_child(work, plan, phase, nth, start_method)
    outcome = verify_after_crash(uri, plan, acks, phase, nth, crashed)
    outcome.elapsed_s = time.perf_counter() - started
    shutil.rmtree(work, ignore_errors=True)
    return outcome
