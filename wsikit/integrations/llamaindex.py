"""LlamaIndex multi-modal retriever: ``NodeWithScore`` of ``ImageNode``.

>>> from wsikit.integrations.llamaindex import WsikitMultiModalRetriever   # doctest: +SKIP
>>> retriever = WsikitMultiModalRetriever("lit_index")                    # doctest: +SKIP
>>> hits = retriever.image_to_image_retrieve("crop.png")  # or a slide     # doctest: +SKIP
>>> hits[0].node.image_path, hits[0].score                                # doctest: +SKIP

Needs ``llama-index-core`` (``pip install wsikit[llamaindex]``). Every node is an ``ImageNode``
with ``image_path`` (the figure image), the caption as ``text`` and the citation, calibrated
similarity and provenance as metadata; ids, paths and layout fields (``region_x``, ``schema``,
...) are excluded from the embedded and the LLM text (``excluded_embed_metadata_keys``,
``excluded_llm_metadata_keys``). ``text_to_image_retrieve`` searches the figure captions (BM25,
:mod:`wsikit.evidence.captions`).
"""

from __future__ import annotations

import os
from typing import Any

from llama_index.core.base.base_multi_modal_retriever import MultiModalRetriever
from llama_index.core.image_retriever import BaseImageRetriever
from llama_index.core.schema import ImageNode, NodeWithScore, QueryBundle

from ..evidence.adapters import EMBED_METADATA_KEYS, LLM_METADATA_KEYS, clean_shown, excluded_keys
from ..evidence.sanitise import clean_text
from .core import EvidenceSource, as_result

__all__ = ["WsikitMultiModalRetriever", "to_nodes"]


def to_nodes(result: Any) -> list[NodeWithScore]:
    """``NodeWithScore(ImageNode)`` of an :class:`~wsikit.evidence.EvidenceResult` (or an
    evidence.json path); the score is the cosine similarity."""
    out = []
    for d in as_result(result).to_llamaindex_nodes():
        d = {k: v for k, v in d.items() if k != "class_name"}
        out.append(NodeWithScore(node=ImageNode(**d), score=d["metadata"]["similarity"]))
    return out


def _figure_node(node: Any, score: float) -> NodeWithScore:
    """A caption-search hit (a figure, no region) as ``NodeWithScore(ImageNode)``."""
    image = str(node.image)
    meta = clean_shown({"id": node.node_id, "producer": "wsikit", "node_id": node.node_id,
            "figure_label": node.figure_label, "source_title": node.source_title,
            "doi": node.doi, "page": node.page, "year": node.year, "license": node.license,
            "license_source": node.license_source,
            "evidence_level": node.evidence_level,
            "evidence_level_name": node.evidence_level_name, "image_path": image,
            "file_path": image, "mime_type": "image/png", "score": score,
            "score_type": "caption BM25 relevance to the query text (not image similarity)"})
    return NodeWithScore(node=ImageNode(
        id_=node.node_id, text=clean_text(node.caption) or (meta["figure_label"] or "Figure"),
        image_path=image, image_mimetype="image/png", metadata=meta,
        excluded_embed_metadata_keys=excluded_keys(meta, EMBED_METADATA_KEYS),
        excluded_llm_metadata_keys=excluded_keys(meta, LLM_METADATA_KEYS)),
        score=score)


class WsikitMultiModalRetriever(MultiModalRetriever):
    """Figures of a wsikit index for an image (crop file, array) or a slide query.

    Parameters
    ----------
    index : path-like
        Figure index folder.
    k, min_similarity, out, select_options, device, licences
        As :class:`wsikit.integrations.EvidenceSource`.
    """

    def __init__(self, index: str | os.PathLike[str], *, k: int = 5,
                 min_similarity: str | float = "p95", out: str | os.PathLike[str] = "wsikit_out",
                 select_options: dict[str, Any] | None = None, device: str = "auto",
                 licences: str | None = None, **kwargs: Any) -> None:
        self.source = EvidenceSource(index=index, k=k, min_similarity=min_similarity, out=out,
                                     select_options=select_options or {}, device=device,
                                     licences=licences)
        super().__init__(**kwargs)

    # -- image queries -----------------------------------------------------------------
    def image_to_image_retrieve(self, str_or_query_bundle: Any) -> list[NodeWithScore]:
        """Figures similar to an image (path or ``QueryBundle(image_path=...)``), or to the
        regions ``wsikit select`` finds in a slide path."""
        return BaseImageRetriever.image_to_image_retrieve(self, str_or_query_bundle)

    def _image_to_image_retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return to_nodes(self.source.retrieve(query_bundle.image_path))

    def retrieve_array(self, image: Any) -> list[NodeWithScore]:
        """Figures similar to an ``(H, W, 3) uint8`` crop array."""
        return to_nodes(self.source.retrieve(image))

    async def aimage_to_image_retrieve(self, str_or_query_bundle: Any) -> list[NodeWithScore]:
        return self.image_to_image_retrieve(str_or_query_bundle)

    async def _aimage_to_image_retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._image_to_image_retrieve(query_bundle)

    # -- text queries (caption search) -------------------------------------------------
    def text_to_image_retrieve(self, str_or_query_bundle: Any) -> list[NodeWithScore]:
        """Figures whose captions match a text (needs :mod:`wsikit.evidence.captions`)."""
        return BaseImageRetriever.text_to_image_retrieve(self, str_or_query_bundle)

    def _text_to_image_retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_figure_node(n, s)
                for n, s in self.source.caption_search(query_bundle.query_str)]

    async def atext_to_image_retrieve(self, str_or_query_bundle: Any) -> list[NodeWithScore]:
        return self.text_to_image_retrieve(str_or_query_bundle)

    async def _atext_to_image_retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._text_to_image_retrieve(query_bundle)

    def text_retrieve(self, str_or_query_bundle: Any) -> list[NodeWithScore]:
        """Same as :meth:`text_to_image_retrieve` (every wsikit node is a captioned image)."""
        return self.text_to_image_retrieve(str_or_query_bundle)

    async def atext_retrieve(self, str_or_query_bundle: Any) -> list[NodeWithScore]:
        return self.text_retrieve(str_or_query_bundle)

    # -- BaseRetriever ------------------------------------------------------------------
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """``retrieve(q)``: an image/slide query when ``image_path`` is set or the query
        string is an existing file, else a caption query."""
        if query_bundle.image_path:
            return self._image_to_image_retrieve(query_bundle)
        if query_bundle.query_str and os.path.exists(query_bundle.query_str):
            return to_nodes(self.source.retrieve(query_bundle.query_str))
        return self._text_to_image_retrieve(query_bundle)
