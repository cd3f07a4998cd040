"""Per-file statistics: the ``stats`` JSON of an ``add`` action, written and read columnar.

Owns the one place where data-skipping statistics are produced (:func:`compute_stats`, called once
per written data file) and consumed (:func:`parse_stats`, which turns the JSON strings of many files
into typed struct columns for :mod:`deltatx.expr` pruning). Why here: the format is the protocol's
(``numRecords``, ``minValues``, ``maxValues``, ``nullCount``, nested like the schema), and other
engines skip our files using it, so both directions must agree with what Delta writers produce.

Rules kept (PROTOCOL.md "Per-file Statistics" and Delta Spark's behaviour):

- only the first ``num_indexed_cols`` leaf columns (``delta.dataSkippingNumIndexedCols``, -1 = all)
  or the named ``stats_columns`` (``delta.dataSkippingStatsColumns``) get statistics;
- no min/max for booleans, binary, lists and maps (their null counts are kept);
- strings are cut to :data:`STRING_PREFIX_LENGTH` characters: the min is the prefix (still a lower
  bound); a cut max gets :data:`MAX_STRING_TIE_BREAKER` appended so it stays an upper bound;
- timestamps are truncated to milliseconds and written ISO-8601 (``...T..:..:..mmmZ`` when zoned);
  readers must widen timestamp bounds by a millisecond (``deltatx.expr`` does);
- a float column holding NaN gets no min/max (NaN has no place in an order a reader can trust):
  Spark's min/max aggregates put NaN above every number, so its max is then NaN, while Parquet
  writers (deltalake) leave NaN out of the bounds, which lets readers using Spark's order (DuckDB,
  deltatx) skip a file whose NaN matches ``f > x``; no bounds is right for both;
- a zero float bound is signed as Parquet prescribes: a zero max is written +0.0, a zero min -0.0,
  so that readers ordering -0.0 below 0.0 never skip a file holding the other zero.
"""

from __future__ import annotations

import datetime as _dt
import io
import re
from decimal import Decimal
from typing import Any, Iterable, Sequence

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ..errors import SchemaMismatchError
from .schema import is_variant_storage
from .column_mapping import physical_name

#: Characters of a string kept in min/max statistics (``delta.dataSkippingStringPrefixLength``).
STRING_PREFIX_LENGTH = 32

#: Appended to a truncated string max: the largest code point, so ``prefix + it`` >= any string with
#: that prefix in UTF-8 byte order (which is code point order).
MAX_STRING_TIE_BREAKER = "\U0010ffff"

_EPOCH = _dt.datetime(1970, 1, 1)
_UNIT_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}

Path = tuple[str, ...]


# --------------------------------------------------------------------------------------------
# Which columns get statistics
# --------------------------------------------------------------------------------------------


def has_min_max(t: pa.DataType) -> bool:
    """Whether Delta keeps min/max statistics for a column of this (non-nested) type."""
    if pa.types.is_dictionary(t):
        return has_min_max(t.value_type)
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_string_view(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
    )


def _leaves(fields: Iterable[pa.Field], prefix: Path = ()) -> list[tuple[Path, pa.Field]]:
    out: list[tuple[Path, pa.Field]] = []
    for f in fields:
        path = prefix + (f.name,)
        if pa.types.is_struct(f.type) and not is_variant_storage(f.type):  # a variant is one leaf
            out.extend(_leaves(list(f.type), path))
        else:
            out.append((path, f))
    return out


def split_column_name(name: str) -> Path:
    """``a.b`` -> ("a", "b"); backticks quote a part (``a.`b.c``` -> ("a", "b.c"))."""
    parts: list[str] = []
    cur: list[str] = []
    quoted = False
    i = 0
    while i < len(name):
        ch = name[i]
        if ch == "`":
            if quoted and name[i + 1 : i + 2] == "`":
                cur.append("`")
                i += 1
            else:
                quoted = not quoted
        elif ch == "." and not quoted:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur).strip())
    return tuple(parts)


