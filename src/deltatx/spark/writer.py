"""``df.write.format("deltatx")``: executors write Parquet files, the driver commits once.

Three places, three processes (Spark's Python Data Source API):

1. planning (driver, ``DataSource.writer``): :func:`plan_write` parses the options, opens the
   table, captures the read version and decides the schema and partitioning of the files. The
   commit runs later in another process on a pickled copy of the writer (gotcha 5 of
   ``shared/notes/pyspark-datasource.md``), so everything it needs is captured here, in a
   small picklable :class:`WritePlan` — never a snapshot.
2. tasks (executors, :meth:`DeltaTxWriter.write`): Arrow batches stream through
   :func:`deltatx.io.writer.write_data_files` (Parquet + stats, never row by row); rows outside a
   replaceWhere predicate fail the task with ``ReplaceWhereViolationError``. The task returns
   its ``add`` rows as Arrow IPC bytes. A failing task deletes its own files (gotcha 3: its
   message reaches ``abort`` as None).
3. commit (driver, :meth:`DeltaTxWriter.commit`): one transaction through
   :func:`deltatx.spark.commit.commit_files`; ``abort`` deletes every file the messages name.

An idempotent write (txnAppId/txnVersion) already applied when the job is planned writes no
files at all: the tasks return without pulling their input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ..errors import (
    ColumnMappingError,
    DeltaTxError,
    IdentityColumnError,
    InvalidPropertyError,
    ReplaceWhereViolationError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from ..expr import bind, parse_predicate, to_arrow
from ..io.writer import WriteOptions, write_data_files
from ..tables import properties as props
from ..tables.constraints import CONSTRAINT_PREFIX, WriteRules, rules_for, rules_signature
from ..tables.identity import refuse_explicit_values
from ..tables.data import Widening, conform_batch, resolve_write_schema
from ..tables.defaults import default_values
from ..tables.iceberg_compat import materializes_partition_values
from ..tables.ops.rewrite import physical_column_name
from ..tables.table import Table
from ..tables.transaction import CommitResult
from ..txnlog import column_mapping
from ..txnlog.actions import FILE_SCHEMA, Protocol
from ..txnlog.schema import schema_from_json, schema_to_json
from ..txnlog.store import open_store
from .commit import CommitRequest, combine_adds, commit_files, delete_written, report
from .dml_tasks import encode_error
from .ipc import from_ipc, to_ipc
from .options import WriteSpec, as_nullable, spark_schema_to_arrow, write_spec


# --------------------------------------------------------------------------------------------
# Commit messages: add rows as Arrow IPC
# --------------------------------------------------------------------------------------------


@dataclass
class WrittenFiles(WriterCommitMessage):
    """What one task wrote: its add actions (Arrow IPC stream bytes) and how many rows."""

    adds_ipc: bytes
    num_rows: int = 0

    @classmethod
    def of(cls, adds: pa.Table, num_rows: int) -> "WrittenFiles":
        return cls(to_ipc(adds), num_rows)

    def adds(self) -> pa.Table:
        return from_ipc(self.adds_ipc)


def adds_of(messages: list[WriterCommitMessage | None]) -> pa.Table:
    return combine_adds([m.adds() for m in messages if isinstance(m, WrittenFiles)])


# --------------------------------------------------------------------------------------------
# Planning (driver)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WritePlan:
    """A planned write: the spec, the read version and the exact layout of the files."""

    spec: WriteSpec
    read_version: int  # -1 when the table does not exist yet
    schema_string: str
    partition_columns: tuple[str, ...]
    schema_changed: bool
    num_indexed_cols: int
    already_applied: bool = False  # idempotent write whose (txnAppId, txnVersion) is committed
    #: the table's CHECK constraints and protocol at planning: tasks enforce the table's rules
    #: (tables/constraints.py) on every row they write; the schema carries the column rules
    rule_properties: tuple[tuple[str, str], ...] = ()
    protocol: Protocol | None = None
    column_mapping_mode: str = "none"  # the table's; files then use the physical names in schema_string
    materialize_partition_columns: bool = False  # Iceberg compatibility: partition values in the files
    stats_columns: tuple[str, ...] | None = None  # delta.dataSkippingStatsColumns: only these get stats
    #: the overwrite replaces only the partitions its files land in (spec's request on a
    #: partitioned table; Delta ignores the mode for unpartitioned tables)
    dynamic_partition_overwrite: bool = False

    @property
    def schema(self) -> pa.Schema:
        return schema_from_json(self.schema_string)

    def rules(self) -> WriteRules | None:
        return rules_for(self.schema, dict(self.rule_properties), self.protocol)

    def request(self) -> CommitRequest:
        s = self.spec
        return CommitRequest(
            uri=s.uri, storage_options=s.storage_options, read_version=self.read_version,
            schema_string=self.schema_string, partition_columns=self.partition_columns,
            overwrite=s.mode == "overwrite", replace_where=s.replace_where, schema_changed=self.schema_changed,
            merge_schema=s.merge_schema, dynamic_partition_overwrite=self.dynamic_partition_overwrite,
            app_id=s.txn_app_id, app_version=s.txn_version, user_metadata=s.user_metadata,
            table_properties=s.table_properties,
            rules_signature=rules_signature(self.schema, dict(self.rule_properties)),
        )



def _stats_columns(table_props: dict[str, str] | None) -> tuple[str, ...] | None:
    found = props.stats_columns(table_props or {})
    return tuple(found) if found is not None else None

def _open_table(spec: WriteSpec) -> Table | None:
    try:
        return Table(spec.uri, storage_options=spec.storage_options)
    except TableNotFoundError:
        return None


def _check_partition_columns(schema: pa.Schema, partition_columns: tuple[str, ...]) -> None:
    missing = [c for c in partition_columns if c not in schema.names]
    if missing:
        raise SchemaMismatchError(
            f"partitionBy names column(s) {missing} that the data does not have (columns: {schema.names})"
        )
    if partition_columns and len(partition_columns) == len(schema):
        raise SchemaMismatchError("partitionBy names every column; keep at least one column out of it")


def plan_write(options: Mapping[str, str], spark_schema: Any, overwrite: bool) -> WritePlan:
    """Parse options, capture the read version and settle the files' schema (driver, planning)."""
    spec = write_spec(options, overwrite)
    # columns a DataFrame adds to a table are nullable (older rows have none), as in Delta
    incoming = as_nullable(spark_schema_to_arrow(spark_schema))
    table = _open_table(spec)
    if table is not None and spec.create_only:  # mode error/ignore: the write may only create it
        raise TableAlreadyExistsError(f"a Delta table already exists at {spec.uri!r}")
    if table is None:
        schema = incoming
        partition_columns = tuple(spec.partition_by or ())
        read_version, changed, table_props = -1, False, spec.table_properties
        already = False
    else:
        snapshot = table.snapshot
        read_version, table_props = snapshot.version, snapshot.properties
        current_parts = tuple(snapshot.partition_columns)
        if spec.overwrite_schema:
            schema = incoming
            partition_columns = spec.partition_by if spec.partition_by is not None else tuple(
                c for c in current_parts if c in schema.names)
        else:
            if spec.partition_by is not None and tuple(spec.partition_by) != current_parts:
                raise SchemaMismatchError(
                    f"partitionBy {list(spec.partition_by)} does not match the table's partition columns "
                    f"{list(current_parts)}; drop the option, or overwrite with overwriteSchema=true "
                    f"to repartition the table"
                )
            try:
                _refuse_other_type_families(snapshot.schema, incoming)
                schema = resolve_write_schema(snapshot.schema, incoming, "merge" if spec.merge_schema else None,
                                              widening=Widening.of(snapshot.properties, snapshot.protocol))
            except SchemaMismatchError as exc:  # say it in Spark's words
                raise SchemaMismatchError(
                    str(exc).replace("pass schema_mode='merge'", "set .option('mergeSchema', 'true')")
                ) from None
            partition_columns = current_parts
        changed = not schema.equals(snapshot.schema) or partition_columns != current_parts
        already = False
        if spec.txn_app_id is not None:
            txn = snapshot.live_app_txns().get(spec.txn_app_id)
            already = txn is not None and int(spec.txn_version) <= txn.version
    _check_partition_columns(schema, partition_columns)
    dynamic = spec.dynamic_partition_overwrite and bool(partition_columns)
    if dynamic and spec.overwrite_schema:
        raise InvalidPropertyError("'overwriteSchema' cannot be used in dynamic partition overwrite mode")
    mode = column_mapping.mode_of(table_props)
    if mode != "none" and (table is None or changed):
        # the files are written before the commit assigns new columns their physical names
        raise ColumnMappingError(
            f"a Spark write cannot {'create' if table is None else 'change the schema of'} a table with "
            f"{column_mapping.MODE}={mode}: create it with deltatx.create_table, add columns with "
            f"Table.add_columns, then write"
        )
    if spec.replace_where is not None:
        bind(parse_predicate(spec.replace_where), schema)  # a bad predicate fails before any task runs
    num_indexed = props.int_property(table_props, props.NUM_INDEXED_COLS, WriteOptions().num_indexed_cols)
    plan = WritePlan(spec=spec, read_version=read_version, schema_string=schema_to_json(schema),
                     partition_columns=tuple(partition_columns), schema_changed=changed,
                     num_indexed_cols=num_indexed, already_applied=already,
                     stats_columns=_stats_columns(table_props),
                     rule_properties=tuple(sorted((k, v) for k, v in (table_props or {}).items()
                                                  if k.startswith(CONSTRAINT_PREFIX))),
                     protocol=table.protocol if table is not None else None, column_mapping_mode=mode,
                     materialize_partition_columns=materializes_partition_values(table_props or {}),
                     dynamic_partition_overwrite=dynamic)
    _check_identity(plan, incoming)
    return plan


