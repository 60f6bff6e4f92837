"""The OpenSlide backend opens an MRXS slide whatever the case of its suffix (``X.MRXS``):
OpenSlide itself recognises MIRAX by ``.mrxs`` only."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from wsikit.errors import SlideError
from wsikit.slide import open_slide
from wsikit.slide.backends import _OpenSlideBackend, openslide_alias


def _upper(slide: Path) -> Path:
    """The MRXS slide ``case.mrxs`` (+ ``case/``) renamed ``case.MRXS`` (folder unchanged),
    as scanners and Windows copies name them."""
    upper = slide.with_name("case.MRXS")
    slide.rename(upper)
    return upper


def test_an_upper_case_mrxs_is_given_to_openslide_as_mrxs(tmp_path: Path, mrxs_like) -> None:
    upper = _upper(mrxs_like(tmp_path))
    alias, folder = openslide_alias(upper)
    assert folder is not None and alias.name == "case.mrxs"
    assert alias.resolve() == upper.resolve()
    # OpenSlide finds the data folder by the name less ".mrxs": the real folder
    assert (alias.parent / "case" / "Slidedat.ini").read_bytes() == (
        tmp_path / "case" / "Slidedat.ini").read_bytes()
    folder.cleanup()
    assert not alias.parent.exists()
    lower = mrxs_like(tmp_path / "b")
    assert openslide_alias(lower) == (lower, None)  # the lower-case name as it is


def test_openslide_reads_an_upper_case_mrxs_as_mirax(tmp_path: Path, mrxs_like) -> None:
    """The generated slide has no pixels, so OpenSlide's MIRAX reader fails on it: with the
    same error as for ``case.mrxs``, no longer 'Unsupported or missing image file' (the
    format not recognised), and its temporary alias is removed."""
    openslide = pytest.importorskip("openslide")
    lower = mrxs_like(tmp_path / "a")
    with pytest.raises(openslide.OpenSlideError) as as_lower:
        _OpenSlideBackend(lower)
    assert "Unsupported" not in str(as_lower.value)
    upper = _upper(mrxs_like(tmp_path / "b"))
    before = set(os.listdir(os.environ.get("TMPDIR", "/tmp")))
    with pytest.raises(openslide.OpenSlideError) as as_upper:
        _OpenSlideBackend(upper)
    assert str(as_upper.value) == str(as_lower.value)
    assert not {n for n in set(os.listdir(os.environ.get("TMPDIR", "/tmp"))) - before
                if n.startswith("wsikit-mrxs-")}
    with pytest.raises(SlideError, match="openslide: OpenSlideError: Key file") as err:
        open_slide(upper)  # MIRAX's own complaint, through wsikit's reader dispatch
    assert "Unsupported or missing image file" not in str(err.value)


def test_a_real_slide_renamed_with_an_upper_case_suffix_opens(cmu_small: Path,
                                                              tmp_path: Path) -> None:
    upper = tmp_path / "CMU.SVS"
    shutil.copy(cmu_small, upper)
    with open_slide(upper, backend="openslide") as slide, open_slide(cmu_small) as ref:
        assert slide.dimensions == ref.dimensions and slide.name == "CMU"
