"""Delta log actions: their exact field names, their JSON form and their columnar form.

Owns the vocabulary of PROTOCOL.md and nothing else: no storage, no tables, no conflicts.

- Non-file actions (protocol, metaData, txn, domainMetadata, commitInfo) are few per commit, so
  they are small frozen dataclasses.
- File actions (add, remove, cdc) can number millions, so they live in pyarrow Tables with the
  protocol's own field names (``FILE_SCHEMA``/``REMOVE_SCHEMA``); a checkpoint stores the same
  structs, so a snapshot moves between the two without renaming anything.

Unknown JSON fields are ignored on read (newer writers add fields); required fields that are
missing raise :class:`~deltatx.errors.CorruptLogError` naming the version and line.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import orjson
import pyarrow as pa

from ..errors import CorruptLogError

# --------------------------------------------------------------------------------------------
# Columnar file actions
# --------------------------------------------------------------------------------------------

STRING_MAP = pa.map_(pa.string(), pa.string())

DELETION_VECTOR = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)

#: Columns of an ``add`` action, as in a checkpoint's ``add`` struct. Snapshot.files has these.
FILE_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("partitionValues", STRING_MAP),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
        ("stats", pa.string()),
        ("tags", STRING_MAP),
        ("deletionVector", DELETION_VECTOR),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
        ("clusteringProvider", pa.string()),
    ]
)

#: Columns of a ``remove`` action (a tombstone), as in a checkpoint's ``remove`` struct.
REMOVE_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("deletionTimestamp", pa.int64()),
        ("dataChange", pa.bool_()),
        ("extendedFileMetadata", pa.bool_()),
        ("partitionValues", STRING_MAP),
        ("size", pa.int64()),
        ("stats", pa.string()),
        ("tags", STRING_MAP),
        ("deletionVector", DELETION_VECTOR),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
    ]
)

#: Columns of a ``cdc`` action (a change data file under ``_change_data/``, PROTOCOL.md "Add CDC
#: File"): readers of the change feed take these instead of the commit's adds and removes.
CDC_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("partitionValues", STRING_MAP),
        ("size", pa.int64()),
        ("dataChange", pa.bool_()),
        ("tags", STRING_MAP),
    ]
)

_MAP_FIELDS = ("partitionValues", "tags")


#: per schema object: (the schema, what was built for it). Keyed by ``id``, with the schema
#: kept to make the id safe: hashing a pa.Schema costs ~8 µs, paid twice per file-action table
#: on every parsed commit. Other equal schemas get their own entries (a few module constants).
_EMPTY_TABLES: dict[int, tuple[pa.Schema, pa.Table]] = {}
_STRUCT_TYPES: dict[int, tuple[pa.Schema, pa.StructType]] = {}


def _built_for(cache: dict[int, tuple[pa.Schema, Any]], schema: pa.Schema, build: Callable[[], Any]) -> Any:
    entry = cache.get(id(schema))  # the entry keeps its schema alive: the id is still that schema's
    if entry is None:
        entry = (schema, build())
        if len(cache) < 64:  # bounded: a caller building schemas on the fly just builds
            cache[id(schema)] = entry
    return entry[1]


def empty_table(schema: pa.Schema) -> pa.Table:
    """``schema.empty_table()``, built once per schema: tables are immutable, and building one
    converts a Python sequence per column (~60 µs for a file-action schema) — on every commit."""
    return _built_for(_EMPTY_TABLES, schema, schema.empty_table)


def file_actions_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Build a columnar table from parsed JSON file actions (dict maps are accepted).

    One conversion of the rows as a struct array (fields looked up by name, unknown keys
    ignored), not one per column: 2–4× cheaper for the few rows of a typical commit."""
    if not rows:
        return empty_table(schema)
    struct = _built_for(_STRUCT_TYPES, schema, lambda: pa.struct(list(schema)))
    try:
        batch = pa.RecordBatch.from_struct_array(pa.array(rows, type=struct))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError) as exc:
        raise CorruptLogError(f"a file action in the log has a field of the wrong type ({exc})") from None
    return pa.Table.from_batches([batch], schema=schema)


