"""File pruning: soundness on random data, exactness on partitions, partition values, speed."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltatx.errors import InvalidTableError
from deltatx.expr import (
    STATS_CACHE,
    And,
    Column,
    Comparison,
    Func,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
    bind,
    files_matching,
    matches,
    parse_predicate,
)
from deltatx.txnlog.partition_values import parse_partition_values, partition_values_table
from deltatx.txnlog.actions import FILE_SCHEMA
from deltatx.txnlog.stats import MAX_STRING_TIE_BREAKER, compute_stats

UTC = dt.timezone.utc
BASE_TS = dt.datetime(2024, 1, 1, tzinfo=UTC)
DATES = [dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2023, 12, 31)]

SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("s", pa.string()),
        ("f", pa.float64()),
        ("t", pa.timestamp("us", tz="UTC")),
        ("dec", pa.decimal128(6, 2)),
        ("st", pa.struct([("a", pa.int32())])),
        ("p", pa.int32()),
        ("dp", pa.date32()),
    ]
)
PARTITIONS = ["p", "dp"]
DATA_SCHEMA = pa.schema([f for f in SCHEMA if f.name not in PARTITIONS])


def files_table(rows: list[dict]) -> pa.Table:
    base = {"size": 1, "modificationTime": 0, "dataChange": True}
    return pa.Table.from_pylist([{**base, **r} for r in rows], schema=FILE_SCHEMA)


def serialize_partition(value) -> str:
    if value is None:
        return ""
    return value.isoformat() if isinstance(value, dt.date) else str(value)


# --------------------------------------------------------------------------------------------
# Soundness on random tables
# --------------------------------------------------------------------------------------------

ints = st.integers(min_value=-5, max_value=5)
texts = st.text(alphabet="ab" + MAX_STRING_TIE_BREAKER, max_size=40)
floats = st.one_of(st.floats(min_value=-3, max_value=3, allow_nan=False), st.just(float("nan")))
stamps = st.integers(min_value=0, max_value=5000).map(lambda us: BASE_TS + dt.timedelta(microseconds=us))
decimals = st.decimals(min_value=-5, max_value=5, places=2, allow_nan=False, allow_infinity=False)
parts = st.integers(min_value=0, max_value=1)
dates = st.sampled_from(DATES[:2])


def mostly(s):
    """Values with a NULL now and then (most files should have real bounds)."""
    return st.one_of(s, s, s, st.none())


row_strategy = st.fixed_dictionaries(
    {
        "i": mostly(ints),
        "s": mostly(texts),
        "f": mostly(floats),
        "t": mostly(stamps),
        "dec": mostly(decimals),
        "st": mostly(st.fixed_dictionaries({"a": mostly(ints)})),
        "p": mostly(parts),
        "dp": st.one_of(st.just(DATES[0]), st.none()),
    }
)

DOMAINS = {"i": ints, "s": texts, "f": floats, "t": stamps, "dec": decimals, "p": parts, "dp": dates}


def near(value):
    """Values at and just around an observed one: where truncated or inexact bounds bite."""
    if isinstance(value, bool) or value is None:
        return st.just(value)
    if isinstance(value, int):
        return st.sampled_from([value - 1, value, value + 1])
    if isinstance(value, dt.datetime):
        return st.sampled_from([value + dt.timedelta(microseconds=d) for d in (-1000, -1, 0, 1, 999, 1000)])
    if isinstance(value, str):
        return st.sampled_from([value, value[:32], value[:32] + "b", value + "a", value[:-1]])
    return st.just(value)


def literals_for(draw, name: str, observed: dict[str, list]) -> Literal:
    seen = [v for v in observed[name] if v is not None]
    if seen and draw(st.integers(0, 3)):
        return Literal(draw(st.sampled_from(seen).flatmap(near)))
    return Literal(draw(st.one_of(st.none(), DOMAINS[name])))


@st.composite
def predicates_for(draw, observed: dict[str, list], focus: str, depth: int = 0):
    kind = draw(st.integers(0, 9 if depth < 2 else 6))
    name = focus if draw(st.integers(0, 3)) else draw(st.sampled_from(sorted(DOMAINS)))
    if kind in (0, 1, 2):
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "<=>"]))
        lit = literals_for(draw, name, observed)
        return Comparison(op, Column(name), lit) if draw(st.booleans()) else Comparison(op, lit, Column(name))
    if kind == 3:
        values = tuple(literals_for(draw, name, observed) for _ in range(draw(st.integers(0, 4))))
        return In(Column(name), values, draw(st.booleans()))
    if kind == 4:
        target = draw(st.sampled_from([Column(name), Column("st", path=("a",))]))
        return IsNull(target, draw(st.booleans()))
    if kind == 5:
        pattern = draw(st.sampled_from(["a%", "ab%", "b%", "%", "a_%", "%a"]))
        if draw(st.booleans()):
            return Like(Column("s"), pattern, draw(st.booleans()))
        return Func("startswith", (Column("s"), literals_for(draw, "s", observed)))
    if kind == 6:
        return draw(
            st.sampled_from(
                [
                    Comparison("=", Func("upper", (Column("s"),)), Literal("A")),
                    Comparison("=", Func("coalesce", (Column("p"), Literal(0))), Literal(1)),
                    Comparison(">", Column("i"), Column("p")),
                    Comparison(draw(st.sampled_from(["=", "<", ">=", "!="])), Column("st", path=("a",)), Literal(draw(ints))),
                ]
            )
        )
    left = draw(predicates_for(observed, focus, depth + 1))
    if kind == 7:
        return Not(left)
    right = draw(predicates_for(observed, focus, depth + 1))
    return And(left, right) if kind == 8 else Or(left, right)


@st.composite
def scenarios(draw, focus: str):
    rows = draw(st.lists(row_strategy, min_size=1, max_size=40))
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["p"], r["dp"]), []).append(r)
    files = []
    for (p, dp), members in groups.items():  # one or two files per partition: multi-row files
        k = draw(st.integers(min_value=1, max_value=len(members)))
        files.append(((p, dp), members[:k]))
        if members[k:]:
            files.append(((p, dp), members[k:]))
    modes = draw(st.lists(st.sampled_from(["full", "full", "none", "few"]), min_size=len(files), max_size=len(files)))
    observed = {name: [r[name] for r in rows] for name in DOMAINS}
    predicate = draw(predicates_for(observed, focus))
    return files, modes, predicate


def build_log(files, stats_mode) -> tuple[pa.Table, list[pa.Table]]:
    log_rows, datas = [], []
    for n, (((p, dp), members), mode) in enumerate(zip(files, stats_mode)):
        data = pa.Table.from_pylist(members, schema=SCHEMA)
        datas.append(data)
        stats = None
        if mode != "none":
            stats = compute_stats(data.select(DATA_SCHEMA.names), num_indexed_cols=32 if mode == "full" else 2)
        pv = [("p", serialize_partition(p))]
        if dp is not None or n % 2:  # a missing key also means NULL
            pv.append(("dp", serialize_partition(dp)))
        log_rows.append({"path": f"f{n}.parquet", "partitionValues": pv, "stats": stats})
    return files_table(log_rows), datas


@pytest.mark.parametrize("focus", sorted(DOMAINS))
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_files_matching_never_drops_a_file_with_a_matching_row(focus, data):
    """Soundness: a file holding a row where the predicate is TRUE is never pruned.

    Predicates lean on one column per run (``focus``) so every type's bounds get exercised, with
    literals drawn at and around values actually present (where truncated bounds bite).
    """
    files, stats_mode, predicate = data.draw(scenarios(focus))
    log, datas = build_log(files, stats_mode)
    may = files_matching(predicate, log, SCHEMA, PARTITIONS).to_pylist()
    bound = bind(predicate, SCHEMA)
    partition_only = all(c in PARTITIONS for c in bound.columns())
    for data, verdict in zip(datas, may):
        actual = pc.any(matches(bound, data)).as_py() is True
        if actual:
            assert verdict, f"pruned a file holding a match for {predicate}"
        if partition_only:
            assert verdict == actual, f"partition predicate {predicate} not exact"


# --------------------------------------------------------------------------------------------
# Precision: the obvious prunes happen
# --------------------------------------------------------------------------------------------


def stats_for(**columns) -> str:
    return compute_stats(pa.table(columns))


@pytest.fixture
def log() -> pa.Table:
    files = []
    for n in range(4):
        ids = pa.array([n * 10, n * 10 + 9], pa.int64())
        names = pa.array([f"name{n}", f"name{n}z"])
        stamps = pa.array([BASE_TS + dt.timedelta(days=n), BASE_TS + dt.timedelta(days=n, microseconds=500)], pa.timestamp("us", tz="UTC"))
        stats = compute_stats(pa.table({"i": ids, "s": names, "t": stamps}))
        files.append({"path": f"f{n}", "partitionValues": [("p", str(n)), ("dp", DATES[n % 3].isoformat())], "stats": stats})
    files.append({"path": "nostats", "partitionValues": [("p", "1")], "stats": None})
    files.append({"path": "nullpart", "partitionValues": [("p", "")], "stats": "{}"})
    return files_table(files)


@pytest.mark.parametrize(
    "sql, expected",
    [
        ("p = 1", [False, True, False, False, True, False]),
        ("p IS NULL", [False, False, False, False, False, True]),
        ("p IN (0, 3)", [True, False, False, True, False, False]),
        ("NOT (p IN (0, 3))", [False, True, True, False, True, False]),
        ("p + 1 = 3", [False, False, True, False, False, False]),
        ("dp = '2024-01-02'", [False, True, False, False, False, False]),
        ("i = 15", [False, True, False, False, True, True]),
        ("i > 25", [False, False, True, True, True, True]),
        ("NOT (i < 30)", [False, False, False, True, True, True]),
        ("i BETWEEN 12 AND 21", [False, True, True, False, True, True]),
        ("i IN (1, 35)", [True, False, False, True, True, True]),
        ("i IS NULL", [False, False, False, False, True, True]),
        ("i IS NOT NULL", [True, True, True, True, True, True]),
        ("s LIKE 'name2%'", [False, False, True, False, True, True]),
        ("startswith(s, 'name3')", [False, False, False, True, True, True]),
        ("s = 'name1m'", [False, True, False, False, True, True]),
        ("p = 1 AND i = 5", [False, False, False, False, True, False]),
        ("p = 1 OR i = 5", [True, True, False, False, True, True]),
        ("upper(s) = 'X'", [True, True, True, True, True, True]),
        ("i = NULL", [False] * 6),
        ("FALSE", [False] * 6),
        ("p = 1 AND TRUE", [False, True, False, False, True, False]),
        # timestamps: stats are cut to milliseconds, so a max of .000 still admits .0005
        ("t = TIMESTAMP '2024-01-02 00:00:00.0005'", [False, True, False, False, True, True]),
        ("t > TIMESTAMP '2024-01-03 00:00:00.0001'", [False, False, True, True, True, True]),
    ],
)
def test_pruning_precision(log, sql, expected):
    assert files_matching(parse_predicate(sql), log, SCHEMA, PARTITIONS).to_pylist() == expected


def test_use_stats_false_only_uses_partitions(log):
    e = parse_predicate("p = 1 AND i = 5")
    assert files_matching(e, log, SCHEMA, PARTITIONS, use_stats=False).to_pylist() == [False, True, False, False, True, False]


def test_missing_stats_column_or_unparseable_stats_mean_may_match():
    log = files_table([{"path": "a", "partitionValues": [], "stats": "garbage"}, {"path": "b", "partitionValues": [], "stats": None}])
    assert files_matching(parse_predicate("i = 1"), log, SCHEMA, PARTITIONS).to_pylist() == [True, True]
    no_stats = log.drop_columns(["stats"])
    assert files_matching(parse_predicate("i = 1"), no_stats, SCHEMA, PARTITIONS).to_pylist() == [True, True]
    assert files_matching(parse_predicate("i = 1"), log.slice(0, 0), SCHEMA, PARTITIONS).to_pylist() == []


def test_float_negations_are_not_pruned_because_of_nan():
    # a file whose bounds omit NaN (as Parquet statistics do) must survive NOT (f < 5) and f != 1
    stats = orjson.dumps({"numRecords": 2, "minValues": {"f": 1.0}, "maxValues": {"f": 1.0}, "nullCount": {"f": 0}}).decode()
    log = files_table([{"path": "a", "partitionValues": [], "stats": stats}])
    for sql in ("NOT (f < 5)", "f != 1", "f NOT IN (1.0)"):
        assert files_matching(parse_predicate(sql), log, SCHEMA, PARTITIONS).to_pylist() == [True], sql
    assert files_matching(parse_predicate("f > 5"), log, SCHEMA, PARTITIONS).to_pylist() == [False]


def test_not_equal_prunes_single_valued_files():
    log = files_table([{"path": "a", "partitionValues": [], "stats": stats_for(i=pa.array([7, 7]), s=["x", "x"])}])
    assert files_matching(parse_predicate("i != 7"), log, SCHEMA, PARTITIONS).to_pylist() == [False]
    assert files_matching(parse_predicate("s NOT IN ('x', 'y')"), log, SCHEMA, PARTITIONS).to_pylist() == [False]
    assert files_matching(parse_predicate("i NOT IN (7, NULL)"), log, SCHEMA, PARTITIONS).to_pylist() == [False]
    assert files_matching(parse_predicate("i != 8"), log, SCHEMA, PARTITIONS).to_pylist() == [True]


def test_nested_struct_stats():
    data = pa.table({"st": pa.array([{"a": 1}, {"a": 4}], pa.struct([("a", pa.int32())]))})
    log = files_table([{"path": "a", "partitionValues": [], "stats": compute_stats(data)}])
    assert files_matching(parse_predicate("st.a > 4"), log, SCHEMA, PARTITIONS).to_pylist() == [False]
    assert files_matching(parse_predicate("st.a = 4"), log, SCHEMA, PARTITIONS).to_pylist() == [True]


# --------------------------------------------------------------------------------------------
# Partition values
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "t, strings, expected",
    [
        (pa.int32(), ["3", "", None, "-7"], [3, None, None, -7]),
        (pa.string(), ["x", "", None], ["x", None, None]),
        (pa.bool_(), ["true", "false", "TRUE", ""], [True, False, True, None]),
        (pa.date32(), ["2024-01-01", ""], [dt.date(2024, 1, 1), None]),
        (pa.decimal128(5, 2), ["1.50", "-0.01"], [Decimal("1.50"), Decimal("-0.01")]),
        (pa.float64(), ["1.5", "NaN"], [1.5, float("nan")]),
        (
            pa.timestamp("us", tz="UTC"),
            ["2024-01-01 10:00:00", "2024-01-01 10:00:00.123456", "2024-01-01T10:00:00.000000Z", "2024-01-01T12:00:00+02:00"],
            [dt.datetime(2024, 1, 1, 10, tzinfo=UTC), dt.datetime(2024, 1, 1, 10, 0, 0, 123456, tzinfo=UTC),
             dt.datetime(2024, 1, 1, 10, tzinfo=UTC), dt.datetime(2024, 1, 1, 10, tzinfo=UTC)],
        ),
        (pa.timestamp("us"), ["2024-01-01 10:00:00"], [dt.datetime(2024, 1, 1, 10)]),
        (pa.binary(), ["ab"], [b"ab"]),
    ],
)
def test_partition_value_parsing(t, strings, expected):
    got = parse_partition_values(pa.array(strings, pa.string()), t, "c").to_pylist()
    assert [str(x) for x in got] == [str(x) for x in expected]


def test_bad_partition_value_names_column_and_value():
    with pytest.raises(InvalidTableError, match=r"partition column 'p': value 'x3'"):
        parse_partition_values(pa.array(["1", "x3"]), pa.int32(), "p")


def test_partition_values_table_and_physical_names():
    meta = {b"delta.columnMapping.physicalName": orjson.dumps("col-1")}
    schema = pa.schema([pa.field("P", pa.int32(), metadata=meta), ("i", pa.int64())])
    log = files_table([
        {"path": "a", "partitionValues": [("col-1", "5")], "stats": None},
        {"path": "b", "partitionValues": [("P", "6")], "stats": None},
    ])
    assert partition_values_table(log, schema, ["p"]).to_pydict() == {"P": [5, 6]}
    assert files_matching(parse_predicate("p = 6"), log, schema, ["p"]).to_pylist() == [False, True]


def test_binary_partition_values_read_as_the_writer_wrote_them():
    # a binary partition value is the UTF-8 text of its bytes (Spark's Cast, the kernels,
    # deltalake and DuckDB read it so); the escaped spelling "\u0001" is one byte per escape
    log = files_table([
        {"path": "a", "partitionValues": [("p", "\xff\x00a")], "stats": None},
        {"path": "b", "partitionValues": [("p", "\\u0001\\u00FF")], "stats": None},
    ])
    schema = pa.schema([("p", pa.binary()), ("i", pa.int64())])
    assert parse_partition_values(pa.array(["\xff"]), pa.binary(), "p").to_pylist() == [b"\xc3\xbf"]
    assert partition_values_table(log, schema, ["p"]).to_pydict() == {"p": [b"\xc3\xbf\x00a", b"\x01\xff"]}
    assert files_matching(parse_predicate("p = X'C3BF0061'"), log, schema, ["p"]).to_pylist() == [True, False]
    assert files_matching(parse_predicate("p = X'01FF'"), log, schema, ["p"]).to_pylist() == [False, True]


def test_binary_partitioned_table_filters_and_deletes_by_partition(table_uri):
    import deltatx

    t = deltatx.create_table(table_uri, pa.schema([("p", pa.binary()), ("i", pa.int64())]), partition_by=["p"])
    t.append(pa.table({"p": [b"\xff", b"\x01", b"a"], "i": [1, 2, 3]},
                      schema=pa.schema([("p", pa.binary()), ("i", pa.int64())])))
    assert t.to_arrow(where="p = X'FF'").to_pydict() == {"p": [b"\xff"], "i": [1]}
    t.delete("p = X'FF'")
    assert sorted(t.to_arrow().column("i").to_pylist()) == [2, 3]

# --------------------------------------------------------------------------------------------
# Columnar, cached stats (speed itself is measured in benchmarks/, never asserted here)
# --------------------------------------------------------------------------------------------


def test_ten_thousand_files_parse_their_stats_once(monkeypatch):
    n = 10_000
    docs = [
        orjson.dumps({"numRecords": 100, "minValues": {"i": k * 100, "s": f"n{k:05d}"},
                      "maxValues": {"i": k * 100 + 99, "s": f"n{k:05d}"}, "nullCount": {"i": 0, "s": 0}}).decode()
        for k in range(n)
    ]
    pvs = [[("p", str(k % 10)), ("dp", "2024-01-01")] for k in range(n)]
    log = pa.table(
        {"path": [f"f{k}" for k in range(n)], "partitionValues": pa.array(pvs, FILE_SCHEMA.field("partitionValues").type),
         "stats": docs}
    )
    e = parse_predicate("p = 3 AND i > 500000 AND dp = '2024-01-01'")
    STATS_CACHE.clear()
    import deltatx.expr.pruning as pruning

    parses = []
    real_parse = pruning.parse_stats
    monkeypatch.setattr(pruning, "parse_stats", lambda *a, **kw: parses.append(1) or real_parse(*a, **kw))
    first = files_matching(e, log, SCHEMA, PARTITIONS)  # parses the stats JSON once, columnar
    for _ in range(5):
        again = files_matching(e, log, SCHEMA, PARTITIONS)
        assert again.equals(first)
    assert len(parses) == 1, "the parsed stats of the same files are reused from the cache"
    assert pc.sum(first).as_py() == len([k for k in range(n) if k % 10 == 3 and k * 100 + 99 > 500000])
    assert isinstance(first, pa.BooleanArray) and len(first) == n  # one flat boolean array
