"""File-level checks before a slide is decoded: what a path is, and whether a TIFF is whole.

:func:`check_openable` refuses paths that are not slide files (FIFOs, devices, sockets, symlink
loops, empty files, an MRXS or VMS file without the files it names) before anything reads them;
:func:`_check_tiff_extent` finds truncated and damaged TIFF structures; :func:`_quiet` turns a
backend's parser noise into one error.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import stat
import struct
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SlideError

_TIFF_MAGIC = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")


def _first_ifd_offset(head: bytes) -> int | None:
    """Byte offset of a TIFF's first image directory from its header (None if unreadable)."""
    order = "<" if head[:2] == b"II" else ">"
    if head[2:4] in (b"*\x00", b"\x00*") and len(head) >= 8:
        return int(struct.unpack(order + "I", head[4:8])[0])
    if len(head) >= 16:  # BigTIFF
        return int(struct.unpack(order + "Q", head[8:16])[0])
    return None


def _check_tiff_extent(path: Path) -> None:
    """Raise SlideError if a TIFF's image data extends past the end of the file (truncated)."""
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head[:4] not in _TIFF_MAGIC:
        return
    import tifffile

    size = path.stat().st_size
    first = _first_ifd_offset(head)
    if first is None or first >= size:
        where = "" if first is None else f"its TIFF header points to byte {first}, "
        raise SlideError(f"{path}: file is truncated ({where}the file has {size} bytes); "
                         "copy or download the slide again")
    problems = _LogCollector()
    log = logging.getLogger("tifffile")
    log.addHandler(problems)
    propagate, log.propagate = log.propagate, False  # its complaints become our one error
    try:
        with _quiet(level=logging.DEBUG), tifffile.TiffFile(path) as tif:
            if len(tif.pages) == 0:
                raise SlideError(f"{path}: TIFF file without images; the file is damaged or "
                                 "truncated, copy or download it again")
            n_pages = len(tif.pages)  # walks the whole directory chain
            if problems.offsets:
                found = re.findall(r"offset (\d+)", problems.offsets[0])
                where = f"an image directory at byte {found[-1]}, " if found else ""
                raise SlideError(f"{path}: file is truncated or damaged ({where}only "
                                 f"{n_pages} image(s) readable, the file has {size} bytes); "
                                 "copy or download the slide again")
            for i, page in enumerate(tif.pages):
                offsets = np.asarray(page.dataoffsets, np.int64)
                counts = np.asarray(page.databytecounts, np.int64)
                if offsets.size and int((offsets + counts).max()) > size:
                    raise SlideError(
                        f"{path}: file is truncated (image {i} needs "
                        f"{int((offsets + counts).max())} bytes, the file has {size}); "
                        f"copy or download the slide again")
                _check_geometry(path, i, page, len(offsets), int(counts.sum()))
            if tif.is_ndpi:
                _check_ndpi_frames(path, tif)
    except SlideError:
        raise
    except Exception as exc:
        raise SlideError(f"{path}: broken TIFF structure ({exc}); the file is damaged or "
                         f"truncated, copy or download it again") from exc
    finally:
        log.removeHandler(problems)
        log.propagate = propagate


