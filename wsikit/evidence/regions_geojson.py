"""Selected regions as QuPath annotations: ``regions.geojson`` beside ``evidence.json``.

QuPath imports a GeoJSON ``FeatureCollection`` (File › Import objects from file, or drag and
drop onto the viewer) whose features carry QuPath's own properties:

- ``objectType: "annotation"`` (an editable annotation, not a detection);
- ``name`` (shown in the annotation list), here ``"r1 1x"``: region id and scale;
- ``classification``: ``{"name": "wsikit 1x", "color": [r, g, b]}``, one class per scale,
  so the scales can be shown, hidden and coloured separately;
- ``measurements``: a name → number map (QuPath ≥ 0.4 writes and reads this form), here
  ``score``, ``rank``, ``scale`` and, where the region records it, ``usable_tissue`` and (a
  region chosen with a question, ``select --question --tower``) ``importance_rank`` and
  ``question_similarity_rank``.

Coordinates are level-0 pixels with the origin at the top-left of the full-resolution image,
QuPath's convention. Slides with a bounds offset (e.g. MRXS with ``openslide.bounds-x/-y``)
may place the origin differently in QuPath and OpenSlide (qupath/qupath#820): the boxes then
appear shifted by that offset. The reader gives the boxes back exactly.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from .._atomic import write_json_atomic
from ..errors import EvidenceError
from .result import EvidenceRegion, EvidenceResult

__all__ = [
    "REGIONS_GEOJSON",
    "scale_colour",
    "read_regions_geojson",
    "regions_to_geojson",
    "write_regions_geojson",
]

#: File name of the QuPath annotations inside a ``select`` result folder.
REGIONS_GEOJSON = "regions.geojson"

#: How far (a fraction of the slide's longer side) a region read back may reach past the slide's
#: edge: a box drawn by hand in QuPath may overshoot it a little, never by more.
EDGE_MARGIN = 0.02

#: Colour per window scale (side in cells); other scales cycle through ``_EXTRA``.
SCALE_COLOURS: dict[int, str] = {8: "#2563eb", 4: "#16a34a", 2: "#ea580c", 1: "#db2777"}
_EXTRA = ("#7c3aed", "#0891b2", "#ca8a04", "#4b5563")

#: Region keys that may carry the window's usable tissue fraction (first found is used):
#: evidence.json writes ``usable_tissue``.
_TISSUE_KEYS = ("usable_tissue", "tissue_fraction")


def scale_colour(scale: int) -> str:
    """Hex colour of a window scale: in regions.geojson (QuPath), the report, the overview
    image and the viewer alike."""
    return SCALE_COLOURS.get(int(scale), _EXTRA[int(scale) % len(_EXTRA)])


def _scale_rgb(scale: int) -> list[int]:
    """The report's colour of ``scale`` as QuPath's ``[r, g, b]``."""
    hexa = scale_colour(scale).lstrip("#")
    return [int(hexa[i:i + 2], 16) for i in (0, 2, 4)]


def _tissue_fraction(region: Mapping[str, Any]) -> float | None:
    for key in _TISSUE_KEYS:
        value = region.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


Regions = EvidenceResult | Iterable[EvidenceRegion | Mapping[str, Any]]


def _fields(region: EvidenceRegion | Mapping[str, Any]) -> Mapping[str, Any]:
    """What a feature is made of, from a region object (its attributes) or an evidence.json
    region dict (a document read from a file)."""
    if isinstance(region, EvidenceRegion):
        return {**region.extra, "id": region.id, "uid": region.uid, "scale": region.scale,
                "score": region.score, "rank": region.rank, "box": region.box}
    return region


def regions_to_geojson(regions: Regions) -> dict[str, Any]:
    """The QuPath ``FeatureCollection`` of the regions of a result.

    Parameters
    ----------
    regions : EvidenceResult, or iterable of EvidenceRegion or mapping
        The result (its regions), or regions as objects or evidence.json region dicts, each
        with ``id``, ``rank``, ``scale``, ``score`` and ``box`` (``x, y, width, height`` in
        level-0 pixels); an optional ``usable_tissue`` becomes a measurement.

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
    items = regions.regions if isinstance(regions, EvidenceResult) else regions
    for region in map(_fields, items):
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
        steered = region.get("question")
        if isinstance(steered, Mapping):  # chosen with a question: why, as numbers
            for key, name in (("importance_rank", "importance_rank"),
                              ("similarity_rank", "question_similarity_rank")):
                if isinstance(steered.get(key), int | float):
                    measurements[name] = float(steered[key])
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


