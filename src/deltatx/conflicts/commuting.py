"""Which commits need no conflict check at all: a blind append against *plain* winners.

A commit is **plain** when it holds nothing but ``commitInfo``, ``add``, ``remove`` and ``cdc``
actions: no ``protocol``, ``metaData``, ``txn`` or ``domainMetadata``. A transaction **commutes
with plain commits** when every check of :data:`~deltatx.conflicts.checker.CHECKS` passes it
unchanged against any plain winner, whatever files that winner added or removed:

- ``protocol``, ``metadata``, ``domains``, ``app_ids``: a plain winner has none of those actions;
- ``row_ids``: skipped when the protocol has no ``rowTracking`` (with it, a rebase moves this
  transaction's fresh row ids above the winner's watermark, so its bytes depend on the winners);
- ``row_level``, ``added_files``, ``deleted_read``, ``deleted_deleted``: a blind append read no
  file and no predicate and removes nothing, under either isolation level (Delta's rule: a
  blind append never conflicts with concurrent data changes).

Why it matters: whoever orders commits and can tell plain ones apart without reading them (a
catalog keeps one flag per ratified version) may put such a transaction after any number of
plain winners without the committer reading, parsing or checking them — the answer of the
checker is known in advance. The rule is stated here, beside the checker, so that it is tested
against the checker itself (tests/conflicts/test_commuting.py).
"""

from __future__ import annotations

from ..txnlog import row_tracking
from .txn_info import TransactionInfo


def is_plain(txn: TransactionInfo) -> bool:
    """Will ``txn`` commit a plain commit (commitInfo, add, remove and cdc actions only)?"""
    return txn.metadata is None and txn.protocol is None and not txn.txns and not txn.domains


def commutes_with_plain_commits(txn: TransactionInfo) -> bool:
    """True when :func:`~deltatx.conflicts.check_commit` returns ``txn`` unchanged against every
    plain winner: a blind append that changes no protocol, metadata or domain and needs no row ids."""
    return (
        txn.is_blind_append
        and txn.removes.num_rows == 0
        and txn.metadata is None
        and txn.protocol is None
        and not txn.domains
        and txn.row_level is None
        and not row_tracking.is_supported(txn.read_protocol)
    )


__all__ = ["commutes_with_plain_commits", "is_plain"]
