"""Protocol versions and table features: what deltatx can read, what it can write, what a table needs.

A Delta table announces what a client must understand in its ``protocol`` action: legacy
``(minReaderVersion, minWriterVersion)`` pairs imply fixed feature sets, and from reader 3 /
writer 7 the table lists named ``readerFeatures`` / ``writerFeatures``. PROTOCOL.md requires a
client to refuse a table that needs something it does not implement, so:

- :func:`check_readable` runs on every snapshot load (an unknown reader feature could change what
  the rows *are*, e.g. deletion vectors or column mapping);
- :func:`check_writable` runs before every write (an unknown writer feature carries rules the
  writer must follow, e.g. row tracking);
- :func:`required_protocol` picks the lowest protocol a new or altered table needs, never lowering
  the current one. deltatx uses named features (3/7) only when a feature demands it, because
  (1, 2) is what Spark and delta-rs create by default and every engine can read it.

Some writer features only impose rules while they are *in use* (``changeDataFeed`` only when
``delta.enableChangeDataFeed=true``, ``checkConstraints`` only when a constraint exists...). Such a
table is writable as long as the feature is dormant; :data:`DORMANT_OK_WRITER_FEATURES` names them
and :func:`feature_in_use` says whether one is active.
"""

from __future__ import annotations

from typing import Callable, Iterable

import pyarrow as pa

from ..errors import UnsupportedFeatureError
from .actions import Metadata, Protocol
from .schema import field_metadata_keys, is_variant_storage, schema_from_json, type_holds, uses_variant

#: Reader features deltatx implements: reading such a table gives the right rows.
SUPPORTED_READER_FEATURES: frozenset[str] = frozenset(
    {
        "columnMapping",  # txnlog/column_mapping.py maps physical (or field-id) columns to logical names
        "deletionVectors",  # io/deletion_vectors.py drops the rows a file's DV deletes
        "timestampNtz",  # a column type; the schema module maps it to timestamp without zone
        "typeWidening",  # io/reader.py casts old files to the widened type; type_widening.py checks
        "typeWidening-preview",  # the same feature under its preview name (older Delta writers)
        "v2Checkpoint",  # checkpoint.py reads UUID-named checkpoints and sidecars
        "vacuumProtocolCheck",  # only asks VACUUM to check the writer protocol (check_writable)
        "catalogManaged",  # deltatx.catalog: readers take the latest ratified version from the catalog
        "variantType",  # variant columns read as their Parquet struct<value, metadata> of binaries
        "variantType-preview",
        "variantShredding",  # only while no variant column exists: see _DORMANT_READER_FEATURES
    }
)

#: Writer features deltatx implements in full (all their writer rules are followed).
SUPPORTED_WRITER_FEATURES: frozenset[str] = frozenset(
    {
        "allowColumnDefaults",  # tables/defaults.py fills omitted columns with CURRENT_DEFAULT
        "appendOnly",  # the transaction refuses data-changing removes when delta.appendOnly=true
        "checkpointProtection",  # checkpoint_protection.py; metadata cleanup meets its exception (a)
        "clustering",  # tables/ops/clustering.py: delta.clustering domain, stats, liquid OPTIMIZE
        "changeDataFeed",  # DML writes _change_data/ files and cdc actions (tables/ops/change_feed.py)
        "checkConstraints",  # tables/constraints.py checks delta.constraints.* on every row written
        "columnMapping",  # files, stats and partition values use physical names; ids assigned on every schema change
        "deletionVectors",  # DML marks rows in DVs (io/deletion_vector_writer.py) when enabled
        "domainMetadata",  # replayed, checkpointed, conflict-checked per domain
        "generatedColumns",  # tables/constraints.py computes absent ones, checks given ones (<=>)
        # tables/iceberg_compat.py checks the rules when a transaction starts and on every
        # metadata/protocol change; the writer stores partition values in the files; V2 with
        # array/map columns is refused (nested field ids)
        "icebergCompatV1",
        "icebergCompatV2",
        "identityColumns",  # tables/identity.py assigns values, moves the high-water marks, rebases
        "inCommitTimestamp",  # in_commit_timestamps.py stamps commitInfo (first) on every commit
        "invariants",  # delta.invariants field metadata, enforced with the CHECK constraints
        "rowTracking",  # tables/row_tracking.py assigns and preserves row ids; the checker rebases them
        "timestampNtz",
        "typeWidening",  # tables/ops/alter_type.py: only the protocol's widenings, recorded per field
        "typeWidening-preview",
        "v2Checkpoint",  # write_checkpoint adds checkpointMetadata when the table lists it
        "vacuumProtocolCheck",
        # tables/variant.py: variant columns are written unshredded (struct<value, metadata>), and
        # values from outside the table are checked against the Variant binary encoding first
        "variantType",
        "variantType-preview",
        # it allows shredded writes but never requires them; deltatx writes unshredded values
        "variantShredding",
        "catalogManaged",  # commits are staged and ratified by deltatx.catalog (path writers refused)
    }
)

