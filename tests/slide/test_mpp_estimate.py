"""The resolution of a slide without one, estimated from the size of its nuclei (issue 40,
item 10), on real pixels: the real CMU-1-Small-Region slide (0.499 µm/px, recorded by the
scanner) and the real level-1 TCGA tiles of tests/data/real_tiles (about 1 µm/px), at their
resolution and box-downscaled 2x and 4x (benchmarks/bench_mpp_estimate.py measures them all).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from wsikit.errors import MppError
from wsikit.slide import open_slide
from wsikit.slide.mpp import ESTIMATED
from wsikit.slide.mpp_estimate import MppEstimate, estimate_mpp_from_nuclei

TILES = Path(__file__).resolve().parents[1] / "data" / "real_tiles"
#: Level-1 TCGA tiles that hold tissue with nuclei (about 1 µm/px).
LEVEL1 = ["high-nuclei-score-red-pen-level1", "low-nuclei-score-level1",
          "medium-nuclei-score-green-pen-level1", "medium-nuclei-score-level1",
          "medium-nuclei-score-level1-2", "very-low-nuclei-score-red-pen-level1"]


def _down(img: np.ndarray, f: int) -> np.ndarray:
    return img if f == 1 else np.asarray(Image.fromarray(img).reduce(f))


@pytest.fixture(scope="module")
def cmu_pixels(cmu_small: Path) -> np.ndarray:
    with open_slide(cmu_small) as s:
        return s.read_region((0, 0), 0, s.dimensions)


@pytest.fixture(scope="module")
def cmu_png(cmu_pixels: np.ndarray, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real slide's pixels as a PNG: an image that records no resolution."""
    path = tmp_path_factory.mktemp("nompp") / "cmu.png"
    Image.fromarray(cmu_pixels).save(path)
    return path


@pytest.mark.parametrize("f", [1, 2, 4])
def test_real_tiles_lie_in_the_stated_interval_at_three_scales(f: int) -> None:
    tiles = [_down(np.asarray(Image.open(TILES / f"{n}.png").convert("RGB")), f)
             for n in LEVEL1]
    est = estimate_mpp_from_nuclei(tiles)
    truth = 1.0 * f
    assert est.low <= truth <= est.high, est
    assert est.n_nuclei >= 30
    if f == 1:   # nuclei of about 6 px: measured, 4 % off (benchmarks/bench_mpp_estimate.py)
        assert est.resolved and abs(est.mpp / truth - 1) < 0.25
    if f == 4:   # nuclei of 1.5 px cannot show their size: a lower bound only
        assert not est.resolved and est.high >= 20


@pytest.mark.parametrize("f", [1, 2, 4])
def test_real_slide_lies_in_the_stated_interval_at_three_scales(f: int, cmu_pixels: np.ndarray,
                                                                 tmp_path: Path) -> None:
    from wsikit.slide.synthetic import write_image_slide

    path = write_image_slide(tmp_path / "cmu.svs", _down(cmu_pixels, f), mpp=0.499 * f,
                             downsamples=(1,))
    with open_slide(path) as slide:
        est = slide.estimate_mpp()    # its recorded mpp is not used
    assert est.low <= 0.499 * f <= est.high, est
    if f < 4:                        # measured +7 % and +6 %
        assert est.resolved and abs(est.mpp / (0.499 * f) - 1) < 0.2


def test_a_slide_without_resolution_gets_the_estimate_with_a_warning(cmu_png: Path) -> None:
    with pytest.warns(UserWarning, match=r"estimated from the size of its nuclei \(range "
                                         r"0\.\d\d–0\.\d\d µm/px") as record:
        slide = open_slide(cmu_png)
    with slide:
        assert slide.mpp_source == ESTIMATED
        assert 0.4 <= slide.mpp <= 0.6
        # the warning names the estimate itself
        assert f"{slide.mpp:.2f} µm/px" in str(record[0].message)
    assert record[0].filename == __file__


@pytest.mark.parametrize("given, warned", [(0.25, True), (2.0, True), (0.5, False),
                                           (0.9, False)])
def test_a_user_mpp_that_contradicts_the_nuclei_is_warned_about(cmu_png: Path, given: float,
                                                               warned: bool) -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with open_slide(cmu_png, mpp=given) as slide:
            assert (slide.mpp, slide.mpp_source) == (given, "user")
    messages = [str(w.message) for w in record if "contradicts" in str(w.message)]
    assert bool(messages) == warned
    if warned:   # both values named
        assert f"mpp={given!r}" in messages[0] and "µm/px (0." in messages[0]


def test_a_user_mpp_is_not_checked_where_the_slide_records_one(cmu_small: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with open_slide(cmu_small, mpp=0.1) as slide:   # an override: the user's call
            assert slide.mpp == 0.1


def test_no_nuclei_no_estimate_and_no_made_up_value(tmp_path: Path) -> None:
    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

    blank = write_synthetic_slide(tmp_path / "blank.tif",
                                  SyntheticSpec(1024, 768, mpp=None, tissue=[(0, 0, 1, 1)]),
                                  downsamples=(1,), app_mag=None, aperio=False)
    with pytest.raises(MppError) as info:
        open_slide(blank)
    text = str(info.value)
    assert "blank.tif" in text and "nuclei could not be measured" in text
    assert "with mpp=" in text and "0.25" not in text and "0.5" not in text
    with open_slide(blank, require_mpp=False) as slide:
        assert math.isnan(slide.mpp) and slide.mpp_source == "unknown"


def test_nuclei_too_small_to_measure_give_a_bound_not_a_value(cmu_pixels: np.ndarray,
                                                              tmp_path: Path) -> None:
    path = tmp_path / "coarse.png"
    Image.fromarray(_down(cmu_pixels, 4)).save(path)      # 2 µm/px: nuclei of about 3 px
    with pytest.raises(MppError, match="too small to measure") as info:
        open_slide(path)
    assert "suggest at least 1." in str(info.value)


def test_estimate_checks_its_input_and_round_trips() -> None:
    with pytest.raises(MppError, match="uint8 RGB"):
        estimate_mpp_from_nuclei(np.zeros((8, 8), np.uint8))
    with pytest.raises(MppError, match="nuclei found"):
        estimate_mpp_from_nuclei(np.full((64, 64, 3), 240, np.uint8))
    tile = np.asarray(Image.open(TILES / f"{LEVEL1[0]}.png").convert("RGB"))
    est = estimate_mpp_from_nuclei(tile)
    assert MppEstimate.from_dict(est.to_dict()) == est
    assert "nuclei" in est.method and est.describe().startswith(f"{est.mpp:.2f} µm/px")
