"""Colours that are not H&E stain: pen and marker ink, dyes, and grey or black matter.

H&E tissue is a mix of two stains: haematoxylin (blue-purple) and eosin (pink). Neither makes
a pixel greener than it is red, bluer than red *and* as green as red, red without magenta, or
grey. These rules are per pixel, so they serve the tissue thumbnail (:mod:`wsikit.tissue`) and
the patches of the weight-free importance (:mod:`wsikit.models.nuclear`) alike:

* **green / teal** (marker pens, tissue-marking dye): green exceeds red by ``green_margin``;
* **blue** (ballpoint and marker): blue exceeds red by ``blue_margin`` while green is not below
  red (haematoxylin purple has green well below red);
* **red** (marker pens; also blood, whose erythrocytes carry no nuclei): red exceeds green by
  ``red_chroma`` while blue stays within ``red_hue`` of the red-green difference above green
  (eosin pink is magenta: its blue is well above its green); dark red ink, whose chroma is
  lower, is a dark pixel whose green and blue are both well below its red;
* **grey and black** (black ink, dust, coverslip and slide edges, dark scanner borders): a dark
  pixel without colour (its channels within ``grey_spread``), or a near-black pixel (darker than
  ``dark`` with little colour: very dark purple is keratin or a fold, not ink).

The margins were set on real TCGA H&E tiles with red and green pen, green dye on
CMU-1-Small-Region and a blank tile with a coverslip edge, and checked not to take
haematoxylin, eosin, fat or stroma pixels of the same tiles (``tests/test_tissue.py``).
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError

__all__ = ["ink_mask"]


def ink_mask(rgb: np.ndarray, *, dark: int = 60, green_margin: int = 15,
             blue_margin: int = 35, red_chroma: int = 80, red_hue: float = 0.2,
             grey_spread: int = 20, grey_max: int = 150) -> np.ndarray:
    """Pixels whose colour is ink, dye or grey/black matter rather than H&E stain.

    Parameters
    ----------
    rgb : ndarray, shape (..., 3), uint8
        RGB pixels (an image, or a batch of them).
    dark : int
        A pixel whose brightest channel is below this is ink or a border unless it keeps
        colour (``max - min`` at least ``0.4 * max + 8``: very dark purple tissue).
    green_margin, blue_margin : int
        Green ink: ``g - r > green_margin``. Blue ink: ``b - r > blue_margin`` and
        ``g >= r - 5`` (red below 180).
    red_chroma, red_hue : int, float
        Red ink: ``r - g > red_chroma`` and ``b - g < red_hue * (r - g)``.
    grey_spread, grey_max : int
        Grey or black: ``max - min < grey_spread`` and ``max < grey_max``.

    Returns
    -------
    ndarray, shape (...), bool
    """
    x = np.asarray(rgb)
    if x.shape[-1:] != (3,) or x.dtype != np.uint8:
        raise ModelError(f"ink_mask: expected uint8 RGB pixels (..., 3), got {x.dtype} "
                         f"{x.shape}")
    r, g, b = (x[..., i].astype(np.int16) for i in range(3))
    mx = np.maximum(np.maximum(r, g), b)
    mn = np.minimum(np.minimum(r, g), b)
    rg = r - g
    ink = (mx < dark) & (5 * (mx - mn) < 2 * mx + 40)   # near black, not dark purple
    ink |= (g - r > green_margin) & (mx < 245)
    ink |= (b - r > blue_margin) & (g >= r - 5) & (r < 180)
    ink |= (rg > red_chroma) & ((b - g) < red_hue * rg)
    ink |= (r < 150) & (rg > 25) & (100 * b < 65 * r) & (100 * g < 55 * r)   # dark red ink
    ink |= (mx - mn < grey_spread) & (mx < grey_max)
    return ink
