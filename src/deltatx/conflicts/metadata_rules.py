"""Rules for concurrent protocol and metadata changes (checks 1 and 2 of the conflict checker).

Owns the *decisions* only: which winning protocol a transaction may adopt, and which winning
metadata change it may adopt without re-running. Both are pure and raise the exact
:mod:`deltatx.errors` exception; :mod:`deltatx.conflicts.checker` does the adoption.

Protocol (Delta's rule): deltatx must be able to read and write the winner's protocol; a
transaction that itself changes the protocol conflicts with any concurrent protocol change; a
winner that *removes* features conflicts (our staged actions may rely on them).

Metadata (Delta's allow-list rule): if both change metadata, conflict. A winner-only change is
tolerated only if it touches nothing but ``configuration`` — adding or changing (never removing)
keys from :data:`ALLOWED_CONFIGURATION_CHANGES` with an accepted value — plus the column-mapping
field metadata that enabling column mapping writes into the schema. Anything else (schema,
partitioning, other properties, the table id) raises :class:`MetadataChangedException`.

Identity columns: an insert into an identity table moves ``delta.identity.highWaterMark`` in the
schema. Such a change (and nothing else) is adopted like an allow-listed one, and when *both*
sides only moved high-water marks they are compatible too: the loser's rebase (in the
transaction, ``tables/identity.py``) moves its values above the winner's marks. Databricks
refuses concurrent identity inserts; deltatx serialises them instead.
"""

from __future__ import annotations

from typing import Any, Callable

import orjson

from ..errors import InvalidTableError, MetadataChangedException, ProtocolChangedException
from ..txnlog.actions import CommitActions, Metadata, Protocol
from ..txnlog.features import check_writable, reader_features, writer_features
from ..txnlog.identity import is_high_water_mark_change, only_marks_differ
from .hints import operation_name
from .txn_info import TransactionInfo


def _enable(old: str | None, new: str) -> bool:
    return new.strip().lower() == "true"


def _any_value(old: str | None, new: str) -> bool:
    return True


def _column_mapping_to_name(old: str | None, new: str) -> bool:
    return (old or "none").strip().lower() == "none" and new.strip().lower() == "name"


def _v2_checkpoints(old: str | None, new: str) -> bool:
    return new.strip().lower() == "v2"


#: configuration keys a concurrent commit may add or change without failing us, with the values
#: it may set them to (Delta's list: enabling features that do not change existing data)
ALLOWED_CONFIGURATION_CHANGES: dict[str, Callable[[str | None, str], bool]] = {
    "delta.enableRowTracking": _enable,
    "delta.rowTracking.materializedRowIdColumnName": _any_value,
    "delta.rowTracking.materializedRowCommitVersionColumnName": _any_value,
    "delta.columnMapping.mode": _column_mapping_to_name,
    "delta.columnMapping.maxColumnId": _any_value,
    "delta.enableDeletionVectors": _enable,
    "delta.checkpointPolicy": _v2_checkpoints,
    "delta.enableInCommitTimestamps": _enable,
    "delta.inCommitTimestampEnablementVersion": _any_value,
    "delta.inCommitTimestampEnablementTimestamp": _any_value,
    "io.unitycatalog.tableId": _any_value,
}

_COLUMN_MAPPING_METADATA_PREFIX = "delta.columnMapping."

# --------------------------------------------------------------------------------------------
# Protocol
# --------------------------------------------------------------------------------------------


def protocol_feature_names(protocol: Protocol) -> frozenset[str]:
    """Every feature a protocol enables, explicit (reader 3 / writer 7) or implied by versions."""
    return frozenset(reader_features(protocol)) | frozenset(writer_features(protocol))