def deletion_vector_unique_id(descriptor: dict[str, Any] | None) -> str | None:
    """PROTOCOL.md's ``uniqueId`` of a DV descriptor: storageType + pathOrInlineDv [+ '@' + offset]
    (None: no DV). With the path it keys a logical file."""
    if descriptor is None:
        return None
    offset = descriptor.get("offset")
    base = f"{descriptor['storageType']}{descriptor['pathOrInlineDv']}"
    return f"{base}@{offset}" if offset is not None else base


def removes_for(adds: pa.Table, timestamp_ms: int, data_change: bool = True) -> pa.Table:
    """Remove actions for the given add rows, columnar (no per-file objects): same path, DV,
    partition values, size, tags and row-tracking fields, as PROTOCOL.md asks of a remove."""
    n = adds.num_rows
    cols = {
        "path": adds["path"],
        "deletionTimestamp": pa.array([timestamp_ms] * n, pa.int64()) if n else pa.array([], pa.int64()),
        "dataChange": pa.array([data_change] * n, pa.bool_()),
        "extendedFileMetadata": pa.array([True] * n, pa.bool_()),
        "partitionValues": adds["partitionValues"],
        "size": adds["size"],
        "stats": pa.nulls(n, pa.string()),
        "tags": adds["tags"],
        "deletionVector": adds["deletionVector"],
        "baseRowId": adds["baseRowId"],
        "defaultRowCommitVersion": adds["defaultRowCommitVersion"],
    }
    return pa.table(cols, schema=REMOVE_SCHEMA)


def file_rows(table: pa.Table) -> list[dict[str, Any]]:
    """Rows of a file-action table as JSON-ready dicts (maps as dicts, nulls dropped).

    Used only where JSON must be produced (writing a commit), never to hold state.
    """
    out = []
    for row in table.to_pylist():
        clean: dict[str, Any] = {}
        for k, v in row.items():
            if v is None:
                continue
            if k in _MAP_FIELDS:
                v = dict(v)
            elif k == "deletionVector":
                v = {dk: dv for dk, dv in v.items() if dv is not None}
            clean[k] = v
        out.append(clean)
    return out


# --------------------------------------------------------------------------------------------
# Non-file actions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Protocol:
    """The ``protocol`` action: reader/writer versions and, from 3/7, named features."""

    min_reader_version: int = 1
    min_writer_version: int = 2
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "minReaderVersion": self.min_reader_version,
            "minWriterVersion": self.min_writer_version,
        }
        if self.reader_features is not None:
            out["readerFeatures"] = list(self.reader_features)
        if self.writer_features is not None:
            out["writerFeatures"] = list(self.writer_features)
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Protocol":
        rf, wf = d.get("readerFeatures"), d.get("writerFeatures")
        return cls(
            min_reader_version=int(d["minReaderVersion"]),
            min_writer_version=int(d["minWriterVersion"]),
            reader_features=tuple(rf) if rf is not None else None,
            writer_features=tuple(wf) if wf is not None else None,
        )


@dataclass(frozen=True)
class Metadata:
    """The ``metaData`` action. ``schema_string`` is Spark's JSON schema, kept verbatim."""

    id: str
    schema_string: str
    partition_columns: tuple[str, ...] = ()
    configuration: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    description: str | None = None
    format_provider: str = "parquet"
    format_options: dict[str, str] = field(default_factory=dict)
    created_time: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id}
        if self.name is not None:
            out["name"] = self.name
        if self.description is not None:
            out["description"] = self.description
        out["format"] = {"provider": self.format_provider, "options": dict(self.format_options)}
        out["schemaString"] = self.schema_string
        out["partitionColumns"] = list(self.partition_columns)
        out["configuration"] = dict(self.configuration)
        if self.created_time is not None:
            out["createdTime"] = self.created_time
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Metadata":
        fmt = d.get("format") or {}
        return cls(
            id=d["id"],
            # Databricks' Delta Live Tables create tables whose first metaData has no schema yet
            # (a later commit supplies it): an absent or null schemaString is an empty schema.
            schema_string=d.get("schemaString") or "",
            partition_columns=tuple(d.get("partitionColumns") or ()),
            configuration={str(k): str(v) for k, v in (d.get("configuration") or {}).items() if v is not None},
            name=d.get("name"),
            description=d.get("description"),
            format_provider=fmt.get("provider", "parquet"),
            format_options=dict(fmt.get("options") or {}),
            created_time=d.get("createdTime"),
        )

    def replace(self, **changes: Any) -> "Metadata":
        return dataclasses.replace(self, **changes)

    @staticmethod
    def new_id() -> str:
        return str(uuid.uuid4())


