"""Level-0 resolution estimated from the size of nuclei, for a slide that records none.

Nuclei are the one ruler every H&E section carries. In tissue, the nuclei of lymphocytes,
stromal and epithelial cells are about 6-10 µm across: a small lymphocyte is a 7-10 µm cell
whose nucleus takes about three quarters of its volume (6.4-9.1 µm), about the size of a red
blood cell (7.5-8 µm), which histology teaches as the ruler for cells and nuclei (Brelje &
Sorenson, *Histology Guide*, University of Minnesota, "Nuclear morphology": lymph node);
epithelial and tumour nuclei are larger, 8-12 µm. A section cuts a nucleus at a random
height, and the mean diameter of the profiles a plane cuts from spheres of diameter D is
π/4 · D (Wicksell's corpuscle problem; Weibel, *Stereological Methods* 2, 1980). So the
profiles of nuclei of 6-10 µm, the typical 8 µm, are 4.7-7.9 µm across, typically 6.3 µm
(:data:`NUCLEUS_UM`, :data:`NUCLEUS_RANGE_UM`).

The measurement (:func:`estimate_mpp_from_nuclei`): haematoxylin by colour deconvolution
(:func:`skimage.color.rgb2hed`, Ruifrok & Johnston's vectors), lightly smoothed; nuclei are
the tissue pixels at or above Otsu's threshold of the tissue's haematoxylin, split into
connected blobs; only compact blobs count (solidity at least 0.9, at most twice as long as
wide: single round or oval nuclei, not clumps, fibres or elongated stromal nuclei, none of
which has a scale of its own); their equivalent diameters are pooled over the regions and
the area-weighted median is the typical nucleus in pixels, ``d``. The resolution is then
``NUCLEUS_UM / d`` µm/px, within ``NUCLEUS_RANGE_UM / d`` widened by the sampling error of
``d`` (a bootstrap over the nuclei). All of it is scale-free: no threshold is in µm.

Where nuclei are under about :data:`MIN_RESOLVED_PX` px across the image cannot show their
size (blur and pixels make small blobs look larger, the smallest vanish): the estimate is
then only a lower bound, its ``high`` is the end of the plausible range and ``resolved`` is
False. Measured on real slides and tiles: ``benchmarks/bench_mpp_estimate.py``.

>>> est = estimate_mpp_from_nuclei(region)           # doctest: +SKIP
>>> est.mpp, est.low, est.high, est.n_nuclei          # doctest: +SKIP
(0.52, 0.38, 0.67, 412)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import ndimage as ndi

from ..errors import MppError

__all__ = [
    "estimate_mpp_from_nuclei",
]

#: Typical diameter (µm) of the profile of a nucleus in an H&E section: π/4 of 8 µm.
NUCLEUS_UM = 6.3
#: The range of typical profile diameters (µm): π/4 of 6-10 µm.
NUCLEUS_RANGE_UM = (4.7, 7.9)
#: Fewest compact nuclei an estimate is made from.
MIN_NUCLEI = 30
#: Nuclei narrower than this (px) are at the resolution limit: only a lower bound is known.
MIN_RESOLVED_PX = 5.0
#: Upper end of an unresolved estimate (µm/px): the plausible limit of :mod:`wsikit.slide.mpp`.
_MPP_MAX = 20.0
#: Blobs smaller than this (px) are noise at any scale.
_MIN_BLOB_PX = 6
_METHOD = ("area-weighted median diameter of compact haematoxylin blobs (Otsu), "
           "{n} nuclei: {d:.1f} px = {um} µm")

_OD = (-np.log10(np.maximum(np.arange(256, dtype=np.float64), 1.0) / 255.0))


@dataclass(frozen=True)
class MppEstimate:
    """A level-0 resolution estimated from nuclear size.

    Attributes
    ----------
    mpp : float
        Estimated µm/px.
    low, high : float
        The interval the resolution lies in (the range of typical nuclear sizes and the
        sampling error); ``high`` is 20 when the nuclei are too small to measure.
    n_nuclei : int
        Compact nuclei measured.
    method : str
        How it was measured, with the typical nucleus in pixels.
    diameter_px : float
        The typical nucleus, in pixels of the image.
    resolved : bool
        False when the nuclei are under :data:`MIN_RESOLVED_PX` px: ``mpp`` and ``low``
        are then lower bounds only.
    """

    mpp: float
    low: float
    high: float
    n_nuclei: int
    method: str
    diameter_px: float = math.nan
    resolved: bool = True

    def describe(self) -> str:
        """One phrase: ``"0.52 µm/px (0.38–0.67, from 412 nuclei)"``."""
        if not self.resolved:
            return (f"at least {self.low:.2g} µm/px (its {self.n_nuclei} nuclei measure only "
                    f"{self.diameter_px:.1f} px, too few pixels to tell more)")
        return (f"{self.mpp:.2f} µm/px ({self.low:.2f}–{self.high:.2f}, from "
                f"{self.n_nuclei} nuclei of {self.diameter_px:.1f} px)")

    def contains(self, mpp: float) -> bool:
        """Whether ``mpp`` lies in ``[low, high]``."""
        return self.low <= mpp <= self.high

    def to_dict(self) -> dict[str, Any]:
        return {"mpp": self.mpp, "low": self.low, "high": self.high,
                "n_nuclei": self.n_nuclei, "method": self.method,
                "diameter_px": self.diameter_px, "resolved": self.resolved}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MppEstimate:
        return cls(mpp=float(data["mpp"]), low=float(data["low"]), high=float(data["high"]),
                   n_nuclei=int(data["n_nuclei"]), method=str(data["method"]),
                   diameter_px=float(data.get("diameter_px", math.nan)),
                   resolved=bool(data.get("resolved", True)))


def _haematoxylin(rgb: np.ndarray) -> np.ndarray:
    """Haematoxylin of each pixel (:func:`skimage.color.rgb2hed`'s first channel)."""
    from skimage.color.colorconv import hed_from_rgb

    ln = np.log(np.maximum(np.arange(256, dtype=np.float64) / 255.0, 1e-6))
    col = np.asarray(hed_from_rgb, np.float64)[:, 0] / math.log(1e-6)
    lut = [ln * col[c] for c in range(3)]
    h = lut[0][rgb[..., 0]] + lut[1][rgb[..., 1]] + lut[2][rgb[..., 2]]
    return np.maximum(h, 0.0)


def _nuclear_diameters(rgb: np.ndarray, *, smooth_px: float) -> np.ndarray:
    """Equivalent diameters (px) of the compact haematoxylin blobs of one RGB region."""
    from skimage.filters import threshold_otsu
    from skimage.measure import regionprops

    od = _OD[rgb]
    # tissue: absorbs, and with H&E's colour (no H&E mix absorbs red more than green: blue
    # and green pen, dye and their blurred rims do)
    tissue = (od.sum(-1) > 0.15) & (od[..., 0] <= od[..., 1] + 0.02)
    if np.count_nonzero(tissue) < 100:
        return np.zeros(0)
    h = _haematoxylin(rgb)
    if smooth_px > 0:
        h = ndi.gaussian_filter(h, smooth_px)
    values = h[tissue]
    values = np.minimum(values, np.percentile(values, 99.5))
    if values.max() <= values.min():
        return np.zeros(0)
    nuclear = ndi.binary_fill_holes((h >= threshold_otsu(values, nbins=256)) & tissue)
    labels, _ = ndi.label(nuclear)
    out = []
    for blob in regionprops(labels):
        if blob.area < _MIN_BLOB_PX or blob.solidity < 0.9:
            continue
        minor, major = blob.axis_minor_length, blob.axis_major_length
        if minor <= 0 or major > 2.0 * minor:
            continue
        out.append(blob.equivalent_diameter_area)
    return np.asarray(out, np.float64)


def _weighted_median(d: np.ndarray) -> float:
    """Median of ``d`` weighted by area (``d**2``): the size most of the nuclear area has."""
    order = np.argsort(d)
    cum = np.cumsum(d[order] ** 2)
    return float(d[order][np.searchsorted(cum, 0.5 * cum[-1])])


def estimate_mpp_from_nuclei(rgb: np.ndarray | Sequence[np.ndarray], *,
                             nucleus_um: float = NUCLEUS_UM,
                             nucleus_range_um: tuple[float, float] = NUCLEUS_RANGE_UM,
                             min_nuclei: int = MIN_NUCLEI, smooth_px: float = 0.7,
                             seed: int = 0) -> MppEstimate:
    """Estimate the µm/px of H&E image regions from the size of their nuclei.

    Parameters
    ----------
    rgb : ndarray, shape (h, w, 3) or (n, h, w, 3), uint8, or a sequence of (h, w, 3)
        One region, or several regions of the same slide (their nuclei are pooled), at the
        resolution to estimate (a slide's level 0).
    nucleus_um : float
        Typical diameter of a nucleus's profile in a section (µm).
    nucleus_range_um : (float, float)
        The range of typical profile diameters (µm): the interval of the estimate.
    min_nuclei : int
        Fewest compact nuclei to estimate from.
    smooth_px : float
        Gaussian smoothing (px) of the haematoxylin before thresholding (JPEG noise).
    seed : int
        Seed of the bootstrap that measures the sampling error.

    Returns
    -------
    MppEstimate

    Raises
    ------
    MppError
        Not an RGB image, or fewer than ``min_nuclei`` nuclei were found (no tissue, or no
        H&E): the message says how many.
    """
    regions = [rgb] if isinstance(rgb, np.ndarray) and rgb.ndim == 3 else list(rgb)
    for region in regions:
        arr = np.asarray(region)
        if arr.ndim != 3 or arr.shape[-1] != 3 or arr.dtype != np.uint8 or 0 in arr.shape:
            raise MppError(f"estimate_mpp_from_nuclei: expected uint8 RGB regions (h, w, 3), "
                           f"got {arr.dtype} {arr.shape}")
    lo_um, hi_um = (float(v) for v in nucleus_range_um)
    if not 0 < lo_um <= nucleus_um <= hi_um:
        raise MppError(f"nucleus_range_um={nucleus_range_um!r} must hold nucleus_um="
                       f"{nucleus_um!r} (0 < low <= nucleus_um <= high)")
    d = np.concatenate([np.zeros(0)] + [_nuclear_diameters(np.asarray(region),
                                                           smooth_px=smooth_px)
                                         for region in regions])
    if d.size < min_nuclei:
        raise MppError(f"only {d.size} nuclei found (at least {min_nuclei} are needed to "
                       "estimate the resolution from their size): too little H&E tissue")
    typical = _weighted_median(d)
    rng = np.random.default_rng(seed)
    boots = [_weighted_median(d[rng.integers(0, d.size, d.size)]) for _ in range(200)]
    d_lo, d_hi = (float(v) for v in np.percentile(boots, [5, 95]))
    d_lo, d_hi = min(d_lo, typical), max(d_hi, typical)
    resolved = d_lo >= MIN_RESOLVED_PX
    method = _METHOD.format(n=d.size, d=typical, um=f"{nucleus_um:g} ({lo_um:g}-{hi_um:g})")
    return MppEstimate(mpp=nucleus_um / typical, low=lo_um / d_hi,
                       high=hi_um / d_lo if resolved else _MPP_MAX, n_nuclei=int(d.size),
                       method=method, diameter_px=typical, resolved=resolved)
