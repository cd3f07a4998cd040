"""Streaming reads planned on the log alone: the files a stream delivers between two offsets.

A streaming read of a table (Spark's ``readStream``, :mod:`deltatx.spark.stream_source`) follows
Delta's streaming source. Its position is an offset ``(reservoirVersion, index,
isStartingVersion)`` over a sequence of *units*, each a (version, index, add file):

- a new stream first delivers the **initial snapshot**: every live file of the table at the
  version it starts from, ordered by ``(modificationTime, path)`` (deterministic, so a restart
  splits it the same way), indexed 0..n-1, all under that version with ``isStartingVersion=true``;
- then, for each later commit in log order, its added files with ``dataChange=true``, indexed
  0..n-1 in the order the commit lists them. Each commit also has a *base* position (index -1,
  before its files): an offset at ``(v, -1)`` means "commit v not started". When the last file of
  a commit (or of the initial snapshot) is taken the offset moves straight to ``(v + 1, -1)``, so
  a restart never reads a delivered snapshot again.
- with ``startingVersion``/``startingTimestamp`` there is no snapshot: commits from that version.

An offset names the last unit a micro-batch delivered; the next batch delivers the units after it.
How many per batch is the admission limit (``maxFilesPerTrigger``, ``maxBytesPerTrigger`` —
a soft limit: the file that crosses it is still taken, so a batch always makes progress).

Commits are checked as the stream reaches them, as Delta does: a commit whose ``remove`` actions
have ``dataChange=true`` (DELETE, UPDATE, MERGE, overwrite) fails the stream
(:class:`StreamDataChangedError`) unless ``skipChangeCommits`` (skip the whole commit),
``ignoreChanges`` (deliver its re-added files) or, for a commit that only removes,
``ignoreDeletes`` says otherwise; a ``metaData`` action whose schema the stream's read schema
cannot read ends the micro-batch before its commit, and the next fails with
:class:`StreamSchemaChangedError`. OPTIMIZE and other
``dataChange=false`` rewrites deliver nothing.

Everything here is columnar (the units of a version are one Arrow table) and free of Spark, so
tests drive it directly; the planner caches parsed commits, since Spark asks for the latest
offset and then for the files of the same range.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import StreamDataChangedError, StreamingSourceError, StreamSchemaChangedError, TimeTravelError
from .actions import CommitActions, Metadata, parse_commit
from .features import check_readable
from .history import CommitTimeline, ict_enablement_version, unbroken_commits
from .column_mapping import column_id, max_column_id, physical_name
from .schema import schema_from_json, type_to_delta
from .type_widening import is_supported_change
from .snapshot import load_snapshot
from .store import LogStore

#: the position before every file of a version (Delta serializes its base index as -1 too)
BASE_INDEX = -1
#: ``reservoirVersion`` of a stream that has not chosen its starting point yet (see StreamOffset)
UNRESOLVED_VERSION = -1
#: Delta's offset format version whose base index is -1
OFFSET_FORMAT_VERSION = 1
#: Delta's default ``maxFilesPerTrigger`` when neither limit is set
DEFAULT_MAX_FILES_PER_TRIGGER = 1000

#: add-action columns a unit keeps (what a reader needs; stats are dropped as Delta does)
UNIT_FILE_COLUMNS = ["path", "partitionValues", "size", "modificationTime", "deletionVector", "baseRowId",
                     "defaultRowCommitVersion"]


# --------------------------------------------------------------------------------------------
# Offsets
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamStart:
    """Where a new stream begins: the snapshot at ``version``, or the commits from ``version``."""

    version: int
    initial_snapshot: bool

    def to_json(self) -> dict[str, Any]:
        return {"reservoirVersion": self.version, "isStartingVersion": self.initial_snapshot}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "StreamStart":
        return cls(int(d["reservoirVersion"]), bool(d["isStartingVersion"]))


@dataclass(frozen=True)
class StreamOffset:
    """Delta's ``DeltaSourceOffset``: the last unit delivered, on the table ``table_id``.

    ``version == UNRESOLVED_VERSION`` is a new stream's offset before its first batch: Spark asks
    a source for its initial offset again when it replays the first batch after a crash, and by
    then "the latest version" (the snapshot to start from, or ``startingVersion=latest``) may have
    moved. So the starting point is fixed when the first batch is planned and recorded in that
    batch's end offset (``started_at``, JSON key ``startingFrom``); a replay reads it back.
    """

    table_id: str
    version: int
    index: int = BASE_INDEX
    initial_snapshot: bool = False
    started_at: StreamStart | None = None

    @property
    def unresolved(self) -> bool:
        return self.version == UNRESOLVED_VERSION

    @property
    def position(self) -> tuple[int, int]:
        return (self.version, self.index)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sourceVersion": OFFSET_FORMAT_VERSION,
            "reservoirId": self.table_id,
            "reservoirVersion": self.version,
            "index": self.index,
            "isStartingVersion": self.initial_snapshot,
        }
        if self.started_at is not None:
            out["startingFrom"] = self.started_at.to_json()
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "StreamOffset":
        try:
            if int(d.get("sourceVersion", OFFSET_FORMAT_VERSION)) != OFFSET_FORMAT_VERSION:
                raise ValueError(f"sourceVersion {d.get('sourceVersion')} is not {OFFSET_FORMAT_VERSION}")
            started = d.get("startingFrom")
            return cls(
                table_id=str(d["reservoirId"]),
                version=int(d["reservoirVersion"]),
                index=int(d["index"]),
                initial_snapshot=bool(d["isStartingVersion"]),
                started_at=StreamStart.from_json(started) if started is not None else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StreamingSourceError(
                f"the streaming checkpoint holds an offset this source cannot read ({exc}): {d!r}; "
                f"it was written by another source or version — use a new checkpoint location"
            ) from None


def first_batch_start(end: StreamOffset) -> StreamOffset:
    """The resolved start of the batch that ends at ``end`` when that batch is the stream's first."""
    if end.started_at is None:
        raise StreamingSourceError(
            f"the first micro-batch's end offset {end.to_json()} does not say where the stream started; "
            f"the checkpoint was not written by this source — use a new checkpoint location"
        )
    return StreamOffset(end.table_id, end.started_at.version, BASE_INDEX, end.started_at.initial_snapshot)


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChangePolicy:
    """What a stream does with commits that remove data (Delta's option names).

    - ``skip_change_commits``: skip every commit with a ``dataChange`` remove, its adds included;
    - ``ignore_changes``: go on and deliver such a commit's added (rewritten) files — rows that did
      not change come again (Delta's deprecated option, kept for its users);
    - ``ignore_deletes``: go on past commits that remove files and add none (whole-file or
      partition deletes); a commit that also adds still fails.
    """

    skip_change_commits: bool = False
    ignore_changes: bool = False
    ignore_deletes: bool = False


