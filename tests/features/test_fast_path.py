"""The fast patch path: batched tile reads, reused shared-memory batch slots and the fused
normalisation equal their references (per-patch reads, the encoder's own transform, a read
through the slide reader) within stated tolerances."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from wsikit.errors import FeatureError
from wsikit.features.extract import extract_features
from wsikit.models import Encoder, EncoderConfig
from wsikit.patches.grid import TileGrid
from wsikit.slide import open_slide
from wsikit.slide.patch_stream import PatchStream, SlotRing, normalize_uint8, stream_batches
from wsikit.slide.tiles import TileReader

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)

#: CONCH v1.5's transform: 512 px at 0.5 µm/px, resized to 448, ImageNet mean/std.
CONCH_LIKE = EncoderConfig(
    name="conch_like_test", role="patch", hub_repo=None, hub_files=(), input_px=448,
    interpolation="bilinear", mean=MEAN, std=STD, target_mpp=0.5, patch_px=512, dim=8,
    precision="bf16")


class _Transform(Encoder):
    """The base class's preprocessing (the encoder's own transform) and a tiny random head."""

    def __init__(self) -> None:
        super().__init__(CONCH_LIKE)
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 32, stride=32)
        self.label = "conch-like transform (random weights, tests only)"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).mean(dim=(2, 3))


# 1024 level-0 px boxes on the 0.25 µm/px slide: read at DCT 1/2 (512) then resized to 448;
# tile-aligned ones, one past the slide's corner, and one at an odd (sub-pixel) offset.
ALIGNED = [(x, y, 1024, 1024) for x in (2048, 3072, 4096) for y in (1024, 2048, 3072)]
EDGE = (7680, 5632, 1024, 1024)
SUBPIXEL = (2561, 1999, 1024, 1024)


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    return (a - b).abs().max().item()


def _per_patch(path: Path, boxes: list, size: tuple[int, int]) -> np.ndarray:
    with TileReader(path) as r:
        return np.stack([r.read_region(tuple(b), size) for b in boxes])


def test_read_regions_equals_read_region(synthetic_slide: Path, cmu_small: Path) -> None:
    boxes = [*ALIGNED, EDGE, SUBPIXEL]
    order = np.random.default_rng(0).permutation(len(boxes))  # not in storage order
    shuffled = [boxes[i] for i in order]
    with TileReader(synthetic_slide) as r:
        for size in [(448, 448), (512, 512), (300, 200)]:  # resize, plain copy, other aspect
            got = r.read_regions(np.array(shuffled, float), size)
            np.testing.assert_array_equal(got, _per_patch(synthetic_slide, shuffled, size))
        # the reused mosaic buffer is refilled with white where the slide ends
        last = r.read_regions(np.array([ALIGNED[0], EDGE]), (448, 448))
        assert (last[1, -40:, -40:] == 255).all() and (last[0] < 250).any()
    # Aperio CMU: RGB-coded JPEG, unaligned 0.499 µm/px boxes (no DCT scaling)
    cmu = [(100, 130, 513, 513), (600, 130, 513, 513), (1900, 2700, 513, 513)]
    with TileReader(cmu_small) as r:
        np.testing.assert_array_equal(r.read_regions(np.array(cmu, float), (448, 448)),
                                      _per_patch(cmu_small, cmu, (448, 448)))


def test_read_regions_decodes_shared_tiles_once(synthetic_slide: Path) -> None:
    # overlapping patches (stride 512, size 1024 level-0 px) share tiles within a batch
    boxes = np.array([(x, y, 1024, 1024) for y in (2048, 2560) for x in range(2048, 4096, 512)],
                     float)
    with TileReader(synthetic_slide, cache_mb=0) as r:  # no LRU: only the batch's own reuse
        r.read_regions(boxes, (448, 448))
        needed = {t for b in boxes for t in r.tiles_for(tuple(b), 0)}
        assert r.tiles_decoded == len(needed) < 16 * len(boxes)
    with TileReader(synthetic_slide, cache_mb=64) as r:
        aligned = np.array(ALIGNED, float)  # disjoint patches: every tile used once
        r.read_regions(aligned, (448, 448))
        assert r.tiles_decoded == 16 * len(aligned)
        assert len(r._cache) == 0  # tiles used once are not put in the cache
        r.read_regions(boxes, (448, 448))
        assert len(r._cache) > 0  # shared tiles are


def test_read_regions_out_is_checked(synthetic_slide: Path) -> None:
    with TileReader(synthetic_slide) as r:
        out = np.zeros((2, 448, 448, 3), np.uint8)
        assert r.read_regions(np.array(ALIGNED[:2], float), (448, 448), out=out) is out
        assert out.any()
        with pytest.raises(ValueError, match="C-contiguous uint8"):
            r.read_regions(np.array(ALIGNED[:3], float), (448, 448), out=out)


def test_normalize_uint8_equals_encoder_normalisation() -> None:
    rng = np.random.default_rng(1)
    hwc = torch.from_numpy(rng.integers(0, 256, (3, 448, 448, 3), dtype=np.uint8))
    enc = _Transform()
    ref = enc.preprocess(hwc.permute(0, 3, 1, 2).contiguous())  # no resize at 448: normalise
    for x in (hwc.permute(0, 3, 1, 2), hwc.permute(0, 3, 1, 2).contiguous()):
        assert _max_diff(normalize_uint8(x, MEAN, STD), ref) < 1e-5
        out = torch.full((3, 3, 448, 448), float("nan"))
        assert normalize_uint8(x, MEAN, STD, out=out) is out
        assert _max_diff(out, ref) < 1e-5
    with pytest.raises(FeatureError, match="uint8"):
        normalize_uint8(hwc.permute(0, 3, 1, 2).float(), MEAN, STD)
    with pytest.raises(FeatureError, match=r"\(B, 3, H, W\)"):
        normalize_uint8(hwc, MEAN, STD)


@pytest.mark.parametrize("workers", [0, 2])
def test_stream_batches_reuses_slots_and_equals_reads(synthetic_small_slide: Path,
                                                      small_grid: TileGrid,
                                                      workers: int) -> None:
    boxes = small_grid.boxes
    ref = _per_patch(synthetic_small_slide, list(boxes), (64, 64))
    stream = PatchStream(synthetic_small_slide, boxes, 64, batch_size=2)
    starts, got, ptrs = [], [], set()
    for start, x in stream_batches(stream, workers=workers):
        assert x.dtype == torch.uint8 and x.shape[1:] == (3, 64, 64)
        starts.append(start)
        got.append(x.permute(0, 2, 3, 1).clone().numpy())
        ptrs.add(x.data_ptr())
    assert starts == list(range(0, len(boxes), 2))  # grid order
    np.testing.assert_array_equal(np.concatenate(got), ref)
    assert len(ptrs) <= 2 * workers + 2 < len(starts)  # a few slots, reused
    assert stream._ring is None
    floats = torch.cat([x.clone() for _, x in stream_batches(stream, workers=workers,
                                                              normalize=(MEAN, STD))])
    expect = normalize_uint8(torch.from_numpy(ref).permute(0, 3, 1, 2), MEAN, STD)
    assert _max_diff(floats, expect) == 0


def test_early_stop_releases_workers(synthetic_small_slide: Path, small_grid: TileGrid) -> None:
    stream = PatchStream(synthetic_small_slide, small_grid.boxes, 64, batch_size=2)
    it = stream_batches(stream, workers=2)
    next(it)
    it.close()  # consumer stops after one batch: no hang, the stream is reusable
    assert stream._ring is None
    assert sum(len(x) for _, x in stream_batches(stream, workers=0)) == len(small_grid)


def test_ring_waits_for_release_and_times_out() -> None:
    ring = SlotRing(2, 1, 4, timeout=0.05)
    assert (ring.claim(0), ring.claim(1)) == (0, 1)
    with pytest.raises(FeatureError, match="release a batch buffer"):
        ring.claim(2)  # chunk 0's slot is still held by the consumer
    ring.release(0)
    assert ring.claim(2) == 0


def test_fast_path_against_the_encoders_transform_and_the_slide_reader(
        synthetic_slide: Path) -> None:
    """Patches for a CONCH-like encoder (1024 level-0 px read at 512 px, resized 512 -> 448 in
    uint8, fused normalise) match the encoder's own float transform of the 512-px patch, and
    a read through OpenSlide."""
    enc = _Transform()
    boxes = np.array([*ALIGNED, EDGE], float)
    stream = PatchStream(synthetic_slide, boxes, 448, batch_size=4, patch_px=512)
    got = torch.cat([x.clone() for _, x in stream_batches(stream, workers=0,
                                                          normalize=(MEAN, STD))])
    # the encoder's own transform (Pillow's resize 512 -> 448, normalise) of the same pixels:
    # the only difference is torch's uint8 kernel against Pillow's, at most one grey level
    tiles512 = torch.from_numpy(_per_patch(synthetic_slide, list(boxes), (512, 512)))
    own = enc.preprocess(tiles512.permute(0, 3, 1, 2))
    assert (got - own).abs().max().item() < 1.5 / 255 / min(STD)
    # a reference read through the slide reader (OpenSlide level 0, anti-aliased to 512 px,
    # Pillow over the exact box): the same decoded pixels, so again within one grey level
    with open_slide(synthetic_slide) as s:
        ref512 = np.stack([s.read_at_mpp(tuple(b), out_size=(512, 512)) for b in boxes])
    ref = enc.preprocess(torch.from_numpy(ref512).permute(0, 3, 1, 2))
    assert (got - ref).abs().max().item() < 2.5 / 255 / min(STD)
    # the opt-in DCT-domain decode is the faster approximation the default does not use
    fast = PatchStream(synthetic_slide, boxes, 448, batch_size=4, patch_px=512, dct=True)
    approx = torch.cat([x.clone() for _, x in stream_batches(fast, workers=0,
                                                            normalize=(MEAN, STD))])
    diff = (approx - ref).abs()
    assert diff.mean().item() < 0.04  # ~2 grey levels: DCT-domain vs area downscaling
    assert diff.max().item() > 2.5 / 255 / min(STD)


def test_conch_like_features_agree_across_workers_and_batches(synthetic_slide: Path) -> None:
    enc = _Transform().eval()
    coords = np.array([b[:2] for b in ALIGNED], np.int64)
    grid = TileGrid(coords, np.ones(len(coords), np.float32), 512, 1024, 1024, 0.5, 0.25,
                    "test", 0, "synthetic", (8192, 6144))
    runs = [extract_features(synthetic_slide, grid, enc, workers=w, batch_size=b,
                             progress=False) for w, b in [(0, 9), (2, 2), (0, 4)]]
    for other in runs[1:]:
        np.testing.assert_allclose(other.features, runs[0].features, rtol=0, atol=1e-6)
    # against the encoder's own path on the 512-px patches (float resize inside the encoder)
    ref = enc.encode(_per_patch(synthetic_slide, list(grid.boxes), (512, 512)))
    np.testing.assert_allclose(runs[0].features, ref, rtol=0, atol=2e-3 * np.abs(ref).max())
