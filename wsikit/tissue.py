"""Weight-free tissue segmentation on a low-resolution thumbnail (about 8 µm/px).

The mask separates stained tissue from background by colour saturation (white *and* grey
backgrounds are unsaturated), thresholded with Otsu (with a floor so that empty slides stay
empty). Pen ink (blue, green, black) and dark scanner borders are masked out first. Small
specks and small holes are removed by physical area (µm²), so results do not depend on the
thumbnail scale. Holes that remain are kept as polygon interiors in the GeoJSON.

>>> mask = tissue_mask(thumb, mpp=8.0)                   # pure: array in, array out
>>> tm = segment_tissue(slide)                            # reads the thumbnail itself
>>> tm.write_geojson("out/contours_geojson/slide.geojson")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import ndimage as ndi

from ._atomic import atomic_path, write_json_atomic
from ._hints import keyword, option
from .errors import TissueError

if TYPE_CHECKING:
    from .io import Slide

__all__ = ["tissue_mask", "pen_mask", "segment_tissue", "TissueMask", "mask_polygons",
           "mask_shape", "DEFAULT_MASK_MPP", "MIN_TISSUE_UM2", "MIN_HOLE_UM2"]

#: Default µm/px of the thumbnail the mask is computed on.
DEFAULT_MASK_MPP = 8.0
#: Tissue pieces smaller than this (µm², 0.05 mm²) are dropped.
MIN_TISSUE_UM2 = 5e4
#: Holes smaller than this (µm², 0.01 mm²) are filled.
MIN_HOLE_UM2 = 1e4


def pen_mask(thumb: np.ndarray, *, dark: int = 60, blue_margin: int = 35,
             green_margin: int = 20) -> np.ndarray:
    """Pixels of pen ink (blue, green, black) and dark scanner borders.

    Parameters
    ----------
    thumb : ndarray, shape (h, w, 3), uint8
    dark : int
        Pixels whose brightest channel is below this are ink or border (black).
    blue_margin : int
        Blue ink: blue exceeds red by this much while green is not below red (haematoxylin
        purple has green well below red, so it is not taken for ink).
    green_margin : int
        Green ink: green exceeds red by this much (no H&E stain is greener than red).

    Returns
    -------
    ndarray, shape (h, w), bool
    """
    r, g, b = (thumb[..., i].astype(np.int16) for i in range(3))
    black = np.maximum(np.maximum(r, g), b) < dark
    inked = r < 180  # ink is dark in red; bright JPEG noise on the background is not ink
    blue = (b - r > blue_margin) & (g >= r - 5)
    green = (g - r > green_margin) & (g >= b - 40)
    return black | (inked & (blue | green))


def _otsu(values: np.ndarray) -> float:
    """Otsu threshold of values in [0, 1] (256-bin histogram)."""
    hist, edges = np.histogram(values, bins=256, range=(0.0, 1.0))
    hist = hist.astype(np.float64)
    if hist.sum() == 0:
        return 1.0
    centers = 0.5 * (edges[:-1] + edges[1:])
    w0 = np.cumsum(hist)
    w1 = w0[-1] - w0
    m0 = np.cumsum(hist * centers)
    mean0 = m0 / np.maximum(w0, 1e-12)
    mean1 = (m0[-1] - m0) / np.maximum(w1, 1e-12)
    between = w0 * w1 * (mean0 - mean1) ** 2
    return float(centers[int(np.argmax(between))])


def _remove_small(mask: np.ndarray, min_px: float) -> np.ndarray:
    """Drop 8-connected True components with fewer than ``min_px`` pixels."""
    if min_px <= 1 or not mask.any():
        return mask
    labels, n = ndi.label(mask, structure=np.ones((3, 3), bool))
    if n == 0:
        return mask
    sizes = np.bincount(labels.ravel())
    keep = sizes >= min_px
    keep[0] = False
    return keep[labels]


def _box_mean(a: np.ndarray, size: int) -> np.ndarray:
    """Mean over a ``size``×``size`` window (edge-replicated) by shifted adds: for the small
    windows used here this is several times faster than a general filter."""
    lo = (size - 1) // 2
    p = np.pad(a, ((lo, size - 1 - lo), (lo, size - 1 - lo)), mode="edge")
    h, w = a.shape
    rows = p[0:h, :].copy()
    for k in range(1, size):
        rows += p[k:k + h, :]
    out = rows[:, 0:w].copy()
    for k in range(1, size):
        out += rows[:, k:k + w]
    out *= 1.0 / (size * size)
    return out


def tissue_mask(thumb: np.ndarray, *, mpp: float, min_tissue_um2: float = MIN_TISSUE_UM2,
                min_hole_um2: float = MIN_HOLE_UM2, min_saturation: float = 0.07,
                remove_pen: bool = True, smooth_um: float = 16.0) -> np.ndarray:
    """Boolean tissue mask of an RGB thumbnail.

    Parameters
    ----------
    thumb : ndarray, shape (h, w, 3), uint8
        RGB thumbnail (best at 4–16 µm/px).
    mpp : float
        µm/px of ``thumb``; converts the µm² areas to pixels.
    min_tissue_um2 : float
        Tissue pieces smaller than this area (µm²) are removed.
    min_hole_um2 : float
        Holes smaller than this area (µm²) are filled; larger ones are kept.
    min_saturation : float
        Floor for the Otsu threshold on saturation (keeps empty slides empty).
    remove_pen : bool
        Mask out blue/green/black ink and dark borders before thresholding.
    smooth_um : float
        Width (µm) of the box filter applied to saturation before thresholding.

    Returns
    -------
    ndarray, shape (h, w), bool
    """
    if not isinstance(thumb, np.ndarray) or thumb.ndim != 3 or thumb.shape[2] != 3:
        raise TissueError(f"thumb must be an (h, w, 3) uint8 RGB array, got "
                          f"{getattr(thumb, 'shape', type(thumb))}")
    if not (isinstance(mpp, (int, float)) and math.isfinite(mpp) and mpp > 0):
        raise TissueError(f"mpp={mpp!r} must be the positive µm/px of the thumbnail")
    if thumb.dtype != np.uint8:
        thumb = np.clip(thumb, 0, 255).astype(np.uint8)
    r, g, b = thumb[..., 0], thumb[..., 1], thumb[..., 2]
    mx = np.maximum(np.maximum(r, g), b)  # much faster than reducing over a length-3 axis
    mn = np.minimum(np.minimum(r, g), b)
    sat = (mx.astype(np.float32) - mn) / np.maximum(mx, 1).astype(np.float32)
    size = max(1, int(round(smooth_um / mpp)))
    if size > 1:
        sat = _box_mean(sat, size)
    excluded = np.zeros(mx.shape, bool)
    if remove_pen:
        excluded = pen_mask(thumb)
        if excluded.any():
            excluded = ndi.binary_dilation(excluded, iterations=max(1, size // 2 + 1))
    values = sat[~excluded]
    step = max(1, values.size // 250_000)  # Otsu on a subsample is as good and faster
    thr = max(_otsu(values[::step]) if values.size else 1.0, min_saturation)
    mask = (sat > thr) & ~excluded
    px_area = mpp * mpp
    mask = _remove_small(mask, min_tissue_um2 / px_area)
    if mask.any():
        holes = ~mask
        holes_small = holes & ~_remove_small(holes, min_hole_um2 / px_area)
        mask = mask | holes_small
    return mask


def _ring_area(ring: np.ndarray) -> float:
    x, y = ring[:, 0], ring[:, 1]
    return 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y))


def mask_polygons(mask: np.ndarray, *, scale: tuple[float, float] = (1.0, 1.0),
                  tolerance: float = 0.75) -> list[list[np.ndarray]]:
    """Polygons (exterior + holes) of the 8-connected components of ``mask``.

    Parameters
    ----------
    mask : ndarray, shape (h, w), bool
    scale : (sx, sy)
        Output units per mask pixel (level-0 px per mask px).
    tolerance : float
        Douglas–Peucker tolerance in mask pixels.

    Returns
    -------
    list of polygons; each is ``[exterior, hole, …]`` with rings ``(K, 2)`` float ``(x, y)``,
    closed (first vertex repeated), exterior counter-clockwise and holes clockwise in
    ``(x, y)`` with y pointing down as in images.
    """
    from skimage.measure import approximate_polygon, find_contours

    labels, n = ndi.label(mask, structure=np.ones((3, 3), bool))
    polygons: list[list[np.ndarray]] = []
    for k, sl in enumerate(ndi.find_objects(labels), start=1):
        if sl is None:
            continue
        crop = np.pad(labels[sl] == k, 1).astype(np.float32)
        rings = []
        for c in find_contours(crop, 0.5, fully_connected="high"):
            if len(c) < 4:
                continue
            c = approximate_polygon(c, tolerance=tolerance)
            if len(c) < 4:
                continue
            # (row, col) in the padded crop -> mask index -> level-0 edge coordinates
            x = (c[:, 1] - 1 + sl[1].start + 0.5) * scale[0]
            y = (c[:, 0] - 1 + sl[0].start + 0.5) * scale[1]
            ring = np.stack([x, y], axis=1)
            if not np.array_equal(ring[0], ring[-1]):
                ring = np.vstack([ring, ring[:1]])
            rings.append(ring)
        if not rings:
            continue
        areas = [abs(_ring_area(r)) for r in rings]
        outer = int(np.argmax(areas))
        ext = rings[outer]
        if _ring_area(ext) < 0:
            ext = ext[::-1]
        holes = [r if _ring_area(r) < 0 else r[::-1] for i, r in enumerate(rings) if i != outer]
        polygons.append([ext, *holes])
    return polygons


@dataclass(frozen=True, eq=False)
class TissueMask:
    """A tissue mask over a whole slide.

    Attributes
    ----------
    mask : ndarray, shape (h, w), bool
        True where there is tissue; covers the whole level-0 image.
    mpp : float
        Nominal µm/px of the mask.
    downsample : float
        Nominal level-0 px per mask px (the exact per-axis values are :attr:`scale`).
    level0_size : (int, int)
        Slide level-0 ``(width, height)``.
    slide_mpp : float
        Slide level-0 µm/px.
    slide_name : str
    """

    mask: np.ndarray
    mpp: float
    downsample: float
    level0_size: tuple[int, int]
    slide_mpp: float
    slide_name: str = ""

    @property
    def scale(self) -> tuple[float, float]:
        """Exact level-0 px per mask px along x and y."""
        h, w = self.mask.shape
        return self.level0_size[0] / w, self.level0_size[1] / h

    @property
    def tissue_fraction(self) -> float:
        """Fraction of the slide area covered by tissue."""
        return float(self.mask.mean()) if self.mask.size else 0.0

    @property
    def tissue_area_um2(self) -> float:
        """Tissue area in µm²."""
        sx, sy = self.scale
        return float(self.mask.sum()) * sx * sy * self.slide_mpp ** 2

    def polygons(self, *, tolerance: float = 0.75) -> list[list[np.ndarray]]:
        """Polygons in level-0 px (see :func:`mask_polygons`)."""
        return mask_polygons(self.mask, scale=self.scale, tolerance=tolerance)

    def to_geojson(self, *, tolerance: float = 0.75) -> dict[str, Any]:
        """GeoJSON FeatureCollection of Polygons in level-0 px (holes as interiors).

        One Feature per tissue piece, classified "Tissue" so QuPath imports it as an
        annotation (File › Import objects).
        """
        features = []
        for i, rings in enumerate(self.polygons(tolerance=tolerance)):
            features.append({
                "type": "Feature",
                "id": f"tissue-{i}",
                "geometry": {"type": "Polygon",
                             "coordinates": [np.round(r, 2).tolist() for r in rings]},
                "properties": {"objectType": "annotation", "name": f"tissue {i}",
                               "classification": {"name": "Tissue", "color": [0, 160, 0]},
                               "holes": len(rings) - 1},
            })
        return {"type": "FeatureCollection", "features": features,
                "properties": {"slide": self.slide_name, "units": "level-0 pixels",
                               "level0_width": self.level0_size[0],
                               "level0_height": self.level0_size[1],
                               "mpp": self.slide_mpp, "mask_mpp": self.mpp}}

    def write_geojson(self, path: str | os.PathLike[str]) -> Path:
        """Write :meth:`to_geojson` atomically; returns the path."""
        return write_json_atomic(path, self.to_geojson(), indent=None)

    def write_png(self, path: str | os.PathLike[str]) -> Path:
        """Write the mask as an 8-bit PNG (255 tissue, 0 background) atomically."""
        from PIL import Image

        path = Path(path)
        with atomic_path(path) as tmp:
            Image.fromarray(self.mask.astype(np.uint8) * 255).save(tmp, format="PNG")
        return path

    @classmethod
    def from_png(cls, path: str | os.PathLike[str], *, level0_size: tuple[int, int],
                 slide_mpp: float, slide_name: str = "") -> TissueMask:
        """Read a mask written by :meth:`write_png` (pixels > 127 are tissue).

        The mask covers the whole slide, so its resolution follows from its size: a mask
        read back equals the one written, and gives the same patch grid.
        """
        from PIL import Image

        try:
            with Image.open(path) as im:
                mask = np.asarray(im.convert("L")) > 127
        except OSError as exc:
            raise TissueError(f"{path}: cannot read the tissue mask PNG ({exc}); delete it "
                              f"or pass {option('resegment')}") from exc
        W, H = int(level0_size[0]), int(level0_size[1])
        h, w = mask.shape
        eff_mpp = float(slide_mpp) * 0.5 * (W / w + H / h)
        return cls(mask=mask, mpp=eff_mpp, downsample=eff_mpp / float(slide_mpp),
                   level0_size=(W, H), slide_mpp=float(slide_mpp), slide_name=slide_name)

    @classmethod
    def from_geojson(cls, src: str | os.PathLike[str] | Mapping[str, Any], *,
                     level0_size: tuple[int, int], slide_mpp: float,
                     mpp: float = DEFAULT_MASK_MPP, min_side_px: int = 256,
                     slide_name: str = "") -> TissueMask:
        """Rasterise a GeoJSON (file or dict) of level-0 polygons, e.g. edited in QuPath.

        Polygon and MultiPolygon geometries are filled; interiors are cut out. Features
        whose classification name is not "Tissue" (if set) are still used. The mask has the
        pixel grid :func:`segment_tissue` gives the slide for the same ``mpp`` and
        ``min_side_px`` (:func:`mask_shape`).
        """
        from skimage.draw import polygon as fill_polygon

        if isinstance(src, Mapping):
            data: Any = src
            where = "GeoJSON"
        else:
            where = str(src)
            try:
                data = json.loads(Path(src).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise TissueError(f"{where}: cannot read GeoJSON ({exc}); fix or delete the "
                                  f"file, or pass {option('resegment')} to segment again") from exc
        if not (isinstance(mpp, (int, float)) and mpp > 0 and slide_mpp > 0):
            raise TissueError(f"mpp={mpp!r} and slide_mpp={slide_mpp!r} must be positive")
        W, H = int(level0_size[0]), int(level0_size[1])
        w, h = mask_shape((W, H), float(slide_mpp), mpp=float(mpp), min_side_px=min_side_px)
        sx, sy = W / w, H / h
        eff_mpp = slide_mpp * 0.5 * (sx + sy)  # as segment_tissue reports it
        mask = np.zeros((h, w), bool)
        if isinstance(data, Mapping) and data.get("type") == "FeatureCollection":
            geoms = [f.get("geometry") if isinstance(f, Mapping) else f
                     for f in data.get("features") or []]
        elif isinstance(data, Mapping) and data.get("type") == "Feature":
            geoms = [data.get("geometry")]
        elif isinstance(data, list):  # QuPath may export a bare list of features
            geoms = [f.get("geometry") for f in data if isinstance(f, Mapping)]
        else:
            raise TissueError(f"{where}: expected a GeoJSON FeatureCollection or Feature; "
                              "fix or delete the file, or pass "
                              f"{option('resegment')} to segment again")
        if not isinstance(geoms, list):
            raise TissueError(f"{where}: 'features' is not a list; fix or delete the file, or "
                              f"pass {option('resegment')} to segment again")
        filled = 0
        for i, geom in enumerate(geoms):
            try:
                filled += _fill_geometry(mask, geom, sx, sy, fill_polygon)
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                raise TissueError(
                    f"{where}: geometry {i} is not a valid Polygon/MultiPolygon ({exc}); fix "
                    f"or delete the file, or pass {option('resegment')} to segment again") from exc
        if geoms and not filled:  # features, but not one polygon: not "no tissue"
            raise TissueError(f"{where}: none of its {len(geoms)} feature(s) is a Polygon or "
                              "MultiPolygon with a ring of 3 or more [x, y] points, so it "
                              "outlines no tissue; fix or delete the file, or pass "
                              f"{option('resegment')} to segment again")
        return cls(mask=mask, mpp=float(eff_mpp), downsample=eff_mpp / slide_mpp,
                   level0_size=(W, H),
                   slide_mpp=float(slide_mpp), slide_name=slide_name)


_OTHER_GEOMETRIES = ("Point", "MultiPoint", "LineString", "MultiLineString",
                     "GeometryCollection")


def _fill_geometry(mask: np.ndarray, geom: Any, sx: float, sy: float, fill_polygon: Any
                   ) -> int:
    """Rasterise one GeoJSON geometry (level-0 px) into ``mask`` (h, w) with scale ``sx, sy``.

    Polygon and MultiPolygon are filled (interiors cut out); the other GeoJSON types are
    ignored. Returns the number of outer rings filled.

    Raises
    ------
    ValueError
        Not a GeoJSON geometry type, or a ring that is not a list of ``[x, y]`` points.
    """
    if not geom:
        return 0
    if geom.get("type") == "Polygon":
        polys = [geom["coordinates"]]
    elif geom.get("type") == "MultiPolygon":
        polys = geom["coordinates"]
    elif geom.get("type") in _OTHER_GEOMETRIES:
        return 0
    else:
        raise ValueError(f"geometry type {geom.get('type')!r} is not a GeoJSON type")
    h, w = mask.shape
    filled = 0
    for rings in polys:
        for j, ring in enumerate(rings):
            r = np.asarray(ring, np.float64)
            if r.ndim != 2 or r.shape[1] < 2:
                raise ValueError(f"ring {j} is not a list of [x, y] points (shape {r.shape})")
            if len(r) < 3:
                continue
            rr, cc = fill_polygon(r[:, 1] / sy - 0.5, r[:, 0] / sx - 0.5, (h, w))
            mask[rr, cc] = j == 0
            filled += j == 0
    return filled


def mask_shape(level0_size: tuple[int, int], slide_mpp: float, *, mpp: float,
               min_side_px: int = 256) -> tuple[int, int]:
    """``(w, h)`` of a slide's tissue mask at ``mpp`` µm/px, the one rule for every mask.

    Small slides get a finer mask, so that its longer side has at least ``min_side_px``
    pixels (never finer than the slide itself; ``0``: exactly ``mpp``). :func:`segment_tissue` and
    :meth:`TissueMask.from_geojson` both use it, so a mask rasterised from a (possibly
    edited) GeoJSON has the pixel grid of the segmentation it came from.
    """
    W, H = int(level0_size[0]), int(level0_size[1])
    longest_um = max(W, H) * slide_mpp
    mask_mpp = (float(mpp) if min_side_px <= 0 else
                min(float(mpp), max(slide_mpp, longest_um / min_side_px)))
    return (max(1, int(round(W * slide_mpp / mask_mpp))),
            max(1, int(round(H * slide_mpp / mask_mpp))))


def _read_thumbnail(slide: Slide, size: tuple[int, int]) -> np.ndarray:
    """Whole slide at ``size`` (w, h): straight from the TIFF tiles (scaled JPEG decode) when
    :mod:`wsikit.tiles` can read the file, else through the slide's backend."""
    W, H = slide.dimensions
    if slide.backend in ("openslide", "tiffslide"):
        try:
            from .tiles import open_tile_reader
        except ImportError:  # pragma: no cover - optional fast path
            open_tile_reader = None
        if open_tile_reader is not None:
            reader, _reason = open_tile_reader(slide.path, expected_dimensions=(W, H),
                                               cache_mb=0)
            if reader is not None:
                try:
                    with reader:
                        # a mask needs no resampling parity with the patch readers: the
                        # DCT-domain scaled decode is several times cheaper here
                        return reader.read_region((0, 0, W, H), size, dct=True)
                except Exception:  # noqa: BLE001 - fall back to the general reader
                    pass
    return slide.read_at_mpp((0, 0, W, H), out_size=size)


