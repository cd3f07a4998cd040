"""TransactionInfo.replace and RowLevelState.replace copy field values instead of running
dataclasses.replace (the checker replaces a few times per winner): same result, same errors."""

from __future__ import annotations

import dataclasses

import pytest
from conflict_builders import adds, file_row, predicate, remove_row, removes, txn
from pyroaring import BitMap64

from deltatx.conflicts import ReadSet
from deltatx.conflicts.row_level import RowLevelState
from deltatx.isolation import IsolationLevel


def _fields(obj) -> dict:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def test_a_replaced_transaction_equals_what_dataclasses_replace_gives():
    base = txn(read_set=ReadSet(predicates=(predicate("id = 1"),)), add_table=adds(file_row("a.parquet")))
    changes = {"adds": adds(file_row("b.parquet")), "read_row_id_high_watermark": 7}
    fast, slow = base.replace(**changes), dataclasses.replace(base, **changes)
    assert type(fast) is type(slow)
    assert _fields(fast).keys() == _fields(slow).keys()
    for name, value in _fields(slow).items():
        assert getattr(fast, name) is value or getattr(fast, name) == value, name
    assert base.adds.column("path").to_pylist() == ["a.parquet"]  # the original is untouched
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.read_version = 9


def test_an_unknown_field_is_refused_as_dataclasses_replace_refuses_it():
    with pytest.raises(TypeError, match="no_such_field"):
        txn().replace(no_such_field=1)
    with pytest.raises(TypeError, match="no_such_field"):
        RowLevelState().replace(no_such_field=1)


def test_the_post_init_checks_rerun_when_a_field_they_read_changes():
    blind = txn(add_table=adds(file_row("a.parquet")))
    assert blind.is_blind_append
    with pytest.raises(ValueError, match="is_blind_append"):
        blind.replace(removes=removes(remove_row("old.parquet")))
    # the isolation level is normalized to the enum, as at construction
    assert blind.replace(isolation_level="Serializable").isolation_level is IsolationLevel.SERIALIZABLE


def test_a_replaced_row_level_state_keeps_the_other_fields():
    state = RowLevelState(pending={"f": BitMap64([1])}, compaction_outputs=("o.parquet",))
    changed = state.replace(resolved=(3, frozenset({"f"})))
    assert changed.pending is state.pending and changed.compaction_outputs == ("o.parquet",)
    assert changed.resolved_for(3) == frozenset({"f"}) and state.resolved_for(3) == frozenset()
