"""Commit history and commit timestamps: DESCRIBE HISTORY and time travel by timestamp.

Owns Delta's rule for *when* a version was committed:

- with in-commit timestamps (``delta.enableInCommitTimestamps=true``, from
  ``delta.inCommitTimestampEnablementVersion`` on), the commit's ``commitInfo.inCommitTimestamp``;
- otherwise the commit file's modification time made monotonic: a commit's timestamp is
  ``max(its mtime, previous commit's timestamp + 1)``, so clock skew or a copied log never
  makes a later version look older.

Only the commits that can still be rebuilt count ("retained"): from version 0 when commit 0
exists, else from the oldest complete checkpoint.
"""

from __future__ import annotations

import bisect
import math
import operator
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING, Any, Sequence

import orjson

from ..errors import (ArgumentTypeError, CorruptLogError, InvalidArgumentError, InvalidPropertyError,
                      TableNotFoundError, TimeTravelError)
from .checkpoint import complete_checkpoints
from .replay import read_commit_bytes
from .store import LogFile, LogStore

if TYPE_CHECKING:
    from .snapshot import Snapshot

ICT_ENABLED = "delta.enableInCommitTimestamps"
ICT_ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"


def ict_enablement_version(configuration: dict[str, str]) -> int | None:
    """First version carrying in-commit timestamps, or None when they are off."""
    if configuration.get(ICT_ENABLED, "false").strip().lower() != "true":
        return None
    raw = configuration.get(ICT_ENABLEMENT_VERSION)
    if raw is None:
        return 0
    try:
        return int(raw)
    except ValueError:
        raise InvalidPropertyError(
            f"{ICT_ENABLEMENT_VERSION}={raw!r} must be an integer version"
        ) from None


def monotonic_mtimes(commits: Sequence[LogFile], previous: int | None = None) -> list[int]:
    """Each commit's ``max(mtime, previous + 1)``, in the given (version) order."""
    out = []
    last = previous
    for f in commits:
        ts = f.mtime_ms if last is None or f.mtime_ms > last else last + 1
        out.append(ts)
        last = ts
    return out


def commit_info_from_bytes(data: bytes, version: int) -> dict[str, Any] | None:
    """The ``commitInfo`` of a commit file, found without parsing the other actions."""
    marker = b'{"commitInfo"'
    if data.startswith(marker):
        start = 0
    else:
        found = data.find(b"\n" + marker)
        start = found + 1 if found >= 0 else -1
    if start >= 0:
        end = data.find(b"\n", start)
        candidates = [data[start:] if end < 0 else data[start:end]]
    else:  # unusual formatting (spaces, other key order): look at every line that mentions it
        candidates = [line for line in data.split(b"\n") if b'"commitInfo"' in line]
    for line in candidates:
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise CorruptLogError(
                f"commit {version}: its commitInfo line is not valid JSON; the commit file is corrupt",
                version=version,
            ) from None
        if isinstance(obj, dict) and isinstance(obj.get("commitInfo"), dict):
            return obj["commitInfo"]
    return None


def earliest_recoverable_version(listing: Sequence[LogFile]) -> int | None:
    """0 if commit 0 exists, else the oldest complete checkpoint's version, else None."""
    if any(f.kind == "commit" and f.version == 0 for f in listing):
        return 0
    checkpoints = complete_checkpoints(listing)
    return min(checkpoints) if checkpoints else None


def retained_commits(listing: Sequence[LogFile]) -> list[LogFile]:
    """Commit files of the versions that can still be rebuilt, oldest first."""
    earliest = earliest_recoverable_version(listing)
    if earliest is None:
        return []
    return [f for f in listing if f.kind == "commit" and f.version >= earliest]


class CommitTimeline(Sequence[int]):
    """Commit timestamps of ``commits``, read lazily where in-commit timestamps apply.

    A bisect over it reads only O(log n) commit files even when every timestamp is in-commit.
    """

    def __init__(self, store: LogStore, commits: Sequence[LogFile], ict_from: int | None):
        self.store = store
        self.commits = list(commits)
        self.versions = [f.version for f in self.commits]
        self._mtimes = monotonic_mtimes(self.commits)
        self._ict_from = ict_from
        self._cache: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.commits)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        f = self.commits[i]
        if self._ict_from is None or f.version < self._ict_from:
            return self._mtimes[i]
        if f.version not in self._cache:
            info = commit_info_from_bytes(self.store.read_log_file(f.name), f.version) or {}
            ict = info.get("inCommitTimestamp")
            self._cache[f.version] = int(ict) if isinstance(ict, int) else self._mtimes[i]
        return self._cache[f.version]


