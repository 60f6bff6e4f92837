"""The ``wsikit`` command line.

Sub-commands live in one module per area (``wsikit/cli/<area>.py``), each exposing
``register(subparsers)`` that adds its parsers and sets ``func`` (``args -> int exit code``).
Errors derived from :class:`wsikit.errors.WsikitError` are printed as one clear line and turn
into exit code 2; exit code 1 means "ran, but some items failed" (e.g. batch).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from .._version import __version__
from ..errors import WsikitError

__all__ = ["main", "build_parser"]

#: Area modules that contribute sub-commands, in the order shown by ``wsikit --help``.
_AREAS = ("demo", "select", "slide", "features", "models", "evidence", "batch")


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every available sub-command."""
    parser = argparse.ArgumentParser(
        prog="wsikit",
        description=(
            "Whole-slide image toolkit: tissue, patches at exact µm/px, foundation-model "
            "features, slide attention, multi-scale region selection and captioned visual "
            "evidence from the literature. Run 'wsikit COMMAND --help' for details."
        ),
    )
    parser.add_argument("--version", action="version", version=f"wsikit {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for area in _AREAS:
        try:
            module = importlib.import_module(f"{__name__}.{area}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{area}":
                continue  # area not built yet
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except WsikitError as exc:
        print(f"wsikit {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("wsikit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
