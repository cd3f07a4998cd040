"""Checkpoints' ``add.stats_parsed`` (PROTOCOL.md "Checkpoint Schema") and zero float bounds.

A writer with ``delta.checkpoint.writeStatsAsJson=false`` leaves ``add.stats`` null (or out) and
keeps the statistics in the typed ``stats_parsed`` struct; deltatx turns them back into the JSON
its file state carries (columnar), and a present JSON string wins. Float bounds follow Parquet's
signed-zero rule.
"""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from txnlog_logs import LogWriter, add_row

from deltatx.txnlog import checkpoint as ckpt
from deltatx.txnlog.checkpoint import build_checkpoint_table, checkpoint_name, read_checkpoint
from deltatx.txnlog.snapshot import load_snapshot
from deltatx.txnlog.stats import compute_stats, parse_stats, record_counts, stats_json_from_parsed
from deltatx.txnlog.store import LogStore

UTC = dt.timezone.utc

BOUNDS = pa.struct([
    ("i", pa.int32()), ("s", pa.string()), ("f", pa.float64()), ("g", pa.float32()), ("d", pa.date32()),
    ("ts", pa.timestamp("us", tz="UTC")), ("ntz", pa.timestamp("us")), ("dec", pa.decimal128(5, 2)),
    ("n", pa.struct([("x", pa.int64())])),
])
PARSED = pa.struct([
    ("numRecords", pa.int64()), ("minValues", BOUNDS), ("maxValues", BOUNDS),
    ("nullCount", pa.struct([("i", pa.int64()), ("n", pa.struct([("x", pa.int64())]))])),
    ("tightBounds", pa.bool_()),
])
DATA_SCHEMA = pa.schema([
    ("i", pa.int32()), ("s", pa.string()), ("f", pa.float64()), ("g", pa.float32()), ("d", pa.date32()),
    ("ts", pa.timestamp("us", tz="UTC")), ("ntz", pa.timestamp("us")), ("dec", pa.decimal128(5, 2)),
    ("n", pa.struct([("x", pa.int64())])),
])


def _bounds(**values):
    out = {name: None for name in BOUNDS.names}
    out.update(values)
    return out


def test_stats_json_from_parsed_round_trips_through_parse_stats() -> None:
    low = _bounds(i=-3, s='a"\\b\né', f=-0.0, g=0.1, d=dt.date(999, 1, 2),
                  ts=dt.datetime(1969, 12, 31, 23, 59, 59, 999_500, tzinfo=UTC),
                  ntz=dt.datetime(2024, 1, 1, 1, 2, 3, 456_789), dec=Decimal("-1.50"), n={"x": 4})
    high = _bounds(i=7, s="z", f=1e20, g=2.5, d=dt.date(2024, 2, 29), dec=Decimal("9.99"), n={"x": None})
    rows = [
        {"numRecords": 5, "minValues": low, "maxValues": high, "nullCount": {"i": 0, "n": {"x": 1}},
         "tightBounds": True},
        None,
        {"numRecords": 2, "minValues": _bounds(f=float("nan")), "maxValues": _bounds(f=float("inf")),
         "nullCount": None, "tightBounds": None},
    ]
    made = stats_json_from_parsed(pa.array(rows, PARSED))
    assert made[1].as_py() is None
    first = orjson.loads(made[0].as_py())
    assert first["minValues"]["s"] == 'a"\\b\né'
    assert first["minValues"]["ts"] == "1969-12-31T23:59:59.999Z"  # floored to milliseconds
    assert first["minValues"]["ntz"] == "2024-01-01T01:02:03.456"
    assert first["minValues"]["d"] == "0999-01-02"
    assert '"f":-0.0' in made[0].as_py()  # a float stays a float (its sign kept)
    assert first["tightBounds"] is True
    assert orjson.loads(made[2].as_py()) == {"numRecords": 2, "minValues": {}, "maxValues": {}}
    parsed = parse_stats(made, DATA_SCHEMA).to_pylist()
    assert parsed[0]["numRecords"] == 5
    assert parsed[0]["minValues"]["i"] == -3 and parsed[0]["maxValues"]["i"] == 7
    assert parsed[0]["minValues"]["dec"] == Decimal("-1.50")
    assert parsed[0]["minValues"]["g"] == pytest.approx(0.1)
    assert parsed[0]["minValues"]["ts"] == dt.datetime(1969, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC)
    assert parsed[0]["nullCount"]["n"]["x"] == 1
    assert parsed[2]["minValues"]["f"] is None and parsed[2]["maxValues"]["f"] is None
    assert record_counts(made).to_pylist() == [5, None, 2]


