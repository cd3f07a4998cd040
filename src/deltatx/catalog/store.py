"""The log store of a catalog-managed table: the put-if-absent moves into the catalog's database.

A commit to version N (PROTOCOL.md, ``catalogManaged``):

1. **stage**: the commit bytes, stamped with their in-commit timestamp, are written to
   ``_delta_log/_staged_commits/<N>.<uuid>.json`` — invisible to every reader;
2. **ratify**: the catalog inserts the unique row (table id, N) — losing that insert is losing
   the race, exactly like ``os.link`` failing on a path table;
3. **publish**: the staged file is linked/copied to ``_delta_log/<N>.json``, strictly in version
   order, by the writer right after — or by any reader or writer that finds a ratified version
   unpublished (a crash between 2 and 3 loses nothing).

Readers ask the catalog for the latest ratified version and ignore log files beyond it. Everything
that is not the log (data files, filesystems) is the wrapped path store's, by delegation.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import TYPE_CHECKING, Any

import orjson

from .. import phases
from ..txnlog.store import LOG_DIR, LocalLogStore, LogFile, LogStore, PreparedCommit, VersionExistsError, commit_name
from .db import DuplicateRowError, Ratification

if TYPE_CHECKING:
    from .catalog import Catalog

STAGED_DIR = "_staged_commits"


def stamp_in_commit_timestamp(data: bytes, ict: int) -> tuple[bytes, str | None]:
    """Put ``inCommitTimestamp`` into the commit's first action (commitInfo must come first);
    returns the new bytes and the commit's txnId."""
    first, _, rest = data.partition(b"\n")
    info = orjson.loads(first)
    commit_info = info.get("commitInfo")
    if commit_info is None:
        raise ValueError("a catalog-managed commit must start with commitInfo")
    commit_info["inCommitTimestamp"] = ict
    return orjson.dumps({"commitInfo": commit_info}) + b"\n" + rest, commit_info.get("txnId")


def next_ict(previous_ict: int | None) -> int:
    """PROTOCOL.md inCommitTimestamp: max(now, previous + 1), so timestamps strictly increase."""
    now = int(time.time() * 1000)
    return now if previous_ict is None else max(now, previous_ict + 1)


