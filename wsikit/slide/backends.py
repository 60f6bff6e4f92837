"""The pixel backends behind :class:`~wsikit.slide.slide.Slide`: OpenSlide, tiffslide, plain images.

A backend opens one file and reads level pixels; :func:`~wsikit.slide.slide.open_slide` picks
one by name from :data:`_BACKEND_CLASSES` (the order it tries them is
:data:`wsikit.slide.slide.BACKENDS`) and :class:`~wsikit.slide.slide.Slide` adds the region
geometry, resampling and damaged-tile handling on top. DICOM WSI (:mod:`.dicom`), OME-Zarr
(:mod:`.omezarr`) and NDPI (:mod:`.ndpi`, chosen only by
:func:`~wsikit.slide.pixel_backend.open_pixel_slide`) backends live in their own modules and are
listed here too.

Every backend has the :class:`_Backend` shape: ``name``, ``level_dimensions``,
``level_downsamples``, ``properties`` (OpenSlide naming), ``read(level, lx, ly, w, h)`` of
``(h, w, 3) uint8`` RGB inside the level (transparent pixels composited onto white by
:func:`~wsikit.slide._rgb.rgba_to_rgb`), ``associated()`` and ``close()``.
"""

from __future__ import annotations

import math
import tempfile
import threading
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from PIL import Image

from ..errors import SlideError
from ._rgb import rgba_to_rgb
from .dicom import DicomBackend
from .ndpi import NdpiBackend


class _Backend(Protocol):
    name: str
    level_dimensions: tuple[tuple[int, int], ...]
    level_downsamples: tuple[float, ...]
    properties: dict[str, str]

    def read(self, level: int, lx: int, ly: int, w: int, h: int) -> np.ndarray: ...
    def associated(self) -> dict[str, np.ndarray]: ...
    def close(self) -> None: ...


class _PyramidBackend:
    """What OpenSlide and tiffslide share: an OpenSlide-like ``_slide`` object."""

    name = ""
    _slide: Any

    def _levels(self) -> None:
        self.level_dimensions = tuple(tuple(int(v) for v in d)
                                      for d in self._slide.level_dimensions)
        self.level_downsamples = tuple(float(d) for d in self._slide.level_downsamples)

    def associated(self) -> dict[str, np.ndarray]:
        return {k: rgba_to_rgb(np.asarray(v.convert("RGBA")))
                for k, v in self._slide.associated_images.items()}

    def close(self) -> None:
        self._slide.close()


def openslide_alias(path: Path) -> tuple[Path, tempfile.TemporaryDirectory[str] | None]:
    """The path to give OpenSlide for the slide file ``path``, and the temporary folder that
    holds it (None: ``path`` itself).

    OpenSlide recognises a MIRAX slide by the lower-case suffix ``.mrxs`` only (``X.MRXS``:
    "Unsupported or missing image file"), and finds its data folder by the file's name less
    that suffix. An MRXS slide with another case of the suffix is given as ``X.mrxs`` and
    ``X/`` in a temporary folder, symbolic links to the file and to its data folder ``X/``
    (:func:`wsikit.slide._companions.companion_files`); remove the folder when done.

    Raises
    ------
    SlideError
        The links cannot be made (a file system without symbolic links): names the fix.
    """
    suffix = path.suffix
    if suffix.lower() != ".mrxs" or suffix == ".mrxs":
        return path, None
    tmp = tempfile.TemporaryDirectory(prefix="wsikit-mrxs-")
    stem = path.name[: -len(suffix)]
    alias = Path(tmp.name) / f"{stem}.mrxs"
    try:
        alias.symlink_to(path.resolve())
        (Path(tmp.name) / stem).symlink_to(path.with_name(stem).resolve(),
                                           target_is_directory=True)
    except OSError as exc:
        tmp.cleanup()
        raise SlideError(f"{path}: OpenSlide reads MIRAX files named *.mrxs only, and a "
                         f"lower-case alias could not be made ({exc.strerror or exc}); "
                         f"rename it to {stem}.mrxs") from exc
    return alias, tmp


