"""Preprocessing as the reference transforms (torchvision on PIL uint8 images).

* golden: the CONCH v1.5 and Virchow2 reference transforms' output for a real slide crop
  (``tests/data/golden/preprocess_*.npz``), on the encoder's own preprocessing and on the
  fast path the feature pipeline uses on a CPU (tile reader resize + fused normalisation);
* non-square and enlarging inputs against torchvision on PIL computed here (test-only oracle).

Levels are compared: ``(x·std + mean)·255``. The encoder's preprocessing reproduces the uint8
levels exactly; the CPU fast path (the tile reader's resize) is within one level.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import openslide
import pytest
import torch
from PIL import Image

from wsikit.models import Encoder, get_config
from wsikit.models.resample import pil_resize, resize_crop_geometry
from wsikit.slide.patch_stream import PatchStream, stream_batches

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"
BOX = (800, 1200, 512, 512)  # level-0 (x, y, w, h) of the golden crop


def _levels(x: torch.Tensor, cfg) -> np.ndarray:
    """Normalised (3, S, S) float -> uint8 levels as float64."""
    mean = np.asarray(cfg.mean, np.float64)[:, None, None]
    std = np.asarray(cfg.std, np.float64)[:, None, None]
    return (x.double().numpy() * std + mean) * 255.0


@pytest.fixture(scope="module")
def crop(cmu_small: Path) -> np.ndarray:
    with openslide.OpenSlide(str(cmu_small)) as s:
        return np.array(s.read_region(BOX[:2], 0, BOX[2:]).convert("RGB"))


@pytest.mark.parametrize("name", ["conch_v1_5", "virchow2"])
def test_encoder_preprocess_matches_reference_transform(crop: np.ndarray, name: str) -> None:
    cfg = get_config(name)
    want = np.load(GOLDEN / f"preprocess_{name}.npz")["input_levels"].astype(np.float64)
    x = torch.from_numpy(crop).permute(2, 0, 1)[None].contiguous()
    got = Encoder(cfg).preprocess(x)[0]
    assert got.shape == (3, cfg.input_px, cfg.input_px) and got.dtype == torch.float32
    diff = np.abs(_levels(got, cfg) - want)
    assert diff.max() < 1e-3, diff.max()  # the same uint8 levels (the reference resizes uint8)


def test_fast_path_matches_reference_transform(cmu_small: Path) -> None:
    """CPU feature path for CONCH v1.5: the reader resizes 512 -> 448, then the fused
    normalisation (what ``extract_features`` feeds the network)."""
    cfg = get_config("conch_v1_5")
    want = np.load(GOLDEN / "preprocess_conch_v1_5.npz")["input_levels"].astype(np.float64)
    stream = PatchStream(cmu_small, np.array([BOX], np.float64), cfg.input_px, batch_size=1,
                         reader="tiles")
    batches = [(s, b.clone()) for s, b in stream_batches(
        stream, workers=0, normalize=(cfg.mean, cfg.std))]
    assert len(batches) == 1 and batches[0][1].shape == (1, 3, 448, 448)
    diff = np.abs(_levels(batches[0][1][0], cfg) - want)
    assert diff.max() <= 1 + 1e-3, diff.max()


@pytest.mark.parametrize("h,w", [(97, 150), (150, 97), (65, 64), (64, 67), (64, 69),
                                 (40, 90), (131, 131)])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_any_size_matches_torchvision_on_pil(h: int, w: int, mode: str) -> None:
    from torchvision import transforms as T

    size = 64
    base = get_config("conch_v1_5")
    cfg = type(base)(**{**base.__dict__, "input_px": size, "interpolation": mode})
    rng = np.random.default_rng(h * 1000 + w)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    img[: h // 2] = np.clip(img[: h // 2] // 4 + 100, 0, 255)  # some structure, not only noise
    interp = T.InterpolationMode.BILINEAR if mode == "bilinear" else T.InterpolationMode.BICUBIC
    pil = Image.fromarray(img)
    resized = T.Resize(size, interpolation=interp)(pil)
    new_h, new_w, top, left = resize_crop_geometry(h, w, size)
    assert (resized.height, resized.width) == (new_h, new_w)
    oracle = T.Compose([T.Resize(size, interpolation=interp), T.CenterCrop(size),
                        T.ToTensor(), T.Normalize(cfg.mean, cfg.std)])(pil)
    crop_ref = np.asarray(resized)[top:top + size, left:left + size]  # offsets as CenterCrop
    np.testing.assert_allclose(_levels(oracle, cfg), crop_ref.transpose(2, 0, 1), atol=1e-3)
    x = torch.from_numpy(img).permute(2, 0, 1)[None].contiguous()
    got = Encoder(cfg).preprocess(x)[0]
    diff = np.abs(_levels(got, cfg) - _levels(oracle, cfg))
    assert diff.max() < 1e-3, (h, w, mode, diff.max())  # exact: the same uint8 levels


@pytest.mark.parametrize("h,w,nh,nw", [(100, 90, 80, 30), (7, 5, 64, 3), (64, 64, 64, 64),
                                       (33, 200, 33, 61), (512, 512, 224, 224),
                                       (130, 200, 110, 50), (40, 30, 90, 70)])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_pil_resize_tensor_backend_is_pillow_exactly(h: int, w: int, nh: int, nw: int,
                                                    mode: str) -> None:
    """Aspect changes, enlarging and reducing, uint8-exact. (Not among them: a height reduced
    much more than the width, which Pillow 13 resamples vertically first; see
    :mod:`wsikit.models.resample`.)"""
    img = np.random.default_rng(h + 7 * w + nh).integers(0, 256, (2, h, w, 3), dtype=np.uint8)
    flt = Image.Resampling.BILINEAR if mode == "bilinear" else Image.Resampling.BICUBIC
    want = np.stack([np.asarray(Image.fromarray(i).resize((nw, nh), flt)) for i in img])
    # the tensor implementation (what runs on CUDA), here on CPU tensors
    got = pil_resize(torch.from_numpy(img).permute(0, 3, 1, 2), (nh, nw), mode, backend="torch")
    assert got.dtype == torch.uint8
    np.testing.assert_array_equal(got.permute(0, 2, 3, 1).numpy(), want)
