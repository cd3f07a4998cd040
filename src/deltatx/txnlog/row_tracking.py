"""Row tracking (PROTOCOL.md "Row Tracking"): the action-level arithmetic, pure and columnar.

Every row of a row-tracking table has a stable id and the version that last changed it:

- a file's rows get ``baseRowId + position`` unless its materialized row-id column holds a value
  (rows rewritten by UPDATE/MERGE/OPTIMIZE carry their old id there), and
  ``defaultRowCommitVersion`` unless the materialized commit-version column holds one;
- fresh ``baseRowId``s are handed out above the table's high-water mark, kept in the
  ``delta.rowTracking`` domain as ``{"rowIdHighWaterMark": N}``; each file takes ``numRecords``
  ids (its physical rows, so a deletion vector never frees ids).

The transaction assigns ids when it prepares a commit (:func:`assign_row_ids`), with the version
it is about to commit; the conflict checker rebases them when it loses the race (Delta's rules
#7 and #8: ids above the *read* watermark move above the winner's; a
``defaultRowCommitVersion`` equal to the winner's version moves to the next one). Re-committed
files (a deletion-vector update re-adds the same path) keep their ids: they are at or below the
read watermark.
"""

from __future__ import annotations

import uuid

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import DeltaTxError, InvalidPropertyError, SchemaMismatchError
from .actions import DomainMetadata, Protocol
from .column_mapping import physical_name
from .stats import record_count, record_counts

ROW_TRACKING_DOMAIN = "delta.rowTracking"
ENABLE_ROW_TRACKING = "delta.enableRowTracking"
ROW_TRACKING_SUSPENDED = "delta.rowTrackingSuspended"
MATERIALIZED_ROW_ID = "delta.rowTracking.materializedRowIdColumnName"
MATERIALIZED_ROW_COMMIT_VERSION = "delta.rowTracking.materializedRowCommitVersionColumnName"
#: commitInfo tag Delta writes when every row of the commit kept its id
PRESERVED_TAG = "delta.rowTracking.preserved"
BACKFILL_OPERATION = "ROW TRACKING BACKFILL"

#: the watermark of a table that never assigned an id
NO_WATERMARK = -1


def is_supported(protocol: Protocol) -> bool:
    """Writers must assign row ids as soon as the protocol lists ``rowTracking``."""
    from .features import writer_features

    return "rowTracking" in writer_features(protocol)


def is_enabled(configuration: dict[str, str]) -> bool:
    """Every file has ids (backfill done): readers may rely on them."""
    return configuration.get(ENABLE_ROW_TRACKING, "false").strip().lower() == "true"


def preserved_tag(read_protocol: Protocol, read_configuration: dict[str, str],
                  new_protocol: Protocol | None) -> str | None:
    """``commitInfo.tags["delta.rowTracking.preserved"]`` of a commit that adds files.

    "true" only when row tracking was enabled in the snapshot the transaction read (Delta's
    ``addPreservedRowTrackingTagIfNotSet(txn.snapshot)``): only then did every row it rewrote
    have an id to carry. A commit that ends up on a table whose protocol gained row tracking
    after that read (a rebase onto a winner that enabled it, or the enabling commit itself)
    assigned fresh ids: "false", as Delta tags it. Otherwise no tag (readers read none as not
    preserved)."""
    if is_supported(read_protocol) and is_enabled(read_configuration):
        return "true"
    if new_protocol is not None and is_supported(new_protocol) and not is_supported(read_protocol):
        return "false"
    return None


def is_suspended(configuration: dict[str, str]) -> bool:
    return configuration.get(ROW_TRACKING_SUSPENDED, "false").strip().lower() == "true"


def check_rules(schema: pa.Schema, configuration: dict[str, str]) -> None:
    """The rules row tracking puts on every new schema or configuration (PROTOCOL.md "Row
    Tracking"), so that no reader ever meets a row without a stable id or two rows with one:

    - ``delta.enableRowTracking`` and ``delta.rowTrackingSuspended`` cannot both be true: a
      suspended table's writers assign no ids, while readers of an enabled one rely on them
      (Delta's DELTA_ROW_TRACKING_ILLEGAL_PROPERTY_COMBINATION; delta-kernel-rs refuses the pair);
    - no top-level column may be named, logically or physically, like the hidden columns that
      keep rewritten rows' ids and commit versions: its values would be read as those (Delta's
      DELTA_ADDING_COLUMN_WITH_INTERNAL_NAME_FAILED; the names must "remain unique in all
      future versions of the table")."""
    if is_enabled(configuration) and is_suspended(configuration):
        raise InvalidPropertyError(
            f"{ENABLE_ROW_TRACKING}=true and {ROW_TRACKING_SUSPENDED}=true cannot be set together: writers of a "
            f"suspended table assign no row ids, while readers of a table with row tracking on rely on every "
            f"row having one (set {ENABLE_ROW_TRACKING}=false to suspend it); nothing was committed")
    hidden = [configuration[key] for key in (MATERIALIZED_ROW_ID, MATERIALIZED_ROW_COMMIT_VERSION)
              if configuration.get(key)]
    if not hidden:
        return
    for field in schema:
        for name in {field.name, physical_name(field)}:
            if name in hidden:
                raise SchemaMismatchError(
                    f"column {field.name!r} cannot be added: the name {name!r} is reserved for the hidden column "
                    f"where row tracking keeps rewritten rows' "
                    f"{'ids' if name == configuration.get(MATERIALIZED_ROW_ID) else 'commit versions'} "
                    f"(DELTA_ADDING_COLUMN_WITH_INTERNAL_NAME_FAILED); nothing was committed")


