"""Errors of the harness itself (as opposed to the table errors it provokes and records).

Kept apart from :mod:`deltatx.errors` because only harness users meet them: bad harness input,
and an interleaving that could not be driven to its next step in time (a deadlock or a phase the
code never reaches fails loudly instead of hanging the test suite).
"""

from __future__ import annotations

from ..errors import DeltaTxError


class HarnessError(DeltaTxError, ValueError):
    """Bad harness input: unknown workload, isolation level, phase, process count or URI kind."""


class InterleavingTimeout(DeltaTxError, TimeoutError):
    """A transaction did not reach its next scheduled phase (or finish) within the timeout."""
