"""Reading GeoJSON that people edit (QuPath round trips): parse, validate, rasterise.

One reader for every GeoJSON wsikit takes back (the tissue outline, the regions): each
feature is checked before it is used, and every problem names the file and the feature.

* The text is parsed with a bound: JSON nested beyond Python's recursion limit is refused in
  one line, not a crash.
* A feature that is not an object, a geometry of no GeoJSON type, a coordinate that is not a
  finite number (``NaN``, ``Infinity``, text) or a ring that is not a list of ``[x, y]``
  points are refused with the feature named.
* Polygons are rasterised by an even-odd scanline fill (linear in vertices plus pixels, so a
  200,000-vertex outline costs milliseconds) with the repair semantics of shapely's
  ``make_valid(method="structure")``: the area of a polygon is its outline's area less its
  holes' areas; a self-intersecting ring covers the pixels an even number of crossings away
  from outside (a bow tie is its two triangles); a hole outside its outline removes nothing;
  overlapping polygons are united. Each repair is reported (:class:`PolygonFill`), so the
  caller can say which feature was repaired.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import WsikitError

__all__: list[str] = []

#: Geometry types that cover no area: a tissue outline or region ignores them.
LINEAR_TYPES = ("Point", "MultiPoint", "LineString", "MultiLineString")
#: Deepest GeometryCollection nesting read (GeoJSON discourages nesting at all).
MAX_COLLECTION_DEPTH = 8
#: (edge, row) crossings rasterised per chunk: bounds the scanline fill's memory.
_CHUNK_CROSSINGS = 1 << 22


def read_json(path: str | os.PathLike[str], *, error: type[WsikitError], fix: str) -> Any:
    """The JSON value of ``path``, or ``error`` naming the file, what is wrong and ``fix``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read the GeoJSON ({exc}); {fix}") from exc
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise error(f"{path}: its JSON is nested more deeply than any GeoJSON (beyond "
                    f"Python's recursion limit); {fix}") from exc
    except ValueError as exc:
        raise error(f"{path}: not valid JSON ({exc}); {fix}") from exc


@dataclass(frozen=True)
class GeoFeature:
    """One feature of a GeoJSON file, validated.

    Attributes
    ----------
    index : int
        Position in the file's feature list.
    label : str
        How messages name it: ``feature 3 ("tissue 2")``.
    properties : mapping
    polygons : list of list of ndarray
        Its Polygon parts (from Polygon, MultiPolygon and GeometryCollection geometries),
        each ``[outline, hole, …]`` with rings ``(K, 2)`` float64 in the file's units.
    other_types : tuple of str
        Geometry types it held that cover no area (points, lines), ignored.
    """

    index: int
    label: str
    properties: Mapping[str, Any]
    polygons: list[list[np.ndarray]]
    other_types: tuple[str, ...] = ()

    @property
    def class_name(self) -> str:
        """Its QuPath classification name ("" when unclassified)."""
        cls = self.properties.get("classification")
        if isinstance(cls, Mapping):
            return str(cls.get("name") or "")
        return str(cls or "")


def _label(index: int, feature: Any) -> str:
    name = None
    if isinstance(feature, Mapping):
        props = feature.get("properties")
        if isinstance(props, Mapping) and props.get("name") not in (None, ""):
            name = props.get("name")
        elif feature.get("id") not in (None, ""):
            name = feature.get("id")
    text = f"feature {index}"
    return f"{text} ({str(name)[:60]!r})" if name is not None else text


def _ring(ring: Any, where: str) -> np.ndarray:
    """A ring as ``(K, 2)`` float64 of finite numbers, or ValueError saying why not."""
    if not isinstance(ring, list):
        raise ValueError(f"{where} is a {type(ring).__name__}, not a list of [x, y] points")
    for k, point in enumerate(ring):
        if not (isinstance(point, list) and 2 <= len(point) <= 4):
            raise ValueError(f"vertex {k} of {where} is {str(point)[:40]}, not an [x, y] point")
        for v in point[:2]:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"vertex {k} of {where} holds {str(v)[:40]!r}, not a finite "
                                 "number")
    return np.array([p[:2] for p in ring], dtype=np.float64).reshape(-1, 2)


def _polygon(coords: Any, where: str) -> list[np.ndarray]:
    if not isinstance(coords, list):
        raise ValueError(f"{where} coordinates are a {type(coords).__name__}, not a list of "
                         "rings")
    return [_ring(r, f"ring {j} of {where}") for j, r in enumerate(coords)]


