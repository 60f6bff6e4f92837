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

Inputs as the reference reads them: the cell of a patch is ``floor((coords - coords.min(0)) /
patch_size_lv0)`` per axis whatever the stride of the coords (TRIDENT: stride 1013 with
``patch_size_level0`` 1024); patches sharing a cell are summed into one token, all-zero rows
(padding) are dropped, each with a warning (:func:`coords_to_grid`).

Precision: weights stay float32; reduced precision is autocast; the grid distances, the ALiBi
bias and the softmax it enters are float32 in every precision.

Speed: in float32 on a CPU, attention is :func:`alibi_attention_cpu` (query × key blocks,
online softmax, fixed cache-sized buffers), within 2× of the machine's matmul rate.

Memory: the published code materialises the dense ``heads × N × N`` bias. Here the bias is
generated on the fly for one block of query rows at a time and handed to
:func:`torch.nn.functional.scaled_dot_product_attention` (whose fused kernels accumulate over
key blocks flash-style, online softmax), so extra memory is ``heads · block · N`` with ``block``
chosen to fit a budget (:func:`query_block_rows`; on CUDA from the free memory,
:func:`block_budget`): linear in N. Because attention and pooling are permutation
equivariant/invariant and ALiBi depends only on distances, outputs do not depend on token order.
"""

from __future__ import annotations

import math
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
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
    "alibi_attention_cpu",
    "alibi_slopes",
    "block_budget",
    "coords_to_grid",
    "dense_alibi_bias",
    "create_titan",
    "titan",
]

DIM = 768
HEADS = 12
DEPTH = 6
POOL_HEADS = 8
#: bytes of working memory of one query block of the attention on a CPU (the query block is
#: sized to fit it, :func:`query_block_rows`): cache-sized
BLOCK_BUDGET_BYTES = 56 * 2**20
#: the same on an accelerator: large enough that a 50k-patch slide takes a few hundred query
#: blocks of some 200 rows, not 10,000 kernel launches per layer (16 MiB gave 5-row blocks:
#: 54 s on an H200, slower than 16 CPU cores), and never more than
#: :data:`DEVICE_FREE_SHARE` of the free device memory
DEVICE_BLOCK_BUDGET_BYTES = 2 * 2**30
#: the share of the free device memory one query block may use
DEVICE_FREE_SHARE = 0.25
#: float32 values per (query row, key) that one query block holds at its peak: the bias and
#: its padded copy, and, in reduced precision, the scores, their float32 sum with the bias and
#: the softmax (4 per head, counting the float16 scores and probabilities as half each), plus
#: the grid distances and their coordinate differences (3); the fused float32 path holds less
_ROW_FLOATS_PER_HEAD = 4
_ROW_FLOATS_SHARED = 3
#: float32 on a CPU: :func:`alibi_attention_cpu` (1.5-2.2x the query-block SDPA path, within
#: 2x of the matmul rate; benchmarks/results/bench_titan_speed.md); False: the SDPA path
CPU_KERNEL = True


def block_budget(device: torch.device) -> int:
    """Bytes of working memory per query block of the attention on ``device``:
    :data:`BLOCK_BUDGET_BYTES` on a CPU (cache-sized); on CUDA, chosen from the free memory:
    :data:`DEVICE_FREE_SHARE` of it, at most :data:`DEVICE_BLOCK_BUDGET_BYTES` (and at least
    :data:`BLOCK_BUDGET_BYTES`, where a nearly full device leaves less)."""
    if device.type != "cuda":
        return BLOCK_BUDGET_BYTES
    free, _ = torch.cuda.mem_get_info(device)
    return int(max(BLOCK_BUDGET_BYTES, min(DEVICE_BLOCK_BUDGET_BYTES,
                                           free * DEVICE_FREE_SHARE)))


def query_block_rows(n_tokens: int, budget: int, heads: int = HEADS) -> int:
    """Query rows per attention block over ``n_tokens`` tokens (CLS included) whose working
    memory, ``4 · (4 · heads + 3) · n_tokens`` bytes per row, fits ``budget`` bytes; at
    least 1, at most ``n_tokens``.

    >>> query_block_rows(50_001, 2 * 2**30)  # a 50k-patch slide on CUDA: some 240 blocks
    210
    """
    per_row = 4 * (_ROW_FLOATS_PER_HEAD * heads + _ROW_FLOATS_SHARED) * int(n_tokens)
    return max(1, min(int(n_tokens), int(budget) // per_row))


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
    """Patches mapped to TITAN tokens, as the reference does.

    Attributes
    ----------
    cells : ndarray
        ``(T, 2)`` int64 grid cells ``(gx, gy)`` of the tokens, in token order (x-major, as
        the reference's; the order has no numeric effect).
    token_of : ndarray
        ``(N,)`` int64: the token of input patch ``i``, or -1 for a dropped (all-zero) patch.
    counts : ndarray
        ``(T,)`` int64: non-zero patches summed into each token (1 for most).
    n_summed : int
        Patches that share a cell with another (``sum(counts) - T``).
    n_dropped : int
        Patches dropped because their feature vector is all zero (padding).
    """

    cells: np.ndarray
    token_of: np.ndarray
    counts: np.ndarray
    n_summed: int = 0
    n_dropped: int = 0


def _check_coords(coords: np.ndarray | torch.Tensor, patch_size_lv0: int) -> tuple[np.ndarray, int]:
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
                         "of level-0 pixels (the 'patch_size_level0' attribute of the "
                         "coordinate file)")
    return coords, p


def coords_to_grid(coords: np.ndarray | torch.Tensor, patch_size_lv0: int,
                   nonzero: np.ndarray | None = None) -> TitanGrid:
    """Map level-0 coords to TITAN tokens exactly as the reference.

    Cell of patch ``i`` = ``floor((coords_i - coords.min(0)) / patch_size_lv0)`` per axis,
    whatever the actual stride of the coords (TRIDENT writes coords at a stride such as 1013
    with ``patch_size_level0 = 1024``): patches in one cell become one token (their features
    are summed by :meth:`Titan.encode_slide`); patches with ``nonzero[i] == False`` (all-zero
    features, padding) are dropped; only occupied cells become tokens.

    Parameters
    ----------
    coords : ndarray
        ``(N, 2)`` int64 level-0 top-left ``(x, y)``.
    patch_size_lv0 : int
        Patch size in level-0 px (the cell size).
    nonzero : ndarray of bool, optional
        ``(N,)``: which patches have a non-zero feature vector (default all).

    Raises
    ------
    ModelError
        Non-int64 or misshapen coords, no patches, a non-positive patch size, or no patch left.
    """
    coords, p = _check_coords(coords, patch_size_lv0)
    keep = np.ones(len(coords), bool) if nonzero is None else np.asarray(nonzero, bool)
    cells = (coords - coords.min(axis=0)) // p
    height = int(cells[:, 1].max()) + 1
    flat = cells[:, 0] * height + cells[:, 1]  # x-major, as the reference's token order
    kept = np.flatnonzero(keep)
    if kept.size == 0:
        raise ModelError(f"titan: all {len(coords)} patches have all-zero features (padding "
                         "only); re-extract the features of this slide")
    uniq, inv, counts = np.unique(flat[kept], return_inverse=True, return_counts=True)
    token_of = np.full(len(coords), -1, np.int64)
    token_of[kept] = inv.reshape(-1)
    tcells = np.stack([uniq // height, uniq % height], axis=1).astype(np.int64)
    return TitanGrid(cells=tcells, token_of=token_of, counts=counts.astype(np.int64),
                     n_summed=int(kept.size - uniq.size), n_dropped=int(len(coords) - kept.size))


def _pairwise_bias(cells_q: torch.Tensor, cells_k: torch.Tensor, slopes: torch.Tensor,
                   cls_q: bool, cls_k: bool) -> torch.Tensor:
    """ALiBi bias ``(H, q, k)`` between cells, with a zero row/column for CLS.

    Always float32 (distances from coordinate differences, never ``‖a‖² + ‖b‖² − 2ab`` in a
    reduced dtype: fp16 overflows beyond ~181 cells and bf16 cannot represent cell indices
    above 256), whatever the dtype of the inputs or an enclosing autocast.
    """
    with torch.autocast(cells_q.device.type, enabled=False):
        cq, ck = cells_q.float(), cells_k.float()
        diff = cq[:, None, :] - ck[None, :, :]
        d = diff.square_().sum(-1).sqrt_()  # (q, k) Euclidean grid distance, float32
        bias = d.unsqueeze(0) * (-slopes.float()).view(-1, 1, 1)
        if cls_q or cls_k:
            bias = F.pad(bias, (1 if cls_k else 0, 0, 1 if cls_q else 0, 0))
    return bias


def dense_alibi_bias(cells: torch.Tensor, slopes: torch.Tensor | None = None) -> torch.Tensor:
    """The dense ``(H, N+1, N+1)`` float32 bias (CLS first, zero bias) that the published code
    builds; for testing and the memory benchmark only (it needs ``H · (N+1)² · 4`` bytes)."""
    slopes = alibi_slopes() if slopes is None else slopes
    return _pairwise_bias(cells, cells, slopes, True, True)


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
        # float32 end to end: fused kernel with the float32 bias; under autocast (or reduced
        # dtype): scores in the compute dtype, + float32 bias, float32 softmax
        fused = q.dtype == torch.float32 and not torch.is_autocast_enabled(x.device.type)
        if mode == "dense":
            bias = _pairwise_bias(cells, cells, slopes, True, True)
            out = _attend(q, k, v, bias, fused)
        elif fused and x.device.type == "cpu" and CPU_KERNEL:
            out = alibi_attention_cpu(q, k, v, cells, slopes)
        else:
            block = query_block_rows(n, budget, self.heads)
            out = torch.empty(q.shape, dtype=v.dtype if fused else q.dtype, device=q.device)
            for start in range(0, n, block):
                stop = min(n, start + block)
                # token t >= 1 has cell t-1; token 0 is CLS
                cq = cells[max(start, 1) - 1: stop - 1]
                bias = _pairwise_bias(cq, cells, slopes, start == 0, True)
                out[:, start:stop] = _attend(q[:, start:stop], k, v, bias, fused)
                del bias
        return self.proj(out.transpose(0, 1).reshape(n, dim))


#: Scores this far below their row's running max are clamped before ``exp`` (see below).
_EXP_FLOOR = -80.0
_LOG2E = 1.0 / math.log(2.0)


def alibi_attention_cpu(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        cells: torch.Tensor, slopes: torch.Tensor, *, q_block: int = 256,
                        k_block: int = 512) -> torch.Tensor:
    """Float32 ALiBi attention on a CPU, blockwise (flash-style) near the matmul rate.

    Query blocks × key blocks with an online softmax, so the work buffers are
    ``heads × q_block × k_block`` float32 (6 MB, cache-sized) per thread whatever n (memory
    linear in n: the inputs and output only). The torch intra-op threads each take whole query
    blocks with single-threaded ops (no OpenMP barrier per op, which stalls on a busy
    machine), so the output is bit-identical for every thread count. Per block: the grid
    distances (float32, from coordinate differences, once for all heads) written scaled by
    ``-slope_h · log2(e)`` into the score buffer (CLS row and column 0), the scores added by
    one batched GEMM (``baddbmm_`` against a contiguous kᵀ block, ``log2(e)/√d`` folded in), the
    running max / sum / output updated with ``exp2`` (the base-2 softmax equals the natural one
    and ``exp2`` is 2.7× cheaper than ``exp`` in float32, the largest elementwise cost), and one
    batched GEMM with ``v``. Scores more than 80 (natural units) below the running max are
    clamped before the exponential (``e^-80`` vanishes next to the running sum in float32),
    which keeps it off its slow underflow path on large grids.

    Parameters
    ----------
    q, k, v : torch.Tensor
        ``(H, n, d)`` float32; token 0 is CLS.
    cells : torch.Tensor
        ``(n - 1, 2)`` grid cells of tokens ``1 … n-1``.
    slopes : torch.Tensor
        ``(H,)`` ALiBi slopes.

    Returns
    -------
    torch.Tensor
        ``(H, n, d)`` float32, equal to the dense computation within float32 rounding.
    """
    heads, n, hd = q.shape
    q_block, k_block = max(1, min(n, q_block)), max(1, min(n, k_block))
    # token coordinates (token 0 = CLS gets a dummy cell; its bias is zeroed below)
    cf = torch.cat([torch.zeros(1, 2, device=q.device), cells.float()])
    cx, cy = cf[:, 0].contiguous(), cf[:, 1].contiguous()
    # kᵀ one contiguous (H, d, k_block) block per key block: the score GEMM reads its right
    # operand densely instead of rows strided by n
    k_blocks = [k[:, ks:ks + k_block].transpose(1, 2).contiguous() for ks in range(0, n, k_block)]
    v = v.contiguous()
    # base-2 softmax: scores and bias scaled by log2(e), so exp2 (2.7x faster than exp on
    # AVX-512 float32) gives the same weights, e^(s - m) = 2^(log2(e)·s - log2(e)·m)
    neg = (-slopes.float() * _LOG2E).view(heads, 1, 1)
    scale = hd ** -0.5 * _LOG2E
    out = torch.empty((heads, n, hd), dtype=torch.float32, device=q.device)
    job = _AlibiBlocks(q, k_blocks, v, cx, cy, neg, scale, q_block, k_block, out)
    local = threading.local()
    # grad and inference modes are per thread: the pool threads run in the caller's
    inference, grad = torch.is_inference_mode_enabled(), torch.is_grad_enabled()

    def query_block(qs: int) -> None:
        with torch.inference_mode(inference), torch.set_grad_enabled(grad):
            job.query_block(qs, local)

    # Query blocks are independent: the intra-op threads each take whole blocks, every op
    # single-threaded. No OpenMP barrier per op (on a busy machine each one waits for a
    # descheduled sibling: 2 threads were 4-12x slower than 1), and every block is computed
    # the same way whatever the thread count, so the output does not depend on it.
    starts = range(0, n, q_block)
    workers = min(torch.get_num_threads(), len(starts))
    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="wsikit-titan") as pool:
        for _ in pool.map(query_block, starts):
            pass
    return out


@dataclass(frozen=True)
class _AlibiBlocks:
    """The inputs of :func:`alibi_attention_cpu`'s query blocks, and one block's work."""

    q: torch.Tensor
    k_blocks: list[torch.Tensor]
    v: torch.Tensor
    cx: torch.Tensor
    cy: torch.Tensor
    neg: torch.Tensor
    scale: float
    q_block: int
    k_block: int
    out: torch.Tensor

    def query_block(self, qs: int, local: threading.local) -> None:
        """Rows ``qs … qs + q_block`` of :attr:`out`, single-threaded, with the work buffers
        of this thread (``local``)."""
        q, cx, cy, q_block, k_block = self.q, self.cx, self.cy, self.q_block, self.k_block
        heads, n, hd = q.shape
        if torch.get_num_threads() != 1:
            torch.set_num_threads(1)  # this thread only (OpenMP): no barriers between ops
        if not hasattr(local, "buf"):  # work buffers, one set per thread
            local.buf = torch.empty(heads * q_block * k_block, dtype=torch.float32,
                                    device=q.device)
            local.dbuf = torch.empty(q_block * k_block, dtype=torch.float32, device=q.device)
        buf, dbuf = local.buf, local.dbuf
        qe = min(n, qs + q_block)
        m_rows = qe - qs
        qb = q[:, qs:qe]
        run_max = torch.full((heads, m_rows, 1), -math.inf, device=q.device)
        run_sum = torch.zeros((heads, m_rows, 1), device=q.device)
        acc = torch.zeros((heads, m_rows, hd), device=q.device)
        for ks in range(0, n, k_block):
            ke = min(n, ks + k_block)
            cols = ke - ks
            d = dbuf[:m_rows * cols].view(m_rows, cols)
            torch.hypot(cx[qs:qe, None] - cx[None, ks:ke], cy[qs:qe, None] - cy[None, ks:ke],
                        out=d)
            if qs == 0:
                d[0] = 0.0
            if ks == 0:
                d[:, 0] = 0.0
            s = buf[:heads * m_rows * cols].view(heads, m_rows, cols)
            torch.mul(d, self.neg, out=s)
            s.baddbmm_(qb, self.k_blocks[ks // k_block], alpha=self.scale)
            new_max = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
            correction = torch.exp2(run_max - new_max)
            # 2^-115 ≈ e^-80 ≈ 1.8e-35 next to a running sum ≥ 1: clamping moves the output by
            # at most n·e^-80 relative (1e-30 at 50k, far below float32 resolution) and keeps
            # exp2 off its slow underflow path, which far-apart cells of a large grid hit
            s.sub_(new_max).clamp_min_(_EXP_FLOOR * _LOG2E)
            torch.exp2(s, out=s)
            run_sum.mul_(correction).add_(s.sum(dim=-1, keepdim=True))
            acc.mul_(correction).baddbmm_(s, self.v[:, ks:ke])
            run_max = new_max
        self.out[:, qs:qe] = acc.div_(run_sum)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor,
            fused: bool) -> torch.Tensor:
    """softmax(q kᵀ / √d + bias) v with a float32 ``bias``."""
    if fused:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    scores = torch.matmul(q * q.shape[-1] ** -0.5, k.transpose(-2, -1))
    with torch.autocast(q.device.type, enabled=False):
        p = torch.softmax(scores.float() + bias, dim=-1)
    return torch.matmul(p.to(v.dtype), v)


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
    precision : {"fp32", "fp16", "bf16"}
        Autocast precision of the run (weights are float32; the ALiBi bias always is).
    n_tokens : int
        Tokens (occupied cells) the model saw.
    threads : int
        Torch intra-op threads the kernel ran with (:func:`wsikit._threads.kernel_threads`;
        0: not recorded).
    """

    slide_embedding: np.ndarray
    attention: np.ndarray
    label: str = "titan"
    precision: str = "fp32"
    n_tokens: int = 0
    threads: int = 0


class Titan(nn.Module):
    """TITAN vision encoder over CONCH v1.5 features (see the module docstring)."""

    def __init__(self, config: EncoderConfig | None = None) -> None:
        super().__init__()
        self.config = config or get_config("titan")
        self.label = "titan"
        self.weights_source: str | None = None
        #: autocast precision of :meth:`encode_slide` (weights stay float32)
        self.precision = "fp32"
        self.patch_embed = _PatchEmbed()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, DIM))
        self.blocks = _Blocks()
        self.norm = nn.LayerNorm(DIM, eps=1e-6)
        self.attn_pool = _AttentionalPooler(128)
        self.attn_pool_contrastive = _AttentionalPooler(1)
        self.proj = nn.Parameter(torch.empty(DIM, DIM))
        self.slopes: torch.Tensor
        self.register_buffer("slopes", alibi_slopes(HEADS), persistent=False)
        nn.init.normal_(self.cls_token, std=0.02)
        nn.init.normal_(self.proj, std=DIM ** -0.5)

    def reset_buffers(self) -> set[str]:
        """(Re)fill the non-persistent ALiBi slopes; returns their names."""
        with torch.no_grad():
            self.slopes.copy_(alibi_slopes(HEADS))
        return {"slopes"}

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
        x = torch.cat([self.cls_token[0], x], dim=0)  # promotes under autocast
        for block in self.blocks.modules_list:
            x = block(x, cells, self.slopes, mode, budget)
        return self.norm(x)

    @torch.inference_mode()
    def encode_slide(self, features: np.ndarray | torch.Tensor,
                     coords: np.ndarray | torch.Tensor, patch_size_lv0: int, *,
                     precision: str | None = None,
                     mode: Literal["blocked", "dense"] = "blocked",
                     budget: int | None = None,
                     threads: int | None = None) -> TitanOutput:
        """Slide embedding and per-patch attention of one slide (see :func:`titan`).

        ``precision`` (default :attr:`precision`) is an autocast precision: the weights stay
        float32 and the ALiBi distances and bias are float32 in every precision. On a CPU the
        kernel runs with all the cores given (``threads``, the run's
        :attr:`~wsikit.run.options.RunSettings.threads`, else the process's CPUs:
        :func:`wsikit._threads.kernel_threads`),
        as nothing else runs in the process meanwhile. ``budget``: bytes of working memory per
        query block of the attention (:func:`query_block_rows`; default
        :data:`BLOCK_BUDGET_BYTES` on a CPU, on CUDA a share of the free memory:
        :func:`block_budget`); the result does not depend on it.
        """
        from .._threads import kernel_threads, torch_threads
        from .registry import autocast_for, resolve_precision

        prec = resolve_precision(precision if precision is not None else self.precision,
                                 self.device)
        feats = _check_features(features)
        coords_np, _ = _check_coords(coords, patch_size_lv0)
        if feats.shape[0] != coords_np.shape[0]:
            raise ModelError(f"titan: {feats.shape[0]} feature rows but {coords_np.shape[0]} "
                             "coords; pass the features and coords of the same slide")
        nonzero = (feats != 0).any(dim=1).cpu().numpy()
        grid = coords_to_grid(coords_np, patch_size_lv0, nonzero)
        if grid.n_dropped:
            warnings.warn(f"titan: {grid.n_dropped} of {len(coords_np)} patches have all-zero "
                          "features (padding) and were dropped, as the reference does",
                          stacklevel=3)
        if grid.n_summed:
            warnings.warn(f"titan: {grid.n_summed} patches share a grid cell of "
                          f"{int(patch_size_lv0)} level-0 px with another; their features were "
                          f"summed into {int((grid.counts > 1).sum())} tokens, as the reference "
                          "does (coords at a stride below patch_size_level0)", stacklevel=3)
        kept = np.flatnonzero(grid.token_of >= 0)
        x = torch.zeros((len(grid.cells), DIM), dtype=torch.float32, device=self.device)
        x.index_add_(0, torch.from_numpy(grid.token_of[kept]).to(self.device),
                     feats[torch.from_numpy(kept)].to(self.device, torch.float32))
        cells = torch.from_numpy(grid.cells).to(self.device)
        n_threads = kernel_threads(threads) if self.device.type == "cpu" else \
            torch.get_num_threads()
        if budget is None:
            budget = block_budget(self.device)
        with torch_threads(n_threads), autocast_for(self.device, prec):
            tokens = self.forward_tokens(x, cells, mode=mode, budget=budget)
            pooled, attn = self.attn_pool_contrastive(tokens)
        a = attn[0, 1:].double()
        a = a / a.sum()
        # a token's attention is shared by the patches summed into it; dropped patches get 0
        share = (a / torch.from_numpy(grid.counts).to(a.device)).cpu().numpy()
        per_patch = np.zeros(len(coords_np), np.float32)
        per_patch[kept] = share[grid.token_of[kept]]
        return TitanOutput(slide_embedding=pooled[0].float().cpu().numpy(),
                           attention=per_patch, label=self.label, precision=prec,
                           n_tokens=len(grid.cells), threads=n_threads)

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
                 precision: str | None = None) -> Titan:
    """Build TITAN with weights (see :func:`wsikit.models.create_encoder`); ``precision`` is
    the autocast precision (default float16 on CUDA, float32 on CPU)."""
    from .registry import create_encoder

    model = create_encoder("titan", weights=weights, device=device, precision=precision)
    assert isinstance(model, Titan)
    return model


