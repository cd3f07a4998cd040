"""Reading a table's data files back into arrow: the rows a set of ``add`` actions describe.

Owns the read half of the data path::

    files (add rows) ──► decoded paths + typed partition values (columnar, per distinct partition)
                     ──► one pyarrow Dataset (parallel Parquet scan, filter pushdown, row-group pruning)
                     ──► batches cast to the table schema, in schema (or ``columns``) order

Partition columns are not stored in Delta data files: they come back from ``partitionValues``
(strings parsed per PROTOCOL.md, '' or missing = null) as the dataset's per-file partition
expressions, so a filter on them prunes whole files before any I/O. Columns an older file lacks
(schema evolution) read as nulls. A file written with nanosecond timestamps that do not fit in
microseconds makes the dataset's safe cast fail; those reads fall back to a per-file path that
truncates them (Delta's timestamp types have microsecond precision).

Before any value is read, every file's column types are checked against the table's
(:func:`check_file_columns`): Arrow would convert whatever it can (a bool to 0/1, the string '7'
to 7, a timestamp to its integer) and a rewrite would then commit the converted values. Like
Delta, a file column is read only as its own type, another physical encoding of it, or a type it
safely widens to; a value that still does not fit (a uint64 above the long range) fails the read
as SchemaMismatchError naming the file.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterator, NoReturn, Sequence, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..errors import (
    CorruptDataFileError,
    DataFileNotFoundError,
    PredicateError,
    SchemaMismatchError,
)
from ..txnlog import column_mapping
from ..txnlog.schema import is_list_type, is_text_type, type_holds
from .grouping import group_codes
from .deletion_vectors import deleted_rows, keep_mask
from ..txnlog.partition_values import partition_values_table
from .paths import absent, data_file_path, decode_path, first_and_more
from .row_group_cache import ROW_GROUPS, FileKey, local_key, logged_key
from .row_metadata import MaterializedColumns, is_metadata_column, metadata_columns, metadata_field

if TYPE_CHECKING:
    from ..expr import Expr
    from ..txnlog.column_mapping import ColumnMapping
    from ..txnlog.store import LogStore

_PARQUET = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(coerce_int96_timestamp_unit="us"))

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)

_Data = TypeVar("_Data", pa.Table, pa.RecordBatch)


# --------------------------------------------------------------------------------------------
# File column types: what a file may hold for a table type
# --------------------------------------------------------------------------------------------



def _is_bytes(t: pa.DataType) -> bool:
    return (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)
            or pa.types.is_fixed_size_binary(t))



def _integer_digits(t: pa.DataType) -> int:
    """Decimal digits an integer type needs (type widening: ``integer`` → decimal(10), ``long`` → 20)."""
    return 10 if t.bit_width <= 32 else 20


def _leaf_readable(file_type: pa.DataType, table_type: pa.DataType) -> bool:
    """Whether a file's non-nested column of ``file_type`` holds values of ``table_type``.

    The same type in another physical encoding (int8/int16/unsigned for an integer, float for a
    double, any timestamp unit or INT96, a decimal of fewer digits, large/view strings, binary
    for a string as Spark reads it) or a change type widening makes (PROTOCOL.md: integers to
    double or decimal, date to timestamp_ntz). Integer to integer is any width: a value outside
    the table type fails the (safe) cast, it is never wrapped.
    """
    t = table_type
    f = file_type
    if f.equals(t) or pa.types.is_null(f):
        return True
    if pa.types.is_integer(t):
        return pa.types.is_integer(f)
    if pa.types.is_floating(t):
        return (pa.types.is_floating(f) and f.bit_width <= t.bit_width) or (
            t.bit_width == 64 and pa.types.is_integer(f) and f.bit_width <= 32)
    if pa.types.is_decimal(t):
        whole = t.precision - t.scale
        if pa.types.is_decimal(f):
            return f.scale <= t.scale and f.precision - f.scale <= whole
        return pa.types.is_integer(f) and _integer_digits(f) <= whole
    if is_text_type(t):
        return is_text_type(f) or (_is_bytes(f) and not pa.types.is_fixed_size_binary(f))
    if _is_bytes(t):
        return _is_bytes(f) or is_text_type(f)
    if pa.types.is_date(t):
        return pa.types.is_date(f)
    if pa.types.is_timestamp(t):
        return pa.types.is_timestamp(f) or (t.tz is None and pa.types.is_date(f))
    return False


def _unreadable(file_type: pa.DataType, table_type: pa.DataType, by_field_id: bool,
                path: str) -> tuple[str, pa.DataType, pa.DataType] | None:
    """The first part of a file column that cannot be read as ``table_type``: (its path, its type
    in the file, the table's type), or None when all of it can. Struct fields are matched by name
    (by Parquet field id in column mapping ``id`` mode); ones the file lacks read as nulls, ones
    the table lacks are not read."""
    f = file_type.value_type if pa.types.is_dictionary(file_type) else file_type
    t = table_type
    if pa.types.is_null(f):
        return None
    if pa.types.is_struct(t):
        if not pa.types.is_struct(f):
            return path, f, t
        if by_field_id:
            from ..txnlog.column_mapping import _field_id

            ids = {_field_id(c): c for c in f if _field_id(c) is not None}
            found = [(c, ids.get(_field_id(c))) for c in t]
        else:
            found = [(c, f.field(c.name) if f.get_field_index(c.name) >= 0 else None) for c in t]
        for child, in_file in found:
            problem = in_file is not None and _unreadable(in_file.type, child.type, by_field_id,
                                                          f"{path}.{child.name}")
            if problem:
                return problem
        return None
    if is_list_type(t):
        if not is_list_type(f):
            return path, f, t
        return _unreadable(f.value_type, t.value_type, by_field_id, f"{path}.element")
    if pa.types.is_map(t):
        if not pa.types.is_map(f):
            return path, f, t
        return (_unreadable(f.key_type, t.key_type, by_field_id, f"{path}.key")
                or _unreadable(f.item_type, t.item_type, by_field_id, f"{path}.value"))
    return None if _leaf_readable(f, t) else (path, f, t)


def check_file_columns(file_schema: pa.Schema, wanted: Sequence[pa.Field], path: str,
                       renames: dict[str, str] | None = None, by_field_id: bool = False) -> None:
    """Raise SchemaMismatchError unless every ``wanted`` table column file ``path`` has can be read
    as the table's type (:func:`_leaf_readable`). ``renames``: the file's name of a wanted column
    when it differs (column mapping ``id`` mode, where nested fields match by field id too).

    Why refuse rather than cast: Arrow casts whatever it can, so a foreign writer's bool, string
    or timestamp column would come back as plausible integers, and OPTIMIZE or a DML rewrite
    would commit them as the table's data. Delta's reader refuses such a file too.
    """
    for field in wanted:
        name = renames.get(field.name) if renames is not None else field.name
        index = file_schema.get_field_index(name) if name is not None else -1
        if index < 0:
            continue  # not in the file: reads as nulls (schema evolution)
        problem = _unreadable(file_schema.field(index).type, field.type, by_field_id, field.name)
        if problem is not None:
            column, in_file, in_table = problem
            raise SchemaMismatchError(
                f"column {column!r} of data file {path!r} is {in_file} in the file, which cannot be read as "
                f"the table's {in_table}; the file was written with an incompatible type. Nothing was "
                f"changed: rewrite or remove the file, or time travel to a version without it")


def _is_view(t: pa.DataType) -> bool:
    return (pa.types.is_string_view(t) or pa.types.is_binary_view(t) or pa.types.is_list_view(t)
            or pa.types.is_large_list_view(t))


def _holds_view_types(dataset: ds.FileSystemDataset) -> bool:
    """Whether a file of ``dataset`` stores a column as an Arrow view type (deltalake's rewrites
    store ``string_view``). Arrow's scan binds a pushed filter to each file's own types and has
    no kernel comparing a view with the table's type, so such a scan filters after reading
    (the scan itself converts the columns)."""
    return any(type_holds(f.type, _is_view) for fragment in dataset.get_fragments()
               for f in fragment.physical_schema)


def checked_dataset(paths: list[str], schema: pa.Schema, filesystem: pafs.FileSystem,
                    partitions: Sequence[pc.Expression | None] | None = None,
                    columns: Sequence[str] | None = None) -> ds.FileSystemDataset:
    """The Parquet files ``paths`` as one dataset of ``schema``, after checking that each file's
    ``columns`` (default: all of ``schema``) can be read as the table's types
    (:func:`check_file_columns`). The footers read for the check stay with the fragments, so the
    scan does not read them again; they are read a few files at a time."""
    fragments = [_PARQUET.make_fragment(p, filesystem=filesystem,
                                        partition_expression=partitions[i] if partitions is not None else None)
                 for i, p in enumerate(paths)]
    names = schema.names if columns is None else [c for c in dict.fromkeys(columns) if c in schema.names]
    wanted = [schema.field(c) for c in names]

    def check(i: int) -> None:
        check_file_columns(fragments[i].physical_schema, wanted, paths[i])

    if len(fragments) == 1:
        check(0)
    elif fragments:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(check, range(len(fragments))))
    return ds.FileSystemDataset(fragments, schema=schema, format=_PARQUET, filesystem=filesystem)


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def read_files(
    store: "LogStore",
    files: pa.Table,
    schema: pa.Schema,
    partition_columns: list[str],
    columns: list[str] | None = None,
    filter: pc.Expression | None = None,
    materialized: MaterializedColumns | None = None,
    prune: "Expr | None" = None,
    column_mapping: "ColumnMapping | None" = None,
) -> pa.Table:
    """The rows of the given files as one table with exactly ``schema``'s (or ``columns``') types.

    Rows a file's deletion vector deletes are left out (before ``filter`` is applied).
    ``columns`` may name ``_metadata.*`` columns (:mod:`.row_metadata`); those reads go file by
    file, and ``materialized`` names the row-tracking columns of the files. ``prune`` (the bound
    predicate ``filter`` was made from) lets those reads skip the columns it does not name and
    the row groups whose footer statistics it cannot match. ``filter`` and ``prune`` may name
    ``_metadata.*`` columns too (a read's ``where=``): those are made for the predicate, file by
    file, and left out of the result unless ``columns`` names them. With a ``column_mapping`` the files
    hold physical columns (:func:`_read_mapped`); names, ``filter`` and the result stay logical.
    """
    try:
        if column_mapping is not None:
            return _read_mapped(store, files, schema, partition_columns, columns, filter, materialized, prune,
                                column_mapping)
        return _read(store, files, schema, partition_columns, columns, filter, materialized, prune)
    except pa.ArrowInvalid as exc:
        raise_if_corrupt(exc, store, files["path"][0].as_py() if files.num_rows == 1 else None)
        raise_if_filter_failed(exc, filter)
        raise


def _read(store: "LogStore", files: pa.Table, schema: pa.Schema, partition_columns: list[str],
          columns: list[str] | None, filter: pc.Expression | None, materialized: MaterializedColumns | None,
          prune: "Expr | None", by_field_id: bool = False) -> pa.Table:
    out_schema = _output_schema(schema, columns)
    if files.num_rows == 0:
        return out_schema.empty_table()
    if (by_field_id or any(is_metadata_column(n) for n in out_schema.names)
            or (filter is not None and _reads_metadata(prune))):
        plan = _ScanPlan(store, files, schema, partition_columns, materialized, prune, by_field_id)
        # the metadata columns the predicate reads but the caller did not ask for are read for it
        # and dropped by the conform (Spark's ``WHERE _metadata.row_id < 10`` returns no row_id)
        extra = [n for n in plan.filter_metadata if n not in out_schema.names] if filter is not None else []
        return _conform(plan.read_per_file(out_schema.names + extra, filter), out_schema)
    plain, with_dvs = split_deletion_vectors(files)
    parts = []
    if plain.num_rows:
        plan = _ScanPlan(store, plain, schema, partition_columns, prune=prune)
        try:
            parts.append(plan.scan_table(out_schema.names, filter))
        except _ARROW_ERRORS as exc:
            if not _is_cast_failure(exc):
                _raise_read_error(exc)
            parts.append(plan.read_per_file(out_schema.names, filter))
        except OSError as exc:
            plan.raise_if_missing(exc)
            raise
    if with_dvs.num_rows:
        parts.append(_ScanPlan(store, with_dvs, schema, partition_columns).read_per_file(out_schema.names, filter))
    parts = [_conform(p, out_schema) for p in parts]
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


def iter_batches(
    store: "LogStore",
    files: pa.Table,
    schema: pa.Schema,
    partition_columns: list[str],
    columns: list[str] | None = None,
    filter: pc.Expression | None = None,
    materialized: MaterializedColumns | None = None,
    column_mapping: "ColumnMapping | None" = None,
) -> Iterator[pa.RecordBatch]:
    """Stream the rows of the given files, batch by batch, cast to ``schema``.

    Files without a deletion vector come first, in file order; then the files with one, each
    read whole, its deleted rows left out. ``column_mapping``: as for :func:`read_files`.
    """
    try:
        if column_mapping is not None:
            yield from _iter_mapped(store, files, schema, partition_columns, columns, filter, materialized,
                                    column_mapping)
            return
        yield from _iter(store, files, schema, partition_columns, columns, filter, materialized)
    except pa.ArrowInvalid as exc:
        raise_if_corrupt(exc, store, files["path"][0].as_py() if files.num_rows == 1 else None)
        raise_if_filter_failed(exc, filter)
        raise


#: what Arrow says of a file that is not (or no longer) Parquet
_NOT_PARQUET = ("Parquet magic bytes not found", "Parquet file size is 0 bytes", "Couldn't deserialize thrift",
                "Could not open Parquet input source")


def raise_if_filter_failed(exc: BaseException, filter: pc.Expression | None) -> None:
    """A value the filter cannot compute (a CAST out of the target type's range, as Spark's ANSI
    mode refuses it): PredicateError, not Arrow's own exception."""
    if filter is not None:
        raise PredicateError(f"the predicate cannot be evaluated on the table's rows: {exc}") from exc


def raise_if_corrupt(exc: BaseException, store: "LogStore", path: str | None = None) -> None:
    """A data file the log references that Arrow cannot read as Parquet: CorruptDataFileError,
    naming the file when the read was of one (``path``, as the log names it)."""
    text = str(exc)
    if any(marker in text for marker in _NOT_PARQUET):
        which = f"data file {path!r} of {store.uri!r}" if path is not None else f"a data file of {store.uri!r}"
        raise CorruptDataFileError(
            f"{which} is not a readable Parquet file ({text}); nothing was changed. "
            f"Restore the file, or time travel to a version that does not reference it") from exc


def _iter(store: "LogStore", files: pa.Table, schema: pa.Schema, partition_columns: list[str],
          columns: list[str] | None, filter: pc.Expression | None, materialized: MaterializedColumns | None,
          by_field_id: bool = False) -> Iterator[pa.RecordBatch]:
    out_schema = _output_schema(schema, columns)
    if files.num_rows == 0:
        return
    if by_field_id or any(is_metadata_column(n) for n in out_schema.names):  # positions/ids/field ids: by file
        plan = _ScanPlan(store, files, schema, partition_columns, materialized, by_field_id=by_field_id)
        for i in range(files.num_rows):
            for batch in _conform(plan.read_one(i, out_schema.names, filter), out_schema).to_batches():
                if batch.num_rows:
                    yield batch
        return
    plain, with_dvs = split_deletion_vectors(files)
    if plain.num_rows:
        yield from _iter_plain(_ScanPlan(store, plain, schema, partition_columns), out_schema, filter)
    if with_dvs.num_rows:
        plan = _ScanPlan(store, with_dvs, schema, partition_columns)
        for i in range(with_dvs.num_rows):
            for batch in _conform(plan.read_one(i, out_schema.names, filter), out_schema).to_batches():
                if batch.num_rows:
                    yield batch


def _read_mapped(store: "LogStore", files: pa.Table, schema: pa.Schema, partition_columns: list[str],
                 columns: list[str] | None, filter: pc.Expression | None,
                 materialized: MaterializedColumns | None, prune: "Expr | None",
                 mapping: "ColumnMapping") -> pa.Table:
    """A column-mapped read: the physical columns are read (by name, or in ``id`` mode by Parquet
    field id, file by file) and relabelled with the logical names.

    With ``prune`` (the bound predicate behind ``filter``) the predicate is renamed to physical
    names and pushed into the read like any other; a bare ``filter`` names logical columns, so it
    runs on the relabelled rows (every column is read for it).
    """
    out_schema = _output_schema(schema, columns)
    names = list(out_schema.names)
    pushed = _physical_predicate(prune, mapping) if filter is not None and prune is not None else None
    if filter is not None and pushed is None:
        names += [n for n in schema.names if n not in names]
    from ..expr import to_arrow  # expr imports this module (partition values)

    physical_schema = mapping.physical_schema(schema)
    physical = _read(store, files, physical_schema, mapping.physical_names(partition_columns),
                     mapping.physical_names(names), to_arrow(pushed, physical_schema) if pushed is not None else None,
                     materialized, pushed, mapping.by_field_id)
    table = mapping.to_logical(physical, names)
    if filter is not None and pushed is None:
        table = table.filter(filter)
    return _conform(table.select(out_schema.names), mapping.output_schema(out_schema))


def _physical_predicate(predicate: "Expr", mapping: "ColumnMapping") -> "Expr":
    """``predicate`` with every column (and struct field path) under its physical name."""
    from dataclasses import replace

    from ..expr import map_columns

    def rename(column):
        name, path = mapping.physical_path(column.name, column.path)
        return replace(column, name=name, path=path)

    return map_columns(predicate, rename)


def _iter_mapped(store: "LogStore", files: pa.Table, schema: pa.Schema, partition_columns: list[str],
                 columns: list[str] | None, filter: pc.Expression | None,
                 materialized: MaterializedColumns | None, mapping: "ColumnMapping") -> Iterator[pa.RecordBatch]:
    """:func:`_read_mapped`, batch by batch (``filter`` runs on the relabelled rows)."""
    out_schema = _output_schema(schema, columns)
    names = list(out_schema.names) + ([n for n in schema.names if n not in out_schema.names] if filter is not None
                                      else [])
    out = mapping.output_schema(out_schema)
    for batch in _iter(store, files, mapping.physical_schema(schema), mapping.physical_names(partition_columns),
                       mapping.physical_names(names), None, materialized, mapping.by_field_id):
        batch = mapping.to_logical(batch, names)
        if filter is not None:
            batch = batch.filter(filter)
        if batch.num_rows:
            yield _conform(batch.select(out_schema.names), out)


def _iter_plain(plan: "_ScanPlan", out_schema: pa.Schema, filter: pc.Expression | None) -> Iterator[pa.RecordBatch]:
    yielded = 0
    try:
        for batch in plan.scan_batches(out_schema.names, filter):
            if batch.num_rows:
                yielded += batch.num_rows
                yield _conform(batch, out_schema)
    except _ARROW_ERRORS as exc:
        if not _is_cast_failure(exc):
            _raise_read_error(exc)
        # The scan is ordered, so the per-file path produces the same rows in the same order:
        # skip the ones already handed out and continue from there.
        rest = plan.read_per_file(out_schema.names, filter).slice(yielded)
        for batch in _conform(rest, out_schema).to_batches():
            if batch.num_rows:
                yield batch
    except OSError as exc:
        plan.raise_if_missing(exc)
        raise


def _reads_metadata(prune: "Expr | None") -> bool:
    """Whether the bound predicate ``prune`` reads a ``_metadata.*`` column (those reads go file
    by file: the columns are made per file, before the predicate runs)."""
    return prune is not None and any(is_metadata_column(c) for c in prune.columns())


def split_deletion_vectors(files: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(files without a deletion vector, files with one)."""
    if "deletionVector" not in files.column_names or files.num_rows == 0:
        return files, files.slice(0, 0)
    has = pc.is_valid(files.column("deletionVector"))
    if not pc.any(has).as_py():
        return files, files.slice(0, 0)
    return files.filter(pc.invert(has)), files.filter(has)


class _ScanPlan:
    """The files of one read: decoded paths, partition expressions, the pyarrow view of them."""

    def __init__(self, store: "LogStore", files: pa.Table, schema: pa.Schema, partition_columns: list[str],
                 materialized: MaterializedColumns | None = None, prune: "Expr | None" = None,
                 by_field_id: bool = False):
        self.store = store
        self.by_field_id = by_field_id  # column mapping ``id`` mode: file columns found by field id
        self.prune = prune  # the predicate behind a filter, when the caller has it
        self.files = files
        self.materialized = materialized
        self.schema = schema
        self.partition_columns = [c for c in partition_columns if c in schema.names]
        self.filesystem = store.arrow_fs
        self.paths = [data_file_path(store, decode_path(p)) for p in files.column("path").to_pylist()]
        self.partition_values = (
            partition_values_table(files, schema, self.partition_columns) if self.partition_columns else None
        )
        self.deletion_vectors: list[dict[str, Any] | None] = (
            files.column("deletionVector").to_pylist() if "deletionVector" in files.column_names
            else [None] * files.num_rows
        )

    @cached_property
    def filter_metadata(self) -> list[str]:
        """The ``_metadata.*`` columns ``prune`` reads (none without it)."""
        return sorted(c for c in self.prune.columns() if is_metadata_column(c)) if self.prune is not None else []

    def scan_table(self, names: list[str], filter: pc.Expression | None) -> pa.Table:
        """The ``names`` columns of every file (no deletion vectors here), ``filter`` applied."""
        columns, pushed, after = self._scan_split(names, filter)
        dataset = self.dataset(columns, filter)
        if pushed is not None and _holds_view_types(dataset):
            columns, pushed, after = self._filter_after_scan(names, filter)
        table = dataset.to_table(columns=columns, filter=pushed, use_threads=True)
        return table if after is None else table.filter(after).select(names)

    def scan_batches(self, names: list[str], filter: pc.Expression | None) -> Iterator[pa.RecordBatch]:
        """:meth:`scan_table`, batch by batch, in file order."""
        columns, pushed, after = self._scan_split(names, filter)
        dataset = self.dataset(columns, filter)
        if pushed is not None and _holds_view_types(dataset):
            columns, pushed, after = self._filter_after_scan(names, filter)
        for batch in dataset.to_batches(columns=columns, filter=pushed, use_threads=True):
            yield batch if after is None else batch.filter(after).select(names)

    def _scan_split(self, names: list[str], filter: pc.Expression | None
                    ) -> tuple[list[str], pc.Expression | None, pc.Expression | None]:
        """(columns to read, filter for the scan, filter for after it).

        Arrow's scan judges each row group by its Parquet min/max first, and those leave NaN
        out: a float column whose other values are all equal is taken for that constant, so
        ``isnan(x)`` or ``x != 0`` would skip the group's NaN rows. A filter on a float column is
        therefore applied to the rows read, never pushed into the scan."""
        if filter is None or not self.filter_reads_floats():
            return names, filter, None
        return self._filter_after_scan(names, filter)

    def _filter_after_scan(self, names: list[str], filter: pc.Expression
                           ) -> tuple[list[str], pc.Expression | None, pc.Expression | None]:
        """(columns to read, None, ``filter``): the filter's columns read too, applied after."""
        wanted = self.prune.columns() if self.prune is not None else set(self.schema.names)
        return names + [n for n in self.schema.names if n in wanted and n not in names], None, filter

    def filter_reads_floats(self) -> bool:
        """Whether the filter may read a floating-point column (any, without ``prune``)."""
        wanted = self.prune.columns() if self.prune is not None else None
        return any(type_holds(f.type, pa.types.is_floating) for f in self.schema if wanted is None or f.name in wanted)

    def dataset(self, columns: list[str] | None = None, filter: pc.Expression | None = None) -> ds.FileSystemDataset:
        """The files as one dataset, each file's ``columns`` and ``filter``'s columns checked to be
        readable as the table's types first (:func:`checked_dataset`)."""
        if filter is not None and columns is not None:  # a bare filter may name any column
            columns = None if self.prune is None else columns + sorted(self.prune.columns())
        return checked_dataset(self.paths, self.schema, self.filesystem, self._partition_expressions(), columns)

    def _partition_expressions(self) -> list[pc.Expression] | None:
        """Per file, ``col == value`` (or ``is_null``) ANDed, built once per distinct partition."""
        pv = self.partition_values
        if pv is None:
            return None
        group = group_codes([pv.column(c) for c in self.partition_columns])
        firsts = (
            pa.table({"g": group, "row": pa.array(range(len(group)), pa.int64())})
            .group_by("g", use_threads=False)
            .aggregate([("row", "min")])
        )
        expressions: dict[int, pc.Expression] = {}
        for code, row in zip(firsts.column("g").to_pylist(), firsts.column("row_min").to_pylist()):
            expr = None
            for col in self.partition_columns:
                scalar = pv.column(col)[row]
                term = pc.field(col) == scalar if scalar.is_valid else pc.field(col).is_null()
                expr = term if expr is None else expr & term
            expressions[code] = expr
        return [expressions[c] for c in group.to_pylist()]

    def read_one(self, i: int, names: list[str], filter: pc.Expression | None) -> pa.Table:
        """File ``i`` alone, every row in file order, partition values added, its deletion vector
        applied, then ``filter``; the ``names`` columns. Only timestamps are cast unsafely (ns -> us
        truncation); any other value that does not fit the table type raises SchemaMismatchError.

        Without a filter only the ``names`` columns are read from the file; with one (its columns
        are not known here) all of them are. Deletion-vector positions count the file's rows, so
        projection does not move them; the filter is never pushed into the read.
        """
        meta = [n for n in names if is_metadata_column(n)]
        prune = self.prune if filter is not None else None
        by_predicate = self.filter_metadata if prune is not None else []
        if filter is not None and prune is None:
            wanted = self.schema
        else:
            needed = [n for n in dict.fromkeys(names) if not is_metadata_column(n)]
            needed += [n for n in self.schema.names if prune is not None and n in prune.columns() and n not in needed]
            wanted = pa.schema([self.schema.field(n) for n in needed])
        physical = self.materialized.physical() if (meta or by_predicate) and self.materialized else []
        cache_key = self._cache_key(i)
        try:
            with pq.ParquetFile(self.paths[i], filesystem=self.filesystem, coerce_int96_timestamp_unit="us",
                                metadata=ROW_GROUPS.footer(cache_key),
                                pre_buffer=pre_buffers(self.filesystem)) as pf:
                ROW_GROUPS.keep_footer(cache_key, pf.metadata)
                in_file = set(pf.schema_arrow.names)
                data_fields = [f for f in wanted if f.name not in self.partition_columns]
                by_id = column_mapping.columns_by_field_id(pf.schema_arrow, data_fields) if self.by_field_id else None
                check_file_columns(pf.schema_arrow, data_fields, self.paths[i], by_id, self.by_field_id)
                if by_id is None:
                    read = [f.name for f in data_fields if f.name in in_file]
                else:
                    read = [by_id[f.name] for f in data_fields if f.name in by_id]
                read += [c for c in physical if c in in_file and c not in read]
                groups = self._row_groups(i, pf, prune, filter, cache_key) if prune is not None else None
                pf_metadata = pf.metadata
                if groups is None:
                    raw, positions = pf.read(columns=read), None
                else:
                    # a point change: one or two groups, decoded on this thread (handing a single
                    # group to Arrow's pool only adds hand-offs) and kept for the next point change
                    raw = ROW_GROUPS.read_row_groups(pf, cache_key, groups, read)
                    positions = None if prune is not None else _group_positions(pf_metadata, groups)
                file_rows = pf_metadata.num_rows
            if by_id is not None:
                raw = column_mapping.align_by_field_id(raw, by_id, data_fields, self.paths[i])
        except OSError as exc:
            self.raise_if_missing(exc)
            raise
        # no column wanted (a predicate without columns, ``TRUE``; only ``_metadata.*``): the file's
        # rows without columns, not a table of none (which matched no row)
        table = pa.table(self._file_columns(wanted, raw, i), schema=wanted) if len(wanted) else raw.select([])
        if by_predicate:
            # the predicate reads metadata columns: made for every row read, before it runs, from
            # the same physical positions a read of those columns uses (deleted rows included)
            read_at = None if groups is None else _group_positions(pf_metadata, groups)
            table = self._with_metadata(table, by_predicate, raw, i, read_at)
        if prune is not None:
            from ..expr.point_rows import matching_positions  # expr imports this module (partition values)
            from ..expr.rows import matches

            # Filter first, with the bound predicate: positions, metadata columns and the DV test
            # then cost only the matching rows (a point change reads a 128k-row group for one row).
            hit = matching_positions(prune, table)
            if hit is None:
                try:
                    hit = _true_positions(matches(prune, table))
                except PredicateError:
                    if self.deletion_vectors[i] is None:
                        raise
                    # a value the predicate cannot compute (an overflow, a failing CAST) may be
                    # in a row the DV deleted, which no longer exists: only the live rows tell
                    read_positions = np.arange(table.num_rows, dtype=np.int64) if groups is None \
                        else _group_positions(pf_metadata, groups)
                    live = self._live_among(i, read_positions, file_rows)
                    hit = live[_true_positions(matches(prune, table.take(live)))]
            table, raw = _take(table, hit), _take(raw, hit)
            positions = hit if groups is None else _positions_in_file(pf_metadata, groups, hit)
            filter = None
        if meta:
            table = self._with_metadata(table, [n for n in meta if n not in by_predicate], raw, i, positions)
        descriptor = self.deletion_vectors[i]
        if descriptor is None:
            return (table.filter(filter) if filter is not None else table).select(names)
        deleted = deleted_rows(self.store, descriptor, self.paths[i])
        if filter is None and positions is None:  # the whole file, in order
            return table.filter(pa.array(keep_mask(table.num_rows, deleted, self.paths[i]))).select(names)
        # Filter first (usually few rows remain), then drop the deleted positions among them: the
        # same rows as the other order, without filtering every column of the whole file twice.
        _check_dv_fits(deleted, file_rows, self.paths[i])
        if filter is not None:
            table = table.append_column("__position", pa.array(
                positions if positions is not None else np.arange(table.num_rows, dtype=np.int64)))
            try:
                table = table.filter(filter)
            except pa.ArrowInvalid:  # maybe a deleted row's value the filter cannot compute: live rows only
                table = table.filter(pa.array(~_deleted_among(table.column("__position").to_numpy().astype(np.uint64),
                                                              deleted))).filter(filter)
            positions = table.column("__position").to_numpy()
        live = ~_deleted_among(np.asarray(positions, dtype=np.uint64), deleted)
        return table.filter(pa.array(live)).select(names)

    def _with_metadata(self, table: pa.Table, meta: list[str], raw: pa.Table, i: int,
                       positions: np.ndarray | None) -> pa.Table:
        """``table`` (rows of file ``i``, as ``raw``) with the ``meta`` columns appended; rows at
        ``positions`` of the file (None: all of them, in order)."""
        if not meta:
            return table
        values = metadata_columns(meta, raw, self.files.column("path")[i].as_py(),
                                  self._file_long("baseRowId", i), self._file_long("defaultRowCommitVersion", i),
                                  self.materialized, positions)
        return pa.table(table.columns + [values[n] for n in meta],
                        schema=pa.schema(list(table.schema) + [metadata_field(n) for n in meta]))

    def _live_among(self, i: int, positions: np.ndarray, file_rows: int) -> np.ndarray:
        """The indexes into ``positions`` (row positions of file ``i``) of the rows its DV keeps."""
        deleted = deleted_rows(self.store, self.deletion_vectors[i], self.paths[i])
        _check_dv_fits(deleted, file_rows, self.paths[i])
        return np.flatnonzero(~_deleted_among(positions.astype(np.uint64), deleted))

    def _file_columns(self, wanted: pa.Schema, raw: pa.Table, i: int) -> list[pa.ChunkedArray | pa.Array]:
        """File ``i``'s columns as the table types (partition values filled in, missing ones null)."""
        cols = []
        for f in wanted:
            if f.name in raw.column_names:
                try:
                    cols.append(raw.column(f.name).cast(f.type, safe=not pa.types.is_timestamp(f.type)))
                except _ARROW_ERRORS as exc:
                    raise SchemaMismatchError(
                        f"column {f.name!r} of data file {self.paths[i]!r} cannot be read as {f.type} "
                        f"({exc}); the file was written with an incompatible type"
                    ) from exc
            elif f.name in self.partition_columns and self.partition_values is not None:
                value = self.partition_values.column(f.name)[i]
                cols.append(pa.repeat(value, raw.num_rows) if value.is_valid else pa.nulls(raw.num_rows, f.type))
            else:
                cols.append(pa.nulls(raw.num_rows, f.type))
        return cols

    def _cache_key(self, i: int) -> FileKey | None:
        """What identifies file ``i``'s content for :data:`ROW_GROUPS` (see that module)."""
        if not ROW_GROUPS.enabled:
            return None
        return file_cache_key(self.filesystem, self.paths[i], self._file_long("size", i),
                              self._file_long("modificationTime", i))

    def _row_groups(self, i: int, pf: pq.ParquetFile, prune: "Expr", filter: pc.Expression,
                    cache_key: FileKey | None) -> list[int] | None:
        """The row groups whose footer statistics ``filter`` may match (None: read the whole file).

        Only for a filter on the file's own columns (not partition values): pyarrow's fragment
        ``subset`` tests it against each row group's min/max. A file of one group is that group
        (so that a point change of a small file is served by :data:`ROW_GROUPS` too)."""
        metadata = pf.metadata
        if metadata.num_row_groups == 1:
            return [0]
        if metadata.num_row_groups < 2 or not prune.columns() <= set(pf.schema_arrow.names):
            return None
        by_footer = _groups_by_footer(prune, pf, cache_key)
        if by_footer is not None:
            return by_footer
        if self.filter_reads_floats():  # Parquet min/max leave NaN out (see _scan_split)
            return None
        try:
            fragment = _PARQUET.make_fragment(self.paths[i], filesystem=self.filesystem)
            return [group.id for group in fragment.subset(filter=filter, schema=pf.schema_arrow).row_groups]
        except _ARROW_ERRORS:  # pruning is an optimisation: reading every group is always right
            return None

    def _file_long(self, column: str, i: int) -> int | None:
        index = self.files.schema.get_field_index(column)
        return self.files.column(index)[i].as_py() if index >= 0 else None

    def read_per_file(self, names: list[str], filter: pc.Expression | None) -> pa.Table:
        """Slow path: :meth:`read_one` for every file (a few at a time), concatenated in order."""
        if len(self.paths) == 1:  # no pool for one file (a point change reads one)
            return self.read_one(0, names, filter)
        with ThreadPoolExecutor(max_workers=8) as pool:
            parts = list(pool.map(lambda i: self.read_one(i, names, filter), range(len(self.paths))))
        return pa.concat_tables(parts)

    def raise_if_missing(self, exc: BaseException) -> None:
        """Turn a failed read into DataFileNotFoundError when a referenced file is gone."""
        _raise_if_missing(self.filesystem, self.paths, self.store.uri, exc)


def file_cache_key(filesystem: pafs.FileSystem, location: str, size: int | None,
                   modification_time: int | None) -> FileKey | None:
    """What identifies a data file's content for :data:`ROW_GROUPS`: its stat on local disk,
    its add action's size and time elsewhere (see that module); None with the cache off."""
    if not ROW_GROUPS.enabled:
        return None
    if isinstance(filesystem, pafs.LocalFileSystem):
        return local_key(location)
    return logged_key(location, size, modification_time)


def raise_if_file_missing(filesystem: pafs.FileSystem, location: str, uri: str, exc: BaseException) -> None:
    """Turn a failed read of one data file into DataFileNotFoundError when the file is gone."""
    _raise_if_missing(filesystem, [location], uri, exc)


def _raise_if_missing(filesystem: pafs.FileSystem, locations: list[str], uri: str, exc: BaseException) -> None:
    missing = [locations[i] for i in absent(filesystem, locations)]
    if missing:
        raise DataFileNotFoundError(
            f"data file {first_and_more(missing)} referenced by the log of {uri!r} is missing; "
            f"it may have been vacuumed or deleted outside deltatx. Time travel to a version whose "
            f"files still exist, or restore the files."
        ) from exc


def pre_buffers(filesystem: pafs.FileSystem) -> bool:
    """Whether a ParquetFile on ``filesystem`` should pre-buffer (coalesce its reads and issue
    them on Arrow's I/O threads). Worth it where each request has a latency (object stores);
    on local disk the hand-off to an I/O thread is a fifth of decoding one 128k-row group of
    a point change, and whole-file reads are no faster with it (measured with pyarrow 26)."""
    return not isinstance(filesystem, pafs.LocalFileSystem)


def _groups_by_footer(prune: "Expr", pf: pq.ParquetFile, cache_key: FileKey | None = None) -> list[int] | None:
    """Row groups a point/range predicate on integer columns may match, straight from the
    footer's min/max in Python (a dataset fragment costs a millisecond to build); None when the
    predicate is outside that subset. The min/max of a file with a ``cache_key`` (immutable
    content) are gathered once per column set and kept in :data:`ROW_GROUPS`."""
    from ..expr.pruning_few import groups_matching

    schema = pf.schema_arrow
    names = tuple(sorted(prune.columns()))
    if not all(pa.types.is_integer(schema.field(n).type) for n in names):
        return None
    bounds = ROW_GROUPS.bounds(cache_key, names)
    if bounds is None:
        bounds = _footer_bounds(pf.metadata, names)
        if bounds is None:
            return None
        ROW_GROUPS.keep_bounds(cache_key, names, bounds)
    try:
        verdicts = groups_matching(prune, schema, bounds)
    except Exception:  # pruning is an optimisation: the general path decides
        return None
    return None if verdicts is None else [g for g, may in enumerate(verdicts) if may]


def _footer_bounds(metadata: Any, names: tuple[str, ...]) -> list[dict[str, dict[str, Any]]] | None:
    """Per row group, the integer min/max of ``names`` as stats-shaped dicts (None: a column is
    not a top-level column of the file)."""
    positions = {metadata.schema.column(j).path: j for j in range(metadata.num_columns)}
    if not all(n in positions for n in names):
        return None
    bounds = []
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        low: dict[str, Any] = {}
        high: dict[str, Any] = {}
        for n in names:
            stats = group.column(positions[n]).statistics
            if stats is not None and stats.has_min_max and type(stats.min) is int and type(stats.max) is int:
                low[n], high[n] = stats.min, stats.max
        bounds.append({"minValues": low, "maxValues": high})
    return bounds


def _group_positions(metadata: Any, groups: list[int]) -> np.ndarray:
    """Physical row positions of the rows of ``groups`` (in order) within their file."""
    starts = np.concatenate([[0], np.cumsum([metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)])])
    if not groups:
        return np.empty(0, np.int64)
    return np.concatenate([np.arange(starts[g], starts[g + 1], dtype=np.int64) for g in groups])


def _positions_in_file(metadata: Any, groups: list[int], hit: np.ndarray) -> np.ndarray:
    """Physical positions in the file of rows ``hit`` of the concatenated ``groups``."""
    sizes = np.array([metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)], dtype=np.int64)
    file_starts = np.concatenate([[0], np.cumsum(sizes)])[groups]
    read_ends = np.cumsum(sizes[groups])
    k = np.searchsorted(read_ends, hit, side="right")
    return file_starts[k] + hit - (read_ends[k] - sizes[groups][k])