class _OpenSlideBackend(_PyramidBackend):
    name = "openslide"

    def __init__(self, path: Path) -> None:
        import openslide

        alias, self._alias_dir = openslide_alias(path)
        try:
            self._slide = openslide.OpenSlide(str(alias))
        except BaseException:
            if self._alias_dir is not None:
                self._alias_dir.cleanup()
            raise
        self._levels()
        self.properties = {str(k): str(v) for k, v in self._slide.properties.items()}

    def close(self) -> None:
        try:
            self._slide.close()
        finally:
            if self._alias_dir is not None:
                self._alias_dir.cleanup()
                self._alias_dir = None

    def read(self, level: int, lx: int, ly: int, w: int, h: int) -> np.ndarray:
        ds = self.level_downsamples[level]
        img = self._slide.read_region((int(round(lx * ds)), int(round(ly * ds))), level, (w, h))
        if img.getchannel("A").getextrema()[0] == 255:  # opaque: drop alpha in Pillow's C
            return np.asarray(img.convert("RGB"))  # (numpy's strided RGBA->RGB copy and alpha
        return rgba_to_rgb(np.asarray(img))        # scan cost as much as the decode)


class _TiffSlideBackend(_PyramidBackend):
    name = "tiffslide"

    def __init__(self, path: Path) -> None:
        import tiffslide

        self._path = path
        self._slide = tiffslide.TiffSlide(str(path))
        self._levels()
        # Keep tiffslide's own names (tiffslide.mpp-x, …): its mpp-x of Aperio files is
        # aperio.MPP and of other TIFFs the resolution tags, which resolve_mpp reads directly.
        props = {str(k): str(v) for k, v in self._slide.properties.items() if v is not None}
        self.properties = props
        self._arrays = self._slide.zarr_group

    def read(self, level: int, lx: int, ly: int, w: int, h: int) -> np.ndarray:
        arr = np.asarray(self._arrays[str(level)][ly:ly + h, lx:lx + w])
        if arr.dtype != np.uint8:
            raise SlideError(f"{self._path}: " + _DTYPE_HELP.format(dtype=arr.dtype))
        return rgba_to_rgb(arr)


#: What to install when pyvips (libvips) is missing.
PYVIPS_HINT = "pip install 'wsikit[pyvips]' (or pip install pyvips pyvips-binary)"


