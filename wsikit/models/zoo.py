"""The model zoo: one generic builder for the published ViT-family (and ResNet) encoders.

Each zoo entry of :mod:`wsikit.models.configs` names a timm architecture (``arch``) with the
published keyword arguments (``arch_kwargs``), the key layout of the published weight file
(``layout``) and how the embedding is read off the tokens (``pooling``). :class:`ZooEncoder`
builds the timm network, maps the published keys onto it (:func:`map_published`) and loads
them with ``strict=True``; nothing is downloaded and no remote code runs.

Layouts mapped here (every other key of the file is an error, so a wrong file never loads):

* ``timm``: the file is the timm state dict (H-optimus, UNI, Virchow, Prov-GigaPath, Kaiko,
  Lunit, GPFM);
* ``timm_resnet``: a full timm/torchvision ResNet-50 file; ``layer4.*`` and ``fc.*`` are
  dropped (the truncated network does not have them);
* ``hf_vit``: transformers ``ViTModel`` (Phikon): separate query/key/value are concatenated
  into timm's ``qkv``; the unused ``pooler`` is dropped;
* ``hf_dinov2``: transformers ``Dinov2Model`` (Phikon-v2, Midnight): as ``hf_vit`` plus
  LayerScale (``lambda1`` → ``gamma``) and SwiGLU (``weights_in``/``weights_out`` →
  ``fc1``/``fc2``); ``mask_token`` (training only) is dropped. The position table is
  interpolated at run time as transformers does (bicubic, no anti-aliasing, skipped when the
  grid matches), not as timm does;
* ``hf_dinov2_reg``: ``Dinov2WithRegistersModel`` (Hibou): as ``hf_dinov2`` with registers;
  the class token's position embedding is folded into the class token (timm's
  ``no_embed_class`` layout, exactly equivalent);
* ``hf_clip``: transformers ``CLIPModel`` (PLIP, OpenAI CLIP): the vision tower and
  ``visual_projection`` onto timm's CLIP ViT, and the text tower (``text_model.*``,
  ``text_projection``) onto :class:`ClipTextTower`, pre-norm ``torch.nn.TransformerEncoderLayer``
  blocks with a causal mask read at the end-of-text token, as transformers reads it; separate
  query/key/value are concatenated into the layers' ``in_proj``. ``logit_scale`` (training
  only) is dropped. These entries are :class:`ZooClipEncoder`: images and texts embed into one
  space, so they can serve as a figure index's vision-language tower.

When a ``config.json`` lies beside the weights (a Hugging Face snapshot always has one), the
architecture follows it (width, depth, heads, patch, table size, norm epsilon, activation,
SwiGLU, registers), so a published config that differs from the defaults still loads
faithfully or fails with a clear error; without one the table size is read from the file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, cast

import numpy as np
import timm
import torch
import torch.nn.functional as F
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from ..errors import ModelError, WeightsError
from .configs import EncoderConfig
from .registry import Encoder

__all__ = ["ZooClipEncoder", "ZooEncoder", "build_zoo", "map_published"]

#: Layouts whose architecture can be read from a transformers ``config.json``.
HF_LAYOUTS = ("hf_vit", "hf_dinov2", "hf_dinov2_reg", "hf_clip")


def timm_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Config keyword arguments as timm takes them: named layers resolved to classes."""
    out = dict(kwargs)
    named = {"swiglu_packed": "SwiGLUPacked"}
    if "mlp_layer" in out:
        import timm.layers

        out["mlp_layer"] = getattr(timm.layers, named[out["mlp_layer"]])
    if out.get("act_layer") == "silu":
        out["act_layer"] = nn.SiLU
    if "norm_eps" in out:
        out["norm_layer"] = partial(nn.LayerNorm, eps=float(out.pop("norm_eps")))
    if "out_indices" in out:
        out["out_indices"] = list(out["out_indices"])
    return out


def _swiglu_hidden(dim: int, mlp_ratio: float) -> int:
    """transformers' Dinov2 SwiGLU hidden width (of each half)."""
    hidden = int(dim * mlp_ratio)
    return (int(hidden * 2 / 3) + 7) // 8 * 8


