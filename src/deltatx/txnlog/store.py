"""Where a table lives: the log's three operations and the data files' filesystem.

The log needs exactly three things from storage — list versions ≥ N, read one file, and
**put-if-absent** of the next commit — and correctness of every concurrent writer rests on the
last one being atomic. Each store kind implements it with the primitive its storage really has:

=============  ===========================================================================
store          put-if-absent
=============  ===========================================================================
local disk     write a hidden temp file, ``os.link`` it to the final name (fails if taken),
               unlink the temp: a reader never sees a half-written commit.
``memory://``  check-and-set under a process-wide lock (memory tables are per process).
``s3://``      ``PutObject`` with ``If-None-Match: *`` through s3fs (``mode="create"``).
anything else  none: committing raises :class:`UnsafeStorageError` unless the user opts into
               ``single_writer=True`` (documented: only one writer at a time, ever).
=============  ===========================================================================

Parsing is not done here: stores move bytes.
"""

from __future__ import annotations

import os
import re
import threading
import uuid
import warnings
from dataclasses import dataclass
from typing import Any, Hashable
from urllib.parse import urlparse

import fsspec
import pyarrow.fs as pafs

from .. import phases
from ..errors import DataFileNotFoundError, InvalidArgumentError, UnsafeStorageError

LOG_DIR = "_delta_log"

_COMMIT_RE = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT_RE = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10})|\.([^.]+))?\.(parquet|json)$")
#: files metadata cleanup deletes too (PROTOCOL.md "Version Checksum File", "Log Compaction Files"),
#: listed only when asked for (``list_log(extra=True)``): log replay never reads them
_CHECKSUM_RE = re.compile(r"^(\d{20})\.crc$")
_COMPACTION_RE = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")


class VersionExistsError(FileExistsError):
    """Internal: put-if-absent lost the race for this version."""

    def __init__(self, version: int):
        super().__init__(f"commit {version} already exists")
        self.version = version


@dataclass(frozen=True)
class LogFile:
    """One file of ``_delta_log`` that log replay cares about."""

    name: str
    version: int
    kind: str  # "commit" | "checkpoint"; with list_log(extra=True) also "checksum" | "compaction"
    size: int = 0
    mtime_ms: int = 0
    part: int | None = None  # multi-part checkpoint: part number (1-based)
    num_parts: int | None = None  # multi-part checkpoint: number of parts
    checkpoint_uuid: str | None = None  # V2 checkpoint named with a UUID
    fmt: str = "json"  # "json" | "parquet"
    end_version: int | None = None  # log compaction file: the last version it covers


def classify(name: str, size: int = 0, mtime_ms: int = 0, extra: bool = False) -> LogFile | None:
    """Recognise a log file name; None for anything else (temp files, sidecars...). Version
    checksums (``.crc``) and log compaction files only with ``extra`` (metadata cleanup lists them)."""
    m = _COMMIT_RE.match(name)
    if m:
        return LogFile(name, int(m.group(1)), "commit", size, mtime_ms)
    m = _CHECKPOINT_RE.match(name)
    if m:
        version = int(m.group(1))
        if m.group(2):
            return LogFile(name, version, "checkpoint", size, mtime_ms, part=int(m.group(2)),
                           num_parts=int(m.group(3)), fmt=m.group(5))
        return LogFile(name, version, "checkpoint", size, mtime_ms, checkpoint_uuid=m.group(4), fmt=m.group(5))
    if extra:
        m = _CHECKSUM_RE.match(name)
        if m:
            return LogFile(name, int(m.group(1)), "checksum", size, mtime_ms)
        m = _COMPACTION_RE.match(name)
        if m:
            return LogFile(name, int(m.group(1)), "compaction", size, mtime_ms, end_version=int(m.group(2)))
    return None


def commit_name(version: int) -> str:
    return f"{version:020d}.json"