@dataclass(frozen=True)
class Txn:
    """The ``txn`` (SetTransaction) action: the last committed version of an application id."""

    app_id: str
    version: int
    last_updated: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"appId": self.app_id, "version": self.version}
        if self.last_updated is not None:
            out["lastUpdated"] = self.last_updated
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Txn":
        return cls(app_id=d["appId"], version=int(d["version"]), last_updated=d.get("lastUpdated"))


@dataclass(frozen=True)
class DomainMetadata:
    """The ``domainMetadata`` action: named configuration; ``removed`` is a tombstone."""

    domain: str
    configuration: str
    removed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"domain": self.domain, "configuration": self.configuration, "removed": self.removed}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "DomainMetadata":
        return cls(domain=d["domain"], configuration=d.get("configuration", ""), removed=bool(d.get("removed", False)))


# --------------------------------------------------------------------------------------------
# One commit: parsed and serialized
# --------------------------------------------------------------------------------------------

_REQUIRED = {
    "add": ("path", "partitionValues", "size", "modificationTime", "dataChange"),
    "remove": ("path", "dataChange"),
    "metaData": ("id", "partitionColumns"),
    "protocol": ("minReaderVersion", "minWriterVersion"),
    "txn": ("appId", "version"),
    "domainMetadata": ("domain",),
    "cdc": ("path",),
    "checkpointMetadata": ("version",),
    "sidecar": ("path",),
}


# Field types of each action (PROTOCOL.md), checked on parse so that a corrupt value becomes a
# CorruptLogError naming its line instead of a pyarrow error later or, worse, a silently coerced
# value (a float size truncated, a null path, "false" read as true). Fields not listed are free.
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_STR, _INT, _BOOL, _DICT, _LIST = "string", "integer", "boolean", "object", "array"


def _type_error(value: Any, expected: str) -> str | None:
    """None when ``value`` is a JSON value of the ``expected`` kind, else what is wrong."""
    kind = type(value)
    if expected == _STR:
        ok = kind is str
    elif expected == _INT:
        ok = kind is int and _LONG_MIN <= value <= _LONG_MAX
    elif expected == _BOOL:
        ok = kind is bool
    elif expected == _DICT:
        ok = kind is dict
    else:
        ok = kind is list
    return None if ok else f"expected {expected}, got {orjson.dumps(value).decode()[:40]}"


def _string_map_error(value: Any) -> str | None:
    """A map<string,string> whose values may be null (partitionValues, tags, options)."""
    if type(value) is not dict:
        return f"expected object, got {orjson.dumps(value).decode()[:40]}"
    for v in value.values():
        if v is not None and type(v) is not str:
            return f"map values must be strings or null, got {orjson.dumps(v).decode()[:40]}"
    return None


def _string_list_error(value: Any) -> str | None:
    if type(value) is not list or any(type(v) is not str for v in value):
        return f"expected an array of strings, got {orjson.dumps(value).decode()[:40]}"
    return None


_DV_FIELDS = {"storageType": _STR, "pathOrInlineDv": _STR, "offset": _INT, "sizeInBytes": _INT, "cardinality": _INT}


def _deletion_vector_error(value: Any) -> str | None:
    if type(value) is not dict:
        return f"expected object, got {orjson.dumps(value).decode()[:40]}"
    for name, expected in _DV_FIELDS.items():
        v = value.get(name)
        if v is not None and (problem := _type_error(v, expected)):
            return f"{name}: {problem}"
    return None


