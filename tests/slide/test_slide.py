"""Slide reading: backends, pixels, levels, resolution-aware reads, errors."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from PIL import Image

from wsikit.errors import SlideError
from wsikit.slide import open_slide
from wsikit.slide._rgb import rgba_to_rgb
from wsikit.slide.slide import BACKENDS


def test_cmu_small_metadata(cmu_small):
    with open_slide(cmu_small) as slide:
        assert slide.backend == "openslide"
        assert slide.dimensions == (2220, 2967)
        assert slide.name == "CMU-1-Small-Region"
        assert slide.vendor == "aperio"
        assert slide.level_count == 1 and slide.level_downsamples == (1.0,)
        assert set(slide.associated_images) == {"label", "macro", "thumbnail"}
        label = slide.associated_images["label"]
        assert label.dtype == np.uint8 and label.shape == (463, 387, 3)


def test_read_region_shape_and_white_outside(cmu_small):
    with open_slide(cmu_small) as slide:
        tile = slide.read_region((2100, 2900), 0, (300, 200))
        assert tile.shape == (200, 300, 3) and tile.dtype == np.uint8
        assert (tile[100:, 150:] == 255).all()  # beyond the 2220x2967 slide
        assert tile[:50, :100].std() > 0  # real pixels inside


@pytest.mark.parametrize("backend", ["openslide", "tiffslide"])
def test_backends_agree(aperio_slide, backend):
    with open_slide(aperio_slide, backend="openslide") as ref, \
            open_slide(aperio_slide, backend=backend) as slide:
        # (tiffslide takes the 2nd IFD of an Aperio file for the thumbnail, as in real SVS)
        assert slide.dimensions == ref.dimensions
        a = ref.read_region((200, 100), 0, (64, 48))
        b = slide.read_region((200, 100), 0, (64, 48))
        assert np.abs(a.astype(int) - b).max() <= 2
        c = slide.read_region((-40, -40), 0, (80, 80))  # out of bounds on the top-left
        assert (c[:40, :40] == 255).all() and c[40:, 40:].shape == (40, 40, 3)


def test_best_level_and_read_at_mpp(synthetic_slide):
    with open_slide(synthetic_slide) as slide:
        assert slide.level_downsamples == (1.0, 4.0, 16.0)
        assert [slide.best_level(d) for d in (0.5, 1, 3.9, 4, 4.02, 15, 16, 100)] == \
            [0, 0, 0, 1, 1, 1, 2, 2]
        box = (3000, 2000, 1024, 1024)
        out = slide.read_at_mpp(box, target_mpp=0.5)  # 2x: from level 0
        assert out.shape == (512, 512, 3)
        ref = slide.read_region((3000, 2000), 0, (1024, 1024)).astype(np.float32)
        ref = ref.reshape(512, 2, 512, 2, 3).mean(axis=(1, 3))
        assert np.abs(out - ref).mean() < 6
        out4 = slide.read_at_mpp(box, target_mpp=1.0)  # 4x: exactly level 1, no resize
        assert out4.shape == (256, 256, 3)
        np.testing.assert_array_equal(out4, slide.read_region((3000, 2000), 1, (256, 256)))
        sized = slide.read_at_mpp(box, out_size=(100, 50))
        assert sized.shape == (50, 100, 3)


def test_thumbnail(synthetic_slide):
    with open_slide(synthetic_slide) as slide:
        th = slide.thumbnail(mpp=8.0)
        assert th.shape == (192, 256, 3)
        assert slide.thumbnail(max_size=300).shape == (225, 300, 3)


def test_truncated_file(cmu_small, tmp_path):
    bad = tmp_path / "truncated.svs"
    data = cmu_small.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(SlideError, match="truncated"):
        open_slide(bad)


def test_text_file_renamed_svs(tmp_path):
    bad = tmp_path / "notes.svs"
    bad.write_text("this is not a slide\n")
    with pytest.raises(SlideError) as info:
        open_slide(bad)
    msg = str(info.value)
    assert str(bad) in msg
    for backend in ("openslide", "tiffslide", "image"):
        assert f"{backend}:" in msg


def test_missing_file_and_bad_backend(tmp_path, cmu_small):
    with pytest.raises(SlideError, match="no such file"):
        open_slide(tmp_path / "nope.svs")
    with pytest.raises(SlideError, match="backend"):
        open_slide(cmu_small, backend="bioformats")


def test_png_with_alpha(tmp_path):
    rgba = np.zeros((40, 60, 4), np.uint8)
    rgba[..., 0] = 200
    rgba[:, :30, 3] = 255  # left half opaque red-ish, right half transparent
    path = tmp_path / "img.png"
    Image.fromarray(rgba).save(path)
    with open_slide(path, mpp=1.0) as slide:
        assert slide.backend == "image" and slide.dimensions == (60, 40)
        px = slide.read_region((0, 0), 0, (60, 40))
        assert tuple(px[0, 0]) == (200, 0, 0)
        assert tuple(px[0, 59]) == (255, 255, 255)
        assert slide.read_at_mpp((0, 0, 60, 40), target_mpp=2.0).shape == (20, 30, 3)


def test_closed_slide_raises(cmu_small):
    slide = open_slide(cmu_small)
    slide.close()
    slide.close()
    with pytest.raises(SlideError, match="closed"):
        slide.read_region((0, 0), 0, (4, 4))


def test_rgba_composite_on_white():
    px = np.array([[[0, 0, 0, 0], [100, 50, 0, 255], [0, 0, 0, 128]]], np.uint8)
    out = rgba_to_rgb(px)
    assert out.tolist() == [[[255, 255, 255], [100, 50, 0], [127, 127, 127]]]


def test_backend_names_and_the_order_they_are_tried(cmu_small):
    """The fallback order of BACKENDS, and the names ``backend=`` accepts besides: DICOM
    (chosen by content, or asked for by name) and the fast readers open_pixel_slide tries."""
    assert BACKENDS == ("openslide", "tiffslide", "image", "omezarr")
    with pytest.raises(SlideError, match=r"backend='nope' is not one of \('openslide', "
                                         r"'tiffslide', 'image', 'omezarr', 'dicom', 'ndpi', "
                                         r"'pyvips'\)"):
        open_slide(cmu_small, backend="nope")


def test_copy_of_slide_opens_with_tiffslide_fallback(cmu_small, tmp_path):
    copy = tmp_path / "copy.svs"
    shutil.copy(cmu_small, copy)
    with open_slide(copy, backend="tiffslide") as slide:
        assert slide.backend == "tiffslide" and slide.dimensions == (2220, 2967)
