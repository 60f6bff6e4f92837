"""open_pixel_slide: a faster backend only where it gives OpenSlide's pyramid and pixels."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from wsikit.errors import SlideError
from wsikit.patches.grid import make_grid
from wsikit.slide import open_slide
from wsikit.slide.pixel_backend import open_pixel_slide, same_pixels
from wsikit.tissue.mask import segment_tissue

DATA = Path(__file__).resolve().parents[1] / "data"


def _has_pyvips() -> bool:
    try:
        import pyvips  # noqa: F401
    except (ImportError, OSError):
        return False
    return True


HAS_PYVIPS = _has_pyvips()


@pytest.fixture(params=["installed", "missing"])
def pyvips_state(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """pyvips as installed here, and as if it were not (the code must work without it)."""
    if request.param == "installed" and not HAS_PYVIPS:
        pytest.skip("pyvips not installed (pip install 'wsikit[pyvips]')")
    if request.param == "missing":
        monkeypatch.setitem(__import__("sys").modules, "pyvips", None)
    return str(request.param)


def test_a_fast_backend_is_used_where_every_patch_equals_openslide(
        tmp_path: Path, pyvips_state: str) -> None:
    path = tmp_path / "cmu.svs"
    shutil.copyfile(DATA / "CMU-1-Small-Region.svs", path)
    fast = open_pixel_slide(path)
    ref = open_slide(path, backend="openslide", require_mpp=False)
    assert fast.backend == ("pyvips" if pyvips_state == "installed" else "tiffslide")
    grid = make_grid(ref, segment_tissue(ref), target_mpp=0.5, patch_px=256)
    assert len(grid) > 10
    for box in grid.boxes:  # the slide reader's regions, not only the probes
        a, abox = fast.source_region(tuple(box), (256, 256))
        b, bbox = ref.source_region(tuple(box), (256, 256))
        assert abox == bbox and np.array_equal(a, b)
    fast.close()
    ref.close()


def test_a_pyramid_tiffslide_sees_differently_is_not_read_by_tiffslide(
        synthetic_small_slide: Path, pyvips_state: str) -> None:
    ref = open_slide(synthetic_small_slide, backend="openslide", require_mpp=False)
    alt = open_slide(synthetic_small_slide, backend="tiffslide", require_mpp=False)
    # tiffslide finds only level 0 of these generated pyramids (OpenSlide: levels 1 and 4)
    assert ref.level_count == 2 and alt.level_count == 1
    assert not same_pixels(ref, alt)
    # libvips reads both pages with OpenSlide's pixels; without it OpenSlide stays
    want = "pyvips" if pyvips_state == "installed" else "openslide"
    with open_pixel_slide(synthetic_small_slide) as s:
        assert s.backend == want and s.level_count == 2
        rng = np.random.default_rng(0)
        for level, (w, h) in enumerate(ref.level_dimensions):
            ds = ref.level_downsamples[level]
            for _ in range(5):
                size = (int(rng.integers(1, w // 2)), int(rng.integers(1, h // 2)))
                lx, ly = int(rng.integers(0, w - size[0])), int(rng.integers(0, h - size[1]))
                xy = (int(round(lx * ds)), int(round(ly * ds)))
                assert np.array_equal(s.read_region(xy, level, size),
                                      ref.read_region(xy, level, size))
    ref.close()
    alt.close()


def test_pyvips_refuses_what_it_cannot_read_as_openslide_does(
        tmp_path: Path, pyvips_state: str) -> None:
    png = tmp_path / "plain.png"
    Image.fromarray(np.full((40, 60, 3), 200, np.uint8)).save(png)
    with pytest.raises(SlideError, match="pyvips" if pyvips_state == "missing" else "TIFF"):
        open_slide(png, backend="pyvips", mpp=0.5)


def test_other_backends_are_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "plain.png"
    Image.fromarray(np.full((40, 60, 3), 200, np.uint8)).save(path)
    with open_pixel_slide(path, mpp=0.5) as s:
        assert s.backend == "image"


_FORK_SCRIPT = """
import sys
import numpy as np
from wsikit.slide import open_slide
from wsikit.slide.patch_stream import PatchStream, stream_batches
from wsikit.slide.pixel_backend import open_pixel_slide

