"""The files of the tissue step and ``wsikit info``: what the run's steps read and write.

The ``segment`` step (:mod:`wsikit.run.builtin_steps`) computes the mask with
:func:`segment_slide` (compute only) and writes, with :func:`write_tissue`::

    out/contours_geojson/<slide>.geojson   tissue polygons (level-0 px, holes as interiors)
    out/masks/<slide>.png                  tissue mask (255 = tissue), with its note (.json)
    out/artefacts/<slide>.geojson          ink, folds, debris, scanner fill (QuPath annotations)
    out/artefacts/<slide>.png              the same as a label PNG on the mask's pixel grid
    out/thumbnails/<slide>_tissue.png      thumbnail with tissue outlines (green) and holes (blue)

A tissue GeoJSON edited since wsikit wrote it (e.g. in QuPath) or placed by hand is the slide's
tissue (:func:`geojson_edited`, :func:`rasterise_edit`); it is replaced only by a forced
segmentation, and then first copied to ``<slide>.geojson.bak`` (:func:`backup_geojson`).
Whether an output may be reused is never decided here: the run's step records decide
(:func:`wsikit.run.steps.reusable`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .._atomic import json_bytes, write_bytes_atomic, write_json_atomic
from .._hints import keyword, option
from ..errors import CacheError, SlideError
from ..outputs.cache_record import sha256_file as _sha256
from ..outputs.layout import OutputLayout
from ..patches.grid import TileGrid
from ..slide import Slide, open_slide
from ..slide.fingerprint import check_source, recorded_slide, write_source, written_sha256
from ..tissue.mask import TissueMask, mask_shape, segment_tissue

__all__ = ["info", "segment_slide", "check_tissue_owner", "geojson_edited"]

_PathLike = str | os.PathLike[str]


def backup_geojson(path: _PathLike) -> Path:
    """Copy an edited tissue GeoJSON to ``<name>.geojson.bak`` (a timestamped
    ``<name>.geojson.<UTC time>.bak`` when that exists) before it is replaced; returns the
    copy (never overwritten: every edit replaced keeps its own copy)."""
    path = Path(path)
    bak = path.with_name(path.name + ".bak")
    if bak.exists():
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        bak = path.with_name(f"{path.name}.{stamp}.bak")
        n = 1
        while bak.exists():
            bak = path.with_name(f"{path.name}.{stamp}-{n}.bak")
            n += 1
    try:
        shutil.copy2(path, bak)
    except OSError as exc:
        raise CacheError(f"{path} was edited and would be replaced, but cannot be kept as "
                         f"{bak} ({exc.strerror or exc}); free space or fix the folder's "
                         "permissions, or move the file away yourself") from exc
    return bak




def _write_mask(tm: TissueMask, out: Path, slide: Slide, name: str, *,
                geojson_sha256: str | None = None) -> None:
    """The mask PNG and a note of the GeoJSON it belongs to (its SHA-256: ``geojson_sha256``
    for a GeoJSON about to be written, else the file's)."""
    layout = OutputLayout(out)
    tm.write_png(layout.mask(name))
    gj = layout.tissue_geojson(name)
    if geojson_sha256 is None and gj.exists():
        geojson_sha256 = _sha256(gj)
    write_json_atomic(layout.mask_note(name), {
        "geojson_sha256": geojson_sha256,
        "mask_sha256": _sha256(layout.mask(name)),  # a PNG edited in place is not reused
        "level0_size": list(slide.dimensions)})


def check_tissue_owner(path: _PathLike, out: _PathLike, name: str, *,
                       fingerprint: str) -> None:
    """Refuse to reuse outputs under ``out`` that another slide of the same name made.

    Cached outputs belong to a slide by content (its ``fingerprint``, recorded beside the
    tissue GeoJSON), not by name.

    Raises
    ------
    CacheError
        The tissue GeoJSON of ``name`` was made from another slide's content.
    """
    gj = OutputLayout(out).tissue_geojson(name)
    if check_source(gj, fingerprint) == "other":
        raise CacheError(
            f"{out} already holds outputs for another slide named {name!r} (made "
            f"from {recorded_slide(gj)}, other content than {path}); use another folder "
            f"({keyword('out')}), rename the slide, or pass {option('force')} to replace them")


def geojson_edited(out: _PathLike, name: str, *, fingerprint: str) -> bool:
    """Whether the tissue GeoJSON of ``name`` under ``out`` is the user's, not a segmentation's.

    True when it was placed by hand (no record of the slide it was made from, or adopted as
    such) or changed since wsikit's segmentation wrote it (e.g. edited in QuPath): the segment
    step then rasterises it (:func:`rasterise_edit`), and only a forced segmentation replaces
    it. False when there is none, when it is wsikit's own unchanged output, or when it
    belongs to another slide (``fingerprint``: this slide's content fingerprint).
    """
    layout = OutputLayout(out)
    gj = layout.tissue_geojson(name)
    if not gj.is_file():
        return False
    state = check_source(gj, fingerprint)
    if state != "same":
        return state == "unknown"
    known, written = written_sha256(gj)
    if known:  # adopted from the user (None), or changed since wsikit wrote it
        return written is None or written != _sha256(gj)
    try:  # a record from before written_sha256: the mask note tells
        note = json.loads(layout.mask_note(name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(note, dict) and note.get("geojson_sha256") not in (None, _sha256(gj))


def rasterise_edit(slide: Slide, out: _PathLike, name: str, *, tissue_mpp: float,
                   fingerprint: str) -> TissueMask:
    """The mask of the user's tissue GeoJSON (:func:`geojson_edited`) at ``tissue_mpp``,
    written as the slide's mask PNG (and note); a GeoJSON placed by hand is adopted as this
    slide's first (its source recorded)."""
    gj = OutputLayout(out).tissue_geojson(name)
    if check_source(gj, fingerprint) == "unknown":  # placed by hand or drawn in QuPath
        write_source(gj, slide.path, fingerprint, written_sha256=None)
    mask = TissueMask.from_geojson(gj, level0_size=slide.dimensions, slide_mpp=slide.mpp,
                                   mpp=tissue_mpp, slide_name=slide.name)
    _write_mask(mask, Path(out), slide, name)
    return mask


def info(path: _PathLike, *, mpp: float | None = None, backend: str | None = None
         ) -> dict[str, Any]:
    """Describe a slide: size, levels, vendor, resolution and its source, associated images.

    A slide without resolution metadata is still described (``mpp`` is ``None`` and
    ``mpp_source`` is ``"unknown"``) unless ``mpp`` is given.
    """
    with open_slide(path, backend=backend, mpp=mpp, require_mpp=False) as slide:
        known = bool(np.isfinite(slide.mpp))
        return {
            "path": str(slide.path),
            "name": slide.name,
            "backend": slide.backend,
            "vendor": slide.vendor,
            "dimensions": list(slide.dimensions),
            "level_count": slide.level_count,
            "level_dimensions": [list(d) for d in slide.level_dimensions],
            "level_downsamples": [round(d, 4) for d in slide.level_downsamples],
            "mpp": round(slide.mpp, 6) if known else None,
            "mpp_source": slide.mpp_source,
            "objective_power": slide.objective_power,
            "size_mm": ([round(v * slide.mpp / 1000, 3) for v in slide.dimensions]
                        if known else None),
            "associated_images": sorted(slide.associated_images),
            "properties": len(slide.properties),
        }


def png_bytes(img: Any) -> bytes:
    """``img`` (a PIL image) as PNG bytes."""
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def draw_tissue(thumb: np.ndarray, mask: TissueMask) -> np.ndarray:
    """``thumb`` with tissue outlines (green), holes (blue) and artefacts (each kind in the
    colour of its GeoJSON classification) drawn; (h, w, 3) uint8."""
    from PIL import Image, ImageDraw

    from ..tissue.constants import ARTEFACT_CLASSES

    img = Image.fromarray(thumb)
    draw = ImageDraw.Draw(img)
    W, H = mask.level0_size
    sx, sy = img.width / W, img.height / H
    width = max(1, round(max(img.size) / 400))
    for feat in mask.artefacts_geojson()["features"]:
        colour = tuple(ARTEFACT_CLASSES[feat["properties"]["artefact"]][1])
        for ring in feat["geometry"]["coordinates"]:
            draw.line([(float(x) * sx, float(y) * sy) for x, y in ring], fill=colour,
                      width=width)
    for rings in mask.polygons():
        for j, ring in enumerate(rings):
            pts = [(float(x) * sx, float(y) * sy) for x, y in ring]
            draw.line(pts, fill=(0, 170, 0) if j == 0 else (0, 90, 255), width=width)
    return np.asarray(img)


def draw_grid(thumb: np.ndarray, grid: TileGrid) -> np.ndarray:
    """``thumb`` with every patch of ``grid`` outlined; (h, w, 3) uint8.

    A patch smaller than a thumbnail pixel (a huge slide's small thumbnail) is drawn as the
    one pixel it covers.
    """
    from PIL import Image, ImageDraw

    img = Image.fromarray(thumb)
    draw = ImageDraw.Draw(img)
    W, H = grid.level0_size
    sx, sy = img.width / W, img.height / H
    p = grid.patch_size_l0
    for x, y in grid.coords.tolist():
        x0, y0 = x * sx, y * sy
        draw.rectangle([x0, y0, max(x0, (x + p) * sx - 1), max(y0, (y + p) * sy - 1)],
                       outline=(20, 60, 230))
    return np.asarray(img)


def segment_slide(slide: Slide, *, tissue_mpp: float, min_tissue_um2: float,
                  min_hole_um2: float) -> TissueMask:
    """The tissue mask of ``slide`` (compute only): :func:`wsikit.tissue.mask.segment_tissue`
    with a refusal of a size no real slide has, and a warning for a greyscale slide."""
    _check_segment_size(slide, tissue_mpp)
    try:
        tm = segment_tissue(slide, mpp=tissue_mpp, min_tissue_um2=min_tissue_um2,
                            min_hole_um2=min_hole_um2)
    except MemoryError as exc:
        raise SlideError(_segment_size_message(slide, tissue_mpp, "not enough memory")) from exc
    hint = greyscale_hint(slide) if not np.any(tm.mask) else ""
    if hint:
        warnings.warn(f"{slide.path}: no tissue found; {hint}", UserWarning, stacklevel=3)
    return tm


def write_tissue(slide: Slide, tm: TissueMask, out: _PathLike, name: str, *,
                 fingerprint: str, thumb_size: int | None = 1024) -> None:
    """Write a segmentation's files (see the module notes); the user's edited GeoJSON it
    replaces is first copied aside (:func:`backup_geojson`, named in a warning).

    One grid path: the mask PNG written here is what every later step reads back pixel for
    pixel, so the first run's grid equals every rerun's and resume's. The GeoJSON is written
    last: a run killed before it leaves no GeoJSON, so the rerun segments again instead of
    rasterising polygons (another mask, without its artefacts).
    """
    from PIL import Image

    out = Path(out)
    layout = OutputLayout(out)
    gj = layout.tissue_geojson(name)
    if geojson_edited(out, name, fingerprint=fingerprint):  # never lost to a segmentation
        kept = backup_geojson(gj)
        warnings.warn(f"{gj}: the edited tissue GeoJSON is replaced by a new segmentation; "
                      f"the edit is kept as {kept}", UserWarning, stacklevel=3)
    arts = layout.artefacts(name)
    tm.write_artefacts(arts["png"], arts["geojson"])
    gj_bytes = json_bytes(tm.to_geojson(), indent=None)
    digest = hashlib.sha256(gj_bytes).hexdigest()
    _write_mask(tm, out, slide, name, geojson_sha256=digest)
    write_bytes_atomic(gj, gj_bytes)
    write_source(gj, slide.path, fingerprint, written_sha256=digest)
    if thumb_size is not None:
        thumb = slide.thumbnail(max_size=thumb_size)
        write_bytes_atomic(layout.tissue_thumbnail(name),
                           png_bytes(Image.fromarray(draw_tissue(thumb, tm))))


#: Largest tissue mask segmented (pixels): beyond it the header's size is taken as damage.
MAX_MASK_PX = 1 << 31


def _segment_size_message(slide: Slide, tissue_mpp: float, why: str) -> str:
    W, H = slide.dimensions
    w, h = mask_shape((W, H), slide.mpp, mpp=tissue_mpp)
    level = slide.best_level(W / w)
    lw, lh = slide.level_dimensions[level]
    return (f"{slide.path}: cannot segment: its header claims {W:,} x {H:,} px "
            f"({W * H / 2**30:.1f} Gpx) at {slide.mpp:g} µm/px, so the tissue mask at "
            f"{tissue_mpp:g} µm/px is {w:,} x {h:,} px, read from level {level} ({lw:,} x "
            f"{lh:,} px, {lw * lh * 3 / 2**30:.1f} GiB as RGB): {why}. Check that the file is "
            f"not damaged and its mpp is right ({keyword('mpp')}); for a real slide this size "
            f"pass a coarser {keyword('tissue_mpp')} or convert it to a pyramidal TIFF "
            "(e.g. vips tiffsave --tile --pyramid)")


def _check_segment_size(slide: Slide, tissue_mpp: float) -> None:
    """Refuse a mask too large to be a real slide's, naming the size and the fix."""
    w, h = mask_shape(slide.dimensions, slide.mpp, mpp=tissue_mpp)
    if w * h > MAX_MASK_PX:
        raise SlideError(_segment_size_message(slide, tissue_mpp, f"more than {MAX_MASK_PX:,} "
                                               "mask pixels"))


def check_grid_matches(grid: TileGrid, slide: Slide, source: _PathLike) -> None:
    """Refuse a coordinate file made for another slide (its size or patches do not fit).

    Raises
    ------
    GridError
        The file records another level-0 size, or has patches outside this slide.
    """
    from ..errors import GridError

    W, H = slide.dimensions
    size = tuple(int(v) for v in grid.level0_size)
    if all(size) and size != (W, H):
        raise GridError(f"{source} was made for a {size[0]} x {size[1]} px slide, but "
                        f"{slide.path} is {W} x {H} px; it belongs to another slide: give "
                        f"that slide's coordinates, or omit {keyword('coords')} to make a grid")
    c = np.asarray(grid.coords)
    if c.size and (c.min() < 0 or c[:, 0].max() >= W or c[:, 1].max() >= H):
        raise GridError(f"{source}: patches lie outside {slide.path} ({W} x {H} px); the file "
                        "belongs to another slide")


def greyscale_hint(slide: Slide) -> str:
    """A sentence for "no tissue" messages when the slide has no colour at all ("" if it has).

    Tissue detection looks for stained (coloured) pixels; a greyscale scan (fluorescence
    channel, a converted image) has none.
    """
    thumb = slide.thumbnail(max_size=256).astype(np.int16)
    spread = int(np.abs(thumb - thumb.mean(axis=2, keepdims=True)).max()) if thumb.size else 0
    if spread > 2 or (thumb.size and float(thumb.std()) < 3.0):
        return ""  # colour, or a blank (uniform) slide: the ordinary "no tissue" advice fits
    return ("the slide is greyscale (no colour): tissue detection needs a brightfield colour "
            "scan (H&E/IHC); for a greyscale image draw the tissue in QuPath and save it as "
            "the GeoJSON in contours_geojson/")