@dataclass(frozen=True)
class Admission:
    """How much one micro-batch may take. None: no limit of that kind."""

    max_files: int | None = None
    max_bytes: int | None = None

    @classmethod
    def from_options(cls, max_files: int | None, max_bytes: int | None) -> "Admission":
        """Delta's default: 1000 files per batch unless a byte limit alone is set."""
        if max_files is None and max_bytes is None:
            max_files = DEFAULT_MAX_FILES_PER_TRIGGER
        return cls(max_files, max_bytes)


class _Budget:
    """What is left of an :class:`Admission` while a batch is filled (Delta's admission rules)."""

    def __init__(self, limit: Admission | None):
        self.files = float("inf") if limit is None or limit.max_files is None else limit.max_files
        self.bytes = float("inf") if limit is None or limit.max_bytes is None else limit.max_bytes

    @property
    def open(self) -> bool:
        return self.files > 0 and self.bytes > 0

    def admit(self, sizes: np.ndarray) -> int:
        """How many of the next files (in order) are taken: each while budget remains before it."""
        if not len(sizes) or not self.open:
            return 0
        before = np.concatenate(([0], np.cumsum(sizes[:-1], dtype=np.int64)))
        by_bytes = len(sizes) if self.bytes == float("inf") else int(np.searchsorted(before, self.bytes, "left"))
        taken = int(min(len(sizes), self.files, by_bytes))
        self.files -= taken
        self.bytes -= int(sizes[:taken].sum())
        return taken


# --------------------------------------------------------------------------------------------
# Schema compatibility (Delta's read-compatibility with nullability tightening forbidden)
# --------------------------------------------------------------------------------------------


