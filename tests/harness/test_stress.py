"""Stress in separate OS processes: the reliability suite scaled down for ``make test``.

R1 mixed workload at both levels, R4 S3 (moto on 127.0.0.1), R5 bank under Serializable. Writers
start together at a barrier; the full sizes run as the soak.
"""

from __future__ import annotations

import json

import pytest

import deltatx
from deltatx.harness import HarnessError, run_stress


def summary(report) -> str:
    return json.dumps(report.to_dict(), indent=1)[:4000]


@pytest.mark.parametrize("isolation", ["Serializable", "WriteSerializable"])
def test_r1_mixed_workload(tmp_path, isolation):
    calls = []
    report = run_stress(str(tmp_path / "t"), processes=4, ops=15, workload="mixed", isolation=isolation,
                        seed=11, progress=lambda done, total: calls.append((done, total)))
    assert report.ok, summary(report)
    assert len(report.operations) == 60
    assert calls[-1] == (60, 60) and [d for d, _ in calls] == list(range(1, 61))
    assert report.commits > 0 and report.attempts >= report.commits
    assert report.commits_per_s > 0
    table = deltatx.Table(str(tmp_path / "t"))
    assert table.version == report.final_version == 1 + report.commits  # create + setup + each commit
    assert {c for c in report.conflicts_by_class} <= {
        "ConcurrentAppendException", "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
        "MetadataChangedException"}
    data = json.loads(json.dumps(report.to_dict()))
    assert data["ok"] is True and data["anomalies"] == [] and data["commits"] == report.commits


@pytest.mark.s3
def test_r4_writers_on_s3(s3_bucket):
    prefix, options = s3_bucket
    report = run_stress(f"{prefix}/stress", processes=4, ops=10, workload="append", storage_options=options, seed=4)
    assert report.ok, summary(report)
    assert report.commits == 40, "blind appends never conflict: every operation commits"
    assert report.conflicts_by_class == {}
    assert deltatx.Table(f"{prefix}/stress", storage_options=options).version == 41


def test_r5_bank_transfers_serializable(tmp_path):
    report = run_stress(str(tmp_path / "bank"), processes=4, ops=10, workload="bank", isolation="Serializable",
                        seed=5)
    assert report.ok, summary(report)
    assert report.operations_by_kind["transfer"].get("committed", 0) > 0
    total = deltatx.Table(str(tmp_path / "bank")).to_arrow()["balance"].to_pylist()
    assert sum(total) == 16 * 100


def test_a_broken_commit_path_in_the_writers_is_reported(tmp_path):
    """worker_init installs a store that acknowledges commits it never writes, in every writer."""
    report = run_stress(str(tmp_path / "t"), processes=2, ops=3, workload="append",
                        worker_init="deltatx.harness.faults:install_drop_commits")
    assert not report.ok
    lost = [a for a in report.anomalies if a.checker == "no_lost_commit" and "lost commit" in a.message]
    assert len(lost) == 6 and {a.writer for a in lost} == {"w0", "w1"}
    # the replay (6 appends) does not match the table (setup only) either
    assert {a.checker for a in report.anomalies} == {"no_lost_commit", "write_serializable"}
    assert report.to_dict()["ok"] is False


def test_duration_bounded_run(tmp_path):
    totals = set()
    report = run_stress(str(tmp_path / "t"), processes=2, ops=None, duration_s=0.5, workload="append",
                        progress=lambda done, total: totals.add(total))
    assert report.ok, summary(report)
    assert report.ops is None and report.duration_s == 0.5
    assert {r.writer for r in report.operations} == {"w0", "w1"}
    assert totals == {None}


def test_a_writer_that_cannot_start_is_reported(tmp_path):
    report = run_stress(str(tmp_path / "t"), processes=2, ops=2, worker_init="no_such_module:install")
    assert not report.ok
    assert any(a.checker == "workers" and "ModuleNotFoundError" in a.message for a in report.anomalies)


@pytest.mark.parametrize("kwargs, message", [
    (dict(uri="memory://x/y"), "memory:// table lives in one process"),
    (dict(workload="ledger"), "unknown workload"),
    (dict(isolation="serializable"), "did you mean 'Serializable'"),
    (dict(processes=0), "processes must be a positive integer"),
    (dict(ops=0), "ops must be a positive integer"),
])
def test_bad_arguments(tmp_path, kwargs, message):
    args = dict(uri=str(tmp_path / "t"), processes=2, ops=2)
    args.update(kwargs)
    with pytest.raises(HarnessError, match=message):
        run_stress(**args)
