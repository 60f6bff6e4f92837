"""Pixel conversion every backend shares: 8-bit RGBA, greyscale or RGB arrays to RGB."""

from __future__ import annotations

import numpy as np

__all__ = ["rgba_to_rgb"]


def rgba_to_rgb(arr: np.ndarray) -> np.ndarray:
    """Composite ``(H, W, 4)`` straight-alpha RGBA onto white; pass RGB through.

    Parameters
    ----------
    arr : numpy.ndarray
        ``(H, W)`` greyscale, ``(H, W, 3)`` RGB or ``(H, W, 4)`` RGBA, uint8.

    Returns
    -------
    numpy.ndarray
        ``(H, W, 3)`` uint8 RGB (``arr`` itself when it already is RGB); a transparent pixel
        becomes white, a half-transparent one the rounded blend with white.
    """
    if arr.ndim == 2:
        return np.repeat(arr[:, :, None], 3, axis=2)
    if arr.shape[2] == 3:
        return arr
    rgb = arr[:, :, :3]
    alpha = arr[:, :, 3]
    if alpha.min() == 255:
        return np.ascontiguousarray(rgb)
    a = alpha.astype(np.uint16)[:, :, None]
    out = (rgb.astype(np.uint16) * a + 255 * (255 - a) + 127) // 255
    return out.astype(np.uint8)
