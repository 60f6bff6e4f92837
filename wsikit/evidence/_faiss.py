"""FAISS building blocks for cosine search: index construction, recall measurement, tuning.

Cosine similarity = inner product on L2-normalised float32 vectors. Kinds:

* ``flat``: exact (``IndexFlatIP``).
* ``ivf``: inverted lists over k-means cells with fp16 scalar-quantised vectors
  (``IndexIVFScalarQuantizer``, ``QT_fp16``); ``nlist`` chosen from N, ``nprobe`` tuned to a
  recall target measured against exact search.
* ``hnsw``: graph search (``IndexHNSWFlat``, ``M`` 32); ``efSearch`` tuned likewise.

How an index is searched (its search kind, :func:`to_search_device`) is chosen when it is
opened, from what the machine has:

* ``faiss-gpu``: a GPU copy of a flat or IVF index, when faiss reports GPUs (faiss-gpu);
* ``torch``: a flat index searched exactly by a float16 matrix product and top-k on a torch
  device, the candidates re-scored in float32 (:class:`wsikit.evidence._exact_torch.
  TorchExactIndex`): chosen on CUDA where faiss-gpu is absent, and on request on a CPU;
* ``faiss``: the index itself, on the CPU.

Everything works with faiss-cpu. Used by :mod:`wsikit.evidence.index`,
:mod:`wsikit.evidence._index_writer` and ``benchmarks/bench_index.py``.
"""

from __future__ import annotations

import logging
import math
import os
import struct
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EvidenceError

__all__ = [
    "default_params",
    "exact_search",
    "make_index",
    "normalise",
    "read_index",
    "recall_at_k",
    "set_search_params",
    "to_search_device",
    "tune_index",
]

log = logging.getLogger(__name__)

INDEX_KINDS = ("flat", "ivf", "hnsw")
#: How an index may be searched (:func:`to_search_device`): chosen from the machine, faiss, or
#: torch's exact search (flat indexes).
SEARCHES = ("auto", "faiss", "torch")
_NPROBES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024, 2048)
_EFS = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024)


#: Largest vector dimension an index file may declare (the zoo's widest encoder is 2560-d).
MAX_DIM = 65536
_READ_LOCK = threading.Lock()  # faiss's deserialisation limit is process-wide


def _damaged(path: Path, what: str) -> EvidenceError:
    return EvidenceError(f"damaged index file {path}: {what}; rebuild the index")


def read_index(path: str | os.PathLike[str], *, dim: int, count: int) -> Any:
    """A faiss index file read with every size bounded by the file before it is allocated.

    The header's dimension and vector count must be ``dim`` and ``count`` (the manifest's);
    a flat index's vector block must be exactly ``count × dim`` floats and lie in the file;
    and while faiss reads, no vector it allocates may be larger than the file itself (faiss's
    deserialisation limit), so a forged header that declares 2^31 floats is a clear error, not
    an 8 GB allocation or an out-of-memory message.

    Raises
    ------
    EvidenceError
        "damaged index file", naming the file and the numbers.
    """
    import faiss

    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(53)
    if len(head) < 37:
        raise _damaged(path, f"{size} bytes, shorter than a faiss header")
    fourcc = head[:4]
    d, ntotal = struct.unpack("<iq", head[4:16])
    if not 0 < d <= MAX_DIM or d != dim:
        raise _damaged(path, f"its header declares {d}-d vectors, the manifest {dim}-d")
    if ntotal != count:
        raise _damaged(path, f"its header declares {ntotal} vectors, the manifest {count}")
    if fourcc in (b"IxFI", b"IxF2", b"IxFl"):
        metric = struct.unpack("<i", head[33:37])[0]
        at = 37 + (4 if metric > 1 else 0)
        n_floats = struct.unpack("<Q", head[at:at + 8])[0] if len(head) >= at + 8 else -1
        if n_floats != ntotal * d or at + 8 + 4 * n_floats > size:
            raise _damaged(path, f"its vector block declares {n_floats} floats, "
                                 f"{count} x {dim} = {count * dim} expected in a "
                                 f"{size}-byte file")
    with _READ_LOCK:
        get = getattr(faiss, "get_deserialization_vector_byte_limit", None)
        put = getattr(faiss, "set_deserialization_vector_byte_limit", None)
        before = get() if get is not None else None
        if put is not None:
            put(size + 1)  # no vector in the file is larger than the file
        try:
            index = faiss.read_index(str(path))
        except (RuntimeError, MemoryError) as exc:
            raise _damaged(path, f"faiss cannot read it ({str(exc).splitlines()[0][:300]})"
                           ) from exc
        finally:
            if put is not None and before is not None:
                put(before)
    if index.ntotal != count or index.d != dim:
        raise _damaged(path, f"it holds {index.ntotal} vectors of {index.d} dims, the "
                             f"manifest says {count} of {dim}")
    return index


