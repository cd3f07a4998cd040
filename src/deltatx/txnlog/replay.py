"""Log replay: fold commits onto a base state, keeping file state columnar.

Owns PROTOCOL.md's action reconciliation and nothing about *which* files to read (snapshot.py
picks the checkpoint and the commit range):

- protocol / metaData: the latest wins;
- txn: the latest per ``appId``; domainMetadata: the latest per domain, ``removed=true`` drops it;
- files: keyed by ``(path, deletionVector uniqueId)``; the newest reference (add or remove) wins,
  also inside one commit (``CommitActions.file_order``); live adds and tombstones stay disjoint.

How the file part stays cheap (a checkpoint may hold millions of adds, a JSON tail a few)::

    tail adds + removes ──► keys, global positions ──► newest per key (sort + index_in)
    base files/tombstones ──► drop rows whose key the tail touched (pc.is_in) ──► concat winners

Only the JSON tail being parsed is ever held as Python dicts.
"""

from __future__ import annotations

import functools
import gc
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, ParamSpec, Sequence, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptLogError
from .actions import (
    FILE_SCHEMA,
    REMOVE_SCHEMA,
    CommitActions,
    DomainMetadata,
    Metadata,
    Protocol,
    Txn,
    deletion_vector_unique_id,
    empty_table,
    file_actions_table,
    parse_commit,
    parse_commit_dicts,
)
from .store import LocalLogStore, LogFile, LogStore, MemoryLogStore
from .tombstones import Tombstones

P = ParamSpec("P")
R = TypeVar("R")

#: a commit's actions get positions ``commit_index << _POSITION_BITS | line_index``
_POSITION_BITS = 32
#: tables with more chunks than this are compacted after a replay step (keeps compute fast)
_MAX_CHUNKS = 16
#: parallel reads of commit files on remote stores
_REMOTE_READ_THREADS = 16

_KEY_SEPARATOR = "\x00"
#: Up to this many rows, logical-file keys are built in Python: a commit's handful of actions.
_SMALL = 32
#: beyond this many rows sharing a touched path, they are narrowed by DV location (one kernel)
#: before their exact keys are built in Python (a struct's as_py per row costs more)
_FEW_SAME_PATH = 4





# --------------------------------------------------------------------------------------------
# Reading commit files
# --------------------------------------------------------------------------------------------


def require_contiguous(versions: Sequence[int], first: int, last: int) -> None:
    """Raise CorruptLogError naming the first missing version of ``first..last``."""
    expected = first
    for v in versions:
        if v != expected:
            break
        expected += 1
    if expected <= last:
        raise CorruptLogError(
            f"the log has a gap: commit {expected} is missing (needed to build version {last} from "
            f"version {first}); the _delta_log is incomplete or was cleaned up too aggressively",
            version=expected,
        )


def read_commit_bytes(store: LogStore, files: Sequence[LogFile]) -> list[bytes]:
    """Raw bytes of commit files, in the given order (in parallel on remote stores)."""

    def fetch(f: LogFile) -> bytes:
        try:
            return store.read_log_file(f.name)
        except FileNotFoundError:
            raise CorruptLogError(
                f"commit {f.version} was listed but is gone ({f.name}); it may have been deleted by "
                f"log cleanup while reading — reload the table",
                version=f.version,
            ) from None

    if isinstance(store, (LocalLogStore, MemoryLogStore)) or len(files) < 2:
        return [fetch(f) for f in files]
    with ThreadPoolExecutor(max_workers=min(_REMOTE_READ_THREADS, len(files))) as pool:
        return list(pool.map(fetch, files))


def without_gc(fn: Callable[P, R]) -> Callable[P, R]:
    """Run ``fn`` with the cyclic garbage collector paused.

    Parsing a long JSON log allocates millions of small dicts that form no cycles; the collector
    would re-scan all of them at every full pass, which makes replay time grow quadratically
    (a 1M-add log took 38 s instead of a few). Reference counting still frees everything.
    """

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return run


def read_commits(store: LogStore, files: Sequence[LogFile]) -> list[CommitActions]:
    """Read and parse commit files, in the given order."""
    return [parse_commit(data, f.version, validate=False) for f, data in zip(files, read_commit_bytes(store, files))]


