"""Snapshots: the table at one version, built by log replay; time travel; incremental refresh.

Owns *which* log files make a version and the immutable :class:`Snapshot` value. Reconciliation
rules live in replay.py, checkpoint files in checkpoint.py, commit timestamps in history.py::

    load_snapshot(store, version | timestamp_ms)
        _last_checkpoint (a hint only) ─► list_log(from hint) ─► newest complete checkpoint ≤ target
            │ missing / stale / corrupt hint or checkpoint: list from 0, try older checkpoints,
            │ then full replay from commit 0; CorruptCheckpointError only when nothing works
            ▼
        checkpoint state (columnar) + JSON commits checkpoint+1 .. target (contiguous, else
        CorruptLogError) ─► replay.reconcile ─► check_loadable ─► Snapshot

    snapshot.apply(commit)    next version from a commit this process just wrote (no I/O)
    snapshot.refresh(store)   lists from version+1 and replays only the new commits
"""

from __future__ import annotations

import operator
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Sequence

import pyarrow as pa

from ..errors import (
    CorruptCheckpointError,
    CorruptLogError,
    InvalidTableError,
    TableNotFoundError,
    TimeTravelError,
)
from .actions import (
    FILE_SCHEMA,
    REMOVE_SCHEMA,
    CommitActions,
    DomainMetadata,
    Metadata,
    Protocol,
    Txn,
    parse_commit,
)
from .checkpoint import (CheckpointState, complete_checkpoints, interval_ms, read_checkpoint,
                         read_last_checkpoint_hint)
from .features import check_readable
from .history import (commit_info_from_bytes, ict_enablement_version, monotonic_mtimes,
                      version_at_timestamp)
from .log_cleanup import may_be_cleaned_after
from .replay import FileTail, TableActions, read_commits, require_contiguous, without_gc
from .schema import schema_from_json
from .store import LogFile, LogStore, S3LogStore
from .tombstones import Tombstones

#: refresh() reloads from a newer checkpoint instead of replaying more commits than this
REFRESH_RELOAD_COMMITS = 1000

#: how long txn (application transaction) identifiers are honoured; unset: forever
TXN_RETENTION = "delta.setTransactionRetentionDuration"


