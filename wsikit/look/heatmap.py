"""Heatmap layers of a slide: one per-patch score each, drawn as tiles of any level-0 box.

A :class:`HeatmapLayer` holds one value per patch (level-0 top-left ``coords``, a square
patch of ``patch_size_l0`` level-0 px) and says what the values are (``source``, ``label``,
``value_range``). :func:`layer_tile` draws any level-0 box of it at any output size as RGBA,
so a viewer tiles a layer exactly as it tiles the slide, and a pyramid of the layer is
:func:`layer_tile` at each level's size. Pure functions: nothing here reads or writes a file
(:mod:`wsikit.look.layer_files` reads layers from a run's outputs and from user files).

How a box is drawn: output pixel ``(i, j)`` stands for the level-0 rectangle
``[x + i·w/W, x + (i+1)·w/W) × [y + j·h/H, y + (j+1)·h/H)``; its value is the mean of the
values of every patch that overlaps that rectangle (NaN values, and pixels no patch
overlaps, are transparent). At full resolution (one level-0 px per output px) this is each
patch's own value inside its square (overlapping patches: their mean); zoomed out it is a box
filter, so a patch smaller than a pixel is never lost. The patches' edges cut a tile into
cells of one value each: values and colours are computed per cell and gathered to the pixels
(the work grows with the patches in the box plus the pixels, never with their product).
Values map to colours linearly over ``value_range`` (clipped); ``threshold`` hides values
below it; ``opacity`` scales alpha.

Examples
--------
>>> import numpy as np
>>> layer = HeatmapLayer("user:demo", np.array([[0, 0], [256, 0]]), np.array([0.0, 1.0]),
...                      256, source="demo.csv", label="demo score",
...                      value_range=(0.0, 1.0))
>>> tile = layer_tile(layer, (0, 0, 512, 256), (4, 2))
>>> tile.shape, tile.dtype.name
((2, 4, 4), 'uint8')
>>> tile[0, 0].tolist(), tile[0, 3].tolist()   # viridis at 0 and at 1
([68, 1, 84, 255], [253, 231, 37, 255])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from .overlay import OverlayError

__all__ = [
    "PALETTES",
    "HeatmapLayer",
    "composite",
    "layer_tile",
    "layer_values",
    "legend_image",
    "legend_svg",
    "robust_range",
]

#: Colour anchors of each palette (evenly spaced, interpolated linearly in RGB). ``viridis``
#: and ``magma`` (perceptually uniform, readable in grey and by colour-blind readers; the
#: matplotlib colour maps by Smith and van der Walt, CC0) sampled at nine points; ``rdylbu``
#: the diverging blue-yellow-red of the report's overview; ``greys`` black to white.
PALETTES: dict[str, np.ndarray] = {
    "viridis": np.array([[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142],
                         [33, 144, 141], [39, 173, 129], [92, 200, 99], [170, 220, 50],
                         [253, 231, 37]], np.float64),
    "magma": np.array([[0, 0, 4], [28, 16, 68], [79, 18, 123], [129, 37, 129],
                       [181, 54, 122], [229, 80, 100], [251, 135, 97], [254, 194, 135],
                       [252, 253, 191]], np.float64),
    "rdylbu": np.array([[49, 54, 149], [69, 117, 180], [116, 173, 209], [171, 217, 233],
                        [254, 224, 144], [253, 174, 97], [244, 109, 67], [215, 48, 39],
                        [165, 0, 38]], np.float64),
    "greys": np.array([[0, 0, 0], [255, 255, 255]], np.float64),
}

#: Most output pixels one :func:`layer_tile` call draws (a 16k × 16k tile); a larger request
#: is refused before anything is allocated.
MAX_TILE_PIXELS = 1 << 28


@dataclass(frozen=True, eq=False)
class HeatmapLayer:
    """One per-patch score layer of a slide.

    Attributes
    ----------
    name : str
        What the layer is called in lists and file names: ``"importance"``, ``"attention"``,
        ``"prompt:<text>"``, ``"user:<file stem>"``.
    coords : ndarray, shape (N, 2), int64
        Level-0 ``(x, y)`` top-left of each patch.
    values : ndarray, shape (N,), float32
        Value of each patch; NaN is "no value" (drawn transparent).
    patch_size_l0 : int
        Level-0 side of one (square) patch.
    source : str
        What produced the values: ``"weight-free importance"``, ``"TITAN attention"``, a tower
        name, a file.
    label : str
        Legend title: the kind of score and its units.
    value_range : (float, float)
        Values mapped to the two ends of the palette (``lo < hi``; see :func:`robust_range`).

    Raises
    ------
    OverlayError
        Arrays of the wrong shape or type, a patch size that is not a positive integer, or a
        value range that is not two finite numbers ``lo < hi``.
    """

    name: str
    coords: np.ndarray
    values: np.ndarray
    patch_size_l0: int
    source: str
    label: str
    value_range: tuple[float, float]
    # rows sorted by y (then x), and their y: the rows a box needs are found by bisection
    _order: np.ndarray = field(init=False, repr=False, compare=False)
    _ys: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        coords = np.asarray(self.coords)
        values = np.asarray(self.values)
        if coords.ndim != 2 or coords.shape[1] != 2 or not (
                np.issubdtype(coords.dtype, np.integer) or coords.size == 0):
            raise OverlayError(f"layer {self.name!r}: coords must be an (N, 2) integer array "
                               f"of level-0 top-left corners, got {coords.dtype} "
                               f"{coords.shape}")
        if values.ndim != 1 or len(values) != len(coords) or not (
                np.issubdtype(values.dtype, np.number) or values.size == 0):
            raise OverlayError(f"layer {self.name!r}: values must be a 1-D numeric array with "
                               f"one value per row of coords ({len(coords)}), got "
                               f"{values.dtype} {values.shape}")
        size = self.patch_size_l0
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or size <= 0:
            raise OverlayError(f"layer {self.name!r}: patch_size_l0 must be a positive "
                               f"integer (level-0 px), got {size!r}")
        lo, hi = _pair(self.value_range, self.name)
        coords = np.ascontiguousarray(coords, np.int64)
        values = np.ascontiguousarray(values, np.float32)
        order = np.lexsort((coords[:, 0], coords[:, 1])) if len(coords) else \
            np.zeros(0, np.int64)
        for key, value in (("coords", coords), ("values", values),
                           ("patch_size_l0", int(size)), ("value_range", (lo, hi)),
                           ("_order", order), ("_ys", coords[order, 1])):
            object.__setattr__(self, key, value)
        coords.flags.writeable = False
        values.flags.writeable = False

    def __len__(self) -> int:
        return int(len(self.coords))

    def bounds(self) -> tuple[int, int, int, int]:
        """Level-0 ``(x, y, width, height)`` covered by the patches (zeros when empty)."""
        if not len(self.coords):
            return (0, 0, 0, 0)
        x0, y0 = (int(v) for v in self.coords.min(axis=0))
        x1, y1 = (int(v) + self.patch_size_l0 for v in self.coords.max(axis=0))
        return (x0, y0, x1 - x0, y1 - y0)

    def describe(self) -> dict[str, Any]:
        """The layer's provenance as JSON-ready values (no arrays)."""
        finite = self.values[np.isfinite(self.values)]
        return {"name": self.name, "source": self.source, "label": self.label,
                "patches": len(self), "with_value": int(finite.size),
                "patch_size_l0": self.patch_size_l0,
                "value_range": [float(v) for v in self.value_range]}