#: Features that need others listed too (PROTOCOL.md: row tracking keeps its watermark in a domain).
FEATURE_DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "rowTracking": ("domainMetadata",),
    "clustering": ("domainMetadata",),  # clustering columns live in the delta.clustering domain
    "catalogManaged": ("inCommitTimestamp", "vacuumProtocolCheck"),  # PROTOCOL.md: required with it
    # PROTOCOL.md: a table supporting icebergCompatV1/V2 supports columnMapping (Delta's required feature)
    "icebergCompatV1": ("columnMapping",),
    "icebergCompatV2": ("columnMapping",),
}

#: catalog-managed tables are written only through deltatx.catalog (path writers are refused)
CATALOG_MANAGED = "catalogManaged"

#: Legacy protocol versions and the features they imply (PROTOCOL.md, "Table Features").
_LEGACY_WRITER_FEATURES: dict[int, tuple[str, ...]] = {
    1: (),
    2: ("appendOnly", "invariants"),
    3: ("appendOnly", "invariants", "checkConstraints"),
    4: ("appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"),
    5: ("appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "columnMapping"),
    6: ("appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "columnMapping",
        "identityColumns"),
}
_LEGACY_READER_FEATURES: dict[int, tuple[str, ...]] = {1: (), 2: ("columnMapping",)}

#: Features that are reader *and* writer features (a reader feature must also be a writer feature).
_READER_WRITER_FEATURES = frozenset(
    {"columnMapping", "deletionVectors", "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck",
     "typeWidening", "typeWidening-preview", "variantType", "variantType-preview", "variantShredding",
     "catalogManaged",
     "catalogOwned-preview"}
)


# --------------------------------------------------------------------------------------------
# When is a dormant feature in use?
# --------------------------------------------------------------------------------------------


def _true(configuration: dict[str, str], key: str) -> bool:
    return configuration.get(key, "false").strip().lower() == "true"


def _has_type(fields: Iterable[pa.Field], predicate: Callable[[pa.DataType], bool]) -> bool:
    return any(type_holds(f.type, predicate) for f in fields)


def _schema_keys(metadata: Metadata) -> set[str]:
    return set(field_metadata_keys(schema_from_json(metadata.schema_string)))


def _uses_column_mapping(configuration: dict[str, str]) -> bool:
    return configuration.get("delta.columnMapping.mode", "none").strip().lower() not in ("", "none")


_IN_USE: dict[str, Callable[[Metadata], bool]] = {
    "invariants": lambda m: "delta.invariants" in _schema_keys(m),
    "checkConstraints": lambda m: any(k.startswith("delta.constraints.") for k in m.configuration),
    "changeDataFeed": lambda m: _true(m.configuration, "delta.enableChangeDataFeed"),
    "generatedColumns": lambda m: "delta.generationExpression" in _schema_keys(m),
    "identityColumns": lambda m: any(k.startswith("delta.identity.") for k in _schema_keys(m)),
    "allowColumnDefaults": lambda m: "CURRENT_DEFAULT" in _schema_keys(m),
    "columnMapping": lambda m: _uses_column_mapping(m.configuration),
    "deletionVectors": lambda m: _true(m.configuration, "delta.enableDeletionVectors"),
    "inCommitTimestamp": lambda m: _true(m.configuration, "delta.enableInCommitTimestamps"),
    "icebergCompatV1": lambda m: _true(m.configuration, "delta.enableIcebergCompatV1"),
    "icebergCompatV2": lambda m: _true(m.configuration, "delta.enableIcebergCompatV2"),
    "variantType": lambda m: uses_variant(m.schema_string),
    "variantType-preview": lambda m: uses_variant(m.schema_string),
}

#: Reader features deltatx can honour only while they are dormant: shredded variant values are not
#: reassembled, so a table that may hold them (variantShredding and a variant column) is refused.
_DORMANT_READER_FEATURES: dict[str, Callable[[Metadata], bool]] = {
    "variantShredding": lambda m: uses_variant(m.schema_string),
}

#: Writer features whose rules bind only while in use: a table listing them stays writable until
#: :func:`feature_in_use` says the feature is active.
DORMANT_OK_WRITER_FEATURES: frozenset[str] = frozenset(_IN_USE)


def feature_in_use(feature: str, metadata: Metadata) -> bool:
    """Whether a dormant-capable writer feature is active for this metadata (unknown → True)."""
    probe = _IN_USE.get(feature)
    return True if probe is None else probe(metadata)


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------


def _unsupported(kind: str, feature: str, why: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        f"this table needs the {kind} feature {feature!r}, which deltatx does not implement ({why}); "
        f"use an engine that supports it (Spark, delta-rs), or drop the feature from the table",
        feature=feature,
        kind=kind,
    )


def reader_features(protocol: Protocol) -> tuple[str, ...]:
    """The reader features a protocol requires, legacy versions expanded."""
    if protocol.min_reader_version >= 3:
        return tuple(protocol.reader_features or ())
    return _LEGACY_READER_FEATURES.get(protocol.min_reader_version, ())


def writer_features(protocol: Protocol) -> tuple[str, ...]:
    """The writer features a protocol requires, legacy versions expanded."""
    if protocol.min_writer_version >= 7:
        return tuple(protocol.writer_features or ())
    return _LEGACY_WRITER_FEATURES.get(protocol.min_writer_version, ())


def check_readable(protocol: Protocol, metadata: Metadata | None = None) -> None:
    """Raise UnsupportedFeatureError(kind="reader") unless deltatx can read the table correctly.

    Legacy reader version 2 means column mapping, which deltatx reads. With ``metadata``, the
    features readable only while dormant (variantShredding) and recorded type changes are checked.
    """
    version = protocol.min_reader_version
    if version > 3 or version < 1:
        raise _unsupported("reader", f"readerVersion{version}", "unknown reader protocol version")
    features = reader_features(protocol)
    for feature in features:
        if feature not in SUPPORTED_READER_FEATURES:
            raise _unsupported("reader", feature, "it changes how rows must be read")
        in_use = _DORMANT_READER_FEATURES.get(feature)
        if in_use is not None and metadata is not None and in_use(metadata):
            raise _unsupported("reader", feature, "deltatx does not reassemble shredded variant values")
    if metadata is not None and ("typeWidening" in features or "typeWidening-preview" in features):
        from .type_widening import check_type_changes

        check_type_changes(metadata)


def check_writable(protocol: Protocol, metadata: Metadata) -> None:
    """Raise UnsupportedFeatureError unless deltatx may commit to this table.

    Readability is checked first (a writer reads too). Then every writer feature must be
    implemented, or dormant (listed but not in use).
    """
    check_readable(protocol, metadata)
    version = protocol.min_writer_version
    if version > 7 or version < 1:
        raise _unsupported("writer", f"writerVersion{version}", "unknown writer protocol version")
    for feature in writer_features(protocol):
        if feature in SUPPORTED_WRITER_FEATURES:
            continue
        if feature in DORMANT_OK_WRITER_FEATURES and not feature_in_use(feature, metadata):
            continue
        raise _unsupported("writer", feature, "its writer rules are not followed by deltatx")


def check_path_access(protocol: Protocol, store: object, uri: str) -> None:
    """Refuse a catalog-managed table opened by path (PROTOCOL.md: path-only clients must not
    read or write it; its latest version is whatever the catalog ratified). O(1) when off.

    ``protocol`` is the version being opened's. A version written while the table was
    catalog-managed is readable by path once the table's *latest* version is not (it was
    released from its catalog: ``Catalog.release``, ``drop_table``): the table belongs to path
    clients again, its whole published history with it (time travel, RESTORE). Only a refusal
    pays for that look at the latest version."""
    if protocol.writer_features and CATALOG_MANAGED in protocol.writer_features \
            and not getattr(store, "catalog_managed", False):
        if _released_since(store):
            return
        from ..errors import CatalogManagedTableError

        raise CatalogManagedTableError(
            f"the table at {uri!r} is catalog-managed: open it through its catalog "
            f"(deltatx.Catalog(url).table(name)), or release it from the catalog to use it by path"
        )


def _released_since(store: object) -> bool:
    """Is the latest version of the table at path ``store`` free of ``catalogManaged``? Only the
    catalog publishes a catalog-managed table's versions, in order, so a latest version without
    the feature is the catalog's release commit (or a later path commit): nothing after it is
    the catalog's. Unreadable (no log, a corrupt one): False, the refusal stands."""
    from .snapshot_cache import SNAPSHOTS

    try:
        latest = SNAPSHOTS.latest(store)  # type: ignore[arg-type]
    except Exception:
        return False
    return not (latest.protocol.writer_features and CATALOG_MANAGED in latest.protocol.writer_features)


def check_catalog_still_manages(protocol: Protocol, store: object, uri: str) -> None:
    """Refuse a catalog commit to a table whose latest protocol dropped ``catalogManaged``: it
    was released (``Catalog.release``), and path clients own it now. Only a release that did
    not get to forget the table's name leaves a catalog route to it (a handle opened before,
    or a process that died half-way); ratifying through it would fork the table's history."""
    if getattr(store, "catalog_managed", False) and not (protocol.writer_features
                                                         and CATALOG_MANAGED in protocol.writer_features):
        from ..errors import CatalogTableNotFoundError

        raise CatalogTableNotFoundError(
            f"the table at {uri!r} was released from its catalog: it is a path table now, open it with "
            f"deltatx.Table({uri!r}); nothing was committed")


# --------------------------------------------------------------------------------------------
# What a table needs
# --------------------------------------------------------------------------------------------

#: field-metadata keys that put a writer feature in use (the table layer enforces them)
_FIELD_METADATA_FEATURES = {
    "delta.invariants": "invariants",
    "delta.generationExpression": "generatedColumns",
    "CURRENT_DEFAULT": "allowColumnDefaults",
}


def _needed_features(configuration: dict[str, str], schema: pa.Schema) -> list[str]:
    """Named features the configuration and schema need; raises for the ones we cannot write."""
    needed: list[str] = []
    if _uses_column_mapping(configuration):
        needed.append("columnMapping")
    if any(k.startswith("delta.constraints.") for k in configuration):
        needed.append("checkConstraints")
    for key in field_metadata_keys(schema):
        feature = _FIELD_METADATA_FEATURES.get(key) or ("identityColumns" if key.startswith("delta.identity.") else None)
        if feature and feature not in needed:
            needed.append(feature)
    if _true(configuration, "delta.appendOnly"):  # implied by legacy writer 2+; named on writer 7
        needed.append("appendOnly")
    if _true(configuration, "delta.enableDeletionVectors"):
        needed.append("deletionVectors")
    if _true(configuration, "delta.enableChangeDataFeed"):
        needed.append("changeDataFeed")
    if _true(configuration, "delta.enableRowTracking"):
        needed += ["domainMetadata", "rowTracking"]
    if _true(configuration, "delta.enableInCommitTimestamps"):
        needed.append("inCommitTimestamp")
    if _true(configuration, "delta.enableTypeWidening"):
        needed.append("typeWidening")
    for version in (1, 2):
        if _true(configuration, f"delta.enableIcebergCompatV{version}"):
            needed.append(f"icebergCompatV{version}")
    if _has_type(schema, lambda t: pa.types.is_timestamp(t) and t.tz is None):
        needed.append("timestampNtz")
    if _has_type(schema, is_variant_storage):
        needed.append("variantType")
    if configuration.get("delta.checkpointPolicy", "classic").strip().lower() == "v2":
        needed.append("v2Checkpoint")
    for key, value in configuration.items():  # explicit opt-in: delta.feature.<name>=supported
        if key.startswith("delta.feature.") and value.strip().lower() in ("supported", "enabled"):
            feature = key[len("delta.feature."):]
            if feature not in SUPPORTED_WRITER_FEATURES:
                raise _unsupported("writer", feature, f"{key} asks for a feature deltatx does not implement")
            for f in FEATURE_DEPENDENCIES.get(feature, ()) + (feature,):
                if f not in needed:
                    needed.append(f)
    return needed


def required_protocol(
    configuration: dict[str, str], schema: pa.Schema, current: Protocol | None = None
) -> Protocol:
    """The lowest protocol a table with this configuration and schema needs; never below ``current``.

    Without named features the answer is the legacy (1, 2) that Spark and delta-rs create. A
    writer-only feature moves the writer to 7; a reader-writer feature moves to (3, 7). Moving a
    legacy protocol to named features lists the features its old versions implied, so nothing the
    table promised is lost. Features deltatx cannot write raise UnsupportedFeatureError.
    """
    base = current or Protocol(1, 2)
    reader = max(base.min_reader_version, 1)
    writer = max(base.min_writer_version, 2)
    needed = _needed_features(configuration, schema)
    for feature in ("typeWidening", "variantType"):  # the preview name serves the same rules
        if f"{feature}-preview" in writer_features(base):
            needed = [f for f in needed if f != feature]
    reader_needed = [f for f in needed if f in _READER_WRITER_FEATURES]
    have_readers = set(reader_features(base))
    have_writers = set(writer_features(base))
    new_readers = [f for f in reader_needed if f not in have_readers]
    new_writers = [f for f in needed if f not in have_writers]
    if not new_readers and not new_writers:
        if (reader, writer) == (base.min_reader_version, base.min_writer_version):
            return base
        return Protocol(reader, writer, base.reader_features, base.writer_features)
    writer_list = list(writer_features(base)) if base.min_writer_version >= 7 else list(
        _LEGACY_WRITER_FEATURES.get(writer, ())
    )
    writer_list += [f for f in needed if f not in writer_list]
    if reader_needed or base.min_reader_version >= 3:
        reader_list = list(reader_features(base)) if base.min_reader_version >= 3 else list(
            _LEGACY_READER_FEATURES.get(reader, ())
        )
        reader_list += [f for f in reader_needed if f not in reader_list]
        return Protocol(3, 7, tuple(reader_list), tuple(writer_list))
    return Protocol(reader, 7, None, tuple(writer_list))
