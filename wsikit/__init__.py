"""wsikit: whole-slide images to multi-scale salient regions and captioned visual evidence.

The public API is re-exported here lazily (importing :mod:`wsikit` does not import torch)::

    import wsikit
    with wsikit.open_slide("slide.svs") as slide:
        mask = wsikit.segment_tissue(slide)
        grid = wsikit.make_grid(slide, mask)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import (
    BatchError,
    CacheError,
    EncoderMismatchError,
    EvidenceError,
    FeatureError,
    GridError,
    ManifestError,
    ModelError,
    MppError,
    SelectionError,
    SlideBusyError,
    SlideError,
    TissueError,
    WeightsError,
    WsikitError,
)

if TYPE_CHECKING:  # the lazy names below, typed for checkers and IDEs
    from .attention import Attention, compute_attention
    from .batch import run_batch
    from .demos import demo
    from .evidence import (
        EvidenceRegion,
        EvidenceResult,
        FigureIndex,
        FigureNode,
        extract_pdf_figures,
        read_figure_manifest,
    )
    from .features import Embeddings, extract_features
    from .io import Slide, open_slide, resolve_mpp
    from .layout import OutputLayout
    from .models.registry import create_encoder, get_config, list_encoders
    from .options import (
        GridOptions,
        MatchOptions,
        ModelOptions,
        OutputOptions,
        PipelineOptions,
        SelectionOptions,
    )
    from .patching import TileGrid, make_grid
    from .pipeline import load_result, select
    from .report import render_report, write_report
    from .scverse import export_anndata
    from .selectors import (
        Window,
        Windows,
        create_selector,
        list_selectors,
        select_windows,
    )
    from .slide_ops import info, patch, segment
    from .synthetic import SyntheticSpec, write_synthetic_slide
    from .tissue import TissueMask, segment_tissue, tissue_mask

# name -> module that defines it (imported on first use)
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
    "demo": "wsikit.demos",
    # evidence
    "FigureNode": "wsikit.evidence",
    "FigureIndex": "wsikit.evidence",
    "EvidenceResult": "wsikit.evidence",
    "read_figure_manifest": "wsikit.evidence",
    "extract_pdf_figures": "wsikit.evidence",
    "SyntheticSpec": "wsikit.synthetic",
    # options, layout, cohorts
    "PipelineOptions": "wsikit.options",
    "GridOptions": "wsikit.options",
    "ModelOptions": "wsikit.options",
    "SelectionOptions": "wsikit.options",
    "MatchOptions": "wsikit.options",
    "OutputOptions": "wsikit.options",
    "OutputLayout": "wsikit.layout",
    "load_result": "wsikit.pipeline",
    "EvidenceRegion": "wsikit.evidence",
    "run_batch": "wsikit.batch",
    "write_synthetic_slide": "wsikit.synthetic",
}

__all__ = [
    "__version__",
    "WsikitError",
    "SlideError",
    "MppError",
    "TissueError",
    "GridError",
    "ModelError",
    "WeightsError",
    "FeatureError",
    "SelectionError",
    "EvidenceError",
    "ManifestError",
    "EncoderMismatchError",
    "BatchError",
    "CacheError",
    "SlideBusyError",
    "open_slide",
    "Slide",
    "resolve_mpp",
    "info",
    "segment",
    "patch",
    "segment_tissue",
    "tissue_mask",
    "TissueMask",
    "make_grid",
    "TileGrid",
    "create_encoder",
    "list_encoders",
    "get_config",
    "extract_features",
    "Embeddings",
    "export_anndata",
    "compute_attention",
    "Attention",
    "select_windows",
    "create_selector",
    "list_selectors",
    "Window",
    "Windows",
    "render_report",
    "write_report",
    "select",
    "demo",
    "FigureNode",
    "FigureIndex",
    "EvidenceResult",
    "read_figure_manifest",
    "extract_pdf_figures",
    "SyntheticSpec",
    "PipelineOptions",
    "GridOptions",
    "ModelOptions",
    "SelectionOptions",
    "MatchOptions",
    "OutputOptions",
    "OutputLayout",
    "load_result",
    "EvidenceRegion",
    "run_batch",
    "write_synthetic_slide",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'wsikit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
