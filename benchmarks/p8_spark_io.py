"""P8 — Spark: write and read 2M rows through ``format("deltatx")`` beside Spark's built-in Parquet.

One local[2] SparkSession (no test JVM flags). The source DataFrame (id i64, part i32 × 10 values,
value f64, name str) is generated and cached in Spark's memory first, so both writers consume the
same cached rows. Write: ``df.write.format("deltatx").mode("append").save`` into a new table vs
``df.write.mode("overwrite").parquet`` into a new directory, alternating (every other repetition
in reverse order), each repetition a fresh location. Read: ``count(*), sum(value), max(id)`` over the table vs the Parquet directory,
alternating. Targets: write ≤ 1.3×, read ≤ 1.5× Spark Parquet.

Measured in the same run, to show where the time goes (all in the details):

- ``deltatx.spark.write(df, uri)``: deltatx plans the write and commits it, Spark's own Parquet
  writer writes the files (:mod:`deltatx.spark.native_write`); its ratio is a criterion of its own
  (≤ 1.0×);
- ``deltatx.spark.read(spark, uri)``: deltatx plans the snapshot, Spark's own Parquet reader reads
  its files (:mod:`deltatx.spark.native`); its ratio is a criterion of its own (≤ 1.0×);
- the same two reads of a table with deletion vectors (the rows of ``id % 100 = 7`` deleted
  through deltatx: 1% of the rows, in every file) against Spark Parquet of the full rows: the
  format applies the DVs in its Python workers, ``deltatx.spark.read`` on the JVM side
  (:mod:`deltatx.spark.native_dv`); each is a criterion (≤ 1.5×);
- the format read naming its two columns with the ``columns`` option (Spark does not prune the
  columns of a Python source);
- the floors of Spark's Python Data Source API, three sources that do no deltatx work: a sink
  that only counts the Arrow batches it is sent (write floor), a source that returns no rows
  (the fixed cost of a Python read), and a source that only reads the same Parquet files with
  pyarrow (read floor).

The ``deltalake`` column of the result holds Spark Parquet's numbers (the baseline of this
benchmark), not delta-rs'. ``deltatx_commit_tail_s_median`` is the time from the commit's own
timestamp (taken when the driver starts the commit) to ``save()`` returning: the driver-side share
of the write; the rest is planning and the executors' tasks.
"""

from __future__ import annotations

import shutil
from typing import Any, Callable

from .common import BenchResult, median, now, scratch_dir, time_call
from .workloads import PARTITIONS, deltalake_facts

ID = "P8"
TITLE = "Spark write + read, 2M rows, deltatx format vs Spark Parquet"
WRITE_TARGET = 1.3
READ_TARGET = 1.5
#: deltatx.spark.write / deltatx.spark.read (Spark's own Parquet writer / reader) must not cost more
#: than Spark's Parquet itself: they do strictly less driver work (no listing, no schema inference)
NATIVE_TARGET = 1.0
#: deltatx.spark.read of the DV table (deleted rows dropped on the JVM side) vs Parquet of the full rows
DV_NATIVE_TARGET = 1.5
SCHEMA = "id bigint, part int, value double, name string"
WARM_UP_ROUNDS = 3
#: the DV table deletes the rows with ``id % 100`` equal to this (1% of the rows, in every file)
DV_DELETED_REMAINDER = 7


def _source(spark, rows: int):
    df = spark.range(0, rows, numPartitions=2).selectExpr(
        "id", f"cast(id % {PARTITIONS} as int) as part", "cast(id as double) * 0.5 as value",
        "concat('name-', cast(id % 100000 as string)) as name",
    )
    df = df.cache()
    df.count()  # materialise the cache outside the timings
    return df


def _floor_sources() -> tuple[type, type, type]:
    """Python sources that do no deltatx work: what Spark's Python Data Source API itself costs.

    Defined in a function so that Spark pickles them by value into its Python workers.
    """
    from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceReader, InputPartition,
                                        WriterCommitMessage)

    class CountingSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "p8_counting_sink"

        def writer(self, schema, overwrite):
            return CountingWriter()

    class CountingWriter(DataSourceArrowWriter):
        def write(self, iterator):
            rows = 0
            for batch in iterator:
                rows += batch.num_rows
            return WriterCommitMessage()

    class FilesReader(DataSourceReader):
        def __init__(self, directory: str, empty: bool):
            self.directory, self.empty = directory, empty

        def partitions(self):
            import glob

            return [InputPartition(p) for p in sorted(glob.glob(f"{self.directory}/*.parquet"))]

        def read(self, partition):
            if self.empty:
                return
            import pyarrow.parquet as pq

            yield from pq.ParquetFile(partition.value).iter_batches(batch_size=65536)

    class EmptySource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "p8_empty_source"

        def schema(self):
            return SCHEMA

        def reader(self, schema):
            return FilesReader(self.options["path"], empty=True)

    class PyarrowSource(EmptySource):
        @classmethod
        def name(cls) -> str:
            return "p8_pyarrow_source"

        def reader(self, schema):
            return FilesReader(self.options["path"], empty=False)

    return CountingSink, EmptySource, PyarrowSource


