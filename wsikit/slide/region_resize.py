"""How a source region becomes a patch: the resampling decision and kernels both readers share.

The tile reader (:mod:`wsikit.slide.tiles`) and the slide reader (:meth:`wsikit.slide.Slide.
source_region`) hand an integer source region of one pyramid level and a sub-pixel box in it
to :func:`resample_region`, so the two give the same pixels for the same box:

* ``"copy"``: the box is the region at the output size;
* ``"torch"``: the box is the whole region, resized with torch's uint8 anti-aliased bilinear
  kernel (equal to Pillow's but for about 1 pixel in 10⁴, one level off; ~3× faster);
* ``"box"``: a sub-pixel box, Pillow's convolution resampling with ``box=``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["resample_kind", "resample_region", "resize_antialiased", "resize_uint8"]


def resample_kind(region_size: tuple[int, int], box: tuple[float, float, float, float],
                  out_size: tuple[int, int]) -> str:
    """How a source region becomes the output: ``"copy"``, ``"torch"`` or ``"box"``.

    Parameters
    ----------
    region_size : (width, height)
        Size of the integer source region in pixels of the level read.
    box : (x0, y0, x1, y1)
        The requested sub-pixel rectangle inside the region (region pixels).
    out_size : (width, height)
        Output size in pixels.

    Returns
    -------
    str
        ``"copy"``: the region already is the output (same size, no offset); ``"torch"``: the
        box is the whole region, resized by torch's anti-aliased uint8 kernel; ``"box"``: a
        sub-pixel source rectangle, resampled by Pillow's bilinear filter over ``box``.
    """
    mw, mh = int(region_size[0]), int(region_size[1])
    if (mw, mh) == (int(out_size[0]), int(out_size[1])) and max(abs(box[0]), abs(box[1])) < 1e-3:
        return "copy"
    if max(abs(box[0]), abs(box[1]), abs(box[2] - mw), abs(box[3] - mh)) < 1e-3:
        return "torch"
    return "box"


def resample_region(region: np.ndarray, box: tuple[float, float, float, float],
                    out_size: tuple[int, int], *, out: np.ndarray | None = None) -> np.ndarray:
    """The sub-pixel ``box`` of ``region`` resized to ``out_size``, as the tile reader does.

    The same decision (:func:`resample_kind`) and kernels as :meth:`TileReader.read_regions`,
    so a region read by another reader (e.g. :meth:`wsikit.slide.Slide.source_region`) gives
    the same pixels as the tile reader's mosaic of the same region.

    Parameters
    ----------
    region : numpy.ndarray
        ``(h, w, 3) uint8`` integer source region (pixels of one pyramid level).
    box : (x0, y0, x1, y1)
        Sub-pixel rectangle inside ``region`` to resample.
    out_size : (width, height)
        Output size in pixels.
    out : numpy.ndarray, optional
        C-contiguous ``(out_h, out_w, 3) uint8`` array to write into.

    Returns
    -------
    numpy.ndarray
        ``(out_h, out_w, 3) uint8`` (``out`` when given).
    """
    kind = resample_kind((region.shape[1], region.shape[0]), box, out_size)
    if kind == "copy":
        res = region
    elif kind == "torch":
        return resize_antialiased(region, out_size, out=out)
    else:
        res = resize_uint8(region, out_size, box=box)
    if out is None:
        return res
    out[...] = res
    return out


def resize_uint8(image: np.ndarray, size: tuple[int, int], *,
                 box: tuple[float, float, float, float] | None = None) -> np.ndarray:
    """Anti-aliased bilinear resize of an ``(H, W, 3) uint8`` image to ``size = (w, h)``.

    ``box`` selects a sub-pixel source rectangle ``(x0, y0, x1, y1)`` (Pillow's convolution
    resampling); without one, torch's uint8 anti-aliased bilinear kernel is used (it matches
    Pillow within one grey level and is about 3x faster). Downscaling widens the filter
    support with the scale factor, so it does not alias.
    """
    from PIL import Image

    h, w = image.shape[:2]
    if box is not None and max(abs(box[0]), abs(box[1]), abs(box[2] - w), abs(box[3] - h)) < 1e-3:
        box = None
    if box is None:
        if (w, h) == tuple(size):
            return image
        return resize_antialiased(image, size)
    im = Image.fromarray(np.ascontiguousarray(image))
    out = im.resize((int(size[0]), int(size[1])), Image.Resampling.BILINEAR, box=box)
    return np.asarray(out)


def resize_antialiased(image: np.ndarray, size: tuple[int, int], *,
                       out: np.ndarray | None = None) -> np.ndarray:
    """Whole-image anti-aliased bilinear resize on uint8 (torch's SIMD path, ~3x Pillow).

    ``out``, a C-contiguous ``(h, w, 3) uint8`` array, receives the result without an
    intermediate copy (torch's kernel writes channels-last output directly).
    """
    import torch

    t = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)[None]
    oh, ow = int(size[1]), int(size[0])
    if out is not None:
        dst = torch.from_numpy(out).permute(2, 0, 1)[None]
        torch.ops.aten._upsample_bilinear2d_aa.out(t, [oh, ow], False, None, None, out=dst)
        if dst.data_ptr() != out.ctypes.data:  # pragma: no cover - a torch that reallocates
            out[...] = dst[0].permute(1, 2, 0).numpy()
        return out
    res = torch.nn.functional.interpolate(t, size=(oh, ow), mode="bilinear",
                                          antialias=True, align_corners=False)
    return res[0].permute(1, 2, 0).numpy()
