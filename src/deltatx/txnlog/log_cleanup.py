"""Metadata cleanup: which expired ``_delta_log`` files may be deleted (PROTOCOL.md, Requirements
for Writers > Checkpoints > "Metadata Cleanup").

Pure: a listing, a cutoff and the table's rules in, a :class:`CleanupPlan` out. The I/O (listing,
checking the checkpoint that is kept, deleting, the post-commit hook's pacing) is
``tables/ops/log_cleanup.py``'s, for ``Table.cleanup_metadata`` and the cleanup after a checkpoint::

    cutoff        = midnight UTC of the day (now − delta.logRetentionDuration) falls in
    commit times  = file mtimes made non-decreasing with version (max(mtime, previous + 1 ms))
    cutoff commit = the newest commit whose time is ≤ cutoff
    boundary      = the newest *complete* checkpoint at or before the cutoff commit, whose own
                    commit file is listed too (and, on a catalog-managed table, no newer than
                    the last version the catalog verified published)
    delete        = commits, checkpoints and version checksums of versions < boundary, and log
                    compaction files that start at or before it

Why these rules:

* **the cutoff is truncated to a day** as PROTOCOL.md words it ("midnight UTC of that day") and as
  Delta Spark computes it (``truncateDay``): files are kept until the next calendar day, so the
  cleanup after every checkpoint does not nibble the log one commit at a time. delta-rs uses
  ``now − retention`` as it is.
* **file modification times**, not in-commit timestamps: PROTOCOL.md's Metadata Cleanup names no
  other source, and Delta Spark and delta-rs both compare file times. They are made
  non-decreasing with version exactly as Delta Spark does (and as ``history()`` and time travel
  read them here), so a file with a skewed clock cannot make a newer version expire before an
  older one. delta-rs compares raw times.
* **the boundary checkpoint and everything from it on stay**, the checkpoint's own commit file
  included (checkpoints keep no ``commitInfo``; in-commit timestamps and the catalog's
  checkpoint rule, ``catalog.rules.vouched``, read it): every version from the boundary on is as
  rebuildable after the cleanup as before — a version at or after it never needs a file before
  it, since any older start would replay the same commits the boundary's checkpoint starts from.
  Versions before the boundary are gone (time travel to them raises TimeTravelError).
* **incomplete multi-part checkpoints never count** (PROTOCOL.md: readers ignore them), nor does
  a checkpoint with an empty part.
* **a gap in the commits from the boundary on** (a missing file) means the log is not what the
  protocol says; nothing is deleted then (``blocked`` says why), so no evidence and no start a
  repair might need goes.
* **checkpointProtection** (delta-io/delta protocol RFC "Checkpoint Protection"): a cleanup must
  truncate up to ``delta.requireCheckpointProtectionBeforeVersion`` in one go, unless — exception
  (a) — it creates no checkpoint while it cleans up and erases no checkpoint after its truncation
  version. Every plan here meets (a) by construction: it writes nothing, and deletes only files of
  versions before its boundary (``CleanupPlan`` checks that). So the protected checkpoints Delta's
  DROP FEATURE leaves at the boundary always stay until a cleanup truncates past them.
* **catalog-managed tables** (PROTOCOL.md "Maintenance Operations on Catalog-managed Tables"):
  cleanup is maintenance, allowed only where the catalog allows it (the caller asks), and only of
  published commits; ``deletable_through`` is the last version the catalog verified published.
* Never deleted: ``_last_checkpoint``, ``_staged_commits/``, ``_sidecars/``, temp files, anything
  the listing does not classify.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

from .checkpoint import complete_checkpoints, interval_ms
from .history import monotonic_mtimes
from .store import LogFile

LOG_RETENTION = "delta.logRetentionDuration"
ENABLE_EXPIRED_LOG_CLEANUP = "delta.enableExpiredLogCleanup"
DEFAULT_LOG_RETENTION = "interval 30 days"
DAY_MS = 86_400_000
#: a version seen this much after the cleanup horizon still counts as maybe cleaned past
#: (:func:`may_be_cleaned_after`): another machine's clock, or the storage's, may run ahead
CLOCK_SKEW_MS = 3_600_000

#: the kinds of file metadata cleanup deletes (``list_log(extra=True)`` lists them)
KINDS = ("commit", "checkpoint", "checksum", "compaction")


def log_retention_ms(properties: Mapping[str, str]) -> int:
    """``delta.logRetentionDuration`` (default 30 days) in milliseconds; InvalidPropertyError for
    a value that is no interval (set_properties refuses one; another engine may have written it)."""
    return _retention_ms(properties.get(LOG_RETENTION, DEFAULT_LOG_RETENTION))


@functools.lru_cache(maxsize=64)
def _retention_ms(value: str) -> int:
    """Parsed once per value: a writer asks at every commit (:func:`may_be_cleaned_after`)."""
    return interval_ms(value, LOG_RETENTION)


def cutoff_ms(now_ms: int, retention_ms: int) -> int:
    """Midnight UTC of the day ``now_ms − retention_ms`` falls in (PROTOCOL.md's cutOffTimestamp)."""
    return (now_ms - retention_ms) // DAY_MS * DAY_MS


def may_be_cleaned_after(observed_ms: int, properties: Mapping[str, str], now_ms: int | None = None) -> bool:
    """Could a metadata cleanup — this one, Delta Spark's or delta-rs's — have deleted commits
    after a version that was last *seen to be the latest* at ``observed_ms`` (wall clock; the
    snapshot's ``observed_ms``)?

    Why it matters: a writer that reads the next commit by name and finds none takes its version
    for the latest; if a cleanup removed that commit (and those after it, up to a checkpoint), a
    put-if-absent of it would *succeed* — a commit under the table's checkpoint that no reader
    ever sees, a lost write. Such a writer lists the log first (``Snapshot.catch_up``,
    ``Transaction``), which costs one listing, only when this says "maybe".

    Why the time the version was seen, not when it was committed: every commit after it was
    written later than that, and a cleanup deletes only commits older than its cutoff. Delta
    Spark's cutoff and this one are midnight UTC of ``now − retention``, never later than today's
    midnight whatever the retention; delta-rs's is ``now − retention`` of the table it cleans.
    So "maybe" once the version was seen before today's midnight UTC, or before ``now − the
    retention this snapshot knows`` — with :data:`CLOCK_SKEW_MS` to spare for other machines'
    clocks and the storage's. A retention shortened since, by a client whose cutoff is not a day
    boundary, is the one case this cannot see (README, "Log retention"). An unreadable retention
    counts as zero."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    try:
        retention = log_retention_ms(properties)
    except Exception:
        retention = 0
    horizon = max(now // DAY_MS * DAY_MS, now - retention)  # either kind of cleaner
    return observed_ms < horizon - CLOCK_SKEW_MS


@dataclass(frozen=True)
class CleanupPlan:
    """What a metadata cleanup deletes, and why it does not delete more.

    ``delete`` is in deletion order: ascending version, so a cleanup cut short leaves a log whose
    oldest files are the ones gone. ``boundary`` is the checkpoint kept (PROTOCOL.md's
    cutOffCheckpoint), None when there is none. ``blocked`` is set when files are expired but
    cannot be shown safe to delete (a gap in the commits from the boundary on); ``note`` says what
    happened either way. ``next_due_ms``: no cleanup can delete more before the cutoff reaches it
    (None: unknown) — the post-commit hook lists the log again only then."""

    cutoff_ms: int
    boundary: int | None = None
    checkpoint: tuple[LogFile, ...] = ()
    delete: tuple[LogFile, ...] = ()
    note: str = ""
    blocked: str | None = None
    next_due_ms: int | None = None
    protected_before: int | None = None

    def __post_init__(self) -> None:
        # checkpointProtection's exception (a), and PROTOCOL.md's rule that the boundary's
        # checkpoint and commit stay: nothing at or after the boundary is ever in ``delete``
        if self.delete and (self.boundary is None or any(
                f.version >= self.boundary and f.kind != "compaction" for f in self.delete)):
            raise AssertionError(f"a cleanup plan may delete only files before its boundary {self.boundary}")

    @property
    def names(self) -> list[str]:
        """The files deleted, relative to ``_delta_log``, sorted."""
        return sorted(f.name for f in self.delete)

    def without_deletes(self, blocked: str) -> "CleanupPlan":
        """This plan, refused: nothing deleted, ``blocked`` says why (the caller's checks)."""
        return CleanupPlan(self.cutoff_ms, self.boundary, self.checkpoint, (), note=blocked, blocked=blocked,
                           protected_before=self.protected_before)


def plan_cleanup(listing: Sequence[LogFile], cutoff: int, *, latest_version: int,
                 protected_before: int | None = None, deletable_through: int | None = None) -> CleanupPlan:
    """The files of ``listing`` (``list_log(extra=True)``) that a metadata cleanup with ``cutoff``
    (:func:`cutoff_ms`) deletes. Files past ``latest_version`` (the snapshot's) are not looked at.

    ``protected_before``: the table's checkpointProtection boundary, if it has one (reported; the
    plan meets the feature's exception (a), see the module docstring). ``deletable_through``: on a
    catalog-managed table, the last version the catalog verified published — the boundary is never
    past it, so only versions it verified go."""
    files = [f for f in listing if f.kind in KINDS and f.version <= latest_version]
    commits = sorted((f for f in files if f.kind == "commit"), key=lambda f: f.version)
    times = dict(zip((f.version for f in commits), monotonic_mtimes(commits)))
    limit = latest_version if deletable_through is None else min(latest_version, deletable_through)
    usable = {v: sets for v, sets in complete_checkpoints(files).items()
              if v in times and v <= limit and any(all(p.size > 0 for p in s) for s in sets)}

    def plan(note: str, **kw) -> CleanupPlan:
        return CleanupPlan(cutoff, note=note, protected_before=protected_before, **kw)

    unknown = next((f.version for f in commits if f.mtime_ms <= 0), None)
    if unknown is not None:
        # a storage whose listing gives no modification time (read as 0, 1970) would make every
        # commit look expired: with no age, nothing can be shown expired
        reason = (f"the storage reports no modification time for commit {unknown}: no commit can be shown "
                  f"older than the cutoff, so nothing was deleted")
        return CleanupPlan(cutoff, note=reason, blocked=reason, protected_before=protected_before)
    expired = [v for v, t in times.items() if t <= cutoff]
    newest_expired = max(expired, default=None)
    boundary = max((v for v in usable if newest_expired is not None and v <= newest_expired), default=None)
    later = [times[v] for v in usable if boundary is None or v > boundary]
    due = min(later) if later else (max(times.values()) + 1 if times else None)
    if newest_expired is None:
        return plan(f"no commit is older than the cutoff ({_day(cutoff)})", next_due_ms=due)
    if boundary is None:
        return plan(f"no complete checkpoint at or before version {newest_expired}, the newest commit older "
                    f"than the cutoff ({_day(cutoff)}): every version may still be needed", next_due_ms=due)
    checkpoint = tuple(next(s for s in usable[boundary] if all(p.size > 0 for p in s)))
    newest = commits[-1].version
    missing = next((v for v in range(boundary, newest + 1) if v not in times), None)
    if missing is not None:
        reason = (f"commit {missing} is missing from the log after checkpoint {boundary} (the log has a gap): "
                  f"nothing was deleted")
        return plan(reason, boundary=boundary, checkpoint=checkpoint, blocked=reason)
    doomed = [f for f in files if (f.version < boundary if f.kind != "compaction" else f.version <= boundary)]
    order = {"checkpoint": 0, "checksum": 1, "compaction": 2, "commit": 3}
    doomed.sort(key=lambda f: (f.version, order[f.kind], f.name))
    if not doomed:
        return plan(f"nothing before checkpoint {boundary} is left to delete", boundary=boundary,
                    checkpoint=checkpoint, next_due_ms=due)
    protection = ""
    if protected_before is not None:
        protection = (f"; history before the protected version {protected_before} is "
                      + ("gone" if boundary >= protected_before else
                         "kept from the boundary on, and no checkpoint after it is touched (checkpointProtection)"))
    return plan(f"{len(doomed)} file(s) before checkpoint {boundary} deleted{protection}", boundary=boundary,
                checkpoint=checkpoint, delete=tuple(doomed), next_due_ms=due)


def _day(ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
