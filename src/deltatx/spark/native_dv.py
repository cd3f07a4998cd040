"""Deletion vectors under Spark's own Parquet reader: the deleted rows are dropped on the JVM side.

Why this way: without JVM code of our own, Spark cannot consult a DV while it decodes a file.
What Spark 4's Parquet reader does offer is each row's position in its file, the hidden column
``_metadata.row_index`` — exactly what a DV counts (PROTOCOL.md "Deletion Vectors": 0-based row
indexes in the data file) — and the file's size, ``_metadata.file_size``, which names the file
cheaply on every row (a long, where the path is a string). The driver decodes every DV with
:func:`deltatx.io.deletion_vectors.deleted_rows` (the checks of every other read: a DV that
does not add up raises, it never returns deleted rows) and removes the rows in one of two ways:

- **bitmap filter** (the fast path): each DV becomes a bitmap, 64 rows per long, from the word
  of its first deleted row to the word of its last. The bitmaps of all files go to Spark as
  one ``array<bigint>`` in a one-row local DataFrame, used as a scalar subquery: Spark
  evaluates it once per query into a primitive array (no boxed values, nothing big printed in
  plans or serialized into tasks, which a literal of the same array costs on every query). A
  row's test is a ``CASE`` on the file size giving the position of its word, one array read and
  one bit test; rows come in order, so the words stay in the CPU cache. A read puts at most
  :data:`MAX_BITMAP_WORDS` words in bitmaps, and one ``CASE`` tells at most
  :data:`MAX_BITMAP_FILES` files apart (it tests them one after the other).
- **broadcast anti-join** (the rest): each deleted row becomes a 64-bit key,
  ``file size << 32 | row index``; the keys go to Spark as a small local DataFrame and the
  files' rows, keyed the same way, are left-anti-joined against it. It grows with the number
  of deleted rows only, but probing a hash table costs every row more than a bit test (P8: the
  join made the read 1.7x Spark's Parquet read where the bitmap filter stays under 1.5x).

Files without a DV take neither path. Within one ``CASE`` or one join the file sizes (for the
join their low 32 bits, what the shift keeps) must differ: files sharing one are spread over
several (:func:`size_groups`; usually there is one). The join's row index takes the key's low
32 bits, so a file with a DV must hold fewer than 2**32 rows (:func:`too_many_rows`).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from ..io.deletion_vectors import deleted_rows
from ..txnlog.store import LogStore

#: most bitmap words (64 rows each) one read sends to Spark; the rest is anti-joined
MAX_BITMAP_WORDS = 1 << 20  # 8 MiB, 64M rows' worth; P8's 2M rows with 1% deleted take 31k words
#: most files one bitmap filter tells apart (a CASE on the file size, tested in order)
MAX_BITMAP_FILES = 32

#: the hidden join column: a row's key (file size << 32 | row index)
KEY_COLUMN = "__deltatx_dv_key"
#: the key of each row, from Spark's hidden Parquet metadata columns (shiftleft wraps, never fails)
KEY_EXPRESSION = "shiftleft(_metadata.file_size, 32) | _metadata.row_index"
#: a file with a DV must hold fewer rows than this (the row index takes the key's low 32 bits)
MAX_ROWS_PER_FILE = 1 << 32

_LOW_32 = (1 << 32) - 1
_NUM_RECORDS = re.compile(r'"numRecords":(\d+)')
#: the one-row relation that carries every bitmap word to Spark
_WORDS_SCHEMA = ('{"type":"struct","fields":[{"name":"words","type":{"type":"array","elementType":"long",'
                 '"containsNull":false},"nullable":false,"metadata":{}}]}')
#: the bit of the current row in its bitmap word
_ROW_BIT = "shiftleft(1L, cast(_metadata.row_index & 63 as int))"

#: builds the Parquet relation of some files (by index) / projects it to the read's columns
Read = Callable[[list[int]], Any]
Project = Callable[[Any, int, tuple[str, ...]], Any]


def too_many_rows(files: pa.Table, paths: Sequence[str]) -> str | None:
    """The first file of ``files`` (those with a DV) with :data:`MAX_ROWS_PER_FILE` rows or more.

    Row counts come from the ``numRecords`` statistic; a file without one has its Parquet footer
    read (only local files reach here).
    """
    import pyarrow.parquet as pq

    stats = files.column("stats").to_pylist() if "stats" in files.column_names else [None] * files.num_rows
    for path, text in zip(paths, stats):
        found = _NUM_RECORDS.search(text) if text else None
        rows = int(found.group(1)) if found else pq.read_metadata(path).num_rows
        if rows >= MAX_ROWS_PER_FILE:
            return path
    return None


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


def bitmap_words(deleted: np.ndarray) -> int:
    """How many 64-bit words the bitmap of ``deleted`` (sorted positions) takes: first to last."""
    return int(deleted[-1] >> np.uint64(6)) - int(deleted[0] >> np.uint64(6)) + 1 if len(deleted) else 0


def bitmap(deleted: np.ndarray) -> tuple[int, np.ndarray]:
    """``deleted`` (sorted positions, not empty) as (first word, 64-row words from it), bit i of
    word w standing for row ``64 * (first + w) + i``."""
    first = int(deleted[0] >> np.uint64(6))
    words = np.zeros(bitmap_words(deleted), dtype=np.uint64)
    np.bitwise_or.at(words, (deleted >> np.uint64(6)).astype(np.int64) - first,
                     np.left_shift(np.uint64(1), deleted & np.uint64(63)))
    return first, words.view(np.int64)


def word_position(sizes: Sequence[int], firsts: Sequence[int], counts: Sequence[int],
                  offsets: Sequence[int]) -> str:
    """SQL: where the current row's bitmap word is in the shared array, or -1 when its file's
    bitmap does not cover it (nothing deleted there). File i (named by ``sizes[i]``) has
    ``counts[i]`` words from word ``firsts[i]`` of the file, at ``offsets[i]`` in the array."""
    word = "shiftright(_metadata.row_index, 6)"
    branches = " ".join(
        f"WHEN _metadata.file_size = {size} AND {word} BETWEEN {first} AND {first + count - 1} "
        f"THEN cast({word} - {first - offset} as int)"
        for size, first, count, offset in zip(sizes, firsts, counts, offsets))
    return f"CASE {branches} ELSE -1 END"


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
              sizes: dict[int, int]) -> list[Any]:
    """DataFrames of the live rows of the files with a DV, to union with the other files' rows.

    ``groups``: the indexes of the files with a DV, one list per partition (one relation reads
    files of one partition). ``sizes``: each such file's size on disk, as Spark will report it.
    Raises the typed deletion vector errors of :func:`~deltatx.io.deletion_vectors.deleted_rows`.
    """
    deleted = {r: deleted_rows(store, descriptors[r], paths[r]) for group in groups for r in group}
    budget = MAX_BITMAP_WORDS
    filtered: list[list[int]] = []  # chunks of files (one partition, sizes all different) for a bitmap filter
    joined: list[list[int]] = []  # per partition, the files left for the join
    for group in groups:
        left: list[int] = []
        for same_sizes in size_groups([sizes[r] for r in group]):
            members = [group[i] for i in same_sizes]
            for start in range(0, len(members), MAX_BITMAP_FILES):
                chunk = members[start:start + MAX_BITMAP_FILES]
                words = sum(bitmap_words(deleted[r]) for r in chunk)
                if words > budget:
                    left.extend(chunk)
                else:
                    budget -= words
                    filtered.append(chunk)
        joined.append(left)
    parts = _bitmap_filtered(read, project, filtered, deleted, sizes) if filtered else []
    everyone = [r for left in joined for r in left]
    for same_sizes in size_groups([sizes[r] for r in everyone], _LOW_32):
        members = {everyone[i] for i in same_sizes}
        keyed = [project(read(rows).withColumn(KEY_COLUMN, _key()), rows[0], (KEY_COLUMN,))
                 for rows in ([r for r in left if r in members] for left in joined) if rows]
        union = keyed[0]
        for other in keyed[1:]:
            union = union.unionByName(other)
        ordered = sorted(members)
        parts.append(_anti_join(union, deleted_keys([sizes[r] for r in ordered], [deleted[r] for r in ordered])))
    return parts


def _bitmap_filtered(read: Read, project: Project, chunks: list[list[int]], deleted: dict[int, np.ndarray],
                     sizes: dict[int, int]) -> list[Any]:
    """One relation per chunk, its rows tested against the bitmaps (all chunks share one array)."""
    from pyspark.sql.classic.column import Column

    firsts: dict[int, int] = {}
    arrays: list[np.ndarray] = []
    offsets: dict[int, int] = {}
    offset = 0
    for r in (r for chunk in chunks for r in chunk if len(deleted[r])):
        firsts[r], words = bitmap(deleted[r])
        offsets[r], offset = offset, offset + len(words)
        arrays.append(words)
    relations = [read(chunk) for chunk in chunks]
    spark = relations[0].sparkSession
    words = _scalar_array(spark, np.concatenate(arrays) if arrays else np.zeros(1, dtype=np.int64))
    functions = _java_class(spark, "org.apache.spark.sql.functions")
    parts = []
    for chunk, relation in zip(chunks, relations):
        live = [r for r in chunk if len(deleted[r])]  # an empty DV deletes nothing
        if live:
            position = word_position([sizes[r] for r in live], [firsts[r] for r in live],
                                     [bitmap_words(deleted[r]) for r in live], [offsets[r] for r in live])
            # the row's bit of its word; NULL when get() is asked for -1: nothing deleted there
            bit = functions.get(words, functions.expr(position)).bitwiseAND(functions.expr(_ROW_BIT))
            keep = getattr(bit.isNull(), "or")(bit.equalTo(0))  # Column.or: a Python keyword
            relation = relation.where(Column(keep))
        parts.append(project(relation, chunk[0], ()))
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