def _alternating(reps: int, jobs: list[tuple[list[float], dict, str, Callable[[], Any]]]) -> None:
    """Run every job once per repetition, timed into its samples, its answer kept under its key;
    every other repetition in reverse order, so that no job always follows the same one."""
    for rep in range(reps):
        for samples, answers, key, job in (jobs if rep % 2 == 0 else jobs[::-1]):
            t, answers[key] = time_call(job)
            samples.append(t)


def _aggregate(df) -> tuple:
    from pyspark.sql import functions as F

    row = df.agg(F.count("*").alias("n"), F.sum("value").alias("s"), F.max("id").alias("m")).collect()[0]
    return row.n, row.s, row.m


def run(quick: bool = False) -> BenchResult:
    from deltatx.spark.session import local_session

    import deltatx
    import deltatx.spark as dspark

    from pyspark.sql import SparkSession

    rows = 100_000 if quick else 2_000_000
    reps = 1 if quick else 10  # even: as many repetitions in each writer order
    existing = SparkSession.getActiveSession()  # e.g. the test suite's: reuse it, never stop it
    spark = existing or local_session("deltatx-bench-p8", cores=2)
    dspark.register(spark)
    for floor in _floor_sources():
        spark.dataSource.register(floor)
    source = _source(spark, rows)
    write_dtx, write_pq, write_floor, write_native = [], [], [], []
    read_dtx, read_pq, read_dtx_columns, read_native, read_empty, read_pyarrow = [], [], [], [], [], []
    read_dv, read_dv_native = [], []  # the deletion-vector table (format, deltatx.spark.read)
    commit_tail: list[float] = []
    facts: dict[str, dict] = {}
    with scratch_dir("p8") as root:
        # warm-up, untimed: full-size jobs each way until the JVM's JIT has settled (measured: the
        # Parquet write keeps getting faster for about three jobs) and the Python workers exist
        for _ in range(0 if quick else WARM_UP_ROUNDS):
            shutil.rmtree(root / "warm-dtx", ignore_errors=True)
            source.write.format("deltatx").mode("append").save(str(root / "warm-dtx"))
            source.write.mode("overwrite").parquet(str(root / "warm-pq"))
            source.write.format("p8_counting_sink").mode("append").save()
            shutil.rmtree(root / "warm-native", ignore_errors=True)
            dspark.write(source, str(root / "warm-native"))
        if not quick:
            for _ in range(WARM_UP_ROUNDS):
                _aggregate(spark.read.format("deltatx").load(str(root / "warm-dtx")))
                _aggregate(spark.read.parquet(str(root / "warm-pq")))
                _aggregate(dspark.read(spark, str(root / "warm-dtx")))
                _aggregate(spark.read.format("p8_pyarrow_source").load(str(root / "warm-dtx")))
            shutil.rmtree(root / "warm-dtx", ignore_errors=True)
            shutil.rmtree(root / "warm-pq", ignore_errors=True)
        for rep in range(reps):
            dtx_uri, pq_uri = str(root / f"dtx-{rep}"), str(root / f"pq-{rep}")
            native_uri = str(root / f"native-{rep}")

            def write_format() -> None:
                start = now()
                t, _ = time_call(lambda: source.write.format("deltatx").mode("append").save(dtx_uri))
                write_dtx.append(t)
                committed_ms = deltatx.Table(dtx_uri).history()[0]["timestamp"]
                commit_tail.append(max(0.0, (start + t) - _to_monotonic(committed_ms)))

            def write_parquet() -> None:
                write_pq.append(time_call(lambda: source.write.mode("overwrite").parquet(pq_uri))[0])

            def write_sink() -> None:
                write_floor.append(time_call(lambda: source.write.format("p8_counting_sink").mode("append").save())[0])

            def write_natively() -> None:
                t, native_result = time_call(lambda: dspark.write(source, native_uri))
                write_native.append(t)
                facts["native_write_version"] = {"version": native_result.version,
                                                 "rows": deltalake_facts(native_uri)["rows"]}

            # every other repetition runs the writers in reverse order, so that no writer always
            # follows the same job (each leaves the JVM's heap and the page cache differently)
            writers = [write_format, write_parquet, write_sink, write_natively]
            for write in (writers if rep % 2 == 0 else writers[::-1]):
                write()
            shutil.rmtree(native_uri, ignore_errors=True)
            if rep < reps - 1:
                shutil.rmtree(dtx_uri, ignore_errors=True)
                shutil.rmtree(pq_uri, ignore_errors=True)
        dtx_uri, pq_uri = str(root / f"dtx-{reps - 1}"), str(root / f"pq-{reps - 1}")
        source.unpersist()
        answers = {}
        _alternating(reps, [  # deltatx_columns: the format naming its columns (Spark prunes none)
            (read_dtx, answers, "deltatx", lambda: _aggregate(spark.read.format("deltatx").load(dtx_uri))),
            (read_pq, answers, "parquet", lambda: _aggregate(spark.read.parquet(pq_uri))),
            (read_dtx_columns, answers, "deltatx_columns", lambda: _aggregate(
                spark.read.format("deltatx").option("columns", "id,value").load(dtx_uri))),
            (read_native, answers, "deltatx_native", lambda: _aggregate(dspark.read(spark, dtx_uri))),
            (read_empty, {}, "empty", lambda: _aggregate(spark.read.format("p8_empty_source").load(dtx_uri))),
            (read_pyarrow, answers, "pyarrow_source", lambda: _aggregate(
                spark.read.format("p8_pyarrow_source").load(dtx_uri))),
        ])
        # a deletion-vector table: the same rows, ~1% deleted through deltatx (DVs on every file)
        dv_uri = str(root / "dtx-dv")
        shutil.copytree(dtx_uri, dv_uri)
        dv_table = deltatx.Table(dv_uri)
        dv_table.set_properties({"delta.enableDeletionVectors": "true"})
        dv_table.delete(f"id % 100 = {DV_DELETED_REMAINDER}")
        facts["dv_files_with_dvs"] = sum(d is not None for d in dv_table.files().column("deletionVector").to_pylist())
        answers["parquet_minus_deleted"] = _aggregate(
            spark.read.parquet(pq_uri).where(f"id % 100 != {DV_DELETED_REMAINDER}"))
        _alternating(reps, [
            (read_dv, answers, "dv_deltatx", lambda: _aggregate(spark.read.format("deltatx").load(dv_uri))),
            (read_dv_native, answers, "dv_deltatx_native", lambda: _aggregate(dspark.read(spark, dv_uri))),
        ])
        table = deltatx.Table(dtx_uri)
        facts["deltatx"] = {**deltalake_facts(dtx_uri), "deltatx_version": table.version,
                            "files": table.files().num_rows}
        facts["answers"] = {k: list(v) for k, v in answers.items()}
    if existing is None:
        spark.stop()

    write_ratio = median(write_dtx) / median(write_pq)
    read_ratio = median(read_dtx) / median(read_pq)
    native_ratio = median(read_native) / median(read_pq)
    native_write_ratio = median(write_native) / median(write_pq)
    floors = {
        "write_counting_sink_median_s": median(write_floor),
        "write_counting_sink_ratio": median(write_floor) / median(write_pq),
        "read_empty_source_median_s": median(read_empty),
        "read_empty_source_ratio": median(read_empty) / median(read_pq),
        "read_pyarrow_source_median_s": median(read_pyarrow),
        "read_pyarrow_source_ratio": median(read_pyarrow) / median(read_pq),
    }
    result = BenchResult(
        id=ID, title=TITLE, metric="median write time (read in criteria)", unit="s",
        deltatx=median(write_dtx), deltalake=median(write_pq),
        target=f"write ≤ {WRITE_TARGET:g}×, read ≤ {READ_TARGET:g}× Spark Parquet", quick=quick,
        parameters={"rows": rows, "repetitions": reps, "cores": 2,
                    "schema": SCHEMA,
                    "read": "count(*), sum(value), max(id)"},
        details={
            "write_deltatx_samples_s": write_dtx, "write_parquet_samples_s": write_pq,
            "read_deltatx_samples_s": read_dtx, "read_parquet_samples_s": read_pq,
            "read_deltatx_columns_option_samples_s": read_dtx_columns,
            "read_deltatx_median_s": median(read_dtx), "read_parquet_median_s": median(read_pq),
            "read_deltatx_columns_option_median_s": median(read_dtx_columns),
            "write_deltatx_native_samples_s": write_native,
            "write_deltatx_native_median_s": median(write_native),
            "write_native_ratio": native_write_ratio,
            "read_deltatx_native_samples_s": read_native,
            "read_deltatx_native_median_s": median(read_native),
            "write_ratio": write_ratio, "read_ratio": read_ratio, "read_native_ratio": native_ratio,
            "read_dv_deltatx_samples_s": read_dv, "read_dv_deltatx_median_s": median(read_dv),
            "read_dv_deltatx_native_samples_s": read_dv_native,
            "read_dv_deltatx_native_median_s": median(read_dv_native),
            "read_dv_ratio": median(read_dv) / median(read_pq),
            "read_dv_native_ratio": median(read_dv_native) / median(read_pq),
            "python_data_source_floors": floors,
            "write_counting_sink_samples_s": write_floor,
            "read_empty_source_samples_s": read_empty, "read_pyarrow_source_samples_s": read_pyarrow,
            "deltatx_commit_tail_s_median": median(commit_tail),
            "tables": facts,
        },
        deltalake_baseline_notes="baseline = Spark's built-in Parquet (same session, same run), not deltalake",
    )
    result.check("deltatx rows (read by deltalake)", rows, facts["deltatx"]["rows"])
    result.check("deltatx version", 0, facts["deltatx"]["deltatx_version"])
    result.check("same answer as Parquet", facts["answers"]["parquet"], facts["answers"]["deltatx"])
    result.check("same answer with the columns option", facts["answers"]["parquet"],
                 facts["answers"]["deltatx_columns"])
    result.check("native write: one commit (version 0) of every row", {"version": 0, "rows": rows},
                 facts["native_write_version"])
    result.check("same answer read natively", facts["answers"]["parquet"], facts["answers"]["deltatx_native"])
    result.check("same answer from the pyarrow floor source", facts["answers"]["parquet"],
                 facts["answers"]["pyarrow_source"])
    result.criterion("write vs Spark Parquet", write_ratio <= WRITE_TARGET,
                     f"{median(write_dtx):.2f} s vs {median(write_pq):.2f} s = {write_ratio:.2f}× "
                     f"(target ≤ {WRITE_TARGET:g}×; a Python sink that only counts batches: "
                     f"{floors['write_counting_sink_ratio']:.2f}×)")
    result.criterion("read count+sum+max vs Spark Parquet", read_ratio <= READ_TARGET,
                     f"{median(read_dtx):.2f} s vs {median(read_pq):.2f} s = {read_ratio:.2f}× "
                     f"(target ≤ {READ_TARGET:g}×; the Python source API alone: "
                     f"{floors['read_empty_source_ratio']:.2f}× for no rows, "
                     f"{floors['read_pyarrow_source_ratio']:.2f}× reading the files with bare pyarrow)")
    result.criterion("write via deltatx.spark.write (Spark's Parquet writer) vs Spark Parquet",
                     native_write_ratio <= NATIVE_TARGET,
                     f"{median(write_native):.2f} s vs {median(write_pq):.2f} s = {native_write_ratio:.2f}× "
                     f"(target ≤ {NATIVE_TARGET:g}×)")
    result.criterion("read count+sum+max via deltatx.spark.read (Spark's Parquet reader) vs Spark Parquet",
                     native_ratio <= NATIVE_TARGET,
                     f"{median(read_native):.2f} s vs {median(read_pq):.2f} s = {native_ratio:.2f}× "
                     f"(target ≤ {NATIVE_TARGET:g}×)")
    result.check("DV table: same answer as Parquet less the deleted rows", facts["answers"]["parquet_minus_deleted"],
                 facts["answers"]["dv_deltatx"])
    result.check("DV table read via deltatx.spark.read: the same answer", facts["answers"]["parquet_minus_deleted"],
                 facts["answers"]["dv_deltatx_native"])
    dv_ratio, dv_native_ratio = median(read_dv) / median(read_pq), median(read_dv_native) / median(read_pq)
    result.criterion("read of a DV table (1% deleted) vs Spark Parquet of the full rows", dv_ratio <= READ_TARGET,
                     f"{median(read_dv):.2f} s vs {median(read_pq):.2f} s = {dv_ratio:.2f}× "
                     f"(target ≤ {READ_TARGET:g}×)")
    result.criterion("native read of a DV table (1% deleted) via deltatx.spark.read vs Spark Parquet of the full rows",
                     dv_native_ratio <= DV_NATIVE_TARGET,
                     f"{median(read_dv_native):.2f} s vs {median(read_pq):.2f} s = {dv_native_ratio:.2f}× "
                     f"(target ≤ {DV_NATIVE_TARGET:g}×; Spark's Parquet reader, deleted rows dropped on the "
                     f"JVM side)")
    return result


def _to_monotonic(epoch_ms: int) -> float:
    """An epoch-ms wall-clock instant on the benchmark's monotonic clock (for the commit share)."""
    import time

    return now() - (time.time() - epoch_ms / 1000)