path = sys.argv[1]
with open_pixel_slide(path, require_mpp=False) as s:   # the parent reads through libvips
    assert s.backend == "pyvips", s.backend
    W, H = s.dimensions
rng = np.random.default_rng(0)  # many reads: two workers racing on one file offset show
boxes = np.array([(rng.integers(0, W - 256), rng.integers(0, H - 256), 256, 256)
                  for _ in range(600)], float)
stream = PatchStream(path, boxes, 128, batch_size=4, reader="slide", mpp=0.5)
got = np.concatenate([b.permute(0, 2, 3, 1).numpy().copy()
                      for _, b in stream_batches(stream, workers=2)])
with open_slide(path, backend="openslide") as ref:
    bad = [i for i, box in enumerate(boxes)
           if not np.array_equal(got[i], ref.read_at_mpp(tuple(box), out_size=(128, 128)))]
assert not bad, f"{len(bad)} of {len(boxes)} patches differ from OpenSlide's"
print("ok", len(got))
"""


@pytest.mark.skipif(not HAS_PYVIPS, reason="pyvips not installed")
def test_pyvips_slides_read_in_workers_forked_after_the_parent_read(
        synthetic_small_slide: Path) -> None:
    """libvips' sink thread pool, once started, hangs forked DataLoader workers: the backend
    must read without it (Region.fetch). And libvips' operation cache handed each forked
    worker the parent's open image, so sibling workers raced on one file offset (wrong
    pixels, or "Not a JPEG file"): each open is its own (``revalidate``)."""
    import os
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", _FORK_SCRIPT, str(synthetic_small_slide)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)   # the hung workers too
        proc.communicate()
        pytest.fail("reading in forked workers hung")
    assert proc.returncode == 0, err[-2000:]
    assert out.split() == ["ok", "600"]


@pytest.mark.skipif(not HAS_PYVIPS, reason="pyvips not installed (pip install 'wsikit[pyvips]')")
def test_the_fast_backend_keeps_the_default_backends_resolution(tmp_path: Path) -> None:
    """A slide whose µm/px OpenSlide infers (objective power only, with a warning): the
    faster backend takes OpenSlide's value instead of reading the metadata again, so the
    warning is given once and both report the same µm/px."""
    import warnings

    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

    path = write_synthetic_slide(tmp_path / "mag_only.svs",
                                 SyntheticSpec(1024, 768, mpp=None, dense=[(300, 200, 300, 300)]),
                                 downsamples=(1, 4), app_mag=20)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ref = open_slide(path, require_mpp=False)
        n_ref = len(seen)
        fast = open_pixel_slide(path, require_mpp=False)
    assert ref.backend == "openslide" and n_ref >= 1  # the objective-power fallback warned
    assert fast.backend == "pyvips"                    # a faster backend serves the pixels
    assert len(seen) == 2 * n_ref                      # only its own OpenSlide open warned
    assert (fast.mpp, fast.mpp_source) == (ref.mpp, ref.mpp_source) == (0.5, "objective-power")
    fast.close()
    ref.close()


@pytest.mark.skipif(not HAS_PYVIPS, reason="pyvips not installed (pip install 'wsikit[pyvips]')")
def test_pyvips_refuses_grey_alpha_pages(tmp_path: Path) -> None:
    """A tiled 2-sample (grey + alpha) TIFF is not a layout the backend converts: refused
    when opened, so the slide reader keeps its default backend instead of failing reads."""
    import tifffile

    path = tmp_path / "grey_alpha.tif"
    tifffile.imwrite(path, np.full((512, 512, 2), 200, np.uint8), tile=(256, 256),
                     photometric="minisblack", extrasamples=["unassalpha"])
    with pytest.raises(SlideError, match="grey, RGB or RGBA"):
        open_slide(path, backend="pyvips", mpp=0.5)