def _check_identity(plan: WritePlan, incoming: pa.Schema) -> None:
    """Tasks cannot agree on identity values: a Spark write must give them (BY DEFAULT only)."""
    rules = plan.rules()
    if rules is None or not rules.identity:
        return
    refuse_explicit_values(rules.identity, set(incoming.names), "this Spark write")
    missing = sorted(s.column for s in rules.identity if s.column not in incoming.names)
    if missing:
        raise IdentityColumnError(
            f"a Spark write cannot assign identity column(s) {missing}: its tasks cannot agree on values. "
            f"Write through deltatx.Table.append (one process assigns them), or give the values "
            f"(GENERATED BY DEFAULT columns only)"
        )


# --------------------------------------------------------------------------------------------
# Tasks (executors)
# --------------------------------------------------------------------------------------------


def write_task(plan: WritePlan, batches: Iterator[pa.RecordBatch]) -> WrittenFiles:
    """Write one task's batches as data files of the table; return their add rows."""
    if plan.already_applied:
        return WrittenFiles.of(FILE_SCHEMA.empty_table(), 0)
    spec = plan.spec
    schema = plan.schema
    store = open_store(spec.uri, spec.storage_options)
    row_check = to_arrow(bind(parse_predicate(spec.replace_where), schema), schema) if spec.replace_where else None
    rules = plan.rules()
    counted = [0]
    defaults = default_values(schema)  # allowColumnDefaults: omitted columns get their DEFAULT

    def conformed() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if not batch.num_rows:
                continue
            absent = rules.absent_from(batch.schema.names) if rules is not None else frozenset()
            batch = conform_batch(batch, schema, absent, defaults)
            if rules is not None:  # generated columns filled in, every rule checked: before writing
                batch = rules.apply(pa.Table.from_batches([batch]), schema, absent).combine_chunks().to_batches()[0]
            if row_check is not None:
                _check_replace_where(batch, row_check, spec.replace_where)
            counted[0] += batch.num_rows
            yield batch

    mapping = column_mapping.for_schema({column_mapping.MODE: plan.column_mapping_mode}, schema)
    stats_columns = list(plan.stats_columns) if plan.stats_columns is not None else None
    if mapping is not None and stats_columns is not None:  # stats are taken of the physical columns
        stats_columns = [physical_column_name(mapping, c) for c in stats_columns]
    options = WriteOptions(num_indexed_cols=plan.num_indexed_cols, stats_columns=stats_columns,
                           column_mapping=mapping,
                           materialize_partition_columns=plan.materialize_partition_columns)
    if spec.max_records_per_file:
        options.target_file_rows = spec.max_records_per_file
        options.row_group_rows = min(options.row_group_rows, spec.max_records_per_file)
    try:
        adds = write_data_files(store, pa.RecordBatchReader.from_batches(schema, conformed()), schema,
                                list(plan.partition_columns), options)
    except DeltaTxError as exc:  # keeps its class and attributes through Spark's error text
        raise encode_error(exc) from None
    try:
        return WrittenFiles.of(adds, counted[0])
    except BaseException:
        delete_written(spec.uri, spec.storage_options, adds)
        raise


