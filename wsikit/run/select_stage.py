"""The ``select`` stage and its step: attention → windows → crops → figure matches →
evidence.json + report.

:func:`write_evidence` is what the ``select`` step (:func:`select_step`, registered here after
the built-in steps of :mod:`wsikit.run.builtin_steps`) runs for one slide, after the tissue,
grid, features and attention steps; ``wsikit select`` and ``wsikit batch --steps …,select``
both reach it through that step. It writes, into
``select/<slide>/`` (published as one unit: a failure or kill leaves the previous result or
none, never a mix)::

    windows.json      the selector's windows
    crops/            r<rank>_x<scale>.png (+ .json sidecars), read from the best level
    evidence.json     the wsikit.evidence/v1 document (schemas/evidence_v1.json)
    regions.geojson   the regions as QuPath annotations
    report.html, overview.png   (with ``report``)
    timings.json      seconds per stage
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._atomic import write_json_atomic
from .builtin_steps import ATTENTION_KEYS, encoder_entry
from .options import PipelineOptions
from .steps import BatchConfig, SlideContext, register_step

if TYPE_CHECKING:
    from ..evidence import EvidenceResult, FigureIndex
    from ..patches.grid import TileGrid
    from ..selection.attention import Attention
    from ..selection.question import QuestionSteering
    from ..selection.selectors import Selector
    from ..slide import Slide
    from ..tissue.mask import TissueMask
    from .steps import BatchConfig, SlideContext

__all__ = ["SELECT_KEYS", "open_index", "select_step", "write_evidence"]


def open_index(index: str | os.PathLike[str] | FigureIndex, *,
               device: str | None = None) -> FigureIndex:
    """The figure index (a path is opened and its checksums verified, searched on the run's
    ``device`` where that is CUDA: :meth:`~wsikit.evidence.FigureIndex.open`; an open one is
    kept)."""
    from ..evidence import FigureIndex

    return index if isinstance(index, FigureIndex) else FigureIndex.open(index, device=device)


def write_evidence(slide: Slide, grid: TileGrid, mask: TissueMask, att: Attention,
                   sdir: str | os.PathLike[str], options: PipelineOptions, *,
                   encoder: Mapping[str, Any], index: FigureIndex | None = None,
                   device: str = "cpu", towers: Mapping[str, Any] | None = None,
                   timings: Mapping[str, float] | None = None,
                   selector: Selector | None = None,
                   steering: QuestionSteering | None = None) -> EvidenceResult:
    """Selection → crops → matching → evidence.json (+ report) from computed attention.

    Parameters
    ----------
    slide, grid, mask, att
        The open slide, its patch grid, tissue mask and per-patch attention.
    sdir : path-like
        The result folder (``select/<slide>/``), published as one unit.
    options : PipelineOptions
        Selection, matching and output options (the grid and models are already applied).
    encoder : mapping
        The patch encoder's entry (:func:`encoder_entry`).
    index : FigureIndex, optional
        An open, verified figure index (:func:`open_index`); required when
        ``options.matching.index`` is set.
    device : str
        Device of the crop encoder.
    towers : mapping, optional
        ``{name: encoder}`` of vision-language towers joining a question's fusion.
    timings : mapping, optional
        Seconds of the stages before this one, recorded in ``timings.json``.
    selector : Selector, optional
        The selector of ``options.selection`` when already built
        (:func:`wsikit.run.checks.check_options`); built here otherwise.
    steering : QuestionSteering, optional
        How the question steered ``att`` (:func:`wsikit.run.question.steer_regions`):
        recorded as ``selection.question_steering`` and per region.
    """
    from ..outputs.publish import staged_folder

    with staged_folder(sdir) as work:  # published as one unit: all files of this run or none
        return _write_into(slide, grid, mask, att, Path(work), options, final=Path(sdir),
                           encoder=encoder, index=index, device=device, towers=towers,
                           timings=dict(timings or {}), selector=selector,
                           steering=steering)


def _write_into(slide: Slide, grid: TileGrid, mask: TissueMask, att: Attention, sdir: Path,
                options: PipelineOptions, *, final: Path, encoder: Mapping[str, Any],
                index: FigureIndex | None, device: str, towers: Mapping[str, Any] | None,
                timings: dict[str, float], selector: Selector | None,
                steering: QuestionSteering | None = None) -> EvidenceResult:
    """Write every file of the result into the staging folder ``sdir``; paths recorded in
    them are relative to it, absolute ones (and the result's ``base_dir``) are computed from
    ``final``, the folder ``sdir`` becomes when published."""
    from ..evidence import EvidenceRegion, EvidenceResult
    from ..evidence.ids import region_uid
    from ..selection.crops import save_crop
    from .checks import build_selector

    sel_opts, out_opts = options.selection, options.output

    def step(name: str, t0: float) -> None:
        timings[name] = round(time.perf_counter() - t0, 3)

    t = time.perf_counter()
    if selector is None:
        selector = build_selector(sel_opts)
    # windows never run past the slide edge, so no crop is ever padded
    windows = selector(att.scores, att.coords, grid.stride_l0,
                       slide_size=(int(slide.dimensions[0]), int(slide.dimensions[1])))
    write_json_atomic(sdir / "windows.json", windows.to_dict())
    step("selection", t)

    t = time.perf_counter()
    crops, crop_images = [], []
    for w in windows:   # by rank: r1 is the most salient region
        crop, image = save_crop(slide, w, sdir / "crops", name=f"{w.id}_x{w.scale}",
                                max_px=out_opts.max_crop_px, relative_to=sdir)
        crops.append(crop)
        crop_images.append(image)
    step("crops", t)

    t = time.perf_counter()
    found = _match(crop_images, index, options, final=final, device=device, towers=towers)
    if index is not None:
        step("matching", t)
    from ..selection.attention import describe

    models = {"patch_encoder": dict(encoder), "attention": describe(att), **found.crop_encoder}
    sid = evidence_slide_id(slide)
    regions = []
    for w, crop, found_matches, dropped in zip(windows, crops, found.matches,
                                               found.below_floor, strict=True):
        wd = w.to_dict()
        regions.append(EvidenceRegion.from_dict({
            "id": w.id, "uid": region_uid(sid, w.id, wd["box"]), **wd,
            "usable_tissue": _usable_tissue(grid, wd["box"]),
            **(steering.region_fields(wd["box"]) if steering is not None else {}),
            "crop": {"path": crop.path, "width": crop.width, "height": crop.height,
                     "mpp": crop.mpp},
            "matches": found_matches, "below_floor": dropped}))
    selection = _selection_entry(options, windows, grid, slide, floor=found.floor,
                                 licences=found.licences, kinds=found.kinds, steering=steering)
    result = EvidenceResult(
        slide=_slide_entry(slide, sid, final),
        models=models, selection=selection, regions=tuple(regions), index=found.index,
        empty_scales={str(k): v for k, v in windows.empty.items()},
        synthetic=bool(out_opts.synthetic), base_dir=final)
    write_json_atomic(sdir / "evidence.json", result.to_dict())  # the file boundary
    from ..evidence.regions_geojson import REGIONS_GEOJSON, write_regions_geojson

    write_regions_geojson(sdir / REGIONS_GEOJSON, result)  # QuPath annotations

    if out_opts.report:
        t = time.perf_counter()
        _write_report(slide, sdir, result, mask, att, grid)
        step("report", t)
    write_json_atomic(sdir / "timings.json", timings)
    return result


@dataclass(frozen=True)
class _Matched:
    """The figures matched to the crops (:func:`_match`) and what evidence.json records of
    the matching: the floor, the licences a match had to carry, the index, the crop encoder,
    the kinds of figure matched."""

    matches: Sequence[list[dict[str, Any]]]
    below_floor: Sequence[int | None]
    floor: Any = None
    licences: list[str] | None = None
    index: dict[str, Any] | None = None
    crop_encoder: dict[str, Any] = field(default_factory=dict)
    kinds: tuple[str, ...] | None = None


def _match(crop_images: Sequence[Any], index: FigureIndex | None, options: PipelineOptions, *,
           final: Path, device: str, towers: Mapping[str, Any] | None) -> _Matched:
    """Match the crops against ``index`` (none: no matches) with the matching options."""
    if index is None:
        return _Matched([[] for _ in crop_images], [None for _ in crop_images])
    from ..evidence.matching import match_crops
    from ..outputs.paths import relative_path

    match = options.matching
    found = match_crops(crop_images, index, k=match.k, min_similarity=match.min_similarity,
                        base_dir=final, device=device, weights=options.models.weight_files(),
                        question=match.question, rrf_k=match.rrf_k, towers=towers,
                        licences=match.licences, kinds=match.match_kinds)
    index_entry = found.index.to_evidence_dict()
    index_entry["relpath"] = relative_path(index_entry["path"], final)
    return _Matched(found.matches, found.below_floor, found.floor,
                    # what a match had to carry
                    None if found.index.licences is None else sorted(found.index.licences),
                    index_entry, {"crop_encoder": encoder_entry(found.encoder)}, found.kinds)


def _selection_entry(options: PipelineOptions, windows: Any, grid: TileGrid, slide: Slide, *,
                     floor: Any, licences: list[str] | None,
                     kinds: tuple[str, ...] | None,
                     steering: QuestionSteering | None = None) -> dict[str, Any]:
    """``selection`` of evidence.json: the selector and its options, the grid, the floors
    (saliency and similarity), the licences matched, a question's fusion and how it steered
    the regions, warnings."""
    sel_opts, match = options.selection, options.matching
    selection: dict[str, Any] = {
        "selector": sel_opts.selector, **_jsonable(sel_opts.selector_options()),
        "min_score_value": windows.params.get("min_score_value"),
        "patch_px": grid.patch_px, "target_mpp": grid.target_mpp,
        "patch_size_l0": grid.stride_l0, "patches": len(grid),
        "figures_per_region": match.k, "min_similarity": floor,
        **({"match_kinds": list(kinds)} if kinds is not None else {})}
    from ..patches.grid import upsampling_note

    if note := upsampling_note(slide.name, grid.slide_mpp, grid.target_mpp):
        selection["warnings"] = [note]  # shown in the report and the summary, too
    if licences is not None:
        selection["licences"] = licences
    if match.question:
        selection.update(question=match.question, fusion={
            "method": "rrf", "k": match.rrf_k,
            "channels": ["image", "caption BM25",
                         *(f"{kind}:{name}" for name in match.towers
                           for kind in ("vl_text", "vl_image"))]})
        from ..selection.question import not_steered

        selection["question_steering"] = (steering.to_dict() if steering is not None
                                          else not_steered(match.question))
    return selection


def evidence_slide_id(slide: Slide) -> str:
    """The slide's id in evidence documents (:func:`wsikit.evidence.ids.slide_id`):
    ``<name>-<12 hex>`` of the same content the slide's fingerprint covers.

    A single-file slide, and a folder (DICOM series, OME-Zarr: the digest lists every file's
    name and size), keeps the id of :func:`~wsikit.evidence.ids.slide_id_digest` (its size,
    first and last MiB), so documents published before keep their ids. A slide file whose
    pixels are in other files (an MRXS slide's ``Slidedat.ini``, index and ``Data*.dat``;
    VMS/VMU JPEGs; a DICOM series given by one file) adds the companion part of its content
    fingerprint (:func:`wsikit.slide.fingerprint.slide_fingerprint`, after ``+``): the
    ``.mrxs`` file alone is the same few bytes in every scan, so two slides of one name had
    one id (and one vector-store document for two slides). Such slides' ids changed once.
    """
    from ..evidence.ids import slide_id, slide_id_digest
    from ..slide.fingerprint import slide_fingerprint

    path = Path(slide.path)
    companions = slide_fingerprint(path).partition("+")[2] if path.is_file() else ""
    if not companions:
        return slide_id(slide)
    digest = hashlib.sha256(f"{slide_id_digest(path)}+{companions}".encode()).hexdigest()
    return slide_id({"name": slide.name, "fingerprint": digest})


def _slide_entry(slide: Slide, sid: str, final: Path) -> dict[str, Any]:
    """``slide`` of evidence.json: its id, paths (portable, and relative to the result folder
    ``final``), size, resolution, reader and the tiles read as white."""
    from ..outputs.paths import portable_path, relative_path

    W, H = slide.dimensions
    return {"id": sid, "path": portable_path(slide.path, final)[1],
            "relpath": relative_path(slide.path, final), "output_name": final.name,
            "name": slide.name, "width": W, "height": H,
            "mpp": slide.mpp, "mpp_source": slide.mpp_source, "backend": slide.backend,
            "vendor": slide.vendor,
            **({"bad_tiles": list(slide.bad_tiles)} if getattr(slide, "bad_tiles", None)
               else {})}


def _usable_tissue(grid: TileGrid, box: Mapping[str, int]) -> float | None:
    """Mean usable tissue fraction (tissue without ink or folds, from the mask) of the patches
    a window covers (``box``: level-0 ``x``, ``y``, ``width``, ``height``); None when the
    grid does not know it (a TRIDENT or CLAM coordinate file)."""
    x, y, w, h = (int(box[k]) for k in ("x", "y", "width", "height"))
    c = np.asarray(grid.coords)
    sel = (c[:, 0] >= x) & (c[:, 0] < x + w) & (c[:, 1] >= y) & (c[:, 1] < y + h)
    value = float(np.asarray(grid.tissue, np.float64)[sel].mean()) if sel.any() else 0.0
    return round(value, 3) if math.isfinite(value) else None


def _jsonable(d: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(dict(d), default=list))
    return out


def _write_report(slide: Slide, sdir: Path, result: EvidenceResult, mask: TissueMask,
                  att: Attention, grid: TileGrid) -> None:
    from ..look.report import render_overview_png, write_report

    thumb = slide.thumbnail(max_size=1600)
    ds = slide.dimensions[0] / thumb.shape[1]
    geo = mask.to_geojson()
    arts = mask.artefacts_geojson()
    attention = (att.scores, att.coords, grid.stride_l0)
    write_report(sdir / "report.html", result, thumbnail=thumb, thumbnail_downsample=ds,
                 tissue_geojson=geo, attention=attention, base_dir=sdir,
                 artefacts_geojson=arts)
    render_overview_png(sdir / "overview.png", result, thumbnail=thumb, thumbnail_downsample=ds,
                        tissue_geojson=geo, attention=attention, artefacts_geojson=arts)


# --------------------------------------------------------------------------- the step
#: The figure index counts by its content (:func:`index_digest`), not its path: a job folder
#: moved with its index redoes nothing (evidence.json finds it again by ``index.relpath``).
SELECT_KEYS = (*ATTENTION_KEYS, "selector", "scales", "per_scale", "min_coverage", "max_iou",
               "margin", "layout", "min_score", "question_weight", "k", "min_similarity",
               "question", "rrf_k", "towers", "match_kinds", "max_crop_px", "report",
               "synthetic")


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


def index_and_towers(ctx: SlideContext) -> tuple[FigureIndex | None, dict[str, Any]]:
    """The open, verified figure index and the question's tower encoders (once per worker)."""
    return open_index_once(ctx.options, ctx.device, ctx.cache)


def open_index_once(options: PipelineOptions, device: str, cache: dict[Any, Any], *,
                    opened: FigureIndex | None = None
                    ) -> tuple[FigureIndex | None, dict[str, Any]]:
    """:func:`index_and_towers` before a slide's context exists (``select`` opens the index
    first, so a damaged one fails before the slide is read): kept in ``cache``. ``opened``:
    the index already open (a :class:`~wsikit.evidence.FigureIndex` given to ``select``)."""
    m = options.matching
    if m.index is None:
        return None, {}
    key = ("index", m.index, index_digest(BatchConfig(options=options)), m.towers, device)
    found = cache.get(key)
    if found is None:
        index = open_index(m.index if opened is None else opened, device=device)
        towers: dict[str, Any] = {}
        if m.towers:
            from ..evidence.towers import create_tower_encoders

            towers = create_tower_encoders(index, m.towers, device=device,
                                           weights=options.models.weight_files())
        found = cache[key] = (index, towers)
    return found


def selector_once(ctx: SlideContext) -> Selector:
    """The options' selector, built once per worker (the run's option check built it)."""
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
    index, towers = index_and_towers(ctx)  # a damaged index fails before any output
    timings = {step: rec["seconds"] for step, rec in ctx.records.items()
               if isinstance(rec, dict) and "seconds" in rec}
    from .question import steer_regions

    slide, grid = ctx.open(), ctx.grid()
    att, steering = steer_regions(ctx, slide, grid, ctx.attention(),  # a question + tower
                                  index_towers=towers)
    sdir = ctx.prepare(ctx.layout.select_dir(ctx.slide_id))  # select/ made; <slide>/ published
    result = write_evidence(slide, grid, ctx.mask(), att, sdir, ctx.options,
                            encoder=_encoder_entry(ctx), index=index, device=ctx.device,
                            towers=towers, timings=timings, selector=selector_once(ctx),
                            steering=steering)
    ctx.artifacts.result = result
    ctx.add_output("evidence", sdir / "evidence.json")
    return {"regions": len(result.regions), "empty_scales": dict(result.empty_scales),
            "index": ctx.options.matching.index}


def _encoder_entry(ctx: SlideContext) -> dict[str, Any]:
    """The patch encoder's entry of evidence.json, from the features step's record."""
    from ..models import get_config

    feat = (ctx.records.get("features") or {}).get("info", {})
    entry = feat.get("encoder_entry")
    if entry is None:  # a record from before entries were kept
        name = feat.get("encoder", ctx.options.models.encoder)
        entry = {"name": name, "label": feat.get("label", name),
                 "heuristic": bool(get_config(name).heuristic), "precision": "fp32"}
    return dict(entry)
