"""``wsikit select``: a slide in, a few salient multi-scale regions and their evidence out.

:func:`select` is a one-slide run of the batch steps (:mod:`wsikit.batch.builtin_steps`), in
this process, under the slide's locks: segment → patch → features → attention → select, each
reused from an earlier run (``select`` or ``batch`` into the same folder) when its record says
it was made with the same options from the same inputs. Outputs follow
:class:`wsikit.layout.OutputLayout`; the result is ``<out>/select/<slide>/evidence.json``
(with ``regions.geojson`` for QuPath, crops, ``report.html`` and ``overview.png``).

The Python function mirrors the command line and returns the
:class:`wsikit.evidence.EvidenceResult` written to ``evidence.json``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import EvidenceError, SelectionError
from .options import (
    DEFAULT_BATCH_SIZE,
    GridOptions,
    MatchOptions,
    ModelOptions,
    OutputOptions,
    PipelineOptions,
    SelectionOptions,
)

if TYPE_CHECKING:
    from .evidence import EvidenceResult, FigureIndex

__all__ = ["load_result", "run_select", "select"]


def select(
    slide: str | os.PathLike[str],
    *,
    out: str | os.PathLike[str] = "wsikit_out",
    index: str | os.PathLike[str] | FigureIndex | None = None,
    mpp: float | None = None,
    encoder: str = ModelOptions.encoder,
    attention: str = ModelOptions.attention,
    weights: Mapping[str, str] | None = None,
    precision: str | None = ModelOptions.precision,
    selector: str = SelectionOptions.selector,
    scales: str | Sequence[int] | None = None,
    per_scale: int | None = None,
    min_coverage: float = SelectionOptions.min_coverage,
    max_iou: float = SelectionOptions.max_iou,
    margin: float = SelectionOptions.margin,
    layout: str = SelectionOptions.layout,
    min_score: float | str = SelectionOptions.min_score,
    k: int = MatchOptions.k,
    min_similarity: str | float | None = MatchOptions.min_similarity,
    question: str | None = MatchOptions.question,
    rrf_k: float = MatchOptions.rrf_k,
    towers: Sequence[str] = MatchOptions.towers,
    tissue_mpp: float = GridOptions.tissue_mpp,
    target_mpp: float = GridOptions.target_mpp,
    patch_px: int = GridOptions.patch_px,
    overlap_px: int = GridOptions.overlap_px,
    min_tissue: float = GridOptions.min_tissue,
    min_tissue_um2: float = GridOptions.min_tissue_um2,
    max_crop_px: int = OutputOptions.max_crop_px,
    report: bool = OutputOptions.report,
    synthetic: bool = OutputOptions.synthetic,
    device: str = "cpu",
    batch_size: int = DEFAULT_BATCH_SIZE,
    loader_workers: int | None = None,
    force: bool = False,
    progress: bool | None = None,
) -> EvidenceResult:
    """Find salient regions of ``slide`` at several scales and (with ``index``) their evidence.

    Every option is one of :class:`wsikit.options.PipelineOptions` (defaults there), the
    same as ``wsikit batch`` takes; the last five are run settings that never change a result.

    Parameters
    ----------
    slide : path-like
        Whole-slide image (anything :func:`wsikit.io.open_slide` reads).
    out : path-like
        Output folder (:class:`wsikit.layout.OutputLayout`); the result goes to
        ``<out>/select/<slide>/``.
    index : path-like or FigureIndex, optional
        Figure index folder (``wsikit index build``); each crop is matched against it.
    mpp : float, optional
        Level-0 µm/px overriding the slide's metadata.
    encoder : str
        Patch encoder: ``auto`` takes CONCH v1.5 when its weights are found, otherwise the
        weight-free heuristic (labelled as such everywhere); any name of
        :func:`wsikit.list_encoders`.
    attention : {"auto", "titan", "heuristic"}
        Attention source: ``auto`` = TITAN when CONCH v1.5 features and TITAN weights exist.
    weights : dict, optional
        ``{model name: weight file}`` overriding weight discovery.
    precision : {None, "fp32", "fp16", "bf16"}
        Autocast precision of the models (default: the model's on CUDA, fp32 on CPU).
    selector : str
        Selection strategy (:func:`wsikit.selectors.list_selectors`).
    scales, per_scale, min_coverage, max_iou, margin, layout
        Multi-scale selection options (see ARCHITECTURE.md; default scales (8, 4, 2, 1),
        one window per scale). ``layout="nested"`` lets a finer window zoom wholly into an
        accepted one (a zoom chain into the most salient region); ``"disjoint"`` keeps every
        pair at least ``margin`` patches apart edge to edge. ``selector="topk"`` takes
        ``per_scale`` as the number of patches (default 8) and refuses ``scales`` other
        than ``(1,)``.
    min_score : "median" or float
        Saliency floor: every returned region scores at least the median cell score of the
        slide (``"median"``, default), at least this number, or anything (``0``).
    k, min_similarity
        Figures looked up per region, and the floor a match must pass to be kept: a
        background percentile such as ``"p95"`` (default), a cosine similarity, or ``"none"``.
    question, rrf_k
        With a question, figures are ranked by reciprocal-rank fusion (constant ``rrf_k``) of
        image similarity and caption BM25 of the question; it is recorded in the selection.
    towers : sequence of str
        With a question: vision-language towers of the index (``wsikit index tower``, e.g.
        ``"quiltnet_b32"``) whose question→figure and crop→figure rankings join the fusion.
        Their weights must be found (``weights``); the similarity floor still applies to
        the index encoder's image similarity.
    tissue_mpp, target_mpp, patch_px, overlap_px, min_tissue, min_tissue_um2
        Tissue mask resolution and patch grid (default 512 px at 0.5 µm/px, ≥ 10 % tissue);
        tissue pieces under ``min_tissue_um2`` µm² are left out of the mask.
    max_crop_px : int
        Longest side of the saved crops.
    report : bool
        Write ``report.html`` and ``overview.png``.
    synthetic : bool
        Mark the result as produced from synthetic demo data.
    device, batch_size, loader_workers
        Feature extraction settings (``loader_workers``: patch reader processes, default 0 on
        CPU and 4 on CUDA).
    force : bool
        Recompute every stage instead of reusing earlier outputs (an edited tissue GeoJSON is
        then replaced by a new segmentation).
    progress : bool, optional
        Progress bars (default: on unless ``WSIKIT_NO_PROGRESS=1``).

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
    One run at a time writes a slide's outputs under ``out``: a second ``select`` (or a
    ``batch`` runner) of the same slide waits for the first, then reuses its steps. Files in
    ``<out>/select/<slide>/`` that wsikit did not write are kept.
    """
    options = PipelineOptions.create(
        encoder=encoder, attention=attention, weights=weights, precision=precision,
        selector=selector, scales=scales, per_scale=per_scale, min_coverage=min_coverage,
        max_iou=max_iou, margin=margin, layout=layout, min_score=min_score,
        index=None if index is None else _index_path(index), k=k,
        min_similarity=min_similarity, question=question, rrf_k=rrf_k, towers=towers,
        tissue_mpp=tissue_mpp, target_mpp=target_mpp, patch_px=patch_px,
        overlap_px=overlap_px, min_tissue=min_tissue, min_tissue_um2=min_tissue_um2,
        max_crop_px=max_crop_px, report=report,
        synthetic=synthetic)
    return run_select(slide, options, out=out, mpp=mpp, device=device, batch_size=batch_size,
                      loader_workers=loader_workers, force=force, progress=progress)


def _index_path(index: str | os.PathLike[str] | FigureIndex) -> str:
    from .evidence import FigureIndex

    return str(index.path if isinstance(index, FigureIndex) else Path(index))


def run_select(slide: str | os.PathLike[str], options: PipelineOptions, *,
               out: str | os.PathLike[str] = "wsikit_out", mpp: float | None = None,
               device: str = "cpu", batch_size: int = DEFAULT_BATCH_SIZE,
               loader_workers: int | None = None, force: bool = False,
               progress: bool | None = None) -> EvidenceResult:
    """:func:`select` with its options as one :class:`~wsikit.options.PipelineOptions`.

    Runs the steps up to ``select`` on the one slide in this process (the batch runner's
    :func:`~wsikit.batch.steps.run_steps`), holding the slide's write lock and its runner
    lock, records them in ``<out>/state/<slide>.json`` as a batch run does, and raises what
    a step raises (a slide without tissue: :class:`~wsikit.errors.SelectionError`).
    """
    from ._progress import progress_enabled
    from .batch.builtin_steps import index_and_towers
    from .batch.cohort import CohortSlide
    from .batch.runner import hold_runner_lock, record_slide, reusable_records
    from .batch.state import JobFolder
    from .batch.steps import BatchConfig, SlideContext, resolve_steps, run_steps
    from .io import open_slide
    from .io.fingerprint import slide_fingerprint
    from .options import check_options
    from .slide_ops import check_tissue_owner
    from .slide_outputs import check_output_name, hold_slide_outputs

    check_options(options)  # the checks batch makes, before any work
    config = BatchConfig(steps=resolve_steps(["select"]), options=options,
                         batch_size=batch_size, loader_workers=loader_workers,
                         progress=progress_enabled(progress))
    with open_slide(slide, mpp=mpp) as s:
        name = check_output_name(s.name, s.path)
        job = JobFolder(out)
        cohort_slide = CohortSlide(slide_id=name, path=Path(s.path), mpp=mpp)
        ctx = SlideContext(cohort_slide, job, config, device=device, handle=s, force=force)
        index_and_towers(ctx)  # a damaged index or missing tower fails before any output
        with hold_slide_outputs(out, name), hold_runner_lock(job, name):
            # Under the locks from here to the recorded result: the check that earlier
            # outputs belong to this slide (content fingerprint) and every write after it
            # happen in one run at a time, so two slides of one name can never mix.
            fingerprint = slide_fingerprint(s.path)
            if not force:
                check_tissue_owner(s, job.root, name)
            state = job.read_state(name)
            ctx.records = {} if force else reusable_records(state, cohort_slide, fingerprint)
            record_slide(job, cohort_slide, fingerprint, state, running=True,
                         steps=ctx.records)
            result: dict[str, Any] = {"status": "failed", "steps": ctx.records}
            try:
                run = run_steps(ctx, config.steps)
                result = {"status": "skipped" if run.skipped else "done",
                          "reason": run.skipped, "steps": run.records, "reused": run.reused}
            except Exception as exc:
                result["error"] = {"type": type(exc).__name__, "message": str(exc),
                                   "step": ctx.current}
                raise
            finally:
                record_slide(job, cohort_slide, fingerprint, state, result=result)
        if run.skipped is not None:
            raise SelectionError(run.skipped)
    found = ctx.artifacts.get("result")
    return found if found is not None else load_result(
        job.layout.select_dir(name) / "evidence.json")


def load_result(path: str | os.PathLike[str]) -> EvidenceResult:
    """Read an ``evidence.json`` back as an :class:`~wsikit.evidence.EvidenceResult`."""
    from .evidence import EvidenceResult

    try:
        with open(path, encoding="utf-8") as f:
            return EvidenceResult.from_dict(json.load(f), base_dir=Path(path).parent)
    except (OSError, json.JSONDecodeError) as exc:
        raise EvidenceError(f"{path}: cannot read evidence JSON ({exc})") from exc
