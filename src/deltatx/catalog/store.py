"""The log store of a catalog-managed table: the put-if-absent moves into the catalog's database.

A commit to version N (PROTOCOL.md, ``catalogManaged``, commit protocol):

1. **lock**: the committer takes the table's commit lock in the catalog (:class:`CommitLease`)
   and reads what was ratified since its snapshot — content included. If the table moved, the
   Transaction checks and rebases against those winners *under the lock* (the pure conflict
   checker, as ever), so its next offer cannot lose: writers queue instead of racing, and a loser
   never writes a commit it then throws away;
2. **stage**: the commit bytes, stamped with their in-commit timestamp, are stored in the
   ratifying row itself — an *inline* commit (option 2 of the protocol) — or, above
   :data:`INLINE_COMMIT_MAX_BYTES`, written to ``_delta_log/_staged_commits/<N>.<uuid>.json``
   (option 1; the version in a staged name is authoritative, so it is written once the lock has
   fixed N). Either is invisible to every reader;
3. **ratify**: the catalog inserts the unique row (table id, N) and commits, releasing the lock;
4. **publish**: the ratified bytes are put-if-absent to ``_delta_log/<N>.json``, strictly in
   version order, by the committer right after — or by any reader or writer that finds a
   ratified version the catalog has not verified in ``_delta_log`` (a crash between 3 and 4
   loses nothing). A file found there already is compared with the ratified bytes and replaced
   when it differs (a client that ignored the catalog put it). The catalog records how far the
   log holds its ratified bytes (``published_through``, moved by whoever verified), and drops
   its copy of an inline commit only below that mark, after comparing the file once more.

Readers ask the catalog for the latest ratified version and ignore log files beyond it, and
checkpoints the catalog cannot vouch for (:func:`~deltatx.catalog.rules.vouched`). Everything
that is not the log (data files, filesystems) is the wrapped path store's, by delegation.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable

import orjson

from .. import phases
from ..errors import CatalogError, CatalogLogAheadError, CatalogTableNotFoundError, CorruptLogError
from ..txnlog.store import (LOG_DIR, LocalLogStore, LogFile, LogStore, PreparedCommit, VersionExistsError, commit_name,
                            fsync_path, write_new_file)
from . import rules
from .db import CommitLease, DuplicateRowError, Ratification, RatifiedCommit

if TYPE_CHECKING:
    from .catalog import Catalog

STAGED_DIR = "_staged_commits"
#: commits up to this size are stored in the catalog (inline); bigger ones in a staged file
INLINE_COMMIT_MAX_BYTES = 1 << 20
#: offers of one commit that release the commit lock when they lose (CatalogPreparedCommit)
OPTIMISTIC_OFFERS = 2


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


def ict_offset(stamped: bytes, ict: int) -> int | None:
    """Where the digits of ``ict`` stand in ``stamped`` (a database that finds a later timestamp
    ratified meanwhile rewrites them in place: same number of digits, valid JSON)."""
    marker = b'"inCommitTimestamp":' + str(ict).encode()
    at = stamped.find(marker, 0, stamped.find(b"\n") if b"\n" in stamped else len(stamped))
    return None if at < 0 else at + len(b'"inCommitTimestamp":')


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

    #: commuting appends are ratified after plain winners unread (conflicts/commuting.py), so a
    #: Table appends from its snapshot as it is, without catching up first
    ratifies_commuting = True

    def __init__(self, catalog: "Catalog", table_id: str, inner: LogStore, *, maintenance: bool = False):
        self.catalog = catalog
        self.table_id = table_id
        self.inner = inner
        self.staged_root = f"{inner.log_root}/{STAGED_DIR}"
        #: the maintenance route: True only for the handle of ``cat.table(name)`` (catalog/maintenance.py)
        self.maintenance = maintenance
        #: a single-table commit's lock while held (CatalogPreparedCommit), and what its last
        #: offer read of the table (held or not): the rebase reads the winners from it
        self._lease: CommitLease | None = None
        self._view: CommitLease | None = None
        self._open_commits = 0
        self._offers = 0
        #: the latest version this store knows to be ratified (the next offer stamps after it)
        self._known: RatifiedCommit | None = None
        #: the catalog's published_through as last read: versions up to it need no verifying
        self._through = -1
        #: what the last ratification's publish verified (first, last), for the catalog to record
        self._mark: tuple[int, int] | None = None
        #: the newest published commit a listing found past the catalog's latest ratified version
        #: (see :meth:`list_log`): this store ratifies nothing up to it
        self._log_ahead: int | None = None

    def _end_lease(self) -> None:
        lease, self._lease, self._view = self._lease, None, None
        if lease is not None:
            lease.release()

    def version_taken(self, version: int) -> bool:
        """Never guessed from the path store: a published file says a version is taken, but the
        catalog may ratify a commuting append after it unread (conflicts/commuting.py)."""
        return False

    def check_maintenance(self, operation: str) -> None:
        """Raise CatalogMaintenanceError unless this route AND the catalog's policy allow ``operation``."""
        from .maintenance import refuse_route

        if not self.maintenance:
            raise refuse_route(operation, self.inner.uri)
        self.catalog._check_maintenance_policy(self.table_id, operation)

    def __getattr__(self, name: str) -> Any:  # data files, fs, roots... are the path store's
        return getattr(self.inner, name)

    # ---- what managing the table requires (rules.py) ----------------------------------------
    def check_commit(self, data: bytes) -> None:
        """Before ratifying ``data``: a maintenance commit (OPTIMIZE, REORG) must be allowed by
        the catalog's policy *now* (it may have been staged before the policy changed), and its
        metaData must keep in-commit timestamps on and name no other catalog."""
        operation = rules.maintenance_operation(data)
        if operation is not None:
            self.check_maintenance(operation)
        rules.check_catalog_metadata(data, self.catalog.catalog_id, self.inner.uri)

    def restored_metadata(self, current: Any, restored: Any) -> Any:
        """RESTORE's hook (tables/ops/restore.py): keep what catalog management requires."""
        return rules.keep_catalog_properties(current, restored)

    def write_log_file(self, name: str, data: bytes) -> None:
        """Checkpoints need no permission (PROTOCOL.md, catalogManaged: the exceptions to the
        maintenance prohibition are checkpoints, log compaction and version checksums, "essential
        for all basic table operations"), from any handle, but only of versions the catalog
        verified in ``_delta_log`` (a checkpoint of v needs ``<v>.json``). After one, the staged
        commits of published versions are deleted (:meth:`delete_published_staged`) — metadata
        cleanup, which is maintenance: only where the route and the policy allow it."""
        if ".checkpoint." in name:
            version = int(name[:20]) if name[:20].isdigit() else -1
            if version > self._through:
                self.publish_pending()
        self.inner.write_log_file(name, data)
        if ".checkpoint." in name:
            # metadata cleanup's part that applies to staged commits (PROTOCOL.md deletes those of
            # versions up to its checkpoint; the expired published files go in the Table's cleanup
            # after the checkpoint, tables/ops/log_cleanup.py): best effort, the checkpoint stands
            # and vacuum_staged deletes them later
            try:
                self.check_maintenance("STAGED COMMIT CLEANUP")
                self.delete_published_staged()
            except Exception:
                pass

    # ---- reading the log --------------------------------------------------------------------
    def latest_ratified(self) -> int:
        latest = self.catalog._db.latest(self.table_id)
        if latest is None:
            return -1
        self._known = RatifiedCommit(latest[0], latest[1], None, None)
        return latest[0]

    def fits_inline(self, data: bytes) -> bool:
        """Will ``data``, stamped, be an inline commit? (the stamp adds a few dozen bytes)"""
        return len(data) + 64 <= INLINE_COMMIT_MAX_BYTES

    def publish_pending(self) -> int:
        """Publish, oldest first, every ratified version the catalog has not verified in
        ``_delta_log`` (past ``published_through``), and record how far it verified; returns the
        latest ratified version.

        Usually one indexed query: the newest ratified version is verified already. A file found
        at an unverified version is compared with the ratified bytes and replaced if it differs:
        PROTOCOL.md has readers use the catalog's commit, never a published file, for a ratified
        version (a client that ignored the catalog may have put one there)."""
        db = self.catalog._db
        state = db.publish_state(self.table_id)
        if state is None:
            return -1
        latest, ict, through = state
        self._known = RatifiedCommit(latest, ict, None, None)
        self._through = max(self._through, through)
        start = through
        if through >= latest:
            if self._published(latest):  # one stat: an OS crash can empty a file not yet fsynced
                return latest
            start = self._last_published(latest)  # publish again from the catalog's bytes
        verified = start
        for commit in db.ratified_after(self.table_id, start):
            if verified == start and commit.version > verified + 1:
                # the versions before the first one ratified after ``start`` were never the
                # catalog's: a registered table's path-era commits (its published_through began at
                # -1 when the catalog's schema gained it), which the catalog has no bytes to check
                verified = commit.version - 1
            if commit.version != verified + 1:
                break  # published in order: nothing after a gap
            self._verify(commit)
            verified = commit.version
        if verified > through:
            db.mark_published([(self.table_id, through + 1, verified)])
            self._through = max(self._through, verified)
        return latest

    def record_published(self) -> None:
        """Let the catalog record what the last ratification's publish verified (best effort:
        unrecorded, the next reader verifies those versions again)."""
        mark, self._mark = self._mark, None
        try:  # with the marks deferred while the offer's write was open, in order
            self.catalog._db.mark_published([(self.table_id, *mark)] if mark is not None else [])
        except Exception:
            pass

    def _verify(self, commit: RatifiedCommit) -> None:
        """Make ``_delta_log/<v>.json`` hold ``commit``'s ratified bytes, when the catalog has them.

        When it has none — ratified in place (the registration commit), or its content dropped
        once verified, its staged file cleaned up since — there is nothing to publish; a file
        gone by then went by log cleanup (after a checkpoint), and must not stop every later
        version from being published. Gone while the version is neither published nor covered by
        a checkpoint, the ratified commit's bytes are lost: that is CorruptLogError, never a
        table read as if the version did not exist (half of a multi-table commit)."""
        if commit.content is not None or commit.staged_name is not None:
            try:
                self.publish(commit)
            except FileNotFoundError:  # the staged file is gone (cleaned up once published)
                if not self._published(commit.version) and not self._checkpointed_since(commit.version):
                    raise CorruptLogError(
                        f"{self.inner.uri!r}: version {commit.version} was ratified by the catalog "
                        f"{self.catalog.url!r} but is not published, and its staged commit "
                        f"_delta_log/{STAGED_DIR}/{commit.staged_name} is gone: the commit's actions are lost. "
                        f"Restore that file from a backup; the versions after it stay unreadable until then",
                        version=commit.version) from None

    def cleanup_bound(self) -> int:
        """Metadata cleanup deletes only versions the catalog verified published (PROTOCOL.md,
        catalogManaged: cleanup of published commits): the last one this store knows verified,
        as of its last listing (:meth:`list_log` publishes what is pending first)."""
        return self._through

    def _cleaned_up(self) -> Callable[[int], bool]:
        """A test, for a version whose published file is missing: did metadata cleanup remove it?
        Yes when the log now starts after it, at a complete checkpoint — cleanup deletes whole
        prefixes, oldest first, and keeps the checkpoint it cleans up to. Otherwise the missing
        file is a hole that publishing the catalog's bytes again repairs. One listing, on first
        use (only a missing file asks)."""
        from ..txnlog.checkpoint import complete_checkpoints

        start: list[int | None] = []

        def cleaned(version: int) -> bool:
            if not start:
                listing = self.inner.list_log(0)
                oldest = min((f.version for f in listing), default=None)
                start.append(oldest if oldest is not None and oldest in complete_checkpoints(listing) else None)
            return start[0] is not None and start[0] > version

        return cleaned

    def _checkpointed_since(self, version: int) -> bool:
        """Is there a checkpoint at or after ``version`` (log cleanup may then remove its commit)?"""
        return any(f.kind != "commit" and f.version >= version for f in self.inner.list_log(version))

    def publish_ratified(self, commits: list[RatifiedCommit], through: int = -1) -> tuple[int, int] | None:
        """Publish, in order, the tail of ``commits`` (a committer's lease: the version before its
        snapshot's next, the winners, its own — last, just ratified, so not asked about) that is
        not published yet — from the bytes in hand, without asking the catalog again. When none
        of the others is published, older versions may not be either: then the catalog says what
        is pending. Returns the versions (first, last) it published from the bytes in hand.

        ``through`` is the catalog's published_through as the offer read it. On an object store
        the versions up to it are not looked at again: a PUT is durable once answered, so the
        catalog's record is proof, and the HEAD it saves sits in the serial chain of publishes.
        On local disk a published file is fsynced later (:meth:`make_durable`) and an OS crash can
        empty one the catalog counted, so the stat stays (it costs microseconds)."""
        verified = -1 if isinstance(self.inner, LocalLogStore) else through
        pending = [commits[-1]]
        for commit in reversed(commits[:-1]):
            if commit.version <= verified or self._published(commit.version):
                break
            if commit.content is None and commit.staged_name is None:
                # unpublished, and its bytes were not read (a commuting offer's winner): the
                # catalog has them, and publishes everything pending in order
                self.publish_pending()
                return None
            pending.append(commit)
        else:
            # none of the others is published (their committers may be publishing right now):
            # the one before them decides — published, the bytes in hand follow it in order
            before = pending[-1].version - 1
            if before >= 0 and before > verified and not self._published(before):
                self.publish_pending()
                return None
        for commit in reversed(pending):
            self.publish(commit)
        # each of these now holds its ratified bytes (put, or compared and replaced); the catalog
        # records them once the versions before are verified too (Database.mark_published)
        return pending[-1].version, pending[0].version

    def _published(self, version: int) -> bool:
        """Is ``_delta_log/<version>.json`` there? An empty file is not: an OS crash can leave a
        published file that never reached the disk empty, and the catalog still has its bytes."""
        if isinstance(self.inner, LocalLogStore):
            try:
                return os.stat(os.path.join(self.inner.log_root, commit_name(version))).st_size > 0
            except FileNotFoundError:
                return False
        return self.inner.fs.exists(f"{self.inner.log_root}/{commit_name(version)}")

    def _last_published(self, latest: int) -> int:
        version = latest
        while version >= 0 and not self._published(version):
            version -= 1
        return version

    def publish(self, commit: RatifiedCommit) -> None:
        """Put a ratified commit to ``_delta_log/<version>.json`` (idempotent: the ratified bytes
        are immutable, so whoever publishes first publishes the same file)."""
        version = commit.version
        if commit.content is not None:
            if self._put_published(version, commit.content):
                self.catalog._published_here(self, version)
            return
        if commit.staged_name is None:
            return  # ratified in place (the registration commit), or published and its content dropped
        staged = f"{self.staged_root}/{commit.staged_name}"
        try:
            if isinstance(self.inner, LocalLogStore):
                try:
                    os.link(staged, os.path.join(self.inner.log_root, commit_name(version)))
                    # a link keeps the staged file's mtime, from before ratification: the published
                    # file's must be its publication's (rules.vouched compares checkpoints with it)
                    os.utime(os.path.join(self.inner.log_root, commit_name(version)))
                except FileExistsError:
                    self._correct_published(version, self._read_staged(commit.staged_name))
            else:
                data = self.inner.fs.cat_file(staged)
                try:
                    self.inner.put_commit(version, data)
                except VersionExistsError:
                    self._correct_published(version, data)
        except FileNotFoundError:
            # another publisher was first, the catalog verified its file and the staged copy was
            # cleaned up since (delete_published_staged): nothing left to do. Anything else is
            # a ratified commit whose bytes are gone, and stays an error
            if not self._published(version):
                raise

    def _correct_published(self, version: int, ratified: bytes,
                           cleaned: Callable[[int], bool] | None = None) -> bool:
        """``_delta_log/<version>.json`` was there already: another publisher's copy of the same
        ratified bytes, as a rule. Anything else was put by a writer that ignored the catalog
        (a path-only client), and PROTOCOL.md has readers take the catalog's commit over a
        published file: the ratified bytes replace it, so the log readers list agrees.

        ``cleaned`` (:meth:`_cleaned_up`): for a verified version whose file is gone, whether
        metadata cleanup removed it — then it stays gone (False is returned), instead of coming
        back as a lone commit under the table's oldest checkpoint. True: the file holds the
        ratified bytes now."""
        try:
            found = self.inner.read_commit(version)
        except FileNotFoundError:
            if cleaned is not None and cleaned(version):
                return False
            found = b""
        if found == ratified:
            return True
        if isinstance(self.inner, LocalLogStore):
            final = os.path.join(self.inner.log_root, commit_name(version))
            tmp = os.path.join(self.inner.log_root, f".publish.{uuid.uuid4().hex}.tmp")
            write_new_file(tmp, ratified)
            os.replace(tmp, final)  # a reader sees one whole file or the other
            if self.inner.fsync:
                fsync_path(final)
                fsync_path(self.inner.log_root)
        else:
            self.inner.fs.pipe_file(f"{self.inner.log_root}/{commit_name(version)}", ratified)
        return True

    def _put_published(self, version: int, data: bytes) -> bool:
        """Put-if-absent of an inline commit's bytes; False when another publisher was first.

        A second publisher never replaces a published file (but one an OS crash left empty): the
        first one's may be fsynced already and the catalog's copy of its bytes dropped.
        Not fsynced on local disk: the catalog keeps the bytes until :meth:`make_durable` has
        fsynced the file (at ``Catalog.close`` or log cleanup), so a file an OS crash loses or
        empties is published again from them. The fsync is the commit's cost on a path table;
        here the database already made the commit durable."""
        inner = self.inner
        if not isinstance(inner, LocalLogStore):
            try:
                inner.put_commit(version, data)
                return True
            except VersionExistsError:
                self._correct_published(version, data)
                return False
        final = os.path.join(inner.log_root, commit_name(version))
        tmp = os.path.join(inner.log_root, f".publish.{uuid.uuid4().hex}.tmp")
        try:
            write_new_file(tmp, data)
        except FileNotFoundError:  # the table's first commit
            os.makedirs(inner.log_root, exist_ok=True)
            write_new_file(tmp, data)
        try:
            os.link(tmp, final)  # a reader sees the whole file or none
            return True
        except FileExistsError:
            with open(final, "rb") as fh:
                found = fh.read()
            if found != data:  # left empty by an OS crash, or put by a writer that ignored the
                os.replace(tmp, final)  # catalog (see _correct_published): the catalog's bytes win
                tmp = ""
                return True
            return False
        finally:
            if tmp:
                os.unlink(tmp)

    def make_durable(self, versions: list[int]) -> None:
        """fsync the published files of ``versions`` (local disk; other stores' puts are durable)."""
        if not isinstance(self.inner, LocalLogStore) or not self.inner.fsync:
            return
        for version in versions:
            fsync_path(os.path.join(self.inner.log_root, commit_name(version)))
        fsync_path(self.inner.log_root)  # the names too

    def list_log(self, start_version: int = 0, *, extra: bool = False) -> list[LogFile]:
        """The published log up to the catalog's latest ratified version (PROTOCOL.md: readers
        ignore files past it). Published files past it that the catalog still does not know when
        asked again — a file is published only once ratified, so a commit that landed during the
        listing is known by then — mean the catalog is behind its own log: remembered, so that
        this store never ratifies, and so overwrites, those versions (:meth:`ratification`).
        ``extra``: version checksums and log compaction files too (metadata cleanup's listing)."""
        latest = self.publish_pending()
        listing = self.inner.list_log(start_version, extra=extra)
        ahead = max((f.version for f in listing if f.kind == "commit" and f.version > latest), default=None)
        if ahead is not None:
            state = self.catalog._db.publish_state(self.table_id)
            if state is not None and state[0] >= ahead:
                ahead = None  # ratified and published while we listed
        if ahead is not None or (self._log_ahead is not None and start_version <= self._log_ahead):
            self._log_ahead = ahead  # a listing that covers the files found before also tells they are gone
        return rules.vouched([f for f in listing if f.version <= latest])

    def _view_here(self) -> CommitLease | None:
        """What this thread's commit last read of this table (its lease, held or not), if any."""
        view = self._view
        if view is not None and view.owner == threading.get_ident():
            return view
        lease = self.catalog._db.current_lease  # a multi-table commit's
        return lease if lease is not None and lease.held_here() and self.table_id in lease.commits else None

    def read_commit(self, version: int) -> bytes:
        view = self._view_here()
        if view is not None:  # a rebase on what the commit read from the catalog: the truth
            return self._read_leased(view, version)
        if version > self._through:  # not known verified: the catalog's bytes go there first
            self.publish_pending()
        try:
            data = self.inner.read_commit(version)
        except FileNotFoundError:
            if self.publish_pending() < version:
                raise
            data = self.inner.read_commit(version)
        if not data:  # a published file an OS crash left empty: publish it again from the catalog
            for commit in self.catalog._db.ratified_after(self.table_id, version - 1)[:1]:
                if commit.version == version and commit.content is not None:
                    self._put_published(version, commit.content)
                    return commit.content
        return data

    def read_commits_after(self, version: int, limit: int) -> list[bytes]:
        """The ratified versions after ``version`` (at most ``limit``) in one query: their bytes
        from the catalog when inline, else from the published (or staged) file. On an object
        store this is one request where reading by name is one per version."""
        if self._view_here() is not None:  # a rebase reads what its offer saw
            return LogStore.read_commits_after(self, version, limit)  # type: ignore[arg-type]
        found: list[bytes] = []
        for commit in self.catalog._db.ratified_after(self.table_id, version, limit):
            if commit.version != version + 1 + len(found):
                break  # the catalog has no such version: nothing after it counts
            if commit.content is not None:
                found.append(commit.content)
                continue
            if commit.version > self._through:  # a published file the catalog has not verified
                self.publish_pending()
            try:
                found.append(self.inner.read_commit(commit.version))
            except FileNotFoundError:
                if commit.staged_name is None:
                    self.publish_pending()
                    found.append(self.inner.read_commit(commit.version))
                else:
                    found.append(self._read_staged_or_published(commit.version, commit.staged_name))
        return found

    def _read_leased(self, lease: CommitLease, version: int) -> bytes:
        """Commit ``version`` as the lease read it: its inline bytes, or the published or staged
        file; versions beyond the latest ratified one then do not exist (whatever files say)."""
        latest = lease.latest(self.table_id)
        if latest is None or version > latest.version:
            raise FileNotFoundError(f"version {version} of {self.inner.uri!r} is not ratified")
        commit = lease.commit_at(self.table_id, version)
        if commit is not None and commit.content is not None:
            return commit.content
        try:
            return self.inner.read_commit(version)
        except FileNotFoundError:
            if commit is None or commit.staged_name is None:
                raise
            return self._read_staged_or_published(version, commit.staged_name)

    def _read_staged_or_published(self, version: int, name: str) -> bytes:
        """A ratified version whose published file was not there a moment ago: its staged file —
        or, when that is gone too, the published file after all (published meanwhile, and the
        staged copy cleaned up since: :meth:`delete_published_staged`)."""
        try:
            return self._read_staged(name)
        except FileNotFoundError:
            return self.inner.read_commit(version)

    def _read_staged(self, name: str) -> bytes:
        if isinstance(self.inner, LocalLogStore):
            with open(os.path.join(self.staged_root, name), "rb") as fh:
                return fh.read()
        return self.inner.fs.cat_file(f"{self.staged_root}/{name}")

    def read_log_file(self, name: str) -> bytes:
        return self.inner.read_log_file(name)

    def table_exists(self) -> bool:
        return self.latest_ratified() >= 0

    # ---- committing -------------------------------------------------------------------------
    def put_commit(self, version: int, data: bytes) -> None:
        with self.prepare_commit(data) as prepared:
            prepared.put(version)

    def prepare_commit(self, data: bytes, *, plain: bool = False, commutes: bool = False) -> "CatalogPreparedCommit":
        """The Transaction's word on its bytes (conflicts/commuting.py): ``plain``, they hold
        only commitInfo/add/remove/cdc actions; ``commutes``, a blind append that the conflict
        checker passes unchanged against any plain winner — so the catalog may ratify it after
        plain winners unread. Refused here (nothing staged) if the catalog's rules say no
        (:meth:`check_commit`)."""
        self.check_commit(data)
        return CatalogPreparedCommit(self, data, plain=plain, commutes=commutes)

    def ratification(self, version: int, data: bytes, previous_ict: int | None, txn_id: str | None = None,
                     plain: bool = False) -> Ratification:
        """The row that ratifies ``data`` as ``version``: stamped with the next in-commit timestamp
        after ``previous_ict``, inline when small, else written now to a staged file (the version
        is known: the caller holds the commit lock, or creates the table)."""
        if self._log_ahead is not None and version <= self._log_ahead:
            raise self._log_ahead_error(version)
        ict = next_ict(previous_ict)
        stamped, stamped_txn_id = stamp_in_commit_timestamp(data, ict)
        txn_id = txn_id or stamped_txn_id or str(uuid.uuid4())
        if self.fits_inline(data):
            phases.reached("staged", version=version, table=self.inner.uri, txn_id=txn_id, inline=True)
            return Ratification(self.table_id, version, None, txn_id, ict, content=stamped, plain=plain,
                                ict_at=ict_offset(stamped, ict))
        name = f"{version:020d}.{uuid.uuid4()}.json"
        self._write_staged(name, stamped)
        phases.reached("staged", version=version, table=self.inner.uri, txn_id=txn_id, inline=False)
        return Ratification(self.table_id, version, name, txn_id, ict, plain=plain)

    def _log_ahead_error(self, version: int) -> CatalogLogAheadError:
        ahead = self._log_ahead if self._log_ahead is not None else version
        return CatalogLogAheadError(
            f"{self.inner.uri!r}: _delta_log holds published commits up to version {ahead}, past version {version - 1}, "
            f"the latest the catalog {self.catalog.url!r} ratified. Was the catalog's database restored from an "
            f"older backup, or did a client write the log without the catalog? Committing would ratify version "
            f"{version} again and overwrite its published file, so nothing was committed. Restore the catalog to a "
            f"state that has those versions, or — if they were never ratified — move the files past version "
            f"{version - 1} out of _delta_log",
            catalog_latest=version - 1, published_through=ahead)

    def _write_staged(self, name: str, data: bytes) -> None:
        self.inner.makedirs(self.staged_root)  # the store's own (a stat on local disk, nothing on S3)
        if isinstance(self.inner, LocalLogStore):
            write_new_file(os.path.join(self.staged_root, name), data, fsync=self.inner.fsync)
        else:
            self.inner.fs.pipe_file(f"{self.staged_root}/{name}", data)

    def discard_staged(self, name: str) -> None:
        """Delete a staged commit that lost (never ratified: nobody will ever read it), or one
        whose version is published (:meth:`delete_published_staged`)."""
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

    def delete_published_staged(self) -> list[str]:
        """Log cleanup of staged commits: delete the staged file of every ratified version the
        catalog has verified in ``_delta_log`` (at or below ``published_through``); returns
        their names.

        Why it may: PROTOCOL.md (catalogManaged) has the catalog keep a ratified commit only
        until it is published (from then on ``_delta_log/<v>.json`` is the commit, and readers
        list it), and has metadata cleanup delete staged commits too. Each one is as big as its
        commit (they are the commits over :data:`INLINE_COMMIT_MAX_BYTES`): kept, they double
        the log. Never one of a version not verified published: the catalog's row points at it
        and it is the only copy of a committed version. Before the delete, each published file is
        compared with its staged bytes once more (and replaced if something else was put there
        since: a client that ignored the catalog), as an inline commit's bytes are before the
        catalog drops them, and made durable (on local disk a publication is a hard link of the
        staged file: an OS crash must not lose both names). The catalog's rows keep the names
        (the database is not written: a name whose file is gone is skipped here, and every
        reader goes to the published file first, a reader of a staged file falling back to it:
        :meth:`_read_staged_or_published`, :meth:`publish`)."""
        # the folder first: it is empty in the common case (inline commits, or cleaned up already),
        # while the catalog's rows keep every staged name ever ratified
        on_disk = {name for name, _ in self.list_staged()}
        if not on_disk:
            return []
        state = self.catalog._db.publish_state(self.table_id)
        if state is None:
            return []
        rows = self.catalog._db.query(
            "SELECT version, staged_name FROM deltatx_commits WHERE table_id = ? AND staged_name IS NOT NULL "
            "AND version <= ? ORDER BY version", (self.table_id, state[2]))
        published = [(int(v), str(n)) for v, n in rows if n in on_disk]
        if not published:
            return []
        cleaned = self._cleaned_up()
        # a no-op when the file holds them; a version metadata cleanup removed stays removed
        present = [v for v, name in published if self._correct_published(v, self._read_staged(name), cleaned)]
        self.make_durable(present)
        for _, name in published:
            self.discard_staged(name)
        return [name for _, name in published]

    def drop_published_content(self, only: Any = None) -> list[int]:
        """Log cleanup of inline commits (those in ``only``, if given): the catalog drops its
        copy of a commit's bytes only once it has verified them in ``_delta_log`` itself — at
        or below ``published_through``, and the file compared with them once more now (and
        replaced if something else was put there since) — and made the file durable (fsync).
        Returns the versions whose content was dropped."""
        db = self.catalog._db
        state = db.publish_state(self.table_id)
        if state is None:
            return []
        rows = db.query("SELECT version, content FROM deltatx_commits WHERE table_id = ? AND content IS NOT NULL "
                        "AND version <= ? ORDER BY version", (self.table_id, state[2]))
        dropped, present = [], []
        cleaned = self._cleaned_up()
        for version, content in rows:
            if only is not None and int(version) not in only:
                continue
            # a no-op when the file holds them; a version metadata cleanup removed stays removed
            if self._correct_published(int(version), bytes(content), cleaned):
                present.append(int(version))
            dropped.append(int(version))
        self.make_durable(present)
        db.drop_content(self.table_id, dropped)
        return dropped

    def __repr__(self) -> str:
        return f"CatalogLogStore({self.inner.uri!r}, table_id={self.table_id!r})"


