"""Variant columns through Spark: ``format("deltatx")`` reads a deltatx variant table as Spark's
VariantType, and Spark's ``parse_json`` values append through the format; ``deltatx.spark.write``
falls back to the format for them (Spark's own Parquet writer is not used for variant columns)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import deltatx
import deltatx.spark as dspark
from deltatx.errors import NativeUnavailableError


def _json_by_id(uri: str) -> dict[int, str | None]:
    rows = deltatx.Table(uri).to_arrow().sort_by("id")
    return dict(zip(rows["id"].to_pylist(), deltatx.variant.to_json(rows["v"]).to_pylist()))


def test_spark_reads_and_writes_variant_columns(spark, table_uri):
    from pyspark.sql.types import VariantType

    t = deltatx.create_table(table_uri, pa.schema([("id", pa.int64()), ("v", deltatx.VARIANT)]))
    t.append(pa.table({"id": [1, 2], "v": deltatx.variant.parse_json(['{"a":[1,2]}', None])}, schema=t.schema))

    df = spark.read.format("deltatx").load(table_uri)
    assert isinstance(df.schema["v"].dataType, VariantType)
    read = {r["id"]: (None if r["v"] is None else r["v"].toJson()) for r in df.collect()}
    assert read == {1: '{"a":[1,2]}', 2: None}

    spark.sql("""SELECT 3L AS id, parse_json('{"b":"x"}') AS v""").write.format("deltatx").mode("append").save(table_uri)
    fourth = spark.sql("""SELECT 4L AS id, parse_json('[true]') AS v""")
    with pytest.raises(NativeUnavailableError, match="'v' is a variant"):
        dspark.write(fourth, table_uri, engine="parquet")
    dspark.write(fourth, table_uri)  # engine="auto": through the format
    assert _json_by_id(table_uri) == {1: '{"a":[1,2]}', 2: None, 3: '{"b":"x"}', 4: "[true]"}
    assert "variantType" in deltatx.Table(table_uri).protocol.writer_features
