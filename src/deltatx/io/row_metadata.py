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

A read's ``where=`` may name them too (``_metadata.row_id < 10``, as Spark's ``WHERE``):
:func:`metadata_filter` binds such a predicate against the table schema plus the metadata columns
it names, and splits off what file pruning and conflict detection can use. They have no file
statistics, so only the conjuncts on table columns prune by stats (plus those on
``_metadata.file_path`` alone, which are decided exactly from the file's own path).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

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

if TYPE_CHECKING:
    from ..expr.model import Column, Expr

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


def check_row_tracking_columns(columns: Sequence[str] | None, row_tracking_supported: bool, uri: str) -> None:
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


# --------------------------------------------------------------------------------------------
# Metadata columns in a read's WHERE
# --------------------------------------------------------------------------------------------

#: what follows ``_metadata.`` in the names above, lower case -> the name
_BY_FIELD = {name.split(".", 1)[1]: name for name in METADATA_TYPES}


@dataclass(frozen=True)
class MetadataFilter:
    """A read predicate that names ``_metadata.*`` columns, bound.

    ``predicate`` is bound against ``schema`` (the table schema followed by the metadata columns
    it reads, each a flat column named as ``columns=`` names it), so the reader evaluates it on
    rows that carry those columns. ``table_part`` is the AND of its conjuncts on table columns
    only (None: none): it selects a superset of the rows, so it is what file pruning by stats
    and a transaction's recorded read predicate use. ``file_part`` is the AND of its conjuncts
    on ``_metadata.file_path`` alone (None: none): decided per file, exactly, from ``add.path``.
    """

    predicate: "Expr"
    schema: pa.Schema
    columns: tuple[str, ...]
    table_part: "Expr | None"
    file_part: "Expr | None"

    def narrow(self, files: pa.Table) -> pa.Table:
        """``files`` without those :attr:`file_part` excludes by their path (all of them when it
        cannot tell)."""
        mask = self.file_mask(files)
        return files if mask is None else files.filter(mask)

    def file_mask(self, files: pa.Table) -> pa.Array | None:
        """Per file of ``files`` (add rows): may it hold a row :attr:`file_part` keeps? None when
        there is no such part, or when it cannot be computed on the paths (then the rows decide,
        and report the failure if a row reaches it)."""
        if self.file_part is None or not files.num_rows:
            return None
        from ..errors import PredicateError
        from ..expr import matches

        paths = files.column("path")
        try:
            return matches(self.file_part, pa.table({FILE_PATH: paths.cast(pa.string())}))
        except PredicateError:
            return None


def mentions_metadata(where: "str | Expr") -> bool:
    """Cheap test run before binding a read's WHERE: could it name a ``_metadata.*`` column?
    (False means it certainly does not, and the read binds it as it always has.)"""
    if isinstance(where, str):
        return "_metadata" in where.lower()
    from ..expr.model import Column

    return any(isinstance(n, Column) and _metadata_name(n) is not None for n in where.walk())


def _metadata_name(c: "Column") -> str | None:
    """The ``_metadata.*`` name column reference ``c`` denotes (``_metadata.x`` as written when
    ``x`` is none of ours), or None when it is no metadata reference at all. Both Spark's
    ``_metadata.row_id`` (a field of ``_metadata``) and the quoted `` `_metadata.row_id` `` (the
    name ``columns=`` uses) count, case-insensitively."""
    if c.qualifier is not None:
        if c.qualifier.lower() != "_metadata":
            return None
        return _BY_FIELD.get(c.name.lower(), f"_metadata.{c.name}")
    if "." in c.name and c.name.split(".", 1)[0].lower() == "_metadata":  # `_metadata.row_id`, as columns= names it
        return _BY_FIELD.get(c.name.split(".", 1)[1].lower(), c.name)
    return None


def metadata_filter(parsed: "Expr", schema: pa.Schema) -> MetadataFilter | None:
    """Bind a parsed read predicate that names ``_metadata.*`` columns; None when it names none
    (the caller binds it against the table schema as usual).

    A table column called ``_metadata`` hides the metadata columns, as in Spark, where the
    table's own column wins: then the predicate is the table's like any other (None). An
    unknown ``_metadata.x`` is a PredicateError listing the ones there are."""
    from ..errors import PredicateError
    from ..expr import and_all, bind_predicate, conjuncts
    from ..expr.model import TRUE, Column

    if any(n.lower() == "_metadata" for n in schema.names):
        return None
    table_columns = {n.lower() for n in schema.names}
    named: dict[str, None] = {}

    def rewrite(node: "Expr") -> "Expr":
        if not isinstance(node, Column):
            return node
        name = _metadata_name(node)
        if name is None or (node.qualifier is None and node.name.lower() in table_columns):
            return node  # not ours, or a table column whose name has a dot in it (it wins, as in columns=)
        if name not in METADATA_TYPES:
            raise PredicateError(
                f"unknown metadata column {name!r} in {parsed}; a read's where= can name "
                f"{', '.join(METADATA_TYPES)}")
        named[name] = None
        return Column(name, None, node.path)

    rewritten = parsed.transform(rewrite)
    if not named:
        return None
    columns = tuple(named)
    extended = pa.schema(list(schema) + [metadata_field(n) for n in columns], metadata=schema.metadata)
    bound = bind_predicate(rewritten, extended)
    parts = conjuncts(bound)
    plain = [p for p in parts if not (p.columns() & named.keys())]
    on_path = [p for p in parts if p.columns() == {FILE_PATH}]
    table_part = and_all(plain) if plain else None
    return MetadataFilter(bound, extended, columns, None if table_part == TRUE else table_part,
                          and_all(on_path) if on_path else None)
