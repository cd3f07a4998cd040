"""Rules given at ``create_table``: generated columns, identity columns, CHECK constraints.

One entry point so that ``create_table`` stays a thin facade: the field metadata is written
(``tables/generated.py``, ``tables/identity.py``), constraint names are normalised and every
expression is bound against the new schema now, so a table is never created with a rule that
its first write could not evaluate.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..errors import InvalidConstraintError
from .constraints import CONSTRAINT_PREFIX, constraint_key, rules_for, validate_constraint_name
from .generated import with_generated_columns
from .identity import with_identity_columns


def define_column_rules(schema: pa.Schema, config: dict[str, str], partition_by: list[str],
                        generated: dict[str, str] | None, identity: dict[str, dict[str, Any]] | None
                        ) -> tuple[pa.Schema, dict[str, str]]:
    """The schema and configuration of a new table with these rules (validated)."""
    overlap = sorted(set(generated or {}) & set(identity or {}))
    if overlap:
        raise InvalidConstraintError(f"column(s) {overlap} cannot be both generated and identity columns")
    schema = with_identity_columns(with_generated_columns(schema, generated), identity, partition_by)
    out: dict[str, str] = {}
    for key, value in config.items():
        if key.startswith(CONSTRAINT_PREFIX):
            name = validate_constraint_name(key[len(CONSTRAINT_PREFIX):])
            key = constraint_key(name)
            if key in out:
                raise InvalidConstraintError(f"CHECK constraint {name!r} is given twice (names ignore case)")
        out[key] = value
    rules_for(schema, out)  # binds every expression: a bad one fails here, not at the first write
    return schema, out