def check_protocol(txn: TransactionInfo, winner: CommitActions) -> None:
    """Raise if ``txn`` may not adopt the winner's protocol (the winner must have one)."""
    new = winner.protocol
    assert new is not None
    # Can deltatx read and write the table as the winner left it? (UnsupportedFeatureError names
    # the feature; dormant writer features are judged against the metadata in force after it.)
    check_writable(new, winner.metadata or txn.read_metadata)
    context = dict(version=winner.version, operation=winner.operation, commit_info=winner.commit_info)
    if txn.protocol is not None:
        added = sorted(protocol_feature_names(new) - protocol_feature_names(txn.read_protocol))
        what = (f"features {', '.join(added)}" if added else
                f"versions ({new.min_reader_version}, {new.min_writer_version})")
        raise ProtocolChangedException(
            f"this {txn.operation} and the concurrent {operation_name(winner.operation)} both "
            f"changed the table protocol (upgrade or create); the concurrent one added {what}.",
            conflict=f"protocol: {what}",
            **context,
        )
    removed = protocol_feature_names(txn.read_protocol) - protocol_feature_names(new)
    if removed:
        raise ProtocolChangedException(
            f"the concurrent {operation_name(winner.operation)} removed table feature(s) "
            f"{', '.join(sorted(removed))} that this {txn.operation} was prepared with.",
            conflict=f"features {', '.join(sorted(removed))}",
            **context,
        )


# --------------------------------------------------------------------------------------------
# Metadata
# --------------------------------------------------------------------------------------------


def _strip_column_mapping(node: Any) -> Any:
    """A Spark JSON schema with every ``delta.columnMapping.*`` field-metadata key removed."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "metadata" and isinstance(value, dict):
                value = {k: v for k, v in value.items() if not k.startswith(_COLUMN_MAPPING_METADATA_PREFIX)}
            out[key] = _strip_column_mapping(value)
        return out
    if isinstance(node, list):
        return [_strip_column_mapping(v) for v in node]
    return node


def _same_schema_modulo_column_mapping(old: str, new: str) -> bool:
    try:
        return _strip_column_mapping(orjson.loads(old)) == _strip_column_mapping(orjson.loads(new))
    except orjson.JSONDecodeError as exc:
        raise InvalidTableError(f"a metaData action has an unreadable schemaString ({exc})") from None


_OTHER_FIELDS: tuple[tuple[str, str], ...] = (
    ("id", "table id (the table was replaced)"),
    ("partition_columns", "partition columns"),
    ("format_provider", "file format"),
    ("format_options", "format options"),
    ("name", "table name"),
    ("description", "table description"),
    ("created_time", "creation time"),
)


def metadata_change_problems(old: Metadata, new: Metadata) -> list[str]:
    """Why ``new`` is not a change a concurrent transaction may adopt; [] if it may."""
    problems = [label + " changed" for attr, label in _OTHER_FIELDS if getattr(old, attr) != getattr(new, attr)]
    enables_column_mapping = False
    for key in sorted(set(old.configuration) - set(new.configuration)):
        problems.append(f"property {key} removed")
    for key, value in sorted(new.configuration.items()):
        before = old.configuration.get(key)
        if before == value:
            continue
        rule = ALLOWED_CONFIGURATION_CHANGES.get(key)
        if rule is None or not rule(before, value):
            problems.append(f"property {key} set to {value!r}")
        elif key == "delta.columnMapping.mode":
            enables_column_mapping = True
    if old.schema_string != new.schema_string and not only_marks_differ(old.schema_string, new.schema_string):
        if not (enables_column_mapping and _same_schema_modulo_column_mapping(old.schema_string, new.schema_string)):
            problems.append("schema changed")
    return problems


def check_metadata(txn: TransactionInfo, winner: CommitActions) -> None:
    """Raise if ``txn`` may not adopt the winner's metadata (the winner must have one)."""
    new = winner.metadata
    assert new is not None
    context = dict(version=winner.version, operation=winner.operation, commit_info=winner.commit_info)
    if txn.metadata is not None:
        if is_high_water_mark_change(txn.read_metadata, txn.metadata) and \
                is_high_water_mark_change(txn.read_metadata, new):
            return  # two identity inserts: the loser's rebase moves its values past the winner's
        changes = metadata_change_problems(txn.read_metadata, new) or ["a metadata update"]
        raise MetadataChangedException(
            f"this {txn.operation} and the concurrent {operation_name(winner.operation)} both "
            f"changed the table metadata (schema, partitioning or properties); the concurrent one: "
            f"{'; '.join(changes)}.",
            conflict="metadata",
            **context,
        )
    problems = metadata_change_problems(txn.read_metadata, new)
    if problems:
        raise MetadataChangedException(
            f"the concurrent {operation_name(winner.operation)} changed the table metadata "
            f"({'; '.join(problems)}), which this {txn.operation} was prepared against.",
            conflict="metadata",
            **context,
        )
