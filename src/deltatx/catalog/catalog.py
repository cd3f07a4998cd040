"""``deltatx.Catalog(url)``: names → catalog-managed tables, and the commit coordinator for them.

::

    cat = deltatx.Catalog("sqlite:///warehouse/catalog.db")   # relative; sqlite:////abs/path.db, postgresql://...
    accounts = cat.create_table("accounts", "/warehouse/accounts", schema)
    with cat.transaction() as tx:                               # all tables or none
        tx.table("accounts").update(where="id = 1", set={"balance": "balance - 10"})
        tx.table("ledger").append(rows)

A catalog-managed table's commits are ratified by the catalog (``store.py``); path-only clients
are refused as PROTOCOL.md tells them to be, until :meth:`Catalog.release` turns it back into a
path table.
"""

from __future__ import annotations

import math
import os
import shutil
import threading
import time
import unicodedata
import uuid
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from ..errors import (ArgumentTypeError, CatalogError, CatalogMaintenanceError, CatalogManagedTableError,
                      CatalogTableExistsError, CatalogTableNotFoundError, ConcurrentModificationException,
                      InvalidArgumentError, InvalidTableNameError, TableAlreadyExistsError, TableNotFoundError)
from ..tables.table import Table, create_table
from ..txnlog.actions import Protocol, parse_commit
from ..txnlog.features import CATALOG_MANAGED, required_protocol
from ..txnlog.in_commit_timestamps import commit_file_time, is_enabled as ict_is_enabled
from ..txnlog.snapshot import Snapshot, load_snapshot
from ..txnlog.store import LogStore, PreparedCommit, open_store
from .db import Database, DuplicateRowError, Ratification, open_database
from . import rules
from .rules import CATALOG_ID, ICT_ENABLED, ICT_TIMESTAMP, ICT_VERSION, CatalogTableOwnedError, vouched
from .store import CatalogLogStore, next_ict, stamp_in_commit_timestamp

#: what create/register add to a table's configuration (features via delta.feature.*)
CATALOG_CONFIG = {f"delta.feature.{CATALOG_MANAGED}": "supported", ICT_ENABLED: "true"}


def _drop_unvouched_checkpoints(inner: LogStore, released: Snapshot) -> None:
    """After a release: the checkpoints the catalog ignored while it managed the table (written by
    a client that ignored the catalog, older than the published commit of their version:
    :func:`rules.vouched`) are deleted, once the released version (``released``, as the catalog
    read it) is checkpointed and ``_last_checkpoint`` points at it — in that order, so a path
    reader never finds a hint to a deleted checkpoint. Path readers trust every checkpoint: left
    in place, one of those would be read as the table. Best effort: the release has committed."""
    from ..txnlog.checkpoint import write_checkpoint

    try:
        listing = inner.list_log()
        kept = {f.name for f in vouched(listing)}
        stray = [f.name for f in listing if f.kind == "checkpoint" and f.name not in kept]
        if not stray:
            return
        write_checkpoint(inner, released)
        for name in stray:
            inner.delete_log_file(name)
    except Exception as exc:  # the release stands; the warning says what is left to do
        import warnings

        from ..errors import PostCommitHookWarning

        warnings.warn(f"the table at {inner.uri!r} is released, but the checkpoints its catalog had ignored could "
                      f"not all be replaced ({type(exc).__name__}: {exc}); path readers may use them: write a "
                      f"checkpoint (deltatx checkpoint URI), then delete the checkpoints older than their version's "
                      f"commit file in _delta_log", PostCommitHookWarning, stacklevel=3)


#: a version past any table's: a lease taken only for its lock reads no commits
_NO_VERSION = 2 ** 62

#: the longest table name (characters): a key people type, and what most catalogs allow
MAX_TABLE_NAME = 255
#: refused anywhere in a name: control characters (NUL, tab, newline, DEL, C1), line and
#: paragraph separators, unpaired surrogates (no UTF-8 form: neither database can store them)
_BAD_NAME_CATEGORIES = ("Cc", "Zl", "Zp", "Cs")


