"""CONVERT TO DELTA: turn a folder of Parquet files into a Delta table, in place, in one commit.

Nothing is rewritten or moved: version 0 adds every Parquet file where it is, as Delta's
``CONVERT TO DELTA parquet.`<path>``` does::

    list the folder (hidden entries skipped: ``_SUCCESS``, ``.crc``, ``_temporary/``; a partition
    folder ``_p=1`` is not hidden)
      └─► per file: footer (schema, row count, min/max/null counts → stats, no rows read)
                    partition values from its ``col=value`` folders, typed by the partition schema
      └─► table schema = the footers' schemas unified (all nullable) + the partition columns
      └─► commit 0: protocol, metaData, one add per file (operation CONVERT)

The partition schema must name the ``col=value`` folders exactly (same columns, same order), as
Delta requires; values that do not parse as their column's type are refused. A folder that
already holds a Delta table is not converted again: :class:`TableAlreadyExistsError` (the
caller decides whether that is an error — delta-spark just returns the existing table). If the
commit fails, nothing was written: the Parquet files are the user's and are never deleted.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import SchemaMismatchError, TableAlreadyExistsError, TableNotFoundError
from ..io.paths import encode_path, unescape_partition_value
from ..txnlog.partition_values import serialize_partition_value
from ..isolation import table_isolation_level
from ..txnlog.actions import FILE_SCHEMA, Metadata, encode_commit
from ..txnlog.features import check_writable, required_protocol
from ..txnlog.schema import normalize_schema, schema_to_json
from ..txnlog.stats import stats_from_parquet_footer
from ..txnlog.store import LogStore, VersionExistsError, open_store
from .table import Table
from .transaction import ENGINE_INFO

#: statistics are collected for this many leading columns, Delta's default
_NUM_INDEXED_COLS = 32


def is_hidden_path(relative: str) -> bool:
    """Delta's listing rule: a file named ``_x``/``.x``, or under such a folder (not ``_p=1``)."""
    *folders, name = relative.split("/")
    return name[:1] in "._" or any(f[:1] in "._" and "=" not in f for f in folders)


def _partition_folders(relative: str) -> list[tuple[str, str | None]]:
    """(column, unescaped value) of each ``col=value`` folder above the file, outermost first."""
    out = []
    for folder in relative.split("/")[:-1]:
        if "=" in folder:
            name, _, value = folder.partition("=")
            out.append((unescape_partition_value(name) or name, unescape_partition_value(value)))
    return out


def _typed_value(raw: str | None, field: pa.Field, relative: str) -> str | None:
    """The canonical partitionValues string of folder value ``raw`` as ``field``'s type."""
    if raw is None:
        return None
    if pa.types.is_string(field.type):
        return serialize_partition_value(raw, field.type)
    try:
        value = pa.array([raw], pa.string()).cast(field.type)[0]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        raise SchemaMismatchError(
            f"partition folder value {raw!r} of column {field.name!r} in {relative!r} is not a "
            f"{field.type} (the type the partition schema gives it)"
        ) from None
    return serialize_partition_value(value, field.type)


def _file_schema(metadata: pq.FileMetaData) -> pa.Schema:
    """The Arrow schema of a footer; INT96 columns are Spark's (UTC) timestamps, not ntz."""
    schema = metadata.schema.to_arrow_schema()
    int96 = {metadata.schema.column(i).path for i in range(metadata.num_columns)
             if metadata.schema.column(i).physical_type == "INT96"}
    fields = [f.with_type(pa.timestamp("us", tz="UTC")) if f.name in int96 else f for f in schema]
    return pa.schema(fields)


def _read_footers(store: LogStore, relative: list[str]) -> list[pq.FileMetaData]:
    fs = store.arrow_fs

    def footer(rel: str) -> pq.FileMetaData:
        try:
            with fs.open_input_file(store.data_path(rel)) as fh:
                return pq.read_metadata(fh)
        except (pa.ArrowInvalid, OSError) as exc:
            raise SchemaMismatchError(f"{rel!r} is not a readable Parquet file ({exc}); CONVERT TO DELTA "
                                      f"takes every visible file of the folder as Parquet") from None

    with ThreadPoolExecutor(max_workers=min(8, max(1, len(relative)))) as pool:
        return list(pool.map(footer, relative))


def _data_schema(footers: list[pq.FileMetaData], relative: list[str]) -> pa.Schema:
    schemas = [_file_schema(m) for m in footers]
    try:
        unified = pa.unify_schemas(schemas)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise SchemaMismatchError(f"the Parquet files of the folder have incompatible schemas ({exc}); "
                                  f"e.g. {relative[0]!r}") from None
    return pa.schema([f.with_nullable(True) for f in unified])