def titan(features: np.ndarray | torch.Tensor, coords: np.ndarray | torch.Tensor,
          patch_size_lv0: int, *, model: Titan | None = None, weights: str | None = None,
          device: str | torch.device = "cpu", precision: str | None = None,
          threads: int | None = None) -> TitanOutput:
    """TITAN slide embedding and per-patch attention for one slide.

    Parameters
    ----------
    features : ndarray or torch.Tensor
        ``(N, 768)`` float32 CONCH v1.5 features.
    coords : ndarray or torch.Tensor
        ``(N, 2)`` int64 level-0 top-left ``(x, y)`` of the same patches.
    patch_size_lv0 : int
        Patch size in level-0 px (the coordinate file's ``patch_size_level0``): the cell of a
        patch is ``floor((coords - coords.min(0)) / patch_size_lv0)``, whatever the stride.
        Patches sharing a cell are summed into one token, all-zero rows dropped (warnings).
    model : Titan, optional
        A model from :func:`create_titan` (reuse it across slides).
    precision : {"fp32", "fp16", "bf16"}, optional
        Autocast precision (default the model's).
    threads : int, optional
        Cores for the CPU kernel (see :meth:`Titan.encode_slide`).

    Returns
    -------
    TitanOutput
        ``slide_embedding`` (768,) and ``attention`` (N,) in input order, summing to 1
        (patches of a shared cell divide its value; dropped patches get 0).
    """
    m = model if model is not None else create_titan(weights=weights, device=device,
                                                     precision=precision)
    return m.encode_slide(features, coords, patch_size_lv0, precision=precision,
                          threads=threads)
