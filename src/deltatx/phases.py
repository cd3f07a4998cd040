"""Named points on the write / commit / checkpoint path, observable by the harness.

Why: races and crashes happen *between* steps. The concurrency harness (``deltatx.harness``)
parks a transaction at a named phase behind a barrier to replay an exact interleaving, and the
crash-injection suite ends the process at one. Production code only announces the phase; with no
observer installed, :func:`reached` is one truthiness test and costs nothing measurable.

Phases, in the order one write meets them::

    begin                  a transaction pinned its snapshot        (version = read version)
    read                   it recorded a read                        (predicate text or None)
    data_files_written     its data files are on storage, not yet referenced by the log
    attempt_commit         about to put-if-absent the next version   (version)
    commit_temp_written    local disk: temp commit file durable, not yet linked
    commit_linked          local disk: the link succeeded, version is committed
    resolve_conflict       lost the race for ``version``; about to read the winners
    staged                 catalog table: commit staged in _staged_commits, not yet ratified
    ratified               catalog table(s): the database ratified the version(s)
    published              the commit is in the log                  (version)
    checkpoint_written     checkpoint Parquet published, ``_last_checkpoint`` not yet
    last_checkpoint_written ``_last_checkpoint`` points at it

Observers are process-global (a list of callables) and are called in the thread that reached
the phase, with keyword context, so an observer can tell transactions apart by ``txn_id``.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

PHASES: tuple[str, ...] = (
    "begin",
    "read",
    "data_files_written",
    "attempt_commit",
    "commit_temp_written",
    "commit_linked",
    "resolve_conflict",
    "staged",
    "ratified",
    "published",
    "checkpoint_written",
    "last_checkpoint_written",
)

Observer = Callable[..., None]

_observers: list[Observer] = []
_lock = threading.Lock()


def reached(phase: str, **context: Any) -> None:
    """Announce that this thread reached ``phase``; observers may block (barriers) or exit."""
    if not _observers:
        return
    for observer in tuple(_observers):
        observer(phase, **context)


@contextmanager
def observe(observer: Observer) -> Iterator[Observer]:
    """Install ``observer(phase, **context)`` for the duration of the block."""
    with _lock:
        _observers.append(observer)
    try:
        yield observer
    finally:
        with _lock:
            _observers.remove(observer)


def install(observer: Observer) -> None:
    """Install an observer for the rest of the process (crash injection in a child process)."""
    with _lock:
        _observers.append(observer)
