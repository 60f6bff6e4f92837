"""Test-only image-text "tower" ``stain_tower_test`` whose similarity is a known function of the
pixels, so a prompt's heatmap and a question's steering can be checked on real pixels.

Image embedding: the fractions of a patch's pixels that are nuclear purple (red below 0.6),
pink stroma (red above 0.8, green below 0.75) and glass (every channel above 0.9). Text
embedding: a prompt naming nuclei points at the first axis, one naming stroma at the second,
anything else at the third. The cosine of a patch to "dense nuclei" is therefore its nuclear
fraction over the length of its colour vector: highest where nuclei are packed. A weight-free
test device (it has no weights), never a model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from wsikit.models.configs import EncoderConfig
from wsikit.models.registry import Encoder, register_encoder

NAME = "stain_tower_test"
CONFIG = EncoderConfig(name=NAME, role="any", hub_repo=None, hub_files=(), input_px=64,
                       interpolation="bilinear", mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0),
                       target_mpp=0.5, patch_px=256, dim=3, heuristic=True,
                       description="test-only stain-colour tower (weight-free)")


class StainTower(Encoder):
    """Colour fractions as the image embedding, keywords as the text embedding."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r, g, b = x[:, 0], x[:, 1], x[:, 2]
        nuclear = (r < 0.6).float().mean(dim=(1, 2))
        stroma = ((r > 0.8) & (g < 0.75)).float().mean(dim=(1, 2))
        glass = ((r > 0.9) & (g > 0.9) & (b > 0.9)).float().mean(dim=(1, 2))
        return torch.stack([nuclear, stroma, glass], dim=1)

    def encode_text(self, texts: Sequence[str]) -> np.ndarray:
        out = []
        for t in [texts] if isinstance(texts, str) else texts:
            t = t.lower()
            out.append([1.0, 0.0, 0.0] if "nucle" in t else [0.0, 1.0, 0.0]
                       if "stroma" in t else [0.0, 0.0, 1.0])
        return np.asarray(out, np.float32)


def register() -> None:
    """Register the tower (idempotent)."""
    register_encoder(CONFIG, StainTower)
