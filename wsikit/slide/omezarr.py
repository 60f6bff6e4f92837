"""OME-Zarr (OME-NGFF multiscale images) as slides, behind the same :class:`~wsikit.slide.Slide`.

Reads NGFF 0.4 (zarr format 2, ``multiscales`` in the group attributes) and 0.5 (zarr format 3,
``ome.multiscales``) images from a local ``*.zarr`` folder:

* **levels** are the ``datasets`` of the first multiscale, in order (level 0 = full
  resolution); a level's downsample is its x ``scale`` over level 0's (falls back to the
  ratio of widths when a level has no scale);
* **mpp** is level 0's x/y ``scale`` converted from the x axis ``unit`` (``micrometer``,
  ``nanometer``, ``millimeter``, …, as NGFF's UDUNITS-2 names) to µm/px, exposed as the
  OpenSlide properties ``openslide.mpp-x``/``-y``; without a space unit the mpp is unknown
  (pass ``mpp=``/``--mpp``);
* **pixels**: axes are found by name (``t``, ``c``, ``z``, ``y``, ``x``; any order); the first
  time point and the middle z plane are read; 3 or more channels give the first three as RGB, 1
  channel is grey; ``uint8`` passes through, other integers are scaled by their type's maximum,
  floats are clipped to [0, 1].

Only the image's own chunks are read (zarr slicing), so a region costs only the chunks it
touches.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SlideError

__all__ = ["OmeZarrBackend"]

#: µm per unit for NGFF's space units (UDUNITS-2 names).
UNIT_TO_UM: dict[str, float] = {
    "angstrom": 1e-4, "nanometer": 1e-3, "micrometer": 1.0, "micron": 1.0,
    "millimeter": 1e3, "centimeter": 1e4, "meter": 1e6,
}


def _multiscales(attrs: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    if "ome" in attrs and isinstance(attrs["ome"], dict):  # NGFF 0.5
        ome = attrs["ome"]
        return list(ome.get("multiscales") or []), str(ome.get("version", "0.5"))
    ms = list(attrs.get("multiscales") or [])
    return ms, str(ms[0].get("version", "0.4")) if ms else ""


def is_omezarr(path: str | Path) -> bool:
    """Whether ``path`` is a folder with NGFF multiscales metadata (cheap: reads metadata)."""
    p = Path(path)
    if not p.is_dir():
        return False
    return any((p / meta).is_file() for meta in (".zattrs", "zarr.json"))


def _scale(dataset: dict[str, Any]) -> list[float] | None:
    for t in dataset.get("coordinateTransformations") or []:
        if t.get("type") == "scale" and "scale" in t:
            return [float(v) for v in t["scale"]]
    return None


#: Largest chunk one read may decode (a 4096 x 4096 RGB uint16 chunk is 96 MiB).
_MAX_CHUNK_BYTES = 512 * 2**20


class OmeZarrBackend:
    """Slide backend over an OME-Zarr multiscale image (see the module docstring)."""

    name = "omezarr"

    def __init__(self, path: Path) -> None:
        import zarr

        path = Path(path)
        if not path.is_dir():
            raise SlideError("not an OME-Zarr folder")
        try:
            group = zarr.open_group(str(path), mode="r")
        except Exception as exc:
            raise SlideError(f"not a zarr group ({exc})") from exc
        attrs = dict(group.attrs)
        multiscales, version = _multiscales(attrs)
        if not multiscales:
            raise SlideError("zarr group without OME-NGFF 'multiscales' metadata; not an "
                             "OME-Zarr image")
        ms = multiscales[0]
        axes = [a["name"] if isinstance(a, dict) else str(a) for a in ms.get("axes") or []]
        units = {a["name"]: a.get("unit") for a in ms.get("axes") or [] if isinstance(a, dict)}
        datasets = ms.get("datasets") or []
        if not datasets:
            raise SlideError("OME-Zarr multiscales lists no datasets")
        try:
            found = [group[d["path"]] for d in datasets]
        except KeyError as exc:
            raise SlideError(f"OME-Zarr dataset {exc} listed in multiscales is missing") from exc
        arrays = [a for a in found if isinstance(a, zarr.Array)]
        if len(arrays) != len(found):
            raise SlideError("OME-Zarr multiscales lists a group where a dataset (array) must be; "
                             "check the multiscales 'path' entries")
        self._arrays: list[zarr.Array] = arrays
        ndim = self._arrays[0].ndim
        if not axes:  # NGFF 0.1-0.3: 5D tczyx
            axes = ["t", "c", "z", "y", "x"][-ndim:]
        if len(axes) != ndim or "x" not in axes or "y" not in axes:
            raise SlideError(f"OME-Zarr axes {axes} do not match the array's {ndim} dimensions "
                             "or lack 'y'/'x'")
        self._axes = axes
        for a in self._arrays:  # a read decodes whole chunks: bound them before any read
            chunk = math.prod(int(c) for c in a.chunks) * int(a.dtype.itemsize)
            if chunk > _MAX_CHUNK_BYTES:
                raise SlideError(f"OME-Zarr array {a.path or a.name} has chunks of "
                                 f"{tuple(int(c) for c in a.chunks)} ({chunk / 2**20:,.0f} MiB "
                                 f"each), above {_MAX_CHUNK_BYTES // 2**20} MiB: one read would "
                                 "decode a whole chunk; rechunk it (e.g. 1 x 3 x 1024 x 1024)")
        ix, iy = axes.index("x"), axes.index("y")
        self.level_dimensions = tuple((int(a.shape[ix]), int(a.shape[iy]))
                                      for a in self._arrays)
        scales = [_scale(d) for d in datasets]
        # Dataset-level scale, optionally composed with a multiscale-level scale.
        top = _scale({"coordinateTransformations": ms.get("coordinateTransformations")})
        downsamples = []
        for i, sc in enumerate(scales):
            ratio = (sc[ix] / scales[0][ix] if sc is not None and scales[0] is not None
                     and scales[0][ix] > 0 else math.nan)
            if math.isfinite(ratio) and 0.5 <= ratio <= 1e6:  # a number from the file: bounded
                downsamples.append(ratio)
            else:
                downsamples.append(self.level_dimensions[0][0] / self.level_dimensions[i][0])
        self.level_downsamples = tuple(float(d) for d in downsamples)
        props = {"openslide.vendor": "ome-zarr", "omezarr.version": version,
                 "omezarr.axes": ",".join(axes),
                 "openslide.level-count": str(len(self._arrays))}
        if scales[0] is not None:
            unit = units.get("x")
            factor = UNIT_TO_UM.get(str(unit).lower()) if unit else None
            if factor is not None:
                sx, sy = scales[0][ix], scales[0][iy]
                if top is not None:
                    sx, sy = sx * top[ix], sy * top[iy]
                if math.isfinite(sx) and sx > 0:
                    props["openslide.mpp-x"] = repr(sx * factor)
                    props["openslide.mpp-y"] = repr(sy * factor)
        self.properties = props

    def read(self, level: int, lx: int, ly: int, w: int, h: int) -> np.ndarray:
        arr = self._arrays[level]
        index: list[Any] = []
        for name, size in zip(self._axes, arr.shape, strict=True):
            if name == "x":
                index.append(slice(lx, lx + w))
            elif name == "y":
                index.append(slice(ly, ly + h))
            elif name == "c":
                index.append(slice(0, min(3, size)))
            elif name == "z":
                index.append(size // 2)
            else:  # t and any other axis: the first entry
                index.append(0)
        block = np.asarray(arr[tuple(index)])
        kept = [n for n in self._axes if n in ("y", "x", "c")]
        order = [kept.index("y"), kept.index("x")] + ([kept.index("c")] if "c" in kept else [])
        block = np.transpose(block, order)
        if block.ndim == 2:
            block = block[:, :, None]
        if block.shape[2] == 1:
            block = np.repeat(block, 3, axis=2)
        elif block.shape[2] == 2:
            block = np.concatenate([block, block[:, :, :1]], axis=2)
        return np.ascontiguousarray(_to_uint8(block))

    def associated(self) -> dict[str, np.ndarray]:
        return {}

    def close(self) -> None:
        self._arrays = []


def _to_uint8(block: np.ndarray) -> np.ndarray:
    if block.dtype == np.uint8:
        return block
    if np.issubdtype(block.dtype, np.integer):
        top = float(np.iinfo(block.dtype).max)
        return np.clip(np.rint(block.astype(np.float64) * (255.0 / top)), 0, 255).astype(np.uint8)
    if np.issubdtype(block.dtype, np.floating):
        return np.clip(np.rint(block.astype(np.float64) * 255.0), 0, 255).astype(np.uint8)
    raise SlideError(f"OME-Zarr pixel type {block.dtype} is not supported")