def hf_timm_kwargs(layout: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """timm ``VisionTransformer`` arguments equivalent to a transformers config dict.

    Raises
    ------
    ModelError
        A config this mapping does not cover (another activation, no qkv bias, ...).
    """
    if layout == "hf_clip":
        cfg = {**cfg.get("vision_config", {}), "projection_dim": cfg.get("projection_dim", 512)}
    dim = int(cfg.get("hidden_size", 768))
    act = cfg.get("hidden_act", "quick_gelu" if layout == "hf_clip" else "gelu")
    kw: dict[str, Any] = {
        "embed_dim": dim, "depth": int(cfg.get("num_hidden_layers", 12)),
        "num_heads": int(cfg.get("num_attention_heads", 12)),
        "patch_size": int(cfg.get("patch_size", {"hf_vit": 16, "hf_clip": 32}.get(layout, 14))),
        "img_size": int(cfg.get("image_size", 224)),
        "norm_eps": float(cfg.get("layer_norm_eps",
                                  {"hf_vit": 1e-12, "hf_clip": 1e-5}.get(layout, 1e-6))),
    }
    if act not in ("gelu", "quick_gelu") or (act == "quick_gelu") != (layout == "hf_clip"):
        raise ModelError(f"{layout} config with hidden_act={act!r} is not supported")
    if not cfg.get("qkv_bias", True):
        raise ModelError(f"{layout} config without qkv_bias is not supported")
    if layout in ("hf_vit", "hf_clip"):
        kw["mlp_ratio"] = int(cfg.get("intermediate_size", 4 * dim)) / dim
    else:
        ratio = float(cfg.get("mlp_ratio", 4))
        if cfg.get("use_swiglu_ffn", False):
            # timm's packed SwiGLU: fc1 has 2·hidden outputs; +0.5 keeps int() exact
            kw["mlp_ratio"] = (2 * _swiglu_hidden(dim, ratio) + 0.5) / dim
            kw["mlp_layer"], kw["act_layer"] = "swiglu_packed", "silu"
        else:
            kw["mlp_ratio"] = (int(dim * ratio) + 0.5) / dim
        kw["init_values"] = float(cfg.get("layerscale_value", 1.0))
        kw["dynamic_img_size"] = True
    if layout == "hf_dinov2_reg":
        kw["reg_tokens"] = int(cfg.get("num_register_tokens", 4))
        kw["no_embed_class"] = True
    if layout == "hf_clip":
        kw["pre_norm"] = True
        kw["projection_dim"] = int(cfg["projection_dim"])
    return kw


#: transformers ``CLIPTextConfig`` defaults: the OpenAI CLIP text tower (PLIP keeps it).
CLIP_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 49408, "hidden_size": 512, "intermediate_size": 2048,
    "num_hidden_layers": 12, "num_attention_heads": 8, "max_position_embeddings": 77,
    "hidden_act": "quick_gelu", "layer_norm_eps": 1e-5, "eos_token_id": 49407}


def clip_text_kwargs(cfg: dict[str, Any]) -> dict[str, Any]:
    """:class:`ClipTextTower` arguments from a transformers CLIP config dict (its
    ``text_config`` over :data:`CLIP_TEXT_DEFAULTS`; ``projection_dim`` of the whole model).

    Raises
    ------
    ModelError
        An activation other than QuickGELU or GELU.
    """
    text = {**CLIP_TEXT_DEFAULTS, **(cfg.get("text_config") or {})}
    act = str(text["hidden_act"])
    if act not in ("quick_gelu", "gelu"):
        raise ModelError(f"hf_clip text config with hidden_act={act!r} is not supported")
    eos = text.get("eos_token_id", 49407)
    return {"vocab_size": int(text["vocab_size"]), "width": int(text["hidden_size"]),
            "layers": int(text["num_hidden_layers"]), "heads": int(text["num_attention_heads"]),
            "mlp": int(text["intermediate_size"]), "context": int(text["max_position_embeddings"]),
            "eps": float(text["layer_norm_eps"]), "act": act,
            "eos_token_id": int(eos[0] if isinstance(eos, list) else eos),
            "projection_dim": int(cfg.get("projection_dim", 512))}


