"""Multi-scale window selection: agreement with an exact-arithmetic brute-force reference
(both layouts, the saliency floor, slide-bound clipping, ties, ranks), constraints, empty
scales, level-0 anchoring and input validation."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import ndimage
from select_reference import gap, inside, intersection, iou, reference_select

from wsikit.errors import SelectionError
from wsikit.selection.selectors import Windows, attention_map, select_windows
from wsikit.selection.selectors.grid import summed_area_table, window_sums
from wsikit.selection.selectors.multiscale import compatible

REPO = Path(__file__).resolve().parents[2]

OPTION_SETS = [
    dict(per_scale=1, max_iou=0.5, margin=2, min_coverage=1.0, min_score="median"),
    dict(per_scale=2, max_iou=0.3, margin=1, min_coverage=0.75, min_score="median"),
    dict(per_scale=3, max_iou=0.0, margin=0, min_coverage=1.0, min_score=0),
    dict(per_scale=3, max_iou=0.5, margin=3, min_coverage=0.75, min_score=0.125),
    dict(per_scale=2, max_iou=0.0, margin=2, min_coverage=0.75, min_score="median"),
    dict(per_scale=1, max_iou=0.3, margin=0, min_coverage=1.0, min_score=-0.25),
    dict(per_scale=4, max_iou=0.5, margin=1, min_coverage=0.5, min_score="median"),
]


def random_tissue(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, tuple]:
    """Random blobby occupancy with holes on a grid of at most 20x20 cells, dyadic scores
    (exact in floating point, many ties), 1, 2 or 4 patches per cell at random offsets inside
    the cell, a random grid origin, and a slide size that sometimes clips the bounding box."""
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
    # the slide ends somewhere in the last cells: windows there would run past its edge
    cut = rng.integers(0, 3, size=2) * p + rng.integers(0, p, size=2) + 1
    slide = (int((origin[0] + w) * p + p - cut[0]), int((origin[1] + h) * p + p - cut[1]))
    slide = (max(slide[0], int(coords_max(coords, 0)) + 1),
             max(slide[1], int(coords_max(coords, 1)) + 1))
    return (np.asarray(scores, dtype=np.float64)[order],
            np.asarray(coords, dtype=np.int64)[order], p, slide)


def coords_max(coords: list, axis: int) -> int:
    return max(c[axis] for c in coords)


_KIND = {"fit": "fit", "coverage": "with coverage", "floor": "below the floor",
         "constraints": "violate"}


def _check_against_reference(scores, coords, p, slide, layout, opts, *, exact_scores=True):
    res = select_windows(scores, coords, p, layout=layout, slide_size=slide, **opts)
    ref, ref_empty = reference_select(scores, coords, p, layout=layout, slide_size=slide,
                                      **opts)
    got = [(w.rank, w.scale, w.gx, w.gy, w.inside) for w in res]
    want = [(r["rank"], r["scale"], r["gx"], r["gy"], r["inside"]) for r in ref]
    assert got == want, (opts, got, want)
    for w, r in zip(res, ref, strict=True):
        if exact_scores:
            assert Fraction(w.score) == r["score"] or abs(w.score - float(r["score"])) <= \
                1e-13 * abs(float(r["score"]))  # cell means of several patches round once
        assert (w.x, w.y, w.size) == (w.gx * p, w.gy * p, w.scale * p)
        assert w.x + w.size <= slide[0] and w.y + w.size <= slide[1]
    assert set(res.empty) == set(ref_empty), (opts, res.empty, ref_empty)
    for scale, kind in ref_empty.items():
        assert _KIND[kind] in res.empty[scale], (res.empty[scale], kind)
    return res


@pytest.mark.parametrize("layout", ["nested", "disjoint"])
def test_matches_exact_reference_on_random_maps_with_ties(layout: str) -> None:
    rng = np.random.default_rng(12345 if layout == "nested" else 54321)
    n_maps = 160
    n_windows = n_floor = n_clipped = n_multi = 0
    for i in range(n_maps):
        scores, coords, p, slide = random_tissue(rng)
        opts = OPTION_SETS[i % len(OPTION_SETS)]
        res = _check_against_reference(scores, coords, p, slide, layout, opts)
        n_windows += len(res)
        n_floor += any("below the floor" in v for v in res.empty.values())
        n_multi += any(len(res.by_scale(s)) > 1 for s in (8, 4, 2, 1))
        bbox_x1 = (res.grid["origin"][0] + res.grid["shape"][1]) * p
        n_clipped += slide[0] < bbox_x1
    assert n_windows > n_maps          # the comparison exercised real selections
    assert n_floor > 0 and n_multi > 0 and n_clipped > 0   # and every rule


@pytest.mark.parametrize("layout", ["nested", "disjoint"])
def test_matches_exact_reference_on_continuous_scores(layout: str) -> None:
    rng = np.random.default_rng(7)
    for i in range(30):
        scores, coords, p, slide = random_tissue(rng)
        scores = scores + rng.normal(0, 0.01, scores.shape)   # generic floats
        opts = OPTION_SETS[i % len(OPTION_SETS)]
        _check_against_reference(scores, coords, p, slide, layout, opts)


def test_ties_that_float_sums_would_break() -> None:
    # values like 0.1 are not dyadic: summed-area-table differences of floats give equal
    # windows slightly different sums; the tie rule (12 significant digits) must still hold
    rng = np.random.default_rng(3)
    for _ in range(20):
        h, w = 12, 14
        vals = rng.choice([0.1, 0.2, 0.3, 0.7], size=(h, w))
        yy, xx = np.mgrid[0:h, 0:w]
        coords = np.stack([xx.ravel(), yy.ravel()], 1) * 10
        for layout in ("nested", "disjoint"):
            _check_against_reference(vals.ravel(), coords, 10, (w * 10, h * 10), layout,
                                     dict(per_scale=3, margin=1, max_iou=0.5,
                                          min_coverage=1.0, min_score="median"))


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
        floor = res.params["min_score_value"]
        for a in res:
            assert floor is None or a.score >= floor
        for a, b in itertools.combinations(res.windows, 2):
            if a.scale < b.scale:
                a, b = b, a        # b is the finer (or equal) one, accepted later
            assert iou(b.gx, b.gy, b.scale, a.gx, a.gy, a.scale) <= opts["max_iou"]
            g = gap(b.gx, b.gy, b.scale, a.gx, a.gy, a.scale)
            zoom = inside(b.gx, b.gy, b.scale, a.gx, a.gy, a.scale)
            if layout == "nested":
                assert zoom or (g >= opts["margin"] and
                                intersection(b.gx, b.gy, b.scale, a.gx, a.gy, a.scale) == 0)
            else:
                assert g >= opts["margin"]
        for scale in (8, 4, 2, 1):
            assert len(res.by_scale(scale)) <= opts["per_scale"]
            assert (len(res.by_scale(scale)) > 0) != (scale in res.empty)
        assert [w.rank for w in res] == list(range(1, len(res) + 1))
        assert all(a.score >= b.score for a, b in itertools.pairwise(res.windows))


def test_nested_is_a_zoom_chain_into_the_hotspot_disjoint_keeps_apart() -> None:
    yy, xx = np.mgrid[0:24, 0:24]
    att = np.exp(-((xx - 12.0) ** 2 + (yy - 12.0) ** 2) / 30.0)
    coords = np.stack([xx.ravel(), yy.ravel()], 1) * 10
    nested = select_windows(att.ravel(), coords, 10, layout="nested")
    chain = sorted(nested.windows, key=lambda w: -w.scale)
    assert [w.scale for w in chain] == [8, 4, 2, 1]
    for big, small in itertools.pairwise(chain):       # 8 ⊃ 4 ⊃ 2 ⊃ 1
        assert inside(small.gx, small.gy, small.scale, big.gx, big.gy, big.scale)
        assert small.inside == big.rank
    one = nested.by_scale(1)[0]
    assert (one.gx, one.gy) in {(11, 11), (12, 11), (11, 12), (12, 12)}  # the hottest cells
    assert nested[0] is one and one.rank == 1         # the most salient region is listed first
    disjoint = select_windows(att.ravel(), coords, 10, layout="disjoint")
    for a, b in itertools.combinations(disjoint.windows, 2):
        assert gap(a.gx, a.gy, a.scale, b.gx, b.gy, b.scale) >= 2
        assert iou(a.gx, a.gy, a.scale, b.gx, b.gy, b.scale) == 0
        assert a.inside is None and b.inside is None


def test_nested_rejects_partial_overlap_even_with_margin_zero() -> None:
    # accepted 4x4 at (0, 0); a 2x2 at (3, 3) overlaps it by one cell: never compatible
    ok = compatible(np.array([3, 1, 4, 6]), np.array([3, 1, 0, 0]), 2, np.array([0]),
                    np.array([0]), np.array([4]), max_iou=1.0, margin=0, layout="nested")
    assert ok.tolist() == [False, True, True, True]   # overlap, inside, touching, apart
    ok = compatible(np.array([3, 1, 4, 6]), np.array([3, 1, 0, 0]), 2, np.array([0]),
                    np.array([0]), np.array([4]), max_iou=1.0, margin=2, layout="nested")
    assert ok.tolist() == [False, True, False, True]
    ok = compatible(np.array([3, 1, 4, 6]), np.array([3, 1, 0, 0]), 2, np.array([0]),
                    np.array([0]), np.array([4]), max_iou=1.0, margin=0, layout="disjoint")
    assert ok.tolist() == [True, True, True, True]


def test_floor_rejects_windows_below_the_median_and_says_why() -> None:
    # one bright cell in a dark field: the 1x window takes it, no 4x window can beat the median
    att = np.zeros((8, 8))
    att[5, 5] = 1.0
    att[:, :4] = 0.5                      # half the tissue is brighter than the hotspot's area
    yy, xx = np.mgrid[0:8, 0:8]
    coords = np.stack([xx.ravel(), yy.ravel()], 1) * 4
    res = select_windows(att.ravel(), coords, 4, scales=(4, 1), layout="disjoint", margin=0,
                         min_score=0.6)
    assert [(w.scale, w.gx, w.gy) for w in res] == [(1, 5, 5)]
    assert "below the floor" in res.empty[4] and "0.6" in res.empty[4]
    res = select_windows(att.ravel(), coords, 4, scales=(4, 1))    # median: 0.5
    assert res.params["min_score_value"] == 0.5
    assert all(w.score >= 0.5 for w in res) and len(res) == 2
    off = select_windows(att.ravel(), coords, 4, scales=(4, 1), min_score=0)
    assert off.params["min_score_value"] is None
    with pytest.raises(SelectionError, match="min_score"):
        select_windows(att.ravel(), coords, 4, min_score="mean")


def test_windows_never_run_past_the_slide() -> None:
    yy, xx = np.mgrid[0:10, 0:10]
    coords = np.stack([xx.ravel(), yy.ravel()], 1) * 100
    att = (xx + yy).ravel().astype(float)      # hottest at the bottom-right corner
    free = select_windows(att, coords, 100, scales=(4,))
    assert (free[0].gx, free[0].gy) == (6, 6)
    res = select_windows(att, coords, 100, scales=(4,), slide_size=(950, 980))
    assert (res[0].gx, res[0].gy) == (5, 5)    # (6, 6) would end at 1000 > 950
    assert res[0].x + res[0].size <= 950 and res[0].y + res[0].size <= 980
    res = select_windows(att, coords, 100, scales=(8, 4), slide_size=(750, 980))
    assert 8 in res.empty and "inside the slide" in res.empty[8]


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
    assert "no 8x8-patch window fits in the 5x6-patch tissue bounding box" in res.empty[8]
    assert sorted({w.scale for w in res}) == [1, 2, 4]


def test_coverage_and_constraint_reasons() -> None:
    occ = np.ones((10, 10), bool)
    occ[::3, ::3] = False                  # holes everywhere: no full 4x4 window
    yy, xx = np.nonzero(occ)
    coords = np.stack([xx, yy], 1) * 8
    res = select_windows(np.ones(xx.size), coords, 8, scales=(4, 2))
    assert "no 4x4 window with coverage >= 1" in res.empty[4]
    assert [w.scale for w in res] == [2]
    # a single 3x3 block: the 3x3 window is taken; in the disjoint layout every 2x2 window
    # overlaps it, in the nested layout they zoom into it
    yy, xx = np.mgrid[0:3, 0:3]
    coords = np.stack([xx.ravel(), yy.ravel()], 1) * 8
    res = select_windows(np.ones(9), coords, 8, scales=(3, 2), margin=2, layout="disjoint")
    assert [w.scale for w in res] == [3]
    assert res.empty[2].startswith("all 4 feasible 2x2 windows violate")
    res = select_windows(np.ones(9), coords, 8, scales=(3, 2), margin=2, layout="nested")
    assert [w.scale for w in res] == [3, 2] and res[1].inside == 1


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
    assert [w["rank"] for w in d["windows"]] == list(range(1, len(res) + 1))
    assert any(w["inside"] is not None for w in d["windows"])
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
    (dict(min_score="mean"), "min_score"),
    (dict(min_score=float("nan")), "min_score"),
    (dict(slide_size=(0, 10)), "slide_size"),
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
            "import wsikit.selection.selectors; assert selectors.__name__ == 'selectors'; "
            "assert hasattr(selectors, 'DefaultSelector')")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)
