"""Torch's exact search (the ``torch`` search kind of a flat figure index), on a CPU: the same
top-k as faiss's float32 exact search on random vectors and on real ones (a weight-free
encoder's vectors of real H&E tiles, where thousands of scores lie within float16's rounding of
each other), with the scores chunked by tiny budgets and the rows streamed, and inside the
licence and figure-kind filters of :class:`~wsikit.evidence.FigureIndex`."""

from __future__ import annotations

import json
from pathlib import Path

import faiss
import numpy as np
import pytest
import torch
from PIL import Image

from wsikit.errors import EvidenceError
from wsikit.evidence import FigureIndex, read_figure_manifest
from wsikit.evidence import _faiss as fu
from wsikit.evidence._exact_torch import TorchExactIndex

REAL_TILES = Path(__file__).resolve().parents[1] / "data" / "real_tiles"


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _faiss_exact(x: np.ndarray, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    index = faiss.IndexFlatIP(x.shape[1])
    index.add(x)
    return index.search(q, k)


def _truth(x: np.ndarray, q: np.ndarray, k: int, allowed: np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """float64 exact top-k (ties: the lower row first) among the ``allowed`` rows."""
    rows = np.arange(len(x)) if allowed is None else np.flatnonzero(allowed)
    s = q.astype(np.float64) @ x[rows].astype(np.float64).T
    top = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, top, axis=1), rows[top]


def _assert_same_top(sims: np.ndarray, ids: np.ndarray, want_s: np.ndarray,
                     want_i: np.ndarray, x: np.ndarray, q: np.ndarray) -> None:
    """Same scores within float32 rounding; the same rows, except that rows whose exact
    scores are within that rounding of each other may swap."""
    np.testing.assert_allclose(sims, want_s, atol=2e-6)
    exact = np.einsum("bd,bkd->bk", q.astype(np.float64), x[ids].astype(np.float64))
    np.testing.assert_allclose(exact, want_s, atol=2e-6)  # the rows returned score that
    differ = ids != want_i
    assert np.all(np.abs(want_s[differ] - exact[differ]) < 2e-6)


@pytest.fixture(scope="module")
def real_vectors() -> np.ndarray:
    """The weight-free encoder's vectors of 64-px crops of the real TCGA tiles, and exact
    copies of some (scores tie exactly): half the pairs are above 0.47 cosine, a tenth
    above 0.9997, far inside float16's rounding."""
    from wsikit.models import create_encoder

    tiles = [np.asarray(Image.open(p).convert("RGB")) for p in sorted(REAL_TILES.glob("*.png"))]
    crops = [t[y:y + 64, x:x + 64] for t in tiles
             for y in range(0, t.shape[0] - 63, 96) for x in range(0, t.shape[1] - 63, 96)]
    v = _unit(create_encoder("heuristic").encode(np.stack(crops)))
    return np.concatenate([v, v[::7]])


def test_random_vectors_match_faiss_exact_search() -> None:
    rng = np.random.default_rng(0)
    x = _unit(rng.standard_normal((5000, 96)))
    q = _unit(rng.standard_normal((40, 96)))
    for k in (1, 10, 100):
        want_s, want_i = _faiss_exact(x, q, k)
        sims, ids = TorchExactIndex(x, device="cpu").search(q, k)
        assert sims.dtype == np.float32 and ids.dtype == np.int64 and ids.shape == (40, k)
        _assert_same_top(sims, ids, want_s, want_i, x, q)
        assert (ids == want_i).mean() > 0.999


@pytest.mark.parametrize(("budget", "resident"), [(None, True), (40 * 8 * 37, True),
                                                  (40 * 8 * 37, False), (1, False)])
def test_real_vectors_match_faiss_at_every_chunking(real_vectors: np.ndarray,
                                                    budget: int | None,
                                                    resident: bool) -> None:
    """Chunks of 37 rows and of one row, the rows resident or streamed: the same results."""
    x = real_vectors
    rng = np.random.default_rng(1)
    q = _unit(x[rng.integers(0, len(x), 40)] + 0.01 * rng.standard_normal((40, x.shape[1])))
    index = TorchExactIndex(x, device="cpu", budget=budget, resident=resident)
    if budget is not None:
        assert index.budget // (len(q) * 8) < len(x) // 10  # many chunks
    for k in (5, 30):
        want_s, want_i = _faiss_exact(x, q, k)
        sims, ids = index.search(q, k)
        _assert_same_top(sims, ids, want_s, want_i, x, q)
        t_s, t_i = _truth(x, q, k)
        _assert_same_top(sims, ids, t_s, t_i, x, q)


def test_scores_below_float16_resolution_are_ranked_in_float32() -> None:
    """300 rows whose cosines with the query step by 1e-6 (float16 scores err by about 3e-5
    and reorder them): the candidates are widened until they hold the exact top 20, and
    float32 ranks them exactly."""
    rng = np.random.default_rng(2)
    d = 64
    q = _unit(rng.standard_normal((1, d)))
    ortho = rng.standard_normal((300, d))
    ortho -= (ortho @ q[0])[:, None] * q[0]
    ortho = _unit(ortho)
    cos = 1 - 0.01 - rng.permutation(300) * 1e-6
    close = cos[:, None] * q[0] + np.sqrt(1 - cos**2)[:, None] * ortho
    x = np.concatenate([_unit(rng.standard_normal((2000, d))), close.astype(np.float32)])
    index = TorchExactIndex(x, device="cpu")
    sims, ids = index.search(q, 20)
    want_s, want_i = _truth(x, q, 20)
    assert ids.tolist() == want_i.tolist()  # distinct in float32: the exact order
    np.testing.assert_allclose(sims, want_s, atol=1e-6)
    # float16 alone ranks them otherwise
    low = (torch.from_numpy(q).half().float() @ index._low.float().T).numpy()
    assert set(np.argsort(-low[0], kind="stable")[:20]) != set(want_i[0])


@pytest.mark.parametrize("fraction", [0.002, 0.1, 0.9])
def test_filtered_search_is_exact_in_one_pass(real_vectors: np.ndarray,
                                              fraction: float) -> None:
    x = real_vectors
    rng = np.random.default_rng(3)
    allowed = rng.random(len(x)) < fraction
    q = _unit(rng.standard_normal((8, x.shape[1])))
    k = 10
    index = TorchExactIndex(x, device="cpu", budget=8 * 8 * 50)
    sims, ids = fu.search_within(index, q, k, allowed)
    kk = min(k, int(allowed.sum()))
    assert ids.shape == (8, kk) and allowed[ids].all()
    want_s, want_i = _truth(x, q, kk, allowed)
    _assert_same_top(sims, ids, want_s, want_i, x, q)
    # faiss's widening search of the same rows agrees
    flat = faiss.IndexFlatIP(x.shape[1])
    flat.add(x)
    f_s, _ = fu.search_within(flat, q, k, allowed)
    np.testing.assert_allclose(sims, f_s, atol=2e-6)


def test_fewer_admitted_rows_than_k_are_padded() -> None:
    x = _unit(np.random.default_rng(4).standard_normal((50, 16)))
    allowed = np.zeros(50, bool)
    allowed[[3, 40]] = True
    sims, ids = TorchExactIndex(x, device="cpu").search(x[:2], 5, allowed=allowed)
    assert set(ids[0, :2].tolist()) == {3, 40} and (ids[:, 2:] == -1).all()
    assert (sims[:, 2:] == -1).all()
    with pytest.raises(EvidenceError, match="allowed mask of shape"):
        TorchExactIndex(x, device="cpu").search(x[:1], 1, allowed=allowed[:10])
    with pytest.raises(EvidenceError, match="NaN or inf"):
        TorchExactIndex(np.full((2, 3), np.nan, np.float32), device="cpu")


def test_the_cuda_budget_is_a_share_of_the_free_memory(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    from wsikit.evidence import _exact_torch as et

    assert et.search_budget("cpu") == et.CPU_BUDGET_BYTES
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (100 * 2**30, 0))
    assert et.search_budget("cuda:0") == et.CUDA_BUDGET_BYTES
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (2**30, 0))
    assert et.search_budget("cuda:0") == 2**28


