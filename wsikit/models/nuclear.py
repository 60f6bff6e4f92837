"""Weight-free patch importance from nuclear morphology on the haematoxylin channel.

What it measures
----------------
Each patch is read at about 1 µm/px (:data:`ANALYSIS_MPP`), unmixed by colour deconvolution
(the haematoxylin column of :func:`skimage.color.rgb2hed`), and nuclei are detected as
connected regions of usable tissue pixels (ink, dye, grey matter and loose fragments are
not used: :func:`haematoxylin_planes`) whose haematoxylin is at least a **per-slide threshold**:
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
feature becomes a robust z-score (median and MAD over the slide's patches), compressed with
``asinh`` (never clipped: an extreme patch stays ahead of a merely high one), the four are
averaged, and the patch is weighted by what of it can be looked at: its **usable tissue
fraction** squared (stained tissue that is not ink, not the rim of a pen stroke, not a loose
fragment; and, through the grid, not a fold), an ink penalty (2 % of ink divides the weight by
4.5) and a focus factor (a patch with little detail finer than 3 µm is out of focus). The
result is rank-normalised to ``(0, 1)`` (mid-ranks for exact ties only): a half-empty edge
patch weighs a quarter of a full one, so full tissue outranks it unless it is far denser.

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
from ..tissue.stain import ink_mask

__all__ = [
    "features_from_planes",
    "haematoxylin_planes",
    "importance_scores",
    "nuclear_features",
    "nuclear_threshold",
]

#: Resolution (µm/px) at which nuclei are detected.
ANALYSIS_MPP = 1.0
#: The nuclear measurements of :func:`nuclear_features` (its first four columns).
NUCLEAR_FEATURES = ("density", "crowding", "area", "hyperchromasia")
#: Every column of :func:`nuclear_features`.
PATCH_MEASURES = (*NUCLEAR_FEATURES, "usable_tissue", "ink", "sharpness")
#: A pixel is tissue when its summed RGB optical density (-log10) exceeds this.
TISSUE_OD = 0.12
#: Connected nuclear regions smaller than this (µm²) are noise, not nuclei.
MIN_NUCLEUS_UM2 = 8.0
#: A stained pixel must have at least this spread between its channels (grey glass, dust and
#: coverslip edges have none).
MIN_STAIN_SPREAD = 15
#: Tissue within this distance (µm) of ink is not used (the blurred rim of a pen stroke).
INK_RIM_UM = 2.0
#: Connected ink pixels under this area (µm²) are specks (blood cells, dust), not ink.
MIN_INK_UM2 = 200.0
#: Connected pieces of tissue smaller than this (µm²) are loose fragments (debris), not used.
DEBRIS_UM2 = 1500.0
#: Importance weight of a patch's usable tissue fraction ``u``: ``u ** USABLE_POWER``.
USABLE_POWER = 2.0
#: Ink fraction ``k`` of a patch above :data:`INK_TOLERANCE` multiplies its importance by
#: ``exp(-(k - INK_TOLERANCE) / INK_SCALE)`` (1 % of ink: x0.61, 2 %: x0.22, 5 %: x0.01).
INK_SCALE = 0.01
INK_TOLERANCE = 0.005
#: A patch whose sharpness (7th column of :func:`nuclear_features`) is below this is out of
#: focus; its importance is scaled by ``(sharpness / FOCUS_MIN) ** 2`` below it.
FOCUS_MIN = 0.3
#: Connected nuclear regions larger than this (µm², a 22 µm disc) are clusters or blurred
#: blobs, not one nucleus: they count for crowding, not for the mean nuclear area.
MAX_NUCLEUS_UM2 = 400.0

# one image's 4-connectivity in a (B, H, W) stack: never connect across images
_PLANAR = np.zeros((3, 3, 3), dtype=bool)
_PLANAR[1] = ndimage.generate_binary_structure(2, 1)

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


def _drop_small(mask: np.ndarray, min_px: float) -> np.ndarray:
    """``mask`` (B, H, W) without its 4-connected pieces under ``min_px`` pixels (per image)."""
    labels, n = ndimage.label(mask, structure=_PLANAR)
    if not n:
        return mask
    small = np.bincount(labels.ravel(), minlength=n + 1) < min_px
    small[0] = False
    return mask & ~small[labels] if small.any() else mask


def haematoxylin_planes(images: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Haematoxylin concentration, usable tissue and ink of each pixel.

    Parameters
    ----------
    images : ndarray, shape (B, H, W, 3), uint8
        RGB patches.

    Returns
    -------
    (ndarray, ndarray, ndarray)
        ``h`` (B, H, W) float32 haematoxylin as :func:`skimage.color.rgb2hed` (>= 0);
        ``tissue`` (B, H, W) bool, the usable tissue: stained (summed optical density above
        :data:`TISSUE_OD`, with colour: grey glass is not tissue), not ink and not within
        :data:`INK_RIM_UM` of it, and not a loose fragment (a connected piece of tissue
        under :data:`DEBRIS_UM2`; the analysis resolution :data:`ANALYSIS_MPP` is assumed);
        ``ink`` (B, H, W) bool, ink, dye and grey/black matter
        (:func:`wsikit.tissue.stain.ink_mask`) on the stained pixels, with its rim.
    """
    x = _as_images(images)
    ln = _LN_LUT[x]                                         # (B, H, W, 3) float32
    h = ln @ _H_COL
    np.maximum(h, 0.0, out=h)
    absorbs = (ln @ _OD_COL) > np.float32(TISSUE_OD)
    r, g, b = x[..., 0], x[..., 1], x[..., 2]   # channel slices: far faster than axis=-1
    spread = (np.maximum(np.maximum(r, g), b).astype(np.int16)
              - np.minimum(np.minimum(r, g), b))
    stained = absorbs & (spread >= MIN_STAIN_SPREAD)
    ink = ink_mask(x) & absorbs
    if ink.any():   # specks (blood cells, dust) are not ink strokes
        ink = _drop_small(ink, MIN_INK_UM2 / ANALYSIS_MPP ** 2)
    near_ink = ink
    if ink.any():
        rim = max(1, int(round(INK_RIM_UM / ANALYSIS_MPP)))
        near_ink = ndimage.binary_dilation(ink, structure=_PLANAR, iterations=rim)
    tissue = _drop_small(stained & ~near_ink, DEBRIS_UM2 / ANALYSIS_MPP ** 2)
    return h, tissue, ink


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
    """Nuclear measurements, usable tissue, ink and sharpness of each patch.

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
    ndarray, shape (B, 7), float64
        :data:`PATCH_MEASURES`: the four :data:`NUCLEAR_FEATURES` over the usable tissue
        (nuclei/mm², nuclear fraction, mean area µm² of single nuclei, nuclear haematoxylin /
        threshold), then the usable tissue fraction of the patch, its ink fraction and its
        sharpness (mean absolute Laplacian of the haematoxylin over the usable tissue,
        relative to its mean: contrast-free, so pale and dark stains compare).
    """
    return features_from_planes(*haematoxylin_planes(images), threshold=threshold, mpp=mpp)


