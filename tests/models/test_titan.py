"""TITAN: blockwise == dense ALiBi attention, permutation behaviour, input checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from golden_rule import titan_slide

from wsikit.errors import ModelError, WeightsError
from wsikit.models import create_encoder
from wsikit.models import titan as titan_mod
from wsikit.models.titan import (
    Titan,
    alibi_attention_cpu,
    alibi_slopes,
    coords_to_grid,
    dense_alibi_bias,
    titan,
)

P = 512


def _slide(n_cols: int = 15, n_rows: int = 11, keep: float = 0.6, seed: int = 0):
    return titan_slide(n_cols, n_rows, keep, seed, patch=P)


def test_slopes_as_published() -> None:
    expected = [2.0 ** -e for e in (1, 2, 3, 4, 5, 6, 7, 8, 0.5, 1.5, 2.5, 3.5)]
    np.testing.assert_allclose(alibi_slopes(12).numpy(), expected, rtol=1e-7)


def test_dense_bias_is_euclidean_alibi_with_zero_cls() -> None:
    cells = torch.tensor([[0, 0], [3, 4], [1, 0]])
    bias = dense_alibi_bias(cells)
    assert bias.shape == (12, 4, 4)
    assert torch.all(bias[:, 0, :] == 0) and torch.all(bias[:, :, 0] == 0)
    assert torch.allclose(bias[0, 1, 2], torch.tensor(-5.0 * 0.5))
    assert torch.allclose(bias[8, 1, 3], torch.tensor(-1.0 * 2 ** -0.5))


@pytest.fixture(scope="module")
def dense_reference(model: Titan):
    feats, coords = _slide()
    return feats, coords, model.encode_slide(feats, coords, P, mode="dense")


@pytest.mark.parametrize("rows", [1, 2, 7, 64, "all", "more"])
def test_every_query_block_size_equals_dense(model: Titan, dense_reference, rows,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The query-block path (the one CUDA takes; on a CPU float32 takes the blockwise kernel,
    switched off here) at blocks of 1 row, a few rows with a partial last block, every token
    in one block and a budget above that: the dense reference within 1e-5 relative."""
    from wsikit.models.titan import query_block_rows

    monkeypatch.setattr(titan_mod, "CPU_KERNEL", False)
    feats, coords, dense = dense_reference
    n = len(coords) + 1  # tokens, CLS included
    per_row = 4 * (4 * 12 + 3) * n  # bytes of one query row's working memory
    want = {"all": n, "more": n + 5}.get(rows, rows)
    budget = per_row * want + per_row // 2
    assert query_block_rows(n, budget) == min(n, want)
    blocked = model.encode_slide(feats, coords, P, budget=budget)
    rel = np.abs(blocked.slide_embedding - dense.slide_embedding).max() / \
        np.abs(dense.slide_embedding).max()
    assert rel <= 1e-5
    np.testing.assert_allclose(blocked.attention, dense.attention, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("rows", [1, 13, "all"])
def test_reduced_precision_query_blocks_equal_dense(model: Titan, rows) -> None:
    """Under autocast (scores in bfloat16, the float32 bias and softmax: the unfused path)
    every block size gives the dense computation's result within bfloat16's rounding."""
    from wsikit.models.titan import query_block_rows

    feats, coords = _slide(seed=4)
    n = len(coords) + 1
    want = n if rows == "all" else rows
    budget = 4 * (4 * 12 + 3) * n * want
    assert query_block_rows(n, budget) == want
    dense = model.encode_slide(feats, coords, P, mode="dense", precision="bf16")
    blocked = model.encode_slide(feats, coords, P, budget=budget, precision="bf16")
    rel = np.abs(blocked.slide_embedding - dense.slide_embedding).max() / \
        np.abs(dense.slide_embedding).max()
    assert rel <= 2e-2


def test_permutation_invariance_and_attention_follows_patches(model: Titan) -> None:
    feats, coords = _slide(seed=1)
    out = model.encode_slide(feats, coords, P)
    assert out.slide_embedding.shape == (768,) and out.slide_embedding.dtype == np.float32
    assert out.attention.shape == (len(coords),) and out.attention.dtype == np.float32
    assert abs(float(out.attention.sum()) - 1.0) < 1e-5 and (out.attention >= 0).all()
    perm = np.random.default_rng(2).permutation(len(coords))
    out_p = model.encode_slide(feats[perm], coords[perm], P)
    np.testing.assert_allclose(out_p.slide_embedding, out.slide_embedding, atol=1e-5)
    np.testing.assert_allclose(out_p.attention, out.attention[perm], rtol=1e-5, atol=1e-9)
    # attention is not uniform: it depends on the features
    assert out.attention.std() > 0


def test_distance_matters(model: Titan) -> None:
    """Spreading the same patches apart changes the output (ALiBi is active)."""
    feats, coords = _slide(seed=3)
    a = model.encode_slide(feats, coords, P).slide_embedding
    b = model.encode_slide(feats, coords * 3 - coords.min(0) * 2, 3 * P).slide_embedding
    np.testing.assert_allclose(a, b, atol=1e-5)  # same grid at another scale: same cells
    spread = coords.copy()
    spread[:, 0] = spread[:, 0] * 2 - spread[:, 0].min()
    c = model.encode_slide(feats, spread, P).slide_embedding
    assert np.abs(a - c).max() > 1e-4


def test_one_patch_slide(model: Titan) -> None:
    out = model.encode_slide(np.ones((1, 768), np.float32), np.array([[512, 1024]]), P)
    assert out.attention.tolist() == [1.0]
    assert np.isfinite(out.slide_embedding).all()


def test_titan_function_with_model(model: Titan) -> None:
    feats, coords = _slide(5, 4, keep=1.0)
    out = titan(feats, coords, P, model=model)
    assert "RANDOM WEIGHTS" in out.label


def test_input_errors(model: Titan) -> None:
    feats, coords = _slide(6, 5, keep=1.0)
    with pytest.raises(ModelError, match="all-zero"):
        model.encode_slide(np.zeros_like(feats), coords, P)
    with pytest.raises(ModelError, match="positive"):
        model.encode_slide(feats, coords, 0)
    with pytest.raises(ModelError, match="int64"):
        model.encode_slide(feats, coords.astype(np.float32), P)
    with pytest.raises(ModelError, match="float32"):
        model.encode_slide(feats.astype(np.float64), coords, P)
    with pytest.raises(ModelError, match="ONE slide"):
        model.encode_slide(np.stack([feats, feats]), coords, P)
    with pytest.raises(ModelError, match="ONE slide"):
        model.encode_slide(feats, np.stack([coords, coords]), P)
    with pytest.raises(ModelError, match="feature rows"):
        model.encode_slide(feats[:-1], coords, P)
    with pytest.raises(ModelError, match="empty"):
        coords_to_grid(np.zeros((0, 2), np.int64), P)


def test_grid_cells_floor_per_axis_in_x_major_order() -> None:
    coords = np.array([[1024, 0], [0, 512], [512, 0], [0, 0]], dtype=np.int64) + 77
    g = coords_to_grid(coords, 512)
    assert g.cells.tolist() == [[0, 0], [0, 1], [1, 0], [2, 0]]  # x-major, as the reference
    assert g.token_of.tolist() == [3, 1, 2, 0]
    assert g.counts.tolist() == [1, 1, 1, 1] and g.n_summed == 0 and g.n_dropped == 0
    # a stride below the cell size (TRIDENT: 1013 with patch_size_level0 1024): floor division
    tri = np.array([[0, 0], [1013, 0], [2026, 0], [1013 * 50, 1013]], dtype=np.int64) + 5
    g = coords_to_grid(tri, 1024)
    # 1013 // 1024 = 0 and 2026 // 1024 = 1: the first two share cell (0, 0)
    assert g.cells.tolist() == [[0, 0], [1, 0], [49, 0]]
    assert g.token_of.tolist() == [0, 0, 1, 2] and g.counts.tolist() == [2, 1, 1]
    assert g.n_summed == 1
    g = coords_to_grid(tri, 1024, nonzero=np.array([True, True, False, True]))
    assert g.token_of.tolist() == [0, 0, -1, 1] and g.n_dropped == 1


def test_titan_without_weights_refuses(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("WSIKIT_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.delenv("WSIKIT_WEIGHTS_TITAN", raising=False)
    with pytest.raises(WeightsError, match="MahmoodLab/TITAN"):
        create_encoder("titan")


def test_cpu_kernel_equals_dense_with_partial_blocks() -> None:
    torch.manual_seed(0)
    n = 150
    q, k, v = (torch.randn(12, n, 64) for _ in range(3))
    cells = torch.from_numpy(titan_slide(20, 20, 0.5, 3, patch=1)[1][: n - 1] - 3000)
    cells = cells - cells.min(0).values
    bias = dense_alibi_bias(cells)
    want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                            attn_mask=bias.double())
    for qb, kb in ((7, 13), (256, 2048), (1, n)):
        got = alibi_attention_cpu(q, k, v, cells, alibi_slopes(), q_block=qb, k_block=kb)
        assert ((got - want).abs().max() / want.abs().max()).item() < 1e-5


def test_sdpa_path_of_encode_slide_equals_dense(model: Titan, monkeypatch) -> None:
    feats, coords = _slide(seed=4)
    dense = model.encode_slide(feats, coords, P, mode="dense")
    monkeypatch.setattr(titan_mod, "CPU_KERNEL", False)  # the SDPA path (CUDA float32)
    fast = model.encode_slide(feats, coords, P)
    rel = np.abs(fast.slide_embedding - dense.slide_embedding).max() / \
        np.abs(dense.slide_embedding).max()
    assert rel <= 1e-5
    np.testing.assert_allclose(fast.attention, dense.attention, rtol=1e-5, atol=1e-9)


def test_cpu_kernel_equals_dense_on_a_sparse_wide_grid() -> None:
    """Cells hundreds apart: most scores sit far below their row max, where the kernel clamps
    them before exp (its fast path); the output must still equal the float64 dense one."""
    torch.manual_seed(1)
    n = 300
    q, k, v = (torch.randn(12, n, 64) for _ in range(3))
    cells = torch.randint(0, 2000, (n - 1, 2))
    bias = dense_alibi_bias(cells)
    assert (bias < -80).float().mean() > 0.5  # the clamped regime is exercised
    want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                            attn_mask=bias.double())
    got = alibi_attention_cpu(q, k, v, cells, alibi_slopes(), q_block=64, k_block=128)
    assert ((got - want).abs().max() / want.abs().max()).item() < 1e-5


def test_query_blocks_are_chosen_from_the_free_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA a query block holds gigabytes, not the CPU's cache-sized budget (16 MiB made
    5-row blocks at 50k patches: launch-bound, 54 s on an H200 against 56 s on 16 CPU cores),
    and never more than a quarter of the free device memory."""
    from wsikit.models.titan import (
        BLOCK_BUDGET_BYTES,
        DEVICE_BLOCK_BUDGET_BYTES,
        block_budget,
        query_block_rows,
    )

    assert block_budget(torch.device("cpu")) == BLOCK_BUDGET_BYTES
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (100 * 2**30, 0))
    assert block_budget(torch.device("cuda")) == DEVICE_BLOCK_BUDGET_BYTES
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (2**30, 0))
    assert block_budget(torch.device("cuda")) == 2**28
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (2**20, 0))
    assert block_budget(torch.device("cuda")) == BLOCK_BUDGET_BYTES
    rows_at_50k = query_block_rows(50_001, DEVICE_BLOCK_BUDGET_BYTES)
    assert rows_at_50k >= 200 and -(-50_001 // rows_at_50k) <= 250  # blocks per layer
