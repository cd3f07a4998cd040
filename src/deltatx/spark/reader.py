"""``spark.read.format("deltatx").load(uri)``: plan the files on the driver, read them as Arrow.

Planning (driver, one Python worker): the reader opens the table (latest, or ``versionAsOf`` /
``timestampAsOf``), translates the filters Spark pushes into a deltatx predicate, prunes the
table's files with it (exact partition pruning plus min/max stats skipping, the same
:func:`deltatx.expr.files_matching` the core uses), and packs the remaining files into input
partitions: one per file, or one per bin of small files (Spark's own recipe: bins of at most
``maxPartitionBytes``, each file costing ``openCostInBytes`` extra, bins shrunk so that at least
``minPartitions`` exist).

Reading (executors): each partition's files stream through :func:`deltatx.io.reader.iter_batches`
(only the requested columns; the predicate also filters rows inside the Parquet scan) and every
batch is cast to the exact Arrow schema Spark expects (gotcha 10).

Filter pushdown is OFF unless the read sets ``.option("filterPushdown", "true")``, because of how
Spark 4.3 caches a Python source's planned read: the partitions and read function planned for one
scan are stored on the *relation* and reused by the next scan of the same DataFrame or view that
pushes no filter. So ``df.where("part = 1").count()`` followed by ``df.count()`` would count only
partition 1 (measured; fixed in Spark's main branch, where the planned read is scoped to its scan).
With pushdown off every planned read covers all files and is right for any scan. Turn it on for
DataFrames used for one filtered query each (``load()`` per query), where it skips files.

With pushdown on, filters on partition columns only are answered exactly here (files pruned and
rows filtered), so they are not handed back; filters on data columns prune files by stats and
filter rows here too, but are handed back so Spark re-checks them. Filters on floating-point
columns are not pushed at all (Spark orders NaN above every number; Parquet stats and Arrow
comparisons do not), nor on nested fields.

The version is pinned when Spark asks for the schema (``load()``, or ``CREATE TEMPORARY VIEW``):
every scan of that DataFrame or view reads the same version, a consistent snapshot; ``load()``
again (or re-create the view) to see later commits.

:func:`plan_scan` is the planning step on its own: tests call it to see how many files a filter
skips, and ``df.rdd.getNumPartitions()`` shows the same through Spark.

Every row of a Python source crosses a Python worker and Arrow IPC into JVM rows, all columns,
at a fixed cost of about 0.1 s per query (P8 measures these floors). For tables on local files,
:func:`deltatx.spark.read` avoids them: it plans the same snapshot and lets Spark's own Parquet
reader read the files (:mod:`deltatx.spark.native`).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import datasource as sds
from pyspark.sql.datasource import DataSourceReader, InputPartition

from .. import expr as X
from ..errors import PredicateError, SchemaMismatchError
from ..io.reader import iter_batches
from ..io.row_metadata import ROW_COMMIT_VERSION, ROW_ID, MaterializedColumns
from ..tables.table import Table
from ..txnlog import column_mapping
from ..txnlog.schema import schema_from_json, schema_to_json
from ..txnlog.features import check_path_access
from ..txnlog.snapshot import Snapshot, load_snapshot
from ..txnlog.store import LogStore, open_store
from .ipc import from_ipc, to_ipc
from .options import ReadSpec

#: add-action columns an executor needs to read a file (row ids need the last two)
_READ_COLUMNS = ["path", "partitionValues", "size", "deletionVector", "baseRowId", "defaultRowCommitVersion"]

#: Spark's hidden ``_metadata`` column, as this source exposes it on request
METADATA_COLUMN = "_metadata"
_METADATA_FIELDS = {"row_id": ROW_ID, "row_commit_version": ROW_COMMIT_VERSION}



def open_latest(uri: str, storage_options: dict[str, Any] | None) -> tuple[LogStore, Snapshot]:
    """A table's store and latest snapshot for a read that goes by path (change feed, streams),
    refusing a catalog-managed table as ``Table(path)`` does: its latest version is whatever its
    catalog ratified, which the published files need not show yet."""
    store = open_store(uri, storage_options)
    latest = load_snapshot(store)
    check_path_access(latest.protocol, store, uri)
    return store, latest

def open_table(spec: ReadSpec) -> Table:
    """The table as of the requested version/timestamp (latest when neither is given)."""
    timestamp: Any = spec.timestamp
    if timestamp is not None and timestamp.strip().isdigit():
        timestamp = int(timestamp)  # epoch milliseconds
    # a timestamp after the last commit is refused there, as Delta refuses it
    return Table(spec.uri, version=spec.version, timestamp=timestamp, storage_options=spec.storage_options)


def select_columns(schema: pa.Schema, columns: Sequence[str] | None) -> pa.Schema:
    if not columns:
        return schema
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise SchemaMismatchError(f"option columns names {missing}, which the table does not have ({schema.names})")
    return pa.schema([schema.field(c) for c in columns])


def with_row_tracking_metadata(schema: pa.Schema, table: Table) -> pa.Schema:
    """``schema`` plus the ``_metadata`` struct; the table must track row ids."""
    from ..txnlog import row_tracking

    if not row_tracking.is_enabled(table.properties):
        raise SchemaMismatchError(
            f"readRowTracking: table {table.uri!r} does not track row ids; set delta.enableRowTracking=true"
        )
    if METADATA_COLUMN in schema.names:
        raise SchemaMismatchError(f"readRowTracking: the table has a column named {METADATA_COLUMN!r} already")
    struct = pa.struct([pa.field(name, pa.int64()) for name in _METADATA_FIELDS])
    return schema.append(pa.field(METADATA_COLUMN, struct))


# --------------------------------------------------------------------------------------------
# Spark filters -> deltatx expressions
# --------------------------------------------------------------------------------------------

_COMPARISONS = {
    sds.EqualTo: "=",
    sds.EqualNullSafe: "<=>",
    sds.GreaterThan: ">",
    sds.GreaterThanOrEqual: ">=",
    sds.LessThan: "<",
    sds.LessThanOrEqual: "<=",
}
_LITERAL_TYPES = (bool, int, str, bytes, Decimal, dt.date, dt.datetime)


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _column(attribute: tuple[str, ...], schema: pa.Schema) -> X.Column | None:
    """A pushable top-level column: known, not nested, not floating point (NaN ordering)."""
    if len(attribute) != 1 or attribute[0] not in schema.names:
        return None
    t = schema.field(attribute[0]).type
    if pa.types.is_floating(t) or pa.types.is_nested(t):
        return None
    return X.Column(attribute[0])


def translate_filter(f: Any, schema: pa.Schema) -> X.Expr | None:
    """The deltatx predicate equal to Spark filter ``f``, or None when it cannot be pushed."""
    if isinstance(f, sds.Not):
        inner = translate_filter(f.child, schema)
        return X.Not(inner) if inner is not None else None
    column = _column(getattr(f, "attribute", ()), schema)
    if column is None:
        return None
    if isinstance(f, sds.IsNull):
        return X.IsNull(column)
    if isinstance(f, sds.IsNotNull):
        return X.IsNull(column, negated=True)
    if isinstance(f, sds.In):
        values = list(f.value)
        if not values or not all(v is None or isinstance(v, _LITERAL_TYPES) for v in values):
            return None
        return X.In(column, tuple(X.Literal(v) for v in values))
    if isinstance(f, sds.StringStartsWith):
        return X.Like(column, _like_escape(f.value) + "%")
    if isinstance(f, sds.StringEndsWith):
        return X.Like(column, "%" + _like_escape(f.value))
    if isinstance(f, sds.StringContains):
        return X.Like(column, "%" + _like_escape(f.value) + "%")
    op = _COMPARISONS.get(type(f))
    if op is None or f.value is None or not isinstance(f.value, _LITERAL_TYPES):
        return None
    return X.Comparison(op, column, X.Literal(f.value))


def bind_filter(f: Any, schema: pa.Schema) -> X.Expr | None:
    """:func:`translate_filter`, bound to ``schema``; None if the types do not fit."""
    translated = translate_filter(f, schema)
    if translated is None:
        return None
    try:
        return X.bind(translated, schema)
    except (PredicateError, TypeError, ValueError):
        return None


# --------------------------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------------------------


class FilesPartition(InputPartition):
    """One Spark input partition: some of the table's add rows (Arrow IPC), as of one version."""

    def __init__(self, files: pa.Table, schema_string: str, partition_columns: Sequence[str],
                 materialized: MaterializedColumns | None = None, column_mapping_mode: str = "none"):
        self.files_ipc = to_ipc(files)
        self.column_mapping_mode = column_mapping_mode  # files hold physical names unless "none"
        self.materialized = materialized
        self.num_files = files.num_rows
        self.num_bytes = int(pc.sum(files["size"]).as_py() or 0) if files.num_rows else 0
        self.schema_string = schema_string
        self.partition_columns = tuple(partition_columns)

    def files(self) -> pa.Table:
        return from_ipc(self.files_ipc)


