"""``wsikit info``, ``wsikit segment`` and ``wsikit patch``."""

from __future__ import annotations

import argparse
import json

from ..run.options import GridOptions
from ._common import (
    fraction,
    mpp_type,
    non_negative_float,
    non_negative_int,
    output_dir,
)
from .pipeline_options import option_type

__all__ = ["register"]

_MPP_HELP = ("level-0 microns per pixel, overriding the file's metadata (needed when the slide "
             "has none; e.g. 0.25 for a 40x scan, 0.5 for 20x)")


def _info(args: argparse.Namespace) -> int:
    from ..run.slide_ops import info

    data = info(args.slide, mpp=args.mpp, backend=args.backend)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    w, h = data["dimensions"]
    print(f"{data['name']}  ({data['path']})")
    print(f"  backend      {data['backend']}  vendor {data['vendor']}")
    print(f"  size         {w} x {h} px" + (f"  ({data['size_mm'][0]} x {data['size_mm'][1]} mm)"
                                            if data["size_mm"] else ""))
    if data["mpp"] is None:
        print("  mpp          unknown (pass --mpp to set it)")
    else:
        print(f"  mpp          {data['mpp']:g} µm/px  (from {data['mpp_source']})")
    print(f"  objective    {data['objective_power'] or 'unknown'}")
    levels = ", ".join(f"{lw}x{lh} (/{ds:g})" for (lw, lh), ds in
                       zip(data["level_dimensions"], data["level_downsamples"], strict=True))
    print(f"  levels       {data['level_count']}: {levels}")
    print(f"  associated   {', '.join(data['associated_images']) or 'none'}")
    return 0


def _segment(args: argparse.Namespace) -> int:
    from ..outputs.layout import OutputLayout
    from ..run.slide_ops import segment

    tm = segment(args.slide, out=args.out, mpp=args.mpp, tissue_mpp=args.tissue_mpp,
                 min_tissue_um2=args.min_tissue_um2, min_hole_um2=args.min_hole_um2,
                 backend=args.backend, resegment=args.resegment, wait=args.wait)
    pieces = len(tm.polygons())
    print(f"{tm.slide_name}: {pieces} tissue piece(s), {tm.tissue_fraction:.1%} of the slide, "
          f"{tm.tissue_area_um2 / 1e6:.2f} mm²  -> "
          f"{OutputLayout(args.out).tissue_geojson(tm.slide_name)}")
    return 0


def _patch(args: argparse.Namespace) -> int:
    from ..outputs.layout import OutputLayout
    from ..run.slide_ops import patch

    grid = patch(args.slide, out=args.out, mpp=args.mpp, target_mpp=args.target_mpp,
                 patch_px=args.patch_px, overlap_px=args.overlap_px,
                 min_tissue=args.min_tissue, tissue_mpp=args.tissue_mpp,
                 min_tissue_um2=args.min_tissue_um2, min_hole_um2=args.min_hole_um2,
                 resegment=args.resegment, backend=args.backend,
                 wait=args.wait)  # warnings go to stderr
    print(f"{grid.slide_name}: {len(grid)} patches of {grid.patch_px} px at "
          f"{grid.target_mpp:g} µm/px ({grid.patch_size_l0} level-0 px, slide "
          f"{grid.slide_mpp:g} µm/px from {grid.mpp_source})  -> "
          f"{OutputLayout(args.out).coords(grid.slide_name)}")
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("slide", help="slide file (SVS, NDPI, MRXS, tiled TIFF, … or PNG/JPEG)")
    p.add_argument("--mpp", type=mpp_type("--mpp"), default=None, help=_MPP_HELP)
    p.add_argument("--backend", choices=("openslide", "tiffslide", "image"), default=None,
                   help="force a reader (default: OpenSlide, then tiffslide, then plain image)")


def _wait_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", action="store_true",
                   help="when another job (wsikit batch, select, …) is writing this slide's "
                        "outputs in OUT: wait for it to finish (default: refuse, naming it)")


def _segmentation_options(p: argparse.ArgumentParser, note: str = "") -> None:
    p.add_argument("--tissue-mpp", type=option_type(GridOptions, "tissue_mpp"), default=8.0,
                   help=f"µm/px of the thumbnail that is segmented{note} (default 8)")
    p.add_argument("--min-tissue-um2", type=non_negative_float, default=5e4,
                   help=f"drop tissue pieces smaller than this area in µm²{note} "
                        "(default 50000)")
    p.add_argument("--min-hole-um2", type=non_negative_float, default=1e4,
                   help=f"fill holes smaller than this area in µm²{note} (default 10000)")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``info``, ``segment`` and ``patch`` to the ``wsikit`` command line."""
    p = subparsers.add_parser(
        "info", help="show a slide's size, levels and resolution (µm/px) with its source",
        description="Show a slide's size, pyramid levels, vendor, associated images and its "
                    "level-0 resolution (µm/px) with where it came from (openslide, aperio, "
                    "TIFF tags, objective power).")
    _common(p)
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(func=_info)

    p = subparsers.add_parser(
        "segment", help="segment tissue: GeoJSON polygons, mask PNG, outlined thumbnail",
        description="Segment tissue on a ~8 µm/px thumbnail (robust to grey backgrounds, "
                    "pen ink and dark borders). Writes OUT/contours_geojson/<slide>.geojson "
                    "(level-0 px, holes as interiors; opens in QuPath), OUT/masks/<slide>.png "
                    "and OUT/thumbnails/<slide>_tissue.png. A GeoJSON edited since (e.g. in "
                    "QuPath) is kept as the slide's tissue unless --resegment is given.")
    _common(p)
    p.add_argument("--out", required=True, type=output_dir, help="output folder")
    _segmentation_options(p)
    p.add_argument("--resegment", action="store_true",
                   help="segment again even when OUT's GeoJSON was edited (e.g. in QuPath); "
                        "the edited file is kept as <slide>.geojson.bak")
    _wait_option(p)
    p.set_defaults(func=_segment)

    p = subparsers.add_parser(
        "patch", help="patch grid at an exact µm/px -> TRIDENT-compatible coordinates .h5",
        description="Lay a patch grid (anchored at the level-0 origin) over the tissue at an "
                    "exact target resolution and write OUT/patches/<slide>_patches.h5 "
                    "(TRIDENT-compatible) and OUT/thumbnails/<slide>_grid.png. Reuses "
                    "OUT/contours_geojson/<slide>.geojson if present (e.g. edited in QuPath).")
    _common(p)
    p.add_argument("--out", required=True, type=output_dir, help="output folder")
    p.add_argument("--target-mpp", type=mpp_type("--target-mpp"), default=0.5,
                   help="patch resolution in µm/px (default 0.5, i.e. '20x'); exact, not binned")
    p.add_argument("--patch-px", type=option_type(GridOptions, "patch_px"), default=512,
                   help="patch edge in pixels at --target-mpp (default 512)")
    p.add_argument("--overlap-px", type=non_negative_int, default=0,
                   help="overlap of neighbouring patches in pixels at --target-mpp (default 0)")
    p.add_argument("--min-tissue", type=fraction, default=0.1,
                   help="minimum tissue fraction of a kept patch, 0-1 (default 0.1)")
    _segmentation_options(p, note=" (when segmenting)")
    p.add_argument("--resegment", action="store_true",
                   help="segment again even if a GeoJSON already exists in OUT (an edited "
                        "one is kept as <slide>.geojson.bak)")
    _wait_option(p)
    p.set_defaults(func=_patch)
