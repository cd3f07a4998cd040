"""SET TBLPROPERTIES: a metadata change (and a protocol upgrade when a property needs one, or
``delta.minReaderVersion`` / ``delta.minWriterVersion`` ask for one, as in Delta)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...txnlog import row_tracking
from ...txnlog.features import required_protocol
from .. import properties as props
from ..stats_columns import check_stats_columns
from .clustering import check_stats_cover_clustering, is_clustered_table, refuse_feature_property
from .row_tracking_backfill import refuse_while_suspended, refuse_without_backfill

if TYPE_CHECKING:
    from ..transaction import Transaction


def stage_set_properties(tx: "Transaction", properties: dict[str, Any], *, backfill_first: bool = False) -> None:
    """Stage SET TBLPROPERTIES. ``backfill_first``: the caller (Table.set_properties) commits the
    row-tracking protocol upgrade and backfill before this, so files without row ids now do not
    refuse turning it on; a transaction's own call refuses them (see refuse_without_backfill)."""
    new = props.validate_properties(properties)
    if any(k.startswith("delta.constraints.") for k in new):
        from ...errors import InvalidConstraintError

        raise InvalidConstraintError(
            "CHECK constraints are not set as properties (existing rows would go unchecked); use "
            "add_constraint(name, sql) / drop_constraint(name)"
        )
    if not is_clustered_table(tx):
        refuse_feature_property(new)
    config = dict(tx.metadata.configuration)
    props.refuse_writer_kept(new, config)
    config.update(new)
    config = row_tracking.with_materialized_names(config)
    refuse_while_suspended(tx, config)
    if not backfill_first:
        refuse_without_backfill(tx, config)
    protocol = required_protocol(config, tx.schema, props.requested_protocol(new, tx.protocol))
    check_stats_columns(tx.schema, tx.partition_columns, config)
    check_stats_cover_clustering(tx.protocol, tx.domains, tx.schema, config)
    stored = props.stored_configuration(config)
    if stored != tx.metadata.configuration:
        tx.stage_metadata(tx.metadata.replace(configuration=stored))
    if protocol != tx.protocol:
        tx.stage_protocol(protocol)
    tx.note_operation("SET TBLPROPERTIES", {"properties": new}, {}, changes_data=False)