#: 0, 1, 2, ... kept between reads: filtering it by a mask lists the mask's TRUE positions
_COUNTING = pa.array(np.arange(0, dtype=np.int64))
_COUNTING_MAX = 4 * 1024 * 1024


def _true_positions(mask: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Positions where ``mask`` is TRUE (NULL counts as not matched), as int64.

    Why not ``indices_nonzero`` or numpy: a point change's mask has one TRUE in 128k rows, and
    Arrow's filter skips a bitmap's empty words a block at a time — ~10x faster than either."""
    global _COUNTING
    n = len(mask)
    if n > _COUNTING_MAX:
        return pc.indices_nonzero(mask).to_numpy().astype(np.int64)
    counting = _COUNTING
    if len(counting) < n:
        counting = _COUNTING = pa.array(np.arange(min(max(n, 2 * len(counting)), _COUNTING_MAX), dtype=np.int64))
    picked = counting.slice(0, n).filter(mask)
    return picked.to_numpy() if isinstance(picked, pa.Array) else np.asarray(picked, dtype=np.int64)


def _deleted_among(positions: np.ndarray, deleted: np.ndarray) -> np.ndarray:
    """Per position: is it in ``deleted`` (sorted, as DVs decode)? A binary search per position:
    a point change tests one or two positions, where ``np.isin`` would sort both arrays."""
    if not len(deleted) or not len(positions):
        return np.zeros(len(positions), dtype=bool)
    at = np.searchsorted(deleted, positions)
    return deleted[np.minimum(at, len(deleted) - 1)] == positions


def _take(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``table.take(rows)``, also for a table of no columns (a predicate on metadata columns or
    on none reads no column of a file that has no materialized ones), whose ``take`` would lose
    the row count: its rows are all alike, so the first ``len(rows)`` are the ones taken.

    A file's own columns may be of Arrow's view types (polars and delta-rs write ``string_view``
    / ``binary_view``), which Arrow's ``take`` has no kernel for: those are taken as the plain
    large types, the types a read converts them to anyway."""
    if not table.num_columns:
        return table.slice(0, len(rows))
    try:
        return table.take(rows)
    except pa.ArrowNotImplementedError:
        unviewed = pa.schema([f.with_type(_without_views(f.type)) for f in table.schema], metadata=table.schema.metadata)
        if unviewed.equals(table.schema):
            raise
        return table.cast(unviewed).take(rows)


def _without_views(t: pa.DataType) -> pa.DataType:
    """``t`` with every ``string_view`` / ``binary_view`` in it (nested too) as ``large_string``
    / ``large_binary``."""
    if pa.types.is_string_view(t):
        return pa.large_string()
    if pa.types.is_binary_view(t):
        return pa.large_binary()
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_without_views(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_without_views(t.value_type)))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_without_views(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(_without_views(t.key_type)),
                       t.item_field.with_type(_without_views(t.item_type)))
    return t


