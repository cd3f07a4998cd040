"""Which data files a Spark job's tasks wrote, known to the driver even when the job fails.

Why: when one task of a job fails, Spark aborts the job while other tasks may still be running
or may have finished writing; their results (and accumulator updates) are then dropped, so the
driver cannot learn from Spark which files they left. This module is a small protocol on the
table's own storage, under ``_deltatx_spark/<job id>/`` (VACUUM skips ``_`` folders)::

    driver   write OPEN                                  before the job starts
    task     write a RUNNING marker (its own file); OPEN gone? -> remove it, write nothing
             write its data files
             write a manifest (its own file) naming them
             OPEN gone?  -> delete its data files and manifest; return nothing
             remove its RUNNING marker
    driver   (job over, success or failure) delete OPEN, wait until no RUNNING marker is left
             (at most RUNNING_WAIT_S), read every manifest, delete each listed file the
             commit will not reference, remove the folder

Why it is complete: a task checks OPEN after its manifest is durable; the driver lists
manifests after deleting OPEN. Either the task's check came first — then its manifest was
written before the driver's listing and the driver deletes the files — or the driver's delete
came first — then the task sees OPEN gone and deletes its own files.

Why the RUNNING markers: when one task fails, Spark aborts the job while the others may be
between writing a file and naming it, and stops waiting for them. A task announces itself
before it writes anything (and checks OPEN after that), so the driver, having deleted OPEN,
sees every task that may still write and waits for it to name or delete its files. Only a task
killed outright in that window (Spark force-kills a Python worker that ignores a kill for
``spark.python.task.killTimeout``) or a crashed driver leaves files behind; no commit
references them and VACUUM removes them (a crashed driver's ``_deltatx_spark/<job>`` folder is
safe to delete when no job runs). The same pass deletes the output of duplicate task attempts
(speculation, retries) that Spark did not use.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from ..txnlog.store import LogStore

STAGING_DIR = "_deltatx_spark"
_OPEN = "OPEN"
_RUNNING = ".running"
#: how long the driver waits for tasks still running after the job ended (a killed task's
#: Python worker is force-killed after Spark's killTimeout, 2 s by default)
RUNNING_WAIT_S = 10.0
_RUNNING_POLL_S = 0.01


@dataclass(frozen=True)
class JobFiles:
    """The staging folder of one job (a path in the store's fsspec filesystem)."""

    folder: str

    @classmethod
    def open(cls, store: "LogStore") -> "JobFiles":
        """Driver: create the job's folder and its OPEN token."""
        folder = f"{store.root}/{STAGING_DIR}/{uuid.uuid4().hex}"
        store.fs.makedirs(folder, exist_ok=True)
        store.fs.pipe_file(f"{folder}/{_OPEN}", b"")
        return cls(folder)

    def begin(self, store: "LogStore") -> str | None:
        """Task, before it writes anything: its RUNNING marker, or None if the job is closed
        already (then the task must write nothing)."""
        marker = f"{self.folder}/{uuid.uuid4().hex}{_RUNNING}"
        try:
            store.fs.pipe_file(marker, b"")
        except FileNotFoundError:  # the driver removed the job's folder: it is over
            return None
        if store.fs.exists(f"{self.folder}/{_OPEN}"):
            return marker
        _remove(store, [marker])
        return None

    def end(self, store: "LogStore", marker: str) -> None:
        """Task, after it named or deleted what it wrote: the driver need not wait for it."""
        _remove(store, [marker])

    def record(self, store: "LogStore", paths: list[str]) -> bool:
        """Task: name the files it wrote (decoded relative paths); False if the job is closed.

        On False the caller must delete its files itself: the driver may already have looked.
        """
        if not paths:
            return True
        manifest = f"{self.folder}/{uuid.uuid4().hex}.json"
        store.fs.pipe_file(manifest, json.dumps(paths).encode())
        if store.fs.exists(f"{self.folder}/{_OPEN}"):
            return True
        _remove(store, [manifest])
        return False

    def close(self, store: "LogStore", keep: Iterable[str] = ()) -> list[str]:
        """Driver: end the job; delete every recorded file not in ``keep``. Returns those deleted."""
        fs = store.fs
        _remove(store, [f"{self.folder}/{_OPEN}"])
        entries = self._entries_once_tasks_ended(store)
        keep = set(keep)
        orphans: list[str] = []
        for manifest in entries:
            try:
                orphans.extend(p for p in json.loads(fs.cat_file(manifest)) if p not in keep)
            except FileNotFoundError:  # a task that found the job closed removed its own
                continue
        if orphans:
            store.delete_files(orphans)
        try:
            fs.rm(self.folder, recursive=True)
            fs.rmdir(self.folder.rsplit("/", 1)[0])  # the parent too, unless another job uses it
        except OSError:  # gone already, or not empty (a concurrent job), or no folders (object stores)
            pass
        return orphans

    def _entries_once_tasks_ended(self, store: "LogStore") -> list[str]:
        """The manifests, listed once no task is running (or :data:`RUNNING_WAIT_S` passed)."""
        deadline = time.monotonic() + RUNNING_WAIT_S
        while True:
            try:
                found = [p for p in store.fs.find(self.folder) if not p.endswith(f"/{_OPEN}")]
            except FileNotFoundError:
                return []
            manifests = [p for p in found if not p.endswith(_RUNNING)]
            if len(manifests) == len(found) or time.monotonic() >= deadline:
                return manifests
            time.sleep(_RUNNING_POLL_S)


def _remove(store: "LogStore", paths: list[str]) -> None:
    for path in paths:
        try:
            store.fs.rm_file(path)
        except FileNotFoundError:
            pass
