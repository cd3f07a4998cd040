"""Checkpoints: the table's reconciled state at one version, as Parquet, written and read columnar.

Owns the checkpoint files of ``_delta_log`` and ``_last_checkpoint``. It does not decide *when* to
checkpoint (the committer calls :func:`write_checkpoint` when ``version % checkpoint_interval == 0``)
nor which checkpoint to start from (snapshot.py does, with fallbacks).

Layout (PROTOCOL.md "Checkpoints"): one row per action; each row fills exactly one of the
top-level struct columns ``txn``, ``add``, ``remove``, ``metaData``, ``protocol``,
``domainMetadata`` (and ``checkpointMetadata`` / ``sidecar`` in V2 checkpoints), with Delta's own
field names so that Spark, delta-rs and DuckDB read what we write and we read what they write::

    write:  snapshot.files ──(StructArray.from_arrays, no per-file objects)──► add column
            snapshot.tombstones (unexpired, no stats/tags) ──────────────────► remove column
            protocol, metaData, txns, domains ──(a handful of rows)────────► their columns
            → Parquet bytes → store.write_log_file (atomic publish) → _last_checkpoint last

    read:   classic    NNN.checkpoint.parquet
            multi-part NNN.checkpoint.PPPPPPPPPP.NNNNNNNNNN.parquet (complete sets only)
            V2         NNN.checkpoint.<uuid>.json|parquet  + _delta_log/_sidecars/*.parquet
            → only the needed leaf columns → rows filtered by pc.is_valid → FILE_SCHEMA columns
            (add.stats_parsed too when the JSON stats are missing: turned into add.stats)
"""

from __future__ import annotations

import io
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence
from urllib.parse import unquote

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import phases
from . import checkpoint_typed
from ..errors import CorruptCheckpointError, CorruptLogError, InvalidPropertyError
from .actions import (
    FILE_SCHEMA,
    REMOVE_SCHEMA,
    STRING_MAP,
    DomainMetadata,
    Metadata,
    Protocol,
    Txn,
    parse_commit,
)
from .stats import stats_json_from_parsed
from .store import LogFile, LogStore, _strip_scheme

if TYPE_CHECKING:
    from .snapshot import Snapshot

LAST_CHECKPOINT = "_last_checkpoint"
SIDECAR_DIR = "_sidecars"
DEFAULT_CHECKPOINT_INTERVAL = 10
DEFAULT_DELETED_FILE_RETENTION = "interval 1 week"

# --------------------------------------------------------------------------------------------
# The checkpoint schema (Delta's field names; every field nullable, as Spark writes them)
# --------------------------------------------------------------------------------------------

_STRING_LIST = pa.list_(pa.string())

