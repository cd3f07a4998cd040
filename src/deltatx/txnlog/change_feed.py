"""Change data feed, planning: which files describe the changes of each version in a range.

Per version (PROTOCOL.md "Change Data Files"; Delta's and delta-rs's readers agree):

- the commit has ``cdc`` actions: its changes are exactly the rows of those files (they carry
  ``_change_type``); its adds and removes are ignored;
- otherwise adds with ``dataChange=true`` are inserts and removes with ``dataChange=true`` are
  deletes (a commit with ``dataChange=false`` only, like OPTIMIZE, changes nothing). With deletion
  vectors a ``remove(path, oldDV)`` + ``add(path, newDV)`` pair of one commit changes only the rows
  whose DV bit flipped: rows in newDV − oldDV are deletes (oldDV − newDV, a RESTORE, inserts);
  a lone add or remove is read with its own DV applied.

The feed must have been on (``delta.enableChangeDataFeed=true``) at every version of the range,
otherwise :class:`ChangeDataFeedError` names the first version without it. Timestamps resolve
as Delta's do: a starting timestamp to the first version committed at or after it, an ending
timestamp to the last version committed at or before it (commit timestamps of history.py:
in-commit timestamps when on, else the monotonic commit file times). An ending version past the
latest is read up to the latest; a starting version past it is an error.

The plan is columnar: one table of cdc files, one of whole added files, one of whole removed
files, one of DV pairs, each with the ``_commit_version`` of its commit; io/change_feed.py reads
them.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ChangeDataFeedError
from . import column_mapping
from .actions import (CDC_SCHEMA, FILE_SCHEMA, REMOVE_SCHEMA, CommitActions, Metadata, file_actions_table,
                      parse_commit)
from .history import CommitTimeline, ict_enablement_version, retained_commits, to_timestamp_ms
from .replay import read_commit_bytes, require_contiguous
from .schema import schema_from_json

if TYPE_CHECKING:
    from .column_mapping import ColumnMapping
    from .snapshot import Snapshot
    from .store import LogStore

ENABLE_CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"


@dataclass
class ChangePlan:
    """The files to read for the changes of versions ``start..end`` (inclusive)."""

    start: int
    end: int
    schema: pa.Schema  # the table's schema at ``end``: older files read with it (new columns null)
    partition_columns: list[str]
    timestamps_ms: list[int]  # commit timestamp of version start + i
    cdc_files: pa.Table  # CDC_SCHEMA + _commit_version
    inserted_files: pa.Table  # FILE_SCHEMA + _commit_version: whole files whose rows are inserts
    deleted_files: pa.Table  # REMOVE_SCHEMA + _commit_version: whole files whose rows are deletes
    dv_pairs: pa.Table  # REMOVE_SCHEMA (the remove, oldDV) + newDeletionVector + _commit_version
    #: the column mapping at ``end``: data and change files hold physical columns, resolved by it
    #: (a renamed column keeps its physical name; one dropped and added again gets a new one)
    column_mapping: "ColumnMapping | None" = None
    #: (version, metaData) of every commit in the range that changed the metadata, in order: what
    #: a stream checks its read schema against (:func:`deltatx.txnlog.stream_plan.check_stream_schema`)
    metadata_changes: list[tuple[int, Metadata]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return self.end < self.start


def feed_enabled(metadata: Metadata) -> bool:
    return metadata.configuration.get(ENABLE_CHANGE_DATA_FEED, "false").strip().lower() == "true"


def _version_bound(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
        raise ChangeDataFeedError(f"{name} must be an integer version, got {value!r}")
    value = int(value)
    if value < 0:
        raise ChangeDataFeedError(f"{name} must be ≥ 0, got {value}")
    return value


def resolve_range(store: "LogStore", snapshot: "Snapshot", starting_version: Any = None, ending_version: Any = None,
                  starting_timestamp: Any = None, ending_timestamp: Any = None
                  ) -> tuple[int, int, CommitTimeline]:
    """(start, end, commit timeline) for the bounds given; ``end < start`` means an empty range
    (two timestamps between the same pair of commits)."""
    if starting_version is not None and starting_timestamp is not None:
        raise ChangeDataFeedError("give starting_version or starting_timestamp, not both")
    if ending_version is not None and ending_timestamp is not None:
        raise ChangeDataFeedError("give ending_version or ending_timestamp, not both")
    latest = snapshot.version
    commits = [f for f in retained_commits(store.list_log()) if f.version <= latest]
    if not commits:
        raise ChangeDataFeedError(f"table {store.uri!r} has no retained commits to read changes from")
    timeline = CommitTimeline(store, commits, ict_enablement_version(snapshot.properties))
    earliest = timeline.versions[0]
    if starting_timestamp is not None:
        ts = to_timestamp_ms(starting_timestamp)
        index = bisect.bisect_left(timeline, ts)
        if index >= len(timeline):
            raise ChangeDataFeedError(
                f"starting_timestamp {starting_timestamp!r} is after the latest commit (version {latest} at "
                f"{timeline[len(timeline) - 1]} ms); there are no changes to read yet")
        start = timeline.versions[index]
    else:
        start = 0 if starting_version is None else _version_bound(starting_version, "starting_version")
    if ending_timestamp is not None:
        ts = to_timestamp_ms(ending_timestamp)
        index = bisect.bisect_right(timeline, ts) - 1
        if index < 0:
            raise ChangeDataFeedError(
                f"ending_timestamp {ending_timestamp!r} is before the earliest retained commit (version "
                f"{earliest} at {timeline[0]} ms)")
        end = timeline.versions[index]
    else:
        end = latest if ending_version is None else min(_version_bound(ending_version, "ending_version"), latest)
    if start > latest:
        raise ChangeDataFeedError(
            f"starting version {start} is after the latest version {latest} of {store.uri!r}", version=start)
    if start < earliest:
        raise ChangeDataFeedError(
            f"version {start} is no longer in the log of {store.uri!r} (the earliest retained commit is "
            f"{earliest}); its changes cannot be read", version=start)
    if ending_version is not None and starting_timestamp is None and end < start:
        raise ChangeDataFeedError(f"ending_version {ending_version} is before starting_version {start}")
    return start, end, timeline


def plan_changes(store: "LogStore", snapshot: "Snapshot", starting_version: Any = None, ending_version: Any = None,
                 starting_timestamp: Any = None, ending_timestamp: Any = None) -> ChangePlan:
    """Resolve the range and list, per version, the files holding its changes (see module doc)."""
    start, end, timeline = resolve_range(store, snapshot, starting_version, ending_version,
                                         starting_timestamp, ending_timestamp)
    if end < start:
        return _plan(start, end, snapshot.metadata, [], [])
    first = bisect.bisect_left(timeline.versions, start)
    last = bisect.bisect_right(timeline.versions, end)
    files = timeline.commits[first:last]
    require_contiguous([f.version for f in files], start, end)
    commits = [parse_commit(data, f.version) for f, data in zip(files, read_commit_bytes(store, files))]
    metadata = _check_feed_enabled(store, snapshot, commits)
    return _plan(start, end, metadata, commits, timeline[first:first + len(commits)])


def _metadata_at_start(store: "LogStore", snapshot: "Snapshot", commits: list[CommitActions]) -> Metadata:
    """The metadata in force at the first version of the range, read as cheaply as possible."""
    if commits[0].metadata is not None:
        return commits[0].metadata
    if snapshot.version == commits[-1].version and all(c.metadata is None for c in commits[1:]):
        return snapshot.metadata  # nothing changed it since the start
    from .snapshot import load_snapshot

    return load_snapshot(store, version=commits[0].version).metadata


def _check_feed_enabled(store: "LogStore", snapshot: "Snapshot", commits: list[CommitActions]) -> Metadata:
    """Raise unless the feed was on at every version; returns the metadata at the last one."""
    metadata = _metadata_at_start(store, snapshot, commits)
    for commit in commits:
        if commit.metadata is not None:
            metadata = commit.metadata
        if not feed_enabled(metadata):
            raise ChangeDataFeedError(
                f"change data feed was not enabled at version {commit.version} of {store.uri!r} "
                f"({ENABLE_CHANGE_DATA_FEED} is not true there), so its changes were not recorded; "
                f"read a range that starts after the feed was enabled", version=commit.version)
    return metadata


_VERSION_FIELD = pa.field(COMMIT_VERSION, pa.int64())
_CDC_PLAN_SCHEMA = pa.schema(list(CDC_SCHEMA) + [_VERSION_FIELD])
_ADD_PLAN_SCHEMA = pa.schema(list(FILE_SCHEMA) + [_VERSION_FIELD])
_REMOVE_PLAN_SCHEMA = pa.schema(list(REMOVE_SCHEMA) + [_VERSION_FIELD])
_PAIR_PLAN_SCHEMA = pa.schema(list(REMOVE_SCHEMA) + [
    pa.field("newDeletionVector", FILE_SCHEMA.field("deletionVector").type), _VERSION_FIELD])


class _Collected:
    """File actions of many commits: dicts of the small commits (one columnar build at the end:
    a build per commit would cost more than the whole scan), tables of the large ones."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.rows: list[dict[str, Any]] = []
        self.tables: list[pa.Table] = []

    def add_table(self, table: pa.Table, version: int) -> None:
        if table.num_rows:
            column = pa.array([version] * table.num_rows, pa.int64())
            self.tables.append(table.append_column(_VERSION_FIELD, column).select(self.schema.names).cast(self.schema))

    def table(self) -> pa.Table:
        parts = self.tables + ([file_actions_table(self.rows, self.schema)] if self.rows else [])
        return pa.concat_tables(parts) if parts else self.schema.empty_table()