def _index(tmp_path: Path, make_images, encoder, n: int) -> Path:
    images = make_images(tmp_path / "imgs", n, seed=5)
    licences = ["CC BY" if i % 5 == 0 else "all rights reserved" for i in range(n)]
    rows = [{"image": f"imgs/{p.name}", "caption": f"figure {i}", "figure_label":
             f"Figure {i + 1}", "doi": f"10.1/p{i}", "license": lic}
            for i, (p, lic) in enumerate(zip(images, licences, strict=True))]
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    FigureIndex.build(read_figure_manifest(tmp_path / "m.jsonl"), encoder, tmp_path / "idx")
    return tmp_path / "idx"


def test_a_figure_index_searched_by_torch(tmp_path: Path, make_images, encoder,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The same matches as faiss, in the licence view and the figure-kind filter too, with
    the search kind recorded in evidence.json's index entry and the index info."""
    from wsikit.evidence import _faiss

    monkeypatch.setattr(_faiss, "DIRECT_MAX_ROWS", 0)  # faiss's widening search, not direct
    path = _index(tmp_path, make_images, encoder, 30)
    by_faiss = FigureIndex.open(path, search="faiss")
    by_torch = FigureIndex.open(path, search="torch", device="cpu")
    assert by_faiss.search_kind == {"search": "faiss", "device": "cpu"}
    assert by_torch.search_kind == {"search": "torch", "device": "cpu"}
    assert by_torch.to_evidence_dict()["search"] == "torch"
    assert by_torch.info()["search"] == "torch" and by_torch.info()["kind"] == "flat"
    q = np.random.default_rng(6).normal(size=(4, by_faiss.dim)).astype(np.float32)
    kinds = np.zeros(30, bool)
    kinds[::3] = True  # as FigureIndex.matchable gives for some figure kinds

    def ranked(index: FigureIndex, kinds_allowed: np.ndarray | None = None
               ) -> list[list[tuple[str, float]]]:
        sims, ids = index._search(fu.normalise(q), 6, kinds_allowed)
        return [[(str(i), round(float(s), 5)) for s, i in zip(sr, ir, strict=True)]
                for sr, ir in zip(sims, ids, strict=True)]

    for view_f, view_t in ((by_faiss, by_torch),
                           (by_faiss.with_licences("CC BY"), by_torch.with_licences("CC BY"))):
        assert ranked(view_t) == ranked(view_f)
        assert ranked(view_t, kinds) == ranked(view_f, kinds)
        got = view_t.query(q, k=4)
        want = view_f.query(q, k=4)
        assert [[m.node.node_id for m in r] for r in got] == \
            [[m.node.node_id for m in r] for r in want]
    assert all(m.node.license == "CC BY" for r in by_torch.with_licences("CC BY").query(q, k=6)
               for m in r)


def test_search_choices(tmp_path: Path, make_images, encoder) -> None:
    path = _index(tmp_path, make_images, encoder, 8)
    if not torch.cuda.is_available():  # auto: faiss on a CPU machine
        assert FigureIndex.open(path).search_kind["search"] in ("faiss", "faiss-gpu")
    assert FigureIndex.open(path, device="cpu").search_kind["search"] in ("faiss", "faiss-gpu")
    with pytest.raises(EvidenceError, match="search='gpu': use one of auto, faiss, torch"):
        FigureIndex.open(path, search="gpu")
    from wsikit.evidence import index_build

    index_build([tmp_path / "m.jsonl"], tmp_path / "hnsw", kind="hnsw")
    with pytest.raises(EvidenceError, match="exact search of a flat index.*'hnsw'"):
        FigureIndex.open(tmp_path / "hnsw", search="torch")


@pytest.mark.gpu
def test_auto_takes_torch_on_cuda(tmp_path: Path, make_images, encoder) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    path = _index(tmp_path, make_images, encoder, 12)
    index = FigureIndex.open(path)
    if index.search_kind["search"] == "faiss-gpu":
        pytest.skip("faiss-gpu present: it is chosen first")
    assert index.search_kind["search"] == "torch"
    assert index.search_kind["device"].startswith("cuda")
    q = np.random.default_rng(7).normal(size=(3, index.dim)).astype(np.float32)
    cpu = FigureIndex.open(path, search="faiss")
    assert [[m.node.node_id for m in r] for r in index.query(q, k=5)] == \
        [[m.node.node_id for m in r] for r in cpu.query(q, k=5)]