_FIELD_TYPES: dict[str, dict[str, Any]] = {
    "add": {"path": _STR, "partitionValues": _string_map_error, "size": _INT, "modificationTime": _INT,
            "dataChange": _BOOL, "stats": _STR, "tags": _string_map_error, "deletionVector": _deletion_vector_error,
            "baseRowId": _INT, "defaultRowCommitVersion": _INT, "clusteringProvider": _STR},
    "remove": {"path": _STR, "deletionTimestamp": _INT, "dataChange": _BOOL, "extendedFileMetadata": _BOOL,
               "partitionValues": _string_map_error, "size": _INT, "stats": _STR, "tags": _string_map_error,
               "deletionVector": _deletion_vector_error, "baseRowId": _INT, "defaultRowCommitVersion": _INT},
    "cdc": {"path": _STR, "partitionValues": _string_map_error, "size": _INT, "dataChange": _BOOL,
            "tags": _string_map_error},
    "metaData": {"id": _STR, "name": _STR, "description": _STR, "format": _DICT, "schemaString": _STR,
                 "partitionColumns": _string_list_error, "configuration": _string_map_error, "createdTime": _INT},
    "protocol": {"minReaderVersion": _INT, "minWriterVersion": _INT, "readerFeatures": _string_list_error,
                 "writerFeatures": _string_list_error},
    "txn": {"appId": _STR, "version": _INT, "lastUpdated": _INT},
    "domainMetadata": {"domain": _STR, "configuration": _STR, "removed": _BOOL},
    "checkpointMetadata": {"version": _INT, "tags": _string_map_error},
    "sidecar": {"path": _STR, "sizeInBytes": _INT, "modificationTime": _INT, "tags": _string_map_error},
}


#: the fields of a typical add, checked inline (parse cost matters: a JSON commit may hold 100k adds)
_PLAIN_ADD_KEYS = frozenset(("path", "partitionValues", "size", "modificationTime", "dataChange", "stats"))


def _plain_add_ok(body: dict[str, Any]) -> bool:
    pv = body["partitionValues"]
    stats = body.get("stats")
    return (
        type(body["path"]) is str
        and type(body["size"]) is int
        and type(body["modificationTime"]) is int
        and type(body["dataChange"]) is bool
        and (stats is None or type(stats) is str)
        and type(pv) is dict
        and _LONG_MIN <= body["size"] <= _LONG_MAX
        and _LONG_MIN <= body["modificationTime"] <= _LONG_MAX
        and all(type(v) is str or v is None for v in pv.values())
        and _PLAIN_ADD_KEYS.issuperset(body)
    )


def _action_error(kind: str, body: dict[str, Any], required: tuple[str, ...]) -> str | None:
    """What is wrong with one action's fields (required ones present and non-null), or None."""
    if kind == "add" and _plain_add_ok(body):
        return None
    types = _FIELD_TYPES.get(kind)
    if types is None:
        return None
    for name, value in body.items():
        expected = types.get(name)
        if expected is None:
            continue
        if value is None:
            if name in required:
                return f"required field {name} is null"
            continue
        problem = _type_error(value, expected) if type(expected) is str else expected(value)
        if problem:
            return f"field {name}: {problem}"
    if kind == "metaData":
        fmt = body.get("format")
        if fmt is not None and ((problem := _type_error(fmt.get("provider", ""), _STR))
                                or (fmt.get("options") is not None and (problem := _string_map_error(fmt["options"])))):
            return f"field format: {problem}"
    return None


