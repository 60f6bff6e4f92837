"""``autocast_for``: float32 runs are float32 on CUDA (TF32 off), untouched on a CPU."""

from __future__ import annotations

import torch

from wsikit.models.registry import autocast_for


def test_fp32_context_turns_tf32_off_and_restores() -> None:
    """The flags are process-wide settings, so this runs without a GPU."""
    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = True
    try:
        with autocast_for("cuda", "fp32"):
            assert not torch.backends.cudnn.allow_tf32
            assert not torch.backends.cuda.matmul.allow_tf32
        assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32
        with autocast_for("cpu", "fp32"):
            assert torch.backends.cudnn.allow_tf32  # a CPU run leaves them alone
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before
