"""Deletion vectors under Spark's own Parquet reader: the deleted rows are dropped on the JVM side.

Why this way: without JVM code of our own, Spark cannot consult a DV while it decodes a file.
What Spark 4's Parquet reader does offer is each row's position in its file, the hidden column
``_metadata.row_index`` — exactly what a DV counts (PROTOCOL.md "Deletion Vectors": 0-based row
indexes in the data file) — and the file's size, ``_metadata.file_size``, which names the file
cheaply on every row (a long, where the path is a string). The driver decodes every DV with
:func:`deltatx.io.deletion_vectors.deleted_rows` (the checks of every other read: a DV that
does not add up raises, it never returns deleted rows) and removes the rows in one of two ways:

- **bitmap filter** (the fast path): each DV becomes a bitmap of its whole file, one bit per
  row, 64 rows per long, and one more long of zeros. The bitmaps of all files go to Spark as
  one ``array<bigint>`` in a one-row local DataFrame, used as a scalar subquery: Spark
  evaluates it once per query into a primitive array (no boxed values, nothing big printed in
  plans or serialized into tasks, which a literal of the same array costs on every query). A
  row's test is a ``CASE`` on the file size giving where its file's bitmap starts, one array
  read and one bit test; rows come in order, so the words stay in the CPU cache. The row
  counts come from the ``numRecords`` statistics (or the footers); a row past them reads its
  file's zero word, so wrong statistics can keep a row but never delete another file's. A read
  puts at most :data:`MAX_BITMAP_WORDS` words in bitmaps, and one ``CASE`` tells at most
  :data:`MAX_BITMAP_FILES` files apart (it tests them one after the other).
- **broadcast anti-join** (the rest): each deleted row becomes a 64-bit key,
  ``file size << 32 | row index``; the keys go to Spark as a small local DataFrame and the
  files' rows, keyed the same way, are left-anti-joined against it. It grows with the number
  of deleted rows only, but probing a hash table costs every row more than a bit test (P8: the
  join made the read 1.7x Spark's Parquet read where the bitmap filter stays under 1.5x).

Files without a DV take neither path. Within one ``CASE`` or one join the file sizes (for the
join their low 32 bits, what the shift keeps) must differ: files sharing one are spread over
several (:func:`size_groups`; usually there is one). The join's row index takes the key's low
32 bits, so a file with a DV must hold fewer than :data:`MAX_ROWS_PER_FILE` rows.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from ..errors import CorruptDeletionVectorError
from ..io.deletion_vectors import deleted_rows
from ..txnlog.stats import record_counts
from ..txnlog.store import LogStore

#: most bitmap words (64 rows each) one read sends to Spark; the rest is anti-joined
MAX_BITMAP_WORDS = 1 << 20  # 8 MiB: 64M rows of files with a DV; P8's 2M rows take 31k words
#: most files one bitmap filter tells apart (a CASE on the file size, tested in order)
MAX_BITMAP_FILES = 32

#: the hidden join column: a row's key (file size << 32 | row index)
KEY_COLUMN = "__deltatx_dv_key"
#: the key of each row, from Spark's hidden Parquet metadata columns (shiftleft wraps, never fails)
KEY_EXPRESSION = "shiftleft(_metadata.file_size, 32) | _metadata.row_index"
#: a file with a DV must hold fewer rows than this (the row index takes the key's low 32 bits)
MAX_ROWS_PER_FILE = 1 << 32

_LOW_32 = (1 << 32) - 1
#: the one-row relation that carries every bitmap word to Spark
_WORDS_SCHEMA = ('{"type":"struct","fields":[{"name":"words","type":{"type":"array","elementType":"long",'
                 '"containsNull":false},"nullable":false,"metadata":{}}]}')
#: the bit of the current row in its bitmap word
_ROW_BIT = "shiftleft(1L, cast(_metadata.row_index & 63 as int))"

#: builds the Parquet relation of some files (by index) / projects it to the read's columns
Read = Callable[[list[int]], Any]
Project = Callable[[Any, int, tuple[str, ...]], Any]


def row_counts(files: pa.Table, paths: Sequence[str]) -> list[int]:
    """The number of rows of each of ``files`` (at ``paths``): its ``numRecords`` statistic, or
    its Parquet footer's count when the statistic is missing (only local files reach here)."""
    import pyarrow.parquet as pq

    stated = (record_counts(files.column("stats")).to_pylist() if "stats" in files.column_names
              else [None] * files.num_rows)
    return [n if n is not None else pq.read_metadata(path).num_rows for path, n in zip(paths, stated)]