def normalise(vectors: np.ndarray) -> np.ndarray:
    """L2-normalise rows to float32 ``(N, D)`` (zero rows stay zero)."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim == 1:
        v = v[None]
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return np.ascontiguousarray(v / np.maximum(norms, 1e-12), dtype=np.float32)


def default_params(kind: str, n: int) -> dict[str, Any]:
    """Index parameters chosen from the number of vectors ``n``.

    ``ivf``: ``nlist = clamp(4·√n, 1, n/39)`` (faiss wants ≥ 39 training points per cell),
    fp16 storage. ``hnsw``: ``M = 32``, ``efConstruction = 80``.
    """
    if kind == "flat":
        return {}
    if kind == "ivf":
        nlist = int(max(1, min(round(4 * math.sqrt(max(n, 1))), n // 39)))
        return {"nlist": nlist, "storage": "fp16", "nprobe": min(nlist, 8)}
    if kind == "hnsw":
        return {"M": 32, "efConstruction": 80, "efSearch": 64}
    raise EvidenceError(f"unknown index kind {kind!r}; use one of {', '.join(INDEX_KINDS)}")


def make_index(dim: int, kind: str, params: dict[str, Any]):
    """An empty CPU faiss index of ``kind`` for inner product (train IVF before adding)."""
    import faiss

    if kind == "flat":
        return faiss.IndexFlatIP(dim)
    if kind == "ivf":
        quantizer = faiss.IndexFlatIP(dim)
        storage = params.get("storage", "fp16")
        index: faiss.IndexIVF
        if storage == "fp16":
            index = faiss.IndexIVFScalarQuantizer(quantizer, dim, int(params["nlist"]),
                                                  faiss.ScalarQuantizer.QT_fp16,
                                                  faiss.METRIC_INNER_PRODUCT)
        elif storage == "fp32":
            index = faiss.IndexIVFFlat(quantizer, dim, int(params["nlist"]),
                                       faiss.METRIC_INNER_PRODUCT)
        else:
            raise EvidenceError(f"unknown IVF storage {storage!r}; use 'fp16' or 'fp32'")
        index.own_fields = True
        # SWIG's ownership handle: not in faiss's type stubs
        quantizer.this.disown()  # type: ignore[attr-defined]
        return index
    if kind == "hnsw":
        hnsw = faiss.IndexHNSWFlat(dim, int(params["M"]), faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = int(params["efConstruction"])
        return hnsw
    raise EvidenceError(f"unknown index kind {kind!r}; use one of {', '.join(INDEX_KINDS)}")


def set_search_params(index, kind: str, params: dict[str, Any]) -> None:
    """Apply ``nprobe`` / ``efSearch`` from ``params`` to a CPU or GPU index."""
    import faiss

    if kind == "ivf" and "nprobe" in params:
        try:
            faiss.extract_index_ivf(index).nprobe = int(params["nprobe"])
        except (RuntimeError, AttributeError):
            index.nprobe = int(params["nprobe"])  # GPU indexes
    elif kind == "hnsw" and "efSearch" in params:
        index.hnsw.efSearch = int(params["efSearch"])


def _faiss_gpus() -> int:
    import faiss

    if not hasattr(faiss, "StandardGpuResources"):
        return 0
    try:
        return int(faiss.get_num_gpus())
    except (RuntimeError, AttributeError):  # pragma: no cover - GPU only
        return 0


def to_search_device(index, kind: str, *, search: str = "auto", device: str | None = None):
    """What searches ``index`` (a CPU faiss index of ``kind``), by ``search``:

    * ``"auto"``: a faiss GPU copy when faiss-gpu sees a GPU (flat/IVF); else, for a flat
      index on a CUDA ``device`` (``None``: CUDA when torch sees it), torch's exact search
      there (:class:`~wsikit.evidence._exact_torch.TorchExactIndex`); else ``index`` itself;
    * ``"faiss"``: the faiss GPU copy when faiss-gpu sees a GPU, else ``index``;
    * ``"torch"``: torch's exact search on ``device`` (``None``: CUDA when torch sees it, else
      the CPU); flat indexes only.

    :func:`search_kind` names what was chosen.

    Raises
    ------
    EvidenceError
        An unknown ``search``, or ``"torch"`` for an IVF/HNSW index.
    """
    import faiss

    if search not in SEARCHES:
        raise EvidenceError(f"search={search!r}: use one of {', '.join(SEARCHES)}")
    if search == "torch" and kind != "flat":
        raise EvidenceError(f"search='torch' is exact search of a flat index; this index is "
                            f"{kind!r} (approximate): search it with faiss (search='auto'), or "
                            "rebuild it with kind 'flat'")
    gpus = _faiss_gpus() if kind != "hnsw" and search != "torch" else 0
    if search == "torch" or (search == "auto" and kind == "flat" and gpus <= 0):
        import torch

        dev = torch.device(device) if device is not None else torch.device(
            "cuda" if torch.cuda.is_available() else "cpu")
        if search == "torch" or dev.type == "cuda":
            from ._exact_torch import TorchExactIndex

            vectors = index.reconstruct_n(0, index.ntotal) if index.ntotal else \
                np.zeros((0, index.d), np.float32)
            return TorchExactIndex(vectors, device=dev)
    if gpus <= 0:
        return index
    try:
        res = faiss.StandardGpuResources()
        gpu = faiss.index_cpu_to_gpu(res, 0, index)
        # keep resources alive with the index (a plain Python attribute: not in the stubs)
        gpu.referenced_objects = [res]  # type: ignore[attr-defined]
        return gpu
    except (RuntimeError, AttributeError) as exc:  # pragma: no cover - GPU only
        log.warning("faiss GPU search unavailable (%s); searching on CPU", exc)
        return index


def search_kind(search_index: Any) -> dict[str, str]:
    """``{"search": "torch" | "faiss-gpu" | "faiss", "device": ...}`` of what
    :func:`to_search_device` returned (recorded in ``evidence.json`` and the index info)."""
    from ._exact_torch import TorchExactIndex

    if isinstance(search_index, TorchExactIndex):
        return {"search": "torch", "device": str(search_index.device)}
    if type(search_index).__name__.startswith("Gpu"):  # faiss.GpuIndexFlatIP, GpuIndexIVF...
        return {"search": "faiss-gpu", "device": "cuda:0"}
    return {"search": "faiss", "device": "cpu"}


#: Largest ``k`` a search on a GPU index is given (faiss-gpu's top-k limit is 2048).
GPU_MAX_K = 1024
#: At most this many admitted rows are compared directly (their stored vectors, one matrix
#: product) instead of searching the index deeper.
DIRECT_MAX_ROWS = 4096


def _stored_rows(cpu_index: Any, rows: np.ndarray, kind: str) -> np.ndarray:
    """The stored vectors of ``rows`` (IVF: its fp16 codes decoded, as its search sees them)."""
    import faiss

    if kind != "ivf":
        return np.asarray(cpu_index.reconstruct_batch(rows.astype(np.int64)), np.float32)
    ivf = faiss.extract_index_ivf(cpu_index)
    ivf.make_direct_map()
    try:
        return np.stack([np.asarray(cpu_index.reconstruct(int(r)), np.float32) for r in rows])
    finally:
        # faiss (SWIG) has DirectMap; its type stubs lack it
        ivf.set_direct_map_type(faiss.DirectMap.NoMap)  # type: ignore[attr-defined]


def search_within(index: Any, queries: np.ndarray, k: int, allowed: np.ndarray, *,
                  cpu_index: Any = None, kind: str = "flat") -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` of ``index`` among the rows where the boolean mask ``allowed`` is true.

    Torch's exact search (:class:`~wsikit.evidence._exact_torch.TorchExactIndex`) applies the
    mask to the scores: exact in one pass. Otherwise up to :data:`DIRECT_MAX_ROWS` admitted
    rows are compared directly (their stored vectors, exact among them); more are searched in
    the index, widened (about ``2 k / fraction
    allowed`` candidates, then 4× more each round) until every query has ``k`` allowed hits or
    the whole index was searched, so a filter never leaves fewer than ``k`` results while ``k``
    rows pass it. Searches deeper than :data:`GPU_MAX_K` run on ``cpu_index``; the last round
    of an IVF index probes every cell.

    Returns
    -------
    sims, ids : ndarray
        ``(B, min(k, allowed rows))``, best first; ids ``-1`` (sims ``-1``) where fewer
        allowed rows were found.
    """
    import faiss

    from ._exact_torch import TorchExactIndex

    total = int(allowed.size)
    n_allowed = int(np.count_nonzero(allowed))
    k = min(k, n_allowed)
    batch = queries.shape[0]
    if k == 0 or batch == 0:
        return np.zeros((batch, k), np.float32), np.full((batch, k), -1, np.int64)
    if isinstance(index, TorchExactIndex):
        return index.search(queries, k, allowed=allowed)
    cpu = cpu_index if cpu_index is not None else index
    if n_allowed <= DIRECT_MAX_ROWS:
        rows = np.flatnonzero(allowed)
        sims_all = queries @ _stored_rows(cpu, rows, kind).T
        top = np.argsort(-sims_all, axis=1, kind="stable")[:, :k]
        return (np.take_along_axis(sims_all, top, axis=1).astype(np.float32),
                rows[top].astype(np.int64))
    depth = min(total, max(2 * k, math.ceil(2 * k * total / n_allowed)))
    while True:
        target = index if depth <= GPU_MAX_K else cpu
        if depth >= total and kind == "ivf":  # the last round: every cell
            nlist = faiss.extract_index_ivf(cpu).nlist
            params = faiss.SearchParametersIVF()
            params.nprobe = nlist
            sims, ids = cpu.search(queries, depth, params=params)
        else:
            sims, ids = target.search(queries, depth)
        keep = (ids >= 0) & allowed[np.clip(ids, 0, total - 1)]
        if int(keep.sum(axis=1).min()) >= k or depth >= total:
            break
        depth = min(total, depth * 4)
    out_s = np.full((batch, k), -1.0, np.float32)
    out_i = np.full((batch, k), -1, np.int64)
    for b in range(batch):
        cols = np.flatnonzero(keep[b])[:k]
        out_s[b, :cols.size] = sims[b, cols]
        out_i[b, :cols.size] = ids[b, cols]
    return out_s, out_i


