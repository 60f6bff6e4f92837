"""The fast tile reader and the slide reader give the same patches and features.

Measured on CMU-1-Small-Region.svs (Aperio JPEG, 0.499 µm/px) before the fix: at 1 µm/px the
tile reader's DCT-domain ½ decode differed from the slide reader's anti-aliased resize by up
to 54 levels (heuristic features: correlation 0.983, a patch at cosine 0.86); at the native
0.5 µm/px both were one-step reads of the level-0 box, torch's kernel against Pillow's (1
level on 1e-5 of the pixels), and the CONCH input (level-0 box straight to 448) differed from
the specification (512 px at 0.5 µm/px, then 512 → 448) by up to 50 levels. Now both readers
share level choice, region, box and resampling: identical pixels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tifffile
import torch
from PIL import Image

from wsikit.features.extract import extract_features
from wsikit.models import create_encoder
from wsikit.models.resample import pil_resize
from wsikit.patches.grid import make_grid
from wsikit.slide import open_slide
from wsikit.slide.patch_stream import PatchStream
from wsikit.slide.region_resize import resample_region
from wsikit.slide.tiles import TileReader


def _read(path: Path, boxes: np.ndarray, out_px: int, kind: str,
          patch_px: int | None = None) -> np.ndarray:
    """``(N, out_px, out_px, 3) uint8`` patches of ``boxes`` through one PatchStream reader."""
    stream = PatchStream(path, boxes, out_px, batch_size=8, reader=kind, patch_px=patch_px)
    (read_into, close), got = stream.open_reader()
    assert got == kind
    out = np.empty((len(boxes), out_px, out_px, 3), np.uint8)
    try:
        read_into(boxes, out)
    finally:
        close()
    return out


def _grid_boxes(path: Path, target_mpp: float, patch_px: int = 512) -> np.ndarray:
    """Every grid position (edge patches past the slide included), level-0 boxes."""
    with open_slide(path) as s:
        return make_grid(s, None, whole_slide=True, target_mpp=target_mpp,
                         patch_px=patch_px).boxes


@pytest.mark.parametrize("target_mpp", [0.5, 1.0, 0.25])
def test_tile_and_slide_readers_give_identical_pixels(cmu_small: Path,
                                                      target_mpp: float) -> None:
    # 0.5: native (513 level-0 px -> 512); 1.0: a 2x reduction (was a DCT-domain decode);
    # 0.25: a 2x enlargement (sub-pixel boxes); patches past the slide edge included
    boxes = _grid_boxes(cmu_small, target_mpp, 256 if target_mpp == 0.25 else 512)
    px = 256 if target_mpp == 0.25 else 512
    fast, slow = _read(cmu_small, boxes, px, "tiles"), _read(cmu_small, boxes, px, "slide")
    np.testing.assert_array_equal(fast, slow)
    assert (fast[:, -1, -1] == 255).all(axis=1).any()  # some patch ends in white padding


@pytest.mark.parametrize("target_mpp", [0.5, 1.0])
def test_encoder_input_is_read_at_the_target_mpp_then_resized(cmu_small: Path,
                                                              target_mpp: float) -> None:
    """CONCH v1.5 input: 512 px at the target µm/px, then 512 -> 448 (ARCHITECTURE.md), on
    both readers; equal to the reference (slide reader at 512 px + Pillow's resize) within
    the one level that torch's uint8 kernel may differ from Pillow's."""
    boxes = _grid_boxes(cmu_small, target_mpp)[:8]
    fast = _read(cmu_small, boxes, 448, "tiles", patch_px=512)
    np.testing.assert_array_equal(fast, _read(cmu_small, boxes, 448, "slide", patch_px=512))
    with open_slide(cmu_small) as s:
        p512 = np.stack([s.read_at_mpp(tuple(b), out_size=(512, 512)) for b in boxes])
    ref = pil_resize(torch.from_numpy(p512).permute(0, 3, 1, 2), (448, 448), "bilinear")
    diff = np.abs(fast.astype(np.int16) - ref.permute(0, 2, 3, 1).numpy())
    assert diff.max() <= 1 and (diff > 0).mean() < 1e-3, (diff.max(), (diff > 0).mean())


@pytest.mark.parametrize("target_mpp", [0.5, 1.0])
def test_heuristic_features_agree_between_readers(cmu_small: Path, target_mpp: float) -> None:
    with open_slide(cmu_small) as s:
        grid = make_grid(s, None, whole_slide=True, target_mpp=target_mpp, patch_px=512)
    enc = create_encoder("heuristic")
    feats = {kind: extract_features(cmu_small, grid, enc, workers=0, reader=kind,
                                    progress=False).features for kind in ("tiles", "slide")}
    a, b = feats["tiles"], feats["slide"]
    assert np.corrcoef(a.ravel(), b.ravel())[0, 1] >= 0.9999
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def _rounded_pyramid(path: Path, source: Path) -> Path:
    """A 2-level tiled JPEG pyramid (level 1 in a SubIFD) whose level 1 has *floored* sizes
    (downsample 4.006 rather than 4), as Aperio writes them, from a crop of the CMU slide."""
    with TileReader(source) as r:
        base = r.read_region((0, 0, 2003, 2003), (2003, 2003))
    lw = lh = 2003 // 4  # 500 x 500
    level1 = np.asarray(Image.fromarray(base).resize((lw, lh), Image.Resampling.BOX))
    opts = {"tile": (240, 240), "photometric": "rgb", "compression": "jpeg",
            "compressionargs": {"level": 85}, "metadata": None}
    with tifffile.TiffWriter(path) as tw:
        tw.write(base, subifds=1, **opts)
        tw.write(level1, subfiletype=1, **opts)
    return path


def test_level_choice_and_geometry_match_the_slide_reader(tmp_path: Path,
                                                          cmu_small: Path) -> None:
    # 4 µm/px patches need the "4x" level, whose downsample is 4.006 (rounded level size):
    # the slide reader takes it (1 % slack) and maps boxes with one mean downsample; the tile
    # reader used to refuse it (DCT ¼ decode of level 0 instead) and used per-axis ratios.
    # Reference: tiffslide, which returns exact level pixels (OpenSlide paints a level-0
    # position that falls between level pixels with a sub-pixel shift, so it is not exact
    # at non-integer downsamples)
    path = _rounded_pyramid(tmp_path / "rounded.tif", cmu_small)
    boxes = [(0, 0, 1024, 1024), (517, 263, 1024, 1024), (1500, 1500, 1024, 1024)]
    with open_slide(path, backend="tiffslide", mpp=0.499) as s:
        assert s.level_count == 2 and abs(s.level_downsamples[1] - 4.006) < 1e-3
        assert s.best_level(4.0) == 1
        ref = np.stack([resample_region(*s.source_region(b, (256, 256)), (256, 256))
                        for b in boxes])
    with TileReader(path) as r:
        assert r.plan((1024, 1024), (256, 256)) == (1, 1)
        assert r.levels[1].downsample[0] == pytest.approx(s.level_downsamples[1])
        got = r.read_regions(np.array(boxes, np.float64), (256, 256))
    np.testing.assert_array_equal(got, ref)