@dataclass(frozen=True, eq=False, repr=False)
class Snapshot:
    """The state of a table at ``version``. Immutable: apply/refresh return new snapshots.

    ``files`` (columns ``actions.FILE_SCHEMA``) are the live add actions; ``tombstones``
    (``REMOVE_SCHEMA``) the removes replay still holds (a checkpoint drops expired ones), for
    VACUUM, kept in ``tombstone_state`` and reconciled when first read (tombstones.py).
    ``timestamp_ms`` is the commit timestamp of ``version`` (see history.py).
    """

    version: int
    protocol: Protocol
    metadata: Metadata
    files: pa.Table
    tombstone_state: Tombstones
    app_txns: dict[str, Txn]
    domains: dict[str, DomainMetadata]
    timestamp_ms: int
    #: wall-clock ms when ``version`` was last seen to be the table's latest (built from the log,
    #: or confirmed by a listing since): how far back a metadata cleanup could reach past it
    #: (txnlog/log_cleanup.py, ``may_be_cleaned_after``). Not part of the table's state.
    observed_ms: int = field(default_factory=lambda: int(time.time() * 1000), compare=False)

    def seen_latest(self, now_ms: int | None = None) -> "Snapshot":
        """Record that a listing found ``version`` still the latest (the one field that moves)."""
        object.__setattr__(self, "observed_ms", int(time.time() * 1000) if now_ms is None else now_ms)
        return self

    def __repr__(self) -> str:
        return (
            f"Snapshot(version={self.version}, files={self.files.num_rows}, "
            f"tombstones<={self.tombstone_state.rows_bound()}, protocol=({self.protocol.min_reader_version}, "
            f"{self.protocol.min_writer_version}), partition_columns={self.partition_columns})"
        )

    @property
    def tombstones(self) -> pa.Table:
        """The remove actions replay holds (``REMOVE_SCHEMA``), newest per logical file."""
        return self.tombstone_state.table

    @cached_property
    def schema(self) -> pa.Schema:
        return schema_from_json(self.metadata.schema_string)

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata.partition_columns)

    @property
    def properties(self) -> dict[str, str]:
        return self.metadata.configuration

    def partition_schema(self) -> pa.Schema:
        """The partition columns' fields, in partitionColumns order."""
        schema = self.schema
        return pa.schema([schema.field(name) for name in self.metadata.partition_columns])

    @property
    def num_files(self) -> int:
        return self.files.num_rows

    def live_app_txns(self, now_ms: int | None = None) -> dict[str, Txn]:
        """The application transactions (txn actions) a writer must still honour.

        All of ``app_txns``, unless the table sets ``delta.setTransactionRetentionDuration``: then,
        as in Delta, an identifier whose ``lastUpdated`` is at or before ``now - retention`` has
        expired and is ignored (idempotent writers may repeat such a version) and left out of
        checkpoints, so the set of stream and job ids does not grow forever. A txn without
        ``lastUpdated`` never expires.
        """
        retention = self.metadata.configuration.get(TXN_RETENTION)
        if retention is None or not self.app_txns:
            return self.app_txns
        horizon = (int(time.time() * 1000) if now_ms is None else now_ms) - interval_ms(retention, TXN_RETENTION)
        return {k: t for k, t in self.app_txns.items() if t.last_updated is None or t.last_updated > horizon}

    # ------------------------------------------------------------------ moving forward
    def apply(self, *commits: CommitActions) -> "Snapshot":
        """The version after ``commits`` (consecutive, oldest first), already parsed or just
        written; their writers' clocks give the timestamps. No I/O, one reconciliation."""
        expected = self.version + 1
        for commit in commits:
            if commit.version != expected:
                raise CorruptLogError(
                    f"commit {commit.version} cannot be applied to the snapshot at version {self.version}; "
                    f"commits apply in order (expected {expected})",
                    version=commit.version,
                )
            expected += 1
        return _advance(self, commits, mtimes=None) if commits else self

    def catch_up(self, store: LogStore, limit: int = 32) -> "Snapshot":
        """The latest version, found by reading the next commits by name (no listing).

        What a writer does before each operation: usually the next commit does not exist (one
        failed open) or a few do. ``limit`` commits behind, a listing is cheaper — it may find a
        checkpoint — so this falls back to :meth:`refresh`. The timestamps come from the
        commits' own clocks, as for :meth:`apply`. A snapshot last seen as the latest before a
        cleanup's horizon that finds nothing lists too: metadata cleanup may have removed the
        commits after it (txnlog/log_cleanup.py, ``may_be_cleaned_after``).
        """
        try:
            raws = store.read_commits_after(self.version, limit)
        except FileNotFoundError:  # a version the catalog names whose file metadata cleanup removed
            return self.refresh(store)
        commits = [parse_commit(raw, self.version + 1 + i, validate=False) for i, raw in enumerate(raws)]
        if not commits:
            if not getattr(store, "catalog_managed", False) and may_be_cleaned_after(self.observed_ms,
                                                                                    self.properties):
                # seen as the latest long ago: the next commit may be missing because metadata
                # cleanup removed it (and the table moved on), not because there is none
                now = int(time.time() * 1000)
                latest = self.refresh(store)
                return latest.seen_latest(now) if latest is self else latest
            return self
        caught_up = _advance(self, commits, mtimes=None)
        return caught_up.refresh(store) if len(commits) == limit else caught_up

    @without_gc
    def refresh(self, store: LogStore) -> "Snapshot":
        """The latest version: replays only commits after ``self.version``; ``self`` if none."""
        listing = store.list_log(self.version + 1)
        commits = [f for f in listing if f.kind == "commit"]
        if not commits:
            return self
        if commits[0].version != self.version + 1 or (
            len(commits) > REFRESH_RELOAD_COMMITS and complete_checkpoints(listing)
        ):
            return load_snapshot(store)  # the commits we need were cleaned up, or a checkpoint is cheaper
        require_contiguous([f.version for f in commits], self.version + 1, commits[-1].version)
        parsed = read_commits(store, commits)
        return _advance(self, parsed, mtimes=[f.mtime_ms for f in commits])


