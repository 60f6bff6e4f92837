"""The commands as Python functions: ``segment``, ``patch``, ``features`` and ``select``.

Each is one call of :func:`wsikit.run.slide_run.run_slide` with other steps, under the slide's
one lock, recorded in ``<out>/state/<slide>.json`` and reusing what an earlier run of any of
them (or ``wsikit batch`` into the same folder) made with the same options from the same
inputs:

==========  =====================================  =========================================
function    steps asked for                         returns
==========  =====================================  =========================================
segment     ``segment``                             :class:`~wsikit.tissue.mask.TissueMask`
patch       ``patch``, ``grid_thumbnail``           :class:`~wsikit.patches.grid.TileGrid`
features    ``features``                            :class:`~wsikit.features.extract.Embeddings`
select      ``select``                              :class:`~wsikit.evidence.EvidenceResult`
==========  =====================================  =========================================

Each takes the option objects of :mod:`wsikit.run.options` and any of their fields as a
keyword (``segment(slide, out="o", tissue_mpp=16)``); an option not given takes, for the steps
the function does not ask for itself, the value the slide's earlier record of that step was
made with (``patch(slide, patch_px=256)`` then ``features(slide)`` uses that grid).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from ..errors import EvidenceError, SelectionError, TissueError
from .options import PipelineOptions, RunKeywords, RunSettings, resolve_run

if TYPE_CHECKING:
    from ..evidence import EvidenceResult
    from ..features.extract import Embeddings
    from ..patches.grid import TileGrid
    from ..tissue.mask import TissueMask
    from .slide_run import SlideRun

__all__ = ["features", "load_result", "patch", "segment", "select"]

_PathLike = str | os.PathLike[str]


def _run(slide: _PathLike, out: _PathLike, steps: tuple[str, ...],
         options: PipelineOptions | None, settings: RunSettings | None,
         overrides: dict[str, Any], cache: dict[Any, Any] | None = None) -> SlideRun:
    """:func:`run_slide` with the keyword ``overrides`` applied; an options object given
    counts as every option given."""
    from .slide_run import run_slide

    given = None if options is not None else set(overrides) & set(PipelineOptions.names())
    options, settings, _ = resolve_run(overrides, options, settings)
    return run_slide(slide, out, steps, options, settings, given=given,
                     cache=cache).raise_for_status()


def segment(slide: _PathLike, options: PipelineOptions | None = None,
            settings: RunSettings | None = None, *, out: _PathLike = "wsikit_out",
            **overrides: Unpack[RunKeywords]) -> TissueMask:
    """Segment tissue: ``<out>/contours_geojson/<slide>.geojson`` (QuPath), the mask PNG and
    an outlined thumbnail (the ``segment`` step).

    A tissue GeoJSON edited since wsikit wrote it (e.g. in QuPath) or placed by hand is the
    slide's tissue: it is kept and rasterised (with a warning saying how to segment again),
    never replaced silently; with ``force`` the slide is segmented again and the edit first
    copied to ``<slide>.geojson.bak``.

    Parameters
    ----------
    slide : path-like
        Slide file.
    options, settings
        As :func:`select` (the segment step reads ``tissue_mpp``, ``min_tissue_um2`` and
        ``min_hole_um2``).
    out : path-like
        Output folder.
    **overrides
        Any option or setting by name (:class:`~wsikit.run.options.RunKeywords`).
    """
    run = _run(slide, out, ("segment",), options, settings, dict(overrides))
    if run.artifacts.mask is not None:
        return run.artifacts.mask
    from ..outputs.layout import OutputLayout
    from ..tissue.mask import TissueMask

    info = run.steps["segment"]["info"]
    width, height = (int(v) for v in info["level0_size"])
    layout = OutputLayout(out)
    mask = TissueMask.from_png(layout.mask(run.slide_id), level0_size=(width, height),
                               slide_mpp=float(info["mpp"]), slide_name=run.slide_id)
    return mask.with_artefacts_png(layout.artefacts(run.slide_id)["png"])


def patch(slide: _PathLike, options: PipelineOptions | None = None,
          settings: RunSettings | None = None, *, out: _PathLike = "wsikit_out",
          **overrides: Unpack[RunKeywords]) -> TileGrid:
    """The patch grid of a slide: ``<out>/patches/<slide>_patches.h5`` (TRIDENT-compatible)
    and ``<out>/thumbnails/<slide>_grid.png`` (the ``patch`` and ``grid_thumbnail`` steps,
    after the ``segment`` step they need).

    Parameters are those of :func:`segment`; the grid options are ``target_mpp``,
    ``patch_px`` (default: the encoder's, 512 px at 0.5 µm/px), ``overlap_px``,
    ``min_tissue`` and ``coords`` (a coordinate file to use instead). A slide without tissue
    gives an empty grid (its state says why it was skipped).
    """
    run = _run(slide, out, ("patch", "grid_thumbnail"), options, settings, dict(overrides))
    if run.artifacts.grid is not None:
        return run.artifacts.grid
    from ..outputs.layout import OutputLayout
    from ..patches.grid import TileGrid

    return TileGrid.from_h5(OutputLayout(out).coords(run.slide_id))


def features(slide: _PathLike, options: PipelineOptions | None = None,
             settings: RunSettings | None = None, *, out: _PathLike = "wsikit_out",
             **overrides: Unpack[RunKeywords]) -> Embeddings:
    """Patch features of a slide: ``<out>/features_<encoder>/<slide>.h5`` (the ``features``
    step, after the ``segment`` and ``patch`` steps it needs).

    The grid is the slide's grid in ``out`` when one was made (``wsikit patch``) and no grid
    option is given, else a grid with the options given (``coords``: a coordinate file),
    the encoder's by default (CONCH v1.5: 512 px at 0.5 µm/px). A slide without resolution
    metadata takes the mpp an earlier run in ``out`` was given, unless ``mpp`` is.

    Raises
    ------
    TissueError
        The slide has no tissue patches.
    WeightsError
        The encoder's weights are missing (before any work).
    """
    run = _run(slide, out, ("features",), options, settings, dict(overrides))
    if run.status == "skipped":
        raise TissueError(str(run.reason))
    if run.artifacts.embeddings is not None:
        return run.artifacts.embeddings
    from ..features.extract import Embeddings
    from ..outputs.layout import OutputLayout

    encoder = run.steps["features"]["info"]["encoder"]
    return Embeddings.from_h5(OutputLayout(out).features(encoder, run.slide_id))


def select(slide: _PathLike, options: PipelineOptions | None = None,
           settings: RunSettings | None = None, *, out: _PathLike = "wsikit_out",
           **overrides: Unpack[RunKeywords]) -> EvidenceResult:
    """Find salient regions of ``slide`` at several scales and (with ``index``) their evidence.

    Runs the steps up to ``select`` on the one slide in this process
    (:func:`~wsikit.run.slide_run.run_slide`, so ``wsikit batch`` into the same folder
    reuses them and vice versa), holding the slide's one lock, and records them in
    ``<out>/state/<slide>.json``.

    Parameters
    ----------
    slide : path-like
        Whole-slide image (anything :func:`wsikit.slide.open_slide` reads).
    options : PipelineOptions, optional
        Every result-changing option (:mod:`wsikit.run.options`; defaults there), the same as
        ``wsikit batch`` takes.
    settings : RunSettings, optional
        Device, batch size, reader processes, threads, progress, ``force``, ``mpp`` (level-0
        µm/px overriding the slide's metadata), ``wait``: they never change a result.
    out : path-like
        Output folder (:class:`wsikit.outputs.layout.OutputLayout`); the result goes to
        ``<out>/select/<slide>/``.
    **overrides
        Any field of the option classes or of :class:`~wsikit.run.options.RunSettings` by name
        (:class:`~wsikit.run.options.RunKeywords`), applied over ``options`` and ``settings``:
        ``index`` (a figure index folder or an open :class:`~wsikit.evidence.FigureIndex`),
        ``k``, ``encoder``, ``target_mpp``, ``device``, ``force``, ``mpp``, … Their meaning
        and defaults are documented once, on the classes of :mod:`wsikit.run.options`.

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
    WeightsError
        A model the steps need has no weights (before any work).
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
    cache = _select_cache(dict(overrides), options, settings)
    run = _run(slide, out, ("select",), options, settings, dict(overrides), cache)
    if run.status == "skipped":
        raise SelectionError(str(run.reason))
    if run.artifacts.result is not None:
        return run.artifacts.result
    from ..outputs.layout import OutputLayout

    return load_result(OutputLayout(out).select_dir(run.slide_id) / "evidence.json")


def _select_cache(overrides: dict[str, Any], options: PipelineOptions | None,
                  settings: RunSettings | None) -> dict[Any, Any]:
    """The cache of a ``select`` run after its checks, with the index (verified) and the
    question's towers opened once, before the slide is read, so a damaged index fails first;
    the run finds them in the cache. An open :class:`~wsikit.evidence.FigureIndex` given as
    ``index`` is used as it is."""
    from .checks import check_run
    from .select_stage import open_index_once
    from .steps import resolve_steps

    resolved, run_settings, _ = resolve_run(overrides, options, settings)
    cache: dict[Any, Any] = {}
    check_run(resolved, resolve_steps(["select"]), cache)
    given = overrides.get("index")
    open_index_once(resolved, run_settings.torch_device, cache,
                    opened=None if given is None or isinstance(given, (str, os.PathLike))
                    else given)
    return cache


def load_result(path: str | os.PathLike[str]) -> EvidenceResult:
    """Read an ``evidence.json`` back as an :class:`~wsikit.evidence.EvidenceResult`."""
    from ..evidence import EvidenceResult

    try:
        with open(path, encoding="utf-8") as f:
            return EvidenceResult.from_dict(json.load(f), base_dir=Path(path).parent)
    except (OSError, json.JSONDecodeError) as exc:
        raise EvidenceError(f"{path}: cannot read evidence JSON ({exc})") from exc
