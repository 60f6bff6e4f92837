"""TITAN slide encoder (clean-room), with linear-memory 2-D ALiBi attention and per-patch attention.

Architecture (keys of ``vision_encoder.*`` in ``MahmoodLab/TITAN/model.safetensors``):

* ``patch_embed``: Linear(768, 768) + GELU over CONCH v1.5 patch features;
* ``cls_token`` (1, 1, 768), prepended; no absolute positional embedding;
* ``blocks.modules_list.{0..5}``: pre-norm transformer blocks (dim 768, 12 heads, MLP ×4,
  qkv bias) whose attention logits get a 2-D ALiBi bias ``-slope_h · ‖g_i − g_j‖₂`` over the
  grid cells of the tokens; the CLS token has bias 0 to and from every token;
* ``norm`` LayerNorm(768);
* ``attn_pool`` (128 queries) and ``attn_pool_contrastive`` (1 query): attentional poolers, each
  ``query``, ``ln_q``, ``ln_k`` and ``attn = nn.MultiheadAttention(768, 8)``, applied in
  parallel to the normalised tokens (CLS included);
* ``proj`` (768, 768) parameter (projection into the joint text space).

The slide embedding is the output of ``attn_pool_contrastive`` (768-d). The per-patch attention
is that pooler's query attention over the tokens (mean of 8 heads, CLS dropped, renormalised to
sum 1), returned in the order of the input patches.

Memory: the published code materialises the dense ``heads × N × N`` bias. Here the bias is
generated on the fly for one block of query rows at a time and handed to
:func:`torch.nn.functional.scaled_dot_product_attention` (whose fused kernels accumulate over
key blocks flash-style, online softmax), so extra memory is ``heads · block · N`` with ``block``
chosen to fit a fixed budget: linear in N. Because attention and pooling are permutation
equivariant/invariant and ALiBi depends only on distances, outputs do not depend on token order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ModelError
from .registry import EncoderConfig, get_config

__all__ = [
    "Titan",
    "TitanOutput",
    "TitanGrid",
    "alibi_slopes",
    "coords_to_grid",
    "dense_alibi_bias",
    "create_titan",
    "titan",
]

DIM = 768
HEADS = 12
DEPTH = 6
POOL_HEADS = 8
#: bytes of bias/score block per attention call (the query block is sized to fit it)
BLOCK_BUDGET_BYTES = 16 * 2**20


def alibi_slopes(num_heads: int = HEADS) -> torch.Tensor:
    """ALiBi slopes: for 12 heads 2^-1 … 2^-8 then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.

    The rule (from the ALiBi paper) for a non-power-of-two head count: the slopes of the
    nearest lower power of two, then every other slope of twice that count.
    """
    def pow2(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(num_heads).is_integer():
        slopes = pow2(num_heads)
    else:
        nearest = 2 ** math.floor(math.log2(num_heads))
        slopes = pow2(nearest) + pow2(2 * nearest)[0::2][: num_heads - nearest]
    return torch.tensor(slopes, dtype=torch.float32)


@dataclass(frozen=True)
class TitanGrid:
    """Patches mapped to TITAN tokens.

    Attributes
    ----------
    cells : ndarray
        ``(N, 2)`` int64 grid cells ``(gx, gy)`` of the tokens, in token (row-major) order.
    order : ndarray
        ``(N,)`` int64: token ``t`` is input patch ``order[t]``.
    inverse : ndarray
        ``(N,)`` int64: input patch ``i`` is token ``inverse[i]``.
    """

    cells: np.ndarray
    order: np.ndarray
    inverse: np.ndarray


def coords_to_grid(coords: np.ndarray | torch.Tensor, patch_size_lv0: int) -> TitanGrid:
    """Validate level-0 coords and map them to grid cells ``(coords - coords.min(0)) // p``.

    Raises :class:`ModelError` for non-int64 or misshapen coords, a stride (gcd of the offsets)
    different from ``patch_size_lv0``, or two patches in one cell.
    """
    if isinstance(coords, torch.Tensor):
        coords = coords.detach().cpu().numpy()
    coords = np.asarray(coords)
    if coords.ndim == 3 and coords.shape[0] == 1:
        coords = coords[0]
    if coords.ndim != 2 or coords.shape[1] != 2:
        raise ModelError(f"titan: coords must be (N, 2) level-0 (x, y) of ONE slide, got shape "
                         f"{coords.shape}; call titan() once per slide")
    if coords.dtype != np.int64:
        raise ModelError(f"titan: coords must be int64, got {coords.dtype}; pass "
                         "coords.astype(np.int64) (level-0 pixels, as in the *_patches.h5 file)")
    if coords.shape[0] == 0:
        raise ModelError("titan: no patches (coords is empty); the slide has no tissue patches")
    p = int(patch_size_lv0)
    if p <= 0:
        raise ModelError(f"titan: patch_size_lv0={patch_size_lv0!r} must be a positive number "
                         "of level-0 pixels (the grid stride, TileGrid.stride_l0)")
    offsets = coords - coords.min(axis=0)
    stride = int(np.gcd.reduce(offsets.reshape(-1))) if coords.shape[0] > 1 else 0
    if stride and stride != p:
        raise ModelError(f"titan: the coordinates lie on a grid of stride {stride} level-0 px "
                         f"but patch_size_lv0={p}; pass patch_size_lv0={stride} (the "
                         "'patch_size_level0' attribute of the coordinate file) or re-patch "
                         "without overlap")
    cells = offsets // p
    width = int(cells[:, 0].max()) + 1
    flat = cells[:, 1] * width + cells[:, 0]  # row-major: y, then x
    order = np.argsort(flat, kind="stable")
    sorted_flat = flat[order]
    dup = np.flatnonzero(sorted_flat[1:] == sorted_flat[:-1])
    if dup.size:
        i, j = order[dup[0]], order[dup[0] + 1]
        raise ModelError(f"titan: {dup.size} patches share a grid cell with another (e.g. "
                         f"patches {i} and {j} at {coords[i].tolist()} and {coords[j].tolist()} "
                         f"fall in cell {cells[i].tolist()}); TITAN needs non-overlapping "
                         f"patches on a stride-{p} grid: remove duplicates or re-patch without "
                         "overlap")
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    return TitanGrid(cells=cells[order].astype(np.int64), order=order.astype(np.int64),
                     inverse=inverse.astype(np.int64))


def _pairwise_bias(cells_q: torch.Tensor, cells_k: torch.Tensor, slopes: torch.Tensor,
                   cls_q: bool, cls_k: bool) -> torch.Tensor:
    """ALiBi bias ``(H, q, k)`` between cells (float), with a zero row/column for CLS."""
    d = torch.cdist(cells_q, cells_k)  # (q, k) Euclidean grid distance
    bias = d.unsqueeze(0) * (-slopes).view(-1, 1, 1)
    if cls_q or cls_k:
        bias = F.pad(bias, (1 if cls_k else 0, 0, 1 if cls_q else 0, 0))
    return bias


def dense_alibi_bias(cells: torch.Tensor, slopes: torch.Tensor | None = None) -> torch.Tensor:
    """The dense ``(H, N+1, N+1)`` bias (CLS first, zero bias) that the published code builds;
    for testing and the memory benchmark only (it needs ``H · (N+1)² · 4`` bytes)."""
    slopes = alibi_slopes() if slopes is None else slopes
    c = cells.float()
    return _pairwise_bias(c, c, slopes, True, True)


class _Attention(nn.Module):
    def __init__(self, dim: int = DIM, heads: int = HEADS) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, cells: torch.Tensor, slopes: torch.Tensor,
                mode: str, budget: int) -> torch.Tensor:
        n, dim = x.shape  # one slide: (N+1, dim), CLS first
        hd = dim // self.heads
        q, k, v = self.qkv(x).view(n, 3, self.heads, hd).permute(1, 2, 0, 3)  # (H, n, hd) each
        cf = cells.to(x.dtype)
        if mode == "dense":
            bias = _pairwise_bias(cf, cf, slopes.to(x.dtype), True, True)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        else:
            bytes_per_row = self.heads * n * max(4, x.element_size())
            block = max(1, min(n, budget // bytes_per_row))
            out = torch.empty_like(q)
            s = slopes.to(x.dtype)
            for start in range(0, n, block):
                stop = min(n, start + block)
                # token t >= 1 has cell t-1; token 0 is CLS
                cq = cf[max(start, 1) - 1: stop - 1]
                bias = _pairwise_bias(cq, cf, s, start == 0, True)
                out[:, start:stop] = F.scaled_dot_product_attention(
                    q[:, start:stop], k, v, attn_mask=bias)
                del bias
        return self.proj(out.transpose(0, 1).reshape(n, dim))


class _Mlp(nn.Module):
    def __init__(self, dim: int = DIM, ratio: int = 4) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, dim * ratio)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(dim * ratio, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(DIM, eps=1e-6)
        self.attn = _Attention()
        self.norm2 = nn.LayerNorm(DIM, eps=1e-6)
        self.mlp = _Mlp()

    def forward(self, x: torch.Tensor, cells: torch.Tensor, slopes: torch.Tensor, mode: str,
                budget: int) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), cells, slopes, mode, budget)
        return x + self.mlp(self.norm2(x))


class _Blocks(nn.Module):
    def __init__(self, depth: int = DEPTH) -> None:
        super().__init__()
        self.modules_list = nn.ModuleList(_Block() for _ in range(depth))


class _AttentionalPooler(nn.Module):
    """Learned queries attending over tokens through ``nn.MultiheadAttention``."""

    def __init__(self, n_queries: int, dim: int = DIM, heads: int = POOL_HEADS) -> None:
        super().__init__()
        self.query = nn.Parameter(torch.randn(n_queries, dim) * 0.02)
        self.attn = nn.MultiheadAttention(dim, heads)
        self.ln_q = nn.LayerNorm(dim)
        self.ln_k = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(n, dim)`` tokens -> pooled ``(n_queries, dim)`` and head-mean attention
        ``(n_queries, n)``."""
        kv = self.ln_k(x)
        q = self.ln_q(self.query)
        out, attn = self.attn(q.unsqueeze(1), kv.unsqueeze(1), kv.unsqueeze(1),
                              need_weights=True, average_attn_weights=True)
        return out[:, 0], attn[0]


