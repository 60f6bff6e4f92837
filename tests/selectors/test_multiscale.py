"""Multi-scale window selection: agreement with a brute-force reference, constraints, ties,
empty scales, level-0 anchoring and input validation."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import ndimage
from select_reference import distance, iou, reference_select

from wsikit.errors import SelectionError
from wsikit.selectors import (
    Windows,
    attention_map,
    select_windows,
    summed_area_table,
    window_sums,
)

REPO = Path(__file__).resolve().parents[2]

OPTION_SETS = [
    dict(per_scale=1, max_iou=0.5, margin=2, min_coverage=1.0),
    dict(per_scale=2, max_iou=0.3, margin=1, min_coverage=0.75),
    dict(per_scale=3, max_iou=0.0, margin=0, min_coverage=1.0),
    dict(per_scale=3, max_iou=0.5, margin=3, min_coverage=0.75),
    dict(per_scale=2, max_iou=0.0, margin=2, min_coverage=0.75),
    dict(per_scale=1, max_iou=0.3, margin=0, min_coverage=1.0),
]


def random_tissue(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    """Random blobby occupancy with holes on a grid of at most 20x20 cells, dyadic scores
    (exact in floating point, many ties), 1, 2 or 4 patches per cell at random offsets inside
    the cell, and a random grid origin."""
    h, w = (int(v) for v in rng.integers(1, 21, size=2))
    noise = ndimage.gaussian_filter(rng.random((h, w)), sigma=rng.uniform(0.8, 3.0))
    occ = noise >= np.quantile(noise, rng.uniform(0.0, 0.5))
    holes = rng.random((h, w)) < rng.uniform(0.0, 0.15)
    occ &= ~holes
    if not occ.any():
        occ[rng.integers(h), rng.integers(w)] = True
    levels = int(rng.choice([3, 8, 64]))                       # few levels: many ties
    p = int(rng.choice([16, 100, 256]))
    origin = rng.integers(0, 6, size=2)
    scores, coords = [], []
    for cy, cx in zip(*np.nonzero(occ), strict=True):
        for _ in range(int(rng.choice([1, 1, 1, 2, 4]))):
            scores.append(int(rng.integers(-levels, levels + 1)) / 64)
            off = rng.integers(0, p, size=2)
            coords.append(((cx + origin[0]) * p + off[0], (cy + origin[1]) * p + off[1]))
    order = rng.permutation(len(scores))
    return (np.asarray(scores, dtype=np.float64)[order],
            np.asarray(coords, dtype=np.int64)[order], p)


_KIND = {"fit": "fits in the", "coverage": "with coverage", "constraints": "violate"}


@pytest.mark.parametrize("layout", ["nested", "disjoint"])
def test_matches_brute_force_on_random_maps(layout: str) -> None:
    rng = np.random.default_rng(12345 if layout == "nested" else 54321)
    n_maps = 220
    n_windows = 0
    for i in range(n_maps):
        scores, coords, p = random_tissue(rng)
        opts = OPTION_SETS[i % len(OPTION_SETS)]
        res = select_windows(scores, coords, p, layout=layout, **opts)
        ref_windows, ref_empty = reference_select(scores, coords, p, layout=layout, **opts)
        got = [(w.scale, w.gx, w.gy, w.score) for w in res]
        assert got == ref_windows, (i, opts)
        assert set(res.empty) == set(ref_empty), (i, opts)
        for scale, kind in ref_empty.items():
            assert _KIND[kind] in res.empty[scale], (i, res.empty[scale])
        for w in res:
            assert (w.x, w.y, w.size) == (w.gx * p, w.gy * p, w.scale * p)
        n_windows += len(res)
    assert n_windows > n_maps  # the comparison exercised real selections


@pytest.mark.parametrize("layout", ["nested", "disjoint"])
def test_matches_brute_force_on_continuous_scores(layout: str) -> None:
    rng = np.random.default_rng(7)
    for i in range(30):
        scores, coords, p = random_tissue(rng)
        scores = scores + rng.normal(0, 0.01, scores.shape)   # generic floats: no exact ties
        opts = OPTION_SETS[i % len(OPTION_SETS)] | {"min_coverage": 1.0}
        res = select_windows(scores, coords, p, layout=layout, **opts)
        ref_windows, ref_empty = reference_select(scores, coords, p, layout=layout, **opts)
        assert [(w.scale, w.gx, w.gy) for w in res] == [r[:3] for r in ref_windows]
        np.testing.assert_allclose([w.score for w in res], [r[3] for r in ref_windows],
                                   rtol=1e-12, atol=1e-12)
        assert set(res.empty) == set(ref_empty)


@pytest.mark.parametrize("layout", ["nested", "disjoint"])
@pytest.mark.parametrize("opts", OPTION_SETS)
def test_every_accepted_pair_satisfies_constraints(layout: str, opts: dict) -> None:
    rng = np.random.default_rng(99)
    yy, xx = np.mgrid[0:40, 0:40]
    for _ in range(5):
        occ = ndimage.gaussian_filter(rng.random((40, 40)), 4) > 0.47
        att = ndimage.gaussian_filter(rng.random((40, 40)), 2)
        coords = np.stack([xx[occ], yy[occ]], 1) * 64
        res = select_windows(att[occ], coords, 64, scales=(8, 4, 2, 1), layout=layout, **opts)
        assert len(res) > 0
        for a, b in itertools.combinations(res.windows, 2):
            assert iou(a.gx, a.gy, a.scale, b.gx, b.gy, b.scale) <= opts["max_iou"]
            assert distance(a.gx, a.gy, a.scale, b.gx, b.gy, b.scale, layout) >= opts["margin"]
        for scale in (8, 4, 2, 1):
            assert len(res.by_scale(scale)) <= opts["per_scale"]
            assert (len(res.by_scale(scale)) > 0) != (scale in res.empty)


def test_nested_allows_zoom_inside_disjoint_does_not() -> None:
    yy, xx = np.mgrid[0:24, 0:24]
    att = np.exp(-((xx - 12.0) ** 2 + (yy - 12.0) ** 2) / 30.0)
    coords = np.stack([xx.ravel(), yy.ravel()], 1) * 10
    nested = select_windows(att.ravel(), coords, 10, layout="nested")
    disjoint = select_windows(att.ravel(), coords, 10, layout="disjoint")
    big = nested.by_scale(8)[0]
    inside = [w for w in nested.windows[1:]
              if big.gx <= w.gx and w.gx + w.scale <= big.gx + 8
              and big.gy <= w.gy and w.gy + w.scale <= big.gy + 8]
    assert inside, nested.windows            # finer windows zoom into the coarse one
    for a, b in itertools.combinations(disjoint.windows, 2):
        assert distance(a.gx, a.gy, a.scale, b.gx, b.gy, b.scale, "disjoint") >= 2
        assert iou(a.gx, a.gy, a.scale, b.gx, b.gy, b.scale) == 0


def test_ties_take_smaller_gy_then_smaller_gx() -> None:
    # constant attention on a 12x10 block: every window ties
    yy, xx = np.mgrid[3:13, 5:17]
    coords = np.stack([xx.ravel(), yy.ravel()], 1) * 32
    res = select_windows(np.full(xx.size, 0.3), coords, 32, scales=(4,), per_scale=3,
                         max_iou=0.0, margin=0, layout="disjoint")
    assert [(w.gx, w.gy) for w in res] == [(5, 3), (9, 3), (13, 3)]
    # a tie between two mirror-image windows of a symmetric bump: the upper-left one wins
    att = np.zeros((6, 6))
    att[2:4, 2:4] = 1.0
    yy, xx = np.mgrid[0:6, 0:6]
    coords = np.stack([xx.ravel(), yy.ravel()], 1)
    res = select_windows(att.ravel(), coords, 1, scales=(3,))
    assert [(w.gx, w.gy, w.score) for w in res] == [(1, 1, 4 / 9)]
    # and the result does not depend on the order of the patches
    perm = np.random.default_rng(0).permutation(36)
    again = select_windows(att.ravel()[perm], coords[perm], 1, scales=(3,))
    assert again == res


def test_map_too_small_for_8x8_reports_reason_and_keeps_other_scales() -> None:
    yy, xx = np.mgrid[0:6, 0:5]           # 5 cells wide, 6 high
    coords = np.stack([xx.ravel(), yy.ravel()], 1) * 512 + 1024
    scores = np.linspace(0, 1, xx.size)
    res = select_windows(scores, coords, 512, margin=1)
    assert 8 in res.empty
    assert "no 8x8 window fits in the 5x6-cell tissue bounding box" in res.empty[8]
    assert sorted({w.scale for w in res}) == [1, 2, 4]


def test_coverage_and_constraint_reasons() -> None:
    occ = np.ones((10, 10), bool)
    occ[::3, ::3] = False                  # holes everywhere: no full 4x4 window
    yy, xx = np.nonzero(occ)
    coords = np.stack([xx, yy], 1) * 8
    res = select_windows(np.ones(xx.size), coords, 8, scales=(4, 2))
    assert "no 4x4 window with coverage >= 1" in res.empty[4]
    assert [w.scale for w in res] == [2]
    # a single 3x3 block: the 3x3 window is taken, every 2x2 window is within 2 cells of it
    yy, xx = np.mgrid[0:3, 0:3]
    coords = np.stack([xx.ravel(), yy.ravel()], 1) * 8
    res = select_windows(np.ones(9), coords, 8, scales=(3, 2), margin=2)
    assert [w.scale for w in res] == [3]
    assert res.empty[2].startswith("all 4 feasible 2x2 windows violate")


def test_grid_is_anchored_at_level0_origin() -> None:
    # patches offset by 100 px inside 256-px cells: cells are x // 256, not relative to min
    yy, xx = np.mgrid[0:4, 0:4]
    coords = np.stack([xx.ravel() + 3, yy.ravel() + 7], 1) * 256 + 100
    res = select_windows(np.ones(16), coords, 256, scales=(4,))
    (w,) = res.windows
    assert (w.gx, w.gy, w.x, w.y, w.size) == (3, 7, 768, 1792, 1024)
    assert res.grid["origin"] == [3, 7]


def test_attention_map_is_mean_per_cell() -> None:
    coords = np.array([[0, 0], [10, 5], [40, 0], [80, 80]])
    amap = attention_map(np.array([1.0, 3.0, 5.0, 7.0]), coords, 32)
    assert amap.origin == (0, 0) and amap.shape == (3, 3)
    assert amap.values[0, 0] == 2.0 and amap.values[0, 1] == 5.0 and amap.values[2, 2] == 7.0
    assert amap.counts[0, 0] == 2 and amap.n_occupied == 3


def test_summed_area_table_window_sums_equal_naive() -> None:
    a = np.random.default_rng(3).integers(0, 9, size=(7, 11))
    for w in (1, 2, 5, 7):
        got = window_sums(summed_area_table(a), w)
        naive = np.array([[a[y:y + w, x:x + w].sum() for x in range(11 - w + 1)]
                          for y in range(7 - w + 1)])
        np.testing.assert_array_equal(got, naive)


def test_windows_dict_round_trip_is_json() -> None:
    yy, xx = np.mgrid[0:12, 0:12]
    coords = np.stack([xx.ravel(), yy.ravel()], 1) * 100
    res = select_windows(np.sin(xx.ravel() / 3.0) + yy.ravel() / 10, coords, 100, margin=1)
    d = json.loads(json.dumps(res.to_dict()))
    assert Windows.from_dict(d) == res
    assert d["windows"][0]["box"] == {"x": res[0].x, "y": res[0].y, "width": res[0].size,
                                      "height": res[0].size}
    with pytest.raises(SelectionError, match="not a window dict"):
        Windows.from_dict({"windows": [{"scale": 2}]})


@pytest.mark.parametrize("kwargs, match", [
    (dict(scales=(8, 0)), "positive integers"),
    (dict(scales=(4, 4)), "duplicates"),
    (dict(scales=(2.5,)), "positive integers"),
    (dict(scales=()), "empty"),
    (dict(per_scale=0), "per_scale"),
    (dict(min_coverage=0.0), "min_coverage"),
    (dict(min_coverage=1.5), "min_coverage"),
    (dict(max_iou=-0.1), "max_iou"),
    (dict(margin=-1), "margin"),
    (dict(layout="grid"), "layout"),
])
def test_bad_options_raise(kwargs: dict, match: str) -> None:
    with pytest.raises(SelectionError, match=match):
        select_windows(np.ones(4), np.zeros((4, 2), np.int64), 1, **kwargs)


def test_bad_inputs_raise() -> None:
    coords = np.array([[0, 0], [1, 0]])
    with pytest.raises(SelectionError, match="2 scores for 3 coordinates"):
        select_windows(np.ones(2), np.zeros((3, 2), np.int64), 1)
    with pytest.raises(SelectionError, match="non-finite"):
        select_windows(np.array([1.0, np.nan]), coords, 1)
    with pytest.raises(SelectionError, match="shape"):
        select_windows(np.ones(2), np.zeros((2, 3), np.int64), 1)
    with pytest.raises(SelectionError, match="non-integer"):
        select_windows(np.ones(2), coords + 0.5, 1)
    with pytest.raises(SelectionError, match="patch_size_l0"):
        select_windows(np.ones(2), coords, 0)
    with pytest.raises(SelectionError, match="no patches"):
        select_windows(np.ones(0), np.zeros((0, 2), np.int64), 1)
    with pytest.raises(SelectionError, match="more than"):
        select_windows(np.ones(2), np.array([[0, 0], [10**9, 10**9]]), 1)


def test_fast_on_a_large_grid() -> None:
    rng = np.random.default_rng(0)
    occ = ndimage.gaussian_filter(rng.random((300, 300)), 12) > 0.5
    att = ndimage.gaussian_filter(rng.random((300, 300)), 6)
    yy, xx = np.nonzero(occ)
    import time
    t0 = time.perf_counter()
    res = select_windows(att[occ], np.stack([xx, yy], 1) * 512, 512, per_scale=2)
    assert time.perf_counter() - t0 < 2.0     # generous: 2 shared cores; see bench_select.py
    assert len(res) == 8


def test_stdlib_selectors_not_shadowed_from_repo_root() -> None:
    code = ("import selectors, subprocess; subprocess.run(['true'], check=True); "
            "import wsikit.selectors; assert selectors.__name__ == 'selectors'; "
            "assert hasattr(selectors, 'DefaultSelector')")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)
