"""One :class:`Slide` interface over OpenSlide, tiffslide and plain images.

``open_slide`` tries OpenSlide first (SVS, NDPI, MRXS, SCN, generic tiled TIFF), then
tiffslide (TIFFs OpenSlide rejects), then a plain image (PNG/JPEG/flat TIFF, one level).
DICOM WSI (a series folder or one of its files) is read by ``wsidicom`` (:mod:`.dicom`). When
nothing can open the file, one :class:`~wsikit.errors.SlideError` names the file and every
backend's reason.

Pixels are always ``(H, W, 3) uint8`` RGB; transparent pixels (outside the scanned area) are
composited onto white, and reads that extend past the slide are padded with white.

This module holds :func:`open_slide` (choosing a backend, the file and size checks) and the
:class:`Slide` on top of it (levels, region geometry at exact µm/px, resampling, damaged
tiles); the backends themselves, which only read level pixels, are in :mod:`.backends`.
"""

from __future__ import annotations

import contextlib
import math
import os
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any

import numpy as np
from PIL import Image

from .._hints import expect, keyword, option
from ..errors import MppError, SlideError, WsikitError
from .backends import _BACKEND_CLASSES, _Backend
from .dicom import is_dicom
from .filecheck import _check_tiff_extent, _quiet, check_openable
from .mpp import check_mpp, objective_power, resolve_mpp
from .mpp_estimate import MppEstimate

__all__ = ["Slide", "open_slide", "BACKENDS", "bad_tile_policy", "slide_of", "slide_stem"]

#: Backends in the order ``open_slide`` tries them.
BACKENDS = ("openslide", "tiffslide", "image", "omezarr")

#: What to do with a tile that cannot be decoded: ``fail`` (default: one error naming the
#: level and position of the tile) or ``skip`` (read it as white, record it in
#: :attr:`Slide.bad_tiles`, warn once per tile). ``open_slide(on_bad_tile=...)``; a run
#: passes :attr:`wsikit.run.options.RunSettings.on_bad_tile` (``wsikit --on-bad-tile``).
BAD_TILE_POLICIES = ("fail", "skip")

#: Relative slack when matching a requested downsample to a pyramid level: Aperio level sizes
#: are rounded, so a "4x" level may have downsample 4.0018; it still counts as 4.
LEVEL_TOLERANCE = 0.01

_RESAMPLE = {
    "nearest": Image.Resampling.NEAREST,
    "bilinear": Image.Resampling.BILINEAR,
    "bicubic": Image.Resampling.BICUBIC,
    "lanczos": Image.Resampling.LANCZOS,
    "box": Image.Resampling.BOX,
}
#: Largest side a slide may claim (px). 10 million px is 2.5 m at 0.25 µm/px: a header claiming
#: more (e.g. 2^31 x 2^31) is damaged or hostile, and would make every later step allocate it.
MAX_SIDE_PX = 10_000_000
# Pillow's decompression-bomb limit (Image.MAX_IMAGE_PIXELS, about 179 million px for an
# error) stays on: a plain PNG/JPEG slide above it is refused with the advice to convert it to a
# tiled pyramidal TIFF, which wsikit reads tile by tile instead of decoding whole.


