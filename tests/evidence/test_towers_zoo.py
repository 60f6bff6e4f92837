"""The zoo's image-text models (PLIP, OpenAI CLIP) as figure-index towers: chosen when the
index is built (``index build --tower plip``), recorded in the tower's manifest (model, weight
file SHA-256, preprocessing), and refused when a query uses another tower or weight file.

The towers are small CLIP networks in the entries' layout (a config.json beside the weights
sets the width and depth) with random weights: these tests check the plumbing and refusals;
the full-size towers' equality with transformers is tests/models/test_zoo_text.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("open_clip")  # the CLIP BPE tokenizer ships with open_clip

import torch

from wsikit.cli import main
from wsikit.errors import EncoderMismatchError, EvidenceError
from wsikit.evidence import index_build, index_search, index_tower, load_image
from wsikit.evidence.towers import (
    create_tower_encoders,
    list_towers,
    open_tower,
    tower_encoders,
)
from wsikit.models import create_encoder, get_config
from wsikit.models.zoo import ZooClipEncoder

TINY = {"model_type": "clip", "projection_dim": 512,
        "vision_config": {"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                          "intermediate_size": 128, "patch_size": 32, "image_size": 224,
                          "hidden_act": "quick_gelu", "layer_norm_eps": 1e-5},
        "text_config": {"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                        "intermediate_size": 128, "hidden_act": "quick_gelu"}}


def _weights(folder: Path, name: str, seed: int) -> Path:
    """A small random ``name`` network saved with its config.json (wsikit's own key names,
    which the CLIP layout's mapping keeps as they are)."""
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = ZooClipEncoder(get_config(name), hf_config=TINY)
    path = folder / "pytorch_model.bin"
    torch.save(model.state_dict(), path)
    (folder / "config.json").write_text(json.dumps(TINY))
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("zoo-towers")
    return {"plip": _weights(root / "plip", "plip", 0),
            "plip_other": _weights(root / "plip_other", "plip", 1),
            "clip_vit_b32": _weights(root / "clip", "clip_vit_b32", 2)}


@pytest.fixture
def built(manifest_dir: Path, files, tmp_path: Path):
    index = index_build([manifest_dir / "manifest.jsonl"], tmp_path / "idx",
                        encoder="heuristic", towers=["plip"], weights={"plip": str(files["plip"])})
    return index


def test_the_registry_offers_every_image_text_model_as_a_tower() -> None:
    assert tower_encoders() == ["clip_vit_b32", "plip", "quiltnet_b16", "quiltnet_b32"]


def test_build_with_a_plip_tower_records_it_and_ranks_like_brute_force(built, files) -> None:
    assert list_towers(built) == ["plip"]
    tower = open_tower(built, "plip")
    rec = tower.manifest["encoder"]
    assert rec["name"] == "plip" and rec["dim"] == 512 and tower.count == built.count == 12
    assert rec["weights_sha256"] == hashlib.sha256(files["plip"].read_bytes()).hexdigest()
    assert "bicubic" in rec["preprocessing"] and "centre crop 224" in rec["preprocessing"]
    enc = create_encoder("plip", weights=str(files["plip"]))
    nodes = built.nodes()
    figs = enc.encode(np.stack([load_image(n.image) for n in nodes]))
    figs /= np.linalg.norm(figs, axis=1, keepdims=True)
    q = enc.encode_text(["test figure"])[0]
    want = [nodes[i].node_id for i in np.argsort(-(figs @ (q / np.linalg.norm(q))),
                                                 kind="stable")[:5]]
    got = [n.node_id for n in tower.rank_texts(enc, ["test figure"], 5)[0]]
    assert got == want


def test_fused_search_with_the_tower_and_refusals_of_other_towers(
        built, files, monkeypatch) -> None:
    monkeypatch.setenv("WSIKIT_WEIGHTS_PLIP", str(files["plip"]))
    fused = index_search(built.path, text="test figure", towers=["plip"], k=3)
    assert len(fused) == 3 and "vl_text:plip" in fused[0].ranks
    # a tower the index was not built with: named, with the command that adds it
    with pytest.raises(EvidenceError, match=r"no clip_vit_b32 tower \(it has: plip\).*"
                                            r"wsikit index tower"):
        index_search(built.path, text="test figure", towers=["clip_vit_b32"], k=3)
    # another model's vectors against the plip tower
    clip = create_encoder("clip_vit_b32", weights=str(files["clip_vit_b32"]))
    with pytest.raises(EncoderMismatchError, match="built with plip"):
        open_tower(built, "plip").rank_texts(clip, ["test figure"], 3)
    # the same model with another weight file
    with pytest.raises(EncoderMismatchError, match="SHA-256"):
        create_tower_encoders(built, ["plip"], weights={"plip": str(files["plip_other"])})


def test_image_only_and_slide_models_are_refused_before_anything_is_written(
        manifest_dir: Path, tmp_path: Path, built) -> None:
    for name, what in (("lunit_vits16", "image-only"), ("titan", "slide encoder"),
                       ("virchow2", "image-only")):
        with pytest.raises(EvidenceError, match=f"{what}.*plip"):
            index_build([manifest_dir / "manifest.jsonl"], tmp_path / name, towers=[name])
        assert not (tmp_path / name).exists()
        with pytest.raises(EvidenceError, match=what):  # no weights exist: refused first
            index_tower(built.path, encoder=name)


def test_cli_build_with_tower_and_query_with_another(manifest_dir: Path, files, tmp_path: Path,
                                                     monkeypatch, capsys) -> None:
    monkeypatch.setenv("WSIKIT_WEIGHTS_PLIP", str(files["plip"]))
    monkeypatch.setenv("WSIKIT_WEIGHTS_CLIP_VIT_B32", str(files["clip_vit_b32"]))
    out = tmp_path / "idx"
    assert main(["index", "build", str(manifest_dir / "manifest.jsonl"), "--out", str(out),
                 "--tower", "plip"]) == 0
    assert "tower(s) plip" in capsys.readouterr().out
    manifest = json.loads((out / "towers" / "plip" / "manifest.json").read_text())
    assert manifest["encoder"]["name"] == "plip"
    assert main(["index", "query", str(out), "--text", "test figure", "--tower", "plip"]) == 0
    capsys.readouterr()
    assert main(["index", "query", str(out), "--text", "test figure", "--tower",
                 "clip_vit_b32"]) == 2
    err = capsys.readouterr().err
    assert "no clip_vit_b32 tower" in err and "it has: plip" in err


def test_a_zoo_model_as_the_index_encoder_refuses_another_at_query(
        manifest_dir: Path, files, tmp_path: Path, monkeypatch) -> None:
    from wsikit.evidence import index_query

    monkeypatch.setenv("WSIKIT_WEIGHTS_PLIP", str(files["plip"]))
    index = index_build([manifest_dir / "manifest.jsonl"], tmp_path / "idx", encoder="plip")
    rec = index.manifest["encoder"]
    assert rec["name"] == "plip" and rec["weights_sha256"] and rec["preprocessing"]
    image = load_image(index.nodes([4])[0].image)
    from PIL import Image

    Image.fromarray(image).save(tmp_path / "q.png")
    assert index_query(index.path, tmp_path / "q.png", k=1)[0].node.node_id == \
        index.nodes([4])[0].node_id
    # no clip weights exist in this test: refused before any load
    with pytest.raises(EncoderMismatchError, match="built with encoder 'plip'"):
        index_query(index.path, tmp_path / "q.png", encoder="clip_vit_b32")
    # the same model with another weight file: its vectors are not comparable
    monkeypatch.setenv("WSIKIT_WEIGHTS_PLIP", str(files["plip_other"]))
    with pytest.raises(EncoderMismatchError, match="weights of SHA-256"):
        index_query(index.path, tmp_path / "q.png", k=1)
    other = create_encoder("plip", weights=str(files["plip_other"]))
    with pytest.raises(EncoderMismatchError, match="weights of SHA-256"):
        index.query(np.ones((1, index.dim), np.float32), k=1, encoder=other)


def test_a_tower_without_weights_fails_before_anything_is_written(
        manifest_dir: Path, tmp_path: Path, monkeypatch) -> None:
    from wsikit.errors import WeightsError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("WSIKIT_WEIGHTS_PLIP", raising=False)
    monkeypatch.setenv("WSIKIT_CONFIG", str(tmp_path / "none.toml"))
    with pytest.raises(WeightsError):
        index_build([manifest_dir / "manifest.jsonl"], tmp_path / "idx", towers=["plip"])
    assert not (tmp_path / "idx").exists()