class LogStore:
    """Base class: one table root on one filesystem.

    ``fs``/``root`` are the fsspec filesystem and the root path in it; ``arrow_fs`` and
    ``arrow_root`` are the same place for pyarrow's Parquet reader and writer.
    """

    #: True when put_if_absent is atomic for concurrent writers
    atomic_put_if_absent: bool = True

    def __init__(self, uri: str, fs: fsspec.AbstractFileSystem, root: str, *, single_writer: bool = False):
        self.uri = uri
        self.fs = fs
        self.root = root.rstrip("/")
        self.single_writer = single_writer
        self.log_root = f"{self.root}/{LOG_DIR}"

    # ---- pyarrow view of the same place -------------------------------------------------------
    @property
    def arrow_fs(self) -> pafs.FileSystem:
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs))

    @property
    def arrow_root(self) -> str:
        return self.root

    def data_path(self, relative: str) -> str:
        """Path (in ``arrow_fs``) of a data file named by an add action's decoded path."""
        if "://" in relative:
            return _strip_scheme(relative)
        if relative.startswith("/"):
            return relative
        return f"{self.arrow_root}/{relative}"

    # ---- the log ------------------------------------------------------------------------------
    def list_log(self, start_version: int = 0, *, extra: bool = False) -> list[LogFile]:
        """Commits and checkpoints with version ≥ start_version, sorted by (version, name); with
        ``extra`` also version checksums and log compaction files (metadata cleanup's listing)."""
        try:
            infos = self.fs.ls(self.log_root, detail=True)
        except FileNotFoundError:
            return []
        out = []
        for info in infos:
            name = info["name"].rstrip("/").rsplit("/", 1)[-1]
            lf = classify(name, int(info.get("size") or 0), _mtime_ms(info), extra)
            if lf is not None and lf.version >= start_version:
                out.append(lf)
        out.sort(key=lambda f: (f.version, f.kind != "checkpoint", f.name))
        return out

    def read_log_file(self, name: str) -> bytes:
        return self.fs.cat_file(f"{self.log_root}/{name}")

    def read_commit(self, version: int) -> bytes:
        return self.read_log_file(commit_name(version))

    def read_commits_after(self, version: int, limit: int) -> list[bytes]:
        """The commits after ``version``, oldest first, up to the first missing one or ``limit``
        of them: what a writer catching up reads (by name, no listing). A store that knows the
        versions by other means (a catalog) answers in one request."""
        found: list[bytes] = []
        while len(found) < limit:
            try:
                found.append(self.read_commit(version + 1 + len(found)))
            except FileNotFoundError:
                break
        return found

    def write_log_file(self, name: str, data: bytes) -> None:
        """Plain (overwriting) write for checkpoints and ``_last_checkpoint``; never commits."""
        self.fs.makedirs(self.log_root, exist_ok=True)
        self.fs.pipe_file(f"{self.log_root}/{name}", data)

    def delete_log_file(self, name: str) -> None:
        try:
            self.fs.rm_file(f"{self.log_root}/{name}")
        except FileNotFoundError:
            pass

    def cleanup_bound(self) -> int | None:
        """The newest version whose log files metadata cleanup may treat as settled; None: any
        listed version. A catalog's store answers the last version it verified published."""
        return None

    def put_commit(self, version: int, data: bytes) -> None:
        """Put-if-absent of ``version``'s commit; raises VersionExistsError on losing."""
        if not self.atomic_put_if_absent and not self.single_writer:
            raise UnsafeStorageError(
                f"storage {self.uri!r} cannot do an atomic put-if-absent, so concurrent writers "
                f"could overwrite each other's commits. Use local disk, s3:// (conditional writes) "
                f"or memory://, or pass storage_options={{'single_writer': True}} if you guarantee "
                f"that only one writer ever commits to this table."
            )
        self._put_if_absent(commit_name(version), data, version)

    def prepare_commit(self, data: bytes, *, plain: bool = False, commutes: bool = False) -> "PreparedCommit":
        """Stage commit bytes once for put-if-absent at whichever version is next.

        The bytes of a commit do not name their version, so a writer that loses a race can offer
        the same staged bytes for the next version: on local disk that is one more ``link``,
        without writing and fsyncing the file again. ``plain`` and ``commutes`` describe the
        bytes (conflicts/commuting.py); only a store that orders commits itself (a catalog)
        uses them — storage's put-if-absent cannot tell what the winners held without reading.
        """
        return PreparedCommit(self, data)

    def version_taken(self, version: int) -> bool:
        """True when ``version``'s commit is known to exist already, by a check much cheaper than
        a put (False: unknown, or free). A writer asks before encoding an attempt's bytes, so
        a race lost while it staged costs no encoding. Only local disk answers (one stat); a
        remote HEAD costs about what the losing put itself costs."""
        return False

    def _put_if_absent(self, name: str, data: bytes, version: int) -> None:
        path = f"{self.log_root}/{name}"
        self.fs.makedirs(self.log_root, exist_ok=True)
        if self.fs.exists(path):
            raise VersionExistsError(version)
        self.fs.pipe_file(path, data)

    def table_exists(self) -> bool:
        return any(f.kind in ("commit", "checkpoint") for f in self.list_log())

    # ---- data files ---------------------------------------------------------------------------
    def list_files_recursive(self) -> list[tuple[str, int, int]]:
        """(relative path, size, mtime ms) of every file under the root except the log."""
        out = []
        try:
            found = self.fs.find(self.root, detail=True)
        except FileNotFoundError:
            return out
        prefix = self.root + "/"
        for path, info in found.items():
            path = _strip_scheme(path)
            rel = path[len(prefix):] if path.startswith(prefix) else path
            if info.get("type") == "directory":
                continue
            out.append((rel, int(info.get("size") or 0), _mtime_ms(info)))
        return out

    def delete_files(self, relative_paths: list[str]) -> None:
        for rel in relative_paths:
            try:
                self.fs.rm_file(self.data_path(rel))
            except FileNotFoundError:
                pass

    def list_folders_recursive(self) -> list[tuple[str, int]]:
        """(relative path, mtime ms) of every folder under the root except the log; none here:
        an object store's folders are only key prefixes, gone with their last object."""
        return []

    def remove_empty_folder(self, relative: str) -> bool:
        """Remove the folder if it is empty (never its content); whether it was removed."""
        return False

    def location_is_file(self) -> bool:
        """Is the table's location a file? (Object stores have no folders to be in the way.)"""
        return False

    def makedirs(self, path: str) -> None:
        self.fs.makedirs(path, exist_ok=True)

    def make_files_durable(self, relative_paths: list[str]) -> None:
        """Make files a commit is about to reference survive an OS crash, before the commit does.

        Nothing to do here: an object store's PUT is durable once acknowledged, and a memory
        store has nothing an OS crash could keep. Local disk overrides this (fsync)."""

    def check_data_file(self, relative: str) -> None:
        if not self.fs.exists(self.data_path(relative)):
            raise DataFileNotFoundError(
                f"data file {relative!r} referenced by the log of {self.uri!r} is missing; "
                f"it may have been vacuumed or deleted outside deltatx"
            )