PROTOCOL_STRUCT = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", _STRING_LIST),
        ("writerFeatures", _STRING_LIST),
    ]
)
METADATA_STRUCT = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", STRING_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", _STRING_LIST),
        ("configuration", STRING_MAP),
        ("createdTime", pa.int64()),
    ]
)
TXN_STRUCT = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
DOMAIN_STRUCT = pa.struct([("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())])
ADD_STRUCT = pa.struct(list(FILE_SCHEMA))
#: Tombstones in a checkpoint carry no stats and no tags (PROTOCOL.md).
CHECKPOINT_REMOVE_FIELDS = [f for f in REMOVE_SCHEMA if f.name not in ("stats", "tags")]
REMOVE_STRUCT = pa.struct(CHECKPOINT_REMOVE_FIELDS)
CHECKPOINT_METADATA_STRUCT = pa.struct([("version", pa.int64()), ("tags", STRING_MAP)])

CHECKPOINT_SCHEMA = pa.schema(
    [
        ("txn", TXN_STRUCT),
        ("add", ADD_STRUCT),
        ("remove", REMOVE_STRUCT),
        ("metaData", METADATA_STRUCT),
        ("protocol", PROTOCOL_STRUCT),
        ("domainMetadata", DOMAIN_STRUCT),
    ]
)
V2_CHECKPOINT_SCHEMA = CHECKPOINT_SCHEMA.append(pa.field("checkpointMetadata", CHECKPOINT_METADATA_STRUCT))

#: Top-level columns the reader looks at, and for file actions the leaves it needs.
_FILE_COLUMNS = {"add": FILE_SCHEMA, "remove": REMOVE_SCHEMA}
_SMALL_COLUMNS = ("protocol", "metaData", "txn", "domainMetadata", "checkpointMetadata", "sidecar")


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------


def checkpoint_interval(properties: dict[str, str]) -> int:
    """``delta.checkpointInterval`` (default 10): checkpoint when ``version % interval == 0``."""
    raw = properties.get("delta.checkpointInterval")
    if raw is None:
        return DEFAULT_CHECKPOINT_INTERVAL
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise InvalidPropertyError(f"delta.checkpointInterval={raw!r} must be a positive integer")
    return value


_INTERVAL_PART = re.compile(
    r"(\d+)\s*(nanosecond|microsecond|millisecond|second|minute|hour|day|week)s?", re.IGNORECASE
)
_UNIT_MS = {
    "nanosecond": 1e-6, "microsecond": 1e-3, "millisecond": 1.0, "second": 1e3,
    "minute": 60e3, "hour": 3600e3, "day": 86400e3, "week": 604800e3,
}


def interval_ms(value: str, key: str) -> int:
    """``"interval 1 week"`` (or ``"interval 1 day 2 hours"``) in milliseconds; months/years refused."""
    text = value.strip()
    body = text[len("interval"):] if text.lower().startswith("interval") else text
    parts = _INTERVAL_PART.findall(body)
    leftover = _INTERVAL_PART.sub("", body).strip()
    if not parts or leftover:
        raise InvalidPropertyError(
            f"{key}={value!r} is not a valid interval; use e.g. 'interval 7 days' "
            f"(units: seconds, minutes, hours, days, weeks — not months or years)"
        )
    return int(sum(int(n) * _UNIT_MS[unit.lower()] for n, unit in parts))


def deleted_file_retention_ms(properties: dict[str, str]) -> int:
    """``delta.deletedFileRetentionDuration`` (default one week) in milliseconds."""
    key = "delta.deletedFileRetentionDuration"
    return interval_ms(properties.get(key, DEFAULT_DELETED_FILE_RETENTION), key)


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def checkpoint_name(version: int) -> str:
    return f"{version:020d}.checkpoint.parquet"


def _section(schema: pa.Schema, column: str, values: pa.Array | pa.ChunkedArray) -> pa.Table:
    """Rows that fill ``column`` only; every other column is null."""
    n = len(values)
    arrays = [values if f.name == column else pa.nulls(n, f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def _struct_column(table: pa.Table, fields: list[pa.Field]) -> pa.ChunkedArray:
    """Pack a table's columns (one per field) into one struct column, chunk by chunk."""
    struct_type = pa.struct(fields)
    chunks = [
        pa.StructArray.from_arrays([batch.column(f.name) for f in fields], fields=fields)
        for batch in table.select([f.name for f in fields]).to_batches()
        if batch.num_rows
    ]
    return pa.chunked_array(chunks, type=struct_type)


def _unexpired_tombstones(tombstones: pa.Table, properties: dict[str, str], now_ms: int) -> pa.Table:
    """Removes newer than ``delta.deletedFileRetentionDuration`` (a missing timestamp counts as 0)."""
    if tombstones.num_rows == 0:
        return tombstones
    cutoff = now_ms - deleted_file_retention_ms(properties)
    deleted_at = pc.fill_null(tombstones["deletionTimestamp"], 0)
    return tombstones.filter(pc.greater(deleted_at, cutoff))


def build_checkpoint_table(snapshot: "Snapshot", now_ms: int | None = None) -> pa.Table:
    """The checkpoint's rows for a snapshot, as one arrow table (no I/O)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    v2 = "v2Checkpoint" in (snapshot.protocol.writer_features or ())
    schema = V2_CHECKPOINT_SCHEMA if v2 else CHECKPOINT_SCHEMA
    files = snapshot.files.select(FILE_SCHEMA.names).cast(FILE_SCHEMA)
    add_fields = list(FILE_SCHEMA)
    typed_fields, typed_columns = checkpoint_typed.add_columns(snapshot, files)
    for f, column in zip(typed_fields, typed_columns):
        files = files.append_column(f, column)
    add_fields += typed_fields
    if not checkpoint_typed.writes_stats_as_json(snapshot.properties):
        add_fields = [f for f in add_fields if f.name != "stats"]
    if add_fields != list(FILE_SCHEMA):
        schema = schema.set(schema.get_field_index("add"), pa.field("add", pa.struct(add_fields)))
    sections = [
        _section(schema, "protocol", pa.array([snapshot.protocol.to_json()], PROTOCOL_STRUCT)),
        _section(schema, "metaData", pa.array([snapshot.metadata.to_json()], METADATA_STRUCT)),
    ]
    if v2:
        meta = {"version": snapshot.version, "tags": {}}
        sections.append(_section(schema, "checkpointMetadata", pa.array([meta], CHECKPOINT_METADATA_STRUCT)))
    live_txns = snapshot.live_app_txns(now_ms)
    if live_txns:
        rows = [t.to_json() for t in live_txns.values()]
        sections.append(_section(schema, "txn", pa.array(rows, TXN_STRUCT)))
    live_domains = [d.to_json() for d in snapshot.domains.values() if not d.removed]
    if live_domains:
        sections.append(_section(schema, "domainMetadata", pa.array(live_domains, DOMAIN_STRUCT)))
    if files.num_rows:
        sections.append(_section(schema, "add", _struct_column(files, add_fields)))
    tombstones = _unexpired_tombstones(snapshot.tombstones, snapshot.properties, now_ms)
    if tombstones.num_rows:
        tombstones = tombstones.cast(REMOVE_SCHEMA)
        sections.append(_section(schema, "remove", _struct_column(tombstones, CHECKPOINT_REMOVE_FIELDS)))
    return pa.concat_tables(sections)


def write_checkpoint(store: LogStore, snapshot: "Snapshot") -> None:
    """Write the classic checkpoint of ``snapshot.version``, then ``_last_checkpoint``.

    The Parquet bytes are published with ``store.write_log_file`` (temp file + rename on local
    disk, one atomic PUT on S3), so a reader never sees half a checkpoint. Two writers racing on
    the same version write the same state: the last one wins harmlessly. ``_last_checkpoint`` is
    written last, unless it names a newer checkpoint already; readers treat it only as a hint.
    """
    table = build_checkpoint_table(snapshot)
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="snappy")
    data = sink.getvalue()
    store.write_log_file(checkpoint_name(snapshot.version), data)
    phases.reached("checkpoint_written", version=snapshot.version)
    hint = {
        "version": snapshot.version,
        "size": table.num_rows,
        "sizeInBytes": len(data),
        "numOfAddFiles": snapshot.files.num_rows,
    }
    newer = read_last_checkpoint_hint(store)
    if newer is None or newer <= snapshot.version:  # a checkpoint of an older version (time travel)
        store.write_log_file(LAST_CHECKPOINT, orjson.dumps(hint))  # never points readers back
    phases.reached("last_checkpoint_written", version=snapshot.version)


def read_last_checkpoint_hint(store: LogStore) -> int | None:
    """The version named by ``_last_checkpoint``, or None if it is missing or unreadable."""
    try:
        doc = orjson.loads(store.read_log_file(LAST_CHECKPOINT))
    except (FileNotFoundError, orjson.JSONDecodeError, OSError):
        return None
    version = doc.get("version") if isinstance(doc, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version >= 0:
        return version
    return None


# --------------------------------------------------------------------------------------------
# Choosing checkpoint files
# --------------------------------------------------------------------------------------------


def complete_checkpoints(files: Iterable[LogFile]) -> dict[int, list[list[LogFile]]]:
    """Per version, the usable checkpoints as file sets, best first.

    Order of preference: classic single file, V2 (UUID-named), multi-part. A multi-part set is
    usable only when every part 1..n of the same n is present; incomplete sets are dropped.
    """
    singles: dict[int, list[list[LogFile]]] = {}
    v2: dict[int, list[list[LogFile]]] = {}
    parts: dict[tuple[int, int], dict[int, LogFile]] = {}
    for f in files:
        if f.kind != "checkpoint":
            continue
        if f.num_parts is not None and f.part is not None:
            parts.setdefault((f.version, f.num_parts), {})[f.part] = f
        elif f.checkpoint_uuid is not None:
            v2.setdefault(f.version, []).append([f])
        else:
            singles.setdefault(f.version, []).append([f])
    out: dict[int, list[list[LogFile]]] = {}
    for source in (singles, v2):
        for version, sets in source.items():
            out.setdefault(version, []).extend(sets)
    for (version, n), found in sorted(parts.items()):
        if set(found) == set(range(1, n + 1)):
            out.setdefault(version, []).append([found[i] for i in range(1, n + 1)])
    return out


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class CheckpointState:
    """What one checkpoint holds, file actions columnar."""

    version: int
    protocol: Protocol
    metadata: Metadata
    files: pa.Table  # FILE_SCHEMA
    tombstones: pa.Table  # REMOVE_SCHEMA
    txns: dict[str, Txn] = field(default_factory=dict)
    domains: dict[str, DomainMetadata] = field(default_factory=dict)


def _conform(values: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """Cast to ``target``; structs are rebuilt by field name (missing fields become null)."""
    if values.type.equals(target):
        return values
    if pa.types.is_struct(target) and pa.types.is_struct(values.type):
        chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
        rebuilt = []
        for chunk in chunks:
            children = [
                _conform(pc.struct_field(chunk, f.name), f.type)
                if chunk.type.get_field_index(f.name) >= 0
                else pa.nulls(len(chunk), f.type)
                for f in target
            ]
            rebuilt.append(pa.StructArray.from_arrays(children, fields=list(target), mask=pc.is_null(chunk)))
        return pa.chunked_array(rebuilt, type=target) if isinstance(values, pa.ChunkedArray) else rebuilt[0]
    return values.cast(target)


def _valid_rows(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """The non-null rows; a zero-copy slice when they are one block (as writers lay them out)."""
    count = len(column) - column.null_count
    if count == 0:
        return column.slice(0, 0)
    mask = pc.is_valid(column)
    first = pc.index(mask, True).as_py()
    block = column.slice(first, count)
    return block if block.null_count == 0 else column.filter(mask)


def _flatten(column: pa.ChunkedArray, schema: pa.Schema) -> pa.Table:
    """Non-null rows of a struct column as a table with ``schema``'s columns."""
    present = _valid_rows(column)
    if not len(present):
        return schema.empty_table()
    names = {present.type.field(i).name for i in range(present.type.num_fields)}
    arrays = [
        _conform(pc.struct_field(present, f.name), f.type) if f.name in names else pa.nulls(len(present), f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def _maps_to_dicts(value: Any) -> Any:
    """Arrow's map values come back from to_pylist as lists of pairs; JSON wants objects."""
    if isinstance(value, dict):
        return {k: _maps_to_dicts(v) for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(x, tuple) and len(x) == 2 for x in value):
        return {k: _maps_to_dicts(v) for k, v in value}
    return value


def _small_rows(table: pa.Table, name: str) -> list[dict[str, Any]]:
    if name not in table.column_names:
        return []
    column = table.column(name)
    rows = column.filter(pc.is_valid(column)).to_pylist()
    return [_maps_to_dicts(r) for r in rows]


class _Collected:
    """Actions gathered from one or more checkpoint files before validation."""

    def __init__(self) -> None:
        self.protocol: dict[str, Any] | None = None
        self.metadata: dict[str, Any] | None = None
        self.checkpoint_version: int | None = None
        self.txns: list[dict[str, Any]] = []
        self.domains: list[dict[str, Any]] = []
        self.sidecars: list[dict[str, Any]] = []
        self.files: list[pa.Table] = []
        self.tombstones: list[pa.Table] = []

    def take_small(self, table: pa.Table) -> None:
        for row in _small_rows(table, "protocol"):
            self.protocol = row
        for row in _small_rows(table, "metaData"):
            self.metadata = row
        for row in _small_rows(table, "checkpointMetadata"):
            self.checkpoint_version = row.get("version")
        self.txns += _small_rows(table, "txn")
        self.domains += _small_rows(table, "domainMetadata")
        self.sidecars += _small_rows(table, "sidecar")

    def take_files(self, table: pa.Table) -> None:
        if "add" in table.column_names:
            adds = _flatten(table.column("add"), FILE_SCHEMA)
            _require_fields(adds, "add", _REQUIRED_ADD_FIELDS)
            self.files.append(_stats_from_parsed(adds, table.column("add")))
        if "remove" in table.column_names:
            removes = _flatten(table.column("remove"), REMOVE_SCHEMA)
            _require_fields(removes, "remove", ("path",))
            self.tombstones.append(removes)


#: fields PROTOCOL.md requires of an ``add`` ("Add File and Remove File"); a JSON commit missing
#: one is refused when parsed, and a checkpoint must not get past with less: a null
#: ``partitionValues`` read as null partitions (wrong rows, then DML committed on them)
_REQUIRED_ADD_FIELDS = ("path", "partitionValues", "size", "modificationTime", "dataChange")


def _require_fields(actions: pa.Table, kind: str, fields: Sequence[str]) -> None:
    """Raise CorruptLogError (the caller names the checkpoint file) when a required field is null
    in any of ``actions`` (one null count per column)."""
    for name in fields:
        nulls = actions.column(name).null_count
        if nulls:
            raise CorruptLogError(f"{nulls} {kind} action(s) have no {name!r}, which the protocol requires")


def _stats_from_parsed(adds: pa.Table, column: pa.ChunkedArray) -> pa.Table:
    """``adds`` with each missing ``stats`` string made from the row's ``add.stats_parsed``.

    A checkpoint written with ``delta.checkpoint.writeStatsAsJson=false`` keeps statistics only in
    the typed ``stats_parsed`` struct. File state here carries the JSON strings, so the structs are
    turned back into them (columnar, :func:`stats.stats_json_from_parsed`): pruning, row tracking's
    ``numRecords`` and the next checkpoint deltatx writes all keep the statistics. A JSON string
    that is present wins (PROTOCOL.md: both describe the same file).
    """
    if not pa.types.is_struct(column.type) or column.type.get_field_index("stats_parsed") < 0:
        return adds
    if adds.num_rows == 0 or adds.column("stats").null_count == 0:
        return adds
    parsed = pc.struct_field(_valid_rows(column), "stats_parsed")
    made = stats_json_from_parsed(parsed)
    stats = pc.coalesce(adds.column("stats"), made)
    return adds.set_column(adds.schema.get_field_index("stats"), FILE_SCHEMA.field("stats"), stats)


def _needs_stats_parsed(pf: pq.ParquetFile) -> bool:
    """Whether ``add.stats_parsed`` must be read: it exists and some add has no JSON ``stats``.

    Decided from the footer where it can be (a writer that writes both leaves ``stats_parsed``
    unread, so the usual checkpoint costs nothing more): ``add.stats`` has no more nulls than
    ``add.path``, which is null exactly on the rows that are not adds.
    """
    add = pf.schema_arrow.field("add").type if "add" in pf.schema_arrow.names else None
    if add is None or not pa.types.is_struct(add) or add.get_field_index("stats_parsed") < 0:
        return False
    if add.get_field_index("stats") < 0:
        return True
    meta = pf.metadata
    positions = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
    stats_at, path_at = positions.get("add.stats"), positions.get("add.path")
    if stats_at is None or path_at is None:
        return True
    missing = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        counts = [group.column(i).statistics for i in (stats_at, path_at)]
        if any(c is None or not c.has_null_count for c in counts):
            return True
        missing += counts[0].null_count - counts[1].null_count
    return missing > 0


def _parquet_columns(schema: pa.Schema, with_small: bool, stats_parsed: bool = False) -> list[str]:
    """Column paths to read: needed leaves of add/remove, small columns whole.

    ``add.stats_parsed`` only when ``stats_parsed`` says the JSON stats are missing
    (:func:`_needs_stats_parsed`); the other typed columns (``partitionValues_parsed``) never.
    """
    wanted: list[str] = []
    for name, file_schema in _FILE_COLUMNS.items():
        idx = schema.get_field_index(name)
        if idx < 0 or not pa.types.is_struct(schema.field(idx).type):
            continue
        struct_type = schema.field(idx).type
        leaves = [f"{name}.{f.name}" for f in file_schema if struct_type.get_field_index(f.name) >= 0]
        if name == "add" and stats_parsed:
            leaves.append("add.stats_parsed")
        wanted += leaves or [name]
    if with_small:
        wanted += [n for n in _SMALL_COLUMNS if n in schema.names]
    return wanted


def _log_path(store: LogStore, name: str) -> str:
    return f"{store.log_root}/{name}"


def _read_parquet(store: LogStore, path: str, collected: _Collected, *, with_small: bool) -> None:
    fs = store.arrow_fs
    with fs.open_input_file(path) as handle:
        pf = pq.ParquetFile(handle)
        columns = _parquet_columns(pf.schema_arrow, with_small, stats_parsed=_needs_stats_parsed(pf))
        table = pf.read(columns=columns, use_threads=False) if columns else pa.table({})  # one row group: threads only contend
    if with_small:
        collected.take_small(table)
    collected.take_files(table)


def _read_json_checkpoint(store: LogStore, name: str, version: int, collected: _Collected) -> None:
    """A V2 JSON checkpoint, parsed and checked line by line as a commit is (same rules)."""
    parsed = parse_commit(store.read_log_file(name), version)
    if parsed.protocol is not None:
        collected.protocol = parsed.protocol.to_json()
    if parsed.metadata is not None:
        collected.metadata = parsed.metadata.to_json()
    if parsed.checkpoint_metadata is not None:
        collected.checkpoint_version = parsed.checkpoint_metadata["version"]
    collected.txns += [t.to_json() for t in parsed.txns]
    collected.domains += [d.to_json() for d in parsed.domains]
    collected.sidecars += parsed.sidecars
    collected.files.append(parsed.adds)
    collected.tombstones.append(parsed.removes)


def sidecar_path(store: LogStore, path: str) -> str:
    """Where a ``sidecar.path`` points, in ``store.arrow_fs`` (bare names live in _sidecars/)."""
    decoded = unquote(path)
    if "://" in decoded:
        return _strip_scheme(decoded)
    if decoded[:5].lower() == "file:":  # Hadoop's file:/abs/path (one slash)
        return decoded[5:]
    if decoded.startswith("/"):
        return decoded
    return f"{store.log_root}/{SIDECAR_DIR}/{decoded}"


def read_checkpoint(store: LogStore, files: list[LogFile]) -> CheckpointState:
    """Read one checkpoint (a classic file, a complete multi-part set, or a V2 file + sidecars).

    Raises CorruptCheckpointError naming the file when anything is missing or unreadable.
    """
    if not files:
        raise CorruptCheckpointError("read_checkpoint needs at least one checkpoint file")
    version = files[0].version
    names = tuple(f.name for f in files)
    collected = _Collected()
    current = names[0]
    try:
        for f in files:
            current = f.name
            if f.fmt == "json":
                _read_json_checkpoint(store, f.name, version, collected)
            else:
                _read_parquet(store, _log_path(store, f.name), collected, with_small=True)
        for sidecar in collected.sidecars:
            current = f"sidecar {sidecar.get('path')!r} of {names[0]}"
            _read_parquet(store, sidecar_path(store, str(sidecar["path"])), collected, with_small=False)
    except (OSError, pa.ArrowException, ValueError, KeyError, TypeError, AttributeError, CorruptLogError) as exc:
        raise CorruptCheckpointError(f"checkpoint {current} of version {version} is unreadable: {exc}") from None
    return _state(version, names, collected)


def _state(version: int, names: tuple[str, ...], collected: _Collected) -> CheckpointState:
    where = ", ".join(names)
    if collected.protocol is None or collected.metadata is None:
        missing = "protocol" if collected.protocol is None else "metaData"
        raise CorruptCheckpointError(f"checkpoint {where} has no {missing} action; it is incomplete")
    if collected.checkpoint_version is not None and collected.checkpoint_version != version:
        raise CorruptCheckpointError(
            f"checkpoint {where} says it is version {collected.checkpoint_version}, its name says {version}"
        )
    try:
        protocol = Protocol.from_json(collected.protocol)
        metadata = Metadata.from_json(collected.metadata)
        txns = {t.app_id: t for t in map(Txn.from_json, collected.txns)}
        domains = {d.domain: d for d in map(DomainMetadata.from_json, collected.domains) if not d.removed}
        files = collected.files
        tombstones = collected.tombstones
    except (KeyError, TypeError, ValueError, pa.ArrowException) as exc:
        raise CorruptCheckpointError(f"checkpoint {where} holds a malformed action: {exc}") from None
    return CheckpointState(
        version=version,
        protocol=protocol,
        metadata=metadata,
        files=pa.concat_tables(files) if files else FILE_SCHEMA.empty_table(),
        tombstones=pa.concat_tables(tombstones) if tombstones else REMOVE_SCHEMA.empty_table(),
        txns=txns,
        domains=domains,
    )