@dataclass(frozen=True)
class CatalogEntry:
    """One registered table."""

    name: str
    uri: str
    table_id: str


class Catalog:
    """A catalog of Delta tables whose commits it ratifies (see the module docstring)."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None):
        """``storage_options`` open the tables' files (``s3://`` endpoint and credentials, as for
        :class:`deltatx.Table`); they stay in this process, never in the catalog's database."""
        self.url = url
        self.storage_options = dict(storage_options or {})
        self._db: Database = open_database(url)
        #: inline commits this process published, by table: (store, versions). Their content
        #: leaves the catalog once their files are fsynced (close, or log cleanup)
        self._published: dict[str, tuple[CatalogLogStore, list[int]]] = {}
        self._published_lock = threading.Lock()

    @property
    def catalog_id(self) -> str:
        """This catalog's identity (kept in its database: the same under any URL of it), recorded
        in the table property ``deltatx.catalogId`` of every table it manages."""
        return self._db.catalog_id

    # ------------------------------------------------------------------ names
    def _entry(self, name: str) -> CatalogEntry:
        check_table_name(name)  # every public method that looks a name up comes here first
        rows = self._db.query("SELECT id, uri FROM deltatx_tables WHERE name = ?", (name,))
        if not rows:
            raise CatalogTableNotFoundError(f"no table named {name!r} in catalog {self.url!r}")
        return CatalogEntry(name, rows[0][1], rows[0][0])

    def _check_new(self, name: str, uri: str) -> None:
        check_table_name(name)
        rows = self._db.query("SELECT name, uri FROM deltatx_tables WHERE name = ? OR uri = ?", (name, uri))
        if rows:  # an unfinished release holds its name and path until someone looks: finish it
            rows = [(n, u) for n, u in rows if not self._finish_release(n)]
        for other, other_uri in rows:
            if other == name:
                raise CatalogTableExistsError(f"catalog {self.url!r} has a table named {name!r} already ({other_uri})")
            raise CatalogTableExistsError(f"the table at {uri!r} is registered already as {other!r}")

    def list_tables(self) -> list[str]:
        """Names of the registered tables, sorted."""
        return [r[0] for r in self._db.query("SELECT name FROM deltatx_tables ORDER BY name")]

    def entries(self) -> list[CatalogEntry]:
        return [CatalogEntry(n, u, i) for n, u, i in self._db.query("SELECT name, uri, id FROM deltatx_tables ORDER BY name")]

    def store(self, name: str) -> CatalogLogStore:
        """The commit path of table ``name`` (its log ratified by this catalog)."""
        entry = self._entry(name)
        return CatalogLogStore(self, entry.table_id, self._open(entry.uri))

    def _open(self, uri: str) -> LogStore:
        """The path store of a table's files, with this catalog's storage options."""
        return open_store(uri, self.storage_options or None)

    # ------------------------------------------------------------------ tables
    def table(self, name: str, version: int | None = None, timestamp: Any = None) -> Table:
        """The table ``name`` (latest ratified version, or ``version``, or the latest version
        committed at or before ``timestamp``); its commits go through the catalog.

        ``timestamp`` takes what :class:`~deltatx.Table`'s does (a datetime, ISO text, epoch
        milliseconds) and is compared with the versions' in-commit timestamps: on a
        catalog-managed table they are the commit times (a published file's modification time is
        its publication's). A pinned handle (``version`` or ``timestamp``) is read-only.
        Only the latest-version handle may run maintenance (VACUUM, OPTIMIZE), and only while the
        catalog's policy allows it (:mod:`deltatx.catalog.maintenance`)."""
        store = self.store(name)
        pinned = version is not None or timestamp is not None
        store.maintenance = not pinned
        table = Table(store.inner.uri, version=version, timestamp=timestamp, _store=store)  # type: ignore[arg-type]
        if not pinned and _released(table):
            # a release whose last step (forgetting the name) did not run: it is a path table
            # now, and the catalog must never ratify another version of it
            self._forget(CatalogEntry(name, store.inner.uri, store.table_id))
            raise CatalogTableNotFoundError(
                f"table {name!r} was released from catalog {self.url!r} at version {table.version}: it is a "
                f"path table now, open it with deltatx.Table({store.inner.uri!r})")
        return table

    def create_table(self, name: str, uri: str, schema: pa.Schema, partition_by: list[str] | str | None = None,
                     properties: dict[str, Any] | None = None, **kwargs: Any) -> Table:
        """Create an empty catalog-managed table: version 0 is ratified together with the name."""
        check_table_name(name)  # first: a bad name fails alone, before its location is looked at
        uri = _normal_uri(uri)
        self._check_new(name, uri)
        table_id = str(uuid.uuid4())
        rules.refuse_unmanaged_properties(properties or {}, self.catalog_id, name)
        store = _CreatingStore(self, table_id, self._open(uri), name)
        config = {**(properties or {}), **CATALOG_CONFIG, CATALOG_ID: self.catalog_id}
        try:
            create_table(uri, schema, partition_by=partition_by, properties=config, _store=store,  # type: ignore[arg-type]
                         **kwargs)
        except TableAlreadyExistsError:
            # a concurrent create of this path (under any name) ratified and published version 0
            # after this one's check: the loser gets what a later create gets, naming the winner
            self._check_new(name, uri)
            raise
        return self.table(name)

    def register(self, name: str, uri: str) -> Table:
        """Adopt the path table at ``uri``: one path commit adds ``catalogManaged`` (with the
        in-commit timestamps and vacuumProtocolCheck it requires) and this catalog's identity
        (``deltatx.catalogId``), then the catalog records it.

        A crash between the two leaves a table that path clients refuse; registering it again
        adopts it without another commit. A table another catalog manages (another identity,
        or none: managed by a catalog that did not say which) is refused with
        :class:`CatalogTableOwnedError`: two catalogs would each ratify their own version N.

        Of concurrent registrations of one path exactly one wins; the others raise what a later
        registration raises (:class:`CatalogTableExistsError`, naming the winner), whichever
        step they lost at."""
        check_table_name(name)
        uri = _normal_uri(uri)
        self._check_new(name, uri)
        inner = self._open(uri)
        snapshot = load_snapshot(inner)
        for _ in range(REGISTER_ATTEMPTS):
            if CATALOG_MANAGED in (snapshot.protocol.writer_features or ()):
                break
            try:
                self._commit_registration(inner, snapshot)
            except (ConcurrentModificationException, CatalogManagedTableError):
                # changed meanwhile; CatalogManagedTableError: a winner's commit made it catalog-managed
                # (registered meanwhile). By whom, and so which error this caller gets (the one a
                # later registration gets): the checks below say. A winner that left it a path
                # table (another job's property change) only makes this registration try again
                pass
            snapshot = snapshot.refresh(inner)
        owner = snapshot.metadata.configuration.get(CATALOG_ID)
        if CATALOG_MANAGED not in (snapshot.protocol.writer_features or ()) or owner != self.catalog_id:
            raise CatalogTableOwnedError(
                f"the table at {uri!r} is catalog-managed by "
                f"{'catalog ' + repr(owner) if owner else 'a catalog that does not record its identity'}, not by "
                f"{self.url!r} (catalog {self.catalog_id!r}); release it from that catalog first (cat.release(name)) "
                f"and register the path table here")
        last = parse_commit(inner.read_commit(snapshot.version), snapshot.version)
        ict = int(last.commit_info.get("inCommitTimestamp") or next_ict(None))
        table_id = str(uuid.uuid4())
        row = Ratification(table_id, snapshot.version, None, last.txn_id or str(uuid.uuid4()), ict)
        try:  # ratified in place: the version is in _delta_log already, as published as it gets
            self._db.ratify([row], row.txn_id, int(time.time() * 1000),
                            extra=lambda cur: _insert_table(cur, table_id, name, uri, snapshot.version))
        except DuplicateRowError:  # the name or the path was taken meanwhile (UNIQUE)
            self._check_new(name, uri)
            raise CatalogTableExistsError(f"the table at {uri!r} or the name {name!r} was registered meanwhile") from None
        return self.table(name)

    def _commit_registration(self, inner: LogStore, snapshot: Snapshot) -> None:
        version = snapshot.version + 1
        config = {**snapshot.metadata.configuration, CATALOG_ID: self.catalog_id}
        if ict_is_enabled(snapshot.metadata.configuration):
            # on already (the enablement recorded, or there from version 0): the timestamps go on
            # increasing from the last one, and the enablement stays where it was
            ict = next_ict(snapshot.timestamp_ms)
        else:
            # PROTOCOL.md's enabling commit: later than the previous commit file's time, and the
            # enablement recorded (the table has commits from before)
            ict = next_ict(commit_file_time(inner, snapshot.version))
            config.update({ICT_ENABLED: "true", ICT_VERSION: str(version), ICT_TIMESTAMP: str(ict)})
        protocol = required_protocol({**config, **CATALOG_CONFIG}, snapshot.schema, current=snapshot.protocol)
        table = Table(inner.uri, _store=_StampingStore(inner, ict), _snapshot=snapshot)  # type: ignore[arg-type]
        tx = table.transaction()
        tx.stage_protocol(protocol)
        tx.stage_metadata(replace(snapshot.metadata, configuration=config))
        tx.note_operation("SET TBLPROPERTIES", {"properties": {f"delta.feature.{CATALOG_MANAGED}": "supported",
                                                               ICT_ENABLED: "true", CATALOG_ID: self.catalog_id}},
                          changes_data=False)
        tx.commit()

    def release(self, name: str) -> Table:
        """Turn ``name`` back into a path table: a last catalog commit drops ``catalogManaged``
        (and disables in-commit timestamps), then the name is forgotten. Its history stays
        readable by path (``deltatx.Table(uri, version=...)``, RESTORE), catalog era included."""
        entry = self._release(name)
        return Table(entry.uri, storage_options=self.storage_options or None)

    def _release(self, name: str) -> CatalogEntry:
        """:meth:`release` without opening the path table after it; returns the entry released."""
        entry = self._entry(name)
        if self._finish_release(name):  # a release that died before forgetting the name
            return entry
        table = self.table(name)
        snap = table.snapshot
        tx = table.transaction()
        p = snap.protocol
        # the features catalogManaged brought; deltalake 1.x refuses to read vacuumProtocolCheck and to
        # write inCommitTimestamp tables, so a released table is a plain path table again
        dropped = (CATALOG_MANAGED, "vacuumProtocolCheck", "inCommitTimestamp")  # ICT is disabled below
        tx.stage_protocol(Protocol(p.min_reader_version, p.min_writer_version,
                                   tuple(f for f in (p.reader_features or ()) if f not in dropped),
                                   tuple(f for f in (p.writer_features or ()) if f not in dropped)))
        config = {k: v for k, v in snap.metadata.configuration.items()
                  if k not in (ICT_VERSION, ICT_TIMESTAMP, CATALOG_ID)}
        config[ICT_ENABLED] = "false"
        tx.stage_metadata(replace(snap.metadata, configuration=config))
        tx.note_operation("RELEASE FROM CATALOG", {}, changes_data=False)
        tx.commit()
        _drop_unvouched_checkpoints(self._open(entry.uri), table.snapshot)
        self._forget(entry)
        return entry

    def drop_table(self, name: str, purge: bool = False) -> None:
        """Forget ``name``. Without ``purge`` the files stay, as a plain path table: the table is
        released first (:meth:`release`: every ratified commit published, then a last commit
        that drops ``catalogManaged``, the in-commit timestamps it required and
        ``deltatx.catalogId``), so ``deltatx.Table(uri)``, deltalake and other engines read and
        write it, and any catalog may register it again — as dropping an external table in Unity
        Catalog removes only its entry and leaves usable data. Left catalog-managed, the files
        would be refused by every path client and every other catalog, with no name left to
        release them by. A table whose files are gone, or that another name of this catalog
        manages too (a catalog from before a path had one name), is only forgotten. With
        ``purge`` the files are deleted (nothing is committed to them first).

        A drop or release another client finished meanwhile is no error."""
        entry = self._entry(name)
        if not purge:
            shared = self._db.query("SELECT name FROM deltatx_tables WHERE uri = ? AND id <> ?",
                                    (entry.uri, entry.table_id))
            if shared or not self._open(entry.uri).table_exists():
                # the files are gone: nothing to release, nothing to publish. Or another name
                # manages them still (a catalog from before one path had one name, schema 4):
                # released, they would be taken from under it
                self._forget(entry)
                return
            try:
                self._release(name)
            except CatalogTableNotFoundError:
                # the release lost to another client's drop or release of this table: done if it
                # is gone from the catalog, or finished here if that release did not get to it
                rows = self._db.query("SELECT name FROM deltatx_tables WHERE id = ?", (entry.table_id,))
                if rows and not self._finish_release(rows[0][0]):
                    raise
            return
        self._forget(entry, publish=False)
        path = self._open(entry.uri)
        if os.path.isdir(path.root):
            shutil.rmtree(path.root, ignore_errors=True)
        else:
            try:
                path.fs.rm(path.root, recursive=True)
            except FileNotFoundError:
                pass  # purged meanwhile by another client dropping the same table

    def _forget(self, entry: CatalogEntry, publish: bool = True) -> None:
        """Delete the name and its ratified commits, once every one of them is in ``_delta_log``
        for good: the catalog is the only copy of a ratified commit not yet published (a
        committer that died after ratifying), and of the bytes of an inline commit whose
        published file was never fsynced. Forgetting those would take back committed versions.
        Not ``publish``: the files are about to go (drop with purge), or are gone already."""
        store = CatalogLogStore(self, entry.table_id, self._open(entry.uri))
        publish = publish and store.inner.table_exists()
        while True:
            latest = store.publish_pending() if publish else -1
            if publish:
                store.drop_published_content()  # fsyncs what is published, on local disk

            def forget(cur: Any) -> bool:
                """False when a commit landed while publishing (publish it too, then forget).
                The table's row lock comes first either way, as in every write that changes a
                table's rows: two clients forgetting the same released table (the release, a
                writer that found it released) queue instead of deadlocking (db.lock_tables).
                One transaction, run again by the catalog if the database rolls it back."""
                if publish:  # under the commit lock (the leases' own read): nobody ratified meanwhile
                    found = self._db._read_for_commit(cur, {entry.table_id: max(latest, 0)}, content=False)
                    moved = found.get(entry.table_id, [])
                    if moved and moved[-1].version != latest:
                        return False
                    through = cur.execute("SELECT published_through FROM deltatx_tables WHERE id = ?",
                                          (entry.table_id,)).fetchall()
                    if not through:
                        return True  # another client finished this drop or release meanwhile: forgotten
                    if latest >= 0 and through[0][0] < latest:
                        # the catalog could not verify some ratified version in _delta_log: its
                        # rows are the only copy of a committed version
                        raise CatalogError(
                            f"table {entry.name!r}: version {through[0][0] + 1} is ratified but "
                            f"could not be published to {entry.uri!r}; the catalog keeps it (nothing was dropped)")
                else:
                    self._db.lock_tables(cur, [entry.table_id])
                cur.execute("DELETE FROM deltatx_commits WHERE table_id = ?", (entry.table_id,))
                cur.execute("DELETE FROM deltatx_tables WHERE id = ?", (entry.table_id,))
                return True

            if self._db.transact(forget):
                return

    def _finish_release(self, name: str) -> bool:
        """True (and the name forgotten) when ``name`` is a release that did not finish."""
        try:
            entry = self._entry(name)
            table = Table(entry.uri, _store=CatalogLogStore(self, entry.table_id, self._open(entry.uri)))  # type: ignore[arg-type]
        except Exception:
            return False  # not a table we can read: not ours to forget
        if not _released(table):
            return False
        self._forget(entry)
        return True

    # ------------------------------------------------------------------ many tables
    def transaction(self, *, max_attempts: int | None = None) -> "CatalogTransaction":
        """A transaction over any number of this catalog's tables: all commit or none."""
        from .transaction import CatalogTransaction

        return CatalogTransaction(self, **({"max_attempts": max_attempts} if max_attempts is not None else {}))

    def cut(self) -> dict[str, tuple[CatalogEntry, int]]:
        """Latest ratified version of every table, read in ONE database query (one consistent cut)."""
        rows = self._db.query(
            "SELECT t.name, t.uri, t.id, (SELECT MAX(c.version) FROM deltatx_commits c WHERE c.table_id = t.id) "
            "FROM deltatx_tables t")
        return {n: (CatalogEntry(n, u, i), int(v)) for n, u, i, v in rows if v is not None}

    def snapshot(self) -> "CatalogSnapshot":
        """Every table as of one instant of the catalog: no multi-table transaction half seen."""
        return CatalogSnapshot(self, self.cut())

    # ------------------------------------------------------------------ maintenance
    def set_maintenance(self, name: str, allowed: bool) -> None:
        """Allow or refuse maintenance (VACUUM, OPTIMIZE, staged-commit cleanup) of ``name``."""
        from .maintenance import ALLOWED, REFUSED

        entry = self._entry(name)
        with self._db.write() as cur:
            cur.execute("UPDATE deltatx_tables SET maintenance = ? WHERE id = ?",
                        (ALLOWED if allowed else REFUSED, entry.table_id))

    def maintenance_allowed(self, name: str) -> bool:
        """The catalog's maintenance policy of ``name``."""
        from .maintenance import ALLOWED

        entry = self._entry(name)
        rows = self._db.query("SELECT maintenance FROM deltatx_tables WHERE id = ?", (entry.table_id,))
        return bool(rows) and rows[0][0] == ALLOWED

    def _check_maintenance_policy(self, table_id: str, operation: str) -> None:
        from .maintenance import ALLOWED, refuse_policy

        rows = self._db.query("SELECT name, maintenance FROM deltatx_tables WHERE id = ?", (table_id,))
        if not rows:  # released or dropped since this handle was opened: no policy to name
            raise CatalogMaintenanceError(
                f"{operation}: the table is no longer in catalog {self.url!r} (dropped, or released to a path "
                f"table?): nothing was done; open it again by its path or its new name")
        if rows[0][1] != ALLOWED:
            raise refuse_policy(operation, rows[0][0], self.url)

    def vacuum_staged(self, name: str, retention_hours: float = 1.0) -> list[str]:
        """Delete staged commits that were never ratified (dead transactions, whatever version they
        tried) once older than ``retention_hours`` (a live transaction may be between staging and
        ratifying), and the ratified staged commits of published versions at any age
        (``_delta_log/<v>.json`` is that commit now, as PROTOCOL.md's metadata cleanup has it;
        never one of a ratified version not verified published, the only copy of it); drop from
        the catalog the content of inline commits
        that are published (a committer usually does at its next commit; a process that exited
        first leaves it to this). Returns the names of the staged files deleted. Log cleanup:
        runs only where the catalog's maintenance policy allows it."""
        try:
            hours = float(retention_hours)
        except (TypeError, ValueError):
            hours = math.nan
        if isinstance(retention_hours, bool) or not (math.isfinite(hours) and hours >= 0):
            raise InvalidArgumentError(f"retention_hours must be a finite number of hours >= 0, got {retention_hours!r}")
        store = self.store(name)
        store.maintenance = True  # the catalog's own route; the policy still decides
        store.check_maintenance("STAGED COMMIT CLEANUP")
        horizon = int(time.time() * 1000 - hours * 3600 * 1000)
        # Under the table's commit lock: a committer stages its file and ratifies it inside one
        # hold of the lock, so a staged file that is not ratified while we hold it is a dead
        # transaction's — never one between staging and ratifying (deleting that one ratified a
        # commit whose bytes were gone: a table no one could read, half a multi-table commit).
        lease = self._db.lease({store.table_id: _NO_VERSION}, content=False)
        try:
            ratified = {r[0] for r in self._db.query(
                "SELECT staged_name FROM deltatx_commits WHERE table_id = ? AND staged_name IS NOT NULL",
                (store.table_id,))}
            dead = [n for n, mtime in store.list_staged() if n not in ratified and mtime <= horizon]
            for n in dead:
                store.discard_staged(n)
        finally:
            lease.release()
        store.publish_pending()  # a ratified version a dead committer left unpublished: published first
        published = store.delete_published_staged()
        store.drop_published_content()  # inline commits already in _delta_log: the catalog's copy goes
        return sorted(dead + published)

    def _published_here(self, store: CatalogLogStore, version: int) -> None:
        with self._published_lock:
            self._published.setdefault(store.table_id, (store, []))[1].append(version)

    def _drop_published_content(self) -> None:
        """Make what this process published durable, then drop those bytes from the catalog."""
        with self._published_lock:
            published, self._published = self._published, {}
        for table_id, (store, versions) in published.items():
            store.drop_published_content(only=set(versions))  # verified, compared, fsynced first

    def close(self) -> None:
        """Close the connection, after letting the catalog forget the bytes of the inline
        commits this process published (best effort: log cleanup drops what is left)."""
        try:
            self._drop_published_content()
        except Exception:
            pass  # nothing is lost: the bytes stay in the catalog until vacuum_staged
        self._db.close()

    def __enter__(self) -> "Catalog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"deltatx.Catalog({self.url!r})"


