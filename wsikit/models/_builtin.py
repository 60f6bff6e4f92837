"""Registers the built-in encoders (imported once by the registry)."""

from __future__ import annotations

import torch

from .heuristic import HEURISTIC_CONFIG, HeuristicEncoder
from .registry import IMAGENET_MEAN, IMAGENET_STD, EncoderConfig, register_encoder

_NC_ND = "CC-BY-NC-ND-4.0"

CONCH_V1_5_CONFIG = EncoderConfig(
    name="conch_v1_5", role="patch", hub_repo="MahmoodLab/conchv1_5",
    hub_files=("pytorch_model_vision.bin",), input_px=448, interpolation="bilinear",
    mean=IMAGENET_MEAN, std=IMAGENET_STD, target_mpp=0.5, patch_px=512, dim=768,
    precision="fp16", license=_NC_ND, gated=True,
    description="CONCH v1.5 ViT-L/16 + attentional pooler (patch features for TITAN)")

VIRCHOW2_CONFIG = EncoderConfig(
    name="virchow2", role="crop", hub_repo="paige-ai/Virchow2",
    hub_files=("model.safetensors", "pytorch_model.bin"), input_px=224,
    interpolation="bicubic", mean=IMAGENET_MEAN, std=IMAGENET_STD, target_mpp=0.5,
    patch_px=224, dim=2560, precision="fp16", license=_NC_ND, gated=True,
    description="Virchow2 ViT-H/14 + 4 registers (class token ⊕ mean patch token, 2560-d)")

TITAN_CONFIG = EncoderConfig(
    name="titan", role="slide", hub_repo="MahmoodLab/TITAN", hub_files=("model.safetensors",),
    input_px=448, interpolation="bilinear", mean=IMAGENET_MEAN, std=IMAGENET_STD,
    target_mpp=0.5, patch_px=512, dim=768, precision="fp16", license=_NC_ND, gated=True,
    state_prefix="vision_encoder.",
    description="TITAN slide encoder over CONCH v1.5 features (slide embedding + attention)")


def _build_conch(config: EncoderConfig) -> torch.nn.Module:
    from .conch import ConchV15

    return ConchV15(config)


def _build_virchow2(config: EncoderConfig) -> torch.nn.Module:
    from .virchow import Virchow2

    return Virchow2(config)


def _build_titan(config: EncoderConfig) -> torch.nn.Module:
    from .titan import Titan

    return Titan(config)


register_encoder(HEURISTIC_CONFIG, HeuristicEncoder)
register_encoder(CONCH_V1_5_CONFIG, _build_conch)
register_encoder(VIRCHOW2_CONFIG, _build_virchow2)
register_encoder(TITAN_CONFIG, _build_titan)

from .clip_vl import QUILTNET_B32_CONFIG, build_quiltnet  # noqa: E402 - VL tower, extra [vlm]

register_encoder(QUILTNET_B32_CONFIG, build_quiltnet)
