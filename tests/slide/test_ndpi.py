"""The NDPI reader: OpenSlide's pyramid and pixels from a generated Hamamatsu NDPI file."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from wsikit.errors import SlideError
from wsikit.slide import open_slide
from wsikit.slide.ndpi import NdpiBackend
from wsikit.slide.pixel_backend import open_pixel_slide
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_ndpi


@pytest.fixture(scope="module", params=["4:2:2", "4:4:4"])
def ndpi(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2048×1024 at 0.25 µm/px, stored levels 1 and 1/4, 256-px restart intervals."""
    spec = SyntheticSpec(2048, 1024, mpp=0.25, dense=[(900, 300, 400, 300)])
    path = tmp_path_factory.mktemp("ndpi") / f"s{request.param.replace(':', '')}.ndpi"
    return write_synthetic_ndpi(path, spec, downsamples=(1, 4), tile_width=256,
                                subsampling=request.param)


def _regions(slide, rng: np.random.Generator, n: int = 6):
    for level, (w, h) in enumerate(slide.level_dimensions):
        ds = slide.level_downsamples[level]
        for _ in range(n):
            size = (int(rng.integers(1, min(w, 600) + 1)), int(rng.integers(1, min(h, 300) + 1)))
            lx, ly = int(rng.integers(0, w - size[0] + 1)), int(rng.integers(0, h - size[1] + 1))
            yield level, (int(round(lx * ds)), int(round(ly * ds))), size


def test_openslide_reads_the_generated_file_as_hamamatsu(ndpi: Path) -> None:
    with open_slide(ndpi) as ref:
        assert ref.backend == "openslide" and ref.vendor == "hamamatsu"
        assert ref.mpp == pytest.approx(0.25) and ref.objective_power == 40
        # stored 1 and 1/4, plus OpenSlide's scaled decodes 1/2 and 1/8, 1/16, 1/32
        assert ref.level_dimensions == ((2048, 1024), (1024, 512), (512, 256), (256, 128),
                                        (128, 64), (64, 32))


def test_slide_reader_uses_the_ndpi_backend_with_openslides_pixels(ndpi: Path) -> None:
    rng = np.random.default_rng(3)
    with open_slide(ndpi) as ref, open_pixel_slide(ndpi) as fast:
        assert fast.backend == "ndpi"
        assert fast.level_dimensions == ref.level_dimensions
        assert fast.level_downsamples == pytest.approx(ref.level_downsamples, abs=1e-9)
        assert (fast.mpp, fast.mpp_source) == (ref.mpp, ref.mpp_source)
        for level, xy, size in _regions(ref, rng):
            assert np.array_equal(fast.read_region(xy, level, size),
                                  ref.read_region(xy, level, size)), (level, xy, size)
        # the slide reader's path for 512-px patches at 0.5 µm/px, also past the slide edge
        for box in [(0, 0, 1024, 1024), (1300, 77, 1024, 1024), (-50, 500, 1024, 1024)]:
            a, abox = fast.source_region(box, (512, 512))
            b, bbox = ref.source_region(box, (512, 512))
            assert abox == bbox and np.array_equal(a, b)


def test_intervals_decoded_one_by_one_give_the_same_pixels(ndpi: Path) -> None:
    """The path for vertically subsampled chroma (4:2:0), forced on this file."""
    backend = NdpiBackend(ndpi)
    whole = [backend.read(level, 0, 0, w, h)
             for level, (w, h) in enumerate(backend.level_dimensions)]
    assert all(s.stackable for s in backend._stored)
    backend._stored = [dataclasses.replace(s, stackable=False)
                       for s in backend._stored]
    for level, (w, h) in enumerate(backend.level_dimensions):
        assert np.array_equal(backend.read(level, 0, 0, w, h), whole[level])
    backend.close()


def test_tall_reads_are_decoded_in_several_stacks(ndpi: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A column of intervals is decoded in runs of at most _MAX_ROWS (a JPEG frame is at most
    65535 px tall); the runs join seamlessly."""
    from wsikit.slide import ndpi as ndpi_module

    monkeypatch.setattr(ndpi_module, "_MAX_ROWS", 3)
    backend = NdpiBackend(ndpi)
    with open_slide(ndpi) as ref:
        for level in (0, 1):
            w, h = ref.level_dimensions[level]
            assert np.array_equal(backend.read(level, 5, 3, w - 5, h - 3),
                                  ref.read_region((5 * 2 ** level, 3 * 2 ** level), level,
                                                  (w - 5, h - 3)))
    backend.close()


def test_other_files_are_refused(synthetic_small_slide: Path, tmp_path: Path) -> None:
    with pytest.raises(SlideError, match="not a Hamamatsu NDPI"):
        NdpiBackend(synthetic_small_slide)
    junk = tmp_path / "junk.ndpi"
    junk.write_bytes(b"not a tiff at all")
    with pytest.raises(SlideError, match="not a TIFF"):
        NdpiBackend(junk)
