"""Which data files a Spark job's tasks wrote, known to the driver even when the job fails.

Why: when one task of a job fails, Spark aborts the job while other tasks may still be running
or may have finished writing; their results (and accumulator updates) are then dropped, so the
driver cannot learn from Spark which files they left. This module is a small protocol on the
table's own storage, under ``_deltatx_spark/<job id>/`` (VACUUM skips ``_`` folders)::

    driver   write OPEN                                  before the job starts
    task     write its data files
             write a manifest (its own file) naming them
             OPEN gone?  -> delete its data files and manifest; return nothing
    driver   (job over, success or failure) delete OPEN, read every manifest, delete each
             listed file the commit will not reference, remove the folder

Why it is complete: a task checks OPEN after its manifest is durable; the driver lists
manifests after deleting OPEN. Either the task's check came first — then its manifest was
written before the driver's listing and the driver deletes the files — or the driver's delete
came first — then the task sees OPEN gone and deletes its own files. Only a task killed between
writing data and writing its manifest (or a crashed driver) leaves files behind; no commit
references them and VACUUM removes them (a crashed driver's ``_deltatx_spark/<job>`` folder is
safe to delete when no job runs). The same pass deletes the output of duplicate task attempts
(speculation, retries) that Spark did not use.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from ..txnlog.store import LogStore

STAGING_DIR = "_deltatx_spark"
_OPEN = "OPEN"


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
        try:
            entries = [p for p in fs.find(self.folder) if not p.endswith(f"/{_OPEN}")]
        except FileNotFoundError:
            entries = []
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


def _remove(store: "LogStore", paths: list[str]) -> None:
    for path in paths:
        try:
            store.fs.rm_file(path)
        except FileNotFoundError:
            pass
