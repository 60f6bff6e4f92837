"""Top-k patches: the ``k`` highest-scoring grid cells that do not overlap (a baseline).

Each selected "window" is one grid cell (scale 1). Cells are taken in descending mean score
(ties: smaller gy, then smaller gx) and kept when their Chebyshev distance to every kept cell is
at least ``margin`` cells (default 1: distinct, hence non-overlapping, cells), and when they
score at least ``min_score`` (default: the median cell score, as for ``multiscale``). It shares
the greedy engine of :func:`~wsikit.selection.selectors.multiscale.select_windows` with
``scales=(1,)``, ``per_scale=k``, ``max_iou=0`` and an edge gap of ``margin - 1``.
"""

from __future__ import annotations

import numpy as np

from ...errors import SelectionError
from .grid import attention_map
from .multiscale import select_from_map
from .windows import Windows

__all__ = ["select_topk"]


def select_topk(scores: np.ndarray, coords: np.ndarray, patch_size_l0: int, *, k: int = 8,
                margin: float = 1, min_score: float | str = "median",
                slide_size: tuple[int, int] | None = None) -> Windows:
    """Select the ``k`` best non-overlapping patches (grid cells).

    Parameters
    ----------
    scores : array_like, shape (N,)
        Per-patch scores.
    coords : array_like, shape (N, 2), int64
        Level-0 top-left ``(x, y)`` of each patch.
    patch_size_l0 : int
        Grid stride in level-0 pixels.
    k : int, default 8
        Number of patches to return (fewer when the slide has fewer cells above the floor).
    margin : float >= 1, default 1
        Minimum Chebyshev distance between the selected cells, in cells.
    min_score : "median" or float, default "median"
        Saliency floor (as in :func:`~wsikit.selection.selectors.select_windows`; 0 disables it).
    slide_size : (int, int), optional
        Level-0 slide size; cells reaching past it are not selected.

    Returns
    -------
    Windows
        Scale-1 windows, best first (ranked); ``params["selector"] == "topk"``.
    """
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise SelectionError(f"k must be an integer >= 1, got {k!r}")
    if not isinstance(margin, (int, float, np.integer, np.floating)) or not margin >= 1:
        raise SelectionError(
            f"margin must be >= 1 patch for non-overlapping patches, got {margin!r}")
    amap = attention_map(scores, coords, patch_size_l0)
    res = select_from_map(amap, scales=(1,), per_scale=int(k), min_coverage=1.0, max_iou=0.0,
                          margin=float(margin) - 1.0, layout="disjoint", min_score=min_score,
                          slide_size=slide_size, selector="topk")
    params = {"selector": "topk", "k": int(k), "margin": float(margin),
              "min_score": res.params["min_score"],
              "min_score_value": res.params["min_score_value"],
              "patch_size_l0": amap.patch_size_l0}
    return Windows(windows=res.windows, empty=res.empty, params=params, grid=res.grid)
