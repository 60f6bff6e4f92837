"""The built-in steps, registered in :mod:`wsikit.run.steps`' registry the first time it is used.

``wsikit select`` runs them in process on one slide and ``wsikit batch`` on every slide of a
cohort; they are the one orchestration of the stages. In registration (= run) order:

============  ======================================================  ==============================
step          output (:class:`wsikit.outputs.layout.OutputLayout`)    needs
============  ======================================================  ==============================
segment       ``contours_geojson/<slide>.geojson``,                   —
              ``masks/<slide>.png`` (+ ``.json``),
              ``artefacts/``, ``thumbnails/<slide>_tissue.png``
patch         ``patches/<slide>_patches.h5``                          segment (recomputed if reused)
features      ``features_<encoder>/<slide>.h5``                       patch
attention     ``attention/<slide>.h5``                                features
select        ``select/<slide>/`` (evidence.json, crops)              attention
============  ======================================================  ==============================

Each step is a function ``(ctx: SlideContext) -> dict`` of JSON-ready info; the heavy modules
(tissue, features, models, torch) are imported inside the steps, so importing this module
stays light. The ``store`` step lives in :mod:`wsikit.run.store_step`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._hints import keyword
from ..patches.grid import PATCH_READ
from .steps import BatchConfig, SkipSlide, SlideContext, register_step

__all__ = ["segment_step", "patch_step", "features_step", "attention_step", "select_step",
           "GRID_KEYS", "FEATURE_KEYS", "ATTENTION_KEYS", "SELECT_KEYS", "index_and_towers",
           "index_digest", "open_index_once", "selector_once"]

#: Options each step's output depends on (a change redoes the step and those after it).
GRID_KEYS = ("tissue_mpp", "target_mpp", "patch_px", "overlap_px", "min_tissue",
             "min_tissue_um2")
FEATURE_KEYS = (*GRID_KEYS, "encoder", "weights", "precision")
ATTENTION_KEYS = (*FEATURE_KEYS, "attention")
#: The figure index counts by its content (:func:`index_digest`), not its path: a job folder
#: moved with its index redoes nothing (evidence.json finds it again by ``index.relpath``).
SELECT_KEYS = (*ATTENTION_KEYS, "selector", "scales", "per_scale", "min_coverage", "max_iou",
               "margin", "layout", "min_score", "k", "min_similarity", "question",
               "rrf_k", "towers", "match_kinds", "max_crop_px", "report", "synthetic")


def _missing_module(module: str, what: str) -> Callable[[], str | None]:
    def check() -> str | None:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        return None if found else f"{module} ({what}) is not part of this installation yet"
    return check


def _tissue(ctx: SlideContext, *, segmenting: bool = False, resegment: bool = False) -> Any:
    """The slide's tissue mask through the one mask path (:func:`wsikit.run.slide_ops.load_tissue`).

    ``resegment`` segments (GeoJSON, mask PNG, its note, artefacts and the outlined thumbnail
    written); otherwise the mask PNG of the last segmentation is read back pixel for pixel (a
    GeoJSON edited since is rasterised), so a resumed step makes the grid of a fresh run.
    ``segmenting``: called by the segment step itself (other steps need its record).
    """
    from .slide_ops import load_tissue

    mask = ctx.artifacts.get("mask")
    if mask is None or segmenting:
        if not segmenting:
            ctx.output_path("segment", "geojson")  # a clear error when segment never ran
        mask = load_tissue(ctx.open(), ctx.job.root, name=ctx.slide_id, resegment=resegment,
                           tissue_mpp=ctx.options.grid.tissue_mpp,
                           min_tissue_um2=ctx.options.grid.min_tissue_um2,
                           fingerprint=ctx.fingerprint)
        ctx.artifacts["mask"] = mask
    return mask


@register_step("segment", config_keys=("tissue_mpp", "min_tissue_um2"),
               description="tissue mask → contours_geojson/<slide>.geojson, masks/<slide>.png")
def segment_step(ctx: SlideContext) -> dict[str, Any]:
    """Tissue segmentation; writes the GeoJSON contours (level-0 px, QuPath-compatible) and
    the mask PNG every later grid of the slide is made from.

    A GeoJSON edited since wsikit wrote it (e.g. in QuPath), or placed by hand, is the slide's
    tissue from now on: rasterised, never overwritten by a new segmentation (delete it, or
    ``force``, to segment again).
    """
    from .slide_ops import geojson_edited

    slide = ctx.open()
    files = ctx.layout.tissue_files(ctx.slide_id)
    edited = not ctx.force and geojson_edited(slide, ctx.job.root, ctx.slide_id,
                                              fingerprint=ctx.fingerprint)
    mask = _tissue(ctx, segmenting=True, resegment=not edited)
    for key, path in files.items():
        ctx.add_output(key, path)  # a lost mask PNG redoes the segmentation, not a re-raster
    return {"mpp": float(slide.mpp), "mpp_source": slide.mpp_source,
            "level0_size": [int(v) for v in slide.dimensions],
            "tissue_fraction": round(float(mask.tissue_fraction), 6),
            **({"geojson_edited": True} if edited else {})}


@register_step("patch", requires=("segment",), config_keys=GRID_KEYS,
               description="patch grid at exact µm/px → patches/<slide>_patches.h5")
def patch_step(ctx: SlideContext) -> dict[str, Any]:
    """Tissue patch grid at the exact target µm/px; TRIDENT-compatible coordinates file.

    The file is rewritten only when the grid changed, so a rerun leaves it untouched.
    """
    from ..patches.grid import make_grid

    slide = ctx.open()
    mask = _tissue(ctx)
    g = ctx.options.grid
    grid = make_grid(slide, mask, target_mpp=g.target_mpp, patch_px=g.patch_px,
                     overlap_px=g.overlap_px, min_tissue=g.min_tissue)
    ctx.artifacts["grid"] = grid
    path = ctx.prepare(ctx.layout.coords(ctx.slide_id))
    if not grid.same_as_file(path):
        grid.to_h5(path)  # atomic
    ctx.add_output("coords", path)
    n = int(len(grid.coords))
    info = {"n_patches": n, "patch_size_l0": int(grid.patch_size_l0),
            "target_mpp": float(grid.target_mpp)}
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


def _encoder(ctx: SlideContext) -> Any:
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


def _weight_file(encoder: Any) -> str | None:
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
    """Patch features with the configured encoder (one model per worker, built once)."""
    from ..features.extract import extract_features
    from ..patches.grid import TileGrid
    from .select_stage import encoder_entry

    grid = ctx.artifacts.get("grid")
    if grid is None:
        grid = TileGrid.from_h5(ctx.output_path("patch", "coords"))
    encoder = _encoder(ctx)
    if (weights := _weight_file(encoder)) is not None:
        ctx.add_input_file(weights)  # a changed weight file redoes the features (and on)
    cfg = ctx.config
    workers = cfg.loader_workers
    if workers is None:
        workers = 0 if str(ctx.device).startswith("cpu") else 4
    ts = time.perf_counter()
    if grid.slide_name != ctx.slide_id:  # a cohort's slide_id names the features file
        grid = dataclasses.replace(grid, slide_name=ctx.slide_id)
    # written by extract_features into the layout (atomically, under the slide's one lock,
    # which the runner holds for this step: lock=False); the step records decide reuse, so
    # an existing file is always recomputed here
    emb = extract_features(ctx.open(), grid, encoder, device=ctx.device,
                           batch_size=cfg.batch_size, workers=workers,
                           precision=ctx.options.models.precision, progress=cfg.progress,
                           out=ctx.job.root, overwrite=True, lock=False, decode=cfg.decode)
    seconds = time.perf_counter() - ts
    name = encoder.config.name
    ctx.add_output("features", ctx.layout.features(name, ctx.slide_id))
    ctx.artifacts["embeddings"] = emb
    n = int(emb.features.shape[0])
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
    from ..features.extract import Embeddings
    from ..patches.grid import TileGrid
    from ..selection.attention import compute_attention, resolve_source

    grid = ctx.artifacts.get("grid") or TileGrid.from_h5(ctx.output_path("patch", "coords"))
    emb = ctx.artifacts.get("embeddings") or Embeddings.from_h5(
        ctx.output_path("features", "features"))
    slide = ctx.open()
    titan = ctx.options.models.weight_file("titan")
    source = resolve_source(ctx.options.models.attention, emb, titan)
    att = compute_attention(slide, grid, source=source, embeddings=emb, device=ctx.device,
                            weights=titan, progress=ctx.config.progress)
    path = ctx.prepare(ctx.layout.attention(ctx.slide_id))
    att.to_h5(path)  # atomic
    ctx.add_output("attention", path)
    ctx.artifacts["attention"] = att
    return {"source": att.source, "label": att.label, "n_patches": int(len(att.scores))}


def index_digest(config: BatchConfig) -> str | None:
    """SHA-256 (16 hex) of the figure index's manifest, and of the licence filter when one is
    set (the figures a region may match): a rebuilt index or another filter redoes
    ``select``."""
    index = config.options.matching.index
    if index is None:
        return None
    try:
        data = (Path(index) / "manifest.json").read_bytes()
    except OSError:
        return "unreadable"  # the step itself then fails with the index's own message
    if config.options.matching.licences is not None:
        data += f"\nlicences={config.options.matching.licences}".encode()
    return hashlib.sha256(data).hexdigest()[:16]


def index_and_towers(ctx: SlideContext) -> tuple[Any, dict[str, Any]]:
    """The open, verified figure index and the question's tower encoders (once per worker)."""
    return open_index_once(ctx.config, ctx.device, ctx.cache)


