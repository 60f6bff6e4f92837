"""CONCH v1.5 vision encoder (clean-room): timm ViT-L/16 trunk + attentional pooler + LayerNorm.

Published state-dict layout (``MahmoodLab/conchv1_5``, ``pytorch_model_vision.bin``):

* ``trunk.*``: timm ``VisionTransformer`` ViT-L/16 (dim 1024, depth 24, 16 heads, MLP ×4, qkv
  bias, LayerScale ``ls1.gamma``/``ls2.gamma``), class token, ``pos_embed`` for the 224 px grid
  ``(1, 197, 1024)``;
* ``attn_pool_contrast.*``: one learned query (d_model 768) attending over all trunk tokens
  (context 1024) with 8 heads; ``ln_q``, ``ln_k``, ``to_q``, ``to_kv``, ``to_out``, no biases;
* ``ln_contrast``: LayerNorm(768). Output: the 768-d pooled token.

Position embedding, as the reference: the 14×14 table of the 224 grid is kept and, for an
input of ``gh × gw`` patches (28×28 at 448 px), interpolated at run time, bicubic, with
``scale_factor = ((gh + 0.1) / 14, (gw + 0.1) / 14)`` (the DINO "+0.1" convention, not an exact
resize to 28×28); the result is cached per input size. A checkpoint holding a 785-token table
(the 448 grid) is first resampled bilinearly to 14×14 on load, as TRIDENT does.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from .configs import EncoderConfig
from .registry import Encoder

__all__ = ["ConchV15", "ConchTrunk", "interpolate_pos_embed"]

#: side of the position-embedding grid stored in the checkpoint (224 px / 16 px)
POS_GRID = 14


def interpolate_pos_embed(pos_embed: torch.Tensor, grid: tuple[int, int], *,
                          num_prefix: int = 1) -> torch.Tensor:
    """The reference's run-time interpolation of a square position-embedding table.

    Parameters
    ----------
    pos_embed : torch.Tensor
        ``(1, num_prefix + G², D)``: prefix (class) tokens first, then a ``G × G`` grid.
    grid : (int, int)
        Patch grid ``(gh, gw)`` of the input.

    Returns
    -------
    torch.Tensor
        ``(1, num_prefix + gh·gw, D)`` float32: the grid part resampled bicubically with
        ``scale_factor = ((gh + 0.1) / G, (gw + 0.1) / G)`` (``align_corners=False``, no
        anti-aliasing); the prefix tokens unchanged. Identity when the grid already matches.
    """
    n = pos_embed.shape[1] - num_prefix
    side = math.isqrt(n)
    gh, gw = int(grid[0]), int(grid[1])
    if (gh, gw) == (side, side):
        return pos_embed.float()
    prefix, table = pos_embed[:, :num_prefix].float(), pos_embed[:, num_prefix:].float()
    dim = table.shape[-1]
    table = table.reshape(1, side, side, dim).permute(0, 3, 1, 2)
    table = F.interpolate(table, scale_factor=((gh + 0.1) / side, (gw + 0.1) / side),
                          mode="bicubic", align_corners=False)
    if table.shape[-2:] != (gh, gw):  # pragma: no cover - floor((g + 0.1)) == g always
        raise RuntimeError(f"position embedding resampled to {tuple(table.shape[-2:])}, "
                           f"expected {(gh, gw)}")
    table = table.permute(0, 2, 3, 1).reshape(1, gh * gw, dim)
    return torch.cat([prefix, table], dim=1)


class ConchTrunk(VisionTransformer):
    """timm ViT whose 224-grid position embedding is interpolated at run time (cached)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._pos_cache: dict[tuple, torch.Tensor] = {}

    def _interpolated(self, gh: int, gw: int, dtype: torch.dtype) -> torch.Tensor:
        pe = self.pos_embed
        assert pe is not None  # always built with one (timm: None only for pos_embed="none")
        if torch.is_grad_enabled() and pe.requires_grad:  # training: no cache
            return interpolate_pos_embed(pe, (gh, gw)).to(dtype)
        key = (gh, gw, pe.device, dtype, pe.data_ptr(), pe._version)
        hit = self._pos_cache.get(key)
        if hit is None:
            with torch.no_grad(), torch.autocast(pe.device.type, enabled=False):
                hit = interpolate_pos_embed(pe.detach(), (gh, gw)).to(dtype)
            self._pos_cache = {key: hit} if len(self._pos_cache) >= 4 else \
                {**self._pos_cache, key: hit}
        return hit

    def _pos_embed(self, x: torch.Tensor) -> torch.Tensor:
        b, gh, gw, c = x.shape  # dynamic_img_size: patch tokens as (B, H, W, C)
        x = x.reshape(b, gh * gw, c)
        assert self.cls_token is not None  # built with class_token=True
        x = torch.cat([self.cls_token.expand(b, -1, -1), x], dim=1)  # promotes, as the reference
        x = x + self._interpolated(gh, gw, torch.float32)
        return self.pos_drop(x)


