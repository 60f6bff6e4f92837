"""A heatmap layer as files: a pyramidal overlay TIFF, a thumbnail PNG with its legend, and
QuPath tiles (GeoJSON).

:func:`write_layer_files` writes, for one :class:`~wsikit.look.heatmap.HeatmapLayer`::

    <stem>.tiff      the overlay at the slide's own size, as a tiled pyramidal TIFF
    <stem>.png       the slide's thumbnail with the layer over it and its legend below
    <stem>.geojson   one QuPath tile per patch, its value as a measurement
    <stem>.svg       the legend alone

The TIFF is RGBA (8-bit, unassociated alpha: transparent where a patch has no value), tiled
512 × 512, deflate-compressed, with its levels as successive full-resolution-then-halved
image directories (``subfiletype`` 1 for the reduced ones) and the slide's µm/px as its
resolution: the generic pyramidal TIFF that OpenSlide (and so QuPath's OpenSlide reader),
tiffslide and tifffile open as a multi-level image of the slide's own pixel size, so it lies
exactly over the slide. Level 0 is :func:`~wsikit.look.heatmap.layer_tile` of each tile's
level-0 box at full resolution; level ``k`` draws boxes ``2**k`` times larger at the same tile
size. A tile of one colour (inside one patch, or empty) is encoded once per colour and its
bytes reused.

The GeoJSON is what QuPath imports as objects (File › Import objects from file): each patch
a ``"tile"`` object (QuPath's ``PathTileObject``) whose ``measurements`` hold the value under
the layer's name, so Measure › Show measurement maps colours them; coordinates are level-0
pixels, QuPath's convention. Every file is written to a temporary name in its folder and
renamed into place.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from .._atomic import atomic_path, write_bytes_atomic, write_json_atomic
from .heatmap import (
    HeatmapLayer,
    composite,
    layer_tile,
    legend_image,
    legend_svg,
    spread,
    tile_cells,
)
from .overlay import OverlayError

__all__ = [
    "layer_geojson",
    "write_layer_files",
    "write_layer_pyramid",
]

#: Side of a pyramid tile in pixels.
PYRAMID_TILE = 512
#: The pyramid stops at the first level whose longer side is at most this.
PYRAMID_MIN_SIDE = 1024


def layer_stem(layer: HeatmapLayer) -> str:
    """A file stem for ``layer``: its name made safe as a file name (letters, digits, ``-``,
    ``_``, ``.``; at most 60 characters), with a short hash of the full name when anything was
    changed, so two prompts never share files.

    Examples
    --------
    >>> from wsikit.look.heatmap import HeatmapLayer
    >>> mk = lambda n: HeatmapLayer(n, np.zeros((0, 2), np.int64), np.zeros(0), 1, source="",
    ...                             label="", value_range=(0.0, 1.0))
    >>> layer_stem(mk("importance"))
    'importance'
    >>> layer_stem(mk("prompt:dense nuclei"))
    'prompt-dense-nuclei-ad6a1e70'
    """
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", layer.name).strip("-.")[:60] or "layer"
    if safe == layer.name:
        return safe
    return f"{safe}-{hashlib.sha256(layer.name.encode('utf-8')).hexdigest()[:8]}"


def _levels(size: tuple[int, int]) -> list[int]:
    """Downsamples of the pyramid levels of a ``size`` image: 1, 2, 4, ... while the level's
    longer side is more than :data:`PYRAMID_MIN_SIDE`."""
    w, h = size
    out = [1]
    while max(-(-w // out[-1]), -(-h // out[-1])) > PYRAMID_MIN_SIDE:
        out.append(out[-1] * 2)
    return out


def _tiles(layer: HeatmapLayer, size: tuple[int, int], ds: int, tile: int,
           kwargs: dict[str, Any]) -> Iterator[bytes]:
    """The deflate-encoded tiles of the level of downsample ``ds``, row by row, drawn with
    :func:`~wsikit.look.heatmap.tile_cells` (a tile of one colour, e.g. inside one patch or
    empty, is encoded once per colour and reused)."""
    import zlib

    w, h = -(-size[0] // ds), -(-size[1] // ds)
    span = tile * ds
    same: dict[bytes, bytes] = {}
    for ty in range(-(-h // tile)):
        for tx in range(-(-w // tile)):
            colours, row, col = tile_cells(layer, (tx * span, ty * span, span, span),
                                           (tile, tile), **kwargs)
            if colours.shape[:2] == (1, 1):
                key = colours.tobytes()
                if key not in same:
                    same[key] = zlib.compress(np.broadcast_to(
                        colours[0, 0], (tile, tile, 4)).tobytes(), 6)
                yield same[key]
            else:
                yield zlib.compress(spread(colours, row, col).tobytes(), 6)


def write_layer_pyramid(layer: HeatmapLayer, path: str | os.PathLike[str], *,
                        level0_size: tuple[int, int], mpp: float | None = None,
                        palette: str = "viridis", threshold: float | None = None,
                        opacity: float = 1.0, tile: int = PYRAMID_TILE) -> Path:
    """Write ``layer`` as a tiled pyramidal RGBA TIFF of the slide's size (see the module
    docstring), atomically.

    Parameters
    ----------
    layer : HeatmapLayer
    path : path-like
    level0_size : (int, int)
        The slide's level-0 ``(width, height)``: the TIFF's level 0.
    mpp : float, optional
        The slide's µm/px, written as the resolution (viewers then show the scale).
    palette, threshold, opacity
        As in :func:`~wsikit.look.heatmap.layer_tile`.
    tile : int
        Tile side (a multiple of 16).
    """
    import tifffile

    w, h = (int(v) for v in level0_size)
    if w <= 0 or h <= 0 or tile % 16:
        raise OverlayError(f"pyramid of {level0_size!r} with tiles of {tile} px: the size must "
                           "be positive and the tile a multiple of 16")
    kwargs: dict[str, Any] = {"palette": palette, "threshold": threshold, "opacity": opacity}
    layer_tile(layer, (0, 0, 1, 1), (1, 1), **kwargs)  # bad options fail before a file exists
    known = mpp is not None and bool(np.isfinite(mpp)) and mpp > 0
    description = (f"wsikit heatmap layer {layer.name}: {layer.label} (source: "
                   f"{layer.source}; values {layer.value_range[0]:.6g} to "
                   f"{layer.value_range[1]:.6g}, palette {palette})"
                   ).encode("ascii", "backslashreplace").decode("ascii")  # TIFF text: ASCII
    with atomic_path(path) as tmp, tifffile.TiffWriter(tmp, bigtiff=True) as tif:
        for i, ds in enumerate(_levels((w, h))):
            lw, lh = -(-w // ds), -(-h // ds)
            res: dict[str, Any] = {}
            if known:  # pixels per cm of this level
                per_cm = 1e4 / (float(mpp) * ds)  # type: ignore[arg-type]
                res = {"resolution": (per_cm, per_cm), "resolutionunit": "CENTIMETER"}
            tif.write(_tiles(layer, (w, h), ds, tile, kwargs), shape=(lh, lw, 4),
                      dtype=np.uint8, tile=(tile, tile), photometric="rgb",
                      extrasamples=["unassalpha"], compression="zlib",
                      subfiletype=0 if i == 0 else 1,
                      description=description if i == 0 else None, metadata=None,
                      software="wsikit", **res)
    return Path(path)


def layer_geojson(layer: HeatmapLayer) -> dict[str, Any]:
    """The QuPath objects of ``layer``: one ``"tile"`` feature per patch with a value, its
    value under ``measurements[layer.name]`` (and the provenance in the collection's
    ``properties``)."""
    s = layer.patch_size_l0
    features = []
    for (x, y), v in zip(layer.coords.tolist(), layer.values.tolist(), strict=True):
        if v != v:  # NaN: no value, no object
            continue
        features.append({
            "type": "Feature",
            "geometry": {"type": "Polygon",
                         "coordinates": [[[x, y], [x + s, y], [x + s, y + s], [x, y + s],
                                          [x, y]]]},
            "properties": {"objectType": "tile", "name": layer.name,
                           "measurements": {layer.name: float(v)}}})
    return {"type": "FeatureCollection", "features": features,
            "properties": {"wsikit_layer": layer.describe()}}


def thumbnail_png(layer: HeatmapLayer, thumbnail: np.ndarray, *, level0_size: tuple[int, int],
                  palette: str = "viridis", threshold: float | None = None,
                  opacity: float = 0.6) -> np.ndarray:
    """The slide's ``thumbnail`` with ``layer`` drawn over it (at ``opacity``) and the legend
    below: ``(h + legend, w, 3)`` uint8 (the legend never hides tissue)."""
    thumb = np.ascontiguousarray(np.asarray(thumbnail)[..., :3])
    th, tw = thumb.shape[:2]
    over = layer_tile(layer, (0, 0, level0_size[0], level0_size[1]), (tw, th),
                      palette=palette, threshold=threshold, opacity=opacity)
    img = composite(thumb, [over])
    leg = legend_image(layer, palette=palette, threshold=threshold,
                       width=max(120, min(tw, 480)))
    canvas = np.full((th + leg.shape[0], max(tw, leg.shape[1]), 3), 255, np.uint8)
    canvas[:th, :tw] = img
    canvas[th:, :leg.shape[1]] = composite(np.full(leg.shape[:2] + (3,), 255, np.uint8), [leg])
    return canvas


def _png(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "PNG", optimize=False)
    return buf.getvalue()


def write_layer_files(layer: HeatmapLayer, folder: str | os.PathLike[str], *,
                      level0_size: tuple[int, int], thumbnail: np.ndarray,
                      mpp: float | None = None, palette: str = "viridis",
                      threshold: float | None = None, opacity: float = 0.6) -> dict[str, Path]:
    """Write the pyramid TIFF, thumbnail PNG, legend SVG and QuPath GeoJSON of ``layer`` into
    ``folder`` (each atomically); returns ``{"tiff", "png", "svg", "geojson"}`` paths.

    The TIFF is drawn fully opaque where a value is shown (a viewer sets the overlay's
    opacity); ``opacity`` applies to the PNG.
    """
    folder = Path(folder)
    stem = layer_stem(layer)
    out = {kind: folder / f"{stem}.{kind}" for kind in ("tiff", "png", "svg", "geojson")}
    write_layer_pyramid(layer, out["tiff"], level0_size=level0_size, mpp=mpp, palette=palette,
                        threshold=threshold)
    write_bytes_atomic(out["png"], _png(thumbnail_png(
        layer, thumbnail, level0_size=level0_size, palette=palette, threshold=threshold,
        opacity=opacity)))
    write_bytes_atomic(out["svg"], legend_svg(layer, palette=palette,
                                              threshold=threshold).encode("utf-8"))
    write_json_atomic(out["geojson"], layer_geojson(layer), indent=None)
    return out
