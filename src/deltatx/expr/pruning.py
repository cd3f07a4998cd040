"""File pruning: "may this file hold a row where the predicate is TRUE?", for many files at once.

Owns data skipping for scans and the file-level half of conflict detection (a winning commit's
added files against this transaction's read predicate). Everything is columnar over the files
table (``partitionValues`` map and ``stats`` JSON of ``add`` actions):

- a sub-expression over partition columns only is evaluated EXACTLY on the typed partition values
  (every row of a file shares them); a NULL result means the file does not match;
- a comparison of a data column with a constant uses the file's min/max/nullCount statistics;
- NOT is pushed down (negation normal form) so ``NOT (a < 5)`` prunes like ``a >= 5``;
- anything else, and any missing statistic, means "may match".

Soundness rule: this may answer TRUE for a file without matches, never FALSE for a file with one.
Bounds are treated as possibly inexact: strings may be truncated prefixes, timestamps truncated to
milliseconds (widened by a millisecond here), floats may hide NaN (so negated float comparisons
are never used to prune, nor is a comparison with a NaN constant: NaN sorts above every number).
"""

from __future__ import annotations

import functools

import threading
from collections import OrderedDict
from typing import Any, Callable, Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import PredicateError
from ..txnlog.partition_values import partition_column
from ..txnlog.stats import _physical_name, parse_stats
from .bind import bind, is_bound
from .pruning_few import MAX_FILES as MAX_FEW_FILES, files_matching_few
from .model import FLIPPED, NEGATED, And, Column, Comparison, Expr, Func, In, IsNull, Like, Literal, Not, Or
from .rows import cast_values, evaluate
from .values import common_type, plain_type

#: IN lists longer than this are checked against the list's [min, max] range only
_MAX_IN_VALUES = 64
#: ranges (slices) of one chunk's buffers remembered at once
_RANGES_PER_CHUNK = 4
_CACHE_ENTRIES = 256  # chunks: a snapshot adds one per commit (replay compacts them at 16)


# --------------------------------------------------------------------------------------------
# Parsed statistics, cached per stats column
# --------------------------------------------------------------------------------------------


class _DerivedCache:
    """Values derived from a log column (stats JSON, partition values), chunk by chunk.

    A snapshot's file table grows by a chunk per commit, and a commit that drops files keeps the
    rest as zero-copy slices of the old chunks (txnlog.replay). So the cache is keyed by a chunk's
    *buffers*: a later slice of the same buffers is served by slicing the derived arrays, and only
    the new commit's rows are derived again. An entry keeps its chunk alive, so its buffer
    addresses cannot be reused by other data while the entry exists: a key cannot alias different
    content. Derived values are arrays with one row per source row.
    """

    def __init__(self, entries: int):
        self.entries = entries
        self._lock = threading.Lock()
        # buffers key -> [(chunk, its offset, its length, {name: derived array})], newest first
        self._data: OrderedDict[tuple, list[tuple[pa.Array, int, int, dict[Any, Any]]]] = OrderedDict()

    @staticmethod
    def key(chunk: pa.Array) -> tuple:
        bufs = tuple((b.address, b.size) if b is not None else (0, 0) for b in chunk.buffers())
        return (str(chunk.type), bufs)

    def get(
        self,
        source: pa.ChunkedArray,
        names: Sequence[Any],
        compute: Callable[[pa.ChunkedArray, list[Any]], dict[Any, Any]],
    ) -> dict[Any, Any]:
        """``{name: derived array}`` for all of ``source``; ``compute(chunk, missing_names)``
        derives what the cache lacks for one chunk."""
        chunks = source.chunks or [pa.array([], source.type)]
        parts = [self._chunk(c, names, compute) for c in chunks]
        if len(parts) == 1:
            return parts[0]
        return {n: pa.concat_arrays([_as_array(p[n]) for p in parts]) for n in names
                if all(n in p for p in parts)}

    def _chunk(self, chunk: pa.Array, names: Sequence[Any],
               compute: Callable[[pa.ChunkedArray, list[Any]], dict[Any, Any]]) -> dict[Any, Any]:
        k = self.key(chunk)
        start, length = chunk.offset, len(chunk)
        cached: dict[Any, Any] = {}
        exact: dict[Any, Any] | None = None
        with self._lock:
            ranges = self._data.get(k)
            if ranges is not None:
                self._data.move_to_end(k)
                for _, first, n, derived in ranges:
                    if first <= start and start + length <= first + n:
                        at = start - first
                        cached = {name: v if (at, length) == (0, n) else v.slice(at, length)
                                  for name, v in derived.items()}
                        exact = derived if (first, n) == (start, length) else None
                        break
        missing = [n for n in names if n not in cached]
        if missing:
            fresh = compute(pa.chunked_array([chunk]), missing)
            with self._lock:
                if exact is not None:
                    exact.update(fresh)  # the same range: the entry gains the new names
                else:
                    ranges = self._data.setdefault(k, [])
                    ranges.insert(0, (chunk, start, length, dict(fresh)))
                    del ranges[_RANGES_PER_CHUNK:]
                self._data.move_to_end(k)
                while len(self._data) > self.entries:
                    self._data.popitem(last=False)
            cached.update(fresh)
        return {n: cached[n] for n in names if n in cached}

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


