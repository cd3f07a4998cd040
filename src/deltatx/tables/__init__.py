"""The user's verbs: Table, create_table, Transaction and the operations they stage."""

from .table import Table, create_table
from .transaction import CommitResult, Transaction

__all__ = ["Table", "create_table", "Transaction", "CommitResult"]
