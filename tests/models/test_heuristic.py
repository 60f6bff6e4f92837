"""Weight-free encoder, haematoxylin density and importance scores."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skimage.color import rgb2hed

from wsikit.errors import ModelError
from wsikit.models import create_encoder, haematoxylin_density, importance_scores, rgb_to_hed
from wsikit.models.heuristic import NUCLEAR_H_OD
from wsikit.synthetic import SyntheticSpec, synthetic_tissue_image


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


def test_haematoxylin_density_orders_stains() -> None:
    white = np.full((1, 64, 64, 3), 245, np.uint8)
    purple = np.zeros((1, 64, 64, 3), np.uint8)
    purple[..., :] = (70, 40, 140)  # haematoxylin-like
    pink = np.zeros((1, 64, 64, 3), np.uint8)
    pink[..., :] = (235, 150, 190)  # eosin-like
    d = haematoxylin_density(np.concatenate([white, purple, pink]))
    assert d.dtype == np.float32 and d.shape == (3,)
    assert d[0] == 0.0 and d[1] == 1.0 and d[2] == 0.0
    assert rgb2hed(purple[0])[0, 0, 0] >= NUCLEAR_H_OD  # the threshold agrees with skimage


def test_importance_scores_normalisation() -> None:
    rng = np.random.default_rng(1)
    h = rng.random(500)
    t = rng.random(500)
    s = importance_scores(h, t)
    assert s.dtype == np.float32 and s.shape == (500,)
    assert s.min() == 0.0 and s.max() == 1.0
    raw = h * t
    # monotone in the raw score
    order = np.argsort(raw, kind="stable")
    assert np.all(np.diff(s[order]) >= 0)
    assert np.all(importance_scores(np.ones(4), np.ones(4)) == 0)
    assert importance_scores(np.zeros(0), np.zeros(0)).shape == (0,)
    with pytest.raises(ModelError, match="one value per patch"):
        importance_scores(np.ones(3), np.ones(4))