class _PyvipsBackend:
    """Tiled TIFF pyramids through libvips' ``tiffload`` (optional extra ``pyvips``).

    The levels are the file's tiled pages, largest first, as OpenSlide's TIFF-based drivers
    list them (SVS thumbnails, labels and macros are stripped, not tiled); whether that is
    OpenSlide's pyramid, and its pixels, is for
    :func:`~wsikit.slide.pixel_backend.open_pixel_slide`'s probes to decide. NDPI is refused:
    libtiff decodes a level's whole JPEG strip for every read. A tile libjpeg warns about
    (corrupt data) fails the read (``fail_on="warning"``), as in OpenSlide.
    """

    name = "pyvips"

    def __init__(self, path: Path) -> None:
        try:
            import pyvips
        except (ImportError, OSError) as exc:
            raise SlideError(f"pyvips is not available ({exc}); {PYVIPS_HINT}") from exc
        import tifffile

        self._path = path
        with tifffile.TiffFile(path) as tif:
            if tif.is_ndpi:
                raise SlideError("NDPI: libtiff decodes a level's whole JPEG strip per read")
            pages: list[Any] = []
            for frame in tif.pages:
                page: Any = frame
                if (page.is_tiled and int(page.bitspersample) == 8
                        and int(page.samplesperpixel) in (1, 3, 4)
                        and (not pages or int(page.imagewidth) < int(pages[-1].imagewidth))):
                    pages.append(page)
            if not pages:
                raise SlideError("no tiled 8-bit grey, RGB or RGBA page (libvips reads tiled "
                                 "TIFF pyramids here)")
            first = pages[0]
            props: dict[str, str] = {}
            tags = first.tags
            desc = str(tags["ImageDescription"].value) if "ImageDescription" in tags else ""
            if desc:
                props["tiff.ImageDescription"] = desc
            if desc.startswith("Aperio"):
                props["openslide.vendor"] = "aperio"
                for part in desc.split("|")[1:]:
                    key, sep, value = part.partition("=")
                    if sep:
                        props[f"aperio.{key.strip()}"] = value.strip()
            if "XResolution" in tags and "ResolutionUnit" in tags:
                unit = {2: "inch", 3: "centimeter"}.get(int(tags["ResolutionUnit"].value),
                                                        "none")
                for axis in ("X", "Y"):
                    tag = tags.get(f"{axis}Resolution") or tags["XResolution"]
                    num, den = tag.value
                    props[f"tiff.{axis}Resolution"] = repr(num / den if den else 0.0)
                props["tiff.ResolutionUnit"] = unit
            index = [int(p.index) for p in pages]
        self.properties = props
        # revalidate: never libvips' cached image of an earlier open of this file. A process
        # forked after its parent opened the slide got the parent's image, and its file
        # offset, shared by every sibling worker: racing reads gave wrong pixels or errors.
        self._images = [pyvips.Image.tiffload(str(path), page=i, access="random",
                                              fail_on="warning", revalidate=True)
                        for i in index]
        # Reads go through a kept Region per level (``fetch`` decodes in the calling thread),
        # never ``write_to_memory``: libvips' sink starts a thread pool, and a DataLoader
        # worker forked from a process that ran one hangs in its first read.
        self._regions = [pyvips.Region.new(v) for v in self._images]
        self._lock = threading.Lock()
        self.level_dimensions = tuple((int(v.width), int(v.height)) for v in self._images)
        w0, h0 = self.level_dimensions[0]
        self.level_downsamples = tuple((w0 / w + h0 / h) / 2 for w, h in self.level_dimensions)
        for k, p in enumerate(pages):
            props[f"openslide.level[{k}].tile-width"] = str(int(p.tilewidth))
            props[f"openslide.level[{k}].tile-height"] = str(int(p.tilelength))

    def read(self, level: int, lx: int, ly: int, w: int, h: int) -> np.ndarray:
        img = self._images[level]
        if img.format != "uchar":
            raise SlideError(f"{self._path}: " + _DTYPE_HELP.format(dtype=img.format))
        with self._lock:   # a region is one pixel buffer: one read at a time
            buf = self._regions[level].fetch(lx, ly, w, h)
        arr = np.frombuffer(buf, np.uint8).reshape(h, w, int(img.bands))
        return rgba_to_rgb(arr[:, :, 0] if arr.shape[2] == 1 else arr[:, :, :4])

    def associated(self) -> dict[str, np.ndarray]:
        return {}

    def close(self) -> None:
        self._images, self._regions = [], []


_DTYPE_HELP = ("pixels are {dtype} (not 8-bit); wsikit reads 8-bit RGB slides: convert the file "
               "to 8-bit RGB (e.g. 'vips cast in.tiff out.tiff uchar' or Fiji: Image > Type > "
               "RGB Color)")


def _check_image_mode(path: Path, mode: str) -> None:
    """Refuse 16-bit, 32-bit integer and float images with what to do (Pillow modes)."""
    if mode.startswith(("I;16", "I", "F")) and mode not in ("RGB",):
        depth = "float" if mode == "F" else "16/32-bit integer"
        raise SlideError(f"{path}: {depth} image (Pillow mode {mode!r}); "
                         + _DTYPE_HELP.format(dtype=depth).split("; ", 1)[1])


#: Most bytes the whole-image reader allocates for one flat image (PIL's bomb limit, ~179 Mpx
#: RGB, is the other bound).
_MAX_FLAT_BYTES = 4 * 2**30


