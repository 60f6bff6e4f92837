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
    "CONCH_V1_5_CONFIG",
    "EncoderConfig",
    "HEURISTIC_CONFIG",
    "QUILTNET_B32_CONFIG",
    "QUILTNET_B16_CONFIG",
    "TITAN_CONFIG",
    "VIRCHOW2_CONFIG",
    "ZOO_CONFIGS",
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
    arch : str
        The network, ``"timm:<model name>"`` (built by :mod:`wsikit.models.zoo` with
        :attr:`arch_kwargs`), ``"open_clip:<model name>"``, or ``""`` for a module of its own.
    arch_kwargs : tuple of (str, value) pairs
        Keyword arguments of the architecture, as published: timm's for the ``timm`` layouts
        (``mlp_layer="swiglu_packed"`` and ``act_layer="silu"`` name timm's ``SwiGLUPacked``
        and ``torch.nn.SiLU``); for the transformers layouts the fields of the published
        ``config.json`` (``hidden_size``, ``num_hidden_layers``, ...), mapped to timm's.
    layout : str
        Key layout of the published weight file, mapped to the network's on load:
        ``timm``, ``hf_vit`` (transformers ``ViTModel``), ``hf_dinov2`` (``Dinov2Model``),
        ``hf_dinov2_reg`` (``Dinov2WithRegistersModel``), ``hf_clip`` (``CLIPModel``: vision
        tower and ``visual_projection``), ``open_clip``, ``timm_resnet``, ``own``.
    pooling : str
        Output: ``cls`` (class token after the final norm), ``cls+mean`` (class token ⊕ mean of
        the patch tokens, registers skipped), ``mean``, ``avgpool`` (CNN), ``own``.
    resize_px : int or None
        Shorter side the image is resized to before the centre crop of ``input_px`` (None:
        ``input_px``, i.e. a plain resize for square patches).
    crop : bool
        Whether the reference transform centre-crops (False: resize only; identical for the
        square patches wsikit feeds, and wsikit centre-crops non-square images).
    hub_url, sha256 : str or None
        A direct download URL and its SHA-256, for weights published outside the hub.
    hf_config : str or None
        A model config file published beside the weights (``config.json``), read when present
        so that the architecture follows the file (see :mod:`wsikit.models.zoo`).
    commercial_use : bool or None
        Whether the weights' licence allows commercial use (None: not stated; read it).
    reference : str
        The reference loader its golden test compares against.
    source : str
        Where the weight files, licence, gating and training facts of this entry were read
        (model cards, hub file lists, reference loaders that never read this table), and what
        is still unverified.
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
    arch: str = ""
    arch_kwargs: tuple[tuple[str, Any], ...] = ()
    layout: str = "own"
    pooling: str = "own"
    resize_px: int | None = None
    crop: bool = True
    hub_url: str | None = None
    sha256: str | None = None
    hf_config: str | None = None
    commercial_use: bool | None = None
    reference: str = ""
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON view of the config."""
        out: dict[str, Any] = {}
        for k, v in self.__dict__.items():
            if k == "arch_kwargs":
                v = dict(v)
            out[k] = list(v) if isinstance(v, tuple) else v
        out["open"] = not self.gated
        return out

    @property
    def kwargs(self) -> dict[str, Any]:
        """:attr:`arch_kwargs` as a dict."""
        return dict(self.arch_kwargs)

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

#: The weight-free heuristic encoder (64-d colour-deconvolution and texture statistics).
HEURISTIC_CONFIG = EncoderConfig(
    name="heuristic", role="any", hub_repo=None, hub_files=(),
    input_px=128,  # nominal: the embedding analyses 128-256 px itself (heuristic._MIN_PX/_MAX_PX)
    interpolation="area", mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0), target_mpp=0.5,
    patch_px=512, dim=64, precision="fp32", license="Apache-2.0", gated=False, heuristic=True,
    description="weight-free colour-deconvolution + intensity/texture statistics (64-d)")

#: CONCH v1.5, the vision tower (768-d).
CONCH_V1_5_CONFIG = EncoderConfig(
    name="conch_v1_5", role="patch", hub_repo="MahmoodLab/conchv1_5",
    hub_files=("pytorch_model_vision.bin",), input_px=448, interpolation="bilinear",
    mean=IMAGENET_MEAN, std=IMAGENET_STD, target_mpp=0.5, patch_px=512, dim=768,
    precision="fp16", license=_NC_ND, gated=True,
    description="CONCH v1.5 ViT-L/16 + attentional pooler (patch features for TITAN)",
    commercial_use=False, reference="TRIDENT's CONCH v1.5 tower (tests/data/golden)",
    source="file: TRIDENT's loader (hf_hub MahmoodLab/conchv1_5, pytorch_model_vision.bin); "
           "licence and gating: the hub page's access conditions (CC-BY-NC-ND 4.0)")

#: Virchow2 (class token and mean patch token, 2560-d).
VIRCHOW2_CONFIG = EncoderConfig(
    name="virchow2", role="crop", hub_repo="paige-ai/Virchow2",
    hub_files=("model.safetensors", "pytorch_model.bin"), input_px=224,
    interpolation="bicubic", mean=IMAGENET_MEAN, std=IMAGENET_STD, target_mpp=0.5,
    patch_px=224, dim=2560, precision="fp16", license=_NC_ND, gated=True,
    description="Virchow2 ViT-H/14 + 4 registers (class token ⊕ mean patch token, 2560-d)",
    arch="timm:vit_huge_patch14_224", layout="timm", pooling="cls+mean", commercial_use=False,
    reference="timm vit_huge_patch14_224 with the card's arguments (tests/data/golden)",
    source="licence and gating: huggingface.co/paige-ai/Virchow2 access conditions "
           "(CC-BY-NC-ND 4.0, institutional approval); kaiko-ai/eva logs in for it")

#: TITAN, the slide encoder over CONCH v1.5 patch features.
TITAN_CONFIG = EncoderConfig(
    name="titan", role="slide", hub_repo="MahmoodLab/TITAN", hub_files=("model.safetensors",),
    input_px=448, interpolation="bilinear", mean=IMAGENET_MEAN, std=IMAGENET_STD,
    target_mpp=0.5, patch_px=512, dim=768, precision="fp16", license=_NC_ND, gated=True,
    state_prefix="vision_encoder.",
    description="TITAN slide encoder over CONCH v1.5 features (slide embedding + attention)",
    commercial_use=False, reference="TITAN's published modeling code (tests/data/golden)",
    source="TITAN's hub card (gated, CC-BY-NC-ND 4.0, model.safetensors)")

#: The vision-language tower of :mod:`wsikit.models.clip_vl` (extra ``[vlm]``).
QUILTNET_B32_CONFIG = EncoderConfig(
    name="quiltnet_b32", role="any", hub_repo="wisdomik/QuiltNet-B-32",
    hub_files=("open_clip_pytorch_model.bin", "open_clip_model.safetensors"), input_px=224,
    interpolation="bicubic", mean=CLIP_MEAN, std=CLIP_STD, target_mpp=0.5, patch_px=224,
    dim=512, precision="fp16", license="MIT", gated=False,
    description="QuiltNet-B-32 (open_clip ViT-B/32 CLIP on Quilt-1M, MIT): image and text "
                "towers in one 512-d space", arch="open_clip:ViT-B-32", layout="open_clip",
    pooling="own", hf_config="open_clip_config.json", commercial_use=True,
    reference="open_clip CLIP(**model_cfg).encode_image",
    source="the wisdomik/QuiltNet-B-32 card (MIT, open_clip files)")

#: QuiltNet-B-16, the same tower at patch 16 (open_clip ``ViT-B-16``).
QUILTNET_B16_CONFIG = EncoderConfig(
    name="quiltnet_b16", role="any", hub_repo="wisdomik/QuiltNet-B-16",
    hub_files=("open_clip_pytorch_model.bin", "open_clip_model.safetensors"), input_px=224,
    interpolation="bicubic", mean=CLIP_MEAN, std=CLIP_STD, target_mpp=0.5, patch_px=224,
    dim=512, precision="fp16", license="MIT", gated=False,
    description="QuiltNet-B-16 (open_clip ViT-B/16 CLIP on Quilt-1M, MIT): image and text "
                "towers in one 512-d space", arch="open_clip:ViT-B-16", layout="open_clip",
    pooling="own", hf_config="open_clip_config.json", commercial_use=True,
    reference="open_clip CLIP(**model_cfg).encode_image",
    source="the wisdomik/QuiltNet-B-16 card (MIT, open_clip files)")

HOPT_MEAN = (0.707223, 0.578729, 0.703617)
HOPT_STD = (0.211883, 0.230117, 0.177517)
HIBOU_MEAN = (0.7068, 0.5755, 0.722)
HIBOU_STD = (0.195, 0.2316, 0.1816)
HALF = (0.5, 0.5, 0.5)
LUNIT_MEAN = (0.70322989, 0.53606487, 0.66096631)
LUNIT_STD = (0.21716536, 0.26081574, 0.20723464)

_SWIGLU = (("mlp_layer", "swiglu_packed"), ("act_layer", "silu"))
_TIMM_REF = "timm.create_model(arch, pretrained=False, **arch_kwargs) + the card's pooling"


def _zoo(name: str, arch: str, kwargs: tuple[tuple[str, Any], ...], *, repo: str,
         files: tuple[str, ...], dim: int, license: str, gated: bool,
         commercial: bool | None, description: str, mean: tuple[float, float, float] = (
             IMAGENET_MEAN), std: tuple[float, float, float] = IMAGENET_STD,
         input_px: int = 224, interpolation: str = "bilinear", pooling: str = "cls",
         layout: str = "timm", role: Role = "patch", patch_px: int = 224,
         target_mpp: float = 0.5, resize_px: int | None = None, crop: bool = True,
         hf_config: str | None = None, reference: str = _TIMM_REF,
         precision: str = "fp16", source: str = "") -> EncoderConfig:
    """One zoo entry (a network :mod:`wsikit.models.zoo` builds from ``arch``)."""
    return EncoderConfig(
        name=name, role=role, hub_repo=repo, hub_files=files, input_px=input_px,
        interpolation=interpolation, mean=mean, std=std, target_mpp=target_mpp,
        patch_px=patch_px, dim=dim, precision=precision, license=license, gated=gated,
        description=description, arch=arch, arch_kwargs=kwargs, layout=layout,
        pooling=pooling, resize_px=resize_px, crop=crop, hf_config=hf_config,
        commercial_use=commercial, reference=reference, source=source)


def _hf(**fields: Any) -> tuple[tuple[str, Any], ...]:
    """The published transformers ``config.json`` fields that shape the network (the
    entry's defaults; a config.json beside the weights overrides them)."""
    return tuple(fields.items())


_CLIP_B32 = _hf(model_type="clip", projection_dim=512, vision_config={
        "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
        "intermediate_size": 3072, "patch_size": 32, "image_size": 224,
        "hidden_act": "quick_gelu", "layer_norm_eps": 1e-5, "projection_dim": 512})
_ST_BIN = ("model.safetensors", "pytorch_model.bin")
_BIN_ST = ("pytorch_model.bin", "model.safetensors")
_HF_VIT_REF = "transformers ViTModel(config, add_pooling_layer=False): last_hidden_state[:, 0]"
_HF_DINO_REF = "transformers Dinov2Model(config): last_hidden_state"
_HF_REG_REF = "transformers Dinov2WithRegistersModel(config): pooler_output"
_HF_CLIP_REF = ("transformers CLIPModel(config).get_image_features (texts: get_text_features "
                "of CLIPTokenizer ids)")
#: The licence of the kaiko.ai weights: the kaiko-non-commercial licence the 1aurent timm port's
#: card names (license_link: the LICENSE of github.com/kaiko-ai/towards_large_pathology_fms).
_KAIKO_LICENSE = ("other (Kaiko Non-Commercial Public License v1, May 2024: the LICENSE of "
                  "github.com/kaiko-ai/towards_large_pathology_fms, named by the 1aurent timm "
                  "port's card)")

#: The model zoo: published pathology (and baseline) encoders built by :mod:`wsikit.models.zoo`.
ZOO_CONFIGS: tuple[EncoderConfig, ...] = (
    _zoo("h_optimus_0", "timm:vit_giant_patch14_reg4_dinov2",
         (("img_size", 224), ("init_values", 1e-5), ("dynamic_img_size", True)),
         repo="bioptimus/H-optimus-0", files=("pytorch_model.bin",), dim=1536,
         license="Apache-2.0", gated=False, commercial=True, mean=HOPT_MEAN, std=HOPT_STD,
         description="H-optimus-0 ViT-g/14 + 4 registers (Bioptimus; class token, 1536-d)",
         source="files: the hub's file list at 5fb2bee (config.json, pytorch_model.bin 4.54 GB; "
                "no safetensors; later commits edit the README only); licence: the card "
                "(apache-2.0); not gated: the hub page shows no access conditions and "
                "kaiko-ai/eva loads it without a token (its card still asks for a hub login)"),
    _zoo("h_optimus_1", "timm:vit_giant_patch14_reg4_dinov2",
         (("img_size", 224), ("init_values", 1e-5), ("dynamic_img_size", True)),
         repo="bioptimus/H-optimus-1", files=_ST_BIN, dim=1536, license=_NC_ND,
         gated=True, commercial=False, mean=HOPT_MEAN, std=HOPT_STD,
         description="H-optimus-1 ViT-g/14 + 4 registers (Bioptimus; class token, 1536-d)",
         source="licence and gating: the hub page's access conditions (CC-BY-NC-ND 4.0, "
                "non-commercial academic use, institutional email); files unverified (timm "
                "tries model.safetensors, then pytorch_model.bin)"),
    _zoo("h0_mini", "timm:vit_base_patch14_reg4_dinov2",
         (("img_size", 224), *_SWIGLU, ("dynamic_img_size", True)),
         repo="bioptimus/H0-mini", files=_ST_BIN, dim=768, license=_NC_ND, gated=True,
         commercial=False, mean=HOPT_MEAN, std=HOPT_STD, interpolation="bicubic",
         description="H0-mini ViT-B/14 + 4 registers, SwiGLU (distilled from H-optimus-0; "
                     "class token, 768-d)",
         source="distilled from H-optimus-0: kaiko-ai/eva's loader (bioptimus.py, 'distilled "
                "from H-Optimus-0 on 40M TCGA tiles') and arXiv 2501.16239; gated: access "
                "requests on its hub page, eva logs in for it; files: the hub lists PyTorch and "
                "Safetensors; licence CC-BY-NC-ND 4.0 as H-optimus-1 (its card not read)"),
    _zoo("uni", "timm:vit_large_patch16_224",
         (("img_size", 224), ("patch_size", 16), ("init_values", 1e-5),
          ("dynamic_img_size", True)),
         repo="MahmoodLab/UNI", files=("pytorch_model.bin",), dim=1024, license=_NC_ND,
         gated=True, commercial=False,
         description="UNI ViT-L/16 (Mahmood Lab; class token, 1024-d)",
         source="licence and gating: the card's 'License and Terms of Use' (CC-BY-NC-ND 4.0, "
                "registration and approval); file: TRIDENT's loader"),
    _zoo("uni2_h", "timm:vit_giant_patch14_224",
         (("img_size", 224), ("patch_size", 14), ("depth", 24), ("num_heads", 24),
          ("init_values", 1e-5), ("embed_dim", 1536), ("mlp_ratio", 2.66667 * 2),
          ("no_embed_class", True), *_SWIGLU, ("reg_tokens", 8), ("dynamic_img_size", True)),
         repo="MahmoodLab/UNI2-h", files=("pytorch_model.bin",), dim=1536, license=_NC_ND,
         gated=True, commercial=False,
         description="UNI2-h ViT-H/14 + 8 registers, SwiGLU (Mahmood Lab; class token, "
                     "1536-d)",
         source="gated: kaiko-ai/eva logs in for it; licence as UNI (the card not read); "
                "file: TRIDENT's loader"),
    _zoo("virchow", "timm:vit_huge_patch14_224",
         (("img_size", 224), ("init_values", 1e-5), ("mlp_ratio", 5.3375), *_SWIGLU,
          ("dynamic_img_size", True)),
         repo="paige-ai/Virchow", files=_ST_BIN, dim=2560, license="Apache-2.0", gated=True,
         commercial=True, interpolation="bicubic", pooling="cls+mean",
         description="Virchow ViT-H/14, SwiGLU (Paige; class token ⊕ mean patch token, "
                     "2560-d)",
         source="licence and gating: huggingface.co/paige-ai/Virchow (Apache 2.0 with "
                "additional terms; access conditions, institutional email)"),
    _zoo("prov_gigapath", "timm:vit_giant_patch14_dinov2",
         (("img_size", 224), ("in_chans", 3), ("patch_size", 16), ("embed_dim", 1536),
          ("depth", 40), ("num_heads", 24), ("mlp_ratio", 5.33334),
          ("dynamic_img_size", True)),
         repo="prov-gigapath/prov-gigapath", files=("pytorch_model.bin",), dim=1536,
         license="Apache-2.0 (the access form asks for non-commercial research use)",
         gated=True, commercial=None, interpolation="bicubic", resize_px=256, patch_px=256,
         description="Prov-GigaPath tile encoder ViT-g/16 (Providence/Microsoft; class "
                     "token, 1536-d; resize 256 + centre crop 224)",
         source="gated: huggingface.co/prov-gigapath/prov-gigapath ('agree to share your "
                "contact information'); licence: Apache-2.0 in the repository, but the access "
                "form's condition 'non-commercial, research purposes only' (asked about on "
                "the hub, prov-gigapath-flash discussion 1): commercial use not stated"),
    *(_zoo(f"kaiko_{tag}", f"timm:{arch}",
           (("img_size", img), ("dynamic_img_size", True)),
           repo=f"1aurent/{arch}.kaiko_ai_towards_large_pathology_fms",
           files=("model.safetensors",), dim=dim, license=_KAIKO_LICENSE, gated=False,
           commercial=False, mean=HALF, std=HALF,
           description=f"kaiko.ai {label} (DINO{'v2' if tag == 'vitl14' else ''} on "
                       f"TCGA; class token, {dim}-d)",
           source="licence: the 1aurent port's card (license_name kaiko-non-commercial, "
                  "linking the LICENSE of kaiko-ai/towards_large_pathology_fms); kaiko-ai/eva "
                  "loads the originals through torch.hub")
      for tag, arch, img, dim, label in (
          ("vits16", "vit_small_patch16_224", 224, 384, "ViT-S/16"),
          ("vits8", "vit_small_patch8_224", 224, 384, "ViT-S/8"),
          ("vitb16", "vit_base_patch16_224", 224, 768, "ViT-B/16"),
          ("vitb8", "vit_base_patch8_224", 224, 768, "ViT-B/8"),
          ("vitl14", "vit_large_patch14_reg4_dinov2", 518, 1024, "ViT-L/14 + 4 registers"))),
    *(_zoo(f"lunit_{tag}", f"timm:{arch}", (("img_size", 224), ("dynamic_img_size", True)),
           repo=f"1aurent/{arch}.lunit_dino", files=("model.safetensors",), dim=384,
           license="other (Lunit, non-commercial)", gated=False, commercial=False,
           mean=LUNIT_MEAN, std=LUNIT_STD, interpolation="bicubic",
           description=f"Lunit DINO {label} (Lunit benchmark SSL; class token, 384-d)",
           source="originals: release assets of github.com/lunit-io/benchmark-ssl-pathology "
                  "(kaiko-ai/eva's lunit.py); the 1aurent port and the licence text unverified")
      for tag, arch, label in (("vits8", "vit_small_patch8_224", "ViT-S/8"),
                               ("vits16", "vit_small_patch16_224", "ViT-S/16"))),
    _zoo("gpfm", "timm:vit_large_patch14_dinov2",
         (("img_size", 224), ("init_values", 1e-5), ("dynamic_img_size", True)),
         repo="majiabo/GPFM", files=("GPFM.pth",), dim=1024,
         license="CC-BY-NC-ND-4.0 (the LICENSE of github.com/birkhoffkiki/GPFM, which "
                 "releases GPFM.pth; the majiabo/GPFM hub page unverified)",
         gated=False, commercial=False,
         interpolation="bicubic", crop=False,
         description="GPFM ViT-L/14 (generalizable pathology FM, distilled; class token, "
                     "1024-d)",
         source="GPFM.pth: kaiko-ai/eva's hkust.py downloads it from github.com/birkhoffkiki/"
                "GPFM/releases (ckpt/GPFM.pth; distillation: arXiv 2407.18449); the majiabo/"
                "GPFM hub copy unverified"),
    _zoo("resnet50_imagenet", "timm:resnet50",
         (("features_only", True), ("out_indices", (3,))),
         repo="timm/resnet50.tv_in1k", files=("model.safetensors", "pytorch_model.bin"),
         dim=1024, license="BSD-3-Clause", gated=False, commercial=True, layout="timm_resnet",
         pooling="avgpool", precision="fp32",
         reference="timm resnet50 features_only out_indices=[3] + AdaptiveAvgPool2d(1) "
                   "(CLAM's truncated ResNet-50, as TRIDENT runs it)",
         description="ImageNet ResNet-50 truncated after layer3 + average pooling (the "
                     "classic CLAM baseline, 1024-d; not pathology-trained)",
         source="torchvision's ImageNet weights (BSD-3-Clause) as timm publishes them"),
    _zoo("phikon", "timm:vit_base_patch16_224", _hf(
        model_type="vit", hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
        intermediate_size=3072, patch_size=16, image_size=224, layer_norm_eps=1e-12),
         repo="owkin/phikon", files=_ST_BIN, dim=768,
         license="other (Owkin, non-commercial)", gated=False, commercial=False,
         layout="hf_vit", hf_config="config.json", reference=_HF_VIT_REF,
         description="Phikon ViT-B/16 (Owkin iBOT on TCGA; class token, 768-d)",
         source="licence: the card ('Owkin non-commercial license', HistoSSLscaling "
                "LICENSE.txt); files unverified"),
    _zoo("phikon_v2", "timm:vit_large_patch16_224", _hf(
        model_type="dinov2", hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
        mlp_ratio=4, patch_size=16, image_size=224, layer_norm_eps=1e-6,
        layerscale_value=1.0, use_swiglu_ffn=False),
         repo="owkin/phikon-v2", files=("model.safetensors",), dim=1024,
         license="other (Owkin, non-commercial)", gated=False, commercial=False,
         layout="hf_dinov2", hf_config="config.json", reference=_HF_DINO_REF + "[:, 0]",
         description="Phikon-v2 ViT-L/16 (Owkin DINOv2 on PANCAN-XL; class token, 1024-d)",
         source="files: the hub's file list (config.json, model.safetensors, LICENSE.pdf; no "
                "pytorch_model.bin); licence: the card ('Owkin non-commercial licence', "
                "LICENSE.pdf)"),
    _zoo("midnight_12k", "timm:vit_giant_patch14_dinov2", _hf(
        model_type="dinov2", hidden_size=1536, num_hidden_layers=40, num_attention_heads=24,
        mlp_ratio=4, patch_size=14, image_size=392, layer_norm_eps=1e-6,
        layerscale_value=1.0, use_swiglu_ffn=True),
         repo="kaiko-ai/midnight", files=_ST_BIN, dim=3072, license="MIT", gated=False,
         commercial=True, mean=HALF, std=HALF, layout="hf_dinov2", pooling="cls+mean",
         hf_config="config.json", reference=_HF_DINO_REF + ": cat(cls, mean(patches))",
         description="Midnight-12k ViT-g/14 (kaiko.ai; class token ⊕ mean patch token, "
                     "3072-d, as its card embeds for classification)",
         source="licence: the card ('Midnight-12k: publicly available under the permissive "
                "MIT license'); not gated"),
    *(_zoo(f"hibou_{tag}", f"timm:{arch}", _hf(
        model_type="dinov2_with_registers", hidden_size=dim, num_hidden_layers=depth,
        num_attention_heads=heads, mlp_ratio=4, patch_size=14, image_size=224,
        layer_norm_eps=1e-6, layerscale_value=1.0, use_swiglu_ffn=True,
        num_register_tokens=4),
           repo=f"histai/hibou-{tag.upper() if tag == 'l' else tag}", files=_ST_BIN, dim=dim,
           license="Apache-2.0", gated=gated, commercial=True, mean=HIBOU_MEAN, std=HIBOU_STD,
           interpolation="bicubic", crop=False, layout="hf_dinov2_reg",
           hf_config="config.json", reference=_HF_REG_REF,
           description=f"Hibou-{tag.upper()} ViT-{size}/14 + 4 registers, SwiGLU (HistAI "
                       f"DINOv2; class token, {dim}-d)"
                       + ("; the hub asks to accept its terms" if gated else ""),
           source="licence: the hibou-b card (apache-2.0, no access conditions); hibou-L's "
                  "gating and licence unverified (the same collection, 'open' models)")
      for tag, arch, dim, depth, heads, size, gated in (
          ("b", "vit_base_patch14_reg4_dinov2", 768, 12, 12, "B", False),
          ("l", "vit_large_patch14_reg4_dinov2", 1024, 24, 16, "L", True))),
    _zoo("plip", "timm:vit_base_patch32_clip_quickgelu_224", _CLIP_B32,
         repo="vinid/plip", files=("pytorch_model.bin", "model.safetensors"), dim=512,
         license="not stated (the vinid/plip card and github.com/PathologyFoundation/plip "
                 "give none; read the terms of the paper's data)", gated=False, commercial=None,
         mean=CLIP_MEAN, std=CLIP_STD, interpolation="bicubic", layout="hf_clip", role="any",
         hf_config="config.json", reference=_HF_CLIP_REF,
         description="PLIP, CLIP ViT-B/32 fine-tuned on OpenPath: image and text towers in "
                     "one 512-d space (the projected embeddings)",
         source="github.com/PathologyFoundation/plip (CLIPModel.from_pretrained('vinid/plip'); "
                "repository without a licence)"),
    _zoo("clip_vit_b32", "timm:vit_base_patch32_clip_quickgelu_224", _CLIP_B32,
         repo="openai/clip-vit-base-patch32", files=("pytorch_model.bin", "model.safetensors"),
         dim=512, license="MIT", gated=False, commercial=True, mean=CLIP_MEAN, std=CLIP_STD,
         interpolation="bicubic", layout="hf_clip", role="any", hf_config="config.json",
         reference=_HF_CLIP_REF,
         description="OpenAI CLIP ViT-B/32: image and text towers in one 512-d space "
                     "(natural images; a baseline)",
         source="the openai/clip-vit-base-patch32 card (MIT)"),
)

#: name -> config of every encoder wsikit ships (the registry registers each with a builder).
BUILTIN_CONFIGS: dict[str, EncoderConfig] = {c.name: c for c in (
    HEURISTIC_CONFIG, CONCH_V1_5_CONFIG, VIRCHOW2_CONFIG, TITAN_CONFIG, QUILTNET_B32_CONFIG,
    QUILTNET_B16_CONFIG, *ZOO_CONFIGS)}


_OPEN_PATCH = ("h_optimus_0", "midnight_12k", "hibou_b", "phikon_v2", "kaiko_vitl14",
               "gpfm", "phikon", "kaiko_vitb8", "kaiko_vitb16", "lunit_vits8", "kaiko_vits8",
               "kaiko_vits16", "lunit_vits16")
#: Gated patch encoders (used first when their weights are found).
_GATED_PATCH = ("conch_v1_5", "uni2_h", "virchow2", "h_optimus_1", "prov_gigapath", "uni",
                "virchow", "hibou_l", "h0_mini")

#: Which real models ``create_encoder("auto", role=...)`` tries, in order, before the
#: heuristic: the first whose weights are found locally wins (the gated ones where the user
#: has them, then the open ones). ``patch`` keeps CONCH v1.5 first: TITAN needs its features.
AUTO_PREFERENCE: dict[str, tuple[str, ...]] = {
    "patch": _GATED_PATCH + _OPEN_PATCH + ("resnet50_imagenet",),
    "crop": ("virchow2", "uni2_h", "h_optimus_1", "virchow", "uni") + _OPEN_PATCH,
    "any": ("virchow2", "quiltnet_b32", "quiltnet_b16", "plip"),
    "slide": ("titan",),
}


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
