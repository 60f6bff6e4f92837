"""Compound figures: panel boxes from the pixels, and the part of the caption for each panel.

A literature figure is often a grid of sub-images ("(A) gross specimen, (B) H&E ×40,
(C) Ki-67"). Matching a slide region against the whole grid compares it with a mosaic; the
panels are what the region should meet. Two pure functions do the splitting:

* :func:`find_panels` cuts the image along its gutters (rows and columns of background colour,
  white or the figure's own border colour, recursively: an XY cut) and keeps the pieces that
  are panels: pieces holding a picture, large pieces, or small pictures of one size repeated
  (the tiles of a grid of micrographs, and pictures in line with them too pale or small to
  pass alone); labels, legends and axis titles cut off on their own are dropped, and so is a
  piece of text alone however large (labels set at an angle under a chart) and labels with a
  brace set against a micrograph. A plot parted from its tick labels is measured with them;
  strips stacked one under the other (blots, traces) and facets of one plot side by side are
  one panel each. A rule drawn round the whole figure is stepped inside before cutting.
  Photographs edge to edge are cut at their seam (a faint one where the next row's
  photographs meet). Panels are ordered as read (rows top to bottom, left to right) and get
  their letters from text boxes inside them (the PDF text layer, when the caller has it),
  else from the caption's letters, in alphabetical order, when there are as many as panels.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import EvidenceError
from .caption_parts import CaptionParts, panel_caption, split_caption
from .kind_model import decide_figure_kind
from .kinds import (
    FigureKind,
    blot_strips,
    channel_max,
    channel_min,
    classify_figure_kind,
    figure_kind_of_panels,
    picture_blocks,
)

__all__ = [
    "FigureAnalysis",
    "Panel",
    "analyse_figure",
    "find_panels",
]

Box = tuple[int, int, int, int]
_MAX_SIDE = 2400     # pixels analysed along the longer side
_MIN_SIDE_FRAC = 0.08  # a panel spans at least this fraction of the figure's width or height
_MIN_AREA_FRAC = 0.02  # … and this fraction of its area
_GUTTER_FRAC = 0.998   # a gutter row/column is at least this fraction background …
_CROSSED_FRAC = 0.85   # … or, between pictures, this (an arrow or a label crosses it)
_GROUND_FRAC = 0.2     # inside a white margin, a ground colour covers this much of the figure
_LINE_CONTRAST = 24.0  # a rule between panels differs this much from the pictures beside it
_ALIGNED_STEADY = 0.4  # a seam in line with the neighbour's: jumps along this much of it …
_ALIGNED_RATIO = 1.3   # … this many times the typical step between lines
_SOLID = 0.75          # on a ground that is not white, a panel fills this much of its box
#                        (a photograph fills it; a specimen shot on black, a pollen grain, an
#                        ellipse's pi/4 of it; blobs of fluorescence signal much less)
_TILE_AREA = 0.003     # a tile of a grid of micrographs covers this much of the figure …
_TILE_REPEAT = 2       # … when this many pieces of its size (within 10 %) are pictures too
_GLYPH_FRAC = 0.07     # a letter or a word of letters touching (italic, at an angle) is at
_GLYPH_COUNT = 5       # most this much of the figure's side; text has this many of them
_STRIP_RATIO = 3.0     # a strip is this many times wider than high …
_STRIP_ALIGN = 0.02    # … and the strips of a stack end within this much of the width
_MIN_STRIP = 0.12      # … and are this much of it wide at least
_FACET_GAP = 0.01      # facets of one plot stand at most this much of the width apart
_CORE_AREA = 0.008     # a plot parted from its labels covers this much of the figure …
_LABEL_GAP = 0.02      # … and its labels lie this close (of the figure's longer side)
_PLOT_AREA = 0.015     # a plot with its axes drawn covers this much of the figure …
_PLOT_SIDE = 0.08      # … and this much of its width and of its height
_FRAME_FRAC = 0.01     # a frame drawn round a figure is at most this thick (of its side)
_DIM_FILL = 0.9        # a box filled with ink this much …
_DIM_GREY = 70.0       # … this dark on average …
_DIM_CHROMA = 30.0     # … and this little green or magenta holds dim pictures (fluorescence)
_SEAM_ALONE = 1.5      # a faint seam jumps this many times more than any other line
_HEADER = 0.12         # a line of text across a piece's top covers at most this of its height
_HEADER_PICTURE = 0.2  # … and parts two columns below it, one of them this much picture
_RULE_ALONG = 0.9      # a rule between panels keeps its grey level along this much of it


@dataclass(frozen=True)
class Panel:
    """One panel of a compound figure.

    Attributes
    ----------
    box : tuple of int
        ``(x0, y0, x1, y1)`` in pixels of the figure image (x1, y1 exclusive).
    label : str
        The panel's letter (``"A"``, ``"b"``) or, when no letter is known, its 1-based
        position in reading order (``"1"``, ``"2"``).
    lettered : bool
        ``label`` is a letter printed in the figure or named by the caption.
    """

    box: Box
    label: str
    lettered: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"box": list(self.box), "label": self.label, "lettered": self.lettered}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Panel:
        """Inverse of :meth:`to_dict`."""
        box = tuple(int(v) for v in data["box"])
        if len(box) != 4:
            raise EvidenceError(f"panel box {data['box']!r} is not (x0, y0, x1, y1)")
        return cls(box=(box[0], box[1], box[2], box[3]), label=str(data["label"]),
                   lettered=bool(data.get("lettered", False)))


# ---------------------------------------------------------------------- pixels
def _background_mask(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """``(near-white pixels, pixels of the figure's ground colour or None)``: a figure framed
    in another colour (photographs on black) has that colour on its border, or just inside a
    white frame or margin, where it also covers :data:`_GROUND_FRAC` of the figure (a frame
    line does not)."""
    rgb16 = rgb.astype(np.int16)
    mn, mx = channel_min(rgb16), channel_max(rgb16)
    white = (mn >= 232) & (mx - mn <= 30)
    inner = _trim(white, (0, 0, white.shape[1], white.shape[0]))
    framed = inner is not None and inner != (0, 0, white.shape[1], white.shape[0])
    edge = rgb16
    if inner is not None:
        x0, y0, x1, y1 = inner
        edge = rgb16[y0:y1, x0:x1]
    border = np.concatenate([edge[0], edge[-1], edge[:, 0], edge[:, -1]])
    if (channel_min(border) >= 232).mean() >= 0.5:
        return white, None
    colour = np.median(border, axis=0)
    if (channel_max(np.abs(border - colour)) <= 24).mean() < 0.8:
        return white, None
    same = channel_max(np.abs(rgb16 - colour)) <= 24
    if framed and same.mean() < _GROUND_FRAC:
        return white, None
    return white, white | same


def _gaps(profile: np.ndarray, min_gap: int) -> list[tuple[int, int]]:
    """Interior runs ``[start, end)`` of True at least ``min_gap`` long."""
    m = np.concatenate([[0], profile.astype(np.int8), [0]])
    d = np.diff(m)
    starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    n = len(profile)
    return [(int(s), int(e)) for s, e in zip(starts, ends, strict=True)
            if s > 0 and e < n and e - s >= min_gap]


def _trim(bg: np.ndarray, box: Box) -> Box | None:
    """``box`` shrunk to its non-background content (None when it holds none)."""
    x0, y0, x1, y1 = box
    sub = ~bg[y0:y1, x0:x1]
    rows, cols = np.flatnonzero(sub.any(axis=1)), np.flatnonzero(sub.any(axis=0))
    if not len(rows):
        return None
    return (x0 + int(cols[0]), y0 + int(rows[0]), x0 + int(cols[-1]) + 1,
            y0 + int(rows[-1]) + 1)


def _cut(bg: np.ndarray, pic: _PictureMap, box: Box, min_gap: int, depth: int = 0,
         grey: np.ndarray | None = None, chroma: np.ndarray | None = None) -> list[Box]:
    """Recursive XY cut of ``box`` along background gutters.

    A gutter is a run of rows (columns) at least ``min_gap`` long that are background over
    :data:`_GUTTER_FRAC` of the box. Inside a piece that is mostly picture, a gutter may be
    crossed by an arrow or a label (background over :data:`_CROSSED_FRAC`), as long as both
    sides keep a tenth of the piece; pictures parted by a thin rule of one colour are cut along
    it (:func:`_flat_lines`), photographs placed edge to edge along their seam (:func:`_seam`,
    in a grid also where the neighbouring half was cut: :func:`_aligned`).
    """
    trimmed = _trim(bg, box)
    if trimmed is None:
        return []
    inner = _inside_frame(bg, trimmed) if depth == 0 else None
    if inner is not None:  # a rule drawn round the whole figure (a plot's frame is kept)
        return _cut(bg, pic, inner, min_gap, depth + 1, grey, chroma) or [trimmed]
    x0, y0, x1, y1 = trimmed
    H, W = bg.shape
    if depth > 12 or (x1 - x0 < _MIN_SIDE_FRAC * W and y1 - y0 < _MIN_SIDE_FRAC * H):
        return [trimmed]  # too small to hold two panels
    sub = bg[y0:y1, x0:x1]
    pictorial = pic.fraction(trimmed) >= 0.25 or (
        grey is not None and chroma is not None
        and _dim_field(grey[y0:y1, x0:x1], chroma[y0:y1, x0:x1], sub))
    for frac in (_GUTTER_FRAC, _CROSSED_FRAC) if pictorial else (_GUTTER_FRAC,):
        for axis in (0, 1):  # rows first, then columns
            profile = sub.mean(axis=1 - axis) >= frac
            n = len(profile)
            if frac < _GUTTER_FRAC:
                gaps = [g for g in _gaps(profile, max(4, 3 * min_gap, round(0.006 * n)))
                        if g[0] >= 0.1 * n and n - g[1] >= 0.1 * n]
            else:
                gaps = _gaps(profile, min_gap)
            if not gaps:
                continue
            edges = [0] + [g for gap in gaps for g in gap] + [n]
            out: list[Box] = []
            for a, b in zip(edges[::2], edges[1::2], strict=True):
                part = (x0, y0 + a, x1, y0 + b) if axis == 0 else (x0 + a, y0, x0 + b, y1)
                out += _cut(bg, pic, part, min_gap, depth + 1, grey, chroma)
            return out
    parts = _under_header(bg, pic, trimmed, min_gap)
    if parts:  # a line of text along the top crosses the gutter between two pictures' columns
        return [b for part in parts for b in _cut(bg, pic, part, min_gap, depth + 1, grey, chroma)]
    parts = _ruled_parts(grey, pic, trimmed, pictorial) if grey is not None else None
    if parts:  # pictures parted by a thin line of one colour
        return [b for part in parts for b in _cut(bg, pic, part, min_gap, depth + 1, grey, chroma)]
    if pictorial and grey is not None:  # photographs edge to edge: cut along the seam
        seam = _seam(grey, trimmed)
        tone = grey
        if seam is None and chroma is not None:  # a green image beside a magenta one
            seam, tone = _seam(chroma, trimmed), chroma
        if seam is not None:
            axis, at = seam
            halves = ([(x0, y0, x1, y0 + at), (x0, y0 + at, x1, y1)] if axis == 0 else
                      [(x0, y0, x0 + at, y1), (x0 + at, y0, x1, y1)])
            cuts = [_cut(bg, pic, half, min_gap, depth + 1, grey, chroma) for half in halves]
            return [b for pieces in _aligned(tone, cuts, 1 - axis) for b in pieces]
    return [trimmed]


def _under_header(bg: np.ndarray, pic: _PictureMap, box: Box, min_gap: int
                  ) -> list[Box] | None:
    """The columns of ``box`` parted by gutters that are background below its top
    :data:`_HEADER` (a line of text across the top: a header, a preprint's stamp laid over
    the figure), as wide as a crossed gutter, each part a tenth of the box wide at least and
    one of them holding pictures (:data:`_HEADER_PICTURE`): under a header shared by two
    panels, a diagram and micrographs stand apart. A chart's gutters between bars are
    crossed by its axis at the bottom. ``None`` when there are none."""
    x0, y0, x1, y1 = box
    top = y0 + max(1, round(_HEADER * (y1 - y0)))
    n = x1 - x0
    if y1 - top < 40 or n < 40:
        return None
    profile = np.asarray(bg[top:y1, x0:x1].all(axis=0))
    gaps = [g for g in _gaps(profile, max(4, 3 * min_gap, round(0.006 * n)))
            if g[0] >= 0.1 * n and n - g[1] >= 0.1 * n]
    if not gaps:
        return None
    edges = [0] + [g for gap in gaps for g in gap] + [n]
    parts = [(x0 + a, y0, x0 + b, y1) for a, b in zip(edges[::2], edges[1::2], strict=True)]
    if not any(pic.fraction(p) >= _HEADER_PICTURE for p in parts):
        return None
    return parts


def _dim_field(grey: np.ndarray, chroma: np.ndarray, bg: np.ndarray) -> bool:
    """Whether a box (its ``grey`` levels, ``chroma`` and ``bg`` mask) is filled by dim
    pictures: :data:`_DIM_FILL` of it ink, :data:`_DIM_GREY` dark on average, and of little
    colour on average (:data:`_DIM_CHROMA`): fluorescence on a ground that is dark but not
    black, which no block of the picture map counts; not a heatmap's saturated cells."""
    return bool(1 - bg.mean() >= _DIM_FILL and grey.mean() <= _DIM_GREY
                and np.abs(chroma).mean() <= _DIM_CHROMA)


def _inside_frame(bg: np.ndarray, box: Box) -> Box | None:
    """The inside of a frame drawn round ``box``: on each of its four sides a line (at most
    :data:`_FRAME_FRAC` of the side, 2 px at least) that is drawn along 90 % of it, with
    background along most of the line just inside. Specks outside the frame (a few pixels
    of noise along the page edge, within the same :data:`_FRAME_FRAC`) are stepped over.
    ``None`` when there is no frame (a photograph filling its box has no background inside
    its edge)."""
    x0, y0, x1, y1 = box
    sub = ~bg[y0:y1, x0:x1]
    if min(sub.shape) < 40:
        return None
    cuts = []
    for a in (sub, sub[::-1], sub.T, sub.T[::-1]):  # top, bottom, left, right
        drawn = a.mean(axis=1)
        limit = max(2, round(_FRAME_FRAC * a.shape[0]))
        s = 0
        while s < limit and drawn[s] < 0.05:
            s += 1
        t = s
        while t < s + limit and drawn[t] >= 0.9:
            t += 1
        if t == s or t == s + limit or drawn[t] > 0.5:
            return None
        cuts.append(t)
    top, bottom, left, right = cuts
    return (x0 + left, y0 + top, x1 - right, y1 - bottom)


def _ruled_parts(grey: np.ndarray, pic: _PictureMap, box: Box, pictorial: bool
                 ) -> list[Box] | None:
    """The parts of ``box`` between the rules :func:`_flat_lines` finds in it. In a box that
    is not mostly picture (drawings beside photographs, framed together) a rule parts panels
    only when two of its parts or more hold pictures (a tenth of their box): a line crossing
    a chart or a diagram parts no pictures. ``None`` when there is no such rule."""
    if not pictorial and pic.fraction(box) < 0.1:
        return None
    lines = _flat_lines(grey, box, hidden=not pictorial)
    if lines is None:
        return None
    axis, gaps = lines
    x0, y0, x1, y1 = box
    edges = [0] + [g for gap in gaps for g in gap] + [y1 - y0 if axis == 0 else x1 - x0]
    parts = [(x0, y0 + a, x1, y0 + b) if axis == 0 else (x0 + a, y0, x0 + b, y1)
             for a, b in zip(edges[::2], edges[1::2], strict=True)]
    if not pictorial and sum(pic.fraction(p) >= 0.1 for p in parts) < 2:
        return None
    return parts


def _flat_lines(grey: np.ndarray, box: Box, *, hidden: bool = False
                ) -> tuple[int, list[tuple[int, int]]] | None:
    """``(axis, runs)`` of the thin lines of one flat grey level (at most 3 % of the box, 3 px
    at least) that cross the whole of ``box`` between pictures: a dark or grey rule drawn
    between panels. With ``hidden`` (between drawings), a line at its level along
    :data:`_RULE_ALONG` of it (a legend box laid over the rule may hide the rest), at most 1 %
    of the box thick, whose neighbours may be blurred into it; inside pictures only a line
    flat along its whole length, sharp, is a rule (a picture's own edges, an arrow drawn on it
    are not). A line must stand apart from the rows beside it, on both sides: most of
    their pixels :data:`_LINE_CONTRAST` grey levels off its own, or textured along most of
    their length (a picture, not a field of the line's colour): a black row inside a dark
    fluorescence field is no rule. ``None`` when there is none."""
    x0, y0, x1, y1 = box
    sub = grey[y0:y1, x0:x1]
    for axis in (0, 1):
        a = sub if axis == 0 else sub.T
        n = a.shape[0]
        if n < 40:
            continue
        if hidden:
            level = np.median(a, axis=1)
            flat = ((np.abs(a - level[:, None]) <= 12.0).mean(axis=1) >= _RULE_ALONG) & (
                level < 232)  # drawn, not a white gutter
        else:
            level = a.mean(axis=1)
            flat = a.std(axis=1) <= 3.0
        widest = max(3, (0.01 if hidden else 0.03) * n)
        runs = []
        for s, e in _gaps(flat, 1):
            if e - s > widest or s < 0.1 * n or n - e < 0.1 * n:
                continue
            inside = float(np.median(level[s:e]))
            apart = [_stands_apart(a[i], inside) for i in (s - 2, s - 1, e, e + 1)]
            if not hidden:
                if apart[1] and apart[2]:
                    runs.append((s, e))
                continue
            if (apart[0] or apart[1]) and (apart[2] or apart[3]):
                lo, hi = s, e  # up to two pixels blurred into the line go with it
                while lo > s - 2 and abs(level[lo - 1] - level[lo - 2]) > _LINE_CONTRAST:
                    lo -= 1
                while hi < e + 2 and abs(level[hi] - level[hi + 1]) > _LINE_CONTRAST:
                    hi += 1
                runs.append((lo, hi))
        if runs:
            return axis, runs
    return None


def _stands_apart(line: np.ndarray, level: float) -> bool:
    """Whether a row (column) ``line`` beside a rule at grey ``level`` is no part of it."""
    return bool((np.abs(line - level) > _LINE_CONTRAST).mean() >= 0.6
                or (np.abs(np.diff(line)) > 6).mean() >= 0.5)


def _aligned(grey: np.ndarray, cuts: list[list[Box]], axis: int) -> list[list[Box]]:
    """The pieces of two photographs' halves parted by a seam, where a half left whole is
    cut where its neighbour was (along ``axis``: 0 rows, 1 columns) if a weaker seam shows
    there (:data:`_ALIGNED_STEADY` of the line jumps, :data:`_ALIGNED_RATIO` times the
    typical step): panels of a grid line up, and two similar pictures meet with less of a
    jump than two different ones."""
    out = [list(pieces) for pieces in cuts]
    for i, j in ((0, 1), (1, 0)):
        lo = [b[1] if axis == 0 else b[0] for b in out[i]]
        hi = [b[3] if axis == 0 else b[2] for b in out[i]]
        lines = sorted(set(lo) & set(hi))  # where two of its pieces meet edge to edge
        if len(out[j]) != 1 or not lines:
            continue
        x0, y0, x1, y1 = out[j][0]
        first, last = (y0, y1) if axis == 0 else (x0, x1)
        a = grey[y0:y1, x0:x1] if axis == 0 else grey[y0:y1, x0:x1].T
        jump = np.abs(np.diff(a, axis=0))
        typical = float(np.median(jump.mean(axis=1))) + 1e-6
        cut_at = [at for at in lines if first + 0.2 * (last - first) <= at
                  <= first + 0.8 * (last - first)
                  and (jump[at - first - 1] > 25).mean() >= _ALIGNED_STEADY
                  and jump[at - first - 1].mean() >= _ALIGNED_RATIO * typical]
        if cut_at:
            edges = [first, *cut_at, last]
            out[j] = [(x0, a0, x1, a1) if axis == 0 else (a0, y0, a1, y1)
                      for a0, a1 in zip(edges[:-1], edges[1:], strict=True)]
    return out


def _seam(grey: np.ndarray, box: Box) -> tuple[int, int] | None:
    """``(axis, offset)`` of a straight line across the whole of ``box`` where two
    photographs meet without a gutter: along it the grey level jumps in most rows (columns),
    several times more than between neighbouring lines elsewhere; or, between textured
    photographs (two H&E fields of one stain), in nearly half of them (a quarter of each
    quarter of the line: the edge of an inset's outline drawn over part of a picture is no
    seam) and twice as much, when no other line of the box comes within
    :data:`_SEAM_ALONE` of it. Both sides keep a fifth of the box. ``None`` when there is none."""
    x0, y0, x1, y1 = box
    sub = grey[y0:y1, x0:x1]
    best: tuple[float, int, int] | None = None
    for axis in (0, 1):
        a = sub if axis == 0 else sub.T
        n = a.shape[0]
        if n < 40 or a.shape[1] < 20:
            continue
        jump = np.abs(np.diff(a, axis=0))           # (n - 1, m)
        strength = jump.mean(axis=1)
        steady = (jump > 25).mean(axis=1)           # the jump is there along most of the line
        lo, hi = int(0.2 * n), int(0.8 * n)
        if hi <= lo:
            continue
        typical = float(np.median(strength)) + 1e-6
        idx = lo + int(np.argmax(strength[lo:hi]))
        others = np.concatenate([strength[lo:max(lo, idx - 3)], strength[idx + 4:hi]])
        alone = (len(others) > 0 and strength[idx] >= _SEAM_ALONE * float(others.max())
                 and min(q.mean() for q in np.array_split(jump[idx] > 25, 4)) >= 0.25)
        if (steady[idx] >= 0.6 and strength[idx] >= 2.5 * typical) or (
                alone and steady[idx] >= 0.45 and strength[idx] >= 2.0 * typical):
            score = strength[idx] / typical
            if best is None or score > best[0]:
                best = (score, axis, idx + 1)
    return None if best is None else (best[1], best[2])


class _PictureMap:
    """Continuous-tone and flat dark blocks of the whole figure (as :func:`wsikit.evidence.
    kinds.picture_blocks` finds them), with their share in any box from an integral image."""

    def __init__(self, rgb: np.ndarray, side: int = 800) -> None:
        h, w = rgb.shape[:2]
        self.scale = min(1.0, side / max(h, w))
        if self.scale < 1.0:
            from PIL import Image

            rgb = np.asarray(Image.fromarray(rgb).resize(
                (max(1, round(w * self.scale)), max(1, round(h * self.scale))),
                Image.Resampling.BOX))
        self.block = 8
        _, _, dark, picture = picture_blocks(rgb)
        blocks = (picture | dark).astype(np.int64)  # a fluorescence field is dark
        self.sums = np.pad(blocks.cumsum(0).cumsum(1), ((1, 0), (1, 0)))

    def fraction(self, box: Box) -> float:
        """Share of picture blocks among the blocks lying inside ``box``."""
        b = self.block
        x0, y0, x1, y1 = (round(v * self.scale) for v in box)
        bx0, by0 = -(-x0 // b), -(-y0 // b)
        bx1 = min(x1 // b, self.sums.shape[1] - 1)
        by1 = min(y1 // b, self.sums.shape[0] - 1)
        if bx1 <= bx0 or by1 <= by0:
            return 0.0
        s = self.sums
        total = s[by1, bx1] - s[by0, bx1] - s[by1, bx0] + s[by0, bx0]
        return float(total) / ((bx1 - bx0) * (by1 - by0))


def _reading_order(boxes: Sequence[Box]) -> list[int]:
    """Indices of ``boxes`` as read: rows (boxes overlapping vertically by half of the smaller
    height) top to bottom, left to right within a row."""
    order = sorted(range(len(boxes)), key=lambda i: (boxes[i][1], boxes[i][0]))
    rows: list[list[int]] = []
    for i in order:
        x0, y0, x1, y1 = boxes[i]
        for row in rows:
            ry0 = min(boxes[j][1] for j in row)
            ry1 = max(boxes[j][3] for j in row)
            overlap = min(y1, ry1) - max(y0, ry0)
            if overlap >= 0.5 * min(y1 - y0, ry1 - ry0):
                row.append(i)
                break
        else:
            rows.append([i])
    return [i for row in rows for i in sorted(row, key=lambda j: boxes[j][0])]


_LETTER = re.compile(r"^\(?([A-Za-z])\)?[.:]?$")


def _letters_from_text(boxes: Sequence[Box], text_boxes: Sequence[tuple[str, Box]]
                       ) -> list[str | None]:
    """Per panel, the single letter of a text box inside it nearest its top-left corner."""
    out: list[str | None] = []
    for x0, y0, x1, y1 in boxes:
        best, dist = None, None
        for text, (tx0, ty0, tx1, ty1) in text_boxes:
            m = _LETTER.match(text.strip())
            if not m:
                continue
            cx, cy = (tx0 + tx1) / 2, (ty0 + ty1) / 2
            if not (x0 - 4 <= cx <= x1 + 4 and y0 - 4 <= cy <= y1 + 4):
                continue
            d = (cx - x0) ** 2 + (cy - y0) ** 2
            if dist is None or d < dist:
                best, dist = m.group(1), d
        out.append(best)
    return out


def find_panels(image: np.ndarray, *, text_boxes: Sequence[tuple[str, Box]] | None = None,
                letters: Sequence[str] | None = None) -> tuple[Panel, ...]:
    """Panel boxes of a compound figure, in reading order; ``()`` for a single-panel figure.

    Parameters
    ----------
    image : ndarray
        ``(H, W, 3)`` RGB figure pixels.
    text_boxes : sequence of (str, box), optional
        Words of the PDF text layer inside the figure, boxes ``(x0, y0, x1, y1)`` in this
        image's pixels; single letters ("A", "(b)") name the panel they sit in.
    letters : sequence of str, optional
        The panel letters the caption names (:attr:`CaptionParts.letters`); given in
        alphabetical order to the panels in reading order (a caption may describe "(A and
        C) … (B and D)") when there are exactly as many panels and no text box names them.

    Returns
    -------
    tuple of Panel
        At least two panels, or none.

    Raises
    ------
    EvidenceError
        ``image`` is not an RGB image.

    Examples
    --------
    >>> import numpy as np
    >>> fig = np.full((100, 210, 3), 255, np.uint8)
    >>> rng = np.random.default_rng(0)
    >>> fig[5:95, 5:100] = rng.integers(60, 200, (90, 95, 3))    # left micrograph
    >>> fig[5:95, 110:205] = rng.integers(60, 200, (90, 95, 3))  # right micrograph
    >>> [p.box for p in find_panels(fig, letters=["A", "B"])]
    [(5, 5, 100, 95), (110, 5, 205, 95)]
    """
    arr = np.asarray(image)
    if arr.ndim != 3 or arr.shape[2] not in (3, 4) or min(arr.shape[:2]) < 1:
        raise EvidenceError(f"figure image of shape {arr.shape}: expected (H, W, 3) RGB pixels")
    rgb = np.ascontiguousarray(arr[..., :3]).astype(np.uint8, copy=False)
    H, W = rgb.shape[:2]
    scale = min(1.0, _MAX_SIDE / max(H, W))
    small = rgb
    if scale < 1.0:
        from PIL import Image

        small = np.asarray(Image.fromarray(rgb).resize(
            (max(1, round(W * scale)), max(1, round(H * scale))), Image.Resampling.BOX))
    h, w = small.shape[:2]
    kept = _panel_pieces(small)
    if len(kept) < 2:
        return ()
    order = _reading_order(kept)
    boxes = [kept[i] for i in order]
    full = [(min(W, round(x0 / scale)), min(H, round(y0 / scale)), min(W, round(x1 / scale)),
             min(H, round(y1 / scale))) for x0, y0, x1, y1 in boxes]
    named: list[str | None] = (_letters_from_text(full, text_boxes) if text_boxes
                               else [None] * len(full))
    if all(n is None for n in named) and letters and len(letters) == len(full):
        named = [*sorted(letters, key=str.lower)]  # panels are lettered as read
    lettered = len({n for n in named if n}) == len(named)
    return tuple(Panel(box=b, label=(n if lettered and n else str(i + 1)), lettered=lettered)
                 for i, (b, n) in enumerate(zip(full, named, strict=True)))


def _panel_pieces(rgb: np.ndarray) -> list[Box]:
    """The panel-sized pieces of the XY cut, along white gutters first; else, on a figure
    with a ground of its own colour (photographs on black), along gutters of either."""
    h, w = rgb.shape[:2]
    white, ground = _background_mask(rgb)
    min_gap = max(1, round(0.0005 * max(h, w)))
    pic = _PictureMap(rgb)
    rgbf = rgb.astype(np.float32)
    grey = rgbf.mean(axis=2)
    chroma = rgbf[..., 1] - (rgbf[..., 0] + rgbf[..., 2]) / 2
    kept: list[Box] = []
    for bg in (white, ground):
        if bg is None:
            continue
        pieces = _grid_seams(_cut(bg, pic, (0, 0, w, h), min_gap, grey=grey, chroma=chroma),
                             grey, pic)
        tiles = set(_grid_tiles(pieces, bg, pic))
        pieces = _joined_bands(pieces, tiles, pic, w, h)
        kept = [box for box in pieces if box in tiles
                or (_panel_sized(box, pic, w, h) and not _text_only(bg, box, pic, max(w, h)))]
        kept += _row_members([b for b in pieces if b not in kept], kept, pic)
        if any(pic.fraction(b) >= 0.5 for b in kept):
            # beside pictures, small plots and stacks of strips are panels of their own; a
            # figure of graphics alone is a chart or a diagram whatever its facets
            rest = _stacks([b for b in pieces if b not in kept], kept, pic, w, h)
            kept += [b for b in rest if b not in pieces and _panel_sized(b, pic, w, h)]
            kept += _labelled_graphics([b for b in rest if b not in kept], kept, bg, pic)
        if bg is ground and any(1 - bg[y0:y1, x0:x1].mean() < _SOLID
                                for x0, y0, x1, y1 in kept):
            # on a dark (or coloured) ground, panels are photographs that fill their box;
            # blobs of signal scattered over a fluorescence field are one image, not panels
            return []
        if len(kept) >= 2:
            break
    return kept


def _grid_seams(pieces: list[Box], grey: np.ndarray, pic: _PictureMap) -> list[Box]:
    """``pieces`` with each photograph cut where two photographs of another row (column) of
    the grid meet that span it together (ends within 3 % of its length), if a faint seam
    shows there (within 3 px; :func:`_faint_seam`): two photographs set edge to edge in line
    with a cut of their neighbours are two panels even when one of them is textured enough
    to hide the seam from :func:`_seam`."""
    out = list(pieces)
    for axis in (1, 0):  # 1: cut at columns where pieces of other rows meet; 0: at rows
        lo, hi = (0, 2) if axis == 1 else (1, 3)
        across = (1, 3) if axis == 1 else (0, 2)
        photos = [b for b in out if pic.fraction(b) >= 0.5]
        meets = {(a[lo], (a[hi] + b[lo]) // 2, b[hi]) for a in photos for b in photos
                 if 0 <= b[lo] - a[hi] <= 3
                 and min(a[across[1]], b[across[1]]) > max(a[across[0]], b[across[0]])}
        new: list[Box] = []
        for box in out:
            start, end = box[lo], box[hi]
            tol = 0.03 * (end - start)
            cuts = sorted({at for a0, m, b1 in meets if box in photos
                           and abs(a0 - start) <= tol and abs(b1 - end) <= tol
                           and start + 0.2 * (end - start) <= m <= start + 0.8 * (end - start)
                           for at in [_faint_seam(grey, box, axis, m)] if at is not None})
            edges = [start, *cuts, end]
            new += [(a0, box[1], a1, box[3]) if axis == 1 else (box[0], a0, box[2], a1)
                    for a0, a1 in zip(edges[:-1], edges[1:], strict=True)]
        out = new
    return out


def _joined_bands(pieces: list[Box], tiles: set[Box], pic: _PictureMap, w: int, h: int
                  ) -> list[Box]:
    """``pieces`` with pictures cut into bands edge to edge joined again: two pictures (30 %)
    that meet along the whole of a side (ends within 2 px, no gap), of unequal size across
    it (more than 10 % apart), one of them too small to be a panel (:func:`_panel_sized`)
    and no tile of a grid, are one picture cut where the edges of outlines drawn across it
    (regions of interest, in colour) jump like seams: two photographs edge to edge are
    both panels, or tiles of one size."""
    out = list(pieces)
    joined = True
    while joined:
        joined = False
        for a in out:
            for b in out:
                if a is b or not _band_pair(a, b, tiles, pic, w, h):
                    continue
                out = [c for c in out if c is not a and c is not b] + [
                    (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))]
                joined = True
                break
            if joined:
                break
    return out


def _band_pair(a: Box, b: Box, tiles: set[Box], pic: _PictureMap, w: int, h: int) -> bool:
    """Whether ``b`` lies edge to edge below or right of ``a`` as :func:`_joined_bands`
    joins them."""
    if a in tiles or b in tiles or min(pic.fraction(a), pic.fraction(b)) < 0.3:
        return False
    if _panel_sized(a, pic, w, h) and _panel_sized(b, pic, w, h):
        return False
    for lo, hi, s0, s1 in ((0, 2, 1, 3), (1, 3, 0, 2)):  # b below a, then b right of a
        if abs(a[lo] - b[lo]) <= 2 and abs(a[hi] - b[hi]) <= 2 and b[s0] == a[s1]:
            da, db = a[s1] - a[s0], b[s1] - b[s0]
            return abs(da - db) > 0.1 * max(da, db)
    return False


def _row_members(pieces: Sequence[Box], kept: Sequence[Box], pic: _PictureMap) -> list[Box]:
    """The ``pieces`` that are pictures of a row (column) of picture panels in ``kept`` too
    faint or trimmed too small to pass as panels on their own: a fifth picture at least
    (a pale phase-contrast cell, a density plot), overlapping no panel, spanning three
    quarters of the row's height (column's width) and covering half to one and a half times
    the area of two panels of the row at least."""
    def area(b: Box) -> int:
        return (b[2] - b[0]) * (b[3] - b[1])

    strong = [k for k in kept if pic.fraction(k) >= 0.5]
    out: list[Box] = []
    for b in pieces:
        if pic.fraction(b) < 0.2 or any(_overlap(b, k) for k in [*kept, *out]):
            continue
        for lo, hi in ((1, 3), (0, 2)):  # a row, then a column
            mates = [k for k in strong
                     if min(b[hi], k[hi]) - max(b[lo], k[lo]) >= 0.75 * (k[hi] - k[lo])
                     and 0.5 * area(k) <= area(b) <= 1.5 * area(k)]
            if len(mates) >= 2:
                out.append(b)
                break
    return out


def _faint_seam(grey: np.ndarray, box: Box, axis: int, near: int) -> int | None:
    """Where, within 3 px of ``near``, ``box`` holds a seam along ``axis`` (1: a column, 0: a
    row) of photographs edge to edge: the grey level jumps in 45 % of the line at least and
    in a quarter of each quarter of it, twice as much as between lines typically."""
    x0, y0, x1, y1 = box
    a = grey[y0:y1, x0:x1]
    a = a.T if axis == 1 else a
    first = x0 if axis == 1 else y0
    jump = np.abs(np.diff(a, axis=0))
    strength = jump.mean(axis=1)
    typical = float(np.median(strength)) + 1e-6
    lines = range(max(0, near - first - 4), min(len(strength), near - first + 3))
    if not len(lines):
        return None
    i = max(lines, key=lambda k: strength[k])
    steady = jump[i] > 25
    if (steady.mean() >= 0.45 and strength[i] >= 2.0 * typical
            and min(q.mean() for q in np.array_split(steady, 4)) >= 0.25):
        return first + i + 1
    return None


def _grid_tiles(pieces: Sequence[Box], bg: np.ndarray, pic: _PictureMap) -> list[Box]:
    """The pieces too small to be panels on their own that are tiles of a grid of pictures:
    each covers :data:`_TILE_AREA` of the figure, is a picture (30 %, as a panel; white
    lumens of H&E or the halo round a cell may leave background in 60 % of its box),
    is no bar (sides within 1:3: a diagram's bars are no tiles), and :data:`_TILE_REPEAT`
    pieces or more have its size (rows of micrographs, a channel per column, set apart by
    thin gutters; two conditions side by side, sides within 1:1.5 when only two: two
    coloured boxes of a diagram are no grid), two of them full pictures. Pieces are of one size
    when they are, or when their solid parts are (:func:`_solid`): a label touching a
    picture's edge (a subscript reaching down to it) makes its piece taller, not its
    picture."""
    h, w = bg.shape

    def tile(b: Box) -> bool:
        bw, bh = b[2] - b[0], b[3] - b[1]
        return (bw >= 24 and bh >= 24 and bw * bh >= _TILE_AREA * w * h
                and max(bw, bh) <= 3 * min(bw, bh) and pic.fraction(b) >= 0.3
                and 1 - bg[b[1]:b[3], b[0]:b[2]].mean() >= 0.4)

    tiles = [b for b in pieces if tile(b)]
    sizes = [(b[2] - b[0], b[3] - b[1]) for b in tiles]
    cores = [(c[2] - c[0], c[3] - c[1]) for c in (_solid(bg, b) for b in tiles)]
    strong = [pic.fraction(b) >= 0.5 and 1 - bg[b[1]:b[3], b[0]:b[2]].mean() >= 0.7
              for b in tiles]
    out = []
    for b, (bw, bh), (sw, sh) in zip(tiles, sizes, cores, strict=True):
        alike = [(abs(cw - bw) <= 0.1 * bw and abs(ch - bh) <= 0.1 * bh)
                 or (abs(dw - sw) <= 0.1 * sw and abs(dh - sh) <= 0.1 * sh)
                 for (cw, ch), (dw, dh) in zip(sizes, cores, strict=True)]
        pair = sum(alike) < 3 and max(bw, bh) > 1.5 * min(bw, bh)  # two boxes of a diagram
        if sum(alike) >= _TILE_REPEAT and not pair and sum(
                a and s for a, s in zip(alike, strong, strict=True)) >= 2:
            out.append(b)
    return out


def _solid(bg: np.ndarray, box: Box) -> Box:
    """``box`` without the rows and columns along its edges that are ink over less than half
    of it (a label touching a picture, a letter set against its corner)."""
    x0, y0, x1, y1 = box
    ink = ~bg[y0:y1, x0:x1]
    rows, cols = np.flatnonzero(ink.mean(axis=1) >= 0.5), np.flatnonzero(ink.mean(axis=0) >= 0.5)
    if not len(rows) or not len(cols):
        return box
    return (x0 + int(cols[0]), y0 + int(rows[0]), x0 + int(cols[-1]) + 1, y0 + int(rows[-1]) + 1)


def _stacks(pieces: Sequence[Box], kept: Sequence[Box], pic: _PictureMap, w: int,
            h: int) -> list[Box]:
    """``pieces`` with each stack of strips made one piece: strips (at least
    :data:`_STRIP_RATIO` times wider than high) of one width (both ends within
    :data:`_STRIP_ALIGN` of the figure's width, :data:`_MIN_STRIP` of it wide at least: no
    word) set one under the other with little between
    them (traces recorded together, blot strips with one loading control, a karyotype's rows)
    are the parts of one panel, not panels each; so are three or more graphics (no picture)
    of one height side by side, at most :data:`_FACET_GAP` of the width apart (the facets
    of one plot, sharing its axis titles). A stack reaching over a panel in ``kept`` stays
    in its strips."""
    tol = _STRIP_ALIGN * w
    strips = sorted((b for b in pieces if b[2] - b[0] >= max(_STRIP_RATIO * (b[3] - b[1]),
                                                              _MIN_STRIP * w)),
                    key=lambda b: b[1])
    groups: list[list[Box]] = []
    for b in strips:
        for g in groups:
            last = g[-1]
            if (abs(b[0] - last[0]) <= tol and abs(b[2] - last[2]) <= tol
                    and 0 <= b[1] - last[3] <= 2 * (last[3] - last[1])):
                g.append(b)
                break
        else:
            groups.append([b])
    rows: list[list[Box]] = []
    for b in sorted((b for b in pieces if pic.fraction(b) < 0.3
                     and b[3] - b[1] >= _PLOT_SIDE * h), key=lambda b: b[0]):
        for g in rows:
            last = g[-1]
            if (abs(b[1] - last[1]) <= tol and abs(b[3] - last[3]) <= tol
                    and 0 <= b[0] - last[2] <= _FACET_GAP * w):
                g.append(b)
                break
        else:
            rows.append([b])
    groups += [g for g in rows if len(g) >= 3]
    out = list(pieces)
    for g in groups:
        box = (min(b[0] for b in g), min(b[1] for b in g), max(b[2] for b in g),
               max(b[3] for b in g))
        if len(g) >= 2 and not any(_overlap(box, k) for k in kept):
            out = [b for b in out if b not in g] + [box]
    return out


def _labelled_graphics(pieces: Sequence[Box], kept: Sequence[Box], bg: np.ndarray,
                       pic: _PictureMap) -> list[Box]:
    """Plots and drawings too small to be panels on their own once the XY cut has parted
    them from their tick labels, axis titles and legends, measured with them: a graphic piece
    (no picture, no text alone, :data:`_CORE_AREA` of the figure) takes in the small pieces
    beside it (within :data:`_LABEL_GAP` of the figure's side, and within its span across:
    a row of labels shared by two plots joins neither), and is a panel when the whole is
    (:func:`_panel_sized`), or a plot of its own (:func:`_plot_sized`), and still no picture
    (a specimen's stem grown into its leaves is no plot), nor labels and a brace set against
    a picture panel twice its size at least (within 2 px, no picture, half background or
    more: the names of a micrograph's layers). It grows into no other graphic piece nor any
    panel already kept."""
    h, w = bg.shape
    gap = _LABEL_GAP * max(w, h)

    def area(b: Box) -> int:
        return (b[2] - b[0]) * (b[3] - b[1])

    cores = sorted((b for b in pieces if area(b) >= _CORE_AREA * w * h
                    and pic.fraction(b) < 0.3 and not _text_only(bg, b, pic, max(w, h))),
                   key=area, reverse=True)
    small = [b for b in pieces if area(b) < _CORE_AREA * w * h]
    taken: set[Box] = set()
    out: list[Box] = []
    for core in cores:
        box = core
        grew = True
        while grew:
            grew = False
            for s in small:
                if s in taken:
                    continue
                dx = max(0, s[0] - box[2], box[0] - s[2])
                dy = max(0, s[1] - box[3], box[1] - s[3])
                beside = dx <= gap and s[1] >= box[1] - gap and s[3] <= box[3] + gap
                below = dy <= gap and s[0] >= box[0] - gap and s[2] <= box[2] + gap
                if not (beside or below):
                    continue
                grown = (min(box[0], s[0]), min(box[1], s[1]), max(box[2], s[2]),
                         max(box[3], s[3]))
                if any(_overlap(grown, o) for o in [*kept, *out, *cores] if o != core):
                    continue  # the labels of one plot never reach into another
                box = grown
                taken.add(s)
                grew = True
        if pic.fraction(box) >= 0.3:
            continue  # it took in pictures: a specimen's stem, no plot
        sparse = pic.fraction(box) < 0.05 and bg[box[1]:box[3], box[0]:box[2]].mean() >= 0.5
        if sparse and any(pic.fraction(k) >= 0.5 and _abuts(box, k, 2)
                          and 2 * area(box) <= area(k) for k in kept):
            continue  # labels and braces set against a larger picture name its parts
        if (box != core and _panel_sized(box, pic, w, h)) or _plot_sized(box, core, bg):
            out.append(box)
    return out


def _abuts(a: Box, b: Box, gap: int) -> bool:
    """Whether ``a`` and ``b`` face each other along a side at most ``gap`` px apart."""
    across = min(a[3], b[3]) > max(a[1], b[1])
    along = min(a[2], b[2]) > max(a[0], b[0])
    return bool((across and 0 <= max(b[0] - a[2], a[0] - b[2]) <= gap)
                or (along and 0 <= max(b[1] - a[3], a[1] - b[3]) <= gap))


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _text_only(bg: np.ndarray, box: Box, pic: _PictureMap, side: int) -> bool:
    """Whether a piece ``box`` holds only text (tick labels set at an angle under a chart,
    a block of legend or table text): no picture, and its ink falls apart into
    :data:`_GLYPH_COUNT` blobs or more (8-connected), none longer than :data:`_GLYPH_FRAC` of
    the figure's longer side ``side`` nor a third of the piece's longer side. A plot's axes,
    a diagram's outlines or a legend's frame join their ink into one long blob."""
    if pic.fraction(box) >= 0.3:
        return False
    blobs = _blobs(bg, box)
    if len(blobs) < _GLYPH_COUNT:
        return False
    longest = max(max(bh, bw) for bh, bw in blobs)
    return longest <= min(_GLYPH_FRAC * side, max(box[2] - box[0], box[3] - box[1]) / 3)


def _blobs(bg: np.ndarray, box: Box) -> list[tuple[int, int]]:
    """``(height, width)`` of each 8-connected blob of ink (not ``bg``) inside ``box``."""
    from scipy import ndimage

    x0, y0, x1, y1 = box
    labels, _ = ndimage.label(~bg[y0:y1, x0:x1], structure=np.ones((3, 3), bool))
    return [(s[0].stop - s[0].start, s[1].stop - s[1].start)
            for s in ndimage.find_objects(labels) if s is not None]


def _plot_sized(box: Box, core: Box, bg: np.ndarray) -> bool:
    """Whether ``box`` (a graphic piece ``core`` and its labels) is a plot or a framed
    drawing of its own in a figure of many panels: :data:`_PLOT_AREA` of the figure,
    :data:`_PLOT_SIDE` of its width and height, no bar (sides within 1:4: a colour key is no
    plot), and one blob of ink (axes, a frame, an
    outline) spanning most of ``core`` both ways."""
    h, w = bg.shape
    bw, bh = box[2] - box[0], box[3] - box[1]
    if (bw * bh < _PLOT_AREA * w * h or bw < _PLOT_SIDE * w or bh < _PLOT_SIDE * h
            or max(bw, bh) > 4 * min(bw, bh)):
        return False
    cw, ch = core[2] - core[0], core[3] - core[1]
    return any(bh_ >= 0.6 * ch and bw_ >= 0.6 * cw for bh_, bw_ in _blobs(bg, core))


def _panel_sized(box: Box, pic: _PictureMap, w: int, h: int) -> bool:
    """Whether a piece ``box`` of a ``w`` x ``h`` figure is a panel: at least 24 px a side,
    and either pictorial (30 % picture pixels) and not too small, or big on its own."""
    bx0, by0, bx1, by1 = box
    bw, bh = bx1 - bx0, by1 - by0
    if bw < 24 or bh < 24:
        return False
    area = bw * bh / (w * h)
    big = (area >= 0.03 and bw >= 0.12 * w and bh >= 0.12 * h)
    pictorial = pic.fraction(box) >= 0.3
    return bool((pictorial and area >= _MIN_AREA_FRAC
                 and max(bw / w, bh / h) >= _MIN_SIDE_FRAC) or big)


# ---------------------------------------------------------------------- both
@dataclass(frozen=True)
class FigurePanel:
    """One panel of an analysed figure: its box and label, its kind and its caption (the
    shared caption text plus the panel's part)."""

    panel: Panel
    kind: FigureKind
    caption: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {**self.panel.to_dict(), "kind": self.kind.to_dict(), "caption": self.caption}


@dataclass(frozen=True)
class FigureAnalysis:
    """Result of :func:`analyse_figure`: the figure's kind, its panels (none for a
    single-panel figure) and its caption split by panel."""

    kind: FigureKind
    panels: tuple[FigurePanel, ...]
    caption_parts: CaptionParts

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"kind": self.kind.to_dict(), "panels": [p.to_dict() for p in self.panels],
                "caption_parts": self.caption_parts.to_dict()}


def analyse_figure(image: np.ndarray, *, caption: str | None = None,
                   text_boxes: Sequence[tuple[str, Box]] | None = None,
                   kind_model: str | None = None) -> FigureAnalysis:
    """Kind and panels of a figure: the caption split by panel (:func:`split_caption`), the
    panels found (:func:`find_panels`), each panel classified with its caption part, and the
    figure's kind from its panels (:func:`~wsikit.evidence.kinds.figure_kind_of_panels`) or,
    without panels, from the whole image; then decided by the figure-kind model
    ``kind_model`` (:func:`~wsikit.evidence.kind_model.decide_figure_kind`: ``"rule"`` keeps
    that vote, ``"learned"`` weighs what was measured; ``None``: the default model).

    Raises
    ------
    EvidenceError
        ``image`` is not an RGB image.
    """
    parts = split_caption(caption)
    whole = classify_figure_kind(image, caption=caption, text_boxes=text_boxes)
    found = find_panels(image, text_boxes=text_boxes, letters=parts.letters)
    arr = np.asarray(image)
    strips = blot_strips(arr) if found else []
    panels = []
    for p in found:
        x0, y0, x1, y1 = p.box
        text = panel_caption(parts, p.label) if p.lettered else \
            (parts.shared and panel_caption(parts, "")) or caption or ""
        kind = classify_figure_kind(arr[y0:y1, x0:x1], caption=text, allow_mixed=False,
                                    text_boxes=_words_in(text_boxes, p.box))
        if kind.kind != "photograph" and _covered(p.box, strips) >= 0.25:
            kind = FigureKind(kind="photograph", scores=kind.scores, features=kind.features,
                              reason=f"blot strips cover the panel (was: {kind.reason})")
        panels.append(FigurePanel(panel=p, kind=kind, caption=text))
    areas = [(p.box[2] - p.box[0]) * (p.box[3] - p.box[1]) for p in found]
    # blot strips outside every panel (cut away as labels) still show: photograph pieces,
    # counted twice their area (a strip's lane and size labels belong to it, as a chart
    # panel's axis labels belong to the panel)
    loose = [b for b in strips if all(_covered(b, [p.box]) < 0.5 for p in found)]
    extra = [FigureKind(kind="photograph", scores={}, reason="blot strip") for _ in loose]
    kind = figure_kind_of_panels([p.kind for p in panels] + extra, whole=whole,
                                 areas=areas + [2 * _area(b) for b in loose])
    analysis = FigureAnalysis(kind=kind, panels=tuple(panels), caption_parts=parts)
    return decide_figure_kind(analysis, caption=caption, model=kind_model)


def _words_in(text_boxes: Sequence[tuple[str, Box]] | None, box: Box
              ) -> list[tuple[str, Box]]:
    """The words whose centre lies in ``box``, in the box's own pixels."""
    x0, y0, x1, y1 = box
    return [(t, (a0 - x0, b0 - y0, a1 - x0, b1 - y0)) for t, (a0, b0, a1, b1) in text_boxes or ()
            if x0 <= (a0 + a1) / 2 <= x1 and y0 <= (b0 + b1) / 2 <= y1]


def _area(box: Box) -> int:
    return max(0, box[2] - box[0]) * max(0, box[3] - box[1])


def _covered(box: Box, others: Sequence[Box]) -> float:
    """Share of ``box`` covered by ``others`` (assumed not to overlap each other)."""
    x0, y0, x1, y1 = box
    inter = sum(_area((max(x0, a0), max(y0, b0), min(x1, a1), min(y1, b1)))
                for a0, b0, a1, b1 in others if a0 < x1 and a1 > x0 and b0 < y1 and b1 > y0)
    return inter / max(_area(box), 1)