class _ImageBackend:
    name = "image"

    def __init__(self, path: Path) -> None:
        props: dict[str, str] = {"openslide.vendor": "image"}
        try:
            with Image.open(path) as img:
                _check_image_mode(path, img.mode)
                img.load()
                fmt = img.format or ""
                rgba = img.convert("RGBA") if img.mode not in ("RGB", "L") else img.convert("RGB")
                self._arr = rgba_to_rgb(np.asarray(rgba))
                if fmt == "TIFF":
                    tags = getattr(img, "tag_v2", {})
                    unit = {2: "inch", 3: "centimeter"}.get(int(tags.get(296, 2)), "none")
                    if 282 in tags:
                        props["tiff.XResolution"] = str(float(tags[282]))
                        props["tiff.YResolution"] = str(float(tags.get(283, tags[282])))
                        props["tiff.ResolutionUnit"] = unit
                    if 270 in tags:
                        props["tiff.ImageDescription"] = str(tags[270])
        except Image.DecompressionBombError as exc:
            raise SlideError(f"{exc} (decompression-bomb protection of plain images); if this "
                             "is a real slide, convert it to a tiled pyramidal TIFF (e.g. 'vips "
                             "tiffsave in.png out.tiff --tile --pyramid --compression jpeg')"
                             ) from exc
        except SlideError:
            raise
        except Exception as pil_exc:
            import tifffile

            try:
                with tifffile.TiffFile(path) as tif:
                    shape = tuple(int(v) for v in tif.series[0].levels[0].shape)
                    itemsize = int(tif.series[0].levels[0].dtype.itemsize)
                need = math.prod(shape) * itemsize
                if need > _MAX_FLAT_BYTES:  # bound what the header asks for, before reading
                    raise SlideError(
                        f"a flat (untiled, unpyramided) image of shape {shape} needs "
                        f"{need / 2**30:.1f} GiB in memory, above wsikit's "
                        f"{_MAX_FLAT_BYTES / 2**30:.0f} GiB for whole-image reads; convert it "
                        "to a tiled pyramidal TIFF (e.g. 'vips tiffsave in.tif out.tiff "
                        "--tile --pyramid --compression jpeg')")
                arr = tifffile.imread(path, level=0)
            except SlideError:
                raise
            except Exception as tif_exc:
                raise SlideError(f"PIL: {pil_exc}; tifffile: {tif_exc}") from tif_exc
            if arr.ndim != 3 or arr.shape[2] not in (3, 4) or arr.dtype != np.uint8:
                raise SlideError(f"unsupported image layout {arr.shape} {arr.dtype}") from pil_exc
            self._arr = rgba_to_rgb(arr)
        h, w = self._arr.shape[:2]
        self.level_dimensions = ((w, h),)
        self.level_downsamples = (1.0,)
        self.properties = props

    def read(self, level: int, lx: int, ly: int, w: int, h: int) -> np.ndarray:
        return self._arr[ly:ly + h, lx:lx + w]

    def associated(self) -> dict[str, np.ndarray]:
        return {}

    def close(self) -> None:
        self._arr = np.zeros((0, 0, 3), np.uint8)


def _omezarr(path: Path) -> _Backend:
    from .omezarr import OmeZarrBackend  # OME-Zarr (NGFF) folders; see wsikit.slide.omezarr

    return OmeZarrBackend(path)


_BACKEND_CLASSES: dict[str, Any] = {
    "openslide": _OpenSlideBackend,
    "tiffslide": _TiffSlideBackend,
    "image": _ImageBackend,
    "omezarr": _omezarr,
    "dicom": DicomBackend,  # chosen for DICOM files and series folders (see open_slide)
    "ndpi": NdpiBackend,    # only by name: open_pixel_slide's fast NDPI reader
    "pyvips": _PyvipsBackend,  # only by name: open_pixel_slide's fast TIFF reader (optional)
}
