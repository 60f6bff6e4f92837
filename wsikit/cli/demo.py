"""``wsikit demo``: run everything on embedded synthetic data (no weights, no network)."""

from __future__ import annotations

import argparse

from ._common import DefaultsHelpFormatter, output_dir, positive_int
from .select import add_format_option

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from ..outputs.layout import OutputLayout
    from ..run.demos import demo
    from .select import print_result

    result = demo(args.out, k=args.k, progress=getattr(args, "progress", None))
    sdir = OutputLayout(args.out).select_dir(result.slide["name"])
    print("SYNTHETIC demo data (generated slide and atlas PDF; not real patients or papers)")
    print_result(result, sdir, args.format)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``demo`` sub-command."""
    p = sub.add_parser(
        "demo", help="run the whole pipeline on generated synthetic data (no weights needed)",
        description=(
            "Generate a synthetic slide with a planted region of dense nuclei and a synthetic "
            "PDF of captioned figures, build a figure index with the weight-free encoder, and "
            "run 'wsikit select' against it. Prints where evidence.json and report.html are. "
            "All demo data is labelled synthetic."),
        formatter_class=DefaultsHelpFormatter)
    p.add_argument("--out", default="wsikit_demo", type=output_dir, help="output folder")
    p.add_argument("-k", type=positive_int, default=3, help="matched figures per region")
    add_format_option(p)
    p.set_defaults(func=_run)
