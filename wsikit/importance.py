"""Weight-free importance of every patch of a slide (nuclear morphology, per-slide ranks).

:func:`nuclear_importance` reads each patch of a grid at about 1 µm/px, detects nuclei on the
haematoxylin channel with a threshold fitted to this slide (Otsu over the tissue haematoxylin
of up to ``pilot`` patches spread over the grid), measures nuclear density, crowding, area and
hyperchromasia per patch and ranks the patches of the slide on them
(:mod:`wsikit.models.nuclear` says what this measures and what it is not).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .patching import TileGrid

__all__ = ["IMPORTANCE_LABEL", "NuclearImportance", "analysis_px", "nuclear_importance"]

#: Provenance of the scores (recorded in attention files and evidence.json).
IMPORTANCE_LABEL = ("heuristic importance nuclear-v2: nuclear density, crowding, area and "
                    "hyperchromasia on the haematoxylin channel of the usable tissue (no ink, "
                    "folds or debris; per-slide Otsu threshold), robust z-scores weighted by "
                    "usable tissue, ink and focus, ranked per slide (no learned weights; not a "
                    "diagnosis)")


@dataclass(frozen=True)
class NuclearImportance:
    """Per-patch importance and the measurements behind it.

    Attributes
    ----------
    scores : ndarray, shape (N,), float32
        Rank-normalised importance in (0, 1), aligned with the grid.
    features : ndarray, shape (N, 7), float64
        :data:`wsikit.models.nuclear.PATCH_MEASURES` of each patch (nuclear features, usable
        tissue, ink, sharpness).
    threshold : float
        The slide's nuclear haematoxylin threshold.
    analysis_mpp : float
        µm/px at which the patches were analysed.
    """

    scores: np.ndarray
    features: np.ndarray
    threshold: float
    analysis_mpp: float


def analysis_px(patch_size_l0: float, slide_mpp: float) -> int:
    """Side in px at which a patch of ``patch_size_l0`` level-0 px is analysed (~1 µm/px)."""
    from .models.nuclear import ANALYSIS_MPP

    return max(32, int(round(patch_size_l0 * slide_mpp / ANALYSIS_MPP)))


def _tissue_sample(images: np.ndarray | None, per_image: int = 4096, *,
                   planes: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Haematoxylin of up to ``per_image`` tissue pixels of each image (strided)."""
    from .models.nuclear import haematoxylin_planes

    if planes is None:
        assert images is not None  # callers pass the images or their planes
        planes = haematoxylin_planes(images)[:2]
    h, t = planes
    out = []
    for hi, ti in zip(h, t, strict=True):
        v = hi[ti]
        if v.size > per_image:
            v = v[:: -(-v.size // per_image)]
        out.append(v)
    return np.concatenate(out) if out else np.zeros(0, np.float32)


def nuclear_importance(slide_path: str | os.PathLike[str], grid: TileGrid, *,
                       batch_size: int = 64, mpp: float | None = None, pilot: int = 64,
                       progress: bool | None = None, max_memory_mb: float = 512.0,
                       timings: dict[str, float] | None = None) -> NuclearImportance:
    """Importance of every patch of ``grid`` (see the module docstring).

    Parameters
    ----------
    slide_path : path-like
        The slide of the grid.
    grid : TileGrid
        Patches (level-0 boxes).
    batch_size : int
        Patches read per batch.
    mpp : float, optional
        Level-0 µm/px override passed to the reader.
    pilot : int
        Patches (spread evenly over the grid) whose tissue haematoxylin fits the threshold
        when the grid is too large to hold in memory.
    max_memory_mb : float
        A grid whose patches and planes fit in this much memory is read once and its
        threshold fitted on all of its patches; a larger one is read twice (pilot, then all).
    timings : dict, optional
        Filled with ``read_s`` (reading and decoding the patches) and ``compute_s`` (the
        threshold, the nuclear features and the scores), in seconds.
    """
    import time

    from ._progress import progress as bar
    from .io.patch_stream import PatchStream
    from .models.nuclear import (
        PATCH_MEASURES,
        features_from_planes,
        haematoxylin_planes,
        importance_scores,
        nuclear_features,
        nuclear_threshold,
    )

    boxes = np.asarray(grid.boxes)
    n = len(boxes)
    size_l0 = float(boxes[0, 2]) if n else float(grid.patch_size_l0)
    px = analysis_px(size_l0, grid.slide_mpp)
    a_mpp = size_l0 * grid.slide_mpp / px
    if n == 0:
        return NuclearImportance(np.zeros(0, np.float32), np.zeros((0, len(PATCH_MEASURES))),
                                 0.05, a_mpp)

    clock = {"read_s": 0.0, "compute_s": 0.0}

    def batches(sel: np.ndarray):
        stream = iter(PatchStream(slide_path, boxes[sel], px, batch_size=batch_size, mpp=mpp,
                                  level0_size=grid.level0_size))
        while True:
            t0 = time.perf_counter()
            item = next(stream, None)
            clock["read_s"] += time.perf_counter() - t0
            if item is None:
                return
            yield item[0], item[1].permute(0, 2, 3, 1).numpy()

    def timed(fn, *args, **kwargs):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        clock["compute_s"] += time.perf_counter() - t0
        return out

    feats = np.zeros((n, len(PATCH_MEASURES)), np.float64)
    with bar(total=n, enabled=progress, desc="importance", unit="patch") as pbar:
        if n * px * px * 8 <= max_memory_mb * 2 ** 20 or n <= pilot:
            # uint8 RGB + float32 H + bool tissue = 8 bytes per pixel: read once, plane once
            images = np.concatenate([b for _, b in batches(np.arange(n))])
            planes = timed(haematoxylin_planes, images)
            del images
            thr = timed(lambda: nuclear_threshold(_tissue_sample(None, planes=planes[:2])))
            feats[:] = timed(features_from_planes, *planes, threshold=thr.value, mpp=a_mpp)
            pbar.update(n)
        else:
            idx = np.unique(np.linspace(0, n - 1, pilot).round().astype(np.int64))
            sample = [timed(_tissue_sample, b) for _, b in batches(idx)]
            thr = timed(lambda: nuclear_threshold(np.concatenate(sample)))
            for start, b in batches(np.arange(n)):
                feats[start:start + len(b)] = timed(nuclear_features, b, threshold=thr.value,
                                                    mpp=a_mpp)
                pbar.update(len(b))
    # usable tissue: what the patch's pixels show, and no more than the mask (folds) allows
    usable = feats[:, 4]
    mask_tissue = np.asarray(getattr(grid, "tissue", np.ones(n)), np.float64).reshape(-1)
    if mask_tissue.shape == (n,):   # a TRIDENT/CLAM grid may not know it (NaN)
        usable = np.minimum(usable, np.where(np.isfinite(mask_tissue), mask_tissue, 1.0))
    scores = timed(importance_scores, feats[:, :4], usable, ink_fraction=feats[:, 5],
                   sharpness=feats[:, 6])
    if timings is not None:
        timings.update(clock)
    return NuclearImportance(scores, feats, thr.value, a_mpp)
