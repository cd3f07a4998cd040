"""An fsspec filesystem that wraps another one and makes some of its calls fail with OSError.

Used by R3 to show that storage errors surface as errors (OSError or a DeltaTxError) and never
as a corrupt table. Faults are *atomic*: a failing call either has no effect ("before") or has
its full effect and still reports failure ("after": the write landed but the response was lost,
as with a timeout on S3). Torn writes are not injected — put-if-absent stores never expose them.

Which calls fail is a pure function of (seed, call kind, path with UUIDs blanked, how many times
that kind+path was called before): reproducible from the seed even when deltatx reads or writes
files from a thread pool in a different order.
"""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Any

from fsspec.spec import AbstractFileSystem

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")

READ_KINDS = ("ls", "info", "exists", "cat", "open_read")
WRITE_KINDS = ("pipe", "open_write", "rm", "mkdir")


class InjectedIOError(OSError):
    """The fault this filesystem injects (an OSError, like a real storage failure)."""


class FaultyFileSystem(AbstractFileSystem):
    """Delegates to ``target``; each call of a kind fails with probability ``rate``."""

    protocol = ("faulty",)
    cachable = False

    def __init__(self, target: AbstractFileSystem, *, seed: int, read_rate: float = 0.05,
                 write_rate: float = 0.05, scope: str = "all", **kwargs: Any) -> None:
        """``scope``: "all" paths, only "log" paths (under ``_delta_log``) or only "data" paths."""
        super().__init__(**kwargs)
        if scope not in ("all", "log", "data"):
            raise ValueError(f"scope must be 'all', 'log' or 'data', not {scope!r}")
        self.target = target
        self.scope = scope
        self.seed = seed
        self.read_rate = read_rate
        self.write_rate = write_rate
        self.enabled = True
        self.injected: list[tuple[str, str, str]] = []  # (kind, path, "before"|"after")
        self._counts: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    # ---- the fault decision ------------------------------------------------------------------
    def _draw(self, kind: str, path: str) -> float:
        key = (kind, _UUID.sub("*", str(path)))
        with self._lock:
            n = self._counts.get(key, 0)
            self._counts[key] = n + 1
        digest = hashlib.sha256(f"{self.seed}|{key[0]}|{key[1]}|{n}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def _fault(self, kind: str, path: str) -> str | None:
        """None (no fault), "before" or "after"."""
        if not self.enabled:
            return None
        if self.scope != "all" and ("/_delta_log" in str(path)) != (self.scope == "log"):
            return None
        rate = self.read_rate if kind in READ_KINDS else self.write_rate
        u = self._draw(kind, path)
        if u >= rate:
            return None
        when = "before" if kind in READ_KINDS or u < rate / 2 else "after"
        with self._lock:
            self.injected.append((kind, str(path), when))
        return when

    @staticmethod
    def _raise(kind: str, path: str, when: str) -> None:
        raise InjectedIOError(f"injected I/O error ({kind} {path}, {when} the effect)")

    def _read(self, kind: str, path: str) -> None:
        when = self._fault(kind, path)
        if when:
            self._raise(kind, path, when)

    def _write(self, kind: str, path: str, effect) -> Any:
        when = self._fault(kind, path)
        if when == "before":
            self._raise(kind, path, when)
        result = effect()
        if when == "after":
            self._raise(kind, path, when)
        return result

    # ---- reads -------------------------------------------------------------------------------
    def ls(self, path, detail=True, **kwargs):
        self._read("ls", path)
        return self.target.ls(path, detail=detail, **kwargs)

    def info(self, path, **kwargs):
        self._read("info", path)
        return self.target.info(path, **kwargs)

    def exists(self, path, **kwargs):  # fsspec's default turns every error into False
        self._read("exists", path)
        return self.target.exists(path, **kwargs)

    def isfile(self, path):
        self._read("info", path)
        return self.target.isfile(path)

    def isdir(self, path):
        self._read("info", path)
        return self.target.isdir(path)

    def cat_file(self, path, start=None, end=None, **kwargs):
        self._read("cat", path)
        return self.target.cat_file(path, start=start, end=end, **kwargs)

    # ---- writes ------------------------------------------------------------------------------
    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        return self._write("pipe", path, lambda: self.target.pipe_file(path, value, mode=mode, **kwargs))

    def rm_file(self, path):
        return self._write("rm", path, lambda: self.target.rm_file(path))

    def _rm(self, path):
        return self.rm_file(path)

    def rm(self, path, recursive=False, maxdepth=None):
        return self._write("rm", path, lambda: self.target.rm(path, recursive=recursive, maxdepth=maxdepth))

    def mkdir(self, path, create_parents=True, **kwargs):
        return self._write("mkdir", path, lambda: self.target.mkdir(path, create_parents=create_parents, **kwargs))

    def makedirs(self, path, exist_ok=False):
        return self._write("mkdir", path, lambda: self.target.makedirs(path, exist_ok=exist_ok))

    def rmdir(self, path):
        return self._write("rm", path, lambda: self.target.rmdir(path))

    def cp_file(self, path1, path2, **kwargs):
        return self._write("pipe", path2, lambda: self.target.cp_file(path1, path2, **kwargs))

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        if "r" in mode:
            self._read("open_read", path)
            return self.target._open(path, mode=mode, block_size=block_size, autocommit=autocommit,
                                     cache_options=cache_options, **kwargs)
        when = self._fault("open_write", path)
        if when == "before":
            self._raise("open_write", path, when)
        handle = self.target._open(path, mode=mode, block_size=block_size, autocommit=autocommit,
                                   cache_options=cache_options, **kwargs)
        if when == "after":  # the file is written in full when closed, then the close reports failure
            _fail_on_close(handle, lambda: self._raise("open_write", path, "after"))
        return handle


def _fail_on_close(handle: Any, fail) -> None:
    close = handle.close
    state = {"failed": False}

    def close_then_fail() -> None:
        close()
        if not state["failed"]:
            state["failed"] = True
            fail()

    handle.close = close_then_fail