def test_stats_json_from_parsed_many_rows_is_columnar_and_exact() -> None:
    n = 5000
    parsed = pa.array([{"numRecords": i, "minValues": _bounds(i=i), "maxValues": _bounds(i=i + 1),
                        "nullCount": {"i": 0, "n": None}, "tightBounds": None} for i in range(n)], PARSED)
    made = stats_json_from_parsed(pa.chunked_array([parsed.slice(0, 10), parsed.slice(10)]))
    assert len(made) == n
    assert record_counts(made).to_pylist() == list(range(n))


def _checkpoint_with_parsed_stats(log: LogWriter, keep_json_for: set[str], drop_stats_column: bool) -> None:
    """Checkpoint version 1 as a stats-as-struct writer lays it out."""
    log.create()
    log.commit(adds=[
        add_row("a.parquet", stats='{"numRecords":3,"minValues":{"id":1},"maxValues":{"id":3},"nullCount":{"id":0}}'),
        add_row("b.parquet", stats='{"numRecords":7,"minValues":{"id":10},"maxValues":{"id":16},"nullCount":{"id":0}}'),
    ])
    snapshot = load_snapshot(log.store)
    table = build_checkpoint_table(snapshot)
    add = table.column("add").combine_chunks()
    paths = pc.struct_field(add, "path")
    stats = pc.struct_field(add, "stats")
    parsed = []
    for path, text in zip(paths.to_pylist(), stats.to_pylist()):
        doc = orjson.loads(text) if text else None
        parsed.append(None if doc is None else {"numRecords": doc["numRecords"], "minValues": doc["minValues"],
                                                "maxValues": doc["maxValues"], "nullCount": doc["nullCount"]})
    parsed_type = pa.struct([("numRecords", pa.int64()), ("minValues", pa.struct([("id", pa.int64())])),
                             ("maxValues", pa.struct([("id", pa.int64())])),
                             ("nullCount", pa.struct([("id", pa.int64())]))])
    kept = pc.if_else(pc.is_in(paths, value_set=pa.array(sorted(keep_json_for) or [""])),
                      pc.replace_substring(stats, '"numRecords":', '"numRecords":100'), None)  # 3 -> 1003
    fields, children = [], []
    for f in add.type:
        if f.name == "stats":
            if drop_stats_column:
                continue
            children.append(kept)
        else:
            children.append(pc.struct_field(add, f.name))
        fields.append(f)
    fields.append(pa.field("stats_parsed", parsed_type))
    children.append(pa.array(parsed, parsed_type))
    new_add = pa.StructArray.from_arrays(children, fields=fields, mask=pc.is_null(add))
    out = table.set_column(table.schema.get_field_index("add"), "add", new_add)
    sink = io.BytesIO()
    pq.write_table(out, sink)
    log.store.write_log_file(checkpoint_name(1), sink.getvalue())
    log.store.delete_log_file(f"{0:020d}.json")
    log.store.delete_log_file(f"{1:020d}.json")


def _counts(store: LogStore) -> dict[str, int]:
    files = load_snapshot(store).files
    return dict(zip(files["path"].to_pylist(), record_counts(files["stats"]).to_pylist()))


@pytest.mark.parametrize("drop_stats_column", [True, False])
def test_checkpoint_stats_come_from_stats_parsed(log: LogWriter, drop_stats_column: bool) -> None:
    _checkpoint_with_parsed_stats(log, set(), drop_stats_column)
    files = load_snapshot(log.store).files
    stats = dict(zip(files["path"].to_pylist(), (orjson.loads(s) for s in files["stats"].to_pylist())))
    assert stats["b.parquet"] == {"numRecords": 7, "minValues": {"id": 10}, "maxValues": {"id": 16},
                                  "nullCount": {"id": 0}}
    assert _counts(log.store) == {"a.parquet": 3, "b.parquet": 7}
    again = build_checkpoint_table(load_snapshot(log.store))  # the next checkpoint keeps them
    written = [a["stats"] for a in again.column("add").to_pylist() if a]
    assert sorted(orjson.loads(s)["numRecords"] for s in written) == [3, 7]


def test_a_present_json_stats_string_wins_over_stats_parsed(log: LogWriter) -> None:
    _checkpoint_with_parsed_stats(log, {"a.parquet"}, drop_stats_column=False)
    assert _counts(log.store) == {"a.parquet": 1003, "b.parquet": 7}