class CatalogSnapshot:
    """All tables of a catalog at one cut: ``snap.table(name).to_arrow()``."""

    def __init__(self, catalog: Catalog, cut: dict[str, tuple[CatalogEntry, int]]):
        self.catalog = catalog
        self.versions = {name: v for name, (_, v) in cut.items()}
        self._cut = cut

    def table(self, name: str) -> Table:
        check_table_name(name)
        if name not in self._cut:
            raise CatalogTableNotFoundError(f"no table named {name!r} in this snapshot of {self.catalog.url!r}")
        entry, version = self._cut[name]
        if self.catalog._db.publish_state(entry.table_id) is None:
            # released (or dropped) since the cut: its whole history is a path table's now, every
            # version of the cut published before the release commit
            try:
                return Table(entry.uri, version=version, storage_options=self.catalog.storage_options or None)
            except TableNotFoundError:
                raise CatalogTableNotFoundError(
                    f"table {name!r} was dropped from {self.catalog.url!r} with its files since this snapshot: "
                    f"version {version} is gone") from None
        store = CatalogLogStore(self.catalog, entry.table_id, self.catalog._open(entry.uri))
        return Table(entry.uri, version=version, _store=store)  # type: ignore[arg-type]


#: registration commits tried against path writers that keep changing the table's metadata
REGISTER_ATTEMPTS = 5


