"""``spark.readStream.format("deltatx").load(uri)``: a table as a streaming source, as Delta's.

A new query first delivers the table as it is when the query starts (the *initial snapshot*),
then every later commit's appended files, in log order; ``startingVersion`` /
``startingTimestamp`` skip the snapshot and start from a commit. Offsets are Delta's
``(reservoirVersion, index, isStartingVersion)``; which files lie between two offsets, the commit
checks (a commit that removes data or changes the schema fails the stream, unless told
otherwise) and the per-batch admission limits live in :mod:`deltatx.txnlog.stream_plan`. This
module is the Spark side: options, Spark's read limits and trigger, and reading the files (with
deletion vectors applied) through the batch reader's code.

Options (Delta's names; any spelling, Spark lower-cases keys):

- ``startingVersion``: a version, or ``latest`` (only commits after the latest one);
- ``startingTimestamp``: ISO date/datetime or epoch milliseconds: commits at or after it;
- ``maxFilesPerTrigger`` (default 1000) and ``maxBytesPerTrigger`` (a soft limit, e.g. ``64m``):
  how much one micro-batch takes; ``Trigger.Once`` ignores both, ``availableNow`` honours them;
- ``skipChangeCommits``: skip commits that remove data (DELETE, UPDATE, MERGE, overwrite);
- ``ignoreDeletes``: go past commits that only remove whole files or partitions;
- ``ignoreChanges`` (deprecated in Delta): deliver the rewritten files of changing commits;
- ``columns``, ``storage.*``, ``maxPartitionBytes`` etc. as for batch reads;
- ``readChangeFeed``: stream the change data feed instead (:mod:`deltatx.spark.change_stream`).

Exactly once: the offsets live in Spark's checkpoint; a restarted query continues after the last
committed offset and re-plans an uncommitted batch to the very same files (the log is immutable,
the snapshot order deterministic, and a first batch records where the stream started, because
Spark asks again for the initial offset when it replays it).

Spark runs the offset methods in one long-lived Python process per query, so the planner (and its
cache of parsed commits) is kept there; ``read`` runs in executor workers on a pickled copy
without it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from ..errors import InvalidPropertyError, UnsupportedOperationError
from ..io.row_metadata import MaterializedColumns
from ..txnlog import column_mapping
from ..txnlog.history import to_timestamp_ms
from ..txnlog.schema import schema_from_json, schema_to_json
from ..txnlog.snapshot import load_snapshot
from ..txnlog.store import LogStore, open_store
from ..txnlog.stream_plan import (
    BASE_INDEX,
    DEFAULT_MAX_FILES_PER_TRIGGER,
    UNRESOLVED_VERSION,
    Admission,
    ChangePolicy,
    StreamOffset,
    StreamPlanner,
    StreamStart,
    first_batch_start,
    resolve_start,
)
from .options import ReadSpec, flag, int_option, lower_keys, read_spec
from .reader import METADATA_COLUMN, DeltaTxReader, FilesPartition, bin_files, open_latest

#: add-action columns the executors get for each file
_PARTITION_FILE_COLUMNS = ["path", "partitionValues", "size", "deletionVector", "baseRowId", "defaultRowCommitVersion"]

_BYTE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30,
               "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40}
_BYTE_SIZE = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


@dataclass(frozen=True)
class StreamReadSpec:
    """A streaming read: the batch read's settings plus where to start and how much per batch."""

    read: ReadSpec
    starting_version: int | str | None = None  # a version or "latest"
    starting_timestamp_ms: int | None = None
    max_files: int | None = None
    max_bytes: int | None = None
    policy: ChangePolicy = ChangePolicy()

    def admission(self) -> Admission:
        return Admission.from_options(self.max_files, self.max_bytes)


def byte_size(name: str, value: str) -> int:
    """Spark's size strings: ``1048576``, ``512k``, ``64m``, ``1g`` (binary units)."""
    m = _BYTE_SIZE.match(value)
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _BYTE_UNITS or int(m.group(1)) < 1:
        raise InvalidPropertyError(f"option {name}={value!r} must be a positive size such as 1048576, 512k or 64m")
    return int(m.group(1)) * _BYTE_UNITS[unit]


