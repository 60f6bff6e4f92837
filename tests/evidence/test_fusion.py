"""Reciprocal-rank fusion with known ranks; text, image and fused index queries (Python and
CLI) record each channel's rank, the fused score and the score type."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from wsikit.cli import main
from wsikit.errors import EvidenceError
from wsikit.evidence import FigureIndex, FigureNode, load_image
from wsikit.evidence.captions import caption_search
from wsikit.evidence.fusion import query_fused, query_text, rrf, search


def test_rrf_known_ranks():
    fused = rrf({"image": ["a", "b", "c"], "text": ["c", "a"]}, k=50)
    scores = {key: s for key, s, _ in fused}
    assert scores["a"] == pytest.approx(1 / 51 + 1 / 52, rel=1e-15)
    assert scores["c"] == pytest.approx(1 / 53 + 1 / 51, rel=1e-15)
    assert scores["b"] == pytest.approx(1 / 52, rel=1e-15)
    assert [key for key, *_ in fused] == ["a", "c", "b"]
    assert {key: r for key, _, r in fused}["b"] == {"image": 2, "text": None}
    assert fused[1][2] == {"image": 3, "text": 1}


def test_rrf_k_weights_and_ties():
    # k=1: c (image 3, text 2) scores 1/4 + 1/3 = 0.583 and beats a (image 1 only) at 1/2
    fused = rrf({"image": ["a", "b", "c"], "text": ["x", "c"]}, k=1)
    assert [key for key, *_ in fused][:2] == ["c", "a"]
    assert fused[0][1] == pytest.approx(1 / 4 + 1 / 3)
    # equal scores: ordered by best single rank, then first appearance
    tied = rrf({"image": ["a", "b"], "text": ["b", "a"]}, k=50)
    assert tied[0][1] == tied[1][1] and [t[0] for t in tied] == ["a", "b"]
    weighted = rrf({"image": ["a", "b"], "text": ["b", "a"]}, k=50, weights={"text": 2.0})
    assert weighted[0][0] == "b" and weighted[0][1] == pytest.approx(1 / 52 + 2 / 51)
    single = rrf({"text": ["q"]}, k=60)
    assert single == [("q", pytest.approx(1 / 61), {"text": 1})]


@pytest.mark.parametrize("bad", [{"k": 0}, {"k": -3}, {"weights": {"image": -1}}])
def test_rrf_refuses_bad_settings(bad):
    with pytest.raises(EvidenceError):
        rrf({"image": ["a"]}, **bad)


def test_rrf_refuses_repeated_key():
    with pytest.raises(EvidenceError, match="twice"):
        rrf({"image": ["a", "a"]})


# ---------------------------------------------------------------------- on an index
CAPTIONS = ["HER2+ invasive ductal carcinoma, Ki-67 > 20 %", "ER- PR- triple negative carcinoma",
            "Normal breast lobule", "Lymph node with CD3/CD20 staining",
            "HER2+ carcinoma, second example", "Adipose tissue"]


@pytest.fixture
def index(tmp_path: Path, make_images, encoder) -> FigureIndex:
    paths = make_images(tmp_path / "imgs", len(CAPTIONS), seed=3)
    nodes = [FigureNode.from_image(p, caption=c, figure_label=f"Figure {i + 1}",
                                   source_title="Atlas", doi="10.5555/atlas")
             for i, (p, c) in enumerate(zip(paths, CAPTIONS, strict=True))]
    return FigureIndex.build(nodes, encoder, tmp_path / "idx")


def test_query_text_ranks_captions(index: FigureIndex):
    found = query_text(index, "HER2+ carcinoma", k=5)
    assert [m.node.caption for m in found[:2]] == [CAPTIONS[4], CAPTIONS[0]]  # shorter first
    assert all(m.score_type == "bm25" and m.image_rank is None for m in found)
    assert [m.text_rank for m in found] == list(range(1, len(found) + 1))
    assert found[0].score == pytest.approx(caption_search(index, "HER2+ carcinoma")[0].score)
    assert CAPTIONS[2] not in [m.node.caption for m in found]  # no query term
    assert query_text(index, "CD20")[0].node.caption == CAPTIONS[3]  # slash-list part


def test_fused_query_is_rrf_of_the_two_channels(index: FigureIndex, encoder):
    image = load_image(index.nodes([2])[0].image)  # the "Normal breast lobule" figure itself
    text = "HER2+ carcinoma"
    fused = query_fused(index, image, encoder, text, k=6, rrf_k=50)[0]
    img_ranking = [m.node.node_id for m in index.query_images([image], encoder, k=6)[0]]
    txt_ranking = [m.node.node_id for m in query_text(index, text, k=6)]
    for m in fused:
        nid = m.node.node_id
        ir = img_ranking.index(nid) + 1
        tr = txt_ranking.index(nid) + 1 if nid in txt_ranking else None
        assert (m.image_rank, m.text_rank) == (ir, tr)
        assert m.fused_score == pytest.approx(1 / (50 + ir) + (1 / (50 + tr) if tr else 0))
        assert m.score_type == "rrf" and m.score == m.fused_score
        vec = encoder.encode(image[None])[0]
        stored = encoder.encode(load_image(m.node.image)[None])[0]
        cos = float(vec @ stored / np.linalg.norm(vec) / np.linalg.norm(stored))
        assert m.similarity == pytest.approx(cos, abs=1e-5)
    assert [m.fused_score for m in fused] == sorted((m.fused_score for m in fused), reverse=True)
    d = fused[0].to_dict()
    assert {"image_rank", "text_rank", "fused_score", "score_type", "similarity"} <= d.keys()
    assert fused[0].fusion["k"] == 50 and fused[0].fusion["method"] == "rrf"


def test_text_only_candidates_get_their_image_similarity(index: FigureIndex, encoder):
    image = load_image(index.nodes([5])[0].image)
    fused = query_fused(index, image, encoder, "CD3", k=6, depth=1)[0]
    by_caption = {m.node.caption: m for m in fused}
    lymph = by_caption[CAPTIONS[3]]
    assert lymph.text_rank == 1 and lymph.image_rank is None  # depth 1: only its caption ranked
    assert lymph.similarity is not None and -1.0001 <= lymph.similarity <= 1.0001
    assert len(fused) == 2


def test_search_dispatch(index: FigureIndex, encoder):
    image = load_image(index.nodes([0])[0].image)
    only_image = search(index, images=[image], encoder=encoder, k=3)[0]
    assert only_image[0].score_type == "cosine" and only_image[0].image_rank == 1
    assert only_image[0].text_rank is None and only_image[0].fused_score is None
    with pytest.raises(EvidenceError, match="image and/or"):
        search(index)
    with pytest.raises(EvidenceError, match="encoder"):
        search(index, images=[image])


def test_cli_text_and_fused_query(index: FigureIndex, capsys, tmp_path: Path):
    assert main(["index", "query", str(index.path), "--text", "ER- carcinoma", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out[0]["caption"] == CAPTIONS[1] and out[0]["score_type"] == "bm25"
    assert out[0]["text_rank"] == 1 and out[0]["image_rank"] is None
    img = Path(index.nodes([1])[0].image)
    assert main(["index", "query", str(index.path), str(img), "--text", "HER2+", "--rrf-k", "10",
                 "--json", "-k", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out) == 3 and all(m["score_type"] == "rrf" for m in out)
    assert out[0]["fused_score"] == pytest.approx(
        sum(1 / (10 + r) for r in (out[0]["image_rank"], out[0]["text_rank"]) if r))
    assert main(["index", "query", str(index.path), "--text", "HER2+"]) == 0
    assert "bm25" in capsys.readouterr().out
    assert main(["index", "query", str(index.path)]) == 2
    assert "IMAGE, --text" in capsys.readouterr().err
    assert main(["index", "query", str(index.path), str(img), "--json"]) == 0  # unchanged
    plain = json.loads(capsys.readouterr().out)
    assert "score_type" not in plain[0] and plain[0]["similarity"] == pytest.approx(1, abs=1e-5)


def test_select_question_fuses_and_shows_the_question(index: FigureIndex, capsys,
                                                      synthetic_small_slide: Path,
                                                      tmp_path: Path):
    from wsikit.evidence import EvidenceResult
    from wsikit.outputs.layout import OutputLayout
    from wsikit.run.pipeline import select

    common = ["select", str(synthetic_small_slide), "--out", str(tmp_path / "out"), "--index",
              str(index.path), "--encoder", "heuristic", "--patch-px", "256", "--no-report",
              "-k", "3", "--min-similarity", "none"]  # fusion order, not the floor, is tested
    assert main([*common, "--question", "HER2+ carcinoma?", "--format", "context"]) == 0
    context = capsys.readouterr().out
    assert "Question: HER2+ carcinoma?" in context and "reciprocal rank" in context
    evidence = OutputLayout(tmp_path / "out").select_dir("synthetic_small") / "evidence.json"
    doc = EvidenceResult.read(evidence).to_dict()  # still valid against the schema
    assert doc["selection"]["question"] == "HER2+ carcinoma?"
    assert doc["selection"]["fusion"]["k"] == 50
    matches = [m for r in doc["regions"] for m in r["matches"]]
    assert matches and all(m["score_type"] == "rrf" for m in matches)
    # the two HER2+ captions rank 1-2 in the text channel and so lead every region's list
    her2 = {CAPTIONS[0], CAPTIONS[4]}
    for r in doc["regions"]:
        assert {m["caption"] for m in r["matches"][:2]} == her2
        assert all(m["text_rank"] in (1, 2) for m in r["matches"][:2])
    with pytest.raises(EvidenceError, match="index=INDEX_DIR"):  # refused before any work
        select(synthetic_small_slide, out=tmp_path / "none", question="HER2+?")
    with pytest.raises(EvidenceError, match="no searchable term"):
        select(synthetic_small_slide, out=tmp_path / "none", index=index.path, question="?")
    assert not (tmp_path / "none").exists()
    # without a question nothing changes: image similarity only, no question in the context
    plain = select(synthetic_small_slide, out=tmp_path / "out", index=index.path,
                   encoder="heuristic", patch_px=256, report=False, k=3, progress=False,
                   min_similarity="none")
    assert "question" not in plain.selection and "Question:" not in plain.to_prompt_context()
    assert all("score_type" not in m for r in plain.regions for m in r.matches)


def test_select_question_keeps_the_image_similarity_floor(index: FigureIndex,
                                                          synthetic_small_slide: Path,
                                                          tmp_path: Path):
    """A question reorders visual evidence but never admits a figure below the p95 floor."""
    from wsikit.run.pipeline import select

    res = select(synthetic_small_slide, out=tmp_path / "out", index=index.path,
                 encoder="heuristic", patch_px=256, report=False, k=5, progress=False,
                 question="HER2+ carcinoma?")
    bg = index.background
    for r in res.regions:
        for m in r.matches:
            assert m["score_type"] == "rrf" and m["percentile"] >= 95
            assert m["percentile"] == pytest.approx(float(bg.percentile(m["similarity"])),
                                                    abs=0.01)
        assert r.below_floor + len(r.matches) == 5
