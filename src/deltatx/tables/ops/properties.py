"""SET TBLPROPERTIES: a metadata change (and a protocol upgrade when a property needs one, or
``delta.minReaderVersion`` / ``delta.minWriterVersion`` ask for one, as in Delta).

UNSET TBLPROPERTIES: the same metadata change with keys taken away. The configuration it leaves
passes the checks a SET leaves its configuration to (:func:`_stage_configuration`), so removing
a key is refused exactly where setting it to its default would be (column mapping's mode, a
clustering column's statistics); it never changes the protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import ArgumentTypeError, InvalidPropertyError
from ...txnlog import row_tracking
from ...txnlog.features import required_protocol
from .. import properties as props
from ..stats_columns import check_stats_columns
from .clustering import check_stats_cover_clustering, is_clustered_table, refuse_feature_property
from .row_tracking_backfill import refuse_while_suspended, refuse_without_backfill

if TYPE_CHECKING:
    from ...txnlog.actions import Protocol
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
    _stage_configuration(tx, config, props.requested_protocol(new, tx.protocol), backfill_first=backfill_first)
    tx.note_operation("SET TBLPROPERTIES", {"properties": new}, {}, changes_data=False)


def stage_unset_properties(tx: "Transaction", keys: str | list[str], *, if_exists: bool = False) -> None:
    """Stage UNSET TBLPROPERTIES [IF EXISTS] (keys). A key the table does not have raises
    InvalidPropertyError naming it, unless ``if_exists``; when none of the keys is there nothing
    is staged (the commit writes nothing, as a SET of values the table has). Unknown ``delta.*``
    keys are removed like any other: unsetting is how a table sheds a key an older writer left."""
    if not isinstance(if_exists, bool):
        raise ArgumentTypeError(f"if_exists must be True or False, got {if_exists!r}")
    names = props.keys_to_unset(keys)
    current = tx.metadata.configuration
    found = {name: props.matching_keys(name, current) for name in names}
    missing = [name for name, stored in found.items() if not stored]
    if missing and not if_exists:
        raise InvalidPropertyError(
            f"the table has no propert{'y' if len(missing) == 1 else 'ies'} {', '.join(map(repr, missing))}"
            f"{_case_hint(missing, current)}; pass if_exists=True to skip keys the table does not have; "
            f"nothing was committed")
    removed = {key for stored in found.values() for key in stored}
    if removed:
        config = {k: v for k, v in current.items() if k not in removed}
        _stage_configuration(tx, config, tx.protocol, backfill_first=False)
    tx.note_operation("UNSET TBLPROPERTIES", {"properties": names, "ifExists": if_exists}, {}, changes_data=False)


def _case_hint(missing: list[str], configuration: dict[str, str]) -> str:
    """Name the table's keys that differ from a missing one only in case (a key outside delta.*
    is matched exactly, as Delta matches it)."""
    close = [k for name in missing for k in configuration if k.lower() == name.lower() and k != name]
    return f" (the table has {', '.join(map(repr, close))}: names outside delta.* are matched exactly)" if close else ""


def _stage_configuration(tx: "Transaction", config: dict[str, str], protocol_floor: "Protocol | None", *,
                         backfill_first: bool) -> None:
    """Stage ``config`` as the table's configuration after the checks every property change
    passes (row tracking's, statistics columns', clustering's; column mapping's and the other
    table rules run in ``stage_metadata``), with the protocol it needs, never below
    ``protocol_floor``. Stages nothing where the configuration and protocol stay as they are."""
    config = row_tracking.with_materialized_names(config)
    refuse_while_suspended(tx, config)
    if not backfill_first:
        refuse_without_backfill(tx, config)
    protocol = required_protocol(config, tx.schema, protocol_floor)
    check_stats_columns(tx.schema, tx.partition_columns, config)
    check_stats_cover_clustering(tx.protocol, tx.domains, tx.schema, config)
    stored = props.stored_configuration(config)
    if stored != tx.metadata.configuration:
        tx.stage_metadata(tx.metadata.replace(configuration=stored))
    if protocol != tx.protocol:
        tx.stage_protocol(protocol)
