"""Regressions found by the reliability suite in the log stores.

S3: a writer that lost the put-if-absent race read the winner's commit through s3fs, which
first sized the object from its cached listing of ``_delta_log`` (taken before the winner
committed) and reported it missing — the loser retried the same version until it gave up
(CommitRetriesExceededError after 100 attempts while the other writer kept committing).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx

pytestmark = pytest.mark.s3

SCHEMA = pa.schema([("id", pa.int64())])


def test_s3_loser_reads_the_winner_despite_a_cached_listing(s3_bucket):
    prefix, options = s3_bucket
    uri = f"{prefix}/race"
    deltatx.create_table(uri, SCHEMA, storage_options=options)
    # its own s3fs instance, as in another process (a shared instance sees the winner's invalidation)
    loser = deltatx.Table(uri, storage_options={**options, "skip_instance_cache": True})
    winner = deltatx.Table(uri, storage_options=options)
    tx = loser.transaction()
    tx.append(pa.table({"id": [1]}, schema=SCHEMA))
    loser.refresh()  # lists _delta_log: s3fs caches a listing without version 1
    assert winner.append(pa.table({"id": [2]}, schema=SCHEMA)).version == 1
    result = tx.commit()
    assert (result.version, result.attempts) == (2, 2)
    assert sorted(deltatx.Table(uri, storage_options=options).to_arrow()["id"].to_pylist()) == [1, 2]
