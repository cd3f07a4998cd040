"""``make demo``'s Spark part: a pipeline appends through Spark while a second Spark job deletes.

``run(base_dir)`` (called by ``deltatx.demo``; also ``python -m deltatx.demo_spark``) starts its
own local SparkSession and, for each isolation level, on a table of its own:

1. loads three days of events with ``df.write.format("deltatx")`` (through
   :func:`deltatx.spark.write`, which returns the commit and raises typed errors);
2. races two Spark jobs from two driver threads: the *cleanup* job
   (``SparkTable.delete("day = '2024-01-01' AND id < 50")``, executors rewrite the files) plans
   at version v, and while it is between planning and commit the *pipeline* appends late rows
   for 2024-01-01 through Spark. The order is forced by a barrier at the DELETE's recorded read
   (a :mod:`deltatx.phases` observer), not by timing;
3. prints the two outcomes side by side — WriteSerializable lets the DELETE commit after the
   blind append (the late rows survive), Serializable refuses it with
   ConcurrentAppendException (and the retried DELETE then removes the late rows too) — and the
   history of both tables.
"""

from __future__ import annotations

import argparse
import shutil
import threading
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.table import Table as RichTable

import deltatx
from deltatx import phases
from deltatx.errors import ConcurrentModificationException

console = Console()

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("value", pa.float64())])
DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
CLEANUP = "day = '2024-01-01' AND id < 50"
LEVELS = ("WriteSerializable", "Serializable")
#: a thread waiting at a barrier gives up after this long (only if the other side crashed)
BARRIER_TIMEOUT_S = 600


def events(ids: range, day: str) -> pa.Table:
    return pa.table({"id": list(ids), "day": [day] * len(ids), "value": [i * 1.5 for i in ids]}, schema=SCHEMA)


def _late_rows() -> pa.Table:
    return events(range(45, 50), DAYS[0])  # late arrivals for 2024-01-01, inside the cleanup's range