class AttentionalPooler(nn.Module):
    """Learned queries cross-attending to context tokens (bias-free projections).

    Parameters
    ----------
    d_model : int
        Query and output width.
    context_dim : int
        Width of the attended tokens.
    n_head : int
        Attention heads.
    n_queries : int
        Number of learned queries.
    """

    def __init__(self, d_model: int = 768, context_dim: int = 1024, n_head: int = 8,
                 n_queries: int = 1) -> None:
        super().__init__()
        self.heads = n_head
        self.query = nn.Parameter(torch.randn(n_queries, d_model) * 0.02)
        self.ln_q = nn.LayerNorm(d_model)
        self.ln_k = nn.LayerNorm(context_dim)
        self.to_q = nn.Linear(d_model, d_model, bias=False)
        self.to_kv = nn.Linear(context_dim, 2 * d_model, bias=False)
        self.to_out = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, L, context_dim)`` -> ``(B, n_queries, d_model)``."""
        b = x.shape[0]
        kv = self.to_kv(self.ln_k(x))
        k, v = kv.chunk(2, dim=-1)
        q = self.to_q(self.ln_q(self.query)).unsqueeze(0).expand(b, -1, -1)
        h = self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(b, t.shape[1], h, -1).transpose(1, 2)

        out = nn.functional.scaled_dot_product_attention(split(q), split(k), split(v))
        return self.to_out(out.transpose(1, 2).reshape(b, q.shape[1], -1))


class ConchV15(Encoder):
    """CONCH v1.5 patch encoder: ``(B, 3, 448, 448)`` normalised -> ``(B, 768)``."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__(config)
        self.trunk = ConchTrunk(
            img_size=POS_GRID * 16, patch_size=16, embed_dim=1024, depth=24, num_heads=16,
            mlp_ratio=4.0, qkv_bias=True, init_values=1e-5, num_classes=0, global_pool="",
            class_token=True, dynamic_img_size=True)
        self.attn_pool_contrast = AttentionalPooler(768, 1024, 8, 1)
        self.ln_contrast = nn.LayerNorm(768)

    def adapt_state_dict(self, sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Resample a 448-grid ``trunk.pos_embed`` (1, 785, 1024) bilinearly to the 14×14 grid
        the model keeps (the reference's handling); a 224-grid table loads as it is."""
        key = "trunk.pos_embed"
        pe = sd.get(key)
        want = POS_GRID * POS_GRID + 1
        if pe is not None and pe.ndim == 3 and pe.shape[1] != want:
            side = math.isqrt(pe.shape[1] - 1)
            if side * side + 1 == pe.shape[1]:
                table = pe[:, 1:].float().reshape(1, side, side, -1).permute(0, 3, 1, 2)
                table = F.interpolate(table, size=(POS_GRID, POS_GRID), mode="bilinear",
                                      align_corners=False)
                table = table.permute(0, 2, 3, 1).reshape(1, want - 1, -1)
                sd = dict(sd)
                sd[key] = torch.cat([pe[:, :1].float(), table], dim=1).to(pe.dtype)
        return sd

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.trunk.forward_features(x)
        pooled = self.ln_contrast(self.attn_pool_contrast(tokens))
        return pooled[:, 0]
