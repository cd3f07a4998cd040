"""``spark.read.format("deltatx").option("readChangeFeed", "true")``: the change data feed in Spark.

Nothing about the feed is decided here: the core plans which files hold each version's changes
(:func:`deltatx.txnlog.change_feed.plan_changes`) and reads them
(:func:`deltatx.io.change_feed.read_changes`), so Spark returns exactly ``Table.changes``'s rows.
This module only cuts a plan into input partitions — whole versions per partition, so that each
executor runs the core reader on a smaller plan of the same shape — and maps the change columns
to delta-spark's Spark types (``_change_type`` string, ``_commit_version`` long,
``_commit_timestamp`` timestamp).

Options (Delta's names): ``startingVersion`` or ``startingTimestamp`` (one is required, as in
Delta), ``endingVersion`` or ``endingTimestamp`` (default: the latest version). The range is
resolved to versions when Spark asks for the schema (``load()``) and pinned in the options, so
every scan of the DataFrame reads the same versions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, InputPartition

from ..errors import ChangeDataFeedError, TimeTravelError
from ..io.change_feed import read_changes
from ..txnlog.change_feed import COMMIT_VERSION, ChangePlan, plan_changes, resolve_range
from ..txnlog.snapshot import load_snapshot
from ..txnlog.store import LogStore, open_store
from .options import ReadSpec, flag, int_option, lower_keys, read_spec
from .reader import open_latest, select_columns, to_spark_batch

#: internal options: the resolved range, pinned by schema() (see the module docstring)
PINNED_START_OPTION = "_deltatx_cdf_start"
PINNED_END_OPTION = "_deltatx_cdf_end"
#: set when the pinned range holds no version (timestamps between the same two commits)
PINNED_EMPTY_OPTION = "_deltatx_cdf_empty"


def wants_change_feed(options: Mapping[str, str]) -> bool:
    """``readChangeFeed`` or its older name ``readChangeData`` (delta-spark still takes both)."""
    lowered = lower_keys(options)
    return flag(lowered, "readChangeFeed") or flag(lowered, "readChangeData")


@dataclass(frozen=True)
class ChangeFeedSpec:
    """A batch change-feed read: the table read settings and the bounds as Delta names them."""

    read: ReadSpec
    starting_version: int | None = None
    ending_version: int | None = None
    starting_timestamp: Any = None
    ending_timestamp: Any = None
    #: the bounds resolved to no version at all (the read returns no row)
    empty: bool = False


def _timestamp(value: str | None) -> Any:
    text = (value or "").strip()
    if not text:
        return None
    return int(text) if text.isdigit() else text  # epoch milliseconds, or an ISO date/datetime


def change_feed_spec(raw_options: Mapping[str, str]) -> ChangeFeedSpec:
    """Parse the options of a batch change-feed read (pinned versions win over the bounds given)."""
    o = lower_keys(raw_options)
    for name in ("versionasof", "timestampasof"):
        if name in o:
            raise ChangeDataFeedError(
                f"option {name} does not apply to a change feed read: use startingVersion/endingVersion")
    start, end = int_option(o, PINNED_START_OPTION), int_option(o, PINNED_END_OPTION)
    read = read_spec({k: v for k, v in o.items() if k not in ("versionasof", "timestampasof")})
    if start is not None and end is not None:
        return ChangeFeedSpec(read, starting_version=start, ending_version=end, empty=PINNED_EMPTY_OPTION in o)
    spec = ChangeFeedSpec(
        read,
        starting_version=_version(o, "startingVersion"),
        ending_version=_version(o, "endingVersion"),
        starting_timestamp=_timestamp(o.get("startingtimestamp")),
        ending_timestamp=_timestamp(o.get("endingtimestamp")),
    )
    if spec.starting_version is None and spec.starting_timestamp is None:
        raise ChangeDataFeedError(
            "a change feed read needs startingVersion or startingTimestamp (as in Delta): "
            ".option('startingVersion', 0) reads every change since the table was created")
    return spec


def _version(o: Mapping[str, str], name: str) -> int | None:
    value = o.get(name.lower())
    if value is None or value.strip() == "":
        return None
    if not value.strip().isdigit():
        raise ChangeDataFeedError(f"option {name}={value!r} must be a version (an integer >= 0)")
    return int(value.strip())


def spark_change_schema(table_schema: pa.Schema, columns: tuple[str, ...] | None) -> Any:
    """The table's columns (or the ``columns`` option's) + delta-spark's three change columns."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

    from .options import read_schema_to_spark

    struct = read_schema_to_spark(select_columns(table_schema, columns))
    return StructType(list(struct.fields) + [
        StructField("_change_type", StringType(), True),
        StructField("_commit_version", LongType(), True),
        StructField("_commit_timestamp", TimestampType(), True),
    ])


