"""CONCH v1.5 vision encoder (clean-room): timm ViT-L/16 trunk + attentional pooler + LayerNorm.

Published state-dict layout (``MahmoodLab/conchv1_5``, ``pytorch_model_vision.bin``):

* ``trunk.*``: timm ``VisionTransformer`` ViT-L/16 (dim 1024, depth 24, 16 heads, MLP ×4, qkv
  bias, LayerScale ``ls1.gamma``/``ls2.gamma``), class token, ``pos_embed`` for the 224 px grid
  ``(1, 197, 1024)`` or the 448 px grid ``(1, 785, 1024)``; the model runs at 448 px and a 224
  grid is interpolated bicubically on load;
* ``attn_pool_contrast.*``: one learned query (d_model 768) attending over all trunk tokens
  (context 1024) with 8 heads; ``ln_q``, ``ln_k``, ``to_q``, ``to_kv``, ``to_out``, no biases;
* ``ln_contrast``: LayerNorm(768). Output: the 768-d pooled token.
"""

from __future__ import annotations

import torch
from timm.layers import resample_abs_pos_embed
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from .registry import Encoder, EncoderConfig

__all__ = ["ConchV15", "AttentionalPooler"]


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
        self.trunk = VisionTransformer(
            img_size=config.input_px, patch_size=16, embed_dim=1024, depth=24, num_heads=16,
            mlp_ratio=4.0, qkv_bias=True, init_values=1e-5, num_classes=0, global_pool="",
            class_token=True)
        self.attn_pool_contrast = AttentionalPooler(768, 1024, 8, 1)
        self.ln_contrast = nn.LayerNorm(768)

    def adapt_state_dict(self, sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Interpolate a 224-grid ``trunk.pos_embed`` (1, 197, 1024) to this model's grid."""
        key = "trunk.pos_embed"
        target = self.trunk.pos_embed.shape
        pe = sd.get(key)
        if pe is not None and pe.ndim == 3 and pe.shape[-1] == target[-1] \
                and pe.shape[1] != target[1]:
            old = int(round((pe.shape[1] - 1) ** 0.5))
            new = int(round((target[1] - 1) ** 0.5))
            if old * old + 1 == pe.shape[1]:
                sd = dict(sd)
                sd[key] = resample_abs_pos_embed(pe.float(), new_size=(new, new),
                                                 old_size=(old, old), num_prefix_tokens=1,
                                                 interpolation="bicubic", antialias=False
                                                 ).to(pe.dtype)
        return sd

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.trunk.forward_features(x)
        pooled = self.ln_contrast(self.attn_pool_contrast(tokens))
        return pooled[:, 0]