def _type_family(t: pa.DataType) -> str:
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "text"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_temporal(t):
        return "time"
    return "nested"


def _refuse_other_type_families(table: pa.Schema, incoming: pa.Schema) -> None:
    """A DataFrame column whose type is of another family than the table column's (text into
    BIGINT, a number into BOOLEAN...) is refused when the write is planned, before any task runs,
    as Delta's schema check refuses it (DELTA_FAILED_TO_MERGE_FIELDS). Inside a family the tasks
    convert values safely (INT into BIGINT) or fail on the one that does not fit."""
    by_name = {f.name.lower(): f for f in table}
    for f in incoming:
        target = by_name.get(f.name.lower())
        if target is None or pa.types.is_null(f.type):
            continue
        ours, theirs = _type_family(target.type), _type_family(f.type)
        if ours != theirs and "nested" not in (ours, theirs):
            raise SchemaMismatchError(
                f"[DELTA_FAILED_TO_MERGE_FIELDS] Failed to merge fields '{target.name}' and '{f.name}': the "
                f"DataFrame's {f.type} cannot be written to the table's {target.type} column; cast it first")


def _check_replace_where(batch: pa.RecordBatch, row_check: pc.Expression, predicate: str) -> None:
    kept = pa.Table.from_batches([batch]).filter(row_check).num_rows
    bad = batch.num_rows - kept
    if bad:
        raise ReplaceWhereViolationError(
            f"{bad} new row(s) do not satisfy replaceWhere predicate {predicate!r}; an overwrite with "
            f"replaceWhere only replaces rows matching the predicate, so every new row must match it"
        )


# --------------------------------------------------------------------------------------------
# The DataSourceArrowWriter
# --------------------------------------------------------------------------------------------


class DeltaTxWriter(DataSourceArrowWriter):
    """Pickled to the executors (``write``) and to the committing process (``commit``/``abort``)."""

    def __init__(self, plan: WritePlan):
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFiles:
        return write_task(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        try:
            result: CommitResult = commit_files(self.plan.request(), adds_of(messages))
        except BaseException as exc:
            report(self.plan.spec.report_path, exc)
            raise
        report(self.plan.spec.report_path, result)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        adds = adds_of(messages)
        delete_written(self.plan.spec.uri, self.plan.spec.storage_options, adds)
