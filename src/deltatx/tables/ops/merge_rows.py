"""MERGE execution: find the matches, rewrite the files holding them, insert the rest (columnar).

::

    read predicate = target-only conjuncts ∧ per key (k IN (source keys) | k BETWEEN min AND max)
      │   (∨ each NOT MATCHED BY SOURCE condition; the whole table if one has none)
      │   tx.scan(): prunes files by partition values and stats; it is also the MERGE's read for
      │   conflict detection, so MERGEs into disjoint partitions do not conflict
      ▼
    phase 1  read only the columns ON and the clause conditions need, file by file (parallel)
             hash join on the equi-keys (pyarrow), residual conjuncts on the pairs
             first matching clause per pair ─► cardinality check ─► clause code per target row
    phase 2  read the other columns of the files holding a changed row; SET values are computed
             on the changed rows only and scattered into the columns by one ``take`` per column,
             which also drops deleted rows; untouched files are not read again
    inserts  unmatched source rows, first matching NOT MATCHED clause
    write    one write of rewritten + inserted rows; stage removes of the rewritten files

No Python loop runs per row: numpy index arrays and Arrow kernels do the work. A MERGE whose
only clauses insert removes no file.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import IdentityColumnError, MergeCardinalityError, PredicateError, SchemaMismatchError
from ...expr import (
    FALSE,
    TRUE,
    And,
    Column,
    Comparison,
    Expr,
    In,
    Literal,
    and_all,
    evaluate,
    matches,
    or_all,
    strip_alias,
)
from ...expr.rows import cast_values
from ...expr.values import common_type, plain_type
from ...io.reader import read_files
from ...txnlog.struct_nulls import converted, has_required_fields
from .merge import NOT_MATCHED_BY_SOURCE, BoundClause, MergePlan
from ...io.row_metadata import ROW_COMMIT_VERSION, ROW_ID, ROW_INDEX
from .scatter import scatter, scatter_index
from .struct_fields import FieldAssignments, with_fields
from .merge_on_read import mark_changed, materialized, record_read, row_columns, stage_changed_rows, uses_deletion_vectors
from .dml_metrics import MERGE_KEYS, total_size, with_deletion_vectors, with_delta_keys
from .rewrite import write_files
from . import change_feed
from ..constraints import generated_values, rules_for
from ..data import assign_value, refuse_missing_required
from ..identity import Origin, assigner, given_bounds
from ..defaults import default_sql, default_values, fill

if TYPE_CHECKING:
    from ..transaction import Transaction

#: a source key with at most this many distinct values prunes target files with an IN list
IN_LIST_MAX = 64
#: the same for a key that is a partition column (exact, and what keeps MERGEs into disjoint
#: partitions from conflicting)
PARTITION_IN_LIST_MAX = 4096
#: an ON without any ``t.x = s.y`` is a nested-loop join; refuse beyond this many pairs
CROSS_JOIN_MAX_PAIRS = 20_000_000

_READ_WORKERS = 8
_EMPTY = np.empty(0, np.int64)


def execute_merge(tx: "Transaction", plan: MergePlan) -> dict[str, Any]:
    """Stage the MERGE described by ``plan`` into ``tx``; returns Delta's MERGE metrics."""
    return MergeExecutor(tx, plan).run()


def _names(exprs: list[Expr | None], alias: str) -> set[str]:
    """Top-level column names that ``exprs`` read through ``alias``."""
    prefix = f"{alias}."
    return {ref[len(prefix):] for e in exprs if e is not None for ref in e.columns() if ref.startswith(prefix)}


def _whole(values: Any, n: int) -> pa.Array:
    """An evaluated expression as an array of ``n`` values (a constant is repeated)."""
    if isinstance(values, pa.Scalar):
        return pa.repeat(values, n)
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _view(columns: dict[str, Any], n: int) -> pa.Table:
    """A table to evaluate qualified expressions on (a placeholder column keeps the row count)."""
    return pa.table(columns) if columns else pa.table({"__rows": pa.nulls(n, pa.null())})


def _mask(expr: Expr | None, table: pa.Table) -> np.ndarray:
    if expr is None:
        return np.ones(table.num_rows, dtype=bool)
    return np.asarray(matches(expr, table).to_numpy(zero_copy_only=False), dtype=bool)


def _valid(values: pa.Array | pa.ChunkedArray, ok: np.ndarray) -> np.ndarray:
    """``ok`` narrowed to the rows where ``values`` is not NULL."""
    if not values.null_count:
        return ok
    return ok & np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False), dtype=bool)


def _take(values: pa.Array | pa.ChunkedArray, rows: np.ndarray) -> pa.Array | pa.ChunkedArray:
    """``values[rows]``; no copy when ``rows`` is every row in order."""
    if len(rows) == len(values) and (not len(rows) or rows[-1] == len(rows) - 1):
        return values  # flatnonzero of an all-true mask: 0..n-1
    return values.take(pa.array(rows, pa.int64()))


