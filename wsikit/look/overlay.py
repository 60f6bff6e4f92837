"""Overlays on slide thumbnails: attention heatmaps, tissue outlines and selected windows.

Pure functions over arrays (no file I/O). Thumbnail pixel = level-0 pixel / ``downsample``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ..errors import WsikitError
from ..evidence.regions_geojson import scale_colour
from ..selection.selectors.grid import AttentionMap, attention_map

if TYPE_CHECKING:  # pragma: no cover
    from ..evidence.result import EvidenceRegion

__all__ = [
    "artefact_rings",
    "OverlayError",
    "as_attention_map",
    "as_rgb_thumbnail",
    "colormap",
    "heatmap_rgba",
    "overview_image",
    "place_labels",
    "tissue_rings",
]


class OverlayError(WsikitError):
    """Invalid thumbnail, attention or outline given to the report or overlays."""


# diverging blue -> pale yellow -> red (like ColorBrewer RdYlBu reversed), as anchor colours
_CMAP = np.array([[49, 54, 149], [69, 117, 180], [116, 173, 209], [171, 217, 233],
                  [254, 224, 144], [253, 174, 97], [244, 109, 67], [215, 48, 39],
                  [165, 0, 38]], dtype=np.float64)


def _hex_rgb(colour: str) -> tuple[int, int, int]:
    c = colour.lstrip("#")
    return (int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16))


def colormap(v: np.ndarray) -> np.ndarray:
    """Map values in [0, 1] to RGB.

    Parameters
    ----------
    v : ndarray, any shape, float
        Values; clipped to [0, 1].

    Returns
    -------
    ndarray, shape ``v.shape + (3,)``, uint8
    """
    x = np.clip(np.asarray(v, dtype=np.float64), 0.0, 1.0) * (len(_CMAP) - 1)
    i = np.minimum(np.floor(x).astype(np.int64), len(_CMAP) - 2)
    t = (x - i)[..., None]
    rgb = _CMAP[i] * (1.0 - t) + _CMAP[i + 1] * t
    return np.rint(rgb).astype(np.uint8)


def as_attention_map(attention: AttentionMap | tuple[Any, Any, int] | None
                     ) -> AttentionMap | None:
    """Accept an :class:`AttentionMap` or a ``(scores, coords, patch_size_l0)`` tuple."""
    if attention is None or isinstance(attention, AttentionMap):
        return attention
    try:
        scores, coords, patch_size_l0 = attention
    except (TypeError, ValueError) as exc:
        raise OverlayError(
            "attention must be (scores (N,), coords (N, 2), patch_size_l0) or an AttentionMap, "
            f"got {type(attention).__name__}") from exc
    return attention_map(scores, coords, patch_size_l0)


def heatmap_rgba(amap: AttentionMap, *, alpha: float = 0.6,
                 percentiles: tuple[float, float] = (1.0, 99.0)) -> np.ndarray:
    """Colour the attention map, one pixel per grid cell; unoccupied cells are transparent.

    Values are scaled between the given percentiles of the occupied cells (robust to a few
    outliers) before colouring.

    Returns
    -------
    ndarray, shape (H, W, 4), uint8
        RGBA at cell resolution covering ``amap.l0_box()``.
    """
    vals = amap.values[amap.occupied]
    lo, hi = np.percentile(vals, percentiles) if vals.size else (0.0, 1.0)
    span = hi - lo if hi > lo else 1.0
    rgba = np.zeros(amap.shape + (4,), dtype=np.uint8)
    rgba[..., :3] = colormap((amap.values - lo) / span)
    rgba[..., 3] = np.where(amap.occupied, int(round(255 * alpha)), 0)
    return rgba


def tissue_rings(geojson: Mapping[str, Any] | None) -> list[np.ndarray]:
    """All polygon rings (exteriors and holes) of a GeoJSON object, in level-0 pixels.

    Accepts a FeatureCollection, a Feature, a Polygon or a MultiPolygon.

    Returns
    -------
    list of ndarray, each shape (K, 2), float64
    """
    if geojson is None:
        return []
    rings: list[np.ndarray] = []

    def visit(obj: Any, depth: int = 0) -> None:
        if depth > 8:   # GeoJSON nests a Feature in a collection, rarely more: a hostile file
            raise OverlayError("tissue GeoJSON: objects nested more than 8 deep")
        if not isinstance(obj, Mapping):
            raise OverlayError(f"tissue GeoJSON: expected an object, got {type(obj).__name__}")
        kind = obj.get("type")
        if kind == "FeatureCollection":
            for f in obj.get("features", []):
                visit(f, depth + 1)
        elif kind == "Feature":
            if obj.get("geometry") is not None:
                visit(obj["geometry"], depth + 1)
        elif kind in ("Polygon", "MultiPolygon"):
            polys = [obj["coordinates"]] if kind == "Polygon" else obj["coordinates"]
            for poly in polys:
                for ring in poly:
                    arr = np.asarray(ring, dtype=np.float64)
                    if arr.ndim == 2 and arr.shape[0] >= 3 and arr.shape[1] >= 2:
                        rings.append(arr[:, :2])
        elif kind == "GeometryCollection":
            for g in obj.get("geometries", []):
                visit(g, depth + 1)
        else:
            raise OverlayError(
                f"tissue GeoJSON: unsupported type {kind!r} (expected FeatureCollection, "
                "Feature, Polygon or MultiPolygon)")

    try:
        visit(geojson)
    except (KeyError, TypeError, ValueError) as exc:
        raise OverlayError(f"tissue GeoJSON is malformed: {exc}") from exc
    return rings


#: Artefact kinds not outlined on an overview: scanner fill lies on the glass, never in the
#: tissue, and on a slide scanned without a pyramid (a flat TIFF) it is most of the background,
#: so its outlines would cover the picture and say nothing the tissue outline does not.
HIDDEN_ARTEFACTS = frozenset({"fill"})


def artefact_rings(geojson: Mapping[str, Any] | None, *,
                   hidden: Iterable[str] = HIDDEN_ARTEFACTS
                   ) -> dict[str, tuple[str, tuple[int, int, int], list[np.ndarray]]]:
    """Rings of an artefact GeoJSON (:meth:`wsikit.tissue.mask.TissueMask.artefacts_geojson`) by
    kind: ``{kind: (class name, RGB colour, rings)}``, kinds in the order found; the kinds
    in ``hidden`` (default: scanner fill, :data:`HIDDEN_ARTEFACTS`) are left out."""
    out: dict[str, tuple[str, tuple[int, int, int], list[np.ndarray]]] = {}
    hidden = frozenset(hidden)
    for feat in (geojson or {}).get("features") or []:
        if not isinstance(feat, Mapping):
            continue
        props = feat.get("properties")
        props = props if isinstance(props, Mapping) else {}
        cls = props.get("classification")
        cls = cls if isinstance(cls, Mapping) else {}
        kind = str(props.get("artefact") or "artefact")
        if kind in hidden:
            continue
        try:
            r, g, b = (int(c) for c in list(cls.get("color") or (120, 120, 120))[:3])
        except (TypeError, ValueError):
            r, g, b = 120, 120, 120
        rings = tissue_rings({"type": "FeatureCollection", "features": [feat]})
        if rings:
            out.setdefault(kind, (str(cls.get("name") or kind), (r, g, b), []))[2].extend(rings)
    return out


def as_rgb_thumbnail(thumbnail: np.ndarray) -> np.ndarray:
    """Validate a thumbnail and return it as ``(h, w, 3) uint8`` (grey/RGBA accepted)."""
    arr = np.asarray(thumbnail)
    if arr.dtype != np.uint8:
        raise OverlayError(f"thumbnail must be uint8 RGB, got dtype {arr.dtype}")
    if arr.ndim == 2:
        arr = np.repeat(arr[..., None], 3, axis=2)
    if arr.ndim != 3 or arr.shape[2] not in (3, 4) or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise OverlayError(f"thumbnail must have shape (h, w, 3), got {arr.shape}")
    return np.ascontiguousarray(arr[..., :3])


def _regions(regions: Iterable[EvidenceRegion | Mapping[str, Any]]
             ) -> list[tuple[str, int, float, tuple]]:
    from ..evidence.result import EvidenceRegion

    out = []
    for i, r in enumerate(regions):
        try:
            if isinstance(r, EvidenceRegion):
                rid, scale, score, box = r.id, r.scale, r.score, r.box
            else:
                rid, scale, score, box = r.get("id", f"r{i + 1}"), r["scale"], r["score"], \
                    r["box"]
            out.append((str(rid), int(scale), float(score),
                        (float(box["x"]), float(box["y"]), float(box["width"]),
                         float(box["height"]))))
        except (KeyError, TypeError, ValueError) as exc:
            raise OverlayError(
                f"region {i} needs scale, score and box {{x, y, width, height}}: {exc}") from exc
    return out


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1: fixed-size bitmap font
        return ImageFont.load_default()


def _free(corner: tuple[float, float], size: tuple[float, float],
          placed: Sequence[tuple[float, float, float, float]]) -> bool:
    """Whether a label at ``corner`` of ``size`` overlaps none of the ``placed`` rectangles."""
    (cx, cy), (lw, lh) = corner, size
    return all(cx + lw <= a or a2 <= cx or cy + lh <= b or b2 <= cy for a, b, a2, b2 in placed)


def _spot_cost(spot: tuple[float, float], size: tuple[float, float],
               placed: Sequence[tuple[float, float, float, float]],
               finer: Sequence[tuple[float, float, float, float]]) -> tuple[bool, float]:
    """Ranking of a label spot: overlapping a placed label first, then finer window area hidden."""
    rect = (spot[0], spot[1], spot[0] + size[0], spot[1] + size[1])
    return (not _free(spot, size, placed), sum(_overlap(rect, b) for b in finer))


def place_labels(boxes: Sequence[tuple[float, float, float, float]],
                 sizes: Sequence[tuple[float, float]], *, bounds: tuple[float, float],
                 pad: float = 0.0) -> list[tuple[float, float]]:
    """Top-left corners for window labels so that no two labels overlap.

    Parameters
    ----------
    boxes : sequence of (x0, y0, x1, y1)
        Windows in image pixels, in drawing order.
    sizes : sequence of (width, height)
        Label sizes in image pixels.
    bounds : (width, height)
        Image size; labels stay inside it where possible.
    pad : float
        Gap between a label and its box edge.

    Returns
    -------
    list of (x, y)
        Each label goes above its box's top-left corner, else inside the top edge, below the
        box, inside the bottom edge, right-aligned above/inside the top edge or below the box,
        or beside it: the first of these that stays in the image, overlaps no earlier label
        and covers the least of the windows no larger than its own (a coarse window's label
        must not hide the finer window nested in it). When every spot overlaps a label, the
        one covering the least window area is taken.
    """
    placed: list[tuple[float, float, float, float]] = []
    out: list[tuple[float, float]] = []
    W, H = bounds
    areas = [(x1 - x0) * (y1 - y0) for x0, y0, x1, y1 in boxes]
    for i, ((x0, y0, x1, y1), (lw, lh)) in enumerate(zip(boxes, sizes, strict=True)):
        cands = [(x0, y0 - lh - pad), (x0 + pad, y0 + pad), (x0, y1 + pad),
                 (x0 + pad, y1 - lh - pad), (x1 - lw, y0 - lh - pad),
                 (x1 - lw - pad, y0 + pad), (x1 - lw, y1 + pad),
                 (x1 - lw - pad, y1 - lh - pad), (x1 + pad, y0), (x0 - lw - pad, y0)]
        inside = [(cx, cy) for cx, cy in cands
                  if cx >= 0 and cy >= 0 and cx + lw <= W and cy + lh <= H] or cands[:1]
        finer = [b for j, b in enumerate(boxes) if j != i and areas[j] <= areas[i]]

        costs = [_spot_cost(c, (lw, lh), placed, finer) for c in inside]
        cx, cy = inside[costs.index(min(costs))]  # the earliest of equal costs
        placed.append((cx, cy, cx + lw, cy + lh))
        out.append((cx, cy))
    return out


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]
             ) -> float:
    """Area of the intersection of two (x0, y0, x1, y1) rectangles."""
    return (max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
            * max(0.0, min(a[3], b[3]) - max(a[1], b[1])))


def overview_image(thumbnail: np.ndarray, downsample: float, *,
                   regions: Sequence[EvidenceRegion | Mapping[str, Any]] = (),
                   attention: AttentionMap | tuple[Any, Any, int] | None = None,
                   tissue_geojson: Mapping[str, Any] | None = None,
                   heat_alpha: float = 0.45,
                   artefacts_geojson: Mapping[str, Any] | None = None) -> np.ndarray:
    """Draw the heatmap, tissue outline and windows (with scale and score) on a thumbnail.

    Parameters
    ----------
    thumbnail : ndarray, shape (h, w, 3), uint8
    downsample : float
        Level-0 pixels per thumbnail pixel.
    regions : sequence of EvidenceRegion or dict
        Evidence regions (``id``, ``scale``, ``score``, ``box`` in level-0 px): the result's
        region objects, or evidence.json region dicts.
    attention : AttentionMap or (scores, coords, patch_size_l0), optional
    tissue_geojson : dict, optional
        Tissue polygons in level-0 pixels.
    heat_alpha : float
        Heatmap opacity.
    artefacts_geojson : dict, optional
        Artefacts removed from the tissue, outlined in the colour of their kind.

    Returns
    -------
    ndarray, shape (h, w, 3), uint8
    """
    thumb = as_rgb_thumbnail(thumbnail)
    if not (isinstance(downsample, (int, float, np.number)) and downsample > 0):
        raise OverlayError(f"thumbnail_downsample must be > 0, got {downsample!r}")
    ds = float(downsample)
    img = Image.fromarray(thumb).convert("RGBA")
    amap = as_attention_map(attention)
    if amap is not None:
        heat = Image.fromarray(heatmap_rgba(amap, alpha=heat_alpha), "RGBA")
        x, y, w, h = (v / ds for v in amap.l0_box())
        size = (max(1, round(w)), max(1, round(h)))
        layer = Image.new("RGBA", img.size, (0, 0, 0, 0))
        layer.paste(heat.resize(size, Image.Resampling.NEAREST), (round(x), round(y)))
        img = Image.alpha_composite(img, layer)
    draw = ImageDraw.Draw(img)
    lw = max(2, round(max(img.size) / 350))
    for ring in tissue_rings(tissue_geojson):
        pts = [(float(px / ds), float(py / ds)) for px, py in ring]
        draw.line(pts + pts[:1], fill=(30, 41, 59, 255), width=max(1, lw - 1))
    for _name, colour, rings in artefact_rings(artefacts_geojson).values():
        for ring in rings:
            pts = [(float(px / ds), float(py / ds)) for px, py in ring]
            draw.line(pts + pts[:1], fill=(*colour, 255), width=max(1, lw - 1))
    font = _font(max(10, round(max(img.size) / 60)))
    items = []
    # coarse windows first, so the finer ones they contain (the zoom chain) are drawn on top
    for rid, scale, score, (x, y, w, h) in sorted(_regions(regions), key=lambda t: -t[1]):
        colour = _hex_rgb(scale_colour(scale))
        box = (x / ds, y / ds, (x + w) / ds, (y + h) / ds)
        draw.rectangle(box, outline=colour + (255,), width=lw)
        label = f"{rid} {scale}x{scale} {score:.2f}"
        tb = draw.textbbox((0, 0), label, font=font)
        items.append((box, label, colour, tb))
    spots = place_labels([it[0] for it in items],
                         [(tb[2] - tb[0] + 2 * lw, tb[3] - tb[1] + 2 * lw)
                          for _, _, _, tb in items], bounds=img.size, pad=lw)
    for (_box, label, colour, tb), (lx, ly) in zip(items, spots, strict=True):
        bw, bh = tb[2] - tb[0] + 2 * lw, tb[3] - tb[1] + 2 * lw
        draw.rectangle((lx, ly, lx + bw, ly + bh), fill=colour + (230,))
        draw.text((lx + lw - tb[0], ly + lw - tb[1]), label, fill=(255, 255, 255, 255),
                  font=font)
    return np.asarray(img.convert("RGB"))