def version_at_timestamp(store: LogStore, listing: Sequence[LogFile], timestamp_ms: int,
                         ict_from: int | None, *, refuse_after_last: str | None = None) -> int:
    """The latest retained version committed at or before ``timestamp_ms``.

    With ``refuse_after_last`` (what the caller could not do), a timestamp after the last commit
    is refused as Delta refuses it (DELTA_TIMESTAMP_GREATER_THAN_COMMIT): a later commit could
    still land at that time, so the answer is not known yet. Judged on the same timeline the
    version is found on (the retained commits, made increasing from the first one)."""
    commits = retained_commits(listing)
    if not commits:
        raise TimeTravelError(f"table {store.uri!r} has no retained commits to time travel to")
    timeline = CommitTimeline(store, commits, ict_from)
    lo, hi = 0, len(commits)
    first_ict = bisect.bisect_left(timeline.versions, ict_from) if ict_from is not None else hi
    if 0 < first_ict < hi:
        # PROTOCOL.md: at or after the enablement timestamp only versions from the enablement
        # version count, before it only the earlier ones (file times and in-commit timestamps
        # are different clocks, so one bisect over both could land on the wrong side).
        if timestamp_ms >= timeline[first_ict]:
            lo = first_ict
        else:
            hi = first_ict
    index = bisect.bisect_right(timeline, timestamp_ms, lo, hi) - 1
    if index < lo:
        raise TimeTravelError(
            f"timestamp {_readable(timestamp_ms)} is before the earliest retained commit of {store.uri!r} "
            f"(version {commits[0].version} at {_readable(timeline[0])}); history before it was cleaned up or "
            f"never existed"
        )
    if refuse_after_last is not None and index == len(commits) - 1 and timestamp_ms > timeline[index]:
        raise TimeTravelError(
            f"{refuse_after_last}: the provided timestamp ({_readable(timestamp_ms)}) is after the latest version "
            f"available to this table (version {timeline.versions[index]}, committed at "
            f"{_readable(timeline[index])}); use a timestamp before or at that time "
            f"(DELTA_TIMESTAMP_GREATER_THAN_COMMIT)")
    return timeline.versions[index]


def commit_timestamps(store: LogStore, snapshot: "Snapshot | None" = None) -> list[tuple[int, int]]:
    """(version, commit timestamp ms) of every retained commit, oldest first.

    ``snapshot`` (the latest) tells whether in-commit timestamps are on; it is loaded when not given.
    """
    if snapshot is None:
        from .snapshot import load_snapshot

        snapshot = load_snapshot(store)
    listing = store.list_log()
    timeline = CommitTimeline(store, retained_commits(listing), ict_enablement_version(snapshot.properties))
    return list(zip(timeline.versions, timeline[:]))


#: ``read_history(ict_from=...)`` when the table's configuration is not known: a commit's
#: in-commit timestamp is its timestamp whenever it has one
ANY_ICT = -1


def read_history(store: LogStore, limit: int | None = None, ict_from: int | None = ANY_ICT) -> list[dict[str, Any]]:
    """``commitInfo`` of each version whose commit file is in the log, newest first, with
    ``version`` and ``timestamp`` (:func:`unbroken_commits`).

    ``timestamp`` is the commit timestamp, replacing the writer's own clock as Delta's DESCRIBE
    HISTORY does: the in-commit timestamp of the versions from ``ict_from`` on (the table's
    enablement version, :func:`ict_enablement_version`; None when they are off), the
    monotonic file time otherwise — the rule time travel follows, so a history timestamp always
    travels back to its version. Only the newest ``limit`` commit files are read.
    """
    if limit is not None:
        try:
            count = operator.index(limit)  # ints, numpy ints; not floats or strings
        except TypeError:
            count = -1
        if count < 0:
            raise InvalidArgumentError(f"limit must be an integer ≥ 0, got {limit!r}")
        limit = count
    listing = store.list_log()
    if not listing:
        raise TableNotFoundError(f"no Delta table at {store.uri!r}: _delta_log has no commits")
    commits = unbroken_commits(listing)
    mtimes = monotonic_mtimes(commits)
    chosen = list(range(len(commits)))[::-1]
    if limit is not None:
        chosen = chosen[:limit]
    blobs = read_commit_bytes(store, [commits[i] for i in chosen])
    history = []
    for i, data in zip(chosen, blobs):
        version = commits[i].version
        info = dict(commit_info_from_bytes(data, version) or {})
        ict = info.get("inCommitTimestamp")
        info["version"] = version
        uses_ict = isinstance(ict, int) and ict_from is not None and (ict_from == ANY_ICT or version >= ict_from)
        info["timestamp"] = int(ict) if uses_ict else mtimes[i]
        history.append(info)
    return history


def unbroken_commits(listing: Sequence[LogFile]) -> list[LogFile]:
    """The commit files DESCRIBE HISTORY lists and a stream's startingTimestamp may start at,
    oldest first: as Delta's (from the earliest delta file on), every commit file still in the log,
    also those older than the oldest version that can be rebuilt (log cleanup keeps the ones a
    checkpoint needs; reading a version's changes needs its commit file only); only a run unbroken
    up to the latest version, since a gap means the older ones belong to no history of this log."""
    commits = [f for f in listing if f.kind == "commit"]
    start = len(commits) - 1
    while start > 0 and commits[start - 1].version == commits[start].version - 1:
        start -= 1
    return commits[max(start, 0):]


def _readable(ms: int) -> str:
    """Epoch milliseconds as an ISO UTC time with milliseconds, as messages show them."""
    try:
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms since the epoch"


def to_timestamp_ms(ts: Any) -> int:
    """datetime (naive = UTC) / date / ISO string / epoch milliseconds → epoch ms."""
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        if isinstance(ts, float) and not math.isfinite(ts):
            raise TimeTravelError(f"timestamp must be a finite number of epoch ms, got {ts!r}")
        return int(ts)
    if isinstance(ts, str):
        try:
            ts = datetime.fromisoformat(ts.replace("Z", "+00:00"))
        except ValueError:
            raise TimeTravelError(  # Delta's wording first (DELTA_TIMESTAMP_INVALID), then what is accepted
                f"The provided timestamp ('{ts}') cannot be converted to a valid timestamp: it is not an "
                f"ISO 8601 date or datetime") from None
    if isinstance(ts, date) and not isinstance(ts, datetime):
        ts = datetime(ts.year, ts.month, ts.day)
    if isinstance(ts, datetime):
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=timezone.utc)
        return int(ts.timestamp() * 1000)
    raise ArgumentTypeError(f"timestamp must be a datetime, date, ISO string or epoch ms, not {type(ts).__name__}")
