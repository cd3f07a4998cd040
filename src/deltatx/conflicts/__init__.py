"""Optimistic-concurrency conflict detection (pure): what a losing transaction may still commit.

- :mod:`.txn_info`       — ReadSet / TransactionInfo, the checker's input.
- :mod:`.checker`        — the ordered checks (``CHECKS``) and ``check_commit``.
- :mod:`.metadata_rules` — protocol and metadata change rules (allow-list).
- :mod:`.hints`          — partition / file locations for messages.
"""

from .checker import (
    CHECKS,
    candidate_added_files,
    check_commit,
    check_commits,
    first_conflicting_add,
    is_own_commit,
)
from .metadata_rules import ALLOWED_CONFIGURATION_CHANGES, metadata_change_problems, protocol_feature_names
from .txn_info import ReadSet, TransactionInfo, is_blind_append

__all__ = [
    "ALLOWED_CONFIGURATION_CHANGES",
    "CHECKS",
    "ReadSet",
    "TransactionInfo",
    "candidate_added_files",
    "check_commit",
    "check_commits",
    "first_conflicting_add",
    "is_blind_append",
    "is_own_commit",
    "metadata_change_problems",
    "protocol_feature_names",
]
