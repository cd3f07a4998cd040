"""ALTER TABLE ... ALTER COLUMN ... TYPE: widen a column's type without rewriting its data files.

A metadata-only change: the new schema carries the wider type and a ``delta.typeChanges`` record;
old files keep their narrower type and readers convert them (txnlog/type_widening.py has the rules).
Everything is checked before anything is staged, so a refused change writes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ...errors import TypeChangeError
from ...txnlog import type_widening
from ...txnlog.features import required_protocol, writer_features
from ...txnlog.schema import schema_to_json
from ...txnlog.stats import split_column_name
from .. import properties as props
from .columns import refuse_dependent_type_changes

if TYPE_CHECKING:
    from ..transaction import Transaction


def stage_alter_column_type(tx: "Transaction", column: str, new_type: pa.DataType | str) -> dict[str, Any]:
    """Stage the widening of ``column`` (dotted for nested fields; ``element``/``key``/``value``
    step into arrays and maps) to ``new_type``. A change to the current type stages nothing."""
    if not isinstance(column, str) or not column.strip():
        raise TypeChangeError(f"column must be a non-empty column name, got {column!r}")
    if not props.flag(tx.properties, type_widening.ENABLE_PROPERTY, False):
        raise TypeChangeError(
            f"table {tx.table.uri!r} does not allow type changes; set "
            f"{type_widening.ENABLE_PROPERTY}=true first (set_properties)"
        )
    target = type_widening.as_arrow_type(new_type)
    path = split_column_name(column)
    iceberg = any(f in type_widening.ICEBERG_FEATURES for f in writer_features(tx.protocol))
    schema, old, new = type_widening.widen(tx.schema, path, target, iceberg=iceberg)
    if old == new:
        return {"changed": False}
    refuse_dependent_type_changes(tx, tx.schema, schema, evolution=False)
    protocol = required_protocol(dict(tx.metadata.configuration), schema, tx.protocol)
    tx.stage_metadata(tx.metadata.replace(schema_string=schema_to_json(schema)))
    if protocol != tx.protocol:
        tx.stage_protocol(protocol)
    tx.note_operation("CHANGE COLUMN", {"column": column, "fromType": old, "toType": new}, {}, changes_data=False)
    return {"changed": True, "fromType": old, "toType": new}

