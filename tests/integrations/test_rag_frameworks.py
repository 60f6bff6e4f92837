"""The LangChain, LlamaIndex and Haystack adapters against the real libraries' classes.

Two slides' results feed one store per library: every document is kept (ids unique across
slides), with the figure image, citation, calibrated score and provenance in its metadata.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from wsikit.errors import EvidenceError

langchain_core = pytest.importorskip("langchain_core", reason="pip install wsikit[langchain]")
llama_index = pytest.importorskip("llama_index.core", reason="pip install wsikit[llamaindex]")
haystack = pytest.importorskip("haystack", reason="pip install wsikit[haystack]")


def _n_docs(results) -> int:
    return sum(len(r.matches) for res in results for r in res.regions)


def test_two_slides_would_collide_with_region_node_ids(two_results):
    """The fixture reproduces the issue: region-node ids repeat across the two slides."""
    old_ids = [f"{r.id}-{m['node_id']}" for res in two_results for r in res.regions
               for m in r.matches]
    assert len(set(old_ids)) < len(old_ids)
    assert two_results[0].slide_id != two_results[1].slide_id


def test_langchain_store_keeps_every_document(two_results):
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    from wsikit.integrations.langchain import to_documents

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    docs = [d for res in two_results for d in to_documents(res)]
    assert all(isinstance(d, Document) for d in docs)
    ids = store.add_documents(docs, ids=[d.id for d in docs])
    assert len(store.store) == len(docs) == len(set(ids)) == _n_docs(two_results)
    md = docs[0].metadata
    assert Path(md["image_path"]).is_file() and md["mime_type"] == "image/png"
    assert Path(md["crop_path"]).is_file() and md["crop_mpp"] > 0
    assert md["source"] == f"https://doi.org/{md['doi']}" or md["doi"] is None
    assert md["encoder"] == "heuristic" and md["encoder_heuristic"] is True
    assert md["attention_heuristic"] is True and "weight-free" in md["score_type"]
    assert md["score"] == md["similarity"] and 0 <= md["similarity_percentile"] <= 100
    # a rerun gives the same ids: re-adding updates instead of duplicating
    store.add_documents(to_documents(two_results[0]),
                        ids=[d.id for d in to_documents(two_results[0])])
    assert len(store.store) == len(docs)


def test_llamaindex_docstore_and_index_keep_every_node(two_results):
    from llama_index.core import MockEmbedding, VectorStoreIndex
    from llama_index.core.schema import ImageNode, MetadataMode, NodeWithScore
    from llama_index.core.storage.docstore import SimpleDocumentStore

    from wsikit.integrations.llamaindex import to_nodes

    hits = [h for res in two_results for h in to_nodes(res)]
    assert all(isinstance(h, NodeWithScore) and isinstance(h.node, ImageNode) for h in hits)
    docstore = SimpleDocumentStore()
    docstore.add_documents([h.node for h in hits], allow_update=False)  # raises on a repeat
    assert len(docstore.docs) == len(hits) == _n_docs(two_results)
    index = VectorStoreIndex([h.node for h in hits], embed_model=MockEmbedding(embed_dim=8))
    assert len(index.docstore.docs) == len(hits)
    node = hits[0].node
    assert node.image_path and Path(node.image_path).is_file()
    assert node.image_mimetype == "image/png" and hits[0].score == node.metadata["similarity"]
    embed_text = node.get_content(metadata_mode=MetadataMode.EMBED)
    llm_text = node.get_content(metadata_mode=MetadataMode.LLM)
    for layout in ("region_x", "region_width", "schema", "image_path", "slide_path",
                   "region_uid", "wsikit_version"):
        assert f"{layout}:" not in embed_text and f"{layout}:" not in llm_text
    assert node.text in embed_text and "figure_label:" in embed_text
    assert "similarity_percentile:" in llm_text and "encoder_heuristic: True" in llm_text


def test_haystack_store_keeps_every_document_and_similarity(two_results):
    from haystack import Document
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack.document_stores.types import DuplicatePolicy

    from wsikit.integrations.haystack import to_documents

    docs = [d for res in two_results for d in to_documents(res)]
    assert all(isinstance(d, Document) for d in docs)
    store = InMemoryDocumentStore()
    assert store.write_documents(docs, policy=DuplicatePolicy.FAIL) == len(docs)
    assert store.count_documents() == _n_docs(two_results)
    found = InMemoryBM25Retriever(store, top_k=3).run(query="SYNTHETIC stroma")["documents"]
    assert found
    for d in found:  # BM25 overwrote score; wsikit's similarity survives in its own field
        assert d.meta["wsikit_similarity"] == d.meta["similarity"]
        assert Path(d.meta["file_path"]).is_file()


def _crop(res) -> Path:
    region = res.regions[0]
    return res.resolve(region.crop["path"], region.crop.get("abspath"))


def test_retrievers_answer_image_queries(two_results, figure_index, tmp_path):
    from haystack import Pipeline
    from llama_index.core.schema import QueryBundle

    from wsikit.integrations.haystack import WsikitRetriever as HaystackRetriever
    from wsikit.integrations.langchain import WsikitRetriever
    from wsikit.integrations.llamaindex import WsikitMultiModalRetriever

    crop = _crop(two_results[1])
    lc = WsikitRetriever(index=str(figure_index), k=3, min_similarity="none")
    docs = lc.invoke(str(crop))
    li = WsikitMultiModalRetriever(figure_index, k=3, min_similarity="none")
    nodes = li.image_to_image_retrieve(str(crop))
    assert [n.node.id_ for n in nodes] == [d.id for d in docs]
    assert [n.node.id_ for n in li.retrieve(QueryBundle("", image_path=str(crop)))] == \
        [d.id for d in docs]
    pipe = Pipeline()
    pipe.add_component("figures", HaystackRetriever(index=str(figure_index), k=3,
                                                    min_similarity="none"))
    hs = pipe.run({"figures": {"query": str(crop)}})["figures"]["documents"]
    assert [d.id for d in hs] == [d.id for d in docs] and len(docs) == 3
    sims = [d.metadata["similarity"] for d in docs]
    assert sims == sorted(sims, reverse=True)
    # an array query is the same image: same matches
    arr = np.asarray(Image.open(crop).convert("RGB"))
    assert [d.metadata["node_id"] for d in lc.invoke_image(arr)] == \
        [d.metadata["node_id"] for d in docs]
    # a licence filter: the demo's synthetic figures state no licence ("unknown")
    assert WsikitRetriever(index=str(figure_index), k=3, min_similarity="none",
                           licences="open").invoke(str(crop)) == []
    unknown = WsikitMultiModalRetriever(figure_index, k=3, min_similarity="none",
                                        licences="unknown").image_to_image_retrieve(str(crop))
    assert [n.node.id_ for n in unknown] == [d.id for d in docs]
    assert HaystackRetriever(index=str(figure_index), licences="open").to_dict()[
        "init_parameters"]["licences"] == "open"
    # the default floor (p95) keeps only matches at or above the 95th percentile
    strict = WsikitRetriever(index=str(figure_index), k=5).invoke(str(crop))
    assert all(d.metadata["similarity_percentile"] >= 95 for d in strict)
    assert len(strict) <= 5


def test_slide_query_runs_select(two_results, figure_index, cmu_small, tmp_path, fast_options):
    from wsikit.integrations.langchain import WsikitRetriever

    opts = {k: v for k, v in fast_options.items() if k != "progress"}
    lc = WsikitRetriever(index=str(figure_index), k=10, min_similarity="none",
                         out=str(tmp_path / "o"), select_options=opts)
    docs = lc.invoke(str(cmu_small))
    want = [d["id"] for d in two_results[0].to_langchain_documents()]
    assert [d.id for d in docs] == want  # same slide, same options: the same, stable ids


def test_bad_queries_and_options_are_refused(figure_index, tmp_path):
    from wsikit.integrations.langchain import WsikitRetriever
    from wsikit.integrations.llamaindex import WsikitMultiModalRetriever

    with pytest.raises(EvidenceError, match="out of range"):
        WsikitRetriever(index=str(figure_index), min_similarity=2)
    lc = WsikitRetriever(index=str(figure_index))
    with pytest.raises(EvidenceError, match="not an existing image"):
        lc.invoke(str(tmp_path / "nope.png"))
    li = WsikitMultiModalRetriever(figure_index)
    hits = li.text_to_image_retrieve("dense nuclei")  # caption search: captioned figures
    assert hits and all(os.path.isfile(h.node.image_path) for h in hits)
    assert all("nuclei" in (h.node.text or "").lower() for h in hits)


def test_evidence_json_paths_relative_to_its_folder_and_absolute(two_results):
    import json

    for res in two_results:
        doc = json.loads((res.base_dir / "evidence.json").read_text())
        assert doc["slide"]["id"] == res.slide_id
        # the slide lives outside the result: relative to it and absolute, both the same file
        assert not Path(doc["slide"]["relpath"]).is_absolute()
        assert (res.base_dir / doc["slide"]["relpath"]).resolve() == \
            Path(doc["slide"]["path"]).resolve() == res.slide_file()
        for r in doc["regions"]:
            crop = r["crop"]
            # a crop lives inside the result: relative only (a moved job keeps it valid)
            assert not Path(crop["path"]).is_absolute() and "abspath" not in crop
            assert (res.base_dir / crop["path"]).is_file()
            assert r["uid"].startswith(res.slide_id + ":" + r["id"] + ":")
            for m in r["matches"]:
                assert not Path(m["image_path"]).is_absolute()
                assert (res.base_dir / m["image_path"]).resolve() == Path(m["image_abspath"])
                assert Path(m["image_abspath"]).is_file()
