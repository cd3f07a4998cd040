"""Writing new values into a column at given positions: one ``take`` over the old chunks and the
new values (cheaper than ``replace_with_mask`` for strings and nested types, and it can drop
rows in the same pass). Shared by MERGE's rewrite and UPDATE's struct-field assignments."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def scatter_index(n: int, pieces: list[tuple[np.ndarray, pa.Array]], kept: np.ndarray | None) -> pa.Array:
    """Take-indexes that put the pieces' values (appended after ``n`` old rows) at their positions."""
    positions = np.concatenate([p for p, _ in pieces])
    index = np.arange(n, dtype=np.int64)
    index[positions] = n + np.arange(len(positions), dtype=np.int64)
    return pa.array(index if kept is None else index[kept])


def scatter(column: pa.ChunkedArray, values: list[pa.Array], index: pa.Array) -> pa.ChunkedArray:
    """``column`` with ``values`` written in (see :func:`scatter_index`), deleted rows dropped.

    One ``take`` over the old chunks plus the new values: cheaper than ``replace_with_mask`` for
    strings, and it drops deleted rows in the same pass.
    """
    return pa.chunked_array(list(column.chunks) + values, column.type).take(index)
