"""Synthetic pyramidal slides for tests, benchmarks and the demo.

Slides are written as Aperio-style tiled JPEG TIFFs with :mod:`tifffile`, so OpenSlide reads
them with their mpp (``MPP = …`` in the image description). Content is procedural H&E-like
tissue: pink stroma with purple nuclei on a bright background, optional planted "salient"
regions of densely packed nuclei (``dense``) or of enlarged hyperchromatic nuclei at normal
density (``enlarged``), and a stain strength (``stain``: pale < 1 < dark; ``h_fade``: the
haematoxylin alone faded).

Every level is generated directly (not by downsampling level 0), so a 49152×32768 slide takes
seconds per gigapixel and little memory. All content is labelled synthetic in the description.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SyntheticSpec", "write_synthetic_slide", "write_synthetic_ndpi",
           "synthetic_tissue_image", "synthetic_tissue_crop", "write_image_slide",
           "tile_mosaic"]

_BG = np.array([243, 243, 245], np.float32)
_STROMA = np.array([232, 160, 200], np.float32)
_NUCLEUS = np.array([70, 40, 125], np.float32)
_LABEL_SCALE = 32  # l0 px per label-map cell


@dataclass(frozen=True)
class SyntheticSpec:
    """What a synthetic slide contains (all boxes in level-0 pixels as ``(x, y, w, h)``).

    Attributes
    ----------
    width, height : int
        Level-0 size in pixels.
    mpp : float
        Level-0 microns per pixel written to the description (``None``: no MPP written).
    tissue : sequence of (cx, cy, rx, ry)
        Ellipses of tissue in level-0 px. Default: one large ellipse in the centre.
    dense : sequence of (x, y, w, h)
        Boxes where nuclei are densely packed (a planted salient region).
    enlarged : sequence of (x, y, w, h)
        Boxes of enlarged (1.7x the diameter), hyperchromatic nuclei at the normal density.
    stain : float
        Optical density of every stain is multiplied by this (0.5 pale, 1 normal, 1.6 dark).
    h_fade : float
        Haematoxylin (nuclei) optical density is further multiplied by this (faded: < 1).
    nuclei_per_mm2 : (float, float) or None
        Nuclei per mm² of normal and of dense tissue, the same at every ``mpp``. ``None``: the
        original textures (90 and 900 nuclei per 10⁶ px at 0.25 µm/px, scaled by
        ``(0.25 / mpp)²`` per pixel).
    period : int
        Side in level-0 px of the periodic texture tiles (a multiple of 16). Choose one that
        is not a multiple of the patch stride, or every patch of a kind looks the same.
    background : int
        Background grey value (243 white-ish; ~200 for grey backgrounds).
    seed : int
        Random seed for textures.
    """

    width: int
    height: int
    mpp: float | None = 0.25
    tissue: Sequence[tuple[float, float, float, float]] | None = None
    dense: Sequence[tuple[int, int, int, int]] = field(default_factory=tuple)
    background: int = 243
    enlarged: Sequence[tuple[int, int, int, int]] = field(default_factory=tuple)
    stain: float = 1.0
    h_fade: float = 1.0
    nuclei_per_mm2: tuple[float, float] | None = None
    period: int = 1024
    seed: int = 0


def _label_map(spec: SyntheticSpec) -> np.ndarray:
    """(H/32, W/32) uint8 labels: 0 background, 1 tissue, 2 dense nuclei, 3 enlarged nuclei."""
    gh = -(-spec.height // _LABEL_SCALE)
    gw = -(-spec.width // _LABEL_SCALE)
    yy, xx = np.mgrid[0:gh, 0:gw].astype(np.float32)
    xx = (xx + 0.5) * _LABEL_SCALE
    yy = (yy + 0.5) * _LABEL_SCALE
    tissue = spec.tissue
    if tissue is None:
        tissue = [(spec.width / 2, spec.height / 2, spec.width * 0.38, spec.height * 0.36)]
    labels = np.zeros((gh, gw), np.uint8)
    for cx, cy, rx, ry in tissue:
        inside = ((xx - cx) / max(rx, 1)) ** 2 + ((yy - cy) / max(ry, 1)) ** 2 <= 1.0
        labels[inside] = 1
    for x, y, w, h in spec.dense:
        sel = (xx >= x) & (xx < x + w) & (yy >= y) & (yy < y + h)
        labels[sel] = 2
    for x, y, w, h in spec.enlarged:
        sel = (xx >= x) & (xx < x + w) & (yy >= y) & (yy < y + h)
        labels[sel] = 3
    return labels


def _stained(colour: np.ndarray, strength: float) -> np.ndarray:
    """``colour`` with its optical density multiplied by ``strength``."""
    if strength == 1.0:   # exactly the original colours (reference statistics depend on them)
        return colour.astype(np.float32)
    return (255.0 * (np.clip(colour, 1, 255) / 255.0) ** strength).astype(np.float32)


def _texture(size: int, nuclei_per_mpx: float, radius: float, rng: np.random.Generator,
             *, stain: float = 1.0, nucleus_od: float = 1.0) -> np.ndarray:
    """A periodic (size, size, 3) float32 texture of stroma with disk nuclei."""
    img = np.empty((size, size, 3), np.float32)
    img[:] = _stained(_STROMA, stain)
    img += rng.normal(0, 6, (size, size, 1)).astype(np.float32)
    n = max(1, int(nuclei_per_mpx * size * size / 1e6))
    cx = rng.uniform(0, size, n)
    cy = rng.uniform(0, size, n)
    r = int(np.ceil(radius)) + 1
    oy, ox = np.mgrid[-r:r + 1, -r:r + 1]
    disk = (ox ** 2 + oy ** 2) <= radius ** 2
    dy, dx = oy[disk], ox[disk]
    ys = (cy[:, None].astype(int) + dy[None, :]) % size
    xs = (cx[:, None].astype(int) + dx[None, :]) % size
    shade = rng.uniform(0.85, 1.15, (n, 1, 1)).astype(np.float32)
    nucleus = _stained(_NUCLEUS, stain * nucleus_od)
    img[ys, xs] = (nucleus[None, None, :] * shade)[:, 0:1, :].repeat(ys.shape[1], axis=1)
    return img


class _Painter:
    """Paints any level-0-aligned region of the synthetic slide at a given downsample."""

    def __init__(self, spec: SyntheticSpec, mpp: float) -> None:
        self.spec = spec
        self.labels = _label_map(spec)
        rng = np.random.default_rng(spec.seed)
        radius = 3.5 / mpp  # nuclei ~7 µm across
        self.period = int(spec.period)
        if self.period % 16 or self.period < 16:
            raise ValueError(f"SyntheticSpec.period must be a multiple of 16, got {spec.period}")
        st, hf = float(spec.stain), float(spec.stain) * float(spec.h_fade)
        if spec.nuclei_per_mm2 is None:
            normal = 90.0 * (0.25 / mpp) ** 2
            dense = 900.0 * (0.25 / mpp) ** 2
        else:   # per 10^6 px: per mm² times the area of 10^6 px in mm²
            normal, dense = (float(v) * mpp * mpp for v in spec.nuclei_per_mm2)
        self.tex = {
            1: _texture(self.period, normal, radius, rng, stain=st, nucleus_od=hf / st),
            2: _texture(self.period, dense, radius, rng, stain=st, nucleus_od=hf / st),
        }
        if spec.enlarged:   # 1.7x the diameter, 1.35x the optical density, normal density
            self.tex[3] = _texture(self.period, normal, 1.7 * radius, rng, stain=st,
                                   nucleus_od=1.35 * hf / st)
        self._cache: dict[tuple[int, int], np.ndarray] = {}

    def _tex_at(self, label: int, ds: int) -> np.ndarray:
        key = (label, ds)
        if key not in self._cache:
            t = self.tex[label]
            if ds > 1:
                s = self.period // ds
                t = t[: s * ds, : s * ds].reshape(s, ds, s, ds, 3).mean(axis=(1, 3))
            self._cache[key] = t
        return self._cache[key]

    def region(self, x0: int, y0: int, w: int, h: int, ds: int) -> np.ndarray:
        """(h, w, 3) uint8 pixels of level ``ds`` whose top-left is level-0 ``(x0, y0)``."""
        ys = y0 + np.arange(h) * ds
        xs = x0 + np.arange(w) * ds
        ly = np.clip(ys // _LABEL_SCALE, 0, self.labels.shape[0] - 1)
        lx = np.clip(xs // _LABEL_SCALE, 0, self.labels.shape[1] - 1)
        lab = self.labels[ly[:, None], lx[None, :]]
        out = np.empty((h, w, 3), np.float32)
        out[:] = float(self.spec.background)
        period = self.period // ds
        ty = (ys // ds) % period
        tx = (xs // ds) % period
        for label in self.tex:
            sel = lab == label
            if sel.any():
                tex = self._tex_at(label, ds)
                patch = tex[ty[:, None], tx[None, :]]
                out[sel] = patch[sel]
        outside = (ys[:, None] >= self.spec.height) | (xs[None, :] >= self.spec.width)
        out[outside] = 255.0
        return np.clip(out, 0, 255).astype(np.uint8)


def synthetic_tissue_image(spec: SyntheticSpec, *, downsample: int = 1) -> np.ndarray:
    """The whole synthetic slide as one (H/ds, W/ds, 3) uint8 array (small slides only)."""
    painter = _Painter(spec, spec.mpp or 0.25)
    return painter.region(0, 0, -(-spec.width // downsample), -(-spec.height // downsample),
                          downsample)


def synthetic_tissue_crop(seed: int, dense: bool, size: int = 512, downsample: int = 1
                          ) -> np.ndarray:
    """``size``² px of synthetic tissue at ``0.5 * downsample`` µm/px, all tissue (dense
    nuclei, or loose stroma): like a crop of the demo slide at that resolution, so the demo's
    literature figures and its crops are comparable.

    Returns
    -------
    numpy.ndarray
        ``(size, size, 3)`` uint8 RGB; the same ``seed`` gives the same pixels.
    """
    l0 = size * downsample
    spec = SyntheticSpec(l0, l0, mpp=0.5, tissue=[(l0 / 2, l0 / 2, l0 * 2, l0 * 2)],
                         dense=[(0, 0, l0, l0)] if dense else (), seed=seed)
    return synthetic_tissue_image(spec, downsample=downsample)


def _tiles(painter: _Painter, lw: int, lh: int, ds: int, tile: int) -> Iterator[np.ndarray]:
    for ty in range(0, lh, tile):
        for tx in range(0, lw, tile):
            yield painter.region(tx * ds, ty * ds, tile, tile, ds)


def write_synthetic_slide(
    path: str | os.PathLike[str],
    spec: SyntheticSpec,
    *,
    downsamples: Sequence[int] = (1, 4, 16),
    tile: int = 256,
    quality: int = 80,
    app_mag: float | None = 40.0,
    resolution_mpp: float | None = None,
    resolution_unit: str = "CENTIMETER",
    aperio: bool = True,
) -> Path:
    """Write ``spec`` as a tiled pyramidal JPEG TIFF and return its path.

    Parameters
    ----------
    path : path-like
        Output ``.svs``/``.tif`` path.
    spec : SyntheticSpec
        Slide content and level-0 mpp (``spec.mpp=None`` writes no ``MPP`` field).
    downsamples : sequence of int
        Pyramid levels (first must be 1).
    tile : int
        Tile edge in pixels (multiple of 16).
    quality : int
        JPEG quality.
    app_mag : float or None
        ``AppMag`` written to the description (objective power); ``None`` omits it.
    resolution_mpp : float or None
        If given, also write TIFF ``XResolution``/``YResolution`` for this mpp.
    resolution_unit : {"CENTIMETER", "INCH"}
        Unit of the TIFF resolution tags.
    aperio : bool
        Write an Aperio-style ``ImageDescription`` (OpenSlide's Aperio driver); ``False`` gives
        a generic tiled TIFF.
    """
    import tifffile

    path = Path(path)
    painter = _Painter(spec, spec.mpp or 0.25)
    W, H = spec.width, spec.height
    fields = ["SYNTHETIC wsikit test slide"]
    if app_mag is not None:
        fields.append(f"AppMag = {app_mag:g}")
    if spec.mpp is not None:
        fields.append(f"MPP = {spec.mpp:.4f}")
    with tifffile.TiffWriter(path, bigtiff=W * H * 3 > 3_500_000_000) as tw:
        for i, ds in enumerate(downsamples):
            lw, lh = -(-W // ds), -(-H // ds)
            if aperio:
                desc = (f"Aperio Image Library v12.0.15 \r\n{W}x{H} [0,0 {W}x{H}] "
                        f"({tile}x{tile}) JPEG/RGB Q={quality}|" + "|".join(fields))
                if i > 0:
                    desc = (f"Aperio Image Library v12.0.15 \r\n{W}x{H} -> {lw}x{lh} "
                            f"- |" + "|".join(fields))
            else:
                desc = "|".join(fields) if i == 0 else ""
            kwargs: dict[str, Any] = {}
            if resolution_mpp is not None:
                per_unit = (1e4 if resolution_unit.upper() == "CENTIMETER" else 25400.0)
                res = per_unit / (resolution_mpp * ds)
                kwargs = {"resolution": (res, res), "resolutionunit": resolution_unit.upper()}
            tw.write(
                _tiles(painter, lw, lh, ds, tile),
                shape=(lh, lw, 3),
                dtype=np.uint8,
                tile=(tile, tile),
                photometric="rgb",
                compression="jpeg",
                compressionargs={"level": quality},
                description=desc,
                metadata=None,
                subfiletype=0 if i == 0 else 1,
                **kwargs,
            )
    return path


#: JPEG chroma subsampling of :func:`write_synthetic_ndpi` → (Pillow's code, MCU w, MCU h).
#: (4:2:0 is left out: OpenSlide 4.0.1 fails on such a file with "found marker 0xd9 instead
#: of RST0", so it could not serve as a reference.)
_NDPI_SUBSAMPLING = {"4:4:4": (0, 8, 8), "4:2:2": (1, 16, 8)}


def _jpeg_with_restarts(img: np.ndarray, quality: int, subsampling: str, tile_width: int
                        ) -> tuple[bytes, list[int]]:
    """One baseline JPEG of ``img`` with a restart marker every ``tile_width`` px of an MCU
    row, and the offsets (from the stream's start) where each restart interval's data begins.
    """
    import io

    from PIL import Image

    code, mcu_w, _ = _NDPI_SUBSAMPLING[subsampling]
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "JPEG", quality=quality, subsampling=code,
                              restart_marker_blocks=tile_width // mcu_w)
    data = buf.getvalue()
    sos = data.index(b"\xff\xda")
    starts = [sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")]
    pos = starts[0]
    while True:   # entropy-coded data escapes 0xFF as FF 00, so FF D0-D7 are restart markers
        pos = data.find(b"\xff", pos)
        if pos < 0 or data[pos + 1] == 0xD9:
            break
        if 0xD0 <= data[pos + 1] <= 0xD7:
            starts.append(pos + 2)
        pos += 2
    _, _, mcu_h = _NDPI_SUBSAMPLING[subsampling]
    want = (img.shape[1] // tile_width) * -(-img.shape[0] // mcu_h)
    if len(starts) != want:
        import PIL

        raise RuntimeError(f"Pillow {PIL.__version__} wrote {len(starts)} restart intervals "
                           f"for a {img.shape[1]}x{img.shape[0]} level, {want} expected: "
                           "this Pillow lacks the JPEG option restart_marker_blocks; upgrade "
                           "Pillow (pip install -U pillow)")
    return data, starts


def write_synthetic_ndpi(
    path: str | os.PathLike[str],
    spec: SyntheticSpec,
    *,
    downsamples: Sequence[int] = (1, 4, 16),
    tile_width: int = 512,
    quality: int = 80,
    subsampling: str = "4:2:2",
    source_lens: float = 40.0,
) -> Path:
    """Write ``spec`` as a Hamamatsu NDPI-like file (OpenSlide opens it as ``hamamatsu``).

    The layout of NDPI as OpenSlide documents it (openslide.org/formats/hamamatsu): a
    little-endian TIFF whose first-IFD and next-IFD offsets are 64-bit, each IFD followed by
    4 zero bytes per entry (the high halves of its offsets); one IFD per pyramid level, each
    holding the whole level as one baseline JPEG in one strip (``RowsPerStrip`` = height)
    with a restart marker every ``tile_width`` px of an MCU row, whose interval starts are
    tag 65426 (McuStarts, offsets from the strip's start); tag 65420 = 1 marks the format,
    65421 is the level's source lens (objective power / downsample), 65422-65424 the X/Y/Z
    offsets (0 here); resolution tags in pixels per cm; Make "Hamamatsu", Software
    "NDP.scan". No macro image. OpenSlide reads the restart intervals as tiles of
    ``tile_width`` × one MCU row and adds the levels a scaled JPEG decode gives (1/2, 1/4,
    1/8 of each stored level). The JPEGs are Pillow's, with its ``restart_marker_blocks``
    option (a Pillow without it is refused with the advice to upgrade).

    Parameters
    ----------
    path : path-like
        Output ``.ndpi`` path.
    spec : SyntheticSpec
        Content; ``spec.mpp`` (required) sets the resolution tags.
    downsamples : sequence of int
        Stored levels (first must be 1). Every level's width must be a multiple of
        ``tile_width`` and its height a multiple of the MCU height.
    tile_width : int
        Width in px of one restart interval (a multiple of the MCU width).
    quality : int
        JPEG quality.
    subsampling : {"4:2:2", "4:4:4"}
        JPEG chroma subsampling (MCUs of 16×8 or 8×8 px).
    source_lens : float
        Objective power of level 0 (tag 65421).

    Returns
    -------
    Path
    """
    import struct

    mcu_h, mpp = _ndpi_checked(spec, subsampling, tile_width)
    painter = _Painter(spec, mpp)
    path = Path(path)
    with open(path, "wb") as fh:
        fh.write(b"II*\x00" + struct.pack("<Q", 0))   # first-IFD offset patched below
        link = 4                                         # where the pointer to the next IFD is
        for ds in downsamples:
            lw, lh = spec.width // ds, spec.height // ds
            if lw % tile_width or lh % mcu_h or lw <= 0 or lh <= 0:
                raise ValueError(f"level 1/{ds} is {lw}x{lh} px: its width must be a multiple "
                                 f"of tile_width={tile_width} and its height of {mcu_h}")
            jpeg, starts = _jpeg_with_restarts(painter.region(0, 0, lw, lh, ds), quality,
                                               subsampling, tile_width)
            strip = fh.tell()
            fh.write(jpeg)
            res = 1e4 / (mpp * ds)   # px per cm
            # (tag, type, values): types 2 ASCII, 3 SHORT, 4 LONG, 5 RATIONAL, 9 SLONG, 11 FLOAT
            entries: list[tuple[int, int, Any]] = [
                (256, 4, [lw]), (257, 4, [lh]), (258, 3, [8, 8, 8]), (259, 3, [7]),
                (262, 3, [6]), (271, 2, b"Hamamatsu\x00"), (272, 2, b"C13210\x00"),
                (273, 4, [strip]), (277, 3, [3]), (278, 4, [lh]), (279, 4, [len(jpeg)]),
                (282, 5, [(round(res * 1000), 1000)]), (283, 5, [(round(res * 1000), 1000)]),
                (296, 3, [3]), (305, 2, b"NDP.scan\x00"), (65420, 4, [1]),
                (65421, 11, [source_lens / ds]), (65422, 9, [0]), (65423, 9, [0]),
                (65424, 9, [0]), (65426, 4, starts)]
            link = _write_ndpi_ifd(fh, entries, link)
    return path


def _ndpi_checked(spec: SyntheticSpec, subsampling: str, tile_width: int
                  ) -> tuple[int, float]:
    """``(MCU height of subsampling, spec.mpp)``, after checking the arguments of
    :func:`write_synthetic_ndpi` (``ValueError`` naming the one that does not fit)."""
    if subsampling not in _NDPI_SUBSAMPLING:
        raise ValueError(f"subsampling={subsampling!r} is not one of {list(_NDPI_SUBSAMPLING)}")
    if spec.mpp is None:
        raise ValueError("write_synthetic_ndpi needs spec.mpp (the resolution tags)")
    _, mcu_w, mcu_h = _NDPI_SUBSAMPLING[subsampling]
    if tile_width % mcu_w:
        raise ValueError(f"tile_width={tile_width} must be a multiple of the MCU width {mcu_w}")
    return int(mcu_h), float(spec.mpp)


def _write_ndpi_ifd(fh: Any, entries: list[tuple[int, int, Any]], link: int) -> int:
    """Write one NDPI IFD of ``entries`` (``(tag, type, values)``) at the end of ``fh``, its
    out-of-line values before it, point the 64-bit offset at ``link`` to it; returns where
    the pointer to the next IFD is (followed by the 4 zero bytes per entry of NDPI)."""
    import struct

    blobs = []
    for tag, typ, values in entries:
        if typ == 2:
            raw = bytes(values)
        elif typ == 5:
            raw = b"".join(struct.pack("<II", *v) for v in values)
        else:
            raw = struct.pack("<" + {3: "H", 4: "I", 9: "i", 11: "f"}[typ] * len(values),
                              *values)
        blobs.append((tag, typ, len(values), raw))
    out_of_line = fh.tell()
    ifd_entries = []
    for tag, typ, count, raw in blobs:
        if len(raw) <= 4:
            ifd_entries.append(struct.pack("<HHI", tag, typ, count) + raw.ljust(4, b"\0"))
        else:
            fh.write(raw + b"\0" * (len(raw) % 2))
            ifd_entries.append(struct.pack("<HHII", tag, typ, count, out_of_line))
            out_of_line = fh.tell()
    ifd = fh.tell()
    fh.seek(link)
    fh.write(struct.pack("<Q", ifd))
    fh.seek(ifd)
    fh.write(struct.pack("<H", len(ifd_entries)) + b"".join(ifd_entries))
    link = fh.tell()
    fh.write(struct.pack("<Q", 0) + b"\0" * (4 * len(ifd_entries)))
    return link


def write_image_slide(path: str | os.PathLike[str], image: np.ndarray, *, mpp: float,
                      downsamples: Sequence[int] = (1, 4), tile: int = 256,
                      quality: int = 92) -> Path:
    """Write an RGB array as an Aperio-style tiled JPEG pyramid (OpenSlide opens it).

    Used to lay out real H&E tiles as a slide with known content, e.g. the labelled TCGA
    tiles of the tests, at the resolution they were scanned at.

    Parameters
    ----------
    path : path-like
        Output ``.svs`` path.
    image : ndarray, shape (H, W, 3), uint8
        Level 0.
    mpp : float
        Level-0 µm/px written to the description.
    downsamples : sequence of int
        Pyramid levels (first must be 1); lower levels are box-filtered.
    tile, quality : int
        Tile edge (multiple of 16) and JPEG quality.
    """
    import tifffile
    from PIL import Image

    img = np.ascontiguousarray(np.asarray(image, np.uint8))
    H, W = img.shape[:2]
    head = f"Aperio Image Library v12.0.15 \r\n{W}x{H} [0,0 {W}x{H}] ({tile}x{tile}) JPEG/RGB"
    fields = f"wsikit image slide|AppMag = {10.0 / mpp:g}|MPP = {mpp:.4f}"
    path = Path(path)
    with tifffile.TiffWriter(path) as tw:
        for i, ds in enumerate(downsamples):
            lw, lh = -(-W // ds), -(-H // ds)
            level = img if ds == 1 else np.asarray(
                Image.fromarray(img).resize((lw, lh), Image.Resampling.BOX))
            desc = (f"{head} Q={quality}|{fields}" if i == 0
                    else f"Aperio Image Library v12.0.15 \r\n{W}x{H} -> {lw}x{lh} - |{fields}")
            tw.write(level, tile=(tile, tile), photometric="rgb", compression="jpeg",
                     compressionargs={"level": quality}, description=desc, metadata=None,
                     subfiletype=0 if i == 0 else 1)
    return path


def tile_mosaic(tiles: Sequence[Sequence[np.ndarray]], *, background: int = 243
                ) -> np.ndarray:
    """Lay out rows of equally sized RGB tiles as one image (a slide of known content).

    Parameters
    ----------
    tiles : rows of (h, w, 3) uint8 arrays, all of one size
    background : int
        Grey level of the canvas (only seen if a row is shorter than the first).
    """
    h, w = np.asarray(tiles[0][0]).shape[:2]
    img = np.full((len(tiles) * h, max(len(r) for r in tiles) * w, 3), background, np.uint8)
    for r, row in enumerate(tiles):
        for c, t in enumerate(row):
            arr = np.asarray(t, np.uint8)[..., :3]
            if arr.shape[:2] != (h, w):
                from ..errors import SlideError

                raise SlideError(f"tile ({r}, {c}) is {arr.shape[:2]} px; every tile must be "
                                 f"{(h, w)} like the first: crop or resize it")
            img[r * h:(r + 1) * h, c * w:(c + 1) * w] = arr
    return img
