"""Read a snapshot with Spark's built-in Parquet reader: ``deltatx.spark.read(..., engine="parquet")``.

Why this exists beside the ``deltatx`` format: Spark's Python Data Source API moves every column
of every row through a Python worker, Arrow IPC and JVM row conversion, and never prunes
columns; an empty read alone costs about 0.1 s of Python workers (P8 measures both). A Delta
snapshot is a list of Parquet files plus per-file partition values, which is what Delta's own
Spark connector hands to Spark's Parquet reader. So here the driver plans the snapshot (log
replay, time travel, the same :class:`~deltatx.tables.table.Table` every other read uses) and
Spark reads the files itself: vectorized, only the columns a query uses, row groups skipped by
their Parquet statistics.

Partition values come from the log, never from directory names (Delta does not require
Hive-style paths): the files of each distinct partition form one Parquet relation whose
partition columns are literals, and the relations are unioned. Spark folds a filter on a
partition column against those literals, so a filtered query never opens the other partitions.

Files with a deletion vector are read by relations of their own whose deleted rows are dropped
on the JVM side, by Spark's hidden row index tested against the DVs' bitmaps (or, beyond a size
budget, anti-joined against their row keys; :mod:`deltatx.spark.native_dv`). The other files
are read as they are.

When it applies (:func:`unavailable_reason` says why not, and ``engine="auto"`` then uses the
``deltatx`` format instead): the table is on a local filesystem (Spark has no S3 or in-memory
filesystem without extra jars), no data file path holds a character Spark would take for a glob,
the snapshot has at most :data:`MAX_PARTITION_GROUPS` distinct partitions (one relation
each), no file with a deletion vector holds 2**32 rows or more, and the table does not use
column mapping (its files hold physical names; the format maps them).
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from functools import reduce
from typing import Any, Sequence

import pyarrow as pa

from ..errors import NativeUnavailableError
from ..io.grouping import group_codes
from ..io.paths import data_file_path, decode_path
from ..io.reader import split_deletion_vectors
from ..txnlog.partition_values import partition_values_table
from ..tables.table import Table
from ..txnlog import column_mapping
from ..txnlog.store import LocalLogStore
from . import native_dv
from .options import read_schema_to_spark
from .reader import select_columns

#: most distinct partitions read natively: each is one Parquet relation in a union
MAX_PARTITION_GROUPS = 64

#: Spark's SQL conf: more root paths than this are listed by a Spark job of one task per path
LISTING_THRESHOLD_CONF = "spark.sql.sources.parallelPartitionDiscovery.threshold"
#: more files than this are handed to the JVM as one string and listed on the driver (see parquet_relation)
MANY_FILES = 32
_listing_conf_lock = threading.Lock()

#: characters that make Spark expand a path as a glob pattern
_GLOB_CHARACTERS = set("{}[]*?\\")


@dataclass
class _Layout:
    """What a native read of one snapshot needs, worked out once: why it cannot happen (or
    None), the files' local paths, per file its partition group and values, and its deletion
    vector descriptor (None for a file without one; an empty list when no file has one)."""

    reason: str | None
    paths: list[str] = field(default_factory=list)
    values: pa.Table | None = None  # typed partition values, one row per file
    codes: list[int] = field(default_factory=list)  # dense partition group per file
    deletion_vectors: list[dict[str, Any] | None] = field(default_factory=list)
    dv_rows: dict[int, int] = field(default_factory=dict)  # row count of each file with a DV


def _layout(table: Table, files: pa.Table) -> _Layout:
    if not isinstance(table.store, LocalLogStore):
        return _Layout(f"the table is not on a local filesystem ({table.uri!r}); Spark reads it only through "
                       f"the deltatx format")
    if column_mapping.of(table.metadata) is not None:
        return _Layout("the table uses column mapping: its files hold physical column names, which the deltatx "
                       "format maps to the table's names")
    store = table.store
    paths = [data_file_path(store, decode_path(p)) for p in files.column("path").to_pylist()]
    for path in paths:
        if not path.startswith("/"):
            return _Layout(f"data file {path!r} is not a local absolute path")
        if _GLOB_CHARACTERS & set(path):
            return _Layout(f"data file path {path!r} holds a character Spark expands as a glob")
    deletion_vectors: list[dict[str, Any] | None] = []
    rows: dict[int, int] = {}  # of each file with a DV, its row count
    if split_deletion_vectors(files)[1].num_rows:  # O(1) answer when no file has a DV
        deletion_vectors = files.column("deletionVector").to_pylist()
        with_dv = [i for i, d in enumerate(deletion_vectors) if d is not None]
        rows = dict(zip(with_dv, native_dv.row_counts(files.take(with_dv), [paths[i] for i in with_dv])))
        too_big = next((i for i in with_dv if rows[i] >= native_dv.MAX_ROWS_PER_FILE), None)
        if too_big is not None:
            return _Layout(f"data file {paths[too_big]!r} has a deletion vector and {native_dv.MAX_ROWS_PER_FILE} "
                           f"rows or more, more than the native read's row keys hold")
    partition_columns = [c for c in table.snapshot.partition_columns if c in table.schema.names]
    if not partition_columns or not files.num_rows:
        return _Layout(None, paths, deletion_vectors=deletion_vectors, dv_rows=rows)
    values = partition_values_table(files, table.schema, partition_columns)
    codes = group_codes(values.columns).to_pylist()
    groups = max(codes) + 1  # codes are dense: 0..K-1
    if groups > MAX_PARTITION_GROUPS:
        return _Layout(f"the snapshot has {groups} distinct partitions (more than {MAX_PARTITION_GROUPS})")
    return _Layout(None, paths, values, codes, deletion_vectors, rows)


def unavailable_reason(table: Table, files: pa.Table | None = None) -> str | None:
    """Why Spark's Parquet reader cannot read this snapshot directly, or None when it can."""
    return _layout(table, table.snapshot.files if files is None else files).reason