def _type_readable(data: pa.DataType, read: pa.DataType) -> bool:
    if pa.types.is_struct(data) and pa.types.is_struct(read):
        return _fields_readable(list(data), list(read))
    if pa.types.is_list(data) and pa.types.is_list(read):
        return (read.value_field.nullable or not data.value_field.nullable) and _type_readable(
            data.value_type, read.value_type)
    if pa.types.is_map(data) and pa.types.is_map(read):
        return ((read.item_field.nullable or not data.item_field.nullable)
                and _type_readable(data.key_type, read.key_type) and _type_readable(data.item_type, read.item_type))
    return data.equals(read) or _widened_since(data, read)


def _widened_since(data: pa.DataType, read: pa.DataType) -> bool:
    """Whether ``read`` is a type widening of ``data`` (PROTOCOL.md's list): older files of a
    widened column are read with the wider type, as every reader does. A stream restarted after
    a widening reads the older versions it still has to deliver that way; the narrowing way
    round (a running stream meeting the wider type) is a schema change."""
    from_type, to_type = type_to_delta(data), type_to_delta(read)
    return isinstance(from_type, str) and isinstance(to_type, str) and is_supported_change(from_type, to_type)


def _fields_readable(data: list[pa.Field], read: list[pa.Field]) -> bool:
    data_by_name = {f.name.lower(): f for f in data}
    read_names = {f.name.lower() for f in read}
    if not set(data_by_name) <= read_names:
        return False  # the data has a column the stream does not know: restart to pick it up
    for r in read:
        d = data_by_name.get(r.name.lower())
        if d is None:
            continue  # a column the stream reads but the data lacks: read as nulls
        if d.name != r.name or not (r.nullable or not d.nullable) or not _type_readable(d.type, r.type):
            return False
    return True


def column_mapping_changed(data_schema: pa.Schema, read_schema: pa.Schema) -> bool:
    """Whether a column the stream reads was renamed, or dropped and added again, on a table with
    column mapping: its column id now carries another name, or its name another id (ids are
    never reused). Names alone cannot tell (a re-added column reads as the old one, with NULLs;
    a projection hides a rename), so delta-spark fails the stream on such changes, as here."""
    by_id = {i: f.name.lower() for f in data_schema if (i := column_id(f)) is not None}
    id_of = {f.name.lower(): column_id(f) for f in data_schema}
    physical_of = {f.name.lower(): physical_name(f) for f in data_schema}
    by_physical = {physical_name(f): f.name.lower() for f in data_schema}
    for f in read_schema:
        read_id = column_id(f)
        if read_id is None:
            # analysed before column mapping was turned on: the stream reads files by the column's
            # name, which the mapping gave each existing column as its physical name; a column
            # re-added since has another one, a renamed column keeps the old name as its physical one
            name = f.name.lower()
            if physical_of.get(name, f.name) != f.name or by_physical.get(f.name, name) != name:
                return True
            continue
        if by_id.get(read_id, f.name.lower()) != f.name.lower():
            return True  # renamed
        if id_of.get(f.name.lower()) not in (None, read_id):
            return True  # dropped, and a new column of the same name added
    return False


def column_dropped(data_schema: pa.Schema, read_schema: pa.Schema, max_id: int) -> bool:
    """Whether a column the stream reads was dropped (on a table with column mapping, the only
    tables that drop columns). Its files still hold it, but the stream would deliver NULLs from
    then on, so Delta fails the stream, as here. A column with an id above ``max_id`` was added
    after this schema (a stream started from an older version), not dropped. A read column
    without an id (analysed before the mapping was turned on) existed when it was turned on."""
    ids = {i for f in data_schema if (i := column_id(f)) is not None}
    if not ids:
        return False  # no column mapping in this schema: no column was dropped under it
    names = {f.name.lower() for f in data_schema} | {physical_name(f) for f in data_schema}
    for f in read_schema:
        read_id = column_id(f)
        if read_id is None:
            if f.name.lower() not in names and f.name not in names:
                return True
        elif read_id <= max_id and read_id not in ids:
            return True
    return False


def readable_as(data_schema: pa.Schema, read_schema: pa.Schema) -> bool:
    """Whether files written with ``data_schema`` can be read by a stream analysed with
    ``read_schema``: no column the stream lacks, same names, the same types (or types the
    stream's widen), and no nulls into a non-nullable read column. (Delta's rule; a new column
    fails too, a restart picks it up.)"""
    return _fields_readable(list(data_schema), list(read_schema))


_REMAPPED = " (a column was renamed or dropped: column mapping)"


