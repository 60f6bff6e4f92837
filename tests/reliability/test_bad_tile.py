"""A damaged JPEG tile: named by level and position (default), or skipped and recorded with
``--on-bad-tile skip``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import tifffile
from _cases import record_case

from wsikit.cli import main
from wsikit.errors import SlideError
from wsikit.slide import open_slide

TILE = 5  # the 6th tile of level 0: column 5, row 0 of 240 px tiles -> x=1200, y=0


@pytest.fixture(scope="module")
def damaged(cmu_small: Path, tmp_path_factory) -> Path:
    """CMU-1-Small-Region.svs with the JPEG header of one level-0 tile zeroed."""
    path = tmp_path_factory.mktemp("bad") / "damaged.svs"
    shutil.copyfile(cmu_small, path)
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        offset = page.dataoffsets[TILE]
        assert page.tilewidth == 240 and page.compression == 7  # JPEG
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(b"\0" * 64)
    return path


def test_damaged_tile_is_named_with_level_and_position(damaged: Path, tmp_path: Path, capsys):
    assert main(["segment", str(damaged), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "damaged tile at level 0, x=1200, y=0" in err and "--on-bad-tile skip" in err
    assert not (tmp_path / "o" / "contours_geojson").exists() or not any(
        (tmp_path / "o" / "contours_geojson").iterdir())
    record_case("slide", "clear-error")


def test_damaged_tile_skipped_and_recorded(damaged: Path, cmu_small: Path, monkeypatch):
    monkeypatch.delenv("WSIKIT_ON_BAD_TILE", raising=False)
    with open_slide(damaged, on_bad_tile="skip") as s, open_slide(cmu_small) as ref:
        with pytest.warns(UserWarning, match="x=1200, y=0"):
            img = s.read_region((0, 0), 0, s.dimensions)
        good = ref.read_region((0, 0), 0, ref.dimensions)
        assert s.bad_tiles == [{"level": 0, "x": 1200, "y": 0, "width": 240, "height": 240,
                                "reason": s.bad_tiles[0]["reason"]}]
    assert (img[0:240, 1200:1440] == 255).all()  # the bad tile, white
    mask = img.copy()
    mask[0:240, 1200:1440] = good[0:240, 1200:1440]
    assert (mask == good).all()  # every other pixel as in the intact slide
    with open_slide(damaged) as s, pytest.raises(SlideError, match="level 0, x=1200, y=0"):
        s.read_region((0, 0), 0, s.dimensions)


def test_select_with_skip_records_the_tile(damaged: Path, tmp_path: Path, monkeypatch):
    monkeypatch.delenv("WSIKIT_ON_BAD_TILE", raising=False)
    out = tmp_path / "o"
    try:
        assert main(["--on-bad-tile", "skip", "select", str(damaged), "--out", str(out),
                     "--encoder", "heuristic"]) == 0
    finally:
        import os

        os.environ.pop("WSIKIT_ON_BAD_TILE", None)
    doc = json.loads((out / "select" / "damaged" / "evidence.json").read_text())
    assert [(t["level"], t["x"], t["y"]) for t in doc["slide"]["bad_tiles"]] == [(0, 1200, 0)]
    record_case("slide", "correct")


def test_unknown_policy_is_refused(damaged: Path):
    with pytest.raises(SlideError, match="on_bad_tile='maybe'"):
        open_slide(damaged, on_bad_tile="maybe")
