"""Brute-force reference of the multi-scale window selection, written from ARCHITECTURE.md.

Plain Python loops over every cell and every window in exact rational arithmetic
(:class:`fractions.Fraction`): cell means, window means, the median floor, IoU and coverage are
all exact; only the tie rule rounds (scores equal to 12 significant digits tie, as the spec
says). It shares no code with ``wsikit.selection.selectors`` and is deliberately slow. Used by
the tests and by ``benchmarks/bench_select.py``.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction

_CTX = Context(prec=60)


def key12(v: Fraction) -> Decimal:
    """``v`` rounded to 12 significant digits (the tie key)."""
    d = _CTX.divide(Decimal(v.numerator), Decimal(v.denominator))
    if d == 0:
        return Decimal(0)
    return Context(prec=12, rounding=ROUND_HALF_EVEN).plus(d)


def median(values: list[Fraction]) -> Fraction:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def reference_select(scores, coords, p, *, scales=(8, 4, 2, 1), per_scale=1, min_coverage=1.0,
                     max_iou=0.5, margin=2, layout="nested", min_score="median",
                     slide_size=None):
    """Return ``(windows, empty)``.

    ``windows``: dicts with ``scale, gx, gy, score`` (Fraction), ``rank`` and ``inside`` (rank
    of the smallest window that wholly contains it, or None), listed by rank. ``empty``:
    ``{scale: kind}`` with kind in ``{"fit", "coverage", "floor", "constraints"}``.
    """
    # 1. attention map: exact mean score per occupied cell, grid anchored at the level-0 origin
    per_cell = {}
    for a, (x, y) in zip(list(scores), list(coords), strict=True):
        per_cell.setdefault((int(x) // p, int(y) // p), []).append(Fraction(float(a)))
    amap = {cell: sum(v) / len(v) for cell, v in per_cell.items()}
    gx0 = min(c[0] for c in amap)
    gx1 = max(c[0] for c in amap)
    gy0 = min(c[1] for c in amap)
    gy1 = max(c[1] for c in amap)
    if min_score == "median":
        floor = median(list(amap.values()))
    elif min_score == 0:
        floor = None
    else:
        floor = Fraction(float(min_score))
    cov = Fraction(float(min_coverage))

    accepted = []          # (gx, gy, w) of every window accepted so far, any scale
    windows = []
    empty = {}
    for w in sorted(scales, reverse=True):
        # 2. every w x w window inside the bounding box of occupied cells and inside the slide
        positions = 0
        candidates = []
        below = 0
        for gy in range(gy0, gy1 - w + 2):
            for gx in range(gx0, gx1 - w + 2):
                if slide_size is not None and not (
                        gx * p >= 0 and gy * p >= 0 and (gx + w) * p <= slide_size[0]
                        and (gy + w) * p <= slide_size[1]):
                    continue
                positions += 1
                vals = [amap[(cx, cy)] for cy in range(gy, gy + w) for cx in range(gx, gx + w)
                        if (cx, cy) in amap]
                if not vals or Fraction(len(vals), w * w) < cov:
                    continue
                score = sum(vals) / len(vals)
                if floor is not None and score < floor:
                    below += 1
                    continue
                candidates.append((score, gy, gx))
        if positions == 0:
            empty[w] = "fit"
            continue
        if not candidates:
            empty[w] = "floor" if below else "coverage"
            continue
        # 3. descending score (12 significant digits), ties: smaller gy, then smaller gx
        candidates.sort(key=lambda c: (-key12(c[0]), c[1], c[2]))
        kept = 0
        for score, gy, gx in candidates:
            if kept == per_scale:
                break
            if all(ok(gx, gy, w, ax, ay, aw, max_iou, margin, layout)
                   for ax, ay, aw in accepted):
                accepted.append((gx, gy, w))
                windows.append({"scale": w, "gx": gx, "gy": gy, "score": score})
                kept += 1
        if kept == 0:
            empty[w] = "constraints"
    # 6. rank: highest score first (12 digits); ties keep the acceptance order
    order = sorted(range(len(windows)), key=lambda i: (-key12(windows[i]["score"]), i))
    for r, i in enumerate(order, start=1):
        windows[i]["rank"] = r
    for a in windows:
        hosts = [b for b in windows if b is not a and contains(b, a)]
        hosts.sort(key=lambda b: b["scale"])  # stable: the earlier accepted among equal sizes
        a["inside"] = hosts[0]["rank"] if hosts else None
    return [windows[i] for i in order], empty


def contains(b, a):
    """Whether window ``b`` wholly contains the (smaller) window ``a``."""
    return (b["scale"] > a["scale"] and b["gx"] <= a["gx"] and b["gy"] <= a["gy"]
            and a["gx"] + a["scale"] <= b["gx"] + b["scale"]
            and a["gy"] + a["scale"] <= b["gy"] + b["scale"])


def intersection(gx, gy, w, ax, ay, aw):
    ix = max(0, min(gx + w, ax + aw) - max(gx, ax))
    iy = max(0, min(gy + w, ay + aw) - max(gy, ay))
    return ix * iy


def iou(gx, gy, w, ax, ay, aw):
    inter = intersection(gx, gy, w, ax, ay, aw)
    return Fraction(inter, w * w + aw * aw - inter)


def gap(gx, gy, w, ax, ay, aw):
    """Chebyshev edge-to-edge gap in cells (0 when the boxes overlap or touch)."""
    gap_x = max(0, ax - (gx + w), gx - (ax + aw))
    gap_y = max(0, ay - (gy + w), gy - (ay + aw))
    return max(gap_x, gap_y)


def inside(gx, gy, w, ax, ay, aw):
    return ax <= gx and ay <= gy and gx + w <= ax + aw and gy + w <= ay + aw


def ok(gx, gy, w, ax, ay, aw, max_iou, margin, layout):
    if iou(gx, gy, w, ax, ay, aw) > Fraction(float(max_iou)):
        return False
    apart = gap(gx, gy, w, ax, ay, aw) >= Fraction(float(margin))
    if layout == "nested":
        return inside(gx, gy, w, ax, ay, aw) or (
            intersection(gx, gy, w, ax, ay, aw) == 0 and apart)
    return apart