def _pair(value_range: Any, name: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in value_range)
    except (TypeError, ValueError) as exc:
        raise OverlayError(f"layer {name!r}: value_range must be two numbers (lo, hi), got "
                           f"{value_range!r}") from exc
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise OverlayError(f"layer {name!r}: value_range must be finite with lo < hi, got "
                           f"({lo!r}, {hi!r}); use robust_range(values)")
    return lo, hi


def robust_range(values: np.ndarray, *, percentiles: tuple[float, float] = (0.0, 100.0)
                 ) -> tuple[float, float]:
    """A ``value_range`` for ``values``: the given percentiles of the finite values (all of
    them by default), widened to ``lo < hi`` when they are equal, ``(0, 1)`` when none is
    finite.

    Examples
    --------
    >>> robust_range(np.array([0.2, np.nan, 0.8]))
    (0.2, 0.8)
    >>> robust_range(np.array([3.0, 3.0]))
    (2.5, 3.5)
    """
    v = np.asarray(values, np.float64)
    v = v[np.isfinite(v)]
    if not v.size:
        return (0.0, 1.0)
    lo, hi = (float(p) for p in np.percentile(v, percentiles))
    if hi <= lo:
        lo, hi = lo - 0.5, lo + 0.5
    return (lo, hi)


def palette_rgb(t: np.ndarray, palette: str = "viridis") -> np.ndarray:
    """Colours of ``t`` (any shape, clipped to [0, 1]) in ``palette`` (:data:`PALETTES`):
    ``t.shape + (3,)`` uint8.

    Raises
    ------
    OverlayError
        An unknown palette (names the known ones).
    """
    anchors = PALETTES.get(palette)
    if anchors is None:
        raise OverlayError(f"unknown palette {palette!r}; use one of {', '.join(PALETTES)}")
    x = np.clip(np.nan_to_num(np.asarray(t, np.float64), nan=0.0), 0.0, 1.0)
    x = x * (len(anchors) - 1)
    i = np.minimum(np.floor(x).astype(np.int64), len(anchors) - 2)
    f = (x - i)[..., None]
    return np.rint(anchors[i] * (1.0 - f) + anchors[i + 1] * f).astype(np.uint8)


