"""R2: kill a writer (``os._exit(137)`` in a spawned child) at each named phase of the
write/commit/checkpoint path, then check that the table opens, acknowledged commits are intact,
the uncommitted write is invisible, VACUUM removes its orphan files and a new writer commits.

One crash per phase here (local disk: the only store with commit_temp_written/commit_linked);
``python -m benchmarks.soak`` runs 1,000 random (phase, N) points with the same helpers.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltatx
from crash_helpers import (
    CRASH_PHASES,
    OP_KINDS,
    CrashCheckFailed,
    census,
    launch_child,
    plan_workload,
    run_crash_point,
    verify_after_crash,
)

SEED = 5


@pytest.fixture(scope="module")
def plan_and_counts(tmp_path_factory):
    plan = plan_workload(SEED)
    return plan, census(tmp_path_factory.mktemp("census"), plan)


def test_the_workload_reaches_every_phase(plan_and_counts):
    plan, counts = plan_and_counts
    assert {op["kind"] for op in plan} == set(OP_KINDS)
    assert all(counts[p] > 0 for p in CRASH_PHASES), counts


@pytest.mark.parametrize("phase", CRASH_PHASES)
def test_crash_at_phase(phase, plan_and_counts, tmp_path):
    plan, counts = plan_and_counts
    nth = (counts[phase] + 1) // 2  # mid-workload: earlier commits are acknowledged
    outcome = run_crash_point(tmp_path, plan, phase, nth)
    assert outcome.crashed
    assert outcome.acked_commits >= 1
    if phase in ("data_files_written", "attempt_commit", "commit_temp_written"):
        assert not outcome.in_flight_committed
    if phase in ("commit_linked", "published"):
        assert outcome.in_flight_committed  # durable before the ack: the log has it, readers see it


def test_no_crash_when_n_is_past_the_end(plan_and_counts, tmp_path):
    plan, counts = plan_and_counts
    outcome = run_crash_point(tmp_path, plan, "published", counts["published"] + 1)
    assert not outcome.crashed and not outcome.in_flight_committed


# ---- the checks can fail: a lost commit and a silently changed data file are both caught ----
def test_verifier_catches_a_lost_acknowledged_commit(plan_and_counts, tmp_path):
    plan, counts = plan_and_counts
    uri, acks, crashed = launch_child(tmp_path, plan, "published", counts["published"] + 1)
    assert not crashed
    newest = max(a["version"] for a in acks if a.get("committed"))
    (tmp_path / "table" / "_delta_log" / f"{newest:020d}.json").unlink()
    with pytest.raises(CrashCheckFailed, match="not in the log"):
        verify_after_crash(uri, plan, acks, "published", 0, crashed=False)


def test_verifier_catches_changed_rows(plan_and_counts, tmp_path):
    plan, counts = plan_and_counts
    nth = counts["data_files_written"]
    uri, acks, crashed = launch_child(tmp_path, plan, "data_files_written", nth)
    assert crashed
    table = deltatx.Table(uri)
    victim = table.files()["path"][0].as_py()
    original = pq.read_table(f"{uri}/{victim}")
    pq.write_table(original.set_column(0, "id", pa.array([-1] * original.num_rows, pa.int64())),
                   f"{uri}/{victim}")
    with pytest.raises(CrashCheckFailed, match="rows differ"):
        verify_after_crash(uri, plan, acks, "data_files_written", nth, crashed=True)