def segment_tissue(slide: Slide, *, mpp: float = DEFAULT_MASK_MPP, min_side_px: int = 256,
                   **options: Any) -> TissueMask:
    """Read a thumbnail of ``slide`` and segment tissue on it.

    Parameters
    ----------
    slide : Slide
    mpp : float
        µm/px of the thumbnail (default 8). Small slides use a finer resolution so that the
        longer side has at least ``min_side_px`` pixels (never finer than the slide).
    min_side_px : int
    **options
        Passed to :func:`tissue_mask` (``min_tissue_um2``, ``min_hole_um2``, …).

    Returns
    -------
    TissueMask
    """
    if not math.isfinite(slide.mpp):
        raise TissueError(f"{slide.path}: slide mpp unknown; pass it, e.g. {option('mpp', 0.25)}")
    if isinstance(mpp, bool) or not isinstance(mpp, (int, float)) or not 0 < mpp < math.inf:
        raise TissueError(f"mpp={mpp!r}: the tissue mask resolution must be a positive number "
                          f"of µm/px, e.g. 8 ({keyword('mask_mpp')})")
    W, H = slide.dimensions
    thumb = _read_thumbnail(slide, mask_shape((W, H), slide.mpp, mpp=mpp,
                                              min_side_px=min_side_px))
    h, w = thumb.shape[:2]
    eff_mpp = slide.mpp * 0.5 * (W / w + H / h)
    mask = tissue_mask(thumb, mpp=eff_mpp, **options)
    return TissueMask(mask=mask, mpp=eff_mpp, downsample=eff_mpp / slide.mpp,
                      level0_size=(W, H), slide_mpp=slide.mpp, slide_name=slide.name)
