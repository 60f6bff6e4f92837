"""The OpenSlide backend opens an MRXS slide whatever the case of its suffix (``X.MRXS``):
OpenSlide itself recognises MIRAX by ``.mrxs`` only."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from wsikit.errors import SlideError
from wsikit.slide import open_slide
from wsikit.slide.backends import openslide_alias


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
    pytest.importorskip("openslide")

    def openslide_error(path: Path) -> str:
        with pytest.raises(SlideError) as err:
            open_slide(path, backend="openslide")
        return str(err.value).split("openslide: ", 1)[1]

    as_lower = openslide_error(mrxs_like(tmp_path / "a"))
    assert as_lower.startswith("OpenSlideError: Key file") and "Unsupported" not in as_lower
    upper = _upper(mrxs_like(tmp_path / "b"))
    tmp = Path(tempfile.gettempdir())
    before = set(tmp.glob("wsikit-mrxs-*"))
    assert openslide_error(upper) == as_lower
    assert set(tmp.glob("wsikit-mrxs-*")) == before
    with pytest.raises(SlideError, match="openslide: OpenSlideError: Key file") as err:
        open_slide(upper)  # every backend tried: MIRAX's own complaint comes first
    assert "Unsupported or missing image file" not in str(err.value)


def test_a_real_slide_renamed_with_an_upper_case_suffix_opens(cmu_small: Path,
                                                              tmp_path: Path) -> None:
    upper = tmp_path / "CMU.SVS"
    shutil.copy(cmu_small, upper)
    with open_slide(upper, backend="openslide") as slide, open_slide(cmu_small) as ref:
        assert slide.dimensions == ref.dimensions and slide.name == "CMU"
