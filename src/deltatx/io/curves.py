"""Space-filling curves: the row order that makes files tight on several columns at once.

Sorting rows by one column makes files tight on that column only. Clustering (liquid clustering,
``OPTIMIZE ZORDER BY``) sorts them along a curve through the k-dimensional space of the
clustering columns instead, so that consecutive rows — and hence the rows of one file — are close
on *every* column, and min/max statistics let a predicate on any of them skip most files::

    each column ──► quantile rank (pyarrow ``rank``, ties share a rank) scaled to b bits
       k columns ──► Z-order: interleave the bits        (Morton; jumps between quadrants)
                 └─► Hilbert: Skilling's transform, then interleave (no jumps: a contiguous run
                     of the curve is a compact region, so a file's min/max box stays small)
       curve keys ──► stable argsort (several 64-bit words when k·b > 64: lexsort)

Ranks rather than raw values: a curve needs integer coordinates on a common scale, whatever the
column type (strings, dates, floats), and quantile ranks spread skewed data evenly over the
space, as Delta's range ids do. Everything is vectorized over rows with numpy: the Python loops
run over bits and columns only (at most ``k · b`` steps), never over rows.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: the curves deltatx can lay rows out along
CURVES = ("hilbert", "zorder")

#: bits of each coordinate at most (2**32 distinct positions per column is plenty)
MAX_BITS = 32


def coordinate_bits(num_rows: int) -> int:
    """Bits per coordinate: enough to tell ``num_rows`` quantiles apart, at most MAX_BITS."""
    return max(1, min(MAX_BITS, math.ceil(math.log2(max(num_rows, 2)))))


def quantile_coordinates(values: pa.Array | pa.ChunkedArray, bits: int) -> np.ndarray:
    """Each value's quantile rank scaled to ``[0, 2**bits)`` (uint64).

    Equal values get equal coordinates (``min`` tie-breaking), so all rows of one value land in
    one region of the curve; nulls rank after every value (they form their own region).
    """
    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    ranks = pc.rank(values, sort_keys="ascending", tiebreaker="min").to_numpy(zero_copy_only=False)
    zero_based = ranks.astype(np.uint64) - np.uint64(1)  # in [0, n)
    # floor(rank * 2**bits / n) without overflow: rank < 2**32 and 2**bits <= 2**32
    scaled = (zero_based.astype(np.float64) * float(1 << bits) / float(n)).astype(np.uint64)
    return np.minimum(scaled, np.uint64((1 << bits) - 1))


def _interleave(coords: list[np.ndarray], bits: int) -> list[np.ndarray]:
    """Interleave ``bits`` bits of each coordinate, most significant first, coordinate 0 first
    within each bit; returns the key as 64-bit words, most significant word first."""
    k = len(coords)
    n = len(coords[0])
    total = bits * k
    words = [np.zeros(n, dtype=np.uint64) for _ in range(math.ceil(total / 64))]
    one = np.uint64(1)
    for level in range(bits):  # level 0 = the most significant bit of every coordinate
        shift = np.uint64(bits - 1 - level)
        for d, c in enumerate(coords):
            position = level * k + d  # from the key's most significant bit
            bit = (c >> shift) & one
            words[position // 64] |= bit << np.uint64(63 - position % 64)
    return words


def _hilbert_transpose(coords: list[np.ndarray], bits: int) -> list[np.ndarray]:
    """Skilling's "axes to transpose" (AIP Conf. Proc. 707, 2004), vectorized over rows.

    Returns the Hilbert index in transposed form: interleaving its coordinates gives the index.
    """
    x = [c.copy() for c in coords]
    k = len(x)
    top = np.uint64(1) << np.uint64(bits - 1)
    zero = np.uint64(0)
    q = top
    while q > 1:  # undo the excess work of the recursive construction, bit level by bit level
        p = q - np.uint64(1)
        for i in range(k):
            high = (x[i] & q) != 0
            x[0] = np.where(high, x[0] ^ p, x[0])  # invert the low bits of x0
            swap = np.where(high, zero, (x[0] ^ x[i]) & p)  # or exchange them with x_i
            x[0] ^= swap
            x[i] ^= swap
        q >>= np.uint64(1)
    for i in range(1, k):  # Gray encode
        x[i] ^= x[i - 1]
    flips = np.zeros_like(x[0])
    q = top
    while q > 1:
        flips = np.where((x[k - 1] & q) != 0, flips ^ (q - np.uint64(1)), flips)
        q >>= np.uint64(1)
    for i in range(k):
        x[i] ^= flips
    return x


def curve_keys(coords: Sequence[np.ndarray], bits: int, curve: str = "hilbert") -> list[np.ndarray]:
    """The curve position of every row as 64-bit words (most significant first)."""
    if curve not in CURVES:
        raise ValueError(f"curve must be one of {CURVES}, got {curve!r}")
    coords = [np.asarray(c, dtype=np.uint64) for c in coords]
    if not coords:
        raise ValueError("a curve needs at least one coordinate")
    if len(coords) == 1:
        return [coords[0]]  # one column: the curve is the column's order
    if curve == "hilbert":
        coords = _hilbert_transpose(coords, bits)
    return _interleave(coords, bits)


def curve_order(columns: Sequence[pa.Array | pa.ChunkedArray], curve: str = "hilbert") -> np.ndarray:
    """The permutation (int64 indices) that sorts rows along ``curve`` over ``columns``.

    Stable: rows at the same curve position keep their input order.
    """
    return curve_sort(columns, curve)[0]


def _bit_length(v: np.ndarray) -> np.ndarray:
    """Exact ``int.bit_length`` of uint64 values, vectorized (6 halving steps, no float rounding)."""
    v = v.copy()
    out = np.zeros(len(v), dtype=np.int64)
    nonzero = v != 0
    for shift in (32, 16, 8, 4, 2, 1):
        high = (v >> np.uint64(shift)) != 0
        out += np.where(high, shift, 0)
        v = np.where(high, v >> np.uint64(shift), v)
    return out + nonzero


def curve_sort(columns: Sequence[pa.Array | pa.ChunkedArray], curve: str = "hilbert") -> tuple[np.ndarray, np.ndarray]:
    """The curve order of the rows, and for each position of that order the *boundary level*
    between it and the row before: the bit length of the two keys' XOR, i.e. how coarse a cell
    of the curve's recursive grid starts there (0 = same position; the first row is highest).

    A file cut where the level is high ends on the border of a large cell, so neighbouring files
    tile the space instead of overlapping (see :func:`cut_points`).
    """
    if not columns:
        raise ValueError("curve_sort needs at least one column")
    n = len(columns[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    bits = coordinate_bits(n)
    words = curve_keys([quantile_coordinates(c, bits) for c in columns], bits, curve)
    if len(words) == 1:
        order = np.argsort(words[0], kind="stable").astype(np.int64)
    else:
        order = np.lexsort(words[::-1]).astype(np.int64)  # lexsort: last key is the primary one
    levels = np.zeros(n, dtype=np.int64)
    for w, word in enumerate(reversed(words)):  # least significant word first: the first difference wins
        ordered = word[order]
        diff = ordered[1:] ^ ordered[:-1]
        levels[1:] = np.where(diff != 0, _bit_length(diff) + 64 * w, levels[1:])
    levels[0] = 64 * len(words) + 1
    return order, levels


#: how far (share of the rows per file) a cut may move to land on a coarser cell border
CUT_SLACK = 0.2


def cut_points(levels: np.ndarray, rows_per_file: int, slack: float = CUT_SLACK) -> list[int]:
    """Row offsets (0 first, len last) cutting curve-sorted rows into files of about
    ``rows_per_file`` rows: each cut moves by at most ``slack`` of a file to the coarsest cell
    border nearby (nearest to the ideal position among equals), and the last two files share
    the rest evenly instead of leaving a sliver. Loops over files, never over rows."""
    n = len(levels)
    rows_per_file = max(1, int(rows_per_file))
    window = int(rows_per_file * slack)
    cuts = [0]
    position = 0
    while n - position > rows_per_file + window:
        ideal = position + rows_per_file
        if n - ideal < rows_per_file - window:  # the tail would be small: split what is left
            ideal = position + (n - position) // 2
        lo, hi = max(position + 1, ideal - window), min(n - 1, ideal + window)
        region = levels[lo:hi + 1]
        best = np.flatnonzero(region == region.max()) + lo
        position = int(best[np.argmin(np.abs(best - ideal))])
        cuts.append(position)
    cuts.append(n)
    return cuts