def check_table_name(name: object) -> str:
    """``name`` if it can name a catalog table, else :class:`ArgumentTypeError` (not a ``str``) or
    :class:`InvalidTableNameError` (empty, whitespace around it, a control character, a line
    break, an unpaired surrogate, over :data:`MAX_TABLE_NAME` characters).

    Why here and not in the database: the backends disagree (SQLite stores a NUL, PostgreSQL
    raises its own DataError), and a name that is no table's must not read as "not found".
    A name is only a key of ``deltatx_tables`` — never joined into a path (a table's location
    is its own argument) — so ``/``, ``..``, dots and inner spaces are allowed: ``sales/2024``
    and ``a b`` are just names. Whitespace *around* a name is refused because it is invisible
    in messages and listings: ``"t "`` and ``"t"`` would be two tables no one can tell apart."""
    if not isinstance(name, str):
        raise ArgumentTypeError(f"a catalog table name must be a str, got {type(name).__name__} {name!r}")
    if not name:
        raise InvalidTableNameError("a catalog table name must not be empty")
    if len(name) > MAX_TABLE_NAME:
        raise InvalidTableNameError(f"a catalog table name has at most {MAX_TABLE_NAME} characters, got "
                                    f"{len(name)} ({name[:40]!r}...)")
    bad = next((c for c in name if unicodedata.category(c) in _BAD_NAME_CATEGORIES), None)
    if bad is not None:
        raise InvalidTableNameError(f"a catalog table name must not contain control characters, line breaks "
                                    f"or unpaired surrogates: {name!r} has {bad!r}")
    if name != name.strip():
        raise InvalidTableNameError(f"a catalog table name must not start or end with whitespace, got {name!r}")
    return name


