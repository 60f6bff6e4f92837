"""Patches decoded on the compute device (``decode="device"``): the same pixels and features
as the CPU reader's, within the decoders' and the float resize's rounding.

On a CPU the device decoder is torchvision's libjpeg-turbo; on CUDA it is nvJPEG, which the
GPU benchmark (``benchmarks/bench_gpu.py``) compares the same way.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from wsikit.errors import FeatureError
from wsikit.features.extract import extract_features
from wsikit.slide import device_decode
from wsikit.slide.device_decode import DevicePatchStream, compare_with_cpu_reader, resize_aa_uint8
from wsikit.slide.region_resize import resize_antialiased
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide


@pytest.fixture(scope="module")
def slide40x(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2560×2048 slide at 0.25 µm/px: a 512-px patch at 0.5 µm/px is a 1024-px level-0 box
    read from level 0 and resized (the common 40× case)."""
    path = tmp_path_factory.mktemp("dd") / "s40.svs"
    return write_synthetic_slide(path, SyntheticSpec(2560, 2048, mpp=0.25,
                                                     dense=[(600, 500, 800, 600)]),
                                 downsamples=(1, 4), tile=256, quality=80)


def test_resize_matches_the_cpu_readers_kernel() -> None:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (96, 96, 3), dtype=np.uint8)
    ref = resize_antialiased(img, (40, 40)).astype(int)
    got = resize_aa_uint8(torch.from_numpy(img).permute(2, 0, 1)[None], 40)[0]
    assert np.abs(got.permute(1, 2, 0).numpy().astype(int) - ref).max() <= 1


def test_device_pixels_match_the_cpu_reader(slide40x: Path) -> None:
    """Aligned and unaligned boxes, boxes over the slide's edge (white fill) and a sub-pixel
    box (read by the CPU path inside the workers): all within the decoders' rounding."""
    boxes = np.array([[0, 0, 1024, 1024], [1024, 1024, 1024, 1024], [100, 37, 1024, 1024],
                      [2000, 1500, 1024, 1024], [-200, 300, 1024, 1024],
                      [333.5, 210.25, 1023.3, 1023.3]])
    res = compare_with_cpu_reader(slide40x, boxes, 448, patch_px=512)
    assert res["patches"] == len(boxes)
    assert res["max_abs"] <= 3, res
    assert res["mean_abs"] < 0.5, res


def test_device_stream_groups_match_one_by_one(slide40x: Path) -> None:
    """A batch in several workers' chunks arrives in grid order and equals a one-patch read."""
    boxes = np.array([[x, y, 1024, 1024] for y in (0, 1024) for x in (0, 512, 1024, 1536)],
                     float)
    whole = DevicePatchStream(slide40x, boxes, 224, patch_px=512, batch_size=3, device="cpu",
                              workers=2)
    starts, batches = zip(*whole, strict=True)
    assert list(starts) == [0, 3, 6]
    got = torch.cat(batches)
    for i in (0, 5, 7):
        one = DevicePatchStream(slide40x, boxes[i:i + 1], 224, patch_px=512, batch_size=1,
                                device="cpu", workers=0)
        assert torch.equal(next(iter(one))[1][0], got[i])


def test_extract_features_decode_device_equals_reader(synthetic_small_slide: Path,
                                                      small_grid, tiny_encoder) -> None:
    ref = extract_features(synthetic_small_slide, small_grid, tiny_encoder, workers=0,
                           progress=False)
    dev = extract_features(synthetic_small_slide, small_grid, tiny_encoder, workers=1,
                           progress=False, decode="device")
    assert dev.attrs["decode"] == "device" and dev.attrs["reader"] == "device"
    assert ref.attrs["decode"] == "reader"
    rel = np.abs(dev.features - ref.features).max() / np.abs(ref.features).max()
    assert rel < 2e-2


def test_decode_option_is_checked(synthetic_small_slide: Path, small_grid,
                                  tiny_encoder) -> None:
    with pytest.raises(FeatureError, match="decode='gpu'"):
        extract_features(synthetic_small_slide, small_grid, tiny_encoder, decode="gpu")


def test_device_decode_refuses_files_without_jpeg_tiles(tmp_path: Path) -> None:
    from PIL import Image

    png = tmp_path / "plain.png"
    Image.fromarray(np.full((600, 600, 3), 200, np.uint8)).save(png)
    with pytest.raises(FeatureError, match="decode='reader'"):
        DevicePatchStream(png, np.array([[0, 0, 256, 256]], float), 64, patch_px=256,
                          batch_size=1, device="cpu")


def test_a_device_decoder_with_other_colours_is_refused(slide40x: Path, monkeypatch) -> None:
    """A decoder that reads the colours differently (as one ignoring the Adobe marker of an
    RGB-photometric TIFF would) is caught on a probe tile before any patch is made."""
    real = device_decode._decode_tiles
    monkeypatch.setattr(device_decode, "_decode_tiles",
                        lambda d, o, dev: [t[[2, 1, 0]] for t in real(d, o, dev)])
    with pytest.raises(FeatureError, match="colours .* levels from the CPU decoder"):
        DevicePatchStream(slide40x, np.array([[0, 0, 1024, 1024]], float), 64, patch_px=512,
                          batch_size=1, device="cpu", workers=0)


@pytest.mark.gpu
def test_nvjpeg_pixels_match_the_cpu_reader(slide40x: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    boxes = np.array([[0, 0, 1024, 1024], [100, 37, 1024, 1024], [2000, 1500, 1024, 1024],
                      [333.5, 210.25, 1023.3, 1023.3]])
    res = compare_with_cpu_reader(slide40x, boxes, 448, patch_px=512, device="cuda")
    assert res["max_abs"] <= 6, res
    assert res["mean_abs"] < 1.0, res
