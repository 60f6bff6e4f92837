"""Edits made in the viewer, saved as QuPath GeoJSON under the slide's one lock.

Two files of a result can be edited in ``wsikit view``: the regions
(``select/<slide>/regions.geojson``, written by :func:`wsikit.evidence.regions_geojson.
write_regions_geojson`) and the tissue outline (``contours_geojson/<slide>.geojson``, which
the next ``select``/``batch`` rasterises as it does an outline edited in QuPath, see
:func:`wsikit.run.slide_ops.geojson_edited`). A save:

1. builds the file from what the page sends (plain boxes and polygon rings), validated as
   the project's readers validate a file QuPath wrote, coordinates inside the slide (a small
   margin allowed);
2. takes the slide's one lock (:func:`wsikit.outputs.slide_outputs.hold_slide_outputs`)
   without waiting: a batch or select writing this slide makes the save refuse, naming the
   job, and nothing is written;
3. compares the file with the version the page loaded (:func:`file_version`: size,
   modification time and SHA-256): a file changed on disk since (QuPath, ``wsikit segment``,
   another viewer) is reported and left as it is;
4. writes the file atomically (a temporary file renamed over it) and answers its new version.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import EvidenceError, SlideBusyError, WsikitError
from ..evidence.regions_geojson import EDGE_MARGIN

__all__: list[str] = []

#: Most vertices of a saved tissue outline, and most regions saved.
MAX_VERTICES = 2_000_000
MAX_REGIONS = 10_000


class EditConflict(WsikitError):
    """A save refused: the file changed on disk since it was loaded, or the slide's outputs
    are being written by a job (the message says which and what to do)."""


def file_version(path: str | os.PathLike[str]) -> str:
    """``"absent"``, or ``"<size>-<mtime_ns>-<sha256[:16]>"`` of the file: what a page sends
    back with a save, so a file changed since it was loaded is never overwritten."""
    p = Path(path)
    try:
        st = p.stat()
        data = p.read_bytes()
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        raise WsikitError(f"{p}: cannot read it ({exc.strerror or exc})") from exc
    return f"{st.st_size}-{st.st_mtime_ns}-{hashlib.sha256(data).hexdigest()[:16]}"


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(float(value)):
        raise WsikitError(f"{what} is {value!r}, not a finite number")
    return float(value)


def _inside(value: float, limit: int, margin: float, what: str) -> float:
    if not -margin <= value <= limit + margin:
        raise WsikitError(f"{what} = {value:g} lies outside the slide (0 to {limit} level-0 px)")
    return value


def regions_document(regions: Any, *, level0_size: tuple[int, int]) -> dict[str, Any]:
    """The QuPath ``FeatureCollection`` of regions the page sends.

    Parameters
    ----------
    regions : list of dict
        Each ``{"id", "rank", "scale", "score", "box": {"x", "y", "width", "height"}}`` (level-0
        px), ``usable_tissue`` optional; a region drawn in the page has score 0 and scale 1.
    level0_size : (width, height)
        The slide's size: every box must lie inside it (:data:`EDGE_MARGIN` allowed).

    Raises
    ------
    WsikitError
        Not a list of such regions, too many, an id repeated, or a box that is not positive
        and inside the slide (names the region).
    """
    from ..evidence.regions_geojson import regions_to_geojson

    if not isinstance(regions, list):
        raise WsikitError("the regions to save are not a list")
    if len(regions) > MAX_REGIONS:
        raise WsikitError(f"{len(regions)} regions: at most {MAX_REGIONS} are saved")
    W, H = level0_size
    margin = EDGE_MARGIN * max(W, H)
    clean, seen = [], set()
    for n, region in enumerate(regions):
        if not isinstance(region, Mapping) or not isinstance(region.get("box"), Mapping):
            raise WsikitError(f"region {n + 1} is not an object with a box")
        rid = str(region.get("id", ""))[:64]
        if not rid or not all(ch.isalnum() or ch in "_-." for ch in rid) or rid in seen:
            raise WsikitError(f"region {n + 1}: id {rid!r} is empty, repeated or not a plain "
                              "name (letters, digits, _ - .)")
        seen.add(rid)
        box = region["box"]
        x = _inside(_number(box.get("x"), f"region {rid}: x"), W, margin, f"region {rid}: x")
        y = _inside(_number(box.get("y"), f"region {rid}: y"), H, margin, f"region {rid}: y")
        w = _number(box.get("width"), f"region {rid}: width")
        h = _number(box.get("height"), f"region {rid}: height")
        if w < 1 or h < 1:
            raise WsikitError(f"region {rid}: its box is {w:g} x {h:g} px; a region needs at "
                              "least 1 x 1")
        _inside(x + w, W, margin, f"region {rid}: x + width")
        _inside(y + h, H, margin, f"region {rid}: y + height")
        item: dict[str, Any] = {
            "id": rid, "box": {"x": round(x), "y": round(y), "width": round(w),
                               "height": round(h)},
            "rank": int(_number(region.get("rank", n + 1), f"region {rid}: rank")),
            "scale": int(_number(region.get("scale", 1), f"region {rid}: scale")),
            "score": _number(region.get("score", 0.0), f"region {rid}: score")}
        if region.get("usable_tissue") is not None:
            item["usable_tissue"] = _number(region["usable_tissue"],
                                            f"region {rid}: usable_tissue")
        if item["scale"] < 1:
            raise WsikitError(f"region {rid}: scale {item['scale']} is not a positive integer")
        clean.append(item)
    try:
        return regions_to_geojson(clean)
    except EvidenceError as exc:
        raise WsikitError(str(exc)) from exc


def tissue_document(features: Any, *, level0_size: tuple[int, int],
                    original: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The tissue ``FeatureCollection`` (QuPath annotations, level-0 px) the page sends.

    Parameters
    ----------
    features : list of dict
        Each ``{"rings": [[[x, y], ...], ...], "from": i}``: the outer ring then its holes,
        and the index of the feature of the loaded file it was (its properties are kept), or
        ``None`` for a new outline (classified ``Tissue``).
    level0_size : (width, height)
        The slide's size: every vertex must lie inside it (:data:`EDGE_MARGIN` allowed).
    original : sequence of dict
        The properties of the loaded file's features.

    Raises
    ------
    WsikitError
        Not a list of such features, a ring of fewer than 3 points, a vertex outside the
        slide or not a number, too many vertices (names the feature).
    """
    if not isinstance(features, list):
        raise WsikitError("the tissue outline to save is not a list of features")
    W, H = level0_size
    margin = EDGE_MARGIN * max(W, H)
    out, vertices = [], 0
    for n, feat in enumerate(features):
        if not isinstance(feat, Mapping) or not isinstance(feat.get("rings"), list) or \
                not feat["rings"]:
            raise WsikitError(f"tissue outline {n + 1} has no rings")
        rings = []
        for k, ring in enumerate(feat["rings"]):
            what = f"tissue outline {n + 1}, ring {k + 1}"
            if not isinstance(ring, list) or len(ring) < 3:
                raise WsikitError(f"{what} has fewer than 3 points")
            vertices += len(ring)
            if vertices > MAX_VERTICES:
                raise WsikitError(f"the outline has over {MAX_VERTICES} vertices")
            pts = []
            for pt in ring:
                if not isinstance(pt, list | tuple) or len(pt) != 2:
                    raise WsikitError(f"{what}: a point is not [x, y]")
                x = _inside(_number(pt[0], f"{what}: x"), W, margin, f"{what}: x")
                y = _inside(_number(pt[1], f"{what}: y"), H, margin, f"{what}: y")
                pts.append([round(x, 2), round(y, 2)])
            if pts[0] != pts[-1]:
                pts.append(list(pts[0]))  # GeoJSON rings are closed
            rings.append(pts)
        src = feat.get("from")
        props: dict[str, Any]
        if isinstance(src, int) and not isinstance(src, bool) and 0 <= src < len(original):
            props = dict(original[src])
        else:
            props = {"objectType": "annotation", "name": f"tissue {n}",
                     "classification": {"name": "Tissue", "color": [0, 160, 0]}}
        props["holes"] = len(rings) - 1
        out.append({"type": "Feature", "geometry": {"type": "Polygon", "coordinates": rings},
                    "properties": props})
    return {"type": "FeatureCollection", "features": out}