def size_groups(sizes: Sequence[int], mask: int = -1) -> list[list[int]]:
    """Indexes of ``sizes`` in groups whose sizes (``& mask``) all differ.

    The n-th file of a given size goes to group n: as many groups as the most files sharing one.
    """
    groups: list[list[int]] = []
    seen: dict[int, int] = {}
    for i, size in enumerate(sizes):
        n = seen.get(size & mask, 0)
        seen[size & mask] = n + 1
        if n == len(groups):
            groups.append([])
        groups[n].append(i)
    return groups


def bitmap_words(rows: int) -> int:
    """Longs of the bitmap of a file of ``rows`` rows: one bit per row, then a zero word."""
    return (rows + 63) // 64 + 1


def bitmap(deleted: np.ndarray, rows: int, path: str) -> np.ndarray:
    """``deleted`` (sorted positions) as the bitmap of a file of ``rows`` rows: bit i of word w
    stands for row ``64 * w + i``; the last word is zero.

    Raises :class:`CorruptDeletionVectorError` for a deleted row past the file's end, as every
    other read does.
    """
    _within(deleted, rows, path)
    words = np.zeros(bitmap_words(rows), dtype=np.uint64)
    np.bitwise_or.at(words, (deleted >> np.uint64(6)).astype(np.int64),
                     np.left_shift(np.uint64(1), deleted & np.uint64(63)))
    return words.view(np.int64)


def _within(deleted: np.ndarray, rows: int, path: str) -> np.ndarray:
    """``deleted`` (sorted), checked against the file's row count as every other read does."""
    if len(deleted) and int(deleted[-1]) >= rows:
        raise CorruptDeletionVectorError(
            f"the deletion vector of {path!r} deletes row {int(deleted[-1])}, but the file has {rows} rows")
    return deleted


def word_position(sizes: Sequence[int], rows: Sequence[int], offsets: Sequence[int], zero: int) -> str:
    """SQL: where the current row's word is in the shared array. File i (named by ``sizes[i]``)
    has ``rows[i]`` rows and its bitmap at ``offsets[i]``; a row past its end reads the file's
    zero word, a row of another file the array's last word, ``zero``."""
    word = "shiftright(_metadata.row_index, 6)"
    branches = " ".join(f"WHEN {size} THEN {offset} + least({word}, {bitmap_words(count) - 1})"
                        for size, count, offset in zip(sizes, rows, offsets))
    return f"cast(CASE _metadata.file_size {branches} ELSE {zero} END as int)"


def deleted_keys(sizes: Sequence[int], deleted: Sequence[np.ndarray]) -> pa.Table:
    """One row per deleted row of the files: its join key (column :data:`KEY_COLUMN`)."""
    parts = [(np.uint64(size & _LOW_32) << np.uint64(32)) | rows for size, rows in zip(sizes, deleted)]
    # the same 64 bits as Spark's signed long arithmetic on the JVM side
    keys = np.concatenate(parts).view(np.int64) if parts else np.empty(0, dtype=np.int64)
    return pa.table({KEY_COLUMN: pa.array(keys, pa.int64())})


def _anti_join(keyed: Any, keys: pa.Table) -> Any:
    from pyspark.sql import functions as F

    deleted = keyed.sparkSession.createDataFrame(keys)  # a local relation: broadcasting it runs no job
    return keyed.join(F.broadcast(deleted), KEY_COLUMN, "left_anti").drop(KEY_COLUMN)


