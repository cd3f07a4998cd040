"""The typed columns of a checkpoint's ``add`` struct: ``stats_parsed`` and ``partitionValues_parsed``.

PROTOCOL.md ("Checkpoint Schema", "Requirements for Writers"): with the table property
``delta.checkpoint.writeStatsAsStruct=true`` a checkpoint carries each file's statistics as a
typed struct (``stats_parsed``) and, on a partitioned table, its partition values as one
(``partitionValues_parsed``); with ``delta.checkpoint.writeStatsAsJson=false`` it leaves the JSON
``stats`` string out. Readers that skip files by these typed columns (Spark, kernels) then need
not parse JSON. Both structs use the physical column names (column mapping), as the JSON does.

File state stays JSON strings in memory: the structs are built here, columnar, only when a
checkpoint is written, from the same parsers reads use (so a bound reads back as it was written).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from . import column_mapping
from .partition_values import partition_column
from .stats import parse_stats

if TYPE_CHECKING:
    from .snapshot import Snapshot

WRITE_STATS_AS_STRUCT = "delta.checkpoint.writeStatsAsStruct"
WRITE_STATS_AS_JSON = "delta.checkpoint.writeStatsAsJson"


def writes_stats_as_struct(properties: dict[str, str]) -> bool:
    """``delta.checkpoint.writeStatsAsStruct`` (default false, as deltalake and the protocol)."""
    return properties.get(WRITE_STATS_AS_STRUCT, "false").strip().lower() == "true"


def writes_stats_as_json(properties: dict[str, str]) -> bool:
    """``delta.checkpoint.writeStatsAsJson`` (default true)."""
    return properties.get(WRITE_STATS_AS_JSON, "true").strip().lower() != "false"


def add_columns(snapshot: "Snapshot", files: pa.Table) -> tuple[list[pa.Field], list[pa.ChunkedArray]]:
    """The extra ``add`` fields and their columns for ``files`` (rows of ``snapshot.files``):
    ``partitionValues_parsed`` when partitioned, then ``stats_parsed``. Empty unless
    ``writeStatsAsStruct`` is on."""
    if not writes_stats_as_struct(snapshot.properties):
        return [], []
    schema = snapshot.schema
    mapping = column_mapping.of(snapshot.metadata)
    physical = mapping.physical_schema(schema) if mapping is not None else schema
    partitioned = set(snapshot.partition_columns)
    fields: list[pa.Field] = []
    columns: list[pa.ChunkedArray] = []
    if partitioned:

        values = [(physical.field(i).name, partition_column(files, f))
                  for i, f in enumerate(schema) if f.name in partitioned]
        parsed = pa.StructArray.from_arrays([v for _, v in values], names=[n for n, _ in values]) if values \
            else pa.nulls(files.num_rows, pa.struct([]))
        fields.append(pa.field("partitionValues_parsed", parsed.type))
        columns.append(pa.chunked_array([parsed]))
    data = pa.schema([_plain(physical.field(i)) for i, f in enumerate(schema) if f.name not in partitioned])
    stats = parse_stats(files.column("stats"), data)
    fields.append(pa.field("stats_parsed", stats.type))
    columns.append(pa.chunked_array([stats]))
    return fields, columns


def _plain(field: pa.Field) -> pa.Field:
    """``field`` without its Delta metadata (the checkpoint's struct fields carry none)."""
    return pa.field(field.name, _plain_type(field.type), field.nullable)


def _plain_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([_plain(f) for f in t])
    return t
