"""``df.writeStream.format("deltatx")``: an exactly-once streaming sink.

Each micro-batch is written like a batch job (executors write Parquet files with stats and send
their add rows) and committed by the driver as ONE commit carrying a ``txn`` action
``(appId = the query id, version = the batch id)``. Spark replays a micro-batch whose commit it
did not record (a crash between our commit and Spark's checkpoint); the replay finds its batch id
at or below the table's ``txn`` version for the query and is skipped, its files deleted — so
every micro-batch lands exactly once. This is Delta's own sink protocol.

Which id is "the query id": Spark's streaming query id (``query.id``), which stays the same across
restarts from the same checkpoint (``query.runId`` does not). Spark does not hand it to a Python
sink, but it writes it to ``<checkpointLocation>/metadata`` (``{"id": "..."}``) before the first
batch runs, and the ``checkpointLocation`` option reaches the sink; so the commit reads it from
there. The ``queryId`` option overrides it (required when the checkpoint location comes from the
``spark.sql.streaming.checkpointLocation`` conf instead of the option).

Output modes: append (each batch appends) and complete (each batch replaces the table: Spark
passes ``overwrite=True``). Other options are the batch writer's (``partitionBy``,
``mergeSchema``, ``userMetadata``, ``delta.*`` properties on create).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterator, Mapping

import fsspec
import orjson
import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from ..errors import InvalidPropertyError
from .commit import commit_files, delete_written
from .options import lower_keys
from .writer import WritePlan, WrittenFiles, adds_of, plan_write, write_task

STREAMING_OPERATION = "STREAMING UPDATE"


@dataclass(frozen=True)
class StreamPlan:
    """A streaming write: the batch plan and where the stable query id comes from."""

    write: WritePlan
    checkpoint_location: str | None
    query_id: str | None


def plan_stream(options: Mapping[str, str], spark_schema: Any, overwrite: bool) -> StreamPlan:
    o = lower_keys(options)
    for name in ("txnappid", "txnversion", "replacewhere"):
        if name in o:
            raise InvalidPropertyError(
                f"option {name} does not apply to a streaming write: the sink uses the query id and "
                f"the batch id as its txn (appId, version)"
            )
    query_id = o.get("queryid") or None
    checkpoint = o.get("checkpointlocation") or None
    if query_id is None and checkpoint is None:
        raise InvalidPropertyError(
            "the deltatx streaming sink needs a stable query id for exactly-once commits: set "
            ".option('checkpointLocation', ...) (the id is read from its metadata file) or "
            ".option('queryId', ...)"
        )
    return StreamPlan(write=plan_write(o, spark_schema, overwrite), checkpoint_location=checkpoint,
                      query_id=query_id)


def query_id_from_checkpoint(checkpoint_location: str) -> str:
    """The streaming query id Spark recorded in ``<checkpointLocation>/metadata``."""
    path = checkpoint_location.rstrip("/") + "/metadata"
    if path.startswith("file:") and not path.startswith("file://"):
        path = "file://" + path[len("file:"):]
    try:
        with fsspec.open(path, "rb") as fh:
            first_line = fh.read().splitlines()[0]
        return str(orjson.loads(first_line)["id"])
    except (FileNotFoundError, IndexError, KeyError, orjson.JSONDecodeError) as exc:
        raise InvalidPropertyError(
            f"could not read the streaming query id from {path!r} ({type(exc).__name__}: {exc}); "
            f"pass .option('queryId', ...) to name the query explicitly"
        ) from None


class DeltaTxStreamWriter(DataSourceStreamArrowWriter):
    """Tasks write files per micro-batch; ``commit`` makes each batch one idempotent commit."""

    def __init__(self, plan: StreamPlan):
        self.plan = plan

    def query_id(self) -> str:
        if self.plan.query_id is not None:
            return self.plan.query_id
        return query_id_from_checkpoint(self.plan.checkpoint_location or "")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFiles:
        return write_task(self.plan.write, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        query_id = self.query_id()
        base = self.plan.write.request()
        request = replace(
            base,
            read_version=None,  # blind per-batch commit on the latest version (created if missing)
            schema_changed=False,
            dynamic_partition_overwrite=False,  # Complete mode replaces the table, as Delta's sink does
            app_id=query_id,
            app_version=int(batchId),
            operation=STREAMING_OPERATION,
            parameters={"outputMode": "Complete" if base.overwrite else "Append", "queryId": query_id,
                        "epochId": str(batchId)},
        )
        commit_files(request, adds_of(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        spec = self.plan.write.spec
        delete_written(spec.uri, spec.storage_options, adds_of(messages))