def _check_partitions(found: list[tuple[str, str | None]], partition_schema: pa.Schema, relative: str) -> None:
    names = [c for c, _ in found]
    if names != partition_schema.names:
        raise SchemaMismatchError(
            f"Expecting {len(partition_schema)} partition column(s): {partition_schema.names}, but found "
            f"{len(names)} partition column(s): {names} from parsing the file name: {relative!r}"
        )


def convert_to_delta(uri: str, partition_schema: pa.Schema | None = None,
                     storage_options: dict[str, Any] | None = None) -> Table:
    """Make the Parquet folder at ``uri`` a Delta table (see the module docstring); returns it."""
    store = open_store(str(uri), storage_options)
    if store.table_exists():
        raise TableAlreadyExistsError(f"{uri!r} is already a Delta table")
    partition_schema = pa.schema([f.with_nullable(True) for f in (partition_schema or pa.schema([]))])
    listing = [entry for entry in store.list_files_recursive() if not is_hidden_path(entry[0])]
    if not listing:
        if not store.fs.exists(store.root):
            raise TableNotFoundError(f"cannot convert {uri!r}: no such folder")
        raise SchemaMismatchError(f"cannot convert {uri!r}: it holds no Parquet files to infer a schema from")
    listing.sort()
    relative = [entry[0] for entry in listing]
    partitions = [_partition_folders(rel) for rel in relative]
    for rel, found in zip(relative, partitions):
        _check_partitions(found, partition_schema, rel)
    footers = _read_footers(store, relative)
    data_schema = normalize_schema(_data_schema(footers, relative))
    clash = [c for c in partition_schema.names if c in data_schema.names]
    if clash:
        raise SchemaMismatchError(f"partition column(s) {clash} are also columns inside the Parquet files")
    schema = normalize_schema(pa.schema(list(data_schema) + list(partition_schema)))
    part_fields = [schema.field(c) for c in partition_schema.names]
    adds = _adds(listing, partitions, footers, data_schema, part_fields)
    return _commit(store, str(uri), storage_options, schema, partition_schema.names, adds)


def _adds(listing: list[tuple[str, int, int]], partitions: list[list[tuple[str, str | None]]],
          footers: list[pq.FileMetaData], data_schema: pa.Schema, part_fields: list[pa.Field]) -> pa.Table:
    n = len(listing)
    values = [
        [(f.name, _typed_value(raw, f, rel)) for f, (_, raw) in zip(part_fields, found)]
        for (rel, _, _), found in zip(listing, partitions)
    ]
    columns = {
        "path": pa.array([encode_path(rel) for rel, _, _ in listing], pa.string()),
        "partitionValues": pa.array(values, FILE_SCHEMA.field("partitionValues").type),
        "size": pa.array([size for _, size, _ in listing], pa.int64()),
        "modificationTime": pa.array([mtime for _, _, mtime in listing], pa.int64()),
        "dataChange": pa.array([True] * n, pa.bool_()),
        "stats": pa.array([stats_from_parquet_footer(m, data_schema, None, _NUM_INDEXED_COLS) for m in footers],
                          pa.string()),
    }
    return pa.Table.from_arrays([columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in FILE_SCHEMA],
                                schema=FILE_SCHEMA)


def _commit(store: LogStore, uri: str, storage_options: dict[str, Any] | None, schema: pa.Schema,
            partition_columns: list[str], adds: pa.Table) -> Table:
    now_ms = int(time.time() * 1000)
    metadata = Metadata(id=Metadata.new_id(), schema_string=schema_to_json(schema),
                        partition_columns=tuple(partition_columns), configuration={}, created_time=now_ms)
    protocol = required_protocol({}, schema)
    check_writable(protocol, metadata)
    commit_info = {
        "timestamp": now_ms,
        "operation": "CONVERT",
        "operationParameters": {
            "numFiles": str(adds.num_rows),
            "partitionedBy": orjson.dumps(partition_columns).decode(),
            "collectStats": "true",
            "sourceFormat": "parquet",
        },
        "isolationLevel": table_isolation_level({}).value,
        "isBlindAppend": False,
        "operationMetrics": {"numConvertedFiles": str(adds.num_rows)},
        "engineInfo": ENGINE_INFO,
        "txnId": str(uuid.uuid4()),
    }
    try:
        store.put_commit(0, encode_commit(commit_info, protocol=protocol, metadata=metadata, adds=adds))
    except VersionExistsError:
        raise TableAlreadyExistsError(f"{uri!r} was converted to a Delta table concurrently") from None
    return Table(uri, storage_options=storage_options, _store=store)
