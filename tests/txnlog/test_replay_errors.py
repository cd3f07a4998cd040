"""A damaged log gives a typed error that names the version, never a wrong snapshot."""

from __future__ import annotations

import pytest
from txnlog_logs import LogWriter, add_row

from deltatx.errors import CorruptLogError, TableNotFoundError
from deltatx.txnlog.checkpoint import write_checkpoint
from deltatx.txnlog.snapshot import load_snapshot
from deltatx.txnlog.store import commit_name


def _table_with_commits(log: LogWriter, n: int) -> None:
    log.create()
    for i in range(n):
        log.commit(adds=[add_row(f"f{i}.parquet")])


def test_truncated_commit_line(log: LogWriter) -> None:
    _table_with_commits(log, 2)
    log.raw(b'{"commitInfo":{"operation":"WRITE"}}\n{"add":{"path":"x.parquet","partitionVal')
    with pytest.raises(CorruptLogError, match="commit 3, line 2") as info:
        load_snapshot(log.store)
    assert info.value.version == 3 and info.value.line == 2
    assert load_snapshot(log.store, version=2).files.num_rows == 2  # older versions still load


def test_missing_required_field(log: LogWriter) -> None:
    _table_with_commits(log, 1)
    log.raw(b'{"add":{"path":"x.parquet","size":1,"modificationTime":1,"dataChange":true}}\n')
    with pytest.raises(CorruptLogError, match="partitionValues") as info:
        load_snapshot(log.store)
    assert info.value.version == 2


def test_empty_commit_file(log: LogWriter) -> None:
    _table_with_commits(log, 1)
    log.raw(b"\n")
    with pytest.raises(CorruptLogError, match="commit 2 is empty"):
        load_snapshot(log.store)


def test_gap_in_versions(log: LogWriter) -> None:
    _table_with_commits(log, 4)
    log.store.delete_log_file(commit_name(2))
    with pytest.raises(CorruptLogError, match="commit 2 is missing") as info:
        load_snapshot(log.store)
    assert info.value.version == 2
    assert load_snapshot(log.store, version=1).files.num_rows == 1


def test_gap_after_a_checkpoint(log: LogWriter) -> None:
    _table_with_commits(log, 5)
    write_checkpoint(log.store, load_snapshot(log.store, version=2))
    log.store.delete_log_file(commit_name(4))
    with pytest.raises(CorruptLogError, match="commit 4 is missing"):
        load_snapshot(log.store)


def test_gap_found_by_refresh(log: LogWriter) -> None:
    _table_with_commits(log, 1)
    snap = load_snapshot(log.store)
    for i in range(3):
        log.commit(adds=[add_row(f"g{i}.parquet")])
    log.store.delete_log_file(commit_name(3))
    with pytest.raises(CorruptLogError, match="commit 3 is missing"):
        snap.refresh(log.store)


def test_commit_zero_missing_without_checkpoint(log: LogWriter) -> None:
    _table_with_commits(log, 2)
    log.store.delete_log_file(commit_name(0))
    with pytest.raises(CorruptLogError, match="commit 0 is missing"):
        load_snapshot(log.store)


def test_commit_zero_without_metadata(log: LogWriter) -> None:
    log.commit(adds=[add_row("a.parquet")])
    with pytest.raises(CorruptLogError, match="no protocol action"):
        load_snapshot(log.store)


def test_no_log_at_all(store) -> None:
    with pytest.raises(TableNotFoundError, match="no _delta_log folder"):
        load_snapshot(store)


@pytest.mark.parametrize("field", ["path", "partitionValues", "size", "modificationTime", "dataChange"])
def test_a_checkpoint_whose_adds_lack_a_required_field_is_refused(tmp_path, field) -> None:
    """As a JSON commit missing a required add field is refused, so is a checkpoint: a null
    partitionValues read as null partitions, and a null path crashed reads with a raw TypeError."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    import deltatx
    from deltatx.errors import CorruptCheckpointError

    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, pa.schema([("id", pa.int64()), ("p", pa.string())]), partition_by=["p"])
    t.append(pa.table({"id": [1, 2], "p": ["a", "b"]}))
    t.checkpoint()
    checkpoint = os.path.join(uri, "_delta_log", f"{t.version:020d}.checkpoint.parquet")
    table = pq.read_table(checkpoint)
    adds = table.column("add").combine_chunks()
    rows = [None if r is None else {**r, field: None} for r in adds.to_pylist()]
    pq.write_table(table.set_column(table.schema.get_field_index("add"), "add", pa.array(rows, adds.type)), checkpoint)
    for v in range(t.version + 1):  # the checkpoint alone describes the table
        os.remove(os.path.join(uri, "_delta_log", commit_name(v)))
    with pytest.raises(CorruptCheckpointError, match=f"no '{field}'"):
        deltatx.Table(uri).to_arrow()
