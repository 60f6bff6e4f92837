"""Weight-free tissue segmentation on a low-resolution thumbnail (about 8 µm/px).

The mask separates stained tissue from the slide's own glass by optical density (OD): the
glass is the brightest, least coloured wide mode of the thumbnail (white *and* grey
backgrounds; a field covered by tissue has none and is measured against a clean-glass white),
and tissue absorbs more than it with a stain's colour (grey matter is not stain). The
thresholds are physical, so pale loose stroma and pale mucin are kept beside dense tumour and
empty slides stay empty. Pen ink (blue, green, black, red) on glass and ink of any colour off
the H&E colours over tissue, dye, dark scanner borders and scanner fill are masked out first
(:func:`ink_regions`); folds, narrow dark bands of folded tissue (:func:`fold_mask`,
:func:`dark_bands`) and debris are found on the tissue and recorded as artefacts. Small
specks and small holes are removed by physical area (µm²), so results do not depend on the
thumbnail scale. Holes that remain are kept as polygon interiors in the GeoJSON.

>>> import numpy as np
>>> thumb = np.full((64, 64, 3), 240, np.uint8)           # white glass ...
>>> thumb[16:48, 16:48] = (180, 90, 160)                  # ... with a stained square
>>> mask = tissue_mask(thumb, mpp=8.0)                   # pure: array in, array out
>>> bool(mask[32, 32]), bool(mask[0, 0])
(True, False)
>>> tm = segment_tissue(slide)    # reads the thumbnail itself  # doctest: +SKIP
>>> tm.write_geojson("out/contours_geojson/slide.geojson")  # doctest: +SKIP
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import ndimage as ndi

from .._atomic import atomic_path, write_json_atomic
from .._hints import keyword, option
from ..errors import TissueError
from .constants import (
    ARTEFACT_CLASSES,
    ARTEFACT_KINDS,
    DEFAULT_MASK_MPP,
    MASK_MAX_PIXELS,
    MIN_HOLE_UM2,
    MIN_TISSUE_UM2,
)
from .stain import ink_classes, ink_excess, ink_mask, red_ink_extent, stain_amounts

if TYPE_CHECKING:
    from ..slide import Slide

__all__ = ["tissue_mask", "ink_regions", "artefact_masks", "fold_mask", "pale_holes",
           "glass_reference",
           "segment_tissue", "tissue_from_thumbnail", "TissueMask",
           "mask_polygons", "mask_shape"]

def _remove_small(mask: np.ndarray, min_px: float) -> np.ndarray:
    """Drop 8-connected True components with fewer than ``min_px`` pixels."""
    if min_px <= 1 or not mask.any():
        return mask
    labels, n = ndi.label(mask, structure=np.ones((3, 3), bool))
    if n == 0:
        return mask
    sizes = np.bincount(labels.ravel())
    keep = sizes >= min_px
    keep[0] = False
    return keep[labels]


def _box_mean(a: np.ndarray, size: int) -> np.ndarray:
    """Mean over a ``size``×``size`` window (edge-replicated) by shifted adds: for the small
    windows used here this is several times faster than a general filter."""
    lo = (size - 1) // 2
    p = np.pad(a, ((lo, size - 1 - lo), (lo, size - 1 - lo)), mode="edge")
    h, w = a.shape
    rows = p[0:h, :].copy()
    for k in range(1, size):
        rows += p[k:k + h, :]
    out = rows[:, 0:w].copy()
    for k in range(1, size):
        out += rows[:, k:k + w]
    out *= 1.0 / (size * size)
    return out


def _disk(radius_px: float) -> np.ndarray:
    r = max(1, int(round(radius_px)))
    yy, xx = np.mgrid[-r:r + 1, -r:r + 1]
    return xx * xx + yy * yy <= r * r


def _dilate(mask: np.ndarray, radius_px: float) -> np.ndarray:
    """``mask`` grown by a disk of ``radius_px`` (exact Euclidean distance, within the
    bounding box of ``mask`` only: as fast for a wide disk as for a narrow one)."""
    if radius_px < 1 or not mask.any():
        return mask.copy()
    r = int(np.ceil(radius_px)) + 1
    rows, cols = np.nonzero(mask.any(axis=1))[0], np.nonzero(mask.any(axis=0))[0]
    y0, y1 = max(0, rows[0] - r), min(mask.shape[0], rows[-1] + r + 1)
    x0, x1 = max(0, cols[0] - r), min(mask.shape[1], cols[-1] + r + 1)
    out = np.zeros(mask.shape, bool)
    out[y0:y1, x0:x1] = ndi.distance_transform_edt(~mask[y0:y1, x0:x1]) <= radius_px
    return out


def _close(mask: np.ndarray, radius_px: float) -> np.ndarray:
    """Morphological closing of ``mask`` by a disk of ``radius_px`` (outside the image is
    background)."""
    if radius_px < 1 or not mask.any():
        return mask.copy()
    grown = _dilate(mask, radius_px)
    pad = int(np.ceil(radius_px)) + 1
    outside = np.pad(~grown, pad, constant_values=True)
    return ~_dilate(outside, radius_px)[pad:-pad, pad:-pad]


def _holes(mask: np.ndarray) -> np.ndarray:
    """Pixels not in ``mask`` that no 4-connected path of such pixels links to the image
    border (what :func:`scipy.ndimage.binary_fill_holes` fills), by one labelling."""
    labels, n = ndi.label(~mask)
    if n == 0:
        return np.zeros(mask.shape, bool)
    border = np.unique(np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]]))
    hole = np.ones(n + 1, bool)
    hole[border] = False
    hole[0] = False
    return hole[labels]


def _hysteresis(seeds: np.ndarray, extent: np.ndarray) -> np.ndarray:
    """The 8-connected pieces of ``seeds | extent`` that hold a seed."""
    if not seeds.any():
        return seeds.copy()
    labels, _ = ndi.label(seeds | extent, structure=np.ones((3, 3), bool))
    keep = np.zeros(int(labels.max()) + 1, bool)
    keep[np.unique(labels[seeds])] = True
    keep[0] = False
    return keep[labels]


def _open(mask: np.ndarray, radius_px: float) -> np.ndarray:
    """Morphological opening by a disk, the image's edge continued (a stroke that runs off the
    image is not eroded there)."""
    if radius_px < 1 or not mask.any():
        return mask.copy()
    pad = int(np.ceil(radius_px)) + 1
    opened = ndi.binary_opening(np.pad(mask, pad, mode="edge"), structure=_disk(radius_px))
    return opened[pad:-pad, pad:-pad]


#: Red over green optical density of fresh red blood cells, the colour of red marker (real
#: TCGA tiles: 0.17-0.22 at B/G 0.76-0.82; a red marker smear over tumour 0.19-0.41 at B/G
#: 0.68-0.82): subtracting this share of the green leaves, of the red OD, mostly what
#: haematoxylin absorbs (its R/G is 0.67-0.92), nearly nothing of blood or of red ink.
RBC_RED_PER_GREEN = 0.19


def _spread(v: np.ndarray) -> float:
    """Robust standard deviation (interquartile range / 1.35)."""
    q25, q75 = np.percentile(v, [25.0, 75.0])
    return float(q75 - q25) / 1.35


def _over_tissue(pieces: np.ndarray, haem: np.ndarray, around: np.ndarray, *, mpp: float,
                 least: float, ring_um: tuple[float, float] = (16.0, 64.0)) -> np.ndarray:
    """The pieces of ``pieces`` that lie *over* tissue rather than in place of it.

    Ink is a layer on the tissue, which stays under it: stains and ink add in optical
    density, so the per-pixel haematoxylin proxy ``haem`` (red OD less the blood's share of
    the green: nuclei hold much of it, stroma some, red ink and blood nearly none) keeps under
    a piece of ink the level and the spread it has in the tissue around it, shifted by what
    the ink's own red share adds or takes (a red marker smear over tumour on a real TCGA
    tile: 0.74-0.77 of the level, 0.73-0.85 of the spread). Haemorrhage of fresh red blood
    cells has red marker's very colour but takes the place of the tissue, nuclei and all:
    the proxy is near 0 and flat in it. A piece is kept when its median or its spread of the
    proxy is at least ``least`` times that of the ``around`` pixels (stained, not ink) in a
    ring ``ring_um`` (µm) around it, or when that ring has too little to compare with (under
    0.01 OD of level or 0.005 of spread: glass, fat)."""
    if not pieces.any():
        return pieces
    labels, n = ndi.label(pieces, structure=np.ones((3, 3), bool))
    inner, outer = (r / mpp for r in ring_um)
    keep = np.zeros(n + 1, bool)
    pad = int(np.ceil(outer)) + 2
    for k, sl in enumerate(ndi.find_objects(labels), start=1):
        if sl is None:
            continue
        y0, x0 = max(0, sl[0].start - pad), max(0, sl[1].start - pad)
        y1 = min(pieces.shape[0], sl[0].stop + pad)
        x1 = min(pieces.shape[1], sl[1].stop + pad)
        piece = labels[y0:y1, x0:x1] == k
        ring = (_dilate(piece, outer) & ~_dilate(piece, inner) & ~pieces[y0:y1, x0:x1]
                & around[y0:y1, x0:x1])
        h = haem[y0:y1, x0:x1]
        if np.count_nonzero(ring) < 8:
            keep[k] = True
            continue
        level, spread = float(np.median(h[ring])), _spread(h[ring])
        keep[k] = (level < 0.01 or spread < 0.005 or float(np.median(h[piece])) >= least * level
                   or _spread(h[piece]) >= least * spread)
    return keep[labels]


def ink_regions(thumb: np.ndarray, *, mpp: float, support_um: float = 24.0,
                vote_margin: float = 0.08, fleck_margin: float = 0.15, fleck_od: float = 0.5,
                fleck_excess: float = 0.09,
                rim_share: float = 0.1, stroke_um: float = 16.0, min_excess: float = 0.02,
                min_under: float = 0.4, close_um: float = 40.0, grow_um: float = 24.0,
                red_core_um: float = 8.0, min_ink_um2: float = 2e3) -> np.ndarray:
    """Regions of pen or marker ink, dye and dark borders on a thumbnail, over glass and over
    tissue.

    A pen or marker stroke is wide (a fine pen draws 0.2-0.5 mm) and one colour along its
    width, so a pixel is ink by the colour of its neighbourhood, not by its own: pixels *vote*
    with their neighbours (optical density averaged over ``support_um``). Three kinds of seed:

    * **blue, green, teal, grey, black** (:func:`wsikit.tissue.stain.ink_mask`, colours no H&E
      mix has) where the neighbourhood has that colour over at least a neighbourhood, extended
      over the connected pixels of that colour (the stroke's own pixels, its thin and faint
      parts); a lone bluish pixel (pale blue-grey mucin, a JPEG's colour noise) away from any
      stroke is outvoted, while a dense pixel far outside every H&E colour (``fleck_margin``,
      ``fleck_od``, ``fleck_excess``: a fleck of margin dye) is ink at any size;
    * **red on glass**: a solid stroke (an opening of radius ``red_core_um`` keeps it) of
      :func:`~wsikit.tissue.stain.ink_mask`'s red, extended over the connected pixels of
      :func:`~wsikit.tissue.stain.red_ink_extent` (its faint, blurred rim);
    * **ink of any colour over tissue**: optical density that no mix of haematoxylin, eosin
      and blood gives (:func:`~wsikit.tissue.stain.ink_excess`), at least ``min_excess`` over
      a stroke's width (an opening of radius ``stroke_um``), extended over the connected
      pixels with half that excess, where it lies *over* tissue (the tissue under ink keeps at
      least ``min_under`` of its haematoxylin; haemorrhage, of red marker's very colour, takes
      the tissue's place): red marker smeared over tumour, which the colour rules cannot see.

    Every stroke then takes in its faint rim (within ``close_um + grow_um``, neighbourhoods with
    at least ``rim_share`` ink-coloured pixels; H&E has under 0.001), is closed over
    ``close_um``, filled, and grown by ``grow_um`` (pen ink lies above the focal plane).

    Parameters
    ----------
    thumb : ndarray, shape (h, w, 3), uint8
    mpp : float
        µm/px of ``thumb``.
    support_um : float
        Width (µm) of the neighbourhood a pixel votes with.
    vote_margin : float
        The ``od_margin`` (:func:`~wsikit.tissue.stain.ink_mask`) a neighbourhood's colour must
        pass (blue-grey mucin 0.04-0.07; blue pen 0.16, green 0.4).
    fleck_margin, fleck_od, fleck_excess : float
        The blue, green or teal rule's ``od_margin``, the summed OD and the OD of red over
        green a single pixel must pass to be ink alone.
    rim_share : float
        Share of ink-coloured pixels in a neighbourhood that makes it part of a stroke's rim.
    stroke_um : float
        Radius (µm) ink over tissue must be solid over.
    min_excess : float
        Least optical density outside the H&E cone of ink over tissue.
    min_under : float
        Least share of the surrounding tissue's haematoxylin (level or spread) that ink over
        tissue has under it.
    close_um, grow_um : float
        Closing radius and growth, in µm.
    red_core_um : float
        Radius (µm) a red stroke on glass must be solid over.
    min_ink_um2 : float
        Connected grey or black under this area (µm²) is a speck (pigment, dust), not ink.

    Returns
    -------
    ndarray, shape (h, w), bool
    """
    thumb = _check_thumb(thumb, mpp)
    od = _smoothed_od(thumb, mpp=mpp, smooth_um=support_um)
    grey, colour, redish = ink_classes(thumb)
    pixel = grey | colour
    ink = _colour_strokes(thumb, od, grey, pixel, mpp=mpp, support_um=support_um,
                          vote_margin=vote_margin, fleck_margin=fleck_margin,
                          fleck_od=fleck_od, fleck_excess=fleck_excess)
    ink |= _red_on_glass(thumb, redish & ~pixel, mpp=mpp, red_core_um=red_core_um)
    ink = _strokes_over_tissue(thumb, od, ink, mpp=mpp, stroke_um=stroke_um,
                               min_excess=min_excess, min_under=min_under)
    ink = _with_rim(ink, pixel, mpp=mpp, support_um=support_um, rim_share=rim_share,
                    reach_um=close_um + grow_um)
    return _finish_strokes(ink, grey, mpp=mpp, min_ink_um2=min_ink_um2, close_um=close_um,
                           grow_um=grow_um)


def _finish_strokes(ink: np.ndarray, grey: np.ndarray, *, mpp: float, min_ink_um2: float,
                    close_um: float, grow_um: float) -> np.ndarray:
    """``ink`` without its grey or black specks, closed and grown (:func:`_close_and_grow`)."""
    if grey.any():   # a grey or black speck is pigment or dust, not a stroke
        ink &= ~(grey & ~_remove_small(grey, min_ink_um2 / (mpp * mpp)))
    if not ink.any():
        return ink
    return _close_and_grow(ink, close_px=close_um / mpp, grow_px=grow_um / mpp)


def _colour_strokes(thumb: np.ndarray, od: list[np.ndarray], grey: np.ndarray,
                    pixel: np.ndarray, *, mpp: float, support_um: float, vote_margin: float,
                    fleck_margin: float, fleck_od: float, fleck_excess: float) -> np.ndarray:
    """The blue, green, teal, grey or black strokes of :func:`ink_regions`, by vote and fleck."""
    # A fleck: a JPEG's colour errors move pale pixels far from H&E in share but by little OD
    # (the darkest wisps of blue-grey mucin, 0.5-0.65 OD, at a sharp edge: red over green by up
    # to 0.083 OD), while the green dye flecks of CMU-1-Small-Region, blurred into the tissue
    # around them at 8 µm/px, keep 0.095-0.5 OD of it.
    size = max(1, int(round(support_um / mpp)))
    if size > 1:   # the neighbourhood's colour, as uint8 RGB for the colour rules
        vote = ink_mask(np.stack([np.clip(np.round(255.0 * 10.0 ** -p), 0, 255) for p in od],
                                 axis=-1).astype(np.uint8), red=False, od_margin=vote_margin)
    else:
        vote = pixel
    # a stroke is at least as wide as the neighbourhood: a pixel or two whose neighbourhood's
    # colour is ink (where pale blue-grey mucin meets bluish glass) are not one; but a pixel
    # far outside every H&E colour (a fleck of margin dye) is ink whatever its size
    seeds = _remove_small(vote, (support_um / mpp) ** 2)
    r, g, b = (_OD[thumb[..., c]] for c in range(3))
    total = r + g + b
    seeds |= ((total > fleck_od) & (r - g > np.maximum(fleck_margin * total, fleck_excess))
              & ~grey)
    return _hysteresis(seeds, pixel)


def _red_on_glass(thumb: np.ndarray, red: np.ndarray, *, mpp: float,
                  red_core_um: float) -> np.ndarray:
    """The solid red strokes of :func:`ink_regions` with their faint rims (all False if none)."""
    if red.any():
        core = ndi.binary_opening(red, structure=_disk(red_core_um / mpp))
        if core.any():
            return _hysteresis(core, red_ink_extent(thumb))
    return np.zeros(red.shape, dtype=bool)


def _strokes_over_tissue(thumb: np.ndarray, od: list[np.ndarray], ink: np.ndarray, *,
                         mpp: float, stroke_um: float, min_excess: float,
                         min_under: float) -> np.ndarray:
    """``ink`` with the strokes of :func:`ink_regions` of any colour over tissue added."""
    # Haemorrhage is not ink over tissue: a clump of bright red blood cells is narrower than a
    # stroke (``stroke_um``), and a pool of them holds no nuclei (``min_under``).
    # the glass's own OD is neutral and small (0.02 a channel): left in, it moves the excess
    # by less than that, towards H&E, and a grey glass brighter than pale stain in one channel
    # (nothing real, but generated slides have it) cannot make stain look like ink
    excess = ink_excess(np.stack(od, axis=-1))
    core = _open(excess >= min_excess, stroke_um / mpp)
    if core.any():
        over = _hysteresis(core, excess >= 0.5 * min_excess)
        joined = _hysteresis(over & ink, over)   # more of a stroke the colour rules found
        alone = over & ~joined
        stained = (od[0] + od[1] + od[2] >= 0.15) & ~ink & ~over
        r, g = _OD[thumb[..., 0]], _OD[thumb[..., 1]]
        haem = r - np.float32(RBC_RED_PER_GREEN) * g
        ink |= joined | _over_tissue(alone, haem, stained, mpp=mpp, least=min_under)
    return ink


def _with_rim(ink: np.ndarray, pixel: np.ndarray, *, mpp: float, support_um: float,
              rim_share: float, reach_um: float) -> np.ndarray:
    """``ink`` with its faint rim: within ``reach_um``, where pixels of ink colour are many."""
    if ink.any():
        near = _dilate(ink, reach_um / mpp)
        size = max(1, int(round(support_um / mpp)))
        if size > 1:
            ink = _hysteresis(ink, near & (_box_mean(pixel.astype(np.float32), size)
                                           >= rim_share))
        ink |= pixel & near
    return ink

def _close_and_grow(ink: np.ndarray, *, close_px: float, grow_px: float) -> np.ndarray:
    """The strokes of :func:`ink_regions` closed over ``close_px`` (one region where a stroke
    thins or crosses tissue), their holes filled, grown by ``grow_px`` (the blurred rim)."""
    # closing by a disk, as distances: a wide disk costs no more than a narrow one
    if close_px >= 1:
        r = max(1, int(round(close_px)))
        pad = r + 1
        grown = _dilate(np.pad(ink, pad), r)
        ink = ~_dilate(~grown, r)[pad:-pad, pad:-pad]
    ink = ndi.binary_fill_holes(ink)
    if grow_px >= 1:
        ink = _dilate(ink, max(1, int(round(grow_px))))
    return ink


#: The glass of a field that has none (a tile covered by tissue): uint8 243 in every channel,
#: an optical density of 0.021 a channel, 95 % of the light through. Clean glass as brightfield
#: scanners white-balance it is about that: 240-243 on the real TCGA tiles, 243-246 on
#: CMU-1-Small-Region, 241-245 on small.svs (``tests/data``); Macenko et al. (2009) take 240 as
#: the transmitted light of their stain normalisation.
WHITE_GLASS = (243.0, 243.0, 243.0)
#: Glass is at most this dark (summed OD, about uint8 195: the grey backgrounds of some
#: scanners) ...
GLASS_MAX_OD = 0.35
#: ... and at most this coloured (OD spread across the channels: mucin, the palest stained
#: matter, has 0.025 and more; glass tinted by a scanner's white balance 0.01 or less).
GLASS_MAX_CHROMA = 0.02
#: Stained matter absorbs at least this summed OD above the glass (smoothed) ...
MIN_STAIN_OD = 0.05
#: ... with at least this OD spread across the channels, and at least :data:`STAIN_CHROMA` of
#: its summed OD: haematoxylin spreads 0.19, eosin 0.37, blood 0.28, while grey matter
#: (dust, mountant, a coverslip's edge, glass darker in one place) spreads almost none.
MIN_STAIN_CHROMA = 0.015
STAIN_CHROMA = 0.12


@dataclass(frozen=True)
class GlassReference:
    """The colour of a thumbnail's glass, which stain optical density is measured against.

    Attributes
    ----------
    rgb : (float, float, float)
        Glass colour (uint8 scale).
    found : bool
        True: the field's own glass (:func:`glass_reference`); False: the field has no
        glass (it is covered by tissue) and :data:`WHITE_GLASS` stands in for it.
    fraction : float
        Fraction of the thumbnail's pixels that are this glass (0 when not found).
    """

    rgb: tuple[float, float, float]
    found: bool
    fraction: float

    @property
    def od(self) -> np.ndarray:
        """Optical density of the glass per channel, ``-log10(rgb / 255)``, shape (3,)."""
        return -np.log10(np.clip(np.asarray(self.rgb, np.float64), 1.0, 255.0) / 255.0)

    def to_dict(self) -> dict[str, Any]:
        return {"rgb": [round(float(v), 2) for v in self.rgb], "found": self.found,
                "fraction": round(float(self.fraction), 4)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GlassReference:
        r, g, b = (float(v) for v in data["rgb"])
        return cls(rgb=(r, g, b), found=bool(data["found"]), fraction=float(data["fraction"]))


def _smoothed_od(thumb: np.ndarray, *, mpp: float, smooth_um: float) -> list[np.ndarray]:
    """Optical density of each channel, box-smoothed over ``smooth_um``."""
    size = max(1, int(round(smooth_um / mpp)))
    out = []
    for c in range(3):
        od = _OD[thumb[..., c]]
        out.append(_box_mean(od, size) if size > 1 else od)
    return out


def _flat(thumb: np.ndarray) -> np.ndarray:
    """Pixels whose 3x3 neighbourhood has exactly one colour (no glass or tissue does)."""
    flat = np.ones(thumb.shape[:2], bool)
    for c in range(3):
        ch = thumb[..., c]
        flat &= ndi.maximum_filter(ch, size=3) == ndi.minimum_filter(ch, size=3)
    return flat


def _glass(od: list[np.ndarray], *, mpp: float, never: np.ndarray, fill: np.ndarray
           ) -> GlassReference:
    """:func:`glass_reference` on smoothed OD planes; ``fill``: scanner fill (glass only when
    there is no other: a slide scanned with its glass clipped to white)."""
    # glass is wide and even: every k-th pixel (at most about a million) finds it as well
    k = max(1, int(math.ceil(math.sqrt(never.size / 1e6))))
    if k > 1:
        od, never, fill, mpp = [p[::k, ::k] for p in od], never[::k, ::k], fill[::k, ::k], mpp * k
    total = od[0] + od[1] + od[2]
    chroma = np.maximum(np.maximum(od[0], od[1]), od[2]) - np.minimum(np.minimum(od[0], od[1]),
                                                                       od[2])
    unstained = (total <= GLASS_MAX_OD) & (chroma <= GLASS_MAX_CHROMA) & ~never
    min_px = MIN_HOLE_UM2 / (mpp * mpp)
    # glass is wide: a lumen, a vacuole of fat or the slide around the specimen, never the
    # scattered pale pixels of stained tissue
    pools = [_remove_small(unstained & ~fill, min_px), _remove_small(unstained & fill, min_px)]
    for pool in pools:
        if np.count_nonzero(pool) < max(min_px, 1):
            continue
        step = 0.005                                # histogram of the summed OD
        counts = np.bincount((total[pool] / step).astype(np.int64)).astype(np.float64)
        hist = np.convolve(np.pad(counts, 2), np.ones(5) / 5, mode="same")[2:-2]
        padded = np.pad(hist, 1)
        peak = ((hist >= padded[:-2]) & (hist >= padded[2:]) & (hist >= 0.25 * hist.max()))
        centre = (np.flatnonzero(peak)[0] + 0.5) * step   # the brightest mode
        near = np.abs(total - centre) <= 4 * step
        sel = pool & near
        if not sel.any():
            continue
        rgb = tuple(float(255.0 * 10.0 ** -np.median(plane[sel])) for plane in od)
        share = np.count_nonzero((pools[0] | pools[1]) & near) / near.size
        return GlassReference(rgb=(rgb[0], rgb[1], rgb[2]), found=True, fraction=float(share))
    return GlassReference(rgb=WHITE_GLASS, found=False, fraction=0.0)


def glass_reference(thumb: np.ndarray, *, mpp: float, excluded: np.ndarray | None = None,
                    smooth_um: float = 16.0) -> GlassReference:
    """The glass of a thumbnail: the brightest, least coloured wide mode of its pixels.

    Glass candidates are pixels at most :data:`GLASS_MAX_OD` dark and :data:`GLASS_MAX_CHROMA`
    coloured (OD, smoothed over ``smooth_um``), in connected regions of at least
    :data:`MIN_HOLE_UM2` (the slide around the specimen, lumens, fat vacuoles: glass under the
    coverslip either way). Their summed OD is histogrammed and the brightest mode holding at
    least a quarter of the largest one is the glass: a grey mountant or a bubble beside it is
    darker, scanner fill (exactly constant colour) is taken only when nothing else is glass.
    A field without such regions (a tile covered by tissue) has no glass of its own:
    :data:`WHITE_GLASS` stands in, and none is invented from pale tissue.

    Parameters
    ----------
    thumb : ndarray, shape (h, w, 3), uint8
    mpp : float
        µm/px of ``thumb``.
    excluded : ndarray, shape (h, w), bool, optional
        Pixels that are never glass (ink regions).
    smooth_um : float
        Box-filter width (µm) applied to the optical density first.

    Returns
    -------
    GlassReference

    >>> import numpy as np
    >>> thumb = np.full((64, 64, 3), 238, np.uint8)
    >>> thumb[16:48, 16:48] = (180, 90, 160)
    >>> glass_reference(thumb, mpp=8.0).found
    True
    >>> glass_reference(thumb[16:48, 16:48], mpp=8.0).found   # all tissue: no glass
    False
    """
    thumb = _check_thumb(thumb, mpp)
    never = np.zeros(thumb.shape[:2], bool) if excluded is None else np.asarray(excluded, bool)
    od = _smoothed_od(thumb, mpp=mpp, smooth_um=smooth_um)
    return _glass(od, mpp=mpp, never=never, fill=_scanner_fill(thumb, _flat(thumb), mpp=mpp))


def _fill(flat: np.ndarray, *, mpp: float) -> np.ndarray:
    """Areas of exactly constant colour of at least :data:`MIN_HOLE_UM2`."""
    return _remove_small(flat, MIN_HOLE_UM2 / (mpp * mpp))


def _scanner_fill(thumb: np.ndarray, flat: np.ndarray, *, mpp: float) -> np.ndarray:
    """Scanner fill: :func:`_fill` of colourless pixels (white, grey or black; never tissue)."""
    r, g, b = (_OD[thumb[..., c]] for c in range(3))
    colourless = (np.maximum(np.maximum(r, g), b) - np.minimum(np.minimum(r, g), b)
                  <= GLASS_MAX_CHROMA)
    return _fill(flat & colourless, mpp=mpp)


@dataclass(frozen=True)
class _Stain:
    """What :func:`_stained` found on a thumbnail."""

    stained: np.ndarray   # stained matter, not ink and not scanner fill
    ink: np.ndarray       # ink regions (never tissue)
    flat: np.ndarray      # pixels of exactly constant colour around them
    fill: np.ndarray      # colourless scanner fill (never tissue)


def _stained(thumb: np.ndarray, *, mpp: float, min_od: float, min_chroma: float,
             remove_ink: bool, smooth_um: float) -> _Stain:
    """Stained pixels: optical density above the slide's glass, with a stain's colour."""
    flat = _flat(thumb)
    fill = _scanner_fill(thumb, flat, mpp=mpp)
    od = _smoothed_od(thumb, mpp=mpp, smooth_um=smooth_um)
    excluded = (ink_regions(thumb, mpp=mpp) if remove_ink
                else np.zeros(thumb.shape[:2], bool))
    glass = _glass(od, mpp=mpp, never=excluded, fill=fill)
    g = glass.od.astype(np.float32)
    d = [plane - g[c] for c, plane in enumerate(od)]
    above = d[0] + d[1] + d[2]
    spread = np.maximum(np.maximum(d[0], d[1]), d[2]) - np.minimum(np.minimum(d[0], d[1]), d[2])
    stained = (above > min_od) & (spread >= min_chroma) & (spread >= STAIN_CHROMA * above)
    return _Stain(stained=stained & ~excluded & ~fill, ink=excluded, flat=flat, fill=fill)


def _check_thumb(thumb: np.ndarray, mpp: float) -> np.ndarray:
    if not isinstance(thumb, np.ndarray) or thumb.ndim != 3 or thumb.shape[2] != 3:
        raise TissueError(f"thumb must be an (h, w, 3) uint8 RGB array, got "
                          f"{getattr(thumb, 'shape', type(thumb))}")
    if not (isinstance(mpp, (int, float)) and math.isfinite(mpp) and mpp > 0):
        raise TissueError(f"mpp={mpp!r} must be the positive µm/px of the thumbnail")
    if thumb.dtype != np.uint8:
        thumb = np.clip(thumb, 0, 255).astype(np.uint8)
    return thumb


def _check_pair(thumb: np.ndarray, tissue: np.ndarray, mpp: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """A checked thumbnail and its tissue mask (bool, of the thumbnail's shape)."""
    thumb = _check_thumb(thumb, mpp)
    tissue = np.asarray(tissue, bool)
    if tissue.shape != thumb.shape[:2]:
        raise TissueError(f"tissue mask {tissue.shape} does not match the thumbnail "
                          f"{thumb.shape[:2]}")
    return thumb, tissue


#: -log10(v / 255), the optical density of each uint8 value (0 counts as 1).
_OD = (-np.log10(np.maximum(np.arange(256, dtype=np.float64), 1.0) / 255.0)).astype(np.float32)


def pale_holes(thumb: np.ndarray, tissue: np.ndarray, *, excluded: np.ndarray | None = None,
               min_od: float = 0.12) -> np.ndarray:
    """Holes of a tissue mask that hold faintly stained matter, not glass: mucin, oedema.

    Mucin is pale blue-grey, nearly as colourless as glass, so where it is palest the stain
    rule of :func:`tissue_mask` may leave a pool of it as a hole in the tissue. A hole (a
    region enclosed by tissue) whose median optical density is at least ``min_od`` above the
    glass's (the median OD of the slide's background) is stained matter: mucin at
    (200, 205, 220) is 0.26, glass about 0.06, the white of a lumen or of fat vacuoles within
    0.05 of glass.

    Parameters
    ----------
    thumb : ndarray, shape (h, w, 3), uint8
        RGB thumbnail.
    tissue : ndarray, shape (h, w), bool
        Its tissue mask.
    excluded : ndarray, shape (h, w), bool, optional
        Pixels that are never tissue (ink regions): not part of any hole.
    min_od : float
        Least summed OD above the glass's.

    Returns
    -------
    ndarray, shape (h, w), bool
        The pixels of those holes.
    """
    tissue = np.asarray(tissue, bool)
    never = np.zeros(tissue.shape, bool) if excluded is None else np.asarray(excluded, bool)
    holes = _holes(tissue | never)
    background = ~(tissue | never | holes)
    if not holes.any() or not background.any():
        return np.zeros(tissue.shape, bool)
    od = _OD[np.asarray(thumb)].sum(axis=-1)
    glass = float(np.median(od[background]))
    labels, n = ndi.label(holes, structure=np.ones((3, 3), bool))
    lab, val = labels[holes], od[holes]
    order = np.lexsort((val, lab))              # by hole, then by OD: each hole's median
    counts = np.bincount(lab, minlength=n + 1)[1:]
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    medians = 0.5 * (val[order][starts + (counts - 1) // 2] + val[order][starts + counts // 2])
    keep = np.concatenate([[False], medians >= glass + min_od])
    return keep[labels]


def _clean(stained: np.ndarray, *, mpp: float, min_tissue_um2: float,
           min_hole_um2: float, thumb: np.ndarray | None = None,
           excluded: np.ndarray | None = None) -> np.ndarray:
    px_area = mpp * mpp
    mask = _remove_small(stained, min_tissue_um2 / px_area)
    if mask.any():
        holes = ~mask
        holes_small = holes & ~_remove_small(holes, min_hole_um2 / px_area)
        mask = mask | holes_small
        if thumb is not None:   # pools of mucin: stained, but hardly coloured
            mask |= pale_holes(thumb, mask, excluded=excluded)
    return mask


def tissue_mask(thumb: np.ndarray, *, mpp: float, min_tissue_um2: float = MIN_TISSUE_UM2,
                min_hole_um2: float = MIN_HOLE_UM2, min_od: float = MIN_STAIN_OD,
                min_chroma: float = MIN_STAIN_CHROMA, remove_ink: bool = True,
                smooth_um: float = 16.0) -> np.ndarray:
    """Boolean tissue mask of an RGB thumbnail (stained tissue, without ink).

    Tissue is measured against the slide's own glass (:func:`glass_reference`; a field
    without glass is measured against :data:`WHITE_GLASS`): a pixel is stained where, in
    optical density smoothed over ``smooth_um``, it absorbs more than ``min_od`` above the
    glass (summed over R, G, B) with a stain's colour, an OD spread across the channels of at
    least ``min_chroma`` and :data:`STAIN_CHROMA` of its summed OD. Grey matter (dust,
    mountant, a bubble, a coverslip's edge) absorbs all channels alike and is not tissue; ink,
    dye, dark borders and scanner fill (exactly constant colour) never are. The thresholds
    are physical, not fitted to the slide, so a field covered by tissue keeps its pale
    stroma, fat and mucin (a per-slide Otsu split of saturation dropped them there).

    Parameters
    ----------
    thumb : ndarray, shape (h, w, 3), uint8
        RGB thumbnail (best at 4–16 µm/px).
    mpp : float
        µm/px of ``thumb``; converts the µm² areas to pixels.
    min_tissue_um2 : float
        Tissue pieces smaller than this area (µm²) are removed.
    min_hole_um2 : float
        Holes smaller than this area (µm²) are filled; larger ones are kept, unless they
        hold faintly stained matter such as mucin (:func:`pale_holes`).
    min_od : float
        Least summed optical density above the glass of stained matter.
    min_chroma : float
        Least OD spread across the channels of stained matter.
    remove_ink : bool
        Mask out pen and marker ink of every colour, dye and dark borders
        (:func:`ink_regions`) before thresholding.
    smooth_um : float
        Width (µm) of the box filter applied to the optical density before thresholding.

    Returns
    -------
    ndarray, shape (h, w), bool
        Folds, debris and other artefacts are not removed here: :func:`artefact_masks` finds
        them and :func:`segment_tissue` removes them.
    """
    thumb = _check_thumb(thumb, mpp)
    found = _stained(thumb, mpp=mpp, min_od=min_od, min_chroma=min_chroma,
                     remove_ink=remove_ink, smooth_um=smooth_um)
    return _clean(found.stained, mpp=mpp, min_tissue_um2=min_tissue_um2,
                  min_hole_um2=min_hole_um2, thumb=thumb,
                  excluded=found.ink | found.fill)


def fold_mask(thumb: np.ndarray, tissue: np.ndarray, *, mpp: float,
              fold_eosin: float = 1.35, fold_haematoxylin: float = 1.35,
              fold_balance: float = 0.8, eosin_dominated: float = 0.5, fold_um: float = 40.0,
              reference_um: float = 400.0, fold_local: float = 1.45,
              baseline_um: float = 2000.0, close_um: float = 64.0,
              min_fold_um2: float = 5e3) -> np.ndarray:
    """Tissue folds: a double layer of tissue, found by its stain amounts.

    Stains add in optical density, so where tissue lies on itself both its haematoxylin and
    its eosin roughly double and their ratio stays that of the tissue around it. That is what
    sets a fold apart from tissue darker in one stain: a dark eosinophilic rim or haemorrhage
    raises eosin far more than haematoxylin (the rim of issue 33, (182, 88, 132), has an H:E
    ratio of 0.17; blood 0.4-0.6; H&E tissue 0.9-1.4 on the real TCGA tiles), dense nuclei
    raise haematoxylin alone. With the stain amounts of :func:`wsikit.tissue.stain.
    stain_amounts`, box-smoothed over ``fold_um``, a pixel is a fold where

    * haematoxylin is at least ``fold_haematoxylin`` and eosin at least ``fold_eosin`` times
      the tissue's medians (both stains raised), and both at least ``fold_local`` times their
      mean over the tissue it lies on (within ``baseline_um``: a tumour among pale stroma is
      its own baseline), and
    * its H:E ratio is within a factor ``fold_balance`` of the ratio of the tissue around it
      (within ``reference_um``, the candidates left out; the slide's where none is near), and
    * it is not eosin-dominated: its H:E ratio is at least ``fold_balance`` times the slide
      tissue's and at least ``eosin_dominated``: never a fold however dark (a rim of 2.5
      times the stain of pale eosinophilic tissue has both stains doubled, haemorrhage 2.4-3
      times the median OD), so a fold of purely eosinophilic tissue (muscle, collagen
      without nuclei) is not flagged: the mask keeps it.

    None lies near dark eosin-dominated pixels (the smoothing mixes blood or a rim with the
    tissue beside it); folds are closed into bands, small pieces dropped. The thresholds but
    ``eosin_dominated`` are relative to the slide's tissue (pale or dark stainings). Measured
    on real tissue (``tests/tissue/test_tissue_folds.py``): dark rims and haemorrhage kept (0 %
    flagged), a two-layer fold of mixed tumour and stroma 72 % flagged (20-43 % on loose
    stroma and dense tumour, where single layers vary almost as much as a fold), a tumour
    tile among pale stroma 10 % (as the old rule).

    Parameters
    ----------
    thumb : ndarray, shape (h, w, 3), uint8
        RGB thumbnail.
    tissue : ndarray, shape (h, w), bool
        Its tissue mask (:func:`tissue_mask`): the statistics are taken over it, and folds
        are found inside it only.
    mpp : float
        µm/px of ``thumb``.
    fold_eosin, fold_haematoxylin : float
        Least rise of each stain over the tissue median.
    fold_balance : float
        How far (as a factor) a fold's H:E ratio may be from the reference tissue's.
    fold_local : float
        Least rise of each stain over its mean within ``baseline_um``.
    eosin_dominated : float
        H:E ratio (in the units of :func:`~wsikit.tissue.stain.stain_amounts`) under which
        a region is eosin-dominated, never a fold.
    fold_um, reference_um, baseline_um, close_um : float
        Smoothing width, the widths of the tissue around whose H:E ratio and stain amounts
        are compared with, and the closing radius, in µm.
    min_fold_um2 : float
        Smallest fold (µm²).

    Returns
    -------
    ndarray, shape (h, w), bool
    """
    stains = _fold_stains(thumb, tissue, mpp=mpp, fold_um=fold_um, fold_balance=fold_balance)
    if stains is None:   # no tissue, or one stain only: no H:E ratio to tell a fold by
        return np.zeros(np.shape(tissue), bool)
    tissue, h0, e0, h, e, h_med, e_med = stains
    fold = tissue & (h >= fold_haematoxylin * h_med) & (e >= fold_eosin * e_med)
    if not fold.any():  # nothing raised in both stains
        return fold
    fold &= _darker_than_around(h, e, tissue, mpp=mpp, baseline_um=baseline_um,
                                fold_local=fold_local)
    ratio_med, ratio = h_med / e_med, h / np.maximum(e, 1e-12)
    fold &= ~_near_dark_eosin(h0, e0, e_med, ratio_med, mpp=mpp, fold_um=fold_um,
                              fold_balance=fold_balance, eosin_dominated=eosin_dominated)
    ref = _reference_ratio(h, e, tissue & ~fold, ratio_med, mpp=mpp, reference_um=reference_um)
    fold &= (ratio >= fold_balance * ref) & (fold_balance * ratio <= ref)
    fold &= (ratio >= fold_balance * ratio_med) & (ratio >= eosin_dominated)
    return _closed_folds(fold, tissue, mpp=mpp, close_um=close_um, min_fold_um2=min_fold_um2)


def _shape(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Length and width (px) of each 8-connected piece of ``mask`` as a uniform bar of the
    same second moments (``sqrt(12 * eigenvalue)``: exact for a straight bar), and its labels."""
    labels, n = ndi.label(mask, structure=np.ones((3, 3), bool))
    if n == 0:
        return np.zeros(0), np.zeros(0), labels
    ys, xs = np.nonzero(labels)
    lab = labels[ys, xs]
    cnt = np.bincount(lab, minlength=n + 1)[1:].astype(np.float64)

    def mean(v: np.ndarray) -> np.ndarray:
        return np.bincount(lab, weights=v, minlength=n + 1)[1:] / cnt

    my, mx = mean(ys.astype(np.float64)), mean(xs.astype(np.float64))
    vyy = mean(ys.astype(np.float64) ** 2) - my ** 2 + 1 / 12   # a pixel is a unit square
    vxx = mean(xs.astype(np.float64) ** 2) - mx ** 2 + 1 / 12
    vxy = mean(ys.astype(np.float64) * xs) - my * mx
    half, root = 0.5 * (vyy + vxx), np.sqrt(0.25 * (vyy - vxx) ** 2 + vxy ** 2)
    return (np.sqrt(12 * (half + root)), np.sqrt(12 * np.maximum(half - root, 1 / 12)),
            labels)


def dark_bands(thumb: np.ndarray, tissue: np.ndarray, *, mpp: float, fine_um: float = 8.0,
               around_um: float = 200.0, band_rise: float = 1.5, slide_rise: float = 1.35,
               fold_balance: float = 0.5, eosin_dominated: float = 0.5,
               min_length_um: float = 300.0, max_width_um: float = 80.0,
               elongation: float = 5.0, close_um: float = 16.0, grow_um: float = 8.0,
               excluded: np.ndarray | None = None) -> np.ndarray:
    """Narrow dark bands across tissue: a crease or a narrow fold, a thick dark pen line.

    A fold a few cell layers wide (tens of µm) is too narrow for :func:`fold_mask`, whose
    smoothing and wide baseline dilute it, yet it holds two or more layers of tissue: both
    stains at least ``band_rise`` times the tissue around it (the mean over ``around_um``, of
    tissue only) and ``slide_rise`` times the slide tissue's median, and not eosin-dominated
    (its H:E ratio at least ``fold_balance`` times the slide's and ``eosin_dominated``: a
    vessel's clot, a dark eosinophilic rim and haemorrhage never are bands), with tissue on
    both sides (at most 15 % of ``around_um`` is glass, the ``excluded`` pixels, e.g. ink,
    counting as covered: a dark edge of the section is its edge, not a band). Its pieces,
    closed over ``close_um`` (one band where it thins or breaks), must be bands: at least
    ``min_length_um`` long, at most ``max_width_um`` wide and ``elongation`` times longer
    than wide (a fold or a crease runs across the section; a nest of dense tumour is a blob,
    the dark cell clusters of loose tumour are shorter and stouter: up to 270 µm at 3 times
    longer than wide on a real tile; a cord of tumour has haematoxylin raised, not eosin).
    Stain amounts are smoothed over ``fine_um`` first; the bands are grown by
    ``grow_um`` within the tissue (their blurred edges). Measured on a real TCGA tile
    (``high-nuclei-score-red-pen-level1``): a fold about 40 µm wide across dense tumour, 93 %
    of it found (the tile alone, 2 µm/px) and 94 % (among other tiles, 8 µm/px).

    Parameters
    ----------
    thumb : ndarray, shape (h, w, 3), uint8
    tissue : ndarray, shape (h, w), bool
        Its tissue mask.
    mpp : float
        µm/px of ``thumb``.
    excluded : ndarray, shape (h, w), bool, optional
        Pixels that are not tissue but cover the glass (ink regions).

    Returns
    -------
    ndarray, shape (h, w), bool
    """
    thumb, tissue = _check_pair(thumb, tissue, mpp)
    none = np.zeros(tissue.shape, bool)
    if not tissue.any():
        return none
    h, e = stain_amounts(thumb)
    fine = max(1, int(round(fine_um / mpp)))
    if fine > 1:
        h, e = _box_mean(h, fine), _box_mean(e, fine)
    h_med, e_med = float(np.median(h[tissue])), float(np.median(e[tissue]))
    if h_med <= 0 or e_med <= 0:
        return none
    band = (tissue & (h >= slide_rise * h_med) & (e >= slide_rise * e_med)
            & (h >= eosin_dominated * e) & (h * e_med >= fold_balance * h_med * e))
    if not band.any():
        return none
    # the tissue around, within the candidates' reach only (they are few)
    size = max(3, int(round(around_um / mpp)) | 1)
    rows, cols = np.nonzero(band.any(axis=1))[0], np.nonzero(band.any(axis=0))[0]
    y0, y1 = max(0, rows[0] - size), min(band.shape[0], rows[-1] + size + 1)
    x0, x1 = max(0, cols[0] - size), min(band.shape[1], cols[-1] + size + 1)
    box = (slice(y0, y1), slice(x0, x1))
    w = tissue[box].astype(np.float32)
    near = ndi.uniform_filter(w, size, mode="reflect")
    h_near = ndi.uniform_filter(h[box] * w, size, mode="reflect") / np.maximum(near, 1e-6)
    e_near = ndi.uniform_filter(e[box] * w, size, mode="reflect") / np.maximum(near, 1e-6)
    if excluded is not None:
        covered = tissue[box] | np.asarray(excluded, bool)[box]
        near = ndi.uniform_filter(covered.astype(np.float32), size, mode="reflect")
    band[box] &= ((near >= 0.85) & (h[box] >= band_rise * h_near)
                  & (e[box] >= band_rise * e_near))
    if not band.any():
        return none
    band = _close(band, close_um / mpp) & tissue   # one band where it thins or breaks
    length, width, labels = _shape(band)
    keep = ((length * mpp >= min_length_um) & (width * mpp <= max_width_um)
            & (length >= elongation * width))
    band = np.concatenate([[False], keep])[labels]
    if not band.any():
        return none
    return _dilate(band, grow_um / mpp) & tissue


def artefact_masks(thumb: np.ndarray, tissue: np.ndarray, *, mpp: float,
                   fold_eosin: float = 1.35, fold_haematoxylin: float = 1.35,
                   min_fold_um2: float = 5e3, fold_um: float = 40.0,
                   min_tissue_um2: float = MIN_TISSUE_UM2, min_od: float = MIN_STAIN_OD,
                   min_chroma: float = MIN_STAIN_CHROMA, smooth_um: float = 16.0
                   ) -> dict[str, np.ndarray]:
    """Artefacts of a thumbnail, by kind (:data:`ARTEFACT_KINDS`), weight-free.

    * ``ink``: pen and marker ink of every colour, dye and dark borders (:func:`ink_regions`);
    * ``fold``: tissue folds (:func:`fold_mask`): a double layer of tissue holds more of both
      stains than the slide's tissue (``fold_eosin`` and ``fold_haematoxylin`` times the
      tissue medians, smoothed over ``fold_um``) with the H:E ratio of the tissue around it;
      dark eosinophilic rims and haemorrhage (eosin-dominated) and dense nuclei
      (haematoxylin alone) are not folds; pieces under ``min_fold_um2`` are ignored; and
      narrow folds and creases, dark bands across the tissue (:func:`dark_bands`);
    * ``debris``: stained fragments too small to be tissue (under ``min_tissue_um2``; what is
      stained: ``min_od``, ``min_chroma`` and ``smooth_um`` as in :func:`tissue_mask`);
    * ``fill``: scanner fill, areas of exactly constant colour (no glass or tissue has that).

    Blur is a property of the pixels of a patch, not of a thumbnail: the weight-free
    importance measures it per patch (:mod:`wsikit.models.nuclear`).

    Parameters
    ----------
    thumb : ndarray, shape (h, w, 3), uint8
    tissue : ndarray, shape (h, w), bool
        The tissue mask of ``thumb`` (:func:`tissue_mask`).
    mpp : float
        µm/px of ``thumb``.

    Returns
    -------
    dict of str to ndarray (h, w) bool
    """
    thumb, tissue = _check_pair(thumb, tissue, mpp)
    found = _stained(thumb, mpp=mpp, min_od=min_od, min_chroma=min_chroma, remove_ink=True,
                     smooth_um=smooth_um)
    return _artefacts(thumb, tissue, found, mpp=mpp, fold_eosin=fold_eosin,
                      fold_haematoxylin=fold_haematoxylin, min_fold_um2=min_fold_um2,
                      fold_um=fold_um, min_tissue_um2=min_tissue_um2)


def _artefacts(thumb: np.ndarray, tissue: np.ndarray, found: _Stain, *,
               mpp: float, fold_eosin: float = 1.35, fold_haematoxylin: float = 1.35,
               min_fold_um2: float = 5e3, fold_um: float = 40.0,
               min_tissue_um2: float = MIN_TISSUE_UM2) -> dict[str, np.ndarray]:
    """:func:`artefact_masks` from the stained pixels, ink and flat regions already found."""
    px_area = mpp * mpp
    fold = fold_mask(thumb, tissue, mpp=mpp, fold_eosin=fold_eosin,
                     fold_haematoxylin=fold_haematoxylin, fold_um=fold_um,
                     min_fold_um2=min_fold_um2) | dark_bands(thumb, tissue, mpp=mpp,
                                                           excluded=found.ink)
    stained = found.stained
    debris = stained & ~tissue & ~_remove_small(stained, min_tissue_um2 / px_area)
    fill = _fill(found.flat & ~tissue, mpp=mpp)
    return {"ink": found.ink, "fold": fold, "debris": debris, "fill": fill}


def _ring_area(ring: np.ndarray) -> float:
    x, y = ring[:, 0], ring[:, 1]
    return 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y))


def _fold_stains(thumb: np.ndarray, tissue: np.ndarray, *, mpp: float, fold_um: float,
                 fold_balance: float
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float,
                            float] | None:
    """The inputs of :func:`fold_mask`, checked: ``(tissue, h0, e0, h, e, h_med, e_med)``,
    the stain amounts as measured and box-smoothed over ``fold_um`` and their medians over
    the tissue; ``None`` without tissue or without one of the stains."""
    thumb, tissue = _check_pair(thumb, tissue, mpp)
    if not 0 < fold_balance <= 1:
        raise TissueError(f"fold_balance={fold_balance!r} must be in (0, 1], e.g. 0.8")
    if not tissue.any():
        return None
    size = max(1, int(round(fold_um / mpp)))
    h0, e0 = stain_amounts(thumb)
    h, e = (_box_mean(h0, size), _box_mean(e0, size)) if size > 1 else (h0, e0)
    h_med, e_med = float(np.median(h[tissue])), float(np.median(e[tissue]))
    if h_med <= 0 or e_med <= 0:
        return None
    return tissue, h0, e0, h, e, h_med, e_med


def _darker_than_around(h: np.ndarray, e: np.ndarray, tissue: np.ndarray, *, mpp: float,
                        baseline_um: float, fold_local: float) -> np.ndarray:
    """Where both stains are at least ``fold_local`` times their mean over the tissue within
    ``baseline_um`` (a band of fold covers little of that area), so a dense region as wide
    as it (a tumour among pale stroma, darker than the slide's median) is its own baseline,
    not a fold."""
    w = tissue.astype(np.float32)
    base_size = max(3, int(round(baseline_um / mpp)) | 1)
    base = ndi.uniform_filter(w, base_size, mode="constant")
    base_h = ndi.uniform_filter(h * w, base_size, mode="constant")
    base_e = ndi.uniform_filter(e * w, base_size, mode="constant")
    return (h * base >= fold_local * base_h) & (e * base >= fold_local * base_e)


def _near_dark_eosin(h0: np.ndarray, e0: np.ndarray, e_med: float, ratio_med: float, *,
                     mpp: float, fold_um: float, fold_balance: float,
                     eosin_dominated: float) -> np.ndarray:
    """Within ``fold_um / 2`` of dark eosin-dominated matter (blood, a dark rim: eosin at
    least 3 times the tissue median, H:E ratio under ``fold_balance`` times the tissue's or
    under ``eosin_dominated``, at a third of the smoothing width): there the smoothed
    amounts mix it with the tissue beside it (a fold holds about twice the eosin)."""
    size = max(1, int(round(fold_um / mpp)))
    fine = max(1, int(round(fold_um / (3 * mpp))))
    hf, ef = (_box_mean(h0, fine), _box_mean(e0, fine)) if fine > 1 else (h0, e0)
    dark_eosin = (ef >= 3.0 * e_med) & (
        (hf < fold_balance * ratio_med * ef) | (hf < eosin_dominated * ef))
    if dark_eosin.any():
        return _dilate(dark_eosin, size / 2)
    return np.zeros(dark_eosin.shape, bool)


def _reference_ratio(h: np.ndarray, e: np.ndarray, ref_tissue: np.ndarray, ratio_med: float, *,
                     mpp: float, reference_um: float) -> np.ndarray:
    """The H:E ratio of the tissue around each pixel within ``reference_um``, as a ratio of
    sums over ``ref_tissue`` (the fold candidates left out: a wide fold or rim would be its
    own reference); the slide's (``ratio_med``) where no such tissue is near."""
    ref = ref_tissue.astype(np.float32)
    ref_size = max(3, int(round(reference_um / mpp)) | 1)
    near = ndi.uniform_filter(ref, ref_size, mode="nearest")
    near_h = ndi.uniform_filter(h * ref, ref_size, mode="nearest")
    near_e = ndi.uniform_filter(e * ref, ref_size, mode="nearest")
    return np.where((near > 0.05) & (near_h > 0) & (near_e > 0),
                    near_h / np.maximum(near_e, 1e-12), ratio_med)


def _closed_folds(fold: np.ndarray, tissue: np.ndarray, *, mpp: float, close_um: float,
                  min_fold_um2: float) -> np.ndarray:
    """The fold pixels closed over ``close_um`` within the tissue (a fold is one band; holes
    under ``min_fold_um2`` filled, never what it rings), pieces under ``min_fold_um2``
    dropped."""
    close = close_um / mpp
    if close >= 1 and fold.any():
        fold = _close(fold, close)
        holes = _holes(fold)   # small gaps only: never what it rings
        fold = (fold | (holes & ~_remove_small(holes, min_fold_um2 / (mpp * mpp)))) & tissue
    return _remove_small(fold, min_fold_um2 / (mpp * mpp))


def mask_polygons(mask: np.ndarray, *, scale: tuple[float, float] = (1.0, 1.0),
                  tolerance: float = 0.75) -> list[list[np.ndarray]]:
    """Polygons (exterior + holes) of the 8-connected components of ``mask``.

    Parameters
    ----------
    mask : ndarray, shape (h, w), bool
    scale : (sx, sy)
        Output units per mask pixel (level-0 px per mask px).
    tolerance : float
        Douglas–Peucker tolerance in mask pixels.

    Returns
    -------
    list of polygons; each is ``[exterior, hole, …]`` with rings ``(K, 2)`` float ``(x, y)``,
    closed (first vertex repeated), exterior counter-clockwise and holes clockwise in
    ``(x, y)`` with y pointing down as in images.
    """
    from skimage.measure import approximate_polygon, find_contours

    labels, n = ndi.label(mask, structure=np.ones((3, 3), bool))
    polygons: list[list[np.ndarray]] = []
    for k, sl in enumerate(ndi.find_objects(labels), start=1):
        if sl is None:
            continue
        crop = np.pad(labels[sl] == k, 1).astype(np.float32)
        rings = []
        for c in find_contours(crop, 0.5, fully_connected="high"):
            if len(c) < 4:
                continue
            c = approximate_polygon(c, tolerance=tolerance)
            if len(c) < 4:
                continue
            # (row, col) in the padded crop -> mask index -> level-0 edge coordinates
            x = (c[:, 1] - 1 + sl[1].start + 0.5) * scale[0]
            y = (c[:, 0] - 1 + sl[0].start + 0.5) * scale[1]
            ring = np.stack([x, y], axis=1)
            if not np.array_equal(ring[0], ring[-1]):
                ring = np.vstack([ring, ring[:1]])
            rings.append(ring)
        if not rings:
            continue
        areas = [abs(_ring_area(r)) for r in rings]
        outer = int(np.argmax(areas))
        ext = rings[outer]
        if _ring_area(ext) < 0:
            ext = ext[::-1]
        holes = [r if _ring_area(r) < 0 else r[::-1] for i, r in enumerate(rings) if i != outer]
        polygons.append([ext, *holes])
    return polygons


@dataclass(frozen=True, eq=False)
class TissueMask:
    """A tissue mask over a whole slide.

    Attributes
    ----------
    mask : ndarray, shape (h, w), bool
        True where there is tissue; covers the whole level-0 image.
    mpp : float
        Nominal µm/px of the mask.
    downsample : float
        Nominal level-0 px per mask px (the exact per-axis values are :attr:`scale`).
    level0_size : (int, int)
        Slide level-0 ``(width, height)``.
    slide_mpp : float
        Slide level-0 µm/px.
    slide_name : str
    artefacts : mapping of str to ndarray (h, w) bool
        What :func:`artefact_masks` found, by kind (:data:`ARTEFACT_KINDS`), on the grid of
        ``mask``; already removed from ``mask``, kept to show and to edit. Empty for a mask
        drawn by hand.
    """

    mask: np.ndarray
    mpp: float
    downsample: float
    level0_size: tuple[int, int]
    slide_mpp: float
    slide_name: str = ""
    artefacts: Mapping[str, np.ndarray] = field(default_factory=dict)

    @property
    def scale(self) -> tuple[float, float]:
        """Exact level-0 px per mask px along x and y."""
        h, w = self.mask.shape
        return self.level0_size[0] / w, self.level0_size[1] / h

    @property
    def tissue_fraction(self) -> float:
        """Fraction of the slide area covered by tissue."""
        return float(self.mask.mean()) if self.mask.size else 0.0

    @property
    def tissue_area_um2(self) -> float:
        """Tissue area in µm²."""
        sx, sy = self.scale
        return float(self.mask.sum()) * sx * sy * self.slide_mpp ** 2

    def polygons(self, *, tolerance: float = 0.75) -> list[list[np.ndarray]]:
        """Polygons in level-0 px (see :func:`mask_polygons`)."""
        return mask_polygons(self.mask, scale=self.scale, tolerance=tolerance)

    def to_geojson(self, *, tolerance: float = 0.75) -> dict[str, Any]:
        """GeoJSON FeatureCollection of Polygons in level-0 px (holes as interiors).

        One Feature per tissue piece, classified "Tissue" so QuPath imports it as an
        annotation (File › Import objects).
        """
        features = []
        for i, rings in enumerate(self.polygons(tolerance=tolerance)):
            features.append({
                "type": "Feature",
                "id": f"tissue-{i}",
                "geometry": {"type": "Polygon",
                             "coordinates": [np.round(r, 2).tolist() for r in rings]},
                "properties": {"objectType": "annotation", "name": f"tissue {i}",
                               "classification": {"name": "Tissue", "color": [0, 160, 0]},
                               "holes": len(rings) - 1},
            })
        return {"type": "FeatureCollection", "features": features,
                "properties": {"slide": self.slide_name, "units": "level-0 pixels",
                               "level0_width": self.level0_size[0],
                               "level0_height": self.level0_size[1],
                               "mpp": self.slide_mpp, "mask_mpp": self.mpp}}

    def write_geojson(self, path: str | os.PathLike[str]) -> Path:
        """Write :meth:`to_geojson` atomically; returns the path."""
        return write_json_atomic(path, self.to_geojson(), indent=None)

    def write_png(self, path: str | os.PathLike[str]) -> Path:
        """Write the mask as an 8-bit PNG (255 tissue, 0 background) atomically."""
        from PIL import Image

        path = Path(path)
        with atomic_path(path) as tmp:
            Image.fromarray(self.mask.astype(np.uint8) * 255).save(tmp, format="PNG")
        return path

    def artefact_fractions(self) -> dict[str, float]:
        """Fraction of the slide area each artefact kind covers."""
        return {k: float(np.asarray(v).mean()) for k, v in self.artefacts.items()}

    def artefacts_geojson(self, *, tolerance: float = 0.75) -> dict[str, Any]:
        """The artefacts as a GeoJSON FeatureCollection of QuPath annotations (level-0 px),
        one classification per kind ("Ink or dye", "Tissue fold", "Debris", "Scanner fill")."""
        features = []
        for kind in ARTEFACT_KINDS:
            m = self.artefacts.get(kind)
            if m is None or not np.any(m):
                continue
            name, colour = ARTEFACT_CLASSES[kind]
            for i, rings in enumerate(mask_polygons(np.asarray(m, bool), scale=self.scale,
                                                    tolerance=tolerance)):
                features.append({
                    "type": "Feature", "id": f"{kind}-{i}",
                    "geometry": {"type": "Polygon",
                                 "coordinates": [np.round(r, 2).tolist() for r in rings]},
                    "properties": {"objectType": "annotation", "name": f"{kind} {i}",
                                   "artefact": kind,
                                   "classification": {"name": name, "color": colour}}})
        return {"type": "FeatureCollection", "features": features,
                "properties": {"slide": self.slide_name, "units": "level-0 pixels",
                               "level0_width": self.level0_size[0],
                               "level0_height": self.level0_size[1],
                               "removed_from_tissue": list(ARTEFACT_KINDS)}}

    def write_artefacts(self, png: str | os.PathLike[str], geojson: str | os.PathLike[str]
                        ) -> None:
        """Write the artefacts as a label PNG (bit ``1 << i`` for kind ``i`` of
        :data:`ARTEFACT_KINDS`, on the grid of the tissue mask) and as GeoJSON, atomically."""
        from PIL import Image

        labels = np.zeros(self.mask.shape, np.uint8)
        for i, kind in enumerate(ARTEFACT_KINDS):
            m = self.artefacts.get(kind)
            if m is not None:
                labels |= np.asarray(m, bool).astype(np.uint8) << i
        with atomic_path(Path(png)) as tmp:
            Image.fromarray(labels).save(tmp, format="PNG")
        write_json_atomic(geojson, self.artefacts_geojson(), indent=None)

    def with_artefacts_png(self, path: str | os.PathLike[str]) -> TissueMask:
        """This mask with the artefacts of a label PNG written by :meth:`write_artefacts`
        (unchanged when the file is missing, unreadable or of another grid)."""
        from dataclasses import replace

        from PIL import Image

        try:
            with Image.open(path) as im:
                labels = np.asarray(im)
        except OSError:
            return self
        if labels.shape != self.mask.shape:
            return self
        arts = {k: (labels & (1 << i)) > 0 for i, k in enumerate(ARTEFACT_KINDS)}
        return replace(self, artefacts=arts)

    @classmethod
    def from_png(cls, path: str | os.PathLike[str], *, level0_size: tuple[int, int],
                 slide_mpp: float, slide_name: str = "") -> TissueMask:
        """Read a mask written by :meth:`write_png` (pixels > 127 are tissue).

        The mask covers the whole slide, so its resolution follows from its size: a mask
        read back equals the one written, and gives the same patch grid.
        """
        from PIL import Image

        try:
            with Image.open(path) as im:
                mask = np.asarray(im.convert("L")) > 127
        except OSError as exc:
            raise TissueError(f"{path}: cannot read the tissue mask PNG ({exc}); delete it "
                              f"or pass {option('force')}") from exc
        W, H = int(level0_size[0]), int(level0_size[1])
        h, w = mask.shape
        eff_mpp = float(slide_mpp) * 0.5 * (W / w + H / h)
        return cls(mask=mask, mpp=eff_mpp, downsample=eff_mpp / float(slide_mpp),
                   level0_size=(W, H), slide_mpp=float(slide_mpp), slide_name=slide_name)

    @classmethod
    def from_geojson(cls, src: str | os.PathLike[str] | Mapping[str, Any], *,
                     level0_size: tuple[int, int], slide_mpp: float,
                     mpp: float = DEFAULT_MASK_MPP, min_side_px: int = 256,
                     slide_name: str = "") -> TissueMask:
        """Rasterise a GeoJSON (file or dict) of level-0 polygons, e.g. edited in QuPath.

        Polygon, MultiPolygon and GeometryCollection geometries are filled, interiors cut
        out; invalid polygons are repaired as shapely's ``make_valid(method="structure")``
        would (a self-intersecting ring is filled by the even-odd rule, a hole outside its
        outline removes nothing), with a warning naming the feature. Features that are not
        tissue are left out with a warning: QuPath's ignored classes (``Ignore*``,
        ``Region*``: names ending in ``*``) and wsikit's own artefact and region annotations
        saved back into the file. Points and lines cover no area and are ignored. The mask
        has the pixel grid :func:`segment_tissue` gives the slide for the same ``mpp`` and
        ``min_side_px`` (:func:`mask_shape`); rasterising is linear in vertices and pixels.

        Raises
        ------
        TissueError
            The file cannot be read, is not GeoJSON, a feature is not an object or holds a
            coordinate that is not a finite number (named), or no feature outlines tissue.
        """
        from .geojson import fill_polygon, read_features, read_json

        fix = (f"fix the feature (e.g. in QuPath) or delete the file, or pass "
               f"{option('force')} to segment again")
        if isinstance(src, Mapping):
            data: Any = src
            where = "GeoJSON"
        else:
            where = str(src)
            data = read_json(src, error=TissueError, fix=fix)
        if not (isinstance(mpp, (int, float)) and mpp > 0 and slide_mpp > 0):
            raise TissueError(f"mpp={mpp!r} and slide_mpp={slide_mpp!r} must be positive")
        W, H = int(level0_size[0]), int(level0_size[1])
        w, h = mask_shape((W, H), float(slide_mpp), mpp=float(mpp), min_side_px=min_side_px)
        sx, sy = W / w, H / h
        eff_mpp = slide_mpp * 0.5 * (sx + sy)  # as segment_tissue reports it
        mask = np.zeros((h, w), bool)
        features = read_features(data, where=where, error=TissueError, fix=fix)
        excluded: list[str] = []
        repaired: list[str] = []
        outlines = 0
        for feat in features:
            why = _not_tissue(feat)
            if why:
                excluded.append(f"{feat.label}: {why}")
                continue
            for rings in feat.polygons:
                if not rings or len(rings[0]) < 3:
                    continue
                outlines += 1
                part = fill_polygon(rings, (h, w), scale=(sx, sy))
                if part is None:
                    continue
                mask[part.rows, part.cols] |= part.mask
                if part.self_intersecting:
                    repaired.append(f"{feat.label}: ring(s) {list(part.self_intersecting)} "
                                    "cross themselves (filled by the even-odd rule)")
                if part.holes_outside:
                    repaired.append(f"{feat.label}: hole(s) {list(part.holes_outside)} lie "
                                    "outside the outline (ignored there)")
        if excluded:
            warnings.warn(f"{where}: {len(excluded)} feature(s) left out of the tissue: "
                          f"{_some(excluded)}", stacklevel=2)
        if repaired:
            warnings.warn(f"{where}: invalid polygon(s) repaired as shapely's make_valid "
                          f"would: {_some(repaired)}; check them in QuPath", stacklevel=2)
        if features and not outlines:  # features, but not one polygon: not "no tissue"
            raise TissueError(f"{where}: none of its {len(features)} feature(s) is a tissue "
                              "Polygon or MultiPolygon with a ring of 3 or more [x, y] points"
                              f"{' (left out: ' + _some(excluded) + ')' if excluded else ''}"
                              f", so it outlines no tissue; {fix}")
        return cls(mask=mask, mpp=float(eff_mpp), downsample=eff_mpp / slide_mpp,
                   level0_size=(W, H),
                   slide_mpp=float(slide_mpp), slide_name=slide_name)


def _some(items: list[str], n: int = 5) -> str:
    """The first ``n`` of ``items`` joined, and how many more."""
    more = f"; and {len(items) - n} more" if len(items) > n else ""
    return "; ".join(items[:n]) + more


#: Classifications of wsikit's own artefact annotations (:meth:`TissueMask.artefacts_geojson`).
_ARTEFACT_CLASS_NAMES = {name for name, _ in ARTEFACT_CLASSES.values()}


def _not_tissue(feature: Any) -> str:
    """Why a GeoJSON feature is not a tissue outline ("" when it is one): a QuPath class
    that QuPath itself ignores (names ending in ``*``: ``Ignore*``, ``Region*``), or one of
    wsikit's own artefact or region annotations saved back into the tissue file."""
    props = feature.properties
    cls = feature.class_name
    if cls.endswith("*"):
        return f"QuPath class {cls!r} marks an area that is not tissue"
    if props.get("artefact") is not None or cls in _ARTEFACT_CLASS_NAMES:
        return f"a wsikit artefact annotation ({cls or props.get('artefact')!s}), not tissue"
    m = props.get("measurements")
    if cls.startswith("wsikit ") or (isinstance(m, Mapping)
                                     and {"score", "rank", "scale"} <= set(m)):
        return f"a wsikit selected-region annotation ({cls or 'score/rank/scale'}), not tissue"
    return ""


def mask_shape(level0_size: tuple[int, int], slide_mpp: float, *, mpp: float,
               min_side_px: int = 256, max_pixels: int = MASK_MAX_PIXELS) -> tuple[int, int]:
    """``(w, h)`` of a slide's tissue mask at ``mpp`` µm/px, the one rule for every mask.

    Small slides get a finer mask, so that its longer side has at least ``min_side_px``
    pixels (never finer than the slide itself; ``0``: exactly ``mpp``). Huge slides get a
    coarser one, so that it has at most ``max_pixels`` pixels (:data:`MASK_MAX_PIXELS`; ``0``:
    no bound): segmentation's working arrays are a few tens of bytes per mask pixel, so this
    bounds its memory whatever the slide size. :func:`segment_tissue` and
    :meth:`TissueMask.from_geojson` both use it, so a mask rasterised from a (possibly
    edited) GeoJSON has the pixel grid of the segmentation it came from.
    """
    W, H = int(level0_size[0]), int(level0_size[1])
    longest_um = max(W, H) * slide_mpp
    mask_mpp = (float(mpp) if min_side_px <= 0 else
                min(float(mpp), max(slide_mpp, longest_um / min_side_px)))
    w = max(1, int(round(W * slide_mpp / mask_mpp)))
    h = max(1, int(round(H * slide_mpp / mask_mpp)))
    if max_pixels > 0 and w * h > max_pixels:
        # rounded down, so within the bound (and a mask's own effective mpp maps to itself)
        mask_mpp *= math.sqrt(w * h / max_pixels)
        w = max(1, int(W * slide_mpp / mask_mpp))
        h = max(1, int(H * slide_mpp / mask_mpp))
    return w, h


def _read_thumbnail(slide: Slide, size: tuple[int, int]) -> np.ndarray:
    """Whole slide at ``size`` (w, h): straight from the TIFF tiles (scaled JPEG decode) when
    :mod:`wsikit.slide.tiles` can read the file, else through the slide's backend."""
    W, H = slide.dimensions
    if slide.backend in ("openslide", "tiffslide"):
        from ..slide.tiles import open_tile_reader

        # the direct tile reader declines (None) the files it cannot read
        reader, _reason = open_tile_reader(slide.path, expected_dimensions=(W, H), cache_mb=0,
                                           on_bad_tile=slide.on_bad_tile)
        if reader is not None:
            try:
                with reader:
                    # a mask needs no resampling parity with the patch readers: the
                    # DCT-domain scaled decode is several times cheaper here
                    return reader.read_region((0, 0, W, H), size, dct=True)
            except Exception:  # any decode trouble: the general reader below is the fallback
                pass
    return slide.read_at_mpp((0, 0, W, H), out_size=size)


def segment_tissue(slide: Slide | str | os.PathLike[str], *, mpp: float = DEFAULT_MASK_MPP,
                   min_side_px: int = 256, **options: Any) -> TissueMask:
    """Read a thumbnail of ``slide`` and segment tissue on it.

    Parameters
    ----------
    slide : Slide or path-like
        An open slide, or a slide file (opened and closed here).
    mpp : float
        µm/px of the thumbnail (default 8). Small slides use a finer resolution so that the
        longer side has at least ``min_side_px`` pixels (never finer than the slide).
    min_side_px : int
    **options
        Passed to :func:`tissue_mask` (``min_tissue_um2``, ``min_hole_um2``, …).

    Returns
    -------
    TissueMask
    """
    from ..slide import Slide as _Slide

    if not isinstance(slide, _Slide):  # a path is opened here; anything else: one line
        from ..slide.slide import slide_of

        with slide_of(slide, name="segment_tissue(slide)", error=TissueError) as opened:
            return segment_tissue(opened, mpp=mpp, min_side_px=min_side_px, **options)
    if not math.isfinite(slide.mpp):
        raise TissueError(f"{slide.path}: slide mpp unknown; pass the slide's "
                          f"level-0 µm/px with {keyword('mpp')} (its scanner records it)")
    if isinstance(mpp, bool) or not isinstance(mpp, (int, float)) or not 0 < mpp < math.inf:
        raise TissueError(f"mpp={mpp!r}: the tissue mask resolution must be a positive number "
                          f"of µm/px, e.g. 8 ({keyword('mask_mpp')})")
    W, H = slide.dimensions
    thumb = _read_thumbnail(slide, mask_shape((W, H), slide.mpp, mpp=mpp,
                                              min_side_px=min_side_px))
    h, w = thumb.shape[:2]
    eff_mpp = slide.mpp * 0.5 * (W / w + H / h)
    return tissue_from_thumbnail(thumb, mpp=eff_mpp, level0_size=(W, H),
                                 slide_mpp=slide.mpp, slide_name=slide.name, **options)


def tissue_from_thumbnail(thumb: np.ndarray, *, mpp: float, level0_size: tuple[int, int],
                          slide_mpp: float, slide_name: str = "", **options: Any
                          ) -> TissueMask:
    """:class:`TissueMask` of a whole-slide thumbnail: tissue without ink
    (:func:`tissue_mask`), then without folds (:func:`artefact_masks`, which are recorded).

    Parameters
    ----------
    thumb : ndarray, shape (h, w, 3), uint8
        The whole slide at ``mpp`` µm/px.
    mpp : float
    level0_size : (int, int)
    slide_mpp : float
    slide_name : str
    **options
        Passed to :func:`tissue_mask`.
    """
    thumb = _check_thumb(thumb, mpp)
    opts: dict[str, Any] = {"min_tissue_um2": MIN_TISSUE_UM2, "min_hole_um2": MIN_HOLE_UM2,
                            "min_od": MIN_STAIN_OD, "min_chroma": MIN_STAIN_CHROMA,
                            "remove_ink": True, "smooth_um": 16.0}
    unknown = sorted(set(options) - set(opts))
    if unknown:
        raise TissueError(f"unknown tissue option(s) {', '.join(unknown)}; the options are "
                          f"{', '.join(opts)}")
    opts.update(options)
    # the stained pixels, ink and glass once, for the mask and for its artefacts
    found = _stained(thumb, mpp=mpp, min_od=opts["min_od"], min_chroma=opts["min_chroma"],
                     remove_ink=opts["remove_ink"], smooth_um=opts["smooth_um"])
    mask = _clean(found.stained, mpp=mpp, min_tissue_um2=opts["min_tissue_um2"],
                  min_hole_um2=opts["min_hole_um2"], thumb=thumb,
                  excluded=found.ink | found.fill)
    arts = _artefacts(thumb, mask, found, mpp=mpp, min_tissue_um2=opts["min_tissue_um2"])
    mask = mask & ~arts["fold"] & ~arts["ink"]   # small ink holes were filled: never tissue
    return TissueMask(mask=mask, mpp=mpp, downsample=mpp / slide_mpp,
                      level0_size=(int(level0_size[0]), int(level0_size[1])),
                      slide_mpp=slide_mpp, slide_name=slide_name, artefacts=arts)