def _quick_gelu(x: torch.Tensor) -> torch.Tensor:
    """OpenAI CLIP's activation, ``x * sigmoid(1.702 x)``."""
    return x * torch.sigmoid(1.702 * x)


def _gelu(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x)  # a function of its own: keeps torch's fused fast path (other maths) off


class ClipTextTower(nn.Module):
    """CLIP's text transformer: token + position embedding, pre-norm blocks under a causal
    mask, final norm, the hidden state of the end-of-text token, linear projection.

    ``forward(ids)``: ``(N, L)`` int64 token ids (``L <= context``) → ``(N, projection_dim)``.
    The pooled token is the first ``eos_token_id`` of each row, or, for configs that give the
    pre-2023 ``eos_token_id`` 2, the row's largest id (transformers' two rules; both pick the
    end-of-text token of CLIP's tokenizer).
    """

    def __init__(self, *, vocab_size: int, width: int, layers: int, heads: int, mlp: int,
                 context: int, eps: float, act: str, eos_token_id: int,
                 projection_dim: int) -> None:
        super().__init__()
        self.context, self.eos_token_id = context, eos_token_id
        self.token_embedding = nn.Embedding(vocab_size, width)
        self.position_embedding = nn.Embedding(context, width)
        activation = _quick_gelu if act == "quick_gelu" else _gelu
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(width, heads, mlp, dropout=0.0, activation=activation,
                                       layer_norm_eps=eps, batch_first=True, norm_first=True)
            for _ in range(layers))
        self.final_layer_norm = nn.LayerNorm(width, eps=eps)
        self.projection = nn.Linear(width, projection_dim, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        n, length = ids.shape
        if length > self.context:
            raise ModelError(f"text of {length} tokens; the tower reads at most {self.context}")
        x = self.token_embedding(ids) + self.position_embedding.weight[:length]
        mask = torch.full((length, length), float("-inf"), device=x.device).triu(1)
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=True)
        x = self.final_layer_norm(x)
        if self.eos_token_id == 2:
            at = ids.argmax(dim=-1)
        else:
            hit = ids == self.eos_token_id
            if not bool(hit.any(dim=-1).all()):
                raise ModelError("a text without the end-of-text token; tokenise with the "
                                 "model's tokenizer")
            at = hit.int().argmax(dim=-1)
        out: torch.Tensor = self.projection(x[torch.arange(n, device=x.device), at])
        return out


class _HFDinov2ViT(VisionTransformer):
    """timm ViT with transformers Dinov2's position handling: the class token's and the
    patches' table is added after the class token is prepended, and the patch table is
    resampled (bicubic, float32, no anti-aliasing, exact target size) only when the grid
    differs from the stored one."""

    def _pos_embed(self, x: torch.Tensor) -> torch.Tensor:
        b, gh, gw, c = x.shape  # dynamic_img_size: (B, H, W, C)
        x = x.reshape(b, gh * gw, c)
        pe: torch.Tensor | None = self.pos_embed
        assert pe is not None and self.cls_token is not None
        n = pe.shape[1] - 1
        if n != gh * gw:
            side = math.isqrt(n)
            table = pe[:, 1:].float().reshape(1, side, side, c).permute(0, 3, 1, 2)
            table = F.interpolate(table, size=(gh, gw), mode="bicubic", align_corners=False)
            table = table.to(pe.dtype).permute(0, 2, 3, 1).reshape(1, gh * gw, c)
            pe = torch.cat([pe[:, :1], table], dim=1)
        x = torch.cat([self.cls_token.expand(b, -1, -1), x], dim=1)
        return self.pos_drop(x + pe)


def _qkv(sd: dict[str, torch.Tensor], src: str, names: tuple[str, str, str], dst: str,
         out: dict[str, torch.Tensor]) -> None:
    for part in ("weight", "bias"):
        keys = [f"{src}.{n}.{part}" for n in names]
        if all(k in sd for k in keys):
            out[f"{dst}.{part}"] = torch.cat([sd.pop(k) for k in keys], dim=0)


