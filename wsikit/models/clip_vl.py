"""QuiltNet-B-32: an openly licensed pathology vision-language model (image and text towers).

QuiltNet-B-32 (``wisdomik/QuiltNet-B-32`` on Hugging Face, MIT licence, not gated) is an
open_clip CLIP ViT-B/32 fine-tuned on Quilt-1M histopathology image-text pairs. Both towers
embed into one 512-d space, so a question can be compared with figures directly (true
text→image similarity), not only through their captions.

Architecture: ``open_clip.model.CLIP`` (MIT, installed with ``pip install wsikit[vlm]``) built
from the published ``open_clip_config.json`` when it lies beside the weights (Hugging Face
snapshot or local folder), else from open_clip's own ``ViT-B-32`` configuration (vision: 224 px,
patch 32, width 768, 12 layers; text: context 77, vocabulary 49,408, width 512, 8 heads,
12 layers; embedding 512) with QuickGELU (the activation of the OpenAI CLIP weights QuiltNet
was fine-tuned from; a config file beside the weights overrides it). Weights (the published
``open_clip_pytorch_model.bin``) load with ``strict=True``; nothing is downloaded by tests.
Text is tokenised by open_clip's CLIP BPE tokenizer, whose vocabulary ships inside the package.

Input: 224 px, bicubic resize of the shorter side and centre crop, OpenAI CLIP mean/std.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import ModelError
from .configs import EncoderConfig
from .registry import Encoder

__all__ = [
    "QuiltNet",
    "VLM_CONFIG_FILE",
    "build_quiltnet",
    "check_model_cfg_size",
    "read_model_cfg",
    "tokenize",
]

log = logging.getLogger(__name__)

#: The open_clip model configuration published beside the weights.
VLM_CONFIG_FILE = "open_clip_config.json"


def _open_clip() -> Any:
    try:
        import open_clip
    except ImportError as exc:
        raise ModelError("the vision-language tower needs open_clip: pip install "
                         "'wsikit[vlm]' (open_clip_torch, MIT)") from exc
    return open_clip


def _default_model_cfg(arch: str = "open_clip:ViT-B-32") -> dict[str, Any]:
    """open_clip's packaged configuration of ``arch`` (``open_clip:<name>``), with QuickGELU
    (the activation of the OpenAI CLIP weights QuiltNet started from)."""
    open_clip = _open_clip()
    name = arch.split(":", 1)[-1] or "ViT-B-32"
    cfg = open_clip.get_model_config(name)
    if cfg is None:  # pragma: no cover - shipped with every open_clip release
        raise ModelError(f"open_clip has no {name} configuration; reinstall open_clip_torch")
    return {**cfg, "quick_gelu": True}


def read_model_cfg(weights: str | Path) -> dict[str, Any] | None:
    """The ``model_cfg`` of an ``open_clip_config.json`` beside ``weights``, or None."""
    path = Path(weights).parent / VLM_CONFIG_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path} is not a readable open_clip config ({exc}); delete or "
                         "fix it") from exc
    cfg = data.get("model_cfg", data) if isinstance(data, dict) else None
    if (not isinstance(cfg, dict) or not isinstance(cfg.get("vision_cfg"), dict)
            or not isinstance(cfg.get("text_cfg"), dict)):
        raise ModelError(f"{path} has no model_cfg with vision_cfg and text_cfg; replace it "
                         "with the open_clip_config.json published beside the weights, or "
                         "delete it to use open_clip's ViT-B-32")
    check_model_cfg_size(cfg, path)
    return cfg


#: Most parameters a tower configuration may declare (CLIP ViT-bigG-14, the largest open_clip
#: model, has 2.5 G); a larger one is refused before anything is allocated.
MAX_TOWER_PARAMS = 10_000_000_000


def check_model_cfg_size(cfg: dict[str, Any], path: str | Path) -> int:
    """The parameter count an open_clip ``model_cfg`` declares (estimated from its widths,
    depths, vocabulary and grid), after checking each number is a plausible positive value;
    refused above :data:`MAX_TOWER_PARAMS` before the model is built.

    Raises
    ------
    ModelError
        A size that is not a positive number below its bound, or a model too large (with the
        numbers).
    """
    def num(section: dict[str, Any], key: str, default: float, top: float) -> float:
        value = section.get(key, default)
        if value is None:
            value = default
        if (isinstance(value, bool) or not isinstance(value, int | float)
                or not 0 < value <= top or value != value):
            raise ModelError(f"{path}: {key} = {value!r} is not a number in (0, {top:g}]; "
                             "replace the file with the open_clip_config.json published beside "
                             "the weights")
        return float(value)

    v, t = cfg["vision_cfg"], cfg["text_cfg"]
    total = num(cfg, "embed_dim", 512, 1 << 16) * (num(v, "width", 768, 1 << 16)
                                                 + num(t, "width", 512, 1 << 16))
    for tower, defaults in ((v, (768, 12)), (t, (512, 12))):
        width = num(tower, "width", defaults[0], 1 << 16)
        layers = num(tower, "layers", defaults[1], 1 << 12)
        total += layers * width * width * (4 + 2 * num(tower, "mlp_ratio", 4.0, 64))
    grid = num(v, "image_size", 224, 1 << 14) / num(v, "patch_size", 16, 1 << 14)
    total += (grid * grid + 1) * num(v, "width", 768, 1 << 16)
    total += (num(t, "vocab_size", 49408, 1 << 22)
              + num(t, "context_length", 77, 1 << 16)) * num(t, "width", 512, 1 << 16)
    if total > MAX_TOWER_PARAMS:
        raise ModelError(f"{path} declares a model of about {total / 1e9:.1f} G parameters "
                         f"({total * 4 / 2**30:,.0f} GiB as float32), above wsikit's bound of "
                         f"{MAX_TOWER_PARAMS / 1e9:.0f} G; the file is damaged or not the "
                         "published open_clip_config.json: replace or delete it")
    return int(total)


def _in_hf_cache(path: str | Path) -> bool:
    from .hub import hf_cache_dir

    try:
        Path(path).resolve().relative_to(hf_cache_dir().resolve())
    except ValueError:
        return False
    return True


def _hub_model_cfg(config: EncoderConfig) -> dict[str, Any] | None:
    """The published config from the Hugging Face cache (or hub, unless offline)."""
    from huggingface_hub import hf_hub_download

    from .hub import hf_cache_dir, offline

    for local in (True,) if offline() else (True, False):
        try:
            path = hf_hub_download(str(config.hub_repo), VLM_CONFIG_FILE,
                                   cache_dir=str(hf_cache_dir()), local_files_only=local)
        except Exception:
            continue
        return read_model_cfg(path)
    return None


_TOKENIZERS: dict[int, Any] = {}


def tokenize(texts: str | Sequence[str], *, context_length: int = 77) -> torch.Tensor:
    """CLIP BPE token ids, ``(N, context_length)`` int64, start/end of text included and long
    texts truncated; open_clip's tokenizer, whose vocabulary ships inside the package (nothing
    is downloaded)."""
    _open_clip()
    from open_clip.tokenizer import SimpleTokenizer

    if isinstance(texts, str):
        texts = [texts]
    if context_length not in _TOKENIZERS:
        _TOKENIZERS[context_length] = SimpleTokenizer(context_length=context_length)
    return _TOKENIZERS[context_length](list(texts), context_length=context_length)


class QuiltNet(Encoder):
    """CLIP image + text towers. :meth:`forward` embeds images (``(B, 3, 224, 224)``
    normalised → ``(B, 512)``); :meth:`encode_text` embeds strings (→ ``(N, 512)``).

    Vectors are the towers' projections, not normalised (the index normalises them).
    """

    def __init__(self, config: EncoderConfig, model_cfg: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self._build(model_cfg or _default_model_cfg(config.arch or "open_clip:ViT-B-32"))

    def _build(self, model_cfg: dict[str, Any]) -> None:
        from open_clip.model import CLIP

        self.model_cfg = dict(model_cfg)
        cfg = {k: v for k, v in model_cfg.items()
               if k in ("embed_dim", "vision_cfg", "text_cfg", "quick_gelu")}
        clip = CLIP(**cfg)
        if int(clip.visual.output_dim) != self.config.dim:
            raise ModelError(f"{self.config.name}: model config embeds {clip.visual.output_dim}"
                             f"-d vectors, expected {self.config.dim}")
        self.clip = clip
        self.context_length = int(model_cfg["text_cfg"].get("context_length", 77))

    def prepare_for_weights(self, path: str | Path) -> None:
        """Rebuild from the ``open_clip_config.json`` beside ``path`` when there is one
        (called by :func:`~wsikit.models.create_encoder` before loading)."""
        cfg = read_model_cfg(path)
        if cfg is None and _in_hf_cache(path):
            cfg = _hub_model_cfg(self.config)
        if cfg is None:
            log.warning("%s: no %s beside %s; using open_clip's %s with QuickGELU",
                        self.config.name, VLM_CONFIG_FILE, path, self.config.arch)
        elif cfg != self.model_cfg:
            log.info("%s: architecture from %s", self.config.name, Path(path).parent /
                     VLM_CONFIG_FILE)
            self._build(cfg)

    # published keys are open_clip's (no "clip." prefix)
    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        return self.clip.load_state_dict(state_dict, strict=strict, assign=assign)

    def state_dict(self, *args, **kwargs):
        return self.clip.state_dict(*args, **kwargs)

    def adapt_state_dict(self, sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A scalar ``logit_scale`` saved as shape ``(1,)`` (or the reverse) is reshaped."""
        own = self.clip.logit_scale
        if "logit_scale" in sd and sd["logit_scale"].numel() == 1:
            sd = {**sd, "logit_scale": sd["logit_scale"].reshape(own.shape)}
        return sd

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.clip.encode_image(x)

    def tokenize(self, texts: Sequence[str]) -> torch.Tensor:
        """``(N, context_length)`` int64 token ids (see :func:`tokenize`)."""
        return tokenize(texts, context_length=self.context_length)

    @torch.inference_mode()
    def encode_text(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Embed strings with the text tower: ``N`` texts → ``(N, 512)`` float32.

        Raises
        ------
        ModelError
            An empty text.
        """
        if isinstance(texts, str):
            texts = [texts]
        if any(not str(t).strip() for t in texts):
            raise ModelError(f"{self.config.name}.encode_text: empty text")
        out = []
        for start in range(0, len(texts), batch_size):
            ids = self.tokenize(texts[start:start + batch_size]).to(self.device)
            out.append(self.clip.encode_text(ids).float().cpu())
        if not out:
            return np.zeros((0, self.config.dim), np.float32)
        return torch.cat(out).numpy().astype(np.float32, copy=False)


def build_quiltnet(config: EncoderConfig) -> QuiltNet:
    """Registry builder (open_clip's ViT-B-32 layout; see :meth:`QuiltNet.prepare_for_weights`)."""
    return QuiltNet(config)
