"""open_pixel_slide: tiffslide only where it gives OpenSlide's pyramid and pixels."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
from PIL import Image

from wsikit.io import open_slide
from wsikit.io.pixel_backend import open_pixel_slide, same_pixels
from wsikit.patching import make_grid
from wsikit.tissue import segment_tissue

DATA = Path(__file__).resolve().parents[1] / "data"


def test_tiffslide_is_used_where_every_patch_equals_openslide(tmp_path: Path) -> None:
    path = tmp_path / "cmu.svs"
    shutil.copyfile(DATA / "CMU-1-Small-Region.svs", path)
    fast = open_pixel_slide(path)
    ref = open_slide(path, backend="openslide", require_mpp=False)
    assert fast.backend == "tiffslide"
    grid = make_grid(ref, segment_tissue(ref), target_mpp=0.5, patch_px=256)
    assert len(grid) > 10
    for box in grid.boxes:  # the slide reader's regions, not only the probes
        a, abox = fast.source_region(tuple(box), (256, 256))
        b, bbox = ref.source_region(tuple(box), (256, 256))
        assert abox == bbox and np.array_equal(a, b)
    fast.close()
    ref.close()


def test_a_pyramid_tiffslide_sees_differently_stays_with_openslide(
        synthetic_small_slide: Path) -> None:
    ref = open_slide(synthetic_small_slide, backend="openslide", require_mpp=False)
    alt = open_slide(synthetic_small_slide, backend="tiffslide", require_mpp=False)
    # tiffslide finds only level 0 of these generated pyramids (OpenSlide: levels 1 and 4)
    assert ref.level_count == 2 and alt.level_count == 1
    assert not same_pixels(ref, alt)
    with open_pixel_slide(synthetic_small_slide) as s:
        assert s.backend == "openslide" and s.level_count == 2
    ref.close()
    alt.close()


def test_other_backends_are_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "plain.png"
    Image.fromarray(np.full((40, 60, 3), 200, np.uint8)).save(path)
    with open_pixel_slide(path, mpp=0.5) as s:
        assert s.backend == "image"
