"""Backends and the Slide class are two modules; the old import paths still work."""

from __future__ import annotations

import wsikit.io
from wsikit.io import backends, slide

BACKEND_NAMES = ("_Backend", "_rgba_to_rgb", "_PyramidBackend", "_OpenSlideBackend",
                 "_TiffSlideBackend", "_DTYPE_HELP", "_check_image_mode", "_ImageBackend",
                 "_omezarr", "_BACKEND_CLASSES", "DicomBackend")


def test_old_names_import_from_slide() -> None:
    from wsikit.io.slide import (  # noqa: F401
        _BACKEND_CLASSES,
        _RESAMPLE,
        BACKENDS,
        BAD_TILE_POLICIES,
        LEVEL_TOLERANCE,
        MAX_SIDE_PX,
        Slide,
        _open_backend,
        _rgba_to_rgb,
        bad_tile_policy,
        open_slide,
    )

    for name in BACKEND_NAMES:
        assert getattr(slide, name) is getattr(backends, name)
    assert slide.__all__ == ["Slide", "open_slide", "BACKENDS", "BAD_TILE_POLICIES",
                             "LEVEL_TOLERANCE", "bad_tile_policy", "slide_stem"]
    assert wsikit.io.__all__ == ["open_slide", "Slide", "resolve_mpp", "check_mpp", "MPP_RANGE",
                                 "MPP_SOURCES", "BACKENDS", "LEVEL_TOLERANCE"]
    assert tuple(_BACKEND_CLASSES) == ("openslide", "tiffslide", "image", "omezarr", "dicom")
