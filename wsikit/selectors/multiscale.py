"""Multi-scale greedy window selection with IoU and margin constraints.

This is the algorithm of ``ARCHITECTURE.md`` ("Multi-scale window selection"):

1. Patch ``i`` falls in cell ``(x_i // p, y_i // p)``; the attention map ``A`` is the mean of the
   scores per occupied cell (:func:`~wsikit.selectors.grid.attention_map`).
2. For each scale ``w`` (coarse to fine), a ``w×w`` window at cell ``(gx, gy)`` covers
   ``[gx, gx+w) × [gy, gy+w)``, must lie inside the bounding box of the occupied cells, and is
   feasible when its occupied fraction is ``>= min_coverage``. Its score is the mean of ``A``
   over its occupied cells. Sums come from summed-area tables: O(cells) per scale.
3. Candidates are visited in descending score (ties: smaller ``gy``, then smaller ``gx``); one is
   accepted when, against every window accepted so far at any scale, IoU ``<= max_iou`` and the
   Chebyshev distance ``>= margin`` cells.
4. At most ``per_scale`` windows are kept per scale; a scale with none records why.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import SelectionError
from .grid import AttentionMap, attention_map, summed_area_table, window_sums
from .windows import Window, Windows

__all__ = ["select_windows", "select_from_map", "compatible", "LAYOUTS", "DEFAULT_SCALES"]

LAYOUTS = ("nested", "disjoint")
DEFAULT_SCALES = (8, 4, 2, 1)


def _validate(scales: Sequence[int], per_scale: int, min_coverage: float, max_iou: float,
              margin: float, layout: str) -> tuple[tuple[int, ...], int, float, float, float]:
    if isinstance(scales, (int, np.integer)):
        scales = (int(scales),)
    try:
        raw = list(scales)
    except TypeError as exc:
        raise SelectionError(f"scales must be a sequence of positive integers, got {scales!r}"
                             ) from exc
    if not raw:
        raise SelectionError("scales is empty; pass e.g. scales=(8, 4, 2, 1)")
    out: list[int] = []
    for s in raw:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer, float)) \
                or s != int(s) or int(s) < 1:
            raise SelectionError(
                f"scales must be positive integers (window side in grid cells), got {s!r} in "
                f"{raw!r}")
        out.append(int(s))
    if len(set(out)) != len(out):
        raise SelectionError(f"scales contain duplicates: {raw!r}; list each scale once")
    if isinstance(per_scale, (bool, np.bool_)) or not isinstance(per_scale, (int, np.integer)) \
            or per_scale < 1:
        raise SelectionError(f"per_scale must be an integer >= 1, got {per_scale!r}")
    try:
        cov = float(min_coverage)
        iou = float(max_iou)
        mar = float(margin)
    except (TypeError, ValueError) as exc:
        raise SelectionError(
            f"min_coverage, max_iou and margin must be numbers, got {min_coverage!r}, "
            f"{max_iou!r}, {margin!r}") from exc
    if not (0.0 < cov <= 1.0):
        raise SelectionError(f"min_coverage must be in (0, 1], got {min_coverage!r}")
    if not (0.0 <= iou <= 1.0):
        raise SelectionError(f"max_iou must be in [0, 1], got {max_iou!r}")
    if not (math.isfinite(mar) and mar >= 0):
        raise SelectionError(f"margin must be a finite number of cells >= 0, got {margin!r}")
    if layout not in LAYOUTS:
        raise SelectionError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    return tuple(sorted(out, reverse=True)), int(per_scale), cov, iou, mar


def compatible(gx: np.ndarray, gy: np.ndarray, w: int | np.ndarray, ax: np.ndarray,
               ay: np.ndarray, aw: np.ndarray, *, max_iou: float, margin: float,
               layout: str) -> np.ndarray:
    """Whether each candidate window satisfies the IoU and margin constraints against all others.

    Windows are squares in cell units: ``[gx, gx+w) × [gy, gy+w)``.

    Distances (``margin`` is in cells, compared with ``>=``):

    * ``layout="nested"``: Chebyshev distance between window centres,
      ``max(|cx1 - cx2|, |cy1 - cy2|)`` with ``cx = gx + w/2``. A finer window may lie inside a
      coarser one as long as its centre is at least ``margin`` cells from the coarse centre.
    * ``layout="disjoint"``: edge-to-edge gap, ``max(gap_x, gap_y)`` where the gap along an axis
      is the number of cells strictly between the two intervals,
      ``max(0, max(a1, a2) - min(b1, b2))`` for ``[a1, b1)`` and ``[a2, b2)`` (0 when they
      overlap or touch). This is the Chebyshev distance between the two cell sets minus one
      (adjacent windows have gap 0); with ``margin >= 1`` overlapping windows are rejected.

    Parameters
    ----------
    gx, gy : ndarray, shape (n,)
        Candidate top-left cells.
    w : int or ndarray, shape (n,)
        Candidate side(s) in cells.
    ax, ay, aw : ndarray, shape (m,)
        Windows to test against.
    max_iou, margin, layout
        As in :func:`select_windows`.

    Returns
    -------
    ndarray, shape (n,), bool
        True where the candidate passes against every one of the ``m`` windows.
    """
    gx = np.asarray(gx, dtype=np.int64)[:, None]
    gy = np.asarray(gy, dtype=np.int64)[:, None]
    w = np.broadcast_to(np.asarray(w, dtype=np.int64), gx.shape[:1])[:, None]
    ax = np.asarray(ax, dtype=np.int64)[None, :]
    ay = np.asarray(ay, dtype=np.int64)[None, :]
    aw = np.asarray(aw, dtype=np.int64)[None, :]
    if ax.shape[1] == 0:
        return np.ones(gx.shape[0], dtype=bool)
    ox = np.minimum(gx + w, ax + aw) - np.maximum(gx, ax)   # overlap (negative: gap) along x
    oy = np.minimum(gy + w, ay + aw) - np.maximum(gy, ay)
    inter = np.clip(ox, 0, None) * np.clip(oy, 0, None)
    union = w * w + aw * aw - inter
    ok = (inter / union) <= max_iou
    if layout == "nested":
        # doubled centre coordinates keep the arithmetic exact in integers
        d2 = np.maximum(np.abs(2 * gx + w - 2 * ax - aw), np.abs(2 * gy + w - 2 * ay - aw))
        ok &= d2 >= 2.0 * margin
    else:
        gap = np.maximum(np.clip(-ox, 0, None), np.clip(-oy, 0, None))
        ok &= gap >= margin
    return ok.all(axis=1)


def _descending(score: np.ndarray, need: int) -> Iterator[np.ndarray]:
    """Yield the positions of ``score`` in descending score (ties: ascending position).

    Positions index candidates in row-major (gy, gx) order, so a stable sort on ``-score``
    breaks ties by smaller gy, then smaller gx. For large candidate sets the best block (every
    candidate scoring at least the k-th best) is sorted first, and the rest only if the greedy
    pass needs it.
    """
    n = score.shape[0]
    k = max(256, 64 * need)
    if n <= 4 * k:
        yield np.argsort(-score, kind="stable")
        return
    thr = np.partition(score, n - k)[n - k]
    top = np.flatnonzero(score >= thr)
    yield top[np.argsort(-score[top], kind="stable")]
    rest = np.flatnonzero(score < thr)
    yield rest[np.argsort(-score[rest], kind="stable")]


def _min_count(min_coverage: float, area: int) -> int:
    """Smallest integer ``c`` with ``c / area >= min_coverage`` (exactly as floats compare)."""
    c = max(1, math.ceil(min_coverage * area))
    while c > 1 and (c - 1) / area >= min_coverage:
        c -= 1
    while c / area < min_coverage:
        c += 1
    return c


#: Bits of the fixed-point attention values used for ranking (see :func:`_fixed_point`).
FIXED_POINT_BITS = 30


def _fixed_point(amap: AttentionMap) -> np.ndarray:
    """Attention values as int64 fixed point, so summed-area tables are exact.

    Values are divided by the power of two ``>= max|A|`` and scaled by ``2**30``: floating-point
    SAT differences would give mathematically equal windows slightly different sums (and so an
    arbitrary tie order); integer sums are exact, so equal windows tie exactly and ties fall to
    the smaller ``gy``, then ``gx``. Scores within ``~1e-9 · max|A|`` of each other can tie.
    Dyadic inputs (e.g. multiples of 1/256) are represented exactly. The SAT cannot overflow:
    ``MAX_CELLS · 2**30 < 2**63``.
    """
    vals = np.where(amap.occupied, amap.values, 0.0)
    amax = max(float(vals.max()), -float(vals.min())) if vals.size else 0.0
    if amax == 0.0:
        return np.zeros(vals.shape, dtype=np.int64)
    _, exp = math.frexp(amax)          # amax < 2**exp
    return np.rint(np.ldexp(vals, FIXED_POINT_BITS - exp)).astype(np.int64)


def _exact_mean(amap: AttentionMap, ly: int, lx: int, w: int) -> float:
    """Correctly rounded mean of ``A`` over the occupied cells of one accepted window."""
    block = amap.values[ly:ly + w, lx:lx + w][amap.occupied[ly:ly + w, lx:lx + w]]
    return math.fsum(block.tolist()) / block.shape[0]


def _fmt(v: float) -> str:
    return f"{v:g}"


def select_from_map(amap: AttentionMap, *, scales: Sequence[int] = DEFAULT_SCALES,
                    per_scale: int = 1, min_coverage: float = 1.0, max_iou: float = 0.5,
                    margin: float = 2, layout: str = "nested",
                    selector: str = "multiscale") -> Windows:
    """Run the greedy multi-scale selection on a precomputed :class:`AttentionMap`.

    Same options and result as :func:`select_windows`.
    """
    scales_t, per_scale, min_coverage, max_iou, margin = _validate(
        scales, per_scale, min_coverage, max_iou, margin, layout)
    p = amap.patch_size_l0
    ox, oy = amap.origin
    h, w_cells = amap.shape
    sat_cnt = summed_area_table(amap.occupied)
    sat_val = summed_area_table(_fixed_point(amap))
    acc_x: list[int] = []
    acc_y: list[int] = []
    acc_w: list[int] = []
    windows: list[Window] = []
    empty: dict[int, str] = {}
    constraint = (f"IoU <= {_fmt(max_iou)} / {layout} margin >= {_fmt(margin)} cells")
    for w in scales_t:
        if w > h or w > w_cells:
            empty[w] = (f"no {w}x{w} window fits in the {w_cells}x{h}-cell tissue bounding box "
                        "(width x height)")
            continue
        cnt = window_sums(sat_cnt, w)
        area = w * w
        nx = cnt.shape[1]
        # feasible: cnt / area >= min_coverage, as an exact integer threshold
        feasible = cnt.ravel() >= _min_count(min_coverage, area)
        flat = np.flatnonzero(feasible)    # row-major: ascending gy, then gx
        n_feasible = int(flat.shape[0])
        if n_feasible == 0:
            empty[w] = (f"no {w}x{w} window with coverage >= {_fmt(min_coverage)} "
                        f"(best coverage {int(cnt.max()) / area:.3g}); lower min_coverage to "
                        "allow windows over holes or tissue edges")
            continue
        tot = window_sums(sat_val, w).ravel()
        c = cnt.ravel()[flat]
        score = tot[flat] / c              # ranking key: exact window sums, one rounding
        kept = 0
        # candidates best first, in blocks; each block is tested (vectorised) against every
        # window accepted so far, then greedily within itself
        for chunk in _descending(score, per_scale):
            if chunk.shape[0] == 0:
                continue
            cy, cx = np.divmod(flat[chunk], nx)
            cgx, cgy = cx + ox, cy + oy
            m = compatible(cgx, cgy, w, np.array(acc_x, dtype=np.int64),
                           np.array(acc_y, dtype=np.int64), np.array(acc_w, dtype=np.int64),
                           max_iou=max_iou, margin=margin, layout=layout)
            while kept < per_scale:
                pos = int(np.argmax(m))
                if not m[pos]:
                    break
                j = int(chunk[pos])
                wx, wy = int(cgx[pos]), int(cgy[pos])
                windows.append(Window(x=wx * p, y=wy * p, size=w * p, scale=w,
                                      score=_exact_mean(amap, int(cy[pos]), int(cx[pos]), w),
                                      gx=wx, gy=wy, coverage=float(c[j]) / area))
                acc_x.append(wx)
                acc_y.append(wy)
                acc_w.append(w)
                kept += 1
                m[pos] = False
                if kept < per_scale:
                    m &= compatible(cgx, cgy, w, cgx[pos:pos + 1], cgy[pos:pos + 1],
                                    np.array([w]), max_iou=max_iou, margin=margin,
                                    layout=layout)
            if kept >= per_scale:
                break
        if kept == 0:
            empty[w] = (f"all {n_feasible} feasible {w}x{w} windows violate {constraint} "
                        "against accepted windows")
    params: dict[str, Any] = {
        "selector": selector, "scales": list(scales_t), "per_scale": per_scale,
        "min_coverage": min_coverage, "max_iou": max_iou, "margin": margin, "layout": layout,
        "patch_size_l0": p,
    }
    grid = {"origin": [ox, oy], "shape": [h, w_cells], "occupied": amap.n_occupied,
            "patch_size_l0": p}
    return Windows(windows=tuple(windows), empty=empty, params=params, grid=grid)


def select_windows(scores: np.ndarray, coords: np.ndarray, patch_size_l0: int, *,
                   scales: Sequence[int] = DEFAULT_SCALES, per_scale: int = 1,
                   min_coverage: float = 1.0, max_iou: float = 0.5, margin: float = 2,
                   layout: str = "nested") -> Windows:
    """Select salient square windows at several scales, greedily, coarse to fine.

    Parameters
    ----------
    scores : array_like, shape (N,)
        Per-patch attention or importance (finite reals; higher is more salient).
    coords : array_like, shape (N, 2), int64
        Level-0 top-left ``(x, y)`` of each patch.
    patch_size_l0 : int
        Grid stride ``p`` in level-0 pixels. Cells are ``(x // p, y // p)``, anchored at the
        level-0 origin.
    scales : sequence of int, default (8, 4, 2, 1)
        Window sides in cells; processed from the largest to the smallest.
    per_scale : int, default 1
        Maximum number of windows kept per scale.
    min_coverage : float in (0, 1], default 1.0
        Minimum fraction of a window's cells that must hold a patch.
    max_iou : float in [0, 1], default 0.5
        Maximum intersection over union with every accepted window (any scale).
    margin : float >= 0, default 2
        Minimum Chebyshev distance in cells to every accepted window; see :func:`compatible`
        for how ``layout`` defines the distance (centre-to-centre for ``"nested"``, edge-to-edge
        gap ``max(gap_x, gap_y)`` for ``"disjoint"``).
    layout : {"nested", "disjoint"}, default "nested"

    Returns
    -------
    Windows
        Accepted windows (level-0 ``x = gx·p``, ``y = gy·p``, ``size = w·p``), and for each
        scale without a window the reason (too large for the bounding box, no window with
        enough coverage, or every feasible window violates the constraints).

    Raises
    ------
    SelectionError
        On mismatched shapes, non-finite scores, bad scales or options.

    Examples
    --------
    >>> import numpy as np
    >>> yy, xx = np.mgrid[0:16, 0:16]
    >>> coords = np.stack([xx.ravel(), yy.ravel()], 1) * 256
    >>> scores = np.exp(-((xx - 10.0) ** 2 + (yy - 5.0) ** 2) / 20).ravel()
    >>> res = select_windows(scores, coords, 256)
    >>> [(w.scale, w.gx, w.gy) for w in res]
    [(8, 6, 1), (4, 10, 3), (2, 9, 6), (1, 12, 7)]
    """
    _validate(scales, per_scale, min_coverage, max_iou, margin, layout)
    amap = attention_map(scores, coords, patch_size_l0)
    return select_from_map(amap, scales=scales, per_scale=per_scale, min_coverage=min_coverage,
                           max_iou=max_iou, margin=margin, layout=layout)
