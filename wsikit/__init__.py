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
    from .batch import run_batch
    from .evidence import (
        EvidenceRegion,
        EvidenceResult,
        FigureIndex,
        FigureNode,
        extract_pdf_figures,
        read_figure_manifest,
    )
    from .features.extract import Embeddings, extract_features
    from .integrations.scverse import export_anndata
    from .look.report import render_report, write_report
    from .models.registry import create_encoder, get_config, list_encoders
    from .outputs.layout import OutputLayout
    from .patches.grid import TileGrid, make_grid
    from .run.demos import demo
    from .run.heatmaps import heatmap
    from .run.options import (
        GridOptions,
        MatchOptions,
        ModelOptions,
        OutputOptions,
        PipelineOptions,
        SelectionOptions,
    )
    from .run.pipeline import load_result, patch, segment, select
    from .run.slide_ops import info
    from .selection.attention import Attention, compute_attention
    from .selection.selectors import (
        Window,
        Windows,
        create_selector,
        list_selectors,
        select_windows,
    )
    from .slide import Slide, open_slide, resolve_mpp
    from .slide.synthetic import SyntheticSpec, write_synthetic_slide
    from .tissue.mask import TissueMask, segment_tissue, tissue_mask

# name -> module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    # slides, tissue, patches
    "open_slide": "wsikit.slide",
    "Slide": "wsikit.slide",
    "resolve_mpp": "wsikit.slide",
    "info": "wsikit.run.slide_ops",
    "segment": "wsikit.run.pipeline",
    "patch": "wsikit.run.pipeline",
    "segment_tissue": "wsikit.tissue.mask",
    "tissue_mask": "wsikit.tissue.mask",
    "TissueMask": "wsikit.tissue.mask",
    "make_grid": "wsikit.patches.grid",
    "TileGrid": "wsikit.patches.grid",
    # models and features
    "create_encoder": "wsikit.models",
    "list_encoders": "wsikit.models",
    "get_config": "wsikit.models",
    "extract_features": "wsikit.features.extract",
    "Embeddings": "wsikit.features.extract",
    "export_anndata": "wsikit.integrations.scverse",
    "compute_attention": "wsikit.selection.attention",
    "Attention": "wsikit.selection.attention",
    # selection, crops, report
    "select_windows": "wsikit.selection.selectors",
    "create_selector": "wsikit.selection.selectors",
    "list_selectors": "wsikit.selection.selectors",
    "Window": "wsikit.selection.selectors",
    "Windows": "wsikit.selection.selectors",
    "render_report": "wsikit.look.report",
    "write_report": "wsikit.look.report",
    "select": "wsikit.run.pipeline",
    "heatmap": "wsikit.run.heatmaps",
    "demo": "wsikit.run.demos",
    # evidence
    "FigureNode": "wsikit.evidence",
    "FigureIndex": "wsikit.evidence",
    "EvidenceResult": "wsikit.evidence",
    "read_figure_manifest": "wsikit.evidence",
    "extract_pdf_figures": "wsikit.evidence",
    "SyntheticSpec": "wsikit.slide.synthetic",
    # options, layout, cohorts
    "PipelineOptions": "wsikit.run.options",
    "GridOptions": "wsikit.run.options",
    "ModelOptions": "wsikit.run.options",
    "SelectionOptions": "wsikit.run.options",
    "MatchOptions": "wsikit.run.options",
    "OutputOptions": "wsikit.run.options",
    "OutputLayout": "wsikit.outputs.layout",
    "load_result": "wsikit.run.pipeline",
    "EvidenceRegion": "wsikit.evidence",
    "run_batch": "wsikit.batch",
    "write_synthetic_slide": "wsikit.slide.synthetic",
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
    "heatmap",
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
