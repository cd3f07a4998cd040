"""Write with Spark's built-in Parquet writer, commit with deltatx: ``deltatx.spark.write(..., engine="parquet")``.

Why beside the ``deltatx`` format: a Python sink receives every row as Arrow in a Python worker
and must encode it there, on cores the JVM already keeps busy; a sink that does nothing at all
already costs 1.1–1.3× Spark's own Parquet write (P8 measures it). Delta's own connector lets
Spark's Parquet writer write the files and only commits them. Here too: the driver plans the
write exactly as the format does (:func:`deltatx.spark.writer.plan_write`: options, the read
version captured before the job, the schema), Spark writes the files into a fresh folder of
the table, the driver moves them into the table's own layout (``a=1/part-….parquet``) and turns
them into ``add`` actions — partition values from the folder names Spark wrote, statistics from
each file's footer (:func:`deltatx.txnlog.stats.stats_from_parquet_footer`) — and commits them
through the same :func:`deltatx.spark.commit.commit_files` (conflicts, retries, isolation,
idempotency). If the job or the commit fails, the files are deleted: nothing refers to them. A
driver killed between the job and the commit leaves unreferenced files for VACUUM.

When it applies (:func:`unavailable_reason`; ``engine="auto"`` otherwise uses the format): a
table on local files; no ``replaceWhere`` (its rows must be checked as they are written); no
NOT NULL columns (likewise); no timestamp or nested columns (Spark writes timestamps as INT96 by
default, and a footer's nested statistics do not map to Delta's); partition columns of string,
integer, date or boolean type (their folder names are the protocol's partition value strings).
"""

from __future__ import annotations

import os
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..io.paths import encode_path, unescape_partition_value
from ..tables.defaults import default_sql
from ..tables.transaction import CommitResult
from ..txnlog.actions import FILE_SCHEMA
from ..txnlog.stats import stats_from_parquet_footer
from ..txnlog.schema import is_variant_storage
from ..txnlog.store import LocalLogStore, open_store
from .commit import commit_files
from .options import arrow_schema_to_spark
from .writer import WritePlan

#: folder name prefix of one native write's files (not ``_`` or ``.``: VACUUM must see them)
FOLDER_PREFIX = "spark-"

#: Hadoop committer settings for the job's private folder (DataFrameWriter options reach the
#: job's Hadoop configuration). Nobody else looks into that folder and it is moved from and
#: deleted right after the job, so: no ``_SUCCESS`` marker; algorithm 2, where a task's commit
#: moves its files into the folder at once instead of the job's commit moving every file a
#: second time; and no cleanup of ``_temporary`` by the job (the folder goes as a whole). The
#: output commit coordinator still lets one attempt per task commit. Measured on P8: about 3%
#: of the write, which is what keeps it at or under Spark's own Parquet write.
_COMMITTER_OPTIONS = {
    "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "mapreduce.fileoutputcommitter.algorithm.version": "2",
    "mapreduce.fileoutputcommitter.cleanup.skipped": "true",
}

#: up to this many written files, their footers are read one after the other (no thread pool)
_SERIAL_FOOTERS = 4


def _partition_type_ok(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_integer(t) or pa.types.is_date32(t) or pa.types.is_boolean(t)


def unavailable_reason(plan: WritePlan, incoming: pa.Schema | None = None) -> str | None:
    """Why this planned write cannot go through Spark's Parquet writer, or None when it can.

    ``incoming`` (the DataFrame's schema as Arrow) must have the table's types: Spark's cast
    would truncate or wrap values (1.5 -> 1) where the format's Arrow cast refuses them.
    """
    spec = plan.spec
    if not isinstance(open_store(spec.uri, spec.storage_options), LocalLogStore):
        return f"the table is not on a local filesystem ({spec.uri!r})"
    if spec.replace_where is not None:
        return "replaceWhere must check every written row, which only the deltatx format does"
    if plan.rules() is not None:
        return ("the table has CHECK constraints, invariants, generated or identity columns, which only "
                "the deltatx format enforces while writing")
    if plan.column_mapping_mode != "none":
        return "the table uses column mapping: files must hold physical column names and field ids"
    schema = plan.schema
    if plan.materialize_partition_columns and plan.partition_columns:
        return "the table is Iceberg-compatible: its files must hold the partition columns too"
    for f in schema:
        if not f.nullable:
            return f"column {f.name!r} is NOT NULL, which only the deltatx format checks while writing"
        if default_sql(f) is not None:
            return f"column {f.name!r} has a DEFAULT, which only the deltatx format fills in"
        if is_variant_storage(f.type):
            return f"column {f.name!r} is a variant, whose values only the deltatx format checks while writing"
        if pa.types.is_timestamp(f.type) or pa.types.is_nested(f.type):
            return f"column {f.name!r} is {f.type}, which Spark's Parquet writer does not write as Delta expects"
        if f.name in plan.partition_columns and not _partition_type_ok(f.type):
            return f"partition column {f.name!r} is {f.type}; its folder names would not be Delta's values"
    if incoming is not None:
        for f in incoming:
            if f.name in schema.names and not schema.field(f.name).type.equals(f.type):
                return (f"column {f.name!r} is {f.type} in the DataFrame but {schema.field(f.name).type} in "
                        f"the table; only the format checks that the conversion loses nothing")
    return None


def _conformed(df: Any, plan: WritePlan) -> Any:
    """``df`` as the table's columns, in order, with the table's types (missing ones as nulls).

    A DataFrame that already has exactly those names, order and types is returned as it is:
    building the projection costs the driver tens of milliseconds of Py4J calls and analysis
    (P8 measures the native write against Spark's own), and it would change nothing.
    """
    from pyspark.sql import functions as F

    target = arrow_schema_to_spark(plan.schema)
    if [(f.name, f.dataType) for f in df.schema.fields] == [(f.name, f.dataType) for f in target.fields]:
        return df
    present = set(df.columns)
    return df.select(*[
        (F.col(f.name).cast(f.dataType) if f.name in present else F.lit(None).cast(f.dataType)).alias(f.name)
        for f in target.fields
    ])


def _partition_values(relative_dir: str, partition_columns: tuple[str, ...]) -> dict[str, str | None]:
    """``a=1/b=x%3Ay`` (as Spark named the folders) -> {"a": "1", "b": "x:y"}; nulls as None."""
    values: dict[str, str | None] = {}
    parts = [p for p in relative_dir.split("/") if p]
    if len(parts) != len(partition_columns):
        raise ValueError(f"unexpected partition folders {relative_dir!r} for {list(partition_columns)}")
    for column, part in zip(partition_columns, parts):
        name, sep, raw = part.partition("=")
        if not sep or unescape_partition_value(name) != column:
            raise ValueError(f"folder {part!r} does not name partition column {column!r}")
        values[column] = unescape_partition_value(raw)  # None for Hive's default (null) folder
    return values


def _spark_output(name: str) -> bool:
    """Is this folder entry Spark's output? Not its bookkeeping (``_temporary``, ``_SUCCESS``,
    ``.crc`` side files); a partition folder ``_p=1`` of a column named ``_p`` is output."""
    return not name.startswith(".") and (not name.startswith("_") or "=" in name)


def _move_into_table(root: str, folder: str, moved: list[str]) -> list[tuple[str, str]]:
    """Move every Parquet file Spark wrote under ``root/folder`` to the table's own layout.

    ``folder/a=1/part-….parquet`` becomes ``a=1/part-….parquet``, where Delta's writers put it
    (Spark names each job's files with a fresh UUID, and a hard link refuses to replace a file,
    so nothing is overwritten). Returns (partition folders, file name) per file; ``moved``
    collects the new relative paths as they appear, for the caller's cleanup.
    """
    base = os.path.join(root, folder)
    found: list[tuple[str, str]] = []
    for directory, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if _spark_output(d)]
        for name in filenames:
            if name.endswith(".parquet") and _spark_output(name):
                sub = os.path.relpath(directory, base)
                found.append(("" if sub == "." else sub.replace(os.sep, "/"), name))
    for sub, name in found:
        destination = os.path.join(root, sub, name)
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        os.link(os.path.join(base, sub, name), destination)
        moved.append(f"{sub}/{name}" if sub else name)
    shutil.rmtree(base, ignore_errors=True)
    return found


