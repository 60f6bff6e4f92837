"""Retrieval metrics against hand-computed values (evidence-aware duplicates, no relevant item,
ties checked against brute force over all orders), qrels parsing, and ``wsikit eval
retrieval`` on a real index."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from wsikit.cli import main
from wsikit.errors import EvidenceError
from wsikit.evidence import FigureIndex, FigureNode
from wsikit.evidence.evaluation import (
    Query,
    Target,
    evaluate_ranking,
    evaluate_retrieval,
    read_qrels,
)

L2, L3, L4 = math.log2(2), math.log2(3), math.log2(4)


def test_hand_computed_metrics():
    # ranks: 1 relevant (target 0), 2 not, 3 relevant (target 1), 4 not; T = R = 2
    m = evaluate_ranking([[0], [], [1], []], n_targets=2, n_relevant=2, ks=(1, 3))
    assert m["precision@1"] == 1 and m["precision@3"] == pytest.approx(2 / 3)
    assert m["recall@1"] == 0.5 and m["recall@3"] == 1
    assert m["mrr@1"] == 1 and m["mrr@3"] == 1
    assert m["ndcg@1"] == 1
    assert m["ndcg@3"] == pytest.approx((1 + 1 / L4) / (1 + 1 / L3))
    assert m["r_precision"] == 0.5  # P@2
    late = evaluate_ranking([[], [], [0]], n_targets=1, n_relevant=1, ks=(1, 3, 5))
    assert late["mrr@1"] == 0 and late["mrr@3"] == pytest.approx(1 / 3)
    assert late["ndcg@3"] == pytest.approx(1 / L4) and late["precision@5"] == pytest.approx(0.2)
    assert late["r_precision"] == 0 and late["recall@1"] == 0 and late["recall@3"] == 1
    assert list(late) == ["recall@1", "precision@1", "mrr@1", "ndcg@1", "recall@3",
                          "precision@3", "mrr@3", "ndcg@3", "recall@5", "precision@5", "mrr@5",
                          "ndcg@5", "r_precision"]


def test_evidence_aware_duplicates_are_hits_not_penalties():
    # one accepted figure (target 0) carried by two nodes, both retrieved first: perfect
    m = evaluate_ranking([[0], [0], []], n_targets=1, n_relevant=2, ks=(1, 2, 3))
    assert m["precision@2"] == 1 and m["recall@1"] == 1 and m["recall@3"] == 1
    assert m["ndcg@2"] == pytest.approx(1) and m["r_precision"] == 1
    # recall counts figures, not nodes: two copies of target 0 do not cover target 1
    two = evaluate_ranking([[0], [0], [1]], n_targets=2, n_relevant=3, ks=(2, 3))
    assert two["recall@2"] == 0.5 and two["recall@3"] == 1
    # a node carrying two accepted targets covers both
    both = evaluate_ranking([[0, 1]], n_targets=2, n_relevant=1, ks=(1,))
    assert both["recall@1"] == 1 and both["precision@1"] == 1


def test_no_relevant_item_is_undefined_not_zero():
    m = evaluate_ranking([[], []], n_targets=0, n_relevant=0, ks=(1, 3))
    assert set(m.values()) == {None} and "r_precision" in m
    none_found = evaluate_ranking([[], []], n_targets=1, n_relevant=1, ks=(1,))
    assert none_found["recall@1"] == 0 and none_found["mrr@1"] == 0  # defined: a miss
    assert evaluate_ranking([], n_targets=1, n_relevant=1, ks=(3,))["ndcg@3"] == 0


def test_ties_by_hand():
    # scores 0.9, 0.5, 0.5, 0.1; only the second item is relevant: it is rank 2 or 3
    m = evaluate_ranking([[], [0], [], []], n_targets=1, n_relevant=1, ks=(1, 2, 3),
                         scores=[0.9, 0.5, 0.5, 0.1])
    assert m["precision@2"] == pytest.approx(0.25) and m["recall@2"] == pytest.approx(0.5)
    assert m["mrr@3"] == pytest.approx((1 / 2 + 1 / 3) / 2)
    assert m["ndcg@2"] == pytest.approx(0.5 / L3)
    assert m["ndcg@3"] == pytest.approx(0.5 / L3 + 0.5 / L4)
    assert m["recall@3"] == 1 and m["mrr@1"] == 0
    # the same list without scores is read in the given order
    strict = evaluate_ranking([[], [0], [], []], n_targets=1, n_relevant=1, ks=(2,))
    assert strict["precision@2"] == 0.5 and strict["mrr@2"] == 0.5


def _brute_force(carried, scores, **kw):
    """Average of the order-given metrics over every order of each tied group."""
    groups, start = [], 0
    for i in range(1, len(scores) + 1):
        if i == len(scores) or scores[i] != scores[start]:
            groups.append(list(range(start, i)))
            start = i
    total, n = None, 0
    for perms in itertools.product(*(itertools.permutations(g) for g in groups)):
        order = [i for p in perms for i in p]
        m = evaluate_ranking([carried[i] for i in order], **kw)
        total = m if total is None else {k: total[k] + m[k] for k in m}
        n += 1
    return {k: v / n for k, v in total.items()}


@pytest.mark.parametrize("seed", range(6))
def test_ties_equal_brute_force_over_orders(seed):
    rng = np.random.default_rng(seed)
    n = 7
    scores = sorted(rng.integers(0, 3, n).tolist(), reverse=True)  # many ties
    carried = [sorted(set(rng.choice(3, rng.integers(0, 2), replace=False).tolist()))
               if rng.random() < 0.6 else [] for _ in range(n)]
    kw = {"n_targets": 3, "n_relevant": sum(1 for c in carried if c) + 1, "ks": (1, 2, 3, 5)}
    got = evaluate_ranking(carried, scores=scores, **kw)
    want = _brute_force(carried, scores, **kw)
    for key in want:
        assert got[key] == pytest.approx(want[key], abs=1e-12), key


def test_bad_inputs():
    with pytest.raises(EvidenceError, match="scores"):
        evaluate_ranking([[0]], n_targets=1, n_relevant=1, scores=[1.0, 2.0])
    with pytest.raises(EvidenceError, match=">= 1"):
        evaluate_ranking([[0]], n_targets=1, n_relevant=1, ks=(0,))


# ---------------------------------------------------------------------- targets and qrels
def _node(i: int, **kw) -> FigureNode:
    return FigureNode(node_id=f"n{i}", image=Path(f"/x/{i}.png"), **kw)


def test_targets_by_node_id_and_by_figure():
    a = _node(1, doi="10.1/a", figure_label="Figure 2B", source_title="Atlas",
              source_path="/lib/atlas.pdf")
    assert Target(node_id="n1").accepts(a) and not Target(node_id="n2").accepts(a)
    for source in ("10.1/A", "atlas", "atlas.pdf", "/lib/atlas.pdf"):
        assert Target(source=source, figure="Fig. 2b").accepts(a), source
    assert not Target(source="10.1/a", figure="Figure 2").accepts(a)
    assert not Target(source="10.1/b", figure="Figure 2B").accepts(a)


def test_read_qrels(tmp_path: Path):
    (tmp_path / "crop.png").write_bytes(b"x")
    good = tmp_path / "q.jsonl"
    good.write_text('{"id": "a", "text": "HER2+", "relevant": ["n1"]}\n\n'
                    '{"id": "b", "image": "crop.png", "relevant": [{"source": "10.1/a", '
                    '"figure": "Figure 2"}]}\n')
    qs = read_qrels(good)
    assert [q.id for q in qs] == ["a", "b"] and qs[1].image == tmp_path / "crop.png"
    assert qs[1].targets == (Target(source="10.1/a", figure="Figure 2"),) and qs[1].text is None
    cases = {
        '{"id": "a", "relevant": ["n1"]}': "neither 'image' nor 'text'",
        '{"id": "a", "text": "x", "relevant": []}': "needs 'relevant'",
        '{"id": "a", "image": "nope.png", "relevant": ["n1"]}': "does not exist",
        '{"id": "a", "text": "x", "relevant": [{"source": "s"}]}': "neither a node id",
        '{"id": "a", "text": "x", "relevant": ["n"]}\n{"id": "a", "text": "y", "relevant": ["n"]}':
            "appears twice",
        '{"id": "a", "text": ': "invalid JSON",
    }
    for text, message in cases.items():
        bad = tmp_path / "bad.jsonl"
        bad.write_text(text + "\n")
        with pytest.raises(EvidenceError, match=message):
            read_qrels(bad)


# ---------------------------------------------------------------------- on an index
@pytest.fixture
def index(tmp_path: Path, make_images, encoder) -> FigureIndex:
    paths = make_images(tmp_path / "imgs", 5, seed=7)
    specs = [("HER2+ invasive carcinoma", "Figure 1", 1), ("ER- carcinoma", "Figure 2", 2),
             ("Benign lobule", "Figure 3", 3), ("Lymph node", "Figure 4", 4),
             ("Adipose", "Figure 5", 5)]
    nodes = [FigureNode.from_image(p, caption=c, figure_label=lab, doi="10.5555/atlas", page=pg)
             for p, (c, lab, pg) in zip(paths, specs, strict=True)]
    # the HER2+ figure ingested a second time (another page number: another node id)
    nodes.append(FigureNode.from_image(paths[0], caption="HER2+ invasive carcinoma",
                                       figure_label="Fig. 1", doi="10.5555/atlas", page=None))
    return FigureIndex.build(nodes, encoder, tmp_path / "idx")


def test_evaluate_retrieval_text_queries(index: FigureIndex):
    fig1 = Target(source="10.5555/atlas", figure="Figure 1")
    queries = [Query("her2", (fig1,), text="HER2+ carcinoma"),
               Query("er", (Target(source="10.5555/atlas", figure="2"),), text="ER- carcinoma"),
               Query("ghost", (Target(node_id="not-in-index"),), text="carcinoma")]
    with pytest.warns(UserWarning, match="not in index"):
        ev = evaluate_retrieval(index, queries, ks=(1, 2, 3))
    her2, er, ghost = ev.per_query
    assert her2["relevant_nodes"] == 2 and her2["targets_in_index"] == 1
    # both copies of Figure 1 rank 1-2 (tied BM25 scores): a perfect result
    assert her2["precision@2"] == 1 and her2["ndcg@2"] == pytest.approx(1)
    assert her2["recall@1"] == 1 and her2["r_precision"] == 1
    assert er["mrr@1"] == 1 and er["precision@3"] == pytest.approx(1 / 3)
    assert ghost["recall@1"] is None and ev.queries_without_relevant == ("ghost",)
    assert ev.macro["precision@3"] == pytest.approx((her2["precision@3"] + 1 / 3) / 2)
    assert ev.settings["modes_used"] == ["text"] and ev.settings["fusion"] is None
    assert "BM25" in ev.settings["text"]["method"]
    table = ev.to_table()
    assert "| 2 | 1.000 |" in table and "1 without (excluded)" in table


def test_eval_cli_json_and_table(index: FigureIndex, tmp_path: Path, capsys):
    from PIL import Image

    from wsikit.evidence import load_image

    crop = load_image(index.nodes([3])[0].image)[4:40, 4:40]
    Image.fromarray(crop).save(tmp_path / "crop.png")
    qrels = tmp_path / "qrels.jsonl"
    qrels.write_text("\n".join(json.dumps(q) for q in [
        {"id": "img", "image": "crop.png", "relevant": [index.nodes([3])[0].node_id]},
        {"id": "both", "image": "crop.png", "text": "lymph node",
         "relevant": [{"source": "10.5555/atlas", "figure": "Figure 4"}]},
        {"id": "txt", "text": "HER2+", "relevant": [{"source": "10.5555/atlas",
                                                      "figure": "Figure 1"}]}]) + "\n")
    out = tmp_path / "eval.json"
    assert main(["eval", "retrieval", str(qrels), "--index", str(index.path), "-k", "1,3",
                 "--rrf-k", "20", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == json.loads(out.read_text())
    assert doc["ks"] == [1, 3] and doc["settings"]["fusion"]["k"] == 20
    assert doc["settings"]["encoder"]["name"] == "heuristic"
    assert doc["settings"]["encoder"]["heuristic"] is True
    assert [q["mode"] for q in doc["per_query"]] == ["image", "fused", "text"]
    assert doc["per_query"][1]["mrr@1"] == 1  # caption and image agree
    assert main(["eval", "retrieval", str(qrels), "--index", str(index.path)]) == 0
    printed = capsys.readouterr().out
    assert "Recall@k" in printed and "| 10 |" in printed and "mode auto" in printed
    assert main(["eval", "retrieval", str(qrels), "--index", str(index.path),
                 "--mode", "fused"]) == 2
    assert "lacks the text" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # argparse refuses it
        main(["eval", "retrieval", str(qrels), "--index", str(index.path), "-k", "0"])
    assert exc.value.code == 2 and "cut-offs must be" in capsys.readouterr().err