def check_stream_schema(uri: str, read_schema: pa.Schema, metadata: Metadata, version: int, *,
                        projected: bool = False) -> None:
    """Fail a stream analysed with ``read_schema`` at the ``metaData`` action of ``version`` when
    the stream cannot read the data written under it (:func:`readable_as`, or a column-mapping
    rename / drop-and-re-add). ``projected``: the stream reads only the columns of
    ``read_schema``, so other data columns are no change for it. Shared by the plain and the
    change-feed stream, which Delta checks alike."""
    data_schema = schema_from_json(metadata.schema_string)
    remapped = column_mapping_changed(data_schema, read_schema) or column_dropped(
        data_schema, read_schema, max_column_id(metadata.configuration))
    if projected:
        wanted = {f.name.lower() for f in read_schema}
        data_schema = pa.schema([f for f in data_schema if f.name.lower() in wanted])
    if remapped or not readable_as(data_schema, read_schema):
        raise StreamSchemaChangedError(
            f"[DELTA_SCHEMA_CHANGED_WITH_VERSION] the schema of {uri!r} changed at version "
            f"{version}: the stream reads {_describe(read_schema)} but the data from version {version} "
            f"has {_describe(data_schema)}{_REMAPPED if remapped else ''}. Restart the query to read with the new "
            f"schema; if it fails again at the same version the change is incompatible and the query needs a new "
            f"checkpoint location (or startingVersion after {version}).", version=version)


# --------------------------------------------------------------------------------------------
# Where a new stream starts
# --------------------------------------------------------------------------------------------


def resolve_start(store: LogStore, latest_version: int, configuration: dict[str, str],
                  starting_version: int | str | None = None, starting_timestamp_ms: int | None = None) -> StreamStart:
    """The snapshot at the latest version, or Delta's ``startingVersion``/``startingTimestamp``.

    ``startingVersion="latest"`` starts after the latest commit (only new commits). A timestamp
    starts at the first commit at or after it (the earliest commit file in the log if it is older
    than all, as Delta's ``getStartingVersionFromTimestamp``);
    a timestamp after the latest commit is an error, as in Delta. ``configuration`` (the latest
    table properties) says whether commit timestamps are in-commit timestamps.
    """
    if starting_version is not None and starting_timestamp_ms is not None:
        raise TimeTravelError("pass startingVersion or startingTimestamp, not both")
    if starting_version == "latest":
        return StreamStart(latest_version + 1, initial_snapshot=False)
    if starting_version is not None:
        version = int(starting_version)
        if version < 0 or version > latest_version:
            raise TimeTravelError(
                f"startingVersion {version} is not a version of {store.uri!r} (latest is {latest_version})")
        return StreamStart(version, initial_snapshot=False)
    if starting_timestamp_ms is not None:
        commits = unbroken_commits(store.list_log(0))  # its changes need commit files only
        timeline = CommitTimeline(store, commits, ict_enablement_version(configuration))
        i = bisect.bisect_left(timeline, starting_timestamp_ms)
        if i == len(timeline):
            last = f"version {timeline.versions[-1]} at {timeline[-1]} ms" if len(timeline) else "no commits"
            raise TimeTravelError(
                f"startingTimestamp {starting_timestamp_ms} ms is after the latest commit of {store.uri!r} "
                f"({last}); use a timestamp at or before it, or startingVersion='latest'")
        return StreamStart(timeline.versions[i], initial_snapshot=False)
    return StreamStart(latest_version, initial_snapshot=True)


# --------------------------------------------------------------------------------------------
# The planner
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Segment:
    """The units of one version after the start offset: the snapshot, or one commit's adds."""

    version: int
    initial_snapshot: bool
    first_index: int  # index of files[0] within the version
    total: int  # number of units in the whole version
    files: pa.Table


