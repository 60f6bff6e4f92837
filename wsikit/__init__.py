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
from .errors import *  # noqa: F403
from .errors import __all__ as _error_names

# name -> module that defines it (filled in as areas land)
_LAZY: dict[str, str] = {
    # slides, tissue, patches
    "open_slide": "wsikit.io",
    "Slide": "wsikit.io",
    "resolve_mpp": "wsikit.io",
    "info": "wsikit.slide_ops",
    "segment": "wsikit.slide_ops",
    "patch": "wsikit.slide_ops",
    "segment_tissue": "wsikit.tissue",
    "tissue_mask": "wsikit.tissue",
    "TissueMask": "wsikit.tissue",
    "make_grid": "wsikit.patching",
    "TileGrid": "wsikit.patching",
    # models and features
    "create_encoder": "wsikit.models",
    "list_encoders": "wsikit.models",
    "get_config": "wsikit.models",
    "extract_features": "wsikit.features",
    "Embeddings": "wsikit.features",
    "export_anndata": "wsikit.scverse",
    "compute_attention": "wsikit.attention",
    "Attention": "wsikit.attention",
    # selection, crops, report
    "select_windows": "wsikit.selectors",
    "create_selector": "wsikit.selectors",
    "list_selectors": "wsikit.selectors",
    "Window": "wsikit.selectors",
    "Windows": "wsikit.selectors",
    "render_report": "wsikit.report",
    "write_report": "wsikit.report",
    "select": "wsikit.pipeline",
    "demo": "wsikit.demo",
    # evidence
    "FigureNode": "wsikit.evidence",
    "FigureIndex": "wsikit.evidence",
    "EvidenceResult": "wsikit.evidence",
    "read_figure_manifest": "wsikit.evidence",
    "extract_pdf_figures": "wsikit.evidence",
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
