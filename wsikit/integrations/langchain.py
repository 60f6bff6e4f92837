"""LangChain retriever: a crop, an image file or a slide in, ``Document`` objects out.

>>> from wsikit.integrations.langchain import WsikitRetriever        # doctest: +SKIP
>>> retriever = WsikitRetriever(index="lit_index")                  # doctest: +SKIP
>>> docs = retriever.invoke("crop.png")  # or a slide: runs select  # doctest: +SKIP
>>> docs[0].metadata["image_path"]                                  # doctest: +SKIP

Needs ``langchain-core`` (``pip install wsikit[langchain]``). Each ``Document`` is one
(region, matched figure): ``id`` unique across slides, caption as ``page_content``, metadata
as in :mod:`wsikit.evidence.adapters` (``source`` = DOI URL, ``image_path``, ``mime_type``,
``score``/``score_type``, ``encoder``...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr

from .core import EvidenceSource, as_result

__all__ = ["WsikitRetriever", "to_documents"]


def to_documents(result: Any) -> list[Document]:
    """LangChain ``Document`` objects of an :class:`~wsikit.evidence.EvidenceResult` (or of an
    evidence.json path)."""
    return [Document(**d) for d in as_result(result).to_langchain_documents()]


class WsikitRetriever(BaseRetriever):
    """Literature figures matching a crop image, an image path or a slide.

    ``invoke(query)`` takes a path (image, slide or evidence.json); :meth:`invoke_image`
    takes an ``(H, W, 3) uint8`` array.

    Parameters
    ----------
    index : str or Path
        Figure index folder.
    k : int
        Figures looked up per crop/region before the similarity floor.
    min_similarity : str or float
        ``"p95"`` (default: 95th percentile of unrelated-figure similarities), a cosine
        similarity, or ``"none"``.
    out : str or Path
        Output root of ``wsikit select`` for slide queries.
    select_options : dict
        Extra :func:`wsikit.run.pipeline.select` options for slide queries.
    licences : str or None
        Return only figures under these licences (``"open"``, ``"CC BY,CC0"``); ``None``: any.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: str | Path
    k: int = 5
    min_similarity: str | float = "p95"
    out: str | Path = "wsikit_out"
    select_options: dict[str, Any] = Field(default_factory=dict)
    device: str = "auto"
    licences: str | None = None
    _source: EvidenceSource = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        """Check the options and prepare the (lazily opened) index."""
        self._source = EvidenceSource(index=self.index, k=self.k,
                                      min_similarity=self.min_similarity, out=self.out,
                                      select_options=self.select_options, device=self.device,
                                      licences=self.licences)

    def _get_relevant_documents(self, query: Any, *,
                                run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return to_documents(self._source.retrieve(query))

    def invoke_image(self, image: Any) -> list[Document]:
        """Documents for an ``(H, W, 3) uint8`` crop array (``invoke`` takes paths)."""
        return to_documents(self._source.retrieve(image))
