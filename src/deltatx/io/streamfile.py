"""One Parquet data file written while its rows are still arriving.

Why: a stream of batches (a Spark task's Arrow input, a RecordBatchReader) is usually slower to
produce than to encode. Writing a file only once all of its rows have arrived leaves the encoder
idle while they arrive and the producer idle while it encodes. Here row groups are encoded and
compressed on a worker thread as soon as enough rows are buffered, so both run at once. The
same thread folds each row group into the file's statistics, so closing the file only writes the
footer: nothing proportional to the file is left for after its last rows arrive.
"""

from __future__ import annotations

import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
import pyarrow as pa
import pyarrow.parquet as pq

from ..txnlog.stats import FileStats
from .encodings import Encodings
from ..txnlog.struct_nulls import fill_hidden_nulls, not_null_violations_typed

#: rows per row group when streaming: small enough to overlap encoding with arrival
STREAM_ROW_GROUP_ROWS = 128 * 1024

#: row groups queued for the encoder before ``add`` waits: enough that a slow group does not
#: stop the producer (a Spark task that stops reading stalls the JVM sending its rows), few
#: enough to bound memory
MAX_GROUPS_IN_FLIGHT = 3


class StreamedFile:
    """An open data file: ``add`` tables, then ``close()`` → (size, mtime, stats JSON)."""

    def __init__(self, sink: pa.NativeFile, schema: pa.Schema, *, compression: str,
                 encodings: Encodings, row_group_rows: int,
                 stats: FileStats):
        self._sink = sink
        self._writer = pq.ParquetWriter(sink, schema, compression=compression, **encodings.writer_args())
        self._group_rows = max(1, min(row_group_rows, STREAM_ROW_GROUP_ROWS))
        self._stats = stats
        self._buffer: list[pa.Table] = []
        self._buffered = 0
        self._encoder: ThreadPoolExecutor | None = None  # started by the first full row group
        self._pending: deque[Future] = deque()
        self.rows = 0

    def add(self, rows: pa.Table) -> None:
        self._buffer.append(fill_hidden_nulls(rows))
        self._buffered += rows.num_rows
        self.rows += rows.num_rows
        if self._buffered >= self._group_rows:
            self._flush()

    def _flush(self, last: bool = False) -> None:
        if not self._buffered:
            return
        group = pa.concat_tables(self._buffer)
        self._buffer, self._buffered = [], 0
        while self._pending and (self._pending[0].done() or len(self._pending) >= MAX_GROUPS_IN_FLIGHT):
            self._pending.popleft().result()  # bounded memory; an encoder error surfaces here
        if last and self._encoder is None:  # a small file: no thread at all
            self._encode(group)
            return
        if self._encoder is None:
            # one thread: a Parquet writer takes its row groups one at a time, in order
            self._encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="deltatx-stream")
        self._pending.append(self._encoder.submit(self._encode, group))

    def _encode(self, group: pa.Table) -> None:
        # a large arrival is still cut into row groups of the configured size: footer statistics
        # per group let a point lookup read one group of the file
        with not_null_violations_typed():
            self._writer.write_table(group, row_group_size=self._group_rows)
        self._stats.add(group)

    def close(self) -> tuple[int, int, str]:
        """Finish the file; returns (size in bytes, modification time ms, stats JSON)."""
        try:
            self._flush(last=True)
            while self._pending:
                self._pending.popleft().result()
            self._writer.close()
            size = self._sink.tell()
        finally:
            if self._encoder is not None:
                self._encoder.shutdown(wait=True)
            self._sink.close()
        return size, int(time.time() * 1000), self._stats.to_json()

    def abort(self) -> None:
        """Stop without finishing (the caller deletes the file)."""
        if self._encoder is not None:
            self._encoder.shutdown(wait=True, cancel_futures=True)
        try:
            self._writer.close()
        except Exception:  # the writer may be the reason we abort
            pass
        self._sink.close()
