"""Sphinx extension: write the generated reference pages at the start of every build.

The CLI reference comes from the argument parser (:mod:`wsikit_cli`), the API pages from the
packages' ``__all__`` (:mod:`wsikit_api`). A page is rewritten only when its text changed, so
an incremental build re-reads only what changed; API pages of packages that are gone are
removed.
"""

from __future__ import annotations

from pathlib import Path

from wsikit_api import API_DIR, api_pages
from wsikit_cli import CLI_PAGE, render_cli_reference


def write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it already holds exactly that."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def write_reference_pages(srcdir: Path) -> list[Path]:
    """Write the CLI reference and the API pages under ``srcdir``; return their paths."""
    pages = {CLI_PAGE: render_cli_reference(), **api_pages()}
    written = [Path(srcdir) / rel for rel in pages]
    for path, text in zip(written, pages.values(), strict=True):
        write_if_changed(path, text)
    for stale in set((Path(srcdir) / API_DIR).glob("*.md")) - set(written):
        stale.unlink()
    return written


def _on_builder_inited(app) -> None:
    write_reference_pages(Path(app.srcdir))


def setup(app) -> dict:
    app.connect("builder-inited", _on_builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