def refuse_unsupported_source_options(options: Mapping[str, str]) -> None:
    """Delta source options deltatx lacks whose silent omission would change the rows read:
    ``excludeRegex`` (skip files whose path matches). Checked by the data source's ``schema()``
    too, so that ``load()`` raises it (an error in Spark's stream-reader hook is garbled)."""
    o = lower_keys(options)
    if o.get("excluderegex"):
        raise UnsupportedOperationError(
            f"option excludeRegex={o['excluderegex']!r} is not supported by deltatx; ignoring it would "
            f"read the rows of the files it excludes (filter with a where() instead)")


def stream_read_spec(raw_options: Mapping[str, str]) -> StreamReadSpec:
    """Parse (and check) the options of ``spark.readStream.format("deltatx")``."""
    o = lower_keys(raw_options)
    for name in ("versionasof", "timestampasof"):
        if name in o:
            raise InvalidPropertyError(
                f"option {name} does not apply to a streaming read: use startingVersion or startingTimestamp")
    flag(o, "readChangeFeed")  # checked here; source.py picks the change-feed reader on it
    refuse_unsupported_source_options(o)
    version: int | str | None = None
    raw_version = o.get("startingversion")
    if raw_version is not None and raw_version.strip() != "":
        text = raw_version.strip().lower()
        if text == "latest":
            version = "latest"
        elif text.isdigit():
            version = int(text)
        else:
            raise InvalidPropertyError(f"option startingVersion={raw_version!r} must be a version (>= 0) or 'latest'")
    raw_timestamp = (o.get("startingtimestamp") or "").strip() or None
    if version is not None and raw_timestamp is not None:
        raise InvalidPropertyError("pass startingVersion or startingTimestamp, not both")
    timestamp = None
    if raw_timestamp is not None:
        timestamp = to_timestamp_ms(int(raw_timestamp) if raw_timestamp.isdigit() else raw_timestamp)
    raw_bytes = o.get("maxbytespertrigger")
    return StreamReadSpec(
        read=read_spec(o),
        starting_version=version,
        starting_timestamp_ms=timestamp,
        max_files=int_option(o, "maxFilesPerTrigger", minimum=1),
        max_bytes=byte_size("maxBytesPerTrigger", raw_bytes) if raw_bytes is not None else None,
        policy=ChangePolicy(
            skip_change_commits=flag(o, "skipChangeCommits"),
            ignore_changes=flag(o, "ignoreChanges"),
            ignore_deletes=flag(o, "ignoreDeletes"),
        ),
    )


@dataclass
class _SourceState:
    """What the query's offset process learns once: the table as the query starts, the planner."""

    store: LogStore
    latest_version: int
    configuration: dict[str, str]
    planner: StreamPlanner
    table_schema_json: str
    partition_columns: tuple[str, ...]
    materialized: MaterializedColumns
    start: StreamStart | None = None  # where a new stream begins; resolved when first needed


