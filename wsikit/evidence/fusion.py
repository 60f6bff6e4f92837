"""Reciprocal-rank fusion of image similarity and caption BM25 (and any other ranked channel).

RRF (Cormack, Clarke & Büttcher 2009) scores a document by its ranks only::

    fused(d) = Σ_c  w_c / (k + rank_c(d))          rank 1 = best; channels without d add 0

so two channels whose raw scores live on different scales (cosine in [-1, 1], BM25 unbounded,
two towers' similarities) are never mixed numerically. ``k = 50`` by default (as RAG-MAMA uses).

:func:`search` is the Python mirror of ``wsikit index query [IMAGE] [--text TEXT]``;
:func:`query_fused` is what ``wsikit select --question`` uses for each crop.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from .._hints import keyword
from ..errors import EvidenceError
from ._index_writer import embed_images, encoder_version
from .captions import BM25_B, BM25_K1, caption_search
from .index import FigureIndex, Match
from .nodes import FigureNode

__all__ = ["FusedMatch", "query_fused", "query_text", "rrf", "search"]

#: Default RRF constant.
RRF_K = 50

_Key = TypeVar("_Key", bound=Hashable)


def rrf(rankings: Mapping[str, Sequence[_Key]], *, k: float = RRF_K,
        weights: Mapping[str, float] | None = None
        ) -> list[tuple[_Key, float, dict[str, int | None]]]:
    """Fuse ranked lists by reciprocal rank.

    Parameters
    ----------
    rankings : mapping
        ``{channel: [key, ...]}``, best first (a key appears at most once per channel).
    k : float
        RRF constant (> 0); larger values flatten the rank discount.
    weights : mapping, optional
        Weight per channel (default 1 each).

    Returns
    -------
    list of (key, fused score, {channel: 1-based rank or None})
        Best first; equal scores ordered by their best single rank, then first appearance.

    Raises
    ------
    EvidenceError
        ``k <= 0``, a negative weight or a key repeated within one channel.
    """
    if not k > 0:
        raise EvidenceError(f"RRF k={k} must be > 0 (default {RRF_K})")
    weights = dict(weights or {})
    if any(w < 0 for w in weights.values()):
        raise EvidenceError(f"RRF weights must be >= 0, got {weights}")
    channels = list(rankings)
    scores: dict[_Key, float] = {}
    ranks: dict[_Key, dict[str, int | None]] = {}
    order: dict[_Key, int] = {}
    for ch in channels:
        seen = set()
        w = float(weights.get(ch, 1.0))
        for pos, key in enumerate(rankings[ch], start=1):
            if key in seen:
                raise EvidenceError(f"RRF channel {ch!r} lists {key!r} twice")
            seen.add(key)
            order.setdefault(key, len(order))
            ranks.setdefault(key, dict.fromkeys(channels))[ch] = pos
            scores[key] = scores.get(key, 0.0) + w / (k + pos)
    best = {key: min(r for r in rk.values() if r is not None) for key, rk in ranks.items()}
    ordered = sorted(scores, key=lambda key: (-scores[key], best[key], order[key]))
    return [(key, scores[key], ranks[key]) for key in ordered]


@dataclass(frozen=True)
class FusedMatch:
    """One search hit with its provenance per channel.

    Attributes
    ----------
    node : FigureNode
    score : float
        The score it was ranked by, of kind ``score_type``.
    score_type : {"cosine", "bm25", "rrf"}
        Image similarity only, caption BM25 only, or reciprocal-rank fusion.
    similarity : float or None
        Cosine similarity to the query image (None for a text-only query).
    text_score : float or None
        Caption BM25 score (None without query text or when no query term occurs).
    image_rank, text_rank : int or None
        1-based rank in the image / caption channel (None: not within the channel's depth).
    fused_score : float or None
        RRF score (None for a single-channel query).
    ranks : mapping
        Rank per channel (also other channels, e.g. a second tower).
    fusion : mapping
        ``{"method": "rrf", "k": …, "weights": …, "depth": …}`` or ``{}``.
    """

    node: FigureNode
    score: float
    score_type: str
    similarity: float | None = None
    text_score: float | None = None
    image_rank: int | None = None
    text_rank: int | None = None
    fused_score: float | None = None
    ranks: Mapping[str, int | None] = field(default_factory=dict)
    fusion: Mapping[str, Any] = field(default_factory=dict)
    percentile: float | None = None

    def to_dict(self, *, base_dir: Any = None) -> dict[str, Any]:
        """:meth:`Match.to_dict` plus ``score``, ``score_type``, ranks and the fused score
        (``percentile``: the image similarity against the index's background)."""
        d = Match(self.node, 0.0 if self.similarity is None else self.similarity,
                  self.percentile).to_dict(base_dir=base_dir)
        if self.similarity is None:
            d["similarity"] = None
        d.update({"score": round(float(self.score), 6), "score_type": self.score_type,
                  "image_rank": self.image_rank, "text_rank": self.text_rank,
                  "text_score": None if self.text_score is None else
                  round(float(self.text_score), 6),
                  "fused_score": None if self.fused_score is None else
                  round(float(self.fused_score), 8),
                  "ranks": dict(self.ranks)})
        return d


def _depth(index: FigureIndex, k: int, depth: int | None) -> int:
    if k < 1:
        raise EvidenceError(f"k={k} must be >= 1")
    return max(1, min(index.count, depth if depth is not None else max(4 * k, 100)))


def query_text(index: FigureIndex, text: str, k: int = 5, *, k1: float = BM25_K1,
               b: float = BM25_B, extra: Mapping[str, Sequence[FigureNode]] | None = None,
               rrf_k: float = RRF_K, weights: Mapping[str, float] | None = None,
               depth: int | None = None) -> list[FusedMatch]:
    """Figures whose caption, label or source title match ``text`` (BM25), best first.

    With ``extra`` (``{channel: ranked figures}``, e.g. a vision-language tower's text→image
    ranking) the channels are fused by RRF (``score_type="rrf"``).

    Raises
    ------
    EvidenceError
        ``text`` has no searchable term, or ``k < 1``.
    """
    depth = _depth(index, k, depth)
    hits = caption_search(index, text, depth if extra else k, k1=k1, b=b)
    nodes = index.nodes([h.row for h in hits])
    if not extra:
        return [FusedMatch(node, h.score, "bm25", text_score=h.score, text_rank=pos,
                           ranks={"text": pos})
                for pos, (h, node) in enumerate(zip(hits, nodes, strict=True), start=1)]
    lookup = {n.node_id: n for n in nodes}
    for ranked in extra.values():
        lookup.update((n.node_id, n) for n in ranked)
    bm25 = {n.node_id: h.score for n, h in zip(nodes, hits, strict=True)}
    rankings = {"text": [n.node_id for n in nodes],
                **{ch: [n.node_id for n in ranked] for ch, ranked in extra.items()}}
    fusion = {"method": "rrf", "k": rrf_k, "weights": dict(weights or {}), "depth": depth,
              "channels": {"text": f"caption BM25 (k1={k1}, b={b})",
                           **dict.fromkeys(extra, "vision-language tower cosine")}}
    return [FusedMatch(lookup[key], score, "rrf", text_score=bm25.get(key),
                       text_rank=ranks["text"], fused_score=score, ranks=ranks, fusion=fusion)
            for key, score, ranks in rrf(rankings, k=rrf_k, weights=weights)[:k]]


def _rows_of(index: FigureIndex, node_ids: Sequence[str]) -> list[int]:
    """faiss/SQLite rows of node ids (all present in ``index``)."""
    with index._nodes_table.connect() as con:
        found = dict(con.execute(
            f"SELECT node_id, row FROM nodes WHERE node_id IN ({','.join('?' * len(node_ids))})",
            list(node_ids)).fetchall())
    return [int(found[n]) for n in node_ids]


def _stored_vectors(index: FigureIndex, rows: Sequence[int]) -> np.ndarray:
    """``(len(rows), dim)`` vectors as stored (IVF: reconstructed from its codes)."""
    import faiss

    cpu = index._cpu_index
    try:
        return np.stack([cpu.reconstruct(int(r)) for r in rows]) if rows else \
            np.zeros((0, index.dim), np.float32)
    except RuntimeError:
        clone = faiss.clone_index(cpu)
        faiss.extract_index_ivf(clone).make_direct_map()
        return np.stack([clone.reconstruct(int(r)) for r in rows])


def query_fused(index: FigureIndex, images: Sequence[np.ndarray] | np.ndarray, encoder: Any,
                text: str, k: int = 5, *, rrf_k: float = RRF_K,
                weights: Mapping[str, float] | None = None, depth: int | None = None,
                k1: float = BM25_K1, b: float = BM25_B,
                extra: Mapping[str, Sequence[Sequence[FigureNode]]] | None = None,
                kinds: Sequence[str] | None = None) -> list[list[FusedMatch]]:
    """Per image: figures ranked by RRF of image similarity and caption BM25 of ``text``.

    Each channel contributes its top ``depth`` (default ``max(4 k, 100)``, at most the index
    size); every returned match carries its cosine similarity to the image (computed from the
    stored vector when the image channel did not rank it), both ranks and the fused score.
    ``extra`` adds channels: ``{channel: [ranked figures for image 0, for image 1, …]}``
    (e.g. a vision-language tower), fused by rank like the others. ``kinds`` keeps, in every
    channel, only the panels and single-panel figures of those kinds
    (:meth:`FigureIndex.matchable`; ``None``: every node).

    Raises
    ------
    EncoderMismatchError
        ``encoder`` is not the index's encoder.
    EvidenceError
        ``text`` has no searchable term, bad ``k``/``rrf_k``.
    """
    if isinstance(images, np.ndarray) and images.ndim == 3:
        images = images[None]
    depth = _depth(index, k, depth)
    index._check_encoder(encoder.config.name, int(encoder.config.dim), encoder_version(encoder),
                         getattr(encoder, "weights_sha256", None))
    hits = caption_search(index, text, depth, k1=k1, b=b)
    allowed = index.matchable(kinds)
    if allowed is not None:
        hits = [h for h in hits if allowed[h.row]]
        extra = {ch: [[n for n in ranked if index.is_matchable(n, kinds)] for ranked in rows]
                 for ch, rows in (extra or {}).items()}
    vectors = embed_images(list(images), encoder)
    image_hits = index.query(vectors, depth, encoder=encoder, kinds=kinds)
    text_rows = [h.row for h in hits]
    text_nodes = index.nodes(text_rows)
    bm25 = {n.node_id: h.score for n, h in zip(text_nodes, hits, strict=True)}
    text_ids = [n.node_id for n in text_nodes]
    extra = dict(extra or {})
    fusion = {"method": "rrf", "k": rrf_k, "weights": dict(weights or {}), "depth": depth,
              "channels": {"image": f"cosine ({index.encoder_name})",
                           "text": f"caption BM25 (k1={k1}, b={b})",
                           **dict.fromkeys(extra, "vision-language tower cosine")}}
    stored = _stored_vectors(index, text_rows)
    out = []
    for i, (vec, row) in enumerate(zip(vectors, image_hits, strict=True)):
        sims = {m.node.node_id: m.similarity for m in row}
        nodes = {m.node.node_id: m.node for m in row}
        candidates = list(zip(text_nodes, stored, strict=True))
        more = [n for ranked in extra.values() for n in ranked[i]
                if n.node_id not in sims and n.node_id not in bm25]
        if more:
            rows_more = _rows_of(index, [n.node_id for n in more])
            candidates += list(zip(more, _stored_vectors(index, rows_more), strict=True))
        for node, v in candidates:
            nodes.setdefault(node.node_id, node)
            sims.setdefault(node.node_id, float(np.dot(v, vec) / max(np.linalg.norm(v), 1e-12)))
        for ranked in extra.values():
            for n in ranked[i]:
                nodes.setdefault(n.node_id, n)
        rankings = {"image": [m.node.node_id for m in row], "text": text_ids,
                    **{ch: [n.node_id for n in ranked[i]] for ch, ranked in extra.items()}}
        fused = rrf(rankings, k=rrf_k, weights=weights)[:k]
        out.append([FusedMatch(nodes[key], score, "rrf", similarity=float(sims[key]),
                               text_score=bm25.get(key), image_rank=ranks["image"],
                               text_rank=ranks["text"], fused_score=score, ranks=ranks,
                               fusion=fusion)
                    for key, score, ranks in fused])
    return out


def _tower_rankings(index: FigureIndex, towers: Mapping[str, Any], images: Any,
                    text: str | None, depth: int) -> dict[str, list[list[FigureNode]]]:
    """``{"vl_text:NAME" | "vl_image:NAME": [ranking per image]}`` from each tower."""
    from .towers import open_tower

    n = len(images) if images is not None else 1
    out: dict[str, list[list[FigureNode]]] = {}
    for name, tower_encoder in towers.items():
        tower = open_tower(index, name)
        if text:
            out[f"vl_text:{name}"] = tower.rank_texts(tower_encoder, [text], depth) * n
        if images is not None:
            out[f"vl_image:{name}"] = tower.rank_images(tower_encoder, list(images), depth)
    return out


def search(index: FigureIndex, *, images: Sequence[np.ndarray] | np.ndarray | None = None,
           text: str | None = None, encoder: Any = None, k: int = 5, rrf_k: float = RRF_K,
           weights: Mapping[str, float] | None = None, depth: int | None = None,
           towers: Mapping[str, Any] | None = None, kinds: Sequence[str] | None = None
           ) -> list[list[FusedMatch]]:
    """One entry point for image, text and fused queries; one result list per image (one list
    for a text-only query).

    Image only: cosine ranking (``score_type="cosine"``); text only: caption BM25
    (``"bm25"``); both: RRF (``"rrf"``). ``towers`` (``{name: encoder}``, see
    :mod:`wsikit.evidence.towers`) add each vision-language tower's text→image and
    image→image rankings as further RRF channels (``vl_text:NAME``, ``vl_image:NAME``).
    ``kinds`` keeps only panels and single-panel figures of those kinds
    (:meth:`FigureIndex.matchable`; ``None``: every node).

    Raises
    ------
    EvidenceError
        Neither images nor text, or images without an encoder.
    """
    has_images = images is not None and len(images) > 0
    if not has_images and not text:
        raise EvidenceError(f"give a query image and/or a query text ({keyword('text')})")
    if has_images and encoder is None:
        raise EvidenceError("an image query needs the index's encoder")
    if isinstance(images, np.ndarray) and images.ndim == 3:
        images = images[None]
    extra = _tower_rankings(index, towers, images if has_images else None, text,
                            _depth(index, k, depth)) if towers else {}
    if kinds is not None:
        extra = {ch: [[n for n in ranked if index.is_matchable(n, kinds)] for ranked in rows]
                 for ch, rows in extra.items()}
    if not has_images:
        assert text is not None  # checked above: a query without images has a text
        single = {ch: ranked[0] for ch, ranked in extra.items()}
        if kinds is None:
            return [query_text(index, text, k, extra=single, rrf_k=rrf_k, weights=weights,
                               depth=depth)]
        found = query_text(index, text, index.count, extra=single, rrf_k=rrf_k,
                           weights=weights, depth=depth)
        return [[m for m in found if index.is_matchable(m.node, kinds)][:k]]
    assert images is not None  # has_images
    if text:
        return query_fused(index, images, encoder, text, k, rrf_k=rrf_k, weights=weights,
                           depth=depth, extra=extra, kinds=kinds)
    if extra:
        return _fuse_image_channels(index, images, encoder, k, rrf_k=rrf_k, weights=weights,
                                    depth=depth, extra=extra, kinds=kinds)
    return [[FusedMatch(m.node, m.similarity, "cosine", similarity=m.similarity,
                        image_rank=pos, ranks={"image": pos})
             for pos, m in enumerate(row, start=1)]
            for row in index.query_images(images, encoder, k=k, kinds=kinds)]


def _fuse_image_channels(index: FigureIndex, images: Any, encoder: Any, k: int, *,
                         rrf_k: float, weights: Mapping[str, float] | None, depth: int | None,
                         extra: Mapping[str, Sequence[Sequence[FigureNode]]],
                         kinds: Sequence[str] | None = None) -> list[list[FusedMatch]]:
    """Image query with tower channels (no text): RRF of the image ranking and the towers'."""
    depth = _depth(index, k, depth)
    out = []
    fusion = {"method": "rrf", "k": rrf_k, "weights": dict(weights or {}), "depth": depth,
              "channels": {"image": f"cosine ({index.encoder_name})",
                           **dict.fromkeys(extra, "vision-language tower cosine")}}
    for i, row in enumerate(index.query_images(images, encoder, k=depth, kinds=kinds)):
        nodes = {m.node.node_id: m.node for m in row}
        sims = {m.node.node_id: m.similarity for m in row}
        for ranked in extra.values():
            nodes.update((n.node_id, n) for n in ranked[i] if n.node_id not in nodes)
        rankings = {"image": [m.node.node_id for m in row],
                    **{ch: [n.node_id for n in ranked[i]] for ch, ranked in extra.items()}}
        out.append([FusedMatch(nodes[key], score, "rrf", similarity=sims.get(key),
                               image_rank=ranks["image"], fused_score=score, ranks=ranks,
                               fusion=fusion)
                    for key, score, ranks in rrf(rankings, k=rrf_k, weights=weights)[:k]])
    return out