def open_index_once(config: BatchConfig, device: str, cache: dict[Any, Any], *,
                    opened: Any = None) -> tuple[Any, dict[str, Any]]:
    """:func:`index_and_towers` before a slide's context exists (``select`` opens the index
    first, so a damaged one fails before the slide is read): kept in ``cache``. ``opened``:
    the index already open (a :class:`~wsikit.evidence.FigureIndex` given to ``select``)."""
    from .select_stage import open_index

    m = config.options.matching
    if m.index is None:
        return None, {}
    key = ("index", m.index, index_digest(config), m.towers, device)
    found = cache.get(key)
    if found is None:
        index = open_index(m.index if opened is None else opened, device=device)
        towers: dict[str, Any] = {}
        if m.towers:
            from ..evidence.towers import create_tower_encoders

            towers = create_tower_encoders(index, m.towers, device=device,
                                           weights=config.options.models.weight_files())
        found = cache[key] = (index, towers)
    return found


def selector_once(ctx: SlideContext) -> Any:
    """The options' selector, built once per worker (``select`` passes the one its option
    check built)."""
    from .checks import build_selector

    key = ("selector", ctx.options.selection)
    found = ctx.cache.get(key)
    if found is None:
        found = ctx.cache[key] = build_selector(ctx.options.selection)
    return found


