"""File-level operations behind ``wsikit info``, ``wsikit segment``, ``wsikit patch`` and
``wsikit features`` (:func:`extract_slide_features`).

Each takes a slide path and writes TRIDENT-style outputs under ``out``::

    out/contours_geojson/<slide>.geojson   tissue polygons (level-0 px, holes as interiors)
    out/masks/<slide>.png                  tissue mask (255 = tissue)
    out/artefacts/<slide>.geojson          ink, folds, debris, scanner fill (QuPath annotations)
    out/artefacts/<slide>.png              the same as a label PNG on the mask's pixel grid
    out/thumbnails/<slide>_tissue.png      thumbnail with tissue outlines (green) and holes (blue)
    out/patches/<slide>_patches.h5         patch coordinates (TRIDENT-compatible)
    out/thumbnails/<slide>_grid.png        thumbnail with the patch grid drawn
"""

from __future__ import annotations

import io
import logging
import math
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._atomic import write_bytes_atomic
from .._hints import keyword, option
from .._progress import progress as progress_bar
from ..errors import CacheError, SlideError, WsikitError
from ..outputs.cache_record import sha256_file as _sha256
from ..outputs.layout import OutputLayout
from ..outputs.slide_outputs import check_output_name, hold_slide_outputs
from ..patches.grid import TileGrid, make_grid
from ..slide import Slide, open_slide
from ..slide.fingerprint import (
    check_source,
    recorded_slide,
    slide_fingerprint,
    write_source,
    written_sha256,
)
from ..tissue.constants import DEFAULT_MASK_MPP, MIN_HOLE_UM2, MIN_TISSUE_UM2
from ..tissue.mask import TissueMask, mask_shape, segment_tissue
from .options import GridOptions, check_bounds

if TYPE_CHECKING:
    from ..features.extract import Embeddings

__all__ = ["info", "segment", "patch", "check_grid_matches", "greyscale_hint", "draw_tissue",
           "draw_grid", "check_tissue_owner", "geojson_edited", "load_tissue", "backup_geojson",
           "record_grid", "grid_not_current", "extract_slide_features"]

log = logging.getLogger(__name__)

_PathLike = str | os.PathLike[str]


def _wait_hint() -> str:
    """The end of a refusal by a busy slide lock: how to wait instead."""
    return f", or pass {option('wait')} to wait for it"


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
    from .._atomic import write_json_atomic

    layout = OutputLayout(out)
    tm.write_png(layout.mask(name))
    gj = layout.tissue_geojson(name)
    if geojson_sha256 is None and gj.exists():
        geojson_sha256 = _sha256(gj)
    write_json_atomic(layout.mask_note(name), {
        "geojson_sha256": geojson_sha256,
        "mask_sha256": _sha256(layout.mask(name)),  # a PNG edited in place is not reused
        "level0_size": list(slide.dimensions)})


def _fingerprint_of(slide: Slide, fingerprint: str | None) -> str:
    """``fingerprint`` when the caller computed it already (once per run, in the run's
    context), else the slide's content fingerprint computed now."""
    return fingerprint if fingerprint is not None else slide_fingerprint(slide.path)


def check_tissue_owner(slide: Slide, out: _PathLike, name: str | None = None, *,
                       fingerprint: str | None = None) -> None:
    """Refuse to reuse outputs under ``out`` that another slide of the same name made.

    Cached outputs belong to a slide by content (its fingerprint, recorded beside the tissue
    GeoJSON), not by name. ``fingerprint``: the slide's content fingerprint when the caller
    has it already (a run computes it once); computed here otherwise.

    Raises
    ------
    CacheError
        The tissue GeoJSON of ``name`` was made from another slide's content.
    """
    name = slide.name if name is None else name
    gj = OutputLayout(out).tissue_geojson(name)
    if check_source(gj, _fingerprint_of(slide, fingerprint)) == "other":
        raise CacheError(
            f"{out} already holds outputs for another slide named {name!r} (made "
            f"from {recorded_slide(gj)}, other content than {slide.path}); use another folder "
            f"({keyword('out')}), rename the slide, or pass {option('resegment')} (select: "
            f"{option('force')}) to replace them")


