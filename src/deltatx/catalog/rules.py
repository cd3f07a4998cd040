"""What managing a table requires of its commits and of its log files (PROTOCOL.md, catalogManaged).

* **ownership**: PROTOCOL.md does not say where a table names its managing catalog (a client finds
  the table through the catalog: "Table Discovery"); catalogs record it themselves, e.g. Unity
  Catalog's ``io.unitycatalog.tableId`` table property. A deltatx catalog records its identity
  (a UUID kept in its database, the same under any URL of it) in the table property
  :data:`CATALOG_ID`, so that a second catalog refuses to adopt a table another one manages.
* **in-commit timestamps**: "must be supported and active" on a catalog-managed table (published
  files' mtimes are publish times, not commit times). A commit that would turn them off, or name
  another catalog, or name none, is refused before it is ratified (:func:`check_catalog_metadata`);
  RESTORE keeps the current values (:func:`keep_catalog_properties`), and a path table released
  from its catalog restored to a catalog-era version gets neither back
  (:func:`released_restored_metadata`).
* **maintenance at commit time**: an OPTIMIZE or REORG is checked against the catalog's policy
  when it is ratified, not only when it was staged (:func:`maintenance_operation`).
* **checkpoints the catalog can vouch for** (:func:`vouched`).
* **creation**: properties that contradict management are refused, not overridden
  (:func:`refuse_unmanaged_properties`).
"""

from __future__ import annotations

from typing import Any, Sequence

import orjson

from ..errors import CatalogManagedPropertyError, CatalogTableOwnedError  # noqa: F401 - re-exported
from ..txnlog.features import CATALOG_MANAGED
from ..txnlog.store import LogFile

ICT_ENABLED = "delta.enableInCommitTimestamps"
ICT_VERSION = "delta.inCommitTimestampEnablementVersion"
ICT_TIMESTAMP = "delta.inCommitTimestampEnablementTimestamp"
#: the managing catalog's identity (its database's deltatx_catalog_info.id)
CATALOG_ID = "deltatx.catalogId"
#: what RESTORE keeps from the current version on a catalog-managed table
KEPT_ON_RESTORE = (ICT_ENABLED, ICT_VERSION, ICT_TIMESTAMP, CATALOG_ID)
#: commits that are maintenance (data layout changes): the catalog's policy decides at ratification
MAINTENANCE_OPERATIONS = ("OPTIMIZE", "REORG")


def refuse_unmanaged_properties(properties: dict[str, Any], catalog_id: str, name: str) -> None:
    """A create whose properties contradict catalog management (in-commit timestamps off, the
    ``catalogManaged`` feature disabled, another catalog's identity) is refused, as the same
    change by ``set_properties`` is, instead of being silently overridden."""
    feature = f"delta.feature.{CATALOG_MANAGED}"
    given = {str(k).lower(): (k, str(v).strip().lower()) for k, v in properties.items()}
    if ICT_ENABLED.lower() in given and given[ICT_ENABLED.lower()][1] != "true":
        raise CatalogManagedPropertyError(
            f"table {name!r} would be catalog-managed, and PROTOCOL.md requires in-commit timestamps on a "
            f"catalog-managed table: {ICT_ENABLED}={properties[given[ICT_ENABLED.lower()][0]]!r} is refused; "
            f"nothing was created")
    if feature.lower() in given and given[feature.lower()][1] not in ("supported", "enabled"):
        raise CatalogManagedPropertyError(
            f"table {name!r} is created catalog-managed: {feature}={properties[given[feature.lower()][0]]!r} "
            f"contradicts it; nothing was created (create a path table with deltatx.create_table instead)")
    if CATALOG_ID.lower() in given and str(properties[given[CATALOG_ID.lower()][0]]) != catalog_id:
        raise CatalogManagedPropertyError(
            f"table {name!r} would be managed by this catalog ({catalog_id!r}): {CATALOG_ID} cannot name "
            f"another one; nothing was created")


def maintenance_operation(data: bytes) -> str | None:
    """The maintenance operation a commit records in its commitInfo (first line), if any."""
    first = data.split(b"\n", 1)[0]
    if not any(op.encode() in first for op in MAINTENANCE_OPERATIONS):
        return None  # the common case: no parse
    info = (orjson.loads(first) or {}).get("commitInfo") or {}
    op = info.get("operation")
    if op in MAINTENANCE_OPERATIONS:
        return op
    ops: Any = (info.get("operationParameters") or {}).get("operations") or ()
    if isinstance(ops, str):  # parameters are stored JSON-encoded
        try:
            ops = orjson.loads(ops)
        except orjson.JSONDecodeError:
            ops = ()
    return next((o for o in ops if o in MAINTENANCE_OPERATIONS), None) if isinstance(ops, list) else None


