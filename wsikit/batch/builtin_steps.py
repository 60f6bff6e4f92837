"""The built-in batch steps, registered in :mod:`wsikit.batch.steps`' registry on import.

:mod:`wsikit.batch.steps` imports this module at its end, so the steps below are registered
whenever the registry is imported (workers and Ray actors import only the registry), in this
order (registration order is the run order):

============  ==========================================  ===================================
step          output                                      needs
============  ==========================================  ===================================
segment       ``contours_geojson/<slide>.geojson``,       —
              ``masks/<slide>.png`` (+ ``.json``)
patch         ``patches/<slide>_patches.h5``              segment (recomputed if reused)
features      ``features_<encoder>/<slide>.h5``           patch
attention     ``attention/<slide>.h5``                    features
select        ``select/<slide>/`` (evidence.json, crops)  attention
============  ==========================================  ===================================

Each step is a function ``(ctx: SlideContext) -> dict`` of JSON-ready info; the heavy modules
(tissue, features, models, torch) are imported inside the steps, so importing this module
stays light. The ``store`` step lives in :mod:`wsikit.batch.store_step`.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..patching import PATCH_READ
from .steps import SkipSlide, SlideContext, register_step

__all__ = ["segment_step", "patch_step", "features_step", "attention_step", "select_step"]


def _missing_module(module: str, what: str) -> Callable[[], str | None]:
    def check() -> str | None:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        return None if found else f"{module} ({what}) is not part of this installation yet"
    return check


def _tissue(ctx: SlideContext, *, segment: bool = False, edited: bool = False) -> Any:
    """The slide's tissue mask through the one mask path of ``wsikit patch``/``select``.

    :func:`wsikit.slide_ops.load_tissue` under the job folder, named after the ``slide_id``:
    ``segment`` segments (GeoJSON, mask PNG and its note written); otherwise the mask PNG of
    that segmentation is read back pixel for pixel (a GeoJSON edited since is rasterised;
    ``edited``: the segment step adopting such an edit), so
    a resumed step makes the grid of a fresh run and of ``wsikit patch`` with these options.
    """
    from ..slide_ops import load_tissue

    mask = ctx.artifacts.get("mask")
    if mask is None or segment or edited:
        if not (segment or edited):
            ctx.output_path("segment", "geojson")  # a clear error when segment never ran
        mask = load_tissue(ctx.open(), ctx.job.root, name=ctx.slide_id, resegment=segment,
                           mask_mpp=ctx.config.tissue_mpp, thumb_size=None)
        ctx.artifacts["mask"] = mask
    return mask


@register_step("segment", config_keys=("tissue_mpp",),
               description="tissue mask → contours_geojson/<slide>.geojson, masks/<slide>.png")
def segment_step(ctx: SlideContext) -> dict[str, Any]:
    """Tissue segmentation; writes the GeoJSON contours (level-0 px, QuPath-compatible) and
    the mask PNG every later grid of the slide is made from."""
    from ..slide_ops import tissue_files

    slide = ctx.open()
    files = tissue_files(ctx.job.root, ctx.slide_id)
    edited = _geojson_edited(ctx, files["geojson"])
    # An edited GeoJSON (e.g. in QuPath) is the slide's tissue from now on: rasterised, never
    # overwritten by a new segmentation (delete it to segment again).
    mask = _tissue(ctx, segment=not edited, edited=edited)
    for key, path in files.items():
        ctx.add_output(key, path)  # a lost mask PNG redoes the segmentation, not a re-raster
    return {"mpp": float(slide.mpp), "mpp_source": slide.mpp_source,
            "level0_size": [int(v) for v in slide.dimensions],
            "tissue_fraction": round(float(mask.tissue_fraction), 6),
            **({"geojson_edited": True} if edited else {})}


def _geojson_edited(ctx: SlideContext, geojson: Path) -> bool:
    """Whether the segment step's GeoJSON was changed since that step wrote it."""
    from ..cache_record import sha256_file

    recorded = ((ctx.previous or {}).get("outputs") or {}).get("geojson")
    if not recorded or not geojson.is_file():
        return False
    return sha256_file(geojson) != recorded.get("sha256")


@register_step("patch", requires=("segment",),
               config_keys=("tissue_mpp", "target_mpp", "patch_px", "overlap_px", "min_tissue"),
               description="patch grid at exact µm/px → patches/<slide>_patches.h5")
def patch_step(ctx: SlideContext) -> dict[str, Any]:
    """Tissue patch grid at the exact target µm/px; TRIDENT-compatible coordinates file."""
    from .. import patching

    slide = ctx.open()
    mask = _tissue(ctx)
    cfg = ctx.config
    grid = patching.make_grid(slide, mask, target_mpp=cfg.target_mpp, patch_px=cfg.patch_px,
                              overlap_px=cfg.overlap_px, min_tissue=cfg.min_tissue)
    ctx.artifacts["grid"] = grid
    path = ctx.path("patches", f"{ctx.slide_id}_patches.h5")
    grid.to_h5(path)  # atomic
    ctx.add_output("coords", path)
    n = int(len(grid.coords))
    info = {"n_patches": n, "patch_size_l0": int(grid.patch_size_l0),
            "target_mpp": float(grid.target_mpp)}
    if n == 0:
        raise SkipSlide(f"no tissue patches at {cfg.target_mpp} µm/px with min_tissue="
                        f"{cfg.min_tissue} (coordinates file written with 0 patches)",
                        info=info)
    return info