def _race(spark: Any, uri: str) -> dict[str, Any]:
    """The cleanup DELETE and the pipeline append, ordered by barriers; returns both outcomes."""
    import deltatx.spark as dspark
    from deltatx.spark import SparkTable

    late = spark.createDataFrame(_late_rows())
    planned, appended = threading.Event(), threading.Event()
    cleanup_thread: dict[str, int] = {}
    outcome: dict[str, Any] = {}

    def barrier(phase: str, **ctx: Any) -> None:
        # The DELETE has pinned its snapshot and recorded its read: let the pipeline commit now.
        if phase == "read" and threading.get_ident() == cleanup_thread.get("id") and not planned.is_set():
            planned.set()
            appended.wait(BARRIER_TIMEOUT_S)

    def cleanup() -> None:
        cleanup_thread["id"] = threading.get_ident()
        try:
            outcome["delete"] = SparkTable(spark, uri).delete(CLEANUP)
        except ConcurrentModificationException as exc:
            outcome["delete"] = exc
        finally:
            planned.set()  # never leave the pipeline waiting, whatever happened

    def pipeline() -> None:
        planned.wait(BARRIER_TIMEOUT_S)
        try:
            outcome["append"] = dspark.write(late, uri, mode="append")
        finally:
            appended.set()

    with phases.observe(barrier):
        threads = [threading.Thread(target=cleanup, name="cleanup"), threading.Thread(target=pipeline, name="pipeline")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return outcome


def _describe_delete(result: Any) -> str:
    if isinstance(result, BaseException):
        return f"[red]{type(result).__name__}[/] (winner: version {getattr(result, 'version', '?')})"
    if result is None:
        return "[red]did not run[/]"
    return (f"[green]committed[/] v{result.version} (read v{result.read_version}, {result.attempts} attempts, "
            f"-{result.metrics.get('numDeletedRows', 0)} rows)")


def _remaining(spark: Any, uri: str) -> int:
    import deltatx.spark as dspark

    return dspark.read(spark, uri).where(CLEANUP).count()


def _summary(metrics: dict[str, str]) -> str:
    keys = [("numOutputRows", "+rows"), ("numDeletedRows", "-rows"), ("numFiles", "+files"),
            ("numAddedFiles", "+files"), ("numRemovedFiles", "-files"), ("numFilesRead", "read")]
    return " ".join(f"{label}={metrics[k]}" for k, label in keys if k in metrics)


def show_history(uri: str, level: str) -> None:
    grid = RichTable(title=f"history ({level}) of {uri}")
    for col in ("version", "operation", "read", "isolation", "blind", "metrics"):
        grid.add_column(col, overflow="fold")
    for h in deltatx.Table(uri).history():
        grid.add_row(str(h["version"]), h.get("operation", ""), str(h.get("readVersion", "")),
                     h.get("isolationLevel", ""), str(h.get("isBlindAppend", "")),
                     _summary(h.get("operationMetrics") or {}))
    console.print(grid)


def run(base_dir: str) -> dict[str, dict[str, Any]]:
    """The Spark part of the demo, on fresh tables under ``base_dir`` (see the module docstring).

    Returns per isolation level the race's outcomes: ``append`` (CommitResult), ``delete``
    (CommitResult or the exception), ``remaining`` rows in the cleaned range, ``retry``. Uses the
    active SparkSession if there is one (and leaves it running), else starts and stops its own.
    """
    from pyspark.sql import SparkSession

    import deltatx.spark as dspark
    from deltatx.spark import SparkTable
    from deltatx.spark.session import local_session

    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    base = Path(base_dir)
    base.mkdir(parents=True, exist_ok=True)
    console.rule("[bold]deltatx on Spark: a pipeline appends while a cleanup job deletes")
    existing = SparkSession.getActiveSession()
    spark = existing or local_session("deltatx-demo", fast_start=True)
    outcomes: dict[str, dict[str, Any]] = {}
    try:
        dspark.register(spark)
        rows = []
        for level in LEVELS:
            uri = str(base / f"events-{level.lower()}")
            shutil.rmtree(uri, ignore_errors=True)
            load = spark.createDataFrame(pa.concat_tables([events(range(k * 100, k * 100 + 100), day)
                                                           for k, day in enumerate(DAYS)]))
            created = dspark.write(load, uri, mode="append", partitionBy="day", **{"delta.isolationLevel": level})
            console.print(f"{level}: loaded {created.metrics.get('numOutputRows', '?')} rows through Spark "
                          f"into {uri} (version {created.version})")
            outcome = _race(spark, uri)
            append = outcome.get("append")
            delete = outcome.get("delete")
            remaining = _remaining(spark, uri)
            retry = ""
            outcomes[level] = {"append": append, "delete": delete, "remaining": remaining, "retry": None}
            if isinstance(delete, ConcurrentModificationException):
                again = SparkTable(spark, uri).delete(CLEANUP)
                outcomes[level]["retry"] = again
                retry = f"retry: v{again.version}, -{again.metrics['numDeletedRows']} rows"
            rows.append((level, f"v{append.version}" if append is not None else "[red]failed[/]",
                         _describe_delete(delete), str(remaining), retry))
        grid = RichTable(title=f"Spark job 1: DELETE WHERE {CLEANUP}\nSpark job 2: append 5 late rows for {DAYS[0]}\n"
                               f"(job 2 commits between job 1's read and its commit)")
        for col in ("isolation", "pipeline append", "cleanup DELETE", "left in range", "then"):
            grid.add_column(col, overflow="fold")
        for row in rows:
            grid.add_row(*row)
        console.print(grid)
        console.print("WriteSerializable: a blind append may commit between a DELETE's read and its commit; the "
                      "DELETE is serialized first, so the late rows stay. Serializable: the DELETE read "
                      f"{DAYS[0]}, rows were added there, so it must fail and be retried.")
        for level in LEVELS:
            show_history(str(base / f"events-{level.lower()}"), level)
    finally:
        if existing is None:
            spark.stop()
    return outcomes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="deltatx demo on Spark")
    parser.add_argument("--path", default="demo-data/spark")
    run(parser.parse_args(argv).path)


if __name__ == "__main__":
    main()