class _PatchEmbed(nn.Sequential):
    def __init__(self) -> None:
        super().__init__(nn.Linear(DIM, DIM), nn.GELU())


@dataclass(frozen=True)
class TitanOutput:
    """Result of :func:`titan` for one slide.

    Attributes
    ----------
    slide_embedding : ndarray
        ``(768,)`` float32, the output of ``attn_pool_contrastive``.
    attention : ndarray
        ``(N,)`` float32, per-patch attention in the input patch order, sums to 1.
    label : str
        Provenance of the numbers (model and weights).
    """

    slide_embedding: np.ndarray
    attention: np.ndarray
    label: str = "titan"


class Titan(nn.Module):
    """TITAN vision encoder over CONCH v1.5 features (see the module docstring)."""

    def __init__(self, config: EncoderConfig | None = None) -> None:
        super().__init__()
        self.config = config or get_config("titan")
        self.label = "titan"
        self.weights_source: str | None = None
        self.patch_embed = _PatchEmbed()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, DIM))
        self.blocks = _Blocks()
        self.norm = nn.LayerNorm(DIM, eps=1e-6)
        self.attn_pool = _AttentionalPooler(128)
        self.attn_pool_contrastive = _AttentionalPooler(1)
        self.proj = nn.Parameter(torch.empty(DIM, DIM))
        self.register_buffer("slopes", alibi_slopes(HEADS), persistent=False)
        nn.init.normal_(self.cls_token, std=0.02)
        nn.init.normal_(self.proj, std=DIM ** -0.5)

    def adapt_state_dict(self, sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Accept ``patch_embed.{proj,fc}.*`` / ``patch_embed.*`` spellings of the embedding."""
        out = {}
        for k, v in sd.items():
            for alias in ("patch_embed.proj.", "patch_embed.fc.", "patch_embed."):
                if k.startswith(alias) and not k.startswith("patch_embed.0."):
                    k = "patch_embed.0." + k[len(alias):]
                    break
            out[k] = v
        return out

    @property
    def device(self) -> torch.device:
        return self.proj.device

    def forward_tokens(self, x: torch.Tensor, cells: torch.Tensor, *,
                       mode: Literal["blocked", "dense"] = "blocked",
                       budget: int = BLOCK_BUDGET_BYTES) -> torch.Tensor:
        """Features ``(N, 768)`` in token order + cells ``(N, 2)`` -> normalised tokens
        ``(N+1, 768)`` (CLS first)."""
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token[0].to(x.dtype), x], dim=0)
        for block in self.blocks.modules_list:
            x = block(x, cells, self.slopes, mode, budget)
        return self.norm(x)

    @torch.inference_mode()
    def encode_slide(self, features: np.ndarray | torch.Tensor,
                     coords: np.ndarray | torch.Tensor, patch_size_lv0: int, *,
                     mode: Literal["blocked", "dense"] = "blocked",
                     budget: int = BLOCK_BUDGET_BYTES) -> TitanOutput:
        """Slide embedding and per-patch attention of one slide (see :func:`titan`)."""
        feats = _check_features(features)
        grid = coords_to_grid(coords, patch_size_lv0)
        if feats.shape[0] != grid.order.size:
            raise ModelError(f"titan: {feats.shape[0]} feature rows but {grid.order.size} "
                             "coords; pass the features and coords of the same slide")
        dtype = self.proj.dtype
        x = feats[torch.from_numpy(grid.order)].to(self.device, dtype)
        cells = torch.from_numpy(grid.cells).to(self.device)
        tokens = self.forward_tokens(x, cells, mode=mode, budget=budget)
        pooled, attn = self.attn_pool_contrastive(tokens)
        a = attn[0, 1:].float()
        a = a / a.sum()
        per_patch = a[torch.from_numpy(grid.inverse).to(a.device)]
        return TitanOutput(slide_embedding=pooled[0].float().cpu().numpy(),
                           attention=per_patch.cpu().numpy().astype(np.float32),
                           label=self.label)

    def forward(self, features: torch.Tensor, coords: torch.Tensor,
                patch_size_lv0: int) -> TitanOutput:
        return self.encode_slide(features, coords, patch_size_lv0)


def _check_features(features: np.ndarray | torch.Tensor) -> torch.Tensor:
    t = torch.from_numpy(np.asarray(features)) if not isinstance(features, torch.Tensor) \
        else features
    if t.ndim == 3 and t.shape[0] == 1:
        t = t[0]
    if t.ndim != 2 or t.shape[1] != DIM:
        raise ModelError(f"titan: features must be (N, {DIM}) CONCH v1.5 features of ONE slide, "
                         f"got shape {tuple(t.shape)}; extract them with encoder 'conch_v1_5' "
                         "and call titan() once per slide")
    if t.dtype != torch.float32:
        raise ModelError(f"titan: features must be float32, got {t.dtype}; pass "
                         "features.astype(np.float32)")
    if not torch.isfinite(t).all():
        raise ModelError("titan: features contain NaN or inf; re-extract them")
    return t


def create_titan(*, weights: str | None = None, device: str | torch.device = "cpu",
                 dtype: torch.dtype | str | None = None) -> Titan:
    """Build TITAN with weights (see :func:`wsikit.models.create_encoder`)."""
    from .registry import create_encoder

    model = create_encoder("titan", weights=weights, device=device, dtype=dtype)
    assert isinstance(model, Titan)
    return model


def titan(features: np.ndarray | torch.Tensor, coords: np.ndarray | torch.Tensor,
          patch_size_lv0: int, *, model: Titan | None = None, weights: str | None = None,
          device: str | torch.device = "cpu") -> TitanOutput:
    """TITAN slide embedding and per-patch attention for one slide.

    Parameters
    ----------
    features : ndarray or torch.Tensor
        ``(N, 768)`` float32 CONCH v1.5 features.
    coords : ndarray or torch.Tensor
        ``(N, 2)`` int64 level-0 top-left ``(x, y)`` of the same patches.
    patch_size_lv0 : int
        Grid stride in level-0 px (``TileGrid.stride_l0``).
    model : Titan, optional
        A model from :func:`create_titan` (reuse it across slides).

    Returns
    -------
    TitanOutput
        ``slide_embedding`` (768,) and ``attention`` (N,) in input order, summing to 1.
    """
    m = model if model is not None else create_titan(weights=weights, device=device)
    return m.encode_slide(features, coords, patch_size_lv0)