class DriverPlannedStream(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """What both deltatx micro-batch sources share: the spec, the read schema, and planning state
    (``_state``) that lives on the driver only — the copies Spark pickles for executors drop it."""

    def __init__(self, spec: StreamReadSpec, spark_schema: Any):
        self.spec = spec
        self.spark_schema_json = spark_schema.json()
        self._state: Any = None
        self._available_now = False
        self._last_version: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_state"] = None  # executors only read files
        return state

    def getDefaultReadLimit(self) -> ReadLimit:
        """Delta's: ``maxBytesPerTrigger`` alone limits bytes; otherwise files (1000 by default).
        Both set: files here, and the byte limit is applied on top of it."""
        if self.spec.max_bytes is not None and self.spec.max_files is None:
            return ReadMaxBytes(self.spec.max_bytes)
        return ReadMaxFiles(self.spec.max_files or DEFAULT_MAX_FILES_PER_TRIGGER)

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True
        self._last_version = None

    def _admission(self, limit: ReadLimit) -> Admission | None:
        if isinstance(limit, ReadAllAvailable):
            return None
        if isinstance(limit, ReadMaxFiles):
            return Admission(limit.max_files, self.spec.max_bytes)
        if isinstance(limit, ReadMaxBytes):
            return Admission(self.spec.max_files, limit.max_bytes)
        return self.spec.admission()


class DeltaTxStreamReader(DriverPlannedStream):
    """Spark's micro-batch source for a deltatx table (see the module docstring)."""

    def __init__(self, spec: StreamReadSpec, spark_schema: Any):
        super().__init__(spec, spark_schema)
        self.files_reader = DeltaTxReader(spec.read, spark_schema)  # read(): the batch reader's code

    # ------------------------------------------------------------------ planning state
    def _source(self) -> _SourceState:
        if self._state is None:
            store, latest = open_latest(self.spec.read.uri, self.spec.read.storage_options)
            read_schema = schema_from_json(self.spark_schema_json)
            read_schema = pa.schema([f for f in read_schema if f.name != METADATA_COLUMN])
            planner = StreamPlanner(store, latest.metadata.id, read_schema, latest.metadata, self.spec.policy,
                                    projected=bool(self.spec.read.columns))
            self._state = _SourceState(
                store, latest.version, latest.properties, planner, schema_to_json(latest.schema),
                tuple(latest.partition_columns), MaterializedColumns.from_configuration(latest.properties))
        return self._state

    def _stream_start(self) -> StreamStart:
        """Where this new stream begins; fixed for the life of the query process (see StreamOffset)."""
        source = self._source()
        if source.start is None:
            source.start = resolve_start(source.store, source.latest_version, source.configuration,
                                         self.spec.starting_version, self.spec.starting_timestamp_ms)
        return source.start

    @property
    def _starts_with_snapshot(self) -> bool:
        return self.spec.starting_version is None and self.spec.starting_timestamp_ms is None

    def _latest_version(self) -> int:
        commits = [f.version for f in self._source().store.list_log(0) if f.kind == "commit"]
        return max(commits) if commits else -1

    # ------------------------------------------------------------------ Spark's offset protocol
    def initialOffset(self) -> dict:
        return StreamOffset(self._source().planner.table_id, UNRESOLVED_VERSION, BASE_INDEX,
                            self._starts_with_snapshot).to_json()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        source = self._source()
        planner = source.planner
        begin = StreamOffset.from_json(start)
        planner.check_offset(begin)
        if self._available_now and self._last_version is None:
            self._last_version = self._latest_version()  # AvailableNow: nothing committed after this
        admission = self._admission(limit)
        if not begin.unresolved:
            end = planner.latest_offset(begin, admission, self._last_version)
            return start if end == begin else end.to_json()
        stream_start = self._stream_start()
        first = StreamOffset(planner.table_id, stream_start.version, BASE_INDEX, stream_start.initial_snapshot)
        end = planner.latest_offset(first, admission, self._last_version)
        if end == first:
            return start
        return dataclasses.replace(end, started_at=stream_start).to_json()

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        source = self._source()
        planner = source.planner
        begin, finish = StreamOffset.from_json(start), StreamOffset.from_json(end)
        planner.check_offset(begin)
        planner.check_offset(finish)
        if finish.unresolved or finish == begin:  # Spark may run an empty first batch at the initial offset
            return []
        if begin.unresolved:
            begin = first_batch_start(finish)
        files = planner.files_between(begin, finish).select(_PARTITION_FILE_COLUMNS)
        sizes = files.column("size").to_pylist()
        return [
            FilesPartition(files.take(pa.array(idx, pa.int64())), source.table_schema_json,
                           source.partition_columns, source.materialized,
                           column_mapping.mode_of(source.configuration))
            for idx in bin_files(sizes, self.spec.read)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.files_reader.read(partition)

    def commit(self, end: dict) -> None:
        if self._state is not None:
            offset = StreamOffset.from_json(end)
            if not offset.unresolved:
                self._state.planner.forget_before(offset.version)
