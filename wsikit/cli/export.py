"""``wsikit export``: wsikit outputs in other ecosystems' formats (AnnData for scverse)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register"]


def _anndata(args: argparse.Namespace) -> int:
    from ..integrations.scverse import export_anndata

    adata = export_anndata(args.features, args.out, force=args.force,
                           drop_nonfinite=args.drop_nonfinite)
    print(f"{args.features}: {adata.n_obs} patches x {adata.n_vars} features "
          f"({adata.uns['wsikit']['encoder']}) -> {args.out}", file=sys.stdout)
    return 0


def register(subparsers: Any) -> None:
    """Add ``wsikit export anndata``."""
    p = subparsers.add_parser("export", help="export features to other formats (AnnData)",
                              description="Export wsikit outputs for other tools.")
    sub = p.add_subparsers(dest="export_command", metavar="FORMAT", required=True)
    a = sub.add_parser(
        "anndata", help="patch features -> .h5ad (scanpy, squidpy, scverse)",
        description="Write a feature file as AnnData: features as X, level-0 top-left "
                    "coordinates in obsm['spatial'], patch size, mpp and encoder provenance "
                    "in uns['wsikit']. Needs anndata: pip install \"wsikit[scverse]\".")
    a.add_argument("features", metavar="FEATURES.h5",
                   help="feature file (features_<encoder>/<slide>.h5, wsikit or TRIDENT)")
    a.add_argument("--out", required=True, metavar="X.h5ad",
                   help="AnnData file to write (never the feature file; an existing file is "
                        "replaced only when it is wsikit's export of the same slide)")
    a.add_argument("--force", action="store_true",
                   help="replace an existing --out that is another file or another slide's "
                        "export")
    a.add_argument("--drop-nonfinite", action="store_true",
                   help="leave out patches whose features hold NaN or Inf (counted in a "
                        "warning); by default such a file is refused")
    a.set_defaults(func=_anndata)