def test_stats_parsed_is_not_read_when_every_add_has_json_stats(log: LogWriter) -> None:
    _checkpoint_with_parsed_stats(log, {"a.parquet", "b.parquet"}, drop_stats_column=False)
    files = log.store.list_log()
    with log.store.arrow_fs.open_input_file(f"{log.store.log_root}/{checkpoint_name(1)}") as handle:
        assert ckpt._needs_stats_parsed(pq.ParquetFile(handle)) is False
    state = read_checkpoint(log.store, [f for f in files if f.kind == "checkpoint"])
    assert sorted(record_counts(state.files["stats"]).to_pylist()) == [1003, 1007]


# --------------------------------------------------------------------------------------------
# Signed zero float bounds
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("values", [[-0.0], [0.0], [0.0, -0.0], [-0.0, 0.0, None]])
def test_zero_float_bounds_are_minus_zero_to_plus_zero(values) -> None:
    for t in (pa.float64(), pa.float32()):
        stats = compute_stats(pa.table({"f": pa.array(values, t)}))
        assert '"minValues":{"f":-0.0}' in stats and '"maxValues":{"f":0.0}' in stats, stats


def test_nonzero_float_bounds_keep_their_zero_side() -> None:
    stats = orjson.loads(compute_stats(pa.table({"f": [-2.0, -0.0]})))
    assert (stats["minValues"]["f"], str(stats["maxValues"]["f"])) == (-2.0, "0.0")
    stats = compute_stats(pa.table({"f": [0.0, 3.0]}))
    assert '"minValues":{"f":-0.0}' in stats and '"maxValues":{"f":3.0}' in stats


@pytest.mark.parametrize("as_json", ["true", "false"])
@pytest.mark.parametrize("mode", ["none", "id"])
def test_checkpoints_follow_the_write_stats_properties(tmp_path, mode, as_json):
    """``delta.checkpoint.writeStatsAsStruct=true`` adds the typed ``stats_parsed`` and, partitioned,
    ``partitionValues_parsed`` (PROTOCOL.md "Checkpoints"), by physical name under column
    mapping; ``writeStatsAsJson=false`` leaves ``stats`` out. Readers of the checkpoint alone
    (deltatx, DuckDB, deltalake) see the same rows, and deltatx still prunes by the structs."""
    import os

    import deltatx
    from duckdb_delta import read_duckdb

    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("s", pa.struct([("a", pa.string())]))])
    t = deltatx.create_table(uri, schema, partition_by=["day"], properties={
        "delta.checkpoint.writeStatsAsStruct": "true", "delta.checkpoint.writeStatsAsJson": as_json,
        "delta.columnMapping.mode": mode})
    for i in range(3):
        t.append(pa.table({"id": [i, i + 10], "day": [dt.date(2024, 1, 1 + i)] * 2, "s": [{"a": "x"}, None]},
                          schema=schema))
    t.checkpoint()
    log = os.path.join(uri, "_delta_log")
    add = pq.read_table(os.path.join(log, checkpoint_name(t.version))).column("add").combine_chunks()
    names = [f.name for f in add.type]
    assert "stats_parsed" in names and "partitionValues_parsed" in names
    assert ("stats" in names) == (as_json == "true")
    fields = {f.name: f for f in t.schema}
    physical = {name: orjson.loads(f.metadata[b"delta.columnMapping.physicalName"]) if mode != "none" else name
                for name, f in fields.items()}
    first = next(r for r in add.to_pylist() if r is not None and r["partitionValues"][0][1] == "2024-01-02")
    assert first["partitionValues_parsed"] == {physical["day"]: dt.date(2024, 1, 2)}
    assert first["stats_parsed"]["numRecords"] == 2
    assert first["stats_parsed"]["minValues"][physical["id"]] == 1
    assert first["stats_parsed"]["maxValues"][physical["id"]] == 11
    assert first["stats_parsed"]["nullCount"][physical["s"]] is not None
    for name in os.listdir(log):
        if name.endswith(".json"):
            os.remove(os.path.join(log, name))
    fresh = deltatx.Table(uri)
    assert sorted(fresh.to_arrow(columns=["id"])["id"].to_pylist()) == [0, 1, 2, 10, 11, 12]
    assert sorted(read_duckdb(uri)["id"].to_pylist()) == [0, 1, 2, 10, 11, 12]
    if mode == "none":
        from deltalake import DeltaTable

        assert sorted(DeltaTable(uri).to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2, 10, 11, 12]
    assert fresh.delete(where="id > 11").metrics["numFilesRead"] == 1  # pruned by the stats read back