def check_catalog_metadata(data: bytes, catalog_id: str, uri: str) -> None:
    """Refuse a commit whose ``metaData`` turns in-commit timestamps off, or names another
    catalog, while the table stays catalog-managed (a release drops ``catalogManaged`` in the
    same commit: it is not checked). O(1) for a commit without metaData (a byte search)."""
    if b'"metaData"' not in data:
        return
    metadata = protocol = None
    for line in data.split(b"\n"):
        if line.startswith(b'{"metaData"'):
            metadata = orjson.loads(line)["metaData"]
        elif line.startswith(b'{"protocol"'):
            protocol = orjson.loads(line)["protocol"]
    if metadata is None:
        return
    if protocol is not None and CATALOG_MANAGED not in (protocol.get("writerFeatures") or ()):
        return  # a release: the table is a path table after this commit
    config = metadata.get("configuration") or {}
    if str(config.get(ICT_ENABLED, "")).lower() != "true":
        raise CatalogManagedPropertyError(
            f"the table at {uri!r} is catalog-managed: PROTOCOL.md requires in-commit timestamps to stay "
            f"enabled ({ICT_ENABLED}=true); nothing was committed. Release the table from its catalog "
            f"(cat.release(name)) to turn them off")
    owner = config.get(CATALOG_ID)
    if owner is None:
        # removing the identity (UNSET TBLPROPERTIES, a REPLACE TABLE without it) would leave a
        # table no catalog may adopt again, its own included (register refuses a catalog-managed
        # table that names no catalog): refused as naming another catalog is
        raise CatalogManagedPropertyError(
            f"the table at {uri!r} is managed by catalog {catalog_id!r}: {CATALOG_ID} records that and "
            f"cannot be removed; nothing was committed. Release the table from its catalog "
            f"(cat.release(name)) to make it a path table (a table this catalog adopted before it recorded "
            f"its identity records it with set_properties({{{CATALOG_ID!r}: cat.catalog_id}}))")
    if owner != catalog_id:
        raise CatalogManagedPropertyError(
            f"the table at {uri!r} is managed by catalog {catalog_id!r}: {CATALOG_ID} cannot name another "
            f"catalog ({owner!r}); nothing was committed")


def keep_catalog_properties(current: Any, restored: Any) -> Any:
    """RESTORE of a catalog-managed table: the restored metadata keeps the current values of
    :data:`KEPT_ON_RESTORE` (a version from before the table was registered had in-commit
    timestamps off and no owner)."""
    return _with_current_catalog_properties(current, restored, drop_absent=False)


def released_restored_metadata(current: Any, restored: Any) -> Any:
    """RESTORE of a path table to a version written while it was catalog-managed (it was
    released since: ``Catalog.release``, ``drop_table``): the restored metadata takes the
    current values of :data:`KEPT_ON_RESTORE` and drops those the table has not now.

    Why: catalog ownership is not table content. Restored, ``deltatx.catalogId`` would name a
    catalog that forgot the table (and block every other catalog's ``register``), and
    ``delta.enableInCommitTimestamps=true`` — which a catalog requires, and ``release`` turned
    off so that engines without the feature (deltalake 1.x) can write the table — would put
    ``inCommitTimestamp`` back into the protocol. The protocol's ``catalogManaged`` never comes
    back either way (RESTORE raises a protocol only for what the restored properties need)."""
    return _with_current_catalog_properties(current, restored, drop_absent=True)


def _with_current_catalog_properties(current: Any, restored: Any, *, drop_absent: bool) -> Any:
    """``restored`` whose :data:`KEPT_ON_RESTORE` properties are the current ones; with
    ``drop_absent`` those the current metadata lacks are dropped too (else kept as restored)."""
    config = {k: v for k, v in restored.configuration.items() if not (drop_absent and k in KEPT_ON_RESTORE)}
    config.update({k: current.configuration[k] for k in KEPT_ON_RESTORE if k in current.configuration})
    return restored if config == dict(restored.configuration) else restored.replace(configuration=config)


def vouched(files: Sequence[LogFile]) -> list[LogFile]:
    """The listing without the checkpoints the catalog cannot vouch for.

    The rule: a checkpoint of version v is used only if ``_delta_log/<v>.json`` is listed and the
    checkpoint is not older (mtime) than it. Why that is sound: the catalog's clients checkpoint
    only versions they have published, so after the published file. A checkpoint of a version
    the catalog had not ratified yet (written by a client that ignored the catalog, next to its
    own stray ``<v>.json``) is older than the catalog's publication of its own commit v, which
    replaces the stray file with a new one (store.py: a put, a replace, or a link whose mtime is
    then set); so it is ignored and readers replay the JSON commits instead. Metadata cleanup
    keeps the commit file of the checkpoint it keeps (PROTOCOL.md), so a good checkpoint always
    has its JSON next to it. Limits: a filesystem whose mtimes are coarser than the time between
    a stray checkpoint and the catalog's publication (S3: one second) cannot tell them apart."""
    commits = {f.version: f.mtime_ms for f in files if f.kind == "commit"}
    return [f for f in files if f.kind != "checkpoint" or f.mtime_ms >= commits.get(f.version, f.mtime_ms + 1)]