def resolve_and_pin(options: dict[str, str]) -> Any:
    """``DataSource.schema()`` of a change-feed read: resolve the bounds to versions, pin them in
    ``options``, and return the Spark schema (the table's at the ending version)."""
    o = lower_keys(options)
    latest_only = (o.get("startingversion") or "").strip().lower() == "latest"
    if latest_only or not any((o.get(k) or "").strip()
                              for k in ("startingversion", "startingtimestamp", PINNED_START_OPTION)):
        # no bound, or startingVersion=latest: a stream (its initial snapshot, or only the commits
        # after the latest, then every commit) — a batch read's reader() refuses it with
        # ChangeDataFeedError
        spec = ChangeFeedSpec(read_spec(o))
        _, latest = open_latest(spec.read.uri, spec.read.storage_options)
        return spark_change_schema(latest.schema, spec.read.columns)
    spec = change_feed_spec(options)
    store, latest = open_latest(spec.read.uri, spec.read.storage_options)
    try:
        start, end, _ = resolve_range(store, latest, spec.starting_version, spec.ending_version,
                                      spec.starting_timestamp, spec.ending_timestamp)
    except (ChangeDataFeedError, TimeTravelError):
        # Unpinned: a batch read fails with this error when it plans. A stream restarting from
        # its checkpoint goes on from there; its start options no longer matter (as in Delta,
        # which resolves them only for a new query), whatever log cleanup removed since.
        return spark_change_schema(latest.schema, spec.read.columns)
    if end < start:  # both timestamps between the same two commits: no change in range (Delta: empty)
        options[PINNED_EMPTY_OPTION] = "true"
    options[PINNED_START_OPTION], options[PINNED_END_OPTION] = str(start), str(end)
    at_end = latest if end >= latest.version or end < start else load_snapshot(store, version=end)
    return spark_change_schema(at_end.schema, spec.read.columns)


# --------------------------------------------------------------------------------------------
# Plans cut into partitions
# --------------------------------------------------------------------------------------------


def _files_per_version(plan: ChangePlan) -> np.ndarray:
    counts = np.zeros(max(0, plan.end - plan.start + 1), dtype=np.int64)
    for files in (plan.cdc_files, plan.inserted_files, plan.deleted_files, plan.dv_pairs):
        if files.num_rows:
            versions = files.column(COMMIT_VERSION).to_numpy() - plan.start
            counts += np.bincount(versions, minlength=len(counts))
    return counts


def _versions(files: pa.Table, first: int, last: int) -> pa.Table:
    if not files.num_rows:
        return files
    v = files.column(COMMIT_VERSION)
    return files.filter(pc.and_(pc.greater_equal(v, first), pc.less_equal(v, last)))


def sub_plan(plan: ChangePlan, first: int, last: int) -> ChangePlan:
    """The part of ``plan`` for versions ``first..last``: a plan of the same shape, read by the
    core reader as is."""
    return replace(
        plan, start=first, end=last, timestamps_ms=plan.timestamps_ms[first - plan.start:last - plan.start + 1],
        cdc_files=_versions(plan.cdc_files, first, last), inserted_files=_versions(plan.inserted_files, first, last),
        deleted_files=_versions(plan.deleted_files, first, last), dv_pairs=_versions(plan.dv_pairs, first, last),
        metadata_changes=[(v, m) for v, m in plan.metadata_changes if first <= v <= last])


def split_plan(plan: ChangePlan, partitions: int) -> list[ChangePlan]:
    """``plan`` as at most ``partitions`` plans of consecutive versions with about as many files
    each (versions without files are left out)."""
    if plan.empty:
        return []
    counts = _files_per_version(plan)
    total = int(counts.sum())
    if total == 0:
        return []
    target = max(1, -(-total // max(1, partitions)))
    out: list[ChangePlan] = []
    first, taken = None, 0
    for i, n in enumerate(counts.tolist()):
        if n and first is None:
            first = i
        taken += n
        if first is not None and taken >= target:
            out.append(sub_plan(plan, plan.start + first, plan.start + i))
            first, taken = None, 0
    if first is not None:
        out.append(sub_plan(plan, plan.start + first, plan.end))
    return out


class ChangesPartition(InputPartition):
    """One input partition: the change plan of some consecutive versions."""

    def __init__(self, plan: ChangePlan):
        self.plan = plan


def read_partition(store: LogStore, partition: InputPartition, columns: list[str],
                   target: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The core reader on one partition's plan, batches in Spark's exact Arrow types."""
    if not isinstance(partition, ChangesPartition):  # Spark's stand-in when there is nothing to read
        return
    plan = partition.plan
    table_columns = [c for c in columns if c in plan.schema.names]
    rows = read_changes(store, plan, columns=None if table_columns == plan.schema.names else table_columns)
    for batch in rows.to_batches():
        yield to_spark_batch(batch, target)


def spark_arrow_schema(spark_schema_json: str) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    return to_arrow_schema(StructType.fromJson(json.loads(spark_schema_json)), timezone="UTC")


class ChangeFeedReader(DataSourceReader):
    """Planned on the driver (``partitions``), pickled to executors (``read``)."""

    def __init__(self, spec: ChangeFeedSpec, spark_schema: Any):
        self.spec = spec
        self.spark_schema_json = spark_schema.json()
        self.columns = list(spark_schema.fieldNames())

    def partitions(self) -> list[ChangesPartition]:
        if self.spec.empty:
            return []
        store = open_store(self.spec.read.uri, self.spec.read.storage_options)
        plan = plan_changes(store, load_snapshot(store), self.spec.starting_version, self.spec.ending_version,
                            self.spec.starting_timestamp, self.spec.ending_timestamp)
        return [ChangesPartition(p) for p in split_plan(plan, self.spec.read.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        store = open_store(self.spec.read.uri, self.spec.read.storage_options)
        return read_partition(store, partition, self.columns, spark_arrow_schema(self.spark_schema_json))
