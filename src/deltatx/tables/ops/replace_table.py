"""REPLACE TABLE: an existing table gets a new definition (schema, partitioning, properties) and no rows.

One commit, as Delta's ``CREATE OR REPLACE TABLE`` / ``DeltaTable.replace()``: every live file is
removed (``dataChange=true``), a new ``metaData`` (a new table id, like Delta) replaces the old,
and the protocol is raised if the new definition needs more, never lowered. A clustered table
stays one (the feature is not dropped), clustered by no column, so it cannot become partitioned.
The whole table is the read, and the metadata changes, so a concurrent commit of any file (a blind append included)
fails one of the two instead of leaving an old-schema file in the replaced table.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ...errors import ClusteringError, SchemaMismatchError
from ...txnlog import column_mapping, row_tracking
from ...txnlog.actions import Metadata
from ...txnlog.clustering import clustering_domain, is_clustered
from ...txnlog.features import check_writable, required_protocol
from ...txnlog.schema import check_field_names, normalize_schema, schema_to_json
from .. import properties as props
from ..defaults import validate_defaults

if TYPE_CHECKING:
    from ..transaction import Transaction


def check_table_schema(schema: pa.Schema, partition_by: list[str], configuration: dict[str, str]) -> None:
    """A new table definition's schema (create_table, REPLACE TABLE): at least one column, names
    Delta accepts (:func:`~deltatx.txnlog.schema.check_field_names`; with column mapping in the
    ``configuration`` more characters are allowed) and partition columns by :func:`check_partitioning`.
    Delta refuses such a table at creation; deltalake and Spark cannot read one written anyway."""
    if not schema.names:
        raise SchemaMismatchError("a table needs at least one column: the schema has none")
    check_field_names(schema, column_mapping.mode_of(configuration) != "none")
    check_partitioning(schema, partition_by)
    from ..stats_columns import check_stats_columns
    from .change_feed import check_reserved_columns

    check_stats_columns(schema, partition_by, configuration)
    check_reserved_columns(schema, configuration)
    row_tracking.check_rules(schema, configuration)


def check_partitioning(schema: pa.Schema, partition_by: list[str]) -> None:
    """Delta's rules for partition columns: in the schema, each once, not all columns, not nested."""
    twice = sorted({c for c in partition_by if partition_by.count(c) > 1})
    if twice:
        raise SchemaMismatchError(f"partition column(s) {twice} are given more than once in partition_by")
    missing = [c for c in partition_by if c not in schema.names]
    if missing:
        raise SchemaMismatchError(f"partition column(s) {missing} are not in the schema {schema.names}")
    if partition_by and len(partition_by) == len(schema.names):
        raise SchemaMismatchError("a table cannot be partitioned by all of its columns")
    nested = [c for c in partition_by if pa.types.is_nested(schema.field(c).type)]
    if nested:
        raise SchemaMismatchError(f"partition column(s) {nested} have nested types; partition by primitive columns")


def refuse_partitioning_a_clustered_table(protocol: Any, partition_by: list[str], uri: str) -> None:
    """A new definition (REPLACE, an overwrite with a new schema) may not partition a clustered
    table: the clustering feature stays in the protocol, and PROTOCOL.md forbids a table that is
    clustered and partitioned at once."""
    if partition_by and is_clustered(protocol):
        raise ClusteringError(
            f"cannot partition the clustered table {uri!r} by {list(partition_by)}: a table cannot be clustered "
            f"and partitioned at once, and the clustering feature is never dropped")


def stage_replace_table(tx: "Transaction", schema: pa.Schema, partition_by: list[str] | None = None,
                        properties: dict[str, Any] | None = None, description: str | None = None,
                        operation: str = "CREATE OR REPLACE TABLE") -> dict[str, Any]:
    """Stage the replacement of ``tx``'s table by an empty one defined by the arguments."""
    partition_by = list(partition_by or [])
    schema = normalize_schema(schema)
    config = row_tracking.with_materialized_names(props.validate_properties(properties or {}))
    check_table_schema(schema, partition_by, config)
    validate_defaults(schema)
    metadata = Metadata(id=Metadata.new_id(), schema_string=schema_to_json(schema),
                        partition_columns=tuple(partition_by), configuration=props.stored_configuration(config),
                        description=description, created_time=int(time.time() * 1000))
    keep = getattr(tx.store, "restored_metadata", None)
    if keep is not None:
        # a catalog-managed table stays managed through a REPLACE: the catalog's identity and the
        # in-commit timestamps it requires carry over, as through a RESTORE (catalog/rules.py)
        metadata = keep(tx.metadata, metadata)
        config = {**{k: v for k, v in metadata.configuration.items() if k not in config}, **config}
    protocol = required_protocol(config, schema, props.requested_protocol(config, tx.protocol))
    check_writable(protocol, metadata)
    clustered = is_clustered(protocol)
    refuse_partitioning_a_clustered_table(protocol, partition_by, tx.table.uri)
    _, files = tx.scan(None)  # the replaced rows: all of them
    tx.stage_removes(files, data_change=True)
    tx.stage_metadata(metadata)
    tx.stage_protocol(protocol)
    if clustered:  # the new definition clusters by nothing (CLUSTER BY NONE): the old columns may be gone
        tx.stage_domain(clustering_domain([]), system=True)
    metrics = {"numRemovedFiles": files.num_rows}
    tx.note_operation(operation, {
        "isManaged": "false",
        "description": description or "",
        "partitionBy": partition_by,
        "properties": config,
    }, metrics)
    return metrics
