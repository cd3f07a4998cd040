"""Human-readable locations for conflict messages: ``part=3`` hints and file descriptions.

Owns only formatting. A conflict message must let a user see *where* two transactions collided
(which partition, which file) so that they can make their predicates disjoint; Delta's own hint is
the conflicting file's partition values, and deltatx does the same.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import pyarrow as pa


def _as_dict(partition_values: Any) -> dict[str, Any]:
    """An arrow map value (list of pairs), a dict, or None → dict."""
    if partition_values is None:
        return {}
    if isinstance(partition_values, dict):
        return partition_values
    return dict(partition_values)


def partition_hint(partition_values: Any, partition_columns: Sequence[str],
                   physical: Mapping[str, str] | None = None) -> str:
    """``"date=2024-01-01, country=NL"`` in partition-column order; ``""`` if unpartitioned.

    A null partition value prints as ``null``, as Delta's hint does. ``physical`` (column
    mapping) gives the key each column's value is stored under in ``partitionValues``.
    """
    if not partition_columns:
        return ""
    values = _as_dict(partition_values)
    keys = physical or {}
    shown = (values.get(keys.get(name, name)) for name in partition_columns)
    return ", ".join(f"{name}={'null' if v is None else v}" for name, v in zip(partition_columns, shown))


def row_values(files: pa.Table, index: int, columns: Iterable[str] = ("path", "partitionValues")) -> dict[str, Any]:
    """The named columns of one row of a file-action table, as Python values (one row only)."""
    row = files.slice(index, 1)
    return {name: row.column(name)[0].as_py() for name in columns}


def added_file_location(files: pa.Table, index: int, partition_columns: Sequence[str],
                        physical: Mapping[str, str] | None = None) -> str:
    """Where an added file landed: its partition hint, or its path on an unpartitioned table."""
    row = row_values(files, index)
    return partition_hint(row["partitionValues"], partition_columns, physical) or str(row["path"])


def file_location(files: pa.Table, index: int, partition_columns: Sequence[str],
                  physical: Mapping[str, str] | None = None) -> str:
    """A removed/read file: ``"part=3, file part=3/x.parquet"``, or just its path if unpartitioned."""
    row = row_values(files, index)
    hint = partition_hint(row["partitionValues"], partition_columns, physical)
    return f"{hint}, file {row['path']}" if hint else str(row["path"])


def operation_name(operation: str | None) -> str:
    """The winner's operation for a message; commits without commitInfo say so."""
    return operation or "an unknown operation (the commit has no commitInfo)"
