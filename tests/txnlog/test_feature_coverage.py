"""deltatx writes every table feature PROTOCOL.md defines.

The feature lists below are data copied from delta-io/delta PROTOCOL.md: the table of
"Appendix > Valid Feature Names in Table Features", plus the features that have their own section
but no row in that table yet ("Type Widening", "Variant Data Type", "Variant Shredding").
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from deltatx.errors import UnsupportedFeatureError
from deltatx.txnlog.actions import Metadata
from deltatx.txnlog.features import (
    FEATURE_DEPENDENCIES,
    SUPPORTED_READER_FEATURES,
    SUPPORTED_WRITER_FEATURES,
    check_writable,
    required_protocol,
    writer_features,
)
from deltatx.txnlog.schema import schema_to_json

# PROTOCOL.md, Appendix "Valid Feature Names in Table Features": name -> readers and writers?
PROTOCOL_FEATURES: dict[str, str] = {
    "appendOnly": "writer",
    "invariants": "writer",
    "checkConstraints": "writer",
    "generatedColumns": "writer",
    "allowColumnDefaults": "writer",
    "changeDataFeed": "writer",
    "columnMapping": "reader-writer",
    "identityColumns": "writer",
    "deletionVectors": "reader-writer",
    "rowTracking": "writer",
    "timestampNtz": "reader-writer",
    "domainMetadata": "writer",
    "v2Checkpoint": "reader-writer",
    "catalogManaged": "reader-writer",
    "icebergCompatV1": "writer",
    "icebergCompatV2": "writer",
    "clustering": "writer",
    "vacuumProtocolCheck": "reader-writer",
    "inCommitTimestamp": "writer",
    # sections "Type Widening", "Variant Data Type", "Variant Shredding": readerFeatures and writerFeatures
    "typeWidening": "reader-writer",
    "variantType": "reader-writer",
    "variantShredding": "reader-writer",
}

#: catalogManaged is written through deltatx.catalog only, but written: nothing is left out
NOT_WRITTEN: set[str] = set()
NOT_READ: set[str] = set()

#: supported names outside PROTOCOL.md's list: the preview names older Delta releases wrote, and
#: checkpointProtection (delta-io/delta protocol RFC "Checkpoint Protection", written by Delta 3.3+)
EXTRA_WRITER_FEATURES = {"typeWidening-preview", "variantType-preview", "checkpointProtection"}
EXTRA_READER_FEATURES = {"typeWidening-preview", "variantType-preview"}


def test_every_protocol_writer_feature_is_supported_but_the_exceptions():
    expected = set(PROTOCOL_FEATURES) - NOT_WRITTEN
    assert set(SUPPORTED_WRITER_FEATURES) == expected | EXTRA_WRITER_FEATURES


def test_every_protocol_reader_feature_is_supported_but_the_exceptions():
    readers = {f for f, kind in PROTOCOL_FEATURES.items() if kind == "reader-writer"}
    expected = readers - NOT_READ
    assert set(SUPPORTED_READER_FEATURES) == expected | EXTRA_READER_FEATURES


def test_a_reader_feature_is_always_a_writer_feature_too():
    """PROTOCOL.md: a reader feature is listed in both lists, so deltatx must write what it reads."""
    assert set(SUPPORTED_READER_FEATURES) <= set(SUPPORTED_WRITER_FEATURES)


SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string())])


@pytest.mark.parametrize("feature", sorted(SUPPORTED_WRITER_FEATURES))
def test_each_supported_feature_can_be_added_by_name_and_the_table_stays_writable(feature):
    """``delta.feature.<name>=supported`` gives a protocol with the feature (and what it depends
    on) — named, or implied by a legacy writer version — and deltatx accepts to write the result."""
    protocol = required_protocol({f"delta.feature.{feature}": "supported"}, SCHEMA)
    assert feature in writer_features(protocol)
    for needed in FEATURE_DEPENDENCIES.get(feature, ()):
        assert needed in writer_features(protocol)
    if PROTOCOL_FEATURES.get(feature) == "reader-writer" or feature.endswith("-preview"):
        assert protocol.min_reader_version == 3 and feature in protocol.reader_features
    metadata = Metadata(id="t", schema_string=schema_to_json(SCHEMA), partition_columns=("part",))
    check_writable(protocol, metadata)


def test_an_unknown_feature_is_refused_by_name():
    with pytest.raises(UnsupportedFeatureError) as info:
        required_protocol({"delta.feature.teleportation": "supported"}, SCHEMA)
    assert info.value.feature == "teleportation"