def parquet_relation(spark: Any, schema: Any, paths: Sequence[str]) -> Any:
    """A Parquet relation over exactly ``paths`` (local files the log names), with ``schema``.

    Why not always ``spark.read.schema(schema).parquet(*paths)``: with more than 32 paths
    (Spark's parallel-listing threshold) Spark stats them in a Spark job of one task per file —
    9 s for 2,000 files on two cores, where stating them on the driver takes milliseconds — and
    PySpark hands the paths to the JVM one Py4J call each. Here, above :data:`MANY_FILES`, the
    paths cross as one string split on the JVM, and the threshold is raised for the moment the
    relation is built (the listing happens then; the session's own value is put back, under a
    lock against other deltatx reads doing the same). A Spark Connect session, or a path with a
    line break, takes the plain route.
    """
    jsession = getattr(spark, "_jsparkSession", None)
    if len(paths) <= MANY_FILES or jsession is None or any("\n" in p for p in paths):
        return spark.read.schema(schema).parquet(*paths)
    from py4j.java_gateway import JavaClass
    from pyspark.sql.classic.dataframe import DataFrame

    client = spark.sparkContext._gateway._gateway_client
    joined = JavaClass("java.util.regex.Pattern", client).compile("\n").split("\n".join(paths))
    reader = jsession.read().schema(jsession.parseDataType(schema.json()))
    with _listing_conf_lock:
        before = spark.conf.get(LISTING_THRESHOLD_CONF, None)
        spark.conf.set(LISTING_THRESHOLD_CONF, str(len(paths)))
        try:
            return DataFrame(reader.parquet(joined), spark)
        finally:
            if before is None:
                spark.conf.unset(LISTING_THRESHOLD_CONF)
            else:
                spark.conf.set(LISTING_THRESHOLD_CONF, before)


