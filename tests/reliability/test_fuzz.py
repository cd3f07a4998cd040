"""R3: hypothesis fuzzing of the action parser and of log replay, against ``log_model``.

- Random *valid* logs (add / remove / metaData / protocol / txn / domainMetadata commits,
  optional checkpoints written by deltatx) must give exactly the model's snapshot: latest, time
  travel to any version, and an incremental refresh.
- Random *corruptions* of such a log (truncation, flipped bytes, a dropped version, a line of
  bad JSON, a field of the wrong type, a truncated checkpoint, a garbage ``_last_checkpoint``)
  must give a DeltaTxError subclass — never another exception — or, when the corruption left a
  log that is still valid, exactly the model's snapshot of the corrupted log (never a silently
  wrong one).

Deterministic: ``derandomize=True``, bounded examples, no example database.
"""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from deltatx.errors import DeltaTxError
from deltatx.txnlog.actions import parse_commit
from deltatx.txnlog.checkpoint import LAST_CHECKPOINT, checkpoint_name, write_checkpoint
from deltatx.txnlog.snapshot import load_snapshot
from deltatx.txnlog.store import commit_name, open_store
from log_model import InvalidLog, ModelState, parse_lines, replay, snapshot_state

FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=120,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SCHEMAS = [
    json.dumps({"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "part", "type": "string", "nullable": True, "metadata": {}}]}),
    json.dumps({"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "part", "type": "string", "nullable": True, "metadata": {}},
        {"name": "v", "type": "double", "nullable": True, "metadata": {}}]}),
]
PROTOCOLS = [
    {"minReaderVersion": 1, "minWriterVersion": 2},
    {"minReaderVersion": 1, "minWriterVersion": 4},
    {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["timestampNtz"],
     "writerFeatures": ["timestampNtz", "appendOnly", "domainMetadata"]},
]
PATHS = [f"part={p}/f{i}.parquet" for p in "ab" for i in range(4)] + ["f%20space.parquet"]
#: tombstones far in the future never expire, so a checkpoint keeps every one of them
FAR_FUTURE_MS = 4_000_000_000_000

small_text = st.text(alphabet="abcxyz09 _-", max_size=6)
long_values = st.integers(min_value=0, max_value=2**62)


@st.composite
def deletion_vectors(draw) -> dict[str, Any] | None:
    if not draw(st.integers(0, 4)) == 0:
        return None
    return {"storageType": "u", "pathOrInlineDv": draw(st.sampled_from(["dv1", "dv2"])),
            "offset": draw(st.sampled_from([None, 1])), "sizeInBytes": 8, "cardinality": draw(st.integers(1, 9))}


@st.composite
def add_actions(draw) -> dict[str, Any]:
    path = draw(st.sampled_from(PATHS))
    part = path[5] if path.startswith("part=") else None
    add: dict[str, Any] = {"path": path, "partitionValues": {"part": part}, "size": draw(long_values),
                           "modificationTime": draw(long_values), "dataChange": draw(st.booleans())}
    if draw(st.booleans()):
        add["stats"] = json.dumps({"numRecords": draw(st.integers(0, 100))})
    if draw(st.integers(0, 3)) == 0:
        add["tags"] = {"k": draw(small_text)}
    dv = draw(deletion_vectors())
    if dv is not None:
        add["deletionVector"] = dv
    return {"add": add}


@st.composite
def remove_actions(draw) -> dict[str, Any]:
    remove: dict[str, Any] = {"path": draw(st.sampled_from(PATHS)), "dataChange": draw(st.booleans()),
                              "deletionTimestamp": FAR_FUTURE_MS - draw(st.integers(0, 1000))}
    if draw(st.booleans()):
        remove["extendedFileMetadata"] = True
        remove["size"] = draw(long_values)
        remove["partitionValues"] = {}
    dv = draw(deletion_vectors())
    if dv is not None:
        remove["deletionVector"] = dv
    return {"remove": remove}


@st.composite
def metadata_actions(draw) -> dict[str, Any]:
    config = draw(st.dictionaries(st.sampled_from(["deltatx.fuzz.a", "deltatx.fuzz.b", "delta.appendOnly"]),
                                  st.sampled_from(["true", "false", "x"]), max_size=2))
    return {"metaData": {"id": draw(st.sampled_from(["id-1", "id-2"])), "format": {"provider": "parquet", "options": {}},
                         "schemaString": draw(st.sampled_from(SCHEMAS)),
                         "partitionColumns": draw(st.sampled_from([[], ["part"]])), "configuration": config,
                         "createdTime": draw(long_values)}}


other_actions = st.one_of(
    st.builds(lambda p: {"protocol": p}, st.sampled_from(PROTOCOLS)),
    st.builds(lambda a, v: {"txn": {"appId": a, "version": v, "lastUpdated": 1}},
              st.sampled_from(["app-a", "app-b"]), long_values),
    st.builds(lambda d, c, r: {"domainMetadata": {"domain": d, "configuration": c, "removed": r}},
              st.sampled_from(["d1", "d2"]), small_text, st.booleans()),
    metadata_actions(),
)


def encode(actions: list[dict[str, Any]], version: int) -> bytes:
    info = {"commitInfo": {"operation": "FUZZ", "timestamp": 1_700_000_000_000 + version}}
    return b"\n".join(json.dumps(a).encode() for a in [info, *actions]) + b"\n"


def bulk_actions(seed: int, n: int) -> list[dict[str, Any]]:
    """``n`` file actions built from a seed (cheap to draw): commits big enough for replay's
    columnar JSON path, with re-adds and removes of the same paths."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for _ in range(n):
        part = rng.choice("ab")
        path = f"part={part}/bulk-{rng.randrange(150)}.parquet"
        if rng.random() < 0.2:
            out.append({"remove": {"path": path, "dataChange": True, "deletionTimestamp": FAR_FUTURE_MS}})
            continue
        add: dict[str, Any] = {"path": path, "partitionValues": {"part": part}, "size": rng.randrange(2**40),
                               "modificationTime": rng.randrange(2**41), "dataChange": rng.random() < 0.9}
        if rng.random() < 0.7:
            add["stats"] = json.dumps({"numRecords": rng.randrange(1000)})
        if rng.random() < 0.1:
            add["tags"] = {"t": str(rng.randrange(9))}
        out.append({"add": add})
    return out


@st.composite
def valid_logs(draw, bulk: bool = False) -> tuple[dict[int, bytes], list[int]]:
    """Commits 0..n (bytes) and the versions to checkpoint; ``bulk`` adds commits of 64-160 file actions."""
    first = [{"protocol": draw(st.sampled_from(PROTOCOLS))}, draw(metadata_actions())]
    first += draw(st.lists(add_actions(), max_size=3))
    commits = {0: encode(first, 0)}
    for v in range(1, draw(st.integers(1, 5 if bulk else 9)) + 1):
        actions = draw(st.lists(st.one_of(add_actions(), add_actions(), remove_actions(), other_actions),
                                min_size=1, max_size=5))
        if bulk and draw(st.booleans()):
            actions += bulk_actions(draw(st.integers(0, 2**32)), draw(st.integers(64, 160)))
        commits[v] = encode(actions, v)
    checkpoints = draw(st.lists(st.sampled_from(sorted(commits)), max_size=2, unique=True))
    return commits, sorted(checkpoints)


def fresh_store():
    return open_store(f"memory://deltatx-fuzz/{uuid.uuid4().hex}")


def write_log(store, commits: dict[int, bytes], checkpoints: list[int]) -> dict[int, ModelState]:
    """Write commits, then checkpoints (built by deltatx); returns the model state at each checkpoint."""
    for v in sorted(commits):
        store.put_commit(v, commits[v])
    states = {}
    for c in checkpoints:
        write_checkpoint(store, load_snapshot(store, version=c))
        states[c] = replay(commits, {}, target=c)
    return states


def drop_store(store) -> None:
    if store.fs.exists(store.root):
        store.fs.rm(store.root, recursive=True)


def assert_same(snapshot, model: ModelState) -> None:
    got = snapshot_state(snapshot)
    assert got.version == model.version
    assert got.protocol == model.protocol
    assert got.metadata == model.metadata
    assert got.txns == model.txns
    assert got.domains == model.domains
    assert got.files == model.files
    assert got.tombstones == model.tombstones


# --------------------------------------------------------------------------------------------
# Valid logs
# --------------------------------------------------------------------------------------------


@FUZZ
@given(log=valid_logs(), data=st.data())
def test_valid_logs_replay_like_the_model(log, data):
    check_valid_log(log, data)


@settings(FUZZ, max_examples=40)
@given(log=valid_logs(bulk=True), data=st.data())
def test_valid_bulk_logs_replay_like_the_model(log, data):
    check_valid_log(log, data)


def check_valid_log(log, data) -> None:
    commits, checkpoints = log
    store = fresh_store()
    try:
        write_log(store, commits, checkpoints)
        latest = max(commits)
        assert_same(load_snapshot(store), replay(commits, {}))
        target = data.draw(st.integers(0, latest), label="time travel")
        older = load_snapshot(store, version=target)
        assert_same(older, replay(commits, {}, target=target))
        assert_same(older.refresh(store), replay(commits, {}))
        older.schema  # the schema string parses
    finally:
        drop_store(store)


@settings(FUZZ, max_examples=60)
@given(log=valid_logs())
def test_parse_commit_agrees_with_the_model_line_by_line(log):
    commits, _ = log
    for v, data in commits.items():
        parsed = parse_commit(data, v)
        actions = parse_lines(data, v)
        assert len(parsed.add_rows) == sum(1 for k, _ in actions if k == "add")
        assert len(parsed.remove_rows) == sum(1 for k, _ in actions if k == "remove")
        assert [k for k, _ in parsed.file_order] == [k for k, _ in actions if k in ("add", "remove")]
        assert parsed.adds.num_rows == len(parsed.add_rows) and parsed.removes.num_rows == len(parsed.remove_rows)
        assert parsed.commit_info == {"operation": "FUZZ", "timestamp": 1_700_000_000_000 + v}


# --------------------------------------------------------------------------------------------
# Corrupted logs
# --------------------------------------------------------------------------------------------

json_values = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False, allow_infinity=False),
    small_text, st.lists(st.integers(0, 3), max_size=2), st.dictionaries(small_text, st.integers(0, 3), max_size=2),
    st.dictionaries(small_text, small_text, max_size=2), st.lists(small_text, max_size=2),
)
BAD_LINES = [b"{", b"not json", b'{"add": {"path": "x"', b"[]", b'{"add": 1}', b"null", b"{}",
             b'{"add": {}, "remove": {}}', b'{"metaData": {"id": "x"}}', b'{"add": {"path": 1e999}}', b"\xff\xfe"]


def _wrong_type(data: bytes, draw) -> bytes:
    """One field of one action (commitInfo only rarely: its fields are free-form) gets a random value."""
    lines = [line for line in data.split(b"\n") if line.strip()]
    actions = [i for i, line in enumerate(lines) if not line.startswith(b'{"commitInfo"')]
    index = draw(st.sampled_from(actions)) if actions and draw(st.integers(0, 5)) else 0
    obj = json.loads(lines[index])
    (kind, body), = obj.items()
    if isinstance(body, dict) and body:
        name = draw(st.sampled_from(sorted(body)))
        body[name] = draw(json_values)
    else:
        obj[kind] = draw(json_values)
    lines[index] = json.dumps(obj).encode()
    return b"\n".join(lines) + b"\n"


@st.composite
def corruptions(draw, commits: dict[int, bytes], checkpoints: list[int]):
    """(description, corrupted commits, checkpoint versions still intact, extra log files)."""
    kinds = ["wrong_type", "flip", "truncate", "drop", "bad_json", "wrong_type", "hint"]
    if checkpoints:
        kinds.append("truncate_checkpoint")
    kind = draw(st.sampled_from(kinds))
    v = draw(st.sampled_from(sorted(commits)))
    corrupted = dict(commits)
    intact = list(checkpoints)
    extra: dict[str, bytes] = {}
    data = commits[v]
    if kind == "truncate":
        corrupted[v] = data[: draw(st.integers(0, len(data) - 1))]
    elif kind == "flip":
        raw = bytearray(data)
        for _ in range(draw(st.integers(1, 3))):
            raw[draw(st.integers(0, len(raw) - 1))] ^= draw(st.integers(1, 255))
        corrupted[v] = bytes(raw)
    elif kind == "drop":
        del corrupted[v]
    elif kind == "bad_json":
        lines = data.split(b"\n")
        lines[draw(st.integers(0, len(lines) - 1))] = draw(st.sampled_from(BAD_LINES))
        corrupted[v] = b"\n".join(lines)
    elif kind == "wrong_type":
        corrupted[v] = _wrong_type(data, draw)
    elif kind == "hint":
        extra[LAST_CHECKPOINT] = draw(st.sampled_from([
            b"", b"{", b"[]", b'{"version": "3"}', b'{"version": -1}', b'{"version": 999}', b'{"version": 0}',
            b'{"version": 1.5}', b'{"version": true}', b"\x00\x01"]))
    else:
        c = draw(st.sampled_from(checkpoints))
        intact.remove(c)
        extra[checkpoint_name(c)] = b"truncate"  # marker: truncated below, once written
    return kind, v, corrupted, intact, extra


def expected_outcome(corrupted: dict[int, bytes], trusted: dict[int, ModelState]) -> ModelState | InvalidLog:
    try:
        return replay(corrupted, trusted)
    except InvalidLog as exc:
        return exc


@settings(FUZZ, max_examples=250)
@given(log=valid_logs(), data=st.data())
def test_corrupted_logs_give_typed_errors_or_the_models_answer(log, data):
    check_corrupted_log(log, data)


@settings(FUZZ, max_examples=80)
@given(log=valid_logs(bulk=True), data=st.data())
def test_corrupted_bulk_logs_give_typed_errors_or_the_models_answer(log, data):
    check_corrupted_log(log, data)


def check_corrupted_log(log, data) -> None:
    commits, checkpoints = log
    kind, v, corrupted, intact, extra = data.draw(corruptions(commits, checkpoints), label="corruption")
    store = fresh_store()
    try:
        states = write_log(store, commits, checkpoints)
        for version in commits:
            if version not in corrupted:
                store.delete_log_file(commit_name(version))
            elif corrupted[version] != commits[version]:
                store.write_log_file(commit_name(version), corrupted[version])
        for name, content in extra.items():
            if content == b"truncate":
                whole = store.read_log_file(name)
                content = whole[: data.draw(st.integers(0, len(whole) - 1), label="checkpoint bytes")]
            store.write_log_file(name, content)
        expected = expected_outcome(corrupted, {c: states[c] for c in intact})
        try:
            snapshot = load_snapshot(store)
            snapshot.schema
            got = snapshot_state(snapshot)
        except DeltaTxError as exc:
            event(f"{kind}: {type(exc).__name__}")
            # typed, as it must be, and only for a log the model rejects too
            assert isinstance(expected, InvalidLog), (
                f"{kind} of commit {v}: typed error {exc!r} on a log the model reads ({expected})")
            return
        except Exception as exc:  # noqa: BLE001 - the property under test
            pytest.fail(f"{kind} of commit {v} raised an untyped {type(exc).__name__}: {exc}")
        assert not isinstance(expected, InvalidLog), (
            f"{kind} of commit {v}: deltatx returned a snapshot for a log the model rejects ({expected})")
        event(f"{kind}: still valid, equal to the model")
        assert_same(snapshot, expected)
        assert got.version == expected.version
    finally:
        drop_store(store)
