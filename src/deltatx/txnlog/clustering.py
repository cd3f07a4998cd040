"""Clustered tables in the log (PROTOCOL.md "Clustered Table"): the ``delta.clustering`` domain.

A table is clustered when its protocol lists the writer feature ``clustering`` (which needs
``domainMetadata``). Its clustering columns live in the domain ``delta.clustering`` as
``{"clusteringColumns": [["col"], ["a", "b"]]}`` — each column a path of *physical* names (a
nested field is a path; with column mapping off the physical name is the column name). Turning
clustering off keeps the domain with an empty list, as Delta does: a table listing the feature
always has the domain.

Files rewritten by a clustering run carry ``clusteringProvider`` = :data:`CLUSTERING_PROVIDER`
(Delta's ``"liquid"``); a clustering implementation may re-cluster only its own files and
unclustered ones.

Everything here is pure (no I/O): the domain's JSON both ways, and the one mapping between the
column names users write and the physical paths the log stores (:func:`physical_path`,
:func:`logical_name`) — the hook column mapping plugs into.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import orjson
import pyarrow as pa

from ..errors import CorruptLogError
from . import column_mapping
from .actions import DomainMetadata, Protocol

CLUSTERING_DOMAIN = "delta.clustering"
CLUSTERING_FEATURE = "clustering"
#: ``add.clusteringProvider`` of files laid out by liquid clustering (Delta's name)
CLUSTERING_PROVIDER = "liquid"
#: Delta's default ``spark.databricks.delta.clusteredTable.maxNumClusteringColumns``
MAX_CLUSTERING_COLUMNS = 4

_COLUMN_MAPPING_MODE = "delta.columnMapping.mode"

Path = tuple[str, ...]


def is_clustered(protocol: Protocol) -> bool:
    """The table supports clustering (PROTOCOL.md: then it *is* a clustered table)."""
    from .features import writer_features

    return CLUSTERING_FEATURE in writer_features(protocol)


def clustering_paths(domains: Mapping[str, DomainMetadata]) -> list[Path] | None:
    """The physical clustering column paths of a snapshot's domains; None without the domain.

    Reads both spellings found in the wild: Delta Spark's list of paths (``[["a", "b"]]``) and
    PROTOCOL.md's example of plain names (``["a"]``).
    """
    found = domains.get(CLUSTERING_DOMAIN)
    if found is None or found.removed:
        return None
    try:
        doc = orjson.loads(found.configuration or "{}")
        columns = doc.get("clusteringColumns", []) if isinstance(doc, dict) else None
        if not isinstance(columns, list):
            raise TypeError("clusteringColumns is not a list")
        paths = []
        for column in columns:
            path = (column,) if isinstance(column, str) else tuple(column)
            if not path or not all(isinstance(p, str) for p in path):
                raise TypeError(f"clustering column {column!r} is not a name or a list of names")
            paths.append(path)
        return paths
    except (orjson.JSONDecodeError, TypeError) as exc:
        raise CorruptLogError(
            f"the {CLUSTERING_DOMAIN} domain has an unreadable configuration ({exc}): "
            f"{found.configuration!r}"
        ) from None


def clustering_domain(paths: Iterable[Sequence[str]]) -> DomainMetadata:
    """The ``delta.clustering`` domain action for these physical paths (empty: not clustered)."""
    doc = {"clusteringColumns": [list(p) for p in paths]}
    return DomainMetadata(domain=CLUSTERING_DOMAIN, configuration=orjson.dumps(doc).decode(), removed=False)


# --------------------------------------------------------------------------------------------
# Logical names <-> physical paths (the single place column mapping has to hook into)
# --------------------------------------------------------------------------------------------


def split_name(name: str) -> Path:
    """``"a.b"`` → ``("a", "b")``; backquotes keep a dot inside a name (```a.b`.c``)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in name:
        if ch == "`":
            quoted = not quoted
        elif ch == "." and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return tuple(p.strip() for p in parts)


def join_path(path: Sequence[str]) -> str:
    """The inverse of :func:`split_name` (backquotes only where a part holds a dot)."""
    return ".".join(f"`{p}`" if "." in p else p for p in path)


def _uses_column_mapping(configuration: Mapping[str, str]) -> bool:
    return configuration.get(_COLUMN_MAPPING_MODE, "none").strip().lower() not in ("", "none")


def _physical(field: pa.Field, mapped: bool) -> str:
    # the schema's metadata values are JSON (``"col-…"``): column_mapping decodes them
    return column_mapping.physical_name(field) if mapped else field.name


def _children(t: pa.DataType) -> list[pa.Field]:
    return [t.field(i) for i in range(t.num_fields)] if pa.types.is_struct(t) else []


def resolve_field(fields: Sequence[pa.Field], path: Sequence[str]) -> tuple[Path, pa.Field] | None:
    """The field at a logical ``path`` (exact names first, else a unique case-insensitive match,
    as Spark resolves columns); returns (its exact logical path, the field) or None."""
    resolved: list[str] = []
    field: pa.Field | None = None
    current = list(fields)
    for part in path:
        match = [f for f in current if f.name == part]
        if not match:
            match = [f for f in current if f.name.lower() == part.lower()]
        if len(match) != 1:
            return None
        field = match[0]
        resolved.append(field.name)
        current = _children(field.type)
    return (tuple(resolved), field) if field is not None else None


def physical_path(schema: pa.Schema, configuration: Mapping[str, str], logical: Sequence[str]) -> Path:
    """The physical path the log stores for a (resolved) logical path: the names themselves
    without column mapping, each field's ``delta.columnMapping.physicalName`` with it."""
    mapped = _uses_column_mapping(configuration)
    out: list[str] = []
    current = list(schema)
    for part in logical:
        field = next(f for f in current if f.name == part)
        out.append(_physical(field, mapped))
        current = _children(field.type)
    return tuple(out)


def logical_name(schema: pa.Schema, configuration: Mapping[str, str], physical: Sequence[str]) -> str | None:
    """The dotted logical name of a physical path, or None when the schema has no such column."""
    mapped = _uses_column_mapping(configuration)
    out: list[str] = []
    current = list(schema)
    for part in physical:
        field = next((f for f in current if _physical(f, mapped) == part), None)
        if field is None:
            return None
        out.append(field.name)
        current = _children(field.type)
    return join_path(out)
