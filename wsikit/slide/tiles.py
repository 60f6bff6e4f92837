"""Fast patch reading straight from the tiles of a pyramidal TIFF.

OpenSlide-style readers decode, composite and copy every pixel of a region for every call.
For patch extraction at scale that is the bottleneck, so this module reads the compressed
tiles itself (one ``pread`` per tile), decodes each tile once (an LRU cache shares it between
neighbouring patches), assembles the mosaic under the requested level-0 box and resizes it
with an anti-aliased bilinear filter.

Parity with the slide reader. By default the pixels equal those of
:meth:`wsikit.slide.Slide.read_at_mpp` on the same box: the same level (the largest downsample
that still has the output resolution, with :data:`wsikit.slide.slide.LEVEL_TOLERANCE` slack), the
same level downsample (OpenSlide's and tiffslide's convention: the mean of the x and y
ratios), the same integer source region and sub-pixel box, and bit-identical JPEG decodes. The
only difference is the resampling kernel: a whole-region resize runs torch's uint8
anti-aliased bilinear kernel, which equals Pillow's except for about 1 pixel in 10⁴ that is one
level off (:func:`wsikit.slide.patch_stream.PatchStream` runs the same function on both readers, so
its two readers agree exactly).

DCT-domain scaling (opt-in, ``dct=True``): when the patch is a 2×, 4× or 8× reduction of the
tile pixels, libjpeg-turbo can decode the JPEG at the reduced size directly (only the
low-frequency coefficients are inverse-transformed), which is faster than a full decode. It is
**not** the anti-aliased resize of the specification: on Aperio H&E it differs from it by up
to ~50 levels at sharp edges (mean ~1.7), so it is never used unless asked for.

JPEG tile decoding (shared tables, the Adobe marker for RGB JPEG, the decoders) is in
:mod:`wsikit.slide._tile_jpeg`.
"""

from __future__ import annotations

import math
import os
from collections import Counter, OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._hints import option
from ..errors import SlideError
from ._tile_jpeg import (
    _JPEG,
    _PHOTOMETRIC_RGB,
    _PHOTOMETRIC_YCBCR,
    _composite_white,
    _jpeg_prefix,
    decode_jpeg,
)
from .region_resize import resample_kind, resize_antialiased, resize_uint8

__all__ = ["TileReader", "open_tile_reader"]

_REDUCTIONS = (8, 4, 2, 1)
_EPS = 1e-6


@dataclass(frozen=True)
class TiffLevel:
    """One tiled pyramid level of a TIFF file.

    Attributes
    ----------
    page : int
        Index of the TIFF page (IFD) in the file.
    width, height : int
        Level size in pixels.
    tile_width, tile_height : int
        Tile size in pixels.
    downsample : tuple of float
        Level-0 pixels per level pixel along (x, y); both are the mean of the two axes'
        ratios, as OpenSlide and tiffslide define a level's downsample.
    compression, photometric : int
        TIFF tag values.
    tiles_across, tiles_down : int
        Tile grid size.
    """

    page: int
    width: int
    height: int
    tile_width: int
    tile_height: int
    downsample: tuple[float, float]
    compression: int
    photometric: int
    tiles_across: int
    tiles_down: int

    @property
    def is_jpeg(self) -> bool:
        """Whether the tiles are baseline JPEG streams (DCT-scalable)."""
        return self.compression == _JPEG