@register_step("select", requires=("attention",), config_keys=SELECT_KEYS,
               inputs=index_digest,
               description="multi-scale windows, crops, evidence.json → select/<slide>/")
def select_step(ctx: SlideContext) -> dict[str, Any]:
    """Multi-scale window selection, crops, figure matching and report
    (:func:`wsikit.run.select_stage.write_evidence`)."""
    from ..models import get_config
    from ..patches.grid import TileGrid
    from ..selection.attention import Attention
    from .select_stage import write_evidence

    index, towers = index_and_towers(ctx)  # a damaged index fails before any output
    slide = ctx.open()
    grid = ctx.artifacts.get("grid") or TileGrid.from_h5(ctx.output_path("patch", "coords"))
    att = ctx.artifacts.get("attention") or Attention.from_h5(
        ctx.output_path("attention", "attention"))
    mask = _tissue(ctx)
    feat = (ctx.records.get("features") or {}).get("info", {})
    entry = feat.get("encoder_entry")
    if entry is None:  # a record from before entries were kept
        name = feat.get("encoder", ctx.options.models.encoder)
        entry = {"name": name, "label": feat.get("label", name),
                 "heuristic": bool(get_config(name).heuristic), "precision": "fp32"}
    timings = {step: rec["seconds"] for step, rec in ctx.records.items()
               if isinstance(rec, dict) and "seconds" in rec}
    sdir = ctx.prepare(ctx.layout.select_dir(ctx.slide_id))  # select/ made; <slide>/ published
    result = write_evidence(slide, grid, mask, att, sdir, ctx.options, encoder=entry,
                            index=index, device=ctx.device, towers=towers, timings=timings,
                            selector=selector_once(ctx))
    ctx.artifacts["result"] = result
    ctx.add_output("evidence", sdir / "evidence.json")
    return {"regions": len(result.regions), "empty_scales": dict(result.empty_scales),
            "index": ctx.options.matching.index}