def _as_array(a: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(a, pa.ChunkedArray):
        return a.combine_chunks() if a.num_chunks != 1 else a.chunk(0)
    return a


def _project_column(parsed: pa.StructArray, name: str) -> pa.StructArray:
    """The per-column view: struct<min, max, nullCount, numRecords> (missing pieces null)."""
    n = len(parsed)
    pieces = {}
    for part in ("minValues", "maxValues", "nullCount"):
        sub = pc.struct_field(parsed, [parsed.type.get_field_index(part)])
        idx = sub.type.get_field_index(name)
        pieces[part] = pc.struct_field(sub, [idx]) if idx >= 0 else pa.nulls(n)
    records = pc.struct_field(parsed, [parsed.type.get_field_index("numRecords")])
    return pa.StructArray.from_arrays(
        [pieces["minValues"], pieces["maxValues"], pieces["nullCount"], records],
        names=["min", "max", "nullCount", "numRecords"],
    )


#: parsed stats and typed partition values of recently seen file tables
STATS_CACHE = _DerivedCache(_CACHE_ENTRIES)


# --------------------------------------------------------------------------------------------
# Per-call context: typed partition values and stats, computed on first use
# --------------------------------------------------------------------------------------------


class _Files:
    """One files table seen through a schema: typed partition values and per-column stats."""

    def __init__(self, files: pa.Table, schema: pa.Schema, partition_columns: Sequence[str], use_stats: bool):
        self.files = files
        self.n = files.num_rows
        self.schema = schema
        lower = {c.lower() for c in partition_columns}
        self.partition_fields = {f.name: f for f in schema if f.name.lower() in lower}
        self.data_schema = pa.schema([f for f in schema if f.name not in self.partition_fields])
        self.use_stats = use_stats and "stats" in files.column_names
        self._partition_table: dict[str, pa.Array] = {}
        self._stats: dict[str, pa.StructArray] = {}

    def all(self, value: bool) -> pa.Array:
        return pa.repeat(pa.scalar(value), self.n)

    def is_partition_only(self, e: Expr) -> bool:
        return all(
            not isinstance(c, Column) or (c.qualifier is None and c.name in self.partition_fields)
            for c in e.walk()
        )

    def partition_table(self, names: Iterable[str]) -> pa.Table:
        for name in names:
            if name not in self._partition_table:
                self._partition_table[name] = self._read_partition(name)
        cols = {name: self._partition_table[name] for name in names}
        if not cols:
            return pa.table({"__rows": pa.nulls(self.n)})
        return pa.table(cols)

    def _read_partition(self, name: str) -> pa.Array:
        f = self.partition_fields[name]
        if "partitionValues" not in self.files.column_names:
            return pa.nulls(self.n, plain_type(f.type))
        pv = _as_chunked(self.files.column("partitionValues"))
        key = ("partition", f.name, _physical_name(f), str(f.type))
        plain = f.with_type(plain_type(f.type))
        def compute(chunk: pa.ChunkedArray, _: list[Any]) -> dict[Any, Any]:
            return {key: _as_array(partition_column(pa.table({"partitionValues": chunk}), plain))}

        return STATS_CACHE.get(pv, [key], compute)[key]

    def _stats_for(self, names: list[str]) -> dict[str, pa.StructArray]:
        source = _as_chunked(self.files.column("stats"))
        fields = {f.name: f for f in self.data_schema}
        wanted = [n for n in names if n in fields]
        keys = [("stats", n, _physical_name(fields[n]), str(fields[n].type)) for n in wanted]

        def compute(chunk: pa.ChunkedArray, missing: list[Any]) -> dict[Any, Any]:
            parsed = parse_stats(chunk, pa.schema([fields[k[1]] for k in missing]))
            return {k: _project_column(parsed, k[1]) for k in missing}

        got = STATS_CACHE.get(source, keys, compute)
        return {k[1]: got[k] for k in keys if k in got}

    def stats(self, column: str) -> pa.StructArray | None:
        if not self.use_stats or column in self.partition_fields or column not in self.data_schema.names:
            return None
        if column not in self._stats:
            got = self._stats_for([column])
            if column not in got:
                return None
            self._stats[column] = got[column]
        return self._stats[column]

    def prefetch(self, columns: Iterable[str]) -> None:
        wanted = [c for c in columns if c in self.data_schema.names and c not in self._stats]
        if self.use_stats and wanted:
            self._stats.update(self._stats_for(wanted))


def _as_chunked(a: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    return a if isinstance(a, pa.ChunkedArray) else pa.chunked_array([a])


# --------------------------------------------------------------------------------------------
# The "may match" evaluation
# --------------------------------------------------------------------------------------------


def _maybe(mask: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Unknown (null) means "may match"."""
    return pc.fill_null(mask, True)


def _bounds(files: _Files, c: Column) -> tuple[pa.Array, pa.Array] | None:
    """(min, max) of column ``c`` per file, widened as needed (null counts: :func:`_bounds_counts`)."""
    st = files.stats(c.name)
    if st is None:
        return None
    lo, hi = pc.struct_field(st, [0]), pc.struct_field(st, [1])
    for part in c.path:  # nested: walk the struct bounds
        idx = lo.type.get_field_index(part) if pa.types.is_struct(lo.type) else -1
        if idx < 0:
            return None
        lo, hi = pc.struct_field(lo, [idx]), pc.struct_field(hi, [idx])
    if pa.types.is_struct(lo.type) or pa.types.is_null(lo.type):
        return None
    if pa.types.is_timestamp(lo.type):
        lo, hi = _widen_millis(lo, hi)
    return lo, hi


def _widen_millis(lo: pa.Array, hi: pa.Array) -> tuple[pa.Array, pa.Array]:
    per_unit = {"s": 0, "ms": 0, "us": 999, "ns": 999_999}[lo.type.unit]
    if not per_unit:
        return lo, hi
    t = lo.type
    lo_i = pc.subtract(pc.cast(lo, pa.int64()), per_unit)
    hi_i = pc.add(pc.cast(hi, pa.int64()), per_unit)
    return pc.cast(lo_i, t), pc.cast(hi_i, t)


def _column_and_literal(e: Comparison) -> tuple[Column, Literal, str] | None:
    if isinstance(e.left, Column) and isinstance(e.right, Literal):
        return e.left, e.right, e.op
    if isinstance(e.right, Column) and isinstance(e.left, Literal):
        return e.right, e.left, FLIPPED[e.op]
    return None


def _cmp_stats(op: str, lo: pa.Array, hi: pa.Array, value: pa.Scalar) -> pa.Array:
    if op == "=":
        return _maybe(pc.and_kleene(pc.less_equal(lo, value), pc.greater_equal(hi, value)))
    if op == "!=":  # every non-null value equals `value` only if min == max == value
        return _maybe(pc.invert(pc.and_kleene(pc.equal(lo, value), pc.equal(hi, value))))
    if op == "<":
        return _maybe(pc.less(lo, value))
    if op == "<=":
        return _maybe(pc.less_equal(lo, value))
    if op == ">":
        return _maybe(pc.greater(hi, value))
    if op == ">=":
        return _maybe(pc.greater_equal(hi, value))
    raise AssertionError(op)


def _comparison(files: _Files, e: Comparison, negated: bool) -> pa.Array:
    found = _column_and_literal(e)
    if found is None:
        return files.all(True)
    column, literal, op = found
    if op == "<=>":
        if literal.value is None:
            return _is_null(files, column, negated=negated)
        if negated:
            return files.all(True)
        op = "="
    if literal.value is None:
        return files.all(False)  # x op NULL is never TRUE, nor is its negation
    bounds = _bounds(files, column)
    if bounds is None:
        return files.all(True)
    lo, hi = bounds
    if negated:
        if pa.types.is_floating(lo.type):
            return files.all(True)  # NOT (x < 5) holds for NaN, which bounds do not describe
        op = NEGATED[op]
    if op == "!=" and pa.types.is_floating(lo.type):
        return files.all(True)  # NaN != v is TRUE; a file's bounds may hide its NaNs
    value = _stats_scalar(literal, lo.type)
    if value is None or _is_nan(literal):
        return files.all(True)  # NaN sorts above every bound (Spark's order), which min/max cannot say
    aligned = _aligned(lo, hi, value.type)
    if aligned is None:
        return files.all(True)
    return _cmp_stats(op, *aligned, value)


def _aligned(lo: pa.Array, hi: pa.Array, t: pa.DataType) -> tuple[pa.Array, pa.Array] | None:
    """Bounds in the type the rows are compared in (Spark's common type of the column's and
    the constant's, as rows.py compares them), None when they cannot be (nothing is pruned).

    Casting keeps them bounds: every such cast is monotone (a BIGINT rounded to DOUBLE may
    round, but never past another value's place), and the rows meet the constant in that type
    too. A STRING column against a number is never pruned: its rows compare as numbers, its
    bounds as text."""
    if lo.type.equals(t):
        return lo, hi
    common = common_type(lo.type, t)
    if common is None:
        return lo, hi  # Arrow's own promotion, as the row filter has it
    if pa.types.is_string(plain_type(lo.type)):
        return None
    try:  # the rows' own cast (a DECIMAL rounds half away from zero: monotone too)
        return cast_values(lo, common), cast_values(hi, common)
    except PredicateError:
        return None


def _is_nan(literal: Literal) -> bool:
    return isinstance(literal.value, float) and literal.value != literal.value


def _stats_scalar(literal: Literal, t: pa.DataType) -> pa.Scalar | None:
    """The literal as a scalar the bounds of type ``t`` can be compared with, else None."""
    s = literal.to_scalar()
    if s.type.equals(t):
        return s
    try:
        pc.less(pa.nulls(1, t), s)  # can the kernels compare these types at all?
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    return s


def _is_null(files: _Files, column: Column, negated: bool) -> pa.Array:
    bounds = _bounds_counts(files, column)
    if bounds is None:
        return files.all(True)
    nulls, records = bounds
    if negated:  # IS NOT NULL: some value is not null
        return _maybe(pc.less(nulls, records))
    return _maybe(pc.greater(nulls, 0))


def _bounds_counts(files: _Files, c: Column) -> tuple[pa.Array, pa.Array] | None:
    st = files.stats(c.name)
    if st is None:
        return None
    nulls = pc.struct_field(st, [2])
    for part in c.path:
        idx = nulls.type.get_field_index(part) if pa.types.is_struct(nulls.type) else -1
        if idx < 0:
            return None
        nulls = pc.struct_field(nulls, [idx])
    if pa.types.is_struct(nulls.type):
        return None  # a struct's own nullness is not recorded
    return nulls, pc.struct_field(st, [3])


def _in_list(files: _Files, e: In, negated: bool) -> pa.Array:
    if not isinstance(e.operand, Column) or not all(isinstance(v, Literal) for v in e.values):
        return files.all(True)
    values = [v.value for v in e.values]  # type: ignore[union-attr]
    excluding = e.negated != negated  # effective NOT IN
    if excluding:
        if any(v is None for v in values):
            return files.all(False)  # x NOT IN (.., NULL) is never TRUE
        if not values:
            return files.all(True)
    present = [v for v in e.values if v.value is not None]  # type: ignore[union-attr]
    if not excluding and not present:
        return files.all(False)
    bounds = _bounds(files, e.operand)
    if bounds is None:
        return files.all(True)
    lo, hi = bounds
    scalars = [_stats_scalar(v, lo.type) for v in present]  # type: ignore[arg-type]
    if any(s is None for s in scalars) or any(_is_nan(v) for v in present):  # type: ignore[arg-type]
        return files.all(True)
    if len({str(s.type) for s in scalars}) != 1:
        return files.all(True)
    aligned = _aligned(lo, hi, scalars[0].type)
    if aligned is None:
        return files.all(True)
    lo, hi = aligned
    if excluding:
        if pa.types.is_floating(lo.type):
            return files.all(True)
        value_set = pa.array([s.as_py() for s in scalars], type=scalars[0].type)
        single = pc.and_kleene(pc.equal(lo, hi), pc.is_in(lo, value_set=value_set))
        return _maybe(pc.invert(single))
    if len(scalars) > _MAX_IN_VALUES:
        arr = pa.array([s.as_py() for s in scalars], type=scalars[0].type)
        bounds_of_list = pc.min_max(arr)
        return _maybe(
            pc.and_kleene(pc.less_equal(lo, bounds_of_list["max"]), pc.greater_equal(hi, bounds_of_list["min"]))
        )
    out = None
    for s in scalars:
        one = _cmp_stats("=", lo, hi, s)
        out = one if out is None else pc.or_(out, one)
    return out


def _prefix(files: _Files, column: Column, prefix: str) -> pa.Array:
    bounds = _bounds(files, column)
    if bounds is None or not pa.types.is_string(bounds[0].type):
        return files.all(True)
    lo, hi = bounds
    p = pa.scalar(prefix, lo.type)
    low_ok = pc.or_kleene(pc.less_equal(lo, p), pc.starts_with(lo, pattern=prefix))
    return _maybe(pc.and_kleene(low_ok, pc.greater_equal(hi, p)))


def _may_match(files: _Files, e: Expr, negated: bool) -> pa.Array:
    if files.is_partition_only(e):
        names = sorted(e.columns())
        truth = evaluate(e, files.partition_table(names))
        if pa.types.is_null(truth.type):
            return files.all(False)
        if negated:
            truth = pc.invert(truth)
        return pc.fill_null(truth, False)
    if isinstance(e, Not):
        return _may_match(files, e.operand, not negated)
    if isinstance(e, (And, Or)):
        conjunctive = isinstance(e, And) != negated
        left = _may_match(files, e.left, negated)
        right = _may_match(files, e.right, negated)
        return pc.and_(left, right) if conjunctive else pc.or_(left, right)
    if isinstance(e, Comparison):
        return _comparison(files, e, negated)
    if isinstance(e, In):
        return _in_list(files, e, negated)
    if isinstance(e, IsNull) and isinstance(e.operand, Column):
        return _is_null(files, e.operand, negated=e.negated != negated)
    if isinstance(e, Like) and not negated and not e.negated and isinstance(e.operand, Column):
        prefix = e.like_prefix()
        if prefix is not None:
            return _prefix(files, e.operand, prefix)
    if (
        isinstance(e, Func) and e.name == "startswith" and not negated
        and isinstance(e.args[0], Column) and isinstance(e.args[1], Literal)
        and isinstance(e.args[1].value, str)
    ):
        return _prefix(files, e.args[0], e.args[1].value)
    return files.all(True)


def _stats_columns(e: Expr, files: _Files) -> list[str]:
    return sorted(
        {c.name for c in e.walk() if isinstance(c, Column) and c.qualifier is None and c.name not in files.partition_fields}
    )


@functools.lru_cache(maxsize=256)
def _bound_cached(expr: Expr, spelled: str, schema: pa.Schema) -> Expr:
    return bind(expr, schema)


def _bound(expr: Expr, schema: pa.Schema) -> Expr:
    """``bind`` once per (predicate, schema): the conflict checker tests one transaction's
    predicates against every winner, each time with the same schema."""
    if is_bound(expr, schema):  # this process just bound it (the scan, the checker's read set)
        return expr
    try:
        # repr tells apart literals Python compares equal (1, 1.0, True)
        return _bound_cached(expr, repr(expr), schema)
    except TypeError:  # an unhashable literal: bind every time
        return bind(expr, schema)


def files_matching(
    expr: Expr,
    files: pa.Table,
    schema: pa.Schema,
    partition_columns: Sequence[str],
    use_stats: bool = True,
) -> pa.BooleanArray:
    """For each row of ``files`` (add actions): may that file hold a row where ``expr`` is TRUE?

    ``schema`` is the table schema (data and partition columns); ``expr`` is bound to it here.
    Partition columns are decided exactly from ``partitionValues``; data columns from ``stats``
    (unless ``use_stats`` is false), conservatively.
    """
    bound = _bound(expr, schema)
    if use_stats and files.num_rows <= MAX_FEW_FILES:
        few = files_matching_few(bound, files, schema, partition_columns)
        if few is not None:
            return pa.array(few, pa.bool_())
    ctx = _Files(files, schema, partition_columns, use_stats)
    if ctx.n == 0:
        return pa.array([], pa.bool_())
    ctx.prefetch(_stats_columns(bound, ctx))
    out = _may_match(ctx, bound, negated=False)
    if isinstance(out, pa.ChunkedArray):
        out = out.combine_chunks() if out.num_chunks else pa.array([], pa.bool_())
    return pc.fill_null(out, True)
