"""Make the zoo's golden files with each model's OWN reference loader (not wsikit's).

Run in a scratch virtual environment that has transformers (never imported by wsikit)::

    python3 -m venv /tmp/zoo_ref && /tmp/zoo_ref/bin/pip install transformers
    # torch, timm, open_clip_torch, torchvision, safetensors as in wsikit's environment
    PYTHONPATH=. /tmp/zoo_ref/bin/python tests/models/make_zoo_goldens.py [NAME ...]

For each zoo entry it builds the reference network — ``timm.create_model`` with the published
arguments for timm checkpoints, transformers ``ViTModel`` / ``Dinov2Model`` /
``Dinov2WithRegistersModel`` / ``CLIPModel`` for those layouts, open_clip ``CLIP`` for
QuiltNet — makes weights by the documented rule (``golden_rule.zoo_rule_weights``) in the
published key layout, loads them into the reference with ``strict=True``, applies the
reference transform (torchvision ``Resize`` / ``CenterCrop`` / ``ToTensor`` / ``Normalize`` on
the PIL image) to a real H&E tile and writes, under ``tests/data/golden/zoo/``:

* ``keys_<name>.json``: ``keys`` (published key -> shape at the real geometry, from the
  reference built on the meta device), ``golden_keys`` (the keys of the golden's weights),
  ``hf_config`` (the config.json written beside the golden's weights, or null),
  ``overrides`` (timm arguments of the golden, e.g. ``depth`` 2 for giants);
* ``<name>.npz``: ``embedding`` (1, dim) float32 of the tile (the reference transform's
  output fed to the reference network);
* ``preprocess_<group>.npz``: ``pixels`` (px, px, 3) uint8, the PIL image the reference
  transform's ``Resize`` (+ ``CenterCrop``) makes of the tile, one per geometry (size, filter,
  crop) shared by the entries that use it (``ToTensor`` then divides by 255 exactly and
  ``Normalize`` applies the entry's mean/std).

``--preprocess-only`` rewrites only the preprocessing goldens; ``--text [NAME ...]`` writes only
the CLIP text-tower goldens ``text_<name>.npz`` (:func:`make_text`: transformers'
``CLIPTokenizer`` and ``CLIPModel.get_text_features`` on the golden weights of the entry).

Networks above ~350 M parameters (ViT-L, -H, -g) are made with 2 blocks (everything else as
published: width, heads, MLP, registers, LayerScale, patch, table size), so the golden test
runs in seconds on a CPU; their full geometry is checked by the key/shape test against
``keys``. The tile is the 256 × 256 top-left-of-centre crop of
``tests/data/real_tiles/medium-nuclei-score-level1-2.png`` (``tile.npz``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from golden_rule import (
    ZOO,
    save_zoo_published,
    transform_group,
    zoo_rule_weights,
)

from wsikit.models.configs import BUILTIN_CONFIGS, EncoderConfig

TILE_SRC = Path(__file__).resolve().parents[1] / "data" / "real_tiles" / \
    "medium-nuclei-score-level1-2.png"
#: entries made with 2 blocks (giant networks); the rest at their published geometry
REDUCED = {"h_optimus_0", "h_optimus_1", "uni", "uni2_h", "virchow", "prov_gigapath",
           "kaiko_vitl14", "gpfm", "phikon_v2", "midnight_12k", "hibou_l"}

#: The text tower of the CLIP checkpoints (in the published file, not used by wsikit).
CLIP_TEXT = {"hidden_size": 512, "num_hidden_layers": 12, "num_attention_heads": 8,
             "intermediate_size": 2048, "projection_dim": 512, "hidden_act": "quick_gelu"}


def hf_config(cfg: EncoderConfig) -> dict[str, Any]:
    """The published config.json fields of a transformers-layout entry (the entry's table,
    one definition) plus the transformers defaults the published files state."""
    fields = dict(cfg.arch_kwargs)
    if fields["model_type"] == "clip":
        return {**fields, "text_config": CLIP_TEXT}
    return {**fields, "qkv_bias": True, "hidden_act": "gelu"}


def tile() -> np.ndarray:
    from PIL import Image

    img = np.asarray(Image.open(TILE_SRC).convert("RGB"))
    h, w = img.shape[:2]
    top, left = (h - 256) // 2, (w - 256) // 2
    return np.ascontiguousarray(img[top:top + 256, left:left + 256])


def reference_transform(cfg: EncoderConfig, img: np.ndarray) -> torch.Tensor:
    from PIL import Image
    from torchvision import transforms as T

    mode = {"bilinear": T.InterpolationMode.BILINEAR,
            "bicubic": T.InterpolationMode.BICUBIC}[cfg.interpolation]
    steps: list[Any] = [T.Resize(cfg.resize_px or cfg.input_px, interpolation=mode)]
    if cfg.crop:
        steps.append(T.CenterCrop(cfg.input_px))
    steps += [T.ToTensor(), T.Normalize(cfg.mean, cfg.std)]
    out: torch.Tensor = T.Compose(steps)(Image.fromarray(img))
    return out


def reference_pixels(cfg: EncoderConfig, img: np.ndarray) -> np.ndarray:
    """The reference transform before ``ToTensor``/``Normalize``: the PIL image torchvision's
    ``Resize`` (+ ``CenterCrop``) makes, as (px, px, 3) uint8 (``ToTensor`` divides it by
    255 exactly; ``Normalize`` is arithmetic with the config's mean/std)."""
    from PIL import Image
    from torchvision import transforms as T

    mode = {"bilinear": T.InterpolationMode.BILINEAR,
            "bicubic": T.InterpolationMode.BICUBIC}[cfg.interpolation]
    steps: list[Any] = [T.Resize(cfg.resize_px or cfg.input_px, interpolation=mode)]
    if cfg.crop:
        steps.append(T.CenterCrop(cfg.input_px))
    return np.asarray(T.Compose(steps)(Image.fromarray(img)))


def write_preprocess_goldens(img: np.ndarray, names: list[str]) -> None:
    """``preprocess_<group>.npz`` (``pixels``) for every transform group of ``names``."""
    for name in names:
        cfg = BUILTIN_CONFIGS[name]
        px = reference_pixels(cfg, img)
        ref = reference_transform(cfg, img)  # the full transform agrees with the pixels
        mean = torch.tensor(cfg.mean).view(3, 1, 1)
        std = torch.tensor(cfg.std).view(3, 1, 1)
        back = torch.from_numpy(px.copy()).permute(2, 0, 1).float() / 255
        if not torch.allclose((back - mean) / std, ref, atol=1e-5):
            raise SystemExit(f"{name}: pixels and the reference transform disagree")
        np.savez_compressed(ZOO / f"preprocess_{transform_group(cfg)}.npz", pixels=px)


def _timm_kwargs(cfg: EncoderConfig) -> dict[str, Any]:
    import timm.layers

    kw = dict(cfg.arch_kwargs)
    if kw.get("mlp_layer") == "swiglu_packed":
        kw["mlp_layer"] = timm.layers.SwiGLUPacked
    if kw.get("act_layer") == "silu":
        kw["act_layer"] = torch.nn.SiLU
    if "out_indices" in kw:
        kw["out_indices"] = list(kw["out_indices"])
    return kw


class TimmReference(torch.nn.Module):
    """timm with the published arguments and the card's read-out."""

    def __init__(self, cfg: EncoderConfig, overrides: dict[str, Any]) -> None:
        super().__init__()
        import timm

        kw = {"num_classes": 0, **_timm_kwargs(cfg), **overrides}
        self.cfg = cfg
        if cfg.pooling == "cls+mean":
            kw["global_pool"] = ""
        self.net = timm.create_model(cfg.arch.split(":", 1)[1], pretrained=False, **kw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.cfg.pooling == "avgpool":  # TRIDENT's resnet50: features_only + avg pool
            return torch.nn.AdaptiveAvgPool2d(1)(self.net(x)[0]).flatten(1)
        out = self.net(x)
        if self.cfg.pooling == "cls+mean":  # Virchow's card: tokens 1: are the patches
            return torch.cat([out[:, 0], out[:, 1:].mean(1)], dim=-1)
        return out  # timm's token pooling: the class token after the final norm


class HFReference(torch.nn.Module):
    def __init__(self, cfg: EncoderConfig, hf_cfg: dict[str, Any]) -> None:
        super().__init__()
        import transformers as tf

        self.cfg, kind = cfg, hf_cfg["model_type"]
        if kind == "vit":
            self.net = tf.ViTModel(tf.ViTConfig(**hf_cfg), add_pooling_layer=False)
        elif kind == "dinov2":
            self.net = tf.Dinov2Model(tf.Dinov2Config(**hf_cfg))
        elif kind == "dinov2_with_registers":
            self.net = tf.Dinov2WithRegistersModel(tf.Dinov2WithRegistersConfig(**hf_cfg))
        else:
            self.net = tf.CLIPModel(tf.CLIPConfig(**hf_cfg))
        self.kind = kind

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "clip":
            out = self.net.get_image_features(pixel_values=x)
            return out if isinstance(out, torch.Tensor) else out.pooler_output
        o = self.net(pixel_values=x)
        if self.kind == "dinov2_with_registers":
            return o.pooler_output  # Hibou's card
        h = o.last_hidden_state
        if self.cfg.pooling == "cls+mean":  # Midnight's card: cat(cls, mean(patches))
            return torch.cat([h[:, 0], h[:, 1:].mean(1)], dim=-1)
        return h[:, 0]


class OpenClipReference(torch.nn.Module):
    def __init__(self, cfg: EncoderConfig, model_cfg: dict[str, Any]) -> None:
        super().__init__()
        from open_clip.model import CLIP

        self.net = CLIP(**{k: v for k, v in model_cfg.items()
                           if k in ("embed_dim", "vision_cfg", "text_cfg", "quick_gelu")})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net.encode_image(x)

    def state_dict(self, *a: Any, **k: Any) -> dict[str, Any]:  # type: ignore[override]
        return self.net.state_dict(*a, **k)

    def load_state_dict(self, sd: Any, strict: bool = True, assign: bool = False) -> Any:
        return self.net.load_state_dict(sd, strict=strict, assign=assign)


def reference(cfg: EncoderConfig, reduced: bool) -> tuple[torch.nn.Module, dict | None,
                                                            dict[str, Any], str]:
    """(network, config written beside the weights, timm overrides, config file name)."""
    if cfg.layout in ("timm", "timm_resnet"):
        over = {"depth": 2} if reduced else {}
        return TimmReference(cfg, over), None, over, "config.json"
    if cfg.layout == "open_clip":
        import open_clip

        mc = {**open_clip.get_model_config(cfg.arch.split(":", 1)[1]), "quick_gelu": True}
        return OpenClipReference(cfg, mc), {"model_cfg": mc}, {}, "open_clip_config.json"
    hf = hf_config(cfg)
    if reduced:
        hf["num_hidden_layers"] = 2
    return HFReference(cfg, hf), hf, {}, "config.json"


#: transformers 5 renamed these models' weights in memory (its from_pretrained converts the
#: published names on load); the published files hold the original (transformers 4) names.
#: In-memory name -> published name, per model type:
_RENAMES = {
    "dinov2": (("attention.q_proj", "attention.attention.query"),
               ("attention.k_proj", "attention.attention.key"),
               ("attention.v_proj", "attention.attention.value"),
               ("attention.o_proj", "attention.output.dense"),
               ("mlp.down_proj", "mlp.weights_out")),
    "vit": (("attention.q_proj", "attention.attention.query"),
            ("attention.k_proj", "attention.attention.key"),
            ("attention.v_proj", "attention.attention.value"),
            ("attention.o_proj", "attention.output.dense"),
            ("mlp.fc1", "intermediate.dense"), ("mlp.fc2", "output.dense")),
}
_RENAMES["dinov2_with_registers"] = _RENAMES["dinov2"]


def published_hf_keys(kind: str, sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The transformers 4 (published) names of a transformers 5 state dict."""
    out: dict[str, torch.Tensor] = {}
    for k, v in sd.items():
        if ".mlp.up_proj." in k:
            continue
        if ".mlp.gate_proj." in k:  # weights_in = cat(gate, up), chunked on load
            up = sd[k.replace("gate_proj", "up_proj")]
            k, v = k.replace("gate_proj", "weights_in"), torch.cat([v, up], dim=0)
        for new, old in _RENAMES.get(kind, ()):
            k = k.replace(new, old)
        if kind == "vit" and k.startswith("layers."):
            k = "encoder.layer." + k[len("layers."):]
        out[k] = v
    return out


def published_sd(net: torch.nn.Module) -> dict[str, torch.Tensor]:
    inner = getattr(net, "net", net)
    if getattr(net, "kind", "") in _RENAMES:
        return published_hf_keys(net.kind, inner.state_dict())
    if getattr(getattr(net, "cfg", None), "layout", "") == "timm_resnet":
        import timm  # the published file is the whole ResNet-50 (layer4 and fc included)

        with torch.device("meta"):
            inner = timm.create_model("resnet50", pretrained=False)
    sd = inner.state_dict()
    return {k: v for k, v in sd.items() if not k.endswith("position_ids")}


def make(name: str, tile_img: np.ndarray, scratch: Path) -> None:
    import tempfile

    cfg = BUILTIN_CONFIGS[name]
    reduced = name in REDUCED
    with torch.device("meta"):
        full, _, _, _ = reference(cfg, False)
    keys = {k: list(v.shape) for k, v in published_sd(full).items()}
    del full
    torch.manual_seed(0)
    net, hf_cfg, over, cfg_name = reference(cfg, reduced)
    gkeys = {k: list(v.shape) for k, v in published_sd(net).items()}
    sd = zoo_rule_weights(name, gkeys)
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        path = save_zoo_published(name, sd, Path(tmp), filename=cfg.hub_files[0],
                                  hf_config=hf_cfg, config_name=cfg_name)
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            loaded = load_file(str(path))
        else:
            loaded = torch.load(path, map_location="cpu", weights_only=True)
        inner = getattr(net, "net", net)
        if cfg.layout == "timm_resnet":
            # TRIDENT's loader: the full published ResNet-50 into the truncated network,
            # strict=False; here checked to skip exactly layer4.* and fc.*
            res = inner.load_state_dict(loaded, strict=False)
            extra = {k.split(".")[0] for k in res.unexpected_keys}
            if res.missing_keys or not extra <= {"layer4", "fc"}:
                raise SystemExit(f"{name}: {res}")
        elif isinstance(net, HFReference):
            # the reference loader: from_pretrained on the published folder (config.json +
            # weights), which also converts published key names; nothing may be left out
            extra = {"add_pooling_layer": False} if net.kind == "vit" else {}
            loaded_net, info = type(inner).from_pretrained(str(path.parent),
                                                           output_loading_info=True, **extra)
            bad = {k: v for k, v in info.items() if v and k != "error_msgs"}
            if bad or info.get("error_msgs"):
                raise SystemExit(f"{name}: from_pretrained {info}")
            net.net = loaded_net.float()
        else:
            inner.load_state_dict(loaded, strict=True)
    net.eval()
    x = reference_transform(cfg, tile_img)
    with torch.no_grad():
        emb = net(x[None]).float().numpy()
    if emb.shape != (1, cfg.dim):
        raise SystemExit(f"{name}: reference gives {emb.shape}, config dim {cfg.dim}")
    ZOO.mkdir(parents=True, exist_ok=True)
    (ZOO / f"keys_{name}.json").write_text(json.dumps(
        {"keys": keys, "golden_keys": gkeys, "hf_config": hf_cfg, "overrides": over,
         "config_file": cfg_name if hf_cfg is not None else None,
         "reference": cfg.reference}, separators=(",", ":")))
    np.savez_compressed(ZOO / f"{name}.npz", embedding=emb.astype(np.float32))
    print(f"{name}: {len(keys)} keys, golden {len(gkeys)} keys, |emb| {np.abs(emb).max():.3g}",
          flush=True)


#: Texts of the CLIP text-tower goldens: pathology phrases, punctuation and case, a natural
#: image caption, and one longer than the 77-token context (truncated, end-of-text kept).
GOLDEN_TEXTS = (
    "an H&E image of invasive ductal carcinoma",
    "Lymphocytes, plasma cells & NECROSIS (x40).",
    "a photo of a cat",
    " ".join(["tumour stroma with desmoplastic reaction and tumour-infiltrating lymphocytes"]
             * 12),
)


def reference_clip_tokenizer(folder: Path) -> Any:
    """transformers ``CLIPTokenizer`` on the published ``vocab.json`` / ``merges.txt``, written
    from the CLIP BPE vocabulary (the byte-pair merges of OpenAI's ``bpe_simple_vocab_16e6``,
    which open_clip ships; the published hub files hold the same vocabulary)."""
    import transformers as tf
    from open_clip.tokenizer import SimpleTokenizer

    simple = SimpleTokenizer()
    # open_clip names the two special tokens <start_of_text>/<end_of_text>; the published
    # vocab.json spells them <|startoftext|>/<|endoftext|> (same ids, 49406/49407)
    special = {"<start_of_text>": "<|startoftext|>", "<end_of_text>": "<|endoftext|>"}
    vocab = {special.get(k, k): v for k, v in simple.encoder.items()}
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    merges = sorted(simple.bpe_ranks, key=simple.bpe_ranks.__getitem__)
    (folder / "merges.txt").write_text("#version: 0.2\n" + "".join(
        f"{a} {b}\n" for a, b in merges), encoding="utf-8")
    return tf.CLIPTokenizer.from_pretrained(str(folder))  # as it loads the hub folder


def make_text(name: str, scratch: Path) -> None:
    """``text_<name>.npz`` of a CLIP (``hf_clip``) entry: ``texts``, ``input_ids`` (N, 77)
    from transformers' ``CLIPTokenizer`` (``padding="max_length"``, ``truncation=True``) and
    ``embedding`` (N, dim) = ``CLIPModel.from_pretrained(folder).get_text_features`` with the
    golden weights (rule, seed of the entry) of ``keys_<name>.json``."""
    import tempfile

    import transformers as tf

    cfg = BUILTIN_CONFIGS[name]
    record = json.loads((ZOO / f"keys_{name}.json").read_text())
    sd = zoo_rule_weights(name, record["golden_keys"])
    texts = list(GOLDEN_TEXTS)
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        path = save_zoo_published(name, sd, Path(tmp), filename=cfg.hub_files[0],
                                  hf_config=record["hf_config"], config_name="config.json")
        net, info = tf.CLIPModel.from_pretrained(str(path.parent), output_loading_info=True,
                                                 use_kernels=False)  # plain torch
        if any(v for k, v in info.items() if k != "error_msgs") or info.get("error_msgs"):
            raise SystemExit(f"{name}: from_pretrained {info}")
        tok = reference_clip_tokenizer(Path(tmp))
        ids = tok(texts, padding="max_length", truncation=True, max_length=77,
                  return_tensors="pt")
        net = net.float().eval()
        with torch.no_grad():
            out = net.get_text_features(input_ids=ids["input_ids"],
                                        attention_mask=ids["attention_mask"])
        emb = (out if isinstance(out, torch.Tensor) else out.pooler_output).float().numpy()
    if emb.shape != (len(texts), cfg.dim):
        raise SystemExit(f"{name}: text reference gives {emb.shape}")
    np.savez_compressed(ZOO / f"text_{name}.npz", texts=np.asarray(texts),
                        input_ids=ids["input_ids"].numpy().astype(np.int64),
                        attention_mask=ids["attention_mask"].numpy().astype(np.int64),
                        embedding=emb.astype(np.float32))
    print(f"text_{name}: {emb.shape}, |emb| {np.abs(emb).max():.3g}", flush=True)


def main(names: list[str]) -> None:
    from wsikit.models.configs import ZOO_CONFIGS

    torch.set_num_threads(2)
    img = tile()
    ZOO.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(ZOO / "tile.npz", tile=img)
    scratch = Path("/tmp")
    everything = [c.name for c in ZOO_CONFIGS] + ["quiltnet_b16", "quiltnet_b32"]
    if names and names[0] == "--text":  # the CLIP text-tower goldens only
        for name in names[1:] or [c.name for c in ZOO_CONFIGS if c.layout == "hf_clip"]:
            make_text(name, scratch)
        return
    only_preprocess = names == ["--preprocess-only"]
    todo = everything if only_preprocess or not names else names
    write_preprocess_goldens(img, todo)
    if only_preprocess:
        return
    for name in todo:
        make(name, img, scratch)


if __name__ == "__main__":
    main(sys.argv[1:])
