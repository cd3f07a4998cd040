"""A statement of an explicit transaction that fails after staging part of its changes.

An UPDATE stages the removes of the files it rewrites before the rewritten rows pass the table's
CHECK constraints; a full overwrite removes every file before its rows are checked. A caller who
caught the refusal inside ``with table.transaction()`` used to commit those removes without the
rows that replace them: rows nobody deleted were lost. Now such a transaction cannot commit: it
is aborted (its new files deleted) with TransactionFailedError. A refusal that staged nothing
leaves the transaction usable.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import ConstraintViolationError, PredicateError, TransactionFailedError

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.float64())])


def _table(uri: str, dv: bool) -> deltatx.Table:
    table = deltatx.create_table(uri, SCHEMA, properties={"delta.enableDeletionVectors": "true"} if dv else {})
    table.append(pa.table({"id": list(range(10)), "v": [float(i) for i in range(10)]}, schema=SCHEMA))
    table.add_constraint("v_not_negative", "v >= 0")
    return table


def _ids(uri: str) -> list[int]:
    return sorted(deltatx.Table(uri).to_arrow(columns=["id"]).column(0).to_pylist())


def _files(uri: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), uri) for d, _, names in os.walk(uri) for f in names
            if "_delta_log" not in d}


@pytest.mark.parametrize("dv", [False, True], ids=["copy-on-write", "deletion-vectors"])
def test_a_caught_refusal_that_staged_part_of_a_statement_aborts_the_transaction(table_uri, dv):
    table = _table(table_uri, dv)
    version, files = table.version, _files(table_uri)
    tx = deltatx.Table(table_uri).transaction()
    tx.delete(where="id = 3")
    with pytest.raises(ConstraintViolationError, match="v_not_negative"):
        tx.update(where="id = 5", set={"v": "-1"})  # its removes were staged, its rows refused
    with pytest.raises(TransactionFailedError, match="ConstraintViolationError") as info:
        tx.commit()
    assert "committed nothing" in str(info.value)
    assert deltatx.Table(table_uri).version == version and _ids(table_uri) == list(range(10))
    assert _files(table_uri) == files  # the delete's DV file (or rewritten file) is gone again
    with pytest.raises(deltatx.errors.DeltaTxError, match="aborted"):
        tx.delete(where="id = 4")


@pytest.mark.parametrize("dv", [False, True], ids=["copy-on-write", "deletion-vectors"])
def test_a_with_block_that_caught_a_refused_overwrite_commits_nothing(table_uri, dv):
    table = _table(table_uri, dv)
    version = table.version
    with pytest.raises(TransactionFailedError):
        with deltatx.Table(table_uri).transaction() as tx:
            try:
                tx.overwrite(pa.table({"id": [1], "v": [-1.0]}, schema=SCHEMA))  # every file removed first
            except ConstraintViolationError:
                pass
    assert deltatx.Table(table_uri).version == version and _ids(table_uri) == list(range(10))


def test_a_refused_merge_statement_aborts_the_transaction_too(table_uri):
    table = _table(table_uri, dv=False)
    version = table.version
    tx = deltatx.Table(table_uri).transaction()
    tx.append(pa.table({"id": [100], "v": [1.0]}, schema=SCHEMA))
    source = pa.table({"id": [2], "v": [-5.0]}, schema=SCHEMA)
    with pytest.raises(ConstraintViolationError):
        tx.merge(source, on="t.id = s.id").when_matched_update(set={"v": "s.v"}).execute()
    with pytest.raises(TransactionFailedError):
        tx.commit()
    assert deltatx.Table(table_uri).version == version and _ids(table_uri) == list(range(10))


def test_a_refusal_that_staged_nothing_leaves_the_transaction_usable(table_uri):
    table = _table(table_uri, dv=True)
    with table.transaction() as tx:
        tx.delete(where="id = 3")
        with pytest.raises(PredicateError):
            tx.update(where="nope = 5", set={"v": "1"})  # refused while binding: nothing staged
        with pytest.raises(ConstraintViolationError):  # refused before its file is written
            tx.append(pa.table({"id": [50], "v": [-1.0]}, schema=SCHEMA))
        tx.update(where="id = 5", set={"v": "50"})
    rows = {r["id"]: r["v"] for r in deltatx.Table(table_uri).to_arrow().to_pylist()}
    assert sorted(rows) == [0, 1, 2, 4, 5, 6, 7, 8, 9] and rows[5] == 50.0


def test_a_refusal_after_rows_were_marked_changed_aborts_the_transaction(table_uri):
    """On a DV table an UPDATE records the rows it changes before computing their new values; one
    whose SET cannot be computed (a failing CAST) has staged no action, but its rows are in the
    row-level record a rebase onto a concurrent winner's DV would carry: it aborts too."""
    schema = pa.schema([("id", pa.int64()), ("v", pa.float64()), ("name", pa.string())])
    table = deltatx.create_table(table_uri, schema, properties={"delta.enableDeletionVectors": "true"})
    table.append(pa.table({"id": list(range(10)), "v": [1.0] * 10, "name": [f"n{i}" for i in range(10)]},
                          schema=schema))
    version = table.version
    tx = table.transaction()
    tx.delete(where="id = 1")
    with pytest.raises(PredicateError, match="cannot evaluate"):
        tx.update(where="id = 5", set={"v": "CAST(name AS DOUBLE)"})
    with pytest.raises(TransactionFailedError):
        tx.commit()
    assert deltatx.Table(table_uri).version == version
