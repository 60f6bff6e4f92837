"""``wsikit select``: a slide in, a few salient multi-scale regions and their evidence out.

:func:`select` is a one-slide run of the batch steps (:mod:`wsikit.run.builtin_steps`), in
this process, under the slide's one lock: segment → patch → features → attention → select, each
reused from an earlier run (``select`` or ``batch`` into the same folder) when its record says
it was made with the same options from the same inputs. Outputs follow
:class:`wsikit.outputs.layout.OutputLayout`; the result is ``<out>/select/<slide>/evidence.json``
(with ``regions.geojson`` for QuPath, crops, ``report.html`` and ``overview.png``).

The Python function mirrors the command line and returns the
:class:`wsikit.evidence.EvidenceResult` written to ``evidence.json``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from ..errors import EvidenceError, SelectionError, error_message
from .options import PipelineOptions, RunKeywords, RunSettings, resolve_run

if TYPE_CHECKING:
    from ..evidence import EvidenceResult

__all__ = ["load_result", "select"]


def select(slide: str | os.PathLike[str], options: PipelineOptions | None = None,
           settings: RunSettings | None = None, *, out: str | os.PathLike[str] = "wsikit_out",
           mpp: float | None = None, **overrides: Unpack[RunKeywords]) -> EvidenceResult:
    """Find salient regions of ``slide`` at several scales and (with ``index``) their evidence.

    Runs the steps up to ``select`` on the one slide in this process (the batch runner's
    :func:`~wsikit.run.steps.run_steps`, so ``wsikit batch`` into the same folder reuses
    them and vice versa), holding the slide's one lock, and records them
    in ``<out>/state/<slide>.json`` as a batch run does.

    Parameters
    ----------
    slide : path-like
        Whole-slide image (anything :func:`wsikit.slide.open_slide` reads).
    options : PipelineOptions, optional
        Every result-changing option (:mod:`wsikit.run.options`; defaults there), the same as
        ``wsikit batch`` takes.
    settings : RunSettings, optional
        Device, batch size, reader processes, threads, progress and ``force``: they never
        change a result.
    out : path-like
        Output folder (:class:`wsikit.outputs.layout.OutputLayout`); the result goes to
        ``<out>/select/<slide>/``.
    mpp : float, optional
        Level-0 µm/px overriding the slide's metadata.
    **overrides
        Any field of the option classes or of :class:`~wsikit.run.options.RunSettings` by name
        (:class:`~wsikit.run.options.RunKeywords`), applied over ``options`` and ``settings``:
        ``index`` (a figure index folder or an open :class:`~wsikit.evidence.FigureIndex`),
        ``k``, ``encoder``, ``target_mpp``, ``device``, ``force``, … Their meaning and
        defaults are documented once, on the classes of :mod:`wsikit.run.options`.

    Returns
    -------
    EvidenceResult
        Also written to ``<out>/select/<slide>/evidence.json``.

    Raises
    ------
    SlideError, MppError
        The slide cannot be read or has no resolution (pass ``mpp``), or its file name cannot
        name outputs (``..svs``, not valid UTF-8:
        :func:`wsikit.outputs.slide_outputs.check_output_name`).
    SelectionError
        No tissue was found, invalid selection options, or an unknown keyword.
    EvidenceError
        A question without an index (the same check as ``wsikit batch``:
        :func:`wsikit.run.checks.check_options`).
    CacheError
        ``out`` holds the outputs of another slide of the same name, or a file wsikit did not
        write is in the way of one this run writes in the result folder.

    Notes
    -----
    One run at a time writes a slide's outputs under ``out``: ``select`` holds the slide's
    one lock (:func:`~wsikit.outputs.slide_outputs.hold_slide_outputs`); a second ``select`` (or a
    ``batch`` runner) of the same slide waits for the first, then reuses its steps. Files in
    ``<out>/select/<slide>/`` that wsikit did not write are kept.

    Examples
    --------
    >>> from wsikit import select
    >>> result = select("slide.svs", index="figures/", k=5)       # doctest: +SKIP
    >>> from wsikit.run.options import PipelineOptions, RunSettings
    >>> opts = PipelineOptions.create(encoder="heuristic", scales="4,2")
    >>> opts.selection.scales
    (4, 2)
    >>> result = select("slide.svs", opts, RunSettings(device="cuda"))  # doctest: +SKIP
    """
    from .._progress import progress_enabled
    from ..outputs.slide_outputs import check_output_name, hold_slide_outputs
    from ..slide import open_slide
    from .builtin_steps import open_index_once
    from .checks import check_options
    from .cohort_slide import CohortSlide
    from .slide_ops import check_tissue_owner
    from .state import JobFolder, record_slide, reusable_records
    from .steps import BatchConfig, SlideContext, resolve_steps, run_steps

    options, settings, _ = resolve_run(overrides, options, settings)
    selector = check_options(options)  # the checks batch makes, before any work
    force = settings.force
    config = BatchConfig(steps=resolve_steps(["select"]), options=options,
                         batch_size=settings.batch_size, loader_workers=settings.loader_workers,
                         decode=settings.decode,
                         progress=progress_enabled(settings.progress))
    # built once for the run: the selector of the check; the index (verified) and the
    # question's towers, opened before the slide is read, so a damaged one fails first
    cache: dict[Any, Any] = {("selector", options.selection): selector}
    given = overrides.get("index")
    open_index_once(config, settings.device, cache,
                    opened=None if given is None or isinstance(given, (str, os.PathLike))
                    else given)  # an open FigureIndex is used as it is
    with settings.cores(), open_slide(slide, mpp=mpp) as s:
        name = check_output_name(s.name, s.path)
        job = JobFolder(out)
        cohort_slide = CohortSlide(slide_id=name, path=Path(s.path), mpp=mpp)
        ctx = SlideContext(cohort_slide, job, config, device=settings.device, handle=s,
                           force=force, cache=cache)  # computes the fingerprint once, for all
        with hold_slide_outputs(out, name, stale_after=job.stale_after):
            # Under the lock from here to the recorded result: the check that earlier
            # outputs belong to this slide (content fingerprint) and every write after it
            # happen in one run at a time, so two slides of one name can never mix.
            fingerprint = ctx.fingerprint  # the run's one computation, passed to every check
            if not force:
                check_tissue_owner(s, job.root, name, fingerprint=fingerprint)
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
                result["error"] = {"type": type(exc).__name__, "message": error_message(exc),
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
    from ..evidence import EvidenceResult

    try:
        with open(path, encoding="utf-8") as f:
            return EvidenceResult.from_dict(json.load(f), base_dir=Path(path).parent)
    except (OSError, json.JSONDecodeError) as exc:
        raise EvidenceError(f"{path}: cannot read evidence JSON ({exc})") from exc