def _collect_rows(commit: CommitActions, inserted: _Collected, deleted: _Collected, pairs: _Collected) -> None:
    """A commit parsed line by line (few actions): adds → inserts, removes → deletes, a path both
    removed and re-added → a DV pair. Only ``dataChange=true`` actions count."""
    version = commit.version
    adds = {r["path"]: r for r in commit.add_rows if r.get("dataChange", True)}
    removed = set()
    for r in commit.remove_rows:
        if not r.get("dataChange", True):
            continue
        readd = adds.get(r["path"])
        if readd is not None:  # the same file re-added (with another DV): only flipped rows changed
            pairs.rows.append({**r, "newDeletionVector": readd.get("deletionVector"), COMMIT_VERSION: version})
            removed.add(r["path"])
        else:
            deleted.rows.append({**r, COMMIT_VERSION: version})
    inserted.rows += [{**r, COMMIT_VERSION: version} for path, r in adds.items() if path not in removed]


def _collect_columnar(commit: CommitActions, inserted: _Collected, deleted: _Collected, pairs: _Collected) -> None:
    """The same for a large commit, kept columnar."""
    adds, removes = commit.adds, commit.removes
    if adds.num_rows:
        adds = adds.filter(pc.fill_null(adds["dataChange"], True))
    if removes.num_rows:
        removes = removes.filter(pc.fill_null(removes["dataChange"], True))
    if adds.num_rows and removes.num_rows:
        same = pc.is_in(removes["path"], value_set=adds["path"])
        if pc.any(same).as_py():
            paired = removes.filter(same)
            new_dv = adds["deletionVector"].take(pc.index_in(paired["path"], value_set=adds["path"]))
            pairs.add_table(paired.append_column(pairs.schema.field("newDeletionVector"), new_dv), commit.version)
            removes = removes.filter(pc.invert(same))
            adds = adds.filter(pc.invert(pc.is_in(adds["path"], value_set=paired["path"])))
    inserted.add_table(adds, commit.version)
    deleted.add_table(removes, commit.version)