class LocalLogStore(LogStore):
    """Local disk: os calls (not fsspec) on the hot paths, ``os.link`` for put-if-absent."""

    def __init__(self, uri: str, root: str, *, fsync: bool = True, single_writer: bool = False):
        super().__init__(uri, fsspec.filesystem("file"), os.path.abspath(root), single_writer=single_writer)
        self.fsync = fsync

    def location_is_file(self) -> bool:
        """Is the table's location, or the nearest of its folders that exists, a file? A table
        there could never be written (its ``_delta_log`` folder cannot be made), so creating one
        is refused before anything is."""
        path = self.root
        while not os.path.exists(path):
            parent = os.path.dirname(path)
            if parent == path:
                return False
            path = parent
        return not os.path.isdir(path)

    @property
    def arrow_fs(self) -> pafs.FileSystem:
        return pafs.LocalFileSystem()

    def list_log(self, start_version: int = 0, *, extra: bool = False) -> list[LogFile]:
        out = []
        try:
            it = os.scandir(self.log_root)
        except (FileNotFoundError, NotADirectoryError):  # no log; or the table path is a file: no table either
            return out
        start_name = f"{start_version:020d}"  # zero-padded: string order is version order
        with it:
            for entry in it:
                name = entry.name
                if name < start_name or not name[:20].isdigit():  # cheap tests before the regex
                    continue
                try:
                    st = entry.stat()
                except FileNotFoundError:  # removed by log cleanup since readdir saw it
                    continue
                lf = classify(name, st.st_size, int(st.st_mtime * 1000), extra)
                if lf is not None:
                    out.append(lf)
        out += self._missed_commits(out)
        out.sort(key=lambda f: (f.version, f.kind != "checkpoint", f.name))
        return out

    def _missed_commits(self, listed: list[LogFile]) -> list[LogFile]:
        """Commits created while the directory was being read that readdir skipped.

        POSIX leaves it unspecified whether readdir returns a file added after opendir, and
        ext4's hashed directories do skip some while newer ones appear — so a concurrent commit
        can show up as a gap (seen: 48 gaps in 2,369 listings under 8 writers). A gap between
        listed commits is therefore checked by name before anyone calls the log corrupt.
        """
        versions = sorted(f.version for f in listed if f.kind == "commit")
        if not versions or versions[-1] - versions[0] + 1 == len(versions):
            return []
        present = set(versions)
        found = []
        for version in range(versions[0] + 1, versions[-1]):
            if version in present:
                continue
            name = commit_name(version)
            try:
                st = os.stat(os.path.join(self.log_root, name))
            except FileNotFoundError:
                continue  # a real gap (or cleaned up): replay decides whether that matters
            lf = classify(name, st.st_size, int(st.st_mtime * 1000))
            if lf is not None:
                found.append(lf)
        return found

    def read_log_file(self, name: str) -> bytes:
        with open(os.path.join(self.log_root, name), "rb") as fh:
            return fh.read()

    def write_log_file(self, name: str, data: bytes) -> None:
        """Write-then-rename so that a reader sees the old or the new file, never half of one."""
        _ensure_folder(self.log_root)
        tmp = os.path.join(self.log_root, f".{name}.{uuid.uuid4().hex}.tmp")
        try:
            self._write_tmp(tmp, data)
            os.replace(tmp, os.path.join(self.log_root, name))
        except BaseException:  # the name is a folder, the disk is full...: leave no temp file behind
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

    def delete_log_file(self, name: str) -> None:
        try:
            os.unlink(os.path.join(self.log_root, name))
        except FileNotFoundError:
            pass

    def _write_tmp(self, tmp: str, data: bytes) -> None:
        write_new_file(tmp, data, fsync=self.fsync)

    def version_taken(self, version: int) -> bool:
        return os.path.exists(os.path.join(self.log_root, commit_name(version)))

    def _put_if_absent(self, name: str, data: bytes, version: int) -> None:
        with self.prepare_commit(data) as prepared:
            prepared.put(version)

    def prepare_commit(self, data: bytes, *, plain: bool = False, commutes: bool = False) -> "PreparedCommit":
        return _LocalPreparedCommit(self, data)

    def _write_commit_tmp(self, data: bytes) -> str:
        _ensure_folder(self.log_root)
        tmp = os.path.join(self.log_root, f".commit.{uuid.uuid4().hex}.tmp")
        self._write_tmp(tmp, data)
        return tmp

    def _link_commit(self, tmp: str, version: int) -> None:
        try:
            os.link(tmp, os.path.join(self.log_root, commit_name(version)))
        except FileExistsError:
            raise VersionExistsError(version) from None
        phases.reached("commit_linked", version=version)
        if self.fsync:
            fsync_path(self.log_root)

    def table_exists(self) -> bool:
        return bool(self.list_log())

    def list_files_recursive(self) -> list[tuple[str, int, int]]:
        return [(rel, st.st_size, int(st.st_mtime * 1000)) for rel, st in self._walk(folders=False)]

    def _walk(self, *, folders: bool) -> list[tuple[str, os.stat_result]]:
        """(path relative to the root, stat) of every file — or every folder — under the root,
        the log excluded; entries gone while walking are skipped."""
        out = []
        root = self.root
        for dirpath, dirnames, filenames in os.walk(root):
            if dirpath == root and LOG_DIR in dirnames:
                dirnames.remove(LOG_DIR)
            for name in (dirnames if folders else filenames):
                full = os.path.join(dirpath, name)
                try:
                    st = os.stat(full)
                except FileNotFoundError:
                    continue
                out.append((os.path.relpath(full, root).replace(os.sep, "/"), st))
        return out

    def delete_files(self, relative_paths: list[str]) -> None:
        for rel in relative_paths:
            try:
                os.unlink(self.data_path(rel))
            except FileNotFoundError:
                pass

    def list_folders_recursive(self) -> list[tuple[str, int]]:
        return [(rel, int(st.st_mtime * 1000)) for rel, st in self._walk(folders=True)]

    def remove_empty_folder(self, relative: str) -> bool:
        try:
            os.rmdir(self.data_path(relative))  # rmdir refuses a folder that holds anything
        except OSError:
            return False
        return True

    def makedirs(self, path: str) -> None:
        _ensure_folder(path)

    def make_files_durable(self, relative_paths: list[str]) -> None:
        """fsync the data, deletion-vector and change files a commit will reference, unless the
        store was opened with ``fsync: False``.

        Why: the commit file is fsynced; without this, an OS crash or power loss soon after a
        commit could leave the durable log naming a data file the kernel had not written back
        yet (empty or missing after recovery): a table that no longer reads. Several files are
        fsynced by a few threads at once (fsync releases the GIL; the device works on them
        together). A file that is gone fails the commit before anything is put.

        The folders are not fsynced: on a journaling filesystem (ext4, xfs) a new file's name is
        journaled metadata, and the commit's own fsync, which comes after, commits the journal
        up to and including it; a folder fsync here would cost one more journal commit per
        commit for nothing on those filesystems."""
        if not self.fsync or not relative_paths:
            return
        paths = [self.data_path(rel) for rel in relative_paths]
        if len(paths) == 1:
            _fsync_written(paths[0])
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=min(8, len(paths)), thread_name_prefix="deltatx-fsync") as pool:
                list(pool.map(_fsync_written, paths))

    def check_data_file(self, relative: str) -> None:
        if not os.path.exists(self.data_path(relative)):
            raise DataFileNotFoundError(
                f"data file {relative!r} referenced by the log of {self.uri!r} is missing; "
                f"it may have been vacuumed or deleted outside deltatx"
            )


