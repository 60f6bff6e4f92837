"""QuiltNet-B-32 vision-language tower: the published open_clip ViT-B/32 layout (a key/shape
table written from the architecture facts), strict loading of random weights saved in that
layout, outputs equal to open_clip's own model, the bundled tokenizer, and weight discovery."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

open_clip = pytest.importorskip("open_clip")

from wsikit.errors import WeightsError  # noqa: E402
from wsikit.models import create_encoder, get_config, list_encoders  # noqa: E402
from wsikit.models.clip_vl import VLM_CONFIG_FILE, QuiltNet, tokenize  # noqa: E402
from wsikit.models.registry import RANDOM_LABEL  # noqa: E402


def _blocks(prefix: str, width: int, layers: int) -> dict[str, tuple[int, ...]]:
    s = {}
    for i in range(layers):
        p = f"{prefix}.resblocks.{i}"
        s.update({f"{p}.ln_1.weight": (width,), f"{p}.ln_1.bias": (width,),
                  f"{p}.attn.in_proj_weight": (3 * width, width),
                  f"{p}.attn.in_proj_bias": (3 * width,),
                  f"{p}.attn.out_proj.weight": (width, width),
                  f"{p}.attn.out_proj.bias": (width,),
                  f"{p}.ln_2.weight": (width,), f"{p}.ln_2.bias": (width,),
                  f"{p}.mlp.c_fc.weight": (4 * width, width), f"{p}.mlp.c_fc.bias": (4 * width,),
                  f"{p}.mlp.c_proj.weight": (width, 4 * width),
                  f"{p}.mlp.c_proj.bias": (width,)})
    return s


def vit_b32_clip_spec() -> dict[str, tuple[int, ...]]:
    """CLIP ViT-B/32: 224 px / 32 = 7x7 patches + class token, width 768, 12 layers; text
    context 77, vocabulary 49,408, width 512, 12 layers; both projected to 512."""
    s = {"visual.class_embedding": (768,), "visual.positional_embedding": (50, 768),
         "visual.conv1.weight": (768, 3, 32, 32), "visual.ln_pre.weight": (768,),
         "visual.ln_pre.bias": (768,), "visual.ln_post.weight": (768,),
         "visual.ln_post.bias": (768,), "visual.proj": (768, 512),
         "token_embedding.weight": (49408, 512), "positional_embedding": (77, 512),
         "ln_final.weight": (512,), "ln_final.bias": (512,), "text_projection": (512, 512),
         "logit_scale": ()}
    s.update(_blocks("visual.transformer", 768, 12))
    s.update(_blocks("transformer", 512, 12))
    return s


TINY = {"embed_dim": 512, "quick_gelu": False,
        "vision_cfg": {"image_size": 224, "layers": 2, "width": 64, "patch_size": 32},
        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2,
                     "layers": 2}}


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> tuple[Path, torch.nn.Module]:
    """open_clip's own ViT-B-32 (QuickGELU), random weights, saved as the published file."""
    torch.manual_seed(0)
    ref = open_clip.create_model("ViT-B-32", pretrained=None, force_quick_gelu=True).eval()
    folder = tmp_path_factory.mktemp("quiltnet")
    path = folder / "open_clip_pytorch_model.bin"
    torch.save(ref.state_dict(), path)
    return path, ref


def test_registered_with_open_licence():
    assert "quiltnet_b32" in list_encoders("crop")
    cfg = get_config("quiltnet_b32")
    assert cfg.license == "MIT" and not cfg.gated and cfg.dim == 512 and not cfg.heuristic
    assert cfg.hub_repo == "wisdomik/QuiltNet-B-32"
    assert cfg.hub_files[0] == "open_clip_pytorch_model.bin"


def test_state_dict_layout_is_the_published_one():
    model = QuiltNet(get_config("quiltnet_b32"))
    got = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert got == vit_b32_clip_spec()


@pytest.mark.slow
def test_strict_load_and_outputs_equal_open_clip(published):
    path, ref = published
    enc = create_encoder("quiltnet_b32", weights=str(path))
    assert "weights: explicit" in enc.label and RANDOM_LABEL not in enc.label
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=(2, 3, 224, 224)).astype(np.float32))
    with torch.inference_mode():
        assert torch.allclose(enc(x), ref.encode_image(x), atol=1e-5)
        texts = ["HER2+ invasive ductal carcinoma", "lymph node"]
        want = ref.encode_text(open_clip.tokenize(texts)).numpy()
    assert np.allclose(enc.encode_text(texts), want, atol=1e-5)
    # uint8 images go through resize/crop/normalisation inside: (B, 512) float32
    imgs = rng.integers(0, 256, (3, 300, 260, 3), dtype=np.uint8)
    out = enc.encode(imgs)
    assert out.shape == (3, 512) and out.dtype == np.float32 and np.isfinite(out).all()


def test_activation_follows_the_config():
    for quick_gelu, name in ((False, "GELU"), (True, "QuickGELU")):
        model = QuiltNet(get_config("quiltnet_b32"), {**TINY, "quick_gelu": quick_gelu})
        assert type(model.clip.visual.transformer.resblocks[0].mlp.gelu).__name__ == name
        assert type(model.clip.transformer.resblocks[0].mlp.gelu).__name__ == name


def test_config_beside_the_weights_builds_the_model(tmp_path: Path):
    """A (small) published-style snapshot: open_clip_config.json + open_clip_pytorch_model.bin;
    the architecture (activation included) follows the file and equals open_clip's model."""
    cfg = {**TINY, "quick_gelu": False}  # the packaged default has QuickGELU: this must win
    torch.manual_seed(1)
    ref = open_clip.model.CLIP(**cfg).eval()
    folder = tmp_path / "snapshot"
    folder.mkdir()
    torch.save(ref.state_dict(), folder / "open_clip_pytorch_model.bin")
    (folder / VLM_CONFIG_FILE).write_text(json.dumps({"model_cfg": cfg,
                                                      "preprocess_cfg": {}}))
    enc = create_encoder("quiltnet_b32", weights=str(folder / "open_clip_pytorch_model.bin"))
    assert enc.model_cfg == cfg
    x = torch.randn(2, 3, 224, 224)
    texts = ["HER2+ invasive ductal carcinoma", "lymph node"]
    with torch.inference_mode():
        assert torch.allclose(enc(x), ref.encode_image(x), atol=1e-5)
        want = ref.encode_text(open_clip.tokenize(texts)).numpy()
    assert np.allclose(enc.encode_text(texts), want, atol=1e-5)
    # a file of another layout is refused with the key names
    torch.save({k: v for k, v in ref.state_dict().items() if k != "visual.proj"},
               folder / "open_clip_pytorch_model.bin")
    with pytest.raises(WeightsError, match="visual.proj"):
        create_encoder("quiltnet_b32", weights=str(folder / "open_clip_pytorch_model.bin"))


def test_tokenizer_is_bundled():
    ids = tokenize(["HER2+ carcinoma, Ki-67 > 20 %"])
    assert ids.shape == (1, 77) and ids[0, 0].item() == 49406  # start of text
    assert 49407 in ids[0].tolist()  # end of text
    assert Path(open_clip.tokenizer.default_bpe()).is_file()


def test_missing_weights_say_where_to_put_them(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("WSIKIT_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.delenv("WSIKIT_WEIGHTS_QUILTNET_B32", raising=False)
    with pytest.raises(WeightsError, match="QuiltNet-B-32"):
        create_encoder("quiltnet_b32")


def test_random_weights_are_labelled():
    enc = create_encoder("quiltnet_b32", weights="random")
    assert RANDOM_LABEL in enc.label