def _check_dv_fits(deleted: np.ndarray, num_rows: int, path: str) -> None:
    if len(deleted) and int(deleted.max()) >= num_rows:
        from ..errors import CorruptDeletionVectorError

        raise CorruptDeletionVectorError(
            f"the deletion vector of {path!r} deletes row {int(deleted.max())}, but the file has {num_rows} rows"
        )


def _output_schema(schema: pa.Schema, columns: list[str] | None) -> pa.Schema:
    if columns is None:
        return schema
    missing = [c for c in columns if c not in schema.names and not is_metadata_column(c)]
    if missing:
        raise SchemaMismatchError(f"columns {missing} are not in the table; it has {schema.names}")
    return pa.schema([schema.field(c) if c in schema.names else metadata_field(c) for c in columns])


def _is_cast_failure(exc: BaseException) -> bool:
    """A value the scan could not convert to the table type: the per-file path copes (it truncates
    ns timestamps) or names the file (a uint64 above the long range). The types were checked
    before the scan, so any other invalid value is one of these; an unreadable file or an unknown
    filter column is not."""
    text = str(exc)
    return isinstance(exc, pa.ArrowInvalid) and not any(
        marker in text for marker in (*_NOT_PARQUET, "FieldRef", "No match for"))


def _raise_read_error(exc: BaseException) -> NoReturn:
    """Name what went wrong in deltatx's terms: a bad filter, or files that do not fit the schema."""
    text = str(exc)
    if "FieldRef" in text or "No match for" in text:
        raise PredicateError(f"the read filter names a column the table does not have: {text}") from exc
    if isinstance(exc, (pa.ArrowNotImplementedError, pa.ArrowTypeError)) or "cast" in text.lower():
        raise SchemaMismatchError(
            f"a data file's columns cannot be read as the table schema ({text}); the file was "
            f"written with an incompatible type"
        ) from exc
    raise exc


def _conform(data: _Data, schema: pa.Schema) -> _Data:
    """``data`` (a Table or a RecordBatch) with exactly ``schema``'s columns, types and metadata."""
    if data.schema.equals(schema, check_metadata=False):
        return data.replace_schema_metadata(schema.metadata) if data.schema.metadata != schema.metadata else data
    data = data.select(schema.names)
    try:
        return data.cast(schema)
    except pa.ArrowInvalid:
        if not any(not f.nullable for f in schema):
            raise
        # a file older than a NOT NULL column has nulls there: keep the rows, relax the flag
        return data.cast(_all_nullable(schema))


def _all_nullable(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_nullable(True) for f in schema], metadata=schema.metadata)