def _ensure_folder(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)`` in one ``stat`` when the folder is there (every
    commit after the first): makedirs tries ``mkdir`` first and checks its parent."""
    if not os.path.isdir(path):
        os.makedirs(path, exist_ok=True)


def write_new_file(path: str, data: Any, *, fsync: bool = False) -> int:
    """``data`` (bytes or a buffer) into a new local file, fsynced when asked; returns its size.
    Plain ``os`` calls: a buffered ``open()`` adds an fstat, an isatty ioctl and a seek, on every
    commit and every small data file."""
    view = memoryview(data)
    size = view.nbytes
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return size


def fsync_path(path: str) -> None:
    """fsync a file or a folder (its names) by path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_written(path: str) -> None:
    """fsync a file written for a commit; gone, it fails the commit before anything is put."""
    try:
        fsync_path(path)
    except FileNotFoundError:
        raise DataFileNotFoundError(f"{path!r} was written for this commit and is gone: "
                                    f"nothing was committed") from None


class PreparedCommit:
    """Commit bytes staged for put-if-absent; ``put(version)`` may be tried at several versions."""

    def __init__(self, store: LogStore, data: bytes):
        self.store = store
        self.data = data

    def put(self, version: int) -> int | None:
        """Put-if-absent at ``version``; VersionExistsError if another writer has it. Returns the
        version that was written when the store chose another one (a catalog ratifying commuting
        bytes after plain winners), else None."""
        self.store.put_commit(version, self.data)
        return None

    def close(self) -> None:
        """Release whatever staging holds (nothing here; the temp file on local disk)."""

    def __enter__(self) -> "PreparedCommit":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _LocalPreparedCommit(PreparedCommit):
    """Local disk: a durable hidden temp file, hard-linked to the version's name on each try.

    ``os.link`` fails if the name exists, so a reader never sees a partial commit and two
    writers can never both win a version.
    """

    def __init__(self, store: "LocalLogStore", data: bytes):
        super().__init__(store, data)
        self.tmp: str | None = None

    def put(self, version: int) -> None:
        store = self.store
        assert isinstance(store, LocalLogStore)
        if not store.atomic_put_if_absent and not store.single_writer:  # pragma: no cover - local is atomic
            store.put_commit(version, self.data)
            return
        if self.tmp is None:
            if os.path.exists(os.path.join(store.log_root, commit_name(version))):
                # taken already: losing now spares writing and fsyncing bytes that cannot win
                raise VersionExistsError(version)
            self.tmp = store._write_commit_tmp(self.data)
            phases.reached("commit_temp_written", version=version, temp=self.tmp)
        store._link_commit(self.tmp, version)

    def close(self) -> None:
        if self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except FileNotFoundError:
                pass
            self.tmp = None


