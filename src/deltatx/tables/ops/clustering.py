"""Liquid clustering: CLUSTER BY (at creation or later) and the incremental OPTIMIZE of a clustered table.

CLUSTER BY (:func:`stage_cluster_by`, :func:`creation_clustering`) writes the ``delta.clustering``
domain (:mod:`deltatx.txnlog.clustering`) and, the first time, upgrades the protocol to the
``clustering`` writer feature (with ``domainMetadata``). Delta's rules are enforced before
anything is written: no partition columns, at most four columns, each an existing column that
gets min/max statistics (clustering only helps through them). ``cluster_by(None)`` is CLUSTER BY
NONE: the domain stays, with no columns.

OPTIMIZE on a clustered table (:func:`stage_cluster`) rewrites files sorted along a Hilbert curve
over the clustering columns and cut at the target size (:class:`.layout.Layout`), tagged
``clusteringProvider="liquid"``. Which files it rewrites (:func:`plan_clustering`, decided from
the log alone):

1. every *unclustered* file: no ``clusteringProvider``, or ``"liquid"`` but clustered by other
   columns than today's (``ZCUBE_ZORDER_BY``), or one whose deletion vector must be purged;
2. every clustered file smaller than half the target size (a run's tail, a file a DELETE
   shrank) — but not when the only candidates are files of one earlier run: re-sorting a run
   by itself gains nothing, and this keeps a second OPTIMIZE a no-op;
3. the clustered, large files *overlapped* by those: their min/max box on the clustering
   columns meets the box of the files of 1–2. Merging them restores tight files where new rows
   landed. They are taken only while they hold at most :data:`OVERLAP_BUDGET` times the bytes of
   1–2; past that the new rows are clustered on their own (as Delta starts a new ZCube) and the
   old files are left alone, so a run costs in proportion to what changed. ``full=True``
   (OPTIMIZE FULL) rewrites every file.

Files of another clustering implementation (another ``clusteringProvider``) are never rewritten
(PROTOCOL.md). A CLUSTER BY committed while an OPTIMIZE runs does not conflict with it: the files
that OPTIMIZE writes record the old columns, so the next OPTIMIZE re-clusters them (rule 1). The rows do not change: removes and adds carry ``dataChange=false``, so OPTIMIZE
never conflicts with appends; row ids are kept and deletion vectors purged as in OPTIMIZE.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import ClusteringError
from ...txnlog.actions import DomainMetadata
from ...txnlog.clustering import (
    CLUSTERING_FEATURE,
    CLUSTERING_PROVIDER,
    MAX_CLUSTERING_COLUMNS,
    Path,
    clustering_domain,
    clustering_paths,
    is_clustered,
    join_path,
    logical_name,
    physical_path,
    resolve_field,
    split_name,
)
from ...txnlog.features import required_protocol
from ...txnlog.stats import has_min_max, parse_stats, stats_leaf_paths
from .. import properties as props
from .layout import ZCUBE_ID, ZCUBE_ZORDER_BY, Layout
from .optimize import files_to_purge, rewrite_metrics, stage_optimize, stage_rewrite, target_file_size
from .rewrite import options_for

if TYPE_CHECKING:
    from ...txnlog.snapshot import Snapshot
    from ..transaction import Transaction

#: a clustered file under this share of the target size is re-clustered with new data
SMALL_FRACTION = 0.5
#: large clustered files overlapped by new data are merged while they hold at most this many
#: times the new bytes
OVERLAP_BUDGET = 4.0

_FEATURE_KEY = props.FEATURE_PREFIX + CLUSTERING_FEATURE


# --------------------------------------------------------------------------------------------
# Which columns: resolution and Delta's rules
# --------------------------------------------------------------------------------------------


def column_names(columns: Any, error: type[ClusteringError] = ClusteringError) -> list[str]:
    """A column list as given by a user (None, one name or a list of names) → names."""
    if columns is None:
        return []
    if isinstance(columns, str):
        columns = [columns]
    if not isinstance(columns, (list, tuple)) or not all(isinstance(c, str) and c.strip() for c in columns):
        raise error(f"columns must be a list of column names, got {columns!r}")
    return list(columns)


def _partition_column_message(name: str, what: str) -> str:
    """Why a partition column cannot order files (Delta's wording for Z-order, which delta-spark's
    tests look for): the files of a partition hold one value of it already."""
    if what == "ZORDER BY":
        return (f"{name} is a partition column. Z-Ordering can only be performed on data columns "
                f"(the files of a partition already hold one value of it)")
    return f"{what} column {name!r} is a partition column; files are already separated by it"


def resolve_columns(schema: pa.Schema, properties: Mapping[str, str], partition_columns: Sequence[str],
                    names: Sequence[str], what: str, error: type[ClusteringError] = ClusteringError) -> list[Path]:
    """The logical paths of ``names``; raises ``error`` unless each is an existing, distinct,
    non-partition column that gets min/max statistics in the files the table writes."""
    data_fields = [f for f in schema if f.name not in partition_columns]
    opts = options_for(dict(properties))
    with_stats = {path for path, _ in stats_leaf_paths(pa.schema(data_fields), opts.stats_columns,
                                                        opts.num_indexed_cols)}
    paths: list[Path] = []
    for name in names:
        if name in partition_columns:
            raise error(_partition_column_message(name, what))
        found = resolve_field(list(schema), split_name(name))
        if found is None:
            raise error(f"{what} column {name!r} is not in the table schema {schema.names}")
        path, field = found
        if path[0] in partition_columns:
            raise error(_partition_column_message(name, what))
        if path in paths:
            raise error(f"{what} column {name!r} is named twice")
        if not has_min_max(field.type):
            raise error(f"{what} column {name!r} has type {field.type}, which gets no min/max statistics, "
                        f"so clustering on it cannot skip files")
        if path not in with_stats and opts.stats_columns is not None:
            raise error(f"{what} column {name!r} gets no statistics: {props.STATS_COLUMNS} lists only "
                        f"{', '.join(opts.stats_columns) or 'no column'}; add it to the list")
        if path not in with_stats:
            raise error(f"{what} column {name!r} gets no statistics: only the first {opts.num_indexed_cols} "
                        f"columns do ({props.NUM_INDEXED_COLS}); raise it or move the column")
        paths.append(path)
    return paths


def clustering_spec(schema: pa.Schema, properties: Mapping[str, str], partition_columns: Sequence[str],
                    columns: Any) -> list[Path]:
    """Validate a CLUSTER BY column list (Delta's rules); [] for CLUSTER BY NONE."""
    names = column_names(columns)
    if names and partition_columns:
        raise ClusteringError(
            f"a partitioned table (partitioned by {list(partition_columns)}) cannot be clustered; "
            f"Delta allows clustering or partitioning, not both"
        )
    if len(names) > MAX_CLUSTERING_COLUMNS:
        raise ClusteringError(f"at most {MAX_CLUSTERING_COLUMNS} clustering columns are allowed, got {len(names)}")
    return resolve_columns(schema, properties, partition_columns, names, "clustering")


# --------------------------------------------------------------------------------------------
# Reading the clustering columns
# --------------------------------------------------------------------------------------------


def _recorded_names(schema: pa.Schema, configuration: Mapping[str, str], physical: list[Path]
                    ) -> list[tuple[Path, str | None]]:
    """Each recorded clustering column's physical path with its logical name (None: no longer
    in the schema, a record another writer left stale)."""
    return [(p, logical_name(schema, configuration, p)) for p in physical]


def _logical_paths(schema: pa.Schema, configuration: Mapping[str, str], physical: list[Path]) -> list[Path]:
    out = []
    for p, name in _recorded_names(schema, configuration, physical):
        if name is None:
            raise ClusteringError(f"clustering column {join_path(p)!r} is no longer in the schema {schema.names}")
        out.append(split_name(name))
    return out


def clustering_columns(snapshot: "Snapshot") -> list[str] | None:
    """The clustering columns of a snapshot (logical, dotted), [] for CLUSTER BY NONE, None when
    the table is not clustered."""
    if not is_clustered(snapshot.protocol):
        return None
    physical = clustering_paths(snapshot.domains) or []
    return [join_path(p) for p in _logical_paths(snapshot.schema, snapshot.properties, physical)]


def refuse_feature_property(configuration: Mapping[str, str]) -> None:
    """``delta.feature.clustering`` set as a property would make a table clustered without the
    ``delta.clustering`` domain PROTOCOL.md requires (and on a partitioned table, both at once):
    refused as delta-spark refuses it; CLUSTER BY is how a table becomes clustered."""
    if any(k.lower() == _FEATURE_KEY.lower() for k in configuration):
        raise ClusteringError(
            f"{_FEATURE_KEY} cannot be set as a property: a clustered table needs its clustering "
            f"columns; use create_table(cluster_by=[...]) or table.cluster_by([...])")


def clustering_columns_of(tx: "Transaction") -> list[Path]:
    """The logical paths a transaction's table is clustered by ([] when it is not clustered);
    a column the record names that is no longer in the schema is left out."""
    if not is_clustered(tx.protocol):
        return []
    recorded = _recorded_names(tx.schema, tx.properties, clustering_paths(tx.domains) or [])
    return [split_name(name) for _, name in recorded if name is not None]


def is_clustered_table(tx: "Transaction") -> bool:
    return is_clustered(tx.protocol)


def check_stats_cover_clustering(protocol, domains: Mapping[str, DomainMetadata], schema: pa.Schema,
                                 configuration: Mapping[str, str]) -> None:
    """Raise ClusteringError when ``configuration`` would stop statistics on a clustering column
    (PROTOCOL.md: every file needs them). O(1) on an unclustered table."""
    if not is_clustered(protocol):
        return
    physical = clustering_paths(domains) or []
    if physical:
        names = [join_path(p) for p in _logical_paths(schema, configuration, physical)]
        resolve_columns(schema, configuration, [], names, "clustering")


# --------------------------------------------------------------------------------------------
# CLUSTER BY
# --------------------------------------------------------------------------------------------


def creation_clustering(schema: pa.Schema, partition_by: Sequence[str], configuration: dict[str, str],
                        columns: Any) -> tuple[dict[str, str], DomainMetadata, list[str]]:
    """For ``create_table(cluster_by=...)``: the configuration asking for the ``clustering``
    feature (the key is dropped before it is stored), the domain, and the logical names."""
    paths = clustering_spec(schema, configuration, partition_by, columns)
    physical = [physical_path(schema, configuration, p) for p in paths]
    return {**configuration, _FEATURE_KEY: "supported"}, clustering_domain(physical), [join_path(p) for p in paths]


def _check_files_have_stats(files: pa.Table, schema: pa.Schema, paths: Sequence[Path]) -> None:
    """PROTOCOL.md: a new clustering column needs statistics in *every* file already there. A
    file's stats name the column if they count its nulls (min/max may be absent: all null)."""
    if not files.num_rows:
        return
    for path in paths:
        top = schema.field(path[0])
        parsed = parse_stats(files["stats"], pa.schema([top]))
        counts = pc.struct_field(pc.struct_field(parsed, "nullCount"), top.name)
        for part in path[1:]:
            counts = pc.struct_field(counts, part)
        if counts.null_count:
            first = files["path"][pc.index(pc.is_null(counts), True).as_py()].as_py()
            raise ClusteringError(
                f"clustering column {join_path(path)!r} has no statistics in {counts.null_count} existing "
                f"file(s) (e.g. {first!r}), written when the column got none; Delta requires them in every "
                f"file: rewrite those files (e.g. overwrite the table) before clustering by it"
            )


def stage_cluster_by(tx: "Transaction", columns: Any) -> dict[str, Any]:
    """ALTER TABLE CLUSTER BY (columns) / CLUSTER BY NONE (None or []).

    Stages the ``delta.clustering`` domain (a concurrent CLUSTER BY then conflicts with
    ConcurrentTransactionException, as in Delta) and, on a table without the feature, the
    protocol upgrade. Reads nothing: concurrent appends are never affected. CLUSTER BY NONE on a
    table that is not clustered stages nothing.
    """
    schema, configuration = tx.schema, tx.properties
    paths = clustering_spec(schema, configuration, tx.partition_columns, columns)
    _check_files_have_stats(tx.current_files(), schema, paths)
    new = [join_path(p) for p in paths]
    clustered = is_clustered(tx.protocol)
    # the old columns as recorded: one no longer in the schema (a record another writer left
    # stale) is named by its physical path, so that CLUSTER BY can still replace the record
    old = [name or join_path(p) for p, name in _recorded_names(schema, configuration, clustering_paths(tx.domains) or [])] \
        if clustered else []
    if not clustered and paths:
        tx.stage_protocol(required_protocol({**configuration, _FEATURE_KEY: "supported"}, schema, tx.protocol))
    if clustered or paths:
        tx.stage_domain(clustering_domain([physical_path(schema, configuration, p) for p in paths]), system=True)
    tx.note_operation("CLUSTER BY", {"oldClusteringColumns": old, "newClusteringColumns": new}, {},
                      changes_data=False)
    return {}


# --------------------------------------------------------------------------------------------
# OPTIMIZE of a clustered table
# --------------------------------------------------------------------------------------------


def _column_bounds(files: pa.Table, schema: pa.Schema, path: Path) -> tuple[pa.Array, pa.Array]:
    """Per-file (min, max) of one column from the stats (nulls where unknown)."""
    top = schema.field(path[0])
    parsed = parse_stats(files["stats"], pa.schema([top]))
    lo = pc.struct_field(pc.struct_field(parsed, "minValues"), top.name)
    hi = pc.struct_field(pc.struct_field(parsed, "maxValues"), top.name)
    for part in path[1:]:
        if not pa.types.is_struct(lo.type) or lo.type.get_field_index(part) < 0:
            return pa.nulls(files.num_rows), pa.nulls(files.num_rows)
        lo, hi = pc.struct_field(lo, part), pc.struct_field(hi, part)
    return lo, hi


def _overlapping(files: pa.Table, schema: pa.Schema, columns: Sequence[Path], fresh: np.ndarray) -> np.ndarray:
    """Files whose clustering-column box meets the box of the ``fresh`` files (unknown bounds:
    they may, so they do)."""
    result = np.ones(files.num_rows, dtype=bool)
    chosen = pa.array(fresh)
    for path in columns:
        lo, hi = _column_bounds(files, schema, path)
        if pa.types.is_null(lo.type):
            continue
        new_lo, new_hi = lo.filter(chosen), hi.filter(chosen)
        if new_lo.null_count or new_hi.null_count:
            continue  # a fresh file of unknown range may be anywhere on this column
        low, high = pc.min(new_lo), pc.max(new_hi)
        meets = pc.and_(pc.greater_equal(hi, low), pc.less_equal(lo, high))
        result &= pc.fill_null(meets, True).to_numpy(zero_copy_only=False)
    return result


def plan_clustering(files: pa.Table, schema: pa.Schema, columns: Sequence[Path], recorded_columns: str,
                    target_size: int, *, full: bool = False, purge: np.ndarray | None = None) -> pa.Table:
    """The files one clustering run rewrites (see the module docstring), with ``bin`` = 0."""
    n = files.num_rows
    none = files.slice(0, 0).append_column("bin", pa.array([], pa.int64()))
    if not n:
        return none
    provider = files["clusteringProvider"]
    liquid = pc.fill_null(pc.equal(provider, CLUSTERING_PROVIDER), False).to_numpy(zero_copy_only=False)
    foreign = pc.is_valid(provider).to_numpy(zero_copy_only=False) & ~liquid
    recorded = pc.map_lookup(files["tags"], pa.scalar(ZCUBE_ZORDER_BY), "first")
    same_columns = pc.fill_null(pc.equal(recorded, recorded_columns), True).to_numpy(zero_copy_only=False)
    clustered = liquid & same_columns
    sizes = files["size"].to_numpy()
    purge = np.zeros(n, dtype=bool) if purge is None else purge
    eligible = ~foreign
    if full:
        chosen = eligible
    else:
        small = sizes < target_size * SMALL_FRACTION
        fresh = eligible & (~clustered | small | purge)
        if not fresh.any():
            return none
        if not (fresh & (~clustered | purge)).any():
            runs = pc.map_lookup(files["tags"], pa.scalar(ZCUBE_ID), "first").filter(pa.array(fresh))
            if runs.null_count == 0 and len(pc.unique(runs)) == 1:
                return none  # only one earlier run's own small files: re-sorting them gains nothing
        large = eligible & clustered & ~fresh
        overlap = large & _overlapping(files, schema, columns, fresh) if large.any() else large
        within_budget = sizes[overlap].sum() <= OVERLAP_BUDGET * sizes[fresh].sum()
        chosen = fresh | overlap if within_budget else fresh
    picked = files.filter(pa.array(chosen))
    return picked.append_column("bin", pa.array(np.zeros(picked.num_rows, dtype=np.int64)))


def stage_cluster(tx: "Transaction", where: str | None = None, target_size: int | None = None,
                  full: bool = False) -> dict[str, Any]:
    """OPTIMIZE of a clustered table (incremental; ``full`` re-clusters every file)."""
    if where is not None:
        raise ClusteringError(
            "OPTIMIZE of a clustered table takes no where=: a clustered table has no partitions to "
            "select (Delta: DELTA_CLUSTERING_WITH_PARTITION_PREDICATE)"
        )
    physical = clustering_paths(tx.domains) or []
    if not physical:  # CLUSTER BY NONE: nothing to cluster by, so plain compaction
        return stage_optimize(tx, target_size=target_size)
    started = time.perf_counter()
    schema = tx.schema
    columns = _logical_paths(schema, tx.properties, physical)
    target = target_file_size(tx.properties, target_size)
    files = tx.current_files()
    purge = files_to_purge(files, False) if files.num_rows else None
    recorded = Layout.columns_json([join_path(p) for p in physical])
    planned = plan_clustering(files, schema, columns, recorded, target, full=full, purge=purge)
    layout = Layout(columns=tuple(columns), curve="hilbert", target_size=target, provider=CLUSTERING_PROVIDER,
                    recorded_columns=recorded)
    compacted, adds = stage_rewrite(tx, planned, None, layout)
    metrics = rewrite_metrics(tx, planned, compacted, adds, files.num_rows, started)
    params = {"predicate": [], "zOrderBy": [], "clusterBy": [join_path(p) for p in columns], "auto": False,
              "isFull": bool(full), "targetSize": target}
    tx.note_operation("OPTIMIZE", params, metrics, changes_data=False)
    return metrics
