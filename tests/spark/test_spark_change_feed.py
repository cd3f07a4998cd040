"""Spark-distributed DML on a change-data-feed table: refused before any job (its tasks' change
rows do not reach the driver yet), nothing written; a DELETE of whole partitions, which needs no
change files, runs."""

from __future__ import annotations

import pyarrow as pa
import pytest
from tablefiles import data_files

import deltatx
from deltatx.errors import UnsupportedFeatureError
from deltatx.spark.dml import SparkTable

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("value", pa.int64())])


def test_spark_dml_on_a_change_feed_table_is_refused_and_writes_nothing(spark, tmp_path):
    uri = str(tmp_path / "t")
    t = deltatx.create_table(uri, SCHEMA, partition_by=["part"], properties={"delta.enableChangeDataFeed": "true"})
    t.append(pa.table({"id": [1, 2, 3], "part": ["a", "a", "b"], "value": [1, 2, 3]}, schema=SCHEMA))
    before = data_files(uri)
    table = SparkTable(spark, uri)
    source = pa.table({"id": [1], "part": ["a"], "value": [10]}, schema=SCHEMA)
    for run in (lambda: table.delete("id = 1"), lambda: table.update("id = 1", set={"value": "0"}),
                lambda: table.merge(source, "t.id = s.id").when_matched_update_all().execute()):
        with pytest.raises(UnsupportedFeatureError, match="change data files") as info:
            run()
        assert info.value.feature == "changeDataFeed"
        assert deltatx.Table(uri).version == 1 and data_files(uri) == before
    table.delete("part = 'b'")  # whole files: readers take the removes as deletes
    out = deltatx.Table(uri).changes(starting_version=2)
    assert out.select(["id", "_change_type"]).to_pylist() == [{"id": 3, "_change_type": "delete"}]