def exact_search(db: np.ndarray, queries: np.ndarray, k: int,
                 chunk: int = 65536) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` inner product (chunked over ``db``; any float dtype), ``(sims, ids)``."""
    import faiss

    q = np.ascontiguousarray(queries, dtype=np.float32)
    k = min(k, db.shape[0])
    heap = faiss.ResultHeap(q.shape[0], k, keep_max=True)
    for start in range(0, db.shape[0], chunk):
        block = np.ascontiguousarray(db[start:start + chunk], dtype=np.float32)
        sims = q @ block.T
        heap.add_result(sims, start + np.arange(block.shape[0], dtype=np.int64)[None]
                        .repeat(q.shape[0], 0))
    heap.finalize()
    return heap.D, heap.I


def recall_at_k(found: np.ndarray, truth: np.ndarray, k: int = 10) -> float:
    """Mean fraction of the true top-``k`` ids present in the found top-``k`` ids."""
    k = min(k, truth.shape[1])
    hits = [len(set(f[:k].tolist()) & set(t[:k].tolist()))
            for f, t in zip(found, truth, strict=True)]
    return float(np.mean(hits) / k) if hits else 1.0


def tune_index(index, kind: str, params: dict[str, Any], queries: np.ndarray,
               truth: np.ndarray, *, k: int = 10, target: float = 0.95
               ) -> tuple[dict[str, Any], float]:
    """Smallest ``nprobe``/``efSearch`` reaching ``target`` recall@k; returns (params, recall).

    If the target is never reached the largest tried value is kept (with its recall).
    """
    params = dict(params)
    if kind == "flat":
        return params, 1.0
    if kind == "ivf":
        key, values = "nprobe", [v for v in _NPROBES if v < params["nlist"]] + [params["nlist"]]
    else:
        key, values = "efSearch", [v for v in _EFS if v >= k]
    recall = 0.0
    for value in values:
        params[key] = int(value)
        set_search_params(index, kind, params)
        _, ids = index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        recall = recall_at_k(ids, truth, k)
        if recall >= target:
            break
    return params, recall
