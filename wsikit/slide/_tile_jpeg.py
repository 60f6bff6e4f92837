"""Decoding the JPEG tiles of a TIFF pyramid.

JPEG tiles in TIFF often carry their quantisation and Huffman tables once per page
(``JPEGTables``); they are spliced into every tile stream. TIFF pages with ``Photometric=RGB``
hold JPEG data without the YCbCr transform (e.g. Aperio): an Adobe APP14 marker with
``transform=0`` is inserted so that libjpeg does not apply a colour conversion. Other
compressions (JPEG 2000, LZW, deflate, ...) are decoded by :mod:`tifffile`/:mod:`imagecodecs`.

Decoders: :mod:`simplejpeg` (libjpeg-turbo with DCT scaling and low call overhead) when it
is installed, else Pillow's ``Image.draft`` (also libjpeg-turbo DCT scaling), with
:func:`imagecodecs.jpeg8_decode` for full-size decodes.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

try:  # optional, fastest scaled JPEG decode
    import simplejpeg as _simplejpeg
except ImportError:  # pragma: no cover - depends on the environment
    _simplejpeg = None

__all__ = ["DECODER", "decode_jpeg"]

#: Which JPEG decoder does the scaled decodes ("simplejpeg" or "pillow").
DECODER = "simplejpeg" if _simplejpeg is not None else "pillow"

_JPEG = 7
_PHOTOMETRIC_RGB = 2
_PHOTOMETRIC_YCBCR = 6
_ADOBE_NO_TRANSFORM = b"\xff\xee\x00\x0eAdobe\x00\x64\x00\x00\x00\x00\x00"


def _composite_white(rgba: np.ndarray) -> np.ndarray:
    alpha = rgba[:, :, 3:4].astype(np.uint16)
    rgb = rgba[:, :, :3].astype(np.uint16)
    return ((rgb * alpha + 255 * (255 - alpha) + 127) // 255).astype(np.uint8)


def decode_jpeg(stream: bytes, reduction: int, tw: int, th: int, *,
                 buffer: np.ndarray | None = None) -> np.ndarray:
    """Decode a tile stream to ``(th, tw, 3)`` RGB (a DCT-scaled decode if ``reduction > 1``).

    ``buffer``, a C-contiguous uint8 array of at least ``th · tw · 3`` bytes, receives the
    pixels where the decoder can write into it (simplejpeg); the result is then a view of it.
    """
    if _simplejpeg is not None:
        if reduction == 1:
            return _simplejpeg.decode_jpeg(stream, colorspace="RGB", buffer=buffer)
        return _simplejpeg.decode_jpeg(stream, colorspace="RGB", min_factor=reduction,
                                       min_width=tw, min_height=th, buffer=buffer)
    from PIL import Image

    im = Image.open(io.BytesIO(stream))
    if reduction > 1:
        im.draft("RGB", (tw, th))
    return np.asarray(im if im.mode == "RGB" else im.convert("RGB"))


def _jpeg_prefix(page: Any) -> bytes:
    """Bytes that replace a tile's SOI: SOI, colour marker, shared tables (sans SOI/EOI)."""
    prefix = b"\xff\xd8"
    if page.photometric == _PHOTOMETRIC_RGB and page.compression == _JPEG:
        prefix += _ADOBE_NO_TRANSFORM
    tables = getattr(page, "jpegtables", None)
    if tables:
        tables = bytes(tables)
        start = 2 if tables[:2] == b"\xff\xd8" else 0
        end = len(tables) - 2 if tables[-2:] == b"\xff\xd9" else len(tables)
        prefix += tables[start:end]
    return prefix