@dataclass
class ScanPlan:
    """The files one read touches, after pruning, cut into input partitions."""

    version: int
    total_files: int
    files: pa.Table
    predicate: X.Expr | None
    partitions: list[FilesPartition] = field(default_factory=list)

    @property
    def num_files(self) -> int:
        return self.files.num_rows

    @property
    def skipped_files(self) -> int:
        return self.total_files - self.files.num_rows


def bin_files(sizes: Sequence[int], spec: ReadSpec) -> list[list[int]]:
    """Indices of files per input partition: next-fit bins of at most the split size."""
    if not sizes:
        return []
    total = sum(sizes) + len(sizes) * spec.open_cost_bytes
    split = min(spec.max_partition_bytes, max(spec.open_cost_bytes, total // max(1, spec.min_partitions)))
    bins: list[list[int]] = []
    current: list[int] = []
    used = 0
    for i, size in enumerate(sizes):
        cost = size + spec.open_cost_bytes
        if current and used + cost > split:
            bins.append(current)
            current, used = [], 0
        current.append(i)
        used += cost
    if current:
        bins.append(current)
    return bins


def plan_scan(table: Table, predicate: X.Expr | None, spec: ReadSpec) -> ScanPlan:
    """Prune ``table``'s files with ``predicate`` (partition values + stats) and bin them."""
    snapshot = table.snapshot
    files = snapshot.files
    total = files.num_rows
    if predicate is not None and total:
        files = files.filter(X.files_matching(predicate, files, snapshot.schema, snapshot.partition_columns))
    files = files.select(_READ_COLUMNS)
    schema_string = schema_to_json(snapshot.schema)
    parts = snapshot.partition_columns
    sizes = files.column("size").to_pylist()
    materialized = MaterializedColumns.from_configuration(snapshot.properties)
    mode = column_mapping.mode_of(snapshot.properties)
    partitions = [
        FilesPartition(files.take(pa.array(idx, pa.int64())), schema_string, parts, materialized, mode)
        for idx in bin_files(sizes, spec)
    ]
    return ScanPlan(version=snapshot.version, total_files=total, files=files, predicate=predicate,
                    partitions=partitions)


# --------------------------------------------------------------------------------------------
# The DataSourceReader
# --------------------------------------------------------------------------------------------

_STORES: dict[tuple[str, str], LogStore] = {}


def _store(spec: ReadSpec) -> LogStore:
    key = (spec.uri, json.dumps(spec.storage_options, sort_keys=True))
    store = _STORES.get(key)
    if store is None:
        store = _STORES[key] = open_store(spec.uri, spec.storage_options)
    return store


class DeltaTxReader(DataSourceReader):
    """Planned on the driver (``pushFilters``, ``partitions``), pickled to executors (``read``)."""

    def __init__(self, spec: ReadSpec, spark_schema: Any):
        self.spec = spec
        self.spark_schema_json = spark_schema.json()
        self.columns = list(spark_schema.fieldNames())
        self.pushed: list[X.Expr] = []
        self._table: Table | None = None
        self._target: pa.Schema | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_table"] = None  # never ship a snapshot to the executors
        state["_target"] = None
        return state

    def table(self) -> Table:
        if self._table is None:
            self._table = open_table(self.spec)
        return self._table

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        if not self.spec.filter_pushdown:
            yield from filters  # see the module docstring: off unless asked for (Spark 4.3 caching)
            return
        snapshot = self.table().snapshot
        schema, partition_columns = snapshot.schema, set(snapshot.partition_columns)
        for f in filters:
            bound = bind_filter(f, schema)
            if bound is None:
                yield f
                continue
            self.pushed.append(bound)
            if not bound.columns() <= partition_columns:
                yield f  # data-column filters: stats skipping here, Spark re-checks the rows

    def predicate(self) -> X.Expr | None:
        return X.and_all(self.pushed) if self.pushed else None

    def partitions(self) -> list[FilesPartition]:
        return plan_scan(self.table(), self.predicate(), self.spec).partitions

    def _spark_arrow_schema(self) -> pa.Schema:
        if self._target is None:
            from pyspark.sql.pandas.types import to_arrow_schema
            from pyspark.sql.types import StructType

            self._target = to_arrow_schema(StructType.fromJson(json.loads(self.spark_schema_json)), timezone="UTC")
        return self._target

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, FilesPartition):  # Spark's stand-in when there are no files
            return
        target = self._spark_arrow_schema()
        files = partition.files()
        if not files.num_rows:
            return
        table_schema = schema_from_json(partition.schema_string)
        columns = [c for c in self.columns if c in table_schema.names]
        metadata = METADATA_COLUMN in self.columns and METADATA_COLUMN not in table_schema.names
        if metadata:
            columns += list(_METADATA_FIELDS.values())
        predicate = self.predicate()
        row_filter = X.to_arrow(predicate, table_schema) if predicate is not None else None
        mapping = column_mapping.for_schema({column_mapping.MODE: partition.column_mapping_mode}, table_schema)
        for batch in iter_batches(_store(self.spec), files, table_schema, list(partition.partition_columns),
                                  columns=columns, filter=row_filter, materialized=partition.materialized,
                                  column_mapping=mapping):
            yield to_spark_batch(_nest_metadata(batch) if metadata else batch, target)


def _nest_metadata(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The flat ``_metadata.*`` columns of a read as Spark's ``_metadata`` struct."""
    names = batch.schema.names
    struct = pa.StructArray.from_arrays([batch.column(names.index(c)) for c in _METADATA_FIELDS.values()],
                                        names=list(_METADATA_FIELDS))
    keep = [i for i, n in enumerate(names) if n not in _METADATA_FIELDS.values()]
    return pa.RecordBatch.from_arrays([batch.column(i) for i in keep] + [struct],
                                      names=[names[i] for i in keep] + [METADATA_COLUMN])


def to_spark_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` with exactly ``target``'s names, order and types (missing columns as nulls)."""
    names = batch.schema.names
    arrays = []
    for f in target:
        if f.name in names:
            column = batch.column(names.index(f.name))
            if not column.type.equals(f.type):
                column = column.cast(f.type)
        else:
            column = pa.nulls(batch.num_rows, f.type)
        arrays.append(column)
    return pa.RecordBatch.from_arrays(arrays, schema=target)
