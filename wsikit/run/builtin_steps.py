"""The built-in steps, registered in :mod:`wsikit.run.steps`' registry the first time it is used.

``wsikit select`` runs them in process on one slide and ``wsikit batch`` on every slide of a
cohort; they are the one orchestration of the stages. In registration (= run) order:

==============  ====================================================  ============================
step            output (:class:`wsikit.outputs.layout.OutputLayout`)  needs
==============  ====================================================  ============================
segment         ``contours_geojson/<slide>.geojson``,                 —
                ``masks/<slide>.png`` (+ ``.json``),
                ``artefacts/``, ``thumbnails/<slide>_tissue.png``
patch           ``patches/<slide>_patches.h5``                        segment (its mask PNG)
grid_thumbnail  ``thumbnails/<slide>_grid.png``                       patch
features        ``features_<encoder>/<slide>.h5``                     patch
attention       ``attention/<slide>.h5``                              features
select          ``select/<slide>/`` (evidence.json, crops)            attention
==============  ====================================================  ============================

The ``select`` step lives with its stage, in :mod:`wsikit.run.select_stage`.

Each step is a function ``(ctx: SlideContext) -> dict`` of JSON-ready info: it takes its
inputs as typed objects (:meth:`SlideContext.mask`, :meth:`~SlideContext.grid`, …: made by
the step before it in this run, else read from that step's file), calls the stage's compute
function (arrays in, arrays out) and writes the files. The heavy modules
(tissue, features, models, torch) are imported inside the steps, so importing this module
stays light. The ``store`` step lives in :mod:`wsikit.run.store_step`.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._atomic import write_bytes_atomic
from .._hints import keyword, option
from ..patches.grid import PATCH_READ
from .steps import BatchConfig, SkipSlide, SlideContext, register_step

if TYPE_CHECKING:
    from ..models import Encoder
    from ..patches.grid import TileGrid

__all__ = ["segment_step", "patch_step", "features_step", "attention_step", "GRID_KEYS",
           "FEATURE_KEYS", "ATTENTION_KEYS"]

#: Longest side of the outlined thumbnails (tissue, grid).
THUMBNAIL_PX = 1024
#: Options the segment step's output depends on (a change redoes it and the steps after it).
SEGMENT_KEYS = ("tissue_mpp", "min_tissue_um2", "min_hole_um2")
#: Options the patch grid depends on.
GRID_KEYS = (*SEGMENT_KEYS, "target_mpp", "patch_px", "overlap_px", "min_tissue", "coords")
#: Options the patch features depend on.
FEATURE_KEYS = (*GRID_KEYS, "encoder", "weights", "precision")
#: Options the per-patch attention depends on.
ATTENTION_KEYS = (*FEATURE_KEYS, "attention")


def _missing_module(module: str, what: str) -> Callable[[], str | None]:
    def check() -> str | None:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        return None if found else f"{module} ({what}) is not part of this installation yet"
    return check


@register_step("segment", config_keys=SEGMENT_KEYS, adopts=("geojson",),
               description="tissue mask → contours_geojson/<slide>.geojson, masks/<slide>.png")
def segment_step(ctx: SlideContext) -> dict[str, Any]:
    """Tissue segmentation; writes the GeoJSON contours (level-0 px, QuPath-compatible) and
    the mask PNG every later grid of the slide is made from.

    A GeoJSON edited since wsikit wrote it (e.g. in QuPath), or placed by hand, is the slide's
    tissue from now on: rasterised, never overwritten by a new segmentation (``force``
    segments again, keeping the edit as ``<slide>.geojson.bak``).
    """
    from ..slide.fingerprint import source_file
    from .slide_ops import geojson_edited, rasterise_edit, segment_slide, write_tissue

    slide = ctx.open()
    g = ctx.options.grid
    root, name = ctx.job.root, ctx.slide_id
    edited = not ctx.force and geojson_edited(root, name, fingerprint=ctx.fingerprint)
    if edited:
        mask = rasterise_edit(slide, root, name, tissue_mpp=g.tissue_mpp,
                              fingerprint=ctx.fingerprint)
        gj = ctx.layout.tissue_geojson(name)
        warnings.warn(f"{gj} was edited since wsikit wrote it (e.g. in QuPath) or placed by "
                      f"hand: kept as the slide's tissue, not segmented again; pass "
                      f"{option('force')} to segment again (the edited file is then kept as "
                      f"{gj.name}.bak)", UserWarning, stacklevel=2)
    else:
        mask = segment_slide(slide, tissue_mpp=g.tissue_mpp, min_tissue_um2=g.min_tissue_um2,
                             min_hole_um2=g.min_hole_um2)
        write_tissue(slide, mask, root, name, fingerprint=ctx.fingerprint)
    ctx.artifacts.mask = mask
    for key, path in ctx.layout.tissue_files(name).items():
        ctx.add_output(key, path)  # a lost mask PNG redoes the segmentation, not a re-raster
    source = source_file(ctx.layout.tissue_geojson(name))
    if source.is_file():  # whose tissue it is: a lost record is made again (an edit adopted)
        ctx.add_output("source", source)
    return {"mpp": float(slide.mpp), "mpp_source": slide.mpp_source,
            "level0_size": [int(v) for v in slide.dimensions],
            "tissue_fraction": round(float(mask.tissue_fraction), 6),
            "tissue_area_um2": round(float(mask.tissue_area_um2), 1),
            "pieces": len(mask.polygons()),
            **({"geojson_edited": True} if edited else {})}


def coords_digest(config: BatchConfig) -> str | None:
    """SHA-256 (16 hex) of the coordinate file given as the grid (``coords``): a file
    changed since redoes the patch step and those after it."""
    coords = config.options.grid.coords
    if coords is None:
        return None
    from ..outputs.cache_record import sha256_file

    try:
        return sha256_file(Path(coords))[:16]
    except OSError:
        return "unreadable"  # the step itself then fails with the file's own message


@register_step("patch", requires=("segment",), config_keys=GRID_KEYS, inputs=coords_digest,
               description="patch grid at exact µm/px → patches/<slide>_patches.h5")
def patch_step(ctx: SlideContext) -> dict[str, Any]:
    """Tissue patch grid at the exact target µm/px (or the ``coords`` file given);
    TRIDENT-compatible coordinates file.

    The file is rewritten only when the grid changed, so a rerun leaves it untouched.
    """
    slide = ctx.open()
    g = ctx.options.grid
    path = ctx.prepare(ctx.layout.coords(ctx.slide_id))
    _check_grid_kept(ctx, path)
    grid = _coords_grid(ctx) if g.coords is not None else _make_grid(ctx)
    ctx.artifacts.grid = grid
    if not grid.same_as_file(path):
        grid.to_h5(path)  # atomic
    ctx.add_output("coords", path)
    n = int(len(grid.coords))
    info = {"n_patches": n, "patch_size_l0": int(grid.patch_size_l0),
            "patch_px": int(grid.patch_px), "target_mpp": float(grid.target_mpp)}
    if n == 0:
        from .slide_ops import greyscale_hint

        grey = greyscale_hint(slide)
        reason = (f"{slide.path}: no tissue found; {grey}" if grey else
                  f"{slide.path}: no tissue found (0 patches of {g.patch_px} px at "
                  f"{g.target_mpp} µm/px with ≥ {g.min_tissue:.0%} tissue); check the mask in "
                  f"{ctx.layout.tissue_thumbnail(ctx.slide_id)}, lower "
                  f"{keyword('min_tissue')}, or edit the GeoJSON in QuPath")
        raise SkipSlide(reason, info=info)
    return info


def _check_grid_kept(ctx: SlideContext, path: Path) -> None:
    """Refuse to replace a coordinate file changed by hand since this step wrote it (the
    user's grid, like an edited tissue GeoJSON, is never silently replaced)."""
    from ..errors import GridError
    from ..outputs.cache_record import sha256_file

    written = ((ctx.previous or {}).get("outputs") or {}).get("coords") or {}
    if ctx.force or not written.get("sha256") or not path.is_file():
        return
    if sha256_file(path) != written["sha256"]:
        raise GridError(f"{path} changed since wsikit wrote it (edited by hand?); pass "
                        f"{keyword('coords')} {path} to use it as it is, or {option('force')} "
                        "to make the grid again")


def _make_grid(ctx: SlideContext) -> TileGrid:
    from ..patches.grid import make_grid

    g = ctx.options.grid
    assert g.target_mpp is not None and g.patch_px is not None  # resolved by the run
    return make_grid(ctx.open(), ctx.mask(), target_mpp=g.target_mpp, patch_px=g.patch_px,
                     overlap_px=g.overlap_px, min_tissue=g.min_tissue)


def _coords_grid(ctx: SlideContext) -> TileGrid:
    """The grid of the ``coords`` file, refused when it belongs to another slide."""
    from ..patches.grid import TileGrid
    from .slide_ops import check_grid_matches

    coords = str(ctx.options.grid.coords)
    grid = TileGrid.from_h5(coords)
    check_grid_matches(grid, ctx.open(), coords)
    return dataclasses.replace(grid, slide_name=ctx.slide_id)


@register_step("grid_thumbnail", requires=("patch",), config_keys=GRID_KEYS,
               description="the patch grid drawn on a thumbnail → thumbnails/<slide>_grid.png")
def grid_thumbnail_step(ctx: SlideContext) -> dict[str, Any]:
    """Thumbnail of the slide with every patch of its grid outlined (``wsikit patch``)."""
    from PIL import Image

    from .slide_ops import draw_grid, png_bytes

    thumb = ctx.open().thumbnail(max_size=THUMBNAIL_PX)
    path = ctx.prepare(ctx.layout.grid_thumbnail(ctx.slide_id))
    write_bytes_atomic(path, png_bytes(Image.fromarray(draw_grid(thumb, ctx.grid()))))
    ctx.add_output("grid_thumbnail", path)
    return {}


def _encoder(ctx: SlideContext) -> Encoder:
    """The patch encoder of the options (built once per worker): ``auto`` is CONCH v1.5 when
    its weights are given or found, else the weight-free heuristic."""
    from ..models import create_encoder

    m = ctx.options.models
    key = ("encoder", m.encoder, m.weights, ctx.device, m.precision)
    enc = ctx.cache.get(key)
    if enc is None:
        if m.encoder == "auto" and m.weight_file("conch_v1_5") is None:
            enc = create_encoder("auto", role="patch", device=ctx.device, dtype=m.precision)
        else:
            name = "conch_v1_5" if m.encoder == "auto" else m.encoder
            enc = create_encoder(name, weights=m.weight_file(name), device=ctx.device,
                                 dtype=m.precision)
        ctx.cache[key] = enc
    return enc


def encoder_entry(encoder: Encoder) -> dict[str, Any]:
    """What evidence.json records of an encoder: name, label, heuristic, precision."""
    return {"name": encoder.config.name, "label": encoder.label,
            "heuristic": bool(encoder.config.heuristic),
            "precision": getattr(encoder, "precision", "fp32")}


def _weight_file(encoder: Encoder) -> str | None:
    """The weight file an encoder was built from (``Encoder.weights_source`` is
    ``"<how found>: <path>"``), when it is one file."""
    source = str(getattr(encoder, "weights_source", None) or "")
    if ": " not in source:
        return None
    path = source.split(": ", 1)[1].strip()
    return path if Path(path).is_file() else None


@register_step("features", requires=("patch",), device=True, config_keys=FEATURE_KEYS,
               description="patch features → features_<encoder>/<slide>.h5",
               available=_missing_module("wsikit.features.extract", "feature extraction"),
               version=PATCH_READ)
def features_step(ctx: SlideContext) -> dict[str, Any]:
    """Patch features with the configured encoder (one model per worker, built once),
    written atomically to ``features_<encoder>/<slide>.h5``."""
    from ..features.extract import extract_features
    grid = ctx.grid()
    if grid.slide_name != ctx.slide_id:  # a cohort's slide_id names the features file
        grid = dataclasses.replace(grid, slide_name=ctx.slide_id)
    encoder = _encoder(ctx)
    if (weights := _weight_file(encoder)) is not None:
        ctx.add_input_file(weights)  # a changed weight file redoes the features (and on)
    cfg = ctx.config
    workers = cfg.loader_workers
    if workers is None:
        workers = 0 if str(ctx.device).startswith("cpu") else 4
    ts = time.perf_counter()
    emb = extract_features(ctx.open(), grid, encoder, device=ctx.device,
                           batch_size=cfg.batch_size, workers=workers,
                           precision=ctx.options.models.precision, progress=cfg.progress,
                           reader=cfg.reader, decode=cfg.decode, threads=cfg.threads)
    seconds = time.perf_counter() - ts
    coords = {**emb.attrs.get("coords", {}), "savetodir": str(ctx.job.root)}
    emb = dataclasses.replace(emb, attrs={**emb.attrs, "coords": coords})
    name = encoder.config.name
    path = ctx.prepare(ctx.layout.features(name, ctx.slide_id))
    emb.to_h5(path)  # atomic
    ctx.add_output("features", path)
    ctx.artifacts.embeddings = emb
    n = len(emb)
    return {"encoder": name, "label": getattr(encoder, "label", name),
            "encoder_entry": encoder_entry(encoder),
            "encoder_config": encoder.config.to_dict(), "n_patches": n,
            "weights_source": getattr(encoder, "weights_source", None),
            "dim": int(emb.features.shape[1]),
            "patches_per_s": round(n / seconds, 2) if seconds > 0 else None}


@register_step("attention", requires=("features",), device=True, config_keys=ATTENTION_KEYS,
               description="per-patch attention (TITAN or weight-free) → attention/<slide>.h5")
def attention_step(ctx: SlideContext) -> dict[str, Any]:
    """Per-patch attention: TITAN over CONCH v1.5 features when available, else heuristic."""
    from ..selection.attention import compute_attention, resolve_source

    emb = ctx.embeddings()
    titan = ctx.options.models.weight_file("titan")
    source = resolve_source(ctx.options.models.attention, emb, titan)
    att = compute_attention(ctx.open(), ctx.grid(), source=source, embeddings=emb,
                            device=ctx.device, weights=titan, progress=ctx.config.progress,
                            threads=ctx.config.threads)
    path = ctx.prepare(ctx.layout.attention(ctx.slide_id))
    att.to_h5(path)  # atomic
    ctx.add_output("attention", path)
    ctx.artifacts.attention = att
    return {"source": att.source, "label": att.label, "n_patches": int(len(att.scores))}