class CatalogLogStore:
    """A :class:`LogStore` look-alike whose commits are ratified by the catalog.

    Delegates everything but the log's commit operations to ``inner`` (the table's path store).
    """

    #: the in-commit timestamps are this store's to stamp (Transaction leaves them alone)
    stamps_in_commit_timestamps = True

    catalog_managed = True

    def __init__(self, catalog: "Catalog", table_id: str, inner: LogStore, *, maintenance: bool = False):
        self.catalog = catalog
        self.table_id = table_id
        self.inner = inner
        self.staged_root = f"{inner.log_root}/{STAGED_DIR}"
        #: the maintenance route: True only for the handle of ``cat.table(name)`` (catalog/maintenance.py)
        self.maintenance = maintenance

    def check_maintenance(self, operation: str) -> None:
        """Raise CatalogMaintenanceError unless this route AND the catalog's policy allow ``operation``."""
        from .maintenance import refuse_route

        if not self.maintenance:
            raise refuse_route(operation, self.inner.uri)
        self.catalog._check_maintenance_policy(self.table_id, operation)

    def __getattr__(self, name: str) -> Any:  # data files, fs, roots... are the path store's
        return getattr(self.inner, name)

    # ---- reading the log --------------------------------------------------------------------
    def latest_ratified(self) -> int:
        latest = self.catalog._db.latest(self.table_id)
        return -1 if latest is None else latest[0]

    def publish_pending(self) -> int:
        """Publish every ratified, unpublished version, oldest first; returns the latest ratified.

        Usually one indexed query and one stat: the newest ratified version is published already.
        """
        latest = self.latest_ratified()
        if latest < 0 or self._published(latest):
            return latest
        for version, staged in self.catalog._db.ratified_after(self.table_id, self._last_published(latest)):
            self.publish(version, staged)
        return latest

    def _published(self, version: int) -> bool:
        return self.inner.fs.exists(f"{self.inner.log_root}/{commit_name(version)}") if not isinstance(
            self.inner, LocalLogStore) else os.path.exists(os.path.join(self.inner.log_root, commit_name(version)))

    def _last_published(self, latest: int) -> int:
        version = latest
        while version >= 0 and not self._published(version):
            version -= 1
        return version

    def publish(self, version: int, staged_name: str | None) -> None:
        """Copy a ratified staged commit to ``_delta_log/<version>.json`` (idempotent)."""
        if staged_name is None:
            return  # ratified in place (the registration commit)
        staged = f"{self.staged_root}/{staged_name}"
        if isinstance(self.inner, LocalLogStore):
            try:
                os.link(staged, os.path.join(self.inner.log_root, commit_name(version)))
            except FileExistsError:
                pass  # another publisher was first: same ratified bytes
        else:
            try:
                self.inner.put_commit(version, self.inner.fs.cat_file(staged))
            except VersionExistsError:
                pass

    def list_log(self, start_version: int = 0) -> list[LogFile]:
        latest = self.publish_pending()
        return [f for f in self.inner.list_log(start_version) if f.version <= latest]

    def read_commit(self, version: int) -> bytes:
        try:
            return self.inner.read_commit(version)
        except FileNotFoundError:
            if self.publish_pending() < version:
                raise
            return self.inner.read_commit(version)

    def read_log_file(self, name: str) -> bytes:
        return self.inner.read_log_file(name)

    def table_exists(self) -> bool:
        return self.latest_ratified() >= 0

    # ---- committing -------------------------------------------------------------------------
    def put_commit(self, version: int, data: bytes) -> None:
        with self.prepare_commit(data) as prepared:
            prepared.put(version)

    def prepare_commit(self, data: bytes) -> "CatalogPreparedCommit":
        return CatalogPreparedCommit(self, data)

    def stage(self, version: int, data: bytes) -> tuple[str, bytes, int, str | None]:
        """Stamp and write a staged commit for ``version``: (staged name, bytes, ict, txnId)."""
        latest = self.catalog._db.latest(self.table_id)
        if latest is not None and latest[0] >= version:
            raise VersionExistsError(version)  # lost already: spare the write
        ict = next_ict(latest[1] if latest is not None else None)
        stamped, txn_id = stamp_in_commit_timestamp(data, ict)
        name = f"{version:020d}.{uuid.uuid4()}.json"
        self._write_staged(name, stamped)
        phases.reached("staged", version=version, table=self.inner.uri, txn_id=txn_id)
        return name, stamped, ict, txn_id

    def _write_staged(self, name: str, data: bytes) -> None:
        if isinstance(self.inner, LocalLogStore):
            os.makedirs(self.staged_root, exist_ok=True)
            path = os.path.join(self.staged_root, name)
            with open(path, "wb") as fh:
                fh.write(data)
                if self.inner.fsync:
                    fh.flush()
                    os.fsync(fh.fileno())
        else:
            self.inner.fs.makedirs(self.staged_root, exist_ok=True)
            self.inner.fs.pipe_file(f"{self.staged_root}/{name}", data)

    def discard_staged(self, name: str) -> None:
        """Delete a staged commit that lost (never ratified: nobody will ever read it)."""
        try:
            self.inner.fs.rm_file(f"{self.staged_root}/{name}") if not isinstance(self.inner, LocalLogStore) \
                else os.unlink(os.path.join(self.staged_root, name))
        except FileNotFoundError:
            pass

    def list_staged(self) -> list[tuple[str, int]]:
        """(name, mtime ms) of every staged commit file."""
        try:
            infos = self.inner.fs.ls(self.staged_root, detail=True)
        except FileNotFoundError:
            return []
        from ..txnlog.store import _mtime_ms

        return [(i["name"].rstrip("/").rsplit("/", 1)[-1], _mtime_ms(i)) for i in infos]

    def __repr__(self) -> str:
        return f"CatalogLogStore({self.inner.uri!r}, table_id={self.table_id!r})"


class CatalogPreparedCommit(PreparedCommit):
    """Commit bytes offered at successive versions: each try stages, ratifies, then publishes."""

    store: CatalogLogStore

    def put(self, version: int) -> None:
        store = self.store
        name, _, ict, txn_id = store.stage(version, self.data)
        row = Ratification(store.table_id, version, name, txn_id or str(uuid.uuid4()), ict)
        try:
            store.catalog._db.ratify([row], txn_id or row.txn_id, int(time.time() * 1000))
        except DuplicateRowError:
            store.discard_staged(name)
            raise VersionExistsError(version) from None
        phases.reached("ratified", version=version, table=store.inner.uri, txn_id=txn_id)
        store.publish_pending()


__all__ = ["CatalogLogStore", "CatalogPreparedCommit", "STAGED_DIR", "LOG_DIR", "stamp_in_commit_timestamp"]
