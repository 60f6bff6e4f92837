"""Brute-force reference of the multi-scale window selection, written from ARCHITECTURE.md.

Plain Python loops over every cell and every window; it shares no code with
``wsikit.selectors`` and is deliberately slow. Used by the tests and by
``benchmarks/bench_select.py``.
"""

from __future__ import annotations


def reference_select(scores, coords, p, *, scales=(8, 4, 2, 1), per_scale=1, min_coverage=1.0,
                     max_iou=0.5, margin=2, layout="nested"):
    """Return ``(windows, empty)``: windows as ``(scale, gx, gy, score)`` in acceptance order,
    ``empty`` as ``{scale: kind}`` with kind in ``{"fit", "coverage", "constraints"}``."""
    # 1. attention map: mean score per occupied cell, grid anchored at the level-0 origin
    per_cell = {}
    for a, (x, y) in zip(list(scores), list(coords), strict=True):
        per_cell.setdefault((int(x) // p, int(y) // p), []).append(float(a))
    amap = {cell: sum(v) / len(v) for cell, v in per_cell.items()}
    gx0 = min(c[0] for c in amap)
    gx1 = max(c[0] for c in amap)
    gy0 = min(c[1] for c in amap)
    gy1 = max(c[1] for c in amap)

    accepted = []          # (gx, gy, w) of every window accepted so far, any scale
    windows = []
    empty = {}
    for w in sorted(scales, reverse=True):
        # 2. every w x w window inside the bounding box of occupied cells
        positions = 0
        candidates = []
        for gy in range(gy0, gy1 - w + 2):
            for gx in range(gx0, gx1 - w + 2):
                positions += 1
                vals = []
                for cy in range(gy, gy + w):
                    for cx in range(gx, gx + w):
                        if (cx, cy) in amap:
                            vals.append(amap[(cx, cy)])
                if len(vals) / (w * w) >= min_coverage:
                    candidates.append((sum(vals) / len(vals), gy, gx))
        if positions == 0:
            empty[w] = "fit"
            continue
        if not candidates:
            empty[w] = "coverage"
            continue
        # 3. descending score, ties: smaller gy, then smaller gx
        candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
        kept = 0
        for score, gy, gx in candidates:
            if kept == per_scale:
                break
            if all(_ok(gx, gy, w, ax, ay, aw, max_iou, margin, layout)
                   for ax, ay, aw in accepted):
                accepted.append((gx, gy, w))
                windows.append((w, gx, gy, score))
                kept += 1
        if kept == 0:
            empty[w] = "constraints"
    return windows, empty


def iou(gx, gy, w, ax, ay, aw):
    ix = max(0, min(gx + w, ax + aw) - max(gx, ax))
    iy = max(0, min(gy + w, ay + aw) - max(gy, ay))
    inter = ix * iy
    return inter / (w * w + aw * aw - inter)


def distance(gx, gy, w, ax, ay, aw, layout):
    if layout == "nested":      # Chebyshev distance between window centres
        return max(abs((gx + w / 2) - (ax + aw / 2)), abs((gy + w / 2) - (ay + aw / 2)))
    # disjoint: number of cells strictly between the intervals, max over axes
    gap_x = max(0, max(gx, ax) - min(gx + w, ax + aw))
    gap_y = max(0, max(gy, ay) - min(gy + w, ay + aw))
    return max(gap_x, gap_y)


def _ok(gx, gy, w, ax, ay, aw, max_iou, margin, layout):
    return (iou(gx, gy, w, ax, ay, aw) <= max_iou
            and distance(gx, gy, w, ax, ay, aw, layout) >= margin)
