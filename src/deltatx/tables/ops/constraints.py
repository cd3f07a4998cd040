"""ALTER TABLE ADD / DROP CONSTRAINT (CHECK constraints), as staged actions.

Adding a constraint reads the whole table (recorded: a concurrent write of any row conflicts,
so no violating row can slip in between the check and the commit) and evaluates the condition
file by file on the columns it needs, vectorized; one violating row refuses the constraint with
:class:`ConstraintViolationError` (how many rows, one example) and nothing is committed. Success
stages ``delta.constraints.<name>`` (lower-cased, as Delta) in a metaData action and, when the
protocol does not support CHECK constraints yet, the upgrade (``checkConstraints``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import InvalidConstraintError, PredicateError
from ...io.reader import read_files
from ...io.row_metadata import MaterializedColumns
from ...txnlog.features import required_protocol
from ..constraints import (
    RowCheck,
    bound_condition,
    check_constraints,
    constraint_key,
    validate_constraint_name,
    violation_error,
    violations,
)

if TYPE_CHECKING:
    from ..transaction import Transaction


def stage_add_constraint(tx: "Transaction", name: str, sql: str) -> None:
    name = validate_constraint_name(name)
    key = constraint_key(name)
    config = dict(tx.metadata.configuration)
    if key in config:
        raise InvalidConstraintError(
            f"table {tx.table.uri!r} already has CHECK constraint {name!r} ({config[key]}); drop it first"
        )
    if not isinstance(sql, str) or not sql.strip():
        raise InvalidConstraintError(f"CHECK constraint {name!r} needs a SQL condition, got {sql!r}")
    check = RowCheck("CHECK constraint", name, sql, bound_condition(sql, tx.schema, f"CHECK constraint {name!r}"))
    try:
        _check_existing_rows(tx, check)
    except PredicateError as exc:  # a value of the rows it cannot compute (a failing CAST): name it
        raise InvalidConstraintError(
            f"CHECK constraint {name!r} ({sql}) cannot be evaluated on the table's rows: {exc}") from exc
    config[key] = sql
    tx.stage_metadata(tx.metadata.replace(configuration=config))
    protocol = required_protocol(config, tx.schema, tx.protocol)
    if protocol != tx.protocol:
        tx.stage_protocol(protocol)
    tx.note_operation("ADD CONSTRAINT", {"name": name, "expr": sql}, {}, changes_data=False)


def stage_drop_constraint(tx: "Transaction", name: str, if_exists: bool = False) -> None:
    name = validate_constraint_name(name)
    key = constraint_key(name)
    config = dict(tx.metadata.configuration)
    if key not in config:
        if if_exists:
            tx.note_operation("DROP CONSTRAINT", {"name": name, "ifExists": True}, {}, changes_data=False)
            return
        known = sorted(check_constraints(config))
        raise InvalidConstraintError(
            f"table {tx.table.uri!r} has no CHECK constraint {name!r} (it has: {known or 'none'}); "
            f"pass if_exists=True to ignore a missing one"
        )
    sql = config.pop(key)
    tx.stage_metadata(tx.metadata.replace(configuration=config))
    tx.note_operation("DROP CONSTRAINT", {"name": name, "expr": sql}, {}, changes_data=False)


def _check_existing_rows(tx: "Transaction", check: RowCheck) -> None:
    """Every live row must satisfy ``check``: file by file, only the columns it reads; the
    violations of all files are counted before refusing."""
    _, files = tx.scan(None)  # the whole table is read: a concurrent add or remove conflicts
    if not files.num_rows:
        return
    columns = sorted(check.expr.columns()) or tx.schema.names[:1]
    materialized = MaterializedColumns.from_configuration(tx.properties)
    mapping = tx.column_mapping  # files hold physical columns on a column-mapped table
    bad, total, example = 0, 0, None
    for i in range(files.num_rows):
        rows = read_files(tx.store, files.slice(i, 1), tx.schema, tx.partition_columns, columns=columns,
                          materialized=materialized, column_mapping=mapping)
        count, row = violations(rows, check)
        bad, total = bad + count, total + rows.num_rows
        example = example or row
    if bad:
        raise violation_error(check, bad, total, example, "existing row(s) of the table")
