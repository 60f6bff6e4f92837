"""Captioned visual evidence: literature figure nodes, PDF/manifest ingestion, a FAISS + SQLite
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

from .calibration import DEFAULT_FLOOR, Background, Floor, background_from_vectors, parse_floor
from .evaluation import eval_retrieval
from .figure_manifest import (
    FIGURE_MANIFEST_FIELDS,
    merge_figure_manifest,
    read_figure_manifest,
    write_figure_manifest,
)
from .ids import document_id, region_uid, slide_id, slide_id_digest
from .index import FigureIndex, Match
from .index_folder import INDEX_FORMAT
from .index_ops import (
    figures_extract,
    index_add,
    index_build,
    index_calibrate,
    index_info,
    index_query,
    index_search,
    index_tower,
    load_sources,
    update_towers,
)
from .index_rows import AddReport
from .index_writer import embed_images
from .matching import CropMatches, match_crops
from .nodes import (
    EVIDENCE_LEVELS,
    FigureNode,
    evidence_level_name,
    image_content_hash,
    load_image,
    make_node_id,
    parse_evidence_level,
)
from .pdf import PdfFigure, PdfInfo, extract_pdf_figures, find_doi, read_pdf_figures
from .result import EVIDENCE_SCHEMA_ID, EvidenceRegion, EvidenceResult, load_schema
from .synthetic_pdf import (
    SYNTHETIC_DOI,
    SyntheticFigure,
    synthetic_figures,
    write_synthetic_pdf,
)

__all__ = [
    "DEFAULT_FLOOR",
    "EVIDENCE_LEVELS",
    "EVIDENCE_SCHEMA_ID",
    "INDEX_FORMAT",
    "FIGURE_MANIFEST_FIELDS",
    "SYNTHETIC_DOI",
    "AddReport",
    "Background",
    "CropMatches",
    "EvidenceRegion",
    "EvidenceResult",
    "FigureIndex",
    "FigureNode",
    "Floor",
    "Match",
    "PdfFigure",
    "PdfInfo",
    "SyntheticFigure",
    "background_from_vectors",
    "document_id",
    "embed_images",
    "eval_retrieval",
    "evidence_level_name",
    "extract_pdf_figures",
    "figures_extract",
    "find_doi",
    "image_content_hash",
    "index_add",
    "index_build",
    "index_calibrate",
    "index_info",
    "index_query",
    "index_search",
    "index_tower",
    "load_image",
    "load_schema",
    "load_sources",
    "make_node_id",
    "match_crops",
    "merge_figure_manifest",
    "parse_evidence_level",
    "parse_floor",
    "read_figure_manifest",
    "read_pdf_figures",
    "region_uid",
    "slide_id",
    "slide_id_digest",
    "synthetic_figures",
    "update_towers",
    "write_figure_manifest",
    "write_synthetic_pdf",
]