def _commit_timestamp(commit: CommitActions, metadata: Metadata, previous: int, mtime: int | None) -> int:
    """In-commit timestamp when on; else max(file mtime or the writer's clock, previous + 1)."""
    info = commit.commit_info or {}
    ict_from = ict_enablement_version(metadata.configuration)
    if ict_from is not None and commit.version >= ict_from and isinstance(info.get("inCommitTimestamp"), int):
        return int(info["inCommitTimestamp"])
    candidate = mtime if mtime is not None else info.get("timestamp")
    if not isinstance(candidate, int):
        return previous + 1
    return max(candidate, previous + 1)


def _advance(base: Snapshot, commits: Sequence[CommitActions], mtimes: Sequence[int] | None) -> Snapshot:
    actions = TableActions(base.protocol, base.metadata, base.app_txns, base.domains).fold(commits)
    assert actions.protocol is not None and actions.metadata is not None
    if actions.protocol is not base.protocol or actions.metadata is not base.metadata:
        check_loadable(actions.protocol, actions.metadata)  # a new protocol may need a feature we lack
    tail = FileTail()
    for commit in commits:
        tail.add_commit(commit)
    files, tombstones = tail.apply(base.files, base.tombstone_state)
    timestamp = base.timestamp_ms
    metadata = base.metadata
    for i, commit in enumerate(commits):
        metadata = commit.metadata or metadata
        timestamp = _commit_timestamp(commit, metadata, timestamp, None if mtimes is None else mtimes[i])
    snapshot = Snapshot(
        version=commits[-1].version,
        protocol=actions.protocol,
        metadata=actions.metadata,
        files=files,
        tombstone_state=tombstones,
        app_txns=actions.txns,
        domains=actions.domains,
        timestamp_ms=timestamp,
    )
    if actions.metadata is base.metadata and "schema" in base.__dict__:
        # same metaData action: its parsed schema carries over instead of being parsed per commit
        snapshot.__dict__["schema"] = base.__dict__["schema"]
    return snapshot


def check_loadable(protocol: Protocol, metadata: Metadata) -> None:
    """Raise unless a snapshot with this protocol and metaData can be read at all: deltatx knows
    its reader features (:func:`check_readable`), and the metaData is consistent — every
    partition column is a column of the schema (matched case-insensitively, as the reader does).

    Why at load: a partition column the schema lacks would read back as nulls and DML would
    commit on a table no Delta reader accepts; refusing the snapshot stops every operation
    before it writes. A schemaless metaData (Delta Live Tables' version 0) has nothing to check.
    """
    check_readable(protocol, metadata)
    if metadata.partition_columns and metadata.schema_string:
        names = schema_from_json(metadata.schema_string).names
        lower = {name.lower() for name in names}
        missing = [c for c in metadata.partition_columns if not isinstance(c, str) or c.lower() not in lower]
        if missing:
            raise InvalidTableError(
                f"the table's metaData names partition column(s) {missing} that are not in its schema "
                f"{names}; the log is inconsistent (a hand edit or a faulty writer). Time travel to a "
                f"version before that metaData")


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


@without_gc
def load_snapshot(store: LogStore, version: int | None = None, timestamp_ms: int | None = None) -> Snapshot:
    """The table at ``version``, at ``timestamp_ms`` (latest commit at or before it), or latest.

    Raises TableNotFoundError (no log), TimeTravelError (outside the retained log),
    CorruptLogError (bad commit, gap in versions), CorruptCheckpointError (a checkpoint is
    unreadable and nothing older can replace it), UnsupportedFeatureError (unknown reader feature).
    """
    if version is not None and timestamp_ms is not None:
        raise TimeTravelError("time travel takes a version or a timestamp, not both")
    if version is not None:
        try:
            version = operator.index(version)  # ints, numpy ints; not floats or strings
        except TypeError:
            raise TimeTravelError(f"version must be an integer, got {version!r}") from None
        if version < 0:
            raise TimeTravelError(f"version must be ≥ 0, got {version}")
    if timestamp_ms is not None:
        return _load_at_timestamp(store, int(timestamp_ms))
    failed: dict[str, CorruptCheckpointError] = {}
    hint = read_last_checkpoint_hint(store)
    if hint is not None and (version is None or hint <= version):
        snapshot = _load_from_listing(store, store.list_log(hint), version, failed, partial=True)
        if snapshot is not None:
            return snapshot
    snapshot = _load_from_listing(store, store.list_log(0), version, failed, partial=False)
    assert snapshot is not None
    return snapshot