class CatalogPreparedCommit(PreparedCommit):
    """Commit bytes offered at successive versions, each offer under the table's commit lock.

    An offer takes the lock (:class:`CommitLease`) and reads what was ratified since the writer's
    snapshot. If nothing was, it ratifies — the lock is held for a few statements only. If the
    table moved, ``put`` raises VersionExistsError and the Transaction rebases on the winners the
    offer read (served from memory: no file, no query). The first :data:`OPTIMISTIC_OFFERS`
    offers let the lock go before that rebase, so a writer's Python never runs while others wait
    for it; a writer that lost that often keeps the lock through its rebase instead, so its next
    offer cannot lose — a commit makes at most ``OPTIMISTIC_OFFERS + 2`` offers, however many
    writers there are. The lock ends with the ratification, or when the last open prepared commit
    of the store is closed (the transaction gave up: a conflict, an error)."""

    store: CatalogLogStore

    def __init__(self, store: CatalogLogStore, data: bytes, *, plain: bool = False, commutes: bool = False):
        super().__init__(store, data)
        if store._open_commits == 0:  # a new transaction's first bytes
            store._offers = 0
        store._open_commits += 1
        self._closed = False
        #: the Transaction's word on these bytes (conflicts/commuting.py): plain, and commuting with plain
        self.plain = plain
        self.commutes = commutes and plain

    def put(self, version: int) -> int:
        """Returns the version ratified: ``version``, or — for commuting bytes — a later one,
        after winners that were all plain (the Transaction did not need to read them)."""
        store = self.store
        db = store.catalog._db
        now_ms = int(time.time() * 1000)
        lease = store._lease
        commutes = self.commutes and store.fits_inline(self.data)
        if lease is None and (commutes or store._offers < OPTIMISTIC_OFFERS) and store.fits_inline(self.data):
            # one database transaction: ratified, or the winners read — the lock is not kept
            store._offers += 1
            store._mark = None
            try:
                row, view = db.offer(store.table_id, version, self._row_maker(), store._known, now_ms,
                                     commutes=commutes, on_ratified=self._ratified)
            except DuplicateRowError:  # the primary key backstop: nothing was ratified
                raise VersionExistsError(version) from None
            if row is None:
                store._view = view
                self._lost(version, view.latest(store.table_id))
            if not db.marks_in_offer:
                store.record_published()
            return row.version
        if lease is None or not lease.open:  # this offer keeps the lock if it loses
            lease = store._lease = db.lease({store.table_id: version - 1})
            store._view = lease
            store._offers += 1
        latest = lease.latest(store.table_id)
        if latest is None or latest.version != version - 1:
            self._lost(version, latest)  # the lock stays held: the rebase runs under it
        row = self._row_maker()(latest, version)
        store._lease = None
        try:
            db.ratify([row], row.txn_id, now_ms, lease=lease)
        except DuplicateRowError:  # the primary key backstop: nothing was ratified
            if row.staged_name is not None:
                store.discard_staged(row.staged_name)
            raise VersionExistsError(version) from None
        except BaseException:
            store._view = None  # did it land after all? the catalog says, not what this offer read
            raise
        finally:
            lease.release()  # no-op once ratified
        self._ratified(row, lease)
        store.record_published()
        return version

    def _row_maker(self):
        store = self.store
        return lambda previous, version: store.ratification(version, self.data, previous.ict if previous else None,
                                                            plain=self.plain)

    def _lost(self, version: int, latest: RatifiedCommit | None) -> None:
        """Raise what the offer's view says: lost the version (rebase and offer the next one),
        or the table is gone, or the catalog is behind this writer."""
        store = self.store
        if latest is None:
            store._end_lease()
            raise CatalogTableNotFoundError(f"the table at {store.inner.uri!r} is no longer in catalog "
                                            f"{store.catalog.url!r} (dropped, or released to a path table?): nothing was committed")
        store._known = latest
        if latest.version >= version:
            raise VersionExistsError(version)
        store._end_lease()
        raise CatalogError(f"catalog {store.catalog.url!r} has version {latest.version} of {store.inner.uri!r}, "
                           f"older than this writer's snapshot ({version - 1}): the catalog lost ratifications")

    def _ratified(self, row: Ratification, view: CommitLease) -> tuple[int, int] | None:
        store = self.store
        store._view = None
        store._known = RatifiedCommit(row.version, row.ict, row.staged_name, None, row.plain)
        phases.reached("ratified", version=row.version, table=store.inner.uri, txn_id=row.txn_id)
        commits = view.commits[store.table_id]
        if not commits or commits[-1].version != row.version:  # a lease's own row is appended by ratify
            commits = [*commits, RatifiedCommit(row.version, row.ict, row.staged_name, row.content, row.plain)]
        store._mark = store.publish_ratified(commits, view.through.get(store.table_id, -1))
        if not self.store.catalog._db.marks_in_offer:
            # recorded now, while the next writer still waits (SQLite runs this after the commit,
            # holding the writers' lock): marks land in version order, each next to the last
            store.record_published()
        return store._mark

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.store._open_commits -= 1
            if self.store._open_commits == 0:
                self.store._end_lease()


__all__ = ["CatalogLogStore", "CatalogPreparedCommit", "STAGED_DIR", "LOG_DIR", "INLINE_COMMIT_MAX_BYTES",
           "stamp_in_commit_timestamp"]
