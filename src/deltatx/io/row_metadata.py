"""Per-row metadata columns a read can ask for, by Spark's names (``_metadata.*``).

- ``_metadata.row_index``          the row's physical position in its data file (0-based), the
                                   coordinate deletion vectors speak in; merge-on-read DML reads it.
- ``_metadata.file_path``          the ``add.path`` of the row's file.
- ``_metadata.row_id``             row tracking: the materialized row-id column where it is not
                                   null, else ``baseRowId + row_index`` (PROTOCOL.md "Row Tracking").
- ``_metadata.row_commit_version`` the materialized row-commit-version column where not null, else
                                   the file's ``defaultRowCommitVersion``.

They are computed per file before its deletion vector is applied (positions count every physical
row). The materialized columns are physical columns of the data files that are not in the table
schema; their names live in the table configuration (:class:`MaterializedColumns`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROW_INDEX = "_metadata.row_index"
FILE_PATH = "_metadata.file_path"
ROW_ID = "_metadata.row_id"
ROW_COMMIT_VERSION = "_metadata.row_commit_version"

METADATA_TYPES: dict[str, pa.DataType] = {
    ROW_INDEX: pa.int64(),
    FILE_PATH: pa.string(),
    ROW_ID: pa.int64(),
    ROW_COMMIT_VERSION: pa.int64(),
}

MATERIALIZED_ROW_ID = "delta.rowTracking.materializedRowIdColumnName"
MATERIALIZED_ROW_COMMIT_VERSION = "delta.rowTracking.materializedRowCommitVersionColumnName"


@dataclass(frozen=True)
class MaterializedColumns:
    """The physical column names that carry preserved row ids / commit versions (None: unset)."""

    row_id: str | None = None
    row_commit_version: str | None = None

    @classmethod
    def from_configuration(cls, configuration: dict[str, str]) -> "MaterializedColumns":
        return cls(configuration.get(MATERIALIZED_ROW_ID), configuration.get(MATERIALIZED_ROW_COMMIT_VERSION))

    def physical(self) -> list[str]:
        return [c for c in (self.row_id, self.row_commit_version) if c]


def check_row_tracking_columns(columns: list[str] | None, row_tracking_supported: bool, uri: str) -> None:
    """``_metadata.row_id`` / ``row_commit_version`` exist only on tables with row tracking (as in
    Spark, where they are not in ``_metadata`` otherwise): refuse them elsewhere instead of
    answering with nulls."""
    if columns is None or row_tracking_supported:
        return
    asked = [c for c in columns if c in (ROW_ID, ROW_COMMIT_VERSION)]
    if asked:
        from ..errors import SchemaMismatchError

        raise SchemaMismatchError(
            f"{asked[0]} needs row tracking, which the table at {uri!r} does not have: set "
            f"delta.enableRowTracking=true (existing rows get ids in the same commits)")


def is_metadata_column(name: str) -> bool:
    return name in METADATA_TYPES


def metadata_field(name: str) -> pa.Field:
    return pa.field(name, METADATA_TYPES[name], nullable=name != ROW_INDEX)


def _coalesce(stored: pa.ChunkedArray | None, default: pa.Array) -> pa.Array:
    if stored is None or stored.null_count == len(stored):
        return default
    return pc.coalesce(stored.combine_chunks().cast(pa.int64()), default)


def metadata_columns(names: list[str], raw: pa.Table, path: str, base_row_id: int | None,
                     default_row_commit_version: int | None, materialized: MaterializedColumns | None,
                     positions: np.ndarray | None = None) -> dict[str, pa.Array]:
    """The requested ``_metadata.*`` columns of the rows of one data file in ``raw`` (in file
    order, holding the materialized columns when the file has them): the whole file, or the rows
    at ``positions`` (some row groups)."""
    n = raw.num_rows
    out: dict[str, pa.Array] = {}
    index = pa.array(positions if positions is not None else np.arange(n, dtype=np.int64))
    for name in names:
        if name == ROW_INDEX:
            out[name] = index
        elif name == FILE_PATH:
            out[name] = pa.array([path] * n, pa.string()) if n else pa.array([], pa.string())
        elif name == ROW_ID:
            default = pc.add(index, base_row_id) if base_row_id is not None else pa.nulls(n, pa.int64())
            col = materialized.row_id if materialized else None
            out[name] = _coalesce(raw.column(col) if col and col in raw.column_names else None, default)
        elif name == ROW_COMMIT_VERSION:
            default = (pa.array(np.full(n, default_row_commit_version, dtype=np.int64))
                       if default_row_commit_version is not None else pa.nulls(n, pa.int64()))
            col = materialized.row_commit_version if materialized else None
            out[name] = _coalesce(raw.column(col) if col and col in raw.column_names else None, default)
    return out
