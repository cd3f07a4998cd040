"""Change data feed, reading: the rows of a :class:`~deltatx.txnlog.change_feed.ChangePlan`.

::

    cdc files of every version,       ─► one Parquet dataset scan; _commit_version (and for whole
    whole added / removed files           files _change_type: insert / delete) constant per file
    whole files with a DV             ─► read_files, their DV applied
    DV pairs (remove oldDV + add newDV) ─► per file: rows at positions newDV − oldDV (delete),
                                          oldDV − newDV (insert)
    ─► + _commit_timestamp (by version) ─► where ─► columns

The per-file constants are the dataset's partition expressions, so all files of all versions go
through one parallel scan instead of one small read per version (a change feed is mostly many
small files: per-file overhead is what costs).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SchemaMismatchError
from ..txnlog.change_feed import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, ChangePlan
from .deletion_vector_writer import load_bitmap
from .paths import data_file_path, decode_path
from ..txnlog.partition_values import partition_values_table
from .reader import checked_dataset, raise_if_filter_failed, read_files, split_deletion_vectors
from .row_metadata import ROW_INDEX

if TYPE_CHECKING:
    from ..txnlog.store import LogStore

#: the columns every change row has besides the table's (types as deltalake's ``load_cdf`` gives
#: them, except the version: a Delta long, as Spark gives it)
CHANGE_COLUMNS = (
    pa.field(CHANGE_TYPE, pa.string()),
    pa.field(COMMIT_VERSION, pa.int64()),
    pa.field(COMMIT_TIMESTAMP, pa.timestamp("ms")),
)
_CHANGE_NAMES = tuple(f.name for f in CHANGE_COLUMNS)
_STRING_MAP = pa.map_(pa.string(), pa.string())


def change_feed_schema(schema: pa.Schema) -> pa.Schema:
    """The schema of change rows: the table's columns, then ``_change_type``, ``_commit_version``,
    ``_commit_timestamp``."""
    return pa.schema(list(schema) + list(CHANGE_COLUMNS), metadata=schema.metadata)


def output_columns(schema: pa.Schema, columns: list[str] | None) -> list[str]:
    """The columns to return: all, or ``columns`` (plus the three change columns unless it names one)."""
    full = change_feed_schema(schema)
    if columns is None:
        return full.names
    if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
        raise SchemaMismatchError(f"columns must be a list of column names, got {columns!r}")
    missing = [c for c in columns if c not in full.names]
    if missing:
        raise SchemaMismatchError(f"columns {missing} are not in the change feed; it has {full.names}")
    if any(c in _CHANGE_NAMES for c in columns):
        return list(columns)
    return list(columns) + list(_CHANGE_NAMES)


def _tag(files: pa.Table, tags: dict[str, pa.Array]) -> pa.Table:
    """``path``, ``deletionVector`` and ``partitionValues`` of ``files``, the latter with one more
    entry per tag (the tag's value for each file, as a string)."""
    values = files.column("partitionValues").to_pylist()
    extra = {name: column.cast(pa.string()).to_pylist() for name, column in tags.items()}
    tagged = [list(pv or ()) + [(name, extra[name][i]) for name in extra] for i, pv in enumerate(values)]
    columns = {"path": files.column("path"), "partitionValues": pa.array(tagged, _STRING_MAP)}
    if "deletionVector" in files.column_names:  # cdc files have none
        columns["deletionVector"] = files.column("deletionVector")
    return pa.table(columns)


def _read_tagged(store: "LogStore", plan: ChangePlan, files: pa.Table, kind: str | None, wanted: list[str],
                 row_filter: pc.Expression | None) -> pa.Table:
    """Files of one kind through :func:`read_files` (every case it knows: DVs applied, nanosecond
    timestamps, missing files named); the version (and the kind of whole files) ride along as
    partition values. cdc files (``kind`` None) carry ``_change_type`` themselves."""
    tags = {COMMIT_VERSION: files.column(COMMIT_VERSION)}
    if kind is not None:
        tags[CHANGE_TYPE] = pa.array([kind] * files.num_rows, pa.string())
    schema = pa.schema(list(plan.schema) + list(CHANGE_COLUMNS[:2]))
    return read_files(store, _tag(files, tags), schema, plan.partition_columns + list(tags),
                      columns=wanted + [CHANGE_TYPE, COMMIT_VERSION], filter=row_filter,
                      column_mapping=plan.column_mapping)


def _one_scan(store: "LogStore", plan: ChangePlan, groups: list[tuple[pa.Table, str | None]], wanted: list[str],
              row_filter: pc.Expression | None) -> pa.Table:
    """Files without deletion vectors, of every version and kind, in one Parquet dataset scan.

    The scan reads the files' own columns plus Arrow's ``__fragment_index`` (which file a row
    came from); partition values, ``_commit_version`` and the kind of whole files (insert /
    delete) are then taken per row from per-file arrays — cheaper than giving every file its own
    partition expression, which Arrow would simplify file by file. A cdc file's ``_change_type``
    is its own column. A file column of a type the table's cannot hold is refused before the
    scan (:func:`checked_dataset`); any other failure (a nanosecond timestamp that needs
    truncating, a missing file) takes the file-by-file path, which handles and names it.
    """
    mapping = plan.column_mapping
    if mapping is not None and mapping.by_field_id:  # files are matched by field id, file by file
        return pa.concat_tables([_read_tagged(store, plan, f, kind, wanted, row_filter) for f, kind in groups])
    files = pa.concat_tables([f.select(["path", "partitionValues", COMMIT_VERSION]) for f, _ in groups])
    kinds = pa.array([kind for f, kind in groups for _ in range(f.num_rows)], pa.string())
    paths = [data_file_path(store, decode_path(p)) for p in files.column("path").to_pylist()]
    in_files = [n for n in wanted if n not in plan.partition_columns]
    schema = pa.schema([plan.schema.field(n) for n in in_files] + [CHANGE_COLUMNS[0]])
    stored = mapping.physical_names(in_files) if mapping is not None else in_files  # names in the files
    try:
        dataset = checked_dataset(paths, mapping.physical_schema(schema) if mapping is not None else schema,
                                  store.arrow_fs)
        scanned = dataset.to_table(columns=stored + [CHANGE_TYPE, "__fragment_index"], use_threads=True)
    except (OSError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return pa.concat_tables([_read_tagged(store, plan, f, kind, wanted, row_filter) for f, kind in groups])
    index = scanned.column("__fragment_index")
    per_file = partition_values_table(files, plan.schema, [c for c in plan.partition_columns if c in wanted])
    if mapping is not None:
        logical = mapping.to_logical(scanned.select(stored), in_files)
        columns = {n: logical.column(n) for n in in_files}
    else:
        columns = {n: scanned.column(n) for n in in_files}
    columns.update({n: per_file.column(n).take(index) for n in per_file.column_names})
    columns[CHANGE_TYPE] = _change_types(scanned.column(CHANGE_TYPE), index, kinds)
    columns[COMMIT_VERSION] = files.column(COMMIT_VERSION).take(index)
    out = pa.table({n: columns[n] for n in wanted + [CHANGE_TYPE, COMMIT_VERSION]})
    return out.filter(row_filter) if row_filter is not None else out


def _change_types(in_files: pa.ChunkedArray, index: pa.ChunkedArray, kinds: pa.Array) -> pa.ChunkedArray:
    """``_change_type`` per row: a cdc file's own column, else its file's kind. A scan's batch never
    spans two files, so this goes batch by batch (a per-row coalesce of strings costs more)."""
    chunks = []
    for values, files in zip(in_files.chunks, index.chunks):
        kind = kinds[files[0].as_py()] if len(files) else None
        chunks.append(values if kind is None or not kind.is_valid else pa.repeat(kind, len(values)))
    return pa.chunked_array(chunks, pa.string())


def _read_dv_pair(store: "LogStore", plan: ChangePlan, pair: dict, wanted: list[str], row_filter) -> pa.Table:
    """Rows of one file whose deletion-vector bit one commit flipped: set → delete, cleared → insert."""
    path = pair["path"]
    old = load_bitmap(store, pair["deletionVector"], path)
    new = load_bitmap(store, pair["newDeletionVector"], path)
    deleted, restored = new - old, old - new
    out_schema = pa.schema([plan.schema.field(n) for n in wanted] + list(CHANGE_COLUMNS[:2]))
    if not deleted and not restored:
        return out_schema.empty_table()
    file = pa.table({"path": [path], "partitionValues": pa.array([pair["partitionValues"]], _STRING_MAP)})
    rows = read_files(store, file, plan.schema, plan.partition_columns, columns=wanted + [ROW_INDEX],
                      column_mapping=plan.column_mapping)
    positions = rows.column(ROW_INDEX).to_numpy()
    parts = []
    for bitmap, kind in ((deleted, "delete"), (restored, "insert")):
        if bitmap:
            chosen = rows.filter(pa.array(np.isin(positions, np.fromiter(bitmap, np.int64, len(bitmap)))))
            n = chosen.num_rows
            parts.append(pa.Table.from_arrays(
                [chosen.column(c) for c in wanted] + [pa.array([kind] * n, pa.string()),
                                                      pa.array([pair[COMMIT_VERSION]] * n, pa.int64())],
                schema=out_schema))
    out = pa.concat_tables(parts)
    return out.filter(row_filter) if row_filter is not None else out


#: the ``_change_type`` values PROTOCOL.md defines (Change Data Files)
_CHANGE_TYPES = pa.array(["insert", "delete", "update_preimage", "update_postimage"], pa.string())


def _check_change_types(kinds: pa.ChunkedArray, plan: ChangePlan) -> None:
    """A change data file must say what each row is: one without ``_change_type``, or with a
    value the protocol does not define, is corrupt, not a row of unknown kind."""
    if not len(kinds):
        return
    bad = pc.invert(pc.fill_null(pc.is_in(kinds, value_set=_CHANGE_TYPES), False))
    if pc.any(bad).as_py():
        from ..errors import CorruptDataFileError

        example = kinds.filter(bad)[0].as_py()
        raise CorruptDataFileError(
            f"a change data file of versions {plan.start}..{plan.end} has rows whose _change_type is "
            f"{example!r} (PROTOCOL.md allows insert, delete, update_preimage, update_postimage); the file is corrupt")


def read_changes(store: "LogStore", plan: ChangePlan, columns: list[str] | None = None,
                 where: str | None = None) -> pa.Table:
    """The change rows of ``plan`` (see the module docstring). Like Delta's, in no promised order:
    sorting them would cost a copy of every column."""
    from ..expr import bind_predicate, parse_predicate, to_arrow

    full = change_feed_schema(plan.schema)
    out = output_columns(plan.schema, columns)
    pred = bind_predicate(parse_predicate(where), full) if where is not None else None
    needed = set(out) | (pred.columns() if pred is not None else set())
    wanted = [n for n in plan.schema.names if n in needed]
    # a filter on table columns only is pushed into the scans; one on the change columns waits
    pushed = pred is not None and pred.columns() <= set(plan.schema.names)
    row_filter = to_arrow(pred, full) if pushed else None
    read_schema = pa.schema([plan.schema.field(n) for n in wanted] + list(CHANGE_COLUMNS[:2]))
    parts: list[pa.Table] = []
    if not plan.empty:
        inserted, inserted_dv = split_deletion_vectors(plan.inserted_files)
        deleted, deleted_dv = split_deletion_vectors(plan.deleted_files)
        groups = [(f, kind) for f, kind in ((plan.cdc_files, None), (inserted, "insert"), (deleted, "delete"))
                  if f.num_rows]
        jobs = [partial(_one_scan, store, plan, groups, wanted, row_filter)] if groups else []
        # files with a DV of their own: read whole, their DV applied
        jobs += [partial(_read_tagged, store, plan, f, kind, wanted, row_filter)
                 for f, kind in ((inserted_dv, "insert"), (deleted_dv, "delete")) if f.num_rows]
        jobs += [partial(_read_dv_pair, store, plan, pair, wanted, row_filter)
                 for pair in (plan.dv_pairs.to_pylist() if plan.dv_pairs.num_rows else [])]
        try:
            if len(jobs) <= 1:
                results = [job() for job in jobs]
            else:
                with ThreadPoolExecutor(max_workers=min(8, len(jobs))) as pool:
                    results = list(pool.map(lambda job: job(), jobs))
        except pa.ArrowInvalid as exc:  # a value the pushed filter cannot compute (a failed CAST)
            raise_if_filter_failed(exc, row_filter)
            raise
        parts = [part.select(read_schema.names).cast(read_schema) for part in results if part.num_rows]
    rows = pa.concat_tables(parts) if parts else read_schema.empty_table()
    _check_change_types(rows.column(CHANGE_TYPE), plan)
    index = pc.subtract(rows.column(COMMIT_VERSION), pa.scalar(plan.start, pa.int64()))
    stamps = pa.array(plan.timestamps_ms, pa.int64()).cast(pa.timestamp("ms"))
    rows = rows.append_column(CHANGE_COLUMNS[2], stamps.take(index) if rows.num_rows else stamps.slice(0, 0))
    if pred is not None and not pushed:
        row_filter = to_arrow(pred, full)
        try:
            rows = rows.filter(row_filter)
        except pa.ArrowInvalid as exc:
            raise_if_filter_failed(exc, row_filter)
            raise
    return rows.select(out)