def _rename(sd: dict[str, torch.Tensor], pairs: list[tuple[str, str]],
            out: dict[str, torch.Tensor]) -> None:
    for src, dst in pairs:
        for part in ("weight", "bias"):
            if f"{src}.{part}" in sd:
                out[f"{dst}.{part}"] = sd.pop(f"{src}.{part}")


def _strip(sd: dict[str, torch.Tensor], prefixes: tuple[str, ...]) -> dict[str, torch.Tensor]:
    for p in prefixes:
        if sd and all(k.startswith(p) for k in sd):
            return {k[len(p):]: v for k, v in sd.items()}
    return dict(sd)


def _map_hf_blocks(sd: dict[str, torch.Tensor], out: dict[str, torch.Tensor],
                   layout: str) -> None:
    """transformers ViT / Dinov2 encoder layers -> timm ``blocks.N``."""
    depth = 1 + max((int(k.split(".")[2]) for k in sd if k.startswith("encoder.layer.")),
                    default=-1)
    for i in range(depth):
        s, d = f"encoder.layer.{i}", f"blocks.{i}"
        _qkv(sd, f"{s}.attention.attention", ("query", "key", "value"), f"{d}.attn.qkv", out)
        pairs = [(f"{s}.attention.output.dense", f"{d}.attn.proj")]
        if layout == "hf_vit":
            pairs += [(f"{s}.layernorm_before", f"{d}.norm1"),
                      (f"{s}.layernorm_after", f"{d}.norm2"),
                      (f"{s}.intermediate.dense", f"{d}.mlp.fc1"),
                      (f"{s}.output.dense", f"{d}.mlp.fc2")]
        else:
            pairs += [(f"{s}.norm1", f"{d}.norm1"), (f"{s}.norm2", f"{d}.norm2"),
                      (f"{s}.mlp.fc1", f"{d}.mlp.fc1"), (f"{s}.mlp.fc2", f"{d}.mlp.fc2"),
                      (f"{s}.mlp.weights_in", f"{d}.mlp.fc1"),
                      (f"{s}.mlp.weights_out", f"{d}.mlp.fc2")]
            for j in (1, 2):
                key = f"{s}.layer_scale{j}.lambda1"
                if key in sd:
                    out[f"{d}.ls{j}.gamma"] = sd.pop(key)
        _rename(sd, pairs, out)


def _map_hf_vit_like(sd: dict[str, torch.Tensor], layout: str) -> dict[str, torch.Tensor]:
    sd = _strip(sd, ("vit.", "dinov2.", "model."))
    out: dict[str, torch.Tensor] = {}
    for drop in ("embeddings.mask_token",):
        sd.pop(drop, None)
    for key in [k for k in sd if k.startswith("pooler.")]:
        sd.pop(key)  # ViTModel's pooler: not part of the embedding (add_pooling_layer=False)
    cls = sd.pop("embeddings.cls_token", None)
    pos = sd.pop("embeddings.position_embeddings", None)
    if cls is not None and pos is not None and layout == "hf_dinov2_reg":
        # timm no_embed_class: registers carry no position; fold the class position in
        cls, pos = cls + pos[:, :1], pos[:, 1:]
    if cls is not None:
        out["cls_token"] = cls
    if pos is not None:
        out["pos_embed"] = pos
    if "embeddings.register_tokens" in sd:
        out["reg_token"] = sd.pop("embeddings.register_tokens")
    _rename(sd, [("embeddings.patch_embeddings.projection", "patch_embed.proj"),
                 ("layernorm", "norm")], out)
    _map_hf_blocks(sd, out, layout)
    out.update(sd)  # anything left is unexpected: the strict load names it
    return out