def _check_geometry(path: Path, i: int, page: object, n_blocks: int, n_bytes: int) -> None:
    """Refuse an image whose header lies about its size, before any reader allocates from it.

    A TIFF page's width and height must be positive, its tiles (or strips) non-empty, and the
    file must list as many tiles (strips, NDPI restart intervals) as the size implies: a header
    that claims 9,999,872 x 9,999,872 px over the 512 intervals of a 150 kB file is refused
    here, with the numbers, instead of aborting the interpreter in a reader's allocation.
    An image whose every tile is empty (0 bytes) holds no pixels and is refused too.
    """
    p: Any = page
    w, h = int(p.imagewidth), int(p.imagelength)
    if w <= 0 or h <= 0:
        raise SlideError(f"{path}: image {i} is {w} x {h} px; its header is damaged (copy the "
                         "slide again)")
    planes = int(p.samplesperpixel) if int(p.planarconfig) == 2 else 1
    depth = max(1, int(getattr(p, "imagedepth", 1) or 1))
    tile_tags = [int(p.tags[c].value) for c in (322, 323) if c in p.tags]
    if tile_tags and min(tile_tags) <= 0:
        raise SlideError(f"{path}: image {i} ({w} x {h} px) declares tiles of "
                         f"{' x '.join(map(str, tile_tags))} px; its header is damaged (copy "
                         "the slide again)")
    if p.is_tiled:
        tw, th = int(p.tilewidth), int(p.tilelength)
        td = max(1, int(getattr(p, "tiledepth", 1) or 1))
        if tw <= 0 or th <= 0:
            raise SlideError(f"{path}: image {i} ({w} x {h} px) has {tw} x {th} px tiles; "
                             "its header is damaged (copy the slide again)")
        expected = -(-w // tw) * -(-h // th) * -(-depth // td) * planes
        unit = f"{tw} x {th} px tiles"
    else:
        rows = int(p.tags[278].value) if 278 in p.tags else h
        if rows <= 0:
            raise SlideError(f"{path}: image {i} ({w} x {h} px) has strips of {rows} rows; "
                             "its header is damaged (copy the slide again)")
        expected = -(-h // min(rows, h)) * depth * planes
        unit = f"strips of {min(rows, h)} rows"
    if n_blocks < expected:
        raise SlideError(f"{path}: image {i} claims {w} x {h} px, which is {expected:,} "
                         f"{unit}, but the file lists only {n_blocks:,}; its header is damaged "
                         "(copy the slide again)")
    if i == 0 and n_blocks and n_bytes == 0:
        raise SlideError(f"{path}: level 0 ({w} x {h} px) holds no image data (all "
                         f"{n_blocks:,} of its tiles or strips are empty); the file is damaged "
                         "or was never written in full (copy or export the slide again)")


def _check_ndpi_frames(path: Path, tif: object) -> None:
    """Refuse an NDPI level whose whole-level JPEG frame is empty (0 px wide or high) where
    its TIFF size fits a JPEG frame (sides up to 65,535 px)."""
    t: Any = tif
    with open(path, "rb") as fh:
        for i, page in enumerate(t.pages):
            if 65421 not in page.tags or 273 not in page.tags:
                continue
            start = page.tags[273].value
            start = int(start[0] if isinstance(start, tuple | list) else start)
            fh.seek(start)
            head = fh.read(1 << 16)
            at = _sof_offset(head)
            if at is None:
                continue
            fh_h, fh_w = struct.unpack(">HH", head[at + 5:at + 9])
            w, h = int(page.imagewidth), int(page.imagelength)
            # only an empty frame is refused: a side above 65,535 px does not fit the frame
            # header, and scanners' own headers are not second-guessed beyond that
            if (fh_w == 0 and 0 < w <= 0xFFFF) or (fh_h == 0 and 0 < h <= 0xFFFF):
                raise SlideError(f"{path}: NDPI image {i} is {w} x {h} px but its JPEG "
                                 f"frame says {fh_w} x {fh_h} px; the file is damaged (copy "
                                 "the slide again)")


def _sof_offset(head: bytes) -> int | None:
    """Offset of the first baseline/extended JPEG frame header (SOF0/SOF1) in ``head``,
    walking the marker segments from the start of image."""
    if head[:2] != b"\xff\xd8":
        return None
    pos = 2
    while pos + 4 <= len(head) and head[pos] == 0xFF:
        marker = head[pos + 1]
        if marker in (0xC0, 0xC1):
            return pos if pos + 9 <= len(head) else None
        if marker == 0xDA:
            return None
        pos += 2 + int.from_bytes(head[pos + 2:pos + 4], "big")
    return None


class _LogCollector(logging.Handler):
    """Collects tifffile's complaints about directory offsets outside the file."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.offsets: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if "offset" in msg and "invalid" in msg:
            self.offsets.append(msg)


@contextlib.contextmanager
def _quiet(level: int = logging.ERROR) -> Iterator[None]:
    """Silence tifffile's log warnings and library warnings while probing a file.

    Warnings raised are collected and re-issued only when the probe succeeds, so a file that
    opens keeps its warnings and one that does not gives a single error instead of noise.
    """
    log = logging.getLogger("tifffile")
    before = log.level
    log.setLevel(level)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        log.setLevel(before)
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def check_openable(p: Path) -> None:
    """Refuse, before anything reads it, a path that is not a slide file.

    FIFOs, sockets and devices are never opened (reading a FIFO named ``*.svs`` blocks
    forever); a symlink loop, a missing file and a folder without a suffix get one clear error,
    and so does an MRXS file whose data folder (or a file it names) is missing.
    """
    try:
        st = os.stat(p)
    except RuntimeError as exc:  # pragma: no cover - pathlib-style loop detection
        raise SlideError(f"{p}: symbolic link loop; fix or remove the link") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SlideError(f"{p}: symbolic link loop; fix or remove the link") from exc
        if isinstance(exc, FileNotFoundError):
            kind = "dangling symbolic link" if os.path.islink(p) else "no such file"
            raise SlideError(f"{p}: {kind}; check the path") from exc
        raise SlideError(f"{p}: cannot read it ({exc.strerror or exc}); check the path and "
                         "its permissions") from exc
    if stat.S_ISDIR(st.st_mode):
        if not p.suffix:
            raise SlideError(f"{p}: is a folder, not a slide file")
        return
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else
                "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise SlideError(f"{p}: is {kind}, not a slide file; give the slide file itself")
    if st.st_size == 0:
        raise SlideError(f"{p}: file is empty (0 bytes); copy or download the slide again")
    if p.suffix.lower() in (".mrxs", ".vms", ".vmu"):
        from ._companions import companion_files

        companion_files(p)  # the files it keeps its pixels in: a missing one said by name