def write_regions_geojson(path: str | os.PathLike[str], regions: Regions) -> None:
    """Write :func:`regions_to_geojson` of ``regions`` to ``path`` (atomically)."""
    write_json_atomic(path, regions_to_geojson(regions))


def _measurements(props: Mapping[str, Any]) -> dict[str, float]:
    m = props.get("measurements") or {}
    if isinstance(m, list):  # the name/value list QuPath wrote before 0.4
        return {str(e["name"]): e["value"] for e in m if isinstance(e, Mapping) and "name" in e}
    return dict(m)


def read_regions_geojson(path: str | os.PathLike[str], *,
                         level0_size: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """Read QuPath annotations back as region dicts (``id``, ``rank``, ``scale``, ``score``,
    ``box`` and, when present, ``usable_tissue``), in file order.

    A file edited and re-exported by QuPath reads too: the box is the bounding box of each
    polygon, measurements may be a map or QuPath's older name/value list, and features
    without wsikit's measurements (e.g. annotations a person added) are skipped.

    Parameters
    ----------
    path : path-like
        The GeoJSON file.
    level0_size : (width, height), optional
        The slide's level-0 size: every vertex of a region must lie inside it, give or take
        :data:`EDGE_MARGIN` of its longer side. Without it, inside the largest slide wsikit
        opens (:data:`wsikit.slide.slide.MAX_SIDE_PX` a side).

    Raises
    ------
    EvidenceError
        The file cannot be read or is not GeoJSON, or a feature is not an object, has a
        coordinate that is not a finite number or lies beyond the slide, or (a region's) no
        polygon: each names the file and the feature.
    """
    from ..slide.slide import MAX_SIDE_PX
    from ..tissue.geojson import read_features, read_json

    fix = "fix the feature in QuPath, or export the regions again"
    doc = read_json(path, error=EvidenceError, fix=fix)
    if not isinstance(doc.get("features") if isinstance(doc, dict) else doc, list):
        raise EvidenceError(f"{path}: not a GeoJSON FeatureCollection (no 'features' list)")
    regions = []
    for feature in read_features(doc, where=str(path), error=EvidenceError, fix=fix):
        try:
            m = _measurements(feature.properties)
            rank, scale, score = int(m["rank"]), int(m["scale"]), float(m["score"])
            tissue = float(m["usable_tissue"]) if "usable_tissue" in m else None
        except KeyError:
            continue  # not one of wsikit's regions (an annotation a person added)
        except (TypeError, ValueError, AttributeError) as exc:
            raise EvidenceError(f"{path}: {feature.label} has a measurement that is not a "
                                f"number ({exc}); {fix}") from exc
        if not feature.polygons or not len(feature.polygons[0]) or \
                not len(feature.polygons[0][0]):
            raise EvidenceError(f"{path}: {feature.label} has no polygon; {fix}")
        ring = feature.polygons[0][0]
        (x0, y0), (x1, y1) = ring.min(axis=0), ring.max(axis=0)
        width, height = level0_size if level0_size is not None else (MAX_SIDE_PX, MAX_SIDE_PX)
        margin = EDGE_MARGIN * max(width, height)
        if x0 < -margin or y0 < -margin or x1 > width + margin or y1 > height + margin:
            what = "the slide" if level0_size is not None else "any slide"
            raise EvidenceError(
                f"{path}: {feature.label} spans x {x0:g} to {x1:g}, y {y0:g} to {y1:g} "
                f"(level-0 px), beyond {what} ({width} x {height} px); {fix} (the "
                "coordinates are level-0 pixels of this slide)")
        region: dict[str, Any] = {
            "id": str(feature.properties.get("name", "")).split(" ")[0],
            "rank": rank, "scale": scale, "score": score,
            "box": {"x": round(x0), "y": round(y0), "width": round(x1 - x0),
                    "height": round(y1 - y0)}}
        if tissue is not None:
            region["usable_tissue"] = tissue
        regions.append(region)
    return regions
