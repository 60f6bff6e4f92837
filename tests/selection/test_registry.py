"""Selector registry and the top-k baseline."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from wsikit.errors import SelectionError
from wsikit.selection.selectors import (
    Windows,
    create_selector,
    list_selectors,
    register_selector,
    select_windows,
)
from wsikit.selection.selectors.topk import select_topk


def _grid(h: int = 10, w: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    yy, xx = np.mgrid[0:h, 0:w]
    coords = np.stack([xx.ravel(), yy.ravel()], 1).astype(np.int64) * 256
    scores = np.random.default_rng(seed).permutation(h * w).astype(np.float64)
    return scores, coords


def test_list_selectors() -> None:
    assert {"multiscale", "topk"} <= set(list_selectors())


def test_multiscale_selector_equals_function() -> None:
    scores, coords = _grid()
    sel = create_selector("multiscale", scales=(4, 2, 1), per_scale=2, margin=1)
    assert "multiscale" in repr(sel)
    res = sel(scores, coords, 256)
    assert isinstance(res, Windows)
    assert res == select_windows(scores, coords, 256, scales=(4, 2, 1), per_scale=2, margin=1)


def test_topk_returns_best_distinct_cells() -> None:
    scores, coords = _grid()
    res = create_selector("topk", k=5)(scores, coords, 256)
    assert res.params["selector"] == "topk"
    assert [w.score for w in res] == sorted(scores.tolist(), reverse=True)[:5]
    assert all(w.scale == 1 and w.size == 256 for w in res)
    assert len({(w.gx, w.gy) for w in res}) == 5


def test_topk_margin_spreads_patches() -> None:
    scores, coords = _grid(seed=4)
    res = select_topk(scores, coords, 256, k=6, margin=3)
    for a, b in itertools.combinations(res.windows, 2):
        assert max(abs(a.gx - b.gx), abs(a.gy - b.gy)) >= 3
    # greedy: each kept cell is the best one far enough from the earlier ones
    best = max(scores)
    assert res[0].score == best


def test_topk_with_fewer_cells_than_k() -> None:
    scores, coords = _grid(2, 2)
    assert len(select_topk(scores, coords, 256, k=10, min_score=0)) == 4
    # the default floor (median of 0, 1, 2, 3 = 1.5) keeps the two cells above it
    assert sorted(w.score for w in select_topk(scores, coords, 256, k=10)) == [2.0, 3.0]


def test_unknown_selector_and_options_are_refused() -> None:
    with pytest.raises(SelectionError, match="unknown selector 'best'.*multiscale"):
        create_selector("best")
    with pytest.raises(SelectionError, match="no option.*'k'"):
        create_selector("multiscale", k=3)
    with pytest.raises(SelectionError, match="max_iou"):
        create_selector("multiscale", max_iou=2)
    with pytest.raises(SelectionError, match="k must be"):
        select_topk(np.ones(1), np.zeros((1, 2), np.int64), 1, k=0)
    with pytest.raises(SelectionError, match="already registered"):
        register_selector("topk", select_topk)