def assigns_ids(protocol: Protocol, configuration: dict[str, str]) -> bool:
    return is_supported(protocol) and not is_suspended(configuration)


def with_materialized_names(configuration: dict[str, str]) -> dict[str, str]:
    """The configuration with the materialized column names generated, as Delta does at enablement."""
    if not is_enabled(configuration):
        return configuration
    out = dict(configuration)
    out.setdefault(MATERIALIZED_ROW_ID, f"_row-id-col-{uuid.uuid4()}")
    out.setdefault(MATERIALIZED_ROW_COMMIT_VERSION, f"_row-commit-version-col-{uuid.uuid4()}")
    return out


def high_watermark(domains: dict[str, DomainMetadata] | tuple[DomainMetadata, ...] | list[DomainMetadata]) -> int:
    """``rowIdHighWaterMark`` of the row-tracking domain (NO_WATERMARK when absent or removed)."""
    found = domains.get(ROW_TRACKING_DOMAIN) if isinstance(domains, dict) else next(
        (d for d in domains if d.domain == ROW_TRACKING_DOMAIN), None)
    if found is None or found.removed:
        return NO_WATERMARK
    try:
        return int(orjson.loads(found.configuration)["rowIdHighWaterMark"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        from ..errors import CorruptLogError

        raise CorruptLogError(f"the {ROW_TRACKING_DOMAIN} domain has no valid rowIdHighWaterMark: "
                              f"{found.configuration!r} ({exc})") from None


def watermark_domain(hwm: int) -> DomainMetadata:
    return DomainMetadata(ROW_TRACKING_DOMAIN, orjson.dumps({"rowIdHighWaterMark": hwm}).decode())


def physical_records(files: pa.Table) -> np.ndarray:
    """``numRecords`` of each file (physical rows: a DV does not lower it); required for ids."""
    if not files.num_rows:
        return np.empty(0, np.int64)
    counts = record_counts(files["stats"])
    if counts.null_count:
        first = files["path"][pc.index(pc.is_null(counts), True).as_py()].as_py()
        raise DeltaTxError(f"cannot assign row ids to {first!r}: its add action has no numRecords statistic")
    return counts.to_numpy(zero_copy_only=False)


def physical_record_count(path: str, stats: str | None) -> int:
    """:func:`physical_records` of one file, from its ``stats`` JSON string."""
    count = record_count(stats)
    if count is None:
        raise DeltaTxError(f"cannot assign row ids to {path!r}: its add action has no numRecords statistic")
    return count


def assign_row_ids(adds: pa.Table, read_hwm: int, start_hwm: int, version: int,
                   keep: pa.Array | None = None) -> tuple[pa.Table, int | None]:
    """Give fresh ``baseRowId``s to the adds that have none or one above ``read_hwm`` (ids this
    transaction handed out itself), starting above ``start_hwm``; fill a missing
    ``defaultRowCommitVersion`` with ``version``. ``keep`` names paths whose ids stay (ids a
    winning backfill gave). Returns (adds, new watermark, or None when no id was assigned)."""
    if not adds.num_rows:
        return adds, None
    if adds.num_rows <= _FEW_ADDS:
        return _assign_few(adds, read_hwm, start_hwm, version, keep)
    base = adds["baseRowId"]
    fresh_mask = pc.fill_null(pc.or_kleene(pc.is_null(base), pc.greater(base, read_hwm)), True)
    if keep is not None and len(keep):
        fresh_mask = pc.and_(fresh_mask, pc.invert(pc.is_in(adds["path"], value_set=keep)))
    fresh = fresh_mask.to_numpy(zero_copy_only=False)
    out = adds
    hwm = None
    if fresh.any():
        counts = physical_records(adds.filter(pa.array(fresh)))
        new_base = pc.fill_null(base, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        new_base[fresh] = start_hwm + 1 + np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        out = out.set_column(out.schema.get_field_index("baseRowId"), "baseRowId", pa.array(new_base, pa.int64()))
        hwm = int(start_hwm + counts.sum())
    versions = out["defaultRowCommitVersion"]
    if versions.null_count:
        out = out.set_column(out.schema.get_field_index("defaultRowCommitVersion"), "defaultRowCommitVersion",
                             pc.fill_null(versions, pa.scalar(version, pa.int64())))
    return out, hwm


#: a commit's handful of adds is stamped in Python: a dozen compute calls cost more than that
_FEW_ADDS = 16


def _assign_few(adds: pa.Table, read_hwm: int, start_hwm: int, version: int,
                keep: pa.Array | None) -> tuple[pa.Table, int | None]:
    """:func:`assign_row_ids` for a few adds, with the same rules and the same error."""
    bases = adds.column("baseRowId").to_pylist()
    kept = set(keep.to_pylist()) if keep is not None and len(keep) else set()
    paths = adds.column("path").to_pylist() if kept else [None] * len(bases)
    hwm = start_hwm
    assigned = False
    new_bases = []
    counts: list[int | None] | None = None
    for i, (b, path) in enumerate(zip(bases, paths)):
        if (b is None or b > read_hwm) and path not in kept:
            counts = counts if counts is not None else record_counts(adds.column("stats")).to_pylist()
            if counts[i] is None:
                raise DeltaTxError(f"cannot assign row ids to {adds.column('path')[i].as_py()!r}: its add "
                                   f"action has no numRecords statistic")
            b, hwm, assigned = hwm + 1, hwm + counts[i], True
        new_bases.append(b)
    out = adds
    if assigned:
        out = out.set_column(out.schema.get_field_index("baseRowId"), "baseRowId", pa.array(new_bases, pa.int64()))
    versions = out.column("defaultRowCommitVersion")
    if versions.null_count:
        filled = [version if v is None else v for v in versions.to_pylist()]
        out = out.set_column(out.schema.get_field_index("defaultRowCommitVersion"), "defaultRowCommitVersion",
                             pa.array(filled, pa.int64()))
    return out, (hwm if assigned else None)


def bump_commit_versions(adds: pa.Table, winner_version: int) -> pa.Table:
    """Delta's rule #8: adds stamped with the winner's version move to the next one."""
    if not adds.num_rows:
        return adds
    versions = adds["defaultRowCommitVersion"]
    if adds.num_rows <= _FEW_ADDS:  # one list beats four kernels for a commit's few adds
        values = versions.to_pylist()
        if winner_version not in values:
            return adds
        bumped_few = [winner_version + 1 if v == winner_version else v for v in values]
        return adds.set_column(adds.schema.get_field_index("defaultRowCommitVersion"), "defaultRowCommitVersion",
                               pa.array(bumped_few, pa.int64()))
    hit = pc.equal(versions, winner_version)
    if not pc.any(pc.fill_null(hit, False)).as_py():
        return adds
    bumped = pc.if_else(pc.fill_null(hit, False), pa.scalar(winner_version + 1, pa.int64()), versions)
    return adds.set_column(adds.schema.get_field_index("defaultRowCommitVersion"), "defaultRowCommitVersion", bumped)


def paths_touched(adds: pa.Table, removes: pa.Table) -> frozenset[str]:
    """Paths a commit added or removed: the re-adds a losing backfill drops (Delta's #5)."""
    return frozenset(adds.column("path").to_pylist()) | frozenset(removes.column("path").to_pylist())


def copy_row_ids(files: pa.Table, backfilled: pa.Table, read_hwm: int = NO_WATERMARK) -> pa.Table:
    """Delta's #5: files a winning backfill gave ids take its ``baseRowId`` and
    ``defaultRowCommitVersion`` (matched by path) where ours has none, or one above ``read_hwm``:
    an id this transaction handed out itself, when it read the table after the protocol upgrade
    and re-added (a deletion-vector update) a file that had no ids then. Kept, that id would be
    one the backfill gave another file's rows; the file's rows have the backfill's ids now."""
    if not files.num_rows or not backfilled.num_rows:
        return files
    at = pc.index_in(files["path"], value_set=backfilled["path"])
    if at.null_count == len(at):
        return files
    base = files["baseRowId"]
    ours = pc.invert(pc.fill_null(pc.less_equal(base, read_hwm), False))  # none, or handed out by us
    take = pc.and_(ours, pc.is_valid(at))
    for name in ("baseRowId", "defaultRowCommitVersion"):
        theirs = pc.take(backfilled[name], at)
        files = files.set_column(files.schema.get_field_index(name), name,
                                 pc.if_else(take, pc.coalesce(theirs, files[name]), files[name]))
    return files
