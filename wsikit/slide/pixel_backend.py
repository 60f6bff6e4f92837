"""The fastest backend that gives the slide reader's pixels: one that equals OpenSlide's.

The slide reader (:meth:`wsikit.slide.Slide.source_region`, used for every format the direct
tile reader does not serve) spends most of its time in OpenSlide's ``read_region``. Faster
readers give the same pixels on some formats (``benchmarks/results/bench_slide_readers.md``):
wsikit's own NDPI reader (:mod:`wsikit.slide.ndpi`, restart intervals decoded a column at a time)
on Hamamatsu NDPI, pyvips (libvips ``tiffload``, optional extra ``pyvips``) and tiffslide on
tiled TIFF pyramids whose pages are OpenSlide's levels. :func:`open_pixel_slide` opens the slide
as :func:`wsikit.slide.open_slide` does and switches to the first of :data:`FAST_BACKENDS` that
gives the same pyramid (level sizes and downsamples) and the same pixels on a probe of every
level; anything else (MRXS, DICOM, SCN, …, or a file where no candidate matches) stays with
the default backend.
"""

from __future__ import annotations

import contextlib
import math
import os

import numpy as np

from ..errors import WsikitError
from .slide import Slide, open_slide

__all__ = ["open_pixel_slide", "same_pixels", "FAST_BACKENDS"]

#: Backends tried in this order in place of OpenSlide (the first with its pixels wins).
FAST_BACKENDS = ("ndpi", "pyvips", "tiffslide")

#: Side of the probe regions compared on every level (level pixels).
PROBE_PX = 256


def _probes(slide: Slide) -> list[tuple[int, tuple[int, int], tuple[int, int]]]:
    """``(level, level-0 xy, size)`` of a centre and a top-left-quarter probe per level."""
    out = []
    for level, (w, h) in enumerate(slide.level_dimensions):
        ds = slide.level_downsamples[level]
        size = (min(PROBE_PX, w), min(PROBE_PX, h))
        for fx, fy in ((0.5, 0.5), (0.25, 0.3)):
            lx, ly = int((w - size[0]) * fx), int((h - size[1]) * fy)
            out.append((level, (int(round(lx * ds)), int(round(ly * ds))), size))
    return out


def same_pixels(a: Slide, b: Slide, *, reference: list[np.ndarray] | None = None) -> bool:
    """Whether ``a`` and ``b`` have the same pyramid and pixels on the probes of every level.

    ``reference``, when given, holds ``a``'s probe pixels (:func:`_probes` order) so that
    several candidates ``b`` are compared without reading ``a`` again.
    """
    if a.level_dimensions != b.level_dimensions or not np.allclose(
            a.level_downsamples, b.level_downsamples, rtol=0, atol=1e-9):
        return False
    probes = _probes(a)
    ref = reference if reference is not None else [a.read_region(xy, level, size)
                                                   for level, xy, size in probes]
    return all(np.array_equal(r, b.read_region(xy, level, size))
               for r, (level, xy, size) in zip(ref, probes, strict=True))


def open_pixel_slide(path: str | os.PathLike[str], *, mpp: float | None = None,
                     require_mpp: bool = False, on_bad_tile: str = "fail") -> Slide:
    """The slide for pixel reads: the first of :data:`FAST_BACKENDS` that reads ``path`` as
    OpenSlide does.

    Parameters
    ----------
    path : path-like
    mpp : float, optional
        Level-0 µm/px, as for :func:`wsikit.slide.open_slide`.
    require_mpp : bool
    on_bad_tile : {"fail", "skip"}
        What a damaged tile does, as for :func:`wsikit.slide.open_slide`.

    Returns
    -------
    Slide
        Opened with the first backend of :data:`FAST_BACKENDS` that gives the same pyramid
        and probe pixels when the default is OpenSlide (with the default backend's level-0
        µm/px); otherwise the default :func:`open_slide` result.
    """
    default = open_slide(path, mpp=mpp, require_mpp=require_mpp, on_bad_tile=on_bad_tile)
    if default.backend != "openslide":
        return default
    reference: list[np.ndarray] | None = None
    # the default backend's resolution, so a candidate never reads the metadata otherwise
    # (or warns about it a second time)
    same_mpp = default.mpp if mpp is None and math.isfinite(default.mpp) else mpp
    for name in FAST_BACKENDS:
        try:
            alt = open_slide(path, backend=name, mpp=same_mpp, require_mpp=require_mpp,
                             on_bad_tile=on_bad_tile)
        except WsikitError:
            continue
        try:
            if reference is None and alt.level_dimensions == default.level_dimensions:
                reference = [default.read_region(xy, level, size)
                             for level, xy, size in _probes(default)]
            same = same_pixels(default, alt, reference=reference)
        except WsikitError:
            same = False
        if same:
            alt.mpp_source = default.mpp_source if mpp is None else alt.mpp_source
            with contextlib.suppress(WsikitError, OSError):
                default.close()
            return alt
        with contextlib.suppress(WsikitError, OSError):
            alt.close()
    return default