# --------------------------------------------------------------------------------------------
# Non-file actions
# --------------------------------------------------------------------------------------------


@dataclass
class TableActions:
    """The reconciled non-file actions of a table at one version."""

    protocol: Protocol | None
    metadata: Metadata | None
    txns: dict[str, Txn]
    domains: dict[str, DomainMetadata]

    def fold(self, commits: Iterable[CommitActions]) -> "TableActions":
        protocol, metadata = self.protocol, self.metadata
        txns, domains = dict(self.txns), dict(self.domains)
        for c in commits:
            if c.protocol is not None:
                protocol = c.protocol
            if c.metadata is not None:
                metadata = c.metadata
            for t in c.txns:
                txns[t.app_id] = t
            for d in c.domains:
                if d.removed:
                    domains.pop(d.domain, None)
                else:
                    domains[d.domain] = d
        return TableActions(protocol, metadata, txns, domains)


# --------------------------------------------------------------------------------------------
# File actions, columnar
# --------------------------------------------------------------------------------------------


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly ``schema``'s columns (missing ones null, types cast)."""
    if table.schema.equals(schema):
        return table
    arrays = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            arrays.append(col if col.type.equals(f.type) else col.cast(f.type))
        else:
            arrays.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _file_key(path: str, descriptor: dict[str, Any] | None) -> str:
    """One logical-file key in Python (see :func:`file_keys`)."""
    return path if descriptor is None else f"{path}{_KEY_SEPARATOR}{deletion_vector_unique_id(descriptor)}"


def file_keys(table: pa.Table) -> pa.ChunkedArray:
    """The logical-file key per row: path, or path + NUL + deletion-vector uniqueId."""
    path = table.column("path")
    dv = table.column("deletionVector")
    if dv.null_count == len(dv):
        return path
    if table.num_rows <= _SMALL:  # a commit's few actions: a dozen compute calls cost more than this
        keys = [_file_key(p, d) for p, d in zip(path.to_pylist(), dv.to_pylist())]
        return pa.chunked_array([pa.array(keys, pa.string())])
    storage = pc.fill_null(pc.struct_field(dv, "storageType"), "")
    location = pc.fill_null(pc.struct_field(dv, "pathOrInlineDv"), "")
    offset = pc.cast(pc.struct_field(dv, "offset"), pa.string())
    at_offset = pc.fill_null(pc.binary_join_element_wise("@", offset, ""), "")
    unique_id = pc.binary_join_element_wise(storage, location, at_offset, "")
    with_dv = pc.binary_join_element_wise(path, unique_id, _KEY_SEPARATOR)
    return pc.if_else(pc.is_null(dv), path, with_dv)


def _local_positions(commit: CommitActions, n_adds: int, n_removes: int) -> tuple[list[int], list[int]]:
    """Line order of adds and removes inside one commit (removes first when unknown)."""
    order = commit.file_order
    if len(order) == n_adds + n_removes and order:
        add_pos = [0] * n_adds
        remove_pos = [0] * n_removes
        for position, (kind, index) in enumerate(order):
            if kind == "add":
                add_pos[index] = position
            else:
                remove_pos[index] = position
        return add_pos, remove_pos
    return list(range(n_removes, n_removes + n_adds)), list(range(n_removes))


def _kind_positions(kinds: bytes, base: int) -> tuple[Sequence[int], Sequence[int]]:
    """Log positions of a raw commit's add and remove lines (``kinds``: b"a"/b"r" per line)."""
    if b"r" not in kinds:
        return range(base, base + len(kinds)), ()
    if b"a" not in kinds:
        return (), range(base, base + len(kinds))
    adds, removes = [], []
    for offset, kind in enumerate(kinds):
        (adds if kind == 97 else removes).append(base + offset)  # 97 == ord("a")
    return adds, removes


