"""Fixtures for the feature-extraction tests: a small slide, its grid and tiny encoders."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from wsikit.models import Encoder, EncoderConfig
from wsikit.patches.grid import TileGrid, make_grid
from wsikit.slide import open_slide
from wsikit.tissue.mask import segment_tissue


@pytest.fixture(scope="module")
def small_grid(synthetic_small_slide: Path) -> TileGrid:
    """~40 patches of 256 px at 0.5 µm/px on the 2048×1536 synthetic slide."""
    with open_slide(synthetic_small_slide) as s:
        grid = make_grid(s, segment_tissue(s), target_mpp=0.5, patch_px=256)
    assert len(grid) >= 20
    return grid


TINY_CONFIG = EncoderConfig(
    name="tiny_test_cnn", role="patch", hub_repo=None, hub_files=(), input_px=64,
    interpolation="bilinear", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
    target_mpp=0.5, patch_px=256, dim=16, precision="bf16")


class TinyEncoder(Encoder):
    """A small random CNN (fixed seed) that goes through the base class's preprocessing."""

    def __init__(self) -> None:
        super().__init__(TINY_CONFIG)
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 16, 8, stride=8)
        self.label = "tiny_test_cnn (random weights, tests only)"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).mean(dim=(2, 3))


@pytest.fixture()
def tiny_encoder() -> TinyEncoder:
    return TinyEncoder().eval()