def _released(table: Table) -> bool:
    """Is the catalog's latest version of ``table`` a release (``catalogManaged`` dropped)?"""
    return CATALOG_MANAGED not in (table.snapshot.protocol.writer_features or ())


def _insert_table(cur: Any, table_id: str, name: str, uri: str, published_through: int = -1) -> None:
    cur.execute("INSERT INTO deltatx_tables (id, name, uri, created_ms, published_through) VALUES (?, ?, ?, ?, ?)",
                (table_id, name, uri, int(time.time() * 1000), published_through))


def _normal_uri(uri: str) -> str:
    """The one spelling of a table's location the catalog compares and stores: a local path (or
    ``file:`` URL) resolved to its real path — symlinks, ``..``, ``file://`` — so that one
    directory cannot be registered twice under two spellings; other URLs without trailing
    slashes."""
    from urllib.parse import unquote, urlparse

    if not isinstance(uri, (str, os.PathLike)):
        raise ArgumentTypeError(f"a table location must be a path or URL string, got {uri!r}")
    uri = os.fspath(uri)
    if "://" not in uri and not uri.startswith("file:"):
        return os.path.realpath(os.path.abspath(uri))
    parsed = urlparse(uri)
    if parsed.scheme.lower() == "file" and parsed.netloc in ("", "localhost"):
        return os.path.realpath(unquote(parsed.path) or "/")
    return uri.rstrip("/") if len(uri.rstrip("/")) > len(parsed.scheme) + 3 else uri


