"""DICOM VL Whole Slide Microscopy images through ``wsidicom`` (optional extra ``dicom``).

A DICOM WSI is a *series*: one instance per pyramid level (often one file each), sharing a
``SeriesInstanceUID``. :func:`~wsikit.slide.open_slide` accepts

- the series folder (every valid WSI instance in it is used), or
- a single ``.dcm`` file: the other instances of its series in the same folder are opened with
  it, so any level's file opens the whole pyramid (as OpenSlide does); a file alone in its
  series is a one-level slide.

Level-0 µm/px comes from the DICOM pixel spacing (``PixelMeasuresSequence > PixelSpacing``,
in mm) and is reported under OpenSlide's names (``openslide.mpp-x``/``-y``), so
:func:`~wsikit.slide.resolve_mpp` records it as ``"openslide.mpp"``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SlideError
from ._rgb import rgba_to_rgb

__all__ = ["DicomBackend", "is_dicom", "series_files"]

#: What to install when ``wsidicom`` is missing.
INSTALL_HINT = "pip install 'wsikit[dicom]' (or pip install wsidicom)"

#: Largest frame (tile) one read may decode, as RGBA.
_MAX_FRAME_BYTES = 512 * 2**20
_MAGIC_AT = 128  # DICOM Part 10 files: 128-byte preamble, then b"DICM"


def _has_magic(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            fh.seek(_MAGIC_AT)
            return fh.read(4) == b"DICM"
    except OSError:
        return False


def is_dicom(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a DICOM Part 10 file, or a folder holding at least one.

    A folder counts when one of its (non-hidden) files ends in ``.dcm`` or starts like a DICOM
    file; only the folder itself is listed, not its sub-folders.
    """
    p = Path(path)
    if p.is_file():
        return _has_magic(p)
    if not p.is_dir():
        return False
    try:
        entries = sorted(e for e in p.iterdir() if not e.name.startswith("."))
    except OSError:
        return False
    return any(e.is_file() and (e.suffix.lower() == ".dcm" or _has_magic(e)) for e in entries)


def series_files(path: Path) -> list[Path]:
    """The DICOM files in ``path``'s folder that belong to its series (``path`` first).

    Files whose header cannot be read, or whose ``SeriesInstanceUID`` differs, are left out.
    """
    import pydicom

    def series_uid(f: Path) -> str | None:
        try:
            ds = pydicom.dcmread(f, stop_before_pixels=True,
                                 specific_tags=["SeriesInstanceUID"])
        except Exception:
            return None
        uid = ds.get("SeriesInstanceUID")
        return None if uid is None else str(uid)

    own = series_uid(path)
    files = [path]
    if own is None:
        return files
    for sibling in sorted(path.parent.iterdir()):
        if (sibling == path or sibling.name.startswith(".") or not sibling.is_file()
                or not _has_magic(sibling)):
            continue
        if series_uid(sibling) == own:
            files.append(sibling)
    return files


#: SOP Class UID of VL Whole Slide Microscopy Image Storage.
VL_WSI_SOP = "1.2.840.10008.5.1.4.1.1.77.1.6"


def _why_unreadable(files: list[Path], exc: Exception) -> str:
    """The real reason wsidicom refused ``files``: read from their headers (pydicom)."""
    import pydicom

    wsi, no_type = [], []
    for f in files:
        try:
            ds = pydicom.dcmread(f, stop_before_pixels=True)
        except Exception:
            continue
        if str(ds.get("SOPClassUID", "")) == VL_WSI_SOP:
            wsi.append(f)
            if "ImageType" not in ds:
                no_type.append(f)
    reason = f"{type(exc).__name__}: {exc}"
    if no_type:
        return (f"{no_type[0].name} is a DICOM VL Whole Slide Microscopy image (Modality "
                f"{pydicom.dcmread(no_type[0], stop_before_pixels=True).get('Modality', '?')}"
                ") without the ImageType attribute (0008,0008), which wsidicom needs to tell "
                "pyramid levels from label and overview images, so it finds no level "
                f"({reason}); add it, e.g. dcmodify -i \"(0008,0008)=ORIGINAL\\PRIMARY\\VOLUME"
                "\\NONE\" FILE (or ds.ImageType = ['ORIGINAL', 'PRIMARY', 'VOLUME', 'NONE'] "
                "with pydicom)")
    if wsi:
        return (f"{wsi[0].name} is a DICOM VL Whole Slide Microscopy image but wsidicom "
                f"cannot read it ({reason}); check the file with dciodvfy or report it")
    return (f"not a readable DICOM VL whole-slide image series ({reason}); wsikit reads "
            "DICOM WSI (SOP class VL Whole Slide Microscopy Image) only, and no file here "
            "is of that SOP class")


