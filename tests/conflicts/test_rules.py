"""Protocol, metadata, domain and app-id checks; check order; rebase; messages."""

from __future__ import annotations

import orjson
import pytest

from conflict_builders import (
    TABLE_SCHEMA,
    WS,
    adds,
    file_row,
    metadata,
    predicate,
    remove_row,
    removes,
    txn,
    winner,
)
from deltatx.conflicts import CHECKS, ReadSet, TransactionInfo, check_commit, check_commits, is_own_commit
from deltatx.errors import (
    ConcurrentAppendException,
    ConcurrentModificationException,
    ConcurrentTransactionException,
    MetadataChangedException,
    ProtocolChangedException,
    UnsupportedFeatureError,
)
from deltatx.txnlog.actions import DomainMetadata, Protocol, Txn
from deltatx.txnlog.schema import schema_to_json


def updating_part_1(**kwargs) -> TransactionInfo:
    return txn(
        read_set=ReadSet(predicates=(predicate("part = 1"),), files=frozenset({"part=1/a.parquet"})),
        remove_table=removes(remove_row("part=1/a.parquet", 1)),
        add_table=adds(file_row("part=1/b.parquet", 1)),
        operation="UPDATE",
        **kwargs,
    )


# --------------------------------------------------------------------------- order


def test_checks_run_in_deltas_order():
    assert [name for name, _ in CHECKS] == [
        "protocol", "metadata", "domains", "app_ids", "backfill", "row_ids", "row_level",
        "added_files", "deleted_read", "deleted_deleted", "enablement",
    ]


def test_metadata_conflict_is_reported_before_file_conflicts():
    won = winner(6, "MERGE", metadata=metadata(configuration={"owner": "x"}),
                 add_rows=[file_row("part=1/z.parquet", 1)], remove_rows=[remove_row("part=1/a.parquet", 1)])
    with pytest.raises(MetadataChangedException):
        check_commit(updating_part_1(), won)


# --------------------------------------------------------------------------- protocol


def test_winner_protocol_is_adopted():
    new = Protocol(1, 3)
    rebased = check_commit(updating_part_1(), winner(6, "ADD CONSTRAINT", protocol=new))
    assert rebased.read_protocol == new


def test_winner_protocol_we_cannot_write_is_refused():
    unknown = Protocol(3, 7, reader_features=("someFutureReaderFeature",),
                       writer_features=("someFutureReaderFeature",))
    with pytest.raises(UnsupportedFeatureError) as info:
        check_commit(updating_part_1(), winner(6, "UPGRADE PROTOCOL", protocol=unknown))
    assert info.value.feature == "someFutureReaderFeature"


def test_winner_removing_a_feature_conflicts():
    read = Protocol(1, 7, writer_features=("appendOnly", "domainMetadata"))
    dropped = Protocol(1, 7, writer_features=("appendOnly",))
    with pytest.raises(ProtocolChangedException) as info:
        check_commit(updating_part_1(read_protocol=read), winner(6, "DROP FEATURE", protocol=dropped))
    assert "domainMetadata" in str(info.value)


def test_legacy_to_features_upgrade_keeping_features_is_adopted():
    upgraded = Protocol(1, 7, writer_features=("appendOnly", "invariants", "domainMetadata"))
    assert check_commit(updating_part_1(), winner(6, "UPGRADE", protocol=upgraded)).read_protocol == upgraded


# --------------------------------------------------------------------------- metadata

ALLOWED = [
    {"delta.enableDeletionVectors": "true"},
    {"delta.enableRowTracking": "true", "delta.rowTracking.materializedRowIdColumnName": "_row_id_x"},
    {"delta.checkpointPolicy": "v2"},
    {"delta.enableInCommitTimestamps": "true", "delta.inCommitTimestampEnablementVersion": "6",
     "delta.inCommitTimestampEnablementTimestamp": "1700000000000"},
    {"io.unitycatalog.tableId": "abc"},
]
REFUSED = [
    {"delta.enableDeletionVectors": "false"},
    {"delta.checkpointPolicy": "classic"},
    {"delta.appendOnly": "true"},
    {"owner": "someone"},
]


@pytest.mark.parametrize("config", ALLOWED, ids=[next(iter(c)) for c in ALLOWED])
def test_allow_listed_property_change_is_adopted(config):
    new = metadata(configuration=config)
    rebased = check_commit(updating_part_1(), winner(6, "SET TBLPROPERTIES", metadata=new))
    assert rebased.read_metadata == new


@pytest.mark.parametrize("config", REFUSED, ids=[next(iter(c)) for c in REFUSED])
def test_other_property_change_conflicts(config):
    with pytest.raises(MetadataChangedException) as info:
        check_commit(updating_part_1(), winner(6, "SET TBLPROPERTIES", metadata=metadata(configuration=config)))
    assert next(iter(config)) in str(info.value)


def test_removed_property_conflicts():
    loser = updating_part_1(read_metadata=metadata(configuration={"delta.enableDeletionVectors": "true"}))
    with pytest.raises(MetadataChangedException, match="removed"):
        check_commit(loser, winner(6, "UNSET TBLPROPERTIES", metadata=metadata()))


def test_both_changing_metadata_conflicts_even_if_allowed():
    loser = updating_part_1(new_metadata=metadata(configuration={"a": "b"}))
    won = winner(6, "SET TBLPROPERTIES", metadata=metadata(configuration={"delta.enableDeletionVectors": "true"}))
    with pytest.raises(MetadataChangedException):
        check_commit(loser, won)


