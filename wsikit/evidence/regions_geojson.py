"""Selected regions as QuPath annotations: ``regions.geojson`` beside ``evidence.json``.

QuPath imports a GeoJSON ``FeatureCollection`` (File › Import objects from file, or drag and
drop onto the viewer) whose features carry QuPath's own properties:

- ``objectType: "annotation"`` (an editable annotation, not a detection);
- ``name`` (shown in the annotation list), here ``"r1 1x"``: region id and scale;
- ``classification``: ``{"name": "wsikit 1x", "color": [r, g, b]}``, one class per scale,
  so the scales can be shown, hidden and coloured separately;
- ``measurements``: a name → number map (QuPath ≥ 0.4 writes and reads this form), here
  ``score``, ``rank``, ``scale`` and, where the region records it, ``usable_tissue``.

Coordinates are level-0 pixels with the origin at the top-left of the full-resolution image,
QuPath's convention. Slides with a bounds offset (e.g. MRXS with ``openslide.bounds-x/-y``)
may place the origin differently in QuPath and OpenSlide (qupath/qupath#820): the boxes then
appear shifted by that offset. The reader gives the boxes back exactly.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from .._atomic import write_json_atomic
from ..errors import EvidenceError

__all__ = [
    "REGIONS_GEOJSON",
    "read_regions_geojson",
    "regions_to_geojson",
    "write_regions_geojson",
]

#: File name of the QuPath annotations inside a ``select`` result folder.
REGIONS_GEOJSON = "regions.geojson"

#: Region keys that may carry the window's usable tissue fraction (first found is used):
#: evidence.json writes ``usable_tissue``.
_TISSUE_KEYS = ("usable_tissue", "tissue_fraction")


def _scale_rgb(scale: int) -> list[int]:
    """The report's colour of ``scale`` as QuPath's ``[r, g, b]``."""
    from ..overlay import scale_colour

    hexa = scale_colour(scale).lstrip("#")
    return [int(hexa[i:i + 2], 16) for i in (0, 2, 4)]


def _tissue_fraction(region: Mapping[str, Any]) -> float | None:
    for key in _TISSUE_KEYS:
        value = region.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def regions_to_geojson(regions: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The QuPath ``FeatureCollection`` of ``regions`` (evidence.json region dicts).

    Parameters
    ----------
    regions : iterable of mapping
        Each with ``id``, ``rank``, ``scale``, ``score`` and ``box`` (``x, y, width,
        height`` in level-0 pixels); an optional ``usable_tissue`` becomes a measurement.

    Returns
    -------
    dict
        A GeoJSON FeatureCollection, one closed rectangular Polygon per region.

    Raises
    ------
    EvidenceError
        A region lacks one of the keys above.
    """
    features = []
    for region in regions:
        try:
            rid, scale = str(region["id"]), int(region["scale"])
            box = region["box"]
            x, y = int(box["x"]), int(box["y"])
            w, h = int(box["width"]), int(box["height"])
            measurements: dict[str, float] = {"score": float(region["score"]),
                                              "rank": int(region["rank"]), "scale": scale}
        except (KeyError, TypeError, ValueError) as exc:
            raise EvidenceError(f"region {dict(region)!r} lacks id, rank, scale, score or "
                                f"box{{x, y, width, height}} ({exc}): cannot write it as a "
                                "QuPath annotation") from exc
        tissue = _tissue_fraction(region)
        if tissue is not None:
            measurements["usable_tissue"] = tissue
        ring = [[x, y], [x + w, y], [x + w, y + h], [x, y + h], [x, y]]
        features.append({
            "type": "Feature",
            "id": str(region.get("uid") or rid),
            "geometry": {"type": "Polygon", "coordinates": [ring]},
            "properties": {
                "objectType": "annotation",
                "name": f"{rid} {scale}x",
                "classification": {"name": f"wsikit {scale}x",
                                   "color": _scale_rgb(scale)},
                "isLocked": False,
                "measurements": measurements,
            },
        })
    return {"type": "FeatureCollection", "features": features}


def write_regions_geojson(path: str | os.PathLike[str],
                          regions: Iterable[Mapping[str, Any]]) -> None:
    """Write :func:`regions_to_geojson` of ``regions`` to ``path`` (atomically)."""
    write_json_atomic(path, regions_to_geojson(regions))


def _measurements(props: Mapping[str, Any]) -> dict[str, float]:
    m = props.get("measurements") or {}
    if isinstance(m, list):  # the name/value list QuPath wrote before 0.4
        return {str(e["name"]): e["value"] for e in m if isinstance(e, Mapping) and "name" in e}
    return dict(m)


def read_regions_geojson(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read QuPath annotations back as region dicts (``id``, ``rank``, ``scale``, ``score``,
    ``box`` and, when present, ``usable_tissue``), in file order.

    A file edited and re-exported by QuPath reads too: the box is the bounding box of each
    polygon, measurements may be a map or QuPath's older name/value list, and features
    without wsikit's measurements (e.g. annotations a person added) are skipped.

    Raises
    ------
    EvidenceError
        The file cannot be read or is not a GeoJSON FeatureCollection.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as exc:
        raise EvidenceError(f"{path}: cannot read the regions GeoJSON ({exc})") from exc
    features = doc.get("features") if isinstance(doc, dict) else doc
    if not isinstance(features, list):
        raise EvidenceError(f"{path}: not a GeoJSON FeatureCollection (no 'features' list)")
    regions = []
    for feature in features:
        props = feature.get("properties") or {}
        m = _measurements(props)
        if not {"score", "rank", "scale"} <= set(m):
            continue
        try:
            ring = feature["geometry"]["coordinates"][0]
            xs, ys = [p[0] for p in ring], [p[1] for p in ring]
        except (KeyError, IndexError, TypeError) as exc:
            raise EvidenceError(f"{path}: feature {props.get('name')!r} has no polygon "
                                f"({exc})") from exc
        x0, y0 = min(xs), min(ys)
        region: dict[str, Any] = {
            "id": str(props.get("name", "")).split(" ")[0],
            "rank": int(m["rank"]), "scale": int(m["scale"]), "score": float(m["score"]),
            "box": {"x": round(x0), "y": round(y0), "width": round(max(xs) - x0),
                    "height": round(max(ys) - y0)}}
        if "usable_tissue" in m:
            region["usable_tissue"] = float(m["usable_tissue"])
        regions.append(region)
    return regions
