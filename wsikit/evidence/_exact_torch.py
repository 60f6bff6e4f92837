"""Exact inner-product search with torch: the ``torch`` search kind of a flat figure index.

Where faiss-gpu is absent (its wheel needs the CUDA 12 libraries), a flat index is searched on
the GPU by a matrix product and ``topk``: :class:`TorchExactIndex`. The stored vectors are kept
on the device in float16 (half the memory and bandwidth of float32, the tensor cores' input
type) and the float32 vectors beside them; a search

1. scores every row in float16 inputs with float32 accumulation (on a CPU the float16 rows are
   widened to float32 before the product, which is the same arithmetic), chunked so that the
   scores of one chunk fit a memory budget (on CUDA a share of the free memory,
   ``torch.cuda.mem_get_info``; on a CPU a fixed number of bytes), keeping a running top list;
2. keeps as candidates every row whose float16 score lies within ``2 ε`` of the ``k``-th best
   float16 score, where ``ε`` bounds the float16 error of one score (:data:`SCORE_TOLERANCE`
   times the query's and the longest row's norms). A row of the exact top ``k`` scores at
   least the exact ``k``-th score, so its float16 score is at most ``2 ε`` below the float16
   ``k``-th: the candidates hold the exact top ``k``. The list is widened (4× per round) until
   the last candidate is more than ``2 ε`` below, or every admitted row is a candidate;
3. re-scores the candidates in float32 from the float32 vectors and returns the best ``k``,
   ties broken by the lower row number.

So the result is float32 exact search (faiss's ``IndexFlatIP``) up to float32 rounding of the
scores themselves: rows whose float32 scores differ by less than about ``1e-6`` may swap. A
boolean ``allowed`` mask (licences, figure kinds) is applied to the scores before the top-k,
so a filtered search is exact in one pass.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import EvidenceError

__all__ = [
    "TorchExactIndex",
]

#: Bound on the error of one float16 score per unit of ``‖q‖·‖x‖``: float16 inputs round each
#: component by at most 2⁻¹¹ relative (2·2⁻¹¹ ≈ 9.8e-4 for the product), and cuBLAS may round
#: a few float16 partial sums (``allow_fp16_reduced_precision_reduction``); 4e-3 covers both.
SCORE_TOLERANCE = 4e-3
#: Bytes of scores per chunk on a CPU.
CPU_BUDGET_BYTES = 256 * 2**20
#: On CUDA: at most this many bytes of scores per chunk, and at most this share of the free
#: memory (the stored vectors are placed first).
CUDA_BUDGET_BYTES = 2 * 2**30
CUDA_FREE_SHARE = 0.25
#: Stored vectors stay on the device while they take at most this share of its free memory;
#: beyond it the float16 rows are streamed from host memory chunk by chunk.
RESIDENT_SHARE = 0.5
#: Candidate rows beyond ``k`` in the first round.
_EXTRA = 16


def search_budget(device: Any) -> int:
    """Bytes of scores per chunk on ``device``: :data:`CPU_BUDGET_BYTES` on a CPU; on CUDA
    :data:`CUDA_BUDGET_BYTES` capped at :data:`CUDA_FREE_SHARE` of the free memory."""
    import torch

    dev = torch.device(device)
    if dev.type != "cuda":
        return CPU_BUDGET_BYTES
    free, _ = torch.cuda.mem_get_info(dev)
    return int(max(2**20, min(CUDA_BUDGET_BYTES, free * CUDA_FREE_SHARE)))


class TorchExactIndex:
    """Exact inner-product search of ``vectors`` on a torch device (see the module notes).

    It answers faiss's ``search(queries, k)`` and ``reconstruct_batch(rows)`` with the same
    shapes and dtypes, so it stands in for a flat faiss index.

    Parameters
    ----------
    vectors : ndarray
        ``(N, D)`` finite rows (a figure index stores them L2-normalised).
    device : str or torch.device
        ``"cuda"``, ``"cuda:1"``, ``"cpu"``.
    budget : int, optional
        Bytes of scores per chunk (default :func:`search_budget`).
    resident : bool, optional
        Keep the stored vectors on the device (default: while they take at most
        :data:`RESIDENT_SHARE` of its free memory; always on a CPU).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((1000, 64)).astype(np.float32)
    >>> x /= np.linalg.norm(x, axis=1, keepdims=True)
    >>> sims, ids = TorchExactIndex(x, device="cpu").search(x[:3], 2)
    >>> ids[:, 0].tolist(), bool(np.allclose(sims[:, 0], 1.0, atol=1e-6))
    ([0, 1, 2], True)
    """

    kind = "torch"

    def __init__(self, vectors: np.ndarray, *, device: Any = "cpu", budget: int | None = None,
                 resident: bool | None = None) -> None:
        import torch

        x = np.ascontiguousarray(vectors, dtype=np.float32)
        if x.ndim != 2:
            raise EvidenceError(f"exact search needs (N, D) vectors, got shape {x.shape}")
        if not np.isfinite(x).all():
            raise EvidenceError("exact search: the stored vectors contain NaN or inf; rebuild "
                                "the index")
        dev = torch.device(device)
        if dev.type == "cuda" and dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        self.device = dev
        self.ntotal, self.d = int(x.shape[0]), int(x.shape[1])
        self.budget = int(budget) if budget is not None else search_budget(dev)
        if self.budget < 1:
            raise EvidenceError(f"budget={budget} must be at least 1 byte")
        longest = float(np.linalg.norm(x, axis=1).max()) if len(x) else 0.0
        # float16 rows scaled by one factor (the longest row to norm 1: no overflow, and the
        # ranking of every query is unchanged); queries scaled to norm 1 likewise
        self._scale = 1.0 / longest if longest > 0 else 1.0
        self._host32 = x
        low = torch.from_numpy(x * np.float32(self._scale)).to(torch.float16)
        if resident is None:
            resident = True
            if dev.type == "cuda":
                free, _ = torch.cuda.mem_get_info(dev)
                resident = x.nbytes * 3 // 2 <= free * RESIDENT_SHARE
        self.resident = bool(resident)
        f32 = torch.from_numpy(x)
        if self.resident:
            self._low, self._f32 = low.to(dev), f32.to(dev)
        else:  # streamed to the device chunk by chunk; the re-scoring reads host memory
            self._low = low.pin_memory() if dev.type == "cuda" else low
            self._f32 = f32

    def __repr__(self) -> str:
        return (f"TorchExactIndex({self.ntotal} x {self.d}, device={str(self.device)!r}, "
                f"resident={self.resident})")

    # ------------------------------------------------------------------ faiss's interface
    def reconstruct_batch(self, rows: np.ndarray) -> np.ndarray:
        """The float32 vectors of ``rows``."""
        return self._host32[np.asarray(rows, np.int64)]

    def search(self, queries: np.ndarray, k: int, *, allowed: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` rows by inner product, best first: ``(sims, ids)`` float32 / int64
        ``(B, k)``. Only rows where the boolean mask ``allowed`` is true are returned; past
        the admitted rows (or the index's) the rest is ``-1`` (ids and sims, as
        :func:`wsikit.evidence._faiss.search_within` pads)."""
        import torch

        q = np.ascontiguousarray(queries, dtype=np.float32)
        if q.ndim == 1:
            q = q[None]
        if q.ndim != 2 or q.shape[1] != self.d:
            raise EvidenceError(f"queries of shape {q.shape} for {self.d}-d vectors")
        if k < 1:
            raise EvidenceError(f"k={k} must be >= 1")
        if not np.isfinite(q).all():
            raise EvidenceError("queries contain NaN or inf")
        batch = q.shape[0]
        mask_t = None
        n_admitted = self.ntotal
        if allowed is not None:
            mask = np.asarray(allowed, bool)
            if mask.shape != (self.ntotal,):
                raise EvidenceError(f"allowed mask of shape {mask.shape} for {self.ntotal} "
                                    "rows")
            n_admitted = int(np.count_nonzero(mask))
            if n_admitted < self.ntotal:
                mask_t = torch.from_numpy(mask).to(self.device)
        out_s = np.full((batch, k), -1.0, np.float32)
        out_i = np.full((batch, k), -1, np.int64)
        kk = min(k, n_admitted)
        if batch == 0 or kk == 0:
            return out_s, out_i
        q_block = 4096  # one block's scores of even a one-row chunk stay small
        for start in range(0, batch, q_block):
            qs = q[start:start + q_block]
            s, i = self._search_block(qs, kk, n_admitted, mask_t)
            out_s[start:start + len(qs), :kk] = s
            out_i[start:start + len(qs), :kk] = i
        return out_s, out_i

    # ------------------------------------------------------------------ the search
    def _candidates(self, q_low: Any, depth: int, mask_t: Any) -> tuple[Any, Any]:
        """The ``depth`` best admitted rows by the float16 scores, ``(scores, rows)``
        float32 / int64 ``(B, depth)`` on the device."""
        import torch

        batch = q_low.shape[0]
        # a chunk's scores: float32 (4 B) and the top-k's working copy
        rows = max(1, min(self.ntotal, self.budget // max(1, batch * 8)))
        best_s = torch.full((batch, 0), -math.inf, device=self.device)
        best_i = torch.zeros((batch, 0), dtype=torch.int64, device=self.device)
        for start in range(0, self.ntotal, rows):
            block = self._low[start:start + rows]
            if not self.resident:
                block = block.to(self.device, non_blocking=True)
            if self.device.type == "cuda":
                s = (q_low @ block.T).float()  # float16 inputs, float32 accumulation
            else:
                s = q_low.float() @ block.float().T  # the same arithmetic on a CPU
            if mask_t is not None:
                s.masked_fill_(~mask_t[start:start + block.shape[0]][None], -math.inf)
            top_s, top_i = torch.topk(s, min(depth, s.shape[1]), dim=1)
            del s
            best_s = torch.cat([best_s, top_s], dim=1)
            best_i = torch.cat([best_i, top_i + start], dim=1)
            if best_s.shape[1] > depth:
                best_s, pick = torch.topk(best_s, depth, dim=1)
                best_i = torch.gather(best_i, 1, pick)
        return best_s, best_i

    def _search_block(self, q: np.ndarray, k: int, n_admitted: int, mask_t: Any
                      ) -> tuple[np.ndarray, np.ndarray]:
        import torch

        q_t = torch.from_numpy(q).to(self.device)
        norm = torch.linalg.vector_norm(q_t, dim=1, keepdim=True).clamp_min(1e-30)
        q_low = (q_t / norm).to(torch.float16)
        # scores of unit queries against rows of norm <= 1: each float16 score is within
        # SCORE_TOLERANCE of the exact one, so a row of the exact top k scores at most 2 ε
        # below the float16 k-th
        window = 2 * SCORE_TOLERANCE
        depth = min(n_admitted, k + max(k, _EXTRA))
        while True:
            cand_s, cand_i = self._candidates(q_low, depth, mask_t)
            if depth >= n_admitted or bool((cand_s[:, -1] < cand_s[:, k - 1] - window).all()):
                break
            depth = min(n_admitted, depth * 4)
        return self._rescore(q_t, cand_i, k)

    def _rescore(self, q_t: Any, cand_i: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The candidates' float32 scores, best ``k`` first (ties: the lower row first)."""
        import torch

        batch, depth = cand_i.shape
        # rows of queries whose gathered candidates fit the budget
        step = max(1, self.budget // max(1, depth * self.d * 8))
        exact = torch.empty((batch, depth), dtype=torch.float32, device=self.device)
        for b0 in range(0, batch, step):
            ids = cand_i[b0:b0 + step]
            vec = self._f32[ids] if self.resident else self._f32[ids.cpu()].to(self.device)
            # products and sums in float32 (no TF32 matrix product)
            exact[b0:b0 + step] = (q_t[b0:b0 + step, None, :] * vec).sum(-1)
            del vec
        by_row = torch.argsort(cand_i, dim=1)
        exact = torch.gather(exact, 1, by_row)
        cand_i = torch.gather(cand_i, 1, by_row)
        order = torch.sort(exact, dim=1, descending=True, stable=True).indices[:, :k]
        sims = torch.gather(exact, 1, order).cpu().numpy().astype(np.float32)
        return sims, torch.gather(cand_i, 1, order).cpu().numpy().astype(np.int64)