def geojson_edited(slide: Slide, out: _PathLike, name: str | None = None, *,
                   fingerprint: str | None = None) -> bool:
    """Whether the tissue GeoJSON of ``name`` under ``out`` is the user's, not a segmentation's.

    True when it was placed by hand (no record of the slide it was made from, or adopted as
    such) or changed since wsikit's segmentation wrote it (e.g. edited in QuPath, whichever
    command rasterised it since): :func:`load_tissue` then rasterises it, and a new
    segmentation must not overwrite it. False when there is none, when it is wsikit's own
    unchanged output, or when it belongs to another slide. ``fingerprint``: the slide's content
    fingerprint when the caller has it already; computed here otherwise.
    """
    import json

    layout = OutputLayout(out)
    name = slide.name if name is None else name
    gj = layout.tissue_geojson(name)
    if not gj.is_file():
        return False
    state = check_source(gj, _fingerprint_of(slide, fingerprint))
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


def load_tissue(slide: Slide, out: _PathLike, *, name: str | None = None,
                resegment: bool = False, tissue_mpp: float = DEFAULT_MASK_MPP,
                min_tissue_um2: float = MIN_TISSUE_UM2, min_hole_um2: float = MIN_HOLE_UM2,
                thumb_size: int | None = 1024, fingerprint: str | None = None) -> TissueMask:
    """The tissue mask of ``slide`` under ``out``: the one path to the mask of a patch grid.

    ``wsikit patch`` and ``wsikit select`` both take their grid from this mask, so they give
    the same grid for the same slide and options, and a cached mask gives the grid of a fresh
    one (the mask PNG is read back pixel for pixel; the GeoJSON is never re-rasterised for
    that). Only when ``contours_geojson/<slide>.geojson`` has changed since the mask was
    written (e.g. edited in QuPath) is it rasterised, and that mask is stored for next time.
    ``resegment`` (or no cached output) segments again. The batch steps take the same path
    (``name``: the file stem of the outputs, the cohort's ``slide_id``; default the slide's
    name). ``thumb_size=None`` writes no outlined thumbnail. ``fingerprint``: the slide's
    content fingerprint when the caller has it already (a run computes it once, in its
    context); computed here otherwise, once for the whole call.
    """
    out = Path(out)
    name = slide.name if name is None else name
    layout = OutputLayout(out)
    files = layout.tissue_files(name)
    gj, png, meta_path = files["geojson"], files["mask"], files["mask_meta"]
    fp = _fingerprint_of(slide, fingerprint)
    state = check_source(gj, fp)  # cached outputs belong to a slide by content, not by name
    if not resegment:
        check_tissue_owner(slide, out, name, fingerprint=fp)
    if not resegment and gj.exists():
        import json

        if state == "unknown":  # placed by hand or drawn in QuPath: taken as this slide's
            write_source(gj, slide.path, fp, written_sha256=None)

        meta = None
        if png.exists() and meta_path.exists():
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                meta = None
        if (isinstance(meta, dict) and meta.get("geojson_sha256") == _sha256(gj)
                and meta.get("mask_sha256") in (None, _sha256(png))
                and list(meta.get("level0_size") or []) == list(slide.dimensions)):
            tm = TissueMask.from_png(png, level0_size=slide.dimensions,
                                     slide_mpp=slide.mpp, slide_name=slide.name)
            return tm.with_artefacts_png(layout.artefacts(name)["png"])
        tm = TissueMask.from_geojson(gj, level0_size=slide.dimensions, slide_mpp=slide.mpp,
                                     mpp=tissue_mpp, slide_name=slide.name)
        _write_mask(tm, out, slide, name)  # the edited polygons, rasterised once
        return tm
    return _segment_open(slide, out, name=name, tissue_mpp=tissue_mpp,
                         min_tissue_um2=min_tissue_um2, min_hole_um2=min_hole_um2,
                         thumb_size=thumb_size, fingerprint=fp)


def _grid_sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".source.json")


def record_grid(path: _PathLike, slide: Slide, out: _PathLike, name: str | None = None, *,
                fingerprint: str | None = None) -> Path:
    """Record beside the coordinate file ``path`` what it was made from: the slide (content
    fingerprint), the file's SHA-256 as written and the tissue mask's SHA-256
    (``<coords>.source.json``), so that ``wsikit features`` can tell the slide's current
    grid from an earlier one (:func:`grid_not_current`). ``fingerprint``: the slide's content
    fingerprint when the caller has it already; computed here otherwise."""
    from .._atomic import write_json_atomic

    path = Path(path)
    name = slide.name if name is None else name
    mask = OutputLayout(out).mask(name)
    return write_json_atomic(_grid_sidecar(path), {
        "fingerprint": _fingerprint_of(slide, fingerprint),
        "slide": str(Path(slide.path).resolve()),
        "written_sha256": _sha256(path),
        "mask_sha256": _sha256(mask) if mask.is_file() else None})


