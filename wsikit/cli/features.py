"""``wsikit features``: patch features of one or more slides (TRIDENT-compatible HDF5)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path

from ..run.options import GridOptions, RunSettings
from ._common import mpp_type, non_negative_int, output_dir, positive_float, positive_int
from .pipeline_options import add_option_flags, add_weights_flag, option_type, weights_arg

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from ..models.configs import AUTO_PREFERENCE
    from ..outputs.layout import OutputLayout
    from ..run.slide_ops import extract_slide_features

    files = weights_arg(args, args.encoder)  # every file checked before any slide is read
    weights = files.get(AUTO_PREFERENCE["patch"][0] if args.encoder == "auto" else args.encoder)
    for slide in args.slides:
        emb = extract_slide_features(
            slide, encoder=args.encoder, out=args.out, device=args.device,
            batch_size=args.batch_size, workers=args.workers, weights=weights,
            target_mpp=args.target_mpp, patch_px=args.patch_px, mpp=args.mpp,
            precision=args.precision, coords=args.coords, reader=args.reader,
            overwrite=args.overwrite, wait=args.wait, decode=args.decode)
        name = str(emb.attrs.get("slide") or Path(slide).stem)
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
            "(N, 2) level-0 px). The patch grid is read from --coords or "
            "OUT/patches/<slide>_patches.h5, else made from a tissue mask and saved there. "
            "A grid in OUT that is not the slide's current one (another slide's, changed, or "
            "made from an earlier tissue mask or GeoJSON) is refused. A complete feature file "
            "for the same grid and encoder is reused; an interrupted run never leaves a file "
            "that looks complete. While another job (wsikit batch, select, patch, …) writes the "
            "slide's outputs in OUT the run is refused, naming it (--wait waits). Tiled TIFFs "
            "(SVS, generic) are read tile by tile with DCT-scaled JPEG decoding; other formats "
            "through the slide reader."),
    )
    p.add_argument("slides", nargs="+", metavar="SLIDE", help="slide file(s)")
    p.add_argument("--encoder", default="auto",
                   help="encoder name (see 'wsikit models'); 'heuristic' needs no weights; "
                        "'auto' uses CONCH v1.5 when its weights are available, else the "
                        "heuristic (default: auto)")
    p.add_argument("--out", required=True, type=output_dir, help="output folder (TRIDENT layout)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    p.add_argument("--batch-size", type=positive_int, default=64,
                   help="patches per forward pass (default: 64)")
    p.add_argument("--workers", type=non_negative_int, default=2,
                   help="reader processes; 0 reads in the main process (default: 2)")
    add_weights_flag(p)
    p.add_argument("--precision", choices=("bf16", "fp16", "fp32"),
                   help="autocast precision (default: the encoder's on CUDA, fp32 on CPU)")
    p.add_argument("--target-mpp", type=positive_float,
                   help="patch resolution in µm/px (default: the encoder's, 0.5 for CONCH)")
    p.add_argument("--patch-px", type=option_type(GridOptions, "patch_px"),
                   help="patch side in px at --target-mpp (default: the encoder's, 512 for "
                        "CONCH)")
    p.add_argument("--mpp", type=mpp_type("--mpp"),
                   help="level-0 µm/px overriding the slide's metadata (e.g. 0.25 for 40x)")
    p.add_argument("--coords", help="coordinate file (wsikit/TRIDENT/CLAM HDF5) to use")
    p.add_argument("--reader", choices=("auto", "tiles", "slide"), default="auto",
                   help="patch reader: direct TIFF tiles, the slide reader, or auto")
    # --decode from its one definition (wsikit.run.options.RunSettings.decode)
    add_option_flags(p, RunSettings, skip={f.name for f in fields(RunSettings)} - {"decode"})
    p.add_argument("--overwrite", action="store_true",
                   help="recompute even when a complete feature file exists")
    p.add_argument("--wait", action="store_true",
                   help="when another job is writing this slide's outputs in OUT: wait for it "
                        "to finish (default: refuse, naming it)")
    p.set_defaults(func=_run)
