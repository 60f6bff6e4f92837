"""Hamamatsu NDPI pixels without OpenSlide: its restart intervals decoded as tiles, in bulk.

An NDPI level is one baseline JPEG whose restart markers split every MCU row into intervals;
tag 65426 (McuStarts) gives where each interval starts, so an interval (``tile_width`` × one
MCU row) can be decoded on its own: the level's JPEG header with the frame size set to one
interval, the interval's entropy-coded data, an end marker. OpenSlide reads NDPI this way and
adds the levels a scaled JPEG decode gives (1/2, 1/4, 1/8 of a stored level, down to the next
stored one). :class:`NdpiBackend` reproduces that pyramid and those pixels (libjpeg-turbo's
decode and DCT scaling through ``simplejpeg``), but decodes a whole column of intervals in one
call: the intervals of one column, stacked with renumbered restart markers, are a valid JPEG of
``tile_width`` × (rows × MCU height) px, and where the chroma is not subsampled vertically
(4:2:2, 4:4:4) its pixels equal those of each interval decoded alone. With vertical
subsampling (4:2:0) the chroma upsampling would see the rows above and below, so there each
interval is decoded alone. :func:`wsikit.slide.pixel_backend.open_pixel_slide` uses this backend
only where it gives OpenSlide's pyramid and pixels on its probes.

Levels without restart markers (some files' smallest levels), files whose level widths are
not whole intervals, and non-NDPI files are refused with a :class:`~wsikit.errors.SlideError`
(the slide then stays with OpenSlide).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import SlideError

__all__ = ["NdpiBackend"]

_EOI = b"\xff\xd9"
#: Most restart intervals stacked into one decode (bounds the column buffer).
_MAX_ROWS = 1024
_RST = [bytes((0xFF, 0xD0 + k)) for k in range(8)]


@dataclass(frozen=True)
class _Stored:
    """One stored NDPI level: its JPEG header and where each restart interval lies."""

    width: int
    height: int
    tile_w: int
    tile_h: int
    header: bytes          # JPEG header up to the end of the SOS segment
    sof_size_at: int       # offset in ``header`` of the frame's height, width (2 × u16 BE)
    offsets: tuple[int, ...]
    counts: tuple[int, ...]
    stackable: bool        # no vertical chroma subsampling: columns decode in one call

    @property
    def cols(self) -> int:
        return self.width // self.tile_w


def _frame(header: bytes) -> tuple[int, bool]:
    """(offset of the frame height, whether no component is subsampled vertically).

    Walks the header's marker segments (a table's bytes may look like a marker).
    """
    pos = 2 if header[:2] == b"\xff\xd8" else 0
    while pos + 4 <= len(header) and header[pos] == 0xFF:
        marker = header[pos + 1]
        length = int.from_bytes(header[pos + 2:pos + 4], "big")
        if marker in (0xC0, 0xC1):   # baseline or extended sequential Huffman
            n = header[pos + 9]
            sampling = [header[pos + 11 + 3 * i] for i in range(n)]
            return pos + 5, all(v & 0x0F == 1 for v in sampling)  # vertical factor 1
        if 0xC2 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            break   # progressive, lossless or arithmetic: not what NDPI intervals are
        pos += 2 + length
    raise SlideError("NDPI level without a baseline JPEG frame header (SOF0/SOF1)")


class NdpiBackend:
    """Level pixels of an NDPI file as OpenSlide gives them (see the module docstring)."""

    name = "ndpi"

    def __init__(self, path: Path) -> None:
        import tifffile

        self._path = Path(path)
        try:
            tif = tifffile.TiffFile(self._path)
        except Exception as exc:
            raise SlideError(f"not a TIFF-like file ({exc})") from exc
        try:
            if not tif.is_ndpi:
                raise SlideError("not a Hamamatsu NDPI file (no TIFF tag 65420)")
            stored, props = self._scan(tif)
        finally:
            tif.close()
        self._stored = stored
        self.properties = props
        levels: list[tuple[int, int]] = []   # (stored index, scale denominator)
        for i, s in enumerate(stored):
            nxt = stored[i + 1].width if i + 1 < len(stored) else 0
            for scale in (1, 2, 4, 8):
                if s.width // scale > nxt and s.tile_w % scale == 0 and s.tile_h % scale == 0:
                    levels.append((i, scale))
        self._levels = tuple(levels)
        dims = tuple((stored[i].width // sc, stored[i].height // sc) for i, sc in levels)
        self.level_dimensions = dims
        w0, h0 = dims[0]
        self.level_downsamples = tuple((w0 / w + h0 / h) / 2 for w, h in dims)
        for k, (i, sc) in enumerate(levels):
            props[f"openslide.level[{k}].tile-width"] = str(stored[i].tile_w // sc)
            props[f"openslide.level[{k}].tile-height"] = str(stored[i].tile_h // sc)
        self._fd = os.open(self._path, os.O_RDONLY | getattr(os, "O_BINARY", 0))

    def _scan(self, tif: object) -> tuple[list[_Stored], dict[str, str]]:
        pages = [p for p in tif.pages  # type: ignore[attr-defined]
                 if 65421 in p.tags and float(p.tags[65421].value) > 0]
        if not pages:
            raise SlideError("NDPI file without pyramid levels (tag 65421 > 0)")
        z = [p for p in pages if int(p.tags.get(65424).value if 65424 in p.tags else 0) == 0]
        pages = sorted(z or pages, key=lambda p: -int(p.shape[1]))
        stored = []
        for p in pages:
            if 65426 not in p.tags or not p.is_tiled:
                raise SlideError(f"NDPI level {p.shape[1]}x{p.shape[0]} has no restart "
                                 "markers (McuStarts); only OpenSlide reads it")
            h, w = int(p.shape[0]), int(p.shape[1])
            tw, th = int(p.tilewidth), int(p.tilelength)
            if w <= 0 or h <= 0 or tw <= 0 or th <= 0 or w % tw or h % th:
                raise SlideError(f"NDPI level {w}x{h} is not whole {tw}x{th} intervals")
            if len(p.dataoffsets) != (w // tw) * (h // th):  # bound every index from it
                raise SlideError(f"NDPI level {w}x{h} claims {(w // tw) * (h // th):,} restart "
                                 f"intervals of {tw}x{th} px, the file lists "
                                 f"{len(p.dataoffsets):,}; its header is damaged")
            header = bytes(p.jpegheader)
            at, stackable = _frame(header)
            stored.append(_Stored(w, h, tw, th, header, at, tuple(int(v) for v in p.dataoffsets),
                                  tuple(int(v) for v in p.databytecounts), stackable))
        if any(a.width <= b.width for a, b in zip(stored, stored[1:], strict=False)):
            raise SlideError("NDPI pyramid levels of equal width (several focal planes?)")
        first = pages[0]
        props = {"openslide.vendor": "hamamatsu"}
        lens = float(first.tags[65421].value)
        props["hamamatsu.SourceLens"] = f"{lens:g}"
        props["openslide.objective-power"] = f"{lens:g}"
        tags = first.tags
        if 282 in tags and 296 in tags and int(tags[296].value) == 3:
            for axis, tag in (("x", 282), ("y", 283)):
                num, den = tags[tag].value if tag in tags else tags[282].value
                if num > 0:
                    props[f"openslide.mpp-{axis}"] = repr(10000.0 * den / num)
        return stored, props

    # -- pixels ---------------------------------------------------------------------------
    def _column(self, s: _Stored, col: int, row0: int, rows: int) -> bytes:
        """A JPEG of the intervals ``[row0, row0+rows)`` of column ``col``, stacked."""
        header = bytearray(s.header)
        header[s.sof_size_at:s.sof_size_at + 4] = struct.pack(">HH", s.tile_h * rows, s.tile_w)
        parts: list[bytes] = [bytes(header)]
        for k in range(rows):
            i = (row0 + k) * s.cols + col
            data = os.pread(self._fd, s.counts[i], s.offsets[i])
            if len(data) != s.counts[i]:
                raise SlideError(f"{self._path}: truncated NDPI data at byte {s.offsets[i]}")
            if data[-2:-1] == b"\xff" and 0xD0 <= data[-1] <= 0xD7:
                data = data[:-2]
            parts.append(data)
            parts.append(_RST[k % 8] if k + 1 < rows else _EOI)
        return b"".join(parts)

    def read(self, level: int, lx: int, ly: int, w: int, h: int) -> np.ndarray:
        import simplejpeg

        index, scale = self._levels[level]
        s = self._stored[index]
        tw, th = s.tile_w // scale, s.tile_h // scale
        out = np.empty((h, w, 3), np.uint8)
        r0, r1 = ly // th, (ly + h - 1) // th
        # a stacked JPEG's height must fit the frame header's 16 bits
        step = max(1, min(_MAX_ROWS, 65535 // s.tile_h)) if s.stackable else 1
        runs = [(r, min(step, r1 + 1 - r)) for r in range(r0, r1 + 1, step)]
        for col in range(lx // tw, (lx + w - 1) // tw + 1):
            x0 = col * tw
            a, b = max(lx, x0), min(lx + w, x0 + tw)
            for row0, rows in runs:
                img = simplejpeg.decode_jpeg(self._column(s, col, row0, rows), "RGB",
                                             min_width=tw, min_height=th * rows)
                if img.shape[:2] != (th * rows, tw):
                    raise SlideError(f"{self._path}: NDPI interval decoded to {img.shape[:2]}, "
                                     f"expected {(th * rows, tw)}")
                y0 = row0 * th
                c, d = max(ly, y0), min(ly + h, y0 + th * rows)
                out[c - ly:d - ly, a - lx:b - lx] = img[c - y0:d - y0, a - x0:b - x0]
        return out

    def associated(self) -> dict[str, np.ndarray]:
        return {}

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
