"""Test-only encoder with a real weight file: ``tiny_test`` (a 3→4 linear map of the mean colour).

Imported by the tests and, as ``--plugin``, by the batch workers, so that the run manifest's
weight checksum and the resume rule "weights changed → redo features" can be tested without a
multi-gigabyte foundation model. Never a model output: it exists for bookkeeping tests.
"""

from __future__ import annotations

import torch

from wsikit.models.configs import EncoderConfig
from wsikit.models.registry import Encoder, register_encoder

CONFIG = EncoderConfig(name="tiny_test", role="patch", hub_repo="wsikit-tests/tiny",
                       hub_files=("tiny.pt",), input_px=16, interpolation="bilinear",
                       mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25), target_mpp=0.5,
                       patch_px=256, dim=4, description="test-only linear encoder")


class TinyEncoder(Encoder):
    def __init__(self, config: EncoderConfig) -> None:
        super().__init__(config)
        self.proj = torch.nn.Linear(3, config.dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x.mean(dim=(2, 3)))


def write_weights(path, seed: int) -> None:
    """A state dict for :class:`TinyEncoder` drawn with ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    torch.save({"proj.weight": torch.randn(4, 3, generator=gen),
                "proj.bias": torch.randn(4, generator=gen)}, path)


register_encoder(CONFIG, TinyEncoder)
