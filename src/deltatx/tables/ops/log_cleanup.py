"""Metadata cleanup's I/O: ``Table.cleanup_metadata()`` and the cleanup after a checkpoint.

The rules are txnlog/log_cleanup.py's (pure); this module lists, checks and deletes::

    list _delta_log (commits, checkpoints, checksums, compactions: one listing)
      ─► plan_cleanup ─► the checkpoint kept is checked readable (its Parquet footers, its
         protocol and metaData columns, its sidecars there) ─► delete, oldest version first

Why check the kept checkpoint: once the older files are gone it is the only start of every
retained version; a reader that finds it unreadable has nothing older to fall back on. A plan
whose checkpoint does not pass deletes nothing.

The post-commit hook (:func:`cleanup_after_checkpoint`) runs after each checkpoint this process
writes, as Delta's does, and keeps that cheap: one listing at most, and none while nothing can
have expired — a plan says from which cutoff on a later cleanup could delete more
(``next_due_ms``: the commit time of the next checkpoint, or of the latest commit), and with the
cutoff truncated to a day that is usually the next day's first checkpoint. That pacing is per
process and only ever delays a cleanup; ``cleanup_metadata()`` always lists.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Hashable

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ...txnlog.actions import parse_commit
from ...txnlog.checkpoint import sidecar_path
from ...txnlog.checkpoint_protection import protected_before
from ...txnlog.log_cleanup import CleanupPlan, cutoff_ms, log_retention_ms, plan_cleanup
from ...txnlog.snapshot_cache import cache_key
from ...txnlog.store import LogFile, LogStore

if TYPE_CHECKING:
    from ...txnlog.snapshot import Snapshot

#: tables whose pacing is remembered (the oldest entry goes first)
_MAX_PACED = 256


@dataclass(frozen=True)
class CleanupResult:
    """A cleanup's plan and the files it deleted (relative to ``_delta_log``, sorted)."""

    plan: CleanupPlan
    deleted: list[str]


class _Pacing:
    """Per table: the cutoff before which no cleanup can delete more (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._due: dict[Hashable, int] = {}

    def due(self, key: Hashable | None, cutoff: int) -> bool:
        if key is None:
            return True
        with self._lock:
            due = self._due.get(key)
        return due is None or cutoff >= due

    def remember(self, key: Hashable | None, due: int | None) -> None:
        if key is None:
            return
        with self._lock:
            self._due.pop(key, None)
            if due is not None:
                self._due[key] = due
                while len(self._due) > _MAX_PACED:
                    self._due.pop(next(iter(self._due)))

    def clear(self) -> None:
        with self._lock:
            self._due.clear()


PACING = _Pacing()


def _pacing_key(store: LogStore) -> Hashable | None:
    return cache_key(getattr(store, "inner", store))  # a catalog's store paces as its path store


def cleanup_log(store: LogStore, snapshot: "Snapshot", *, now_ms: int | None = None,
                dry_run: bool = False) -> CleanupResult:
    """Plan a metadata cleanup of the table at ``snapshot`` (its latest version) and, unless
    ``dry_run``, delete what the plan names once its checkpoint is checked readable. The caller
    has checked that cleanup may run (the catalog's permission, a writable protocol)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = cutoff_ms(now, log_retention_ms(snapshot.properties))
    listing = store.list_log(0, extra=True)  # a catalog's: published, vouched, its bound known after
    plan = plan_cleanup(listing, cutoff, latest_version=snapshot.version,
                        protected_before=protected_before(snapshot.protocol, snapshot.properties),
                        deletable_through=store.cleanup_bound())
    if plan.delete:
        problem = _unreadable(store, plan.checkpoint)
        if problem is not None:
            plan = plan.without_deletes(f"checkpoint {plan.boundary}, the one that would be kept, {problem}: "
                                        f"nothing was deleted")
    PACING.remember(_pacing_key(store), plan.next_due_ms if plan.blocked is None else None)
    if dry_run or not plan.delete:
        return CleanupResult(plan, plan.names if dry_run else [])
    deleted: list[str] = []
    for f in plan.delete:  # oldest first: a cleanup cut short leaves the log's oldest files gone
        store.delete_log_file(f.name)
        deleted.append(f.name)
    return CleanupResult(plan, sorted(deleted))


def cleanup_after_checkpoint(store: LogStore, snapshot: "Snapshot", permitted: Callable[[], bool],
                             *, now_ms: int | None = None) -> CleanupResult | None:
    """The post-commit hook's cleanup, after a checkpoint of ``snapshot``: nothing (None) while
    the pacing says nothing can have expired since the last look, or when ``permitted()`` says no
    (a catalog that does not allow maintenance); else :func:`cleanup_log`."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = cutoff_ms(now, log_retention_ms(snapshot.properties))
    if not PACING.due(_pacing_key(store), cutoff) or not permitted():
        return None
    return cleanup_log(store, snapshot, now_ms=now)


def _unreadable(store: LogStore, files: tuple[LogFile, ...]) -> str | None:
    """Why the checkpoint made of ``files`` would not read, or None: every part's Parquet footer
    (or a JSON checkpoint's actions), a protocol and a metaData column between them, and every
    sidecar it names present with the size the checkpoint gives. Reads the protocol, metaData
    and sidecar columns, never the file actions."""
    present: set[str] = set()  # "protocol" / "metaData" when some row holds one
    sidecars: list[tuple[str, int | None]] = []  # (path, sizeInBytes)
    try:
        for f in files:
            if f.fmt == "parquet":
                with store.arrow_fs.open_input_file(f"{store.log_root}/{f.name}") as handle:
                    parquet = pq.ParquetFile(handle)
                    names = parquet.schema_arrow.names
                    # the two small columns read whole: a column of nulls is no protocol
                    wanted = [c for c in ("protocol", "metaData", "sidecar") if c in names]
                    table = parquet.read(columns=wanted) if wanted else None
                    for name in ("protocol", "metaData"):
                        if table is not None and name in wanted and table.column(name).null_count < table.num_rows:
                            present.add(name)
                    if table is not None and "sidecar" in wanted:
                        sidecars += [(s["path"], s.get("sizeInBytes")) for s in table.column("sidecar").to_pylist()
                                     if s and s.get("path")]
            else:
                parsed = parse_commit(store.read_log_file(f.name), f.version)
                present.update(name for name, action in (("protocol", parsed.protocol), ("metaData", parsed.metadata))
                               if action is not None)
                sidecars += [(str(s["path"]), s.get("sizeInBytes")) for s in parsed.sidecars]
        if not {"protocol", "metaData"} <= present:
            return "holds no protocol or no metaData"
        fs = store.arrow_fs
        for path, size in sidecars:
            info = fs.get_file_info(sidecar_path(store, path))
            if info.type == pafs.FileType.NotFound:
                return f"names the sidecar {path!r}, which is missing"
            if size is not None and info.size != int(size):
                return f"names the sidecar {path!r} of {size} bytes, which holds {info.size}"
    except Exception as exc:  # unreadable in any way: not a start anyone can rely on
        return f"is unreadable ({type(exc).__name__}: {exc})"
    return None
