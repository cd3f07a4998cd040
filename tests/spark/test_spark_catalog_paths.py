"""Path reads of a catalog-managed table through Spark are refused, the change feed and streams
included: the table's latest version is whatever its catalog ratified (PROTOCOL.md)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx


@pytest.fixture
def managed(tmp_path):
    cat = deltatx.Catalog(f"sqlite:///{tmp_path}/cat.db")
    path = str(tmp_path / "a")
    cat.create_table("a", path, pa.schema([("id", pa.int64())]), properties={"delta.enableChangeDataFeed": "true"})
    cat.table("a").append(pa.table({"id": [1]}))
    return path


def _refused(action) -> None:
    with pytest.raises(Exception) as info:
        action()
    assert "CatalogManagedTableError" in str(info.value) or "catalog-managed" in str(info.value)


def test_a_change_feed_read_by_path_is_refused(spark, managed):
    _refused(lambda: spark.read.format("deltatx").option("readChangeFeed", "true")
             .option("startingVersion", 0).load(managed).collect())
    _refused(lambda: spark.read.format("deltatx").load(managed).collect())


@pytest.mark.parametrize("change_feed", [False, True], ids=["rows", "change_feed"])
def test_a_stream_by_path_is_refused(spark, managed, change_feed):
    reader = spark.readStream.format("deltatx")
    if change_feed:
        reader = reader.option("readChangeFeed", "true")

    def run():
        query = (reader.load(managed).writeStream.format("memory").queryName(f"refused_{change_feed}")
                 .trigger(availableNow=True).start())
        try:
            query.awaitTermination()
        finally:
            query.stop()

    _refused(run)
