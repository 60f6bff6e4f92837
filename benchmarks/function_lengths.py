"""The longest functions of wsikit, measured with :mod:`ast` (issue 38: the longest function
at most 80 lines).

A function's length is its lines from ``def`` to its last line (``end_lineno - lineno + 1``):
signature, docstring and body, not its decorators. Methods count as functions; a function
nested in another counts as its own and also inside its parent's lines (the parent is the one
a reader has to hold in mind).

Usage::

    python benchmarks/function_lengths.py [--top 20] [--limit 80] [--exclude run/ ...]
                                          [--markdown]

Prints the ``--top`` longest and, with ``--limit``, exits non-zero when a function outside the
excluded folders is longer (``--exclude run/ features/extract.py cli/``: paths relative to
``wsikit/``, a trailing ``/`` for a folder).
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class FunctionLength:
    """One function: where it is and how long."""

    module: str      # path relative to wsikit/, e.g. "slide/slide.py"
    name: str        # qualified within the module, e.g. "Slide.read_region"
    line: int
    lines: int


def function_lengths(package: Path) -> list[FunctionLength]:
    """Every function and method under ``package``, longest first."""
    found: list[FunctionLength] = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        module = path.relative_to(package).as_posix()
        _walk(tree, module, "", found)
    return sorted(found, key=lambda f: (-f.lines, f.module, f.line))


def _walk(node: ast.AST, module: str, prefix: str, found: list[FunctionLength]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + child.name
            end = child.end_lineno if child.end_lineno is not None else child.lineno
            found.append(FunctionLength(module, name, child.lineno, end - child.lineno + 1))
            _walk(child, module, name + ".", found)
        elif isinstance(child, ast.ClassDef):
            _walk(child, module, prefix + child.name + ".", found)
        else:
            _walk(child, module, prefix, found)


def excluded(module: str, exclude: list[str]) -> bool:
    """Whether ``module`` lies in one of the ``exclude`` folders or is one of its files."""
    return any(module.startswith(e) if e.endswith("/") else module == e for e in exclude)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--exclude", nargs="*", default=[])
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = parser.parse_args(argv)
    lengths = function_lengths(ROOT / "wsikit")
    rows = lengths[:args.top]
    if args.markdown:
        print("| lines | function | module |\n|---:|---|---|")
        for f in rows:
            print(f"| {f.lines} | `{f.name}` | `{f.module}:{f.line}` |")
    else:
        for f in rows:
            print(f"{f.lines:5d}  {f.module}:{f.line}  {f.name}")
    if args.limit is None:
        return 0
    over = [f for f in lengths if f.lines > args.limit and not excluded(f.module, args.exclude)]
    print(f"\n{len(over)} function(s) over {args.limit} lines outside "
          f"{', '.join(args.exclude) or 'nothing excluded'}")
    for f in over:
        print(f"{f.lines:5d}  {f.module}:{f.line}  {f.name}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
