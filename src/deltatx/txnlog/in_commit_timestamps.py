"""In-commit timestamps (writer feature ``inCommitTimestamp``): when a commit happened, in the commit.

Why: a file's modification time is not a commit time anyone can trust (copies, clock skew,
object stores that rewrite it), so time travel by timestamp and DESCRIBE HISTORY drift. With
``delta.enableInCommitTimestamps=true`` every commit carries its own timestamp (PROTOCOL.md,
"In-Commit Timestamps", writer requirements 1-5):

- ``commitInfo`` is present and the *first* action (``actions.encode_commit`` writes it first);
- ``commitInfo.inCommitTimestamp = max(attempt time, previous commit's inCommitTimestamp + 1)``,
  so the timestamps strictly increase with the versions;
- the commit that turns the feature on for a table with earlier commits records
  ``delta.inCommitTimestampEnablementVersion`` / ``…EnablementTimestamp`` in the same commit, and
  its timestamp is later than the previous commit file's modification time.

A transaction that loses the race for its version is rebased onto the winners; its timestamp then
becomes ``max(own, winner's + 1)`` and, when it is the enabling commit, the recorded enablement
version and timestamp move with it. :class:`CommitClock` keeps that state across attempts so the
commit loop only asks it to stamp each attempt. Reading the timestamps back is history.py's job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .actions import CommitActions, Metadata
from .history import ict_enablement_version

if TYPE_CHECKING:
    from .snapshot import Snapshot
    from .store import LogStore

ICT_ENABLED = "delta.enableInCommitTimestamps"
ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
ENABLEMENT_TIMESTAMP = "delta.inCommitTimestampEnablementTimestamp"
FIELD = "inCommitTimestamp"


def is_enabled(configuration: dict[str, str]) -> bool:
    """Whether ``delta.enableInCommitTimestamps`` is on (the feature's "active" condition)."""
    return configuration.get(ICT_ENABLED, "false").strip().lower() == "true"


def commit_ict(commit_info: dict[str, Any] | None) -> int | None:
    """The ``inCommitTimestamp`` a commit carries, if any."""
    value = (commit_info or {}).get(FIELD)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def stamp_creation(commit_info: dict[str, Any], configuration: dict[str, str]) -> dict[str, Any]:
    """Version 0 of a table created with in-commit timestamps: its own clock is the timestamp
    (there is no previous commit, so nothing to record about an enablement)."""
    if is_enabled(configuration):
        commit_info[FIELD] = int(commit_info["timestamp"])
    return commit_info


def commit_file_time(store: "LogStore", version: int) -> int | None:
    """The modification time (ms) of commit ``version``'s file, None when there is none: the floor
    of the timestamp of the commit that turns in-commit timestamps on (requirement 5)."""
    if version < 0:
        return None
    for f in store.list_log(version):
        if f.kind == "commit" and f.version == version:
            return f.mtime_ms
    return None


class CommitClock:
    """The in-commit timestamp of one transaction's commit, across its attempts.

    ``observe`` is told of every winning commit read during a rebase; ``stamp`` gives the
    ``commitInfo`` (and, for the enabling commit, the metadata) of the next attempt. When in-commit
    timestamps are off before and after this commit, ``stamp`` changes nothing (O(1)).
    """

    def __init__(self, store: "LogStore", snapshot: "Snapshot"):
        self._store = store
        self._attempt_ms: int | None = None  # the first attempt's clock: "own" timestamp
        self._stamped = False
        self._moved = False
        # the previous commit's in-commit timestamp, when it has one
        self._previous: int | None = None
        ict_from = ict_enablement_version(snapshot.metadata.configuration)
        if ict_from is not None and snapshot.version >= ict_from:
            self._previous = snapshot.timestamp_ms

    @property
    def stale(self) -> bool:
        """True when a winner was read after the last stamped attempt: re-stamp before retrying."""
        return self._stamped and self._moved

    def observe(self, winner: CommitActions) -> None:
        """A commit that took the version this transaction tried: the next stamp follows it."""
        self._previous = commit_ict(winner.commit_info)
        self._moved = True

    def stamp(self, commit_info: dict[str, Any], version: int, read_metadata: Metadata,
              staged_metadata: Metadata | None) -> tuple[dict[str, Any], Metadata | None]:
        """The ``commitInfo`` and staged metadata to commit at ``version``."""
        effective = staged_metadata or read_metadata
        if not is_enabled(effective.configuration) or getattr(self._store, "stamps_in_commit_timestamps", False):
            return commit_info, staged_metadata  # off, or a catalog's commit path stamps them
        if self._attempt_ms is None:
            self._attempt_ms = int(commit_info["timestamp"])
        self._stamped, self._moved = True, False
        enabling = version > 0 and not is_enabled(read_metadata.configuration)
        floor = self._previous
        if enabling or floor is None:
            # Requirement 5: later than the previous commit file's modification time.
            floor = commit_file_time(self._store, version - 1)
        timestamp = self._attempt_ms if floor is None else max(self._attempt_ms, floor + 1)
        stamped = {FIELD: timestamp, **{k: v for k, v in commit_info.items() if k != FIELD}}
        if enabling:
            assert staged_metadata is not None  # turning the property on is a metadata change
            configuration = dict(staged_metadata.configuration)
            configuration[ENABLEMENT_VERSION] = str(version)
            configuration[ENABLEMENT_TIMESTAMP] = str(timestamp)
            staged_metadata = staged_metadata.replace(configuration=configuration)
        return stamped, staged_metadata