def _check_box(box_l0: Any, out_size: Any) -> tuple[tuple[float, float, float, float],
                                                    tuple[int, int]]:
    try:
        x, y, w, h = (float(v) for v in box_l0)
        ow, oh = (int(v) for v in out_size)
    except (TypeError, ValueError) as exc:
        raise OverlayError(f"layer_tile: box_l0 must be (x, y, width, height) and out_size "
                           f"(width, height), got {box_l0!r} and {out_size!r}") from exc
    if not all(math.isfinite(v) for v in (x, y, w, h)) or w <= 0 or h <= 0:
        raise OverlayError(f"layer_tile: box_l0 {box_l0!r} must be finite with a positive "
                           "width and height")
    if ow <= 0 or oh <= 0 or ow * oh > MAX_TILE_PIXELS:
        raise OverlayError(f"layer_tile: out_size {out_size!r} must be positive and at most "
                           f"{MAX_TILE_PIXELS} pixels; draw a large image tile by tile")
    return (x, y, w, h), (ow, oh)


def _rows_in(layer: HeatmapLayer, box: tuple[float, float, float, float]) -> np.ndarray:
    """Rows of the patches that overlap the level-0 ``box``."""
    x, y, w, h = box
    s = layer.patch_size_l0
    a = int(np.searchsorted(layer._ys, y - s, side="right"))  # ys > y - s
    b = int(np.searchsorted(layer._ys, y + h, side="left"))   # ys < y + h
    rows = layer._order[a:b]
    px = layer.coords[rows, 0]
    return rows[(px > x - s) & (px < x + w)]


