"""Retrievers for RAG frameworks: thin adapters over :class:`EvidenceSource`.

* :mod:`wsikit.integrations.langchain` — ``WsikitRetriever``, a LangChain ``BaseRetriever``
  (``pip install wsikit[langchain]``);
* :mod:`wsikit.integrations.llamaindex` — ``WsikitMultiModalRetriever``, a LlamaIndex
  ``MultiModalRetriever`` returning ``NodeWithScore`` of ``ImageNode``
  (``pip install wsikit[llamaindex]``);
* :mod:`wsikit.integrations.haystack` — ``WsikitRetriever``, a Haystack ``@component``
  (``pip install wsikit[haystack]``).

Each takes a crop image (array or file), a slide (runs ``wsikit select`` against the index)
or an ``evidence.json`` and returns one document per (region, matched figure), with the ids,
paths, citation, calibrated similarity and provenance of :mod:`wsikit.evidence.adapters`.
Importing this package imports none of the frameworks.
"""

from __future__ import annotations

from .core import EvidenceSource

__all__ = ["EvidenceSource"]
