"""``wsikit heatmap``: per-patch scores as a pyramidal overlay, a PNG and QuPath tiles."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from typing import Any

from ..run.options import GridOptions, HeatmapOptions, MatchOptions, ModelOptions, RunSettings
from ._common import DefaultsHelpFormatter, mpp_type, output_dir
from .pipeline_options import add_option_flags, weights_arg

__all__ = ["register"]


def _only(cls: type, *keep: str) -> set[str]:
    """The fields of ``cls`` other than ``keep`` (to skip when adding its flags)."""
    return {f.name for f in fields(cls)} - set(keep)


def _run(args: argparse.Namespace) -> int:
    from ..run.heatmaps import heatmap

    weights = weights_arg(args)  # NAME=PATH only: a heatmap has no encoder a bare file is for
    # flags not given leave no attribute (the fields' defaults hold)
    heat = {f.name: getattr(args, f.name) for f in fields(HeatmapOptions) if hasattr(args, f.name)}
    heat["layers"] = tuple(heat.get("layers") or HeatmapOptions.layers)
    grid = {f.name: getattr(args, f.name) for f in fields(GridOptions) if hasattr(args, f.name)}
    run = {f.name: getattr(args, f.name) for f in fields(RunSettings)
           if hasattr(args, f.name) and f.name != "mpp"}  # --mpp: heatmap's own keyword
    result = heatmap(args.slide, HeatmapOptions(**heat), out=args.out,
                     mpp=getattr(args, "mpp", None), weights=weights,
                     towers=tuple(getattr(args, "towers", None) or ()),
                     precision=getattr(args, "precision", None), **grid, **run)
    for layer in result.layers:
        files = layer["files"]
        print(f"{layer['name']}: {layer['with_value']} of {layer['patches']} patches, values "
              f"{layer['value_range'][0]:.4g} to {layer['value_range'][1]:.4g} "
              f"({layer['source']})", file=sys.stdout)
        print(f"  pyramid  {result.folder / files['tiff']}", file=sys.stdout)
        print(f"  png      {result.folder / files['png']}", file=sys.stdout)
        print(f"  qupath   {result.folder / files['geojson']}", file=sys.stdout)
    return 0


def register(sub: Any) -> None:
    """Add ``wsikit heatmap``."""
    p = sub.add_parser(
        "heatmap", help="write per-patch scores as a pyramidal overlay, a PNG and QuPath tiles",
        description=(
            "Draw layers of per-patch scores over a slide: the weight-free importance, TITAN "
            "attention, the similarity of every patch to a text prompt under an image-text "
            "tower, or your own scores (CSV or HDF5 of coordinates and values). Each layer is "
            "written to OUT/heatmaps/<slide>/ as a tiled pyramidal RGBA TIFF of the slide's "
            "size (OpenSlide, QuPath, tiffslide open it over the slide), a thumbnail PNG with "
            "its legend, the legend as SVG, and QuPath tile objects (GeoJSON) carrying the "
            "value as a measurement. The grid and importance of an earlier 'wsikit select' "
            "into OUT are reused."),
        formatter_class=DefaultsHelpFormatter)
    p.add_argument("slide", help="whole-slide image (.svs, .tif, .ndpi, .mrxs, ...)")
    p.add_argument("--out", default="wsikit_out", type=output_dir,
                   help="output folder (the one 'wsikit select' wrote, to reuse its grid and "
                        "importance); layers in OUT/heatmaps/<slide>/")
    add_option_flags(p.add_argument_group("layers"), HeatmapOptions)
    models = p.add_argument_group("models")
    add_option_flags(models, MatchOptions, skip=_only(MatchOptions, "towers"))
    add_option_flags(models, ModelOptions, skip=_only(ModelOptions, "weights", "precision"))
    add_option_flags(p.add_argument_group("tissue and patches (when OUT has no grid)"),
                     GridOptions)
    run = p.add_argument_group("run")
    run.add_argument("--mpp", type=mpp_type("--mpp"), default=None,
                     help="level-0 µm/px overriding the slide's metadata")
    add_option_flags(run, RunSettings, skip=("force", "mpp", "backend", "reader", "wait"))
    p.set_defaults(func=_run)