_MEMORY_LOCK = threading.Lock()
#: commits whose PUT identity an S3 store keeps (the snapshot cache asks for the latest few)
_PUT_TOKENS_KEPT = 64


class MemoryLogStore(LogStore):
    """``memory://``: fsspec's in-process filesystem; put-if-absent under a process-wide lock."""

    def _put_if_absent(self, name: str, data: bytes, version: int) -> None:
        path = f"{self.log_root}/{name}"
        with _MEMORY_LOCK:
            if self.fs.exists(path):
                raise VersionExistsError(version)
            self.fs.pipe_file(path, data)


class S3LogStore(LogStore):
    """``s3://``: conditional PutObject (``If-None-Match: *``) makes put-if-absent atomic."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._put_tokens: dict[int, tuple[int, str]] = {}
        self._tokens_lock = threading.Lock()

    def _put_if_absent(self, name: str, data: bytes, version: int) -> None:
        try:
            response = self.fs.pipe_file(f"{self.log_root}/{name}", data, mode="create")
        except FileExistsError:
            raise VersionExistsError(version) from None
        etag = response.get("ETag") if isinstance(response, dict) else None
        if etag:
            with self._tokens_lock:
                self._put_tokens[version] = (len(data), str(etag))
                while len(self._put_tokens) > _PUT_TOKENS_KEPT:
                    self._put_tokens.pop(next(iter(self._put_tokens)))

    def written_commit_token(self, version: int) -> Hashable | None:
        """The identity (size, ETag) of commit ``version`` as this store's own PUT of it returned
        it, or None: the snapshot cache's token for a commit this process made, without a HEAD."""
        with self._tokens_lock:
            return self._put_tokens.get(version)


    def write_log_file(self, name: str, data: bytes) -> None:
        self.fs.pipe_file(f"{self.log_root}/{name}", data)  # S3 PUT is atomic; no dirs

    def read_log_file(self, name: str) -> bytes:
        # One plain GET. s3fs's default first sizes the object from its cached listing of
        # _delta_log, which predates a commit another writer just made: the loser of a race
        # would read "missing" for the winner's commit and retry the same version forever.
        return self.fs.cat_file(f"{self.log_root}/{name}", max_concurrency=1)

    def list_log(self, start_version: int = 0, *, extra: bool = False) -> list[LogFile]:
        self.fs.invalidate_cache(self.log_root)
        return super().list_log(start_version, extra=extra)

    def makedirs(self, path: str) -> None:
        pass


class UnsafeLogStore(LogStore):
    """Any other fsspec filesystem: usable for reading; commits need ``single_writer=True``."""

    atomic_put_if_absent = False


# --------------------------------------------------------------------------------------------

_S3_OPTION_ALIASES = {
    "aws_endpoint_url": "endpoint_url",
    "aws_endpoint": "endpoint_url",  # delta-rs / object_store spell it both ways
    "endpoint": "endpoint_url",
    "aws_default_region": "region",
    "endpoint_url": "endpoint_url",
    "aws_access_key_id": "key",
    "access_key_id": "key",
    "aws_secret_access_key": "secret",
    "secret_access_key": "secret",
    "aws_session_token": "token",
    "aws_region": "region",
    "region": "region",
    "region_name": "region",  # botocore's name, as boto3 users write it
    "aws_profile": "profile",  # delta-rs's AWS_PROFILE: a profile of ~/.aws/config
}

#: s3fs arguments an alias sets that the user may also give s3fs by their own name (endpoint_url
#: is itself an alias key); 'region' is no s3fs argument, it goes to client_kwargs['region_name']
_S3_ALIASED_ARGUMENTS = frozenset(_S3_OPTION_ALIASES.values()) - {"region"}
#: aliased arguments whose values an error message must not repeat
_S3_SECRET_ARGUMENTS = frozenset({"key", "secret", "token"})


#: delta-rs options with no s3fs meaning, accepted so one set of options opens a table in both.
#: Whatever their value, deltatx's commits stay safe: it always commits with a conditional PUT.
_S3_IGNORED_OPTIONS = frozenset({"aws_allow_http", "allow_http", "aws_s3_allow_unsafe_rename", "conditional_put",
                                 "aws_conditional_put"})

#: object_store's on/off options and the s3fs argument each one sets
_S3_SWITCH_OPTIONS = {
    "aws_skip_signature": "anon",
    "skip_signature": "anon",
    "aws_request_payer": "requester_pays",
    "request_payer": "requester_pays",
}