def _plan(start: int, end: int, metadata: Metadata, commits: list[CommitActions], timestamps: list[int]) -> ChangePlan:
    cdc = _Collected(_CDC_PLAN_SCHEMA)
    inserted, deleted = _Collected(_ADD_PLAN_SCHEMA), _Collected(_REMOVE_PLAN_SCHEMA)
    pairs = _Collected(_PAIR_PLAN_SCHEMA)
    for commit in commits:
        if commit.cdc_rows:  # the change files are the changes; adds and removes are ignored
            cdc.rows += [{**row, COMMIT_VERSION: commit.version} for row in commit.cdc_rows]
        elif commit.raw is None:
            _collect_rows(commit, inserted, deleted, pairs)
        else:
            _collect_columnar(commit, inserted, deleted, pairs)
    return ChangePlan(
        start=start, end=end, schema=schema_from_json(metadata.schema_string),
        partition_columns=list(metadata.partition_columns), timestamps_ms=list(timestamps),
        cdc_files=cdc.table(), inserted_files=inserted.table(), deleted_files=deleted.table(), dv_pairs=pairs.table(),
        column_mapping=column_mapping.of(metadata),
        metadata_changes=[(c.version, c.metadata) for c in commits if c.metadata is not None],
    )


def change_files_since(store: "LogStore", snapshot: "Snapshot", cutoff_ms: int) -> list[str]:
    """``cdc`` paths (as written in the log) of the commits at or after ``cutoff_ms``: VACUUM keeps
    them, because the change feed of versions still inside the retention period reads them."""
    commits = [f for f in retained_commits(store.list_log()) if f.version <= snapshot.version]
    if not commits:
        return []
    timeline = CommitTimeline(store, commits, ict_enablement_version(snapshot.properties))
    recent = commits[bisect.bisect_left(timeline, cutoff_ms):]
    paths: list[str] = []
    for f, data in zip(recent, read_commit_bytes(store, recent)):
        if b'"cdc"' in data:  # most commits have none: no need to parse them
            paths += [row["path"] for row in parse_commit(data, f.version).cdc_rows]
    return paths


def snapshot_as_inserts(snapshot: "Snapshot", timestamp_ms: int) -> ChangePlan:
    """A plan whose changes are every row of ``snapshot``, as inserts of its version: what a
    change-feed stream without a starting version delivers first (Delta's initial snapshot)."""
    files = snapshot.files
    column = pa.array([snapshot.version] * files.num_rows, pa.int64())
    inserted = files.append_column(_VERSION_FIELD, column).select(_ADD_PLAN_SCHEMA.names).cast(_ADD_PLAN_SCHEMA)
    return ChangePlan(
        start=snapshot.version, end=snapshot.version, schema=snapshot.schema,
        partition_columns=list(snapshot.partition_columns), timestamps_ms=[timestamp_ms],
        cdc_files=_CDC_PLAN_SCHEMA.empty_table(), inserted_files=inserted,
        deleted_files=_REMOVE_PLAN_SCHEMA.empty_table(), dv_pairs=_PAIR_PLAN_SCHEMA.empty_table(),
        column_mapping=column_mapping.of(snapshot.metadata))