def stats_leaf_paths(
    schema: pa.Schema, stats_columns: Sequence[str] | None = None, num_indexed_cols: int = 32
) -> list[tuple[Path, pa.Field]]:
    """Leaf columns (path, field) that get statistics, in schema order.

    ``stats_columns`` (names, dotted for nested fields; a struct name selects all its leaves) wins
    over ``num_indexed_cols``; names match case-insensitively, as Spark resolves them.
    """
    leaves = _leaves(list(schema))
    if stats_columns is not None:
        wanted = [tuple(p.lower() for p in split_column_name(c)) for c in stats_columns]
        return [
            (path, f)
            for path, f in leaves
            if any(tuple(p.lower() for p in path[: len(w)]) == w for w in wanted)
        ]
    if num_indexed_cols < 0:
        return leaves
    return leaves[:num_indexed_cols]


# --------------------------------------------------------------------------------------------
# Writing: one file's rows -> stats JSON
# --------------------------------------------------------------------------------------------


def truncate_min_string(value: str, prefix_length: int = STRING_PREFIX_LENGTH) -> str:
    """A lower bound of ``value`` at most ``prefix_length`` characters long."""
    return value[:prefix_length]


def truncate_max_string(value: str, prefix_length: int = STRING_PREFIX_LENGTH) -> str | None:
    """An upper bound of ``value``: its prefix plus the tie-breaker, or ``value`` if short enough.

    Characters equal to the tie-breaker right after the cut are kept (the tie-breaker would not be
    greater than them); ``None`` when the string is made of such characters beyond the cut and
    cannot be bounded more shortly than by itself — then the whole value is the bound.
    """
    if len(value) <= prefix_length:
        return value
    cut = prefix_length
    while cut < len(value) and value[cut] == MAX_STRING_TIE_BREAKER:
        cut += 1
    if cut == len(value):
        return value
    return value[:cut] + MAX_STRING_TIE_BREAKER


