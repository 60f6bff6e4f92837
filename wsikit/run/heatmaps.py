"""``wsikit heatmap``: a slide's per-patch scores as overlay files a viewer or QuPath opens.

:func:`heatmap` builds each layer asked for and writes it with
:func:`wsikit.look.heatmap_files.write_layer_files` into ``<out>/heatmaps/<slide>/`` (a
pyramidal TIFF of the slide's size, a thumbnail PNG with the legend, the legend as SVG and the
QuPath GeoJSON tiles), then records the layers in ``heatmaps.json`` there. The layers:

``importance``
    The weight-free importance (:mod:`wsikit.models.importance`): the one ``select`` computed
    when ``<out>/attention/<slide>.h5`` holds it for the current grid, else computed here.
``attention``
    TITAN's per-patch attention over CONCH v1.5 features (needs both models' weights): the
    one ``select`` computed, else computed here (from ``features_conch_v1_5/`` when present).
``prompt:TEXT``
    The cosine similarity of every patch to TEXT under the image-text ``towers``
    (:func:`wsikit.selection.question.patch_embeddings`; their mean with several).
a CSV or HDF5 file
    A user's per-patch scores (:func:`wsikit.look.layer_files.read_user_layer`).

The patches are those of ``<out>/patches/<slide>_patches.h5`` when it is the current grid of
this slide with the grid options asked for (``select`` or ``patch`` made it), else a grid is
made as ``wsikit patch`` makes it. Everything happens under the slide's one lock
(:func:`wsikit.outputs.slide_outputs.hold_slide_outputs`), and every file is written atomically:
a batch writing the same slide is waited for, never mixed with.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._hints import option
from ..errors import SelectionError
from .options import HeatmapOptions, PipelineOptions, RunSettings, resolve_run

if TYPE_CHECKING:
    from ..look.heatmap import HeatmapLayer
    from ..patches.grid import TileGrid
    from ..slide import Slide

__all__ = ["HeatmapResult", "heatmap"]

#: The record of the layers written into a slide's heatmap folder.
MANIFEST = "heatmaps.json"
#: Names of the layers wsikit computes (anything else is a ``prompt:`` or a file).
COMPUTED = ("importance", "attention")


@dataclass(frozen=True)
class HeatmapResult:
    """What :func:`heatmap` wrote.

    Attributes
    ----------
    slide : str
        The slide's output name.
    folder : Path
        ``<out>/heatmaps/<slide>/``.
    layers : tuple of dict
        Per layer: its provenance (:meth:`~wsikit.look.heatmap.HeatmapLayer.describe`) and
        ``files`` (``tiff``, ``png``, ``svg``, ``geojson``, relative to ``folder``).
    """

    slide: str
    folder: Path
    layers: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the folder as a string)."""
        return {"slide": self.slide, "folder": str(self.folder), "layers": list(self.layers)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HeatmapResult:
        """Inverse of :meth:`to_dict`."""
        return cls(str(data["slide"]), Path(data["folder"]), tuple(data["layers"]))


def _split(overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    names = {f.name for f in fields(HeatmapOptions)}
    return ({k: v for k, v in overrides.items() if k in names},
            {k: v for k, v in overrides.items() if k not in names})


def _check(hopts: HeatmapOptions, towers: tuple[str, ...]) -> list[str]:
    """The layer specs, checked before any work: names, palette, files, towers."""
    from ..look.heatmap import PALETTES

    specs = list(hopts.layers) or ["importance"]
    if hopts.palette not in PALETTES:
        raise SelectionError(f"{option('palette', hopts.palette)}: unknown palette; use one of "
                             f"{', '.join(PALETTES)}")
    if not 0.0 <= float(hopts.opacity) <= 1.0:
        raise SelectionError(f"{option('opacity', hopts.opacity)} must be in [0, 1]")
    for spec in specs:
        if spec in COMPUTED:
            continue
        if spec.startswith("prompt:"):
            if not spec[len("prompt:"):].strip():
                raise SelectionError(f"{option('layers', spec)}: the prompt is empty; give "
                                     "words after 'prompt:' (e.g. prompt:'dense nuclei')")
            if not towers:
                raise SelectionError(f"{option('layers', spec)} needs an image-text tower to "
                                     "compare the text with the patches: add --tower NAME "
                                     "(quiltnet_b32, plip, clip_vit_b32) and its --weights")
            continue
        if not Path(spec).is_file():
            raise SelectionError(f"{option('layers', spec)}: not a layer name (importance, "
                                 "attention, prompt:TEXT) and no such file; give one of those "
                                 "or the path of a CSV/HDF5 file of patch scores")
    if towers:
        from ..evidence.towers import check_tower_encoder

        for name in towers:
            check_tower_encoder(name)
    return specs


def heatmap(slide: str | os.PathLike[str], options: HeatmapOptions | None = None,
            pipeline: PipelineOptions | None = None, settings: RunSettings | None = None, *,
            out: str | os.PathLike[str] = "wsikit_out", mpp: float | None = None,
            **overrides: Any) -> HeatmapResult:
    """Write heatmap layers of ``slide`` as overlay files (the Python twin of ``wsikit
    heatmap``; see the module docstring).

    Parameters
    ----------
    slide : path-like
        Whole-slide image.
    options : HeatmapOptions, optional
        The layers and how they are drawn (:class:`wsikit.run.options.HeatmapOptions`).
    pipeline : PipelineOptions, optional
        Grid options (a grid is made when ``out`` has none), ``attention``/``weights``/
        ``precision`` and ``towers`` (for ``prompt:`` layers).
    settings : RunSettings, optional
        Device, batch size, reader processes, threads, progress.
    out : path-like
        The output folder (the one ``select`` wrote, to reuse its grid and attention).
    mpp : float, optional
        Level-0 µm/px overriding the slide's metadata.
    **overrides
        Any field of :class:`~wsikit.run.options.HeatmapOptions` (``layers``, ``palette``,
        ``threshold``, ``opacity``, ...), of the pipeline options or of the run settings, by
        name.

    Returns
    -------
    HeatmapResult
        The folder and, per layer, its provenance and files.

    Raises
    ------
    SelectionError
        An unknown layer, palette or option, a ``prompt:`` layer without a tower.
    LayerFileError
        A user's file that cannot be read as per-patch scores (file, row and fix named).
    WeightsError
        ``attention`` without CONCH v1.5 and TITAN weights, a tower without its weights.

    Examples
    --------
    >>> from wsikit.run.heatmaps import heatmap
    >>> heatmap("slide.svs", layers=["importance", "scores.csv"], out="out")  # doctest: +SKIP
    """
    from ..look.heatmap_files import layer_stem, write_layer_files
    from ..outputs.layout import OutputLayout
    from ..outputs.slide_outputs import check_output_name, hold_slide_outputs
    from ..slide import open_slide

    hopts, opts, run, towers = _resolve(dict(overrides), options, pipeline, settings)
    specs = _check(hopts, towers)
    layout = OutputLayout(out)
    with open_slide(slide, mpp=mpp, on_bad_tile=run.on_bad_tile) as s:
        name = check_output_name(s.name, s.path)
        with hold_slide_outputs(out, name, command="wsikit heatmap"):
            grid = _grid(s, out, name, opts, run) if any(
                spec in COMPUTED or spec.startswith("prompt:") for spec in specs) else None
            layers = _layers(specs, s, grid, out, name, opts, run, hopts, towers)
            folder = layout.heatmap_dir(name)
            thumb = s.thumbnail(max_size=1600)
            size = (int(s.dimensions[0]), int(s.dimensions[1]))
            mpp_l0 = s.mpp if s.mpp == s.mpp else None
            written = []
            for layer in layers:
                files = write_layer_files(layer, folder, level0_size=size, thumbnail=thumb,
                                          mpp=mpp_l0, palette=hopts.palette,
                                          threshold=hopts.threshold, opacity=hopts.opacity)
                written.append({**layer.describe(), "stem": layer_stem(layer),
                                "palette": hopts.palette, "threshold": hopts.threshold,
                                "files": {k: p.name for k, p in files.items()}})
            _record(folder, s, written)
    return HeatmapResult(name, folder, tuple(written))


def _resolve(overrides: dict[str, Any], options: HeatmapOptions | None,
             pipeline: PipelineOptions | None, settings: RunSettings | None
             ) -> tuple[HeatmapOptions, PipelineOptions, RunSettings, tuple[str, ...]]:
    """:func:`heatmap`'s options from its arguments: ``(heatmap options, pipeline options,
    run settings, the towers of prompt layers)``; an unknown keyword is refused."""
    heat_kw, run_kw = _split(overrides)
    known = set(PipelineOptions.names()) | {f.name for f in fields(RunSettings)}
    if set(run_kw) - known:
        raise SelectionError(
            f"heatmap() got unknown keyword(s) {', '.join(map(repr, sorted(set(run_kw) - known)))}"
            f"; it takes {', '.join(f.name for f in fields(HeatmapOptions))}, the pipeline "
            "options and the run settings (wsikit.run.options)")
    if "layers" in heat_kw and isinstance(heat_kw["layers"], str):
        heat_kw["layers"] = (heat_kw["layers"],)
    if "layers" in heat_kw:
        heat_kw["layers"] = tuple(heat_kw["layers"])
    changes: dict[str, Any] = heat_kw
    hopts = replace(options or HeatmapOptions(), **changes)
    # the towers of prompt layers (no question here: PipelineOptions would refuse them alone)
    towers = tuple(run_kw.pop("towers", None) or
                   (pipeline.matching.towers if pipeline is not None else ()))
    if pipeline is not None and pipeline.matching.towers:
        pipeline = pipeline.replace(towers=())
    opts, run, _ = resolve_run(run_kw, pipeline, settings, where="heatmap")
    return hopts, opts, run, towers


def _record(folder: Path, slide: Slide, written: list[dict[str, Any]]) -> None:
    """Merge ``written`` into ``heatmaps.json`` (a layer written again replaces its entry)."""
    from .._atomic import write_json_atomic

    path = folder / MANIFEST
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
        kept = [e for e in old.get("layers", []) if isinstance(e, dict)
                and e.get("name") not in {w["name"] for w in written}]
    except (OSError, ValueError, AttributeError):
        kept = []
    write_json_atomic(path, {"format": "wsikit.heatmaps/v1", "slide": slide.name,
                             "width": int(slide.dimensions[0]),
                             "height": int(slide.dimensions[1]),
                             "mpp": slide.mpp if slide.mpp == slide.mpp else None,
                             "layers": kept + written})


def _grid(s: Slide, out: str | os.PathLike[str], name: str, opts: PipelineOptions,
          run: RunSettings) -> TileGrid:
    """The grid of ``out`` made with these grid options (the run's reuse rule: the current
    one when it was made with them), else a new one, as ``wsikit patch`` makes it."""
    from .pipeline import patch

    g = opts.grid
    return patch(s.path, out=out, mpp=s.mpp if s.mpp == s.mpp else None,
                 target_mpp=g.target_mpp, patch_px=g.patch_px, overlap_px=g.overlap_px,
                 min_tissue=g.min_tissue, tissue_mpp=g.tissue_mpp,
                 min_tissue_um2=g.min_tissue_um2, progress=run.progress,
                 threads=run.threads, on_bad_tile=run.on_bad_tile)


def _layers(specs: list[str], s: Slide, grid: TileGrid | None, out: str | os.PathLike[str],
            name: str, opts: PipelineOptions, run: RunSettings, hopts: HeatmapOptions,
            towers: tuple[str, ...]) -> list[HeatmapLayer]:
    from ..look.layer_files import layer_from_attention, prompt_layer, read_user_layer

    layers: list[HeatmapLayer] = []
    vectors: dict[str, Any] | None = None
    encoders: dict[str, Any] = {}
    for spec in specs:
        if spec in COMPUTED:
            assert grid is not None
            layers.append(layer_from_attention(_attention(spec, s, grid, out, name, opts, run),
                                               grid.patch_size_l0))
        elif spec.startswith("prompt:"):
            assert grid is not None
            import numpy as np

            from ..models import create_encoder
            from ..selection.question import is_random, patch_embeddings, text_similarity

            if vectors is None:  # the patches are embedded once for every prompt
                weights = opts.models.weight_files()
                encoders = {t: create_encoder(t, weights=weights.get(t), device=run.torch_device)
                            for t in dict.fromkeys(towers)}
                vectors = patch_embeddings(s, grid, encoders, device=run.torch_device,
                                           batch_size=run.batch_size,
                                           workers=run.loader_workers or 0,
                                           progress=run.progress, threads=run.threads)
            text = spec[len("prompt:"):].strip()
            sims = text_similarity(vectors, text, encoders)
            layers.append(prompt_layer(np.mean(list(sims.values()), axis=0), grid.coords,
                                       grid.patch_size_l0, prompt=text,
                                       towers=list(encoders),
                                       random_weights=any(map(is_random, encoders.values()))))
        else:
            layers.append(read_user_layer(spec, level0_size=(int(s.dimensions[0]),
                                                             int(s.dimensions[1])),
                                          patch_size_l0=hopts.layer_patch_size,
                                          value=hopts.value_column))
    return layers


def _attention(spec: str, s: Slide, grid: TileGrid, out: str | os.PathLike[str], name: str,
               opts: PipelineOptions, run: RunSettings) -> Any:
    """The importance (``heuristic``) or TITAN attention of ``grid``: ``select``'s when
    ``out`` holds it for this grid, else computed (never written into ``attention/``, whose
    file belongs to the ``select`` run's records)."""
    from ..outputs.layout import OutputLayout
    from ..selection.attention import cached_attention, compute_attention

    source = "heuristic" if spec == "importance" else "titan"
    layout = OutputLayout(out)
    found = cached_attention(layout.attention(name), grid, source)
    if found is not None:
        return found
    emb = None
    if source == "titan":
        from ..features.extract import Embeddings, extract_features

        feats = layout.features("conch_v1_5", name)
        if feats.is_file():
            emb = Embeddings.from_h5(feats)
        if emb is None or not (len(emb) == len(grid)
                               and (emb.coords == grid.coords).all()):
            emb = extract_features(s, grid, "conch_v1_5", device=run.torch_device,
                                   batch_size=run.batch_size, workers=run.loader_workers or 0,
                                   weights=opts.models.weight_file("conch_v1_5"),
                                   progress=run.progress, importance=False,
                                   threads=run.threads)
    return compute_attention(s, grid, source=source, embeddings=emb, device=run.torch_device,
                             weights=opts.models.weight_file("titan"), progress=run.progress,
                             threads=run.threads)
