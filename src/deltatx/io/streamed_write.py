"""An unpartitioned stream of batches, written file by file while its rows arrive.

Why not chunk it as partitioned streams are (:mod:`.partitioned_write`): without partitions each
file's rows can go straight into an open :class:`~.streamfile.StreamedFile`, whose row groups
are encoded on a worker while the next batches arrive — the producer (a Spark task, a reader)
and the encoder both run, and no chunk of a file's size is ever held in memory.
"""

from __future__ import annotations

import pyarrow as pa

from . import encodings
from .file_sink import DataFileSink
from .partitioned_write import pieces
from .streamfile import StreamedFile


def write_stream(sink: DataFileSink, reader: pa.RecordBatchReader) -> None:
    """Each file is encoded row group by row group as its rows arrive; a file is closed once it
    holds ``rows_per_file`` rows (sized from the first batch).

    The first rows of a file are held back until there are enough to decide which columns
    deserve a dictionary or delta encoding (io/encodings.py); a stream shorter than that sample
    is written as small files with Arrow's defaults."""
    current: StreamedFile | None = None
    relative = ""
    limit: int | None = None
    head: list[pa.Table] = []
    try:
        for batch in reader:
            if not batch.num_rows:
                continue
            rows = sink.conform(pa.Table.from_batches([batch])).select(sink.data_columns)
            if limit is None:
                limit = sink.rows_per_file(batch.nbytes / batch.num_rows)
            while rows.num_rows:
                if current is None:
                    head.append(rows)
                    if sum(t.num_rows for t in head) < encodings.SAMPLE_ROWS:
                        break
                    rows, head = pa.concat_tables(head), []
                    current, relative = sink.open_streamed(rows)
                room = limit - current.rows
                current.add(rows.slice(0, room))
                rows = rows.slice(room)
                if current.rows >= limit:
                    sink.finish_streamed(current, relative)
                    current = None
        if head:
            rows = pa.concat_tables(head)
            for offset, length in pieces(rows.num_rows, limit or rows.num_rows):
                sink.write_file(rows.slice(offset, length), "", ())
        if current is not None:
            sink.finish_streamed(current, relative)
            current = None
    except BaseException:
        if current is not None:
            current.abort()
        raise
