"""``with cat.transaction() as tx``: one all-or-nothing commit over several tables.

Each table keeps its own :class:`~deltatx.tables.transaction.Transaction` (read set, isolation
level, staged actions). Commit:

1. take the commit lock of every table touched, in one database transaction
   (:class:`~deltatx.catalog.db.CommitLease`), reading what each table ratified since the cut;
2. every table that moved is checked and rebased against its own winners, under the lock (the
   same pure conflict checker and rebase as a single-table commit: ``Transaction._rebase_onto_winners``)
   — nobody can ratify those tables meanwhile, so there is no race to lose and retry. A table
   the transaction only read is locked and checked too, at the table's isolation level, but
   gets no new version: what this transaction wrote elsewhere may depend on what it read there
   (two transfers that each read both accounts and each debit a different one: write skew,
   which one table's log alone would never see);
3. every table's commit is stamped and staged: inline in the catalog (small) or in its
   ``_delta_log/_staged_commits`` (big) — invisible either way;
4. the same database transaction ratifies the next version of every table touched, and commits;
5. the ratified versions are published to ``_delta_log``.

A crash before 4 leaves nothing ratified (the database rolls the transaction back; a big commit's
staged file is dead, vacuumed by ``Catalog.vacuum_staged``); after 4 every table has changed, and
whoever looks next publishes what is unpublished.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from .. import phases
from ..errors import (CatalogTableNotFoundError, CommitRetriesExceededError, DeltaTxError, InvalidArgumentError,
                      TransactionFailedError)
from ..isolation import table_isolation_level
from ..tables.transaction import DEFAULT_MAX_ATTEMPTS, CommitResult, CommitsOnExit, Transaction
from ..txnlog.actions import CommitActions
from .db import DuplicateRowError, Ratification
from .store import CatalogLogStore

if TYPE_CHECKING:
    from .catalog import Catalog, CatalogEntry


class CatalogTransaction(CommitsOnExit):
    """Transactions over several catalog tables, pinned at one consistent cut of the catalog."""

    def __init__(self, catalog: "Catalog", *, max_attempts: int = DEFAULT_MAX_ATTEMPTS):
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise InvalidArgumentError(f"max_attempts must be a positive integer, got {max_attempts!r}")
        self.catalog = catalog
        self.max_attempts = max_attempts
        self.txn_id = str(uuid.uuid4())
        self._cut: dict[str, tuple["CatalogEntry", int]] | None = None
        self._txs: dict[str, Transaction] = {}
        self._state = "open"

    def table(self, name: str) -> Transaction:
        """The transaction of table ``name``, pinned at this transaction's cut of the catalog."""
        if self._state != "open":
            raise DeltaTxError(f"this catalog transaction is {self._state}; start a new one")
        from .catalog import check_table_name  # catalog imports this module

        check_table_name(name)  # before the database is asked, as every Catalog method does
        tx = self._txs.get(name)
        if tx is None:
            if self._cut is None:
                self._cut = self.catalog.cut()  # one instant for every table this txn reads
            if name not in self._cut:
                # created after the cut: only its entry joins (the others stay where the cut has them)
                now = self.catalog.cut().get(name)
                if now is None:
                    self.catalog._entry(name)  # its own CatalogTableNotFoundError (a name never ratified)
                    raise CatalogTableNotFoundError(f"table {name!r} is not in catalog {self.catalog.url!r} (dropped, or released to a path table?)")
                self._cut = {**self._cut, name: now}
            table = self.catalog.table(name)
            cut_entry = self._cut[name][0]
            if table.store.table_id != cut_entry.table_id:
                raise CatalogTableNotFoundError(
                    f"table {name!r} of catalog {self.catalog.url!r} was dropped after this transaction's cut "
                    f"(the name now holds another table); this transaction cannot read it — start a new one")
            tx = table.transaction(read_version=self._cut[name][1], max_attempts=self.max_attempts)
            tx._committed_by = f"catalog transaction {self.txn_id}"
            self._txs[name] = tx
        return tx

    # ------------------------------------------------------------------ commit
    def commit(self) -> dict[str, CommitResult]:
        """Commit every table's staged changes at once (see the module docstring)."""
        if self._state != "open":
            raise DeltaTxError(f"this catalog transaction is {self._state}")
        for name, tx in self._txs.items():
            if tx._state != "open":
                self.abort()
                raise DeltaTxError(f"the transaction of table {name!r} was {tx._state} on its own; this catalog "
                                   f"transaction commits all its tables or none, so it committed nothing")
            if tx._failed is not None:  # a statement failed after staging part of its changes
                self.abort()
                raise TransactionFailedError(
                    f"a statement on table {name!r} failed after staging part of its changes ({tx._failed}); "
                    f"this catalog transaction commits all its tables or none, so it committed nothing")
        try:
            for tx in self._txs.values():
                tx.stage_before_commit()
            touched = {name: tx for name, tx in self._txs.items() if tx.has_changes()}
            only_read = {name: tx for name, tx in self._txs.items() if name not in touched and tx.reads_anything()}
            results = self._commit(touched, only_read) if touched else {}
        except BaseException:
            self._state = "failed"
            for tx in self._txs.values():
                if not tx._may_have_landed:
                    tx._abort_files()
                tx._state = "failed"
            raise
        for name, tx in self._txs.items():
            if name not in touched:
                tx.abort()
        self._state = "committed"
        return results

    def _commit(self, touched: dict[str, Transaction], only_read: dict[str, Transaction]
                ) -> dict[str, CommitResult]:
        infos = {name: tx._transaction_info() for name, tx in touched.items()}
        versions = {name: tx.read_version + 1 for name, tx in touched.items()}
        stores: dict[str, CatalogLogStore] = {name: tx.store for name, tx in touched.items()}
        by_id = {store.table_id: store for store in stores.values()}
        # a table only read is checked at the table's own level: its (empty) commit alone would
        # run at snapshot isolation, but the commit as a whole changes data
        read_infos = {name: tx._transaction_info().replace(isolation_level=table_isolation_level(tx.snapshot.properties))
                      for name, tx in only_read.items()}
        read_checked = {name: tx.read_version + 1 for name, tx in only_read.items()}  # next winner to check
        winners: dict[str, list[CommitActions]] = {name: [] for name in touched}
        resolved = dict.fromkeys(touched, 0)
        commit_infos: dict[str, dict[str, Any]] = {}
        db = self.catalog._db
        attempts = 0
        while True:
            attempts += 1
            since = {stores[name].table_id: versions[name] - 1 for name in touched}
            since.update({tx.store.table_id: tx.read_version for tx in only_read.values()})
            lease = db.lease(since)
            rows: list[Ratification] = []
            try:
                for name, tx in only_read.items():  # the read sets of tables this commit leaves unchanged
                    latest = lease.latest(tx.store.table_id)
                    if latest is None:
                        raise CatalogTableNotFoundError(f"table {name!r}, read by this transaction, is no longer in "
                                                        f"catalog {self.catalog.url!r} (dropped, or released to a path table?): nothing was committed")
                    if latest.version >= read_checked[name]:
                        _, read_checked[name], _, _ = tx._rebase_onto_winners(read_infos[name], read_checked[name], [])
                for name, tx in touched.items():  # each table against its own winners, under the lock
                    latest = lease.latest(stores[name].table_id)
                    if latest is None:
                        raise CatalogTableNotFoundError(f"table {name!r} is no longer in catalog {self.catalog.url!r} "
                                                        f"(dropped, or released to a path table?): nothing was committed")
                    if latest.version >= versions[name]:
                        info, nxt, _, checked = tx._rebase_onto_winners(infos[name], versions[name], winners[name])
                        infos[name], versions[name] = info, nxt
                        resolved[name] += checked
                for name, tx in touched.items():
                    info, commit_infos[name], payload = tx._encode(infos[name])
                    infos[name] = info
                    # under the lock: the maintenance policy as of this ratification (an OPTIMIZE
                    # staged while it was allowed is refused if it no longer is), the properties
                    stores[name].check_commit(payload)
                    previous = lease.latest(stores[name].table_id)
                    rows.append(stores[name].ratification(versions[name], payload, previous.ict, tx.txn_id))
                for tx in touched.values():  # files a RESTORE re-adds, still there under the lock
                    tx.check_required_files()
                phases.reached("attempt_commit", txn_id=self.txn_id, versions=dict(versions), attempt=attempts)
                for tx in touched.values():
                    tx._may_have_landed = True  # from here an error may hide a ratification
                db.ratify(rows, self.txn_id, int(time.time() * 1000), lease=lease)
                break
            except DuplicateRowError:  # the primary key backstop: nothing ratified; take the lock again
                for tx in touched.values():
                    tx._may_have_landed = False
                for row in rows:
                    if row.staged_name is not None:
                        by_id[row.table_id].discard_staged(row.staged_name)
                if attempts >= self.max_attempts:
                    raise CommitRetriesExceededError(
                        f"gave up after {attempts} attempts to commit to {sorted(touched)}; the tables kept moving",
                        version=max(versions.values()), operation="TRANSACTION") from None
            finally:
                lease.release()  # no-op once ratified
        phases.reached("ratified", txn_id=self.txn_id, versions=dict(versions))
        marks = []
        for name in touched:
            mark = stores[name].publish_ratified(lease.commits[stores[name].table_id])
            if mark is not None:
                marks.append((stores[name].table_id, *mark))
        try:
            db.mark_published(marks)  # what the catalog verified in _delta_log (best effort)
        except Exception:
            pass
        phases.reached("published", txn_id=self.txn_id, versions=dict(versions))
        results = {}
        moved = attempts + any(resolved.values())  # a rebase counts as a lost attempt, as on one table
        for name, tx in touched.items():
            info = infos[name]
            tx._drop_unreferenced(info.adds)
            own = CommitActions(version=versions[name], commit_info=commit_infos[name], protocol=info.protocol,
                                metadata=info.metadata, txns=list(info.txns), domains=list(info.domains))
            own._adds, own._removes = info.adds, info.removes
            results[name] = tx._finish(versions[name], moved, info, winners[name], own=own, resolved=resolved[name])
            tx._state = "committed"
        return results

    def abort(self) -> None:
        if self._state == "open":
            for tx in self._txs.values():
                tx.abort()
            self._state = "aborted"