def _load_at_timestamp(store: LogStore, timestamp_ms: int) -> Snapshot:
    """The version committed at or before ``timestamp_ms``; one after the last commit is refused
    as Delta refuses it (DELTA_TIMESTAMP_GREATER_THAN_COMMIT): a later commit could still land at
    that time, so the answer is not known yet. Every time travel by timestamp comes here (a read,
    RESTORE, Spark's timestampAsOf)."""
    latest = load_snapshot(store)
    ict_from = ict_enablement_version(latest.properties)
    version = version_at_timestamp(store, store.list_log(0), timestamp_ms, ict_from,
                                   refuse_after_last="cannot time travel")
    return latest if version == latest.version else load_snapshot(store, version=version)


def _load_from_listing(
    store: LogStore,
    listing: list[LogFile],
    target: int | None,
    failed: dict[str, CorruptCheckpointError],
    *,
    partial: bool,
) -> Snapshot | None:
    """Build ``target`` from a listing; with ``partial`` (listed from the hint) None means "list all"."""
    commits = {f.version: f for f in listing if f.kind == "commit"}
    checkpoints = complete_checkpoints(listing)
    if not commits and not checkpoints:
        if partial:
            return None
        incomplete = sorted(f.name for f in listing if f.kind == "checkpoint")
        if incomplete:  # only parts of a multi-part checkpoint are left: a broken table, not none
            raise CorruptCheckpointError(
                f"the log of {store.uri!r} holds no commit and no complete checkpoint: the checkpoint "
                f"parts {', '.join(incomplete)} are not all there")
        raise TableNotFoundError(f"no Delta table at {store.uri!r}: {_why_no_commits(store)}")
    latest = max(max(commits, default=-1), max(checkpoints, default=-1))
    if target is None:
        target = latest
    elif target > latest:
        if partial:
            return None
        raise TimeTravelError(f"version {target} of {store.uri!r} does not exist; the latest version is {latest}")
    for checkpoint_version in sorted((v for v in checkpoints if v <= target), reverse=True):
        missing = next((v for v in range(checkpoint_version + 1, target + 1) if v not in commits), None)
        if missing is not None and target < latest:
            # an older version whose commit after its newest checkpoint was cleaned up: no start
            # can cross the gap, so the version is gone, not the log broken (as for the latest)
            raise TimeTravelError(
                f"version {target} of {store.uri!r} can no longer be rebuilt: commit {missing}, after checkpoint "
                f"{checkpoint_version}, was cleaned up; version {checkpoint_version} and the versions from "
                f"{_earliest_rebuildable(commits, checkpoints, latest)} on can be")
        for fileset in checkpoints[checkpoint_version]:
            if fileset[0].name in failed:
                continue
            try:
                state = read_checkpoint(store, fileset)
            except CorruptCheckpointError as exc:
                failed[fileset[0].name] = exc
                continue
            return _from_checkpoint(store, state, commits, target, fileset[0].mtime_ms)
    if 0 in commits:
        return _full_replay(store, commits, target)
    if partial:
        return None
    if failed:
        names = ", ".join(failed)
        first = next(iter(failed.values()))
        raise CorruptCheckpointError(
            f"cannot build version {target} of {store.uri!r}: checkpoint(s) {names} are unreadable and "
            f"there is no older checkpoint or commit 0 to replay from ({first})"
        )
    if checkpoints:
        raise TimeTravelError(
            f"version {target} of {store.uri!r} is no longer in the log; the earliest version that can be "
            f"rebuilt is {min(checkpoints)}"
        )
    incomplete = sorted(f.name for f in listing if f.kind == "checkpoint" and f.version <= target)
    if incomplete:  # the checkpoint the log starts from lost a part: say so, not "no checkpoint"
        raise CorruptCheckpointError(
            f"cannot build version {target} of {store.uri!r}: its multi-part checkpoint is incomplete "
            f"(only {', '.join(incomplete)} are there) and commit 0, the other start, is missing")
    raise CorruptLogError(
        f"the log of {store.uri!r} starts at commit {min(commits)} with no checkpoint: commit 0 is missing",
        version=0,
    )


