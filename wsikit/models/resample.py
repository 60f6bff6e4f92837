"""The reference transforms' resize, exactly: torchvision ``Resize`` + ``CenterCrop`` on PIL.

The published models' eval transforms are torchvision on PIL uint8 images. Their geometry is
:func:`resize_crop_geometry`; their values are PIL's resampling: :func:`pil_resize` calls
Pillow for CPU tensors and, on other devices (CUDA), reproduces its arithmetic integer-exactly
in tensor ops:

* one pass per axis, each with PIL's filter (triangle for bilinear, Keys cubic ``a = -0.5``
  for bicubic) whose support is widened by the scale when reducing (anti-aliasing), centred at
  ``(j + 0.5) · scale`` with the window clipped to the image and its weights renormalised;
* weights in 22-bit fixed point rounded half away from zero, each output
  ``clip((Σ k·x + 2²¹) >> 22, 0, 255)``, stored as uint8 between the passes;
* the horizontal pass first, as Pillow's ``ImagingResampleInner`` has done for years.

Pillow 13 (python-pillow/Pillow#9549) runs the vertical pass first when the height is reduced
much more than the width; on such inputs the two orders differ by a few levels where the
intermediate image clips. Square inputs (patches, the golden crops) are not affected.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

__all__ = ["pil_resize", "resize_crop_geometry"]

_BITS = 22  # fixed-point precision of PIL's 8-bit resampling (32 - 8 - 2)


def resize_crop_geometry(h: int, w: int, size: int) -> tuple[int, int, int, int]:
    """Geometry of torchvision's ``Resize(size)`` + ``CenterCrop(size)`` on an ``h × w`` image.

    The shorter side becomes ``size`` and the longer ``int(size * long / short)`` (truncated);
    the crop offsets are ``round((new - size) / 2)`` (Python rounding, half to even).

    Returns
    -------
    (new_h, new_w, top, left) : tuple of int
        Resized size and the top-left of the ``size × size`` crop in it.
    """
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = int(size), int(size * long / short)
    new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
    return new_h, new_w, int(round((new_h - size) / 2.0)), int(round((new_w - size) / 2.0))


def _triangle(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    return np.where(x < 1.0, 1.0 - x, 0.0)


def _keys_cubic(x: np.ndarray, a: float = -0.5) -> np.ndarray:
    x = np.abs(x)
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = (((x - 5.0) * x + 8.0) * x - 4.0) * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


_FILTERS = {"bilinear": (_triangle, 1.0), "bicubic": (_keys_cubic, 2.0)}


@lru_cache(maxsize=64)
def _taps(n_in: int, n_out: int, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """Source indices ``(n_out, T)`` int64 and fixed-point weights ``(n_out, T)`` int32 of one
    axis (unused taps: weight 0)."""
    if mode not in _FILTERS:
        raise ValueError(f"pil_resize: mode {mode!r} is not 'bilinear' or 'bicubic'")
    fn, support = _FILTERS[mode]
    scale = n_in / n_out
    fscale = max(scale, 1.0)
    support *= fscale
    width = 2 * int(math.ceil(support)) + 1
    idx = np.zeros((n_out, width), np.int64)
    weight = np.zeros((n_out, width), np.int32)
    for j in range(n_out):
        center = (j + 0.5) * scale
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        w = fn((np.arange(lo, hi) - center + 0.5) / fscale)
        total = w.sum()
        if total != 0.0:
            w = w / total
        q = np.trunc(w * (1 << _BITS) + np.where(w < 0, -0.5, 0.5))
        idx[j, :hi - lo] = np.arange(lo, hi)
        idx[j, hi - lo:] = lo
        weight[j, :hi - lo] = q
    return idx, weight


def _pass(x: torch.Tensor, n_out: int, mode: str) -> torch.Tensor:
    """Resample the last axis of an int32 tensor of levels to ``n_out`` (PIL-exact)."""
    idx, weight = _taps(int(x.shape[-1]), int(n_out), mode)
    idx_t = torch.from_numpy(idx).to(x.device)
    w_t = torch.from_numpy(weight).to(x.device)
    acc = torch.full((*x.shape[:-1], n_out), 1 << (_BITS - 1), dtype=torch.int32,
                     device=x.device)
    for t in range(idx.shape[1]):
        acc += x[..., idx_t[:, t]] * w_t[:, t]
    return torch.div(acc, 1 << _BITS, rounding_mode="floor").clamp_(0, 255)


def pil_resize(x: torch.Tensor, size: tuple[int, int], mode: str, *,
               backend: str = "auto") -> torch.Tensor:
    """PIL's ``Image.resize`` of uint8 images (see the module docstring).

    Parameters
    ----------
    x : torch.Tensor
        ``(..., H, W)`` uint8 (e.g. ``(B, 3, H, W)``), on any device.
    size : (int, int)
        Output ``(h, w)``.
    mode : {"bilinear", "bicubic"}
    backend : {"auto", "pil", "torch"}
        ``pil``: Pillow itself, plane by plane (CPU tensors; the reference by definition);
        ``torch``: the same arithmetic in integer tensor ops on the tensor's device;
        ``auto``: Pillow for CPU tensors, torch otherwise.

    Returns
    -------
    torch.Tensor
        ``(..., h, w)`` uint8 on the device of ``x``.
    """
    nh, nw = int(size[0]), int(size[1])
    h, w = int(x.shape[-2]), int(x.shape[-1])
    if mode not in _FILTERS:
        raise ValueError(f"pil_resize: mode {mode!r} is not 'bilinear' or 'bicubic'")
    if backend == "auto":
        backend = "pil" if x.device.type == "cpu" else "torch"
    if backend == "pil":
        from PIL import Image

        flt = Image.Resampling.BILINEAR if mode == "bilinear" else Image.Resampling.BICUBIC
        planes = x.detach().reshape(-1, h, w).numpy()
        out = np.empty((planes.shape[0], nh, nw), np.uint8)
        for i, plane in enumerate(planes):
            out[i] = np.asarray(Image.fromarray(np.ascontiguousarray(plane), mode="L")
                                .resize((nw, nh), flt))
        return torch.from_numpy(out).reshape(*x.shape[:-2], nh, nw)
    if backend != "torch":
        raise ValueError(f"pil_resize: backend {backend!r} is not 'auto', 'pil' or 'torch'")
    y = x.to(torch.int32)
    if nw != w:  # horizontal pass first, each pass stored as uint8 levels
        y = _pass(y, nw, mode)
    if nh != h:
        y = _pass(y.transpose(-1, -2), nh, mode).transpose(-1, -2)
    return y.to(torch.uint8)