class Slide:
    """An open whole-slide image (use :func:`open_slide`).

    Attributes
    ----------
    path : Path
    name : str
        File stem, used to name outputs.
    backend : {"openslide", "tiffslide", "image", "omezarr", "dicom", "ndpi", "pyvips"}
    dimensions : (int, int)
        Level-0 ``(width, height)`` in pixels.
    level_count : int
    level_dimensions : tuple of (int, int)
    level_downsamples : tuple of float
    vendor : str or None
    properties : Mapping[str, str]
        Backend properties in OpenSlide naming.
    mpp : float
        Level-0 µm/px (``nan`` only when opened with ``require_mpp=False`` and unknown).
    mpp_source : str
        ``"user"``, ``"openslide.mpp"``, ``"aperio.MPP"``, ``"tiff.resolution"``,
        ``"objective-power"``, ``"estimated from nuclei"`` (or ``"unknown"``).
    objective_power : float or None
    """

    def __init__(self, path: Path, backend: _Backend, mpp: float, mpp_source: str, *,
                 on_bad_tile: str = "fail") -> None:
        self.path = path
        self.on_bad_tile = on_bad_tile
        #: Tiles read as white under ``on_bad_tile="skip"``: dicts with ``level``, ``x``,
        #: ``y`` (level pixels of the tile's top-left), ``width``, ``height``, ``reason``.
        self.bad_tiles: list[dict[str, Any]] = []
        self.name = slide_stem(path)
        self._backend = backend
        self.backend: str = backend.name
        self.level_dimensions: tuple[tuple[int, int], ...] = backend.level_dimensions
        self.level_downsamples: tuple[float, ...] = backend.level_downsamples
        self.level_count = len(self.level_dimensions)
        self.dimensions: tuple[int, int] = self.level_dimensions[0]
        self.properties: Mapping[str, str] = MappingProxyType(dict(backend.properties))
        vendor = (self.properties.get("openslide.vendor")
                  or self.properties.get("tiffslide.vendor"))
        self.vendor: str | None = vendor or None
        self.mpp = float(mpp)
        self.mpp_source = mpp_source
        self.objective_power = objective_power(self.properties)
        self._associated: Mapping[str, np.ndarray] | None = None
        self._closed = False

    # -- life cycle ---------------------------------------------------------------------
    def __enter__(self) -> Slide:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Release the file handle (idempotent)."""
        if not self._closed:
            self._closed = True
            self._backend.close()

    def __repr__(self) -> str:
        w, h = self.dimensions
        return (f"Slide({self.name!r}, {w}x{h}, levels={self.level_count}, "
                f"mpp={self.mpp:.4g} ({self.mpp_source}), backend={self.backend!r})")

    # -- metadata -----------------------------------------------------------------------
    @property
    def associated_images(self) -> Mapping[str, np.ndarray]:
        """Label, macro, thumbnail… as ``(H, W, 3) uint8`` arrays (read on first access)."""
        if self._associated is None:
            self._check_open()
            self._associated = MappingProxyType(self._backend.associated())
        return self._associated

    def best_level(self, downsample: float) -> int:
        """Index of the level with the largest downsample ``<= downsample`` (1 % slack)."""
        best = 0
        for i, ds in enumerate(self.level_downsamples):
            if ds <= downsample * (1.0 + LEVEL_TOLERANCE) and ds >= self.level_downsamples[best]:
                best = i
        return best

    def _check_open(self) -> None:
        if self._closed:
            raise SlideError(f"{self.path}: slide is closed; open it again with open_slide()")

    # -- pixels -------------------------------------------------------------------------
    def _read_level(self, level: int, lx: int, ly: int, w: int, h: int) -> np.ndarray:
        """(h, w, 3) uint8 of level pixels ``[ly, ly+h) × [lx, lx+w)``; white outside."""
        self._check_open()
        if not 0 <= level < self.level_count:
            raise SlideError(f"{self.path}: level {level} does not exist "
                             f"(the slide has {self.level_count} levels)")
        if w <= 0 or h <= 0:
            raise SlideError(f"{self.path}: region size must be positive, got {w}x{h}")
        lw, lh = self.level_dimensions[level]
        x0, y0 = max(lx, 0), max(ly, 0)
        x1, y1 = min(lx + w, lw), min(ly + h, lh)
        try:
            if x0 == lx and y0 == ly and x1 == lx + w and y1 == ly + h:
                out = self._backend.read(level, lx, ly, w, h)
                return out if out.flags.writeable else out.copy()
            out = np.full((h, w, 3), 255, np.uint8)
            if x1 > x0 and y1 > y0:
                out[y0 - ly:y1 - ly, x0 - lx:x1 - lx] = self._backend.read(
                    level, x0, y0, x1 - x0, y1 - y0)
            return out
        except SlideError:
            raise
        except Exception as exc:
            return self._read_by_tiles(level, lx, ly, w, h, exc)

    def _tile_size(self, level: int) -> tuple[int, int]:
        p = self.properties
        try:
            return (int(p[f"openslide.level[{level}].tile-width"]),
                    int(p[f"openslide.level[{level}].tile-height"]))
        except (KeyError, ValueError):
            return 256, 256

    def _reopen(self) -> None:
        """A fresh backend handle (OpenSlide refuses every read after one decode error)."""
        with contextlib.suppress(Exception):
            self._backend.close()
        self._backend = _open_backend(self.backend, self.path)

    def _read_by_tiles(self, level: int, lx: int, ly: int, w: int, h: int,
                       first: BaseException) -> np.ndarray:
        """Re-read a region that failed tile by tile: name the damaged tile(s), or skip them.

        Raises
        ------
        SlideError
            With ``on_bad_tile="fail"``: names the level and level-pixel position of the first
            damaged tile and the fix; also when no single tile is to blame.
        """
        lw, lh = self.level_dimensions[level]
        tw, th = self._tile_size(level)
        out = np.full((h, w, 3), 255, np.uint8)
        bad: list[dict[str, Any]] = []
        try:
            self._reopen()
        except Exception as exc:
            raise SlideError(f"{self.path}: cannot read level {level} region ({lx}, {ly}, "
                             f"{w}x{h}) with {self.backend}: {first}; reopening the file "
                             f"failed too ({exc}). The file may be damaged or truncated."
                             ) from first
        x0, y0 = max(lx, 0), max(ly, 0)
        x1, y1 = min(lx + w, lw), min(ly + h, lh)
        for ty in range((y0 // th) * th, y1, th):
            for tx in range((x0 // tw) * tw, x1, tw):
                bx0, by0 = max(tx, x0), max(ty, y0)
                bx1, by1 = min(tx + tw, x1), min(ty + th, y1)
                try:
                    block = self._backend.read(level, bx0, by0, bx1 - bx0, by1 - by0)
                except Exception as exc:
                    bad.append({"level": level, "x": tx, "y": ty, "width": tw, "height": th,
                                "reason": f"{type(exc).__name__}: {exc}"})
                    if self.on_bad_tile != "skip":
                        break
                    self._reopen()
                    continue
                out[by0 - ly:by1 - ly, bx0 - lx:bx1 - lx] = block
            if bad and self.on_bad_tile != "skip":
                break
        if not bad:
            raise SlideError(f"{self.path}: cannot read level {level} region ({lx}, {ly}, "
                             f"{w}x{h}) with {self.backend}: {first}. The file may be damaged "
                             "or truncated.") from first
        t = bad[0]
        where = (f"tile at level {level}, x={t['x']}, y={t['y']} ({t['width']}x{t['height']} "
                 f"px; level-0 x={round(t['x'] * self.level_downsamples[level])}, "
                 f"y={round(t['y'] * self.level_downsamples[level])})")
        if self.on_bad_tile != "skip":
            raise SlideError(f"{self.path}: damaged {where}: {t['reason']}. Copy the slide "
                             f"again, or pass {option('on_bad_tile', 'skip')} to process it "
                             "with damaged tiles left white (they are recorded)") from first
        for t in bad:
            key = (t["level"], t["x"], t["y"])
            if all((b["level"], b["x"], b["y"]) != key for b in self.bad_tiles):
                self.bad_tiles.append(t)
                warnings.warn(f"{self.path}: damaged tile at level {t['level']}, x={t['x']}, "
                              f"y={t['y']} read as white ({option('on_bad_tile', 'skip')})",
                              UserWarning, stacklevel=4)
        return out

    def read_region(self, l0_xy: tuple[int, int], level: int, size: tuple[int, int]
                    ) -> np.ndarray:
        """Read ``size`` = ``(w, h)`` pixels of ``level`` whose top-left is level-0 ``l0_xy``.

        Returns
        -------
        ndarray, shape (h, w, 3), uint8
            RGB; transparent or out-of-slide pixels are white.
        """
        ds = self.level_downsamples[level] if 0 <= level < self.level_count else 1.0
        lx = int(math.floor(l0_xy[0] / ds + 1e-9))
        ly = int(math.floor(l0_xy[1] / ds + 1e-9))
        return self._read_level(level, lx, ly, int(size[0]), int(size[1]))

    def read_at_mpp(self, l0_box: tuple[float, float, float, float], *,
                    target_mpp: float | None = None, out_size: tuple[int, int] | None = None,
                    resample: str = "bilinear") -> np.ndarray:
        """Pixels of the level-0 box ``(x, y, w, h)`` at ``target_mpp`` (or ``out_size``).

        Reads from the pyramid level with the largest downsample that still has at least the
        requested resolution (:meth:`best_level`), then resizes with anti-aliasing (PIL
        convolution resampling over the exact, sub-pixel source box).

        Parameters
        ----------
        l0_box : (x, y, w, h)
            Level-0 pixels; may extend past the slide edge (padded white), but a box wholly
            outside the slide raises :class:`SlideError`.
        target_mpp : float, optional
            Output µm/px; the output is ``round(w * mpp / target_mpp)`` pixels wide.
        out_size : (int, int), optional
            Output ``(width, height)``; overrides the size implied by ``target_mpp``.
        resample : {"bilinear", "bicubic", "lanczos", "box", "nearest"}

        Returns
        -------
        ndarray, shape (out_h, out_w, 3), uint8
        """
        x, y, w, h = (float(v) for v in l0_box)
        if w <= 0 or h <= 0:
            raise SlideError(f"{self.path}: box {l0_box} must have positive width and height")
        W, H = self.dimensions
        if x >= W or y >= H or x + w <= 0 or y + h <= 0:
            raise SlideError(f"{self.path}: box (x, y, w, h) = {tuple(l0_box)} lies wholly "
                             f"outside the {W}x{H} slide (level-0 px); boxes must overlap it")
        if out_size is None:
            if target_mpp is None:
                raise SlideError("read_at_mpp needs target_mpp= or out_size=")
            if not math.isfinite(self.mpp):
                raise MppError(f"{self.path}: slide mpp unknown; give the slide's level-0 "
                               f"µm/px ({keyword('mpp')}, its scanner records it) to read at a "
                               "target resolution")
            check_mpp(target_mpp, what="target_mpp")
            out_w = max(1, int(round(w * self.mpp / target_mpp)))
            out_h = max(1, int(round(h * self.mpp / target_mpp)))
        else:
            out_w, out_h = int(out_size[0]), int(out_size[1])
            if out_w <= 0 or out_h <= 0:
                raise SlideError(f"out_size={out_size} must be positive")
        if resample not in _RESAMPLE:
            raise SlideError(f"resample={resample!r} is not one of {sorted(_RESAMPLE)}")
        region, box = self.source_region((x, y, w, h), (out_w, out_h))
        return resize_box(region, box, (out_w, out_h), resample=resample)

    def source_region(self, l0_box: tuple[float, float, float, float],
                      out_size: tuple[int, int]) -> tuple[np.ndarray, tuple[float, float,
                                                                             float, float]]:
        """The pixels :meth:`read_at_mpp` resamples: an integer region of the best level.

        The level is :meth:`best_level` of ``min(w / out_w, h / out_h)``; the region is the
        smallest block of its pixels that contains the box (white outside the slide).
        :class:`wsikit.slide.tiles.TileReader` maps boxes onto the same level, region and box.

        Parameters
        ----------
        l0_box : (x, y, w, h)
            Level-0 pixels; may extend past the slide.
        out_size : (width, height)
            Output size the region will be resampled to (chooses the level).

        Returns
        -------
        region : ndarray, shape (rh, rw, 3), uint8
            Pixels of the chosen level.
        box : (x0, y0, x1, y1)
            The level-0 box inside ``region``, in (sub-pixel) region pixels.
        """
        x, y, w, h = (float(v) for v in l0_box)
        out_w, out_h = int(out_size[0]), int(out_size[1])
        if w <= 0 or h <= 0 or out_w <= 0 or out_h <= 0:
            raise SlideError(f"{self.path}: box {l0_box} and out_size {out_size} must be "
                             "positive")
        level = self.best_level(min(w / out_w, h / out_h))
        lds = self.level_downsamples[level]
        fx0, fy0, fx1, fy1 = x / lds, y / lds, (x + w) / lds, (y + h) / lds
        ix0, iy0 = int(math.floor(fx0 + 1e-6)), int(math.floor(fy0 + 1e-6))
        ix1, iy1 = int(math.ceil(fx1 - 1e-6)), int(math.ceil(fy1 - 1e-6))
        ix1, iy1 = max(ix1, ix0 + 1), max(iy1, iy0 + 1)
        region = self._read_level(level, ix0, iy0, ix1 - ix0, iy1 - iy0)
        return region, (fx0 - ix0, fy0 - iy0, fx1 - ix0, fy1 - iy0)

    def thumbnail(self, *, mpp: float | None = None, max_size: int | None = None,
                  resample: str = "bilinear") -> np.ndarray:
        """The whole slide at ``mpp`` µm/px, or fitted into ``max_size`` px (default 1024).

        Returns
        -------
        ndarray, shape (h, w, 3), uint8
        """
        W, H = self.dimensions
        if mpp is not None:
            if not math.isfinite(self.mpp):
                raise MppError(f"{self.path}: slide mpp unknown; give the slide's level-0 "
                               f"µm/px ({keyword('mpp')}, its scanner records it) or use "
                               "thumbnail(max_size=...)")
            scale = self.mpp / mpp
        else:
            edge = 1024 if max_size is None else int(max_size)
            if edge <= 0:
                raise SlideError(f"max_size={max_size} must be positive")
            scale = min(1.0, edge / max(W, H))
        size = (max(1, int(round(W * scale))), max(1, int(round(H * scale))))
        return self.read_at_mpp((0, 0, W, H), out_size=size, resample=resample)

    def estimate_mpp(self, *, regions: int = 8, size: int = 512) -> MppEstimate:
        """Estimate the level-0 µm/px from the size of the slide's nuclei.

        Reads ``regions`` squares of ``size`` level-0 px from the most nuclear-rich tissue
        of a thumbnail (spread apart, never two side by side) and measures them with
        :func:`~wsikit.slide.mpp_estimate.estimate_mpp_from_nuclei`. The slide's own ``mpp``
        is not used.

        Raises
        ------
        MppError
            Too few nuclei (no H&E tissue, or a slide too small).
        """
        from .mpp_estimate import estimate_mpp_from_nuclei

        W, H = self.dimensions
        size = int(min(size, W, H))
        nx, ny = max(1, W // size), max(1, H // size)
        thumb = self.thumbnail(max_size=min(1024, max(W, H)))
        th, tw = thumb.shape[:2]
        od = -np.log10(np.maximum(thumb.astype(np.float32), 1.0) / 255.0)
        # H&E tissue (no H&E mix absorbs red more than green: pen and dye do), and its
        # haematoxylin-rich part (red is absorbed by haematoxylin, hardly by eosin)
        tissue = (od.sum(-1) > 0.2) & (od[..., 0] <= od[..., 1] + 0.02)
        cy = np.minimum((np.arange(th) + 0.5) * H / th // size, ny - 1).astype(np.int64)
        cx = np.minimum((np.arange(tw) + 0.5) * W / tw // size, nx - 1).astype(np.int64)
        cell = (cy[:, None] * nx + cx[None, :]).ravel()
        weight = np.where(tissue, od[..., 0], 0.0).ravel()
        score = (np.bincount(cell, weights=weight, minlength=nx * ny)
                 / np.maximum(np.bincount(cell, minlength=nx * ny), 1))
        chosen: list[tuple[int, int]] = []
        for k in np.argsort(-score, kind="stable"):
            if score[k] <= 0 or len(chosen) >= regions:
                break
            gy, gx = divmod(int(k), nx)
            if all(max(abs(gy - y), abs(gx - x)) > 1 for y, x in chosen) or nx * ny <= 9:
                chosen.append((gy, gx))
        pixels = [self.read_region((gx * size, gy * size), 0, (size, size))
                  for gy, gx in chosen or [(0, 0)]]
        return estimate_mpp_from_nuclei(pixels)

    def get_thumbnail(self, size: tuple[int, int]) -> Image.Image:
        """OpenSlide's ``get_thumbnail``: the whole slide as an RGB PIL image that fits in
        ``size`` = ``(width, height)``, aspect ratio kept, never enlarged."""
        try:
            max_w, max_h = (int(v) for v in size)
        except (TypeError, ValueError):
            raise SlideError(f"get_thumbnail(size={size!r}): size must be (width, height) in "
                             "pixels, e.g. (1024, 1024)") from None
        if max_w <= 0 or max_h <= 0:
            raise SlideError(f"get_thumbnail(size={size!r}): width and height must be positive")
        W, H = self.dimensions
        scale = min(1.0, max_w / W, max_h / H)
        out = (max(1, min(max_w, int(round(W * scale)))),
               max(1, min(max_h, int(round(H * scale)))))
        return Image.fromarray(self.read_at_mpp((0, 0, W, H), out_size=out))


def resize_box(region: np.ndarray, box: tuple[float, float, float, float],
               out_size: tuple[int, int], *, resample: str = "bilinear") -> np.ndarray:
    """The sub-pixel ``box`` of ``region`` at ``out_size``, as :meth:`Slide.read_at_mpp` makes
    its output from :meth:`Slide.source_region` (Pillow's anti-aliased convolution resampling
    over the exact box; ``region`` itself when it already is the box at that size).

    Parameters
    ----------
    region : ndarray, shape (h, w, 3), uint8
        An integer region of one pyramid level.
    box : (x0, y0, x1, y1)
        The sub-pixel rectangle inside ``region`` (region pixels).
    out_size : (width, height)
        Output size in pixels.
    resample : {"bilinear", "bicubic", "lanczos", "box", "nearest"}

    Returns
    -------
    ndarray, shape (out_h, out_w, 3), uint8
    """
    out_w, out_h = int(out_size[0]), int(out_size[1])
    if (region.shape[1], region.shape[0]) == (out_w, out_h) and max(
            abs(box[0]), abs(box[1]), abs(box[2] - out_w), abs(box[3] - out_h)) < 1e-6:
        return region
    try:
        filt = _RESAMPLE[resample]
    except KeyError:
        raise SlideError(f"resample={resample!r} is not one of {sorted(_RESAMPLE)}") from None
    img = Image.fromarray(np.ascontiguousarray(region))
    factor = min((box[2] - box[0]) / out_w, (box[3] - box[1]) / out_h)
    gap = 3.0 if factor >= 6 and filt != Image.Resampling.NEAREST else None
    return np.asarray(img.resize((out_w, out_h), filt, box=box, reducing_gap=gap))


#: Double suffixes that name one format: their whole suffix is dropped from a slide's name.
_DOUBLE_SUFFIXES = (".ome.zarr", ".ome.tiff", ".ome.tif")


def slide_stem(path: str | os.PathLike[str]) -> str:
    """A slide's name from its path: the file name without its format suffix, the whole of
    ``.ome.zarr``/``.ome.tiff``/``.ome.tif`` included (``a.ome.zarr`` → ``a``)."""
    p = Path(path)
    low = p.name.lower()
    for suffix in _DOUBLE_SUFFIXES:
        if low.endswith(suffix) and len(low) > len(suffix):
            return p.name[: -len(suffix)]
    return p.stem


def _open_backend(name: str, path: Path) -> _Backend:
    return _BACKEND_CLASSES[name](path)


def bad_tile_policy(value: str = "fail") -> str:
    """``value`` checked as a damaged-tile policy (:data:`BAD_TILE_POLICIES`).

    Raises
    ------
    SlideError
        An unknown policy.
    """
    if value not in BAD_TILE_POLICIES:
        raise SlideError(f"{option('on_bad_tile', value)} is not one of "
                         f"{', '.join(BAD_TILE_POLICIES)}")
    return value


def open_slide(path: str | os.PathLike[str], *, backend: str | None = None,
               mpp: float | None = None, require_mpp: bool = True,
               on_bad_tile: str = "fail", estimate_mpp: bool = True) -> Slide:
    """Open a whole-slide image (or a plain image) as a :class:`Slide`.

    Parameters
    ----------
    path : path-like
        SVS, NDPI, MRXS, tiled TIFF, …, or PNG/JPEG/flat TIFF; a DICOM WSI series folder or
        one of its ``.dcm`` files.
    backend : {"openslide", "tiffslide", "image", "omezarr", "dicom", "ndpi", "pyvips"}, optional
        Force one backend; by default DICOM goes to ``"dicom"`` and anything else is tried
        in :data:`BACKENDS` order. ``"ndpi"`` and ``"pyvips"`` (optional extra) are the fast
        readers :func:`wsikit.slide.pixel_backend.open_pixel_slide` adopts where their pixels
        equal OpenSlide's.
    mpp : float, optional
        Level-0 µm/px overriding the file's metadata (0.05–20).
    require_mpp : bool
        If False, a slide without a resolution (metadata, or an estimate from its nuclei)
        opens with ``mpp = nan``.
    on_bad_tile : {"fail", "skip"}
        What a damaged tile does (:data:`BAD_TILE_POLICIES`): one error naming it, or read it
        as white and record it.
    estimate_mpp : bool
        Estimate the resolution of a slide without resolution metadata from the size of its
        nuclei (:meth:`Slide.estimate_mpp`; ``mpp_source`` ``"estimated from nuclei"``, with a
        warning), and check a user ``mpp`` for such a slide against it (a warning when more
        than 2x off). False: neither (a caller with a value of its own to fill in).

    Raises
    ------
    SlideError
        The file is missing, damaged/truncated, or no backend can read it (the message names
        the file and each backend's reason).
    MppError
        No usable resolution and ``require_mpp``; or ``mpp`` is implausible.
    """
    expect(path, (str, os.PathLike), name="open_slide(path)", error=SlideError,
           want="the path of a slide file (str or pathlib.Path)")
    p = Path(path)
    policy = bad_tile_policy(on_bad_tile)
    if mpp is not None:
        check_mpp(mpp)
    dicom = _checked_source(p, backend)
    names = ("dicom",) if dicom else (backend,) if backend is not None else BACKENDS
    opened = _first_backend(p, names, dicom=dicom)
    slide: Slide | None = None
    try:
        W, H = opened.level_dimensions[0]
        if not (0 < W <= MAX_SIDE_PX and 0 < H <= MAX_SIDE_PX):
            raise SlideError(f"{p}: the file claims {W} x {H} px, outside 1–{MAX_SIDE_PX:,} px a "
                             "side; its header is damaged (copy the slide again)")
        slide = Slide(p, opened, float("nan"), "unknown", on_bad_tile=policy)
        if dicom and p.is_file() and _sole_series(p):
            slide.name = p.parent.name  # a series is named after its folder, not level_0.dcm
        # Probe one pixel of the smallest level so damaged or undecodable files (16-bit,
        # unsupported compression) fail here with their own reason, before the mpp question.
        last = slide.level_count - 1
        lw, lh = slide.level_dimensions[last]
        slide._read_level(last, lw // 2, lh // 2, 1, 1)
        opened_slide = slide
        value, source = resolve_mpp(
            opened.properties, mpp=mpp, name=p.name, require=require_mpp, stacklevel=3,
            nuclei=(lambda: _nuclei_estimate(opened_slide)) if estimate_mpp else None)
        slide.mpp, slide.mpp_source = float(value), source
    except BaseException:
        # Close once: the probe may have replaced the handle (a re-open after a damaged
        # tile), and closing ``opened`` twice masked the damaged-tile error with
        # OpenSlide's "closed slide object".
        if slide is not None:
            slide.close()
        else:
            opened.close()
        raise
    return slide


def _checked_source(p: Path, backend: str | None) -> bool:
    """Whether ``p`` is a DICOM series (a folder, or one of its files), after the checks of
    a file to open (exists, readable, not a FIFO, a TIFF whose extent fits) and of
    ``backend``."""
    # a DICOM series is a folder: is_dicom only looks at folders and regular files (never a
    # FIFO, which would block); everything else goes through the file checks
    dicom = bool(backend in (None, "dicom") and (p.is_dir() or p.is_file()) and is_dicom(p))
    if not (dicom and p.is_dir()):
        check_openable(p)
    if backend is not None and backend not in _BACKEND_CLASSES:
        raise SlideError(f"backend={backend!r} is not one of {tuple(_BACKEND_CLASSES)}")
    if p.is_file():
        _check_tiff_extent(p)
    return dicom


def _first_backend(p: Path, names: tuple[str, ...], *, dicom: bool) -> _Backend:
    """The first of the backends ``names`` that opens ``p``; else one :class:`SlideError`
    naming the file and each backend's reason."""
    reasons: list[str] = []
    for name in names:
        try:
            with _quiet():  # a backend's parser warnings about a file it rejects are noise
                return _open_backend(name, p)
        except SlideError as exc:
            reasons.append(f"{name}: {exc}")
        except Exception as exc:
            reasons.append(f"{name}: {type(exc).__name__}: {exc}".strip())
    if dicom:
        raise SlideError(f"{p}: cannot open as a DICOM whole-slide image: "
                         f"{reasons[0].split(': ', 1)[1]}")
    raise SlideError(f"{p}: cannot open as a slide or image; " + "; ".join(reasons)
                     + ". Check that the file is a complete slide/image file.")


#: Estimates from nuclei by (path, size, mtime): a slide opened again (by each stage, by the
#: fast pixel backends) is measured once per process.
_ESTIMATES: dict[tuple[str, int, int], MppEstimate | MppError] = {}


def _nuclei_estimate(slide: Slide) -> MppEstimate:
    """:meth:`Slide.estimate_mpp`, once per file and process; a read error is an
    :class:`~wsikit.errors.MppError` (the resolution is what could not be found)."""
    try:
        st = slide.path.stat()
        key: tuple[str, int, int] | None = (str(slide.path.resolve()), st.st_size,
                                            st.st_mtime_ns)
    except OSError:
        key = None
    found = _ESTIMATES.get(key) if key is not None else None
    if found is None:
        try:
            found = slide.estimate_mpp()
        except MppError as exc:
            found = exc
        except WsikitError as exc:
            found = MppError(f"its pixels could not be read ({exc})")
        if key is not None:
            if len(_ESTIMATES) >= 64:
                _ESTIMATES.pop(next(iter(_ESTIMATES)))
            _ESTIMATES[key] = found
    if isinstance(found, MppError):
        raise MppError(str(found))
    return found


def _sole_series(path: Path) -> bool:
    """Whether every DICOM file in ``path``'s folder belongs to ``path``'s series (the folder
    is that slide); several single-file slides in one folder are named after their files."""
    from .dicom import _has_magic, series_files

    try:
        own = set(series_files(path))
        others = [f for f in path.parent.iterdir() if f.is_file() and not f.name.startswith(".")
                  and f not in own and _has_magic(f)]
    except (ImportError, OSError):
        return True
    return not others


@contextlib.contextmanager
def slide_of(slide: Slide | str | os.PathLike[str], *, name: str = "slide",
             mpp: float | None = None, error: type[WsikitError] = WsikitError
             ) -> Iterator[Slide]:
    """Yield ``slide`` when it is a :class:`Slide`; open (and afterwards close) it when it is a
    path; refuse anything else in one line naming ``name`` (raised as ``error``)."""
    if isinstance(slide, Slide):
        yield slide
        return
    expect(slide, (str, os.PathLike), name=name, error=error,
           want="a Slide (wsikit.open_slide) or the path of a slide file")
    with open_slide(slide, mpp=mpp) as opened:
        yield opened