def live_rows(store: LogStore, read: Read, project: Project, groups: Sequence[Sequence[int]],
              paths: Sequence[str], descriptors: Sequence[dict[str, Any] | None],
              sizes: dict[int, int], rows: dict[int, int]) -> list[Any]:
    """DataFrames of the live rows of the files with a DV, to union with the other files' rows.

    ``groups``: the indexes of the files with a DV, one list per partition (one relation reads
    files of one partition). ``sizes``: each such file's size on disk, as Spark will report it;
    ``rows``: its row count (:func:`row_counts`). Raises the typed deletion vector errors of
    :func:`~deltatx.io.deletion_vectors.deleted_rows`, and for a DV deleting a row past its file.
    """
    deleted = {r: _within(deleted_rows(store, descriptors[r], paths[r]), rows[r], paths[r])
               for group in groups for r in group}
    budget = MAX_BITMAP_WORDS
    filtered: list[list[int]] = []  # chunks of files (one partition, sizes all different) for a bitmap filter
    joined: list[list[int]] = []  # per partition, the files left for the join
    for group in groups:
        left: list[int] = []
        for same_sizes in size_groups([sizes[r] for r in group]):
            members = [group[i] for i in same_sizes]
            for start in range(0, len(members), MAX_BITMAP_FILES):
                chunk = members[start:start + MAX_BITMAP_FILES]
                words = sum(bitmap_words(rows[r]) for r in chunk)
                if words > budget:
                    left.extend(chunk)
                else:
                    budget -= words
                    filtered.append(chunk)
        joined.append(left)
    parts = _bitmap_filtered(read, project, filtered, deleted, sizes, rows, paths) if filtered else []
    everyone = [r for left in joined for r in left]
    for same_sizes in size_groups([sizes[r] for r in everyone], _LOW_32):
        members = {everyone[i] for i in same_sizes}
        keyed = [project(read(files).withColumn(KEY_COLUMN, _key()), files[0], (KEY_COLUMN,))
                 for files in ([r for r in left if r in members] for left in joined) if files]
        union = keyed[0]
        for other in keyed[1:]:
            union = union.unionByName(other)
        ordered = sorted(members)
        parts.append(_anti_join(union, deleted_keys([sizes[r] for r in ordered], [deleted[r] for r in ordered])))
    return parts


def _bitmap_filtered(read: Read, project: Project, chunks: list[list[int]], deleted: dict[int, np.ndarray],
                     sizes: dict[int, int], rows: dict[int, int], paths: Sequence[str]) -> list[Any]:
    """One relation per chunk, its rows tested against the bitmaps (all chunks share one array)."""
    from pyspark.sql.classic.column import Column

    arrays: list[np.ndarray] = []
    offsets: dict[int, int] = {}
    offset = 0
    for r in (r for chunk in chunks for r in chunk):
        arrays.append(bitmap(deleted[r], rows[r], paths[r]))
        offsets[r], offset = offset, offset + len(arrays[-1])
    relations = [read(chunk) for chunk in chunks]
    spark = relations[0].sparkSession
    # the bitmaps one after the other, then the zero word of rows no CASE branch names
    words = _scalar_array(spark, np.concatenate(arrays + [np.zeros(1, dtype=np.int64)]))
    functions = _java_class(spark, "org.apache.spark.sql.functions")
    parts = []
    for chunk, relation in zip(chunks, relations):
        position = word_position([sizes[r] for r in chunk], [rows[r] for r in chunk], [offsets[r] for r in chunk],
                                 offset)
        # the row's bit in its word: a live row's is 0 (evaluated once per row, never NULL)
        bit = functions.get(words, functions.expr(position)).bitwiseAND(functions.expr(_ROW_BIT))
        parts.append(project(relation.where(Column(bit.equalTo(0))), chunk[0], ()))
    return parts


def _scalar_array(spark: Any, values: np.ndarray) -> Any:
    """A (Java) column: ``values`` as an ``array<bigint>`` scalar subquery over a one-row local
    relation.

    Built with a handful of Py4J calls where PySpark's ``createDataFrame`` and column helpers
    take dozens (P8 times the whole read, planning included): the longs cross as one byte
    string into a ``long[]``, and Spark turns the row into its local relation itself.
    """
    gateway = spark.sparkContext._gateway
    array = gateway.new_array(_java_class(spark, "long"), len(values))
    buffer = _java_class(spark, "java.nio.ByteBuffer").wrap(bytearray(values.astype(">i8").tobytes()))
    buffer.asLongBuffer().get(array)
    fields = gateway.new_array(_java_class(spark, "java.lang.Object"), 1)
    fields[0] = array
    row = _java_class(spark, "org.apache.spark.sql.RowFactory").create(fields)
    rows = _java_class(spark, "java.util.Collections").singletonList(row)
    jsession = spark._jsparkSession
    return jsession.createDataFrame(rows, jsession.parseDataType(_WORDS_SCHEMA)).scalar()


def _java_class(spark: Any, name: str) -> Any:
    """The JVM class ``name`` for static calls, without a Py4J round trip per package level
    (which ``spark._jvm.a.b.C`` costs)."""
    from py4j.java_gateway import JavaClass

    return JavaClass(name, spark.sparkContext._gateway._gateway_client)


def _key() -> Any:
    from pyspark.sql import functions as F

    return F.expr(KEY_EXPRESSION)
