"""Listing the log while other processes commit: a commit readdir skipped is found by name."""

from __future__ import annotations

from deltatx.txnlog.store import open_store


def test_a_commit_skipped_by_readdir_is_found_by_name(tmp_path):
    store = open_store(str(tmp_path / "t"))
    for version in range(5):
        store.put_commit(version, b'{"commitInfo":{}}\n')
    listing = [f for f in store.list_log() if f.version != 2]  # as if readdir missed version 2
    found = store._missed_commits(listing)
    assert [f.version for f in found] == [2] and found[0].kind == "commit"


def test_a_real_gap_stays_a_gap(tmp_path):
    store = open_store(str(tmp_path / "t"))
    for version in (0, 1, 3):
        store.put_commit(version, b'{"commitInfo":{}}\n')
    assert [f.version for f in store.list_log()] == [0, 1, 3]
