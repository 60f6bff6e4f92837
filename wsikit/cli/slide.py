"""``wsikit info``, ``wsikit segment`` and ``wsikit patch``."""

from __future__ import annotations

import argparse
import json

from ..run.options import RunSettings
from ._common import output_dir
from .pipeline_options import add_option_flags, add_stage_flags, given_values

__all__ = ["register"]

def _info(args: argparse.Namespace) -> int:
    from ..run.slide_ops import info

    data = info(args.slide, mpp=getattr(args, "mpp", None), backend=getattr(args, "backend", None))
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
    from ..run.pipeline import segment

    tm = segment(args.slide, out=args.out, **given_values(args))
    print(f"{tm.slide_name}: {len(tm.polygons())} tissue piece(s), {tm.tissue_fraction:.1%} of "
          f"the slide, {tm.tissue_area_um2 / 1e6:.2f} mm²  -> "
          f"{OutputLayout(args.out).tissue_geojson(tm.slide_name)}")
    return 0


def _patch(args: argparse.Namespace) -> int:
    from ..outputs.layout import OutputLayout
    from ..run.pipeline import patch

    grid = patch(args.slide, out=args.out, **given_values(args))  # warnings go to stderr
    print(f"{grid.slide_name}: {len(grid)} patches of {grid.patch_px} px at "
          f"{grid.target_mpp:g} µm/px ({grid.patch_size_l0} level-0 px, slide "
          f"{grid.slide_mpp:g} µm/px from {grid.mpp_source})  -> "
          f"{OutputLayout(args.out).coords(grid.slide_name)}")
    return 0


def _slide_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("slide", help="slide file (SVS, NDPI, MRXS, tiled TIFF, … or PNG/JPEG)")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``info``, ``segment`` and ``patch`` to the ``wsikit`` command line."""
    p = subparsers.add_parser(
        "info", help="show a slide's size, levels and resolution (µm/px) with its source",
        description="Show a slide's size, pyramid levels, vendor, associated images and its "
                    "level-0 resolution (µm/px) with where it came from (openslide, aperio, "
                    "TIFF tags, objective power).")
    _slide_argument(p)
    add_option_flags(p, RunSettings, only=("mpp", "backend"))
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(func=_info)

    p = subparsers.add_parser(
        "segment", help="segment tissue: GeoJSON polygons, mask PNG, outlined thumbnail",
        description="Segment tissue on a ~8 µm/px thumbnail (robust to grey backgrounds, "
                    "pen ink and dark borders). Writes OUT/contours_geojson/<slide>.geojson "
                    "(level-0 px, holes as interiors; opens in QuPath), OUT/masks/<slide>.png "
                    "and OUT/thumbnails/<slide>_tissue.png, and records them in "
                    "OUT/state/<slide>.json (a rerun with the same options reuses them, as "
                    "'wsikit select' does). A GeoJSON edited since (e.g. in QuPath) is kept as "
                    "the slide's tissue unless --force is given.")
    _slide_argument(p)
    p.add_argument("--out", required=True, type=output_dir, help="output folder")
    add_stage_flags(p, ("segment",))
    p.set_defaults(func=_segment)

    p = subparsers.add_parser(
        "patch", help="patch grid at an exact µm/px -> TRIDENT-compatible coordinates .h5",
        description="Lay a patch grid (anchored at the level-0 origin) over the tissue at an "
                    "exact target resolution and write OUT/patches/<slide>_patches.h5 "
                    "(TRIDENT-compatible) and OUT/thumbnails/<slide>_grid.png, recorded in "
                    "OUT/state/<slide>.json. Segments first when OUT has no tissue mask of the "
                    "slide (the segmentation options not given: as the slide's segmentation "
                    "in OUT); OUT/contours_geojson/<slide>.geojson edited in QuPath is used.")
    _slide_argument(p)
    p.add_argument("--out", required=True, type=output_dir, help="output folder")
    add_stage_flags(p, ("patch", "grid_thumbnail"))
    p.set_defaults(func=_patch)