def _cells(layer: HeatmapLayer, box_l0: Any, out_size: Any
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(cell values, row cell of each output row, column cell of each output column)``.

    The patches' pixel edges cut the tile into cells of constant value (the mean of the
    patches overlapping the cell; NaN for none): computed on the cells, then gathered to the
    pixels, so the work grows with the patches in the box and the pixels once, never with
    their product.
    """
    box, (ow, oh) = _check_box(box_l0, out_size)
    rows = _rows_in(layer, box)
    vals = layer.values[rows].astype(np.float64)
    keep = np.isfinite(vals)
    rows, vals = rows[keep], vals[keep]
    if not rows.size:
        return (np.full((1, 1), np.nan, np.float32), np.zeros(oh, np.int64),
                np.zeros(ow, np.int64))
    x, y, w, h = box
    s = layer.patch_size_l0
    sx, sy = ow / w, oh / h
    cx = layer.coords[rows, 0].astype(np.float64)
    cy = layer.coords[rows, 1].astype(np.float64)
    # output pixels each patch overlaps: [i0, i1) x [j0, j1), clipped to the tile
    i0 = np.clip(np.floor((cx - x) * sx), 0, ow).astype(np.int64)
    i1 = np.clip(np.ceil((cx + s - x) * sx), 0, ow).astype(np.int64)
    j0 = np.clip(np.floor((cy - y) * sy), 0, oh).astype(np.int64)
    j1 = np.clip(np.ceil((cy + s - y) * sy), 0, oh).astype(np.int64)
    ok = (i1 > i0) & (j1 > j0)
    i0, i1, j0, j1, vals = i0[ok], i1[ok], j0[ok], j1[ok], vals[ok]
    xs = np.unique(np.concatenate([i0, i1, [0, ow]]))  # cell edges along each axis
    ys = np.unique(np.concatenate([j0, j1, [0, oh]]))
    a0, a1 = np.searchsorted(xs, i0), np.searchsorted(xs, i1)
    b0, b1 = np.searchsorted(ys, j0), np.searchsorted(ys, j1)
    # each patch adds its value (and 1) over its cells: four corners of a difference array,
    # summed along both axes
    acc = np.zeros((2, len(ys), len(xs)), np.float64)
    for jj, ii, sign in ((b0, a0, 1.0), (b0, a1, -1.0), (b1, a0, -1.0), (b1, a1, 1.0)):
        np.add.at(acc[0], (jj, ii), sign * vals)
        np.add.at(acc[1], (jj, ii), sign)
    acc = acc.cumsum(axis=1).cumsum(axis=2)[:, :-1, :-1]
    count = np.rint(acc[1])
    cell = np.full(count.shape, np.nan, np.float32)
    hit = count > 0
    cell[hit] = (acc[0][hit] / count[hit]).astype(np.float32)
    col = np.searchsorted(xs, np.arange(ow), side="right") - 1
    row = np.searchsorted(ys, np.arange(oh), side="right") - 1
    return cell, row, col


def layer_values(layer: HeatmapLayer, box_l0: tuple[float, float, float, float],
                 out_size: tuple[int, int]) -> np.ndarray:
    """The value drawn at each output pixel of ``box_l0`` at ``out_size`` (see the module
    docstring): ``(h, w)`` float32, NaN where no patch with a value overlaps the pixel.

    Parameters
    ----------
    layer : HeatmapLayer
    box_l0 : (x, y, width, height)
        Level-0 box to draw (may reach past the slide or the patches).
    out_size : (width, height)
        Output pixels.
    """
    cell, row, col = _cells(layer, box_l0, out_size)
    return spread(cell, row, col)


def layer_tile(layer: HeatmapLayer, box_l0: tuple[float, float, float, float],
               out_size: tuple[int, int], *, palette: str = "viridis",
               threshold: float | None = None, opacity: float = 1.0) -> np.ndarray:
    """Draw the level-0 box ``box_l0`` of ``layer`` at ``out_size``: ``(h, w, 4)`` uint8 RGBA.

    Parameters
    ----------
    layer : HeatmapLayer
    box_l0 : (x, y, width, height)
        Level-0 box (a viewer's tile, a thumbnail's whole slide, a pyramid level's tile).
    out_size : (width, height)
        Output size in pixels (at most :data:`MAX_TILE_PIXELS`).
    palette : str
        One of :data:`PALETTES`.
    threshold : float, optional
        Values below it are transparent (in the layer's units, not the palette's 0–1).
    opacity : float
        Alpha of a drawn pixel, 0–1.

    Returns
    -------
    ndarray, shape (h, w, 4), uint8
        Transparent where no patch has a value (or below ``threshold``).

    Raises
    ------
    OverlayError
        A box or size that is not positive and finite, an unknown palette, an opacity
        outside [0, 1].
    """
    if not (isinstance(opacity, int | float) and 0.0 <= float(opacity) <= 1.0):
        raise OverlayError(f"opacity must be a number in [0, 1], got {opacity!r}")
    if threshold is not None and not (isinstance(threshold, int | float)
                                      and math.isfinite(threshold)):
        raise OverlayError(f"threshold must be a finite number or None, got {threshold!r}")
    if palette not in PALETTES:
        raise OverlayError(f"unknown palette {palette!r}; use one of {', '.join(PALETTES)}")
    colours, row, col = tile_cells(layer, box_l0, out_size, palette=palette,
                                   threshold=threshold, opacity=opacity)
    return spread(colours, row, col)


def spread(cells: np.ndarray, row: np.ndarray, col: np.ndarray) -> np.ndarray:
    """The pixels of ``cells`` (``(ny, nx, ...)``) given the cell of each output row and
    column (both non-decreasing, every cell used): ``cells[row[:, None], col[None, :]]``,
    by repeating rows and columns (contiguous copies, not a gather per pixel)."""
    ny, nx = cells.shape[:2]
    return np.repeat(np.repeat(cells, np.bincount(row, minlength=ny), axis=0),
                     np.bincount(col, minlength=nx), axis=1)


def tile_cells(layer: HeatmapLayer, box_l0: tuple[float, float, float, float],
               out_size: tuple[int, int], *, palette: str = "viridis",
               threshold: float | None = None, opacity: float = 1.0
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`layer_tile` before its last step: ``(colours (ny, nx, 4) uint8 of the cells,
    cell row of each output row (h,), cell column of each output column (w,))``, so that
    ``spread(colours, row, col)`` is the tile. One cell means one colour over the
    whole tile (a writer can reuse its encoded bytes)."""
    cell, row, col = _cells(layer, box_l0, out_size)
    lo, hi = layer.value_range
    shown = np.isfinite(cell)
    if threshold is not None:
        shown &= cell >= threshold
    colours = np.zeros(cell.shape + (4,), np.uint8)  # coloured per cell, then gathered
    colours[..., :3] = palette_rgb((cell - lo) / (hi - lo), palette)
    colours[..., :3][~shown] = 0
    colours[..., 3] = np.where(shown, int(round(255 * float(opacity))), 0)
    return colours, row, col


def composite(base: np.ndarray, layers: Sequence[np.ndarray]) -> np.ndarray:
    """``layers`` (RGBA uint8 of ``base``'s size) laid over ``base`` (RGB or RGBA uint8) in
    order, "over" compositing: ``(h, w, 3)`` uint8 when ``base`` is RGB, else RGBA.

    Raises
    ------
    OverlayError
        A layer of another size than ``base``, or not RGBA uint8.
    """
    base = np.asarray(base)
    if base.dtype != np.uint8 or base.ndim != 3 or base.shape[2] not in (3, 4):
        raise OverlayError(f"composite: base must be (h, w, 3|4) uint8, got {base.dtype} "
                           f"{base.shape}")
    img = Image.fromarray(base if base.shape[2] == 4 else np.dstack(
        [base, np.full(base.shape[:2], 255, np.uint8)]), "RGBA")
    for i, over in enumerate(layers):
        over = np.asarray(over)
        if over.dtype != np.uint8 or over.shape != base.shape[:2] + (4,):
            raise OverlayError(f"composite: layer {i} must be {base.shape[:2] + (4,)} uint8 "
                               f"RGBA, got {over.dtype} {over.shape}")
        img = Image.alpha_composite(img, Image.fromarray(over, "RGBA"))
    out = np.asarray(img)
    return np.ascontiguousarray(out[..., :3]) if base.shape[2] == 3 else out


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    return [lo + (hi - lo) * k / (n - 1) for k in range(n)]


def _fmt(v: float) -> str:
    return f"{v:.3g}" if v else "0"


def _wrap(text: str, width: int) -> list[str]:
    words, lines, cur = text.split(), [], ""
    for word in words:
        if cur and len(cur) + 1 + len(word) > width:
            lines.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}".strip()
    return lines + ([cur] if cur else [])


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1: fixed-size bitmap font
        return ImageFont.load_default()


