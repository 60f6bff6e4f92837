"""Relative paths in wsikit's JSON outputs (:mod:`wsikit.outputs.paths`)."""

from __future__ import annotations

import os
from pathlib import Path

from wsikit.outputs.paths import portable_path, relative_path, resolve_path


def test_a_relative_path_through_a_linked_output_folder_still_resolves(tmp_path: Path) -> None:
    """An output folder that is a link (to scratch space): ``..`` is followed from where the
    folder really is, so the relative path is computed between the real folders."""
    slide = tmp_path / "job" / "slides" / "s.svs"
    slide.parent.mkdir(parents=True)
    slide.write_bytes(b"x")
    (tmp_path / "scratch" / "out" / "select" / "s").mkdir(parents=True)
    os.symlink(tmp_path / "scratch" / "out", tmp_path / "job" / "out")
    base = tmp_path / "job" / "out" / "select" / "s"
    naive = os.path.relpath(slide, base)
    assert not (base / naive).exists()            # what a lexical relpath would record
    rel = relative_path(slide, base)
    assert (base / rel).is_file() and not Path(rel).is_absolute()
    assert resolve_path(rel, None, base) == slide.resolve()


def test_a_linked_slide_stays_the_link(tmp_path: Path) -> None:
    target = tmp_path / "store" / "real.svs"
    target.parent.mkdir()
    target.write_bytes(b"x")
    link = tmp_path / "slides" / "case.svs"
    link.parent.mkdir()
    os.symlink(target, link)
    (tmp_path / "out").mkdir()
    assert relative_path(link, tmp_path / "out") == "../slides/case.svs"
    assert portable_path(link, tmp_path / "out") == ("../slides/case.svs", link.as_posix())


def test_the_relative_path_is_tried_before_the_absolute_one(tmp_path: Path) -> None:
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "a.png").write_bytes(b"x")
    (tmp_path / "old.png").write_bytes(b"y")
    assert resolve_path("a.png", str(tmp_path / "old.png"), tmp_path / "new") == \
        tmp_path.resolve() / "new" / "a.png"
    assert resolve_path("gone.png", str(tmp_path / "old.png"), tmp_path / "new") == \
        tmp_path.resolve() / "old.png"
    assert resolve_path("gone.png", None, tmp_path / "new") is None
    assert resolve_path(None, None, tmp_path) is None
    assert resolve_path("new", None, tmp_path, files_only=True) is None   # a folder
    assert resolve_path("new", None, tmp_path) == tmp_path.resolve() / "new"