def _geometry(geom: Any, polygons: list[list[np.ndarray]], others: list[str],
              depth: int = 0) -> None:
    if geom is None:
        return
    if not isinstance(geom, Mapping):
        raise ValueError(f"its geometry is a {type(geom).__name__}, not a GeoJSON object")
    kind = geom.get("type")
    if kind == "Polygon":
        polygons.append(_polygon(geom.get("coordinates"), "the Polygon"))
    elif kind == "MultiPolygon":
        parts = geom.get("coordinates")
        if not isinstance(parts, list):
            raise ValueError("its MultiPolygon coordinates are not a list of polygons")
        polygons.extend(_polygon(p, f"polygon {i}") for i, p in enumerate(parts))
    elif kind == "GeometryCollection":
        if depth >= MAX_COLLECTION_DEPTH:
            raise ValueError(f"GeometryCollections nested more than {MAX_COLLECTION_DEPTH} "
                             "deep")
        members = geom.get("geometries")
        if not isinstance(members, list):
            raise ValueError("its GeometryCollection has no 'geometries' list")
        for g in members:
            _geometry(g, polygons, others, depth + 1)
    elif kind in LINEAR_TYPES:
        others.append(str(kind))
    else:
        raise ValueError(f"geometry type {str(kind)[:40]!r} is not a GeoJSON geometry type")


def read_features(data: Any, *, where: str, error: type[WsikitError], fix: str
                  ) -> list[GeoFeature]:
    """The features of a GeoJSON value (FeatureCollection, Feature, a bare geometry, or the
    bare list of features QuPath may export), each validated.

    Raises
    ------
    error
        Not GeoJSON, or a feature that is not an object, has no GeoJSON geometry, or holds a
        coordinate that is not a finite number: names ``where``, the feature and ``fix``.
    """
    if isinstance(data, Mapping) and data.get("type") == "FeatureCollection":
        raw = data.get("features")
        if not isinstance(raw, list):
            raise error(f"{where}: 'features' is not a list; {fix}")
    elif isinstance(data, Mapping) and data.get("type") == "Feature":
        raw = [data]
    elif isinstance(data, Mapping) and "coordinates" in data or (
            isinstance(data, Mapping) and data.get("type") == "GeometryCollection"):
        raw = [{"type": "Feature", "geometry": data, "properties": {}}]
    elif isinstance(data, list):
        raw = data
    else:
        raise error(f"{where}: expected a GeoJSON FeatureCollection or Feature, got "
                    f"{type(data).__name__}; {fix}")
    out = []
    for i, feature in enumerate(raw):
        label = _label(i, feature)
        if not isinstance(feature, Mapping):
            raise error(f"{where}: {label} is a {type(feature).__name__} "
                        f"({str(feature)[:40]!r}), not a GeoJSON Feature object; {fix}")
        props = feature.get("properties")
        geom = feature.get("geometry") if feature.get("type") == "Feature" or \
            "geometry" in feature else feature
        polygons: list[list[np.ndarray]] = []
        others: list[str] = []
        try:
            _geometry(geom, polygons, others)
        except (ValueError, RecursionError) as exc:
            raise error(f"{where}: {label}: {exc}; {fix}") from exc
        out.append(GeoFeature(i, label, props if isinstance(props, Mapping) else {},
                              polygons, tuple(others)))
    return out


def signed_area(ring: np.ndarray) -> float:
    """Shoelace area of a ring (positive counter-clockwise with y up)."""
    x, y = ring[:, 0], ring[:, 1]
    return 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y))


def fill_ring(ring: np.ndarray, shape: tuple[int, int], origin: tuple[int, int] = (0, 0)
              ) -> np.ndarray:
    """Even-odd fill of one ring given in pixel coordinates (x = column, y = row, pixel
    centres at integers) on a ``shape`` (h, w) window whose top-left pixel is ``origin``
    (row, column): a pixel is inside when a ray from its centre to the left crosses the
    ring an odd number of times. Linear in vertices and pixels (scanline crossings counted
    per pixel, then a running parity along each row).
    """
    h, w = shape
    counts = np.zeros((h, w + 1), np.int64)
    if len(ring) < 3 or h == 0 or w == 0:
        return np.zeros((h, w), bool)
    x = ring[:, 0] - origin[1]
    y = ring[:, 1] - origin[0]
    x0, y0, x1, y1 = x, y, np.roll(x, -1), np.roll(y, -1)
    keep = y0 != y1
    x0, y0, x1, y1 = x0[keep], y0[keep], x1[keep], y1[keep]
    lo, hi = np.minimum(y0, y1), np.maximum(y0, y1)
    r0 = np.clip(np.ceil(lo), 0, h).astype(np.int64)   # rows i with lo <= i < hi
    r1 = np.clip(np.ceil(hi), 0, h).astype(np.int64)
    n = r1 - r0
    use = n > 0
    x0, y0, x1, y1, r0, n = x0[use], y0[use], x1[use], y1[use], r0[use], n[use]
    slope = (x1 - x0) / (y1 - y0)
    ends = np.cumsum(n)
    start = 0
    while start < len(n):   # chunks of edges, so the crossings of a hostile ring stay bounded
        base = int(ends[start - 1]) if start else 0
        stop = int(np.searchsorted(ends, base + _CHUNK_CROSSINGS, side="right"))
        stop = max(stop, start + 1)
        nn = n[start:stop]
        edge = np.repeat(np.arange(start, stop), nn)
        first = np.cumsum(nn) - nn
        row = r0[edge] + (np.arange(int(nn.sum())) - np.repeat(first, nn))
        xc = x0[edge] + (row - y0[edge]) * slope[edge]
        col = np.clip(np.ceil(xc), 0, w).astype(np.int64)   # pixels j >= xc are right of it
        counts += np.bincount(row * (w + 1) + col, minlength=h * (w + 1)).reshape(h, w + 1)
        start = stop
    return (np.cumsum(counts[:, :w], axis=1) & 1).astype(bool)


