"""Stain amounts, and colours that are not H&E stain: pen and marker ink, dyes, grey or black.

The rules work in optical-density (OD) space, where stains add: a pixel's OD is
``-log10(I / 255)`` per channel, and its *chromaticity* ``(fR, fG, fB)`` is that OD divided
by its sum, which does not change with how much stain there is (a darker eosin rim has the
chromaticity of the pale eosin beside it). Haematoxylin absorbs red and green about equally
and blue less (Ruifrok's vector: fR 0.40, fG 0.43); eosin absorbs green, some blue and little
red; blood adds haemoglobin (blue and green). Every mix of them therefore has ``fR`` at most
about ``fG``, and a red share that grows with its haematoxylin. Ink is what no mix reaches:

* **blue, green, teal** (ballpoint, marker, tissue-marking dye): red absorbed more than green,
  ``fR - fG > od_margin`` (real green pen: +0.4; blue pen +0.16; haematoxylin -0.03 to -0.2);
* **red** (marker): green and blue absorbed nearly alike and red hardly at all,
  ``fR < red_share`` and ``fB >= red_blue * fG`` with OD above ``red_od``: red pen on real
  TCGA tiles has fR 0.05-0.12 and fB/fG 0.79-0.84, while eosin, dark eosinophilic rims,
  smooth muscle and haemorrhage keep haematoxylin's share (fR 0.14-0.23 at the median) and
  fB/fG 0.62-0.68 (the rim of issue 33, (182, 88, 132): fR 0.16, fB/fG 0.62 at any darkness);
* **grey and black** (black ink, dust, coverslip and slide edges, dark scanner borders): a dark
  pixel without colour (its channels within ``grey_spread``), or a near-black pixel (darker than
  ``dark`` with little colour: very dark purple is keratin or a fold, not ink).

Ink laid *over* tissue mixes with the stain under it, and a red smear over eosin-stained tissue
passes none of these pixel rules. :func:`ink_excess` measures, in optical density, how far a
colour lies outside the cone of every H&E mix: ink of any colour off that cone shows as an
excess wherever it dominates, averaged over a neighbourhood
(:func:`wsikit.tissue.mask.ink_regions`).

:func:`stain_amounts` unmixes the OD into haematoxylin and eosin amounts (two-stain colour
deconvolution on the reference vectors of Macenko et al.): the tissue-fold rule
(:func:`wsikit.tissue.mask.fold_mask`) compares both amounts and their ratio with the slide's
tissue.

These rules are per pixel, so they serve the tissue thumbnail (:mod:`wsikit.tissue.mask`) and
the patches of the weight-free importance (:mod:`wsikit.models.nuclear`) alike; scattered
pixels of tissue near a boundary are left to those callers' size rules.
(``tests/tissue/test_tissue.py``, ``tests/tissue/test_ink_he.py``: real tiles, CMU-1-Small-Region.)
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError

__all__ = ["ink_mask", "red_ink_extent", "stain_amounts", "HAEMATOXYLIN", "EOSIN"]

#: Optical density of one unit of haematoxylin and of eosin (R, G, B; unit length): the
#: reference vectors of Macenko et al. (2009), the ones stain normalisation commonly targets.
#: Real eosin absorbs blue as well as green (the rim of issue 33, (182, 88, 132), is this
#: eosin vector within 2 degrees), so eosin-rich tissue does not leak into haematoxylin as it
#: does with Ruifrok's ``(0.07, 0.99, 0.11)``.
HAEMATOXYLIN = (0.5626, 0.7201, 0.4062)
#: The eosin optical-density direction (unit vector) that goes with :data:`HAEMATOXYLIN`.
EOSIN = (0.2159, 0.8012, 0.5581)


#: The "too blue" limit of H&E (:func:`ink_excess`): in optical density above the glass, no
#: mix of haematoxylin, eosin and blood absorbs more blue than ``BLUE_PER_GREEN`` times its
#: green plus ``BLUE_PER_RED`` times its red. The reference eosin of Macenko et al. (R/G 0.27,
#: B/G 0.70) lies on it; real eosin is under it (smooth muscle of the TCGA tiles: B/G 0.63 at
#: R/G 0.23), haematoxylin far under (B/G 0.52-0.56 at R/G 0.56-0.78), clotted blood in
#: vessels (B/G 0.60-0.65 at R/G 0.38) and the dark eosinophilic rim of issue 33 (0.60 at
#: 0.28) too. Red marker lies above it (on glass B/G 0.77-0.83 at R/G 0.07-0.13; a smear of it
#: over tumour B/G 0.76 at R/G 0.24), and so do yellow, orange, brown, green and grey or black.
BLUE_PER_GREEN = 0.625
BLUE_PER_RED = 0.30
#: ... nor more red than ``RED_PER_GREEN`` times its green (haematoxylin R/G 0.67-0.82; pale
#: blue-grey mucin 1.13-1.22; blue pen 1.44, green pen and teal dye 3.4-3.6), ...
RED_PER_GREEN = 1.3
#: ... nor less blue than ``MIN_BLUE_PER_GREEN`` times its green less ``MIN_BLUE_PER_RED``
#: times its red (the line from eosin, B/G 0.6 at R/G 0.2, to the bluest-absorbing
#: haematoxylin, Ruifrok's, B/G 0.41 at R/G 0.92, lowered by 0.12: real H&E lies 0.04-0.3 of
#: its green OD above it, the generated stroma and nuclei of :mod:`wsikit.slide.synthetic`
#: 0.04 and 0.12; violet, magenta and purple inks 0.2-0.4 under it), nor less red than
#: ``MIN_RED_PER_GREEN`` times its green (eosin 0.11-0.27).
MIN_BLUE_PER_GREEN = 0.564
MIN_BLUE_PER_RED = 0.42
#: ... and never less than ``LEAST_BLUE_PER_GREEN`` times its green (haematoxylin 0.41-0.56,
#: the generated nuclei 0.37; blue and violet inks 0.1-0.25).
LEAST_BLUE_PER_GREEN = 0.30
MIN_RED_PER_GREEN = 0.05

_TINY = np.float32(1e-30)

#: -log10(v / 255) for every uint8 value v (0 counts as 1).
_OD_LUT = (-np.log10(np.maximum(np.arange(256, dtype=np.float64), 1.0) / 255.0)
           ).astype(np.float32)


def _od(rgb: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.asarray(rgb)
    if x.shape[-1:] != (3,) or x.dtype != np.uint8:
        raise ModelError(f"{name}: expected uint8 RGB pixels (..., 3), got {x.dtype} "
                         f"{x.shape}")
    return _OD_LUT[x[..., 0]], _OD_LUT[x[..., 1]], _OD_LUT[x[..., 2]]


def stain_amounts(rgb: np.ndarray, *, haematoxylin: tuple[float, float, float] = HAEMATOXYLIN,
                  eosin: tuple[float, float, float] = EOSIN) -> tuple[np.ndarray, np.ndarray]:
    """Haematoxylin and eosin amounts of pixels, in OD units (two-stain colour deconvolution).

    Each pixel's OD is fitted as ``h * haematoxylin + e * eosin`` by least squares; what the
    two stains do not explain (blood's haemoglobin, ink) is left out. Amounts are clipped at 0.
    Because stains add in OD, a double layer of tissue (a fold) doubles both amounts and keeps
    their ratio, while an eosin-rich rim or haemorrhage raises eosin much more than
    haematoxylin (:func:`wsikit.tissue.mask.fold_mask`).

    Parameters
    ----------
    rgb : ndarray, shape (..., 3), uint8
        RGB pixels.
    haematoxylin, eosin : (float, float, float)
        The stains' OD vectors (R, G, B); any length (they are normalised here).

    Returns
    -------
    h, e : ndarray, shape (...), float32
    """
    od = np.stack(_od(rgb, "stain_amounts"), axis=-1)
    vectors = np.array([haematoxylin, eosin], np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if vectors.shape != (2, 3) or not np.all(np.isfinite(vectors)) or np.any(norms == 0):
        raise ModelError(f"stain_amounts: stain vectors must be two finite, non-zero (R, G, B) "
                         f"triples, got haematoxylin={haematoxylin!r}, eosin={eosin!r}")
    unmix = np.linalg.pinv((vectors / norms).T).astype(np.float32)   # (2, 3)
    he = od @ unmix.T
    np.maximum(he, 0.0, out=he)
    return he[..., 0], he[..., 1]


def ink_excess(od: np.ndarray) -> np.ndarray:
    """Optical density that no mix of haematoxylin, eosin and blood gives: ink over tissue.

    Stains add in optical density (OD), so every H&E pixel, however dark, lies in the cone of
    the stains' OD vectors; ink laid over tissue adds its own vector to the tissue's, and the
    sum leaves the cone by as much OD as the ink has outside it. The cone is bounded here by
    five planes through the origin measured on real H&E (:data:`BLUE_PER_GREEN` and
    :data:`BLUE_PER_RED`, :data:`RED_PER_GREEN`, :data:`MIN_BLUE_PER_GREEN` and
    :data:`MIN_BLUE_PER_RED`, :data:`LEAST_BLUE_PER_GREEN`, :data:`MIN_RED_PER_GREEN`), and
    the excess is how far (in OD) the pixel lies beyond the farthest of them: too blue (red,
    orange, yellow, brown, green, grey or black ink), too red (blue, green, teal), too little
    blue (magenta, violet, blue), too little red (pink).
    Pale blue-grey mucin stays inside (R/G 1.13-1.22, B/G 0.59). Inks whose colour lies inside
    the cone (a purple like haematoxylin's, a pink like eosin's) cannot be told by colour.

    The measure is linear in OD, so it can be taken on OD averaged over a neighbourhood (a
    pixel votes with its neighbours) and compared with a threshold in OD units; red marker
    smeared over tumour on a real TCGA tile gives 0.04-0.08 averaged over 24 µm, the real
    tissue of every tile in ``tests/data/real_tiles`` under 0.025. Fresh red blood cells
    have red marker's very colour (a 40 x 24 µm clump on a real tile: 0.077):
    :func:`wsikit.tissue.mask.ink_regions` tells them apart by size and by the tissue under
    the ink.

    Parameters
    ----------
    od : ndarray, shape (..., 3), float
        Optical density (R, G, B), above the glass or not: glass's own is neutral and small
        and moves the excess by less than 0.02, towards H&E.

    Returns
    -------
    ndarray, shape (...), float32
        OD outside the H&E cone (negative: inside, by that much).

    >>> import numpy as np
    >>> from wsikit.tissue.stain import ink_excess
    >>> od = -np.log10(np.array([[182, 88, 132], [219, 43, 63]]) / 243.0)   # rim, red pen
    >>> [round(float(v), 2) for v in ink_excess(od)]
    [-0.05, 0.1]
    """
    x = np.asarray(od, np.float32)
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    out = b - np.float32(BLUE_PER_GREEN) * g - np.float32(BLUE_PER_RED) * r
    np.maximum(out, r - np.float32(RED_PER_GREEN) * g, out=out)
    np.maximum(out, np.float32(MIN_BLUE_PER_GREEN) * g - np.float32(MIN_BLUE_PER_RED) * r - b,
               out=out)
    np.maximum(out, np.float32(LEAST_BLUE_PER_GREEN) * g - b, out=out)
    np.maximum(out, np.float32(MIN_RED_PER_GREEN) * g - r, out=out)
    return out


def red_ink_extent(rgb: np.ndarray, *, red_blue: float = 0.75, min_od: float = 0.15
                   ) -> np.ndarray:
    """Pixels that may belong to a red ink stroke: its faint, blurred rim included.

    Green and blue absorbed alike (``fB >= red_blue * fG``) and green more than red by 0.1
    of the OD. Alone this takes some eosin-rich tissue too (smooth muscle: up to a tenth of
    its pixels), so it only extends strokes found by :func:`ink_mask`: a caller keeps the
    pieces of it connected to solid red ink (:func:`wsikit.tissue.mask.ink_regions`).
    """
    od_r, od_g, od_b = _od(rgb, "red_ink_extent")
    od = od_r + od_g + od_b
    return (od_b >= red_blue * od_g) & (od_g - od_r > 0.1 * od) & (od > min_od)


def ink_mask(rgb: np.ndarray, *, dark: int = 60, od_margin: float = 0.08,
             red_share: float = 0.1, red_blue: float = 0.75, red_od: float = 0.5,
             grey_spread: int = 20, grey_max: int = 150, min_od: float = 0.15,
             red: bool = True) -> np.ndarray:
    """Pixels whose colour is ink, dye or grey/black matter rather than H&E stain.

    Parameters
    ----------
    rgb : ndarray, shape (..., 3), uint8
        RGB pixels (an image, or a batch of them).
    dark : int
        A pixel whose brightest channel is below this is ink or a border unless it keeps
        colour (``max - min`` at least ``0.4 * max + 8``: very dark purple tissue).
    od_margin : float
        Blue, green or teal ink: OD chromaticity ``fR - fG > od_margin``.
    red_share, red_blue, red_od : float
        Red ink: ``fR < red_share``, ``fB >= red_blue * fG`` and summed OD above ``red_od``.
    grey_spread, grey_max : int
        Grey or black: ``max - min < grey_spread`` and ``max < grey_max``.
    min_od : float
        Summed OD below which a pixel's hue is too faint to tell (glass tinted by the
        scanner's white balance): not blue/green ink.
    red : bool
        Include red ink (False: only the colours no H&E pixel has at any size).

    Returns
    -------
    ndarray, shape (...), bool
    """
    grey, colour, redish = ink_classes(rgb, dark=dark, od_margin=od_margin,
                                       red_share=red_share, red_blue=red_blue, red_od=red_od,
                                       grey_spread=grey_spread, grey_max=grey_max,
                                       min_od=min_od)
    ink = grey | colour
    if red:
        ink |= redish
    return ink


def ink_classes(rgb: np.ndarray, *, dark: int = 60, od_margin: float = 0.08,
                red_share: float = 0.1, red_blue: float = 0.75, red_od: float = 0.5,
                grey_spread: int = 20, grey_max: int = 150, min_od: float = 0.15
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three rules of :func:`ink_mask` apart, in one pass: ``(grey or black, blue green
    or teal, red)`` boolean masks of shape ``rgb.shape[:-1]`` (parameters as there)."""
    od_r, od_g, od_b = _od(rgb, "ink_mask")
    x = np.asarray(rgb)
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    mx = np.maximum(np.maximum(r, g), b).astype(np.int16)
    mn = np.minimum(np.minimum(r, g), b).astype(np.int16)
    od = od_r + od_g + od_b
    grey = (mx < dark) & (5 * (mx - mn) < 2 * mx + 40)   # near black, not dark purple
    grey |= (mx - mn < grey_spread) & (mx < grey_max)    # grey
    # blue, green, teal (od_margin=inf: none; the floor keeps inf * 0 out of the product)
    colour = (od > min_od) & (od_r - od_g > od_margin * np.maximum(od, _TINY))
    red = (od_r < red_share * od) & (od_b >= red_blue * od_g) & (od > red_od)
    return grey, colour, red