def _as_column_type(values: pa.Array, t: pa.DataType) -> pa.Array:
    """New values as the column's type. A NULL struct over a NOT NULL field has NULLs under it
    that Arrow's cast refuses: they become placeholders (txnlog/struct_nulls.py)."""
    if values.type.equals(t) and not (values.null_count and has_required_fields(t)):
        return values
    return converted(values, t, pa.Array.cast)


def _fixed_width(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def _overwrite_fixed(column: pa.ChunkedArray, pieces: list[tuple[np.ndarray, pa.Array]]) -> pa.ChunkedArray:
    """A fixed-width column with values written at positions (no row deleted): one NumPy copy.

    Far cheaper than a ``take`` over every row; NULLs on either side fall back to the take.
    """
    values = [v for _, v in pieces]
    if column.null_count or any(v.null_count for v in values):
        n = len(column)
        return scatter(column, values, scatter_index(n, pieces, None))
    out = column.to_numpy()  # concatenates the chunks: a fresh, writable copy
    if not out.flags.writeable:
        out = out.copy()
    for positions, v in pieces:
        out[positions] = v.to_numpy(zero_copy_only=False)
    return pa.chunked_array([pa.array(out, column.type)], column.type)


def _scatter_by_chunk(column: pa.ChunkedArray, pieces: list[tuple[np.ndarray, pa.Array]]) -> pa.ChunkedArray:
    """Values written at positions, no row deleted: one small ``take`` per chunk (≈ per file).

    A single take over millions of variable-width rows allocates one huge buffer, whose first
    touch dominated MERGE time; chunk-sized takes reuse memory and run on several cores.
    """
    positions = np.concatenate([p for p, _ in pieces])
    values = pa.concat_arrays([v for _, v in pieces]) if len(pieces) > 1 else pieces[0][1]
    order = np.argsort(positions, kind="stable")
    positions = positions[order]
    bounds = np.cumsum([0] + [len(c) for c in column.chunks])
    cuts = np.searchsorted(positions, bounds)

    def one(k: int) -> pa.Array:
        chunk = column.chunks[k]
        lo, hi = cuts[k], cuts[k + 1]
        if lo == hi:
            return chunk
        local = positions[lo:hi] - bounds[k]
        index = np.arange(len(chunk), dtype=np.int64)
        index[local] = len(chunk) + np.arange(hi - lo, dtype=np.int64)
        new = values.take(pa.array(order[lo:hi], pa.int64()))
        return pa.concat_arrays([chunk, _as_column_type(new, chunk.type)]).take(pa.array(index))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return pa.chunked_array(list(pool.map(one, range(column.num_chunks))), column.type)


def _first_clause(clauses: list[BoundClause], view: pa.Table, active: np.ndarray, first_code: int,
                  codes: np.ndarray) -> None:
    """codes[i] = first_code + j for the first clause j whose condition holds on active row i."""
    remaining = active.copy()
    for j, clause in enumerate(clauses):
        if not remaining.any():
            break
        try:
            holds = _mask(clause.condition, view)  # every row at once, vectorized
        except PredicateError:
            # it fails on some row, maybe one an earlier clause took or no clause sees: Spark
            # evaluates a clause's condition only on the rows still left to it
            at = np.flatnonzero(remaining)
            holds = np.zeros(len(remaining), dtype=bool)
            holds[at] = _mask(clause.condition, view.take(pa.array(at, pa.int64())))
        hit = remaining & holds
        codes[hit] = first_code + j
        remaining &= ~hit


class MergeExecutor:
    """Runs one MERGE plan against a transaction's files.

    Public steps, so that a distributed engine (``deltatx.spark``) can reuse the row semantics
    instead of re-implementing them: :meth:`eligible_source` and :meth:`candidate_files` plan on
    the driver, :meth:`match_pairs` is the join a subclass may observe, :meth:`run` stages the
    rewrite, :meth:`parameters` gives commitInfo's operationParameters.
    """

    def __init__(self, tx: "Transaction", plan: MergePlan):
        self.started = time.perf_counter()
        self.tx, self.plan = tx, plan
        self.ta, self.sa = plan.target_alias, plan.source_alias
        self.schema, self.partition_columns = tx.schema, tx.partition_columns
        self.source = plan.source
        self.clauses = plan.matched + plan.by_source  # codes 0.. of target-row actions
        self.touched = _EMPTY  # indexes (among the candidate files) of the files rewritten
        self.on_read = False  # merge-on-read: changed rows go to DVs (set per run)
        self.meta: list[str] = []  # _metadata.* columns read along (positions, row ids)
        self.changed: list[np.ndarray] = []  # per touched file, the positions changed (merge-on-read)
        self._removed: pa.Table | None = None  # the files this MERGE removed / wrote (staged)
        self._added: pa.Table | None = None
        rules = rules_for(self.schema, tx.properties, tx.protocol)
        self.identity = {s.column: s for s in rules.identity} if rules is not None else {}
        self.generated = {g.column: g for g in rules.generated} if rules is not None else {}
        # where the inserted rows' identity values come from (None: no row inserted); on a table
        # with identity columns they are written in files of their own (see _write)
        self.insert_origin: Origin | None = None
        self.metrics: dict[str, Any] = {
            "numSourceRows": self.source.num_rows,
            "numTargetRowsInserted": 0, "numTargetRowsUpdated": 0, "numTargetRowsDeleted": 0,
            "numTargetRowsMatchedUpdated": 0, "numTargetRowsMatchedDeleted": 0,
            "numTargetRowsNotMatchedBySourceUpdated": 0, "numTargetRowsNotMatchedBySourceDeleted": 0,
            "numTargetRowsCopied": 0, "numOutputRows": 0,
            "numTargetFilesBeforeSkipping": tx.current_files().num_rows, "numTargetFilesAfterSkipping": 0,
            "numTargetFilesAdded": 0, "numTargetFilesRemoved": 0,
            "numTargetBytesAdded": 0, "numTargetBytesRemoved": 0,
        }

    # ---- which target files can hold a match -----------------------------------------------
    def eligible_source(self) -> np.ndarray:
        """Source rows that can match at all: source-only conjuncts TRUE, no NULL key."""
        ok = np.ones(self.source.num_rows, dtype=bool)
        if self.plan.source_only:
            names = sorted(_names(self.plan.source_only, self.sa))
            view = _view({f"{self.sa}.{n}": self.source.column(n) for n in names}, self.source.num_rows)
            ok &= _mask(and_all(self.plan.source_only), view)
        for _, sname in self.plan.keys:
            ok = _valid(self.source.column(sname), ok)
        return ok

    def _key_type(self, tname: str, sname: str) -> pa.DataType:
        """The type ``t.a = s.b`` joins in: Spark's common type of the two keys (a STRING key
        with a BIGINT one joins as BIGINT, '05' matching 5), else the target key's type."""
        t = plain_type(self.schema.field(tname).type)
        s = plain_type(self.source.schema.field(sname).type)
        return common_type(t, s) or t

    def _source_key(self, sname: str, tname: str, rows: np.ndarray) -> pa.Array:
        """Source key values of ``rows``, as the join's key type (for joining and literals)."""
        values = _take(self.source.column(sname), rows).combine_chunks()
        return self._as_key(values, self._key_type(tname, sname), f"{self.sa}.{sname}", f"{self.ta}.{tname}")

    def _as_key(self, values: pa.Array | pa.ChunkedArray, t: pa.DataType, name: str, other: str) -> pa.Array | pa.ChunkedArray:
        """``values`` cast to the key type ``t`` as Spark casts (expr.rows.cast_values), floats
        normalized as Spark normalizes join keys: -0.0 is 0.0 ("+ 0.0"; NaN already finds NaN
        in Arrow's hash join)."""
        if not plain_type(values.type).equals(t):
            try:
                values = cast_values(values, t)
            except PredicateError as exc:
                raise PredicateError(f"MERGE key {name} ({values.type}) cannot be compared with {other}: {exc}") from None
        if pa.types.is_floating(t):
            values = pc.add(values, pa.scalar(0.0, t))
        return values

    def _key_predicate(self, tname: str, keys: pa.Array) -> Expr:
        t = keys.type
        distinct = pc.unique(keys)
        limit = PARTITION_IN_LIST_MAX if tname in self.partition_columns else IN_LIST_MAX
        if len(distinct) <= limit:
            return In(Column(tname), tuple(Literal(v, t) for v in distinct.to_pylist()))
        bounds = pc.min_max(keys)
        return And(Comparison(">=", Column(tname), Literal(bounds["min"].as_py(), t)),
                   Comparison("<=", Column(tname), Literal(bounds["max"].as_py(), t)))

    def candidate_files(self, eligible: np.ndarray) -> pa.Table | None:
        """Scan (and record) the target files that may hold an affected row; None when none can.

        A row is affected when ON may match it, or — with NOT MATCHED BY SOURCE clauses — when
        one of their conditions may hold (any row, if one has no condition).
        """
        plan = self.plan
        if plan.keys and not eligible.any():
            pred: Expr = FALSE
        else:
            pieces = [strip_alias(c, self.ta) for c in plan.target_only]
            rows = np.flatnonzero(eligible)
            for tname, sname in plan.keys:
                pieces.append(self._key_predicate(tname, self._source_key(sname, tname, rows)))
            pred = and_all(pieces)
        if plan.by_source:
            conditions = [c.condition for c in plan.by_source]
            if any(c is None for c in conditions) or pred == TRUE:
                pred = TRUE
            else:
                pred = or_all([pred] + [strip_alias(c, self.ta) for c in conditions])
        if pred == FALSE:
            return None
        return self.tx.scan(None if pred == TRUE else pred)[1]

    def _read_each(self, files: pa.Table, columns: list[str]) -> list[pa.Table]:
        names = materialized(self.tx) if any(c.startswith("_metadata.") for c in columns) else None
        mapping = self.tx.column_mapping

        def one(i: int) -> pa.Table:
            return read_files(self.tx.store, files.slice(i, 1), self.schema, self.partition_columns, columns=columns,
                              materialized=names, column_mapping=mapping)

        if files.num_rows == 1:
            return [one(0)]
        with ThreadPoolExecutor(max_workers=_READ_WORKERS) as pool:
            return list(pool.map(one, range(files.num_rows)))

    # ---- matching ----------------------------------------------------------------------------
    def match_pairs(self, target: pa.Table, eligible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(target row, source row) of every pair for which ON is TRUE."""
        plan, ta = self.plan, self.ta
        ok = _mask(and_all(plan.target_only), target) if plan.target_only else np.ones(target.num_rows, dtype=bool)
        for tname, _ in plan.keys:
            ok = _valid(target.column(f"{ta}.{tname}"), ok)
        t_rows, s_rows = np.flatnonzero(ok), np.flatnonzero(eligible)
        if not len(t_rows) or not len(s_rows):
            return _EMPTY, _EMPTY
        if plan.keys:
            left = {f"k{i}": self._as_key(_take(target.column(f"{ta}.{t}"), t_rows), self._key_type(t, s),
                                          f"{ta}.{t}", f"{self.sa}.{s}") for i, (t, s) in enumerate(plan.keys)}
            right = {f"k{i}": self._source_key(s, t, s_rows) for i, (t, s) in enumerate(plan.keys)}
            keys = list(right)
            left["__t"], right["__s"] = pa.array(t_rows, pa.int64()), pa.array(s_rows, pa.int64())
            joined = pa.table(left).join(pa.table(right), keys=keys, join_type="inner", use_threads=True)
            pt = joined.column("__t").to_numpy()
            ps = joined.column("__s").to_numpy()
        else:
            if len(t_rows) * len(s_rows) > CROSS_JOIN_MAX_PAIRS:
                raise PredicateError(
                    f"MERGE ON {plan.on} has no equality between a {ta} and a {self.sa} column, so every target "
                    f"row would be compared with every source row ({len(t_rows)} x {len(s_rows)} pairs). "
                    f"Add a condition like {ta}.key = {self.sa}.key."
                )
            pt, ps = np.repeat(t_rows, len(s_rows)), np.tile(s_rows, len(t_rows))
        if plan.residual and len(pt):
            keep = _mask(and_all(plan.residual), self._pair_view(target, pt, ps, plan.residual))
            pt, ps = pt[keep], ps[keep]
        return pt, ps

    def _pair_view(self, target: pa.Table, pt: np.ndarray, ps: np.ndarray, exprs: list[Expr | None]) -> pa.Table:
        t_take, s_take = pa.array(pt, pa.int64()), pa.array(ps, pa.int64())
        cols = {f"{self.ta}.{n}": target.column(f"{self.ta}.{n}").take(t_take) for n in sorted(_names(exprs, self.ta))}
        cols.update({f"{self.sa}.{n}": self.source.column(n).take(s_take) for n in sorted(_names(exprs, self.sa))})
        return _view(cols, len(pt))

    def _resolve_matched(self, target: pa.Table, pt: np.ndarray, ps: np.ndarray, codes: np.ndarray,
                         source_of: np.ndarray) -> None:
        matched = self.plan.matched
        pair_codes = np.full(len(pt), -1, dtype=np.int32)
        view = self._pair_view(target, pt, ps, [c.condition for c in matched])
        _first_clause(matched, view, np.ones(len(pt), dtype=bool), 0, pair_codes)
        applied = pair_codes >= 0
        a_pt, a_ps, a_codes = pt[applied], ps[applied], pair_codes[applied]
        unique_targets, first = np.unique(a_pt, return_index=True)
        if len(unique_targets) < len(a_pt):  # a lone unconditional DELETE (see _check_cardinality)
            a_pt, a_ps, a_codes = a_pt[first], a_ps[first], a_codes[first]
        codes[a_pt] = a_codes
        source_of[a_pt] = a_ps

    def _check_cardinality(self, pt: np.ndarray) -> None:
        """Delta's rule: a target row that ON pairs with several source rows fails the MERGE, whatever
        the clause conditions say (they may pick one pair today and another tomorrow), unless the
        only matched clause is an unconditional DELETE. An insert-only MERGE never checks."""
        plan = self.plan
        if not (plan.matched or plan.by_source) or len(pt) < 2:
            return
        matched = plan.matched
        if len(matched) == 1 and matched[0].action == "delete" and matched[0].condition is None:
            return
        distinct = len(np.unique(pt))
        if distinct < len(pt):
            raise MergeCardinalityError(  # Delta's error class and wording first, then which rows
                f"[DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE] Cannot perform Merge as multiple "
                f"source rows matched and attempted to modify the same target row in the Delta table in possibly "
                f"conflicting ways. MERGE ON {plan.on}: {len(pt) - distinct} target row(s) matched more than one "
                f"source row, so "
                f"which source row updates or deletes them is ambiguous. Deduplicate the source on the join "
                f"key (or make ON more specific) and retry."
            )

    # ---- the whole MERGE -----------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        plan = self.plan
        eligible = self.eligible_source()
        files = self.candidate_files(eligible)
        need = _names([plan.on] + [c.condition for c in self.clauses], self.ta)
        columns = [n for n in self.schema.names if n in need] or self.schema.names[:1]
        self.on_read = uses_deletion_vectors(self.tx)
        self.meta = row_columns(self.tx, self.on_read)
        parts = self._read_each(files, columns + self.meta) if files is not None and files.num_rows else []
        counts = np.array([p.num_rows for p in parts], dtype=np.int64)
        n_target = int(counts.sum())
        target = pa.concat_tables(parts) if parts else pa.table({})
        target = pa.table({f"{self.ta}.{n}": target.column(n) for n in columns}) if parts else target
        self.metrics["numTargetFilesAfterSkipping"] = len(parts)
        scanned = time.perf_counter()

        pt, ps = self.match_pairs(target, eligible) if n_target else (_EMPTY, _EMPTY)
        codes = np.full(n_target, -1, dtype=np.int32)  # index in self.clauses of the clause applied
        source_of = np.full(n_target, -1, dtype=np.int64)
        self._check_cardinality(pt)
        if plan.matched and len(pt):
            self._resolve_matched(target, pt, ps, codes, source_of)
        if plan.by_source and n_target:
            unmatched = np.ones(n_target, dtype=bool)
            unmatched[pt] = False
            _first_clause(plan.by_source, target, unmatched, len(plan.matched), codes)

        outputs = self._rewrite(files, parts, columns, counts, codes, source_of) if n_target else []
        if self.on_read and n_target:
            self._record_reads(files, parts, counts, codes, pt)
        inserted = self._inserts(ps)
        if inserted is not None:
            outputs.append(inserted)
        self._write(files, outputs)
        if len(self.touched) and change_feed.enabled(self.tx):
            # rows changed in files: the commit has change data files, so its inserts go there too
            # (an insert-only MERGE writes none: readers take its adds as inserts)
            change_feed.record_changes(self.tx, inserted, change_feed.INSERT)
            change_feed.cover(self.tx, self._removed, inputs=True)
            change_feed.cover(self.tx, self._added)
        now = time.perf_counter()
        self.metrics["scanTimeMs"] = int((scanned - self.started) * 1000)
        self.metrics["rewriteTimeMs"] = int((now - scanned) * 1000)
        self.metrics["executionTimeMs"] = int((now - self.started) * 1000)
        with_delta_keys(self.metrics, MERGE_KEYS)
        self.tx.note_operation("MERGE", self.parameters(), self.metrics)
        return dict(self.metrics)

    # ---- rewriting -----------------------------------------------------------------------------
    def _rewrite(self, files: pa.Table, parts: list[pa.Table], read_columns: list[str], counts: np.ndarray,
                 codes: np.ndarray, source_of: np.ndarray) -> list[pa.Table]:
        """The rows of every file holding a changed row, after the change."""
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        nonempty = np.flatnonzero(counts)
        changed_rows = np.flatnonzero(codes >= 0)
        file_of_changed = np.searchsorted(starts[nonempty], changed_rows, side="right") - 1
        touched = self.touched = nonempty[np.unique(file_of_changed)]
        if not len(touched):
            return []
        full = self._full_rows(files, parts, read_columns, touched)
        if len(touched) == len(nonempty):  # every row is in a touched file, in order
            row_codes, row_source = codes, source_of
        else:
            rows = np.concatenate([np.arange(starts[f], starts[f] + counts[f]) for f in touched])
            row_codes, row_source = codes[rows], source_of[rows]
        n = len(row_codes)
        deleted = np.zeros(n, dtype=bool)
        updates: dict[str, list[tuple[np.ndarray, pa.Array]]] = {}
        for code, clause in enumerate(self.clauses):
            positions = np.flatnonzero(row_codes == code)
            if not len(positions):
                continue
            label = "NotMatchedBySource" if clause.kind == NOT_MATCHED_BY_SOURCE else "Matched"
            verb = "Deleted" if clause.action == "delete" else "Updated"
            self.metrics[f"numTargetRows{verb}"] += len(positions)
            self.metrics[f"numTargetRows{label}{verb}"] += len(positions)
            if clause.action == "delete":
                deleted[positions] = True
                continue
            for name, values in self._set_values(clause, full, positions, row_source[positions]).items():
                updates.setdefault(name, []).append((positions, values))
        kept = np.flatnonzero(~deleted) if deleted.any() else None
        updated = np.isin(row_codes, [c for c, clause in enumerate(self.clauses) if clause.action != "delete"])
        if self.on_read:  # merge-on-read: the changed rows get a DV; only updated rows are written
            self.changed = [np.asarray(parts[f].column(ROW_INDEX).to_numpy())[codes[starts[f]:starts[f] + counts[f]] >= 0]
                            for f in touched]
            kept = np.flatnonzero(updated)
        indexes: dict[tuple[int, ...], pa.Array] = {}  # columns set by the same clauses share one
        jobs = []
        for name in self.schema.names:
            column = full.column(name)
            if name in updates:
                pieces = updates[name]
                if kept is None and _fixed_width(column.type):
                    jobs.append(partial(_overwrite_fixed, column, pieces))
                    continue
                if kept is None:
                    jobs.append(partial(_scatter_by_chunk, column, pieces))
                    continue
                key = tuple(id(p) for p, _ in pieces)
                if key not in indexes:
                    indexes[key] = scatter_index(n, pieces, kept)
                jobs.append(partial(scatter, column, [v for _, v in pieces], indexes[key]))
            elif kept is not None:
                jobs.append(partial(column.take, pa.array(kept, pa.int64())))
            else:
                jobs.append(partial(lambda c: c, column))
        with ThreadPoolExecutor(max_workers=_READ_WORKERS) as pool:  # Arrow kernels release the GIL
            columns = list(pool.map(lambda job: job(), jobs))
        if change_feed.enabled(self.tx):
            touched_paths = files.take(pa.array(touched, pa.int64()))["path"].to_pylist()
            own = change_feed.own_rows(self.tx, touched_paths, counts[touched])
            again = change_feed.described_rows(self.tx, touched_paths, counts[touched])
            self._record_changes(full, deleted, updated, kept, columns, own, again)
        copied = 0 if self.on_read else n - int(deleted.sum()) - self.metrics["numTargetRowsUpdated"]
        self.metrics["numTargetRowsCopied"] = copied
        out = pa.Table.from_arrays(columns, schema=self.schema)
        carried = mark_changed(full.select([c for c in full.column_names if c in (ROW_ID, ROW_COMMIT_VERSION)]),
                               pa.array(updated)) if self.meta else None
        if carried is not None and carried.num_columns:
            if kept is not None:
                carried = carried.take(pa.array(kept, pa.int64()))
            for field, column in zip(carried.schema, carried.columns):
                out = out.append_column(field, column)
        return [out]

    def _record_changes(self, full: pa.Table, deleted: np.ndarray, updated: np.ndarray, kept: np.ndarray | None,
                        columns: list[pa.ChunkedArray], own: np.ndarray | None, again: np.ndarray | None) -> None:
        """Change data feed: deleted rows, and updated rows before and after (``columns`` are the
        written rows: every kept row, or with merge-on-read only the updated ones). Rows of files
        this transaction appended (``own``) were never committed: they are inserts, in the
        form written (a kept row of such a file lands in a rewritten file too). Rows of files an
        earlier DML of it wrote (``again``) amend what that DML recorded (change_feed.amend)."""
        written = pa.Table.from_arrays(columns, schema=self.schema)
        if again is not None:
            change_feed.amend(self.tx, full.filter(pa.array(deleted & again)), None)
            updated_again = updated & again
            if updated_again.any():
                change_feed.amend(self.tx, full.filter(pa.array(updated_again)),
                                  written.filter(pa.array(updated_again if kept is None else updated_again[kept])))
        ours = own if again is None else (again if own is None else own | again)
        theirs = ~ours if ours is not None else None  # committed rows, recorded as they change
        change_feed.record_changes(self.tx, full.filter(pa.array(deleted if theirs is None else deleted & theirs)),
                                   change_feed.DELETE)
        if own is not None:
            own_written = own if kept is None else own[kept]
            change_feed.record_changes(self.tx, written.filter(pa.array(own_written)), change_feed.INSERT)
        if not updated.any():
            return
        mine = updated if theirs is None else updated & theirs
        change_feed.record_changes(self.tx, full.filter(pa.array(mine)), change_feed.UPDATE_PREIMAGE)
        post = updated if kept is None else updated[kept]  # merge-on-read: every written row is updated
        if theirs is not None:
            post = post & (theirs if kept is None else theirs[kept])
        if not self.on_read or ours is not None:
            written = written.filter(pa.array(post))
        change_feed.record_changes(self.tx, written, change_feed.UPDATE_POSTIMAGE)

    def _full_rows(self, files: pa.Table, parts: list[pa.Table], read_columns: list[str],
                   touched: np.ndarray) -> pa.Table:
        """All columns of the touched files: phase 1's columns reused, the others read now."""
        rest = [n for n in self.schema.names if n not in read_columns]
        more = self._read_each(files.take(pa.array(touched, pa.int64())), rest) if rest else []
        meta = [pa.field(n, parts[touched[0]].schema.field(n).type) for n in self.meta] if len(touched) else []
        schema = pa.schema(list(self.schema) + meta, metadata=self.schema.metadata)
        tables = []
        for i, f in enumerate(touched):
            cols = [parts[f].column(n) if n in read_columns else more[i].column(n) for n in self.schema.names]
            cols += [parts[f].column(m.name) for m in meta]
            tables.append(pa.Table.from_arrays(cols, schema=schema))
        return pa.concat_tables(tables)

    def _is_noop(self, name: str, expr: Expr) -> bool:
        """``t.k = s.k`` on a join key, or ``t.c = t.c``: the value cannot change."""
        if not isinstance(expr, Column) or expr.path:
            return False
        if expr.qualifier == self.ta:
            return expr.name == name
        return expr.qualifier == self.sa and (name, expr.name) in self.plan.keys

    def _set_values(self, clause: BoundClause, full: pa.Table, positions: np.ndarray,
                    source_rows: np.ndarray) -> dict[str, pa.Array]:
        """New values of the columns ``clause`` assigns, for the rows at ``positions``."""
        exprs = {n: e for n, e in clause.assignments.items() if not self._is_noop(n, e)}
        if not exprs:
            return {}
        take_t = pa.array(positions, pa.int64())
        cols = {f"{self.ta}.{n}": full.column(n).take(take_t) for n in sorted(_names(list(exprs.values()), self.ta))}
        if clause.kind != NOT_MATCHED_BY_SOURCE:
            take_s = pa.array(source_rows, pa.int64())
            cols.update({f"{self.sa}.{n}": self.source.column(n).take(take_s)
                         for n in sorted(_names(list(exprs.values()), self.sa))})
        view = _view(cols, len(positions))
        out = {}
        for name, expr in exprs.items():
            if isinstance(expr, FieldAssignments):  # SET t.st.a = …: the struct with those fields replaced
                current = full.column(name).take(take_t).combine_chunks()
                fields = {path: _whole(evaluate(e, view), len(positions)) for path, e in expr.fields.items()}
                out[name] = with_fields(current, self.schema.field(name).type, fields, f"MERGE {clause.action}")
                continue
            values = self._typed(expr, view, self.schema.field(name), clause)
            out[name] = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        return out

    def _typed(self, expr: Expr, view: pa.Table, field: pa.Field, clause: BoundClause) -> pa.Array | pa.ChunkedArray:
        values = evaluate(expr, view)
        if not values.type.equals(field.type):
            refuse_missing_required(values.type, field.type, field.name, f"MERGE {clause.action} value {expr}")
            try:
                values = assign_value(values, field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaMismatchError(
                    f"MERGE {clause.action} value {expr} for column {field.name!r} cannot be converted to "
                    f"{field.type}: {exc}"
                ) from None
        if not field.nullable and values.null_count:
            raise SchemaMismatchError(f"MERGE {clause.action} would set NOT NULL column {field.name!r} to null")
        return values

    def _inserts(self, ps: np.ndarray) -> pa.Table | None:
        not_matched = self.plan.not_matched
        if not not_matched or not self.source.num_rows:
            return None
        unmatched = np.ones(self.source.num_rows, dtype=bool)
        unmatched[ps] = False
        if not unmatched.any():
            return None
        rows = self.source.filter(pa.array(unmatched))
        view = pa.table({f"{self.sa}.{n}": rows.column(n) for n in rows.column_names})
        codes = np.full(rows.num_rows, -1, dtype=np.int32)
        _first_clause(not_matched, view, np.ones(rows.num_rows, dtype=bool), 0, codes)
        out = []
        generated: set[str] = set()  # identity columns some clause left to the writer
        given: dict[str, list[tuple[int, int]]] = {}  # identity columns some clause gave values for
        for j, clause in enumerate(not_matched):
            selected = codes == j
            if selected.any():
                chosen = view.filter(pa.array(selected))
                columns = [
                    self._typed(clause.assignments[f.name], chosen, f, clause) if f.name in clause.assignments
                    else self._identity_values(f, chosen.num_rows) if f.name in self.identity
                    else pa.nulls(chosen.num_rows, f.type) if f.name in self.generated  # computed below
                    else self._null_column(f, chosen.num_rows, clause)
                    for f in self.schema
                ]
                out.append(self._with_generated(pa.Table.from_arrays(columns, schema=self.schema), clause))
                for c in self.identity:
                    if c not in clause.assignments:
                        generated.add(c)
                    elif (bounds := given_bounds(out[-1].column(c))) is not None:
                        given.setdefault(c, []).append(bounds)
                    else:
                        given.setdefault(c, [])
        if not out:
            return None
        if self.identity:  # the user's values, by their bounds: a rebase must never move one
            self.insert_origin = Origin(frozenset(generated), frozenset(given), tuple(
                (c, min(lo for lo, _ in b), max(hi for _, hi in b)) for c, b in given.items() if b))
        inserted = pa.concat_tables(out)
        self.metrics["numTargetRowsInserted"] = inserted.num_rows
        return inserted

    def _with_generated(self, rows: pa.Table, clause: BoundClause) -> pa.Table:
        """``rows`` with the generated columns the INSERT clause has no expression for (they read
        an identity column it leaves out: merge._column_rules) computed from the built rows, now
        that the identity values are in them — the order an append follows."""
        for name, g in self.generated.items():
            if name not in clause.assignments:
                rows = rows.set_column(rows.schema.get_field_index(name), g.field, generated_values(g, rows))
        return rows

    def _identity_values(self, field: pa.Field, n: int) -> pa.Array:
        assign = assigner(self.tx)
        if assign is None:
            raise IdentityColumnError(
                f"MERGE INSERT into identity column {field.name!r} needs values assigned by the "
                f"committing transaction; run this MERGE with deltatx.Table.merge")
        return assign(self.identity[field.name], n)

    def _null_column(self, field: pa.Field, n: int, clause: BoundClause) -> pa.Array:
        """A column the INSERT clause does not assign: its default (allowColumnDefaults), else NULL."""
        filled = fill(field, self._defaults, n) if default_sql(field) is not None else None
        if filled is not None:
            return filled
        if not field.nullable and n:
            raise SchemaMismatchError(f"MERGE insert gives no value for NOT NULL column {field.name!r}")
        return pa.nulls(n, field.type)

    @cached_property
    def _defaults(self) -> dict[str, pa.Scalar]:
        return default_values(self.schema)

    # ---- staging -------------------------------------------------------------------------------
    def _record_reads(self, files: pa.Table, parts: list[pa.Table], counts: np.ndarray, codes: np.ndarray,
                      pt: np.ndarray) -> None:
        """Every target file read, row by row: changed rows, and read = rows ON matched."""
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        matched = np.zeros(len(codes), dtype=bool)
        matched[pt] = True
        for f, rows in enumerate(parts):
            span = slice(starts[f], starts[f] + counts[f])
            positions = np.asarray(rows.column(ROW_INDEX).to_numpy())
            record_read(self.tx, files, f, rows, changed=positions[codes[span] >= 0],
                        read=positions[matched[span] | (codes[span] >= 0)])

    def _write(self, files: pa.Table | None, outputs: list[pa.Table]) -> None:
        # Removes first: an append-only table refuses them before any data file is written.
        if files is not None and len(self.touched):
            removed = self._removed = files.take(pa.array(self.touched, pa.int64()))
            if self.on_read:
                dv = stage_changed_rows(self.tx, removed, self.changed)
                # MERGE's names for them (Delta's DeltaOperationMetrics.MERGE)
                self.metrics.update({f"numTarget{k[3:]}": v for k, v in dv.items() if k.startswith("numDeletionVectors")})
                self.metrics["numTargetFilesRemoved"] = dv["numRemovedFiles"]
                self.metrics["numTargetBytesRemoved"] = dv["numRemovedBytes"]  # the files no row is left of
            else:
                self.tx.stage_removes(removed)
                self.metrics["numTargetFilesRemoved"] = removed.num_rows
                self.metrics["numTargetBytesRemoved"] = total_size(removed)
                # rewritten without their DVs: each is removed (Delta counts them too)
                self.metrics["numTargetDeletionVectorsRemoved"] = with_deletion_vectors(removed)
        data = [t for t in outputs if t.num_rows]
        if data:
            # Inserted rows go first, in files of their own: a rebase may have to move the
            # identity values they were given (tables/identity.py), never rewritten rows', and it
            # must know which files hold only generated values, or only the user's.
            inserts = self.insert_origin is not None  # then the last output is the inserted rows
            groups = [data[-1:], data[:-1]] if inserts and len(data) > 1 else [data]
            written = []
            for k, group in enumerate(groups):
                adds = write_files(self.tx, pa.concat_tables(group, promote_options="default"),
                                   origin=self.insert_origin if inserts and k == 0 else None)
                self.tx.stage_adds(adds)
                written.append(adds)
                self.metrics["numTargetFilesAdded"] += adds.num_rows
                self.metrics["numTargetBytesAdded"] += total_size(adds)
            self._added = pa.concat_tables(written)
            self.metrics["numOutputRows"] = sum(t.num_rows for t in data)

    def parameters(self) -> dict[str, Any]:
        plan = self.plan
        return {
            "predicate": [str(plan.on)],
            "matchedPredicates": [c.describe() for c in plan.matched],
            "notMatchedPredicates": [c.describe() for c in plan.not_matched],
            "notMatchedBySourcePredicates": [c.describe() for c in plan.by_source],
        }
