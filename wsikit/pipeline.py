"""``wsikit select``: a slide in, a few salient multi-scale regions and their evidence out.

Stages (each cached under ``out`` in the TRIDENT layout and reused unless ``force``)::

    tissue     out/contours_geojson/<slide>.geojson        (+ mask and outlined thumbnail)
    grid       out/patches/<slide>_patches.h5
    features   out/features_<encoder>/<slide>.h5
    attention  out/attention/<slide>.h5                    (TITAN or weight-free heuristic)
    selection  out/select/<slide>/windows.json
    crops      out/select/<slide>/crops/r<i>_x<scale>.png  (+ .json sidecars)
    matching   (with an index) crops embedded with the index's encoder, top-k figures
    output     out/select/<slide>/evidence.json, regions.geojson (QuPath), report.html,
               overview.png

The Python function :func:`select` mirrors the command line and returns the
:class:`wsikit.evidence.EvidenceResult` written to ``evidence.json``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ._atomic import write_json_atomic
from ._hints import keyword, option
from ._progress import progress_enabled
from .errors import EvidenceError, SelectionError, WsikitError

__all__ = [
    "MODEL_CHOICES",
    "SelectOptions",
    "finish_select",
    "load_result",
    "resolve_scales",
    "select",
    "select_dir",
]

log = logging.getLogger(__name__)

DEFAULT_SCALES = (8, 4, 2, 1)
#: Values of ``models``: ``auto`` uses real weights when found, else the labelled heuristics.
MODEL_CHOICES = ("auto", "heuristic", "conch_v1_5")


@dataclass(frozen=True)
class SelectOptions:
    """Every option of :func:`select` that changes its result (recorded in evidence.json)."""

    models: str = "auto"
    attention: str = "auto"
    selector: str = "multiscale"
    scales: tuple[int, ...] = (8, 4, 2, 1)
    per_scale: int = 1
    min_coverage: float = 1.0
    max_iou: float = 0.5
    margin: float = 2
    layout: str = "nested"
    min_score: float | str = "median"
    target_mpp: float = 0.5
    patch_px: int = 512
    min_tissue: float = 0.1
    max_crop_px: int = 1024
    k: int = 5
    min_similarity: str | float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    question: str | None = None  # question-aware evidence (evidence/fusion.py)
    rrf_k: float = 50
    towers: tuple[str, ...] = ()  # vision-language towers fused in with the question

    def selector_options(self) -> dict[str, Any]:
        """Options passed to :func:`wsikit.selectors.create_selector`.

        ``topk`` honours ``per_scale`` as its ``k`` (patches kept) and ``min_score``; it
        selects single patches, so :func:`select` refuses other ``scales`` for it.
        """
        if self.selector == "multiscale":
            return {"scales": tuple(self.scales), "per_scale": self.per_scale,
                    "min_coverage": self.min_coverage, "max_iou": self.max_iou,
                    "margin": self.margin, "layout": self.layout,
                    "min_score": self.min_score}
        if self.selector == "topk":
            return {"k": self.per_scale, "min_score": self.min_score} | dict(self.extra)
        return dict(self.extra)


def resolve_scales(selector: str, scales: str | Sequence[int] | None, per_scale: int | None
                   ) -> tuple[tuple[int, ...], int]:
    """``(scales, per_scale)`` for ``selector``, refusing what it cannot honour.

    ``None`` means the default: scales (8, 4, 2, 1) and 1 window per scale for ``multiscale``;
    for ``topk`` scale 1 and 8 patches (``per_scale`` is its ``k``). ``topk`` refuses any
    scale other than 1, since it selects single patches.
    """
    from .selectors.multiscale import parse_scales

    scales = None if scales is None else parse_scales(scales)  # also the CLI's "8,4"
    if selector == "topk":
        if scales is not None and scales != (1,):
            raise SelectionError(
                f"--selector topk selects single patches (scale 1); --scales "
                f"{','.join(str(s) for s in scales)} does not apply: drop --scales, or use "
                "--selector multiscale for windows of several sizes")
        return (1,), 8 if per_scale is None else int(per_scale)
    return (DEFAULT_SCALES if scales is None else scales,
            1 if per_scale is None else int(per_scale))


def select_dir(out: str | os.PathLike[str], slide_name: str) -> Path:
    """``<out>/select/<slide_name>``: where evidence.json, report.html and crops go."""
    return Path(out) / "select" / slide_name


def _patch_encoder(models: str, *, device: str, weights: Mapping[str, str]) -> Any:
    from .models import create_encoder

    if models not in MODEL_CHOICES:
        raise SelectionError(f"{option('models', models)} is not one of {MODEL_CHOICES}")
    if models == "auto":
        if "conch_v1_5" in weights:
            return create_encoder("conch_v1_5", weights=weights["conch_v1_5"], device=device)
        return create_encoder("auto", role="patch", device=device)
    return create_encoder(models, weights=weights.get(models), device=device)


def _encoder_entry(enc: Any) -> dict[str, Any]:
    return {"name": enc.config.name, "label": enc.label, "heuristic": bool(enc.config.heuristic),
            "precision": getattr(enc, "precision", "fp32")}


def _tissue(slide: Any, out: Path, *, force: bool) -> Any:
    """The tissue mask through the same path as ``wsikit patch`` (identical grids)."""
    from .slide_ops import load_tissue

    return load_tissue(slide, out, resegment=force)


def _grid(slide: Any, mask: Any, out: Path, opts: SelectOptions, *, force: bool) -> Any:
    """The patch grid from the (cached) tissue mask; the file is rewritten only on change.

    Making the grid from a mask takes milliseconds, so it is always recomputed: a cached file
    can then never hold a grid made with other options (e.g. another ``min_tissue``).
    """
    from .patching import TileGrid, coords_path, make_grid

    grid = make_grid(slide, mask, target_mpp=opts.target_mpp, patch_px=opts.patch_px,
                     min_tissue=opts.min_tissue)
    path = coords_path(out, slide.name)
    if path.exists() and not force:
        try:
            old = TileGrid.from_h5(path)
        except WsikitError as exc:
            log.warning("rewriting the grid: %s", exc)
        else:
            if (np.array_equal(old.coords, grid.coords) and old.patch_px == grid.patch_px
                    and old.patch_size_l0 == grid.patch_size_l0
                    and old.stride_l0 == grid.stride_l0
                    and math.isclose(old.target_mpp, grid.target_mpp, rel_tol=1e-9)
                    and math.isclose(old.slide_mpp, grid.slide_mpp, rel_tol=1e-9)):
                return grid
    grid.to_h5(path)
    return grid


def _attention(slide: Any, grid: Any, emb: Any, out: Path, opts: SelectOptions, *,
               device: str, weights: Mapping[str, str], mpp: float | None, force: bool,
               progress: bool | None) -> Any:
    from .attention import (
        attention_path,
        cached_attention,
        compute_attention,
        resolve_source,
    )
    from .cache_record import cache_intact, record_checksum

    source = resolve_source(opts.attention, emb, weights.get("titan"))
    path = attention_path(out, slide.name)
    att = None
    if not force and path.exists():
        intact = cache_intact(path)  # an attention file edited in place is not reused
        if intact is False:
            log.warning("%s changed since wsikit wrote it (checksum differs); computing the "
                        "attention again", path)
        else:
            att = cached_attention(path, grid, source)
            if att is not None and intact is None:
                record_checksum(path)
    if att is None:
        att = compute_attention(slide.path, grid, source=source, embeddings=emb, device=device,
                                weights=weights.get("titan"), mpp=mpp, progress=progress)
        att.to_h5(path)
        record_checksum(path)
    return att


def _open_index(index: Any) -> Any:
    """The figure index (a path is opened and its checksums verified; an open one is kept).

    Called before any output is touched: a damaged index fails the run up front.
    """
    from .evidence import FigureIndex

    return index if isinstance(index, FigureIndex) else FigureIndex.open(index)


def _match(crops: Sequence[np.ndarray], index_dir: str | os.PathLike[str], opts: SelectOptions,
           *, device: str, weights: Mapping[str, str], base_dir: Path,
           towers: Mapping[str, Any] | None = None) -> Any:
    from .evidence.matching import match_crops

    return match_crops(crops, index_dir, k=opts.k, min_similarity=opts.min_similarity,
                       base_dir=base_dir, device=device, weights=weights,
                       question=opts.question, rrf_k=opts.rrf_k, towers=towers)


def select(
    slide: str | os.PathLike[str],
    *,
    out: str | os.PathLike[str] = "wsikit_out",
    models: str = "auto",
    attention: str = "auto",
    selector: str = "multiscale",
    scales: str | Sequence[int] | None = None,
    per_scale: int | None = None,
    min_coverage: float = 1.0,
    max_iou: float = 0.5,
    margin: float = 2,
    layout: str = "nested",
    min_score: float | str = "median",
    index: str | os.PathLike[str] | None = None,
    k: int = 5,
    min_similarity: str | float | None = None,
    mpp: float | None = None,
    target_mpp: float = 0.5,
    patch_px: int = 512,
    min_tissue: float = 0.1,
    max_crop_px: int = 1024,
    device: str = "cpu",
    batch_size: int = 32,
    workers: int = 0,
    weights: Mapping[str, str] | None = None,
    force: bool = False,
    report: bool = True,
    synthetic: bool = False,
    progress: bool | None = None,
    question: str | None = None,
    rrf_k: float = 50,
    towers: Sequence[str] = (),
) -> Any:
    """Find salient regions of ``slide`` at several scales and (with ``index``) their evidence.

    Parameters
    ----------
    slide : path-like
        Whole-slide image (anything :func:`wsikit.io.open_slide` reads).
    out : path-like
        Output root; per-slide results go to ``<out>/select/<slide>/``.
    models : {"auto", "heuristic", "conch_v1_5"}
        Patch encoder: ``auto`` takes CONCH v1.5 when its weights are found, otherwise the
        weight-free heuristic (labelled as such everywhere).
    attention : {"auto", "titan", "heuristic"}
        Attention source: ``auto`` = TITAN when CONCH v1.5 features and TITAN weights exist.
    selector : str
        Selection strategy (:func:`wsikit.selectors.list_selectors`).
    scales, per_scale, min_coverage, max_iou, margin, layout
        Multi-scale selection options (see ARCHITECTURE.md; default scales (8, 4, 2, 1),
        one window per scale). ``layout="nested"`` lets a finer window zoom wholly into an
        accepted one (a zoom chain into the most salient region); ``"disjoint"`` keeps every
        pair at least ``margin`` patches apart edge to edge. ``selector="topk"`` takes
        ``per_scale`` as the number of patches and refuses ``scales`` other than ``(1,)``.
    min_score : "median" or float
        Saliency floor: every returned region scores at least the median cell score of the
        slide (``"median"``, default), at least this number, or anything (``0``).
    index : path-like, optional
        Figure index folder (``wsikit index build``); each crop is matched against it.
    k, min_similarity
        Figures looked up per region, and the floor a match must pass to be kept: a
        background percentile such as ``"p95"`` (default), a cosine similarity, or ``"none"``.
    mpp : float, optional
        Level-0 µm/px overriding the slide's metadata.
    target_mpp, patch_px, min_tissue
        Patch grid (default 512 px at 0.5 µm/px, ≥ 10 % tissue).
    max_crop_px : int
        Longest side of the saved crops.
    device, batch_size, workers
        Feature extraction settings.
    weights : dict, optional
        ``{model name: weight file}`` overriding weight discovery.
    force : bool
        Recompute every stage instead of reusing cached outputs.
    report : bool
        Write ``report.html`` and ``overview.png``.
    synthetic : bool
        Mark the result as produced from synthetic demo data.
    question, rrf_k
        With a question, figures are ranked by reciprocal-rank fusion (constant ``rrf_k``) of
        image similarity and caption BM25 of the question; it is recorded in the selection.
    towers : sequence of str
        With a question: vision-language towers of the index (``wsikit index tower``, e.g.
        ``"quiltnet_b32"``) whose question→figure and crop→figure rankings join the fusion.
        Their weights must be found (``weights``); the similarity floor still applies to
        the index encoder's image similarity.

    Returns
    -------
    EvidenceResult
        Also written to ``<out>/select/<slide>/evidence.json``.

    Raises
    ------
    SlideError, MppError
        The slide cannot be read or has no resolution (pass ``mpp``), or its file name cannot
        name outputs (``..svs``, not valid UTF-8: :func:`wsikit.slide_outputs.check_output_name`).
    SelectionError
        No tissue was found, or invalid selection options.
    CacheError
        ``out`` holds the outputs of another slide of the same name, or a file wsikit did not
        write is in the way of one this run writes in the result folder.

    Notes
    -----
    One run at a time writes a slide's outputs under ``out``: a second ``select`` of the same
    name waits for the first (a warning says so), then reuses its cached stages. Files in
    ``<out>/select/<slide>/`` that wsikit did not write are kept.
    """
    from .features import extract_features
    from .io import open_slide
    from .selectors import create_selector

    weights = dict(weights or {})
    scales, per_scale = resolve_scales(selector, scales, per_scale)
    opts = SelectOptions(models=models, attention=attention, selector=selector,
                         scales=scales, per_scale=per_scale,
                         min_coverage=min_coverage, max_iou=max_iou, margin=margin,
                         layout=layout, min_score=min_score, target_mpp=target_mpp,
                         patch_px=patch_px,
                         min_tissue=min_tissue, max_crop_px=max_crop_px, k=k,
                         min_similarity=min_similarity, question=question, rrf_k=rrf_k,
                         towers=tuple(towers))
    create_selector(selector, **opts.selector_options())  # validate options before any work
    if question is not None:  # a question steers matching: it needs an index and a term
        from .evidence.captions import check_question

        check_question(question, index=index)
    if opts.towers and question is None:
        raise SelectionError(f"{keyword('towers')} rank figures by the question: pass "
                             f"{option('question', 'TEXT')} too, or drop the towers")
    tower_encoders: dict[str, Any] = {}
    if index is not None:
        opened = _open_index(index)  # a damaged index fails before any output is touched
        index = opened
        if opts.towers:  # a missing tower or its weights fail before any output, too
            from .evidence.towers import create_tower_encoders

            tower_encoders = create_tower_encoders(opened, opts.towers, device=device,
                                                   weights=weights)
    out = Path(out)
    timings: dict[str, float] = {}
    show = progress_enabled(progress)

    def step(name: str, t0: float) -> None:
        timings[name] = round(time.perf_counter() - t0, 3)
        if show:
            log.info("%-9s %.2fs", name, timings[name])

    from .slide_outputs import check_output_name, hold_slide_outputs

    with open_slide(slide, mpp=mpp) as s, \
            hold_slide_outputs(out, check_output_name(s.name, s.path)):
        # Under the lock from here to the published result: the check that cached outputs
        # belong to this slide (load_tissue, by content fingerprint) and every write after
        # it happen in one run at a time, so two slides of one name can never mix.
        t = time.perf_counter()
        mask = _tissue(s, out, force=force)
        step("tissue", t)
        t = time.perf_counter()
        grid = _grid(s, mask, out, opts, force=force)
        if len(grid) == 0:
            from .slide_ops import greyscale_hint

            grey = greyscale_hint(s)
            if grey:
                raise SelectionError(f"{s.path}: no tissue found; {grey}")
            raise SelectionError(
                f"{s.path}: no tissue found (0 patches of {patch_px} px at {target_mpp} µm/px "
                f"with ≥ {min_tissue:.0%} tissue); check the mask in "
                f"{out / 'thumbnails'}, lower {keyword('min_tissue')}, or edit the GeoJSON in "
                "QuPath")
        step("grid", t)

        t = time.perf_counter()
        enc = _patch_encoder(models, device=device, weights=weights)
        emb = extract_features(s, grid, enc, device=device, batch_size=batch_size,
                               workers=workers, out=out, progress=progress, mpp=mpp,
                               overwrite=force)
        step("features", t)

        t = time.perf_counter()
        att = _attention(s, grid, emb, out, opts, device=device, weights=weights, mpp=mpp,
                         force=force, progress=progress)
        step("attention", t)

        result = finish_select(s, grid, mask, att, select_dir(out, s.name), opts,
                               encoder_entry=_encoder_entry(enc), index=index, device=device,
                               weights=weights, synthetic=synthetic, report=report,
                               timings=timings, towers=tower_encoders)
    return result


def finish_select(slide: Any, grid: Any, mask: Any, att: Any, sdir: str | os.PathLike[str],
                  opts: SelectOptions, *, encoder_entry: Mapping[str, Any],
                  index: str | os.PathLike[str] | None = None, device: str = "cpu",
                  weights: Mapping[str, str] | None = None, synthetic: bool = False,
                  report: bool = True, timings: dict[str, float] | None = None,
                  towers: Mapping[str, Any] | None = None) -> Any:
    """Selection → crops → matching → evidence.json (+ report) from computed attention.

    The part of :func:`select` after the attention stage, shared with the batch ``select``
    step. Writes into ``sdir``: ``windows.json``, ``crops/``, ``evidence.json``, and with
    ``report`` also ``report.html`` and ``overview.png``. ``index`` (a folder or an open
    :class:`~wsikit.evidence.FigureIndex`) is verified first, and ``sdir`` is published as
    one unit (:func:`wsikit.publish.staged_folder`): a failure or kill leaves the previous
    result or none, never a mix. ``towers`` (``{name: encoder}``) join a question's fusion.
    """
    from .publish import staged_folder

    if index is not None:
        index = _open_index(index)  # validated before the result folder is touched
    with staged_folder(sdir) as work:  # published as one unit: all files of this run or none
        return _finish_into(slide, grid, mask, att, Path(work), opts, final=Path(sdir),
                            encoder_entry=encoder_entry, index=index, device=device,
                            weights=weights, synthetic=synthetic, report=report,
                            timings=timings, towers=towers)


def _finish_into(slide: Any, grid: Any, mask: Any, att: Any, sdir: Path, opts: SelectOptions,
                 *, final: Path, encoder_entry: Mapping[str, Any], index: Any, device: str,
                 weights: Mapping[str, str] | None, synthetic: bool, report: bool,
                 timings: dict[str, float] | None,
                 towers: Mapping[str, Any] | None = None) -> Any:
    """Write every file of the result into the staging folder ``sdir``; paths recorded in
    them are relative to it, absolute ones (and the result's ``base_dir``) are computed from
    ``final``, the folder ``sdir`` becomes when published."""
    from .crops import save_crop
    from .evidence import EvidenceRegion, EvidenceResult
    from .selectors import create_selector

    s = slide
    weights = dict(weights or {})
    timings = timings if timings is not None else {}
    sel = create_selector(opts.selector, **opts.selector_options())

    def step(name: str, t0: float) -> None:
        timings[name] = round(time.perf_counter() - t0, 3)

    t = time.perf_counter()
    # windows never run past the slide edge, so no crop is ever padded
    windows = sel(att.scores, att.coords, grid.stride_l0, slide_size=tuple(s.dimensions))
    write_json_atomic(sdir / "windows.json", windows.to_dict())
    step("selection", t)

    t = time.perf_counter()
    crops, crop_images = [], []
    for w in windows:   # by rank: r1 is the most salient region
        crop = save_crop(s, w, sdir / "crops", name=f"{w.id}_x{w.scale}",
                         max_px=opts.max_crop_px, relative_to=sdir)
        crops.append(crop)
        if index is not None:
            from PIL import Image

            with Image.open(sdir / crop.path) as im:
                crop_images.append(np.asarray(im.convert("RGB")))
    step("crops", t)

    t = time.perf_counter()
    matches: list[list[dict]] = [[] for _ in crops]
    below_floor: list[int | None] = [None for _ in crops]
    index_entry = None
    crop_enc_entry = None
    floor_entry = None
    if index is not None:
        found = _match(crop_images, index, opts, device=device, weights=weights,
                       base_dir=final, towers=towers)
        matches, below_floor, floor_entry = found.matches, found.below_floor, found.floor
        index_entry = found.index.to_evidence_dict()
        crop_enc_entry = _encoder_entry(found.encoder)
        step("matching", t)

    from .attention import describe

    models_entry: dict[str, Any] = {"patch_encoder": dict(encoder_entry),
                                    "attention": describe(att)}
    if crop_enc_entry is not None:
        models_entry["crop_encoder"] = crop_enc_entry
    from .evidence.ids import region_uid, slide_id
    from .evidence.paths import portable_path

    sid = slide_id(s)
    regions = []
    for w, crop, found, dropped in zip(windows, crops, matches, below_floor, strict=True):
        wd = w.to_dict()
        regions.append({"id": w.id, "uid": region_uid(sid, w.id, wd["box"]), **wd,
                        "usable_tissue": _usable_tissue(grid, wd["box"]),
                        "crop": {"path": crop.path,
                                 "abspath": portable_path(final / crop.path, final)[1],
                                 "width": crop.width, "height": crop.height, "mpp": crop.mpp},
                        "matches": found, "below_floor": dropped})
    selection = {"selector": opts.selector, **_jsonable(opts.selector_options()),
                 "min_score_value": windows.params.get("min_score_value"),
                 "patch_px": grid.patch_px, "target_mpp": grid.target_mpp,
                 "patch_size_l0": grid.stride_l0, "patches": len(grid),
                 "figures_per_region": opts.k, "min_similarity": floor_entry}
    from .patching import upsampling_note

    if note := upsampling_note(s.name, grid.slide_mpp, grid.target_mpp):
        selection["warnings"] = [note]  # shown in the report and the summary, too
    if opts.question:
        selection.update(question=opts.question, fusion={
            "method": "rrf", "k": opts.rrf_k,
            "channels": ["image", "caption BM25",
                         *(f"{kind}:{name}" for name in opts.towers
                           for kind in ("vl_text", "vl_image"))]})
    W, H = s.dimensions
    result = EvidenceResult(
        slide={"id": sid, "path": str(s.path), "name": s.name, "width": W, "height": H,
               "mpp": s.mpp, "mpp_source": s.mpp_source, "backend": s.backend,
               "vendor": s.vendor,
               **({"bad_tiles": list(s.bad_tiles)} if getattr(s, "bad_tiles", None) else {})},
        models=models_entry, selection=selection,
        regions=tuple(EvidenceRegion.from_dict(r) for r in regions),
        index=index_entry, empty_scales={str(k_): v for k_, v in windows.empty.items()},
        synthetic=bool(synthetic), base_dir=final)
    doc = result.to_dict()
    write_json_atomic(sdir / "evidence.json", doc)
    from .evidence.regions_geojson import REGIONS_GEOJSON, write_regions_geojson

    write_regions_geojson(sdir / REGIONS_GEOJSON, doc["regions"])  # QuPath annotations

    if report:
        t = time.perf_counter()
        _write_report(s, sdir, doc, mask, att, grid)
        step("report", t)
    write_json_atomic(sdir / "timings.json", timings)
    return result


def _usable_tissue(grid: Any, box: Mapping[str, int]) -> float | None:
    """Mean usable tissue fraction (tissue without ink or folds, from the mask) of the patches
    a window covers (``box``: level-0 ``x``, ``y``, ``width``, ``height``); None when the
    grid does not know it (a TRIDENT or CLAM coordinate file)."""
    x, y, w, h = (int(box[k]) for k in ("x", "y", "width", "height"))
    c = np.asarray(grid.coords)
    sel = (c[:, 0] >= x) & (c[:, 0] < x + w) & (c[:, 1] >= y) & (c[:, 1] < y + h)
    value = float(np.asarray(grid.tissue, np.float64)[sel].mean()) if sel.any() else 0.0
    return round(value, 3) if math.isfinite(value) else None


def _jsonable(d: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(dict(d), default=list))


def _write_report(slide: Any, sdir: Path, doc: Mapping[str, Any], mask: Any, att: Any,
                  grid: Any) -> None:
    from .report import render_overview_png, write_report

    thumb = slide.thumbnail(max_size=1600)
    ds = slide.dimensions[0] / thumb.shape[1]
    geo = mask.to_geojson()
    arts = mask.artefacts_geojson()
    attention = (att.scores, att.coords, grid.stride_l0)
    write_report(sdir / "report.html", doc, thumbnail=thumb, thumbnail_downsample=ds,
                 tissue_geojson=geo, attention=attention, base_dir=sdir,
                 artefacts_geojson=arts)
    render_overview_png(sdir / "overview.png", doc, thumbnail=thumb, thumbnail_downsample=ds,
                        tissue_geojson=geo, attention=attention, artefacts_geojson=arts)


def load_result(path: str | os.PathLike[str]) -> Any:
    """Read an ``evidence.json`` back as an :class:`~wsikit.evidence.EvidenceResult`."""
    from .evidence import EvidenceResult

    try:
        with open(path, encoding="utf-8") as f:
            return EvidenceResult.from_dict(json.load(f), base_dir=Path(path).parent)
    except (OSError, json.JSONDecodeError) as exc:
        raise EvidenceError(f"{path}: cannot read evidence JSON ({exc})") from exc
