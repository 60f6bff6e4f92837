"""Multi-scale greedy window selection: layouts, a saliency floor, windows inside the slide.

This is the algorithm of ``ARCHITECTURE.md`` ("Multi-scale window selection"):

1. Patch ``i`` falls in cell ``(x_i // p, y_i // p)``; the attention map ``A`` is the mean of the
   scores per occupied cell (:func:`~wsikit.selection.selectors.grid.attention_map`).
2. For each scale ``w`` (coarse to fine), a ``w×w`` window at cell ``(gx, gy)`` covers
   ``[gx, gx+w) × [gy, gy+w)``, lies inside the bounding box of the occupied cells and its
   level-0 box inside the slide, and is feasible when its occupied fraction is
   ``>= min_coverage`` and its score (mean of ``A`` over its occupied cells) ``>= min_score``
   (default: the median of ``A``). Sums come from summed-area tables: O(cells) per scale.
3. Candidates are visited in descending score (scores equal to 12 significant digits tie; ties go
   to the smaller ``gy``, then ``gx``); one is accepted when it is compatible with every window
   accepted so far at any scale (:func:`compatible`: IoU and the layout rule).
4. At most ``per_scale`` windows are kept per scale; a scale with none records why.
5. Windows are ranked by score (rank 1 = most salient); each names the smallest accepted window
   that wholly contains it (``inside``: its rank, or ``None``).

Exactness: window sums are taken on an int64 fixed-point copy of ``A`` (exact integer sums),
which gives every score to within a known bound; candidates whose order or floor decision that
bound cannot settle are decided on exactly rounded sums (:func:`math.fsum`), so ties and the
floor follow the rule, not floating-point noise.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ...errors import SelectionError
from .grid import AttentionMap, attention_map, summed_area_table, window_sums
from .windows import Window, Windows

__all__ = ["select_windows", "select_from_map", "compatible", "rank_windows", "parse_scales"]

#: Window sides of the multi-scale selector, in patches, coarse to fine.
DEFAULT_SCALES: tuple[int, ...] = (8, 4, 2, 1)

LAYOUTS = ("nested", "disjoint")
#: Named values of ``min_score`` (a number is an absolute floor; 0 disables the floor).
MIN_SCORE_CHOICES = ("median",)
#: Bits of the fixed-point attention values used for the window sums.
FIXED_POINT_BITS = 30
_KEY_DIGITS = 12


def _validate_min_score(min_score: float | str) -> float | str:
    if isinstance(min_score, str):
        if min_score.strip().lower() in MIN_SCORE_CHOICES:
            return "median"
        try:
            min_score = float(min_score)
        except ValueError as exc:
            raise SelectionError(
                f"min_score must be 'median' or a number (0 disables the floor), got "
                f"{min_score!r}") from exc
    if isinstance(min_score, (bool, np.bool_)) or not isinstance(
            min_score, (int, float, np.integer, np.floating)) or not math.isfinite(min_score):
        raise SelectionError(
            f"min_score must be 'median' or a finite number (0 disables the floor), got "
            f"{min_score!r}")
    return float(min_score)


def _validate(scales: Sequence[int], per_scale: int, min_coverage: float, max_iou: float,
              margin: float, layout: str, min_score: float | str = "median"
              ) -> tuple[tuple[int, ...], int, float, float, float, float | str]:
    out = list(parse_scales(scales))
    raw = scales
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
        raise SelectionError(f"margin must be a finite number of patches >= 0, got {margin!r}")
    if layout not in LAYOUTS:
        raise SelectionError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    return (tuple(sorted(out, reverse=True)), int(per_scale), cov, iou, mar,
            _validate_min_score(min_score))


def _iou_ok(inter: np.ndarray, union: np.ndarray, max_iou: float) -> np.ndarray:
    """``inter / union <= max_iou`` decided exactly (rational comparison near the boundary)."""
    ratio = inter / union
    ok = ratio <= max_iou
    near = np.abs(ratio - max_iou) <= 1e-9
    if near.any():
        num, den = float(max_iou).as_integer_ratio()
        for idx in zip(*np.nonzero(near), strict=True):
            ok[idx] = int(inter[idx]) * den <= num * int(union[idx])
    return ok


def compatible(gx: np.ndarray, gy: np.ndarray, w: int | np.ndarray, ax: np.ndarray,
               ay: np.ndarray, aw: np.ndarray, *, max_iou: float, margin: float,
               layout: str) -> np.ndarray:
    """Whether each candidate window is compatible with every given (accepted) window.

    Windows are squares in cell units: ``[gx, gx+w) × [gy, gy+w)``. A candidate is compatible
    with an accepted window when IoU ``<= max_iou`` and

    * ``layout="disjoint"`` (the paper's rule): the Chebyshev edge-to-edge gap in cells,
      ``max(gap_x, gap_y)`` with ``gap_x = max(0, b.gx - (a.gx + a.w), a.gx - (b.gx + b.w))``
      (0 when the intervals overlap or touch), is ``>= margin``;
    * ``layout="nested"``: the candidate lies wholly inside the accepted window (a zoom into
      it; the margin does not apply), or the two do not overlap and their gap is
      ``>= margin``. Partial overlaps are never compatible.

    Parameters
    ----------
    gx, gy : ndarray, shape (n,)
        Candidate top-left cells.
    w : int or ndarray, shape (n,)
        Candidate side(s) in cells.
    ax, ay, aw : ndarray, shape (m,)
        Accepted windows.
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
    ok = _iou_ok(inter, union, max_iou)
    gap = np.maximum(np.clip(-ox, 0, None), np.clip(-oy, 0, None))
    apart = gap >= margin
    if layout == "nested":
        inside = (gx >= ax) & (gy >= ay) & (gx + w <= ax + aw) & (gy + w <= ay + aw)
        ok &= inside | ((inter == 0) & apart)
    else:
        ok &= apart
    return np.asarray(ok.all(axis=1))


def _min_count(min_coverage: float, area: int) -> int:
    """Smallest integer ``c`` with ``c / area >= min_coverage`` (exactly as floats compare)."""
    c = max(1, math.ceil(min_coverage * area))
    while c > 1 and (c - 1) / area >= min_coverage:
        c -= 1
    while c / area < min_coverage:
        c += 1
    return c


def _round_key(v: np.ndarray) -> np.ndarray:
    """Scores rounded to 12 significant digits (the tie rule), as float64."""
    return np.array([float(f"{x:.{_KEY_DIGITS - 1}e}") for x in np.asarray(v).tolist()],
                    dtype=np.float64)


class _Scale:
    """Scores of every window position of one scale, with an error bound and exact fallbacks."""

    def __init__(self, amap: AttentionMap, unit_exp: int, exact: bool, w: int, ny: int,
                 nx: int, lo: tuple[int, int], cnt: np.ndarray, tot: np.ndarray) -> None:
        self.amap, self.w, self.lo = amap, w, lo
        self.tot = tot
        self.floor_q: int | None = None   # sum of the floor terms in fixed point, if exact
        self.ny, self.nx = ny, nx
        self.cnt = cnt
        # approximate mean: exact integer sum / count, one rounding, times the unit
        self.approx = np.ldexp(tot / np.maximum(cnt, 1), unit_exp)
        self.exact = exact
        # |approx - true mean| <= delta (quantisation <= half a unit per cell, plus rounding)
        self.delta = math.ldexp(1.0, unit_exp - 20) if exact else math.ldexp(1.0, unit_exp)

    def cells(self, pos: int) -> np.ndarray:
        """Values of the occupied cells of candidate ``pos`` (flat index in the position grid)."""
        ly, lx = divmod(int(pos), self.nx)
        ly += self.lo[1]
        lx += self.lo[0]
        w = self.w
        block = self.amap.values[ly:ly + w, lx:lx + w]
        return block[self.amap.occupied[ly:ly + w, lx:lx + w]]

    def mean(self, pos: int) -> float:
        """Correctly rounded sum over the window, divided by its count (one more rounding)."""
        v = self.cells(pos)
        return math.fsum(v.tolist()) / v.shape[0]

    def keys(self, pos: np.ndarray) -> np.ndarray:
        """Tie keys (12 significant digits) of candidates ``pos``."""
        if self.exact:   # the approximate mean is the correctly rounded one
            return _round_key(self.approx[pos])
        return _round_key(np.array([self.mean(p) for p in pos.tolist()], dtype=np.float64))

    def at_least(self, pos: np.ndarray, floor: tuple[float, ...]) -> np.ndarray:
        """Whether each candidate's exact mean is ``>= sum(floor) / len(floor)`` (exact)."""
        if self.exact and self.floor_q is not None:   # integer sums: decide exactly
            return (len(floor) * self.tot[pos]) >= self.cnt[pos] * self.floor_q
        m = math.fsum(floor) / len(floor)
        a = self.approx[pos]
        out = a >= m
        near = np.abs(a - m) <= 2 * self.delta + 4 * math.ulp(abs(m))
        for j in np.flatnonzero(near).tolist():
            v = self.cells(int(pos[j])).tolist()
            c = len(v)
            # sign of  len(floor) * sum(v) - c * sum(floor)  exactly (fsum of exact terms)
            terms = [len(floor) * x for x in v] + [-f for f in floor for _ in range(c)]
            out[j] = math.fsum(terms) >= 0.0
        return out


class _Sorted:
    """Candidates in descending approximate score (ties: ascending position), sorted lazily:
    only as long a prefix as is asked for (the greedy search rarely goes deep)."""

    def __init__(self, approx: np.ndarray, pos: np.ndarray) -> None:
        self.approx = approx
        self.pos = pos
        self.rest = np.arange(pos.shape[0])
        self.order = np.zeros(0, dtype=np.int64)    # indices into pos, sorted prefix
        self.n = int(pos.shape[0])

    def ensure(self, k: int) -> int:
        """Sort at least ``min(k, n)`` leading candidates; returns the sorted length."""
        while self.order.shape[0] < k and self.rest.shape[0]:
            m = max(k - self.order.shape[0], 256, 2 * self.order.shape[0])
            a = self.approx[self.rest]
            if m >= self.rest.shape[0]:
                sel = np.ones(self.rest.shape[0], dtype=bool)
            else:
                t = np.partition(-a, m - 1)[m - 1]
                sel = -a <= t                        # all of the tie group at the threshold
            chunk = self.rest[sel]
            self.rest = self.rest[~sel]
            chunk = chunk[np.lexsort((self.pos[chunk], -self.approx[chunk]))]
            self.order = np.concatenate([self.order, chunk])
        return int(self.order.shape[0])

    def approx_at(self, j: int) -> float:
        return float(self.approx[self.order[j]])


def _exact_order(sc: _Scale, cand: np.ndarray) -> Iterator[np.ndarray]:
    """Yield blocks of ``cand`` (flat positions, ascending = ascending gy, then gx) in
    descending exact score (12 significant digits), ties to the smaller position."""
    if cand.shape[0] == 0:
        return
    srt = _Sorted(sc.approx[cand], cand)
    n = srt.n
    heap: list[tuple[float, int]] = []
    j = 0
    step = 16
    d = sc.delta

    def safe(bound: float) -> bool:
        return bool(heap) and -heap[0][0] > bound + 1e-11 * max(abs(bound), 1e-300)

    while j < n or heap:
        if j >= n:
            yield np.asarray([heapq.heappop(heap)[1] for _ in range(len(heap))], np.int64)
            return
        srt.ensure(j + 1)
        bound = srt.approx_at(j) + d     # every candidate not yet keyed scores below this
        if not safe(bound):
            # key the next ``step`` candidates and every one within 2·delta of the last
            stop = srt.ensure(j + step)
            stop = min(stop, j + step)
            low = srt.approx_at(stop - 1) - 2 * d
            while stop < n:
                if stop >= srt.ensure(stop + 1) or srt.approx_at(stop) < low:
                    break
                stop += 1
            block = cand[srt.order[j:stop]]
            for k, q in zip(sc.keys(block).tolist(), block.tolist(), strict=True):
                heapq.heappush(heap, (-k, q))
            j = stop
            step *= 2
            continue
        out = []
        while safe(bound):
            out.append(heapq.heappop(heap)[1])
        yield np.asarray(out, dtype=np.int64)


def _floor_value(amap: AttentionMap, min_score: float | str) -> tuple[tuple[float, ...], float]:
    """The floor as ``(terms, value)``: ``value = mean(terms)`` exactly; ``()`` = no floor."""
    if min_score == "median":
        v = amap.values[amap.occupied]
        n = v.shape[0]
        v = np.partition(v, [(n - 1) // 2, n // 2])
        terms = (float(v[n // 2]),) if n % 2 else (float(v[n // 2 - 1]), float(v[n // 2]))
        return terms, math.fsum(terms) / len(terms)
    if min_score == 0:
        return (), -math.inf
    return (float(min_score),), float(min_score)


def _fmt(v: float) -> str:
    return f"{v:g}"


def _fixed(amap: AttentionMap) -> tuple[np.ndarray, int, bool]:
    """``A`` as int64 fixed point: ``(values, unit exponent, exact)``; value = int · 2**exp."""
    vals = np.where(amap.occupied, amap.values, 0.0)
    amax = max(float(vals.max()), -float(vals.min())) if vals.size else 0.0
    if amax == 0.0:
        return np.zeros(vals.shape, dtype=np.int64), 0, True
    _, e = math.frexp(amax)           # amax < 2**e
    unit = e - FIXED_POINT_BITS
    q = np.rint(np.ldexp(vals, -unit))
    exact = bool(np.array_equal(np.ldexp(q, unit), vals))
    return q.astype(np.int64), unit, exact


def select_from_map(amap: AttentionMap, *, scales: Sequence[int] = DEFAULT_SCALES,
                    per_scale: int = 1, min_coverage: float = 1.0, max_iou: float = 0.5,
                    margin: float = 2, layout: str = "nested",
                    min_score: float | str = "median",
                    slide_size: tuple[int, int] | None = None,
                    selector: str = "multiscale") -> Windows:
    """Run the greedy multi-scale selection on a precomputed :class:`AttentionMap`.

    Same options and result as :func:`select_windows`.
    """
    scales_t, per_scale, min_coverage, max_iou, margin, min_score = _validate(
        scales, per_scale, min_coverage, max_iou, margin, layout, min_score)
    p = amap.patch_size_l0
    ox, oy = amap.origin
    h, w_cells = amap.shape
    if slide_size is not None:
        sw, sh = (int(v) for v in slide_size)
        if sw <= 0 or sh <= 0:
            raise SelectionError(f"slide_size must be positive (width, height), got {slide_size}")
    sat_cnt = summed_area_table(amap.occupied)
    fixed, unit, exact = _fixed(amap)
    sat_val = summed_area_table(fixed)
    floor_terms, floor = _floor_value(amap, min_score)
    floor_desc = ("none" if not floor_terms else
                  f"{floor:.4g} (median score of the {amap.n_occupied} patch positions)"
                  if min_score == "median" else f"{floor:.4g}")
    acc: list[tuple[int, int, int]] = []
    windows: list[Window] = []
    empty: dict[int, str] = {}
    constraint = f"IoU <= {_fmt(max_iou)} / {layout} margin >= {_fmt(margin)} patches"
    for w in scales_t:
        # window positions (local top-left) inside the bounding box and inside the slide
        lx0, ly0 = max(0, -ox), max(0, -oy)
        lx1, ly1 = w_cells - w, h - w                  # inclusive
        if slide_size is not None:
            lx1 = min(lx1, sw // p - w - ox)
            ly1 = min(ly1, sh // p - w - oy)
        if w > h or w > w_cells:
            empty[w] = (f"no {w}x{w}-patch window fits in the {w_cells}x{h}-patch tissue "
                        "bounding box (width x height)")
            continue
        if lx1 < lx0 or ly1 < ly0:
            empty[w] = (f"no {w}x{w} window fits inside the slide within the tissue bounding "
                        "box (windows are never padded beyond the slide edge)")
            continue
        cnt = window_sums(sat_cnt, w)[ly0:ly1 + 1, lx0:lx1 + 1]
        tot = window_sums(sat_val, w)[ly0:ly1 + 1, lx0:lx1 + 1]
        ny, nx = cnt.shape
        area = w * w
        sc = _Scale(amap, unit, exact, w, ny, nx, (lx0, ly0), cnt.ravel(), tot.ravel())
        cand = np.flatnonzero(sc.cnt >= _min_count(min_coverage, area))
        if cand.shape[0] == 0:
            empty[w] = (f"no {w}x{w} window with coverage >= {_fmt(min_coverage)} "
                        f"(best coverage {int(cnt.max()) / area:.3g}); lower min_coverage to "
                        "allow windows over holes or tissue edges")
            continue
        if floor_terms:
            cand, below = _above_floor(sc, cand, floor_terms, unit=unit, exact=exact,
                                       floor_desc=floor_desc)
            if below is not None:
                empty[w] = below
                continue
        n_feasible = int(cand.shape[0])
        kept = _accept(sc, cand, acc, windows, offset=(lx0 + ox, ly0 + oy), nx=nx,
                       per_scale=per_scale, max_iou=max_iou, margin=margin, layout=layout)
        if kept == 0:
            empty[w] = (f"all {n_feasible} feasible {w}x{w} windows violate {constraint} "
                        "against accepted windows")
    params: dict[str, Any] = {
        "selector": selector, "scales": list(scales_t), "per_scale": per_scale,
        "min_coverage": min_coverage, "max_iou": max_iou, "margin": margin, "layout": layout,
        "min_score": min_score, "min_score_value": floor if floor_terms else None,
        "patch_size_l0": p,
    }
    grid = {"origin": [ox, oy], "shape": [h, w_cells], "occupied": amap.n_occupied,
            "patch_size_l0": p}
    if slide_size is not None:
        grid["slide_size"] = [sw, sh]
    return Windows(windows=rank_windows(windows), empty=empty, params=params, grid=grid)


def _above_floor(sc: _Scale, cand: np.ndarray, floor_terms: tuple[float, ...], *, unit: int,
                 exact: bool, floor_desc: str) -> tuple[np.ndarray, str | None]:
    """``(candidates scoring at least the floor, None)``, or ``(cand, why none does)``."""
    w = sc.w
    if exact:
        q = [math.ldexp(f, -unit) for f in floor_terms]
        if all(abs(v) < 2.0 ** 62 and v == int(v) for v in q):
            sc.floor_q = int(sum(int(v) for v in q))
    above = sc.at_least(cand, floor_terms)
    if not above.any():
        best = max(sc.mean(int(q)) for q in cand[np.argsort(-sc.approx[cand])[:8]])
        return cand, (f"the best {w}x{w} window scores {best:.4g}, below the floor "
                      f"min_score = {floor_desc}: no {w}x{w} region is more salient than "
                      "the floor")
    return cand[above], None


def _accept(sc: _Scale, cand: np.ndarray, acc: list[tuple[int, int, int]],
            windows: list[Window], *, offset: tuple[int, int], nx: int, per_scale: int,
            max_iou: float, margin: float, layout: str) -> int:
    """Greedily accept up to ``per_scale`` windows of side ``sc.w`` from ``cand`` in exact
    score order, each compatible with every window accepted before (``acc``, appended to
    with ``windows``); ``offset`` turns a candidate's local cell into grid cells. Returns how
    many were accepted."""
    w, p, area = sc.w, sc.amap.patch_size_l0, sc.w * sc.w
    kept = 0
    for block in _exact_order(sc, cand):
        cy, cx = np.divmod(block, nx)
        cgx, cgy = cx + offset[0], cy + offset[1]
        arr = np.array(acc, dtype=np.int64).reshape(-1, 3)
        m = compatible(cgx, cgy, w, arr[:, 0], arr[:, 1], arr[:, 2], max_iou=max_iou,
                       margin=margin, layout=layout)
        while kept < per_scale:
            pos = int(np.argmax(m))
            if not m[pos]:
                break
            cell = int(block[pos])
            wx, wy = int(cgx[pos]), int(cgy[pos])
            windows.append(Window(x=wx * p, y=wy * p, size=w * p, scale=w,
                                  score=sc.mean(cell), gx=wx, gy=wy,
                                  coverage=float(sc.cnt[cell]) / area))
            acc.append((wx, wy, w))
            kept += 1
            m[pos] = False
            if kept < per_scale:
                m &= compatible(cgx, cgy, w, cgx[pos:pos + 1], cgy[pos:pos + 1],
                                np.array([w]), max_iou=max_iou, margin=margin,
                                layout=layout)
        if kept >= per_scale:
            break
    return kept


def rank_windows(windows: Sequence[Window]) -> tuple[Window, ...]:
    """Windows in rank order with ``rank`` and ``inside`` set.

    Rank 1 is the highest score (scores compared to 12 significant digits; ties keep the
    acceptance order: coarser scale first, then the selection order within a scale).
    ``inside`` is the rank of the smallest other window that wholly contains the window
    (ties: the earlier accepted), or ``None``.
    """
    from dataclasses import replace

    keys = _round_key(np.array([w.score for w in windows], dtype=np.float64))
    order = sorted(range(len(windows)), key=lambda i: (-keys[i], i))
    rank = {i: r for r, i in enumerate(order, start=1)}
    out = []
    for i in order:
        a = windows[i]
        host = None
        for j, b in enumerate(windows):
            if j == i or b.scale <= a.scale:
                continue
            if (b.gx <= a.gx and b.gy <= a.gy and a.gx + a.scale <= b.gx + b.scale
                    and a.gy + a.scale <= b.gy + b.scale
                    and (host is None or b.scale < windows[host].scale)):
                host = j
        out.append(replace(a, rank=rank[i], inside=None if host is None else rank[host]))
    return tuple(out)


def _stage_inputs(scores: Any, coords: Any, patch_size_l0: Any,
                  slide_size: tuple[int, int] | None) -> tuple[Any, Any, Any, Any]:
    """``(scores, coords, patch_size_l0, slide_size)`` from arrays, or from an
    :class:`~wsikit.selection.attention.Attention` (scores, coordinates) and the
    :class:`~wsikit.patches.grid.TileGrid` it was computed on (stride, slide size)."""
    if not isinstance(scores, np.ndarray | list | tuple):
        from ..attention import Attention

        if isinstance(scores, Attention):
            from ..._hints import expect
            from ...patches.grid import TileGrid

            expect(coords, TileGrid, name="select_windows(attention, grid): grid",
                   error=SelectionError, want="the TileGrid the attention was computed on")
            if patch_size_l0 is not None:
                raise SelectionError("select_windows(attention, grid) takes the stride from "
                                     "the grid; drop patch_size_l0")
            if slide_size is None and all(coords.level0_size):
                slide_size = tuple(coords.level0_size)
            return scores.scores, scores.coords, coords.stride_l0, slide_size
    if coords is None or patch_size_l0 is None:
        raise SelectionError("select_windows needs (scores, coords, patch_size_l0) arrays, or "
                             "an Attention and its TileGrid: select_windows(attention, grid)")
    return scores, coords, patch_size_l0, slide_size


def select_windows(scores: Any, coords: Any = None, patch_size_l0: Any = None, *,
                   scales: Sequence[int] = DEFAULT_SCALES, per_scale: int = 1,
                   min_coverage: float = 1.0, max_iou: float = 0.5, margin: float = 2,
                   layout: str = "nested", min_score: float | str = "median",
                   slide_size: tuple[int, int] | None = None) -> Windows:
    """Select salient square windows at several scales, greedily, coarse to fine.

    Also callable on the stages' results: ``select_windows(attention, grid)`` takes the
    scores and coordinates from an :class:`~wsikit.selection.attention.Attention`, the stride
    and the slide size from the :class:`~wsikit.patches.grid.TileGrid`.

    Parameters
    ----------
    scores : array_like, shape (N,), or Attention
        Per-patch attention or importance (finite reals; higher is more salient).
    coords : array_like, shape (N, 2), int64, or TileGrid (with an Attention)
        Level-0 top-left ``(x, y)`` of each patch.
    patch_size_l0 : int
        Grid stride ``p`` in level-0 pixels (not given with a TileGrid: its ``stride_l0``).
        Cells are ``(x // p, y // p)``, anchored at the level-0 origin.
    scales : sequence of int, default (8, 4, 2, 1)
        Window sides in cells; processed from the largest to the smallest.
    per_scale : int, default 1
        Maximum number of windows kept per scale.
    min_coverage : float in (0, 1], default 1.0
        Minimum fraction of a window's cells that must hold a patch.
    max_iou : float in [0, 1], default 0.5
        Maximum intersection over union with every accepted window (any scale).
    margin : float >= 0, default 2
        Minimum Chebyshev edge-to-edge gap in cells to every accepted window the candidate
        does not zoom into (see :func:`compatible`).
    layout : {"nested", "disjoint"}, default "nested"
        ``nested``: a finer window may lie wholly inside an accepted one (a zoom chain);
        otherwise the gap must be ``>= margin``. ``disjoint``: always the gap rule.
    min_score : "median" or float, default "median"
        Saliency floor: a window must score at least this (``"median"``: the median of the
        cell scores, so every region is more salient than half of the tissue; ``0``: no floor).
    slide_size : (int, int), optional
        Level-0 ``(width, height)``: windows must lie inside the slide (never padded).

    Returns
    -------
    Windows
        Accepted windows in rank order (level-0 ``x = gx·p``, ``y = gy·p``, ``size = w·p``,
        ``rank``, ``inside``), and for each scale without a window the reason (does not fit,
        no window with enough coverage, best window below the floor, or every feasible
        window violates the constraints).

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
    >>> [(w.rank, w.scale, w.gx, w.gy, w.inside) for w in res]
    [(1, 1, 10, 5, 2), (2, 2, 9, 4, 3), (3, 4, 8, 3, 4), (4, 8, 6, 1, None)]
    """
    scores, coords, patch_size_l0, slide_size = _stage_inputs(scores, coords, patch_size_l0,
                                                              slide_size)
    _validate(scales, per_scale, min_coverage, max_iou, margin, layout, min_score)
    amap = attention_map(scores, coords, patch_size_l0)
    return select_from_map(amap, scales=scales, per_scale=per_scale, min_coverage=min_coverage,
                           max_iou=max_iou, margin=margin, layout=layout, min_score=min_score,
                           slide_size=slide_size)


def parse_scales(scales: str | int | Sequence[int]) -> tuple[int, ...]:
    """Window sides in cells from ``"8,4,2,1"`` (the command line's form), an int or a
    sequence of ints; one-line :class:`SelectionError` otherwise.

    >>> parse_scales("8, 4"), parse_scales(2), parse_scales([4, 1])
    ((8, 4), (2,), (4, 1))
    """
    if isinstance(scales, str):
        parts = [v.strip() for v in scales.split(",") if v.strip()]
        try:
            scales = [int(v) for v in parts]
        except ValueError:
            raise SelectionError(f"scales {scales!r} is not a comma-separated list of integers, "
                                 "e.g. '8,4,2,1'") from None
    if isinstance(scales, (int, np.integer)) and not isinstance(scales, bool):
        scales = (int(scales),)
    try:
        # a bool reaches here on purpose: list() raises and it is reported below
        raw = list(scales)  # type: ignore[arg-type]
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
                f"scales must be positive integers (window side in patches), got {s!r} in "
                f"{raw!r}")
        out.append(int(s))
    return tuple(out)