def test_identical_metadata_is_not_a_change():
    rebased = check_commit(updating_part_1(), winner(6, "WRITE", metadata=metadata()))
    assert rebased.read_metadata == metadata()


def test_partitioning_change_conflicts():
    with pytest.raises(MetadataChangedException, match="partition columns"):
        check_commit(updating_part_1(), winner(6, "REPLACE", metadata=metadata(partition_columns=())))


def _column_mapped_schema() -> str:
    schema = orjson.loads(schema_to_json(TABLE_SCHEMA))
    for i, f in enumerate(schema["fields"], start=1):
        f["metadata"] = {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": f["name"]}
    return orjson.dumps(schema).decode()


def test_enabling_column_mapping_with_field_metadata_is_adopted():
    new = metadata(schema_string=_column_mapped_schema(),
                   configuration={"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "3"})
    assert check_commit(updating_part_1(), winner(6, "SET TBLPROPERTIES", metadata=new)).read_metadata == new


def test_field_metadata_change_without_enabling_column_mapping_conflicts():
    new = metadata(schema_string=_column_mapped_schema())
    with pytest.raises(MetadataChangedException, match="schema"):
        check_commit(updating_part_1(), winner(6, "CHANGE COLUMN", metadata=new))


def test_metadata_change_fails_a_blind_append_too():
    insert = txn(add_table=adds(file_row("part=1/new.parquet", 1)), operation="WRITE")
    assert insert.is_blind_append
    with pytest.raises(MetadataChangedException):
        check_commit(insert, winner(6, "ADD COLUMNS", metadata=metadata(configuration={"x": "y"})))


# --------------------------------------------------------------------------- domains and app ids


def test_same_domain_conflicts():
    loser = updating_part_1(domains=(DomainMetadata("myapp.watermark", "{}"),))
    won = winner(6, "WRITE", domains=[DomainMetadata("myapp.watermark", '{"v":2}')])
    with pytest.raises(ConcurrentTransactionException) as info:
        check_commit(loser, won)
    assert info.value.conflict == "domain myapp.watermark"


def test_different_domains_and_row_tracking_domain_do_not_conflict():
    loser = updating_part_1(domains=(DomainMetadata("a", "{}"), DomainMetadata("delta.rowTracking", "{}")))
    won = winner(6, "WRITE", domains=[DomainMetadata("b", "{}"), DomainMetadata("delta.rowTracking", "{}")])
    assert check_commit(loser, won).domains == loser.domains


def test_app_id_written_by_winner_conflicts_only_if_used():
    won = winner(6, "STREAMING UPDATE", txns=[Txn("job-a", 7)], blind=True,
                 add_rows=[file_row("part=2/s.parquet", 2)])
    unrelated = updating_part_1(txns=(Txn("job-b", 3),))
    assert check_commit(unrelated, won).txns == (Txn("job-b", 3),)
    looked_up = txn(read_set=ReadSet(app_ids=frozenset({"job-a"})))
    with pytest.raises(ConcurrentTransactionException) as info:
        check_commit(looked_up, won)
    assert info.value.conflict == "appId job-a"


# --------------------------------------------------------------------------- rebase across winners


def test_check_commits_rebases_through_several_winners():
    new_protocol = Protocol(1, 3)
    new_metadata = metadata(configuration={"delta.enableDeletionVectors": "true"})
    winners = [
        winner(6, "ADD CONSTRAINT", protocol=new_protocol),
        winner(7, "WRITE", blind=True, add_rows=[file_row("part=1/w.parquet", 1)]),
        winner(8, "SET TBLPROPERTIES", metadata=new_metadata),
    ]
    rebased = check_commits(updating_part_1(), winners)
    assert (rebased.read_protocol, rebased.read_metadata) == (new_protocol, new_metadata)
    assert rebased.isolation_level is WS


def test_own_commit_is_recognised_by_txn_id():
    loser = updating_part_1()
    assert is_own_commit(loser, winner(6, "UPDATE", commit_info={"operation": "UPDATE", "txnId": "loser"}))
    assert not is_own_commit(loser, winner(6, "UPDATE"))


def test_blind_append_flag_must_match_the_read_set():
    with pytest.raises(ValueError, match="is_blind_append"):
        updating_part_1().replace(is_blind_append=True)


# --------------------------------------------------------------------------- messages


def test_message_names_version_operation_partition_and_advice():
    won = winner(42, "MERGE", add_rows=[file_row("part=1/m.parquet", 1)], blind=False)
    with pytest.raises(ConcurrentAppendException) as info:
        check_commit(updating_part_1(), won)
    text = str(info.value)
    assert "version 42" in text
    assert "MERGE" in text
    assert "part=1" in text
    assert "UPDATE" in text  # our own operation
    assert "predicate" in text  # what to do: make the predicate name the partition
    assert info.value.commit_info == won.commit_info


def test_message_of_commit_without_commit_info():
    won = winner(6, "X", commit_info={}, add_rows=[file_row("part=1/m.parquet", 1)])
    with pytest.raises(ConcurrentAppendException, match="unknown operation"):
        check_commit(updating_part_1(), won)


def test_every_conflict_is_a_concurrent_modification_and_pickles():
    import pickle

    won = winner(6, "MERGE", add_rows=[file_row("part=1/m.parquet", 1)])
    with pytest.raises(ConcurrentModificationException) as info:
        check_commit(updating_part_1(), won)
    copy = pickle.loads(pickle.dumps(info.value))
    assert (copy.version, copy.operation, copy.conflict) == (6, "MERGE", "part=1")
    assert str(copy) == str(info.value)

