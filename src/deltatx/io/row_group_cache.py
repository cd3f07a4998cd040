"""Decoded row groups and footers of data files, kept in memory for repeated point reads.

Why: a point UPDATE/DELETE/MERGE on a table with deletion vectors reads the one row group that
may hold its key, and decoding it (a 128k-row group, ~2 ms) is the largest single cost of such a
commit. A job that changes rows one or a few at a time (P11: eight writers updating ids of one
file) reads the same group again and again, while only the file's deletion vector changes.
Delta data files are immutable — a writer never rewrites a path, it writes a new file and
removes the old one — so a decoded column of (file, row group) stays valid for as long as the
file exists; the deletion vector is applied after the cache, from the snapshot being read.

What keys an entry: the file's path plus what identifies its content. On local disk that is the
file's own ``stat`` (size, mtime in ns, inode): a file replaced in place under the same name (a
test, a manual repair) is a different key, so the cache never serves bytes the disk no longer
holds. On other stores the ``add`` action's size and modificationTime stand in (a stat would
cost a request). A missing file is never hidden: the file is opened on every read.

Only small reads use it (:data:`MAX_GROUPS` row groups per file): a scan of many groups would
push out the hot ones and gains nothing from them. The budget is per process, least recently
used first out, :data:`DEFAULT_MAX_BYTES` unless :func:`configure` says otherwise (0 turns it
off); a group bigger than a quarter of the budget is not kept. A group is kept on its
:data:`KEEP_ON_READ`-th read (the earlier ones only count it among :data:`MAX_SEEN` recently
read groups), and what is kept is a copy in a memory pool of the cache's own
(:func:`_cache_pool`): a decoded group left in Arrow's default pool (mimalloc) pins its pages
among the reads' short-lived buffers, and the reads after it decode into fresh pages, which in a
VM costs more than the decode itself (measured here: one group read in six stalled ~5 ms once 60
groups were held; none with the copies held apart). The copy itself lands on fresh pages too
(~0.7 ms for a 1 MiB group here, two decodes' worth), which is why a group must prove hot first:
P10's DELETEs read each group at most twice and keep nothing; P11's writers read theirs dozens
of times. Footers take at most an eighth of the budget again
(by their serialized size), and each file's row-group min/max of a point read's columns are kept
beside them (:data:`MAX_BOUNDS` entries).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any, Hashable

import pyarrow as pa
import pyarrow.parquet as pq

#: decoded columns kept per process, in bytes (see :func:`configure`)
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: reads of more row groups than this per file bypass the cache
MAX_GROUPS = 2
#: the share of the budget footers may take (a footer grows with columns × row groups)
FOOTER_SHARE = 8
#: the read of a group that keeps it (the ones before are counted, not kept)
KEEP_ON_READ = 3
#: groups read fewer times than that, remembered by name with their count
MAX_SEEN = 4096
#: row-group min/max lists kept (per file and column set; a few hundred bytes each)
MAX_BOUNDS = 1024

FileKey = tuple[Hashable, ...]

_POOL: pa.MemoryPool | None = None


def _cache_pool() -> pa.MemoryPool:
    """The pool kept columns live in: jemalloc where this pyarrow build has it, else the system
    allocator — any pool but the default one, whose pages the reads keep reusing."""
    global _POOL
    if _POOL is None:
        try:
            pool = pa.jemalloc_memory_pool()
        except NotImplementedError:  # a build without jemalloc (Windows wheels)
            pool = pa.system_memory_pool()
        _POOL = pool if pool.backend_name != pa.default_memory_pool().backend_name else pa.system_memory_pool()
    return _POOL


def _kept_copy(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """``column`` copied into :func:`_cache_pool` (see the module's docstring for why)."""
    pool = _cache_pool()
    return pa.chunked_array([pa.concat_arrays([chunk], memory_pool=pool) for chunk in column.chunks], column.type)


def local_key(path: str) -> FileKey | None:
    """The key of a local file from its stat; None when it cannot be stat'ed (the read reports it)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (path, st.st_size, st.st_mtime_ns, st.st_ino)


def logged_key(path: str, size: int | None, modification_time: int | None) -> FileKey | None:
    """The key of a remote file from its ``add`` action; None when the log lacks either value."""
    if size is None or modification_time is None:
        return None
    return (path, size, modification_time)


class RowGroupCache:
    """(file, row group, column) -> decoded column, and file -> footer, bounded, thread-safe."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES):
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._columns: OrderedDict[tuple, pa.ChunkedArray] = OrderedDict()
        self._footers: OrderedDict[FileKey, tuple[pq.FileMetaData, int]] = OrderedDict()
        self._bounds: OrderedDict[tuple[FileKey, tuple[str, ...]], list[dict[str, Any]]] = OrderedDict()
        #: (file, group) read once and not kept: read again, it is kept
        self._seen: OrderedDict[tuple[FileKey, int], int] = OrderedDict()
        self._bytes = 0
        self._footer_bytes = 0
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    # -------------------------------------------------------------- footers
    def footer(self, key: FileKey | None) -> pq.FileMetaData | None:
        if key is None or not self.enabled:
            return None
        with self._lock:
            entry = self._footers.get(key)
            if entry is None:
                return None
            self._footers.move_to_end(key)
            return entry[0]

    def keep_footer(self, key: FileKey | None, metadata: pq.FileMetaData) -> None:
        """Keep ``metadata`` for the next open of the same file, within 1/:data:`FOOTER_SHARE`
        of the budget (by serialized size; least recently used first out)."""
        if key is None or not self.enabled:
            return
        limit = self.max_bytes // FOOTER_SHARE
        size = metadata.serialized_size
        with self._lock:
            if key in self._footers:
                self._footers.move_to_end(key)
                return
            if size > limit:
                return
            self._footers[key] = (metadata, size)
            self._footer_bytes += size
            self._evict_footers_above(limit)

    def _evict_footers_above(self, limit: int) -> None:
        """Drop least recently used footers until at most ``limit`` bytes remain (lock held)."""
        while self._footer_bytes > limit and self._footers:
            _, (_, evicted) = self._footers.popitem(last=False)
            self._footer_bytes -= evicted

    # -------------------------------------------------------------- row-group bounds
    def bounds(self, key: FileKey | None, columns: tuple[str, ...]) -> list[dict[str, Any]] | None:
        """The per-row-group min/max of ``columns`` kept for this file (see :meth:`keep_bounds`)."""
        if key is None or not self.enabled:
            return None
        with self._lock:
            found = self._bounds.get((key, columns))
            if found is not None:
                self._bounds.move_to_end((key, columns))
            return found

    def keep_bounds(self, key: FileKey | None, columns: tuple[str, ...], bounds: list[dict[str, Any]]) -> None:
        """Keep the footer's per-group min/max of ``columns`` as gathered for a point read (in
        Python, ~50 µs for 8 groups): the next point change of the file skips it. Never mutated."""
        if key is None or not self.enabled:
            return
        with self._lock:
            self._bounds[(key, columns)] = bounds
            self._bounds.move_to_end((key, columns))
            while len(self._bounds) > MAX_BOUNDS:
                self._bounds.popitem(last=False)

    # -------------------------------------------------------------- row groups
    def read_row_groups(self, pf: pq.ParquetFile, key: FileKey | None, groups: list[int],
                        columns: list[str]) -> pa.Table:
        """``pf.read_row_groups(groups, columns)``, each (group, column) decoded at most once
        while it stays in the budget. Without a key, for none or many groups, it just reads."""
        if key is None or not self.enabled or not groups or len(groups) > MAX_GROUPS or not columns:
            return pf.read_row_groups(groups, columns=columns, use_threads=len(groups) > 1)
        parts = [self._group(pf, key, g, columns) for g in groups]
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def _group(self, pf: pq.ParquetFile, key: FileKey, group: int, columns: list[str]) -> pa.Table:
        found: dict[str, pa.ChunkedArray] = {}
        with self._lock:
            for name in columns:
                entry = self._columns.get((key, group, name))
                if entry is not None:
                    self._columns.move_to_end((key, group, name))
                    found[name] = entry
        missing = [n for n in columns if n not in found]
        if missing:
            self.misses += 1
            fresh = pf.read_row_group(group, columns=missing, use_threads=False)
            if self._hot(key, group):
                self._keep(key, group, fresh)
            for name in missing:
                found[name] = fresh.column(name)
        else:
            self.hits += 1
        return pa.table([found[n] for n in columns], names=columns)

    def _hot(self, key: FileKey, group: int) -> bool:
        """Is this the :data:`KEEP_ON_READ`-th recent read of ``group``? If not, count it."""
        with self._lock:
            reads = self._seen.pop((key, group), 0) + 1
            if reads >= KEEP_ON_READ:
                return True
            self._seen[(key, group)] = reads
            if len(self._seen) > MAX_SEEN:
                self._seen.popitem(last=False)
            return False

    def _keep(self, key: FileKey, group: int, fresh: pa.Table) -> None:
        size = fresh.nbytes
        if size > self.max_bytes // 4:
            return
        copies = {name: _kept_copy(fresh.column(name)) for name in fresh.column_names}  # outside the lock
        with self._lock:
            for name, column in copies.items():
                k = (key, group, name)
                old = self._columns.pop(k, None)
                if old is not None:
                    self._bytes -= old.nbytes
                self._columns[k] = column
                self._bytes += column.nbytes
            self._evict_above(self.max_bytes)

    def _evict_above(self, limit: int) -> None:
        """Drop least recently used columns until at most ``limit`` bytes remain (lock held)."""
        while self._bytes > limit and self._columns:
            _, evicted = self._columns.popitem(last=False)
            self._bytes -= evicted.nbytes

    def resize(self, max_bytes: int) -> None:
        """A new budget (bytes; 0 turns the cache off and empties it)."""
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, not {max_bytes}")
        with self._lock:
            self.max_bytes = max_bytes
            self._evict_above(max_bytes)
            self._evict_footers_above(max_bytes // FOOTER_SHARE)
            if not max_bytes:
                self._bounds.clear()
                self._seen.clear()

    def clear(self) -> None:
        with self._lock:
            self._columns.clear()
            self._footers.clear()
            self._bounds.clear()
            self._seen.clear()
            self._bytes = self._footer_bytes = 0
            self.hits = self.misses = 0

    @property
    def nbytes(self) -> int:
        return self._bytes


#: the process's cache (readers of every table share the budget)
ROW_GROUPS = RowGroupCache()


def configure(max_bytes: int) -> None:
    """Set this process's budget for decoded row groups (bytes; 0 turns the cache off)."""
    ROW_GROUPS.resize(max_bytes)
