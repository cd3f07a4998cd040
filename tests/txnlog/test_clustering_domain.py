"""The delta.clustering domain (txnlog/clustering.py): JSON both ways, names and physical paths."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pytest

from deltatx.errors import CorruptLogError
from deltatx.txnlog.actions import DomainMetadata, Protocol
from deltatx.txnlog.clustering import (
    clustering_domain,
    clustering_paths,
    is_clustered,
    join_path,
    logical_name,
    physical_path,
    resolve_field,
    split_name,
)
from deltatx.txnlog.features import required_protocol

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), metadata={"delta.columnMapping.physicalName": "col-1"}),
    pa.field("s", pa.struct([pa.field("Inner", pa.string(), metadata={"delta.columnMapping.physicalName": "col-3"})]),
             metadata={"delta.columnMapping.physicalName": "col-2"}),
])


def test_domain_round_trip_uses_delta_sparks_nested_paths():
    domain = clustering_domain([("id",), ("s", "Inner")])
    assert domain.domain == "delta.clustering" and not domain.removed
    assert orjson.loads(domain.configuration) == {"clusteringColumns": [["id"], ["s", "Inner"]]}
    assert clustering_paths({"delta.clustering": domain}) == [("id",), ("s", "Inner")]


def test_domain_reading_accepts_protocol_md_flat_names_none_and_removed():
    flat = DomainMetadata("delta.clustering", '{"clusteringColumns":["col-a","col-b"]}')
    assert clustering_paths({"delta.clustering": flat}) == [("col-a",), ("col-b",)]
    assert clustering_paths({}) is None
    assert clustering_paths({"delta.clustering": DomainMetadata("delta.clustering", "{}", removed=True)}) is None
    assert clustering_paths({"delta.clustering": clustering_domain([])}) == []


@pytest.mark.parametrize("configuration", ['{"clusteringColumns": 3}', "not json", '{"clusteringColumns": [[1]]}'])
def test_unreadable_domain_is_a_corrupt_log(configuration):
    with pytest.raises(CorruptLogError):
        clustering_paths({"delta.clustering": DomainMetadata("delta.clustering", configuration)})


def test_names_paths_and_column_mapping_hook():
    assert split_name("s.Inner") == ("s", "Inner") and split_name("`a.b`.c") == ("a.b", "c")
    assert join_path(("a.b", "c")) == "`a.b`.c"
    assert resolve_field(list(SCHEMA), ("S", "inner"))[0] == ("s", "Inner")  # case-insensitive fallback
    assert resolve_field(list(SCHEMA), ("nope",)) is None
    assert physical_path(SCHEMA, {}, ("s", "Inner")) == ("s", "Inner")  # mapping off: logical names
    mapped = {"delta.columnMapping.mode": "name"}
    assert physical_path(SCHEMA, mapped, ("s", "Inner")) == ("col-2", "col-3")
    assert logical_name(SCHEMA, mapped, ("col-2", "col-3")) == "s.Inner"
    assert logical_name(SCHEMA, {}, ("gone",)) is None


def test_clustering_feature_brings_domain_metadata_and_writer_7():
    protocol = required_protocol({"delta.feature.clustering": "supported"}, pa.schema([("x", pa.int64())]))
    assert protocol.min_reader_version == 1 and protocol.min_writer_version == 7
    assert {"clustering", "domainMetadata"} <= set(protocol.writer_features)
    assert is_clustered(protocol) and not is_clustered(Protocol(1, 2))