def features_from_planes(h: np.ndarray, tissue: np.ndarray, ink: np.ndarray, *,
                         threshold: float, mpp: float) -> np.ndarray:
    """:func:`nuclear_features` from the planes of :func:`haematoxylin_planes`.

    Parameters
    ----------
    h : ndarray, shape (B, H, W), float32
        Haematoxylin per pixel.
    tissue : ndarray, shape (B, H, W), bool
        Usable tissue pixels.
    ink : ndarray, shape (B, H, W), bool
        Ink pixels.
    threshold, mpp
        As in :func:`nuclear_features`.
    """
    if not (threshold > 0 and np.isfinite(threshold)):
        raise ModelError(f"nuclear_features: threshold must be a positive number, got "
                         f"{threshold!r}")
    if not (mpp > 0 and np.isfinite(mpp)):
        raise ModelError(f"nuclear_features: mpp must be positive, got {mpp!r}")
    b = h.shape[0]
    out = np.zeros((b, len(PATCH_MEASURES)), dtype=np.float64)
    if b == 0:
        return out
    px_area = float(mpp) ** 2
    nuclear = (h >= threshold) & tissue
    labels, n = ndimage.label(nuclear, structure=_PLANAR)
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
    single = sizes[keep] * px_area <= MAX_NUCLEUS_UM2
    n_single = np.bincount(img_of[single], minlength=b).astype(np.float64)
    single_px = np.bincount(img_of[single], weights=sizes[keep][single], minlength=b)
    flat_t = tissue.reshape(b, -1)
    tissue_px = np.count_nonzero(flat_t, axis=1).astype(np.float64)
    h_tis = np.add.reduce(h.reshape(b, -1), axis=1, dtype=np.float64, where=flat_t)
    safe_t = np.maximum(tissue_px, 1.0)
    out[:, 0] = n_nuclei / (safe_t * px_area) * 1e6
    out[:, 1] = nuc_px / safe_t
    out[:, 2] = np.where(n_single > 0, single_px * px_area / np.maximum(n_single, 1.0), 0.0)
    out[:, 3] = np.where(nuc_px > 0, h_nuc / np.maximum(nuc_px, 1.0), h_tis / safe_t) \
        / threshold
    npx = float(h.shape[1] * h.shape[2])
    out[:, 4] = tissue_px / npx
    out[:, 5] = np.count_nonzero(ink.reshape(b, -1), axis=1) / npx
    # sharpness: detail finer than 3 px over detail finer than 9 px (box-filter residuals) of H
    # on the usable tissue: about 0.3-0.7 in focus at 1 µm/px whatever the tissue and stain,
    # under 0.23 once blurred by 1.5 µm (Gaussian sigma)
    fine = np.abs(h - ndimage.uniform_filter(h, size=(1, 3, 3), mode="nearest"))
    coarse = np.abs(h - ndimage.uniform_filter(h, size=(1, 9, 9), mode="nearest"))
    f_sum = np.add.reduce(fine.reshape(b, -1), axis=1, dtype=np.float64, where=flat_t)
    c_sum = np.add.reduce(coarse.reshape(b, -1), axis=1, dtype=np.float64, where=flat_t)
    out[:, 6] = np.where(c_sum > 0, f_sum / np.maximum(c_sum, 1e-12), 0.0)
    return out


