"""Which live rows of one data file a point or range predicate selects: their positions only.

A merge-on-read DELETE with no change feed needs nothing of the rows it deletes but where they
are: the positions go into the file's deletion vector, and that is the whole change. The general
reader (:meth:`deltatx.io.reader._ScanPlan.read_one`) builds the rows as the table's types with
partition values and metadata columns, for any predicate and any file; for a point DELETE that
machinery costs more than decoding the one row group that holds the key. This module answers
only the narrow question, and only where the answer needs no conversion:

- the predicate is in :mod:`deltatx.expr.point_rows`'s subset (integer data columns compared
  with integer constants) and names no partition column;
- the table has no column mapping, and each predicate column is in the file with exactly the
  table's type (anything else — a widened type, a missing column — goes the general way, which
  converts or names the problem).

It reuses the general reader's parts (footer cache, row-group bounds, the row-group cache, the
DV checks), so the two give the same positions; None means "ask the general reader".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..expr.point_rows import matching_positions
from .deletion_vectors import deleted_rows
from .paths import data_file_path, decode_path
from .reader import (_check_dv_fits, _deleted_among, _groups_by_footer, _positions_in_file, file_cache_key,
                     pre_buffers, raise_if_corrupt, raise_if_file_missing)
from .row_group_cache import ROW_GROUPS

if TYPE_CHECKING:
    from ..expr.model import Expr
    from ..txnlog.store import LogStore


def live_matching_positions(store: "LogStore", path: str, size: int | None, modification_time: int | None,
                            deletion_vector: dict[str, Any] | None, pred: "Expr", schema: pa.Schema,
                            ) -> np.ndarray | None:
    """Positions (int64, ascending) of the rows of data file ``path`` (as the log names it) where
    the bound ``pred`` is TRUE and its deletion vector does not delete them; None when the
    general reader must answer (see the module docstring)."""
    names = sorted(pred.columns())
    if not names or any(n not in schema.names or not pa.types.is_integer(schema.field(n).type) for n in names):
        return None
    location = data_file_path(store, decode_path(path))
    filesystem = store.arrow_fs
    cache_key = file_cache_key(filesystem, location, size, modification_time)
    try:
        with pq.ParquetFile(location, filesystem=filesystem, metadata=ROW_GROUPS.footer(cache_key),
                            pre_buffer=pre_buffers(filesystem)) as pf:
            ROW_GROUPS.keep_footer(cache_key, pf.metadata)
            file_schema = pf.schema_arrow
            for n in names:
                i = file_schema.get_field_index(n)
                if i < 0 or not file_schema.field(i).type.equals(schema.field(n).type):
                    return None
            metadata = pf.metadata
            groups = [0] if metadata.num_row_groups == 1 else _groups_by_footer(pred, pf, cache_key)
            if groups is None:
                return None
            raw = ROW_GROUPS.read_row_groups(pf, cache_key, groups, names) if groups else None
    except pa.ArrowInvalid as exc:  # truncated, emptied, not Parquet
        raise_if_corrupt(exc, store, path)
        raise
    except OSError as exc:
        raise_if_file_missing(filesystem, location, store.uri, exc)
        raise
    if raw is None:  # no group's bounds admit the predicate
        return np.empty(0, np.int64)
    hit = matching_positions(pred, raw)
    if hit is None:
        return None
    positions = _positions_in_file(metadata, groups, hit) if len(hit) else hit
    if deletion_vector is None or not len(positions):
        return positions
    deleted = deleted_rows(store, deletion_vector, location)
    _check_dv_fits(deleted, metadata.num_rows, location)
    return positions[~_deleted_among(positions.astype(np.uint64), deleted)]
