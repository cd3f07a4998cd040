"""``spark.readStream.format("deltatx").option("readChangeFeed", "true")``: the change feed as a stream.

Each micro-batch delivers the change rows of whole commits — the core planner's and reader's
rows, as a batch change-feed read of the same versions (:mod:`deltatx.spark.change_feed`).
Without ``startingVersion``/``startingTimestamp`` a new stream first delivers the table as it is
when the query starts, every row an ``insert`` of that version (Delta's initial snapshot), then
each later commit's changes.

Offsets are the streaming source's (:class:`~deltatx.txnlog.stream_plan.StreamOffset`), at commit
boundaries only: ``(v, -1)`` means "every change before version v delivered"; a new stream's first
end offset records where it started (``startingFrom``), so a replay after a crash plans the same
versions. Exactly once therefore holds as for the plain source: the log is immutable and the
plan of a version range deterministic.

Schema changes are checked as in the plain stream (:func:`~deltatx.txnlog.stream_plan.check_stream_schema`):
a batch stops before the first commit whose ``metaData`` the stream's read schema cannot read
(a widened type, a new, renamed or re-added column), and the next batch fails at that version
with :class:`~deltatx.errors.StreamSchemaChangedError`; a restart reads on with the new schema.

Admission: ``maxFilesPerTrigger`` / ``maxBytesPerTrigger`` count the files a commit's changes are
read from (its change data files, or its added and removed files) and admit whole commits, at
least one per batch; the initial snapshot is one batch. Delta's change-commit options
(``skipChangeCommits``, ``ignoreDeletes``) do not apply: a change feed delivers deletes and
updates as rows.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import ReadLimit

import pyarrow as pa

from ..errors import StreamSchemaChangedError
from ..txnlog.change_feed import (CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, ChangePlan, plan_changes,
                                  resolve_range, snapshot_as_inserts)
from ..txnlog.schema import schema_from_json
from ..txnlog.snapshot import Snapshot, load_snapshot
from ..txnlog.store import LogStore, open_store
from ..txnlog.stream_plan import (BASE_INDEX, UNRESOLVED_VERSION, Admission, StreamOffset, StreamStart,
                                  check_stream_schema, first_batch_start, resolve_start)
from .change_feed import ChangesPartition, read_partition, spark_arrow_schema, split_plan
from .stream_source import DriverPlannedStream, StreamReadSpec
from .reader import open_latest


@dataclass
class _State:
    """What the query's offset process keeps: the store, the table id, where a new stream starts."""

    store: LogStore
    table_id: str
    read_schema: pa.Schema  # the table columns the query was analysed with (change columns left out)
    #: where a new stream starts: resolved only for a query without a checkpointed offset, as
    #: Delta resolves it (a restart goes on from its checkpoint, whatever log cleanup removed since)
    start: StreamStart | None = None


def _file_sizes_per_version(plan: ChangePlan) -> tuple[np.ndarray, np.ndarray]:
    """(files, bytes) the changes of each version of ``plan`` are read from."""
    n = max(0, plan.end - plan.start + 1)
    files, sizes = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for table in (plan.cdc_files, plan.inserted_files, plan.deleted_files, plan.dv_pairs):
        if table.num_rows:
            index = table.column(COMMIT_VERSION).to_numpy() - plan.start
            files += np.bincount(index, minlength=n)
            size = table.column("size").fill_null(0).to_numpy() if "size" in table.column_names else 0
            sizes += np.bincount(index, weights=size, minlength=n).astype(np.int64)
    return files, sizes


def admitted_end(plan: ChangePlan, limit: Admission | None) -> int:
    """The last version of ``plan`` the next batch takes: whole commits while the budget lasts."""
    if limit is None:
        return plan.end
    files, sizes = _file_sizes_per_version(plan)
    max_files = float("inf") if limit.max_files is None else limit.max_files
    max_bytes = float("inf") if limit.max_bytes is None else limit.max_bytes
    taken_files = taken_bytes = 0
    for i in range(len(files)):
        if i and (taken_files >= max_files or taken_bytes >= max_bytes):
            return plan.start + i - 1
        taken_files += int(files[i])
        taken_bytes += int(sizes[i])
    return plan.end


