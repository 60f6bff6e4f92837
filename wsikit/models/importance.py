"""Weight-free importance of every patch of a slide (nuclear morphology, per-slide ranks).

Each patch of a grid is taken as the reader gives it at the grid's size (e.g. 512 px at
0.5 µm/px) and area-averaged to about 1 µm/px; nuclei are detected on the haematoxylin channel
with a threshold fitted to this slide (Otsu over the tissue haematoxylin of every patch, or of
``pilot`` patches spread over the grid when the grid is too large to hold), nuclear density,
crowding, area and hyperchromasia are measured per patch (:class:`NuclearMeasures`) and the
patches of the slide are ranked on them (:mod:`wsikit.models.nuclear` says what this measures
and what it is not).

One read per patch: :class:`PatchMeasurer` takes the patches batch by batch from another pass
over the same pixels (:func:`wsikit.features.extract.extract_features` feeds it the batches it
embeds, and keeps the measures with the features); :func:`nuclear_importance` ranks measures it is
given, or reads the patches itself when it has none. Both give the same measures.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from ..patches.grid import TileGrid

__all__ = [
    "NuclearImportance",
    "NuclearMeasures",
    "PatchMeasurer",
    "importance_from_measures",
    "nuclear_importance",
]

#: Provenance of the scores (recorded in attention files and evidence.json) and of the
#: measures kept with the features (measures of another definition are not reused).
IMPORTANCE_LABEL = ("heuristic importance nuclear-v3: nuclear density, crowding, area and "
                    "hyperchromasia on the haematoxylin channel of the usable tissue (no ink, "
                    "folds or debris; per-slide Otsu threshold) of each patch area-averaged "
                    "from the grid's patch to ~1 µm/px, robust z-scores weighted by usable "
                    "tissue, ink and focus, ranked per slide (no learned weights; not a "
                    "diagnosis)")


@dataclass(frozen=True, eq=False)
class NuclearMeasures:
    """The measurements behind the importance of every patch of a grid, before ranking.

    Attributes
    ----------
    features : ndarray, shape (N, 7), float64
        :data:`wsikit.models.nuclear.PATCH_MEASURES` of each patch, in grid order.
    threshold : float
        The slide's nuclear haematoxylin threshold.
    analysis_mpp : float
        µm/px at which the patches were analysed.
    label : str
        The definition that measured them (:data:`IMPORTANCE_LABEL`).
    """

    features: np.ndarray
    threshold: float
    analysis_mpp: float
    label: str = IMPORTANCE_LABEL

    def to_h5(self, f: Any) -> None:
        """Write into the open HDF5 file ``f`` as dataset ``nuclear_measures`` (the feature
        file keeps them beside the features)."""
        d = f.create_dataset("nuclear_measures", data=np.asarray(self.features, np.float64))
        d.attrs["threshold"] = float(self.threshold)
        d.attrs["analysis_mpp"] = float(self.analysis_mpp)
        d.attrs["label"] = self.label

    @classmethod
    def from_h5(cls, f: Any, n: int) -> NuclearMeasures | None:
        """The measures in the open HDF5 file ``f`` when they are of the current definition
        and of all ``n`` patches, else None (the importance then reads the patches)."""
        if "nuclear_measures" not in f:
            return None
        d = f["nuclear_measures"]
        label = d.attrs.get("label")
        label = label.decode() if isinstance(label, bytes) else label
        if label != IMPORTANCE_LABEL or d.shape[0] != n:
            return None
        return cls(np.asarray(d[()], np.float64), float(d.attrs["threshold"]),
                   float(d.attrs["analysis_mpp"]))


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
    from .nuclear import ANALYSIS_MPP

    return max(32, int(round(patch_size_l0 * slide_mpp / ANALYSIS_MPP)))


def _tissue_sample(images: np.ndarray | None, per_image: int = 4096, *,
                   planes: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Haematoxylin of up to ``per_image`` tissue pixels of each image (strided)."""
    from .nuclear import haematoxylin_planes

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