@dataclass(frozen=True)
class PolygonFill:
    """A polygon rasterised on a window of the mask grid, and what was repaired.

    Attributes
    ----------
    mask : ndarray (h, w) bool
        Its pixels in the window ``rows × cols``.
    rows, cols : slice
        The window within the full mask.
    self_intersecting : tuple of int
        Rings (0 = outline) whose even-odd area differs from their signed area: they cross
        themselves (or wind twice), and were filled by the even-odd rule.
    holes_outside : tuple of int
        Holes lying (partly) outside the outline; what lies outside removes nothing.
    """

    mask: np.ndarray
    rows: slice
    cols: slice
    self_intersecting: tuple[int, ...] = ()
    holes_outside: tuple[int, ...] = ()


def _crosses_itself(ring_px: np.ndarray, filled: int) -> bool:
    """Whether the even-odd area of a ring (``filled`` pixels) differs from its shoelace
    area by more than its rasterisation can (about half a pixel per unit of perimeter)."""
    area = abs(signed_area(ring_px))
    perimeter = float(np.hypot(*np.diff(ring_px, axis=0).T).sum())
    return abs(filled - area) > 0.5 * perimeter + 4.0 + 0.01 * area


def _window(ring_px: np.ndarray, h: int, w: int) -> tuple[int, int, int, int] | None:
    """Rows ``r0:r1`` and columns ``c0:c1`` of the grid a ring's pixels can lie in."""
    r0 = int(max(0, math.floor(ring_px[:, 1].min())))
    r1 = int(min(h, math.ceil(ring_px[:, 1].max()) + 1))
    c0 = int(max(0, math.floor(ring_px[:, 0].min())))
    c1 = int(min(w, math.ceil(ring_px[:, 0].max()) + 1))
    return (r0, r1, c0, c1) if r1 > r0 and c1 > c0 else None


def fill_polygon(rings: list[np.ndarray], shape: tuple[int, int], *, scale: tuple[float, float]
                 ) -> PolygonFill | None:
    """Rasterise one polygon (``[outline, hole, …]`` in level-0 px) on a mask grid ``shape``
    (h, w) of ``scale`` (level-0 px per mask px along x, y), with make_valid's "structure"
    semantics (see the module). None when it covers no pixel of the grid."""
    h, w = shape
    sx, sy = scale
    px = [np.column_stack([r[:, 0] / sx - 0.5, r[:, 1] / sy - 0.5]) for r in rings]
    if not px or len(px[0]) < 3:
        return None
    win = _window(px[0], h, w)
    if win is None:
        return None
    r0, r1, c0, c1 = win
    mask = fill_ring(px[0], (r1 - r0, c1 - c0), (r0, c0))
    outline = mask.copy()
    crossing = [0] if _crosses_itself(px[0], int(mask.sum())) else []
    outside = []
    for j, ring in enumerate(px[1:], start=1):
        if len(ring) < 3:
            continue
        hw = _window(ring, h, w)
        if hw is None:   # wholly off the grid, so outside the outline too
            outside.append(j)
            continue
        hole = fill_ring(ring, (hw[1] - hw[0], hw[3] - hw[2]), (hw[0], hw[2]))
        n = int(hole.sum())
        if _crosses_itself(ring, n):
            crossing.append(j)
        # the hole's part inside the outline's window, in both windows' coordinates
        a0, a1, b0, b1 = max(r0, hw[0]), min(r1, hw[1]), max(c0, hw[2]), min(c1, hw[3])
        inside = 0
        if a1 > a0 and b1 > b0:
            part = hole[a0 - hw[0]:a1 - hw[0], b0 - hw[2]:b1 - hw[2]]
            inside = int((part & outline[a0 - r0:a1 - r0, b0 - c0:b1 - c0]).sum())
            mask[a0 - r0:a1 - r0, b0 - c0:b1 - c0] &= ~part
        if n - inside > max(2.0, 0.02 * n):
            outside.append(j)
    if not mask.any():
        return None
    return PolygonFill(mask, slice(r0, r1), slice(c0, c1), tuple(crossing), tuple(outside))