@dataclass
class CommitActions:
    """Everything one commit file says, with file actions kept columnar.

    ``file_order`` keeps the relative order of add/remove lines as (kind, index) so that log
    replay can honour "newest reference wins" even inside one commit.
    """

    version: int
    commit_info: dict[str, Any] | None = None
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    txns: list[Txn] = field(default_factory=list)
    domains: list[DomainMetadata] = field(default_factory=list)
    add_rows: list[dict[str, Any]] = field(default_factory=list)
    remove_rows: list[dict[str, Any]] = field(default_factory=list)
    checkpoint_metadata: dict[str, Any] | None = None  # only in V2 JSON checkpoints
    sidecars: list[dict[str, Any]] = field(default_factory=list)  # only in V2 JSON checkpoints
    file_order: list[tuple[str, int]] = field(default_factory=list)
    cdc_rows: list[dict[str, Any]] = field(default_factory=list)  # few per commit: kept as dicts
    _adds: pa.Table | None = None
    _removes: pa.Table | None = None
    # Unparsed form (``parse_commit(validate=False)``): the add / remove lines newline-joined,
    # one kind byte per file line in log order (b"a" / b"r"), and the whole commit for errors.
    add_json: bytes = b""
    remove_json: bytes = b""
    file_kinds: bytes = b""
    raw: bytes | None = None

    @property
    def unparsed_files(self) -> bool:
        """True while the file lines are still raw JSON (replay gathers many commits' lines)."""
        return self.raw is not None and self._adds is None

    @property
    def file_tables_built(self) -> bool:
        """True once both columnar file tables exist (a conflict check built them): replay
        takes them as they are instead of converting the parsed rows again."""
        return self._adds is not None and self._removes is not None

    @property
    def adds(self) -> pa.Table:
        if self._adds is None:
            if self.raw is not None:
                self._build_file_tables()
            else:
                self._adds = file_actions_table(self.add_rows, FILE_SCHEMA)
        assert self._adds is not None
        return self._adds

    @property
    def removes(self) -> pa.Table:
        if self._removes is None:
            if self.raw is not None:
                self._build_file_tables()
            else:
                self._removes = file_actions_table(self.remove_rows, REMOVE_SCHEMA)
        assert self._removes is not None
        return self._removes

    def _build_file_tables(self) -> None:
        """Columnar adds/removes from the raw lines; the line-by-line parser names any error."""
        from .jsonfiles import MIN_COLUMNAR_LINES, NotColumnar, file_lines_table

        assert self.raw is not None
        try:
            if len(self.file_kinds) < MIN_COLUMNAR_LINES:
                raise NotColumnar("few lines: the dict path is cheaper")
            adds = file_lines_table(self.add_json, "add") if self.add_json else empty_table(FILE_SCHEMA)
            removes = file_lines_table(self.remove_json, "remove") if self.remove_json else empty_table(REMOVE_SCHEMA)
        except NotColumnar:
            checked = _parse_commit_dicts(self.raw, self.version)  # raises CorruptLogError with the line
            adds, removes = checked.adds, checked.removes
        self._adds, self._removes = adds, removes

    @property
    def cdc(self) -> pa.Table:
        """The commit's ``cdc`` actions (change data files), columnar."""
        return file_actions_table(self.cdc_rows, CDC_SCHEMA)

    @property
    def operation(self) -> str | None:
        return (self.commit_info or {}).get("operation")

    @property
    def txn_id(self) -> str | None:
        return (self.commit_info or {}).get("txnId")

    @property
    def is_blind_append(self) -> bool:
        """As Delta reads it from the winner: a missing flag means *not* blind."""
        return bool((self.commit_info or {}).get("isBlindAppend", False))


_ADD_PREFIX = b'{"add":{'
_REMOVE_PREFIX = b'{"remove":{'


def parse_commit(data: bytes, version: int, *, validate: bool = True) -> CommitActions:
    """Parse one ``NNN.json`` commit. Raises CorruptLogError naming version and line.

    With ``validate=False`` the add/remove lines are kept as raw JSON (no per-file Python
    objects) and parsed columnar when first needed — log replay joins the lines of many commits
    into one Arrow read. Errors in them then surface from ``.adds``/``.removes``, still as
    CorruptLogError naming the version and line.
    """
    if not data or data.isspace():
        raise CorruptLogError(f"commit {version} is empty", version=version)
    from .jsonfiles import MIN_COLUMNAR_LINES

    lines = data.split(b"\n")
    if validate and len(lines) < MIN_COLUMNAR_LINES:
        return _parse_commit_dicts(data, version)
    result = CommitActions(version=version, raw=data)
    adds: list[bytes] = []
    removes: list[bytes] = []
    kinds = bytearray()
    for lineno, line in enumerate(lines, start=1):
        if line.startswith(_ADD_PREFIX):
            adds.append(line)
            kinds += b"a"
        elif line.startswith(_REMOVE_PREFIX):
            removes.append(line)
            kinds += b"r"
        elif line.strip():
            kind = _take_line(result, line, version, lineno)
            if kind in ("add", "remove"):  # a file action in an unusual spelling
                return _parse_commit_dicts(data, version)
    result.add_json = b"\n".join(adds)
    result.remove_json = b"\n".join(removes)
    result.file_kinds = bytes(kinds)
    if validate:
        result._build_file_tables()
    return result


def parse_commit_dicts(data: bytes, version: int) -> CommitActions:
    """Every line of a commit parsed and checked as dicts (file actions kept as rows): what log
    replay gathers from a few commits to convert together."""
    return _parse_commit_dicts(data, version)