def format_timestamp(value: int, unit: str, zoned: bool) -> str | None:
    """Epoch ``value`` in ``unit`` -> ``YYYY-MM-DDTHH:MM:SS.mmm[Z]``, floored to milliseconds."""
    per_ms = _UNIT_PER_SECOND[unit] // 1000 if unit != "s" else None
    millis = value * 1000 if per_ms is None else value // per_ms
    try:
        moment = _EPOCH + _dt.timedelta(milliseconds=millis)
    except OverflowError:
        return None
    text = moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{moment.microsecond // 1000:03d}"
    if moment.year < 1000:  # strftime does not zero-pad years on every platform
        text = f"{moment.year:04d}" + text[text.index("-") :]
    return text + "Z" if zoned else text


def _plain(arr: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    t = arr.type
    if pa.types.is_dictionary(t):
        return pc.cast(arr, t.value_type)
    if pa.types.is_string_view(t):
        return pc.cast(arr, pa.string())
    return arr


def _bound_json(value: pa.Scalar, t: pa.DataType, is_max: bool) -> Any:
    """A min/max scalar as the JSON value Delta writes, or ``None`` to leave the bound out."""
    if not value.is_valid:
        return None
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        try:
            text = value.as_py()
        except UnicodeDecodeError as exc:  # Arrow arrays built from raw buffers are not checked
            raise SchemaMismatchError(f"a string column holds bytes that are not UTF-8 ({exc}); Delta strings "
                                      f"are UTF-8: pass the values as binary, or fix their encoding") from None
        return truncate_max_string(text) if is_max else truncate_min_string(text)
    if pa.types.is_timestamp(t):
        return format_timestamp(value.cast(pa.int64()).as_py(), t.unit, t.tz is not None)
    if pa.types.is_date(t):
        return value.as_py().isoformat()
    if pa.types.is_decimal(t):
        d: Decimal = value.as_py()
        return orjson.Fragment(format(d, "f").encode())
    if pa.types.is_floating(t):
        f = float(value.as_py())
        if f != f or f in (float("inf"), float("-inf")):
            return None
        if f == 0.0:
            # Parquet's rule (deltalake follows it): a zero max is +0.0, a zero min is -0.0.
            # min_max may report either zero for a column holding -0.0 and/or 0.0; a max of -0.0
            # makes readers ordering -0.0 < 0.0 (delta-kernel, DuckDB) skip the file for f = 0.0.
            return 0.0 if is_max else -0.0
        return f
    return value.as_py()


def _column_at(table: pa.Table, path: Path) -> pa.ChunkedArray:
    arr = table.column(path[0])
    for name in path[1:]:
        idx = arr.type.get_field_index(name)
        arr = pc.struct_field(arr, [idx])  # propagates the parent struct's nulls
    return arr


def _put(doc: dict[str, Any], path: Path, value: Any) -> None:
    for name in path[:-1]:
        doc = doc.setdefault(name, {})
    doc[path[-1]] = value


def _put_bounds(min_values: dict[str, Any], max_values: dict[str, Any], path: Path,
                low: pa.Scalar, high: pa.Scalar) -> None:
    """Record a column's bounds, both or neither (a bound JSON cannot hold leaves both out)."""
    low_json = _bound_json(low, low.type, is_max=False)
    high_json = _bound_json(high, high.type, is_max=True)
    if low_json is not None and high_json is not None:
        _put(min_values, path, low_json)
        _put(max_values, path, high_json)


def _stats_json(num_records: int, min_values: dict[str, Any], max_values: dict[str, Any],
                null_count: dict[str, Any]) -> str:
    doc = {"numRecords": num_records, "minValues": min_values, "maxValues": max_values, "nullCount": null_count}
    return orjson.dumps(doc).decode()


class FileStats:
    """Stats of one data file, accumulated chunk by chunk (a row group at a time).

    Why: a file streamed in row groups can have its statistics computed while its rows arrive
    (on the encoder thread) instead of in one pass over all rows once the last one is in, which
    would sit on the write's critical path. Per chunk only Arrow scalars are kept (a min and a max
    per leaf), so memory does not grow with the file. :func:`compute_stats` is one ``add``.
    """

    def __init__(self, schema: pa.Schema, stats_columns: Sequence[str] | None = None,
                 num_indexed_cols: int = 32):
        self._leaves = stats_leaf_paths(schema, stats_columns, num_indexed_cols)
        self.num_records = 0
        self._nulls = [0] * len(self._leaves)
        self._no_bounds = [False] * len(self._leaves)  # a NaN was seen: no min/max at all
        self._mins: list[list[pa.Scalar]] = [[] for _ in self._leaves]
        self._maxs: list[list[pa.Scalar]] = [[] for _ in self._leaves]

    def add(self, table: pa.Table) -> None:
        """Fold ``table`` (the next rows of the file, partition columns removed) into the stats."""
        self.num_records += table.num_rows
        for i, (path, _field) in enumerate(self._leaves):
            arr = _plain(_column_at(table, path))
            nulls = arr.null_count
            self._nulls[i] += nulls
            t = arr.type
            if self._no_bounds[i] or not has_min_max(t) or nulls == len(arr):
                continue
            if pa.types.is_floating(t) and pc.any(pc.is_nan(arr)).as_py():
                self._no_bounds[i] = True
                continue
            bounds = pc.min_max(arr)
            self._mins[i].append(bounds["min"])
            self._maxs[i].append(bounds["max"])

    def to_json(self) -> str:
        """The ``stats`` JSON of the ``add`` action."""
        min_values: dict[str, Any] = {}
        max_values: dict[str, Any] = {}
        null_count: dict[str, Any] = {}
        for i, (path, field) in enumerate(self._leaves):
            _put(null_count, path, self._nulls[i])
            if self._no_bounds[i] or not self._mins[i]:
                continue
            low, high = self._mins[i], self._maxs[i]
            if len(low) > 1:
                low, high = [pc.min(pa.array(low))], [pc.max(pa.array(high))]
            _put_bounds(min_values, max_values, path, low[0], high[0])
        return _stats_json(self.num_records, min_values, max_values, null_count)


def compute_stats(
    table: pa.Table, stats_columns: list[str] | None = None, num_indexed_cols: int = 32
) -> str:
    """Delta stats JSON for one data file holding ``table``'s rows (partition columns removed).

    Columnar: one ``min_max`` and one null count per indexed leaf column, whatever the row count.
    """
    stats = FileStats(table.schema, stats_columns, num_indexed_cols)
    stats.add(table)
    return stats.to_json()


def stats_from_parquet_footer(
    metadata: Any, schema: pa.Schema, stats_columns: Sequence[str] | None = None, num_indexed_cols: int = 32
) -> str:
    """Delta stats JSON for a Parquet file another writer made, from its footer alone (no rows read).

    For files Spark's own Parquet writer wrote (``deltatx.spark.write`` natively): their row-group
    statistics are combined per column. ``schema`` is the table's schema without partition
    columns; only top-level primitive columns are looked up. Conservative where a footer cannot
    be trusted to match Delta's rules: a column loses its bounds when any row group with values
    lacks them, floating-point columns never get bounds (a footer does not say whether a NaN was
    seen), timestamps never do (their Parquet encodings vary: INT96 has no usable order), and a
    column missing from the file or without null counts is left out. Fewer stats only mean less
    file skipping, never a wrong skip.
    """
    positions = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    min_values: dict[str, Any] = {}
    max_values: dict[str, Any] = {}
    null_count: dict[str, Any] = {}
    for path, field in stats_leaf_paths(schema, stats_columns, num_indexed_cols):
        index = positions.get(".".join(path))
        if len(path) != 1 or index is None:
            continue
        t = field.type
        nulls, lows, highs, complete, bounded = 0, [], [], True, True
        for g in range(metadata.num_row_groups):
            chunk = metadata.row_group(g).column(index)
            st = chunk.statistics
            if st is None or not st.has_null_count:
                complete = False
                break
            nulls += st.null_count
            if st.null_count == chunk.num_values:
                continue  # all null: nothing to bound
            if st.has_min_max:
                lows.append(st.min)
                highs.append(st.max)
            else:
                bounded = False
        if not complete:
            continue
        _put(null_count, path, nulls)
        if not (bounded and lows) or not has_min_max(t) or pa.types.is_floating(t) or pa.types.is_timestamp(t):
            continue
        try:
            low = pa.scalar(min(lows), type=t)
            high = pa.scalar(max(highs), type=t)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            continue
        _put_bounds(min_values, max_values, path, low, high)
    return _stats_json(metadata.num_rows, min_values, max_values, null_count)


_NUM_RECORDS = re.compile(r'"numRecords":\s*(\d+)')
#: up to this many strings are searched in Python: Arrow compiles the pattern on every call
_FEW_COUNTS = 16


def record_count(stats: str | None) -> int | None:
    """``numRecords`` of one stats JSON string (None when it has none): one file's count without
    building an Arrow array for it."""
    found = _NUM_RECORDS.search(stats) if stats else None
    return int(found.group(1)) if found else None


def record_counts(stats: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``numRecords`` of each stats JSON string (int64; null where a string has none).

    A regex, not a JSON parse: the count is all that row tracking, DML metrics and layouts need.
    """
    if len(stats) <= _FEW_COUNTS:
        return pa.array([record_count(v) for v in stats.to_pylist()], pa.int64())
    matched = pc.extract_regex(pc.fill_null(stats, ""), r'"numRecords":\s*(?P<n>\d+)')
    counts = pc.cast(pc.struct_field(matched, "n"), pa.int64())
    return counts.combine_chunks() if isinstance(counts, pa.ChunkedArray) else counts


# --------------------------------------------------------------------------------------------
# Checkpoints' add.stats_parsed -> stats JSON strings
# --------------------------------------------------------------------------------------------

#: control characters, which JSON strings must escape (rare in bounds: escaped with orjson)
_CONTROL = r"[\x00-\x1f]"


def stats_json_from_parsed(parsed: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The ``stats`` JSON string of each ``add.stats_parsed`` struct (null where the struct is).

    Why: a checkpoint written with ``delta.checkpoint.writeStatsAsJson=false`` (deltalake, Spark)
    keeps a file's statistics only in the typed ``stats_parsed`` column (PROTOCOL.md "Checkpoint
    Schema"), while deltatx keeps file state as the ``add`` actions' JSON ``stats`` strings. Turning
    the structs back into the JSON the file's ``add`` action would have held keeps the statistics
    for everything downstream (pruning, ``numRecords`` for row tracking and metrics, the next
    checkpoint). Columnar: one string kernel per leaf column, no per-file Python objects.

    The struct mirrors the stats JSON (``numRecords``, ``minValues``/``maxValues``/``nullCount``
    nested by physical column name, ``tightBounds``). Leaves are written as Delta writes them:
    numbers and booleans bare, strings quoted and escaped, dates ``YYYY-MM-DD``, timestamps
    ``YYYY-MM-DDTHH:MM:SS.mmm`` floored to milliseconds (``Z`` when zoned). A null, NaN or
    infinite leaf, and one of a type stats never hold (binary, lists, maps), is left out:
    unknown, never wrong.
    """
    if isinstance(parsed, pa.ChunkedArray):
        parsed = parsed.combine_chunks() if parsed.num_chunks else pa.array([], parsed.type)
    if not pa.types.is_struct(parsed.type):
        return pa.nulls(len(parsed), pa.string())
    return _json_of(parsed)


def _quoted(strings: pa.Array) -> pa.Array:
    """JSON string literals of ``strings`` (null stays null)."""
    if pc.any(pc.match_substring_regex(strings, _CONTROL)).as_py():
        return pa.array([None if v is None else orjson.dumps(v).decode() for v in strings.to_pylist()],
                        pa.string())
    escaped = pc.replace_substring(pc.replace_substring(strings, "\\", "\\\\"), '"', '\\"')
    return pc.binary_join_element_wise(pa.scalar('"'), escaped, pa.scalar('"'), pa.scalar(""))


def _json_of(arr: pa.Array) -> pa.Array:
    """Each value of ``arr`` as JSON text (string array), null where it is left out."""
    t = arr.type
    if pa.types.is_struct(t):
        # each present member as ',"key":value', a left-out one as ''; the leading comma is cut.
        # (null_handling="skip" would do it in one call, but it drops all-null rows: Arrow 26)
        parts = []
        for i in range(t.num_fields):
            key = pa.scalar("," + orjson.dumps(t.field(i).name).decode() + ":")
            value = _json_of(pc.struct_field(arr, [i]))
            parts.append(pc.fill_null(pc.binary_join_element_wise(key, value, pa.scalar("")), ""))
        if parts:
            body = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, pa.scalar(""))
            body = pc.utf8_slice_codeunits(body, 1)
            out = pc.binary_join_element_wise(pa.scalar("{"), body, pa.scalar("}"), pa.scalar(""))
        else:
            out = pa.array(["{}"] * len(arr), pa.string())
        return pc.if_else(arr.is_valid(), out, pa.scalar(None, pa.string())) if arr.null_count else out
    if pa.types.is_dictionary(t):
        return _json_of(pc.cast(arr, t.value_type))
    if pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t):
        return pc.cast(arr, pa.string())
    if pa.types.is_floating(t):
        text = pc.cast(arr, pa.string())  # shortest round-trip digits: "1", "-0", "1e+20"
        # a float keeps a fraction ("-0" would read back as the integer 0, losing its sign)
        text = pc.if_else(pc.match_substring_regex(text, "[.eE]"), text,
                          pc.binary_join_element_wise(text, pa.scalar(".0"), pa.scalar("")))
        return pc.if_else(pc.is_finite(arr), text, pa.scalar(None, pa.string()))
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return _quoted(pc.cast(arr, pa.string()))
    if pa.types.is_date(t):
        return _quoted(pc.cast(pc.cast(arr, pa.date32()), pa.string()))
    if pa.types.is_timestamp(t):
        wall = pc.cast(arr, pa.timestamp(t.unit)) if t.tz is not None else arr  # UTC wall time
        # floored as compute_stats does (readers widen by a millisecond); an unsafe cast rounds
        millis = pc.cast(pc.floor_temporal(wall, unit="millisecond"), pa.timestamp("ms"))
        text = pc.strftime(millis, "%Y-%m-%dT%H:%M:%S")  # %S of a ms timestamp is SS.mmm
        if t.tz is not None:
            text = pc.binary_join_element_wise(text, pa.scalar("Z"), pa.scalar(""))
        return _quoted(text)
    return pa.nulls(len(arr), pa.string())


# --------------------------------------------------------------------------------------------
# Reading: many stats JSON strings -> typed struct columns
# --------------------------------------------------------------------------------------------


#: the name stats and partition values use: the column-mapping physical name if present
_physical_name = physical_name


def _json_type(t: pa.DataType) -> pa.DataType:
    """How a bound of type ``t`` is read from JSON (dates and timestamps as text, cast later)."""
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        return pa.string()
    if pa.types.is_dictionary(t):
        return _json_type(t.value_type)
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    return t


def _bounds_type(fields: Iterable[pa.Field], *, for_json: bool) -> pa.StructType:
    out = []
    for f in fields:
        name = _physical_name(f) if for_json else f.name
        if pa.types.is_struct(f.type):
            inner = _bounds_type(list(f.type), for_json=for_json)
            if inner.num_fields:
                out.append(pa.field(name, inner))
        elif has_min_max(f.type):
            t = _json_type(f.type) if for_json else (
                f.type.value_type if pa.types.is_dictionary(f.type) else f.type
            )
            out.append(pa.field(name, t))
    return pa.struct(out)


def _counts_type(fields: Iterable[pa.Field], *, for_json: bool) -> pa.StructType:
    out = []
    for f in fields:
        name = _physical_name(f) if for_json else f.name
        if pa.types.is_struct(f.type) and not is_variant_storage(f.type):  # a variant counts as a leaf
            out.append(pa.field(name, _counts_type(list(f.type), for_json=for_json)))
        else:
            out.append(pa.field(name, pa.int64()))
    return pa.struct(out)


def stats_schema(schema: pa.Schema, *, for_json: bool = False) -> pa.Schema:
    """The struct layout :func:`parse_stats` returns for a table schema (fields = top level)."""
    # Built once per table schema (every conflict check and scan parses stats with it). Keyed by
    # the serialized schema: pa.Schema equality ignores field metadata, where physical names live.
    key = (schema.serialize().to_pybytes(), for_json)
    found = _STATS_SCHEMAS.get(key)
    if found is None:
        if len(_STATS_SCHEMAS) >= 64:
            _STATS_SCHEMAS.clear()
        found = _STATS_SCHEMAS[key] = _build_stats_schema(schema, for_json=for_json)
    return found


_STATS_SCHEMAS: dict[tuple[bytes, bool], pa.Schema] = {}


def _build_stats_schema(schema: pa.Schema, *, for_json: bool) -> pa.Schema:
    return pa.schema(
        [
            ("numRecords", pa.int64()),
            ("minValues", _bounds_type(list(schema), for_json=for_json)),
            ("maxValues", _bounds_type(list(schema), for_json=for_json)),
            ("nullCount", _counts_type(list(schema), for_json=for_json)),
            ("tightBounds", pa.bool_()),
        ]
    )


_ZONE_SUFFIX = r"(Z|z|[+-]\d{2}(:?\d{2})?)$"


def parse_timestamps(strings: pa.Array, t: pa.TimestampType) -> pa.Array:
    """ISO-8601 / ``YYYY-MM-DD HH:MM:SS[.f]`` strings -> timestamps of type ``t``.

    Text without a zone is taken as UTC; a zoned text for a zone-less type keeps its UTC wall time.
    Unparseable entries raise ``pyarrow.ArrowInvalid`` (callers decide if that is fatal).
    """
    strings = pc.utf8_trim_whitespace(strings)
    date_only = pc.equal(pc.utf8_length(strings), 10)
    strings = pc.if_else(date_only, pc.binary_join_element_wise(strings, "T00:00:00", ""), strings)
    zoned = pc.match_substring_regex(strings, _ZONE_SUFFIX)
    with_zone = pc.if_else(zoned, strings, pc.binary_join_element_wise(strings, "Z", ""))
    utc = pc.cast(with_zone, pa.timestamp(t.unit, tz="UTC"))
    return utc if t.tz is not None else pc.cast(utc, pa.timestamp(t.unit))


def _finish(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """Turn a JSON-read column into ``target``; bad or NaN bounds become null (= unknown)."""
    if pa.types.is_struct(target) and target.num_fields == 0:
        return arr  # no bounds at all (bool/binary/variant columns only): from_arrays would make it empty
    if pa.types.is_struct(target):
        children = [
            _finish(arr.field(i), target.field(i).type) for i in range(target.num_fields)
        ]
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_timestamp(target):
        return _cast_or_null(arr, target, lambda a: parse_timestamps(a, target))
    if pa.types.is_date(target):
        return _cast_or_null(arr, target, lambda a: pc.cast(pc.utf8_slice_codeunits(a, 0, 10), target))
    if pa.types.is_floating(target):
        return pc.if_else(pc.is_nan(arr), pa.scalar(None, target), arr)
    if not arr.type.equals(target):
        return pc.cast(arr, target)
    return arr


def _cast_or_null(arr: pa.Array, target: pa.DataType, convert) -> pa.Array:
    try:
        return convert(arr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        out = []
        for value in arr.to_pylist():  # error path only: isolate the bad entries
            try:
                out.append(convert(pa.array([value], pa.string()))[0].as_py() if value else None)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                out.append(None)
        return pa.array(out, target)


def _float_keys(bounds: pa.StructType) -> set[str]:
    """JSON keys of float bounds (at any depth) in a bounds struct."""
    out: set[str] = set()
    for f in bounds:
        if pa.types.is_struct(f.type):
            out |= _float_keys(f.type)
        elif pa.types.is_floating(f.type):
            out.add(f.name)
    return out


def _read_lines(data: pa.Buffer | bytes, json_schema: pa.Schema) -> pa.Table:
    # The reader allocates a whole block up front and hands blocks to Arrow's thread pool: for the
    # two stats strings of one winning commit both cost milliseconds (more with many processes on
    # few cores), so small inputs get a block just big enough, read on this thread.
    size = data.size if isinstance(data, pa.Buffer) else len(data)
    small = size < (1 << 20)
    return pj.read_json(
        pa.BufferReader(data) if isinstance(data, pa.Buffer) else io.BytesIO(data),
        read_options=pj.ReadOptions(block_size=min(1 << 24, max(1 << 16, size + 1)), use_threads=not small),
        parse_options=pj.ParseOptions(
            explicit_schema=json_schema, unexpected_field_behavior="ignore", newlines_in_values=False
        ),
    )


def _joined_lines(stats: pa.Array) -> pa.Buffer:
    """The strings as one newline-separated buffer, without a Python string per row."""
    big = pa.large_string()
    lines = pc.binary_join_element_wise(pc.cast(stats, big), pa.scalar("\n", big), pa.scalar("", big))
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    _, offsets, data = lines.buffers()
    starts = pa.Array.from_buffers(pa.int64(), len(lines) + 1, [None, offsets], offset=lines.offset)
    begin, end = starts[0].as_py(), starts[len(lines)].as_py()
    return data.slice(begin, end - begin)


#: up to this many stats strings are parsed with orjson (a winning commit's few adds): Arrow's
#: JSON reader has a fixed cost per call that dominates a conflict check on small commits
_FEW_STATS = 16


def _read_few(stats: pa.Array, json_schema: pa.Schema) -> pa.Table | None:
    """Few stats strings through orjson into the JSON schema's struct; None when any string is
    not plain JSON of the expected shape (the Arrow reader then decides, tolerantly)."""
    try:
        # a null or empty string is "no statistics", like "{}"
        docs = [orjson.loads(s) if s else {} for s in stats.to_pylist()]
        if not all(type(d) is dict for d in docs):
            return None
        return pa.Table.from_pylist([{k: d.get(k) for k in json_schema.names} for d in docs], schema=json_schema)
    except (orjson.JSONDecodeError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return None


def _read_tolerant(stats: pa.Array, json_schema: pa.Schema) -> pa.Table:
    """Parse all lines; if some line is malformed, parse in slices and null only the bad ones.

    A raw line break inside one stats string (pretty-printed JSON) shows up as an error or as a
    row count that does not add up; such a string is retried with its line breaks blanked.
    """
    try:
        table = _read_lines(_joined_lines(stats), json_schema)
        if table.num_rows == len(stats):
            return table
    except pa.ArrowInvalid:
        pass
    if len(stats) == 1:
        flat = pc.replace_substring_regex(stats, r"[\r\n]", " ")
        try:
            table = _read_lines(_joined_lines(flat), json_schema)
            if table.num_rows == 1:
                return table
        except pa.ArrowInvalid:
            pass
        return _read_lines(b"{}\n", json_schema)
    half = len(stats) // 2
    return pa.concat_tables(
        [_read_tolerant(stats.slice(0, half), json_schema), _read_tolerant(stats.slice(half), json_schema)]
    )


def parse_stats(stats: pa.Array | pa.ChunkedArray, schema: pa.Schema) -> pa.StructArray:
    """Parse many ``stats`` JSON strings into one typed struct per file.

    Result type: ``struct<numRecords int64, minValues struct<..>, maxValues struct<..>,
    nullCount struct<..>, tightBounds bool>`` with bounds typed by ``schema`` (only columns that can
    have min/max) and counts as int64, nested like the schema. A null, empty or malformed stats
    string — or a bound of the wrong type — yields nulls for what it cannot give: unknown, never
    wrong. ``schema`` should be the data columns (partition columns have no stats).
    """
    target = stats_schema(schema)
    json_schema = stats_schema(schema, for_json=True)
    if isinstance(stats, pa.ChunkedArray):
        stats = stats.combine_chunks() if stats.num_chunks else pa.array([], pa.string())
    if not pa.types.is_string(stats.type) and not pa.types.is_large_string(stats.type):
        stats = pc.cast(stats, pa.string())
    if len(stats) == 0:
        return pa.array([], pa.struct(list(target)))
    float_keys = _float_keys(json_schema.field("minValues").type)
    table = _read_few(stats, json_schema) if len(stats) <= _FEW_STATS and not float_keys else None
    if table is None:
        table = _read_many(stats, json_schema, float_keys)
    columns = []
    for i, field in enumerate(target):
        col = table.column(i).combine_chunks()
        columns.append(_finish(col, field.type))
    return pa.StructArray.from_arrays(columns, fields=list(target))


def _read_many(stats: pa.Array, json_schema: pa.Schema, float_keys: set[str]) -> pa.Table:
    """Arrow's JSON reader over all strings (quoted NaN/Infinity float bounds made bare first)."""
    cleaned = pc.fill_null(stats, "{}")
    cleaned = pc.if_else(pc.equal(cleaned, ""), "{}", cleaned)
    if float_keys:
        # Spark writes a NaN/infinite bound as a quoted "NaN"/"Infinity"; the JSON reader takes
        # the bare tokens for float fields (and _finish turns NaN into an unknown bound)
        keys = "|".join(re.escape(orjson.dumps(k).decode()) for k in sorted(float_keys))
        cleaned = pc.replace_substring_regex(cleaned, f'({keys}):\\s*"(-?Infinity|NaN)"', r"\1:\2")
    # parse_stats tried the few-strings reader already, unless float bounds had to be rewritten
    table = _read_few(cleaned, json_schema) if float_keys and len(cleaned) <= _FEW_STATS else None
    return table if table is not None else _read_tolerant(cleaned, json_schema)
