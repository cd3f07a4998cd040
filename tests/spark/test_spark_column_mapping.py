"""Spark paths on column-mapped tables: the format reads and appends with physical names, Spark's
own Parquet reader/writer step aside (their files would use logical names), Spark DML runs the
core's mapped reads and writes, and writes that would need new physical names are refused typed.

Tiny data and few Spark jobs per test: every job costs ~1-2 s on the shared local session.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tablefiles import data_files

import deltatx
import deltatx.spark as dspark
from deltatx.errors import ColumnMappingError, NativeUnavailableError
from deltatx.spark.dml import SparkTable

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("value", pa.int64())])


def make(uri: str, mode: str) -> deltatx.Table:
    table = deltatx.create_table(uri, SCHEMA, partition_by=["part"], properties={"delta.columnMapping.mode": mode})
    ids = list(range(12))
    table.append(pa.table({"id": ids, "part": [f"p{i % 2}" for i in ids], "value": [i * 10 for i in ids]},
                          schema=SCHEMA))
    table.rename_column("value", "amount")
    return deltatx.Table(uri)


def rows(uri: str) -> list[dict]:
    return sorted(deltatx.Table(uri).to_arrow().to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize("mode", ["name", "id"])
def test_read_and_append_through_the_format(spark, table_uri, mode):
    make(table_uri, mode)
    with pytest.raises(NativeUnavailableError, match="column mapping"):
        dspark.read(spark, table_uri, engine="parquet")
    df = dspark.read(spark, table_uri)  # auto: the format
    assert sorted((r.id, r.part, r.amount) for r in df.collect()) == [(i, f"p{i % 2}", i * 10) for i in range(12)]
    filtered = spark.read.format("deltatx").option("filterPushdown", "true").load(table_uri).where("amount >= 100")
    assert sorted(r.id for r in filtered.collect()) == [10, 11]

    new = spark.createDataFrame([(20, "p0", 200), (21, "p9", 210)], "id long, part string, amount long")
    with pytest.raises(NativeUnavailableError, match="column mapping"):
        dspark.write(new, table_uri, engine="parquet")
    dspark.write(new, table_uri)  # auto: the format, with physical names and field ids
    assert rows(table_uri)[-2:] == [{"id": 20, "part": "p0", "amount": 200}, {"id": 21, "part": "p9", "amount": 210}]
    table = deltatx.Table(table_uri)
    physical = {f.name: f for f in table.schema}
    newest = [p for p in table.files()["path"].to_pylist() if p.startswith(
        deltatx.txnlog.column_mapping.physical_name(physical["part"]) + "=p9")]
    assert len(newest) == 1
    file_schema = pq.read_schema(f"{table_uri}/{newest[0]}")
    assert file_schema.names == [deltatx.txnlog.column_mapping.physical_name(physical[c]) for c in ("id", "amount")]


def test_spark_dml_on_a_mapped_table(spark, table_uri):
    make(table_uri, "name")
    SparkTable(spark, table_uri).delete("amount > 80")
    SparkTable(spark, table_uri).update("id = 3", {"amount": "-1"})
    assert rows(table_uri) == [{"id": i, "part": f"p{i % 2}", "amount": -1 if i == 3 else i * 10} for i in range(9)]


def test_writes_that_need_new_physical_names_are_refused(spark, tmp_path):
    created = str(tmp_path / "new")
    df = spark.createDataFrame([(1, "p0", 10)], "id long, part string, amount long")
    with pytest.raises(ColumnMappingError, match="create"):
        dspark.write(df, created, **{"delta.columnMapping.mode": "name"})
    assert not (tmp_path / "new").exists() or not data_files(created)

    uri = str(tmp_path / "t")
    make(uri, "name")
    version, files = deltatx.Table(uri).version, data_files(uri)
    wider = spark.createDataFrame([(1, "p0", 10, "x")], "id long, part string, amount long, extra string")
    with pytest.raises(ColumnMappingError, match="schema"):
        dspark.write(wider, uri, mergeSchema=True)
    assert deltatx.Table(uri).version == version and data_files(uri) == files


def test_stream_from_a_mapped_table_into_a_mapped_table(spark, tmp_path):
    source, sink = str(tmp_path / "source"), str(tmp_path / "sink")
    make(source, "id")
    deltatx.create_table(sink, pa.schema([("id", pa.int64()), ("part", pa.string()), ("amount", pa.int64())]),
                         properties={"delta.columnMapping.mode": "name"})
    query = (spark.readStream.format("deltatx").load(source).writeStream.format("deltatx")
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start(sink))
    query.awaitTermination()
    assert query.exception() is None
    assert rows(sink) == rows(source) == [{"id": i, "part": f"p{i % 2}", "amount": i * 10} for i in range(12)]
