"""Window → crop: read each selected window from the best pyramid level and save it.

A window of ``size`` level-0 pixels is read at the finest resolution that keeps the crop within
``max_px`` × ``max_px`` (default 1024): ``out = min(max_px, size)`` pixels a side, so the crop's
resolution is ``slide.mpp * size / out`` µm/px. The read goes through
:meth:`wsikit.slide.Slide.read_at_mpp`, which picks the pyramid level with the largest downsample
that still has at least that resolution and resizes with anti-aliasing.
"""

from __future__ import annotations

import io
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._atomic import write_bytes_atomic, write_json_atomic

if TYPE_CHECKING:  # pragma: no cover
    from ..slide import Slide
    from .selectors import Window

__all__ = ["Crop", "crop_window", "save_crop"]


@dataclass(frozen=True)
class Crop:
    """One saved crop.

    Attributes
    ----------
    path : str
        PNG path (relative to ``save_crop``'s ``relative_to``, the folder of evidence.json).
    x, y, size : int
        The window's level-0 box (top-left and edge, level-0 px).
    scale : int
        Window scale in patches (8, 4, 2, 1).
    score : float
        Window score.
    width, height : int
        Crop size in pixels.
    mpp : float
        Crop resolution in µm/px.
    """

    path: str
    x: int
    y: int
    size: int
    scale: int
    score: float
    width: int
    height: int
    mpp: float

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (the crop's sidecar)."""
        return asdict(self)


def crop_size(window_l0: int, *, max_px: int = 1024) -> int:
    """Pixels a side of the crop of a ``window_l0``-pixel window (never upsampled)."""
    if max_px < 1:
        raise ValueError(f"max_px must be >= 1, got {max_px}")
    return int(min(max_px, window_l0))


def crop_window(slide: Slide, x: int, y: int, size: int, *, max_px: int = 1024
                ) -> tuple[np.ndarray, float]:
    """Read the level-0 box ``(x, y, size, size)`` as a crop of at most ``max_px`` a side.

    Returns
    -------
    image : (S, S, 3) uint8
        The crop, ``S = min(max_px, size)``; the box must lie inside the slide (a
        :class:`~wsikit.errors.SelectionError` otherwise: a crop is never padded).
    mpp : float
        Its resolution in µm/px.
    """
    out = crop_size(size, max_px=max_px)
    W, H = slide.dimensions
    if x < 0 or y < 0 or x + size > W or y + size > H:
        from ..errors import SelectionError

        raise SelectionError(
            f"{slide.path}: window ({x}, {y}, {size}x{size} px) runs past the "
            f"{W}x{H} slide; crops are never padded: select with slide_size=slide.dimensions")
    img = slide.read_at_mpp((int(x), int(y), int(size), int(size)), out_size=(out, out))
    return img, float(slide.mpp) * size / out


def _png_bytes(image: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG", optimize=False, compress_level=3)
    return buf.getvalue()


def save_crop(slide: Slide, window: Window, out_dir: str | os.PathLike[str], *, name: str,
              max_px: int = 1024, relative_to: str | os.PathLike[str] | None = None
              ) -> tuple[Crop, np.ndarray]:
    """Read ``window`` from ``slide``, write ``<out_dir>/<name>.png`` and a ``.json`` sidecar.

    Both files are written atomically. ``Crop.path`` is relative to ``relative_to`` when given.
    The sidecar holds the crop's record with its paths relative to the sidecar's own folder
    (``path``: the PNG's name; ``slide_relpath``: the slide), so a moved output folder keeps
    it valid, and the slide's absolute path (``slide``) for a sidecar copied on its own.
    Returns the crop's record and its pixels ``(H, W, 3) uint8`` (the PNG's, losslessly), so
    a caller embeds them without reading the file back.
    """
    out_dir = Path(out_dir)
    image, mpp = crop_window(slide, window.x, window.y, window.size, max_px=max_px)
    png = out_dir / f"{name}.png"
    write_bytes_atomic(png, _png_bytes(image))
    shown = os.path.relpath(png, relative_to) if relative_to is not None else str(png)
    crop = Crop(path=shown, x=int(window.x), y=int(window.y), size=int(window.size),
                scale=int(window.scale), score=float(window.score), width=int(image.shape[1]),
                height=int(image.shape[0]), mpp=mpp)
    from ..outputs.paths import portable_path

    slide_rel, slide_abs = portable_path(slide.path, out_dir)
    write_json_atomic(png.with_suffix(".json"), {**crop.to_dict(), "path": png.name,
                                                 "slide": slide_abs, "slide_relpath": slide_rel})
    return crop, image
