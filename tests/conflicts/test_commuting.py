"""conflicts/commuting.py against the checker itself: a transaction that commutes with plain
commits comes back from ``check_commit`` unchanged, whatever plain winners it meets (so a catalog
may ratify it after them unread); the rule says no for everything else."""

from __future__ import annotations

import pytest
import conflict_builders as cb
from hypothesis import given, settings
from hypothesis import strategies as st

from deltatx.conflicts import ReadSet, check_commit
from deltatx.conflicts.commuting import commutes_with_plain_commits, is_plain
from deltatx.errors import ConcurrentModificationException
from deltatx.txnlog.actions import DomainMetadata, Protocol, Txn

ROW_TRACKING = Protocol(3, 7, reader_features=("deletionVectors",),
                        writer_features=("deletionVectors", "rowTracking", "domainMetadata"))


def _append(level=cb.WS, **kwargs):
    new_file = cb.file_row("part=1/new.parquet", part=1, ids=range(500, 510))
    return cb.txn(table_level=level, add_table=cb.adds(new_file), **kwargs)


_files = st.builds(
    lambda n, part, lo, data_change: (f"part={part}/w{n}.parquet", part, range(lo, lo + 10), data_change),
    st.integers(0, 50), st.sampled_from([1, 2]), st.integers(0, 600), st.booleans())


@st.composite
def plain_winner(draw):
    """A winner holding only adds and removes: any files, any partition, data change or not."""
    added = draw(st.lists(_files, max_size=4))
    removed = draw(st.lists(_files, max_size=4))
    operation = draw(st.sampled_from(["WRITE", "DELETE", "UPDATE", "MERGE", "OPTIMIZE"]))
    return cb.winner(6, operation,
                     add_rows=[cb.file_row(p, part=part, ids=ids, data_change=dc) for p, part, ids, dc in added],
                     remove_rows=[cb.remove_row(p, part=part, data_change=dc) for p, part, _, dc in removed],
                     blind=operation == "WRITE" and not removed)


@settings(max_examples=150, deadline=None)
@given(plain_winner(), st.sampled_from([cb.WS, cb.S]), st.booleans(), st.booleans())
def test_a_commuting_append_passes_every_plain_winner_unchanged(w, level, unpartitioned, with_app_id):
    kwargs = {"txns": (Txn("nightly", 7),)} if with_app_id else {}
    if unpartitioned:
        kwargs["read_metadata"] = cb.metadata(partitioned=False)
    loser = _append(level, **kwargs)
    assert commutes_with_plain_commits(loser)
    assert is_plain(loser) is (not with_app_id)  # its own txn action makes it not plain
    assert check_commit(loser, w) is loser


def test_the_rule_says_no_where_the_checker_may_answer_otherwise():
    read = ReadSet(predicates=(cb.predicate("part = 1"),))
    assert not commutes_with_plain_commits(_append(read_set=read))  # it read: not blind
    deleting = cb.txn(read_set=read, remove_table=cb.removes(cb.remove_row("part=1/f1.parquet", part=1)))
    assert not commutes_with_plain_commits(deleting)
    assert not commutes_with_plain_commits(_append(new_metadata=cb.metadata(configuration={"a": "b"})))
    assert not commutes_with_plain_commits(_append(new_protocol=Protocol(1, 3)))
    assert not commutes_with_plain_commits(_append(domains=(DomainMetadata("d", "{}", False),)))
    # row tracking: a rebase moves the fresh row ids above the winner's watermark
    assert not commutes_with_plain_commits(_append(read_protocol=ROW_TRACKING))
    assert commutes_with_plain_commits(_append(read_protocol=cb.PROTOCOL))


def test_a_plain_winner_can_still_fail_a_transaction_that_does_not_commute():
    """The rule is not vacuous: the same kind of plain winner fails a DELETE of the same file."""
    read = ReadSet(predicates=(cb.predicate("part = 1"),), files=frozenset({"part=1/f1.parquet"}))
    deleting = cb.txn(read_set=read, remove_table=cb.removes(cb.remove_row("part=1/f1.parquet", part=1)))
    plain = cb.winner(6, "DELETE", remove_rows=[cb.remove_row("part=1/f1.parquet", part=1)])
    assert not commutes_with_plain_commits(deleting)
    with pytest.raises(ConcurrentModificationException):
        check_commit(deleting, plain)


def test_plain_means_file_actions_only():
    assert is_plain(_append())
    assert not is_plain(_append(txns=(Txn("app", 1),)))
    assert not is_plain(_append(new_metadata=cb.metadata(configuration={"a": "b"})))
    assert not is_plain(_append(domains=(DomainMetadata("d", "{}", False),)))
