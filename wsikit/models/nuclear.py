"""Weight-free patch importance from nuclear morphology on the haematoxylin channel.

What it measures
----------------
Each patch is read at about 1 µm/px (:data:`ANALYSIS_MPP`), unmixed by colour deconvolution
(the haematoxylin column of :func:`skimage.color.rgb2hed`), and nuclei are detected as
connected regions of tissue pixels whose haematoxylin is at least a **per-slide threshold**:
Otsu's threshold over the tissue haematoxylin of the slide (sampled patches, clipped at its
99.5th percentile so that pen marks and debris cannot pull it up). The threshold adapts to pale,
faded and dark staining; no fixed optical-density constant decides what a nucleus is. Per patch
it then measures (:data:`NUCLEAR_FEATURES`):

* ``density``: nuclei per mm² of tissue;
* ``crowding``: the fraction of the tissue covered by nuclei;
* ``area``: mean nuclear area in µm² (enlarged nuclei);
* ``hyperchromasia``: mean haematoxylin of the nuclear pixels relative to the slide threshold
  (patches without a nucleus: mean tissue haematoxylin relative to it, so below 1).

:func:`importance_scores` turns these into one score per patch *relative to the slide*: each
feature becomes a robust z-score (median and MAD over the slide's patches), the four are
averaged, shrunk towards the slide median for patches with little tissue, and the result is
rank-normalised to ``(0, 1)`` (mid-ranks for ties). Scores therefore never collapse to 0/1:
on a slide, only patches with identical measurements share a value.

What it is not
--------------
Not a diagnosis, not a trained model and not a nucleus segmentation to be measured: it is a
transparent heuristic that ranks the patches of one slide by how dense, crowded, enlarged and
dark their nuclei are, to decide where to look first. Scores of different slides are not
comparable (each slide is ranked on its own). Inflammation, crushed tissue or folds with dark
haematoxylin also rank high.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage
from skimage.color.colorconv import hed_from_rgb

from ..errors import ModelError

__all__ = [
    "ANALYSIS_MPP",
    "NUCLEAR_FEATURES",
    "NuclearThreshold",
    "features_from_planes",
    "haematoxylin_planes",
    "importance_scores",
    "nuclear_features",
    "nuclear_threshold",
]

#: Resolution (µm/px) at which nuclei are detected.
ANALYSIS_MPP = 1.0
#: Columns of :func:`nuclear_features`.
NUCLEAR_FEATURES = ("density", "crowding", "area", "hyperchromasia")
#: A pixel is tissue when its summed RGB optical density (-log10) exceeds this.
TISSUE_OD = 0.12
#: Connected nuclear regions smaller than this (µm²) are noise, not nuclei.
MIN_NUCLEUS_UM2 = 8.0
#: Shrinkage of a patch's combined z-score towards the median: ``f / (f + SHRINK)`` for a
#: tissue fraction ``f``, so a patch with little tissue cannot rank high on a few pixels.
SHRINK = 0.15

_LOG_ADJUST = np.log(1e-6)
# rgb2hed: stains = (log(rgb) / log(1e-6)) @ hed_from_rgb, clipped at 0 (rgb in [0, 1], >= 1e-6)
_LN_LUT = np.log(np.maximum(np.arange(256, dtype=np.float64) / 255.0, 1e-6)).astype(np.float32)
_H_COL = (np.asarray(hed_from_rgb, dtype=np.float64)[:, 0] / _LOG_ADJUST).astype(np.float32)
# summed optical density -log10(v / 255) of the three channels, from the same logarithms (a
# channel at 0 counts as 10^6x attenuated: only "above TISSUE_OD" is asked, which it is anyway)
_OD_COL = np.full(3, -1.0 / np.log(10.0), dtype=np.float32)


def _as_images(images: np.ndarray) -> np.ndarray:
    arr = np.asarray(images)
    if arr.ndim == 3:
        arr = arr[None]
    if arr.ndim != 4 or arr.shape[-1] != 3 or arr.dtype != np.uint8:
        raise ModelError(f"expected (B, H, W, 3) uint8 RGB images, got {arr.dtype} "
                         f"{arr.shape}")
    return arr


def haematoxylin_planes(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Haematoxylin concentration and tissue mask of each pixel.

    Parameters
    ----------
    images : ndarray, shape (B, H, W, 3), uint8
        RGB patches.

    Returns
    -------
    (ndarray, ndarray)
        ``h`` (B, H, W) float32 haematoxylin as :func:`skimage.color.rgb2hed` (>= 0), and
        ``tissue`` (B, H, W) bool (summed optical density > :data:`TISSUE_OD`).
    """
    x = _as_images(images)
    ln = _LN_LUT[x]                                         # (B, H, W, 3) float32
    h = ln @ _H_COL
    np.maximum(h, 0.0, out=h)
    return h, (ln @ _OD_COL) > np.float32(TISSUE_OD)