def _earliest_rebuildable(commits: dict[int, LogFile], checkpoints: dict[int, object], latest: int) -> int:
    """The oldest version a start (a checkpoint, or commit 0) and unbroken commits reach the latest from."""
    lowest = latest
    while lowest - 1 in commits:
        lowest -= 1
    if lowest == 0 and 0 in commits:
        return 0
    return min((c for c in checkpoints if c >= lowest - 1), default=latest)


def _tail_files(commits: dict[int, LogFile], first: int, target: int) -> list[LogFile]:
    require_contiguous(sorted(v for v in commits if first <= v <= target), first, target)
    return [commits[v] for v in range(first, target + 1)]


def _from_checkpoint(store: LogStore, state: CheckpointState, commits: dict[int, LogFile], target: int,
                     checkpoint_mtime: int) -> Snapshot:
    tail = _tail_files(commits, state.version + 1, target)
    base_ts = _base_timestamp(store, state, commits, checkpoint_mtime)
    base = Snapshot(
        version=state.version,
        protocol=state.protocol,
        metadata=state.metadata,
        files=state.files,
        tombstone_state=Tombstones.of(state.tombstones),
        app_txns=state.txns,
        domains=state.domains,
        timestamp_ms=base_ts,
    )
    if not tail:
        check_loadable(base.protocol, base.metadata)
        return base
    snapshot = _advance(base, read_commits(store, tail), _tail_mtimes(commits, tail, state.version))
    check_loadable(snapshot.protocol, snapshot.metadata)  # the target's protocol is what counts
    return snapshot


def _base_timestamp(store: LogStore, state: CheckpointState, commits: dict[int, LogFile], checkpoint_mtime: int) -> int:
    """Commit timestamp of a checkpoint's version (its commit file; else the checkpoint file)."""
    own = commits.get(state.version)
    ict_from = ict_enablement_version(state.metadata.configuration)
    if own is not None and ict_from is not None and state.version >= ict_from:
        info = commit_info_from_bytes(store.read_log_file(own.name), state.version) or {}
        if isinstance(info.get("inCommitTimestamp"), int):
            return int(info["inCommitTimestamp"])
    if own is not None:
        return _monotonic_at(commits, state.version)
    return checkpoint_mtime


def _monotonic_at(commits: dict[int, LogFile], version: int) -> int:
    listed = [commits[v] for v in sorted(commits) if v <= version]
    return monotonic_mtimes(listed)[-1]


def _tail_mtimes(commits: dict[int, LogFile], tail: list[LogFile], base_version: int) -> list[int]:
    """Monotonic mtimes of the tail, continuing from the commits listed before it."""
    before = [commits[v] for v in sorted(commits) if v <= base_version]
    previous = monotonic_mtimes(before)[-1] if before else None
    return monotonic_mtimes(tail, previous)


def _full_replay(store: LogStore, commits: dict[int, LogFile], target: int) -> Snapshot:
    tail = _tail_files(commits, 0, target)
    parsed = read_commits(store, tail)
    actions = TableActions(None, None, {}, {}).fold(parsed)
    if actions.protocol is None or actions.metadata is None:
        missing = "protocol" if actions.protocol is None else "metaData"
        raise CorruptLogError(
            f"the log of {store.uri!r} has no {missing} action up to version {target}; commit 0 must "
            f"create the table with both",
            version=0,
        )
    check_loadable(actions.protocol, actions.metadata)
    empty = Snapshot(
        version=-1,
        protocol=actions.protocol,
        metadata=actions.metadata,
        files=FILE_SCHEMA.empty_table(),
        tombstone_state=Tombstones.of(REMOVE_SCHEMA.empty_table()),
        app_txns={},
        domains={},
        timestamp_ms=-1,
    )
    return _advance(empty, parsed, monotonic_mtimes(tail))


def _why_no_commits(store: LogStore) -> str:
    """The message's reason: no ``_delta_log`` folder at all (not a Delta table, or a wrong
    path), or one without commits (a table whose creation never committed)."""
    try:
        has_log = store.fs.exists(store.log_root)
        if not has_log and isinstance(store, S3LogStore):
            bucket = store.root.split("/", 1)[0]
            if not store.fs.exists(bucket):
                return f"the S3 bucket {bucket!r} does not exist"
    except Exception:  # only the message depends on it
        return "_delta_log holds no commits"
    return "_delta_log holds no commits" if has_log else "there is no _delta_log folder (not a Delta table, or another path?)"
