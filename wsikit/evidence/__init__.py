"""Captioned visual evidence: literature figure nodes, PDF/JATS/manifest ingestion, a FAISS + SQLite
index with a calibrated similarity background, and the ``evidence.json`` result with RAG
adapters (stable ids, portable paths, provenance).

>>> from wsikit.evidence import read_figure_manifest, FigureIndex          # doctest: +SKIP
>>> from wsikit.models import create_encoder                        # doctest: +SKIP
>>> nodes = read_figure_manifest("figs.jsonl")                       # doctest: +SKIP
>>> index = FigureIndex.build(nodes, create_encoder("heuristic"), "idx")  # doctest: +SKIP
>>> index.query_images([crop], create_encoder("heuristic"), k=5)     # doctest: +SKIP

The ``wsikit figures|index|eval`` commands are functions of the same names and options
(:func:`index_build`, :func:`index_add`, :func:`index_query`, :func:`eval_retrieval`, ...).
"""

from __future__ import annotations

from ._index_rows import AddReport
from .calibration import Background, Floor
from .corpus import FigureBank
from .documents import register_document_reader
from .evaluation import eval_retrieval
from .figure_manifest import merge_figure_manifest, read_figure_manifest, write_figure_manifest
from .index import FigureIndex, Match
from .index_ops import (
    figures_extract,
    index_add,
    index_build,
    index_calibrate,
    index_info,
    index_query,
    index_search,
    index_tower,
)
from .jats import extract_jats_figures, read_jats
from .matching import CropMatches, match_crops
from .nodes import FigureNode, load_image
from .pdf import PdfFigure, PdfInfo, extract_pdf_figures, read_pdf_figures
from .result import EvidenceRegion, EvidenceResult, load_schema
from .synthetic_pdf import write_synthetic_pdf

__all__ = [
    # the ``wsikit figures|index|eval`` commands as functions
    "figures_extract",
    "index_add",
    "index_build",
    "index_calibrate",
    "index_info",
    "index_query",
    "index_search",
    "index_tower",
    "eval_retrieval",
    # figures: PDFs, JATS articles, manifests, nodes
    "extract_pdf_figures",
    "read_pdf_figures",
    "extract_jats_figures",
    "read_jats",
    "read_figure_manifest",
    "write_figure_manifest",
    "merge_figure_manifest",
    "write_synthetic_pdf",
    "register_document_reader",
    "FigureBank",
    "load_image",
    "FigureNode",
    "PdfFigure",
    "PdfInfo",
    # the index and its matches
    "FigureIndex",
    "Match",
    "AddReport",
    "Background",
    "Floor",
    "match_crops",
    "CropMatches",
    # the evidence.json result
    "EvidenceRegion",
    "EvidenceResult",
    "load_schema",
]