def _parse_commit_dicts(data: bytes, version: int) -> CommitActions:
    """Line by line into dicts, every field checked: the reference parser and the error finder."""
    result = CommitActions(version=version)
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if line.strip():
            _take_line(result, line, version, lineno)
    return result


def _take_line(result: CommitActions, line: bytes, version: int, lineno: int) -> str:
    """Parse, check and record one action line; returns its kind."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise CorruptLogError(
            f"commit {version}, line {lineno}: not valid JSON ({exc}); the commit file is "
            f"corrupt or truncated",
            version=version,
            line=lineno,
        ) from None
    if not isinstance(obj, dict) or len(obj) != 1:
        raise CorruptLogError(
            f"commit {version}, line {lineno}: expected one action object per line",
            version=version,
            line=lineno,
        )
    (kind, body), = obj.items()
    required = _REQUIRED.get(kind)
    if required is not None:
        if not isinstance(body, dict):
            raise CorruptLogError(
                f"commit {version}, line {lineno}: '{kind}' is not an object", version=version, line=lineno
            )
        missing = [f for f in required if f not in body]
        if missing:
            raise CorruptLogError(
                f"commit {version}, line {lineno}: '{kind}' action lacks required field(s) "
                f"{', '.join(missing)}",
                version=version,
                line=lineno,
            )
        problem = _action_error(kind, body, required)
        if problem:
            raise CorruptLogError(
                f"commit {version}, line {lineno}: malformed '{kind}' action: {problem}",
                version=version,
                line=lineno,
            )
    elif kind == "commitInfo" and not isinstance(body, dict):
        raise CorruptLogError(
            f"commit {version}, line {lineno}: 'commitInfo' is not an object", version=version, line=lineno
        )
    try:
        if kind == "add":
            result.file_order.append(("add", len(result.add_rows)))
            result.add_rows.append(body)
        elif kind == "remove":
            result.file_order.append(("remove", len(result.remove_rows)))
            result.remove_rows.append(body)
        elif kind == "commitInfo":
            result.commit_info = body
        elif kind == "metaData":
            result.metadata = Metadata.from_json(body)
        elif kind == "protocol":
            result.protocol = Protocol.from_json(body)
        elif kind == "txn":
            result.txns.append(Txn.from_json(body))
        elif kind == "domainMetadata":
            result.domains.append(DomainMetadata.from_json(body))
        elif kind == "checkpointMetadata":
            result.checkpoint_metadata = body
        elif kind == "sidecar":
            result.sidecars.append(body)
        elif kind == "cdc":
            result.cdc_rows.append(body)
        # anything else (future actions): checked above when known, otherwise ignored on read
    except (TypeError, ValueError, KeyError) as exc:
        raise CorruptLogError(
            f"commit {version}, line {lineno}: malformed '{kind}' action ({exc})",
            version=version,
            line=lineno,
        ) from None
    return kind


def encode_commit(
    commit_info: dict[str, Any],
    *,
    protocol: Protocol | None = None,
    metadata: Metadata | None = None,
    txns: Iterable[Txn] = (),
    domains: Iterable[DomainMetadata] = (),
    removes: pa.Table | None = None,
    adds: pa.Table | None = None,
    cdc: pa.Table | None = None,
) -> bytes:
    """Serialize one commit: commitInfo first, then protocol, metaData, txn, domain, files
    (removes, adds, then ``cdc`` change data files)."""
    lines = [orjson.dumps({"commitInfo": commit_info})]
    if protocol is not None:
        lines.append(orjson.dumps({"protocol": protocol.to_json()}))
    if metadata is not None:
        lines.append(orjson.dumps({"metaData": metadata.to_json()}))
    lines.extend(orjson.dumps({"txn": t.to_json()}) for t in txns)
    lines.extend(orjson.dumps({"domainMetadata": d.to_json()}) for d in domains)
    if removes is not None and removes.num_rows:
        lines.extend(orjson.dumps({"remove": r}) for r in file_rows(removes))
    if adds is not None and adds.num_rows:
        lines.extend(orjson.dumps({"add": a}) for a in file_rows(adds))
    if cdc is not None and cdc.num_rows:
        lines.extend(orjson.dumps({"cdc": c}) for c in file_rows(cdc))
    return b"\n".join(lines) + b"\n"
