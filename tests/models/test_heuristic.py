"""Weight-free encoder and importance scores."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skimage.color import rgb2hed

from wsikit.errors import ModelError
from wsikit.models import create_encoder
from wsikit.models.heuristic import (
    heuristic_features,
    hist_quantiles,
    importance_scores,
    rgb_to_hed,
    texture_image,
)
from wsikit.slide.synthetic import SyntheticSpec, synthetic_tissue_image


def _rng_images(b: int = 4, px: int = 96, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (b, px, px, 3), dtype=np.uint8)


def test_rgb_to_hed_matches_skimage() -> None:
    img = _rng_images(1, 32)[0]
    ours = rgb_to_hed(torch.from_numpy(img).permute(2, 0, 1)[None].float() / 255.0)
    ref = rgb2hed(img)
    np.testing.assert_allclose(ours[0].permute(1, 2, 0).numpy(), ref, atol=1e-5)


def test_heuristic_shape_norm_determinism() -> None:
    enc = create_encoder("heuristic")
    assert "heuristic" in enc.label and "no learned weights" in enc.label
    imgs = _rng_images(5, 200)
    a = enc.encode(imgs)
    b = enc.encode(imgs[::-1].copy())[::-1]
    assert a.shape == (5, 64) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(a, b, atol=1e-6)  # deterministic, per-image
    # tensor input (B, 3, H, W) through forward_uint8 gives the same numbers
    t = enc.forward_uint8(torch.from_numpy(imgs).permute(0, 3, 1, 2)).numpy()
    np.testing.assert_allclose(a, t, atol=1e-6)


def test_heuristic_separates_tissue_types() -> None:
    """Crops of the same texture are closer than crops of background vs dense nuclei."""
    spec = SyntheticSpec(1024, 768, mpp=0.5, dense=[(512, 0, 512, 768)])
    img = synthetic_tissue_image(spec)
    enc = create_encoder("heuristic")
    crops = np.stack([img[200:328, 600:728], img[400:528, 800:928],   # dense, dense
                      img[0:128, 0:128]])                            # corner (background)
    f = enc.encode(crops)
    sim = f @ f.T
    assert sim[0, 1] > sim[0, 2]


def test_heuristic_rejects_bad_input() -> None:
    enc = create_encoder("heuristic")
    with pytest.raises(ModelError, match="uint8"):
        enc.encode(np.zeros((2, 32, 32, 3), dtype=np.float32))
    with pytest.raises(ModelError, match="weight-free"):
        create_encoder("heuristic", weights="/some/file.bin")


def test_importance_scores_are_per_slide_ranks() -> None:
    rng = np.random.default_rng(1)
    h = rng.random(500)
    t = np.ones(500)
    s = importance_scores(h, t)
    assert s.dtype == np.float32 and s.shape == (500,)
    assert 0.0 < s.min() < 0.01 and 0.99 < s.max() < 1.0     # spread over (0, 1), no 0/1
    order = np.argsort(h, kind="stable")
    assert np.all(np.diff(s[order]) > 0)                     # monotone in the measurement
    assert np.all(importance_scores(np.ones(4), np.ones(4)) == 0.5)   # all tied: mid-rank
    assert importance_scores(np.zeros(0), np.zeros(0)).shape == (0,)
    with pytest.raises(ModelError, match="one value per patch"):
        importance_scores(np.ones(3), np.ones(4))


# --- version 3 machinery: histogram quantiles, block downsampling, chunked/threaded runs ---


def test_histogram_quantiles_match_sorted_quantiles() -> None:
    """Quantiles read off a fine histogram are within one bin of the exact ones."""
    rng = np.random.default_rng(4)
    v = torch.from_numpy(np.concatenate([rng.gamma(2.0, 0.02, (3, 5000)),
                                         np.zeros((3, 1000))], 1).astype(np.float32))
    width, bins = 0.00125, 400
    idx = (v / width).clamp(0, bins - 0.5).long()
    counts = torch.zeros(3, bins).scatter_add_(1, idx, torch.ones_like(v))
    q = torch.tensor([0.1, 0.5, 0.9, 0.99])
    ours = hist_quantiles(counts, q, width)
    exact = torch.quantile(v, q, dim=1).T
    np.testing.assert_allclose(ours.numpy(), exact.numpy(), atol=width)


def test_block_downsample_matches_area_interpolation() -> None:
    """The block-sum fast path equals ``F.interpolate(mode="area")`` in either memory layout."""
    rng = np.random.default_rng(5)
    for h, w in ((512, 512), (1024, 768), (300, 300)):
        img = rng.integers(0, 256, (2, h, w, 3), dtype=np.uint8)
        planar = torch.from_numpy(img).permute(0, 3, 1, 2).contiguous()
        chan_last = torch.from_numpy(img).permute(0, 3, 1, 2)
        scale = 256 / min(h, w)
        ref = torch.nn.functional.interpolate(planar.float() / 255, mode="area", size=(
            round(h * scale), round(w * scale)))
        for x in (planar, chan_last, planar.float() / 255):
            out = texture_image(x)
            assert out.is_contiguous() and out.shape == ref.shape
            np.testing.assert_allclose(out.numpy(), ref.numpy(), atol=1e-6)


def test_features_independent_of_layout_dtype_chunking_and_threads() -> None:
    spec = SyntheticSpec(1024, 1024, mpp=0.5, dense=[(0, 0, 512, 1024)], seed=3)
    img = synthetic_tissue_image(spec)
    crops = np.stack([img[y:y + 256, x:x + 256] for y in (0, 384, 768) for x in (100, 600)])
    t = torch.from_numpy(crops).permute(0, 3, 1, 2)
    base = heuristic_features(t.contiguous())
    assert base.shape == (6, 64) and torch.isfinite(base).all()
    np.testing.assert_allclose(heuristic_features(t).numpy(), base.numpy(), atol=1e-6)
    np.testing.assert_allclose(heuristic_features(t.float() / 255).numpy(), base.numpy(),
                               atol=1e-3)
    one = torch.cat([heuristic_features(t[i:i + 1]) for i in range(6)])
    np.testing.assert_array_equal(one.numpy(), base.numpy())  # batch-independent
    old = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            np.testing.assert_array_equal(
                heuristic_features(t, chunk_pixels=256 * 256).numpy(), base.numpy())
    finally:
        torch.set_num_threads(old)
    assert torch.get_num_threads() == old


def test_explicit_chunk_workers_give_bit_identical_features_at_any_torch_count() -> None:
    crops = np.stack([synthetic_tissue_image(SyntheticSpec(512, 512, mpp=0.5, seed=s))
                      for s in range(6)])
    t = torch.from_numpy(crops).permute(0, 3, 1, 2)
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)  # what the main process holds while reader workers decode
        one = heuristic_features(t, threads=1)
        two = heuristic_features(t, threads=2)
        torch.set_num_threads(2)
        serial = heuristic_features(t, threads=1)  # one worker: single-threaded reductions
    finally:
        torch.set_num_threads(old)
    np.testing.assert_array_equal(one.numpy(), two.numpy())
    np.testing.assert_array_equal(one.numpy(), serial.numpy())
    enc = create_encoder("heuristic")
    with enc.split_threads(2):
        np.testing.assert_array_equal(enc.encode(crops), create_encoder("heuristic").encode(crops))
    with pytest.raises(ModelError, match="threads=0"):
        heuristic_features(t, threads=0)


def test_blank_tiny_and_odd_images_embed_finitely() -> None:
    enc = create_encoder("heuristic")
    rng = np.random.default_rng(6)
    cases = [np.full((2, 512, 512, 3), 255, np.uint8), np.zeros((1, 64, 64, 3), np.uint8),
             rng.integers(0, 256, (2, 3, 3, 3), dtype=np.uint8),
             rng.integers(0, 256, (1, 100, 700, 3), dtype=np.uint8),
             rng.integers(0, 256, (1, 513, 1030, 3), dtype=np.uint8)]
    for imgs in cases:
        f = enc.encode(imgs)
        assert f.shape == (imgs.shape[0], 64) and np.isfinite(f).all(), imgs.shape
        np.testing.assert_allclose(np.linalg.norm(f, axis=1), 1.0, atol=1e-5)
    with pytest.raises(ModelError, match="at least"):
        heuristic_features(torch.zeros((1, 3, 2, 2), dtype=torch.uint8))
    with pytest.raises(ModelError, match="permute"):
        heuristic_features(torch.zeros((1, 8, 8, 3), dtype=torch.uint8))