def _grid_record(path: Path, fingerprint: str, out: Path, name: str
                 ) -> tuple[str, str | None, str | None] | None:
    """``(who, fingerprint, mask_sha256)`` recorded for the coordinate file ``path``: by
    :func:`record_grid` (``who="wsikit patch"``) or in the batch state of the slide
    (``who="a batch/select run"``); None when nothing records it."""
    import json

    digest = _sha256(path)  # once: compared with the sidecar, else with the batch state
    try:
        data = json.loads(_grid_sidecar(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    if isinstance(data, dict) and data.get("written_sha256") == digest:
        mask = data.get("mask_sha256")
        return "wsikit patch", data.get("fingerprint"), mask if isinstance(mask, str) else None
    layout = OutputLayout(out)
    try:
        state = json.loads(layout.state(name).read_text(encoding="utf-8"))
        steps = state["steps"]
        coords = steps["patch"]["outputs"]["coords"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(coords, dict) or coords.get("sha256") != digest:
        return None
    try:
        mask = steps["segment"]["outputs"]["mask"]["sha256"]
    except (KeyError, TypeError):
        mask = None
    return ("a batch/select run", state.get("fingerprint") or fingerprint,
            mask if isinstance(mask, str) else None)


def grid_not_current(slide: Slide, out: _PathLike, path: _PathLike,
                     name: str | None = None, *, fingerprint: str | None = None) -> str | None:
    """Why the coordinate file ``path`` under ``out`` is not the current grid of ``slide``
    (None when it is, or when nothing records what it was made from: a file placed by hand).

    Current means: made from this slide's content, unchanged since it was written, and made
    from the tissue mask now in ``out``, whose GeoJSON was not edited since. ``fingerprint``:
    the slide's content fingerprint when the caller has it already; computed here otherwise.
    """
    import json

    out, path = Path(out), Path(path)
    name = slide.name if name is None else name
    fp = _fingerprint_of(slide, fingerprint)
    record = _grid_record(path, fp, out, name)
    if record is None:
        if _grid_sidecar(path).is_file():
            return "it changed since wsikit wrote it"
        return None
    who, made_from, mask_sha = record
    if made_from not in (None, fp):
        return f"{who} made it from another slide's content than {slide.path}"
    layout = OutputLayout(out)
    mask = layout.mask(name)
    if mask_sha is not None and mask.is_file() and _sha256(mask) != mask_sha:
        return (f"{who} made it from an earlier tissue mask ({mask} changed since: segmented "
                "again)")
    gj = layout.tissue_geojson(name)
    try:
        note = json.loads(layout.mask_note(name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        note = None
    if (gj.is_file() and isinstance(note, dict) and note.get("geojson_sha256") is not None
            and note["geojson_sha256"] != _sha256(gj)):
        return f"the tissue GeoJSON {gj} was edited since (e.g. in QuPath)"
    return None


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


def _png_bytes(img: Any) -> bytes:
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


def _segment_open(slide: Slide, out: Path, *, name: str | None = None, tissue_mpp: float,
                  min_tissue_um2: float, min_hole_um2: float,
                  thumb_size: int | None, fingerprint: str | None = None) -> TissueMask:
    from PIL import Image

    _check_segment_size(slide, tissue_mpp)
    try:
        tm = segment_tissue(slide, mpp=tissue_mpp, min_tissue_um2=min_tissue_um2,
                            min_hole_um2=min_hole_um2)
    except MemoryError as exc:
        raise SlideError(_segment_size_message(slide, tissue_mpp, "not enough memory")) from exc
    hint = greyscale_hint(slide) if not np.any(tm.mask) else ""
    if hint:
        warnings.warn(f"{slide.path}: no tissue found; {hint}", UserWarning, stacklevel=3)
    name = slide.name if name is None else name
    layout = OutputLayout(out)
    gj = layout.tissue_geojson(name)
    fp = _fingerprint_of(slide, fingerprint)
    # the user's polygons: never lost to a new segmentation
    if geojson_edited(slide, out, name, fingerprint=fp):
        kept = backup_geojson(gj)
        warnings.warn(f"{gj}: the edited tissue GeoJSON is replaced by a new segmentation; "
                      f"the edit is kept as {kept}", UserWarning, stacklevel=3)
    arts = layout.artefacts(name)
    tm.write_artefacts(arts["png"], arts["geojson"])
    # One grid path: the mask PNG written here is what every later run reads back pixel for
    # pixel (load_tissue), so the first run's grid equals every rerun's and resume's. The
    # GeoJSON is written last: a run killed before it leaves no GeoJSON, so the rerun segments
    # again instead of rasterising polygons (another mask, without its artefacts).
    import hashlib

    from .._atomic import json_bytes

    gj_bytes = json_bytes(tm.to_geojson(), indent=None)
    _write_mask(tm, out, slide, name, geojson_sha256=hashlib.sha256(gj_bytes).hexdigest())
    write_bytes_atomic(gj, gj_bytes)
    write_source(gj, slide.path, fp,
                 written_sha256=hashlib.sha256(gj_bytes).hexdigest())
    if thumb_size is None:
        return tm
    thumb = slide.thumbnail(max_size=thumb_size)
    write_bytes_atomic(layout.tissue_thumbnail(name),
                       _png_bytes(Image.fromarray(draw_tissue(thumb, tm))))
    return tm


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


def segment(path: _PathLike, *, out: _PathLike, mpp: float | None = None,
            tissue_mpp: float = DEFAULT_MASK_MPP, min_tissue_um2: float = MIN_TISSUE_UM2,
            min_hole_um2: float = MIN_HOLE_UM2, thumb_size: int = 1024,
            backend: str | None = None, resegment: bool = False,
            wait: bool = False) -> TissueMask:
    """Segment tissue and write GeoJSON, mask PNG and an outlined thumbnail under ``out``.

    A tissue GeoJSON edited since wsikit wrote it (e.g. in QuPath) or placed by hand is the
    slide's tissue: it is kept and rasterised (with a warning saying how to segment again),
    never replaced silently, as in ``wsikit batch``. With ``resegment`` the slide is segmented
    again and the edited file is first copied to ``<slide>.geojson.bak`` (or a timestamped
    name when that exists), named in a warning.

    Parameters
    ----------
    path : path-like
        Slide file.
    out : path-like
        Output folder (created).
    mpp : float, optional
        Level-0 µm/px overriding the file's metadata.
    tissue_mpp : float
        µm/px of the thumbnail segmented (default 8).
    min_tissue_um2, min_hole_um2 : float
        Smallest tissue piece kept / hole kept, in µm².
    thumb_size : int
        Longest side of the outlined thumbnail PNG.
    resegment : bool
        Segment again even when the GeoJSON was edited (a backup of the edit is kept).
    wait : bool
        While another job writes this slide's outputs (``wsikit batch``, ``select``, …):
        wait for it instead of raising :class:`~wsikit.errors.SlideBusyError` naming it.
    """
    import warnings

    check_bounds(GridOptions, tissue_mpp=tissue_mpp)  # before any work
    out = Path(out)
    with open_slide(path, mpp=mpp, backend=backend) as slide, \
            hold_slide_outputs(out, check_output_name(slide.name, slide.path), wait=wait,
                               hint=_wait_hint()):
        fp = slide_fingerprint(slide.path)  # once for the command
        if not resegment and geojson_edited(slide, out, fingerprint=fp):
            gj = OutputLayout(out).tissue_geojson(slide.name)
            warnings.warn(f"{gj} was edited since wsikit wrote it (e.g. in QuPath) or placed "
                          "by hand: kept as the slide's tissue, not segmented again; pass "
                          f"{option('resegment')} to segment again (the edited file is then "
                          f"kept as {gj.name}.bak)", UserWarning, stacklevel=2)
            return load_tissue(slide, out, tissue_mpp=tissue_mpp,
                               min_tissue_um2=min_tissue_um2, min_hole_um2=min_hole_um2,
                               thumb_size=thumb_size, fingerprint=fp)
        return _segment_open(slide, out, tissue_mpp=tissue_mpp, min_tissue_um2=min_tissue_um2,
                             min_hole_um2=min_hole_um2, thumb_size=thumb_size, fingerprint=fp)


def patch(path: _PathLike, *, out: _PathLike, mpp: float | None = None,
          target_mpp: float = GridOptions.target_mpp, patch_px: int = GridOptions.patch_px,
              overlap_px: int = GridOptions.overlap_px,
          min_tissue: float = GridOptions.min_tissue, tissue_mpp: float = DEFAULT_MASK_MPP,
          min_tissue_um2: float = MIN_TISSUE_UM2, min_hole_um2: float = MIN_HOLE_UM2,
          resegment: bool = False, thumb_size: int = 1024, backend: str | None = None,
          progress: bool | None = None, wait: bool = False) -> TileGrid:
    """Build the patch grid of a slide and write ``out/patches/<slide>_patches.h5``.

    Reuses the cached tissue mask (and a GeoJSON edited in QuPath) through
    :func:`load_tissue`, the same path ``wsikit select`` takes, unless ``resegment``.

    Parameters
    ----------
    path, out, mpp
        As in :func:`segment`.
    target_mpp : float
        Patch resolution (µm/px), exact.
    patch_px : int
        Patch edge in pixels at ``target_mpp``.
    overlap_px : int
        Overlap of neighbouring patches in pixels at ``target_mpp``.
    min_tissue : float
        Minimum tissue fraction of a kept patch.
    tissue_mpp, min_tissue_um2, min_hole_um2 : float
        Segmentation options as in :func:`segment` (used only when segmenting).
    resegment : bool
        Segment again even if a GeoJSON exists (one edited in QuPath is first copied to
        ``<slide>.geojson.bak``).
    progress : bool, optional
        Progress bar over the steps (default: on unless ``WSIKIT_NO_PROGRESS=1``).
    wait : bool
        As in :func:`segment`: wait for another job writing this slide's outputs instead of
        raising :class:`~wsikit.errors.SlideBusyError` naming it.
    """
    from PIL import Image

    check_bounds(GridOptions, patch_px=patch_px, tissue_mpp=tissue_mpp)  # before any work
    out = Path(out)
    bar = progress_bar(total=4, enabled=progress, desc="patch", unit="step")
    try:
        with open_slide(path, mpp=mpp, backend=backend) as slide, \
                hold_slide_outputs(out, check_output_name(slide.name, slide.path), wait=wait,
                                   hint=_wait_hint()):
            bar.update(1)
            fp = slide_fingerprint(slide.path)  # once for the command
            tm = load_tissue(slide, out, resegment=resegment, tissue_mpp=tissue_mpp,
                             min_tissue_um2=min_tissue_um2, min_hole_um2=min_hole_um2,
                             thumb_size=thumb_size, fingerprint=fp)
            bar.update(1)
            grid = make_grid(slide, tm, target_mpp=target_mpp, patch_px=patch_px,
                             overlap_px=overlap_px, min_tissue=min_tissue)
            bar.update(1)
            layout = OutputLayout(out)
            grid.to_h5(layout.coords(slide.name))
            record_grid(layout.coords(slide.name), slide, out, fingerprint=fp)
            thumb = slide.thumbnail(max_size=thumb_size)
            write_bytes_atomic(layout.grid_thumbnail(slide.name),
                               _png_bytes(Image.fromarray(draw_grid(thumb, grid))))
            bar.update(1)
    finally:
        bar.close()
    return grid


# -- slide-level convenience (the CLI's Python twin) -----------------------------------------

def _recorded_mpp(slide: str | os.PathLike[str], out: str | os.PathLike[str],
                  coords: str | os.PathLike[str] | None) -> float | None:
    """The level-0 mpp recorded in the slide's coordinate file (``coords`` or the one under
    ``out``) when the slide itself has none; else None (the slide's metadata decides)."""
    try:
        with open_slide(slide, require_mpp=False, estimate_mpp=False) as s:
            if math.isfinite(s.mpp):
                return None
            path = Path(coords) if coords is not None else OutputLayout(out).coords(s.name)
    except WsikitError:
        return None  # the real open below reports it
    if not path.exists():
        return None
    try:
        recorded = TileGrid.from_h5(path).slide_mpp
    except WsikitError:
        return None
    if not math.isfinite(recorded):
        return None
    log.info("%s has no resolution metadata: using the level-0 %g µm/px recorded in %s",
             slide, recorded, path)
    return float(recorded)


def extract_slide_features(
    slide: str | os.PathLike[str],
    *,
    encoder: str = "auto",
    out: str | os.PathLike[str],
    device: str = "cpu",
    batch_size: int = 64,
    workers: int = 2,
    weights: str | None = None,
    target_mpp: float | None = None,
    patch_px: int | None = None,
    mpp: float | None = None,
    precision: str | None = None,
    coords: str | os.PathLike[str] | None = None,
    reader: str = "auto",
    overwrite: bool = False,
    progress: bool | None = None,
    threads: int | None = None,
    wait: bool = False,
    decode: str = "reader",
) -> Embeddings:
    """Tissue → grid → features for one slide, as ``wsikit features`` does.

    The grid comes from ``coords`` if given, else from ``<out>/patches/<slide>_patches.h5``
    when it exists and matches the requested ``target_mpp``/``patch_px``, else it is made
    (the slide's tissue mask, :func:`load_tissue`, + :func:`wsikit.patches.grid.make_grid`) and
    saved there. ``target_mpp`` and ``patch_px`` default to the encoder's
    (CONCH v1.5: 512 px at 0.5 µm/px). A slide without resolution metadata reuses the level-0
    mpp that ``wsikit patch --mpp`` recorded in that coordinate file, unless ``mpp`` is given.

    Like the other stages it checks its inputs first, under the slide's one lock (``wait``:
    wait for another job holding it instead of raising :class:`~wsikit.errors.
    SlideBusyError`): outputs under ``out`` made from another slide of the same name are
    refused (:class:`~wsikit.errors.CacheError`), and so is a grid in ``out`` that is not
    the slide's current one (made from another slide, changed since, or from an earlier
    tissue mask or GeoJSON: :class:`~wsikit.errors.GridError`, :func:`wsikit.run.slide_ops.
    grid_not_current`), so features are never computed on a stale grid. ``decode``: where JPEG
    tiles are decoded (:attr:`wsikit.run.options.RunSettings.decode`).
    """
    from ..errors import GridError
    from ..features.extract import extract_features, resolve_encoder

    check_bounds(GridOptions, patch_px=patch_px)  # before any work
    if mpp is None:
        mpp = _recorded_mpp(slide, out, coords)
    enc = resolve_encoder(encoder, device, weights)
    cfg = enc.config
    t_mpp = float(target_mpp if target_mpp is not None else cfg.target_mpp)
    p_px = int(patch_px if patch_px is not None else cfg.patch_px)
    with open_slide(slide, mpp=mpp) as s, \
            hold_slide_outputs(out, check_output_name(s.name, s.path), wait=wait,
                               hint=f", or pass {option('wait')} to wait for it"):
        grid = None
        if coords is not None:
            grid = TileGrid.from_h5(coords)
            check_grid_matches(grid, s, coords)  # --coords of another slide is refused
        else:
            cpath = OutputLayout(out).coords(s.name)
            if cpath.exists():
                try:
                    cand = TileGrid.from_h5(cpath)
                except WsikitError as exc:
                    log.warning("ignoring unreadable %s (%s)", cpath, exc)
                else:
                    if cand.patch_px == p_px and abs(cand.target_mpp - t_mpp) < 1e-6:
                        grid = cand
            fp = slide_fingerprint(s.path)  # once for the checks below
            check_tissue_owner(s, out, fingerprint=fp)
            if grid is not None:
                why = grid_not_current(s, out, cpath, fingerprint=fp)
                if why:
                    raise GridError(
                        f"{cpath} is not the current patch grid of {s.path}: {why}; make it "
                        f"again (wsikit patch {s.path} --out {out} with its options), or "
                        f"pass {keyword('coords')} {cpath} to use it as it is")
            if grid is None:
                mask = load_tissue(s, out, fingerprint=fp)  # the mask patch/batch use too
                grid = make_grid(s, mask, target_mpp=t_mpp, patch_px=p_px)
                grid.to_h5(cpath)
                record_grid(cpath, s, out, fingerprint=fp)
        return extract_features(s, grid, enc, device=device, batch_size=batch_size,
                                workers=workers, precision=precision, out=out,
                                progress=progress, reader=reader, mpp=mpp, overwrite=overwrite,
                                threads=threads, decode=decode)