class FileTail:
    """File actions of consecutive commits, gathered before one columnar reconciliation.

    Commits parsed with ``validate=False`` still hold their add/remove lines as raw JSON: their
    lines are joined and parsed by one Arrow read here, so replaying a long log creates no Python
    object per file.
    """

    def __init__(self) -> None:
        self._add_rows: list[dict[str, Any]] = []
        self._add_pos: list[int] = []
        self._remove_rows: list[dict[str, Any]] = []
        self._remove_pos: list[int] = []
        self._add_tables: list[tuple[pa.Table, Sequence[int]]] = []
        self._remove_tables: list[tuple[pa.Table, Sequence[int]]] = []
        self._raw: list[tuple[CommitActions, int]] = []  # (commit, base position), lines unparsed
        self._count = 0

    def add_commit(self, commit: CommitActions) -> None:
        base = self._count << _POSITION_BITS
        self._count += 1
        if commit.unparsed_files:
            if commit.file_kinds:
                self._raw.append((commit, base))
            return
        if not commit.file_tables_built and (commit.add_rows or commit.remove_rows):  # dicts until the end
            add_pos, remove_pos = _local_positions(commit, len(commit.add_rows), len(commit.remove_rows))
            self._add_rows += commit.add_rows
            self._add_pos += [base + p for p in add_pos]
            self._remove_rows += commit.remove_rows
            self._remove_pos += [base + p for p in remove_pos]
            return
        adds, removes = commit.adds, commit.removes  # built by a writer: already columnar
        if not adds.num_rows and not removes.num_rows:
            return
        add_pos, remove_pos = _local_positions(commit, adds.num_rows, removes.num_rows)
        if adds.num_rows:
            self._add_tables.append((conform(adds, FILE_SCHEMA), [base + p for p in add_pos]))
        if removes.num_rows:
            self._remove_tables.append((conform(removes, REMOVE_SCHEMA), [base + p for p in remove_pos]))

    def _take_raw(self) -> None:
        """Parse every raw commit's lines: one Arrow read per kind, per-commit only on failure."""
        from .jsonfiles import MIN_COLUMNAR_LINES, NotColumnar, file_lines_table

        if not self._raw:
            return
        raw, self._raw = self._raw, []
        add_pos: list[Sequence[int]] = []
        remove_pos: list[Sequence[int]] = []
        for commit, base in raw:
            a, r = _kind_positions(commit.file_kinds, base)
            add_pos.append(a)
            remove_pos.append(r)
        n_lines = sum(len(c.file_kinds) for c, _ in raw)
        try:
            if n_lines < MIN_COLUMNAR_LINES:
                raise NotColumnar("few lines")
            add_blobs = [c.add_json for c, _ in raw if c.add_json]
            remove_blobs = [c.remove_json for c, _ in raw if c.remove_json]
            adds = file_lines_table(b"\n".join(add_blobs), "add") if add_blobs else None
            removes = file_lines_table(b"\n".join(remove_blobs), "remove") if remove_blobs else None
        except NotColumnar:
            # Few lines (a writer catching up on a few commits): each commit's lines as checked
            # dicts — the bad one raises CorruptLogError naming its line — and all of them turned
            # columnar together in apply(): one conversion per kind, not two per commit.
            for (commit, _), a, r in zip(raw, add_pos, remove_pos):
                checked = parse_commit_dicts(commit.raw, commit.version)
                self._add_rows += checked.add_rows
                self._add_pos += a
                self._remove_rows += checked.remove_rows
                self._remove_pos += r
            return
        if adds is not None:
            self._add_tables.append((adds, [p for ps in add_pos for p in ps]))
        if removes is not None:
            self._remove_tables.append((removes, [p for ps in remove_pos for p in ps]))

    @staticmethod
    def _gather(rows: list[dict[str, Any]], pos: list[int], tables: list[tuple[pa.Table, Sequence[int]]],
                schema: pa.Schema) -> tuple[pa.Table, list[int]]:
        parts = [file_actions_table(rows, schema)] if rows else []
        positions = list(pos)
        for table, table_pos in tables:
            parts.append(table)
            positions += table_pos
        if len(parts) == 1:
            return parts[0], positions
        return (pa.concat_tables(parts) if parts else empty_table(schema)), positions

    def apply(self, files: pa.Table, tombstones: Tombstones) -> tuple[pa.Table, Tombstones]:
        """Reconcile the gathered actions onto ``files`` (now) and ``tombstones`` (folded when
        read, see tombstones.py)."""
        self._take_raw()
        adds, add_pos = self._gather(self._add_rows, self._add_pos, self._add_tables, FILE_SCHEMA)
        removes, remove_pos = self._gather(self._remove_rows, self._remove_pos, self._remove_tables, REMOVE_SCHEMA)
        return reconcile(files, tombstones, adds, add_pos, removes, remove_pos)


