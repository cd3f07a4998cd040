"""A put whose response was lost may have landed at a later version than the one offered: a
catalog ratifies a blind append after plain winners (catalog/store.py). The writer looks from
the offered version on for its own txnId, reports where it landed, and keeps its data files."""

from __future__ import annotations

import pyarrow as pa

import deltatx
from deltatx.txnlog.store import PreparedCommit, open_store

SCHEMA = pa.schema([("id", pa.int64())])


class _RatifiedLaterThenLost(PreparedCommit):
    """Another writer takes ``version``; ours lands at ``version + 1``; the response is lost."""

    def __init__(self, store, data, uri):
        super().__init__(store, data)
        self.uri = uri

    def put(self, version: int) -> int | None:
        deltatx.Table(self.uri).append(pa.table({"id": [2]}, schema=SCHEMA))  # the plain winner
        self.store.put_commit(version + 1, self.data)
        raise ConnectionResetError("the response was lost")


def test_a_lost_response_finds_the_commit_at_a_later_version(table_uri):
    deltatx.create_table(table_uri, SCHEMA).append(pa.table({"id": [0]}, schema=SCHEMA))
    store = open_store(table_uri)
    plain = store.prepare_commit

    def first_lost(data, **hints):
        store.prepare_commit = plain  # type: ignore[method-assign]  (the winner's own put is plain)
        return _RatifiedLaterThenLost(store, data, table_uri)

    store.prepare_commit = first_lost  # type: ignore[method-assign]
    table = deltatx.Table(table_uri, _store=store)
    result = table.append(pa.table({"id": [1]}, schema=SCHEMA))
    assert (result.read_version, result.version) == (1, 3)  # offered 2, landed at 3
    assert result.conflicts_resolved == 1  # the winner at 2, passed unread
    assert table.version == 3
    assert sorted(deltatx.Table(table_uri).to_arrow()["id"].to_pylist()) == [0, 1, 2]  # its file was kept
    history = [h["operation"] for h in deltatx.Table(table_uri).history()]
    assert history[:2] == ["WRITE", "WRITE"]
