"""Fixtures for wsikit.slide: small generated slides that exercise each resolution source."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide


@pytest.fixture(scope="session")
def slide_factory(tmp_path_factory: pytest.TempPathFactory):
    """Write a small (1024×768, levels 1/4) synthetic TIFF; kwargs go to write_synthetic_slide."""
    folder = tmp_path_factory.mktemp("io_slides")
    counter = iter(range(10_000))

    def make(name: str = "slide", *, mpp: float | None = 0.5, suffix: str = ".tif",
             width: int = 1024, height: int = 768, **kwargs) -> Path:
        path = folder / f"{name}_{next(counter)}{suffix}"
        kwargs.setdefault("downsamples", (1, 4))
        return write_synthetic_slide(path, SyntheticSpec(width, height, mpp=mpp), **kwargs)

    return make


@pytest.fixture(scope="session")
def generic_cm(slide_factory) -> Path:
    """Generic tiled TIFF, no description mpp, resolution 0.5 µm/px in centimetres."""
    return slide_factory("cm", mpp=None, app_mag=None, resolution_mpp=0.5,
                         resolution_unit="CENTIMETER", aperio=False)


@pytest.fixture(scope="session")
def generic_inch(slide_factory) -> Path:
    """Generic tiled TIFF with resolution 0.25 µm/px in inches."""
    return slide_factory("inch", mpp=None, app_mag=None, resolution_mpp=0.25,
                         resolution_unit="INCH", aperio=False)


@pytest.fixture(scope="session")
def dpi72_with_power(slide_factory) -> Path:
    """72-dpi default resolution (ignored) and AppMag 20 in an Aperio-style description."""
    return slide_factory("dpi72", mpp=None, app_mag=20, resolution_mpp=25400 / 72,
                         resolution_unit="INCH", aperio=True)


@pytest.fixture(scope="session")
def no_metadata(slide_factory) -> Path:
    """Generic tiled TIFF without any resolution metadata."""
    return slide_factory("nometa", mpp=None, app_mag=None, aperio=False)


@pytest.fixture(scope="session")
def aperio_slide(slide_factory) -> Path:
    """Aperio-style .svs with MPP = 0.2500 in the description (levels 1/4)."""
    return slide_factory("aperio", mpp=0.25, suffix=".svs", app_mag=40)
