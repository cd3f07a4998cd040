"""Arrow tables as bytes: how add rows and file lists travel between Spark's Python processes.

Spark pickles commit messages, input partitions and task results; an Arrow IPC stream keeps a
table columnar (and its exact schema) on the way, with no Python object per row.
"""

from __future__ import annotations

import pyarrow as pa


def to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as out:
        out.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()