def _literal(value: Any, spark_type: Any) -> Any:
    """A Spark literal column of ``spark_type`` holding ``value`` exactly (None -> typed null).

    Dates, timestamps and decimals go through their text form with an explicit offset, so the
    session time zone never shifts them.
    """
    from pyspark.sql import functions as F

    if value is None:
        return F.lit(None).cast(spark_type)
    if isinstance(value, dt.datetime):
        text = value.isoformat()  # aware values carry their offset; naive ones are timestamp_ntz
        return F.lit(text).cast(spark_type)
    if isinstance(value, (dt.date, Decimal)):
        return F.lit(str(value)).cast(spark_type)
    if isinstance(value, (bytes, bytearray)):
        return F.lit(bytearray(value)).cast(spark_type)
    return F.lit(value).cast(spark_type)


def native_dataframe(spark: Any, table: Table, columns: Sequence[str] | None = None) -> Any:
    """The snapshot of ``table`` as a DataFrame over Spark's Parquet reader.

    Raises :class:`NativeUnavailableError` (with the reason) when :func:`unavailable_reason`
    finds one, and the typed deletion vector errors when a DV cannot be read.

    The plain case — no partition columns, no deletion vectors — is one Parquet relation over
    the snapshot's files with the table's schema given: Spark neither lists a directory nor
    infers a schema, so this does less driver work than ``spark.read.parquet(directory)``.
    """
    from pyspark.sql.types import StructType

    snapshot = table.snapshot
    files = snapshot.files
    layout = _layout(table, files)
    if layout.reason is not None:
        raise NativeUnavailableError(f"Spark's Parquet reader cannot read this table directly: {layout.reason}")
    schema = snapshot.schema
    spark_schema = read_schema_to_spark(schema)
    wanted = select_columns(schema, columns).names  # SchemaMismatchError for unknown columns, as the format
    if files.num_rows == 0:
        return spark.createDataFrame([], spark_schema).select(*wanted)
    values = layout.values
    partition_columns = values.column_names if values is not None else []
    data_schema = StructType([f for f in spark_schema.fields if f.name not in partition_columns])
    if layout.deletion_vectors and getattr(spark, "_jsparkSession", None) is None:
        raise NativeUnavailableError("Spark's Parquet reader cannot read this table directly: its deletion vectors "
                                     "are handed to the JVM through Py4J, which a Spark Connect session has not")
    if values is None and not layout.deletion_vectors:
        relation = parquet_relation(spark, data_schema, layout.paths)
        return relation if wanted == data_schema.names else relation.select(*wanted)
    types = {f.name: f.dataType for f in spark_schema.fields}

    def read(rows: list[int]) -> Any:
        return parquet_relation(spark, data_schema, [layout.paths[r] for r in rows])

    def project(relation: Any, first: int, extra: tuple[str, ...] = ()) -> Any:
        """The wanted columns (then ``extra``), partition columns as literals of file ``first``'s values."""
        if values is None:
            return relation if wanted == data_schema.names and not extra else relation.select(*wanted, *extra)
        literals = {c: _literal(values.column(c)[first].as_py(), types[c]) for c in partition_columns}
        return relation.select(*[literals[c].alias(c) if c in literals else c for c in wanted], *extra)

    members: dict[int, list[int]] = {}
    for row, code in enumerate(layout.codes or [0] * files.num_rows):
        members.setdefault(code, []).append(row)
    dv = layout.deletion_vectors or [None] * files.num_rows
    parts: list[Any] = []
    with_dv: list[list[int]] = []  # per partition, its files with a DV
    for rows in members.values():
        plain = [r for r in rows if dv[r] is None]
        if plain:
            parts.append(project(read(plain), plain[0]))
        with_dv.append([r for r in rows if dv[r] is not None])
    if any(with_dv):
        # what Spark's _metadata.file_size will say of each file
        sizes = {r: os.stat(layout.paths[r]).st_size for group in with_dv for r in group}
        parts += native_dv.live_rows(table.store, read, project, [g for g in with_dv if g], layout.paths, dv, sizes,
                                     layout.dv_rows)
    if values is not None:
        # no rows, the table's exact schema: a union member that keeps partition columns nullable
        # (a literal is not; Spark drops the empty relation when it optimizes the query)
        parts.append(spark.createDataFrame([], spark_schema).select(*wanted))
    return reduce(lambda a, b: a.unionByName(b), parts)
