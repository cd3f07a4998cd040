"""Two Python threads of one driver writing to one table through Spark, under both isolation levels.

The interleaving is forced, never timed: job A (an overwrite of partition 1 with replaceWhere, so
it *reads* partition 1) is planned — its read version captured — and then its only task blocks on
a Unix-socket gate inside the executor. The test accepts the task's connection (A has planned),
lets job B (a blind append into partition 1) run to its commit in a second thread, then releases
A. A's commit then meets B's as a concurrent winner:

- WriteSerializable: a concurrent blind append does not conflict; both commits land.
- Serializable: the append added a file to data A read: ``ConcurrentAppendException`` naming B's
  version, raised typed by ``deltatx.spark.write``; A's files are deleted.

(The phases observers of ``deltatx.phases`` cannot be used here: the commit runs in a Python
worker process of Spark's, not in the test process.)
"""

from __future__ import annotations

import glob
import shutil
import socket
import tempfile
import threading

import pyarrow as pa
import pytest

import deltatx
import deltatx.spark as dspark
from deltatx.errors import ConcurrentAppendException
from deltatx.spark.unwrap import typed_error

GATE_TIMEOUT_S = 120


class ExecutorGate:
    """A Unix socket the gated task connects to and then waits on until ``release()``."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="deltatx-gate-")
        self.path = f"{self.dir}/gate.sock"
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(1)
        self.server.settimeout(GATE_TIMEOUT_S)
        self.conn: socket.socket | None = None

    def task_function(self):
        path = self.path

        def gated(batches):
            import socket as sock

            client = sock.socket(sock.AF_UNIX, sock.SOCK_STREAM)
            client.connect(path)
            client.recv(1)  # blocks until the test releases the task
            client.close()
            yield from batches

        return gated

    def wait_until_task_runs(self) -> None:
        self.conn, _ = self.server.accept()

    def release(self) -> None:
        assert self.conn is not None
        self.conn.sendall(b"g")
        self.conn.close()

    def close(self) -> None:
        self.server.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_in_thread(fn) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def target():
        try:
            outcome["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome


@pytest.mark.parametrize("level", ["WriteSerializable", "Serializable"])
def test_replace_where_job_vs_concurrent_append_job(spark, table_uri, level):
    table = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("part", pa.int64())]),
                                 partition_by=["part"], properties={"delta.isolationLevel": level})
    table.append(pa.table({"id": [1, 2, 3], "part": [0, 1, 1]}))  # version 1
    gate = ExecutorGate()
    try:
        replacement = spark.range(10, 12, numPartitions=1).selectExpr("id", "1L as part")
        gated = replacement.mapInArrow(gate.task_function(), replacement.schema)
        job_a, outcome_a = run_in_thread(
            lambda: dspark.write(gated, table_uri, mode="overwrite", replaceWhere="part = 1"))
        gate.wait_until_task_runs()  # A is planned at version 1 and its task is waiting

        appended = spark.range(100, 101, numPartitions=1).selectExpr("id", "1L as part")
        job_b, outcome_b = run_in_thread(lambda: dspark.write(appended, table_uri))
        job_b.join()
        assert "error" not in outcome_b, outcome_b.get("error")
        assert outcome_b["result"].version == 2
    finally:
        if gate.conn is not None:
            gate.release()
        gate.close()
    job_a.join()

    table = deltatx.Table(table_uri)
    if level == "WriteSerializable":
        assert "error" not in outcome_a, outcome_a.get("error")
        result = outcome_a["result"]
        assert (result.version, result.read_version, result.conflicts_resolved) == (3, 1, 1)
        assert sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
            {"id": 1, "part": 0}, {"id": 10, "part": 1}, {"id": 11, "part": 1}, {"id": 100, "part": 1},
        ]
    else:
        error = outcome_a.get("error")
        assert isinstance(error, ConcurrentAppendException), error
        assert error.version == 2 and error.operation == "WRITE"
        # the plain df.write...save() error carries the class name and the winning version too
        spark_message = str(error.__cause__)
        assert "ConcurrentAppendException" in spark_message and "version 2" in spark_message
        parsed = typed_error(error.__cause__)
        assert isinstance(parsed, ConcurrentAppendException) and parsed.version == 2
        assert table.version == 2
        assert sorted(table.to_arrow()["id"].to_pylist()) == [1, 2, 3, 100]
        on_disk = {p.split("/table/")[1] for p in glob.glob(f"{table_uri}/**/*.parquet", recursive=True)}
        assert len(on_disk) == table.files().num_rows  # the loser's files were deleted