@dataclass(frozen=True)
class NuclearThreshold:
    """The per-slide nuclear threshold and where it came from.

    Attributes
    ----------
    value : float
        Haematoxylin concentration (rgb2hed units) at and above which a tissue pixel is
        nuclear.
    pixels : int
        Tissue pixels it was estimated from.
    """

    value: float
    pixels: int


def nuclear_threshold(h_tissue: np.ndarray, *, clip_percentile: float = 99.5
                      ) -> NuclearThreshold:
    """Otsu's threshold over the tissue haematoxylin of a slide.

    Parameters
    ----------
    h_tissue : ndarray, shape (M,)
        Haematoxylin of tissue pixels sampled across the slide (``haematoxylin_planes``).
    clip_percentile : float
        Values above this percentile are clipped first (pen, debris, folds).

    Returns
    -------
    NuclearThreshold
        Falls back to the 90th percentile when Otsu cannot split the values (e.g. all equal),
        and to 0.05 when there is no tissue pixel at all.
    """
    from skimage.filters import threshold_otsu

    v = np.asarray(h_tissue, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return NuclearThreshold(0.05, 0)
    v = np.minimum(v, np.percentile(v, clip_percentile))
    if v.max() <= v.min():
        return NuclearThreshold(float(max(v.max(), 1e-6)), int(v.size))
    t = float(threshold_otsu(v, nbins=512))
    if not t > v.min():
        t = float(np.percentile(v, 90.0))
    return NuclearThreshold(max(t, 1e-6), int(v.size))


def nuclear_features(images: np.ndarray, *, threshold: float, mpp: float) -> np.ndarray:
    """Nuclear density, crowding, area and hyperchromasia of each patch.

    Parameters
    ----------
    images : ndarray, shape (B, H, W, 3), uint8
        RGB patches, ideally at about :data:`ANALYSIS_MPP` µm/px.
    threshold : float
        The slide's nuclear threshold (:func:`nuclear_threshold`).
    mpp : float
        µm per pixel of ``images``.

    Returns
    -------
    ndarray, shape (B, 5), float64
        Columns :data:`NUCLEAR_FEATURES` (nuclei/mm² of tissue, nuclear fraction of tissue,
        mean nuclear area µm², nuclear haematoxylin / threshold) and the tissue pixel fraction.
    """
    h, tissue = haematoxylin_planes(images)
    return features_from_planes(h, tissue, threshold=threshold, mpp=mpp)


def features_from_planes(h: np.ndarray, tissue: np.ndarray, *, threshold: float,
                         mpp: float) -> np.ndarray:
    """:func:`nuclear_features` from the planes of :func:`haematoxylin_planes`.

    Parameters
    ----------
    h : ndarray, shape (B, H, W), float32
        Haematoxylin per pixel.
    tissue : ndarray, shape (B, H, W), bool
        Tissue pixels.
    threshold, mpp
        As in :func:`nuclear_features`.
    """
    if not (threshold > 0 and np.isfinite(threshold)):
        raise ModelError(f"nuclear_features: threshold must be a positive number, got "
                         f"{threshold!r}")
    if not (mpp > 0 and np.isfinite(mpp)):
        raise ModelError(f"nuclear_features: mpp must be positive, got {mpp!r}")
    b = h.shape[0]
    out = np.zeros((b, 5), dtype=np.float64)
    if b == 0:
        return out
    px_area = float(mpp) ** 2
    nuclear = (h >= threshold) & tissue
    structure = np.zeros((3, 3, 3), dtype=bool)
    structure[1] = ndimage.generate_binary_structure(2, 1)   # never connect across images
    labels, n = ndimage.label(nuclear, structure=structure)
    # per-component sums over the nuclear pixels only (a fraction of all pixels)
    where = np.flatnonzero(nuclear)
    flat = labels.ravel()[where]
    sizes = np.bincount(flat, minlength=n + 1)[1:]
    h_sum = np.bincount(flat, weights=h.ravel()[where], minlength=n + 1)[1:]   # H per component
    keep = sizes * px_area >= MIN_NUCLEUS_UM2
    # the image of every component: labels are numbered in raster order, image-major, and
    # never span two images, so image b holds the labels up to the b-th running maximum
    last = np.maximum.accumulate(labels.reshape(b, -1).max(axis=1))
    img_of = np.searchsorted(last, np.arange(1, n + 1), side="left")[keep]
    n_nuclei = np.bincount(img_of, minlength=b).astype(np.float64)
    nuc_px = np.bincount(img_of, weights=sizes[keep], minlength=b)
    h_nuc = np.bincount(img_of, weights=h_sum[keep], minlength=b)
    tissue_px = np.count_nonzero(tissue.reshape(b, -1), axis=1).astype(np.float64)
    h_tis = np.add.reduce(h.reshape(b, -1), axis=1, dtype=np.float64,
                          where=tissue.reshape(b, -1))
    safe_t = np.maximum(tissue_px, 1.0)
    out[:, 0] = n_nuclei / (safe_t * px_area) * 1e6
    out[:, 1] = nuc_px / safe_t
    out[:, 2] = np.where(n_nuclei > 0, nuc_px * px_area / np.maximum(n_nuclei, 1.0), 0.0)
    out[:, 3] = np.where(nuc_px > 0, h_nuc / np.maximum(nuc_px, 1.0), h_tis / safe_t) \
        / threshold
    out[:, 4] = tissue_px / float(h.shape[1] * h.shape[2])
    return out


def _robust_z(x: np.ndarray) -> np.ndarray:
    med = np.median(x)
    scale = 1.4826 * np.median(np.abs(x - med))
    if not scale > 0:
        q75, q25 = np.percentile(x, [75, 25])
        scale = (q75 - q25) / 1.349
    if not scale > 0:
        scale = float(np.std(x))
    if not scale > 0:
        return np.zeros_like(x)
    return np.clip((x - med) / scale, -8.0, 8.0)


def importance_scores(features: np.ndarray, tissue_fraction: np.ndarray | None = None
                      ) -> np.ndarray:
    """Per-slide importance of each patch from its nuclear features, in ``(0, 1)``.

    Parameters
    ----------
    features : ndarray, shape (N, F) or (N,)
        Per-patch measurements where larger means more salient, e.g. the first four columns
        of :func:`nuclear_features`.
    tissue_fraction : ndarray, shape (N,), optional
        Tissue fraction per patch in [0, 1] (e.g. the 5th column of :func:`nuclear_features`
        or ``TileGrid.tissue``); patches with little tissue are shrunk towards the median.

    Returns
    -------
    ndarray, shape (N,), float32
        ``(rank - 0.5) / N`` of the combined score (mean robust z-score of the features,
        times ``f / (f + SHRINK)``), mid-ranks for ties: a uniform spread over ``(0, 1)``.
    """
    x = np.asarray(features, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ModelError(f"importance_scores: features must be (N, F) or (N,), got shape "
                         f"{x.shape}")
    n = x.shape[0]
    if tissue_fraction is None:
        t = np.ones(n)
    else:
        t = np.asarray(tissue_fraction, dtype=np.float64).reshape(-1)
        if t.shape[0] != n:
            raise ModelError(f"importance_scores: {n} patches of features but "
                             f"{t.shape[0]} tissue fractions; pass one value per patch")
    if not (np.isfinite(x).all() and np.isfinite(t).all()):
        raise ModelError("importance_scores: features and tissue_fraction must be finite")
    if n == 0:
        return np.zeros(0, dtype=np.float32)
    z = np.column_stack([_robust_z(x[:, j]) for j in range(x.shape[1])]).mean(axis=1)
    t = np.clip(t, 0.0, 1.0)
    combined = z * (t / (t + SHRINK)) * (1.0 + SHRINK)
    from scipy.stats import rankdata

    return ((rankdata(combined, method="average") - 0.5) / n).astype(np.float32)