class ChangeFeedStreamReader(DriverPlannedStream):
    """Spark's micro-batch source for a table's change data feed (see the module docstring)."""

    def __init__(self, spec: StreamReadSpec, spark_schema: Any):
        super().__init__(spec, spark_schema)
        self.columns = list(spark_schema.fieldNames())

    def _source(self) -> _State:
        if self._state is None:
            store, latest = open_latest(self.spec.read.uri, self.spec.read.storage_options)
            read_schema = schema_from_json(self.spark_schema_json)
            change_columns = {CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP}
            self._state = _State(store, latest.metadata.id,
                                 pa.schema([f for f in read_schema if f.name not in change_columns]))
        return self._state

    def _stream_start(self, latest: Snapshot) -> StreamStart:
        """Where this new stream begins (startingVersion / startingTimestamp, else the snapshot),
        resolved against ``latest`` the first time it is asked."""
        source = self._source()
        if source.start is None:
            source.start = resolve_start(source.store, latest.version, latest.properties,
                                         self.spec.starting_version, self.spec.starting_timestamp_ms)
        return source.start

    def _check_schema(self, version: int, metadata: Any) -> None:
        source = self._source()
        check_stream_schema(self.spec.read.uri, source.read_schema, metadata, version,
                            projected=bool(self.spec.read.columns))

    def _plan(self, latest: Snapshot, first: int, last: int) -> ChangePlan:
        """The changes of ``first..last``, cut before the first commit whose schema the stream
        cannot read — or that commit's error when it is ``first`` (the stream reached it)."""
        plan = plan_changes(self._source().store, latest, first, last)
        for version, metadata in plan.metadata_changes:
            try:
                self._check_schema(version, metadata)
            except StreamSchemaChangedError:
                if version == first:
                    raise
                # planned again, not cut (sub_plan): the older changes must be read with the
                # schema and column mapping in force before the change, which a plan takes at its end
                return plan_changes(self._source().store, latest, first, version - 1)
        return plan

    def _latest(self) -> Snapshot:
        return load_snapshot(self._source().store)

    def _check(self, offset: StreamOffset) -> None:
        from ..errors import StreamingSourceError

        if offset.table_id != self._source().table_id:
            raise StreamingSourceError(
                f"the stream's checkpoint was written for table id {offset.table_id} but {self.spec.read.uri!r} "
                f"is now table id {self._source().table_id} (the table was deleted and re-created): use a new "
                f"checkpoint location")

    # ------------------------------------------------------------------ Spark's offset protocol
    def initialOffset(self) -> dict:
        source = self._source()
        return StreamOffset(source.table_id, UNRESOLVED_VERSION, BASE_INDEX,
                            self._stream_start(self._latest()).initial_snapshot).to_json()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        source = self._source()
        begin = StreamOffset.from_json(start)
        self._check(begin)
        latest = self._latest()
        if self._available_now and self._last_version is None:
            self._last_version = latest.version  # AvailableNow: nothing committed after this
        last = latest.version if self._last_version is None else min(latest.version, self._last_version)
        started_at = None
        if begin.unresolved:
            started_at = self._stream_start(latest)
            if started_at.initial_snapshot:  # the snapshot first, as one batch
                return StreamOffset(source.table_id, started_at.version + 1, BASE_INDEX, False,
                                    started_at=started_at).to_json()
            first = started_at.version
        else:
            first = begin.version
        if first > last:
            return start
        plan = self._plan(latest, first, last)
        end = admitted_end(plan, self._admission(limit))
        return StreamOffset(source.table_id, end + 1, BASE_INDEX, False, started_at=started_at).to_json()

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        source = self._source()
        begin, finish = StreamOffset.from_json(start), StreamOffset.from_json(end)
        self._check(begin)
        self._check(finish)
        if finish.unresolved or finish == begin:
            return []
        if begin.unresolved:
            begin = first_batch_start(finish)
        latest = self._latest()
        if begin.initial_snapshot:
            plan = self._snapshot_plan(source.store, latest, begin.version)
        else:
            plan = plan_changes(source.store, latest, begin.version, finish.version - 1)
            for version, metadata in plan.metadata_changes:  # a batch planned before a restart
                self._check_schema(version, metadata)
        return [ChangesPartition(p) for p in split_plan(plan, self.spec.read.min_partitions)]

    def _snapshot_plan(self, store: LogStore, latest: Snapshot, version: int) -> ChangePlan:
        """Every row at ``version`` as an insert, stamped with that commit's timestamp."""
        _, _, timeline = resolve_range(store, latest, version, version)
        timestamp = timeline[bisect.bisect_left(timeline.versions, version)]
        snapshot = latest if latest.version == version else load_snapshot(store, version=version)
        self._check_schema(version, snapshot.metadata)  # changed between analysis and the first batch
        return snapshot_as_inserts(snapshot, timestamp)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        store = open_store(self.spec.read.uri, self.spec.read.storage_options)
        return read_partition(store, partition, self.columns, spark_arrow_schema(self.spark_schema_json))

    def commit(self, end: dict) -> None:
        """Nothing cached to release: every plan is made from the log on demand."""