def _map_hf_clip_text(sd: dict[str, torch.Tensor], out: dict[str, torch.Tensor]) -> None:
    """transformers ``CLIPTextModel`` keys (+ ``text_projection``) -> ``text.*``."""
    t = "text_model"
    sd.pop(f"{t}.embeddings.position_ids", None)  # a buffer of older files
    inner: dict[str, torch.Tensor] = {}
    for src, dst in ((f"{t}.embeddings.token_embedding.weight", "token_embedding.weight"),
                     (f"{t}.embeddings.position_embedding.weight", "position_embedding.weight"),
                     ("text_projection.weight", "projection.weight")):
        if src in sd:
            inner[dst] = sd.pop(src)
    _rename(sd, [(f"{t}.final_layer_norm", "final_layer_norm")], inner)
    depth = 1 + max((int(k.split(".")[3]) for k in sd if k.startswith(f"{t}.encoder.layers.")),
                    default=-1)
    for i in range(depth):
        s, d = f"{t}.encoder.layers.{i}", f"layers.{i}"
        for part, name in (("weight", "in_proj_weight"), ("bias", "in_proj_bias")):
            keys = [f"{s}.self_attn.{n}.{part}" for n in ("q_proj", "k_proj", "v_proj")]
            if all(k in sd for k in keys):
                inner[f"{d}.self_attn.{name}"] = torch.cat([sd.pop(k) for k in keys], dim=0)
        _rename(sd, [(f"{s}.self_attn.out_proj", f"{d}.self_attn.out_proj"),
                     (f"{s}.layer_norm1", f"{d}.norm1"), (f"{s}.layer_norm2", f"{d}.norm2"),
                     (f"{s}.mlp.fc1", f"{d}.linear1"), (f"{s}.mlp.fc2", f"{d}.linear2")], inner)
    out.update({f"text.{k}": v for k, v in inner.items()})