def drop_keys(table: pa.Table, touched: pa.Array) -> pa.Table:
    """``table`` without the rows whose logical file is in ``touched``.

    Most commits touch only new files (fresh UUID paths): the membership test is cheap, while a
    filter copies every column of every chunk, so it runs only when something matched.
    """
    if table.num_rows == 0:
        return table
    # Compare paths first (plain strings, no key built per row); build the path + DV keys only
    # for the rows whose path was touched.
    few = len(touched) <= _SMALL
    touched_keys = touched.to_pylist() if few else None
    if touched_keys is not None and table.num_rows <= _SMALL:
        # a small table (a point change's file list): its paths compared in Python, no kernel
        path_set = {k.split(_KEY_SEPARATOR, 1)[0] for k in touched_keys}
        hits = [i for i, path in enumerate(table.column("path").to_pylist()) if path in path_set]
        if not hits:
            return table
        rows = pa.array(hits, pa.int64())
    else:
        if touched_keys is not None:
            touched_paths = pa.array({k.split(_KEY_SEPARATOR, 1)[0] for k in touched_keys}, pa.string())
        else:
            touched_paths = pc.unique(pc.list_element(pc.split_pattern(touched, _KEY_SEPARATOR, max_splits=1), 0))
        same_path = pc.is_in(table.column("path"), value_set=touched_paths)
        if not pc.any(same_path).as_py():
            return table
        rows = pc.indices_nonzero(same_path)
    has_dvs = "deletionVector" in table.schema.names
    if touched_keys is not None and has_dvs and len(rows) > _FEW_SAME_PATH:
        # many rows share a touched path (a hot file's tombstones): narrow them by DV location
        maybe = _maybe_same_dv(table.column("deletionVector").take(rows), touched_keys)
        rows = rows.filter(maybe)
    if touched_keys is not None and len(rows) <= _SMALL:
        # a handful of candidates: their exact keys in Python beat a dozen kernels
        # (indexing a chunked column per row: a take of the DV structs costs ~5x more here)
        wanted = set(touched_keys)
        path_column = table.column("path")
        dv_column = table.column("deletionVector") if has_dvs else None
        drop_rows = []
        for row in rows.to_pylist():
            dv = dv_column[row].as_py() if dv_column is not None else None
            if _file_key(path_column[row].as_py(), dv) in wanted:
                drop_rows.append(row)
        return without_rows(table, np.array(drop_rows, dtype=np.int64)) if drop_rows else table
    hit = pc.is_in(file_keys(table.select(["path", "deletionVector"]).take(rows)), value_set=touched)
    drop = rows.filter(hit)
    if not len(drop):
        return table
    if len(drop) <= _SMALL:
        return without_rows(table, drop.to_numpy())
    keep = np.ones(table.num_rows, dtype=bool)
    keep[drop.to_numpy()] = False
    return table.filter(pa.array(keep))


_OFFSET_SUFFIX = re.compile(r"^(.*)@\d+$", re.DOTALL)


def _maybe_same_dv(dvs: pa.ChunkedArray, touched: list[str]) -> pa.ChunkedArray:
    """Per row: could its DV be the DV of one of the ``touched`` keys (a superset: the exact
    keys are compared after)? Compares ``pathOrInlineDv`` only.

    Why: a file whose DV changed often has one tombstone per old DV, all with its path; building
    the full key of each (a dozen kernels) on every commit that touches the file grows with its
    history, while one field compared in place does not."""
    locations: set[str] = set()
    bare = False
    for key in touched:
        _, sep, unique_id = key.partition(_KEY_SEPARATOR)
        if not sep:
            bare = True
            continue
        location = unique_id[1:]  # the uniqueId: storageType (one letter) + pathOrInlineDv [+ "@" + offset]
        locations.add(location)
        with_offset = _OFFSET_SUFFIX.match(location)
        if with_offset:
            locations.add(with_offset.group(1))
    maybe = pc.fill_null(pc.is_in(pc.struct_field(dvs, "pathOrInlineDv"),
                                  value_set=pa.array(sorted(locations), pa.string())), False)
    return pc.or_(maybe, pc.is_null(dvs)) if bare else maybe