class TileReader:
    """Read level-0 boxes as patches of a given size from a tiled pyramidal TIFF.

    Use :func:`open_tile_reader`, which returns ``None`` (with a reason) for files this reader
    cannot handle, so callers can fall back to a general slide reader.

    Parameters
    ----------
    path : path-like
        A tiled (pyramidal) TIFF: Aperio SVS, generic tiled TIFF, OME-TIFF with tiled levels.
    cache_mb : float
        Budget of the decoded-tile LRU cache in MiB (per reader, i.e. per worker).

    Notes
    -----
    Not thread-safe (the cache is unsynchronised); open one reader per worker process.
    """

    def __init__(self, path: str | os.PathLike[str], *, cache_mb: float = 128.0,
                 on_bad_tile: str = "fail") -> None:
        import tifffile

        from .slide import bad_tile_policy

        self.path = Path(path)
        #: What a damaged tile does (:data:`wsikit.slide.slide.BAD_TILE_POLICIES`).
        self.on_bad_tile = bad_tile_policy(on_bad_tile)
        try:
            self._tif = tifffile.TiffFile(self.path)
        except Exception as exc:  # tifffile raises many types for non-TIFF input
            raise SlideError(f"{self.path}: not a readable TIFF ({exc}); use a slide reader "
                             "(wsikit.open_slide) for this format") from exc
        try:
            self.levels, self._pages = _discover_levels(self._tif)
        except SlideError:
            self._tif.close()
            raise
        self._fd = os.open(self.path, os.O_RDONLY)
        self._offsets = [np.asarray(p.dataoffsets, np.int64) for p in self._pages]
        self._counts = [np.asarray(p.databytecounts, np.int64) for p in self._pages]
        self._tables = [_jpeg_prefix(p) for p in self._pages]
        self._cache: OrderedDict[tuple[int, int, int], np.ndarray] = OrderedDict()
        self._cache_bytes = 0
        self._cache_budget = int(cache_mb * 2**20)
        self.tiles_decoded = 0
        self.cache_hits = 0
        #: Tiles read as white under ``--on-bad-tile skip`` (level, x, y, width, height, reason).
        self.bad_tiles: list[dict[str, Any]] = []
        self._scratch = np.empty((0, 0, 3), np.uint8)  # mosaic buffer of read_regions
        self._tile_buf = np.empty((0, 0, 3), np.uint8)  # decode buffer of one-use tiles

    # -- context manager -------------------------------------------------------------------
    def __enter__(self) -> TileReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the file handles and the cache."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._tif.close()
        self._cache.clear()
        self._cache_bytes = 0

    @property
    def dimensions(self) -> tuple[int, int]:
        """Level-0 ``(width, height)``."""
        return self.levels[0].width, self.levels[0].height

    # -- planning --------------------------------------------------------------------------
    def plan(self, l0_size: tuple[float, float], out_size: tuple[int, int], *,
             dct: bool = False) -> tuple[int, int]:
        """Choose ``(level, reduction)`` for reading an ``l0_size`` box into ``out_size`` px.

        The level is the one :meth:`wsikit.slide.Slide.best_level` picks: the largest downsample
        ``<= min(w / out_w, h / out_h)`` with :data:`~wsikit.slide.slide.LEVEL_TOLERANCE` slack
        (an Aperio "4×" level of downsample 4.0018 counts as 4). The reduction is 1 unless
        ``dct=True``, which takes the largest DCT scale factor (2, 4 or 8, JPEG only) that keeps
        at least the output resolution (faster, but not the specified anti-aliased resize).

        Parameters
        ----------
        l0_size : (w, h)
            Box size in level-0 pixels.
        out_size : (width, height)
            Output size in pixels.
        dct : bool
            Allow a DCT-domain scaled decode.

        Returns
        -------
        (level, reduction) : tuple of int
        """
        from .slide import LEVEL_TOLERANCE

        want = min(l0_size[0] / out_size[0], l0_size[1] / out_size[1])
        level = 0
        for i, lv in enumerate(self.levels):
            ds = lv.downsample[0]
            if ds <= want * (1.0 + LEVEL_TOLERANCE) and ds >= self.levels[level].downsample[0]:
                level = i
        lv = self.levels[level]
        reduction = 1
        if dct and lv.is_jpeg:
            for k in _REDUCTIONS:
                if (lv.tile_width % k == 0 and lv.tile_height % k == 0
                        and lv.downsample[0] * k <= want * (1 + _EPS)):
                    reduction = k
                    break
        return level, reduction

    def tiles_for(self, l0_box: tuple[float, float, float, float], level: int
                  ) -> list[tuple[int, int]]:
        """``(tile_col, tile_row)`` of every tile of ``level`` that ``l0_box`` touches."""
        lv = self.levels[level]
        x, y, w, h = l0_box
        c0 = max(0, math.floor(x / lv.downsample[0] / lv.tile_width))
        r0 = max(0, math.floor(y / lv.downsample[1] / lv.tile_height))
        c1 = min(lv.tiles_across - 1,
                 math.ceil((x + w) / lv.downsample[0] / lv.tile_width) - 1)
        r1 = min(lv.tiles_down - 1,
                 math.ceil((y + h) / lv.downsample[1] / lv.tile_height) - 1)
        return [(c, r) for r in range(r0, r1 + 1) for c in range(c0, c1 + 1)]

    # -- reading ---------------------------------------------------------------------------
    def raw_tile(self, level: int, col: int, row: int) -> bytes:
        """The stored (compressed) bytes of one tile."""
        lv = self.levels[level]
        idx = row * lv.tiles_across + col
        count = int(self._counts[level][idx])
        return os.pread(self._fd, count, int(self._offsets[level][idx]))

    def stored_jpeg(self, level: int, col: int, row: int) -> bytes | None:
        """The stored tile as a standalone JPEG file (the page's shared ``JPEGTables`` and,
        for RGB JPEG, an Adobe no-transform marker merged into the abbreviated stream), or
        None where the level is not JPEG or the tile is empty (sparse) or not one stream."""
        if not self.levels[level].is_jpeg:
            return None
        data = self.raw_tile(level, col, row)
        if len(data) < 4 or data[:2] != b"\xff\xd8" or data[-2:] != b"\xff\xd9":
            return None
        return self._tables[level] + data[2:]

    def read_tile(self, level: int, col: int, row: int, *, reduction: int = 1,
                  cache: bool = True) -> np.ndarray:
        """Decode one tile, ``(tile_height/reduction, tile_width/reduction, 3) uint8``.

        Tiles on the right/bottom edge are returned at full tile size (TIFF pads them);
        :meth:`read_region` masks the padding. A cached tile is returned when there is one;
        ``cache=False`` does not add a newly decoded tile to the cache.
        """
        key = (level, row * self.levels[level].tiles_across + col, reduction)
        tile = self._cached(key)
        if tile is not None:
            return tile
        tile = self._decode(level, col, row, reduction)
        self.tiles_decoded += 1
        if cache and self._cache_budget > 0:
            self._cache[key] = tile
            self._cache_bytes += tile.nbytes
            while self._cache_bytes > self._cache_budget and self._cache:
                _, old = self._cache.popitem(last=False)
                self._cache_bytes -= old.nbytes
        return tile

    def _cached(self, key: tuple[int, int, int]) -> np.ndarray | None:
        """The cached tile of ``key`` (counted as a hit, made most recent), else None."""
        tile = self._cache.get(key)
        if tile is not None:
            self._cache.move_to_end(key)
            self.cache_hits += 1
        return tile

    def _decode(self, level: int, col: int, row: int, reduction: int,
                buffer: np.ndarray | None = None) -> np.ndarray:
        try:
            return self._decode_tile(level, col, row, reduction, buffer)
        except Exception as exc:
            return self._bad_tile(level, col, row, reduction, exc)

    def _transient_tile(self, level: int, col: int, row: int, reduction: int) -> np.ndarray:
        """One tile for immediate use: the cached copy, else decoded into a reused buffer.

        The result is valid only until the next call (it may be the reader's tile buffer), so
        it is neither cached nor kept. Decoding into one buffer instead of a fresh array per
        tile saves the page faults of new memory, which on some machines cost as much as the
        decode itself (a fresh 256-px RGB tile is 48 pages).
        """
        key = (level, row * self.levels[level].tiles_across + col, reduction)
        tile = self._cached(key)
        if tile is not None:
            return tile
        lv = self.levels[level]
        shape = (lv.tile_height // reduction, lv.tile_width // reduction, 3)
        if self._tile_buf.shape != shape:
            self._tile_buf = np.empty(shape, np.uint8)
        self.tiles_decoded += 1
        return self._decode(level, col, row, reduction, self._tile_buf)

    def _bad_tile(self, level: int, col: int, row: int, reduction: int,
                  exc: BaseException) -> np.ndarray:
        """A tile that cannot be decoded: a clear error, or white with ``--on-bad-tile skip``."""
        import warnings

        lv = self.levels[level]
        x, y = col * lv.tile_width, row * lv.tile_height
        where = (f"tile ({col}, {row}) of level {level} at level pixels x={x}, y={y} "
                 f"({lv.tile_width}x{lv.tile_height})")
        if self.on_bad_tile != "skip":
            raise SlideError(f"{self.path}: damaged {where}: {exc}. Copy the slide again, or "
                             f"pass {option('on_bad_tile', 'skip')} to process it with damaged "
                             "tiles left white (they are recorded)") from exc
        record = {"level": level, "x": x, "y": y, "width": lv.tile_width,
                  "height": lv.tile_height, "reason": f"{type(exc).__name__}: {exc}"}
        if record not in self.bad_tiles:
            self.bad_tiles.append(record)
            warnings.warn(f"{self.path}: damaged {where} read as white "
                          f"({option('on_bad_tile', 'skip')})",
                          UserWarning, stacklevel=3)
        return np.full((lv.tile_height // reduction, lv.tile_width // reduction, 3), 255,
                       np.uint8)

    def _decode_tile(self, level: int, col: int, row: int, reduction: int,
                     buffer: np.ndarray | None = None) -> np.ndarray:
        lv = self.levels[level]
        data = self.raw_tile(level, col, row)
        th, tw = lv.tile_height // reduction, lv.tile_width // reduction
        if len(data) == 0:  # sparse TIFF: missing tile is empty
            return np.full((th, tw, 3), 255, np.uint8)
        if lv.is_jpeg:
            stream = self._tables[level] + data[2:]
            arr = decode_jpeg(stream, reduction, tw, th, buffer=buffer)
        else:
            page = self._pages[level]
            seg, _, _ = page.decode(data, row * lv.tiles_across + col,
                                    jpegtables=getattr(page, "jpegtables", None))
            arr = np.asarray(seg)[0]
            if reduction != 1:  # pragma: no cover - plan() only reduces JPEG levels
                raise ValueError("reduction is only supported for JPEG tiles")
        if arr.ndim == 2:
            arr = arr[:, :, None]
        if arr.shape[2] == 1:
            arr = np.repeat(arr, 3, axis=2)
        elif arr.shape[2] == 4:
            arr = _composite_white(arr)
        elif arr.shape[2] != 3:
            arr = np.ascontiguousarray(arr[:, :, :3])
        if arr.shape[:2] != (th, tw):
            raise SlideError(f"{self.path}: tile ({col}, {row}) of level {level} decoded to "
                             f"{arr.shape[:2]}, expected {(th, tw)}; the file may be corrupt")
        return arr

    def read_region(self, l0_box: tuple[float, float, float, float], out_size: tuple[int, int],
                    *, level: int | None = None, reduction: int | None = None,
                    dct: bool = False) -> np.ndarray:
        """Read the level-0 box ``(x, y, w, h)`` resized to ``out_size = (w, h)`` pixels.

        Parameters
        ----------
        l0_box : (x, y, w, h)
            Level-0 pixels; may extend past the slide (outside is white).
        out_size : (width, height)
            Output size in pixels.
        level, reduction : int, optional
            Override :meth:`plan`'s choice.
        dct : bool
            Let :meth:`plan` choose a DCT-domain scaled decode (faster, not the specified
            anti-aliased resize; see the module notes).

        Returns
        -------
        numpy.ndarray
            ``(out_h, out_w, 3) uint8`` RGB.
        """
        out_w, out_h = int(out_size[0]), int(out_size[1])
        geo = self._geometry(l0_box, (out_w, out_h), level, reduction, dct)
        mosaic = np.full((geo.iy1 - geo.iy0, geo.ix1 - geo.ix0, 3), 255, np.uint8)
        self._assemble(geo, mosaic)
        if geo.kind == "copy":
            return mosaic
        return resize_uint8(mosaic, (out_w, out_h), box=None if geo.kind == "torch" else geo.box)

    def read_regions(self, l0_boxes: np.ndarray, out_size: tuple[int, int], *,
                     out: np.ndarray | None = None, level: int | None = None,
                     reduction: int | None = None, dct: bool = False) -> np.ndarray:
        """Read many level-0 boxes, each resized to ``out_size``, into one array.

        Equal, pixel for pixel, to calling :meth:`read_region` for every box, but faster: the
        boxes are read in storage order (tile row, column) so that the tile cache serves
        neighbours, a tile that only one patch of the batch uses is decoded into one reused
        buffer (no fresh array to fault in per tile), each mosaic is assembled in one reused
        buffer (no allocation per patch) and resized straight into its row of ``out``.

        Parameters
        ----------
        l0_boxes : array-like, shape (B, 4)
            Level-0 ``(x, y, w, h)`` of each patch.
        out_size : (width, height)
            Output size of every patch in pixels.
        out : numpy.ndarray, optional
            ``(B, out_h, out_w, 3) uint8`` C-contiguous array to fill (e.g. a view of a
            shared-memory tensor); allocated when omitted.
        level, reduction : int, optional
            Override :meth:`plan`'s choice (else planned per box size).
        dct : bool
            Let :meth:`plan` choose DCT-domain scaled decodes (see :meth:`read_region`).

        Returns
        -------
        numpy.ndarray
            ``out``: ``(B, out_h, out_w, 3) uint8`` in the order of ``l0_boxes``.
        """
        boxes = np.asarray(l0_boxes, np.float64).reshape(-1, 4)
        out_w, out_h = int(out_size[0]), int(out_size[1])
        shape = (len(boxes), out_h, out_w, 3)
        if out is None:
            out = np.empty(shape, np.uint8)
        elif out.shape != shape or out.dtype != np.uint8 or not out.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous uint8 array of shape {shape}, got "
                             f"{out.dtype} {out.shape}")
        geos = [self._geometry(b, (out_w, out_h), level, reduction, dct) for b in boxes]
        spans = [self._spans(g) for g in geos]
        uses = Counter(key for sp in spans for key, *_ in sp)
        live: dict[tuple[int, int, int, int], np.ndarray] = {}  # tiles still needed here
        order = sorted(range(len(boxes)), key=lambda i: geos[i].storage_key)
        for i in order:
            geo = geos[i]
            mh, mw = geo.iy1 - geo.iy0, geo.ix1 - geo.ix0
            if geo.kind == "copy":
                mosaic = out[i]
            else:
                if self._scratch.shape != (mh, mw, 3):
                    self._scratch = np.empty((mh, mw, 3), np.uint8)
                mosaic = self._scratch
            if not geo.covered:
                mosaic.fill(255)
            for key, dst_y, dst_x, src_y, src_x in spans[i]:
                tile = live.pop(key, None)
                if tile is None and uses[key] == 1:
                    # a tile used once is not cached (filling the cache with tiles that never
                    # come back only churns memory) and is decoded into a reused buffer
                    tile = self._transient_tile(key[0], key[1], key[2], key[3])
                elif tile is None:
                    # a tile used by several patches of this batch is decoded once and also
                    # offered to the cache (overlapping/unaligned grids share tiles across
                    # batches too)
                    tile = self.read_tile(key[0], key[1], key[2], reduction=key[3])
                uses[key] -= 1
                if uses[key] > 0:
                    live[key] = tile
                mosaic[dst_y, dst_x] = tile[src_y, src_x]
            if geo.kind == "torch":
                resize_antialiased(mosaic, (out_w, out_h), out=out[i])
            elif geo.kind == "box":
                out[i] = resize_uint8(mosaic, (out_w, out_h), box=geo.box)
        return out

    def _geometry(self, l0_box: Any, out_size: tuple[int, int], level: int | None,
                  reduction: int | None, dct: bool = False) -> _Geometry:
        """Where ``l0_box`` lies in the (reduced) pixels of the chosen level (the integer
        region and sub-pixel box are computed as :meth:`wsikit.slide.Slide.source_region` does)."""
        x, y, w, h = (float(v) for v in l0_box)
        out_w, out_h = out_size
        if level is None or reduction is None:
            plevel, preduction = self.plan((w, h), (out_w, out_h), dct=dct)
            level = plevel if level is None else level
            reduction = preduction if reduction is None else reduction
        lv = self.levels[level]
        k = reduction
        # box in reduced pixels of this level
        sx0, sy0 = x / lv.downsample[0] / k, y / lv.downsample[1] / k
        sx1, sy1 = (x + w) / lv.downsample[0] / k, (y + h) / lv.downsample[1] / k
        ix0, iy0 = math.floor(sx0 + _EPS), math.floor(sy0 + _EPS)
        ix1, iy1 = math.ceil(sx1 - _EPS), math.ceil(sy1 - _EPS)
        ix1, iy1 = max(ix1, ix0 + 1), max(iy1, iy0 + 1)
        mw, mh = ix1 - ix0, iy1 - iy0
        box = (sx0 - ix0, sy0 - iy0, sx1 - ix0, sy1 - iy0)
        kind = resample_kind((mw, mh), box, (out_w, out_h))
        valid_w, valid_h = -(-lv.width // k), -(-lv.height // k)
        covered = ix0 >= 0 and iy0 >= 0 and ix1 <= valid_w and iy1 <= valid_h
        tw, th = lv.tile_width // k, lv.tile_height // k
        return _Geometry(level, k, ix0, iy0, ix1, iy1, box, kind, covered,
                         (level, iy0 // th, ix0 // tw))

    def _spans(self, geo: _Geometry) -> list[tuple[tuple[int, int, int, int], slice, slice,
                                                  slice, slice]]:
        """``(tile key, mosaic rows, mosaic cols, tile rows, tile cols)`` of every tile under
        ``geo``, clipped to the level (outside it the mosaic is left for the caller's fill)."""
        lv = self.levels[geo.level]
        k = geo.reduction
        ix0, iy0, ix1, iy1 = geo.ix0, geo.iy0, geo.ix1, geo.iy1
        tw, th = lv.tile_width // k, lv.tile_height // k
        valid_w, valid_h = -(-lv.width // k), -(-lv.height // k)
        c0, c1 = max(0, ix0 // tw), min(lv.tiles_across - 1, (ix1 - 1) // tw)
        r0, r1 = max(0, iy0 // th), min(lv.tiles_down - 1, (iy1 - 1) // th)
        out = []
        for r in range(r0, r1 + 1):
            ty0 = r * th
            ya, yb = max(iy0, ty0), min(iy1, ty0 + th, valid_h)
            if yb <= ya:
                continue
            for c in range(c0, c1 + 1):
                tx0 = c * tw
                xa, xb = max(ix0, tx0), min(ix1, tx0 + tw, valid_w)
                if xb <= xa:
                    continue
                out.append(((geo.level, c, r, k), slice(ya - iy0, yb - iy0),
                            slice(xa - ix0, xb - ix0), slice(ya - ty0, yb - ty0),
                            slice(xa - tx0, xb - tx0)))
        return out

    def _assemble(self, geo: _Geometry, mosaic: np.ndarray) -> None:
        """Copy the tiles under ``geo`` into ``mosaic`` (outside the level stays untouched)."""
        for (level, c, r, k), dst_y, dst_x, src_y, src_x in self._spans(geo):
            mosaic[dst_y, dst_x] = self.read_tile(level, c, r, reduction=k)[src_y, src_x]


@dataclass(frozen=True)
class _Geometry:
    """A level-0 box mapped onto the reduced pixels of one level (see ``TileReader``)."""

    level: int
    reduction: int
    ix0: int  # integer mosaic bounds, reduced pixels of the level
    iy0: int
    ix1: int
    iy1: int
    box: tuple[float, float, float, float]  # sub-pixel source rectangle inside the mosaic
    kind: str  # "copy" (mosaic is the output), "torch" (whole resize), "box" (Pillow box)
    covered: bool  # every mosaic pixel lies inside the level (no white fill needed)
    storage_key: tuple[int, int, int]  # (level, first tile row, first tile column)


def _discover_levels(tif: Any) -> tuple[tuple[TiffLevel, ...], list[Any]]:
    path = tif.filehandle.path
    if not tif.series:
        raise SlideError(f"{path}: TIFF has no image series")
    # Levels: the first series' pyramid (covers OME-TIFF SubIFDs) plus every other tiled
    # top-level page with the same aspect ratio (Aperio files without a thumbnail page confuse
    # tifffile's SVS series; OpenSlide takes all tiled pages as levels, and so do we).
    base = tif.series[0].levels[0].keyframe
    W, H = int(base.imagewidth), int(base.imagelength)
    candidates = [lvl.keyframe for lvl in tif.series[0].levels]
    candidates += [p for p in tif.pages if getattr(p, "is_tiled", False)]
    pages = [base]
    seen = {(W, H)}
    for page in sorted(candidates[1:], key=lambda p: -int(p.imagewidth)):
        lw, lh = int(page.imagewidth), int(page.imagelength)
        if (lw, lh) in seen or lw > W or lh > H or not getattr(page, "is_tiled", False):
            continue
        if abs(math.ceil(W / (H / lh)) - lw) > 2 and abs(math.ceil(H / (W / lw)) - lh) > 2:
            continue  # another aspect ratio: not a level of this pyramid
        seen.add((lw, lh))
        pages.append(page)
    levels: list[TiffLevel] = []
    kept: list[Any] = []
    for page in pages:
        why = _unsupported(page)
        if why:
            if not levels:
                raise SlideError(f"{path}: level-0 page {page.index} {why}; use a slide reader "
                                 "(wsikit.open_slide) for this file")
            continue  # skip an odd level, keep the others
        lw, lh = int(page.imagewidth), int(page.imagelength)
        # OpenSlide's and tiffslide's convention (one downsample per level, the mean of the two
        # axes' ratios), so that a box maps onto the same level pixels as in the slide reader
        ds = ((W / lw) + (H / lh)) / 2.0
        levels.append(TiffLevel(
            page=int(page.index), width=lw, height=lh,
            tile_width=int(page.tilewidth), tile_height=int(page.tilelength),
            downsample=(ds, ds), compression=int(page.compression),
            photometric=int(page.photometric),
            tiles_across=-(-lw // int(page.tilewidth)), tiles_down=-(-lh // int(page.tilelength)),
        ))
        kept.append(page)
    return tuple(levels), kept


def _unsupported(page: Any) -> str:
    if not getattr(page, "is_tiled", False):
        return "is not tiled"
    if int(page.planarconfig) != 1:
        return "has separate colour planes"
    if int(page.bitspersample) != 8:
        return f"has {page.bitspersample} bits per sample (8 needed)"
    if int(page.samplesperpixel) not in (1, 3, 4):
        return f"has {page.samplesperpixel} samples per pixel"
    if int(getattr(page, "imagedepth", 1)) != 1:
        return "is a volume (image depth > 1)"
    if int(page.compression) == _JPEG and int(page.photometric) not in (
            _PHOTOMETRIC_RGB, _PHOTOMETRIC_YCBCR, 1):
        return f"has JPEG with photometric {page.photometric}"
    return ""


def open_tile_reader(path: str | os.PathLike[str], *, expected_dimensions: tuple[int, int]
                     | None = None, cache_mb: float = 128.0, on_bad_tile: str = "fail"
                     ) -> tuple[TileReader | None, str]:
    """Open a :class:`TileReader` for ``path`` if the file suits it (``on_bad_tile``: what a
    damaged tile does, as for :func:`wsikit.slide.open_slide`).

    Returns
    -------
    (reader or None, reason)
        ``reason`` says why the fast path is not used (empty when a reader is returned).
        ``expected_dimensions`` (the slide's level-0 size) must match the TIFF's first level.
    """
    path = Path(path)
    if path.suffix.lower() not in (".svs", ".tif", ".tiff", ".btf", ".tf8", ".ome.tif"):
        return None, f"{path.suffix or 'no suffix'} is not a TIFF suffix"
    try:
        reader = TileReader(path, cache_mb=cache_mb, on_bad_tile=on_bad_tile)
    except SlideError as exc:
        return None, str(exc)
    if expected_dimensions is not None and tuple(reader.dimensions) != tuple(
            int(v) for v in expected_dimensions):
        reader.close()
        return None, (f"TIFF level 0 is {reader.dimensions}, slide level 0 is "
                      f"{tuple(expected_dimensions)}")
    return reader, ""