class DicomBackend:
    """Slide backend over :class:`wsidicom.WsiDicom` (see module docstring)."""

    name = "dicom"

    def __init__(self, path: Path) -> None:
        try:
            import wsidicom
        except ImportError as exc:
            raise SlideError(f"reading DICOM whole-slide images needs the optional package "
                             f"wsidicom, which is not installed: {INSTALL_HINT}") from exc

        self._to_rgb = rgba_to_rgb
        source: Any = path if path.is_dir() else series_files(path)
        try:
            self._slide = wsidicom.WsiDicom.open(source)
        except Exception as exc:
            files = (sorted(f for f in path.iterdir() if f.is_file() and _has_magic(f))
                     if path.is_dir() else source)
            raise SlideError(_why_unreadable(files, exc)) from exc
        try:
            levels = list(self._slide.levels)
            if not levels:
                raise SlideError("the DICOM series has no pyramid level")
            self._level_ids = tuple(int(lv.level) for lv in levels)
            w0, h0 = int(levels[0].size.width), int(levels[0].size.height)
            self.level_dimensions = tuple((int(lv.size.width), int(lv.size.height))
                                          for lv in levels)
            for lv in levels:  # a read decodes whole frames: bound them (and the sizes)
                tw, th = int(lv.tile_size.width), int(lv.tile_size.height)
                lw, lh = int(lv.size.width), int(lv.size.height)
                if min(tw, th, lw, lh) <= 0 or tw * th * 4 > _MAX_FRAME_BYTES:
                    raise SlideError(f"DICOM level {lv.level} is {lw} x {lh} px in frames of "
                                     f"{tw} x {th} px; sizes must be positive and a frame at "
                                     f"most {_MAX_FRAME_BYTES // 2**20} MiB decoded: the "
                                     "series is damaged or not a tiled whole-slide image")
            self.level_downsamples = tuple(0.5 * (w0 / w + h0 / h)
                                           for w, h in self.level_dimensions)
            self.properties = self._properties(levels[0])
        except BaseException:
            self._slide.close()
            raise

    def _properties(self, base: Any) -> dict[str, str]:
        props = {"openslide.vendor": "dicom"}
        spacing = base.pixel_spacing  # mm per pixel (width, height)
        if spacing is not None:
            props["openslide.mpp-x"] = repr(float(spacing.width) * 1000.0)
            props["openslide.mpp-y"] = repr(float(spacing.height) * 1000.0)
        dataset = base.datasets[0] if base.datasets else None
        if dataset is not None:
            for key in ("Manufacturer", "ManufacturerModelName", "SeriesInstanceUID",
                        "StudyInstanceUID", "ContainerIdentifier"):
                value = getattr(dataset, key, None)
                if value not in (None, ""):
                    props[f"dicom.{key}"] = str(value)
        w, h = base.tile_size.width, base.tile_size.height
        props["dicom.tile-width"], props["dicom.tile-height"] = str(w), str(h)
        return props

    def read(self, level: int, lx: int, ly: int, w: int, h: int) -> np.ndarray:
        arr = self._slide.read_region((lx, ly), self._level_ids[level], (w, h), as_array=True)
        arr = np.asarray(arr)
        if arr.ndim == 3 and arr.shape[2] == 1:
            arr = arr[:, :, 0]
        if arr.dtype != np.uint8:
            raise SlideError(f"DICOM pixels are {arr.dtype}; wsikit reads 8-bit brightfield "
                             "(RGB or grey) whole-slide images only")
        return self._to_rgb(arr)

    def associated(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for name, reader in (("label", "read_label"), ("macro", "read_overview")):
            try:
                image = getattr(self._slide, reader)()
            except Exception:
                continue
            out[name] = self._to_rgb(np.asarray(image.convert("RGB")))
        return out

    def close(self) -> None:
        self._slide.close()
