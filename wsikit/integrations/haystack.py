"""Haystack retriever component: an image or slide path in, ``Document`` objects out.

>>> from haystack import Pipeline                                        # doctest: +SKIP
>>> from wsikit.integrations.haystack import WsikitRetriever             # doctest: +SKIP
>>> pipe = Pipeline()                                                    # doctest: +SKIP
>>> pipe.add_component("figures", WsikitRetriever(index="lit_index"))    # doctest: +SKIP
>>> pipe.run({"figures": {"query": "crop.png"}})["figures"]["documents"]  # doctest: +SKIP

Needs ``haystack-ai`` 2.x or later (``pip install wsikit[haystack]``). ``meta["file_path"]`` is
the figure image; the cosine similarity is in ``score`` and also in
``meta["wsikit_similarity"]`` (with ``similarity_percentile`` and ``score_type``), because
BM25 retrievers and rankers later in a pipeline overwrite ``score``.
"""

from __future__ import annotations

from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict

from .core import EvidenceSource, as_result

__all__ = ["WsikitRetriever", "to_documents"]


def to_documents(result: Any) -> list[Document]:
    """Haystack ``Document`` objects of an :class:`~wsikit.evidence.EvidenceResult` (or an
    evidence.json path)."""
    return [Document(**d) for d in as_result(result).to_haystack_documents()]


@component
class WsikitRetriever:
    """Literature figures matching a crop image or the regions of a slide.

    Parameters
    ----------
    index : str
        Figure index folder.
    k, min_similarity, out, select_options, device, licences
        As :class:`wsikit.integrations.EvidenceSource`.
    """

    def __init__(self, index: str, k: int = 5, min_similarity: str | float = "p95",
                 out: str = "wsikit_out", select_options: dict[str, Any] | None = None,
                 device: str = "auto", licences: str | None = None) -> None:
        self.index, self.k, self.min_similarity = str(index), k, min_similarity
        self.out, self.select_options, self.device = str(out), dict(select_options or {}), device
        self.licences = licences
        self._source = EvidenceSource(index=self.index, k=k, min_similarity=min_similarity,
                                      out=self.out, select_options=self.select_options,
                                      device=device, licences=licences)

    @component.output_types(documents=list[Document])
    def run(self, query: str, top_k: int | None = None) -> dict[str, list[Document]]:
        """Documents for ``query``: an image file, a slide (runs ``wsikit select``) or an
        evidence.json; ``top_k`` overrides ``k``."""
        return {"documents": to_documents(self._source.retrieve(query, k=top_k))}

    def to_dict(self) -> dict[str, Any]:
        """Serialise for Haystack pipelines."""
        return default_to_dict(self, index=self.index, k=self.k,
                               min_similarity=self.min_similarity, out=self.out,
                               select_options=self.select_options, device=self.device,
                               licences=self.licences)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WsikitRetriever:
        """Inverse of :meth:`to_dict`."""
        return default_from_dict(cls, data)