#: options that pick botocore's S3 addressing style: (the style "true" picks, the style "false"
#: picks). A "force" flag that is off forces nothing (None), so botocore's default stays.
#: delta-rs's AWS_S3_ADDRESSING_STYLE names the style itself.
_S3_ADDRESSING_SWITCHES: dict[str, tuple[str, str | None]] = {
    "aws_force_path_style": ("path", None),
    "aws_virtual_hosted_style_request": ("virtual", "path"),
    "virtual_hosted_style_request": ("virtual", "path"),
}
_S3_ADDRESSING_STYLE_OPTION = "aws_s3_addressing_style"
_S3_ADDRESSING_STYLES = ("path", "virtual")

#: delta-rs's DynamoDB commit lock. deltatx needs none (its S3 commit is a conditional PUT), so a
#: user's deltalake options are accepted; only a provider delta-rs does not know is refused.
_S3_LOCKING_PROVIDER_OPTION = "aws_s3_locking_provider"
#: The lock table's own settings (its name, billing mode, request deadline, and the endpoint,
#: region and credentials delta-rs uses for DynamoDB when they differ from S3's) configure a lock
#: deltatx never takes: accepted with the provider, never passed on, and never shown.
_S3_LOCK_OPTIONS = frozenset({
    _S3_LOCKING_PROVIDER_OPTION, "delta_dynamo_table_name", "delta_dynamo_billing_mode",
    "delta_dynamo_max_elapsed_request_time", "aws_endpoint_url_dynamodb", "aws_region_dynamodb",
    "aws_access_key_id_dynamodb", "aws_secret_access_key_dynamodb", "aws_session_token_dynamodb",
})


def _s3_translated_option_names() -> frozenset[str]:
    """The delta-rs / object_store option names deltatx understands (lower-case; any case is taken)."""
    from .s3_client import TIMEOUT_OPTIONS

    return frozenset(set(_S3_OPTION_ALIASES) | _S3_IGNORED_OPTIONS | set(_S3_SWITCH_OPTIONS)
                     | set(_S3_ADDRESSING_SWITCHES) | {_S3_ADDRESSING_STYLE_OPTION} | _S3_LOCK_OPTIONS
                     | set(TIMEOUT_OPTIONS))


def _s3fs_option_names() -> frozenset[str]:
    """The keyword arguments s3fs takes: its own, fsspec's caching ones and botocore's session's
    (where s3fs hands the rest). Read off the installed versions, so an upgrade needs no edit."""
    import inspect

    import s3fs
    from aiobotocore.session import AioSession

    names: set[str] = set()
    for function in (s3fs.S3FileSystem.__init__, AioSession.__init__):
        names.update(name for name, p in inspect.signature(function).parameters.items()
                     if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and name != "self")
    return frozenset(names | {"use_listings_cache", "listings_expiry_time", "max_paths", "skip_instance_cache"})


