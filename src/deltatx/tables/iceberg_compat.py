"""Iceberg compatibility (writer features ``icebergCompatV1`` / ``icebergCompatV2``): the rules that
keep a Delta table convertible to Apache Iceberg.

While ``delta.enableIcebergCompatV1`` or ``…V2`` is true (PROTOCOL.md, "Iceberg Compatibility V1/V2"):

- column mapping is on (``name`` or ``id``) — Iceberg resolves columns by id;
- V1: the ``deletionVectors`` feature is not even supported; V2: deletion vectors are not enabled,
  and V1 is not active at the same time;
- partition values are also stored in the data files, after the data columns (WriteOptions
  ``materialize_partition_columns``), and every add has ``numRecords`` (deltatx always writes it);
- V1: no map or array columns; V2: only Iceberg's types (no variant);
- the partition columns of an existing table cannot be replaced by differently named ones;
- type changes (type widening) must be ones Iceberg can evolve (txnlog/type_widening.py).

One V2 rule deltatx cannot follow yet: array elements and map keys/values need their own field
ids (``delta.columnMapping.nested.ids``, also written as Parquet field ids), which only the column
mapping writer could assign. A V2 table with array or map columns is therefore refused with a
typed error instead of being written without them.

:func:`validate` runs when a transaction starts, whenever it stages metadata or a protocol, and
when a table is created; with both properties off it returns at once.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..errors import InvalidPropertyError, SchemaMismatchError, UnsupportedFeatureError
from ..txnlog.actions import Metadata, Protocol
from ..txnlog.features import writer_features
from ..txnlog.schema import is_variant_storage, schema_from_json

V1 = "delta.enableIcebergCompatV1"
V2 = "delta.enableIcebergCompatV2"
_COLUMN_MAPPING = "delta.columnMapping.mode"


def _on(configuration: dict[str, str], key: str) -> bool:
    return configuration.get(key, "false").strip().lower() == "true"


def active_version(configuration: dict[str, str]) -> int | None:
    """2 or 1 while that compatibility is enabled, else None (O(1))."""
    if _on(configuration, V2):
        return 2
    return 1 if _on(configuration, V1) else None


def materializes_partition_values(configuration: dict[str, str]) -> bool:
    """Whether data files must also hold the partition columns (both versions require it)."""
    return active_version(configuration) is not None


def validate(metadata: Metadata, protocol: Protocol, previous: Metadata | None = None,
             schema: pa.Schema | None = None, existing_files: int = 0) -> None:
    """Raise a typed error when the table as staged breaks an active Iceberg compatibility rule.
    ``existing_files``: how many data files the table has already (enabling V1 asks partition
    values in every one of them)."""
    config = metadata.configuration
    version = active_version(config)
    if version is None:
        return
    feature = f"icebergCompatV{version}"
    if _on(config, V1) and _on(config, V2):
        raise InvalidPropertyError(f"{V1} and {V2} cannot both be true; enable one Iceberg compatibility version")
    mode = config.get(_COLUMN_MAPPING, "none").strip().lower()
    if mode not in ("name", "id"):
        raise InvalidPropertyError(
            f"{feature} needs column mapping: set {_COLUMN_MAPPING} to 'name' or 'id' (it is {mode!r})"
        )
    dv_enabled = _on(config, "delta.enableDeletionVectors")
    if version == 1 and (dv_enabled or "deletionVectors" in writer_features(protocol)):
        raise InvalidPropertyError(
            f"{feature} forbids the deletionVectors table feature; this table supports it (create the table "
            f"without deletion vectors to make it Iceberg-compatible V1, or use V2 with them disabled)"
        )
    if dv_enabled:
        raise InvalidPropertyError(f"{feature} needs delta.enableDeletionVectors=false")
    if version == 1 and previous is not None and not _on(previous.configuration, V1) \
            and metadata.partition_columns and existing_files:
        raise InvalidPropertyError(
            f"{feature} asks the partition values in every data file of the table, and its {existing_files} "
            f"file(s) were written without them (PROTOCOL.md, Iceberg Compatibility V1): create the table "
            f"with it, or use icebergCompatV2, which asks it of the files written from then on")
    if schema is None:
        schema = schema_from_json(metadata.schema_string)
    _check_types(schema, version)
    if previous is not None and previous.partition_columns and \
            [c.lower() for c in previous.partition_columns] != [c.lower() for c in metadata.partition_columns]:
        raise SchemaMismatchError(
            f"{feature} forbids replacing the partition columns {list(previous.partition_columns)} with "
            f"{list(metadata.partition_columns)}"
        )
    if any(f in ("typeWidening", "typeWidening-preview") for f in writer_features(protocol)):
        from ..txnlog.type_widening import is_iceberg_compatible, recorded_changes

        for path, change in recorded_changes(schema):
            old, new = change.get("fromType"), change.get("toType")
            if not (isinstance(old, str) and isinstance(new, str) and is_iceberg_compatible(old, new)):
                raise SchemaMismatchError(
                    f"{feature}: column {path!r} was changed from {old} to {new}, a type change Iceberg cannot "
                    f"evolve; such a table cannot be made Iceberg-compatible"
                )


def _check_types(schema: pa.Schema, version: int) -> None:
    feature = f"icebergCompatV{version}"
    for path, t in _types(list(schema)):
        if is_variant_storage(t):
            raise SchemaMismatchError(f"{feature}: column {path!r} is a variant, which Iceberg tables cannot hold")
        if pa.types.is_map(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
            if version == 1:
                raise SchemaMismatchError(f"{feature} forbids map and array columns; {path!r} is {t}")
            raise UnsupportedFeatureError(
                f"{feature} needs field ids for the elements of array/map column {path!r} "
                f"(delta.columnMapping.nested.ids), which deltatx does not assign; write this table with "
                f"an engine that does (Spark), or keep array and map columns out of it",
                feature=feature, kind="writer",
            )


def _types(fields: list[pa.Field], prefix: str = "") -> Any:
    for f in fields:
        path = f"{prefix}{f.name}"
        yield path, f.type
        if pa.types.is_struct(f.type) and not is_variant_storage(f.type):
            yield from _types(list(f.type), f"{path}.")