class _CreatingStore(CatalogLogStore):
    """Version 0 of a new table: ratified in the same database transaction that names it."""

    def __init__(self, catalog: Catalog, table_id: str, inner: LogStore, name: str):
        super().__init__(catalog, table_id, inner)
        self.name = name

    def table_exists(self) -> bool:
        return self.inner.table_exists()

    def put_commit(self, version: int, data: bytes) -> None:
        self.check_commit(data)
        row = self.ratification(version, data, None)
        try:
            self.catalog._db.ratify([row], row.txn_id, int(time.time() * 1000),
                                    extra=lambda cur: _insert_table(cur, self.table_id, self.name, self.inner.uri))
        except DuplicateRowError:  # a new table id: only the name or the path can be taken (UNIQUE)
            if row.staged_name is not None:
                self.discard_staged(row.staged_name)
            self.catalog._check_new(self.name, self.inner.uri)
            raise CatalogTableExistsError(f"the name {self.name!r} or the path {self.inner.uri!r} was registered "
                                          f"meanwhile in catalog {self.catalog.url!r}; nothing was created") from None
        self.publish_pending()


class _StampingStore:
    """A path store whose commits carry one given in-commit timestamp (the registration commit
    enables in-commit timestamps, so it is the first that must have one)."""

    #: the in-commit timestamps are this store's to stamp (Transaction leaves them alone)
    stamps_in_commit_timestamps = True

    def __init__(self, inner: LogStore, ict: int):
        self.inner, self.ict = inner, ict

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def prepare_commit(self, data: bytes, **hints: bool) -> PreparedCommit:
        return self.inner.prepare_commit(stamp_in_commit_timestamp(data, self.ict)[0], **hints)