def save_document(path: str | os.PathLike[str], document: Mapping[str, Any], *, version: str,
                  out: str | os.PathLike[str], name: str, check: Any = None) -> str:
    """Write ``document`` to ``path`` under slide ``name``'s lock in ``out``, if the file is
    still at ``version``; returns its new version.

    ``check(path)``, when given, reads the written file back with the project's reader
    before it replaces the old one (a file it refuses is never put in place).

    Raises
    ------
    EditConflict
        The slide's outputs are being written by a job (names it), or the file changed on
        disk since the page loaded it (nothing is written in either case).
    """
    from .._atomic import atomic_path, json_bytes
    from ..outputs.slide_outputs import hold_slide_outputs

    p = Path(path)
    try:
        with hold_slide_outputs(out, name, wait=False, command=f"wsikit view: save {p.name}",
                                hint=", then save again (your edits stay in the page)"):
            if file_version(p) != version:
                raise EditConflict(
                    f"{p} has changed on disk since this page loaded it (by QuPath, wsikit or "
                    "another viewer); nothing was written. Download your edits, reload the "
                    "page to see the file as it is now, and make them again there")
            with atomic_path(p) as tmp:
                tmp.write_bytes(json_bytes(document, indent=None))
                if check is not None:
                    check(tmp)
            return file_version(p)
    except SlideBusyError as exc:
        raise EditConflict(f"not saved: {exc}") from exc