def _map_hf_clip(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    sd = _strip(sd, ("model.",))
    out: dict[str, torch.Tensor] = {}
    for key in [k for k in sd if k in ("logit_scale", "vision_model.embeddings.position_ids")]:
        sd.pop(key)  # the training temperature and position-id buffers of older files
    _map_hf_clip_text(sd, out)
    v = "vision_model"
    if f"{v}.embeddings.class_embedding" in sd:
        out["model.cls_token"] = sd.pop(f"{v}.embeddings.class_embedding").reshape(1, 1, -1)
    if f"{v}.embeddings.position_embedding.weight" in sd:
        out["model.pos_embed"] = sd.pop(f"{v}.embeddings.position_embedding.weight")[None]
    if "visual_projection.weight" in sd:
        out["proj.weight"] = sd.pop("visual_projection.weight")
    inner: dict[str, torch.Tensor] = {}
    _rename(sd, [(f"{v}.embeddings.patch_embedding", "patch_embed.proj"),
                 (f"{v}.pre_layrnorm", "norm_pre"), (f"{v}.post_layernorm", "norm")], inner)
    depth = 1 + max((int(k.split(".")[3]) for k in sd if k.startswith(f"{v}.encoder.layers.")),
                    default=-1)
    for i in range(depth):
        s, d = f"{v}.encoder.layers.{i}", f"blocks.{i}"
        _qkv(sd, f"{s}.self_attn", ("q_proj", "k_proj", "v_proj"), f"{d}.attn.qkv", inner)
        _rename(sd, [(f"{s}.self_attn.out_proj", f"{d}.attn.proj"),
                     (f"{s}.layer_norm1", f"{d}.norm1"), (f"{s}.layer_norm2", f"{d}.norm2"),
                     (f"{s}.mlp.fc1", f"{d}.mlp.fc1"), (f"{s}.mlp.fc2", f"{d}.mlp.fc2")], inner)
    out.update({f"model.{k}": t for k, t in inner.items()})
    out.update(sd)
    return out


def map_published(layout: str, sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Map a published state dict of ``layout`` to :class:`ZooEncoder`'s own keys
    (``model.<timm key>``, plus ``proj.weight`` and the text tower's ``text.*`` for CLIP)."""
    sd = dict(sd)
    if layout == "timm":
        return {f"model.{k}": v for k, v in sd.items()}
    if layout == "timm_resnet":
        sd = _strip(sd, ("model.", "module."))
        return {f"model.{k}": v for k, v in sd.items()
                if not (k.startswith("layer4.") or k.startswith("fc."))}
    if layout in ("hf_vit", "hf_dinov2", "hf_dinov2_reg"):
        return {f"model.{k}": v for k, v in _map_hf_vit_like(sd, layout).items()}
    if layout == "hf_clip":
        return _map_hf_clip(sd)
    raise ModelError(f"unknown weight layout {layout!r}")


def _peek_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Key -> shape of a weight file without reading the tensors (safetensors) or through a
    memory map (torch pickles)."""
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118
    from .hub import load_state_dict

    return {k: tuple(v.shape) for k, v in load_state_dict(path).items()}


class ZooEncoder(Encoder):
    """A zoo entry: ``(B, 3, input_px, input_px)`` normalised -> ``(B, dim)``.

    ``self.model`` is the timm network; ``self.proj`` the CLIP image projection (``hf_clip``
    only). The state dict is ``model.<timm key>`` (+ ``proj.weight``); published files are
    mapped to it by :func:`map_published` before the strict load.
    """

    model: Any  # the timm network (VisionTransformer or ResNet features), typed loosely
    proj: nn.Linear | None
    text: ClipTextTower | None

    def __init__(self, config: EncoderConfig, hf_config: dict[str, Any] | None = None,
                 overrides: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        if not config.arch.startswith("timm:"):
            raise ModelError(f"{config.name}: arch {config.arch!r} is not a timm architecture")
        self.hf_config = hf_config
        self._overrides = dict(overrides or {})
        self._build()

    def _arch_kwargs(self) -> dict[str, Any]:
        """timm arguments: the entry's (timm layouts) or those of its published config
        fields, updated by the config.json beside the weights (transformers layouts)."""
        if self.config.layout in HF_LAYOUTS:
            fields = {**self.config.kwargs, **(self.hf_config or {})}
            kw = hf_timm_kwargs(self.config.layout, fields)
        else:
            kw = self.config.kwargs
        kw.update(self._overrides)
        return kw

    def _build(self) -> None:
        name = self.config.arch.split(":", 1)[1]
        kw = timm_kwargs(self._arch_kwargs())
        proj_dim = kw.pop("projection_dim", None)
        if self.config.layout == "hf_dinov2":  # transformers Dinov2's position handling
            self.model = _HFDinov2ViT(**{"num_classes": 0, "global_pool": "token", **kw})
        else:
            self.model = timm.create_model(name, pretrained=False, **({"num_classes": 0} | kw))
        self.proj = (nn.Linear(int(kw.get("embed_dim", 768)), int(proj_dim), bias=False)
                     if self.config.layout == "hf_clip" else None)
        self.text = None
        if self.config.layout == "hf_clip":  # the published file holds both towers
            fields = {**self.config.kwargs, **(self.hf_config or {})}
            self.text = ClipTextTower(**clip_text_kwargs(fields))
            if self.text.projection.out_features != self.config.dim:
                raise ModelError(f"{self.config.name}: the text tower embeds "
                                 f"{self.text.projection.out_features}-d vectors, the entry "
                                 f"says {self.config.dim}")
        dim = self._out_dim()
        if dim != self.config.dim:
            raise ModelError(f"{self.config.name}: the architecture gives {dim}-d embeddings, "
                             f"the entry says {self.config.dim}; the config beside the "
                             "weights describes another model")

    def _out_dim(self) -> int:
        if self.proj is not None:
            return int(self.proj.out_features)
        if self.config.pooling == "avgpool":
            return int(cast(Any, self.model).feature_info.channels()[-1])
        width = int(cast(Any, self.model).embed_dim)
        return 2 * width if self.config.pooling == "cls+mean" else width

    def prepare_for_weights(self, path: str | Path) -> None:
        """Follow the ``config.json`` beside ``path`` (transformers layouts), else the table
        size stored in the file; rebuild without random initialisation when it changes."""
        path = Path(path)
        layout = self.config.layout
        if layout not in HF_LAYOUTS:
            return
        cfg_file = path.parent / (self.config.hf_config or "config.json")
        hf_cfg = None
        if layout in HF_LAYOUTS and cfg_file.is_file():
            try:
                hf_cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise WeightsError(f"{cfg_file} is not a readable model config ({exc}); "
                                   "replace it with the config.json published beside the "
                                   f"weights of {self.config.hub_repo}, or delete it") from exc
        overrides: dict[str, Any] = {}
        if hf_cfg is None:
            overrides = self._table_size_from(path)
        if hf_cfg is None and not overrides:
            return
        self.hf_config = hf_cfg if hf_cfg is not None else self.hf_config
        self._overrides = overrides
        with torch.device("meta"):
            self._build()
        self.model = self.model.to_empty(device=self._mean.device)
        if self.proj is not None:
            self.proj = self.proj.to_empty(device=self._mean.device)
        if self.text is not None:
            self.text = self.text.to_empty(device=self._mean.device)

    def _table_size_from(self, path: Path) -> dict[str, Any]:
        """``img_size`` matching the position table stored in ``path`` when it differs from
        the built one (transformers Dinov2 files keep the table of their training size)."""
        if self.config.layout not in ("hf_dinov2", "hf_dinov2_reg"):
            return {}
        shapes = _peek_shapes(path)
        key = next((k for k in shapes if k.endswith("embeddings.position_embeddings")), "")
        if not key or len(shapes[key]) != 3:
            return {}
        side = math.isqrt(shapes[key][1] - 1)
        grid = tuple(int(g) for g in self.model.patch_embed.grid_size)
        if side * side != shapes[key][1] - 1 or grid == (side, side):
            return {}
        return {"img_size": side * int(self.model.patch_embed.patch_size[0])}

    def adapt_state_dict(self, sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Map the published layout to this module's keys (see :func:`map_published`)."""
        return map_published(self.config.layout, sd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooling = self.config.pooling
        if pooling == "avgpool":
            fmap = self.model(x)
            fmap = fmap[-1] if isinstance(fmap, (list, tuple)) else fmap
            return fmap.mean(dim=(-2, -1))
        tokens = self.model.forward_features(x)
        prefix = int(getattr(self.model, "num_prefix_tokens", 1))
        if pooling == "cls":
            out = tokens[:, 0]
        elif pooling == "cls+mean":
            out = torch.cat([tokens[:, 0], tokens[:, prefix:].mean(dim=1)], dim=-1)
        elif pooling == "mean":
            out = tokens[:, prefix:].mean(dim=1)
        else:
            raise ModelError(f"{self.config.name}: unknown pooling {pooling!r}")
        return self.proj(out) if self.proj is not None else out


class ZooClipEncoder(ZooEncoder):
    """A CLIP zoo entry (``hf_clip``: PLIP, OpenAI CLIP): :meth:`forward` embeds images,
    :meth:`encode_text` strings, into one space (both the towers' projections, not
    normalised), so the entry can be a figure index's vision-language tower
    (``wsikit index tower DIR --encoder plip``)."""

    text: ClipTextTower

    def tokenize(self, texts: Sequence[str]) -> torch.Tensor:
        """``(N, context)`` int64 CLIP BPE token ids (open_clip's tokenizer, the vocabulary of
        the published ``vocab.json``/``merges.txt``; needs ``pip install 'wsikit[vlm]'``)."""
        from .clip_vl import tokenize

        return tokenize(list(texts), context_length=self.text.context)

    @torch.inference_mode()
    def encode_text(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Embed strings with the text tower: ``N`` texts → ``(N, dim)`` float32 (float32
        arithmetic; long texts are truncated to the tower's context, end-of-text kept).

        Raises
        ------
        ModelError
            An empty text, or open_clip (the tokenizer) not installed.
        """
        if isinstance(texts, str):
            texts = [texts]
        if any(not str(t).strip() for t in texts):
            raise ModelError(f"{self.config.name}.encode_text: empty text")
        out = [self.text(self.tokenize(texts[i:i + batch_size]).to(self.device)).float().cpu()
               for i in range(0, len(texts), batch_size)]
        if not out:
            return np.zeros((0, self.config.dim), np.float32)
        return torch.cat(out).numpy().astype(np.float32, copy=False)


def build_zoo(config: EncoderConfig) -> ZooEncoder:
    """Registry builder of every timm-based zoo entry (:class:`ZooClipEncoder` for the CLIP
    layout, whose entries also embed text)."""
    if config.layout == "hf_clip":
        return ZooClipEncoder(config)
    return ZooEncoder(config)
