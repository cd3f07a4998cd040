"""Row grouping by partition values, columnar: shared by the writer (split rows into folders)
and the reader (one partition expression per distinct partition, not per file)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


def group_codes(columns: list[pa.Array | pa.ChunkedArray]) -> pa.Array:
    """A dense int64 code per row naming its combination of values (null is a value too).

    Codes are numbered 0..K-1 in order of first appearance. Several columns are combined pairwise
    (``code * cardinality + next``) and re-densified after each step, so codes never overflow.
    """
    code: pa.Array | None = None
    for column in columns:
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        encoded = pc.dictionary_encode(column, null_encoding="encode")
        indices = encoded.indices.cast(pa.int64())
        if code is None:
            code = indices
        else:
            combined = pc.add(pc.multiply(code, len(encoded.dictionary)), indices)
            code = pc.dictionary_encode(combined).indices.cast(pa.int64())
    if code is None:
        raise ValueError("group_codes needs at least one column")
    return code
