"""evidence.json: schema validation and the RAG adapters, field by field."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from wsikit.errors import EvidenceError
from wsikit.evidence import EvidenceResult, load_schema
from wsikit.evidence.result import SCHEMA_PATH


def _match(node_id, sim, level, label, **kw):
    names = {None: "unknown", 1: "guideline", 7: "textbook", 5: "case report"}
    return {"node_id": node_id, "similarity": sim, "caption": kw.get("caption", f"{label}. cap"),
            "figure_label": label, "source_title": kw.get("title", "A Paper"),
            "doi": kw.get("doi", "10.1/abc"), "evidence_level": level,
            "evidence_level_name": names[level], "page": kw.get("page", 3), "year": 2020,
            "license": "CC-BY-4.0", "image_path": f"idx/images/{node_id}.png",
            "image_abspath": f"/abs/idx/images/{node_id}.png", "source_path": "/lit/a.pdf",
            "percentile": kw.get("percentile", round(95 + 5 * sim, 2) if sim < 0.9 else
                                 round(90 + 10 * sim, 2))}


@pytest.fixture
def doc() -> dict:
    return {
        "schema": "wsikit.evidence/v1", "wsikit_version": "0.1.0",
        "created": "2026-11-30T05:00:00Z", "synthetic": True,
        "slide": {"path": "/s/CMU-1.svs", "name": "CMU-1", "width": 2220, "height": 2967,
                  "mpp": 0.499, "mpp_source": "openslide.mpp", "backend": "openslide",
                  "vendor": "aperio"},
        "models": {"patch_encoder": {"name": "conch_v1_5", "label": "CONCH v1.5",
                                     "heuristic": False},
                   "attention": {"name": "titan", "label": "TITAN", "heuristic": False},
                   "crop_encoder": {"name": "heuristic",
                                    "label": "heuristic (weight-free) heuristic-v3",
                                    "heuristic": True}},
        "selection": {"selector": "multiscale", "scales": [8, 4, 2, 1],
                      "min_similarity": {"given": "p95", "kind": "percentile",
                                         "percentile": 95.0, "similarity": 0.55}},
        "index": {"path": "idx", "encoder": "heuristic", "dim": 64, "count": 12,
                  "kind": "flat"},
        "empty_scales": {"8": "no 8x8 window fits"},
        "regions": [
            {"id": "r1", "scale": 4, "score": 0.83,
             "box": {"x": 1024, "y": 2048, "width": 2052, "height": 2052},
             "grid_box": {"gx": 2, "gy": 4, "size": 4},
             "crop": {"path": "crops/r1_x4.png", "width": 1024, "height": 1024, "mpp": 1.0},
             "below_floor": 2,
             "matches": [_match("n1", 0.91, 7, "Figure 2B"),
                         _match("n2", 0.80, None, "Fig. 1", doi=None, page=None),
                         _match("n3", 0.60, 1, "Figure 5", title="Guideline")]},
            {"id": "r2", "scale": 1, "score": 0.5,
             "box": {"x": 0, "y": 0, "width": 513, "height": 513}, "grid_box": None,
             "crop": {"path": "crops/r2_x1.png", "width": 512, "height": 512, "mpp": 0.5},
             "below_floor": 1,
             "matches": [_match("n1", 0.95, 7, "Figure 2B"),
                         _match("n4", 0.70, 7, "Figure 7", caption="")]},
        ]}


def test_schema_is_valid_and_example_validates(doc):
    jsonschema.Draft202012Validator.check_schema(load_schema())
    assert SCHEMA_PATH.parent.name == "schemas" and SCHEMA_PATH.is_file()
    result = EvidenceResult.from_dict(doc)
    assert result.to_dict() == doc  # lossless
    result.validate()


def test_write_read_roundtrip(doc, tmp_path: Path):
    result = EvidenceResult.from_dict(doc)
    path = result.write(tmp_path / "evidence.json")
    assert json.loads(path.read_text()) == doc
    assert EvidenceResult.read(path) == result


@pytest.mark.parametrize("mutate, where", [
    (lambda d: d.update(schema="wsikit.evidence/v2"), "schema"),
    (lambda d: d["regions"][0]["matches"][0].update(evidence_level=9), "regions/0/matches/0"),
    (lambda d: d["regions"][0]["matches"][0].update(doi="not-a-doi"), "doi"),
    (lambda d: d["regions"][1].pop("box"), "regions/1"),
    (lambda d: d["slide"].update(mpp=0), "slide/mpp"),
    (lambda d: d["regions"][0]["matches"][1].update(evidence_level_name="textbook"),
     "regions/0/matches/1"),
])
def test_invalid_documents_rejected(doc, mutate, where):
    bad = copy.deepcopy(doc)
    mutate(bad)
    with pytest.raises(EvidenceError, match=where):
        EvidenceResult.from_dict(bad)


def test_langchain_documents(doc):
    docs = EvidenceResult.from_dict(doc).to_langchain_documents()
    assert len(docs) == 5
    d = docs[0]
    assert set(d) == {"id", "page_content", "metadata", "type"}
    sid = EvidenceResult.from_dict(doc).slide_id
    assert sid.startswith("CMU-1-") and len(sid) == len("CMU-1-") + 12
    assert d["type"] == "Document" and d["id"] == f"{sid}:r1:1024-2048-2052x2052:n1"
    assert d["page_content"] == "Figure 2B. cap"
    md = d["metadata"]
    assert md["id"] == d["id"] and md["slide_id"] == sid
    assert md["region_id"] == "r1" and md["region_scale"] == 4 and md["region_score"] == 0.83
    assert (md["region_x"], md["region_y"], md["region_width"], md["region_height"]) == \
        (1024, 2048, 2052, 2052)
    assert md["node_id"] == "n1" and md["similarity"] == 0.91 and md["score"] == 0.91
    assert md["similarity_percentile"] == 99.1
    assert md["figure_label"] == "Figure 2B" and md["doi"] == "10.1/abc" and md["page"] == 3
    assert md["source"] == "https://doi.org/10.1/abc" and md["mime_type"] == "image/png"
    assert md["evidence_level"] == 7 and md["evidence_level_name"] == "textbook"
    assert md["slide_name"] == "CMU-1" and md["synthetic"] is True
    assert md["image_path"] == "/abs/idx/images/n1.png" and md["license"] == "CC-BY-4.0"
    # metadata values are flat scalars (vector stores reject nested values)
    assert all(v is None or isinstance(v, (str, int, float, bool)) for v in md.values())
    empty = docs[4]
    assert empty["page_content"] == "Figure 7 (no caption) from A Paper"


def test_provenance_in_every_document(doc):
    result = EvidenceResult.from_dict(doc)
    metas = ([d["metadata"] for d in result.to_langchain_documents()]
             + [n["metadata"] for n in result.to_llamaindex_nodes()]
             + [h["meta"] for h in result.to_haystack_documents()])
    assert len(metas) == 15
    for md in metas:
        assert md["encoder"] == "heuristic" and md["encoder_heuristic"] is True
        assert md["encoder_label"] == "heuristic (weight-free) heuristic-v3"
        assert md["attention"] == "titan" and md["attention_heuristic"] is False
        assert md["patch_encoder"] == "conch_v1_5" and md["patch_encoder_heuristic"] is False
        assert md["heuristic"] is True
        assert md["score_type"] == ("cosine similarity of heuristic embeddings (weight-free "
                                    "colour/texture heuristic, not a trained model)")
        assert "titan" in md["region_score_type"] and "learned model" in md["region_score_type"]
    doc["models"]["crop_encoder"].update(name="conch_v1_5", heuristic=False)
    md = EvidenceResult.from_dict(doc).to_haystack_documents()[0]["meta"]
    assert md["score_type"] == "cosine similarity of conch_v1_5 embeddings (learned image encoder)"
    assert md["heuristic"] is False


def test_ids_unique_across_slides_and_stable(doc):
    other = copy.deepcopy(doc)
    other["slide"].update(path="/s/other.svs", name="other")
    a, b = EvidenceResult.from_dict(doc), EvidenceResult.from_dict(other)
    ids_a = [d["id"] for d in a.to_langchain_documents()]
    ids_b = [d["id"] for d in b.to_langchain_documents()]
    assert len(set(ids_a + ids_b)) == 10
    assert ids_a == [d["id"] for d in EvidenceResult.from_dict(doc).to_langchain_documents()]
    # an explicit slide id (written by select) wins over the derived one
    doc["slide"]["id"] = "slide-abc"
    assert EvidenceResult.from_dict(doc).to_haystack_documents()[0]["id"].startswith(
        "slide-abc:r1:")


def test_llamaindex_nodes(doc):
    nodes = EvidenceResult.from_dict(doc).to_llamaindex_nodes()
    n = nodes[1]
    assert n["class_name"] == "ImageNode" and n["id_"].endswith(":r1:1024-2048-2052x2052:n2")
    assert n["image_path"] == "/abs/idx/images/n2.png" and n["image_mimetype"] == "image/png"
    assert n["text"] == "Fig. 1. cap" and n["metadata"]["evidence_level_name"] == "unknown"
    assert n["metadata"]["doi"] is None and n["metadata"]["page"] is None
    assert n["relationships"] == {} and n["embedding"] is None
    for layout in ("region_x", "schema", "image_path", "node_id", "slide_path", "region_uid"):
        assert layout in n["excluded_embed_metadata_keys"]
        assert layout in n["excluded_llm_metadata_keys"]
    assert "figure_label" not in n["excluded_embed_metadata_keys"]
    assert "similarity_percentile" not in n["excluded_llm_metadata_keys"]
    assert set(n["excluded_embed_metadata_keys"]) <= set(n["metadata"])
    assert n["text_template"] == "{metadata_str}\n\n{content}"


def test_haystack_documents(doc):
    hs = EvidenceResult.from_dict(doc).to_haystack_documents()
    h = hs[3]
    assert set(h) == {"id", "content", "meta", "score", "embedding", "blob", "sparse_embedding"}
    assert h["id"].endswith(":r2:0-0-513x513:n1") and h["score"] == 0.95
    assert h["content"] == "Figure 2B. cap"
    assert h["meta"]["wsikit_similarity"] == 0.95
    assert h["meta"]["file_path"] == "/abs/idx/images/n1.png"
    assert h["meta"]["region_id"] == "r2" and h["meta"]["region_scale"] == 1
    assert len({x["id"] for x in hs}) == len(hs)


def test_relative_paths_resolve_against_the_documents_folder(doc, tmp_path):
    (tmp_path / "idx" / "images").mkdir(parents=True)
    (tmp_path / "idx" / "images" / "n1.png").write_bytes(b"png")
    doc["regions"][0]["matches"][0]["image_path"] = "../idx/images/n1.png"
    path = EvidenceResult.from_dict(doc).write(tmp_path / "sel" / "evidence.json")
    result = EvidenceResult.read(path)
    assert result.base_dir == (tmp_path / "sel").resolve()
    md = result.to_langchain_documents()[0]["metadata"]
    assert md["image_path"] == str((tmp_path / "idx" / "images" / "n1.png").resolve())


def _blocks(text):
    return [b for b in text.split("\n\n") if b.startswith("[")]


def test_prompt_context_order_and_citations(doc):
    text = EvidenceResult.from_dict(doc).to_prompt_context()
    assert "SYNTHETIC" in text
    blocks = _blocks(text)
    # level 1 first, then level 7 by similarity (n1 best 0.95 over both regions, then n4),
    # unknown level last; n1 appears once with both regions
    assert [b.split("\n")[0].split(" (")[0] for b in blocks] == \
        ["[1] Figure 5", "[2] Figure 2B", "[3] Figure 7", "[4] Fig. 1"]
    assert "similarity 0.950, higher than 99.5% of unrelated-figure pairs; regions r1, r2" \
        in blocks[1]
    assert "Source: Guideline. DOI: 10.1/abc. 2020. page 3. Figure 5. licence CC-BY-4.0." \
        in blocks[0]
    assert "unknown evidence level" in blocks[3] and "DOI: none" in blocks[3]
    assert "Caption: (no caption)" in blocks[2]
    for b in blocks:  # provenance in every block
        assert "Provenance: similarity by heuristic (weight-free heuristic); region by titan " \
               "(learned model)." in b
    assert "because stronger evidence should weigh more; within a level by similarity" in text
    assert "at least as similar as the 95th percentile of similarities between unrelated " \
           "figures of the index (cosine 0.550)" in text
    assert "(3 weaker candidate match(es) were dropped)" in text
    assert "weight-free heuristics, not a trained model's judgement" in text
    assert EvidenceResult.from_dict(doc).to_prompt_context(max_items=1).count("\n[") == 1


def test_prompt_context_no_index_versus_nothing_passed(doc):
    no_index = copy.deepcopy(doc)
    no_index["index"] = None
    for r in no_index["regions"]:
        r["matches"] = []
    text = EvidenceResult.from_dict(no_index).to_prompt_context()
    assert "No figure index was given" in text and "passed" not in text
    assert not _blocks(text)
    for r in doc["regions"]:
        r["matches"] = []
    text = EvidenceResult.from_dict(doc).to_prompt_context()
    assert "No figure passed the similarity floor" in text
    assert "No figure index was given" not in text and not _blocks(text)
