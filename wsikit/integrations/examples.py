"""Shared command line of ``examples/rag_*.py``: index, query, work folder, k and floor.

Without ``--index`` the small synthetic demo index is built under ``--work`` (a few seconds,
weight-free heuristic encoder); without ``--query`` a synthetic dense-nuclei crop is used.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["example_inputs", "example_parser", "example_select_options"]

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
    p.add_argument("--mpp", type=float, default=None,
                   help="µm/px of a --query slide that records none (or records a wrong one)")
    return p


def example_select_options(args: argparse.Namespace) -> dict[str, object]:
    """The retriever's ``select_options`` from the example's command line (``--mpp``)."""
    if args.mpp is not None and not args.mpp > 0:
        raise SystemExit(f"--mpp {args.mpp}: give the slide's positive µm/px, e.g. 0.25")
    return {} if args.mpp is None else {"mpp": args.mpp}


def example_inputs(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    """``(index folder, query path, work folder)``, building the demo ones when not given."""
    from ..run.demos import demo_crop, demo_index

    work = Path(args.work)
    index = Path(args.index) if args.index else demo_index(work, progress=False)
    query = Path(args.query) if args.query else demo_crop(work / "query_dense_crop.png")
    return index, query, work
