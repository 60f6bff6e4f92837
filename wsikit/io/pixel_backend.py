"""The fastest backend that gives the slide reader's pixels: tiffslide where it equals OpenSlide.

The slide reader (:meth:`wsikit.io.Slide.source_region`, used for every format the direct
tile reader does not serve) spends most of its time in OpenSlide's ``read_region``; for the
files tiffslide also reads, tiffslide decodes the same JPEG tiles about 3× faster with the
same pixels (``benchmarks/results/bench_slide_readers.md``). :func:`open_pixel_slide` opens
the slide as :func:`wsikit.io.open_slide` does and switches to tiffslide only where that gives
the same pyramid (level sizes and downsamples) and the same pixels on a probe of every level;
anything else, including every format tiffslide cannot read, stays with the default backend.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

from ..errors import WsikitError
from .slide import Slide, open_slide

__all__ = ["open_pixel_slide"]

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


def same_pixels(a: Slide, b: Slide) -> bool:
    """Whether ``a`` and ``b`` have the same pyramid and pixels on the probes of every level."""
    if a.level_dimensions != b.level_dimensions or not np.allclose(
            a.level_downsamples, b.level_downsamples, rtol=0, atol=1e-9):
        return False
    return all(np.array_equal(a.read_region(xy, level, size), b.read_region(xy, level, size))
               for level, xy, size in _probes(a))


def open_pixel_slide(path: str | os.PathLike[str], *, mpp: float | None = None,
                     require_mpp: bool = False) -> Slide:
    """The slide for pixel reads: tiffslide where it reads ``path`` as OpenSlide does.

    Parameters
    ----------
    path : path-like
    mpp : float, optional
        Level-0 µm/px, as for :func:`wsikit.io.open_slide`.
    require_mpp : bool

    Returns
    -------
    Slide
        Opened with ``backend="tiffslide"`` when the default is OpenSlide and tiffslide gives
        the same pyramid and probe pixels; otherwise the default :func:`open_slide` result.
    """
    default = open_slide(path, mpp=mpp, require_mpp=require_mpp)
    if default.backend != "openslide":
        return default
    try:
        alt = open_slide(path, backend="tiffslide", mpp=mpp, require_mpp=require_mpp)
    except WsikitError:
        return default
    try:
        same = same_pixels(default, alt)
    except WsikitError:
        same = False
    keep, drop = (alt, default) if same else (default, alt)
    with contextlib.suppress(WsikitError, OSError):
        drop.close()
    return keep
