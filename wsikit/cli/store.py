"""``wsikit store``: the zarr cohort feature store (convert to/from the h5 layout, list)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]

_EPILOG = """\
examples:
  wsikit store convert job/features_conch_v1_5/ cohort.zarr        # h5 files -> zarr store
  wsikit store convert cohort.zarr out/                            # -> out/features_<enc>/*.h5
  wsikit store convert job/features_heuristic s3://bucket/c.zarr   # any fsspec URL
  wsikit store ls cohort.zarr
"""


def _is_store(src: str) -> bool:
    return "://" in src or (Path(src) / "zarr.json").is_file()


#: Top-level entries of wsikit's output layout (:class:`wsikit.outputs.layout.OutputLayout`).
_LAYOUT_ENTRIES = {"contours_geojson", "masks", "artefacts", "thumbnails", "patches",
                   "attention", "select", "state", "locks", "run.json", "summary.json"}


def _store_owner(folder: Path) -> str | None:
    """None when ``folder`` is empty or a zarr feature store wsikit wrote, else why not."""
    from ..features.store import STORE_SCHEMA

    meta = folder / "zarr.json"
    if meta.is_file():
        try:
            attrs = json.loads(meta.read_text(encoding="utf-8")).get("attributes") or {}
        except (OSError, ValueError, AttributeError):
            return "holds a zarr.json that is not a zarr group's"
        if isinstance(attrs, dict) and attrs.get("wsikit") == STORE_SCHEMA:
            return None
        return "is a zarr store that wsikit did not write"
    if any(folder.iterdir()):
        return "exists, holds other files and is not a wsikit feature store (no zarr.json)"
    return None


def _results_owner(folder: Path) -> str | None:
    """None when ``folder`` is empty or a wsikit output folder (it holds entries of the
    output layout: ``features_<encoder>/``, ``patches/``, ``run.json``, ...), else why not."""
    names = {p.name for p in folder.iterdir()}
    if not names or any(n in _LAYOUT_ENTRIES or n.startswith("features_") for n in names):
        return None
    return ("holds files and no wsikit output (no features_<encoder>/, patches/, "
            "run.json, ...)")


def _convert(args: argparse.Namespace) -> int:
    from ..errors import FeatureError
    from ..features.store import h5_to_zarr, zarr_to_h5
    from ..outputs.overwrite import check_output_folder

    src_is_store = _is_store(args.src)
    inputs = [] if "://" in args.src else [args.src]
    if "://" not in args.dst:   # a remote store is checked where it is opened
        check_output_folder(
            args.dst, inputs=inputs, force=args.force, error=FeatureError,
            what="h5 feature files" if src_is_store else "zarr feature store",
            owner=_results_owner if src_is_store else _store_owner,
            may_hold_inputs=src_is_store)
    if src_is_store:
        files = zarr_to_h5(args.src, args.dst, overwrite=args.overwrite)
        print(f"{args.src}: {len(files)} slide(s) -> {args.dst}/features_<encoder>/",
              file=sys.stdout)
    else:
        slides = h5_to_zarr(args.src, args.dst, overwrite=args.overwrite)
        print(f"{args.src}: {len(slides)} slide(s) -> zarr store {args.dst}", file=sys.stdout)
    return 0


def _ls(args: argparse.Namespace) -> int:
    from ..features.store import open_store

    store = open_store(args.store, mode="r")
    for sid in store.slides():
        group = store.root[sid]
        shape = group["features"].shape
        print(f"{sid}\t{group.attrs.get('encoder')}\t{shape[0]} x {shape[1]}", file=sys.stdout)
    return 0


def register(subparsers: Any) -> None:
    """Add ``wsikit store convert`` and ``wsikit store ls``."""
    p = subparsers.add_parser(
        "store", help="zarr cohort feature store: convert to/from h5, ls",
        description="A zarr cohort feature store holds one group per slide ('features' (N, D) "
                    "float32 in row chunks, 'coords' (N, 2) int64, the h5 files' attributes), "
                    "each written atomically, in a folder or at any fsspec URL.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    c = sub.add_parser("convert", help="h5 feature files <-> zarr store (direction from SRC)")
    c.add_argument("src", help="features_<encoder>/ folder or .h5 file, or a zarr store")
    c.add_argument("dst", help="zarr store (folder or URL), or the output folder for h5 files")
    c.add_argument("--overwrite", action="store_true",
                   help="replace existing h5 files or store groups (default: refuse)")
    c.add_argument("--force", action="store_true",
                   help="write into an existing folder that wsikit did not write (never into "
                        "SRC or a folder holding it)")
    c.set_defaults(func=_convert)
    ls = sub.add_parser("ls", help="list the complete slides of a store")
    ls.add_argument("store", help="zarr store folder or URL")
    ls.set_defaults(func=_ls)
