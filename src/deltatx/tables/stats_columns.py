"""``delta.dataSkippingStatsColumns``: Delta's rules for the list, and keeping it in step with
renames and drops.

Why: the list names columns by their *logical* names. Delta refuses a list that names a
partition column, a column the schema lacks, a type statistics cannot order (only numbers,
dates, timestamps and strings can be skipped on; a struct stands for all its leaves) or the same
leaf twice. And Delta's RENAME COLUMN / DROP COLUMN rewrite the list: otherwise, after a rename,
new files get no statistics for the renamed column (and a later column that takes the old name
gets them instead) — skipping quietly lost, or moved to another column. An empty list means no
column statistics at all (numRecords only), as in Delta.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import pyarrow as pa

from ..errors import InvalidPropertyError
from ..txnlog.clustering import resolve_field
from ..txnlog.stats import split_column_name
from . import properties as props

Path = tuple[str, ...]


def configured_paths(configuration: Mapping[str, str]) -> list[Path] | None:
    """The list's column paths (each a tuple of name parts); None when the property is unset."""
    names = props.stats_columns(dict(configuration))
    return None if names is None else [split_column_name(n) for n in names]


def _skippable(t: pa.DataType) -> bool:
    """Types Delta keeps min/max for (its SkippingEligibleDataType)."""
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_date(t)
            or pa.types.is_timestamp(t) or pa.types.is_string(t) or pa.types.is_large_string(t))


def _leaves(prefix: Path, field: pa.Field, name: str) -> list[Path]:
    if pa.types.is_struct(field.type):
        return [leaf for child in field.type for leaf in _leaves(prefix + (child.name,), child, name)]
    if not _skippable(field.type):
        raise InvalidPropertyError(
            f"{props.STATS_COLUMNS}: column {name!r} is of type {field.type}, which has no statistics to skip "
            f"files by (numbers, dates, timestamps and strings do)")
    return [tuple(p.lower() for p in prefix)]


def check_stats_columns(schema: pa.Schema, partition_columns: Sequence[str],
                        configuration: Mapping[str, str]) -> None:
    """Raise InvalidPropertyError unless the list follows Delta's rules (see the module)."""
    paths = configured_paths(configuration)
    if not paths:
        return
    partitioned = {c.lower() for c in partition_columns}
    data_fields = list(schema)
    seen: set[Path] = set()
    for path in paths:
        name = ".".join(path)
        if len(path) == 1 and path[0].lower() in partitioned:
            raise InvalidPropertyError(
                f"{props.STATS_COLUMNS}: {name!r} is a partition column; its values are in the log already")
        found = resolve_field(data_fields, path)
        field = found[1] if found is not None else None
        if field is None:
            raise InvalidPropertyError(f"{props.STATS_COLUMNS}: column {name!r} is not in the table's schema "
                                       f"{schema.names}")
        for leaf in _leaves(path, field, name):
            if leaf in seen:
                raise InvalidPropertyError(f"{props.STATS_COLUMNS}: column {'.'.join(leaf)!r} is listed twice")
            seen.add(leaf)


def _quoted(path: Path) -> str:
    return ".".join(f"`{p.replace('`', '``')}`" if any(c in p for c in ".,` ") else p for p in path)


def _under(path: Path, prefix: Path) -> bool:
    return len(path) >= len(prefix) and all(a.lower() == b.lower() for a, b in zip(path, prefix))


def after_rename(configuration: Mapping[str, str], old: Path, new: Path) -> dict[str, str] | None:
    """The configuration with the list following a rename of ``old`` to ``new`` (a field and its
    children); None when nothing changes."""
    paths = configured_paths(configuration)
    if not paths or not any(_under(p, old) for p in paths):
        return None
    renamed = [new + p[len(old):] if _under(p, old) else p for p in paths]
    return {**configuration, props.STATS_COLUMNS: ",".join(_quoted(p) for p in renamed)}


def after_drop(configuration: Mapping[str, str], dropped: Sequence[Path]) -> dict[str, str] | None:
    """The configuration with the dropped columns (and their children) out of the list; None
    when nothing changes."""
    paths = configured_paths(configuration)
    if not paths:
        return None
    kept = [p for p in paths if not any(_under(p, d) for d in dropped)]
    if len(kept) == len(paths):
        return None
    return {**configuration, props.STATS_COLUMNS: ",".join(_quoted(p) for p in kept)}
