"""The driver/task protocol that finds every file a Spark job's tasks wrote (spark/job_files.py),
exercised without Spark: tasks are threads, orderings are forced with events (no sleeps)."""

from __future__ import annotations

import os
import threading

from deltatx.spark import job_files
from deltatx.spark.job_files import JobFiles
from deltatx.txnlog.store import open_store


def _write(store, name: str) -> str:
    with open(os.path.join(store.root, name), "wb") as fh:
        fh.write(b"x")
    return name


def test_a_task_still_writing_when_the_job_fails_is_waited_for_and_cleaned(tmp_path, monkeypatch):
    """The straggler announced itself, then the driver closed the job (another task failed):
    the driver waits for it, the straggler finds the job closed and deletes what it wrote."""
    store = open_store(str(tmp_path))
    job = JobFiles.open(store)
    started, driver_closing = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}
    listing = JobFiles._entries_once_tasks_ended

    def open_deleted_then_list(self, store):  # the driver deleted OPEN: let the straggler go on
        driver_closing.set()
        return listing(self, store)

    monkeypatch.setattr(JobFiles, "_entries_once_tasks_ended", open_deleted_then_list)

    def straggler():
        marker = job.begin(store)
        started.set()
        assert driver_closing.wait(5)
        written = _write(store, "deletion_vector_late.bin")  # written after the driver gave up
        outcome["recorded"] = job.record(store, [written])
        if not outcome["recorded"]:
            os.remove(os.path.join(store.root, written))
        job.end(store, marker)

    task = threading.Thread(target=straggler)
    task.start()
    started.wait(5)
    finished = threading.Event()

    def close():
        outcome["orphans"] = job.close(store)
        finished.set()

    closer = threading.Thread(target=close)
    closer.start()
    task.join(5)
    closer.join(5)
    assert finished.is_set()
    assert outcome["recorded"] is False and outcome["orphans"] == []
    assert sorted(os.listdir(tmp_path)) == []  # no DV file, no staging folder


def test_a_task_that_named_its_files_before_the_job_ended_has_them_deleted_by_the_driver(tmp_path):
    store = open_store(str(tmp_path))
    job = JobFiles.open(store)
    marker = job.begin(store)
    written = _write(store, "part-00000-a.parquet")
    assert job.record(store, [written]) is True
    job.end(store, marker)
    assert job.close(store) == [written]
    assert sorted(os.listdir(tmp_path)) == []
    kept = JobFiles.open(store)
    m = kept.begin(store)
    name = _write(store, "part-00001-b.parquet")
    kept.record(store, [name])
    kept.end(store, m)
    assert kept.close(store, keep=[name]) == [] and os.listdir(tmp_path) == [name]


def test_a_task_starting_after_the_job_closed_writes_nothing(tmp_path):
    store = open_store(str(tmp_path))
    job = JobFiles.open(store)
    os.makedirs(job.folder, exist_ok=True)
    os.remove(os.path.join(job.folder, "OPEN"))  # the driver closed the job first
    assert job.begin(store) is None
    assert os.listdir(job.folder) == []
    assert job.close(store) == [] and not os.path.exists(job.folder)
    assert job.begin(store) is None  # the folder itself is gone: still nothing written
    assert not os.path.exists(job.folder)


def test_a_task_killed_while_running_delays_the_driver_only_boundedly(tmp_path, monkeypatch):
    monkeypatch.setattr(job_files, "RUNNING_WAIT_S", 0.05)
    store = open_store(str(tmp_path))
    job = JobFiles.open(store)
    assert job.begin(store) is not None  # and never ends: its worker was killed
    assert job.close(store) == []
    assert not os.path.exists(job.folder)
