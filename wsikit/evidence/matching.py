"""Region crops → calibrated literature matches (the matching stage of ``wsikit select``).

Each crop is embedded with the index's encoder, its top-``k`` figures are looked up, and only
matches that pass the floor (default: the 95th percentile of the index's background of
unrelated-figure similarities) are kept as evidence. Image paths are written relative to the
folder of evidence.json and as absolute paths.

A slide region is a piece of tissue, so by default it is matched against micrographs only:
the panels of compound figures and the figures without panels whose kind
(:mod:`wsikit.evidence.kinds`) is ``micrograph`` (:data:`DEFAULT_MATCH_KINDS`, the default of
``match_kinds``; :meth:`wsikit.evidence.FigureIndex.matchable`). ``kinds`` widens it
(``"all"``: every kind).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .calibration import Floor, parse_floor
from .kinds import parse_kinds

if TYPE_CHECKING:
    from .fusion import FusedMatch
    from .index import Match

__all__ = ["CropMatches", "match_crops", "similarity_provenance"]

#: Figure kinds a slide region is matched against unless told otherwise (``match_kinds``).
DEFAULT_MATCH_KINDS: tuple[str, ...] = ("micrograph",)


@dataclass(frozen=True)
class CropMatches:
    """Result of :func:`match_crops`.

    Attributes
    ----------
    matches : list of list of dict
        Per crop, the kept matches (``Match.to_dict``), best first.
    below_floor : list of int
        Per crop, how many of its top-``k`` were dropped by the floor.
    floor : dict
        The ``selection.min_similarity`` entry (given, kind, percentile, similarity).
    index : FigureIndex
        The opened index.
    encoder : Encoder
        The encoder the crops were embedded with (the index's).
    kinds : tuple of str
        The figure kinds the crops were matched against (``selection.match_kinds``).
    """

    matches: list[list[dict[str, Any]]]
    below_floor: list[int]
    floor: dict[str, Any]
    index: Any
    encoder: Any
    kinds: tuple[str, ...] = DEFAULT_MATCH_KINDS


def match_crops(crops: Sequence[np.ndarray], index_dir: str | os.PathLike[str] | Any, *, k: int,
                min_similarity: str | float | Floor | None = None,
                base_dir: str | os.PathLike[str] | None = None, device: str = "cpu",
                weights: Mapping[str, str] | None = None, encoder: Any = None,
                question: str | None = None, rrf_k: float = 50,
                towers: Mapping[str, Any] | None = None,
                licences: str | Sequence[str] | None = None,
                kinds: str | Sequence[str] | None = None) -> CropMatches:
    """Match ``(H, W, 3) uint8`` crops against a figure index and apply the floor.

    Parameters
    ----------
    crops : sequence of ndarray
        Region crops.
    index_dir : path-like or FigureIndex
        Figure index folder (or an opened index).
    k : int
        Figures looked up per crop (before the floor).
    min_similarity : str, float or Floor, optional
        ``"p95"``-style background percentile, a cosine similarity, or ``"none"``;
        default p95.
    base_dir : path-like, optional
        Folder of evidence.json (image paths are made relative to it).
    device, weights
        Where and with which weight files the index's encoder runs.
    encoder : Encoder, optional
        An already created encoder of the index (else created here).
    question : str, optional
        A clinical question: figures are ranked by reciprocal-rank fusion (constant
        ``rrf_k``) of image similarity and caption BM25 (:func:`wsikit.evidence.fusion.
        query_fused`); the floor still applies to the image similarity, so the question
        reorders and widens the visual evidence but never admits a dissimilar figure.
    towers : mapping, optional
        With ``question``: ``{tower name: encoder}`` (:func:`wsikit.evidence.towers.
        create_tower_encoders`); each tower's question→figure and crop→figure rankings are
        further RRF channels (``vl_text:NAME``, ``vl_image:NAME``). The floor is unchanged.
    licences : str or sequence of str, optional
        Match only figures under these licences (``"open"``, ``"CC BY,CC0"``; see
        :meth:`wsikit.evidence.FigureIndex.with_licences`): the search skips the others and
        goes deeper, so ``k`` figures are still looked up per crop.
    kinds : str or sequence of str, optional
        Figure kinds matched (:func:`wsikit.evidence.kinds.parse_kinds`: ``"micrograph"``,
        ``"micrograph,photograph"``, ``"all"``): panels and single-panel figures of these
        kinds; default :data:`DEFAULT_MATCH_KINDS` (micrographs).

    Raises
    ------
    EvidenceError
        Bad floor or index; EncoderMismatchError for an incompatible encoder.
    """
    from ..models import create_encoder
    from .index import FigureIndex

    floor = parse_floor(min_similarity)
    wanted = DEFAULT_MATCH_KINDS if kinds is None else parse_kinds(kinds)
    index = index_dir if isinstance(index_dir, FigureIndex) else FigureIndex.open(index_dir)
    if licences is not None:
        index = index.with_licences(licences)
    name = index.encoder_name
    enc = encoder if encoder is not None else \
        create_encoder(name, weights=(weights or {}).get(name), device=device)
    rows: list[list[Match]] | list[list[FusedMatch]]
    if question and len(crops):
        rows = _fused_rows(index, list(crops), enc, question, k=k, rrf_k=rrf_k, towers=towers,
                           kinds=wanted)
    else:
        rows = index.query_images(list(crops), enc, k=k, kinds=wanted) if len(crops) else []
    kept, dropped = [], []
    for row in rows:
        # crop queries are image queries: every match carries its cosine similarity
        ok = [m for m in row if floor.passes(m.similarity, m.percentile)]  # type: ignore[arg-type]
        kept.append([m.to_dict(base_dir=base_dir) for m in ok])
        dropped.append(len(row) - len(ok))
    return CropMatches(matches=kept, below_floor=dropped, floor=floor.to_dict(index.background),
                       index=index, encoder=enc, kinds=wanted)


def _fused_rows(index: Any, crops: list[np.ndarray], enc: Any, question: str, *, k: int,
                rrf_k: float, towers: Mapping[str, Any] | None,
                kinds: Any) -> list[list[FusedMatch]]:
    """Each crop's figures ranked by the question's fusion (image similarity, caption BM25
    and the ``towers``' channels), each with the background percentile of its similarity."""
    from dataclasses import replace

    from .fusion import _depth, _tower_rankings, query_fused

    extra = (_tower_rankings(index, towers, crops, question, _depth(index, k, None))
             if towers else None)
    bg = index.background
    return [[replace(m, percentile=None if bg is None or m.similarity is None
                     else float(bg.percentile(m.similarity))) for m in row]
            for row in query_fused(index, crops, enc, question, k=k, rrf_k=rrf_k,
                                   extra=extra, kinds=kinds)]


def similarity_provenance(encoder: Mapping[str, Any] | None) -> str:
    """One line saying what a match similarity is, e.g. ``cosine similarity of heuristic
    embeddings (weight-free colour/texture heuristic, not a trained model)``."""
    if not encoder:
        return "cosine similarity (encoder not recorded)"
    kind = ("weight-free colour/texture heuristic, not a trained model"
            if encoder.get("heuristic") else "learned image encoder")
    return f"cosine similarity of {encoder.get('name')} embeddings ({kind})"