def legend_image(layer: HeatmapLayer, *, palette: str = "viridis",
                 threshold: float | None = None, width: int = 320) -> np.ndarray:
    """A legend for ``layer``: its label (wrapped), the palette bar over ``value_range`` with
    five ticks, the threshold marked, and the source, on white: ``(h, width, 4)`` uint8.

    Raises
    ------
    OverlayError
        An unknown palette or a width below 120 px.
    """
    if width < 120:
        raise OverlayError(f"legend width must be at least 120 px, got {width}")
    pad, bar_h = 8, 14
    fs = 12
    font = _font(fs)
    chars = max(16, (width - 2 * pad) // 7)
    title = _wrap(layer.label, chars)[:4]
    foot = _wrap(f"source: {layer.source}", chars)[:2]
    line = fs + 4
    h = pad + line * len(title) + 4 + bar_h + 4 + line + 4 + line * len(foot) + pad
    img = Image.new("RGBA", (width, h), (255, 255, 255, 235))
    draw = ImageDraw.Draw(img)
    yy = pad
    for t in title:
        draw.text((pad, yy), t, fill=(20, 20, 20, 255), font=font)
        yy += line
    yy += 4
    bar_w = width - 2 * pad
    bar = palette_rgb(np.linspace(0.0, 1.0, bar_w), palette)
    img.paste(Image.fromarray(np.repeat(bar[None], bar_h, axis=0), "RGB"), (pad, yy))
    lo, hi = layer.value_range
    if threshold is not None and lo < threshold:
        cut = int(round(min(1.0, (threshold - lo) / (hi - lo)) * bar_w))
        draw.rectangle((pad, yy, pad + cut, yy + bar_h), fill=(235, 235, 235, 255))
        draw.line((pad + cut, yy - 2, pad + cut, yy + bar_h + 2), fill=(0, 0, 0, 255), width=2)
    draw.rectangle((pad, yy, pad + bar_w, yy + bar_h), outline=(60, 60, 60, 255))
    yy += bar_h + 4
    for k, v in enumerate(_ticks(lo, hi)):
        label = _fmt(v)
        tw = draw.textlength(label, font=font)
        tx = pad + bar_w * k / 4 - tw / 2
        draw.text((min(max(pad, tx), width - pad - tw), yy), label, fill=(20, 20, 20, 255),
                  font=font)
    yy += line + 4
    for t in foot:
        draw.text((pad, yy), t, fill=(90, 90, 90, 255), font=font)
        yy += line
    return np.asarray(img)


def _esc(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def legend_svg(layer: HeatmapLayer, *, palette: str = "viridis",
               threshold: float | None = None, width: int = 320) -> str:
    """The legend of :func:`legend_image` as a standalone SVG document (text escaped).

    Examples
    --------
    >>> layer = HeatmapLayer("importance", np.zeros((1, 2), np.int64), np.ones(1), 256,
    ...                      source="weight-free importance", label="importance <rank>",
    ...                      value_range=(0.0, 1.0))
    >>> svg = legend_svg(layer)
    >>> svg.startswith("<svg") and "importance &lt;rank&gt;" in svg
    True
    """
    if width < 120:
        raise OverlayError(f"legend width must be at least 120 px, got {width}")
    pad, bar_h, line = 8, 14, 16
    chars = max(16, (width - 2 * pad) // 7)
    title = _wrap(layer.label, chars)[:4]
    foot = _wrap(f"source: {layer.source}", chars)[:2]
    h = pad + line * len(title) + 4 + bar_h + 4 + line + 4 + line * len(foot) + pad
    stops = "".join(
        f'<stop offset="{k / (len(PALETTES[palette]) - 1):.4f}" stop-color="rgb({r},{g},{b})"/>'
        for k, (r, g, b) in enumerate(palette_rgb(np.linspace(
            0, 1, len(PALETTES[palette])), palette).tolist())) if palette in PALETTES else None
    if stops is None:
        raise OverlayError(f"unknown palette {palette!r}; use one of {', '.join(PALETTES)}")
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" '
             f'font-family="sans-serif" font-size="12">',
             f'<defs><linearGradient id="p">{stops}</linearGradient></defs>',
             f'<rect width="{width}" height="{h}" fill="white" fill-opacity="0.92"/>']
    yy = pad
    for t in title:
        parts.append(f'<text x="{pad}" y="{yy + 12}" fill="#141414">{_esc(t)}</text>')
        yy += line
    yy += 4
    bar_w = width - 2 * pad
    parts.append(f'<rect x="{pad}" y="{yy}" width="{bar_w}" height="{bar_h}" fill="url(#p)" '
                 'stroke="#3c3c3c"/>')
    lo, hi = layer.value_range
    if threshold is not None and lo < threshold:
        cut = min(1.0, (threshold - lo) / (hi - lo)) * bar_w
        parts.append(f'<rect x="{pad}" y="{yy}" width="{cut:.1f}" height="{bar_h}" '
                     'fill="#ebebeb"/>')
        parts.append(f'<line x1="{pad + cut:.1f}" y1="{yy - 2}" x2="{pad + cut:.1f}" '
                     f'y2="{yy + bar_h + 2}" stroke="black" stroke-width="2"/>')
    yy += bar_h + 4
    for k, v in enumerate(_ticks(lo, hi)):
        anchor = "start" if k == 0 else "end" if k == 4 else "middle"
        parts.append(f'<text x="{pad + bar_w * k / 4:.1f}" y="{yy + 12}" '
                     f'text-anchor="{anchor}" fill="#141414">{_fmt(v)}</text>')
    yy += line + 4
    for t in foot:
        parts.append(f'<text x="{pad}" y="{yy + 12}" fill="#5a5a5a">{_esc(t)}</text>')
        yy += line
    parts.append("</svg>")
    return "".join(parts)