def _adds(root: str, found: list[tuple[str, str]], plan: WritePlan) -> pa.Table:
    """The add actions of the files now at ``root/<partition folders>/<name>``."""
    data_schema = pa.schema([f for f in plan.schema if f.name not in plan.partition_columns])

    def describe(item: tuple[str, str]) -> tuple[str, list, int, int, str]:
        sub, name = item
        relative = f"{sub}/{name}" if sub else name
        full = os.path.join(root, relative)
        info = os.stat(full)
        values = _partition_values(sub, plan.partition_columns) if plan.partition_columns else {}
        stats = stats_from_parquet_footer(pq.read_metadata(full), data_schema, plan.stats_columns,
                                          plan.num_indexed_cols)
        return encode_path(relative), list(values.items()), info.st_size, int(info.st_mtime * 1000), stats

    if len(found) <= _SERIAL_FOOTERS:  # starting threads costs more than reading a few footers
        rows = sorted(map(describe, found))
    else:
        with ThreadPoolExecutor(max_workers=min(8, len(found))) as pool:
            rows = sorted(pool.map(describe, found))
    n = len(rows)
    columns = {
        "path": pa.array([r[0] for r in rows], pa.string()),
        "partitionValues": pa.array([r[1] for r in rows], FILE_SCHEMA.field("partitionValues").type),
        "size": pa.array([r[2] for r in rows], pa.int64()),
        "modificationTime": pa.array([r[3] for r in rows], pa.int64()),
        "dataChange": pa.array([True] * n, pa.bool_()),
        "stats": pa.array([r[4] for r in rows], pa.string()),
    }
    return pa.Table.from_arrays([columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in FILE_SCHEMA],
                                schema=FILE_SCHEMA)


def native_write(df: Any, plan: WritePlan) -> CommitResult:
    """Write ``df`` as ``plan`` (from :func:`~deltatx.spark.writer.plan_write`) says, with Spark's
    Parquet writer, and commit it once (see the module docstring).

    Raises what the commit raises (the typed deltatx exceptions) after deleting the written files.
    """
    store = open_store(plan.spec.uri, plan.spec.storage_options)
    if plan.already_applied:  # nothing to write; the commit step reports the skip
        return commit_files(plan.request(), FILE_SCHEMA.empty_table())
    folder = f"{FOLDER_PREFIX}{uuid.uuid4().hex}"
    target = os.path.join(store.root, folder)
    moved: list[str] = []
    try:
        writer = _conformed(df, plan).write.mode("errorifexists").option("compression", "snappy")
        for key, value in _COMMITTER_OPTIONS.items():
            writer = writer.option(key, value)
        if plan.spec.max_records_per_file:
            writer = writer.option("maxRecordsPerFile", str(plan.spec.max_records_per_file))
        if plan.partition_columns:
            writer = writer.partitionBy(*plan.partition_columns)
        writer.parquet(target)
        adds = _adds(store.root, _move_into_table(store.root, folder, moved), plan)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)  # no commit was attempted: nothing refers to them
        store.delete_files(moved)
        raise
    # commit_files deletes the files itself if the commit does not happen (never once it landed)
    return commit_files(plan.request(), adds)