def _robust_z(x: np.ndarray) -> np.ndarray:
    """Robust z-scores (median, MAD), unclipped: an outlier keeps its distance."""
    med = np.median(x)
    scale = 1.4826 * np.median(np.abs(x - med))
    if not scale > 0:
        q75, q25 = np.percentile(x, [75, 25])
        scale = (q75 - q25) / 1.349
    if not scale > 0:
        scale = float(np.std(x))
    if not scale > 0:
        return np.zeros_like(x)
    return (x - med) / scale


def _mid_ranks(primary: np.ndarray, secondary: np.ndarray) -> np.ndarray:
    """1-based ranks by ``primary`` then ``secondary``; rows equal in both share the mean."""
    order = np.lexsort((secondary, primary))
    p, q = primary[order], secondary[order]
    new = np.ones(len(order), bool)
    new[1:] = (p[1:] != p[:-1]) | (q[1:] != q[:-1])
    group = np.cumsum(new) - 1
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(order)) - 1
    ranks = np.empty(len(order), np.float64)
    ranks[order] = 0.5 * (first[group] + last[group]) + 1.0
    return ranks


def importance_scores(features: np.ndarray, tissue_fraction: np.ndarray | None = None, *,
                      ink_fraction: np.ndarray | None = None,
                      sharpness: np.ndarray | None = None) -> np.ndarray:
    """Per-slide importance of each patch from its nuclear features, in ``(0, 1)``.

    Parameters
    ----------
    features : ndarray, shape (N, F) or (N,)
        Per-patch measurements where larger means more salient, e.g. the first four columns
        of :func:`nuclear_features`.
    tissue_fraction : ndarray, shape (N,), optional
        Usable tissue fraction ``u`` per patch in [0, 1] (e.g. the 5th column of
        :func:`nuclear_features`, or ``TileGrid.tissue``); default 1.
    ink_fraction : ndarray, shape (N,), optional
        Ink fraction ``k`` per patch (6th column of :func:`nuclear_features`); default 0.
    sharpness : ndarray, shape (N,), optional
        Sharpness per patch (7th column); below :data:`FOCUS_MIN` a patch is out of focus.

    Returns
    -------
    ndarray, shape (N,), float32
        ``(rank - 0.5) / N`` (mid-ranks for exact ties) of the combined score
        ``log σ(z) + USABLE_POWER · log u - max(0, k - INK_TOLERANCE) / INK_SCALE + log b``:
        ``z`` the mean of ``asinh`` of the robust z-scores of the features (outliers
        compressed, never clipped, so only equal measurements tie), ``b = min(1, sharpness /
        FOCUS_MIN) ** 2`` the focus factor. A patch half empty weighs a quarter of a full one;
        2 % ink divides it by 4.5. Equal combined scores go by ``z``.
    """
    x = np.asarray(features, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ModelError(f"importance_scores: features must be (N, F) or (N,), got shape "
                         f"{x.shape}")
    n = x.shape[0]

    def column(v: np.ndarray | None, default: float, what: str) -> np.ndarray:
        if v is None:
            return np.full(n, default)
        arr = np.asarray(v, dtype=np.float64).reshape(-1)
        if arr.shape[0] != n:
            raise ModelError(f"importance_scores: {n} patches of features but "
                             f"{arr.shape[0]} values of {what}; pass one value per patch")
        return arr

    u = column(tissue_fraction, 1.0, "tissue_fraction")
    k = column(ink_fraction, 0.0, "ink_fraction")
    sharp = None if sharpness is None else column(sharpness, 1.0, "sharpness")
    if not (np.isfinite(x).all() and np.isfinite(u).all() and np.isfinite(k).all()
            and (sharp is None or np.isfinite(sharp).all())):
        raise ModelError("importance_scores: features, tissue_fraction, ink_fraction and "
                         "sharpness must be finite")
    if n == 0:
        return np.zeros(0, dtype=np.float32)
    z = np.column_stack([np.arcsinh(_robust_z(x[:, j])) for j in range(x.shape[1])]
                        ).mean(axis=1)
    u = np.clip(u, 1e-6, 1.0)
    combined = -np.logaddexp(0.0, -z) + USABLE_POWER * np.log(u) \
        - np.clip(k - INK_TOLERANCE, 0.0, 1.0) / INK_SCALE
    if sharp is not None:
        combined += 2.0 * np.log(np.clip(sharp / FOCUS_MIN, 1e-6, 1.0))
    return ((_mid_ranks(combined, z) - 0.5) / n).astype(np.float32)
