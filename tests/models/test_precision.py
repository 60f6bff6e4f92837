"""Precision policy: float32 weights, reduced precision by autocast only, recorded; CONCH v1.5
run-time position embedding."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from wsikit.errors import ModelError
from wsikit.models import Encoder, create_encoder, get_config
from wsikit.models.conch import ConchTrunk, interpolate_pos_embed
from wsikit.models.registry import resolve_precision


def test_precision_defaults_and_weights_never_cast() -> None:
    assert resolve_precision(None, "cpu") == "fp32"
    assert resolve_precision(None, "cuda") == "fp16"  # the reference's CUDA default
    assert resolve_precision(torch.bfloat16, "cpu") == "bf16"
    with pytest.raises(ModelError, match="fp8"):
        resolve_precision("fp8", "cpu")
    for kw, want in (({}, "fp32"), ({"precision": "bf16"}, "bf16"), ({"dtype": "fp16"}, "fp16"),
                     ({"dtype": torch.bfloat16}, "bf16")):
        m = create_encoder("titan", weights="random", **kw)
        assert m.precision == want
        assert {p.dtype for p in m.parameters()} == {torch.float32}


class _Probe(Encoder):
    """Records the autocast state its forward runs under."""

    def __init__(self) -> None:
        cfg = get_config("conch_v1_5")
        super().__init__(type(cfg)(**{**cfg.__dict__, "input_px": 32, "name": "probe"}))
        self.lin = torch.nn.Linear(3, 4)
        self.seen: list[tuple[bool, torch.dtype]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x.mean(dim=(2, 3)))
        self.seen.append((torch.is_autocast_enabled("cpu"), y.dtype))
        return y


def test_encode_runs_the_network_under_autocast_in_its_precision() -> None:
    enc = _Probe().eval()
    img = np.random.default_rng(0).integers(0, 256, (2, 40, 50, 3), dtype=np.uint8)
    out32 = enc.encode(img)
    enc.precision = "bf16"
    out16 = enc.encode(img)
    assert enc.seen == [(False, torch.float32), (True, torch.bfloat16)]
    assert out16.dtype == np.float32 and enc.lin.weight.dtype == torch.float32
    assert np.abs(out16 - out32).max() < 0.05


def test_conch_pos_embed_uses_the_plus_0_1_scale_factor() -> None:
    pe = torch.randn(1, 197, 8, generator=torch.Generator().manual_seed(0))
    got = interpolate_pos_embed(pe, (28, 28))
    assert got.shape == (1, 785, 8) and torch.equal(got[:, 0], pe[:, 0])
    grid = pe[:, 1:].reshape(1, 14, 14, 8).permute(0, 3, 1, 2)
    # independent: source coordinate of output pixel i is (i + 0.5) * 14 / 28.1 - 0.5
    want = F.interpolate(grid, scale_factor=28.1 / 14, mode="bicubic", align_corners=False)
    want = want.permute(0, 2, 3, 1).reshape(1, 784, 8)
    torch.testing.assert_close(got[:, 1:], want)
    exact = F.interpolate(grid, size=(28, 28), mode="bicubic", align_corners=False)
    exact = exact.permute(0, 2, 3, 1).reshape(1, 784, 8)
    assert (got[:, 1:] - exact).abs().max() > 1e-3  # not an exact 28x28 resize
    assert interpolate_pos_embed(pe, (14, 14)).data_ptr() == pe.data_ptr()


def test_conch_pos_embed_is_cached_per_input_size() -> None:
    trunk = ConchTrunk(img_size=64, patch_size=16, embed_dim=32, depth=1, num_heads=2,
                       num_classes=0, global_pool="", dynamic_img_size=True).eval()
    with torch.no_grad():
        a = trunk._interpolated(8, 8, torch.float32)
        assert trunk._interpolated(8, 8, torch.float32) is a
        b = trunk._interpolated(6, 8, torch.float32)
        assert b.shape == (1, 49, 32) and b is not a
        trunk.pos_embed.add_(1.0)  # new weights invalidate the cache
        assert not torch.equal(trunk._interpolated(8, 8, torch.float32), a)
        x = torch.zeros(1, 3, 128, 96)
        assert trunk.forward_features(x).shape == (1, 1 + 8 * 6, 32)
