"""wsikit: whole-slide images to multi-scale salient regions and captioned visual evidence.

The public API is re-exported here lazily (importing :mod:`wsikit` does not import torch)::

    import wsikit
    with wsikit.open_slide("slide.svs") as slide:
        mask = wsikit.segment_tissue(slide)
        grid = wsikit.make_grid(slide, mask)
"""

from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _error_names

# name -> module that defines it (filled in as areas land)
_LAZY: dict[str, str] = {
    "open_slide": "wsikit.io",
    "Slide": "wsikit.io",
    "resolve_mpp": "wsikit.io",
    "SyntheticSpec": "wsikit.synthetic",
    "write_synthetic_slide": "wsikit.synthetic",
}

__all__ = ["__version__", *_error_names, *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'wsikit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
