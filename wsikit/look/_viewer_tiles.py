"""The viewer's tiles: Deep Zoom tiles of a slide, read once, cached, and never of another file.

:class:`TileService` answers ``(level, col, row)`` of the slide's Deep Zoom pyramid
(:class:`wsikit.look._dzi.DziGeometry`) with JPEG bytes:

* a tile the slide file stores exactly (:func:`wsikit.look._dzi.stored_tile`: a JPEG TIFF level
  that is the Deep Zoom level, a whole tile of the same size) is sent as stored, its shared
  JPEG tables merged in (no decode, no second loss);
* any other tile of a level the file has is that level's pixels (read, encoded once);
* a tile of a level the file lacks is read from the best level and resized (Pillow's
  anti-aliased bilinear filter over the exact box, :meth:`wsikit.slide.Slide.read_at_mpp`);
  a read that would decode more than :data:`MAX_READ_PX` pixels (a slide without a pyramid,
  seen from afar) is decoded DCT-scaled from JPEG tiles, or made from its four finer tiles.

No torch on this path (Pillow, numpy and libjpeg-turbo only): the viewer stays a small
process. Encoded tiles are kept in a bounded LRU cache; concurrent requests for one tile
compute it once. Reads run on a few slide handles (one per serving thread at most).

Each request stats the slide file and the files it is read from (an MRXS slide's Slidedat.ini,
Index.dat and Data*.dat; the files of a DICOM series given by one file); a folder slide (an
OME-Zarr store with thousands of chunk files, a DICOM series folder) is listed at most once
every :data:`FOLDER_RECHECK_S` seconds instead (or 20 times as long as the last listing took,
so listing never costs more than 5 % of one thread), by one request while the others go on,
so a change there is seen within that time. A changed size, modification or inode time triggers
its content fingerprint (:func:`wsikit.slide.fingerprint.slide_fingerprint`, bounded for a
zarr store), and a slide whose content changed (overwritten in place, replaced) is refused
from then on (:attr:`TileService.changed` says why): tiles of two files are never mixed under
one name.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SlideError, WsikitError
from ._dzi import DziGeometry, matching_level, stored_tile

__all__: list[str] = []

#: Most source pixels one tile may decode (a 4096 x 4096 region); a coarser tile is decoded
#: DCT-scaled or made from its four finer tiles.
MAX_READ_PX = 4096 * 4096
#: JPEG quality of the tiles wsikit encodes.
JPEG_QUALITY = 90
_PHOTOMETRIC_JPEG_OK = (2, 6)  # RGB, YCbCr
_EPS = 1e-6


def encode_jpeg(pixels: np.ndarray, *, quality: int = JPEG_QUALITY) -> bytes:
    """``(h, w, 3) uint8`` as JPEG bytes (libjpeg-turbo through Pillow, 4:2:0)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def _stat_key(path: Path, companions: tuple[Path, ...] = ()) -> tuple[Any, ...] | None:
    """What stat says of the slide: the file and the other files it is read from
    (``companions``: an MRXS slide's Slidedat.ini, Index.dat and Data*.dat), or for a folder
    slide (an OME-Zarr store, a DICOM series) the folder and every file in it, listed once
    (a chunk or level rewritten in place changes no folder time)."""
    from ..slide.fingerprint import folder_files

    try:
        st = os.stat(path)
    except OSError:
        return None
    key: tuple[Any, ...] = (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if stat.S_ISDIR(st.st_mode):
        try:
            return key + tuple(folder_files(path))
        except OSError:  # a folder in it gone meanwhile: the key differs all the same
            return key + (None,)
    for f in companions:
        try:
            fs = f.stat()
        except OSError:  # gone meanwhile: the key differs all the same
            key += (str(f), None)
            continue
        key += (str(f), fs.st_ino, fs.st_size, fs.st_mtime_ns, fs.st_ctime_ns)
    return key


def _companions(path: Path) -> tuple[Path, ...]:
    """The other files the slide file ``path`` is read from (none for a folder, or when they
    cannot be listed: its fingerprint then says why)."""
    from ..slide.fingerprint import companion_paths

    try:
        return companion_paths(path)
    except SlideError:
        return ()


#: Seconds between two listings of a folder slide's files by :class:`SlideWatch` (a request
#: in between is not slowed by the thousands of stats of an OME-Zarr store); at least
#: :data:`FOLDER_RECHECK_TIMES` the last listing's time.
FOLDER_RECHECK_S = 2.0
#: How many times its own time a folder listing waits at least (20: at most 5 % of a thread).
FOLDER_RECHECK_TIMES = 20.0


class SlideWatch:
    """Whether the slide file is still the one opened: stat on every :meth:`check` (a folder
    slide's files: at most every :data:`FOLDER_RECHECK_S` seconds), the content fingerprint
    when the stat changed.

    Parameters
    ----------
    path : path-like
        The slide file (or folder).
    fingerprint : str, optional
        Its content fingerprint when opened (computed here otherwise).
    """

    def __init__(self, path: str | os.PathLike[str], *, fingerprint: str | None = None
                 ) -> None:
        from ..slide.fingerprint import slide_fingerprint

        self.path = Path(path)
        self._lock = threading.Lock()
        self._folder = self.path.is_dir()
        self._next_listing = time.monotonic() + FOLDER_RECHECK_S
        self._companions = _companions(self.path)
        self._stat = _stat_key(self.path, self._companions)
        self.fingerprint = fingerprint or slide_fingerprint(self.path)
        #: Why the slide is no longer the one opened (None while it is).
        self.changed: str | None = None

    def check(self) -> str | None:
        """None while the file is the one opened, else (from then on) why not."""
        if self.changed is not None:
            return self.changed
        if self._folder:  # one request lists the folder now and then; the others go on
            with self._lock:
                t = time.monotonic()
                if t < self._next_listing:
                    return self.changed
                self._next_listing = math.inf  # listed now, by this request
            try:
                key = _stat_key(self.path, self._companions)
            finally:
                spent = time.monotonic() - t
                self._next_listing = t + spent + max(FOLDER_RECHECK_S,
                                                     FOLDER_RECHECK_TIMES * spent)
        else:
            key = _stat_key(self.path, self._companions)
        if key == self._stat:
            return None
        from ..slide.fingerprint import slide_fingerprint

        with self._lock:
            if self.changed is not None or key == self._stat:
                return self.changed
            if key is None:
                self.changed = (f"{self.path} is gone (deleted or moved) since wsikit view "
                                "opened it; put it back and restart wsikit view")
                return self.changed
            try:
                now = slide_fingerprint(self.path)
            except SlideError as exc:
                self.changed = f"{exc}; restart wsikit view"
                return self.changed
            if now != self.fingerprint:
                self.changed = (f"{self.path} has changed since wsikit view opened it (its "
                                f"content is another slide's: fingerprint {now}, was "
                                f"{self.fingerprint}); its tiles are no longer served, so the "
                                "old slide's layout, name and regions are never drawn over "
                                "the new pixels. Restart wsikit view to see the new file")
                return self.changed
            self._stat = key  # touched, same content (so the same companion files)
        return None


class TileCache:
    """A thread-safe LRU cache of bytes (or arrays) bounded in bytes, computing each key
    once: concurrent :meth:`get_or_make` calls for one key wait for the first."""

    def __init__(self, budget: int) -> None:
        self.budget = int(budget)
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._pending: dict[Any, threading.Event] = {}
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _size(value: Any) -> int:
        return int(value.nbytes) if isinstance(value, np.ndarray) else len(value)

    def _hit(self, key: Any) -> Any:
        """The value of ``key`` made most recent and counted, else None (lock held)."""
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
            self.hits += 1
        return value

    def get(self, key: Any) -> Any:
        """The cached value of ``key`` (made most recent), else None."""
        with self._lock:
            return self._hit(key)

    def put(self, key: Any, value: Any) -> None:
        """Keep ``value`` (dropping the least recently used past the budget)."""
        size = self._size(value)
        if size > self.budget:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= self._size(old)
            self._items[key] = value
            self._bytes += size
            while self._bytes > self.budget and self._items:
                _, gone = self._items.popitem(last=False)
                self._bytes -= self._size(gone)

    def clear(self) -> None:
        """Drop every value."""
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def get_or_make(self, key: Any, make: Callable[[], Any]) -> Any:
        """The cached value of ``key``, else ``make()`` (once for concurrent callers; a
        None or a raised error is not cached, and each waiting caller then tries itself)."""
        while True:
            with self._lock:
                value = self._hit(key)
                if value is not None:
                    return value
                event = self._pending.get(key)
                if event is None:
                    event = self._pending[key] = threading.Event()
                    self.misses += 1
                    break
            event.wait()
            with self._lock:
                if key in self._items:
                    continue
            return make()  # the first caller failed: try once ourselves
        try:
            value = make()
            if value is not None:
                self.put(key, value)
            return value
        finally:
            with self._lock:
                self._pending.pop(key, None)
            event.set()


class TileService:
    """Deep Zoom tiles of one slide (see the module notes).

    Parameters
    ----------
    slide : wsikit.slide.Slide
        The open slide (its first read handle).
    open_handle : callable
        Opens another read handle of the same file (a :class:`~wsikit.slide.Slide`), for
        concurrent reads; at most ``handles`` are open.
    handles : int
        Most read handles (the number of threads that serve tiles).
    cache_mb : float
        Budget of the encoded-tile cache in MiB.
    fingerprint : str, optional
        The slide's content fingerprint when opened (computed otherwise).
    """

    def __init__(self, slide: Any, *, open_handle: Callable[[], Any], handles: int = 4,
                 cache_mb: float = 256.0, fingerprint: str | None = None) -> None:
        self.slide = slide
        self._open_handle = open_handle
        self._free: list[Any] = [slide]
        self._opened = 1
        self._most = max(1, int(handles))
        self._handles_lock = threading.Condition()
        self.watch = SlideWatch(slide.path, fingerprint=fingerprint)
        self.cache = TileCache(int(cache_mb * 2**20))
        self._pixels = TileCache(64 * 2**20)  # composed tiles of a flat slide
        self.max_read_px = MAX_READ_PX
        #: Most pixels one tile read decoded so far (tests, logs).
        self.largest_read = 0.0
        #: Tiles sent as the file stores them / read and encoded (tests, benchmarks).
        self.passed_through = 0
        self.encoded = 0
        self._reader = self._open_tile_reader()
        width, height = (int(v) for v in slide.dimensions)
        self.geometry = DziGeometry(width, height, tile=self._tile_px())

    # -- handles -----------------------------------------------------------------------------
    def _open_tile_reader(self) -> Any:
        """wsikit's TIFF tile reader (stored tiles, DCT-scaled decodes), or None."""
        from ..slide.tiles import open_tile_reader

        path = Path(self.slide.path)
        if not path.is_file():
            return None
        try:
            reader, _ = open_tile_reader(
                path, expected_dimensions=tuple(self.slide.dimensions), cache_mb=0,
                on_bad_tile=getattr(self.slide, "on_bad_tile", "fail"))
        except (WsikitError, OSError, ValueError):
            return None
        return reader

    def _tile_px(self) -> int:
        """The Deep Zoom tile size: the file's level-0 tile size where it is square and
        between 128 and 1024 px (so its stored tiles can pass through), else 256."""
        if self._reader is not None:
            lv = self._reader.levels[0]
            if lv.tile_width == lv.tile_height and 128 <= lv.tile_width <= 1024:
                return int(lv.tile_width)
        return 256

    @contextlib.contextmanager
    def _handle(self) -> Iterator[Any]:
        with self._handles_lock:
            while not self._free and self._opened >= self._most:
                self._handles_lock.wait()
            if self._free:
                handle = self._free.pop()
            else:
                self._opened += 1
                handle = None
        if handle is None:
            try:
                handle = self._open_handle()
            except BaseException:
                with self._handles_lock:
                    self._opened -= 1
                    self._handles_lock.notify()
                raise
        try:
            yield handle
        finally:
            with self._handles_lock:
                self._free.append(handle)
                self._handles_lock.notify()

    def close(self) -> None:
        """Close every read handle and the tile reader."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        with self._handles_lock:
            for handle in self._free:
                handle.close()
            self._free.clear()

    # -- tiles -------------------------------------------------------------------------------
    @property
    def changed(self) -> str | None:
        """Why the slide file is no longer the one opened (None while it is); checked now."""
        return self.watch.check()

    def tile(self, level: int, col: int, row: int) -> bytes | None:
        """JPEG bytes of Deep Zoom tile ``(level, col, row)``; None outside the image.

        Raises
        ------
        SlideError
            The slide file changed since it was opened (names it; nothing of the new file
            is served).
        """
        if self.geometry.tile_rect(level, col, row) is None:
            return None
        self._refuse_if_changed()
        body = self.cache.get_or_make(("slide", level, col, row),
                                      lambda: self._make(level, col, row))
        self._refuse_if_changed()  # the file changed during the read: the tile is dropped
        return body

    def _refuse_if_changed(self) -> None:
        why = self.watch.check()
        if why is not None:
            self.cache.clear()
            self._pixels.clear()
            raise SlideError(why)

    def stored(self, level: int, col: int, row: int) -> bytes | None:
        """The file's own JPEG bytes of Deep Zoom tile ``(level, col, row)`` (standalone),
        or None when the file does not store exactly that tile."""
        reader = self._reader
        if reader is None:
            return None
        i = matching_level(self.geometry, level, [(lv.width, lv.height) for lv in reader.levels])
        if i is None:
            return None
        lv = reader.levels[i]
        if not (lv.is_jpeg and lv.photometric in _PHOTOMETRIC_JPEG_OK) or not stored_tile(
                self.geometry, level, col, row, level_size=(lv.width, lv.height),
                stored_tile_size=(lv.tile_width, lv.tile_height)):
            return None
        try:
            return reader.stored_jpeg(i, col, row)
        except (OSError, IndexError):
            return None

    def _make(self, level: int, col: int, row: int) -> bytes:
        body = self.stored(level, col, row)
        if body is not None:
            self.passed_through += 1
            return body
        pixels = self.pixels(level, col, row)
        self.encoded += 1
        return encode_jpeg(pixels)

    def pixels(self, level: int, col: int, row: int) -> np.ndarray:
        """``(h, w, 3) uint8`` of Deep Zoom tile ``(level, col, row)`` (see the module notes).

        Raises
        ------
        SlideError
            Outside the image, or the slide cannot be read there.
        """
        geo = self.geometry
        found = geo.tile_box(level, col, row)
        if found is None:
            raise SlideError(f"{self.slide.path}: Deep Zoom tile ({level}, {col}, {row}) lies "
                             "outside the slide")
        box, out = found
        i = matching_level(geo, level, self.slide.level_dimensions)
        if i is not None:  # the level's own pixels
            x, y, w, h = geo.tile_rect(level, col, row)  # type: ignore[misc]
            return self._level_pixels(i, x, y, w, h)
        lw, lh = geo.level_size(level)
        if lw <= geo.tile and lh <= geo.tile and level < geo.max_level:
            # a level that is one tile: from the next one (the chain to 1 x 1 reads nothing)
            return self._pixels.get_or_make(("composed", level, col, row),
                                            lambda: self._compose(level, col, row, out))
        found_px = self._read(box, out)
        if found_px is not None:
            return found_px
        return self._pixels.get_or_make(("composed", level, col, row),
                                        lambda: self._compose(level, col, row, out))

    def _level_pixels(self, i: int, x: int, y: int, w: int, h: int) -> np.ndarray:
        """Pixels ``[y, y+h) × [x, x+w)`` of slide level ``i``; a row or column the Deep Zoom
        level has beyond the file's level (rounded down by the scanner) repeats its edge."""
        lw, lh = self.slide.level_dimensions[i]
        rw, rh = max(1, min(w, lw - x)), max(1, min(h, lh - y))
        self.largest_read = max(self.largest_read, float(rw * rh))
        reader = self._reader
        if reader is not None and i < len(reader.levels) and \
                (reader.levels[i].width, reader.levels[i].height) == (lw, lh):
            px = self._mosaic(i, 1, x, y, x + rw, y + rh)
        else:
            ds = self.slide.level_downsamples[i]
            with self._handle() as slide:
                px = np.asarray(slide.read_region((x * ds, y * ds), i, (rw, rh)))
        if (rw, rh) != (w, h):
            px = np.pad(px, ((0, h - rh), (0, w - rw), (0, 0)), mode="edge")
        return px

    def _mosaic(self, level: int, k: int, ix0: int, iy0: int, ix1: int, iy1: int
                ) -> np.ndarray:
        """Pixels ``[iy0, iy1) × [ix0, ix1)`` of TIFF level ``level`` decoded at ``1/k``
        (white outside the level), from the tile reader: the JPEG decodes are bit-identical
        to the slide reader's."""
        reader = self._reader
        lv = reader.levels[level]
        tw, th = lv.tile_width // k, lv.tile_height // k
        valid_w, valid_h = -(-lv.width // k), -(-lv.height // k)
        mosaic = np.full((iy1 - iy0, ix1 - ix0, 3), 255, np.uint8)
        for r in range(max(0, iy0 // th), min(lv.tiles_down, -(-iy1 // th))):
            for c in range(max(0, ix0 // tw), min(lv.tiles_across, -(-ix1 // tw))):
                tx0, ty0 = c * tw, r * th
                xa, xb = max(ix0, tx0), min(ix1, tx0 + tw, valid_w)
                ya, yb = max(iy0, ty0), min(iy1, ty0 + th, valid_h)
                if xb <= xa or yb <= ya:
                    continue
                tile = reader.read_tile(level, c, r, reduction=k, cache=False)
                mosaic[ya - iy0:yb - iy0, xa - ix0:xb - ix0] = \
                    tile[ya - ty0:yb - ty0, xa - tx0:xb - tx0]
        return mosaic

    def _read(self, box: tuple[int, int, int, int], out: tuple[int, int]) -> np.ndarray | None:
        """The box at ``out`` from the best level, as :meth:`wsikit.slide.Slide.read_at_mpp`
        gives it (from the tile reader where there is one: the same region, the same decodes,
        the same resize), or DCT-scaled where that decodes at most :attr:`max_read_px`
        pixels; None when neither does."""
        from ..slide.slide import resize_box

        x, y, w, h = (float(v) for v in box)
        reader = self._reader
        if reader is None:
            lds = self.slide.level_downsamples[self.slide.best_level(
                min(w / out[0], h / out[1]))]
            cost = (w / lds + 2) * (h / lds + 2)
            if cost > self.max_read_px:
                return None
            self.largest_read = max(self.largest_read, cost)
            with self._handle() as slide:
                return np.asarray(slide.read_at_mpp(box, out_size=out))
        for dct in (False, True):
            level, k = reader.plan((w, h), out, dct=dct)
            lv = reader.levels[level]
            sx0, sy0 = x / lv.downsample[0] / k, y / lv.downsample[1] / k
            sx1, sy1 = (x + w) / lv.downsample[0] / k, (y + h) / lv.downsample[1] / k
            ix0, iy0 = math.floor(sx0 + _EPS), math.floor(sy0 + _EPS)
            ix1 = max(math.ceil(sx1 - _EPS), ix0 + 1)
            iy1 = max(math.ceil(sy1 - _EPS), iy0 + 1)
            cost = float((ix1 - ix0) * (iy1 - iy0))
            if cost > self.max_read_px or (dct and k == 1):
                continue
            self.largest_read = max(self.largest_read, cost)
            region = self._mosaic(level, k, ix0, iy0, ix1, iy1)
            return resize_box(region, (sx0 - ix0, sy0 - iy0, sx1 - ix0, sy1 - iy0), out)
        return None

    def _compose(self, level: int, col: int, row: int, out: tuple[int, int]) -> np.ndarray:
        """A tile made from its (up to) four tiles of the next finer level."""
        from PIL import Image

        t = self.geometry.tile
        canvas = np.full((2 * t, 2 * t, 3), 255, np.uint8)
        cw = ch = 0
        for dr in (0, 1):
            for dc in (0, 1):
                if self.geometry.tile_rect(level + 1, 2 * col + dc, 2 * row + dr) is None:
                    continue
                child = self.pixels(level + 1, 2 * col + dc, 2 * row + dr)
                h, w = child.shape[:2]
                canvas[dr * t:dr * t + h, dc * t:dc * t + w] = child
                cw, ch = max(cw, dc * t + w), max(ch, dr * t + h)
        return np.asarray(Image.fromarray(canvas[:ch, :cw]).resize(
            out, Image.Resampling.BILINEAR, reducing_gap=2.0))