class StreamPlanner:
    """Lists the units of a table's stream between offsets, commit checks and admission included.

    ``read_schema`` is the schema the stream was analysed with (the table's when the query
    started); ``metadata`` the table's at that time (for reading legacy protocols). With
    ``projected`` the stream reads only some columns, so data columns outside ``read_schema``
    are no schema change for it.
    """

    def __init__(self, store: LogStore, table_id: str, read_schema: pa.Schema, metadata: Metadata | None = None,
                 policy: ChangePolicy = ChangePolicy(), *, projected: bool = False, cached_versions: int = 256):
        self.store = store
        self.table_id = table_id
        self.read_schema = read_schema
        self.metadata = metadata
        self.policy = policy
        self.projected = projected
        self._cached_versions = cached_versions
        self._commits: OrderedDict[int, pa.Table] = OrderedDict()
        self._snapshot: tuple[int, Metadata, pa.Table] | None = None

    # ------------------------------------------------------------------ units of one version
    def snapshot_files(self, version: int) -> pa.Table:
        """The live files at ``version`` in stream order (modificationTime, path)."""
        return self._snapshot_at(version)[1]

    def _snapshot_at(self, version: int) -> tuple[Metadata, pa.Table]:
        if self._snapshot is None or self._snapshot[0] != version:
            snapshot = load_snapshot(self.store, version=version)
            files = snapshot.files.select(UNIT_FILE_COLUMNS).sort_by(
                [("modificationTime", "ascending"), ("path", "ascending")])
            self._snapshot = (version, snapshot.metadata, files.combine_chunks())
        return self._snapshot[1], self._snapshot[2]

    def commit_files(self, version: int, name: str) -> pa.Table:
        """The files commit ``version`` (log file ``name``) delivers, after Delta's checks."""
        cached = self._commits.get(version)
        if cached is not None:
            self._commits.move_to_end(version)
            return cached
        files = self._deliverable(parse_commit(self.store.read_log_file(name), version, validate=False))
        self._commits[version] = files
        while len(self._commits) > self._cached_versions:
            self._commits.popitem(last=False)
        return files

    def _deliverable(self, commit: CommitActions) -> pa.Table:
        version = commit.version
        if commit.metadata is not None:
            self._check_schema(commit.metadata, version)
        if commit.protocol is not None:
            check_readable(commit.protocol, commit.metadata or self.metadata)
        adds = commit.adds
        adds = adds.filter(pc.fill_null(adds["dataChange"], True))
        removes = commit.removes
        removes = removes.filter(pc.fill_null(removes["dataChange"], True))
        if removes.num_rows:
            example = removes["path"][0].as_py()
            if self.policy.skip_change_commits:
                adds = adds.slice(0, 0)
            elif adds.num_rows and not self.policy.ignore_changes:
                raise StreamDataChangedError(
                    f"[DELTA_SOURCE_TABLE_IGNORE_CHANGES] version {version} of {self.store.uri!r} changes data "
                    f"the stream already delivered (it removes {example!r} and adds files: an UPDATE, MERGE, "
                    f"DELETE with deletion vectors or overwrite). A stream only delivers appended rows: set the "
                    f"option skipChangeCommits=true to skip such commits, or restart the query with a new "
                    f"checkpoint location to read the table afresh.", version=version)
            elif not adds.num_rows and not (self.policy.ignore_changes or self.policy.ignore_deletes):
                raise StreamDataChangedError(
                    f"[DELTA_SOURCE_IGNORE_DELETE] version {version} of {self.store.uri!r} deletes data "
                    f"(for example {example!r}). A stream only delivers appended rows: set the option "
                    f"ignoreDeletes=true to go past commits that only delete whole files or partitions, or "
                    f"skipChangeCommits=true to skip every commit that removes data.", version=version)
        return adds.select(UNIT_FILE_COLUMNS).combine_chunks()

    def _check_schema(self, metadata: Metadata, version: int) -> None:
        check_stream_schema(self.store.uri, self.read_schema, metadata, version, projected=self.projected)

    # ------------------------------------------------------------------ the unit sequence
    def check_offset(self, offset: StreamOffset) -> None:
        if offset.table_id != self.table_id:
            raise StreamingSourceError(
                f"the stream's checkpoint was written for table id {offset.table_id} but {self.store.uri!r} "
                f"is now table id {self.table_id} (the table was deleted and re-created): use a new checkpoint "
                f"location")

    def _segments(self, start: StreamOffset, last_version: int | None) -> Iterator[_Segment]:
        """Every version's units after ``start``, in stream order, up to ``last_version``."""
        if start.initial_snapshot:
            metadata, files = self._snapshot_at(start.version)
            after = start.index + 1
            if after < files.num_rows:  # files left to deliver: read with the stream's schema
                self._check_schema(metadata, start.version)
            yield _Segment(start.version, True, after, files.num_rows, files.slice(after))
            first_commit = start.version + 1
        else:
            first_commit = start.version
        if last_version is not None and first_commit > last_version:
            return
        expected = first_commit
        for f in self.store.list_log(first_commit):
            if f.kind != "commit":
                continue
            if last_version is not None and f.version > last_version:
                return
            if f.version != expected:
                raise StreamingSourceError(
                    f"version {expected} of {self.store.uri!r}, which the stream has not read yet, is no longer "
                    f"in the log (log retention or manual deletion); the stream cannot go on without losing "
                    f"data — restart it with a new checkpoint location", version=expected)
            files = self.commit_files(f.version, f.name)
            after = start.index + 1 if f.version == start.version else 0
            yield _Segment(f.version, False, after, files.num_rows, files.slice(after))
            expected += 1

    def latest_offset(self, start: StreamOffset, limit: Admission | None,
                      last_version: int | None = None) -> StreamOffset:
        """The end of the next micro-batch from ``start`` (``start`` itself: nothing new).

        ``limit`` None takes everything available; ``last_version`` bounds the versions looked at
        (``Trigger.AvailableNow``: the latest version when the run began).
        """
        budget = _Budget(limit)
        last: tuple[int, int, bool, bool] | None = None  # version, index, snapshot, last of its version
        try:
            for seg in self._segments(start, last_version):
                if not seg.initial_snapshot and seg.version != start.version:
                    if not budget.open:  # the commit's base position is a unit too, taken while budget lasts
                        break
                    last = (seg.version, BASE_INDEX, False, False)
                sizes = pc.fill_null(seg.files["size"], 0).to_numpy()
                taken = budget.admit(sizes)
                if taken:
                    index = seg.first_index + taken - 1
                    last = (seg.version, index, seg.initial_snapshot, index == seg.total - 1)
                if taken < seg.files.num_rows:
                    break
        except StreamSchemaChangedError as changed:
            # The commit that changed the schema is checked only once every unit before it was
            # taken (a spent budget stops the loop first): the batch ends before it, so everything
            # before it is delivered, and the next batch, which starts there, fails.
            if changed.version is None or changed.version <= start.version:
                raise
            return StreamOffset(self.table_id, changed.version, BASE_INDEX, False)
        if last is None:
            return start
        version, index, snapshot, last_of_version = last
        if last_of_version:
            return StreamOffset(self.table_id, version + 1, BASE_INDEX, False)
        return StreamOffset(self.table_id, version, index, snapshot and start.initial_snapshot)

    def files_between(self, start: StreamOffset, end: StreamOffset) -> pa.Table:
        """The units after ``start`` up to and including ``end``, in stream order, as add rows with
        ``version`` and ``index`` columns."""
        if end.position < start.position or (end.initial_snapshot and not start.initial_snapshot):
            raise StreamingSourceError(
                f"the stream's offsets move backwards ({start.to_json()} -> {end.to_json()}); the checkpoint "
                f"is inconsistent — use a new checkpoint location")
        parts: list[pa.Table] = []
        if end.position == start.position:
            return _with_positions(_empty_units(), 0, 0)
        # an end at a commit's base position takes nothing of that commit (not even its checks)
        last_version = end.version - 1 if end.index == BASE_INDEX and not end.initial_snapshot else end.version
        for seg in self._segments(start, last_version):
            files = seg.files
            if seg.version == end.version:
                files = files.slice(0, max(0, end.index + 1 - seg.first_index))
            parts.append(_with_positions(files, seg.version, seg.first_index))
        if not parts:
            return _with_positions(_empty_units(), 0, 0)
        return pa.concat_tables(parts)

    def forget_before(self, version: int) -> None:
        """Drop cached commits below ``version`` (Spark committed everything before it)."""
        for v in [v for v in self._commits if v < version]:
            del self._commits[v]
        if self._snapshot is not None and self._snapshot[0] < version - 1:
            self._snapshot = None


def _empty_units() -> pa.Table:
    from .actions import FILE_SCHEMA

    return FILE_SCHEMA.empty_table().select(UNIT_FILE_COLUMNS)


def _with_positions(files: pa.Table, version: int, first_index: int) -> pa.Table:
    n = files.num_rows
    return files.append_column("version", pa.array(np.full(n, version, dtype=np.int64))).append_column(
        "index", pa.array(np.arange(first_index, first_index + n, dtype=np.int64)))


def _describe(schema: pa.Schema) -> str:
    return "struct<" + ", ".join(f"{f.name}: {f.type}{'' if f.nullable else ' not null'}" for f in schema) + ">"
