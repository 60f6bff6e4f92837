"""Resolution chain: every source, its order, and the errors."""

from __future__ import annotations

import warnings

import pytest

from wsikit.errors import MppError
from wsikit.slide import open_slide, resolve_mpp


def test_cmu_small_uses_openslide_mpp(cmu_small):
    with open_slide(cmu_small) as slide:
        assert slide.mpp == pytest.approx(0.499)
        assert slide.mpp_source == "openslide.mpp"
        assert slide.objective_power == 20


def test_user_value_wins(cmu_small):
    with open_slide(cmu_small, mpp=0.3) as slide:
        assert slide.mpp == 0.3 and slide.mpp_source == "user"


@pytest.mark.parametrize("bad", [0.0, -1, 25.0, 0.001, float("nan"), "abc"])
def test_implausible_user_value_rejected(cmu_small, bad):
    with pytest.raises(MppError, match="plausible"):
        open_slide(cmu_small, mpp=bad)


def test_aperio_mpp_via_tiffslide(aperio_slide):
    with open_slide(aperio_slide, backend="tiffslide") as slide:
        assert slide.mpp == pytest.approx(0.25)
        assert slide.mpp_source == "aperio.MPP"
    with open_slide(aperio_slide) as slide:  # OpenSlide parses the same field itself
        assert slide.backend == "openslide" and slide.mpp_source == "openslide.mpp"


def test_aperio_mpp_from_properties_only():
    assert resolve_mpp({"aperio.MPP": "0.2527"}) == (pytest.approx(0.2527), "aperio.MPP")


@pytest.mark.parametrize("backend", ["openslide", "tiffslide"])
def test_tiff_resolution_centimetre(generic_cm, backend):
    with open_slide(generic_cm, backend=backend) as slide:
        assert slide.mpp == pytest.approx(0.5)
        assert slide.mpp_source == "tiff.resolution"


@pytest.mark.parametrize("backend", ["openslide", "tiffslide"])
def test_tiff_resolution_inch(generic_inch, backend):
    with open_slide(generic_inch, backend=backend) as slide:
        assert slide.mpp == pytest.approx(0.25)
        assert slide.mpp_source == "tiff.resolution"


def test_72dpi_ignored_then_objective_power_warns(dpi72_with_power):
    with pytest.warns(UserWarning, match="objective power") as record:
        slide = open_slide(dpi72_with_power)
    with slide:
        assert slide.mpp == pytest.approx(0.5)  # 10 / 20x, not 352.8 from 72 dpi
        assert slide.mpp_source == "objective-power"
    # stacklevel points at the caller, not at wsikit internals
    assert record[0].filename == __file__


def test_no_metadata_error_says_pass_mpp(no_metadata):
    # too few nuclei to estimate it from either (tests/io/test_mpp_estimate.py: with enough);
    # the message asks for the value without making one up (users copied the old example)
    with pytest.raises(MppError, match=r"explicitly with mpp=") as info:
        open_slide(no_metadata)
    assert no_metadata.name in str(info.value) and "nuclei" in str(info.value)
    assert "0.25" not in str(info.value)
    with open_slide(no_metadata, mpp=0.5) as slide:
        assert slide.mpp == 0.5 and slide.mpp_source == "user"
    with open_slide(no_metadata, require_mpp=False) as slide:
        assert slide.mpp != slide.mpp and slide.mpp_source == "unknown"
        with pytest.raises(MppError):
            slide.read_at_mpp((0, 0, 100, 100), target_mpp=1.0)


def test_openslide_mpp_outranks_aperio_and_resolution():
    props = {"openslide.vendor": "aperio", "openslide.mpp-x": "0.26", "openslide.mpp-y": "0.26",
             "aperio.MPP": "0.3", "tiff.XResolution": "20000", "tiff.ResolutionUnit": "centimeter",
             "openslide.objective-power": "40"}
    assert resolve_mpp(props) == (pytest.approx(0.26), "openslide.mpp")
    del props["openslide.mpp-x"], props["openslide.mpp-y"]
    assert resolve_mpp(props) == (pytest.approx(0.3), "aperio.MPP")
    del props["aperio.MPP"]
    assert resolve_mpp(props) == (pytest.approx(0.5), "tiff.resolution")


def test_generic_tiff_openslide_mpp_is_range_checked():
    # OpenSlide turns a 72-dpi default into openslide.mpp-x = 352.8 for generic TIFFs
    props = {"openslide.vendor": "generic-tiff", "openslide.mpp-x": "352.777",
             "openslide.mpp-y": "352.777", "tiff.XResolution": "72", "tiff.YResolution": "72",
             "tiff.ResolutionUnit": "inch"}
    with pytest.raises(MppError,
                       match=r"unusable .*352\.777 µm/px.*plausible is .* explicitly with mpp="):
        resolve_mpp(props)


def test_unequal_xy_uses_mean_and_warns():
    props = {"openslide.mpp-x": "0.25", "openslide.mpp-y": "0.27"}
    with pytest.warns(UserWarning, match="not square"):
        mpp, source = resolve_mpp(props)
    assert mpp == pytest.approx(0.26) and source == "openslide.mpp"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolve_mpp({"openslide.mpp-x": "0.2500", "openslide.mpp-y": "0.2501"})
