"""Deliberately broken commit paths, to prove that each checker can fail.

A checker that passes every history proves nothing. Each fault below breaks one guarantee the
commit path gives, in the process it is installed in; the checker tests run a workload under it
and require the matching checker to report an anomaly:

========================  ==================================================  =================
fault                     what breaks                                         caught by
========================  ==================================================  =================
``ignore_conflicts``      the conflict checker accepts every winner (lost     serializable,
                          updates, duplicated rows, broken bank totals)       write_serializable,
                                                                              bank, no_lost_commit
``overwrite_commits``     put-if-absent overwrites an existing version        no_lost_commit
``drop_commits``          the store acknowledges a commit it never wrote      no_lost_commit
``reuse_row_ids``         row ids are handed out from 0 on every commit,      row_ids
                          ignoring the high-water mark (ids collide)
``forget_row_ids``        rewritten rows (UPDATE, MERGE, OPTIMIZE) lose       row_ids
                          their materialized row id (a surviving row's id
                          changes)
``ratify_one_table``      a multi-table catalog commit ratifies only the      bank2
                          first table (the others' staged commits are left
                          unratified, yet the transaction reports success)
``report_commits_as_``    a catalog transaction commits, then reports a       bank2
``conflicts``             conflict to its caller
========================  ==================================================  =================

Each is a context manager (in-process use) and has an ``install_*`` function with no arguments
(for ``run_stress(worker_init="deltatx.harness.faults:install_ignore_conflicts")``, which calls it
in every writer process). Never use them on a table you care about.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from ..tables import transaction as transaction_module
from ..txnlog import store as store_module


def _patch(owner: Any, name: str, replacement: Any) -> Callable[[], None]:
    original = owner.__dict__[name]
    setattr(owner, name, replacement)

    def undo() -> None:
        setattr(owner, name, original)

    return undo


class _FaultyPreparedCommit:
    """Stands in for the store's staged commit: ``put`` does what the fault says."""

    def __init__(self, store: Any, data: bytes, put: Callable[[Any, int, bytes], None]):
        self.store, self.data, self._put = store, data, put

    def put(self, version: int) -> None:
        self._put(self.store, version, self.data)

    def close(self) -> None:
        pass

    def __enter__(self) -> "_FaultyPreparedCommit":
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _replace_commit_put(put: Callable[[Any, int, bytes], None]) -> Callable[[], None]:
    """Make every store's commit put (``put_commit`` and staged ``prepare_commit``) call ``put``."""
    undos = []
    classes = [store_module.LogStore, *_subclasses(store_module.LogStore)]
    for cls in classes:
        if "put_commit" in cls.__dict__:
            undos.append(_patch(cls, "put_commit", put))
        if "prepare_commit" in cls.__dict__:
            undos.append(_patch(cls, "prepare_commit",
                                lambda self, data, **_hints: _FaultyPreparedCommit(self, data, put)))
        if "version_taken" in cls.__dict__:
            # the faulty put decides alone: a look that says "taken" would skip it (and the fault)
            undos.append(_patch(cls, "version_taken", lambda self, version: False))

    def undo() -> None:
        for u in reversed(undos):
            u()

    return undo


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def install_ignore_conflicts() -> Callable[[], None]:
    """The committer's conflict check passes every transaction unchanged. Returns an undo."""
    return _patch(transaction_module, "check_commit", lambda txn, winner, loaded=None: txn)


def install_overwrite_commits() -> Callable[[], None]:
    """put-if-absent of a commit overwrites whatever is there. Returns an undo."""

    def overwrite(store: Any, version: int, data: bytes) -> None:
        store.write_log_file(store_module.commit_name(version), data)

    return _replace_commit_put(overwrite)


def install_drop_commits() -> Callable[[], None]:
    """put-if-absent reports success without writing anything. Returns an undo."""
    return _replace_commit_put(lambda store, version, data: None)


def install_reuse_row_ids() -> Callable[[], None]:
    """Row ids start at 0 on every commit, whatever the watermark says. Returns an undo."""
    from ..txnlog import row_tracking

    original = row_tracking.assign_row_ids

    def from_zero(adds: Any, read_hwm: int, start_hwm: int, version: int, keep: Any = None) -> Any:
        return original(adds, read_hwm, -1, version, keep)

    return _patch(row_tracking, "assign_row_ids", from_zero)  # every caller looks it up on the module


def install_forget_row_ids() -> Callable[[], None]:
    """Rewritten rows are written without their materialized row id. Returns an undo."""
    from ..tables.ops import merge_on_read

    original = merge_on_read.physical

    def forgetful(tx: Any, rows: Any) -> Any:
        from ..io.row_metadata import ROW_ID

        if ROW_ID in rows.column_names:
            rows = rows.drop_columns([ROW_ID])
        return original(tx, rows)

    undo_a = _patch(merge_on_read, "physical", forgetful)
    from ..tables.ops import optimize, rewrite

    undo_b = _patch(rewrite, "physical", forgetful)
    undo_c = _patch(optimize, "physical", forgetful)

    def undo() -> None:
        undo_c()
        undo_b()
        undo_a()

    return undo


def install_ratify_one_table() -> Callable[[], None]:
    """The catalog ratifies only the first table of a multi-table commit. Returns an undo."""
    from ..catalog import db

    original = db.Database.ratify

    def ratify_first(self: Any, rows: Any, catalog_txn_id: str, now_ms: int, extra: Any = None, **kwargs: Any) -> int:
        return original(self, list(rows)[:1], catalog_txn_id, now_ms, extra, **kwargs)

    return _patch(db.Database, "ratify", ratify_first)


def install_report_commits_as_conflicts() -> Callable[[], None]:
    """A catalog transaction commits every table, then tells its caller it lost a conflict.
    Returns an undo."""
    from ..catalog import transaction as catalog_transaction
    from ..errors import ConcurrentTransactionException

    original = catalog_transaction.CatalogTransaction.commit

    def commit_then_deny(self: Any, *args: Any, **kwargs: Any) -> Any:
        original(self, *args, **kwargs)
        raise ConcurrentTransactionException("the commit is reported lost (it was ratified)")

    return _patch(catalog_transaction.CatalogTransaction, "commit", commit_then_deny)


@contextmanager
def _installed(install: Callable[[], Callable[[], None]]) -> Iterator[None]:
    undo = install()
    try:
        yield
    finally:
        undo()


def ignore_conflicts():
    """Context manager form of :func:`install_ignore_conflicts`."""
    return _installed(install_ignore_conflicts)


def overwrite_commits():
    """Context manager form of :func:`install_overwrite_commits`."""
    return _installed(install_overwrite_commits)


def drop_commits():
    """Context manager form of :func:`install_drop_commits`."""
    return _installed(install_drop_commits)


def reuse_row_ids():
    """Context manager form of :func:`install_reuse_row_ids`."""
    return _installed(install_reuse_row_ids)


def forget_row_ids():
    """Context manager form of :func:`install_forget_row_ids`."""
    return _installed(install_forget_row_ids)


def ratify_one_table():
    """Context manager form of :func:`install_ratify_one_table`."""
    return _installed(install_ratify_one_table)


def report_commits_as_conflicts():
    """Context manager form of :func:`install_report_commits_as_conflicts`."""
    return _installed(install_report_commits_as_conflicts)
