"""State-dict key sets and shapes equal tables written from the published facts
(ARCHITECTURE.md), not dumped from the models; forwards give the right shape and dtype."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wsikit.errors import ModelError, WeightsError
from wsikit.models import create_encoder, get_config, list_encoders
from wsikit.models.conch import ConchV15
from wsikit.models.registry import RANDOM_LABEL
from wsikit.models.titan import Titan
from wsikit.models.virchow import Virchow2


def _vit_block(prefix: str, dim: int, hidden_in: int, hidden_out: int, layerscale: bool
               ) -> dict[str, tuple[int, ...]]:
    s = {
        f"{prefix}.norm1.weight": (dim,), f"{prefix}.norm1.bias": (dim,),
        f"{prefix}.attn.qkv.weight": (3 * dim, dim), f"{prefix}.attn.qkv.bias": (3 * dim,),
        f"{prefix}.attn.proj.weight": (dim, dim), f"{prefix}.attn.proj.bias": (dim,),
        f"{prefix}.norm2.weight": (dim,), f"{prefix}.norm2.bias": (dim,),
        f"{prefix}.mlp.fc1.weight": (hidden_in, dim), f"{prefix}.mlp.fc1.bias": (hidden_in,),
        f"{prefix}.mlp.fc2.weight": (dim, hidden_out), f"{prefix}.mlp.fc2.bias": (dim,),
    }
    if layerscale:
        s[f"{prefix}.ls1.gamma"] = (dim,)
        s[f"{prefix}.ls2.gamma"] = (dim,)
    return s


def conch_spec() -> dict[str, tuple[int, ...]]:
    """ViT-L/16 at 448 px (28×28 grid + CLS), LayerScale; pooler d_model 768, context 1024."""
    s = {"trunk.cls_token": (1, 1, 1024), "trunk.pos_embed": (1, 14 * 14 + 1, 1024),
         "trunk.patch_embed.proj.weight": (1024, 3, 16, 16),
         "trunk.patch_embed.proj.bias": (1024,),
         "trunk.norm.weight": (1024,), "trunk.norm.bias": (1024,)}
    for i in range(24):
        s.update(_vit_block(f"trunk.blocks.{i}", 1024, 4096, 4096, True))
    s.update({"attn_pool_contrast.query": (1, 768),
              "attn_pool_contrast.ln_q.weight": (768,), "attn_pool_contrast.ln_q.bias": (768,),
              "attn_pool_contrast.ln_k.weight": (1024,), "attn_pool_contrast.ln_k.bias": (1024,),
              "attn_pool_contrast.to_q.weight": (768, 768),
              "attn_pool_contrast.to_kv.weight": (2 * 768, 1024),
              "attn_pool_contrast.to_out.weight": (768, 768),
              "ln_contrast.weight": (768,), "ln_contrast.bias": (768,)})
    return s


def virchow2_spec() -> dict[str, tuple[int, ...]]:
    """ViT-H/14 at 224 (16×16 + CLS + 4 registers), SwiGLU packed hidden 1280·5.3375 = 6832."""
    s = {"cls_token": (1, 1, 1280), "reg_token": (1, 4, 1280),
         "pos_embed": (1, 16 * 16 + 5, 1280),
         "patch_embed.proj.weight": (1280, 3, 14, 14), "patch_embed.proj.bias": (1280,),
         "norm.weight": (1280,), "norm.bias": (1280,)}
    for i in range(32):
        s.update(_vit_block(f"blocks.{i}", 1280, 6832, 6832 // 2, True))
    return s


def _mha_pooler(prefix: str, n_queries: int) -> dict[str, tuple[int, ...]]:
    return {f"{prefix}.query": (n_queries, 768),
            f"{prefix}.attn.in_proj_weight": (3 * 768, 768),
            f"{prefix}.attn.in_proj_bias": (3 * 768,),
            f"{prefix}.attn.out_proj.weight": (768, 768), f"{prefix}.attn.out_proj.bias": (768,),
            f"{prefix}.ln_q.weight": (768,), f"{prefix}.ln_q.bias": (768,),
            f"{prefix}.ln_k.weight": (768,), f"{prefix}.ln_k.bias": (768,)}


def titan_spec() -> dict[str, tuple[int, ...]]:
    """TITAN vision encoder (keys after stripping ``vision_encoder.``)."""
    s = {"patch_embed.0.weight": (768, 768), "patch_embed.0.bias": (768,),
         "cls_token": (1, 1, 768), "norm.weight": (768,), "norm.bias": (768,),
         "proj": (768, 768)}
    for i in range(6):
        s.update(_vit_block(f"blocks.modules_list.{i}", 768, 3072, 3072, False))
    s.update(_mha_pooler("attn_pool", 128))
    s.update(_mha_pooler("attn_pool_contrastive", 1))
    return s


def _shapes(module: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


@pytest.mark.parametrize("cls,name,spec", [(ConchV15, "conch_v1_5", conch_spec),
                                           (Virchow2, "virchow2", virchow2_spec),
                                           (Titan, "titan", titan_spec)])
def test_state_dict_matches_spec(cls, name, spec) -> None:
    with torch.device("meta"):
        model = cls(get_config(name))
    got, want = _shapes(model), spec()
    assert sorted(set(want) - set(got)) == []
    assert sorted(set(got) - set(want)) == []
    assert {k: v for k, v in got.items() if want[k] != v} == {}


def test_registry_contents() -> None:
    assert {"conch_v1_5", "virchow2", "titan", "heuristic"} <= set(list_encoders())
    assert "titan" in list_encoders("slide") and "titan" not in list_encoders("patch")
    assert "heuristic" in list_encoders("crop")
    c = get_config("conch_v1_5")
    assert (c.input_px, c.dim, c.interpolation, c.gated) == (448, 768, "bilinear", True)
    v = get_config("virchow2")
    assert (v.input_px, v.dim, v.interpolation) == (224, 2560, "bicubic")
    assert get_config("heuristic").heuristic and get_config("heuristic").to_dict()["dim"] == 64
    with pytest.raises(ModelError, match="unknown encoder 'nope'"):
        get_config("nope")


@pytest.mark.parametrize("name", ["conch_v1_5", "virchow2"])
def test_real_model_without_weights_refuses(name, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("WSIKIT_CONFIG", str(tmp_path / "none.toml"))
    with pytest.raises(WeightsError, match="request access"):
        create_encoder(name)


def test_auto_falls_back_to_heuristic(monkeypatch, tmp_path, caplog) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("WSIKIT_CONFIG", str(tmp_path / "none.toml"))
    with caplog.at_level("INFO"):
        enc = create_encoder("auto", role="crop")
    assert enc.config.name == "heuristic" and "auto: no virchow2 weights" in enc.label
    assert "heuristic" in caplog.text
    with pytest.raises(WeightsError, match=r"compute_attention\(slide, grid, source='heu"):
        create_encoder("auto", role="slide")


def test_conch_pos_embed_785_is_resampled_to_the_224_grid() -> None:
    """A 448-grid table (785 tokens) is resampled bilinearly to 14x14 on load, as TRIDENT does;
    a factor-2 bilinear reduction is the mean of each 2x2 block (independent oracle)."""
    with torch.device("meta"):
        model = ConchV15(get_config("conch_v1_5"))
    pe = torch.randn(1, 785, 1024, generator=torch.Generator().manual_seed(0))
    out = model.adapt_state_dict({"trunk.pos_embed": pe})["trunk.pos_embed"]
    assert out.shape == (1, 197, 1024)
    assert torch.equal(out[:, 0], pe[:, 0])
    blocks = pe[0, 1:].reshape(14, 2, 14, 2, 1024).mean(dim=(1, 3)).reshape(196, 1024)
    torch.testing.assert_close(out[0, 1:], blocks, rtol=0, atol=1e-6)
    same = torch.randn(1, 197, 1024)
    assert model.adapt_state_dict({"trunk.pos_embed": same})["trunk.pos_embed"] is same


@pytest.mark.slow
@pytest.mark.parametrize("name,px", [("conch_v1_5", 512), ("virchow2", 256)])
def test_big_encoders_forward(name: str, px: int) -> None:
    torch.manual_seed(0)
    enc = create_encoder(name, weights="random")
    assert RANDOM_LABEL in enc.label
    img = np.random.default_rng(0).integers(0, 256, (1, px, px, 3), dtype=np.uint8)
    out = enc.encode(img)
    assert out.shape == (1, get_config(name).dim) and out.dtype == np.float32
    assert np.isfinite(out).all()
