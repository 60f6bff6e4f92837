"""Encoder configs without torch: the :class:`EncoderConfig` dataclass and the built-in table.

Everything that only needs to *describe* an encoder (its Hugging Face repository, weight files,
licence, gating, input geometry) lives here, so that ``wsikit doctor`` and the weights lookup
of :mod:`wsikit.models.hub` run without importing torch (about 2 s of CPU). The model registry
(:mod:`wsikit.models.registry`, which needs torch) registers these same configs with their
builders, and encoders registered at run time are seen here through it once it is loaded::

    >>> from wsikit.models.configs import get_config, list_configs
    >>> get_config("conch_v1_5").hub_repo
    'MahmoodLab/conchv1_5'
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ModelError

if TYPE_CHECKING:
    import torch

__all__ = [
    "BUILTIN_CONFIGS",
    "CLIP_MEAN",
    "CLIP_STD",
    "CONCH_V1_5_CONFIG",
    "EncoderConfig",
    "HEURISTIC_CONFIG",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "QUILTNET_B32_CONFIG",
    "TITAN_CONFIG",
    "VIRCHOW2_CONFIG",
    "get_config",
    "list_configs",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)

Role = Literal["patch", "slide", "crop", "any"]
_PRECISION_NAMES = ("bf16", "fp16", "fp32")


@dataclass(frozen=True)
class EncoderConfig:
    """Everything needed to build, feed and cite one encoder.

    Attributes
    ----------
    name : str
        Registry name (``conch_v1_5``, ``virchow2``, ``titan``, ``heuristic``).
    role : {"patch", "slide", "crop", "any"}
        What the encoder is for; ``any`` works for patches, crops and figures.
    hub_repo : str or None
        Hugging Face repository holding the weights (None for weight-free encoders).
    hub_files : tuple of str
        Candidate weight files in ``hub_repo``, tried in order.
    input_px : int
        Side of the square network input after resize and centre crop.
    interpolation : {"bilinear", "bicubic", "area"}
        Resize filter applied on the device.
    mean, std : tuple of float
        Per-channel normalisation of [0, 1] RGB.
    target_mpp : float
        Resolution (µm/px) the encoder expects its patches at.
    patch_px : int
        Patch side (px at ``target_mpp``) to extract before resizing to ``input_px``.
    dim : int
        Output embedding dimension.
    precision : {"bf16", "fp16", "fp32"}
        Default autocast precision on CUDA (CPU runs float32 unless asked); weights are
        never cast.
    license : str
        Licence of the published weights.
    gated : bool
        Whether the weights need an access request on Hugging Face.
    heuristic : bool
        True for weight-free encoders.
    state_prefix : str
        Prefix of this model's keys in the published checkpoint (stripped on load).
    description : str
        One line for ``wsikit models``.
    """

    name: str
    role: Role
    hub_repo: str | None
    hub_files: tuple[str, ...]
    input_px: int
    interpolation: str
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    target_mpp: float
    patch_px: int
    dim: int
    precision: str = "fp32"
    license: str = "Apache-2.0"
    gated: bool = False
    heuristic: bool = False
    state_prefix: str = ""
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON view of the config."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @property
    def torch_dtype(self) -> torch.dtype:
        """The torch dtype of :attr:`precision` (imports torch)."""
        import torch

        if self.precision not in _PRECISION_NAMES:
            raise ModelError(f"{self.name}: precision={self.precision!r} is not one of "
                             f"{list(_PRECISION_NAMES)}")
        return {"bf16": torch.bfloat16, "fp16": torch.float16,
                "fp32": torch.float32}[self.precision]


_NC_ND = "CC-BY-NC-ND-4.0"

HEURISTIC_CONFIG = EncoderConfig(
    name="heuristic", role="any", hub_repo=None, hub_files=(),
    input_px=128,  # nominal: the embedding analyses 128-256 px itself (heuristic._MIN_PX/_MAX_PX)
    interpolation="area", mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0), target_mpp=0.5,
    patch_px=512, dim=64, precision="fp32", license="Apache-2.0", gated=False, heuristic=True,
    description="weight-free colour-deconvolution + intensity/texture statistics (64-d)")

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

#: The vision-language tower of :mod:`wsikit.models.clip_vl` (extra ``[vlm]``).
QUILTNET_B32_CONFIG = EncoderConfig(
    name="quiltnet_b32", role="any", hub_repo="wisdomik/QuiltNet-B-32",
    hub_files=("open_clip_pytorch_model.bin", "open_clip_model.safetensors"), input_px=224,
    interpolation="bicubic", mean=CLIP_MEAN, std=CLIP_STD, target_mpp=0.5, patch_px=224,
    dim=512, precision="fp16", license="MIT", gated=False,
    description="QuiltNet-B-32 (open_clip ViT-B/32 CLIP on Quilt-1M, MIT): image and text "
                "towers in one 512-d space")

#: name -> config of every encoder wsikit ships (the registry registers each with a builder).
BUILTIN_CONFIGS: dict[str, EncoderConfig] = {c.name: c for c in (
    HEURISTIC_CONFIG, CONCH_V1_5_CONFIG, VIRCHOW2_CONFIG, TITAN_CONFIG, QUILTNET_B32_CONFIG)}


def _loaded_registry() -> Any:
    """The model registry module if something already imported it (it then also knows the
    encoders registered at run time), else None; never imports it (that would import torch)."""
    return sys.modules.get(f"{__package__}.registry")


def list_configs() -> list[EncoderConfig]:
    """Configs of every known encoder, sorted by name: the registry's when it is loaded
    (built-ins plus any :func:`~wsikit.models.register_encoder` added), else the built-ins."""
    registry = _loaded_registry()
    if registry is not None:
        return [registry.get_config(n) for n in registry.list_encoders()]
    return [BUILTIN_CONFIGS[n] for n in sorted(BUILTIN_CONFIGS)]


def get_config(name: str) -> EncoderConfig:
    """The :class:`EncoderConfig` of encoder ``name`` (torch-free unless the registry is
    already loaded); :class:`~wsikit.errors.ModelError` naming the choices if unknown."""
    registry = _loaded_registry()
    if registry is not None:
        return registry.get_config(name)
    try:
        return BUILTIN_CONFIGS[name]
    except KeyError:
        raise ModelError(f"unknown encoder {name!r}; choose one of {sorted(BUILTIN_CONFIGS)} "
                         "(or 'auto')") from None
