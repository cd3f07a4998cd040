"""Space-filling curves (io/curves.py): quantile coordinates, Z-order and Hilbert keys, row order."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest

from deltatx.io.curves import coordinate_bits, curve_keys, curve_order, quantile_coordinates


def all_cells(k: int, bits: int) -> np.ndarray:
    return np.array(list(itertools.product(range(2 ** bits), repeat=k)), dtype=np.uint64)


@pytest.mark.parametrize("k,bits", [(2, 1), (2, 4), (3, 3), (4, 2), (2, 6)])
def test_hilbert_visits_every_cell_once_moving_one_step_at_a_time(k, bits):
    cells = all_cells(k, bits)
    [key] = curve_keys([cells[:, d] for d in range(k)], bits, "hilbert")
    assert len(np.unique(key)) == len(cells)  # a bijection
    path = cells[np.argsort(key)].astype(np.int64)
    steps = np.abs(np.diff(path, axis=0)).sum(axis=1)
    assert steps.max() == 1  # neighbours on the curve are neighbours in space: no jumps


def test_zorder_interleaves_bits_most_significant_first():
    x = np.array([0, 1, 0, 1, 2, 3], dtype=np.uint64)
    y = np.array([0, 0, 1, 1, 0, 3], dtype=np.uint64)
    [key] = curve_keys([x, y], 2, "zorder")
    # 4 key bits x1 y1 x0 y0, stored at the top of the 64-bit word
    expected = [0b0000, 0b0010, 0b0001, 0b0011, 0b1000, 0b1111]
    assert (key >> np.uint64(60)).tolist() == expected


def test_zorder_jumps_where_hilbert_does_not():
    cells = all_cells(2, 3)
    [z] = curve_keys([cells[:, 0], cells[:, 1]], 3, "zorder")
    path = cells[np.argsort(z)].astype(np.int64)
    assert np.abs(np.diff(path, axis=0)).sum(axis=1).max() > 1


def test_keys_wider_than_64_bits_use_several_words_and_keep_the_order():
    rng = np.random.default_rng(3)
    coords = [rng.integers(0, 2 ** 20, 500).astype(np.uint64) for _ in range(4)]  # 80 key bits
    words = curve_keys(coords, 20, "zorder")
    assert len(words) == 2
    reference = [sum(int((c[i] >> b) & 1) << (b * 4 + 3 - d) for b in range(20) for d, c in enumerate(coords))
                 for i in range(500)]
    order = np.lexsort(words[::-1])
    assert [reference[i] for i in order] == sorted(reference)


def test_quantile_coordinates_share_ties_put_nulls_last_and_spread_skew():
    values = pa.array([5, None, 1, 5, 1, 1, 9, 1])
    coords = quantile_coordinates(values, 3).tolist()
    assert coords[0] == coords[3] and coords[2] == coords[4] == coords[5] == coords[7]
    assert coords[2] < coords[0] < coords[6] < coords[1]  # nulls after every value
    assert max(coords) < 8
    # 90 % of the values in [0, 100), 10 % up to 1e9: scaling the values would put the 90 % in
    # one cell of 16; quantiles spread them over the cells their share of the rows deserves
    rng = np.random.default_rng(2)
    skewed = pa.array(np.concatenate([rng.integers(0, 100, 900), rng.integers(10 ** 6, 10 ** 9, 100)]))
    spread = quantile_coordinates(skewed, 4)
    assert len(np.unique(spread[:900])) >= 13 and spread[:900].max() <= spread[900:].min()


def test_quantile_coordinates_of_strings_dates_and_dictionaries():
    import datetime

    strings = quantile_coordinates(pa.array(["b", "a", "c"]), 2).tolist()
    assert strings[1] < strings[0] < strings[2]
    dates = quantile_coordinates(pa.array([datetime.date(2024, 1, 2), datetime.date(2023, 1, 1)]), 1).tolist()
    assert dates == [1, 0]
    dictionary = pa.array(["y", "x", "y"]).dictionary_encode()
    coords = quantile_coordinates(dictionary, 2).tolist()
    assert coords[0] == coords[2] > coords[1]


def test_curve_order_is_a_stable_permutation_and_one_column_sorts_by_it():
    x = pa.array([3, 1, 2, 1, 3])
    assert curve_order([x]).tolist() == [1, 3, 2, 0, 4]
    rng = np.random.default_rng(0)
    cols = [pa.array(rng.integers(0, 50, 1000)) for _ in range(3)]
    order = curve_order(cols, "hilbert")
    assert sorted(order.tolist()) == list(range(1000))
    assert curve_order([pa.array([], pa.int64())]).tolist() == []
    with pytest.raises(ValueError):
        curve_order(cols, "peano")


def test_curve_order_groups_rows_into_compact_boxes():
    rng = np.random.default_rng(1)
    n = 1 << 14
    x, y = rng.integers(0, 1 << 20, n), rng.integers(0, 1 << 20, n)
    for curve in ("hilbert", "zorder"):
        order = curve_order([pa.array(x), pa.array(y)], curve)
        chunks = np.array_split(order, 16)
        # a quarter-by-quarter grid has 16 boxes of 1/16 of the area; curve chunks come close
        areas = [np.ptp(x[c]) * np.ptp(y[c]) / float(1 << 40) for c in chunks]
        assert np.mean(areas) < 0.2, curve


def test_coordinate_bits():
    assert coordinate_bits(0) == 1 and coordinate_bits(2) == 1 and coordinate_bits(1000) == 10
    assert coordinate_bits(1 << 40) == 32


def test_boundary_levels_mark_where_the_curve_leaves_a_cell():
    from deltatx.io.curves import curve_sort

    cells = all_cells(2, 2)  # a 4x4 grid: 4 quadrants of 4 cells
    order, levels = curve_sort([pa.array(cells[:, 0].astype(np.int64)), pa.array(cells[:, 1].astype(np.int64))])
    assert len(order) == 16
    # every 4th position of a 2-D curve starts a new quadrant (a coarser border than the others)
    assert all(levels[i] > levels[i + 1] for i in (4, 8, 12))
    assert levels[0] == levels.max()


def test_cut_points_land_on_coarse_borders_and_avoid_slivers():
    from deltatx.io.curves import cut_points

    levels = np.zeros(100, dtype=np.int64)
    levels[[0, 27, 55, 81]] = [99, 5, 5, 5]
    assert cut_points(levels, 25) == [0, 27, 55, 81, 100]  # each cut slides to a border within 20 %
    plain = np.zeros(105, dtype=np.int64)
    cuts = cut_points(plain, 50)
    assert cuts[0] == 0 and cuts[-1] == 105 and min(np.diff(cuts)) >= 40  # no 5-row sliver
    assert cut_points(np.zeros(10, dtype=np.int64), 50) == [0, 10]


def test_quadtree_aligned_cuts_tile_the_space():
    from deltatx.io.curves import curve_sort, cut_points

    rng = np.random.default_rng(0)
    n = 200_000
    x, y = rng.integers(0, 1 << 30, n), rng.integers(0, 1 << 30, n)
    order, levels = curve_sort([pa.array(x), pa.array(y)], "hilbert")
    cuts = cut_points(levels, n // 13)
    areas = [np.ptp(x[order[a:b]]) * np.ptp(y[order[a:b]]) / float(1 << 60) for a, b in zip(cuts, cuts[1:])]
    assert sum(areas) < 1.05  # boxes barely overlap: a point lies in about one file
    naive = np.linspace(0, n, 14).astype(int)
    assert sum(np.ptp(x[order[a:b]]) * np.ptp(y[order[a:b]]) / float(1 << 60) for a, b in zip(naive, naive[1:])) > 1.1