def _read_px(grid: TileGrid, px: int) -> int:
    """Side at which the patches are read before area-averaging to ``px``: the grid's patch
    size (what the feature pass reads) unless that is coarser than the analysis."""
    return max(int(grid.patch_px), px)


def _to_analysis(images: np.ndarray, px: int) -> np.ndarray:
    """``(B, S, S, 3)`` uint8 patches at ``(B, px, px, 3)``: the mean of each ``f x f`` block
    (rounded half up) when ``S = f * px``, else the readers' anti-aliased resize."""
    b, side = images.shape[0], images.shape[1]
    if side == px:
        return np.ascontiguousarray(images)
    if side % px == 0:
        f = side // px
        # f*f strided adds into one accumulator: several times faster than a reduction over
        # the two block axes of a 6-d view (which numpy walks element by element)
        acc = np.full((b, px, px, 3), (f * f) // 2, np.uint16 if f <= 16 else np.uint32)
        for i in range(f):
            for j in range(f):
                acc += images[:, i::f, j::f]
        acc //= f * f
        return acc.astype(np.uint8)
    from ..slide.region_resize import resize_uint8

    return np.stack([resize_uint8(im, (px, px)) for im in images]) if b else \
        np.zeros((0, px, px, 3), np.uint8)


class PatchMeasurer:
    """Measures the importance inputs of a grid's patches from batches read for another pass.

    Construct it for the grid, hand it every batch of patches read at :attr:`read_px` in any
    order (:meth:`add`), then :meth:`finish`. A grid whose planes fit in ``max_memory_mb`` (or
    with at most ``pilot`` patches) keeps them and fits the slide's threshold on all of its
    patches at the end; a larger one fits it first on ``pilot`` patches spread over the grid
    (read here at the first batch, the only patches read twice) and measures every batch as
    it comes.

    Parameters
    ----------
    slide_path : path-like
        The slide of the grid (read only for the pilot of a large grid).
    grid : TileGrid
        Patches (level-0 boxes).
    mpp : float, optional
        Level-0 µm/px override passed to the reader.
    pilot : int
        Patches that fit the threshold of a large grid.
    max_memory_mb : float
        Memory for the planes of a grid measured at the end.
    batch_size : int
        Patches per batch of the pilot read.
    background : bool
        Measure each batch on a worker thread (after taking it to the analysis size here,
        so the caller's buffer is free on return), overlapping the caller's next batch; at
        most two batches wait. :meth:`finish` waits for them.
    on_bad_tile : {"fail", "skip"}
        What a damaged tile does when patches are read, as for
        :func:`wsikit.slide.open_slide`.
    """

    def __init__(self, slide_path: str | os.PathLike[str], grid: TileGrid, *,
                 mpp: float | None = None, pilot: int = 64, max_memory_mb: float = 512.0,
                 batch_size: int = 64, background: bool = False,
                 on_bad_tile: str = "fail") -> None:
        self.slide_path = slide_path
        self.on_bad_tile = on_bad_tile
        self.grid = grid
        self.mpp = mpp
        self.boxes = np.asarray(grid.boxes)
        self.n = n = len(self.boxes)
        size_l0 = float(self.boxes[0, 2]) if n else float(grid.patch_size_l0)
        #: side (px) at which nuclei are measured (~1 µm/px) and at which patches are read
        self.px = analysis_px(size_l0, grid.slide_mpp)
        self.read_px = _read_px(grid, self.px)
        self.analysis_mpp = size_l0 * grid.slide_mpp / self.px
        self.batch_size = batch_size
        #: seconds spent reading (the pilot) and computing, for :func:`nuclear_importance`
        self.timings = {"read_s": 0.0, "compute_s": 0.0}
        from .nuclear import PATCH_MEASURES

        self.features = np.zeros((n, len(PATCH_MEASURES)), np.float64)
        self._planes: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._seen = np.zeros(n, bool)
        self.threshold: float | None = None
        self._pool = (ThreadPoolExecutor(1, thread_name_prefix="wsikit-importance")
                      if background else None)
        self._pending: deque[Future[None]] = deque()
        self._pilot = (np.unique(np.linspace(0, n - 1, pilot).round().astype(np.int64))
                       if n > pilot and n * self.px * self.px * 8 > max_memory_mb * 2 ** 20
                       else None)

    def read(self, sel: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        """``(start, (B, read_px, read_px, 3) uint8)`` batches of the patches ``sel``, read
        in this process (``start`` indexes ``sel``)."""
        from ..slide.patch_stream import PatchStream

        stream = iter(PatchStream(self.slide_path, self.boxes[sel], self.read_px,
                                  batch_size=self.batch_size, mpp=self.mpp,
                                  level0_size=self.grid.level0_size,
                                  on_bad_tile=self.on_bad_tile))
        while True:
            t0 = time.perf_counter()
            item = next(stream, None)
            self.timings["read_s"] += time.perf_counter() - t0
            if item is None:
                return
            yield int(item[0]), item[1].permute(0, 2, 3, 1).numpy()

    def _fit_on_pilot(self, idx: np.ndarray) -> None:
        from .nuclear import haematoxylin_planes, nuclear_threshold

        sample = []
        for _, b in self.read(idx):
            t0 = time.perf_counter()
            sample.append(_tissue_sample(None, planes=haematoxylin_planes(
                _to_analysis(b, self.px))[:2]))
            self.timings["compute_s"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        self.threshold = nuclear_threshold(np.concatenate(sample)).value
        self.timings["compute_s"] += time.perf_counter() - t0

    def add(self, start: int, images: np.ndarray) -> None:
        """Measure patches ``start .. start + B`` of the grid from ``(B, read_px, read_px, 3)``
        uint8 pixels (a view of a reused buffer is fine: nothing keeps it)."""
        b = images.shape[0]
        if images.shape[1:] != (self.read_px, self.read_px, 3) or not 0 <= start <= self.n - b:
            raise ValueError(f"PatchMeasurer.add: patches {start}..{start + b} of "
                             f"{images.shape} do not fit the grid's {self.n} patches read at "
                             f"{self.read_px} px")
        if self._pilot is not None:  # a large grid: its threshold first, from the pilot
            pilot, self._pilot = self._pilot, None
            self._fit_on_pilot(pilot)
        t0 = time.perf_counter()
        small = _to_analysis(images, self.px)  # a new array: the caller's buffer is free
        self._seen[start:start + b] = True
        self.timings["compute_s"] += time.perf_counter() - t0
        if self._pool is None:
            self._measure(start, small)
            return
        while len(self._pending) >= 2:
            self._pending.popleft().result()
        self._pending.append(self._pool.submit(self._measure, start, small))

    def _measure(self, start: int, small: np.ndarray) -> None:
        from .nuclear import features_from_planes, haematoxylin_planes

        t0 = time.perf_counter()
        planes = haematoxylin_planes(small)
        if self.threshold is None:
            self._planes[start] = planes
        else:
            self.features[start:start + len(small)] = features_from_planes(
                *planes, threshold=self.threshold, mpp=self.analysis_mpp)
        self.timings["compute_s"] += time.perf_counter() - t0

    def close(self) -> None:
        """Stop the worker thread without waiting for the batches still queued (after a
        failed pass; :meth:`finish` is the normal end)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._pending.clear()

    def _drain(self) -> None:
        try:
            while self._pending:
                self._pending.popleft().result()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None

    def finish(self) -> NuclearMeasures:
        """The measures of every patch (each must have been added)."""
        from .nuclear import features_from_planes, nuclear_threshold

        self._drain()
        if not self._seen.all():
            raise ValueError(f"PatchMeasurer.finish: {int((~self._seen).sum())} of {self.n} "
                             "patches were never added")
        t0 = time.perf_counter()
        if self.threshold is None:
            # Batch by batch, never the whole grid's planes at once: the threshold's sample
            # is per patch and the measures of a patch depend only on its own planes, so
            # this equals one pass over the concatenation without its copy and temporaries.
            starts = sorted(self._planes)
            self.threshold = (nuclear_threshold(np.concatenate(
                [_tissue_sample(None, planes=self._planes[s][:2]) for s in starts])).value
                if starts else 0.05)
            for s in starts:
                h, t, ink = self._planes.pop(s)
                self.features[s:s + len(h)] = features_from_planes(
                    h, t, ink, threshold=self.threshold, mpp=self.analysis_mpp)
        self.timings["compute_s"] += time.perf_counter() - t0
        return NuclearMeasures(self.features, float(self.threshold), self.analysis_mpp)


def importance_from_measures(measures: NuclearMeasures, grid: TileGrid) -> NuclearImportance:
    """Rank the patches of ``grid`` on their ``measures`` (the usable tissue of a patch is no
    more than the grid's tissue fraction allows, e.g. folds)."""
    from .nuclear import importance_scores

    feats = measures.features
    n = len(feats)
    if n == 0:
        return NuclearImportance(np.zeros(0, np.float32), feats, measures.threshold,
                                 measures.analysis_mpp)
    usable = feats[:, 4]
    mask_tissue = np.asarray(getattr(grid, "tissue", np.ones(n)), np.float64).reshape(-1)
    if mask_tissue.shape == (n,):   # a TRIDENT/CLAM grid may not know it (NaN)
        usable = np.minimum(usable, np.where(np.isfinite(mask_tissue), mask_tissue, 1.0))
    scores = importance_scores(feats[:, :4], usable, ink_fraction=feats[:, 5],
                               sharpness=feats[:, 6])
    return NuclearImportance(scores, feats, measures.threshold, measures.analysis_mpp)


def nuclear_importance(slide_path: str | os.PathLike[str], grid: TileGrid, *,
                       batch_size: int = 64, mpp: float | None = None, pilot: int = 64,
                       progress: bool | None = None, max_memory_mb: float = 512.0,
                       timings: dict[str, float] | None = None,
                       measures: NuclearMeasures | None = None,
                       on_bad_tile: str = "fail") -> NuclearImportance:
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
        threshold fitted on all of its patches; a larger one fits it on the pilot first.
    timings : dict, optional
        Filled with ``read_s`` (reading and decoding the patches) and ``compute_s`` (the
        threshold, the nuclear features and the scores), in seconds.
    measures : NuclearMeasures, optional
        The grid's measures from a pass that already read the patches (the features pass of
        :func:`wsikit.features.extract.extract_features`): nothing is read. Measures of another
        grid size or definition are refused.
    on_bad_tile : {"fail", "skip"}
        What a damaged tile does, as for :func:`wsikit.slide.open_slide`.
    """
    from ..outputs.progress import progress as bar

    if measures is not None:
        if len(measures.features) != len(grid) or measures.label != IMPORTANCE_LABEL:
            raise ValueError(f"nuclear_importance: measures of {len(measures.features)} "
                             f"patches ({measures.label[:40]}...) do not belong to this grid "
                             f"of {len(grid)} patches and {IMPORTANCE_LABEL[:40]}...")
        t0 = time.perf_counter()
        imp = importance_from_measures(measures, grid)
        if timings is not None:
            timings.update({"read_s": 0.0, "compute_s": time.perf_counter() - t0})
        return imp
    measurer = PatchMeasurer(slide_path, grid, mpp=mpp, pilot=pilot,
                             max_memory_mb=max_memory_mb, batch_size=batch_size,
                             on_bad_tile=on_bad_tile)
    with bar(total=measurer.n, enabled=progress, desc="importance", unit="patch") as pbar:
        for start, b in measurer.read(np.arange(measurer.n)):
            measurer.add(start, b)
            pbar.update(len(b))
    found = measurer.finish()
    t0 = time.perf_counter()
    imp = importance_from_measures(found, grid)
    measurer.timings["compute_s"] += time.perf_counter() - t0
    if timings is not None:
        timings.update(measurer.timings)
    return imp
