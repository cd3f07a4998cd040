"""The reference model of R3: what a Delta log *means*, written as plainly as possible.

Deliberately independent of ``deltatx.txnlog``: it parses commit bytes with the standard
library's ``json`` (not orjson), folds actions into dicts (path → add), and knows nothing about
columnar state, checkpoints' Parquet layout or pruning. ``test_fuzz.py`` compares deltatx's
snapshot against it, for valid logs (must be equal) and corrupted ones (deltatx must raise a
typed error, or agree with the model when the corruption left a log that is still valid).

Rules encoded here (PROTOCOL.md): one JSON object with one key per line; required fields
present and non-null with their types; a logical file is ``path`` plus the deletion vector's
unique id; the newest action for a logical file wins, also within one commit; protocol and
metaData: latest wins; txn: latest per appId; domainMetadata: latest per domain, ``removed``
deletes it; versions must be contiguous from 0 (or from a checkpoint).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class InvalidLog(Exception):
    """The model says no snapshot exists for this log (deltatx must raise a DeltaTxError)."""


def _long(v: Any) -> bool:
    return type(v) is int and LONG_MIN <= v <= LONG_MAX


def _str(v: Any) -> bool:
    return type(v) is str


def _bool(v: Any) -> bool:
    return type(v) is bool


def _str_map(v: Any) -> bool:
    return type(v) is dict and all(x is None or type(x) is str for x in v.values())


def _str_list(v: Any) -> bool:
    return type(v) is list and all(type(x) is str for x in v)


def _dv(v: Any) -> bool:
    if type(v) is not dict:
        return False
    kinds = {"storageType": _str, "pathOrInlineDv": _str, "offset": _long, "sizeInBytes": _long,
             "cardinality": _long}
    return all(v.get(k) is None or check(v[k]) for k, check in kinds.items())


def _format(v: Any) -> bool:
    return type(v) is dict and (v.get("provider") is None or _str(v["provider"])) and (
        v.get("options") is None or _str_map(v["options"]))


Rules = tuple[dict[str, Callable[[Any], bool]], dict[str, Callable[[Any], bool]]]  # (required, optional)

RULES: dict[str, Rules] = {
    "add": ({"path": _str, "partitionValues": _str_map, "size": _long, "modificationTime": _long, "dataChange": _bool},
            {"stats": _str, "tags": _str_map, "deletionVector": _dv, "baseRowId": _long,
             "defaultRowCommitVersion": _long, "clusteringProvider": _str}),
    "remove": ({"path": _str, "dataChange": _bool},
               {"deletionTimestamp": _long, "extendedFileMetadata": _bool, "partitionValues": _str_map,
                "size": _long, "stats": _str, "tags": _str_map, "deletionVector": _dv, "baseRowId": _long,
                "defaultRowCommitVersion": _long}),
    # schemaString may be absent or null: the schema is not known yet (Delta Live Tables' version 0)
    "metaData": ({"id": _str, "partitionColumns": _str_list},
                 {"schemaString": _str, "name": _str, "description": _str, "format": _format,
                  "configuration": _str_map, "createdTime": _long}),
    "protocol": ({"minReaderVersion": _long, "minWriterVersion": _long},
                 {"readerFeatures": _str_list, "writerFeatures": _str_list}),
    "txn": ({"appId": _str, "version": _long}, {"lastUpdated": _long}),
    "domainMetadata": ({"domain": _str}, {"configuration": _str, "removed": _bool}),
    "cdc": ({"path": _str}, {"partitionValues": _str_map, "size": _long, "dataChange": _bool, "tags": _str_map}),
}


def _reject_constant(name: str) -> Any:
    raise InvalidLog(f"JSON constant {name} is not allowed")


def parse_lines(data: bytes, version: int) -> list[tuple[str, Any]]:
    """The (kind, body) actions of one commit file, or InvalidLog."""
    actions: list[tuple[str, Any]] = []
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, parse_constant=_reject_constant)
            json.dumps(obj, ensure_ascii=False).encode("utf-8")  # lone surrogates are not text
        except (ValueError, UnicodeError) as exc:
            raise InvalidLog(f"commit {version}: bad JSON line ({exc})") from None
        if type(obj) is not dict or len(obj) != 1:
            raise InvalidLog(f"commit {version}: a line is not one action")
        (kind, body), = obj.items()
        if kind == "commitInfo" and type(body) is not dict:
            raise InvalidLog(f"commit {version}: commitInfo is not an object")
        rules = RULES.get(kind)
        if rules is not None:
            required, optional = rules
            if type(body) is not dict:
                raise InvalidLog(f"commit {version}: {kind} is not an object")
            for name, check in required.items():
                if body.get(name) is None or not check(body[name]):
                    raise InvalidLog(f"commit {version}: {kind}.{name} missing or of the wrong type")
            for name, check in optional.items():
                if body.get(name) is not None and not check(body[name]):
                    raise InvalidLog(f"commit {version}: {kind}.{name} of the wrong type")
        actions.append((kind, body))
    if not actions:
        raise InvalidLog(f"commit {version} is empty")
    return actions


def file_key(action: dict[str, Any]) -> str:
    dv = action.get("deletionVector")
    if not dv:
        return action["path"]
    uid = f"{dv.get('storageType') or ''}{dv.get('pathOrInlineDv') or ''}"
    if dv.get("offset") is not None:
        uid += f"@{dv['offset']}"
    return f"{action['path']}\x00{uid}"


def normal_add(a: dict[str, Any]) -> tuple:
    """The comparable content of an add (maps as sorted items; absent and null are the same)."""
    dv = a.get("deletionVector")
    dv_fields = ("storageType", "pathOrInlineDv", "offset", "sizeInBytes", "cardinality")
    return (
        a["path"],
        tuple(sorted((a.get("partitionValues") or {}).items())),
        a.get("size"),
        a.get("modificationTime"),
        a.get("dataChange"),
        a.get("stats"),
        tuple(sorted((a.get("tags") or {}).items())),
        tuple(dv.get(k) for k in dv_fields) if dv else None,
        a.get("baseRowId"),
    )


@dataclass
class ModelState:
    version: int = -1
    protocol: tuple | None = None
    metadata: tuple | None = None
    txns: dict[str, int] = field(default_factory=dict)
    domains: dict[str, str] = field(default_factory=dict)
    files: dict[str, tuple] = field(default_factory=dict)
    tombstones: set[str] = field(default_factory=set)

    def copy(self) -> "ModelState":
        return ModelState(self.version, self.protocol, self.metadata, dict(self.txns), dict(self.domains),
                          dict(self.files), set(self.tombstones))

    def apply(self, version: int, actions: list[tuple[str, Any]]) -> "ModelState":
        state = self.copy()
        state.version = version
        for kind, body in actions:
            if kind == "add":
                key = file_key(body)
                state.files[key] = normal_add(body)
                state.tombstones.discard(key)
            elif kind == "remove":
                key = file_key(body)
                state.files.pop(key, None)
                state.tombstones.add(key)
            elif kind == "protocol":
                state.protocol = (body["minReaderVersion"], body["minWriterVersion"],
                                  _tuple_or_none(body.get("readerFeatures")),
                                  _tuple_or_none(body.get("writerFeatures")))
            elif kind == "metaData":
                config = {k: v for k, v in (body.get("configuration") or {}).items() if v is not None}
                state.metadata = (body["id"], body.get("schemaString") or "", tuple(body["partitionColumns"]), config)
            elif kind == "txn":
                state.txns[body["appId"]] = body["version"]
            elif kind == "domainMetadata":
                if body.get("removed"):
                    state.domains.pop(body["domain"], None)
                else:
                    state.domains[body["domain"]] = body.get("configuration", "")
        return state


def _tuple_or_none(v: list[str] | None) -> tuple[str, ...] | None:
    return None if v is None else tuple(v)


def replay(commits: dict[int, bytes], checkpoints: dict[int, ModelState], target: int | None = None) -> ModelState:
    """The state at ``target`` (default: latest) from commit bytes and trusted checkpoint states."""
    versions = set(commits) | set(checkpoints)
    if not versions:
        raise InvalidLog("no commits")
    latest = max(versions)
    target = latest if target is None else target
    if target > latest:
        raise InvalidLog(f"version {target} does not exist")
    bases = [c for c in checkpoints if c <= target]
    state = checkpoints[max(bases)].copy() if bases else ModelState()
    for v in range(state.version + 1, target + 1):
        if v not in commits:
            raise InvalidLog(f"commit {v} is missing")
        state = state.apply(v, parse_lines(commits[v], v))
    if state.protocol is None or state.metadata is None:
        raise InvalidLog("no protocol or metaData")
    return state


def snapshot_state(snapshot) -> ModelState:
    """deltatx's snapshot in the model's terms (for comparison)."""
    files = {}
    for row in snapshot.files.to_pylist():
        row["partitionValues"] = dict(row["partitionValues"] or [])
        row["tags"] = dict(row["tags"] or []) or None
        files[file_key(row)] = normal_add(row)
    tombstones = {file_key(row) for row in snapshot.tombstones.select(["path", "deletionVector"]).to_pylist()}
    p, m = snapshot.protocol, snapshot.metadata
    return ModelState(
        version=snapshot.version,
        protocol=(p.min_reader_version, p.min_writer_version, p.reader_features, p.writer_features),
        metadata=(m.id, m.schema_string, tuple(m.partition_columns), dict(m.configuration)),
        txns={app: t.version for app, t in snapshot.app_txns.items()},
        domains={name: d.configuration for name, d in snapshot.domains.items() if not d.removed},
        files=files,
        tombstones=tombstones,
    )
