"""Vision-language tower vectors stored per figure: rankings equal brute force, kept in step by
``index add`` (and valid after an interrupted update), fused by rank only.

The tower is a small open_clip CLIP in QuiltNet's published file layout (config + weights) with
random weights: these tests check storage and fusion, not what a trained model would rank."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

open_clip = pytest.importorskip("open_clip")

import torch  # noqa: E402

from wsikit.cli import main  # noqa: E402
from wsikit.errors import EvidenceError  # noqa: E402
from wsikit.evidence import FigureIndex, FigureNode, load_image  # noqa: E402
from wsikit.evidence import towers as towers_mod  # noqa: E402
from wsikit.evidence.fusion import query_text, search  # noqa: E402
from wsikit.evidence.towers import list_towers, open_tower, update_tower  # noqa: E402
from wsikit.models import create_encoder  # noqa: E402

TINY = {"embed_dim": 512, "quick_gelu": True,
        "vision_cfg": {"image_size": 224, "layers": 1, "width": 64, "patch_size": 32},
        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2,
                     "layers": 1}}
CAPTIONS = ["HER2+ invasive ductal carcinoma", "ER- carcinoma", "Normal lobule", "Lymph node",
            "Adipose tissue"]


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("quiltnet-snapshot")
    torch.manual_seed(0)
    torch.save(open_clip.model.CLIP(**TINY).state_dict(), folder / "open_clip_pytorch_model.bin")
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": TINY}))
    return folder / "open_clip_pytorch_model.bin"


@pytest.fixture(scope="module")
def tower_encoder(weights: Path):
    return create_encoder("quiltnet_b32", weights=str(weights))


def _nodes(folder: Path, make_images, captions, seed: int) -> list[FigureNode]:
    paths = make_images(folder, len(captions), seed=seed)
    return [FigureNode.from_image(p, caption=c, figure_label=f"Figure {i + 1}",
                                  doi=f"10.5555/t{seed}") for i, (p, c) in
            enumerate(zip(paths, captions, strict=True))]


@pytest.fixture
def index(tmp_path: Path, make_images, encoder) -> FigureIndex:
    return FigureIndex.build(_nodes(tmp_path / "imgs", make_images, CAPTIONS, 1), encoder,
                             tmp_path / "idx")


def _brute(index: FigureIndex, enc, query: np.ndarray) -> list[str]:
    nodes = index.nodes()
    figs = enc.encode(np.stack([load_image(n.image) for n in nodes]))
    figs /= np.linalg.norm(figs, axis=1, keepdims=True)
    q = query / np.linalg.norm(query)
    order = np.argsort(-(figs @ q), kind="stable")
    return [nodes[i].node_id for i in order]


def test_tower_rankings_equal_brute_force(index: FigureIndex, tower_encoder):
    assert update_tower(index, tower_encoder) == len(CAPTIONS)
    assert list_towers(index) == ["quiltnet_b32"]
    tower = open_tower(index, "quiltnet_b32")
    assert tower.count == index.count and tower.manifest["encoder"]["name"] == "quiltnet_b32"
    text = "HER2+ carcinoma"
    got = [n.node_id for n in tower.rank_texts(tower_encoder, [text], 5)[0]]
    assert got == _brute(index, tower_encoder, tower_encoder.encode_text([text])[0])
    img = load_image(index.nodes([2])[0].image)
    got = [n.node_id for n in tower.rank_images(tower_encoder, [img], 5)[0]]
    assert got == _brute(index, tower_encoder, tower_encoder.encode(img[None])[0])
    assert update_tower(index, tower_encoder) == 0  # nothing new


def test_text_query_fuses_bm25_and_tower_by_rank(index: FigureIndex, tower_encoder):
    update_tower(index, tower_encoder)
    text = "carcinoma"
    fused = search(index, text=text, towers={"quiltnet_b32": tower_encoder}, k=5)[0]
    bm25 = [m.node.node_id for m in query_text(index, text, k=5)]
    vl = [n.node_id for n in open_tower(index, "quiltnet_b32").rank_texts(
        tower_encoder, [text], 5)[0]]
    assert len(fused) == 5 and all(m.score_type == "rrf" for m in fused)
    for m in fused:
        r_text = bm25.index(m.node.node_id) + 1 if m.node.node_id in bm25 else None
        r_vl = vl.index(m.node.node_id) + 1
        assert m.ranks == {"text": r_text, "vl_text:quiltnet_b32": r_vl}
        assert m.fused_score == pytest.approx(1 / (50 + r_vl) + (1 / (50 + r_text)
                                                                   if r_text else 0))
    image = load_image(index.nodes([0])[0].image)
    both = search(index, images=[image], text=text, encoder=create_encoder("heuristic"),
                  towers={"quiltnet_b32": tower_encoder}, k=3)[0]
    assert set(both[0].ranks) == {"image", "text", "vl_text:quiltnet_b32",
                                  "vl_image:quiltnet_b32"}
    assert all(m.similarity is not None for m in both)  # main-encoder cosine for every match
    only_image = search(index, images=[image], encoder=create_encoder("heuristic"),
                        towers={"quiltnet_b32": tower_encoder}, k=3)[0]
    assert set(only_image[0].ranks) == {"image", "vl_image:quiltnet_b32"}


def test_add_keeps_tower_in_step_and_interrupts_leave_it_valid(
        index: FigureIndex, tower_encoder, encoder, tmp_path: Path, make_images, monkeypatch):
    update_tower(index, tower_encoder)
    before = open_tower(index, "quiltnet_b32")
    old = before.faiss_index.reconstruct_n(0, before.count)
    extra = _nodes(tmp_path / "more", make_images, ["Necrosis", "Mucin"], 2)
    index.add(extra, encoder)
    with pytest.warns(UserWarning, match="covers 5 of 7"):
        open_tower(index, "quiltnet_b32")  # still valid for the rows it has

    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash before the tower commit")

    monkeypatch.setattr(towers_mod, "write_json_atomic", crash)
    with pytest.raises(RuntimeError, match="simulated"):
        update_tower(index, tower_encoder)
    monkeypatch.undo()
    with pytest.warns(UserWarning, match="covers 5 of 7"):
        assert open_tower(index, "quiltnet_b32").count == 5
    assert update_tower(index, tower_encoder) == 2
    after = open_tower(index, "quiltnet_b32")
    assert after.count == 7 and np.array_equal(after.faiss_index.reconstruct_n(0, 5), old)
    files = sorted(p.name for p in (index.path / "towers" / "quiltnet_b32").iterdir()
                   if p.suffix == ".faiss")
    assert files == [after.manifest["file"]]


def test_cli_tower_add_and_query(index: FigureIndex, weights: Path, tmp_path: Path,
                                 make_images, capsys, monkeypatch):
    assert main(["index", "tower", str(index.path), "--weights", str(weights)]) == 0
    assert "5 figure(s) embedded" in capsys.readouterr().out
    rows = [{"image": str(p), "caption": "Necrosis", "doi": "10.5555/x"}
            for p in make_images(tmp_path / "new", 2, seed=4)]
    manifest = tmp_path / "more.jsonl"
    manifest.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    monkeypatch.setenv("WSIKIT_WEIGHTS_QUILTNET_B32", str(weights))
    assert main(["index", "add", str(index.path), str(manifest)]) == 0
    assert "added 2" in capsys.readouterr().out
    assert open_tower(FigureIndex.open(index.path), "quiltnet_b32").count == 7  # followed
    assert main(["index", "query", str(index.path), "--text", "necrosis", "--tower",
                 "quiltnet_b32", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out[0]["score_type"] == "rrf" and "vl_text:quiltnet_b32" in out[0]["ranks"]
    assert out[0]["caption"] == "Necrosis" and out[0]["text_rank"] in (1, 2)
    # without the tower's weights an add still succeeds; the tower keeps its figures
    monkeypatch.delenv("WSIKIT_WEIGHTS_QUILTNET_B32")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("WSIKIT_CONFIG", str(tmp_path / "none.toml"))
    rows = [{"image": str(p), "caption": "Mucin", "doi": "10.5555/y"}
            for p in make_images(tmp_path / "newer", 1, seed=5)]
    manifest.write_text(json.dumps(rows[0]) + "\n")
    assert main(["index", "add", str(index.path), str(manifest)]) == 0
    assert "tower quiltnet_b32 not updated" in capsys.readouterr().err
    with pytest.warns(UserWarning, match="covers 7 of 8"):
        open_tower(FigureIndex.open(index.path), "quiltnet_b32")


def test_missing_or_foreign_tower_is_refused(index: FigureIndex, tower_encoder, tmp_path: Path,
                                             make_images, encoder):
    import shutil

    with pytest.raises(EvidenceError, match="wsikit index tower"):
        open_tower(index, "quiltnet_b32")
    update_tower(index, tower_encoder)
    other = FigureIndex.build(_nodes(tmp_path / "other", make_images, CAPTIONS, 9), encoder,
                              tmp_path / "other-idx")
    shutil.copytree(index.path / "towers", other.path / "towers")
    with pytest.raises(EvidenceError, match="does not belong"):
        open_tower(other, "quiltnet_b32")
    assert update_tower(other, tower_encoder, rebuild=True) == len(CAPTIONS)
    assert open_tower(other, "quiltnet_b32").count == len(CAPTIONS)
    heuristic = create_encoder("heuristic")
    with pytest.raises(EvidenceError, match="no text tower"):
        from wsikit.evidence import index_tower

        index_tower(index.path, encoder="heuristic")
    assert heuristic.config.name == "heuristic"


def test_select_question_with_a_tower_fuses_it_and_keeps_the_floor(
        index: FigureIndex, tower_encoder, weights: Path, synthetic_small_slide: Path,
        tmp_path: Path):
    """``select(question=..., towers=[...])``: the tower's question→figure and crop→figure
    rankings join the fusion (recorded per match and in the selection); the floor still
    applies to the index encoder's image similarity."""
    from wsikit.run.pipeline import select

    update_tower(index, tower_encoder)
    common = dict(index=index.path, encoder="heuristic", attention="heuristic", scales=(2, 1),
                  report=False, question="invasive ductal carcinoma")
    res = select(synthetic_small_slide, out=tmp_path / "a", towers=["quiltnet_b32"],
                 weights={"quiltnet_b32": str(weights)}, min_similarity="none", **common)
    channels = res.selection["fusion"]["channels"]
    assert "vl_text:quiltnet_b32" in channels and "vl_image:quiltnet_b32" in channels
    matches = [m for r in res.regions for m in r.matches]
    assert matches and all({"image", "text", "vl_text:quiltnet_b32", "vl_image:quiltnet_b32"}
                           <= set(m["ranks"]) for m in matches)
    assert all(m["similarity"] is not None for m in matches)
    # without towers the question alone is fused with the image similarity
    plain = select(synthetic_small_slide, out=tmp_path / "b", min_similarity="none", **common)
    assert "vl_text:quiltnet_b32" not in plain.selection["fusion"]["channels"]
    # with a floor, every kept match passes it on image similarity
    floored = select(synthetic_small_slide, out=tmp_path / "c", towers=["quiltnet_b32"],
                     weights={"quiltnet_b32": str(weights)}, min_similarity=0.5, **common)
    assert all(m["similarity"] >= 0.5 for r in floored.regions for m in r.matches)


def test_select_towers_need_a_question_and_an_existing_tower(
        index: FigureIndex, synthetic_small_slide: Path, tmp_path: Path):
    from wsikit.errors import SelectionError
    from wsikit.run.pipeline import select

    with pytest.raises(SelectionError, match="question="):
        select(synthetic_small_slide, out=tmp_path / "a", index=index.path,
               encoder="heuristic", towers=["quiltnet_b32"], report=False)
    with pytest.raises(EvidenceError, match="has no quiltnet_b32 tower.*wsikit index tower"):
        select(synthetic_small_slide, out=tmp_path / "b", index=index.path,
               encoder="heuristic", question="carcinoma", towers=["quiltnet_b32"],
               report=False)
    assert not (tmp_path / "b" / "select").exists()  # failed before any output
