"""``wsikit features``: patch features of one or more slides (TRIDENT-compatible HDF5)."""

from __future__ import annotations

import argparse
import sys

from ._common import output_dir
from .pipeline_options import add_stage_flags, given_values

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from ..outputs.layout import OutputLayout
    from ..run.pipeline import features

    values = given_values(args)
    for slide in args.slides:
        emb = features(slide, out=args.out, **values)
        name = str(emb.attrs.get("slide") or slide)
        print(f"{slide}: {len(emb)} x {emb.features.shape[1]} features "
              f"({emb.label}) -> {OutputLayout(args.out).features(emb.encoder, name)}",
              file=sys.stdout)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``wsikit features``."""
    p = subparsers.add_parser(
        "features",
        help="extract patch features (TRIDENT-compatible HDF5)",
        description=(
            "Embed every tissue patch of each SLIDE with an encoder and write "
            "OUT/features_<encoder>/<slide>.h5 ('features' (N, D) float32 and 'coords' "
            "(N, 2) level-0 px), recorded in OUT/state/<slide>.json. The patch grid is the "
            "slide's grid in OUT when 'wsikit patch' made one (its patches are read at its "
            "size and resized to the encoder's input; grid options other than that grid's "
            "are refused, never used to replace it), else one made with the options given "
            "(--coords: a coordinate file), the encoder's grid by default (CONCH v1.5 and "
            "the heuristic: 512 px at 0.5 µm/px). "
            "A rerun with the same options reuses the features; an interrupted run never "
            "leaves a file that looks complete. Missing model weights are reported before "
            "any work. Tiled TIFFs (SVS, generic) are read tile by tile; other formats "
            "through the slide reader."),
    )
    p.add_argument("slides", nargs="+", metavar="SLIDE", help="slide file(s)")
    p.add_argument("--out", required=True, type=output_dir, help="output folder (TRIDENT layout)")
    add_stage_flags(p, ("features",))
    p.set_defaults(func=_run)
