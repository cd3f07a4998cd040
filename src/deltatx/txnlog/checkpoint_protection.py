"""Checkpoint protection (writer feature ``checkpointProtection``): history before a version stays
as it is until it is truncated as a whole.

Delta drops a table feature by leaving protected checkpoints at the drop boundary
(``delta.requireCheckpointProtectionBeforeVersion``); the versions before it may use features a
writer no longer knows. The feature's writer rules (delta-io/delta protocol RFC "Checkpoint
Protection") bind two things:

* **metadata cleanup** must truncate up to the boundary in one go, unless it creates no checkpoint
  while it cleans up and erases no checkpoint after its truncation version (the RFC's exception
  (a)). deltatx's cleanup (txnlog/log_cleanup.py) always meets that exception: it writes nothing
  and deletes only files of versions before the checkpoint it keeps — so the protected
  checkpoints stay until a cleanup truncates past them, and a cleanup that stops short of the
  boundary is allowed;
* **checkpoint creation**: a checkpoint of a version before the boundary could be written by a
  writer that does not understand that version's protocol, so it is refused here.
"""

from __future__ import annotations

from ..errors import ProtectedHistoryError
from .actions import Protocol
from .features import writer_features

FEATURE = "checkpointProtection"
PROTECTED_BEFORE = "delta.requireCheckpointProtectionBeforeVersion"


def protected_before(protocol: Protocol, configuration: dict[str, str]) -> int | None:
    """The first version whose history may be touched, when the table protects older ones."""
    if FEATURE not in writer_features(protocol):
        return None
    raw = configuration.get(PROTECTED_BEFORE)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def check_checkpoint_allowed(protocol: Protocol, configuration: dict[str, str], version: int) -> None:
    """Raise ProtectedHistoryError for a checkpoint of a protected version (latest table state given)."""
    boundary = protected_before(protocol, configuration)
    if boundary is not None and version < boundary:
        raise ProtectedHistoryError(
            f"the table protects its history before version {boundary} ({FEATURE}); a checkpoint of "
            f"version {version} is not allowed — checkpoint version {boundary} or later"
        )
