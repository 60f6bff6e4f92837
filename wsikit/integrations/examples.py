"""Shared command line of ``examples/rag_*.py``: index, query, work folder, k and floor.

Without ``--index`` the small synthetic demo index is built under ``--work`` (a few seconds,
weight-free heuristic encoder); without ``--query`` a synthetic dense-nuclei crop is used.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["QUESTION", "example_inputs", "example_parser"]

QUESTION = "Which published figures resemble this region, and what do their captions say?"


def example_parser(doc: str) -> argparse.ArgumentParser:
    """The parser of an example whose module docstring is ``doc`` (first paragraph =
    description, the rest = epilog)."""
    head, _, rest = doc.partition("\n\n")
    p = argparse.ArgumentParser(description=head, epilog=rest,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", default=None, help="figure index folder (default: demo index)")
    p.add_argument("--query", default=None,
                   help="image, slide or evidence.json (default: a synthetic crop)")
    p.add_argument("--out", "--work", dest="work", default="wsikit_rag_demo",
                   help="folder for the demo index, demo crop and select outputs")
    p.add_argument("-k", type=int, default=5, help="figures looked up per region")
    p.add_argument("--min-similarity", default="p95",
                   help="floor: background percentile (p95) or cosine similarity")
    p.add_argument("--question", default=QUESTION)
    return p


def example_inputs(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    """``(index folder, query path, work folder)``, building the demo ones when not given."""
    from ..demos import demo_crop, demo_index

    work = Path(args.work)
    index = Path(args.index) if args.index else demo_index(work, progress=False)
    query = Path(args.query) if args.query else demo_crop(work / "query_dense_crop.png")
    return index, query, work
