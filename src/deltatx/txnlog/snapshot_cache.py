"""A process-wide cache of recent snapshots: opening a table becomes a catch-up, not a replay.

The common job shape opens ``deltatx.Table(path)``, appends once and exits the handle. Without a
cache every open reads ``_last_checkpoint``, lists ``_delta_log``, reads the checkpoint and
replays the commits after it — milliseconds of work to rebuild a state this process held a
moment ago. Here a fresh open starts from the newest snapshot this process has seen of the
same table and reads only the commits after it, by name (``Snapshot.catch_up``)::

    latest(store)
        no entry ─────────────────────────────────────────────► load_snapshot ─► remember
        entry at v: commit v still there (and the same file)?  no ─► load_snapshot
                    _last_checkpoint = h
                    catch_up: read v+1, v+2 ... by name ─► w
                    w < h (commits after v are gone: log cleanup) ─► load_snapshot
                    else ─► snapshot w ─► remember

Why this is correct: commits are immutable and named by version, so the state at ``v`` plus
commits ``v+1..w`` *is* version ``w``; ``w`` is the latest because commit ``w+1`` did not exist
when we looked — unless log cleanup removed it, which happens only after a newer checkpoint
(hence the ``_last_checkpoint`` check) and removes the oldest commits first (hence the check
that commit ``v`` is still there). A table deleted and created again at the same path starts
over at version 0, so commit ``v`` is missing or is another file (its identity token
differs). Any error on the way falls back to a full load, which raises what an uncached open
raises. Time travel never uses the cache (the caller loads the exact version).

Snapshots are immutable values (pyarrow tables; ``apply``/``refresh`` return new snapshots;
``TableActions.fold`` copies the dicts), so one snapshot may be shared by many handles and
threads. The cache holds a few tables (LRU, bounded by count and by the bytes of their file
state) under a lock; I/O happens outside the lock.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Hashable

from ..errors import DeltaTxError
from .checkpoint import read_last_checkpoint_hint
from .snapshot import Snapshot, load_snapshot
from .store import LocalLogStore, LogStore, MemoryLogStore, S3LogStore, commit_name

#: tables whose snapshots are kept (least recently used goes first)
MAX_TABLES = 8
#: bytes of file state (adds + tombstones) kept across all tables; a bigger snapshot is not kept
MAX_BYTES = 512 * 1024 * 1024

#: stores whose reads by name see every commit already written (local disk, one process's
#: memory, S3's strongly consistent GET) — what catch-up by name relies on
_CACHEABLE = (LocalLogStore, MemoryLogStore, S3LogStore)
#: stores where a file's identity token costs no request, so it is taken when remembering (S3:
#: see :meth:`SnapshotCache._cheap_token`)
_CHEAP_TOKENS = (LocalLogStore, MemoryLogStore)


@dataclass(frozen=True)
class _Entry:
    snapshot: Snapshot
    #: identity of the commit file of ``snapshot.version`` when it was remembered; None: unknown
    token: Hashable | None
    nbytes: int
    #: (file-state rows, bytes) of the last real measurement, which nearby sizes are scaled from
    measured: tuple[int, int]


def cache_key(store: LogStore) -> Hashable | None:
    """Which table a store points at, across store objects; None: do not cache this store.

    The filesystem's fsspec token tells apart two S3 endpoints or credentials with the same
    bucket path; local and memory paths are process-wide names already.
    """
    if not isinstance(store, _CACHEABLE):
        return None
    if isinstance(store, S3LogStore):
        return ("s3", getattr(store.fs, "_fs_token", id(store.fs)), store.root)
    return (type(store).__name__, store.root)


def commit_token(store: LogStore, version: int) -> Hashable | None:
    """An identity of commit ``version``'s file (None when it does not exist).

    Two different files at the same name — a table deleted and created again — give different
    tokens: inode and mtime on local disk, creation time in memory, the ETag on S3.
    """
    name = commit_name(version)
    path = f"{store.log_root}/{name}"
    files = getattr(store.fs, "store", None) if isinstance(store, MemoryLogStore) else None
    if files is not None:
        # straight to the in-process dict: fsspec's info() scans every memory file for dirs
        # (a wrapped memory filesystem, e.g. a fault injector, goes through info() below)
        held = files.get(path)
        return None if held is None else (held.size, getattr(held, "created", None))
    try:
        if isinstance(store, LocalLogStore):
            st = os.stat(os.path.join(store.log_root, name))
            return (st.st_ino, st.st_size, st.st_mtime_ns)
        info = store.fs.info(path, refresh=True) if isinstance(store, S3LogStore) else store.fs.info(path)
    except FileNotFoundError:
        return None
    if info.get("type") == "directory":
        return None
    return (info.get("size"), str(info.get("ETag") or info.get("created") or info.get("mtime") or ""))


def _nbytes(snapshot: Snapshot) -> int:
    # get_total_buffer_size: O(buffers) and ~100x cheaper than ``nbytes``, which walks the
    # buffers to count shared ones once (a bound only needs to be close).
    return snapshot.files.get_total_buffer_size() + snapshot.tombstone_state.bytes_bound()


#: a size is measured again once the file-state rows drift from the measured ones by this share
_REMEASURE_DRIFT = 1 / 8


def _size(snapshot: Snapshot, held: _Entry | None) -> tuple[int, tuple[int, int]]:
    """Bytes of ``snapshot``'s file state, and the (rows, bytes) measurement they come from.

    Why not always measure: that walks every buffer of every chunk of the file state, ~0.1 ms
    for a table of a few hundred files, and a fresh handle's commit stores two snapshots (the
    open, the commit) — a few % of a small append's CPU. A snapshot a few commits away from the
    one held has nearly the same bytes per file, and the cache's byte bound only needs to be
    close, so its size is the held measurement scaled by rows until the rows drift by
    :data:`_REMEASURE_DRIFT` (an OPTIMIZE, a big append): then it is measured again."""
    rows = snapshot.files.num_rows + snapshot.tombstone_state.rows_bound()
    if held is not None:
        measured_rows, measured_bytes = held.measured
        if measured_rows and abs(rows - measured_rows) <= measured_rows * _REMEASURE_DRIFT:
            return measured_bytes * rows // measured_rows, held.measured
    nbytes = _nbytes(snapshot)
    return nbytes, (rows, nbytes)


class SnapshotCache:
    """Newest known snapshot per table, LRU-bounded; thread-safe."""

    def __init__(self, max_tables: int = MAX_TABLES, max_bytes: int = MAX_BYTES):
        self.max_tables = max_tables
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        #: how opens were served, for tests and benchmarks: hits, loads, fallbacks
        self.stats = {"hits": 0, "loads": 0, "fallbacks": 0}

    # ------------------------------------------------------------------ opening
    def latest(self, store: LogStore) -> Snapshot:
        """The latest version of the table at ``store`` — the same value as ``load_snapshot(store)``."""
        key = cache_key(store)
        entry = self._get(key) if key is not None else None
        if entry is not None:
            caught_up = self._caught_up(store, entry)
            if caught_up is not None:
                snapshot, token = caught_up
                self._count("hits")
                if snapshot is not entry.snapshot:
                    token = self._cheap_token(store, snapshot)
                self._put(key, snapshot, token, replace=True)
                return snapshot
            self._count("fallbacks")
            self.forget(store)
        self._count("loads")
        snapshot = load_snapshot(store)
        if key is not None:
            self._put(key, snapshot, self._cheap_token(store, snapshot), replace=True)
        return snapshot

    def _caught_up(self, store: LogStore, entry: _Entry) -> tuple[Snapshot, Hashable] | None:
        """``entry``'s snapshot brought up to date by name, with the token of its base commit;
        None when only a load can tell."""
        base = entry.snapshot
        try:
            if entry.token is None:
                return None  # nothing to tell this commit v from another table's: load
            token = commit_token(store, base.version)
            if token is None or token != entry.token:
                return None  # cleaned up, or the table was deleted and created again
            checkpoint = read_last_checkpoint_hint(store)
            snapshot = base.catch_up(store)
        except (DeltaTxError, OSError):
            return None  # the load raises the error an uncached open raises
        if checkpoint is not None and snapshot.version < checkpoint:
            return None  # commits after v are gone: cleanup after a newer checkpoint
        return snapshot, token

    # ------------------------------------------------------------------ remembering
    def remember(self, store: LogStore, snapshot: Snapshot) -> None:
        """Offer a snapshot a handle reached (a commit, a refresh); kept if no older than ours."""
        key = cache_key(store)
        if key is not None:
            self._put(key, snapshot, self._cheap_token(store, snapshot), replace=False)

    def forget(self, store: LogStore) -> None:
        key = cache_key(store)
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is not None:
                self._bytes -= entry.nbytes

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def cached_version(self, store: LogStore) -> int | None:
        """The version held for ``store``'s table, if any (does not touch the LRU order)."""
        entry = self._entries.get(cache_key(store))
        return None if entry is None else entry.snapshot.version

    # ------------------------------------------------------------------ internals
    @staticmethod
    def _cheap_token(store: LogStore, snapshot: Snapshot) -> Hashable | None:
        """The identity of ``snapshot``'s commit file, for telling it apart at the next open
        from a same-named commit of a table deleted and created again. On S3 a commit this
        process put carries it (the PUT's ETag); another writer's costs one HEAD, taken only
        when an open or refresh moved to it. None (unknown) makes the next open load."""
        if isinstance(store, S3LogStore):
            written = store.written_commit_token(snapshot.version)
            if written is not None:
                return written
        elif not isinstance(store, _CHEAP_TOKENS):
            return None
        try:
            return commit_token(store, snapshot.version)
        except OSError:
            return None

    def _get(self, key: Hashable) -> _Entry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def _put(self, key: Hashable, snapshot: Snapshot, token: Hashable | None, *, replace: bool) -> None:
        """Store ``snapshot``; without ``replace`` only over an older version of the table."""
        held = self._entries.get(key)
        if not replace and held is not None and held.snapshot.version > snapshot.version:
            return
        nbytes, measured = _size(snapshot, held)  # outside the lock: it may walk the buffers
        with self._lock:
            old = self._entries.get(key)
            if old is not None:
                if not replace and old.snapshot.version > snapshot.version:
                    return
                self._bytes -= old.nbytes
                del self._entries[key]
            if nbytes > self.max_bytes:
                return
            self._entries[key] = _Entry(snapshot, token, nbytes, measured)
            self._bytes += nbytes
            while len(self._entries) > self.max_tables or self._bytes > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= evicted.nbytes

    def _count(self, what: str) -> None:
        with self._lock:
            self.stats[what] += 1


#: the process-wide cache ``deltatx.Table`` opens through
SNAPSHOTS = SnapshotCache()
