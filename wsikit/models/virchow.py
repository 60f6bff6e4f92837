"""Virchow2 (clean-room configuration of timm's ViT-H/14 with 4 register tokens).

``timm`` ``vit_huge_patch14_224`` with ``reg_tokens=4``, ``mlp_ratio=5.3375``,
``mlp_layer=SwiGLUPacked``, ``act_layer=SiLU``, ``init_values=1e-5``, ``global_pool=""``,
``dynamic_img_size=True``; 224 px bicubic input with ImageNet mean/std. The embedding is
2560-d: the class token (token 0) concatenated with the mean of the patch tokens (tokens 5:,
after the 4 registers).
"""

from __future__ import annotations

from typing import cast

import timm
import torch
from timm.layers import SwiGLUPacked
from timm.models.vision_transformer import VisionTransformer

from .configs import EncoderConfig
from .registry import Encoder

__all__ = ["Virchow2"]


class Virchow2(Encoder):
    """Virchow2 crop/figure encoder: ``(B, 3, 224, 224)`` normalised -> ``(B, 2560)``."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__(config)
        # create_model is typed as returning nn.Module; this name builds a VisionTransformer
        self.model = cast(VisionTransformer, timm.create_model(
            "vit_huge_patch14_224", pretrained=False, img_size=config.input_px,
            num_classes=0, reg_tokens=4, mlp_ratio=5.3375, mlp_layer=SwiGLUPacked,
            act_layer=torch.nn.SiLU, init_values=1e-5, global_pool="", dynamic_img_size=True))

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        # published keys have no "model." prefix
        return self.model.load_state_dict(state_dict, strict=strict, assign=assign)

    def state_dict(self, *args, **kwargs):
        return self.model.state_dict(*args, **kwargs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.model.forward_features(x)  # (B, 5 + patches, 1280)
        return torch.cat([tokens[:, 0], tokens[:, 5:].mean(dim=1)], dim=-1)