def without_rows(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``table`` less a few ``rows``, as zero-copy slices around them: the kept rows keep their
    buffers, so values derived from them (parsed stats, cached by buffer) stay valid."""
    pieces: list[pa.Table] = []
    start = 0
    for row in np.sort(rows):
        if row > start:
            pieces.append(table.slice(start, row - start))
        start = int(row) + 1
    if start < table.num_rows:
        pieces.append(table.slice(start))
    return pa.concat_tables(pieces) if pieces else table.slice(0, 0)


def only_rows(table: pa.Table, mask: pa.BooleanArray) -> pa.Table:
    """``table.filter(mask)`` (null = dropped); on a small table, all rows kept is the table
    itself and one kept row a zero-copy slice: a point change's scan keeps one file of a dozen,
    and filtering copies every nested column (stats, partition values, DV) to keep it."""
    if table.num_rows > _SMALL:
        return table.filter(mask)
    rows = [i for i, keep in enumerate(mask.to_pylist()) if keep]
    if len(rows) == table.num_rows:
        return table
    if len(rows) == 1:
        return table.slice(rows[0], 1)
    return table.filter(mask)


def without_paths(files: pa.Table, paths: pa.Array | pa.ChunkedArray | frozenset[str]) -> pa.Table:
    """``files`` less the rows whose path is in ``paths``: a few rows are cut out as zero-copy
    slices (cheaper than filtering every nested column, and derived stats stay cached). A
    handful of files (a commit's actions) is compared in Python: three kernels cost more."""
    if files.num_rows <= _SMALL:
        gone = paths if isinstance(paths, (set, frozenset)) else set(paths.to_pylist())
        if not gone:
            return files
        hit = [i for i, path in enumerate(files.column("path").to_pylist()) if path in gone]
        return without_rows(files, np.array(hit, dtype=np.int64)) if hit else files
    if isinstance(paths, (set, frozenset)):
        paths = pa.array(sorted(paths), pa.string())
    hits = pc.indices_nonzero(pc.fill_null(pc.is_in(files["path"], value_set=_as_array(paths)), False))
    if len(hits) == 0:
        return files
    if len(hits) <= _FEW_CUTS:
        return without_rows(files, hits.to_numpy())
    return files.filter(pc.invert(pc.fill_null(pc.is_in(files["path"], value_set=_as_array(paths)), False)))


#: up to this many rows are cut out of a files table as slices
_FEW_CUTS = 16


def _as_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def compact(table: pa.Table) -> pa.Table:
    return table.combine_chunks() if table.column(0).num_chunks > _MAX_CHUNKS else table


def reconcile(
    files: pa.Table,
    tombstones: Tombstones,
    adds: pa.Table,
    add_pos: Sequence[int],
    removes: pa.Table,
    remove_pos: Sequence[int],
) -> tuple[pa.Table, Tombstones]:
    """Newest reference per logical file wins; returns the new (files, tombstones).

    ``add_pos`` / ``remove_pos`` order the new actions (higher = newer); everything in
    ``files`` / ``tombstones`` is older than all of them. The files are reconciled now (every
    operation reads them); the tombstones record the step and fold when first read.
    """
    n_adds, n_removes = adds.num_rows, removes.num_rows
    if n_adds + n_removes == 0:
        return files, tombstones
    keys = pa.chunked_array(file_keys(adds).chunks + file_keys(removes).chunks, type=pa.string())
    unique = pc.unique(keys)
    if len(unique) == len(keys):  # no logical file referenced twice: every action wins
        new_adds, new_removes = adds, removes
    else:
        positions = pa.array(list(add_pos) + list(remove_pos), pa.int64())
        newest_first = pc.array_sort_indices(positions, order="descending")
        first_seen = pc.index_in(unique, value_set=keys.take(newest_first))
        winners = pc.array_sort_indices(newest_first.take(first_seen))
        winners = newest_first.take(first_seen).take(winners)
        is_add = pc.less(winners, n_adds)
        new_adds = adds.take(winners.filter(is_add))
        new_removes = removes.take(pc.subtract(winners.filter(pc.invert(is_add)), n_adds))
    kept_files = drop_keys(files, unique)
    return compact(pa.concat_tables([kept_files, new_adds])), tombstones.then(unique, new_removes)