def _encoder(ctx: SlideContext) -> Any:
    from ..models import create_encoder

    key = ("encoder", ctx.config.encoder, ctx.config.weights, ctx.device, ctx.config.precision)
    enc = ctx.cache.get(key)
    if enc is None:
        enc = create_encoder(ctx.config.encoder, weights=ctx.config.weights, device=ctx.device,
                             dtype=ctx.config.precision)
        ctx.cache[key] = enc
    return enc


@register_step("features", requires=("patch",), device=True,
               config_keys=("tissue_mpp", "target_mpp", "patch_px", "overlap_px", "min_tissue",
                            "encoder", "weights", "precision"),
               description="patch features → features_<encoder>/<slide>.h5",
               available=_missing_module("wsikit.features", "feature extraction"),
               version=PATCH_READ)
def features_step(ctx: SlideContext) -> dict[str, Any]:
    """Patch features with the configured encoder (one model per worker, built once)."""
    from ..features import extract_features
    from ..patching import TileGrid

    grid = ctx.artifacts.get("grid")
    if grid is None:
        grid = TileGrid.from_h5(ctx.output_path("patch", "coords"))
    encoder = _encoder(ctx)
    name = encoder.config.name
    cfg = ctx.config
    workers = cfg.loader_workers
    if workers is None:
        workers = 0 if str(ctx.device).startswith("cpu") else 4
    ts = time.perf_counter()
    emb = extract_features(ctx.open(), grid, encoder, device=ctx.device,
                           batch_size=cfg.batch_size, workers=workers,
                           precision=cfg.precision, progress=False)
    seconds = time.perf_counter() - ts
    path = ctx.path(f"features_{name}", f"{ctx.slide_id}.h5")
    emb.to_h5(path)  # atomic
    ctx.add_output("features", path)
    ctx.artifacts["embeddings"] = emb
    n = int(emb.features.shape[0])
    return {"encoder": name, "label": getattr(encoder, "label", name),
            "encoder_config": encoder.config.to_dict(), "n_patches": n,
            "weights_source": getattr(encoder, "weights_source", None),
            "dim": int(emb.features.shape[1]),
            "patches_per_s": round(n / seconds, 2) if seconds > 0 else None}


@register_step("attention", requires=("features",), device=True,
               config_keys=("tissue_mpp", "target_mpp", "patch_px", "overlap_px", "min_tissue",
                            "encoder", "weights", "precision", "attention"),
               description="per-patch attention (TITAN or weight-free) → attention/<slide>.h5")
def attention_step(ctx: SlideContext) -> dict[str, Any]:
    """Per-patch attention: TITAN over CONCH v1.5 features when available, else heuristic."""
    from ..attention import compute_attention
    from ..features import Embeddings
    from ..patching import TileGrid

    grid = ctx.artifacts.get("grid") or TileGrid.from_h5(ctx.output_path("patch", "coords"))
    emb = ctx.artifacts.get("embeddings") or Embeddings.from_h5(
        ctx.output_path("features", "features"))
    slide = ctx.open()
    att = compute_attention(slide.path, grid, source=ctx.config.attention, embeddings=emb,
                            device=ctx.device, mpp=slide.mpp, progress=False)
    path = ctx.path("attention", f"{ctx.slide_id}.h5")
    att.to_h5(path)  # atomic
    ctx.add_output("attention", path)
    ctx.artifacts["attention"] = att
    return {"source": att.source, "label": att.label, "n_patches": int(len(att.scores))}


@register_step("select", requires=("attention",),
               config_keys=("tissue_mpp", "target_mpp", "patch_px", "overlap_px", "min_tissue",
                            "encoder", "weights", "precision", "attention", "scales",
                            "per_scale", "min_coverage", "max_iou", "margin", "layout",
                            "min_score", "index", "k"),
               description="multi-scale windows, crops, evidence.json → select/<slide>/")
def select_step(ctx: SlideContext) -> dict[str, Any]:
    """Multi-scale window selection, crops, figure matching and report, as ``wsikit select``."""
    from ..attention import Attention
    from ..models import get_config
    from ..patching import TileGrid
    from ..pipeline import SelectOptions, finish_select

    cfg = ctx.config
    slide = ctx.open()
    grid = ctx.artifacts.get("grid") or TileGrid.from_h5(ctx.output_path("patch", "coords"))
    att = ctx.artifacts.get("attention") or Attention.from_h5(
        ctx.output_path("attention", "attention"))
    mask = _tissue(ctx)
    feat_info = (ctx.records.get("features") or {}).get("info", {})
    name = feat_info.get("encoder", cfg.encoder)
    encoder_entry = {"name": name, "label": feat_info.get("label", name),
                     "heuristic": bool(get_config(name).heuristic)}
    opts = SelectOptions(models=name, attention=cfg.attention, scales=tuple(cfg.scales),
                         per_scale=cfg.per_scale, min_coverage=cfg.min_coverage,
                         max_iou=cfg.max_iou, margin=cfg.margin, layout=cfg.layout,
                         min_score=cfg.min_score, target_mpp=cfg.target_mpp,
                         patch_px=cfg.patch_px, min_tissue=cfg.min_tissue, k=cfg.k)
    sdir = ctx.path("select", ctx.slide_id)  # job/select/<slide>/
    result = finish_select(slide, grid, mask, att, sdir, opts, encoder_entry=encoder_entry,
                           index=cfg.index, device=ctx.device)
    ctx.add_output("evidence", sdir / "evidence.json")
    return {"regions": len(result.regions),
            "empty_scales": dict(result.empty_scales),
            "index": cfg.index}