def _refuse_unknown_s3_options(options: dict[str, Any]) -> None:
    """An option s3fs does not take would surface as a TypeError deep in botocore at the first
    request; refuse it up front, naming it and the closest known option."""
    import difflib

    translated = _s3_translated_option_names()
    known = _s3fs_option_names() | translated | {"single_writer", "fsync"}
    unknown = sorted(k for k in options if k not in known and k.lower() not in translated)
    if unknown:
        close = difflib.get_close_matches(unknown[0].lower(), sorted(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InvalidArgumentError(
            f"unknown S3 storage option(s) {unknown}{hint}: use s3fs's options or the AWS-style ones "
            f"({', '.join(sorted(translated))}); nothing was opened")


def _s3_kwargs(options: dict[str, Any]) -> dict[str, Any]:
    """s3fs's keyword arguments for the user's storage options (s3fs's own or delta-rs's)."""
    from .s3_client import TIMEOUT_OPTIONS, duration_s, with_bounded_waits

    _refuse_unknown_s3_options(options)
    options = dict(options)
    kwargs: dict[str, Any] = {}
    client_kwargs: dict[str, Any] = dict(options.pop("client_kwargs", {}) or {})
    config_kwargs: dict[str, Any] = dict(options.pop("config_kwargs", {}) or {})
    switched: dict[str, tuple[str, bool]] = {}  # s3fs argument -> (the option that set it, value)
    aliased: dict[str, tuple[str, Any]] = {}  # aliased argument -> (the option that set it, value)
    styles: list[tuple[str, str]] = []  # (option, addressing style it asks for)
    timeouts: dict[str, float] = {}  # botocore's name -> seconds
    for key, value in options.items():
        name = key.lower()
        alias = _S3_OPTION_ALIASES.get(name)
        if name in TIMEOUT_OPTIONS:
            timeouts[TIMEOUT_OPTIONS[name]] = duration_s(key, value)
        elif alias is not None:
            _record_alias(aliased, alias, key, value)
        elif key in _S3_ALIASED_ARGUMENTS:  # s3fs's own name for what an alias sets ('profile')
            _record_alias(aliased, key, key, value)
        elif name in _S3_SWITCH_OPTIONS:
            _record_switch(switched, _S3_SWITCH_OPTIONS[name], key, _s3_switch_value(name, key, value))
        elif name in _S3_ADDRESSING_SWITCHES or name == _S3_ADDRESSING_STYLE_OPTION:
            style = _addressing_style(name, key, value)
            if style is not None:
                styles.append((key, style))
        elif name in _S3_LOCK_OPTIONS:
            _accept_lock_option(name, key, value)
        elif name in _S3_IGNORED_OPTIONS:
            continue
        else:
            kwargs[key] = value
    _apply_aliases(kwargs, client_kwargs, aliased)
    _apply_switches(kwargs, switched)
    _apply_addressing_style(config_kwargs, styles)
    if client_kwargs:
        kwargs["client_kwargs"] = client_kwargs
    kwargs["config_kwargs"] = with_bounded_waits(config_kwargs, timeouts)
    # s3fs keeps every folder listing it makes (VACUUM's, create_table's) with no expiry, and then
    # answers open/info from it without a HEAD: a file another process adds later would read as
    # missing for good. S3 reads are strongly consistent; the cache only makes them stale.
    kwargs.setdefault("use_listings_cache", False)
    return kwargs


def _s3_switch_value(name: str, key: str, value: Any) -> bool:
    """object_store's request payer is a switch ("true"); the S3 header's own word "requester"
    is taken as on too, since users copy it from AWS's documentation."""
    if name.endswith("request_payer") and isinstance(value, str) and value.strip().lower() == "requester":
        return True
    return _switch(key, value)


def _record_switch(switched: dict[str, tuple[str, bool]], argument: str, key: str, value: bool) -> None:
    """Two spellings of one switch (AWS_SKIP_SIGNATURE=true, skip_signature=false) that disagree
    are refused: whichever came last would win without a word."""
    earlier = switched.get(argument)
    if earlier is not None and earlier[1] != value:
        raise InvalidArgumentError(f"storage options {earlier[0]}={earlier[1]} and {key}={value} contradict "
                                   f"each other (both set s3fs's {argument}); give one")
    switched[argument] = (key, value)


def _shown(argument: str, key: str, value: Any) -> str:
    """``key=value`` for an error message; a credential's value is not repeated."""
    return key if argument in _S3_SECRET_ARGUMENTS else f"{key}={value!r}"


def _record_alias(aliased: dict[str, tuple[str, Any]], argument: str, key: str, value: Any) -> None:
    """Two spellings of one setting (AWS_REGION, region_name) with different values are refused:
    whichever came last would win without a word. The same value twice is fine."""
    earlier = aliased.get(argument)
    if earlier is not None and earlier[1] != value:
        raise InvalidArgumentError(f"storage options {_shown(argument, *earlier)} and {_shown(argument, key, value)} "
                                   f"disagree (both set s3fs's {argument}); give one")
    aliased[argument] = (key, value)


def _apply_aliases(kwargs: dict[str, Any], client_kwargs: dict[str, Any],
                   aliased: dict[str, tuple[str, Any]]) -> None:
    """Set each aliased setting; the region goes to botocore's client, refusing one the user also
    gave there directly (client_kwargs={'region_name': ...}) with another value."""
    for argument, (key, value) in aliased.items():
        if argument != "region":
            kwargs[argument] = value
            continue
        given = client_kwargs.get("region_name", value)
        if given != value:
            raise InvalidArgumentError(f"storage options {key}={value!r} and client_kwargs['region_name']={given!r} "
                                       f"disagree (both set the S3 region); give one")
        client_kwargs["region_name"] = value


def _apply_switches(kwargs: dict[str, Any], switched: dict[str, tuple[str, bool]]) -> None:
    """Set each switched s3fs argument, refusing one the user also gave s3fs directly with the
    opposite value (anon=False with AWS_SKIP_SIGNATURE=true)."""
    for argument, (key, value) in switched.items():
        if argument in kwargs and _switch(argument, kwargs[argument]) != value:
            raise InvalidArgumentError(f"storage options {argument}={kwargs[argument]!r} and {key}={value} "
                                       f"contradict each other; give one")
        kwargs[argument] = value


def _addressing_style(name: str, key: str, value: Any) -> str | None:
    """The botocore addressing style ('path' or 'virtual') one addressing option asks for, or None
    for a "force" flag that is off (it asks for nothing)."""
    if name == _S3_ADDRESSING_STYLE_OPTION:
        style = value.strip().lower() if isinstance(value, str) else None
        if style not in _S3_ADDRESSING_STYLES:
            raise InvalidArgumentError(f"storage option {key}={value!r} must be "
                                       f"{' or '.join(repr(s) for s in _S3_ADDRESSING_STYLES)}")
        return style
    when_on, when_off = _S3_ADDRESSING_SWITCHES[name]
    return when_on if _switch(key, value) else when_off


def _apply_addressing_style(config_kwargs: dict[str, Any], styles: list[tuple[str, str]]) -> None:
    """Merge the asked-for addressing style into botocore's config (s3fs's config_kwargs), keeping
    the user's other settings; options that ask for different styles are refused."""
    if not styles:
        return
    s3_config = dict(config_kwargs.get("s3") or {})
    given = s3_config.get("addressing_style")
    asked = styles + ([("config_kwargs['s3']['addressing_style']", given)] if given is not None else [])
    if len({style for _, style in asked}) > 1:
        raise InvalidArgumentError("storage options ask for different S3 addressing styles ("
                                   + ", ".join(f"{key} means {style!r}" for key, style in asked) + "); give one")
    s3_config["addressing_style"] = styles[0][1]
    config_kwargs["s3"] = s3_config


def _accept_lock_option(name: str, key: str, value: Any) -> None:
    """delta-rs's DynamoDB lock options: accepted, not used. A locking provider other than
    'dynamodb' (delta-rs's only one) is refused rather than silently dropped. The lock itself is
    not taken, and a warning says so: a deltalake writer that commits through that lock renames
    its commit over N.json without a condition, so it can replace a commit deltatx made."""
    if name != _S3_LOCKING_PROVIDER_OPTION:
        return  # the lock table's name: nothing to check without the lock
    if not (isinstance(value, str) and value.strip().lower() == "dynamodb"):
        raise InvalidArgumentError(f"storage option {key}={value!r}: the only locking provider delta-rs knows is "
                                   f"'dynamodb'; deltatx needs none (it commits to S3 with a conditional PUT)")
    warnings.warn(f"storage option {key}={value!r} is ignored: deltatx commits to S3 with a conditional PUT "
                  f"and does not record its commits in the DynamoDB lock table. Concurrent writers are safe only "
                  f"if all of them commit with a conditional PUT (deltalake does with aws_conditional_put='etag' "
                  f"and no locking provider); a writer that commits through the DynamoDB lock can overwrite a "
                  f"deltatx commit.", UserWarning, stacklevel=4)


_TRUE_WORDS = ("1", "true", "yes", "on", "y")
_FALSE_WORDS = ("0", "false", "no", "off", "n")  # object_store's words, so its users' values parse


def _switch(name: str, value: Any) -> bool:
    """A storage option that switches something on or off. A word that is neither (say 'maybe')
    is refused: read as off, ``fsync=maybe`` would quietly give up durability."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    word = value.strip().lower() if isinstance(value, str) else None
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise InvalidArgumentError(f"storage option {name}={value!r} must be true or false "
                               f"({'/'.join(_TRUE_WORDS)} or {'/'.join(_FALSE_WORDS)})")


def open_store(uri: str, storage_options: dict[str, Any] | None = None) -> LogStore:
    """Pick the store for a URI: plain path / file://, memory://, s3:// or any fsspec scheme."""
    options = dict(storage_options or {})
    single_writer = _switch("single_writer", options.pop("single_writer", False))
    fsync = _switch("fsync", options.pop("fsync", True))
    uri = str(uri)
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower() if len(parsed.scheme) > 1 else ""  # 'C:' is a drive, not a scheme
    if scheme and (parsed.fragment or parsed.query or uri.endswith(("#", "?"))):
        # a URI's '#...' / '?...' is not part of the location: s3://b/t#1 and s3://b/t#2 would be
        # one table (Hadoop instead keeps '#' in the key, so Spark would see another folder)
        raise InvalidArgumentError(
            f"cannot open {uri!r}: '#' and '?' start a URI fragment or query, which names no location; "
            f"rename the table's folder" + (" (or give a local path without 'file://')" if scheme in ("file", "local")
                                            else ""))
    if scheme in ("", "file", "local"):
        path = parsed.path if scheme else uri
        return LocalLogStore(uri, path, fsync=fsync, single_writer=single_writer)
    if scheme == "memory":
        fs = fsspec.filesystem("memory")
        return MemoryLogStore(uri, fs, "/" + (parsed.netloc + parsed.path).strip("/"), single_writer=single_writer)
    if scheme in ("s3", "s3a"):
        from .s3_client import DeltaTxS3FileSystem

        fs = DeltaTxS3FileSystem(**_s3_kwargs(options))
        return S3LogStore(uri, fs, (parsed.netloc + parsed.path).rstrip("/"), single_writer=single_writer)
    try:
        fsspec.get_filesystem_class(scheme)  # known or registered (available_protocols misses the latter)
    except (ValueError, ImportError) as exc:
        raise InvalidArgumentError(
            f"cannot open {uri!r}: no storage backend knows the scheme {scheme + '://'!r} ({exc})") from None
    fs, root = fsspec.core.url_to_fs(uri, **options)
    return UnsafeLogStore(uri, fs, root, single_writer=single_writer)


def _strip_scheme(path: str) -> str:
    if "://" in path:
        parsed = urlparse(path)
        if parsed.scheme in ("file", "local"):
            return parsed.path
        return (parsed.netloc + parsed.path) if parsed.scheme in ("s3", "s3a") else "/" + (parsed.netloc + parsed.path).strip("/")
    return path


def _mtime_ms(info: dict[str, Any]) -> int:
    for key in ("mtime", "LastModified", "last_modified", "created"):
        v = info.get(key)
        if v is None:
            continue
        if hasattr(v, "timestamp"):
            return int(v.timestamp() * 1000)
        try:
            return int(float(v) * 1000)
        except (TypeError, ValueError):
            continue
    return 0
